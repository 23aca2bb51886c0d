/* SPDX-License-Identifier: MIT */
/*
 * baseline_sync.c - the synchronous limits: sync (one thread) and sync-mt
 * (one thread per CPU), reading the bench file as a synchronous program
 * does, every byte checked like every other cell.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

/*
 * One read: open, fstat, read, close. A regular file is read up to the
 * size fstat gives, in one read for a page-cache hit: four syscalls. A
 * file that says size 0 (procfs, sysfs) is read to the end, as Node's
 * readFile does. Returns the bytes read or -errno, and adds the syscalls
 * it made to *nsys.
 */
static ssize_t sync_read_file(const char *path, unsigned char *buf, size_t cap,
			      uint64_t *nsys)
{
	struct stat st;
	size_t got = 0;
	ssize_t r = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	(*nsys)++;
	if (fd < 0)
		return -errno;
	(*nsys)++;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		close(fd);
		(*nsys)++;
		return r;
	}
	while (got < cap && (st.st_size == 0 || got < (size_t)st.st_size)) {
		(*nsys)++;
		r = read(fd, buf + got, cap - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	if (r < 0)
		r = -errno;
	close(fd);
	(*nsys)++;
	return r < 0 ? r : (ssize_t)got;
}

/*
 * One write of a whole file, as a synchronous program does it: open with
 * O_CREAT | O_TRUNC, write (all of it), fsync when asked, close. Returns
 * the bytes written or -errno, and adds the syscalls it made to *nsys.
 */
static ssize_t sync_write_file(const char *path, const unsigned char *buf,
			       size_t len, bool fsync_it, uint64_t *nsys)
{
	size_t done = 0;
	ssize_t r = 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	(*nsys)++;
	if (fd < 0)
		return -errno;
	while (done < len) {
		(*nsys)++;
		r = write(fd, buf + done, len - done);
		if (r < 0)
			break;
		done += (size_t)r;
	}
	if (r >= 0 && fsync_it) {
		(*nsys)++;
		if (fsync(fd) < 0)
			r = -1;
	}
	if (r < 0)
		r = -errno;
	close(fd);
	(*nsys)++;
	return r < 0 ? r : (ssize_t)done;
}

/* The reads (or writes) [first, last) of a run, each checked (and timed
 * when lat is set); errors and syscalls go to the caller's counters. */
static void sync_reads(const struct bench_ctx *ctx, unsigned first,
		       unsigned last, unsigned char *buf,
		       struct bench_hist *lat, uint64_t *errors, uint64_t *nsys)
{
	struct bench_ctx check = *ctx;

	check.errors = 0;
	for (unsigned i = first; i < last; i++) {
		uint64_t t0 = lat ? bench_now_ns() : 0;

		if (ctx->op == BENCH_WRITE_FILE) {
			ssize_t put = sync_write_file(
				bench_path(ctx, i), ctx->expect, ctx->size,
				ctx->write_flags & RL_WRITE_FILE_FSYNC, nsys);

			bench_check_write(&check, put);
		} else {
			ssize_t got = sync_read_file(bench_path(ctx, i), buf,
						     ctx->size + 1, nsys);

			bench_check(&check, got, buf);
		}
		if (lat)
			bench_hist_add(lat, bench_now_ns() - t0);
	}
	*errors += check.errors;
}

/* ---------------------------------------------------------------- sync */

int bench_sync_open(struct bench_ctx *ctx)
{
	/* One byte more than expected, so a longer file shows as wrong. */
	ctx->style_state = malloc(ctx->size + 1);
	return ctx->style_state ? 0 : -ENOMEM;
}

int bench_sync_run(struct bench_ctx *ctx)
{
	sync_reads(ctx, 0, ctx->n, ctx->style_state, ctx->lat, &ctx->errors,
		   &ctx->syscalls);
	return 0;
}

void bench_sync_close(struct bench_ctx *ctx)
{
	free(ctx->style_state);
	ctx->style_state = NULL;
}

/* ------------------------------------------------------------- sync-mt */

struct mt_thread {
	pthread_t tid;
	const struct bench_ctx *ctx;
	unsigned first, last;
	unsigned char *buf;
	struct bench_hist lat;
	uint64_t errors, syscalls;
};

struct mt_state {
	unsigned nthreads;
	struct mt_thread t[];
};

unsigned bench_sync_mt_threads(void)
{
	cpu_set_t set;
	long n;

	/* The CPUs this process may run on: taskset narrows them. */
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		return (unsigned)CPU_COUNT(&set);
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

int bench_sync_mt_open(struct bench_ctx *ctx)
{
	unsigned n = bench_sync_mt_threads();
	struct mt_state *s = calloc(1, sizeof(*s) + n * sizeof(s->t[0]));

	if (!s)
		return -ENOMEM;
	s->nthreads = n;
	for (unsigned i = 0; i < n; i++) {
		s->t[i].buf = malloc(ctx->size + 1);
		if (!s->t[i].buf) {
			ctx->style_state = s;
			bench_sync_mt_close(ctx);
			return -ENOMEM;
		}
	}
	ctx->style_state = s;
	return 0;
}

static void *mt_main(void *arg)
{
	struct mt_thread *t = arg;

	sync_reads(t->ctx, t->first, t->last, t->buf,
		   t->ctx->lat ? &t->lat : NULL, &t->errors, &t->syscalls);
	return NULL;
}

/* The calling thread takes the first share and starts one thread for each
 * other: thread creation is a few microseconds against a run of
 * milliseconds. */
int bench_sync_mt_run(struct bench_ctx *ctx)
{
	struct mt_state *s = ctx->style_state;
	unsigned started = 1;
	int ret = 0;

	for (unsigned i = 0; i < s->nthreads; i++) {
		struct mt_thread *t = &s->t[i];

		t->ctx = ctx;
		t->first = (unsigned)((uint64_t)ctx->n * i / s->nthreads);
		t->last = (unsigned)((uint64_t)ctx->n * (i + 1) / s->nthreads);
		t->errors = t->syscalls = 0;
		bench_hist_reset(&t->lat);
	}
	for (; started < s->nthreads; started++) {
		ret = -pthread_create(&s->t[started].tid, NULL, mt_main,
				      &s->t[started]);
		if (ret < 0)
			break;
	}
	mt_main(&s->t[0]);
	for (unsigned i = 1; i < started; i++)
		pthread_join(s->t[i].tid, NULL);
	for (unsigned i = 0; i < started; i++) {
		ctx->errors += s->t[i].errors;
		ctx->syscalls += s->t[i].syscalls;
		if (ctx->lat)
			bench_hist_merge(ctx->lat, &s->t[i].lat);
	}
	return ret;
}

void bench_sync_mt_close(struct bench_ctx *ctx)
{
	struct mt_state *s = ctx->style_state;

	if (!s)
		return;
	for (unsigned i = 0; i < s->nthreads; i++)
		free(s->t[i].buf);
	free(s);
	ctx->style_state = NULL;
}
