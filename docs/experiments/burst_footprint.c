/* SPDX-License-Identifier: MIT */
/*
 * burst_footprint.c - what 10,000 live requests cost a burst of cached
 * read_files (docs/experiments.md, "The footprint of a burst").
 *
 * Usage: burst_footprint FILE MODE [N] [BURSTS] [WINDOW] [SLOTS]
 *   MODE cb:     N rl_cb_fs_read_file() per burst, at most WINDOW in
 *                flight (0: all at once; the callbacks start the rest)
 *   MODE own:    N rl_fs_read_file() of the loop API, each request with
 *                a 256-byte buffer of its own
 *   MODE shared: the same, every request reading into one buffer (a
 *                measurement of the footprint only: the reads race)
 * SLOTS: rl_options.direct_slots (0: the default). FILE must hold
 * "Hello, world" (12 bytes). Prints the mean time per burst.
 *
 * Build: cc -O2 -Iinclude docs/experiments/burst_footprint.c
 *        build/libringloop.a -luring -lpthread
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ringloop/callback.h"
#include "ringloop/ringloop.h"

static unsigned n, started, bad;
static const char *path;
static rl_cb_ctx *cbs;

static void cb_done(int err, const void *data, size_t len, void *arg);

static void cb_start(void)
{
	started++;
	if (rl_cb_fs_read_file(cbs, path, cb_done, NULL) < 0)
		bad++;
}

static void cb_done(int err, const void *data, size_t len, void *arg)
{
	(void)arg;
	if (err < 0 || len != 12 || memcmp(data, "Hello, world", 12))
		bad++;
	if (started < n)
		cb_start();
}

static void req_done(rl_req *req)
{
	if (req->result != 12)
		bad++;
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 2 ? argv[2] : "cb";
	unsigned bursts = argc > 4 ? (unsigned)atoi(argv[4]) : 60;
	unsigned window = argc > 5 ? (unsigned)atoi(argv[5]) : 0;
	struct rl_options opt;
	rl_req *reqs = NULL;
	char *bufs = NULL;
	rl_loop *loop;
	double t0;

	path = argc > 1 ? argv[1] : "/tmp/hello";
	n = argc > 3 ? (unsigned)atoi(argv[3]) : 10000;
	if (!window || window > n)
		window = n;
	rl_options_init(&opt);
	opt.direct_slots = argc > 6 ? (unsigned)atoi(argv[6]) : 0;
	if (rl_loop_open(&loop, &opt) < 0 || rl_cb_ctx_open(loop, &cbs) < 0)
		return 1;
	if (strcmp(mode, "cb")) {
		reqs = calloc(n, sizeof(*reqs));
		bufs = malloc((size_t)n * 256);
		if (!reqs || !bufs)
			return 1;
	}
	t0 = now_ms();
	for (unsigned b = 0; b < bursts; b++) {
		started = 0;
		for (unsigned i = 0; i < (reqs ? n : window); i++) {
			if (!reqs) {
				cb_start();
				continue;
			}
			rl_req_init(&reqs[i]);
			if (rl_fs_read_file(loop, &reqs[i], path,
					    bufs + (strcmp(mode, "shared")
							    ? (size_t)i * 256
							    : 0),
					    256, 0, req_done) < 0)
				bad++;
		}
		if (rl_run(loop, RL_RUN_DEFAULT) < 0)
			return 1;
	}
	printf("%s window %u: %.2f ms per burst of %u, %u bad\n", mode, window,
	       (now_ms() - t0) / bursts, n, bad);
	rl_cb_ctx_close(cbs);
	rl_loop_close(loop);
	free(reqs);
	free(bufs);
	return bad != 0;
}
