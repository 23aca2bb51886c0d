/* SPDX-License-Identifier: MIT */
/*
 * cell.h - one row of ringbench's matrix: a subject (backend x style) run
 * through a scenario several times, and what the runs measured.
 *
 * How a cell is measured (bench_cell_measure): warm-up runs, then each
 * measured run is preceded by a run of its paired baseline (the sync
 * loop), so a cell and its baseline see the same machine load; the cell's
 * ratio is median(cell) / median(its paired baseline runs). Each run
 * records its wall time, the CPU time of the whole process (every thread,
 * the pool's workers and io_uring's io-wq and SQPOLL threads included:
 * getrusage(RUSAGE_SELF)), the syscalls made, and every read's latency.
 *
 * A scenario a later change adds plugs in as a bench_fn (bench.h) plus
 * the limit rows it is compared with; what only it measures (connections,
 * threads...) goes in the cell's extras, which the reports print after the
 * common fields, by name, only when set.
 *
 * Storage cells (bs > 0) also say their queue depth, block size, IOPS and
 * MB/s. A random I/O cell has no paired baseline (its runs last a fixed
 * time: there is no sync run of the same work to pair it with); its
 * limit_ratio compares IOPS instead: the limit row's IOPS / the cell's.
 */
#ifndef RINGBENCH_CELL_H
#define RINGBENCH_CELL_H

#include <stdbool.h>
#include <stdio.h>

#include "bench.h"
#include "options.h"
#include "stats.h"

#define BENCH_CELL_EXTRAS 12

struct bench_extra {
	const char *key;
	double value;
	int decimals;
};

struct bench_cell {
	const char *backend, *style, *scenario;
	const char *mode;		/* write, cold: parallel or blocking */
	const char *limit;		/* the row that bounds this one */
	unsigned runs;			/* measured runs completed */
	unsigned n;			/* reads per run (mean ops per run for
					 * runs of a fixed time) */
	double ms[BENCH_MAX_RUNS];	/* wall time of each run */
	double base_ms[BENCH_MAX_RUNS]; /* its paired baseline run */
	double cpu_ms[BENCH_MAX_RUNS];	/* CPU time of each run */
	double ops[BENCH_MAX_RUNS];	/* operations completed in each run */

	/* Storage: set by the driver before the cell runs. */
	unsigned qd;	   /* operations in flight (parallel: the window) */
	size_t bs;	   /* bytes per operation; 0: not a storage cell */
	int fsync;	   /* write: 1 with fsync, 0 without; else -1 */
	bool timed;	   /* runs last a fixed time or op count: no pair */
	double resident;   /* cold: the largest share of pages resident
			  * before a measured run; else < 0 */
	uint64_t syscalls; /* over all measured runs */
	bool has_lat;
	struct bench_hist lat; /* every measured read's latency */

	/* Derived by bench_cell_finish(); NAN where there is nothing. */
	double median_ms, min_ms, max_ms, stdev_ms;
	double base_median_ms, ratio, limit_ratio;
	double cpu_median_ms, cpu_util, syscalls_per_op;
	double cpu_us_per_op, iops, mb_s;
	struct bench_noise noise;

	struct bench_extra extra[BENCH_CELL_EXTRAS];
	unsigned nextra;

	const char *error; /* NULL, or why the cell has no times */
	char errbuf[400];
};

/*
 * What a cell runs: fn on ctx (ctx->loop set for the styles). before and
 * after (NULL: none) run around every run, warm-ups included, untimed:
 * before prepares what the run needs (drops the page cache, makes a fresh
 * directory), after checks what the run left and cleans up, counting
 * what is wrong in ctx->errors. Either failing (< 0) fails the cell.
 */
struct bench_subject {
	bench_fn fn;
	struct bench_ctx *ctx;
	bench_fn before, after;
};

struct bench_cell *bench_cell_new(const char *backend, const char *style,
				  const char *scenario, const char *limit);
/* Says why the cell has no times (printf-like). */
#define BENCH_CELL_FAIL(c, ...)                                   \
	(snprintf((c)->errbuf, sizeof((c)->errbuf), __VA_ARGS__), \
	 (c)->error = (c)->errbuf)
void bench_cell_extra(struct bench_cell *c, const char *key, double value,
		      int decimals);

/*
 * Runs the cell: bench_opt.warmup runs, then bench_opt.runs measured runs,
 * each preceded by a run of pair (none for a baseline measured against
 * itself). Stops at the first failed run, and says why in c->error.
 * lat_t0 holds bench_opt.n start times; NULL turns latency off.
 */
void bench_cell_measure(struct bench_cell *c, const struct bench_subject *s,
			const struct bench_subject *pair, uint64_t *lat_t0);

/* Fills the derived fields from the runs. */
void bench_cell_finish(struct bench_cell *c);

#endif
