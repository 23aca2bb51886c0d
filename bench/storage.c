/* SPDX-License-Identifier: MIT */
/*
 * storage.c - files, hooks and subjects of the storage scenarios (see
 * storage.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "options.h"
#include "storage.h"

/* The cold scenario's pages must have left the cache: a drop that leaves
 * more than this share resident is tried again (a few times). */
#define RESIDENT_RETRY 0.001

static char scratch[300];
static struct bench_fileset writes, cold;
static struct bench_randfile randfile;
static bool have_writes, have_cold;

/* The scratch directories of write and cold: under bench/data when run
 * from the repository (like the random I/O file), else under $TMPDIR. Not
 * /tmp by default: on a shared machine every program churns files there,
 * and on ext4 without a journal its block groups fill with recently freed
 * inodes that each new file is made to skip (cold.h). Their files go at
 * exit; the emptied directories stay ten minutes (cold.h says why), and
 * the next ringbench to start removes older ones. */
#define SCRATCH_KEEP_S 600

static int make_scratch(void)
{
	const char *tmp = getenv("TMPDIR");
	char base[256];
	struct stat st;

	if (scratch[0])
		return 0;
	if (stat("bench", &st) == 0 && S_ISDIR(st.st_mode) &&
	    (mkdir("bench/data", 0755) == 0 || errno == EEXIST))
		snprintf(base, sizeof(base), "bench/data");
	else
		snprintf(base, sizeof(base), "%s", tmp && *tmp ? tmp : "/tmp");
	bench_remove_old(base, "ringbench-storage-", SCRATCH_KEEP_S);
	snprintf(scratch, sizeof(scratch), "%s/ringbench-storage-XXXXXX", base);
	if (!mkdtemp(scratch)) {
		int err = -errno;

		fprintf(stderr, "ringbench: mkdtemp %s: %s\n", scratch,
			strerror(errno));
		scratch[0] = 0;
		return err;
	}
	bench_mark_topdir(scratch);
	atexit(bench_storage_cleanup);
	return 0;
}

int bench_storage_write_setup(unsigned n, const unsigned char *content,
			      size_t size)
{
	int ret;

	if (have_writes)
		return 0;
	ret = make_scratch();
	if (ret == 0)
		ret = bench_fileset_make(&writes, scratch, "w", n, content,
					 size, 0);
	have_writes = ret == 0;
	return ret;
}

int bench_storage_cold_setup(unsigned k, const unsigned char *content,
			     size_t size)
{
	uint64_t t0 = bench_now_ns();
	int ret;

	if (have_cold)
		return 0;
	ret = make_scratch();
	if (ret == 0)
		ret = bench_fileset_make(&cold, scratch, "c", k, content, size,
					 1);
	have_cold = ret == 0;
	if (have_cold)
		fprintf(stderr, "ringbench: %u cold files made in %.1f s\n", k,
			(double)(bench_now_ns() - t0) / 1e9);
	return ret;
}

int bench_storage_rand_setup(void)
{
	static int status = 1; /* 1: not tried yet */

	if (status <= 0)
		return status;
	return status = bench_randfile_prepare(
		       &randfile, bench_opt.rand_file, bench_opt.rand_size,
		       bench_opt.bs, bench_scenario_selected("randread", NULL),
		       bench_opt.no_layout);
}

const struct bench_fileset *bench_storage_writes(void)
{
	return &writes;
}

const struct bench_fileset *bench_storage_cold(void)
{
	return &cold;
}

const struct bench_randfile *bench_storage_randfile(void)
{
	return &randfile;
}

void bench_storage_sync(void)
{
	int fd = scratch[0] ? open(scratch, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
			    : -1;

	if (fd >= 0) {
		if (syncfs(fd) < 0)
			perror("ringbench: syncfs");
		close(fd);
	}
}

void bench_storage_cleanup(void)
{
	if (have_writes) {
		bench_fileset_remove(&writes);
		bench_fileset_free(&writes);
		have_writes = false;
	}
	if (have_cold) {
		bench_fileset_remove(&cold);
		bench_fileset_free(&cold);
		have_cold = false;
	}
	scratch[0] = 0;
}

/* ---------------------------------------------------------------- hooks */

int bench_write_before(struct bench_ctx *ctx)
{
	(void)ctx;
	return bench_fileset_begin(&writes);
}

/* (The write paths are rewritten in place by bench_fileset_begin(): a
 * cell's context points to them.) */

int bench_write_after(struct bench_ctx *ctx)
{
	/* Only the files this run wrote: n may be less than the set. */
	struct bench_fileset run = writes;

	run.count = ctx->n < writes.count ? ctx->n : writes.count;
	return bench_fileset_check_and_clear(&run, &ctx->errors);
}

int bench_cold_before(struct bench_ctx *ctx)
{
	unsigned n = ctx->n < cold.count ? ctx->n : cold.count;
	double share = 0;

	for (int tries = 0; tries < 3; tries++) {
		share = bench_cache_drop(cold.paths, n);
		if (share < 0)
			return (int)share;
		if (share <= RESIDENT_RETRY)
			break;
	}
	ctx->resident = share;
	return 0;
}

int bench_rand_after(struct bench_ctx *ctx)
{
	return bench_rand_verify(ctx);
}

/* ------------------------------------------------------------- subjects */

struct wait_req {
	rl_req req;
	int done;
};

static void wait_cb(rl_req *req)
{
	((struct wait_req *)req->data)->done = 1;
}

static struct wait_req *wait_init(struct wait_req *w)
{
	memset(w, 0, sizeof(*w));
	w->req.data = w;
	return w;
}

/* Runs loop until w's request is done; its result. */
static int64_t wait_for(rl_loop *loop, struct wait_req *w)
{
	while (!w->done) {
		int ret = rl_run(loop, RL_RUN_DEFAULT);

		if (ret < 0)
			return ret;
	}
	return w->req.result;
}

/* Why a device may refuse IOPOLL: its queue's io_poll, from sysfs. */
static void io_poll_of(const char *path, char *out, size_t len)
{
	char sys[128], real[PATH_MAX], name[64], poll[16] = "?";
	struct stat st;
	FILE *f;

	snprintf(out, len, "the device has no poll queues");
	if (stat(path, &st) < 0)
		return;
	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u", major(st.st_dev),
		 minor(st.st_dev));
	if (!realpath(sys, real))
		return;
	/* A partition's queue is its disk's. */
	snprintf(sys, sizeof(sys), "%.100s/partition", real);
	if (access(sys, F_OK) == 0)
		snprintf(real + strlen(real), sizeof(real) - strlen(real),
			 "/..");
	if (!realpath(real, sys))
		return;
	snprintf(name, sizeof(name), "%s", basename(sys));
	snprintf(real, sizeof(real), "/sys/block/%s/queue/io_poll", name);
	f = fopen(real, "r");
	if (f) {
		if (fgets(poll, sizeof(poll), f))
			poll[strcspn(poll, "\n")] = 0;
		fclose(f);
	}
	snprintf(out, len, "%s has %s (%s = %s)", name,
		 strcmp(poll, "0") ? "poll queues?" : "no poll queues", real,
		 poll);
}

static int open_fd(struct bench_rand *r, rl_loop *loop, char *why, size_t len)
{
	const char *path = randfile.path;
	int flags = O_RDWR | O_DIRECT | O_CLOEXEC;
	struct wait_req w;
	int64_t fd;

	/* An IOPOLL ring refuses an open (it can poll only direct I/O). */
	if (!loop || ((bench_opt.loop.flags & RL_IOPOLL) &&
		      !strcmp(rl_loop_backend(loop), "uring"))) {
		fd = open(path, flags);
		if (fd < 0)
			fd = -errno;
	} else {
		fd = rl_fs_open(loop, &wait_init(&w)->req, path, flags, 0,
				wait_cb);
		if (fd == 0)
			fd = wait_for(loop, &w);
	}
	if (fd < 0) {
		snprintf(why, len, "opening %s with O_DIRECT: %s", path,
			 rl_strerror((int)fd));
		return (int)fd;
	}
	r->fd = (int)fd;
	return 0;
}

/* One read of block 0 through the loop, the way the cells read. */
static int probe(struct bench_rand *r, rl_loop *loop, char *why, size_t len)
{
	struct wait_req w;
	int64_t ret;
	uint64_t gen;

	wait_init(&w);
	ret = r->fixed ? rl_fs_read_fixed(loop, &w.req, r->fd, r->bufs, r->bs,
					  0, 0, wait_cb)
		       : rl_fs_read(loop, &w.req, r->fd, r->bufs, r->bs, 0,
				    wait_cb);
	if (ret == 0)
		ret = wait_for(loop, &w);
	/* randwrite does not need the file's content (fio's randwrite may
	 * have written over it): it reads back what it wrote. */
	if (ret == (int64_t)r->bs &&
	    (r->write || bench_pattern_check(r->bufs, r->bs, 0, &gen)))
		return 0;
	if (ret >= 0) {
		snprintf(why, len, "a first read returned %lld bytes%s",
			 (long long)ret,
			 ret == (int64_t)r->bs ? " of wrong content" : "");
		return -EIO;
	}
	if (ret == -EOPNOTSUPP && (bench_opt.loop.flags & RL_IOPOLL) &&
	    !strcmp(rl_loop_backend(loop), "uring")) {
		char dev[200];

		io_poll_of(randfile.path, dev, sizeof(dev));
		snprintf(why, len,
			 "IOPOLL refused by the kernel: direct reads on an "
			 "IOPOLL ring complete with %s: %s",
			 rl_strerror((int)ret), dev);
		return (int)ret;
	}
	snprintf(why, len, "a first read through the loop failed: %s",
		 rl_strerror((int)ret));
	return (int)ret;
}

int bench_rand_subject_open(struct bench_rand *r, rl_loop *loop, unsigned qd,
			    bool write, char *why, size_t len)
{
	int ret;

	memset(r, 0, sizeof(*r));
	r->fd = -1;
	r->qd = qd;
	r->bs = bench_opt.bs;
	r->blocks = randfile.size / r->bs;
	r->write = write;
	r->fixed = bench_opt.fixed_bufs;
	r->run_ns = (uint64_t)bench_opt.run_ms * 1000000u;
	r->run_ops = bench_opt.run_ops;
	if (posix_memalign((void **)&r->bufs, 4096, (size_t)qd * r->bs) ||
	    !(r->lane_off = calloc(qd, sizeof(*r->lane_off)))) {
		snprintf(why, len, "out of memory");
		bench_rand_subject_close(r, loop);
		return -ENOMEM;
	}
	ret = open_fd(r, loop, why, len);
	if (ret == 0 && loop && r->fixed) {
		struct iovec *iov = calloc(qd, sizeof(*iov));

		if (!iov)
			ret = -ENOMEM;
		for (unsigned i = 0; iov && i < qd; i++)
			iov[i] = (struct iovec){ bench_rand_buf(r, i), r->bs };
		if (iov)
			ret = rl_loop_register_buffers(loop, iov, qd);
		free(iov);
		if (ret < 0)
			snprintf(why, len, "registering %u buffers: %s", qd,
				 rl_strerror(ret));
	}
	if (ret == 0 && loop)
		ret = probe(r, loop, why, len);
	if (ret < 0)
		bench_rand_subject_close(r, loop);
	return ret;
}

void bench_rand_subject_close(struct bench_rand *r, rl_loop *loop)
{
	if (r->fd >= 0) {
		struct wait_req w;

		if (loop &&
		    !((bench_opt.loop.flags & RL_IOPOLL) &&
		      !strcmp(rl_loop_backend(loop), "uring")) &&
		    rl_fs_close(loop, &wait_init(&w)->req, r->fd, wait_cb) == 0)
			wait_for(loop, &w);
		else
			close(r->fd);
	}
	if (loop && r->fixed)
		rl_loop_register_buffers(loop, NULL, 0);
	free(r->bufs);
	free(r->lane_off);
	memset(r, 0, sizeof(*r));
	r->fd = -1;
}
