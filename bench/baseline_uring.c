/* SPDX-License-Identifier: MIT */
/*
 * baseline_uring.c - raw-uring: the floor of what ringloop's io_uring
 * backend can reach. A minimal hand-written liburing program, nothing
 * else: no probe, no loop, no callbacks.
 *
 * A read is one chain: openat into a direct-descriptor slot -> read ->
 * close of that slot. The open is a plain link with its CQE skipped on
 * success: when it fails, its CQE carries the error and the kernel posts
 * none for the read and the close it cancelled. The read is a hard link,
 * since a read shorter than the buffer (every read of a small file: the
 * buffer has a spare byte to catch a longer file) would otherwise cancel
 * the close and leave the slot filled. The close keeps its CQE: a read's
 * CQE can reach user space before the linked close has run, and a slot is
 * only reused once its close has completed.
 *
 * write (ctx->op): openat with O_CREAT | O_TRUNC -> write -> [fsync] ->
 * close, the write and the fsync hard links for the same reason; the
 * fsync's CQE is skipped on success.
 *
 * parallel keeps bench_raw_uring_window() chains in flight, blocking one.
 * The ring takes the io_uring setup knobs the loop cells run with (SQPOLL,
 * SINGLE_ISSUER, DEFER_TASKRUN, COOP_TASKRUN, a registered ring fd, the
 * io-wq cap); links and direct descriptors are always on.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"

enum { TAG_OPEN, TAG_READ, TAG_CLOSE, TAG_FSYNC };

struct raw {
	struct io_uring ring;
	unsigned slots;
	size_t cap;	      /* buffer bytes per slot: size + 1 */
	unsigned char *bufs;  /* slots buffers of cap bytes */
	unsigned *op_of_slot; /* the read each slot serves */
	unsigned *free_slots;
	unsigned nfree;
};

static unsigned nofile_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return RAW_URING_WINDOW;
	return rl.rlim_cur > 1 ? (unsigned)rl.rlim_cur : 1;
}

unsigned bench_raw_uring_window(const struct bench_ctx *ctx)
{
	unsigned w = RAW_URING_WINDOW;

	/* --window narrows it like it narrows the loop cells. A sparse file
	 * table larger than RLIMIT_NOFILE fails with EMFILE. */
	if (ctx->window && ctx->window < w)
		w = ctx->window;
	if (ctx->n < w)
		w = ctx->n;
	if (nofile_limit() < w)
		w = nofile_limit();
	return w;
}

void bench_raw_uring_close(struct bench_ctx *ctx)
{
	struct raw *r = ctx->style_state;

	if (!r)
		return;
	if (r->ring.ring_fd >= 0)
		io_uring_queue_exit(&r->ring);
	free(r->bufs);
	free(r->op_of_slot);
	free(r->free_slots);
	free(r);
	ctx->style_state = NULL;
}

/*
 * A bare ring of entries SQEs with the io_uring knobs of o a hand-written
 * liburing program has too, mapped as the loop maps them (SQPOLL, single
 * issuer, DEFER_ and COOP_TASKRUN, plus setup_flags), then the registered
 * ring fd and the io-wq cap. With no ring knob in o it is the loop's
 * default ring, SINGLE_ISSUER | DEFER_TASKRUN (the plain one where the
 * kernel refuses those, as the loop does), so that the loop's cells and
 * this one differ by ringloop's own work only. It runs on the thread
 * that sets it up, so it needs no R_DISABLED. On failure the ring is torn
 * down and its fd is -1, so that the caller's close can tell.
 */
int bench_raw_uring_setup(struct io_uring *ring, unsigned entries,
			  const struct rl_options *o, unsigned setup_flags)
{
	const unsigned ring_knobs = RL_SQPOLL | RL_SINGLE_ISSUER |
				    RL_DEFER_TASKRUN | RL_COOP_TASKRUN |
				    RL_IOPOLL | RL_SHARED_RING;
	struct io_uring_params p = { 0 };
	bool fallback = false;
	int ret;

	p.flags = setup_flags;
	if (!(o->flags & ring_knobs)) {
		p.flags |=
			IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
		fallback = true;
	}
	if (o->flags & RL_SQPOLL) {
		p.flags |= IORING_SETUP_SQPOLL;
		p.sq_thread_idle = o->sqpoll_idle_ms ? o->sqpoll_idle_ms : 1000;
	}
	if (o->flags & RL_SINGLE_ISSUER)
		p.flags |= IORING_SETUP_SINGLE_ISSUER;
	if (o->flags & RL_DEFER_TASKRUN)
		p.flags |= IORING_SETUP_DEFER_TASKRUN;
	if (o->flags & RL_COOP_TASKRUN)
		p.flags |= IORING_SETUP_COOP_TASKRUN;
	ret = io_uring_queue_init_params(entries, ring, &p);
	if (ret == -EINVAL && fallback) {
		p.flags &= ~(IORING_SETUP_SINGLE_ISSUER |
			     IORING_SETUP_DEFER_TASKRUN);
		ret = io_uring_queue_init_params(entries, ring, &p);
	}
	if (ret < 0) {
		ring->ring_fd = -1;
		return ret;
	}
	if (o->flags & RL_REGISTER_RING)
		ret = io_uring_register_ring_fd(ring) == 1 ? 0 : -EINVAL;
	if (ret == 0 && o->iowq_max) {
		unsigned max[2] = { o->iowq_max, o->iowq_max };

		ret = io_uring_register_iowq_max_workers(ring, max);
	}
	if (ret < 0) {
		io_uring_queue_exit(ring);
		ring->ring_fd = -1;
	}
	return ret;
}

int bench_raw_uring_open(struct bench_ctx *ctx)
{
	const struct rl_options *o = ctx->opt;
	struct raw *r = calloc(1, sizeof(*r));
	int ret;

	if (!r)
		return -ENOMEM;
	r->ring.ring_fd = -1;
	ctx->style_state = r;
	r->slots = bench_raw_uring_window(ctx);
	r->cap = ctx->size + 1;
	r->bufs = malloc(r->slots * r->cap);
	r->op_of_slot = calloc(r->slots, sizeof(*r->op_of_slot));
	r->free_slots = malloc(r->slots * sizeof(*r->free_slots));
	if (!r->bufs || !r->op_of_slot || !r->free_slots) {
		bench_raw_uring_close(ctx);
		return -ENOMEM;
	}
	/* Up to four SQEs per chain, two CQEs (read, close) per chain. */
	ret = bench_raw_uring_setup(&r->ring, 4 * r->slots, o, 0);
	if (ret == 0)
		ret = io_uring_register_files_sparse(&r->ring, r->slots);
	if (ret < 0) {
		bench_raw_uring_close(ctx);
		return ret;
	}
	for (unsigned i = 0; i < r->slots; i++)
		r->free_slots[i] = r->slots - 1 - i;
	r->nfree = r->slots;
	return 0;
}

static void start_chain(struct bench_ctx *ctx, struct raw *r, unsigned op)
{
	unsigned slot = r->free_slots[--r->nfree];
	struct io_uring_sqe *sqe;

	bool write = ctx->op == BENCH_WRITE_FILE;

	r->op_of_slot[slot] = op;
	bench_op_start(ctx, op);
	sqe = io_uring_get_sqe(&r->ring);
	io_uring_prep_openat_direct(sqe, AT_FDCWD, bench_path(ctx, op),
				    write ? O_WRONLY | O_CREAT | O_TRUNC
					  : O_RDONLY,
				    write ? 0644 : 0, slot);
	sqe->flags |= IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, (uint64_t)slot << 2 | TAG_OPEN);

	sqe = io_uring_get_sqe(&r->ring);
	if (write)
		io_uring_prep_write(sqe, (int)slot, ctx->expect,
				    (unsigned)ctx->size, 0);
	else
		io_uring_prep_read(sqe, (int)slot,
				   r->bufs + (size_t)slot * r->cap,
				   (unsigned)r->cap, 0);
	sqe->flags |= IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK;
	io_uring_sqe_set_data64(sqe, (uint64_t)slot << 2 | TAG_READ);

	if (write && (ctx->write_flags & RL_WRITE_FILE_FSYNC)) {
		sqe = io_uring_get_sqe(&r->ring);
		io_uring_prep_fsync(sqe, (int)slot, 0);
		sqe->flags |= IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK |
			      IOSQE_CQE_SKIP_SUCCESS;
		io_uring_sqe_set_data64(sqe, (uint64_t)slot << 2 | TAG_FSYNC);
	}

	sqe = io_uring_get_sqe(&r->ring);
	io_uring_prep_close_direct(sqe, slot);
	io_uring_sqe_set_data64(sqe, (uint64_t)slot << 2 | TAG_CLOSE);
}

/* Handles one CQE; returns 1 when it ended a chain (its slot is free). */
static int reap_one(struct bench_ctx *ctx, struct raw *r,
		    const struct io_uring_cqe *cqe)
{
	unsigned slot = (unsigned)(cqe->user_data >> 2);
	unsigned op = r->op_of_slot[slot];

	switch (cqe->user_data & 3) {
	case TAG_READ:
		bench_op_done(ctx, op);
		if (ctx->op == BENCH_WRITE_FILE)
			bench_check_write(ctx, cqe->res);
		else
			bench_check(ctx, cqe->res,
				    r->bufs + (size_t)slot * r->cap);
		return 0;
	case TAG_FSYNC: /* failed: its CQE is skipped on success */
		ctx->errors++;
		return 0;
	case TAG_OPEN: /* failed: the read and the close were cancelled */
		bench_op_done(ctx, op);
		ctx->errors++;
		break;
	default: /* TAG_CLOSE */
		if (cqe->res < 0)
			ctx->errors++;
		break;
	}
	r->free_slots[r->nfree++] = slot;
	return 1;
}

static int run_chains(struct bench_ctx *ctx, unsigned window)
{
	struct raw *r = ctx->style_state;
	unsigned started = 0, done = 0;

	if (window > r->slots)
		window = r->slots;
	while (done < ctx->n) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		int ret;

		while (started < ctx->n && r->slots - r->nfree < window)
			start_chain(ctx, r, started++);
		/* One io_uring_enter submits what is new and waits; with
		 * nothing new, a CQE already posted costs no syscall. */
		if (io_uring_sq_ready(&r->ring)) {
			ctx->syscalls++;
			ret = io_uring_submit_and_wait(&r->ring, 1);
		} else if (io_uring_peek_cqe(&r->ring, &cqe) == -EAGAIN) {
			ctx->syscalls++;
			ret = io_uring_wait_cqe(&r->ring, &cqe);
		} else {
			ret = 0;
		}
		if (ret < 0 && ret != -EINTR && ret != -ETIME)
			return ret;
		io_uring_for_each_cqe(&r->ring, head, cqe)
		{
			done += (unsigned)reap_one(ctx, r, cqe);
			seen++;
		}
		io_uring_cq_advance(&r->ring, seen);
	}
	return 0;
}

int bench_raw_uring_parallel(struct bench_ctx *ctx)
{
	struct raw *r = ctx->style_state;

	return run_chains(ctx, r->slots);
}

int bench_raw_uring_blocking(struct bench_ctx *ctx)
{
	return run_chains(ctx, 1);
}
