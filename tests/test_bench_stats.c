/* SPDX-License-Identifier: MIT */
/*
 * test_bench_stats.c - the statistics ringbench reports (bench/stats.c):
 * the latency histogram's buckets and percentiles on synthetic data,
 * medians, standard deviations and the noise flag. Pure code: no loop, so
 * plain tests rather than BACKEND_TESTs.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>

#include "../bench/stats.h"

static struct bench_hist *new_hist(void)
{
	struct bench_hist *h = malloc(sizeof(*h));

	cr_assert_not_null(h);
	bench_hist_reset(h);
	return h;
}

/* |got - want| within the histogram's precision: half a bucket, which is
 * 1/(2 * BENCH_HIST_SUB) of the value. */
static void assert_close(uint64_t got, uint64_t want)
{
	double err = fabs((double)got - (double)want);

	cr_assert_leq(err, (double)want / (2 * BENCH_HIST_SUB) + 1,
		      "got %llu, want %llu within 1/%u",
		      (unsigned long long)got, (unsigned long long)want,
		      2 * BENCH_HIST_SUB);
}

Test(bench_stats, buckets_cover_every_value_once_in_order)
{
	uint64_t prev_end = 0;

	/* Each bucket starts where the previous ended, up to the top one. */
	for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++) {
		uint64_t lo = bench_hist_bucket_lo(i);
		uint64_t w = bench_hist_bucket_width(i);

		cr_assert_eq(lo, prev_end, "bucket %u starts at %llu", i,
			     (unsigned long long)lo);
		cr_assert_eq(bench_hist_index(lo), i);
		cr_assert_eq(bench_hist_index(lo + w - 1), i);
		/* Width at most 1/BENCH_HIST_SUB of the bucket's start. */
		if (i >= BENCH_HIST_SUB)
			cr_assert_leq(w * BENCH_HIST_SUB, lo);
		prev_end = lo + w;
	}
	/* Past the top bit everything lands in the last bucket. */
	cr_assert_eq(bench_hist_index(UINT64_MAX), BENCH_HIST_BUCKETS - 1);
}

Test(bench_stats, percentiles_of_a_uniform_ramp)
{
	struct bench_hist *h = new_hist();

	/* 1..100000 ns, once each: the p-th percentile is p * 100000. */
	for (uint64_t v = 1; v <= 100000; v++)
		bench_hist_add(h, v);
	cr_assert_eq(h->count, 100000);
	cr_assert_eq(h->min, 1);
	cr_assert_eq(h->max, 100000);
	assert_close(bench_hist_percentile(h, 0.50), 50000);
	assert_close(bench_hist_percentile(h, 0.90), 90000);
	assert_close(bench_hist_percentile(h, 0.99), 99000);
	assert_close(bench_hist_percentile(h, 0.999), 99900);
	cr_assert_eq(bench_hist_percentile(h, 1.0), 100000);
	free(h);
}

Test(bench_stats, percentiles_find_a_rare_slow_tail)
{
	struct bench_hist *h = new_hist();

	/* 9,880 reads of 5 us, 100 of 300 us, 20 of 8 ms: the shape of a
	 * blocking cell on a VM whose neighbour took the CPU a few times. */
	for (int i = 0; i < 9880; i++)
		bench_hist_add(h, 5000);
	for (int i = 0; i < 100; i++)
		bench_hist_add(h, 300000);
	for (int i = 0; i < 20; i++)
		bench_hist_add(h, 8000000);
	assert_close(bench_hist_percentile(h, 0.50), 5000);
	assert_close(bench_hist_percentile(h, 0.98), 5000);
	/* The 9,900th value is the 20th of 300 us, the 9,990th the 10th of
	 * 8 ms. */
	assert_close(bench_hist_percentile(h, 0.99), 300000);
	assert_close(bench_hist_percentile(h, 0.999), 8000000);
	cr_assert_eq(bench_hist_percentile(h, 1.0), 8000000);
	free(h);
}

Test(bench_stats, percentiles_stay_within_min_and_max)
{
	struct bench_hist *h = new_hist();

	cr_assert_eq(bench_hist_percentile(h, 0.5), 0, "empty: 0");
	bench_hist_add(h, 1000003);
	/* A single value: every percentile is that value, not the middle
	 * of its bucket. */
	cr_assert_eq(bench_hist_percentile(h, 0.01), 1000003);
	cr_assert_eq(bench_hist_percentile(h, 0.5), 1000003);
	cr_assert_eq(bench_hist_percentile(h, 0.999), 1000003);
	free(h);
}

Test(bench_stats, exact_small_values_and_huge_values_clamp)
{
	struct bench_hist *h = new_hist();

	/* Below BENCH_HIST_SUB ns, one bucket per value. */
	for (uint64_t v = 0; v < BENCH_HIST_SUB; v++)
		bench_hist_add(h, v);
	cr_assert_eq(bench_hist_percentile(h, 0.5), BENCH_HIST_SUB / 2 - 1);
	cr_assert_eq(bench_hist_percentile(h, 1.0 / BENCH_HIST_SUB), 0);
	bench_hist_add(h, 1ull << 50); /* 13 days: past the top bucket */
	cr_assert_eq(bench_hist_percentile(h, 1.0), 1ull << 50);
	free(h);
}

Test(bench_stats, merge_adds_counts_and_keeps_extremes)
{
	struct bench_hist *a = new_hist(), *b = new_hist();

	for (int i = 0; i < 50; i++)
		bench_hist_add(a, 1000);
	for (int i = 0; i < 50; i++)
		bench_hist_add(b, 100000);
	bench_hist_merge(a, b);
	cr_assert_eq(a->count, 100);
	cr_assert_eq(a->min, 1000);
	cr_assert_eq(a->max, 100000);
	assert_close(bench_hist_percentile(a, 0.5), 1000);
	assert_close(bench_hist_percentile(a, 0.51), 100000);
	free(a);
	free(b);
}

Test(bench_stats, median_min_max_stdev)
{
	const double odd[] = { 5, 1, 4, 2, 3 };
	const double even[] = { 10, 40, 20, 30 };
	const double one[] = { 7 };

	cr_assert_float_eq(bench_median(odd, 5), 3, 1e-12);
	cr_assert_float_eq(bench_median(even, 4), 25, 1e-12);
	cr_assert_float_eq(bench_median(one, 1), 7, 1e-12);
	cr_assert_float_eq(bench_min(odd, 5), 1, 1e-12);
	cr_assert_float_eq(bench_max(odd, 5), 5, 1e-12);
	/* Sample standard deviation of 1..5: sqrt(2.5). */
	cr_assert_float_eq(bench_stdev(odd, 5), sqrt(2.5), 1e-12);
	cr_assert_float_eq(bench_stdev(one, 1), 0, 1e-12);
	/* The input stays in the caller's order. */
	cr_assert_float_eq(odd[0], 5, 1e-12);
}

Test(bench_stats, noise_flag)
{
	const double quiet[] = { 10.0, 10.2, 9.9, 10.1, 10.0 };
	const double spread[] = { 10, 10, 10, 10, 16 };	      /* max/min 1.6 */
	const double wobbly[] = { 8.5, 10, 11.5, 8.5, 11.5 }; /* cv 14% */
	struct bench_noise n;

	n = bench_noise(quiet, 5);
	cr_assert(!n.noisy);
	cr_assert_lt(n.spread, 1.05);
	n = bench_noise(spread, 5);
	cr_assert(n.noisy);
	cr_assert_float_eq(n.spread, 1.6, 1e-9);
	n = bench_noise(wobbly, 5);
	cr_assert(n.noisy);
	cr_assert_lt(n.spread, BENCH_NOISE_SPREAD);
	cr_assert_gt(n.cv, BENCH_NOISE_CV);
	/* One run cannot show noise. */
	cr_assert(!bench_noise(spread, 1).noisy);
}

/* sync-mt's limit is weak past 1.4/threads of sync's time; one thread
 * never is (there is nothing to split). */
Test(bench_stats, parallel_limit_weak_past_the_slack)
{
	cr_assert_not(bench_parallel_weak(0.54, 2));
	cr_assert_not(bench_parallel_weak(0.69, 2));
	cr_assert(bench_parallel_weak(0.71, 2));
	cr_assert(bench_parallel_weak(0.80, 2));
	cr_assert_not(bench_parallel_weak(0.17, 8));
	cr_assert(bench_parallel_weak(0.30, 8));
	cr_assert_not(bench_parallel_weak(1.00, 1));
	cr_assert_not(bench_parallel_weak(5.00, 0));
}
