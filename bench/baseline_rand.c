/* SPDX-License-Identifier: MIT */
/*
 * baseline_rand.c - the limits of randread and randwrite: what a
 * synchronous program and a minimal liburing program get from the same
 * file at the same queue depth, measured in the same run as the cells.
 *
 *   sync:      rand->qd threads (the calling thread and qd - 1 started per
 *              run), each a loop of pread (or pwrite) of one block, as
 *              fio's psync engine with numjobs = qd;
 *   raw-uring: one ring keeping rand->qd reads (or writes) in flight: an
 *              io_uring_enter submits what completed lanes queued and
 *              waits for one completion, as fio's io_uring engine. It
 *              takes the loop cells' io_uring knobs (SQPOLL, IOPOLL,
 *              IOSQE_ASYNC, registered buffers, the io-wq cap...).
 *
 * Both check every block they read as the cells do, and randwrite's
 * blocks are read back after the run (rand.h).
 */
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rand.h"

/* ----------------------------------------------------------------- sync */

struct srand_thread {
	pthread_t tid;
	struct bench_ctx *ctx;
	unsigned lane;
	uint64_t rng;
	struct bench_hist lat;
	uint64_t errors, ops, syscalls;
};

struct srand {
	unsigned n;
	struct srand_thread t[];
};

int bench_sync_rand_open(struct bench_ctx *ctx)
{
	unsigned n = ctx->rand->qd;
	struct srand *s = calloc(1, sizeof(*s) + n * sizeof(s->t[0]));

	if (!s)
		return -ENOMEM;
	s->n = n;
	ctx->style_state = s;
	return 0;
}

void bench_sync_rand_close(struct bench_ctx *ctx)
{
	free(ctx->style_state);
	ctx->style_state = NULL;
}

/* Whether the run goes on: the deadline, or the shared operation count. */
static bool srand_more(struct bench_rand *r)
{
	if (r->run_ops)
		return __atomic_fetch_add(&r->issued, 1, __ATOMIC_RELAXED) <
		       r->run_ops;
	return bench_now_ns() < r->deadline;
}

static void *srand_main(void *arg)
{
	struct srand_thread *t = arg;
	struct bench_ctx *ctx = t->ctx;
	struct bench_rand *r = ctx->rand;
	unsigned char *buf = bench_rand_buf(r, t->lane);
	bool timed = ctx->lat != NULL;

	while (srand_more(r)) {
		uint64_t off = bench_rng_below(&t->rng, r->blocks) * r->bs;
		uint64_t t0 = 0, gen;
		ssize_t got;

		if (r->write)
			bench_pattern_fill(buf, r->bs, off, r->gen);
		if (timed)
			t0 = bench_now_ns();
		got = r->write ? pwrite(r->fd, buf, r->bs, (off_t)off)
			       : pread(r->fd, buf, r->bs, (off_t)off);
		if (timed)
			bench_hist_add(&t->lat, bench_now_ns() - t0);
		t->syscalls++;
		if (got != (ssize_t)r->bs)
			t->errors++;
		else if (!r->write &&
			 !(t->ops % BENCH_RAND_FULL
				   ? bench_pattern_stamps(buf, r->bs, off, &gen)
				   : bench_pattern_check(buf, r->bs, off,
							 &gen)))
			t->errors++;
		else if (r->write && t->lane == 0)
			r->recent[r->nrecent++ % BENCH_RAND_RECENT] = off;
		t->ops++;
	}
	return NULL;
}

int bench_sync_rand_run(struct bench_ctx *ctx)
{
	struct srand *s = ctx->style_state;
	unsigned started = 1;
	int ret = 0;

	bench_rand_begin(ctx);
	for (unsigned i = 0; i < s->n; i++) {
		struct srand_thread *t = &s->t[i];

		t->ctx = ctx;
		t->lane = i;
		t->rng = ctx->rand->rng + 0x9E3779B97F4A7C15ull * (i + 1);
		t->errors = t->ops = t->syscalls = 0;
		bench_hist_reset(&t->lat);
	}
	for (; started < s->n; started++) {
		ret = -pthread_create(&s->t[started].tid, NULL, srand_main,
				      &s->t[started]);
		if (ret < 0)
			break;
	}
	srand_main(&s->t[0]);
	for (unsigned i = 1; i < started; i++)
		pthread_join(s->t[i].tid, NULL);
	for (unsigned i = 0; i < started; i++) {
		ctx->errors += s->t[i].errors;
		ctx->syscalls += s->t[i].syscalls;
		ctx->ops += s->t[i].ops;
		if (ctx->lat)
			bench_hist_merge(ctx->lat, &s->t[i].lat);
	}
	return ret;
}

/* ------------------------------------------------------------ raw-uring */

struct rrand {
	struct io_uring ring;
	uint8_t sqe_flags; /* IOSQE_ASYNC with --force-async */
};

void bench_raw_uring_rand_close(struct bench_ctx *ctx)
{
	struct rrand *rr = ctx->style_state;

	if (!rr)
		return;
	if (rr->ring.ring_fd >= 0)
		io_uring_queue_exit(&rr->ring);
	free(rr);
	ctx->style_state = NULL;
}

int bench_raw_uring_rand_open(struct bench_ctx *ctx)
{
	const struct rl_options *o = ctx->opt;
	struct bench_rand *r = ctx->rand;
	struct rrand *rr = calloc(1, sizeof(*rr));
	int ret;

	if (!rr)
		return -ENOMEM;
	rr->ring.ring_fd = -1;
	ctx->style_state = rr;
	rr->sqe_flags = (o->flags & RL_FORCE_ASYNC) ? IOSQE_ASYNC : 0;
	ret = bench_raw_uring_setup(&rr->ring, r->qd, o,
				    (o->flags & RL_IOPOLL) ? IORING_SETUP_IOPOLL
							   : 0);
	if (ret < 0) {
		bench_raw_uring_rand_close(ctx);
		return ret;
	}
	if (ret == 0 && r->fixed) {
		struct iovec *iov = calloc(r->qd, sizeof(*iov));

		if (!iov) {
			ret = -ENOMEM;
		} else {
			for (unsigned i = 0; i < r->qd; i++)
				iov[i] = (struct iovec){ bench_rand_buf(r, i),
							 r->bs };
			ret = io_uring_register_buffers(&rr->ring, iov, r->qd);
			free(iov);
		}
	}
	if (ret < 0)
		bench_raw_uring_rand_close(ctx);
	return ret;
}

static void rrand_prep(struct bench_ctx *ctx, struct rrand *rr, unsigned lane)
{
	struct bench_rand *r = ctx->rand;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&rr->ring);
	uint64_t off = bench_rand_issue(ctx, lane);
	unsigned char *buf = bench_rand_buf(r, lane);

	if (r->fixed && r->write)
		io_uring_prep_write_fixed(sqe, r->fd, buf, (unsigned)r->bs, off,
					  (int)lane);
	else if (r->fixed)
		io_uring_prep_read_fixed(sqe, r->fd, buf, (unsigned)r->bs, off,
					 (int)lane);
	else if (r->write)
		io_uring_prep_write(sqe, r->fd, buf, (unsigned)r->bs, off);
	else
		io_uring_prep_read(sqe, r->fd, buf, (unsigned)r->bs, off);
	sqe->flags |= rr->sqe_flags;
	io_uring_sqe_set_data64(sqe, lane);
}

int bench_raw_uring_rand_run(struct bench_ctx *ctx)
{
	struct rrand *rr = ctx->style_state;
	struct bench_rand *r = ctx->rand;
	unsigned inflight = 0;

	bench_rand_begin(ctx);
	for (unsigned lane = 0; lane < r->qd && bench_rand_more(r); lane++) {
		rrand_prep(ctx, rr, lane);
		inflight++;
	}
	while (inflight) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		int ret;

		ctx->syscalls++;
		ret = io_uring_submit_and_wait(&rr->ring, 1);
		if (ret < 0 && ret != -EINTR && ret != -ETIME && ret != -EBUSY)
			return ret;
		io_uring_for_each_cqe(&rr->ring, head, cqe)
		{
			unsigned lane = (unsigned)cqe->user_data;

			bench_rand_complete(ctx, lane, cqe->res);
			if (bench_rand_more(r))
				rrand_prep(ctx, rr, lane);
			else
				inflight--;
			seen++;
		}
		io_uring_cq_advance(&rr->ring, seen);
	}
	return 0;
}
