/* SPDX-License-Identifier: MIT */
/*
 * cell.c - measuring one cell (see cell.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cell.h"

struct bench_cell *bench_cell_new(const char *backend, const char *style,
				  const char *scenario, const char *limit)
{
	struct bench_cell *c = calloc(1, sizeof(*c));

	if (!c) {
		perror("ringbench");
		exit(1);
	}
	c->backend = backend;
	c->style = style;
	c->scenario = scenario;
	c->limit = limit;
	c->n = bench_opt.n;
	c->fsync = -1;
	c->resident = -1;
	bench_hist_reset(&c->lat);
	bench_cell_finish(c);
	return c;
}

void bench_cell_extra(struct bench_cell *c, const char *key, double value,
		      int decimals)
{
	if (c->nextra == BENCH_CELL_EXTRAS)
		return;
	c->extra[c->nextra++] = (struct bench_extra){ key, value, decimals };
}

static double now_ms(void)
{
	return (double)bench_now_ns() / 1e6;
}

/* User + system time of every thread of the process, finished ones too. */
static double cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
}

/* Syscalls so far: the loop's counters, or what a baseline counted. */
static uint64_t syscalls(const struct bench_ctx *ctx)
{
	struct rl_stats st;

	if (!ctx->loop)
		return ctx->syscalls;
	rl_loop_stats(ctx->loop, &st);
	return st.syscalls;
}

static bool run_failed(struct bench_cell *c, int ret, uint64_t errors)
{
	bool writes = !strcmp(c->scenario, "write") ||
		      !strcmp(c->scenario, "randwrite");

	if (ret < 0) {
		BENCH_CELL_FAIL(c, "run failed: %s", rl_strerror(ret));
		return true;
	}
	if (errors) {
		BENCH_CELL_FAIL(c, "%llu %s failed or %s wrong content",
				(unsigned long long)errors,
				writes ? "writes" : "reads",
				writes ? "left" : "returned");
		return true;
	}
	return false;
}

/* One run of s, with its hooks; its own failure is reported by the
 * caller. */
static int run_once(const struct bench_subject *s)
{
	struct bench_ctx *ctx = s->ctx;
	int ret;

	ctx->ops = 0;
	ctx->resident = -1;
	if (s->before && (ret = s->before(ctx)) < 0)
		return ret;
	ret = s->fn(ctx);
	if (s->after) {
		int r = s->after(ctx);

		if (ret == 0)
			ret = r;
	}
	return ret;
}

/* The timed part alone: the hooks run outside it. */
static int run_timed(const struct bench_subject *s, double *ms)
{
	struct bench_ctx *ctx = s->ctx;
	double t0;
	int ret;

	ctx->ops = 0;
	ctx->resident = -1;
	if (s->before && (ret = s->before(ctx)) < 0)
		return ret;
	t0 = now_ms();
	ret = s->fn(ctx);
	*ms = now_ms() - t0;
	if (s->after) {
		int r = s->after(ctx);

		if (ret == 0)
			ret = r;
	}
	return ret;
}

void bench_cell_measure(struct bench_cell *c, const struct bench_subject *s,
			const struct bench_subject *pair, uint64_t *lat_t0)
{
	struct bench_ctx *ctx = s->ctx;
	int ret = 0;

	ctx->errors = 0;
	ctx->lat = NULL;
	ctx->lat_t0 = lat_t0;
	for (unsigned w = 0; w < bench_opt.warmup; w++) {
		ret = run_once(s);
		if (run_failed(c, ret, ctx->errors))
			return;
	}
	c->has_lat = lat_t0 != NULL;
	for (unsigned r = 0; r < bench_opt.runs; r++) {
		bool pair_failed = false;
		double t0, cpu0;
		uint64_t sys0;

		if (pair) {
			pair->ctx->errors = 0;
			ret = run_timed(pair, &c->base_ms[r]);
			pair_failed = ret < 0 || pair->ctx->errors;
		}
		ctx->ops = 0;
		ctx->resident = -1;
		if (s->before && (ret = s->before(ctx)) < 0) {
			run_failed(c, ret, 0);
			return;
		}
		if (ctx->resident > c->resident)
			c->resident = ctx->resident;
		ctx->lat = lat_t0 ? &c->lat : NULL;
		sys0 = syscalls(ctx);
		cpu0 = cpu_ms();
		t0 = now_ms();
		ret = s->fn(ctx);
		c->ms[r] = now_ms() - t0;
		c->cpu_ms[r] = cpu_ms() - cpu0;
		c->syscalls += syscalls(ctx) - sys0;
		ctx->lat = NULL;
		c->ops[r] = ctx->ops ? (double)ctx->ops : (double)ctx->n;
		if (s->after) {
			int ra = s->after(ctx);

			if (ret == 0)
				ret = ra;
		}
		if (!pair)
			c->base_ms[r] = c->ms[r];
		/* The cell's own failure first: it says what the cell read. */
		if (run_failed(c, ret, ctx->errors))
			return;
		if (pair_failed) {
			BENCH_CELL_FAIL(c,
					"its paired sync run failed (%llu "
					"reads failed or were wrong)",
					(unsigned long long)pair->ctx->errors);
			return;
		}
		c->runs = r + 1;
	}
	bench_cell_finish(c);
}

void bench_cell_finish(struct bench_cell *c)
{
	unsigned n = c->runs;
	double ops = 0, cpu = 0, rate[BENCH_MAX_RUNS];

	c->median_ms = c->min_ms = c->max_ms = c->stdev_ms = NAN;
	c->base_median_ms = c->ratio = c->limit_ratio = NAN;
	c->cpu_median_ms = c->cpu_util = c->syscalls_per_op = NAN;
	c->cpu_us_per_op = c->iops = c->mb_s = NAN;
	c->noise = (struct bench_noise){ 0 };
	if (c->error || !n)
		return;
	for (unsigned r = 0; r < n; r++) {
		ops += c->ops[r];
		cpu += c->cpu_ms[r];
		rate[r] = c->ops[r] / (c->ms[r] / 1e3);
	}
	/* A run of a fixed time has as many operations as it managed: its
	 * cost per operation is the CPU of all runs over all operations. */
	if (c->timed) {
		c->n = (unsigned)(ops / n + 0.5);
		c->cpu_us_per_op = cpu * 1e3 / ops;
	}
	c->iops = bench_median(rate, n);
	if (c->bs)
		c->mb_s = c->iops * (double)c->bs / 1e6;
	c->median_ms = bench_median(c->ms, n);
	c->min_ms = bench_min(c->ms, n);
	c->max_ms = bench_max(c->ms, n);
	c->stdev_ms = bench_stdev(c->ms, n);
	c->cpu_median_ms = bench_median(c->cpu_ms, n);
	c->cpu_util = c->cpu_median_ms / c->median_ms;
	if (!c->timed) {
		c->base_median_ms = bench_median(c->base_ms, n);
		c->ratio = c->median_ms / c->base_median_ms;
		c->cpu_us_per_op = c->cpu_median_ms * 1e3 / c->n;
	}
	c->syscalls_per_op = (double)c->syscalls / ops;
	/* A run of a fixed time takes that time whatever it does: its noise
	 * is in its rate. */
	c->noise = bench_noise(c->timed ? rate : c->ms, n);
}
