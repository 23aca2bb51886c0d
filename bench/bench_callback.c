/* SPDX-License-Identifier: MIT */
/*
 * bench_callback.c - the callback style's scenarios.
 *
 * parallel: every read is started up front (or a window of them), and a
 * counter in the callback tells when all are done, like the seed's
 * "callback parallel". blocking: each callback starts the next read, like
 * the seed's recursive read(i, callback).
 */
#include <errno.h>

#include "bench.h"
#include "ringloop/callback.h"

struct cb_run {
	struct bench_ctx *ctx;
	rl_cb_ctx *cbs;
	unsigned started;
	unsigned done;
	int error;
};

static rl_cb_ctx *cbs_for(struct bench_ctx *ctx)
{
	/* One pool per loop, kept across runs so steady state is measured:
	 * the driver frees it with bench_callback_free(). */
	if (!ctx->style_state && rl_cb_ctx_open(ctx->loop,
					    (rl_cb_ctx **)&ctx->style_state))
		return NULL;
	return ctx->style_state;
}

void bench_callback_free(struct bench_ctx *ctx)
{
	if (ctx->style_state)
		rl_cb_ctx_close(ctx->style_state);
	ctx->style_state = NULL;
}

static void read_done(int err, const void *data, size_t len, void *arg);

static void start(struct cb_run *run)
{
	int ret = rl_cb_fs_read_file(run->cbs, bench_path(run->ctx, run->started),
				  read_done, run);

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
	struct cb_run *run = arg;

	bench_check(run->ctx, err < 0 ? err : (int64_t)len, data);
	run->done++;
	if (run->started < run->ctx->n && !run->error)
		start(run);
}

static int run_reads(struct bench_ctx *ctx, unsigned first)
{
	struct cb_run run = { .ctx = ctx, .cbs = cbs_for(ctx) };
	int ret;

	if (!run.cbs)
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
