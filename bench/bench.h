/* SPDX-License-Identifier: MIT */
/*
 * bench.h - what ringbench's driver and each scenario file share.
 *
 * A scenario function (bench_fn) runs ctx->n reads of the bench file once
 * and returns when all have completed: 0, or -errno when the run could not
 * go on. Every read's content is checked against ctx->expect (ctx->size
 * bytes); each wrong or failed read increments ctx->errors, and a run with
 * errors is reported as failed.
 *
 *   parallel: start all n reads (at most ctx->window in flight when
 *             window > 0), then wait for all of them;
 *   blocking: each read starts when the previous one has finished.
 *
 * The same two patterns serve the storage scenarios: ctx->op says what
 * each operation is, a read_file of paths[i] (the seed's reads, and cold,
 * whose files' page cache is dropped before every run) or a write_file of
 * paths[i] (write: every file a new one, written with ctx->write_flags and
 * checked after the run by the driver).
 *
 * randread and randwrite (ctx->rand set) are a third pattern: rand->qd
 * operations in flight on one O_DIRECT file, each one followed by the
 * next at a new random block, for a fixed time or operation count; the
 * function counts what completed in ctx->ops (rand.h).
 *
 * The styles run on ctx->loop; the baselines (sync, sync-mt, raw-uring)
 * have no loop and count their own syscalls in ctx->syscalls.
 *
 * Latency: while ctx->lat is set, a scenario calls bench_op_start(ctx, i)
 * when it submits read i and bench_op_done(ctx, i) where the program gets
 * its result (the callback, the reaction, the resumed coroutine), which
 * records the time between the two in ctx->lat. The driver sets ctx->lat
 * for the measured runs only, and ringbench --no-latency never sets it.
 */
#ifndef RINGBENCH_H
#define RINGBENCH_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "ringloop/ringloop.h"
#include "stats.h"

enum bench_op {
	BENCH_READ_FILE = 0, /* read paths[i] whole, compare with expect */
	BENCH_WRITE_FILE,    /* write expect to paths[i], a new file */
};

struct bench_rand;

struct bench_ctx {
	rl_loop *loop;		      /* NULL for the baselines */
	const struct rl_options *opt; /* the knobs every cell runs with */
	const char *const *paths; /* npaths files, all with the same content */
	unsigned npaths;	  /* read i uses paths[i % npaths] */
	size_t size;		  /* bytes in each file */
	const unsigned char *expect;
	unsigned n;		/* reads in this run */
	unsigned window;	/* parallel: max in flight, 0 = all */
	size_t coro_window;	/* coro: the scheduler's start_window */
	uint64_t errors;	/* wrong content or failed reads */
	uint64_t syscalls;	/* baselines: the syscalls they made */
	void *style_state;	/* a style's own state, kept across runs */
	struct bench_hist *lat; /* where latencies go, or NULL */
	uint64_t *lat_t0;	/* n start times, indexed by read */

	int op;			   /* enum bench_op */
	unsigned write_flags;	   /* write: RL_WRITE_FILE_* (FSYNC) */
	struct bench_rand *rand;   /* randread, randwrite: else NULL */
	uint64_t ops;		   /* what a run completed, when it is not n */
	double resident;	   /* cold: share of pages resident before the
				* run (set by the driver), else < 0 */
	struct bench_group *group; /* tpc rows: the group (bench_group.h) */
};

typedef int (*bench_fn)(struct bench_ctx *ctx);

static inline uint64_t bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void bench_op_start(struct bench_ctx *ctx, unsigned i)
{
	if (ctx->lat)
		ctx->lat_t0[i] = bench_now_ns();
}

static inline void bench_op_done(struct bench_ctx *ctx, unsigned i)
{
	if (ctx->lat)
		bench_hist_add(ctx->lat, bench_now_ns() - ctx->lat_t0[i]);
}

/* Checks one finished read; counts an error when it is wrong. */
static inline void bench_check(struct bench_ctx *ctx, int64_t result,
			       const void *data)
{
	const unsigned char *d = data;

	if (result != (int64_t)ctx->size) {
		ctx->errors++;
		return;
	}
	for (size_t i = 0; i < ctx->size; i++)
		if (d[i] != ctx->expect[i]) {
			ctx->errors++;
			return;
		}
}

/* Checks one finished write: all of it, or an error. */
static inline void bench_check_write(struct bench_ctx *ctx, int64_t result)
{
	if (result != (int64_t)ctx->size)
		ctx->errors++;
}

static inline const char *bench_path(const struct bench_ctx *ctx, unsigned i)
{
	return ctx->paths[i % ctx->npaths];
}

/* The styles, one file each (bench_<style>.c). */
int bench_callback_parallel(struct bench_ctx *ctx);
int bench_callback_blocking(struct bench_ctx *ctx);
int bench_callback_rand(struct bench_ctx *ctx);
int bench_promise_parallel(struct bench_ctx *ctx);
int bench_promise_blocking(struct bench_ctx *ctx);
int bench_promise_rand(struct bench_ctx *ctx);
int bench_coro_parallel(struct bench_ctx *ctx);
int bench_coro_blocking(struct bench_ctx *ctx);
int bench_coro_rand(struct bench_ctx *ctx);

/* Frees what a style kept in ctx->style_state across runs. The driver
 * calls it after the style's last run, before closing the loop. */
void bench_callback_free(struct bench_ctx *ctx);
void bench_promise_free(struct bench_ctx *ctx);
void bench_coro_free(struct bench_ctx *ctx);

/*
 * The baselines, the limits every cell is measured against
 * (baseline_sync.c, baseline_uring.c). open() prepares ctx->style_state
 * (0 or -errno), close() frees it.
 *
 *   sync:      open, fstat, read, close in one thread, as a synchronous
 *              program does (write: open with O_CREAT | O_TRUNC, write,
 *              fsync when asked, close);
 *   sync-mt:   the same loop, the n reads split over one thread per CPU
 *              the process may run on (bench_sync_mt_threads());
 *   raw-uring: a minimal liburing program: openat into a direct slot ->
 *              read -> close, linked, with RAW_URING_WINDOW reads in flight
 *              (parallel) or one (blocking); write: openat (O_CREAT |
 *              O_TRUNC) -> write -> [fsync] -> close.
 */
int bench_sync_open(struct bench_ctx *ctx);
int bench_sync_run(struct bench_ctx *ctx);
void bench_sync_close(struct bench_ctx *ctx);
int bench_sync_mt_open(struct bench_ctx *ctx);
int bench_sync_mt_run(struct bench_ctx *ctx);
void bench_sync_mt_close(struct bench_ctx *ctx);
unsigned bench_sync_mt_threads(void);

#define RAW_URING_WINDOW 256
int bench_raw_uring_open(struct bench_ctx *ctx);
int bench_raw_uring_parallel(struct bench_ctx *ctx);
int bench_raw_uring_blocking(struct bench_ctx *ctx);
void bench_raw_uring_close(struct bench_ctx *ctx);
/* The reads raw-uring keeps in flight in the parallel scenario. */
unsigned bench_raw_uring_window(const struct bench_ctx *ctx);
/* A bare ring with the knobs of o (baseline_uring.c): 0 or -errno. */
struct io_uring;
int bench_raw_uring_setup(struct io_uring *ring, unsigned entries,
			  const struct rl_options *o, unsigned setup_flags);

/*
 * The limits of randread and randwrite (baseline_rand.c), on ctx->rand:
 *   sync:      rand->qd threads, each a loop of pread/pwrite on the file,
 *              one operation in flight per thread (fio's psync engine
 *              with as many jobs as the queue depth);
 *   raw-uring: a minimal liburing program keeping rand->qd reads or
 *              writes in flight (fio's io_uring engine).
 */
int bench_sync_rand_open(struct bench_ctx *ctx);
int bench_sync_rand_run(struct bench_ctx *ctx);
void bench_sync_rand_close(struct bench_ctx *ctx);
int bench_raw_uring_rand_open(struct bench_ctx *ctx);
int bench_raw_uring_rand_run(struct bench_ctx *ctx);
void bench_raw_uring_rand_close(struct bench_ctx *ctx);

/* ringbench --micro: the coroutine switch round trip in ns (bench_coro.c). */
double bench_coro_switch_ns(unsigned iterations);

#endif
