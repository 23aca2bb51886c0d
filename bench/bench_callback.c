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
 * The write scenario is the same with write_file in place of read_file.
 *
 * rand: qd lanes, each a read (or write) at a random block whose callback
 * starts the lane's next one until the run is over (rand.h).
 */
#include <errno.h>
#include <stdlib.h>

#include "bench.h"
#include "rand.h"
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
	unsigned need =
		ctx->rand && ctx->rand->qd > ctx->n ? ctx->rand->qd : ctx->n;

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
	if (st->nops < need) {
		struct cb_op *ops = realloc(st->ops, need * sizeof(*ops));

		if (!ops)
			return NULL;
		st->ops = ops;
		st->nops = need;
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
static void write_done(int err, int64_t value, void *arg);

static void start(struct cb_run *run)
{
	struct bench_ctx *ctx = run->ctx;
	struct cb_op *op = &run->st->ops[run->started];
	int ret;

	op->run = run;
	op->i = run->started;
	bench_op_start(ctx, op->i);
	if (ctx->op == BENCH_WRITE_FILE)
		ret = rl_cb_fs_write_file(
			run->st->cbs, bench_path(ctx, op->i), ctx->expect,
			ctx->size, ctx->write_flags, 0644, write_done, op);
	else
		ret = rl_cb_fs_read_file(run->st->cbs, bench_path(ctx, op->i),
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

static void write_done(int err, int64_t value, void *arg)
{
	struct cb_op *op = arg;
	struct cb_run *run = op->run;

	bench_op_done(run->ctx, op->i);
	bench_check_write(run->ctx, err < 0 ? err : value);
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

/* ------------------------------------------------------------ random I/O */

static void rand_done(int err, int64_t value, void *arg);

/* Issues lane op->i's next operation. */
static void rand_issue(struct cb_run *run, struct cb_op *op)
{
	struct bench_ctx *ctx = run->ctx;
	struct bench_rand *r = ctx->rand;
	unsigned lane = op->i;
	uint64_t off = bench_rand_issue(ctx, lane);
	unsigned char *buf = bench_rand_buf(r, lane);
	int ret;

	if (r->write)
		ret = r->fixed ? rl_cb_fs_write_fixed(run->st->cbs, r->fd, buf,
						      r->bs, (int64_t)off, lane,
						      rand_done, op)
			       : rl_cb_fs_write(run->st->cbs, r->fd, buf, r->bs,
						(int64_t)off, rand_done, op);
	else
		ret = r->fixed ? rl_cb_fs_read_fixed(run->st->cbs, r->fd, buf,
						     r->bs, (int64_t)off, lane,
						     rand_done, op)
			       : rl_cb_fs_read(run->st->cbs, r->fd, buf, r->bs,
					       (int64_t)off, rand_done, op);
	if (ret < 0) {
		run->error = ret;
		ctx->errors++;
		return;
	}
	run->started++;
}

static void rand_done(int err, int64_t value, void *arg)
{
	struct cb_op *op = arg;
	struct cb_run *run = op->run;

	bench_rand_complete(run->ctx, op->i, err < 0 ? err : value);
	run->done++;
	if (!run->error && bench_rand_more(run->ctx->rand))
		rand_issue(run, op);
}

int bench_callback_rand(struct bench_ctx *ctx)
{
	struct cb_run run = { .ctx = ctx, .st = state_for(ctx) };
	unsigned qd = ctx->rand->qd;
	int ret;

	if (!run.st || run.st->nops < qd)
		return -ENOMEM;
	bench_rand_begin(ctx);
	for (unsigned lane = 0; lane < qd && !run.error; lane++) {
		run.st->ops[lane] = (struct cb_op){ &run, lane };
		rand_issue(&run, &run.st->ops[lane]);
	}
	ret = rl_run(ctx->loop, RL_RUN_DEFAULT);
	if (ret < 0)
		return ret;
	return run.error ? run.error : run.done == run.started ? 0 : -EIO;
}
