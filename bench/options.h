/* SPDX-License-Identifier: MIT */
/*
 * options.h - ringbench's command line: every knob, checked before
 * anything runs (a bad value exits with status 2 and says why).
 */
#ifndef RINGBENCH_OPTIONS_H
#define RINGBENCH_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>

#include "ringloop/ringloop.h"

#define BENCH_MAX_RUNS	 101
#define BENCH_MAX_WARMUP 100
#define BENCH_MAX_FILES	 1024
/* cold: distinct files whose cache is dropped; write: files per run. */
#define BENCH_MAX_COLD_FILES 1000000u
#define BENCH_MAX_WRITE_N    1000000u
/* randread/randwrite: queue depths, block size, file size. */
#define BENCH_MAX_QDS	  8
#define BENCH_MAX_QD	  1024u
#define BENCH_MAX_BS	  (1u << 20)
#define BENCH_MAX_RAND_MB (1u << 20) /* 1 TiB */
#define BENCH_MAX_N	  10000000u
/* The kernel's limits on io_uring ring sizes (IORING_MAX_ENTRIES, and the
 * CQ size ringbench asks for at most). */
#define BENCH_MAX_ENTRIES    32768u
#define BENCH_MAX_CQ_ENTRIES 32768u

struct bench_opts {
	unsigned n, runs, warmup, files, window;
	unsigned loops; /* spread and tpc rows: the group's size, 0 = CPUs */
	size_t size;
	const char *file;
	size_t coro_window;	/* 0: RL_CORO_START_WINDOW */
	bool coro_window_all;	/* --coro-window 0: never wait */
	struct rl_options loop; /* the knobs every loop (and raw-uring) gets */
	bool json, micro, no_out, latency, limits;
	bool pair; /* a sync run before each measured run (--no-pair) */
	const char *out_dir;
	const char *backends, *styles; /* NULL: all */
	const char *scenarios;	       /* NULL: parallel,blocking */
	const char *modes;	       /* write, cold: NULL = both */

	/* Storage (write, cold, randread, randwrite). */
	bool fsync;	     /* write: fsync each file before its close */
	unsigned cold_files; /* cold: K distinct files (10,000) */
	unsigned qd[BENCH_MAX_QDS], nqd; /* rand: queue depths (1,8,32,128) */
	size_t bs;			 /* rand: block size (4 KiB) */
	uint64_t rand_size;		 /* rand: file size (1 GiB) */
	const char *rand_file;		 /* rand: NULL = the default path */
	unsigned run_ms;		 /* rand: a run lasts this long... */
	unsigned run_ops;		 /* ...or this many operations */
	bool fixed_bufs;		 /* rand: registered buffers */
	bool no_layout;			 /* rand: take the file as it is */
	bool pool_qd;		/* rand: epoll-pool rows with qd threads */
	const char *drop_cache; /* --drop-cache: a utility, no bench */
	char args[1024];	/* the command line, for the meta record */
};

extern struct bench_opts bench_opt;

/* Parses argv into bench_opt; exits 2 on a bad option or value. */
void bench_opts_parse(int argc, char **argv);

/*
 * Checks a comma-separated --backend/--style/--scenario list: every name
 * must be one of valid[] (NULL-terminated) or "all". Exits 2 otherwise,
 * naming the valid choices.
 */
void bench_check_list(const char *option, const char *list,
		      const char *const *valid);

/* Whether name is in a checked list (NULL or "all": every name is). */
bool bench_listed(const char *list, const char *name);

/* Whether a scenario (its JSON name) and a mode (parallel, blocking, or
 * NULL for the random I/O ones) are selected. */
bool bench_scenario_selected(const char *scenario, const char *mode);

/* The knob values as they ran: what a 0 ("default") stands for. */
unsigned bench_effective_window(void);
unsigned bench_effective_entries(void);
unsigned bench_effective_cq_entries(void);
unsigned bench_effective_pool_threads(void);
size_t bench_effective_coro_window(void);

#endif
