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
 * both sleeping between messages, iterations times: p50 and p99 in us. */
int bench_msg_rtt(int backend, int wake, unsigned iterations, double *p50_us,
		  double *p99_us);

#endif
