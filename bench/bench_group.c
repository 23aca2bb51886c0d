/* SPDX-License-Identifier: MIT */
/*
 * bench_group.c - the rows that run on a group of loops (--loops), and the
 * cross-loop round trip of --micro.
 *
 * spread: the style's own parallel scenario, unchanged, on loop 0 of a
 * group with spreading on: the burst is issued on one thread, read on
 * every loop, and completes on loop 0. tpc (thread per core): every loop
 * of the group runs the style's parallel scenario on its own share of the
 * reads, with its own style context, from rl_group_run(); a run ends when
 * every share is done.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "bench_group.h"

int bench_group_open(struct bench_group *bg, const struct rl_options *opt,
		     unsigned loops, bool spread)
{
	struct rl_group_options go;
	int ret;

	memset(bg, 0, sizeof(*bg));
	rl_group_options_init(&go);
	go.loops = loops;
	go.loop = *opt;
	go.flags = spread ? RL_GROUP_SPREAD : 0;
	ret = rl_group_open(&bg->g, &go);
	if (ret < 0)
		return ret;
	bg->loops = rl_group_size(bg->g);
	bg->sub = calloc(bg->loops, sizeof(*bg->sub));
	bg->ret = calloc(bg->loops, sizeof(*bg->ret));
	bg->lat = calloc(bg->loops, sizeof(*bg->lat));
	if (!bg->sub || !bg->ret || !bg->lat) {
		bench_group_close(bg);
		return -ENOMEM;
	}
	return 0;
}

static void free_share(rl_loop *loop, unsigned i, void *arg)
{
	struct bench_group *bg = arg;

	(void)loop;
	if (bg->free && bg->sub[i].loop)
		bg->free(&bg->sub[i]);
}

void bench_group_free_styles(struct bench_group *bg)
{
	if (bg->g && bg->sub && bg->free)
		rl_group_run(bg->g, free_share, bg);
	for (unsigned i = 0; bg->sub && i < bg->loops; i++)
		bg->sub[i].style_state = NULL;
	bg->free = NULL;
}

void bench_group_close(struct bench_group *bg)
{
	bench_group_free_styles(bg);
	if (bg->g)
		rl_group_close(bg->g);
	free(bg->sub);
	free(bg->ret);
	free(bg->lat);
	memset(bg, 0, sizeof(*bg));
}

static void run_share(rl_loop *loop, unsigned i, void *arg)
{
	struct bench_group *bg = arg;
	struct bench_ctx *sub = &bg->sub[i];

	sub->loop = loop;
	bg->ret[i] = bg->fn(sub);
}

int bench_tpc_run(struct bench_ctx *ctx)
{
	struct bench_group *bg = ctx->group;
	unsigned per = ctx->n / bg->loops, extra = ctx->n % bg->loops;
	unsigned first = 0;
	int ret;

	for (unsigned i = 0; i < bg->loops; i++) {
		struct bench_ctx *sub = &bg->sub[i];
		void *state = sub->style_state;

		*sub = *ctx;
		sub->style_state = state;
		sub->group = NULL;
		sub->n = per + (i < extra);
		sub->errors = 0;
		/* Each loop times its own reads, in its own histogram and its
		 * own slice of the start times; merged after the run. */
		if (ctx->lat) {
			bench_hist_reset(&bg->lat[i]);
			sub->lat = &bg->lat[i];
			sub->lat_t0 = ctx->lat_t0 + first;
		}
		first += sub->n;
	}
	ret = rl_group_run(bg->g, run_share, bg);
	for (unsigned i = 0; i < bg->loops; i++) {
		if (ctx->lat)
			bench_hist_merge(ctx->lat, &bg->lat[i]);
		ctx->errors += bg->sub[i].errors;
		if (bg->ret[i] < 0 && ret == 0)
			ret = bg->ret[i];
	}
	return ret;
}

/* ------------------------------------------------ cross-loop round trip */

struct rtt {
	rl_group *g;
	struct rl_post ping, pong;
	unsigned left;
	uint64_t t0;
	struct bench_hist lat; /* the cells' histogram: no array to sort */
};

static void pong_cb(struct rl_post *post);

/* On loop 1: straight back. */
static void ping_cb(struct rl_post *post)
{
	struct rtt *r = post->data;

	rl_post(rl_group_loop(r->g, 0), &r->pong, pong_cb);
}

/* On loop 0: one round trip done; the next one after this batch. */
static void pong_cb(struct rl_post *post)
{
	struct rtt *r = post->data;
	uint64_t now = bench_now_ns();

	bench_hist_add(&r->lat, now - r->t0);
	if (--r->left == 0) {
		rl_unref(rl_group_loop(r->g, 0));
		return;
	}
	r->t0 = bench_now_ns();
	rl_post(rl_group_loop(r->g, 1), &r->ping, ping_cb);
}

/* The CPU time of every thread of the process, in ns. */
static uint64_t process_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int open_pair(rl_group **g, int backend, int wake, int64_t spin_ns)
{
	struct rl_group_options go;

	rl_group_options_init(&go);
	go.loops = 2;
	go.msg_wake = wake;
	go.loop.backend = backend;
	go.loop.idle_spin_ns = spin_ns;
	return rl_group_open(g, &go);
}

int bench_msg_rtt(int backend, int wake, int64_t spin_ns, unsigned iterations,
		  struct bench_msg_rtt *out)
{
	struct rtt r = { 0 };
	uint64_t t0, cpu0;
	int ret;

	ret = open_pair(&r.g, backend, wake, spin_ns);
	if (ret < 0)
		return ret;
	bench_hist_reset(&r.lat);
	r.ping.data = r.pong.data = &r;
	r.left = iterations;
	rl_ref(rl_group_loop(r.g, 0));
	cpu0 = process_cpu_ns();
	r.t0 = t0 = bench_now_ns();
	rl_post(rl_group_loop(r.g, 1), &r.ping, ping_cb);
	ret = rl_run(rl_group_loop(r.g, 0), RL_RUN_DEFAULT);
	out->wall_ms = (double)(bench_now_ns() - t0) / 1e6;
	out->cpu_us_per_rt =
		(double)(process_cpu_ns() - cpu0) / 1e3 / iterations;
	rl_group_close(r.g);
	if (ret < 0)
		return ret;
	out->p50_us = (double)bench_hist_percentile(&r.lat, 0.50) / 1e3;
	out->p99_us = (double)bench_hist_percentile(&r.lat, 0.99) / 1e3;
	out->cpu_util = out->cpu_us_per_rt * iterations / 1e3 / out->wall_ms;
	return 0;
}

/* ------------------------------------------- what the spin costs idle */

struct idle {
	rl_loop *loop;
	rl_timer timer;
	unsigned left;
};

static void tick_cb(rl_timer *t, int status)
{
	struct idle *idle = t->data;

	if (status < 0 || --idle->left == 0)
		rl_timer_stop(idle->loop, t);
}

int bench_group_idle_cpu(int backend, int64_t spin_ns, unsigned period_ms,
			 unsigned ticks, double *cpu_util)
{
	struct idle idle = { .left = ticks };
	uint64_t t0, cpu0;
	rl_group *g;
	int ret;

	ret = open_pair(&g, backend, RL_MSG_WAKE_DEFAULT, spin_ns);
	if (ret < 0)
		return ret;
	idle.loop = rl_group_loop(g, 0);
	rl_timer_init(&idle.timer);
	idle.timer.data = &idle;
	cpu0 = process_cpu_ns();
	t0 = bench_now_ns();
	rl_timer_start(idle.loop, &idle.timer, period_ms, period_ms, tick_cb);
	ret = rl_run(rl_group_loop(g, 0), RL_RUN_DEFAULT);
	*cpu_util = (double)(process_cpu_ns() - cpu0) /
		    (double)(bench_now_ns() - t0);
	rl_group_close(g);
	return ret < 0 ? ret : 0;
}
