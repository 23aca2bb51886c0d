/* SPDX-License-Identifier: MIT */
/*
 * bench.h - what ringbench's driver and each style's scenario file share.
 *
 * A scenario runs ctx->n reads of the bench file through one style on
 * ctx->loop and returns when all have completed: 0, or -errno when the run
 * could not go on. Every read's content is checked against ctx->expect
 * (ctx->size bytes); each wrong or failed read increments ctx->errors, and
 * a run with errors is reported as failed.
 *
 *   parallel: start all n reads (at most ctx->window in flight when
 *             window > 0), then wait for all of them;
 *   blocking: each read starts when the previous one has finished.
 */
#ifndef RINGBENCH_H
#define RINGBENCH_H

#include <stddef.h>
#include <stdint.h>

#include "ringloop/ringloop.h"

struct bench_ctx {
	rl_loop *loop;
	const char *const *paths; /* npaths files, all with the same content */
	unsigned npaths;	  /* read i uses paths[i % npaths] */
	size_t size;		  /* bytes in each file */
	const unsigned char *expect;
	unsigned n;		  /* reads in this run */
	unsigned window;	  /* parallel: max in flight, 0 = all */
	size_t coro_window;	  /* coro: the scheduler's start_window */
	uint64_t errors;	  /* wrong content or failed reads */
	void *style_state;	  /* a style's own per-run state */
};

typedef int (*bench_fn)(struct bench_ctx *ctx);

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

static inline const char *bench_path(const struct bench_ctx *ctx, unsigned i)
{
	return ctx->paths[i % ctx->npaths];
}

/* One file per style. */
int bench_callback_parallel(struct bench_ctx *ctx);
int bench_callback_blocking(struct bench_ctx *ctx);
int bench_promise_parallel(struct bench_ctx *ctx);
int bench_promise_blocking(struct bench_ctx *ctx);
int bench_coro_parallel(struct bench_ctx *ctx);
int bench_coro_blocking(struct bench_ctx *ctx);

/* Optional: frees what a style kept in ctx->style_state across runs. The
 * driver calls it after the style's last run, before closing the loop. */
void bench_callback_free(struct bench_ctx *ctx);
void bench_promise_free(struct bench_ctx *ctx);
void bench_coro_free(struct bench_ctx *ctx);

/* ringbench --micro: the coroutine switch round trip in ns (bench_coro.c). */
double bench_coro_switch_ns(unsigned iterations);

#endif
