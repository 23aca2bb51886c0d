/* SPDX-License-Identifier: MIT */
/*
 * stats.c - medians, spreads, noise and latency percentiles (see stats.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

void bench_hist_reset(struct bench_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

uint64_t bench_hist_bucket_lo(unsigned idx)
{
	unsigned bit, sub;

	if (idx < BENCH_HIST_SUB)
		return idx;
	bit = idx / BENCH_HIST_SUB + BENCH_HIST_SUB_BITS - 1;
	sub = idx % BENCH_HIST_SUB;
	return (uint64_t)(BENCH_HIST_SUB + sub) << (bit - BENCH_HIST_SUB_BITS);
}

uint64_t bench_hist_bucket_width(unsigned idx)
{
	if (idx < BENCH_HIST_SUB)
		return 1;
	return 1ull << (idx / BENCH_HIST_SUB - 1);
}

void bench_hist_merge(struct bench_hist *into, const struct bench_hist *from)
{
	if (!from->count)
		return;
	for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++)
		into->bucket[i] += from->bucket[i];
	into->count += from->count;
	if (from->min < into->min)
		into->min = from->min;
	if (from->max > into->max)
		into->max = from->max;
}

uint64_t bench_hist_percentile(const struct bench_hist *h, double p)
{
	uint64_t rank, seen = 0, v;
	unsigned i;

	if (!h->count)
		return 0;
	if (p >= 1)
		return h->max;
	rank = (uint64_t)ceil(p * (double)h->count);
	if (rank < 1)
		rank = 1;
	for (i = 0; i < BENCH_HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= rank)
			break;
	}
	if (i == BENCH_HIST_BUCKETS)
		return h->max;
	v = bench_hist_bucket_lo(i) + bench_hist_bucket_width(i) / 2;
	if (v < h->min)
		v = h->min;
	if (v > h->max)
		v = h->max;
	return v;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double bench_median(const double *v, unsigned n)
{
	double *s, m;

	if (!n)
		return NAN;
	s = malloc(n * sizeof(*s));
	if (!s)
		return NAN;
	memcpy(s, v, n * sizeof(*v));
	qsort(s, n, sizeof(*s), cmp_double);
	m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	free(s);
	return m;
}

double bench_min(const double *v, unsigned n)
{
	double m = n ? v[0] : NAN;

	for (unsigned i = 1; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
}

double bench_max(const double *v, unsigned n)
{
	double m = n ? v[0] : NAN;

	for (unsigned i = 1; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

double bench_stdev(const double *v, unsigned n)
{
	double mean = 0, ss = 0;

	if (n < 2)
		return 0;
	for (unsigned i = 0; i < n; i++)
		mean += v[i];
	mean /= n;
	for (unsigned i = 0; i < n; i++)
		ss += (v[i] - mean) * (v[i] - mean);
	return sqrt(ss / (n - 1));
}

struct bench_noise bench_noise(const double *v, unsigned n)
{
	struct bench_noise r = { 0 };
	double lo = bench_min(v, n), med = bench_median(v, n);

	if (n < 2)
		return r;
	r.spread = lo > 0 ? bench_max(v, n) / lo : INFINITY;
	r.cv = med > 0 ? bench_stdev(v, n) / med : INFINITY;
	r.noisy = r.spread > BENCH_NOISE_SPREAD || r.cv > BENCH_NOISE_CV;
	return r;
}

bool bench_parallel_weak(double ratio, unsigned threads)
{
	return threads >= 2 && ratio * threads > BENCH_PARALLEL_SLACK;
}
