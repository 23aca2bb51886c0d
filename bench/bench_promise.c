/* SPDX-License-Identifier: MIT */
/*
 * bench_promise.c - the promise style's scenarios, written the way the
 * seed's JavaScript is:
 *
 *   parallel: all(reads).then(check)  - over windows of ctx->window reads
 *             when window > 0, each window's then starting the next;
 *   blocking: read(0).then(r => { check(r); return read(1).then(...) })
 *             - each read starts in the reaction to the previous one, and
 *             the whole chain is one promise that settles at the end.
 *
 * The promise context and the read buffers live in ctx->style_state across
 * runs (freed by bench_promise_free), so a run measures steady state: pools
 * warm, no malloc per read.
 *
 * Latency: in blocking, the reaction to each read is where the program
 * gets it. In parallel the program sees the reads only when all() of the
 * window fulfils, so while latencies are recorded every LAT_SAMPLE-th
 * read's promise also gets a subscription (rl_promise_subscribe) that
 * notes when it settled. A subscription is one more microtask: on every
 * read it made the cell measurably slower (docs/bench.md), on one in
 * LAT_SAMPLE it does not, and a uniform sample keeps the percentiles.
 */
#include <errno.h>
#include <stdlib.h>

#include "bench.h"
#include "ringloop/promise.h"

#define LAT_SAMPLE 8

void bench_promise_free(struct bench_ctx *ctx);

struct pstate {
	rl_promise_ctx *pctx;
	rl_loop *loop;
	char *bufs; /* nbufs buffers of stride bytes */
	size_t nbufs;
	size_t stride;
	rl_promise **ps; /* one window of read promises */
};

/* One run's progress, shared by the reactions. */
struct prun {
	struct bench_ctx *ctx;
	struct pstate *st;
	unsigned started, done, win;
	unsigned win_base; /* the first read of the current window */
	int error;
};

static struct pstate *state_for(struct bench_ctx *ctx, size_t nbufs)
{
	struct pstate *st = ctx->style_state;
	size_t stride = (ctx->size + 15) & ~(size_t)15;

	if (st && st->loop != ctx->loop) {
		bench_promise_free(ctx);
		st = NULL;
	}
	if (!st) {
		st = calloc(1, sizeof(*st));
		if (!st)
			return NULL;
		if (rl_promise_ctx_open(ctx->loop, &st->pctx) < 0) {
			free(st);
			return NULL;
		}
		st->loop = ctx->loop;
		ctx->style_state = st;
	}
	if (!stride)
		stride = 16;
	if (st->nbufs < nbufs || st->stride != stride) {
		char *bufs = malloc(nbufs * stride);
		rl_promise **ps = malloc(nbufs * sizeof(*ps));

		if (!bufs || !ps) {
			free(bufs);
			free(ps);
			return NULL;
		}
		free(st->bufs);
		free(st->ps);
		st->bufs = bufs;
		st->ps = ps;
		st->nbufs = nbufs;
		st->stride = stride;
	}
	return st;
}

void bench_promise_free(struct bench_ctx *ctx)
{
	struct pstate *st = ctx->style_state;

	if (!st)
		return;
	rl_promise_ctx_close(st->pctx);
	free(st->bufs);
	free(st->ps);
	free(st);
	ctx->style_state = NULL;
}

static rl_promise *read_one(struct prun *run, unsigned i, unsigned slot)
{
	struct pstate *st = run->st;

	bench_op_start(run->ctx, i);
	return rl_promise_fs_read_file(st->pctx, bench_path(run->ctx, i),
				       st->bufs + (size_t)slot * st->stride,
				       run->ctx->size);
}

/* ---------------------------------------------------------------- parallel */

static rl_promise *start_window(struct prun *run);

/* all() of a window fulfilled: check every read, then start the next
 * window and follow it. */
static void window_done(struct rl_outcome *o, void *arg)
{
	struct prun *run = arg;
	const struct rl_value *v = o->value.p;

	for (int64_t i = 0; i < o->value.i; i++)
		bench_check(run->ctx, v[i].i, v[i].p);
	run->done += (unsigned)o->value.i;
	if (run->started < run->ctx->n)
		o->adopt = start_window(run);
}

/* A window rejected: all() hides which reads failed, so count them all. */
static void window_failed(struct rl_outcome *o, void *arg)
{
	struct prun *run = arg;

	run->ctx->errors += run->win;
	run->error = o->reason;
}

/* A read of the current window settled: which one it was follows from the
 * buffer it filled. A failed read has no buffer to tell; the cell fails
 * anyway. */
static void read_settled(rl_promise *p, void *arg)
{
	struct prun *run = arg;
	struct rl_settlement s;

	if (rl_promise_result(p, &s) == RL_PROMISE_FULFILLED && s.value.p) {
		size_t slot = (size_t)((char *)s.value.p - run->st->bufs) /
			      run->st->stride;

		bench_op_done(run->ctx, run->win_base + (unsigned)slot);
	}
	rl_promise_unref(p);
}

static rl_promise *start_window(struct prun *run)
{
	unsigned n = run->ctx->n - run->started, i;

	if (n > run->win)
		n = run->win;
	run->win_base = run->started;
	for (i = 0; i < n; i++) {
		rl_promise *p = read_one(run, run->started + i, i);

		if (p && run->ctx->lat &&
		    (run->started + i) % LAT_SAMPLE == 0 &&
		    rl_promise_subscribe(rl_promise_ref(p), read_settled, run) <
			    0)
			run->ctx->errors++;
		run->st->ps[i] = p;
	}
	run->started += n;
	return rl_then(rl_all(run->st->pctx, run->st->ps, n), window_done,
		       window_failed, run);
}

int bench_promise_parallel(struct bench_ctx *ctx)
{
	unsigned win =
		ctx->window && ctx->window < ctx->n ? ctx->window : ctx->n;
	struct prun run = { .ctx = ctx, .win = win };
	rl_promise *all;
	int ret;

	run.st = state_for(ctx, win ? win : 1);
	if (!run.st)
		return -ENOMEM;
	all = start_window(&run);
	if (!all)
		return -ENOMEM;
	rl_promise_unref(all);
	ret = rl_run(ctx->loop, RL_RUN_DEFAULT);
	if (ret < 0)
		return ret;
	if (run.error)
		return run.error;
	return run.done == ctx->n ? 0 : -EIO;
}

/* ---------------------------------------------------------------- blocking */

/* One read finished (either way): check it, start the next one and make
 * the chain follow it. */
static void read_done(struct rl_outcome *o, void *arg)
{
	struct prun *run = arg;

	bench_op_done(run->ctx, run->done);
	bench_check(run->ctx, o->reason < 0 ? o->reason : o->value.i,
		    o->value.p);
	run->done++;
	if (run->started < run->ctx->n)
		o->adopt = rl_then(read_one(run, run->started++, 0), read_done,
				   read_done, run);
}

int bench_promise_blocking(struct bench_ctx *ctx)
{
	struct prun run = { .ctx = ctx };
	rl_promise *chain;
	int ret;

	run.st = state_for(ctx, 1);
	if (!run.st)
		return -ENOMEM;
	if (!ctx->n)
		return 0;
	chain = rl_then(read_one(&run, run.started++, 0), read_done, read_done,
			&run);
	if (!chain)
		return -ENOMEM;
	rl_promise_unref(chain);
	ret = rl_run(ctx->loop, RL_RUN_DEFAULT);
	if (ret < 0)
		return ret;
	return run.done == ctx->n ? 0 : -EIO;
}
