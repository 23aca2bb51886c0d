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
 * The write scenario is the same with write_file in place of read_file.
 * rand: qd lanes, each a then-chain like blocking's - a read (or write)
 * at a random block, whose reaction checks it and returns the lane's next
 * one until the run is over (rand.h).
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
#include "rand.h"
#include "ringloop/promise.h"

#define LAT_SAMPLE 8

void bench_promise_free(struct bench_ctx *ctx);

struct prun;

/* A read whose settlement is timed (one in LAT_SAMPLE), or a rand lane. */
struct pmark {
	struct prun *run;
	unsigned i;
};

struct pstate {
	rl_promise_ctx *pctx;
	rl_loop *loop;
	char *bufs; /* nbufs buffers of stride bytes */
	size_t nbufs;
	size_t stride;
	rl_promise **ps;     /* one window of read promises */
	struct pmark *marks; /* nbufs / LAT_SAMPLE + 1, or a lane each */
	size_t nmarks;
};

/* One run's progress, shared by the reactions. */
struct prun {
	struct bench_ctx *ctx;
	struct pstate *st;
	unsigned started, done, win;
	int error;
};

static struct pstate *state_for(struct bench_ctx *ctx, size_t nbufs)
{
	struct pstate *st = ctx->style_state;
	size_t stride = (ctx->size + 15) & ~(size_t)15;
	size_t nmarks = nbufs / LAT_SAMPLE + 1;

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
	if (ctx->rand && nmarks < ctx->rand->qd)
		nmarks = ctx->rand->qd;
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
	if (st->nmarks < nmarks) {
		struct pmark *marks =
			realloc(st->marks, nmarks * sizeof(*marks));

		if (!marks)
			return NULL;
		st->marks = marks;
		st->nmarks = nmarks;
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
	free(st->marks);
	free(st);
	ctx->style_state = NULL;
}

/* Read (or write) i, into buffer slot of the window. */
static rl_promise *read_one(struct prun *run, unsigned i, unsigned slot)
{
	struct pstate *st = run->st;
	struct bench_ctx *ctx = run->ctx;

	bench_op_start(ctx, i);
	if (ctx->op == BENCH_WRITE_FILE)
		return rl_promise_fs_write_file(st->pctx, bench_path(ctx, i),
						ctx->expect, ctx->size,
						ctx->write_flags, 0644);
	return rl_promise_fs_read_file(st->pctx, bench_path(ctx, i),
				       st->bufs + (size_t)slot * st->stride,
				       ctx->size);
}

/* One read or write's value, checked. */
static void check_one(struct bench_ctx *ctx, int64_t result, const void *data)
{
	if (ctx->op == BENCH_WRITE_FILE)
		bench_check_write(ctx, result);
	else
		bench_check(ctx, result, data);
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
		check_one(run->ctx, v[i].i, v[i].p);
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

/* A timed read (or write) of the current window settled. */
static void read_settled(rl_promise *p, void *arg)
{
	struct pmark *m = arg;

	bench_op_done(m->run->ctx, m->i);
	rl_promise_unref(p);
}

static rl_promise *start_window(struct prun *run)
{
	unsigned n = run->ctx->n - run->started, i;

	if (n > run->win)
		n = run->win;
	for (i = 0; i < n; i++) {
		rl_promise *p = read_one(run, run->started + i, i);

		if (p && run->ctx->lat &&
		    (run->started + i) % LAT_SAMPLE == 0) {
			struct pmark *m = &run->st->marks[i / LAT_SAMPLE];

			*m = (struct pmark){ run, run->started + i };
			if (rl_promise_subscribe(rl_promise_ref(p),
						 read_settled, m) < 0)
				run->ctx->errors++;
		}
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
	check_one(run->ctx, o->reason < 0 ? o->reason : o->value.i, o->value.p);
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

/* ------------------------------------------------------------ random I/O */

/* Lane m->i's next operation. */
static rl_promise *rand_op(struct pmark *m)
{
	struct prun *run = m->run;
	struct bench_ctx *ctx = run->ctx;
	struct bench_rand *r = ctx->rand;
	rl_promise_ctx *pctx = run->st->pctx;
	int64_t off = (int64_t)bench_rand_issue(ctx, m->i);
	unsigned char *buf = bench_rand_buf(r, m->i);

	run->started++;
	if (r->write)
		return r->fixed ? rl_promise_fs_write_fixed(pctx, r->fd, buf,
							    r->bs, off, m->i)
				: rl_promise_fs_write(pctx, r->fd, buf, r->bs,
						      off);
	return r->fixed ? rl_promise_fs_read_fixed(pctx, r->fd, buf, r->bs, off,
						   m->i)
			: rl_promise_fs_read(pctx, r->fd, buf, r->bs, off);
}

/* A lane's operation settled: check it, and go on with the next. */
static void rand_step(struct rl_outcome *o, void *arg)
{
	struct pmark *m = arg;
	struct prun *run = m->run;

	bench_rand_complete(run->ctx, m->i,
			    o->reason < 0 ? o->reason : o->value.i);
	run->done++;
	if (bench_rand_more(run->ctx->rand))
		o->adopt = rl_then(rand_op(m), rand_step, rand_step, m);
}

int bench_promise_rand(struct bench_ctx *ctx)
{
	struct prun run = { .ctx = ctx };
	unsigned qd = ctx->rand->qd;
	int ret;

	run.st = state_for(ctx, 1);
	if (!run.st)
		return -ENOMEM;
	bench_rand_begin(ctx);
	for (unsigned lane = 0; lane < qd; lane++) {
		struct pmark *m = &run.st->marks[lane];
		rl_promise *lane_chain;

		*m = (struct pmark){ &run, lane };
		lane_chain = rl_then(rand_op(m), rand_step, rand_step, m);
		if (!lane_chain)
			return -ENOMEM;
		rl_promise_unref(lane_chain);
	}
	ret = rl_run(ctx->loop, RL_RUN_DEFAULT);
	if (ret < 0)
		return ret;
	return run.done == run.started ? 0 : -EIO;
}
