/* SPDX-License-Identifier: MIT */
/*
 * switch_fpctl.c - the coroutine switch round trip, with the resumer's
 * floating-point control words read at every switch or known in advance.
 * An experiment of docs/experiments.md, not part of the library or of the
 * tests. Build it against the static library (it calls the internal
 * switch, which the shared library does not export):
 *
 *	make lib
 *	cc -O2 -Iinclude -Istyles -o build/switch_fpctl \
 *	   docs/experiments/switch_fpctl.c build/libringloop.a
 *	flock /tmp/ringloop-bench.lock build/switch_fpctl
 *
 * Each variant runs in batches of 250,000 round trips, the variants
 * interleaved, 40 batches each; the best batch of each is printed, so a
 * preemption or a frequency change in one batch does not count.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "coro_internal.h"

static void *main_sp, *co_sp;

/* The coroutine side, as in the scheduler: it reads its own words at
 * every switch. */
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

enum { KNOWN, READ_INLINE, READ_IN_SWITCH, VARIANTS };

static const char *const names[VARIANTS] = {
	[KNOWN] = "resumer's words known (read once)",
	[READ_INLINE] = "resumer's words read before the switch",
	[READ_IN_SWITCH] = "resumer's words read by the switch",
};

static double batch(int variant, unsigned per, uint64_t fpctl)
{
	double t0 = now_ns();

	for (unsigned i = 0; i < per; i++) {
		switch (variant) {
		case KNOWN:
			rl__coro_switch_known(&main_sp, co_sp, NULL, fpctl);
			break;
		case READ_INLINE:
			rl__coro_switch_known(&main_sp, co_sp, NULL,
					      rl__coro_fpctl());
			break;
		default:
			rl__coro_switch(&main_sp, co_sp, NULL);
			break;
		}
	}
	return (now_ns() - t0) / per;
}

int main(void)
{
	enum { BATCHES = 40, PER = 250000 };
	size_t size = 64 * 1024;
	void *stack = aligned_alloc(64, size);
	double best[VARIANTS];
	uint64_t fpctl = rl__coro_fpctl();

	if (!stack)
		return 1;
	co_sp = rl__coro_ctx_init((char *)stack + size, ping, NULL);
	rl__coro_switch(&main_sp, co_sp, NULL); /* start it */
	for (int v = 0; v < VARIANTS; v++)
		best[v] = batch(v, PER, fpctl); /* warm-up */
	for (int b = 0; b < BATCHES; b++)
		for (int v = 0; v < VARIANTS; v++) {
			double t = batch(v, PER, fpctl);

			if (t < best[v])
				best[v] = t;
		}
	for (int v = 0; v < VARIANTS; v++)
		printf("%-40s %.2f ns\n", names[v], best[v]);
	free(stack);
	return 0;
}
