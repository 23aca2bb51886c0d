/* SPDX-License-Identifier: MIT */
/*
 * bench_callback.c - the callback style's scenarios.
 *
 * parallel: every read is started up front (or a window of them), and a
 * counter in the callback tells when all are done, like the seed's
 * "callback parallel". blocking: each callback starts the next read, like
 * the seed's recursive read(i, callback).
 *
 * Each read's callback argument is its own record (which read it is, for
 * the latency), from an array kept across runs: no allocation per read.
 */
#include <errno.h>
#include <stdlib.h>

#include "bench.h"
#include "ringloop/callback.h"

struct cb_run;

struct cb_op {
	struct cb_run *run;
	unsigned i;
};

struct cb_state {
	rl_cb_ctx *cbs;
	struct cb_op *ops;
	unsigned nops;
};

struct cb_run {
	struct bench_ctx *ctx;
	struct cb_state *st;
	unsigned started;
	unsigned done;
	int error;
};

/* One pool per loop, kept across runs so steady state is measured: the
 * driver frees it with bench_callback_free(). */
static struct cb_state *state_for(struct bench_ctx *ctx)
{
	struct cb_state *st = ctx->style_state;

	if (!st) {
		st = calloc(1, sizeof(*st));
		if (!st)
			return NULL;
		if (rl_cb_ctx_open(ctx->loop, &st->cbs) < 0) {
			free(st);
			return NULL;
		}
		ctx->style_state = st;
	}
	if (st->nops < ctx->n) {
		struct cb_op *ops = realloc(st->ops, ctx->n * sizeof(*ops));

		if (!ops)
			return NULL;
		st->ops = ops;
		st->nops = ctx->n;
	}
	return st;
}

void bench_callback_free(struct bench_ctx *ctx)
{
	struct cb_state *st = ctx->style_state;

	if (!st)
		return;
	rl_cb_ctx_close(st->cbs);
	free(st->ops);
	free(st);
	ctx->style_state = NULL;
}

static void read_done(int err, const void *data, size_t len, void *arg);

static void start(struct cb_run *run)
{
	struct cb_op *op = &run->st->ops[run->started];
	int ret;

	op->run = run;
	op->i = run->started;
	bench_op_start(run->ctx, op->i);
	ret = rl_cb_fs_read_file(run->st->cbs, bench_path(run->ctx, op->i),
				 read_done, op);
	if (ret < 0) {
		run->error = ret;
		run->ctx->errors++;
		return;
	}
	run->started++;
}

/* One completion handler serves both scenarios: every finished read starts
 * the next one until n have started. parallel starts the first window (all
 * n by default) up front; blocking starts one, so exactly one read is ever
 * in flight. */
static void read_done(int err, const void *data, size_t len, void *arg)
{
	struct cb_op *op = arg;
	struct cb_run *run = op->run;

	bench_op_done(run->ctx, op->i);
	bench_check(run->ctx, err < 0 ? err : (int64_t)len, data);
	run->done++;
	if (run->started < run->ctx->n && !run->error)
		start(run);
}

static int run_reads(struct bench_ctx *ctx, unsigned first)
{
	struct cb_run run = { .ctx = ctx, .st = state_for(ctx) };
	int ret;

	if (!run.st)
		return -ENOMEM;
	while (run.started < first && !run.error)
		start(&run);
	ret = rl_run(ctx->loop, RL_RUN_DEFAULT);
	if (ret < 0)
		return ret;
	return run.error ? run.error : run.done == ctx->n ? 0 : -EIO;
}

int bench_callback_parallel(struct bench_ctx *ctx)
{
	return run_reads(ctx, ctx->window && ctx->window < ctx->n ? ctx->window
								  : ctx->n);
}

int bench_callback_blocking(struct bench_ctx *ctx)
{
	return run_reads(ctx, 1);
}
