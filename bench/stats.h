/* SPDX-License-Identifier: MIT */
/*
 * stats.h - the statistics ringbench reports: median, spread and noise of
 * a cell's run times, and percentiles of its per-operation latencies.
 *
 * Pure code, no I/O: the unit tests (tests/test_bench_stats.c) link it
 * alone.
 *
 * The latency histogram has fixed log-scale buckets, so recording an
 * operation is an array increment, never an allocation: values below
 * BENCH_HIST_SUB ns have a bucket each, and every power of two above is
 * split into BENCH_HIST_SUB buckets, so a percentile (a bucket's middle)
 * is within 1/128 of the true value: fio's latency percentiles, which
 * the storage cells are compared with, are bucketed the same way
 * (FIO_IO_U_PLAT_BITS 6). The minimum and maximum are kept exactly.
 */
#ifndef RINGBENCH_STATS_H
#define RINGBENCH_STATS_H

#include <stdbool.h>
#include <stdint.h>

#define BENCH_HIST_SUB_BITS 6
#define BENCH_HIST_SUB	    (1u << BENCH_HIST_SUB_BITS)
/* Powers of two up to 2^40 ns (18 minutes); longer values share the top
 * bucket, and max still says how long the longest was. */
#define BENCH_HIST_TOP_BIT 40
#define BENCH_HIST_BUCKETS \
	((BENCH_HIST_TOP_BIT - BENCH_HIST_SUB_BITS + 2) * BENCH_HIST_SUB)

struct bench_hist {
	uint64_t count;
	uint64_t min, max; /* ns; min is UINT64_MAX while empty */
	uint64_t bucket[BENCH_HIST_BUCKETS];
};

void bench_hist_reset(struct bench_hist *h);

/* The bucket a value falls in, and the range [lo, lo + width) it covers. */
static inline unsigned bench_hist_index(uint64_t ns)
{
	unsigned bit, idx;

	if (ns < BENCH_HIST_SUB)
		return (unsigned)ns;
	bit = 63u - (unsigned)__builtin_clzll(ns);
	if (bit > BENCH_HIST_TOP_BIT)
		return BENCH_HIST_BUCKETS - 1;
	idx = (bit - BENCH_HIST_SUB_BITS + 1) * BENCH_HIST_SUB +
	      (unsigned)((ns >> (bit - BENCH_HIST_SUB_BITS)) &
			 (BENCH_HIST_SUB - 1));
	return idx;
}

uint64_t bench_hist_bucket_lo(unsigned idx);
uint64_t bench_hist_bucket_width(unsigned idx);

static inline void bench_hist_add(struct bench_hist *h, uint64_t ns)
{
	h->bucket[bench_hist_index(ns)]++;
	h->count++;
	if (ns < h->min)
		h->min = ns;
	if (ns > h->max)
		h->max = ns;
}

void bench_hist_merge(struct bench_hist *into, const struct bench_hist *from);

/*
 * The value below which a fraction p (0 < p <= 1) of the recorded values
 * lie: the middle of the bucket holding the ceil(p * count)-th smallest
 * value, kept within [min, max]. 0 for an empty histogram.
 */
uint64_t bench_hist_percentile(const struct bench_hist *h, double p);

/* Run times: n >= 1 values. */
double bench_median(const double *v, unsigned n);
double bench_min(const double *v, unsigned n);
double bench_max(const double *v, unsigned n);
/* Sample standard deviation (n - 1); 0 for one value. */
double bench_stdev(const double *v, unsigned n);

/*
 * A cell is noisy when its slowest run took more than 1.5 times its
 * fastest, or its standard deviation is more than 10% of its median. The
 * thresholds are what separates a quiet run of this bench from one
 * disturbed by another process on a 2-vCPU VM; a noisy cell's ratios are
 * worth less, and the report says how to get better ones.
 */
#define BENCH_NOISE_SPREAD 1.5
#define BENCH_NOISE_CV	   0.10

struct bench_noise {
	bool noisy;
	double spread; /* max / min */
	double cv;     /* stdev / median */
};

struct bench_noise bench_noise(const double *v, unsigned n);

/*
 * sync-mt, the parallel rows' limit, splits the reads over one thread per
 * CPU, so it takes about 1/threads of sync's time where the CPUs really
 * run at once; measured 0.54-0.64 on a quiet 2-vCPU VM, 0.80 when the host
 * took part of a vCPU. It is weak, and every "x sync-mt" of the run is
 * measured against less than the machine can do, when it takes more than
 * BENCH_PARALLEL_SLACK times that: the CPUs did not all run (a busy host,
 * a VM's neighbours), or the threads contended (one file read from every
 * CPU). ratio: sync-mt's median over its paired sync runs'.
 */
#define BENCH_PARALLEL_SLACK 1.4

bool bench_parallel_weak(double ratio, unsigned threads);

#endif
