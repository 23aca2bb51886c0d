/* SPDX-License-Identifier: MIT */
/*
 * bench_group.h - the rows on a group of loops (spread, tpc) and the
 * cross-loop round trip (bench_group.c).
 */
#ifndef RINGBENCH_GROUP_H
#define RINGBENCH_GROUP_H

#include <stdbool.h>

#include "bench.h"

struct bench_group {
	rl_group *g;
	unsigned loops;
	/* tpc: the style's scenario and its free, one context per loop. */
	bench_fn fn;
	void (*free)(struct bench_ctx *ctx);
	struct bench_ctx *sub;
	int *ret;
	struct bench_hist *lat; /* each loop's latencies of a run */
};

/* Opens a group of loops loops (0: one per CPU) with opt's knobs. */
int bench_group_open(struct bench_group *bg, const struct rl_options *opt,
		     unsigned loops, bool spread);
/* tpc: frees the style's state of every loop, on its thread. */
void bench_group_free_styles(struct bench_group *bg);
/* Frees the styles' state on every loop, and closes the group. */
void bench_group_close(struct bench_group *bg);

/* tpc: one run, ctx->n reads shared out over the loops (ctx->group). */
int bench_tpc_run(struct bench_ctx *ctx);

/* --micro: the round trip of a message from loop 0 to loop 1 and back,
 * iterations times, on a group of two loops with wake (enum rl_msg_wake)
 * and rl_options.idle_spin_ns spin_ns: each loop waits (spinning, then
 * sleeping) between messages. */
struct bench_msg_rtt {
	double p50_us, p99_us;
	double cpu_us_per_rt; /* every thread's CPU time per round trip */
	double cpu_util;      /* CPU time over wall time */
	double wall_ms;
};
int bench_msg_rtt(int backend, int wake, int64_t spin_ns, unsigned iterations,
		  struct bench_msg_rtt *out);

/* --micro: the CPU a group of two loops uses while loop 0 only runs a
 * timer, ticks times every period_ms, and loop 1 has nothing to do: what
 * the idle spin costs where no message ever comes. CPU time over wall. */
int bench_group_idle_cpu(int backend, int64_t spin_ns, unsigned period_ms,
			 unsigned ticks, double *cpu_util);

#endif
