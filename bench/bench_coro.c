/* SPDX-License-Identifier: MIT */
/*
 * bench_coro.c - the coroutine style's scenarios, and the switch micro
 * benchmark.
 *
 * parallel: n coroutines, each reading the file once, all joined by one
 * controller coroutine (with a window, the controller joins the oldest
 * before spawning more, so at most window readers are alive). blocking:
 * one coroutine reads n times in a plain loop, the seed's "await in a for
 * loop".
 *
 * The write scenario is the same with write_file in place of read_file.
 * rand: qd coroutines, each reading (or writing) a random block in a loop
 * until the run is over (rand.h).
 *
 * The scheduler (and its stack pool) lives in ctx->style_state across the
 * runs on one loop, so the runs measure the steady state: stacks come
 * from the pool, no mmap per coroutine. bench_coro_free() closes it before
 * the driver closes the loop.
 */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"
#include "rand.h"
#include "ringloop/coro.h"
#include "coro_internal.h"

/* Reads up to this size land in a buffer on the coroutine's stack; larger
 * files get a malloc'ed one. */
#define STACK_BUF 64

struct coro_run {
	struct bench_ctx *ctx;
	rl_coro_ctx *sched;
	rl_coro **ring; /* the alive readers, oldest first */
	int error;
};

static rl_coro_ctx *sched_for(struct bench_ctx *ctx)
{
	struct rl_coro_ctx_options opt = { .start_window = ctx->coro_window };
	rl_coro_ctx *s = ctx->style_state;

	if (!s && rl_coro_ctx_open(ctx->loop, &s, &opt) < 0)
		return NULL;
	ctx->style_state = s;
	return s;
}

void bench_coro_free(struct bench_ctx *ctx)
{
	if (ctx->style_state)
		rl_coro_ctx_close(ctx->style_state);
	ctx->style_state = NULL;
}

/* One read of path i, checked; its latency runs from the call to the
 * moment the coroutine is resumed with the result. */
static void read_checked(struct bench_ctx *ctx, unsigned i)
{
	char small[STACK_BUF];

	if (ctx->op == BENCH_WRITE_FILE) {
		int64_t ret;

		bench_op_start(ctx, i);
		ret = rl_coro_fs_write_file(bench_path(ctx, i), ctx->expect,
					    ctx->size, ctx->write_flags, 0644);
		bench_op_done(ctx, i);
		bench_check_write(ctx, ret);
		return;
	}
	{
		void *buf =
			ctx->size <= sizeof(small) ? small : malloc(ctx->size);
		size_t len =
			ctx->size <= sizeof(small) ? sizeof(small) : ctx->size;
		int64_t ret;

		if (!buf) {
			ctx->errors++;
			return;
		}
		bench_op_start(ctx, i);
		ret = rl_coro_fs_read_file(bench_path(ctx, i), buf, len);
		bench_op_done(ctx, i);
		bench_check(ctx, ret, buf);
		if (buf != small)
			free(buf);
	}
}

struct reader_arg {
	struct bench_ctx *ctx;
	unsigned i;
};

static int64_t reader(void *arg)
{
	/* arg packs ctx and i: the controller's array outlives the reader. */
	struct reader_arg *ra = arg;

	read_checked(ra->ctx, ra->i);
	return 0;
}

static int64_t controller(void *arg)
{
	struct coro_run *run = arg;
	struct bench_ctx *ctx = run->ctx;
	unsigned n = ctx->n;
	unsigned window = ctx->window && ctx->window < n ? ctx->window : n;
	struct reader_arg *args = malloc((size_t)n * sizeof(*args));
	unsigned head = 0, alive = 0;
	int ret;

	if (!args)
		return run->error = -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		if (alive == window) {
			rl_coro_join(run->ring[head++ % window]);
			alive--;
		}
		args[i].ctx = ctx;
		args[i].i = i;
		ret = rl_coro_spawn(run->sched,
				    &run->ring[(head + alive) % window], reader,
				    &args[i], NULL);
		if (ret < 0) {
			run->error = ret;
			ctx->errors++;
			break;
		}
		alive++;
	}
	while (alive--)
		rl_coro_join(run->ring[head++ % window]);
	free(args);
	return 0;
}

static int run_coro(struct bench_ctx *ctx, rl_coro_fn fn, void *arg)
{
	rl_coro_ctx *s = sched_for(ctx);
	int ret;

	if (!s)
		return -ENOMEM;
	ret = rl_coro_spawn(s, NULL, fn, arg, NULL);
	if (ret < 0)
		return ret;
	ret = rl_run(ctx->loop, RL_RUN_DEFAULT);
	return ret < 0 ? ret : 0;
}

int bench_coro_parallel(struct bench_ctx *ctx)
{
	unsigned window =
		ctx->window && ctx->window < ctx->n ? ctx->window : ctx->n;
	struct coro_run run = { .ctx = ctx };
	int ret;

	if (!ctx->n)
		return 0;
	run.sched = sched_for(ctx);
	if (!run.sched)
		return -ENOMEM;
	run.ring = malloc((size_t)window * sizeof(*run.ring));
	if (!run.ring)
		return -ENOMEM;
	ret = run_coro(ctx, controller, &run);
	free(run.ring);
	return ret < 0 ? ret : run.error;
}

static int64_t blocking(void *arg)
{
	struct bench_ctx *ctx = arg;

	for (unsigned i = 0; i < ctx->n; i++)
		read_checked(ctx, i);
	return 0;
}

int bench_coro_blocking(struct bench_ctx *ctx)
{
	return run_coro(ctx, blocking, ctx);
}

/* ------------------------------------------------------------ random I/O */

struct rand_lane {
	struct bench_ctx *ctx;
	unsigned lane;
};

static int64_t rand_lane(void *arg)
{
	struct rand_lane *l = arg;
	struct bench_ctx *ctx = l->ctx;
	struct bench_rand *r = ctx->rand;
	unsigned char *buf = bench_rand_buf(r, l->lane);

	while (bench_rand_more(r)) {
		int64_t off = (int64_t)bench_rand_issue(ctx, l->lane), ret;

		if (r->write)
			ret = r->fixed ? rl_coro_fs_write_fixed(r->fd, buf,
								r->bs, off,
								l->lane)
				       : rl_coro_fs_write(r->fd, buf, r->bs,
							  off);
		else
			ret = r->fixed
				      ? rl_coro_fs_read_fixed(r->fd, buf, r->bs,
							      off, l->lane)
				      : rl_coro_fs_read(r->fd, buf, r->bs, off);
		bench_rand_complete(ctx, l->lane, ret);
	}
	return 0;
}

int bench_coro_rand(struct bench_ctx *ctx)
{
	rl_coro_ctx *s = sched_for(ctx);
	unsigned qd = ctx->rand->qd;
	struct rand_lane *lanes = calloc(qd, sizeof(*lanes));
	int ret = 0;

	if (!s || !lanes) {
		free(lanes);
		return -ENOMEM;
	}
	bench_rand_begin(ctx);
	for (unsigned i = 0; i < qd && ret == 0; i++) {
		lanes[i] = (struct rand_lane){ ctx, i };
		ret = rl_coro_spawn(s, NULL, rand_lane, &lanes[i], NULL);
	}
	/* The lanes spawned run to their end either way: they use lanes[]. */
	{
		int r = rl_run(ctx->loop, RL_RUN_DEFAULT);

		if (ret == 0 && r < 0)
			ret = r;
	}
	free(lanes);
	return ret;
}

/* ------------------------------------------------------------ the switch */

static void *main_sp, *co_sp;

static void ping(void *arg)
{
	(void)arg;
	for (;;)
		rl__coro_switch(&co_sp, main_sp, NULL);
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/*
 * The raw switch the coroutines use, there and back: the scheduler
 * switches into a coroutine which switches straight back. Best batch of
 * several, so a preemption or a frequency change does not count.
 */
double bench_coro_switch_ns(unsigned iterations)
{
	enum { BATCHES = 40 };
	size_t size = 64 * 1024;
	void *stack = aligned_alloc(64, size);
	unsigned per = iterations / BATCHES ? iterations / BATCHES : 1;
	double best = -1;

	if (!stack)
		return -1;
	co_sp = rl__coro_ctx_init((char *)stack + size, ping, NULL);
	/* As in rl__coro_resume(): both sides save their control words at
	 * every switch. */
	rl__coro_switch(&main_sp, co_sp, NULL); /* start it */
	for (int b = 0; b < BATCHES; b++) {
		double t0 = now_ns(), t;

		for (unsigned i = 0; i < per; i++)
			rl__coro_switch(&main_sp, co_sp, NULL);
		t = (now_ns() - t0) / per;
		if (best < 0 || t < best)
			best = t;
	}
	free(stack);
	return best;
}
