/* SPDX-License-Identifier: MIT */
/*
 * report.c - the text report, JSON lines and CSV (see report.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "report.h"

static FILE *json_out, *csv_out;
static char out_dir[512], stamp[64];

FILE *bench_report_text(void)
{
	return bench_opt.json ? stderr : stdout;
}

/* ------------------------------------------------------------------ JSON */

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

/* A number, or null when there is none: JSON has no NaN. */
static void json_num(FILE *f, double v, int decimals)
{
	if (isfinite(v))
		fprintf(f, "%.*f", decimals, v);
	else
		fputs("null", f);
}

static void json_kv_str(FILE *f, const char *key, const char *v)
{
	fprintf(f, ",\"%s\":", key);
	json_str(f, v);
}

static void json_kv_num(FILE *f, const char *key, double v, int decimals)
{
	fprintf(f, ",\"%s\":", key);
	json_num(f, v, decimals);
}

static void json_meta(FILE *f, const struct bench_machine *m)
{
	fputs("{\"meta\":{\"kernel\":", f);
	json_str(f, m->kernel);
	json_kv_str(f, "cpu", m->cpu);
	fprintf(f, ",\"cpus\":%u,\"cpus_online\":%u", m->cpus, m->cpus_online);
	json_kv_str(f, "liburing", m->liburing);
	json_kv_str(f, "compiler", m->compiler);
	json_kv_str(f, "commit", m->commit);
	json_kv_num(f, "io_uring_disabled",
		    m->io_uring_disabled < 0 ? NAN : m->io_uring_disabled, 0);
	json_kv_num(f, "syscall_ns", m->syscall_ns, 1);
	json_kv_num(f, "enter_ns", m->enter_ns < 0 ? NAN : m->enter_ns, 1);
	if (m->enter_ns < 0)
		json_kv_str(f, "enter_error", m->enter_error);
	json_kv_num(f, "clock_ns", m->clock_ns, 1);
	json_kv_str(f, "clocksource", m->clocksource);
	json_kv_str(f, "ringloop", rl_version_string());
	json_kv_str(f, "date", m->date);
	json_kv_str(f, "args", bench_opt.args);
	fprintf(f, ",\"n\":%u,\"runs\":%u,\"warmup\":%u,\"latency\":%s}}\n",
		bench_opt.n, bench_opt.runs, bench_opt.warmup,
		bench_opt.latency ? "true" : "false");
}

/* The io_uring ring the loop cells run on, as a loop opened with their
 * options reports it (the default ring may have been refused), and the
 * flags it has. */
static const char *ring_ran(unsigned *flags)
{
	static const char *ring;
	static unsigned ring_flags;
	struct rl_options o = bench_opt.loop;
	rl_loop *loop;

	if (!ring) {
		ring = "none";
		ring_flags = o.flags;
		o.backend = RL_BACKEND_URING;
		if (rl_loop_open(&loop, &o) == 0) {
			ring = rl_loop_ring(loop);
			ring_flags = rl_loop_flags(loop);
			rl_loop_close(loop);
		}
	}
	*flags = ring_flags;
	return ring;
}

/* The knobs as they ran: a default is written as the value it stands
 * for, and a knob that is not set (the io-wq cap) as null. */
static void json_knobs(FILE *f)
{
	const struct rl_options *o = &bench_opt.loop;
	unsigned ran;
	const char *ring = ring_ran(&ran);

	fprintf(f,
		",\"knobs\":{\"size\":%zu,\"files\":%u,\"window\":%u,"
		"\"entries\":%u,\"cq_entries\":%u,\"sqpoll\":%d,"
		"\"single_issuer\":%d,\"defer_taskrun\":%d,\"coop_taskrun\":%d,"
		"\"no_link\":%d,\"no_direct\":%d,\"register_ring\":%d,",
		bench_opt.size, bench_opt.files, bench_effective_window(),
		bench_effective_entries(), bench_effective_cq_entries(),
		!!(o->flags & RL_SQPOLL), !!(ran & RL_SINGLE_ISSUER),
		!!(ran & RL_DEFER_TASKRUN), !!(o->flags & RL_COOP_TASKRUN),
		!!(o->flags & RL_NO_LINK), !!(o->flags & RL_NO_DIRECT),
		!!(o->flags & RL_REGISTER_RING));
	fprintf(f, "\"ring\":\"%s\",", ring);
	fputs("\"iowq_max\":", f);
	json_num(f, o->iowq_max ? o->iowq_max : NAN, 0);
	fprintf(f, ",\"submit_batch\":%u", o->submit_batch);
	/* null: the library's default (a spin on group loops only). */
	fputs(",\"idle_spin_ns\":", f);
	json_num(f,
		 o->idle_spin_ns
			 ? (double)(o->idle_spin_ns < 0 ? 0 : o->idle_spin_ns)
			 : NAN,
		 0);
	fprintf(f,
		",\"pool_threads\":%u,\"no_inline\":%d,\"force_async\":%d,"
		"\"iopoll\":%d,\"fixed_bufs\":%d,\"coro_window\":%zu,"
		"\"pair\":%d}",
		bench_effective_pool_threads(), !!(o->flags & RL_NO_INLINE),
		!!(o->flags & RL_FORCE_ASYNC), !!(o->flags & RL_IOPOLL),
		bench_opt.fixed_bufs, bench_effective_coro_window(),
		bench_opt.pair);
}

static double pct_us(const struct bench_cell *c, double p)
{
	return c->has_lat && c->lat.count
		       ? (double)bench_hist_percentile(&c->lat, p) / 1e3
		       : NAN;
}

/* The bytes each operation moves: the file size of the seed's reads. */
static size_t cell_bytes(const struct bench_cell *c)
{
	return c->bs ? c->bs : bench_opt.size;
}

/* What a storage cell is: queue depth, block size, and the write and
 * cold specifics. */
static void json_storage_id(FILE *f, const struct bench_cell *c)
{
	if (!c->bs)
		return;
	fprintf(f, ",\"qd\":%u,\"bs\":%zu", c->qd, c->bs);
	if (c->fsync >= 0)
		fprintf(f, ",\"fsync\":%s", c->fsync ? "true" : "false");
	if (!strcmp(c->scenario, "cold"))
		fprintf(f, ",\"files\":%u", bench_opt.cold_files);
}

static void json_cell(FILE *f, const struct bench_cell *c)
{
	fputs("{\"backend\":", f);
	json_str(f, c->backend);
	json_kv_str(f, "style", c->style);
	json_kv_str(f, "scenario", c->scenario);
	if (c->mode)
		json_kv_str(f, "mode", c->mode);
	fprintf(f, ",\"n\":%u,\"runs\":%u,\"warmup\":%u,\"bytes\":%zu", c->n,
		c->runs, bench_opt.warmup, cell_bytes(c));
	json_storage_id(f, c);
	if (c->error) {
		if (c->limit)
			json_kv_str(f, "limit", c->limit);
		json_kv_str(f, "error", c->error);
	} else {
		json_kv_num(f, "median_ms", c->median_ms, 3);
		json_kv_num(f, "min_ms", c->min_ms, 3);
		json_kv_num(f, "max_ms", c->max_ms, 3);
		json_kv_num(f, "stdev_ms", c->stdev_ms, 3);
		fputs(",\"runs_ms\":[", f);
		for (unsigned r = 0; r < c->runs; r++) {
			if (r)
				fputc(',', f);
			json_num(f, c->ms[r], 3);
		}
		fputc(']', f);
		json_kv_num(f, "baseline_ms", c->base_median_ms, 3);
		json_kv_num(f, "ratio", c->ratio, 3);
		if (c->limit)
			json_kv_str(f, "limit", c->limit);
		else
			fputs(",\"limit\":null", f);
		json_kv_num(f, "limit_ratio", c->limit_ratio, 3);
		json_kv_num(f, "ops_per_s", c->iops, 0);
		json_kv_num(f, "syscalls_per_op", c->syscalls_per_op, 3);
		json_kv_num(f, "cpu_ms", c->cpu_median_ms, 3);
		json_kv_num(f, "cpu_us_per_op", c->cpu_us_per_op, 3);
		json_kv_num(f, "cpu_util", c->cpu_util, 3);
		json_kv_num(f, "lat_p50_us", pct_us(c, 0.50), 3);
		json_kv_num(f, "lat_p99_us", pct_us(c, 0.99), 3);
		json_kv_num(f, "lat_p999_us", pct_us(c, 0.999), 3);
		json_kv_num(f, "lat_max_us", pct_us(c, 1.0), 3);
		fprintf(f, ",\"noisy\":%s", c->noise.noisy ? "true" : "false");
		if (c->bs) {
			json_kv_num(f, "iops", c->iops, 0);
			json_kv_num(f, "mb_s", c->mb_s, 2);
		}
		if (c->resident >= 0)
			json_kv_num(f, "resident_before", c->resident, 4);
	}
	for (unsigned i = 0; i < c->nextra; i++)
		json_kv_num(f, c->extra[i].key, c->extra[i].value,
			    c->extra[i].decimals);
	json_knobs(f);
	fputs("}\n", f);
	fflush(f);
}

/* ------------------------------------------------------------------- CSV */

static void csv_num(FILE *f, double v, int decimals)
{
	if (isfinite(v))
		fprintf(f, "%.*f", decimals, v);
	fputc(',', f);
}

static void csv_cell(FILE *f, const struct bench_cell *c)
{
	fprintf(f, "%s,%s,%s,%u,%u,%u,%zu,", c->backend, c->style, c->scenario,
		c->n, c->runs, bench_opt.warmup, cell_bytes(c));
	csv_num(f, c->median_ms, 3);
	csv_num(f, c->min_ms, 3);
	csv_num(f, c->max_ms, 3);
	csv_num(f, c->stdev_ms, 3);
	csv_num(f, c->base_median_ms, 3);
	csv_num(f, c->ratio, 3);
	fprintf(f, "%s,", c->limit ? c->limit : "");
	csv_num(f, c->limit_ratio, 3);
	csv_num(f, c->iops, 0);
	csv_num(f, c->syscalls_per_op, 3);
	csv_num(f, c->cpu_median_ms, 3);
	csv_num(f, c->cpu_us_per_op, 3);
	csv_num(f, c->cpu_util, 3);
	csv_num(f, c->error ? NAN : pct_us(c, 0.50), 3);
	csv_num(f, c->error ? NAN : pct_us(c, 0.99), 3);
	csv_num(f, c->error ? NAN : pct_us(c, 0.999), 3);
	csv_num(f, c->error ? NAN : pct_us(c, 1.0), 3);
	fprintf(f, "%s,", c->error ? "" : c->noise.noisy ? "1" : "0");
	fprintf(f, "%s,", c->mode ? c->mode : "");
	if (c->bs)
		fprintf(f, "%u,%zu,", c->qd, c->bs);
	else
		fputs(",,", f);
	csv_num(f, c->bs ? c->iops : NAN, 0);
	csv_num(f, c->mb_s, 2);
	fprintf(f, "%s,", c->fsync < 0 ? "" : c->fsync ? "1" : "0");
	csv_num(f, c->resident >= 0 ? c->resident : NAN, 4);
	for (unsigned r = 0; r < c->runs && !c->error; r++)
		fprintf(f, "%s%.3f", r ? " " : "", c->ms[r]);
	fputc(',', f);
	for (unsigned i = 0; i < c->nextra; i++)
		fprintf(f, "%s%s=%.*f", i ? " " : "", c->extra[i].key,
			c->extra[i].decimals, c->extra[i].value);
	fputc(',', f);
	if (c->error) {
		fputc('"', f);
		for (const char *s = c->error; *s; s++) {
			if (*s == '"')
				fputc('"', f);
			fputc(*s, f);
		}
		fputc('"', f);
	}
	fputc('\n', f);
	fflush(f);
}

/* ------------------------------------------------------------------ text */

static void text_header(FILE *f, const struct bench_machine *m)
{
	const struct rl_options *o = &bench_opt.loop;
	unsigned ran;
	char window[32] = "all";

	if (bench_opt.window && bench_opt.window < bench_opt.n)
		snprintf(window, sizeof(window), "%u", bench_opt.window);
	fprintf(f,
		"ringbench: %u reads of a %zu-byte file (%u file%s), %u runs "
		"per cell after %u warm-up run%s, window %s",
		bench_opt.n, bench_opt.size, bench_opt.files,
		bench_opt.files > 1 ? "s" : "", bench_opt.runs,
		bench_opt.warmup, bench_opt.warmup == 1 ? "" : "s", window);
	if (!bench_opt.pair)
		fputs(", unpaired", f);
	if (o->flags & RL_SQPOLL)
		fputs(", sqpoll", f);
	fprintf(f, ", ring %s", ring_ran(&ran));
	if (o->flags & RL_COOP_TASKRUN)
		fputs(", coop-taskrun", f);
	if (o->flags & RL_NO_LINK)
		fputs(", no-link", f);
	if (o->flags & RL_NO_DIRECT)
		fputs(", no-direct", f);
	if (o->flags & RL_REGISTER_RING)
		fputs(", register-ring", f);
	if (o->flags & RL_NO_INLINE)
		fputs(", no-inline", f);
	if (o->entries || o->cq_entries)
		fprintf(f, ", entries %u/%u", bench_effective_entries(),
			bench_effective_cq_entries());
	if (o->iowq_max)
		fprintf(f, ", iowq-max %u", o->iowq_max);
	if (o->submit_batch)
		fprintf(f, ", submit-batch %u", o->submit_batch);
	if (o->flags & RL_FORCE_ASYNC)
		fputs(", force-async", f);
	if (o->flags & RL_IOPOLL)
		fputs(", iopoll", f);
	if (o->pool_threads)
		fprintf(f, ", pool-threads %u", o->pool_threads);
	if (o->idle_spin_ns)
		fprintf(f, ", idle-spin %lld ns",
			(long long)(o->idle_spin_ns < 0 ? 0 : o->idle_spin_ns));
	if (bench_opt.coro_window || bench_opt.coro_window_all)
		fprintf(f, ", coro-window %zu", bench_effective_coro_window());
	if (!bench_opt.latency)
		fputs(", no latency", f);
	fprintf(f,
		"\nmachine: %s, %u CPU%s (%u online), Linux %s, liburing %s, "
		"%s, commit %s\n",
		m->cpu, m->cpus, m->cpus == 1 ? "" : "s", m->cpus_online,
		m->kernel, m->liburing, m->compiler, m->commit);
	fprintf(f, "costs: a trivial syscall (getppid) %.0f ns; ",
		m->syscall_ns);
	if (m->enter_ns >= 0)
		fprintf(f, "io_uring_enter with nothing to do %.0f ns; ",
			m->enter_ns);
	else
		fprintf(f, "io_uring_enter: none (%s); ", m->enter_error);
	fprintf(f, "a clock read %.0f ns (%s)\n", m->clock_ns,
		m->clocksource[0] ? m->clocksource : "clocksource unknown");
	if (m->io_uring_disabled < 0)
		fputs("kernel.io_uring_disabled: absent (a kernel before 6.6)\n",
		      f);
	else
		fprintf(f, "kernel.io_uring_disabled = %d%s\n",
			m->io_uring_disabled,
			m->io_uring_disabled ? " (io_uring restricted)" : "");
	fputc('\n', f);
	fflush(f);
}

/* "randread qd 32", "write parallel fsync", "cold blocking": what a
 * storage cell is, in a few words. */
static const char *storage_name(const struct bench_cell *c, char *buf,
				size_t len)
{
	if (c->timed)
		snprintf(buf, len, "%s qd %u", c->scenario, c->qd);
	else
		snprintf(buf, len, "%s %s%s", c->scenario,
			 c->mode ? c->mode : "", c->fsync > 0 ? " fsync" : "");
	return buf;
}

static void text_storage_progress(FILE *f, const struct bench_cell *c)
{
	char name[64], pool[32] = "";

	for (unsigned i = 0; i < c->nextra; i++)
		if (!strcmp(c->extra[i].key, "pool_threads"))
			snprintf(pool, sizeof(pool), " (%.0f threads)",
				 c->extra[i].value);
	fprintf(f, "%-10s %-8s %-22s%s: ", c->backend, c->style,
		storage_name(c, name, sizeof(name)), pool);
	if (c->error) {
		fprintf(f, "error: %s\n", c->error);
		fflush(f);
		return;
	}
	fprintf(f, "%8.0f IOPS %7.1f MB/s", c->iops, c->mb_s);
	if (!c->timed)
		fprintf(f, "  %8.2f ms %5.2fx sync", c->median_ms, c->ratio);
	if (c->limit && isfinite(c->limit_ratio) && strcmp(c->limit, "sync"))
		fprintf(f, " %5.2fx %s", c->limit_ratio, c->limit);
	fprintf(f, "  cpu %.2f us/op", c->cpu_us_per_op);
	if (c->has_lat)
		fprintf(f, "  p50 %.1f p99 %.1f us", pct_us(c, 0.50),
			pct_us(c, 0.99));
	if (c->resident >= 0)
		fprintf(f, "  resident %.2f%%", 100 * c->resident);
	fprintf(f, "%s\n", c->noise.noisy ? "  NOISY" : "");
	fflush(f);
}

static void text_progress(FILE *f, const struct bench_cell *c)
{
	if (c->bs) {
		text_storage_progress(f, c);
		return;
	}
	fprintf(f, "%-10s %-8s %-8s reading file %u times: ", c->backend,
		c->style, c->scenario, c->n);
	if (c->error) {
		fprintf(f, "error: %s\n", c->error);
		fflush(f);
		return;
	}
	fprintf(f, "%8.2f ms +-%4.1f%% %5.2fx sync", c->median_ms,
		100 * c->stdev_ms / c->median_ms, c->ratio);
	if (c->limit && strcmp(c->limit, "sync") && isfinite(c->limit_ratio))
		fprintf(f, " %5.2fx %s", c->limit_ratio, c->limit);
	fprintf(f, "  cpu %.2f us/op", c->cpu_us_per_op);
	if (c->has_lat)
		fprintf(f, "  p99 %.1f us", pct_us(c, 0.99));
	fprintf(f, "  %.2f syscalls/op%s\n", c->syscalls_per_op,
		c->noise.noisy ? "  NOISY" : "");
	fflush(f);
}

static void text_num(FILE *f, int width, double v, int decimals)
{
	if (isfinite(v))
		fprintf(f, " %*.*f", width, decimals, v);
	else
		fprintf(f, " %*s", width, "-");
}

static void read_tables(FILE *f, struct bench_cell *const *cells, unsigned n);
static void storage_table(FILE *f, struct bench_cell *const *cells, unsigned n);

/* Says when sync-mt, the parallel rows' limit, did not get the CPUs'
 * worth of speed-up (stats.h, bench_parallel_weak()). */
static void parallel_note(FILE *f, struct bench_cell *const *cells, unsigned n)
{
	unsigned threads = bench_sync_mt_threads();

	for (unsigned i = 0; i < n; i++) {
		const struct bench_cell *c = cells[i];

		if (c->error || strcmp(c->backend, "sync-mt") ||
		    strcmp(c->scenario, "parallel") ||
		    !bench_parallel_weak(c->ratio, threads))
			continue;
		fprintf(f,
			"\nPARALLEL: sync-mt took %.2fx sync's time with %u "
			"threads (%.2fx if the CPUs all ran at once): either "
			"they did not (a busy host; a VM's neighbours count "
			"too) or the threads contended (--files K spreads the "
			"reads over distinct files). Every \"x sync-mt\" above "
			"is then measured against a weaker limit than the "
			"machine's; compare the spread and tpc rows across runs "
			"only where sync-mt took about 1/CPUs of sync.\n",
			c->ratio, threads, 1.0 / threads);
	}
}

void bench_report_table(struct bench_cell *const *cells, unsigned n)
{
	FILE *f = bench_report_text();
	unsigned noisy = 0, reads = 0, storage = 0;

	for (unsigned i = 0; i < n; i++) {
		storage += cells[i]->bs != 0;
		reads += cells[i]->bs == 0;
	}
	if (reads)
		read_tables(f, cells, n);
	if (storage)
		storage_table(f, cells, n);

	fprintf(f, "\nruns (ms, in the order they ran):\n");
	for (unsigned i = 0; i < n; i++) {
		const struct bench_cell *c = cells[i];
		char name[64];

		if (c->error)
			continue;
		fprintf(f, "%-10s %-8s %-8s", c->backend, c->style,
			c->bs ? storage_name(c, name, sizeof(name))
			      : c->scenario);
		for (unsigned r = 0; r < c->runs; r++)
			fprintf(f, " %.2f", c->ms[r]);
		fputc('\n', f);
		noisy += c->noise.noisy;
	}
	if (noisy) {
		fprintf(f,
			"\nNOISY: %u cell%s whose slowest run took more than "
			"%.1fx its fastest (random I/O: its lowest rate), or "
			"whose stdev is more than %.0f%% of its median:\n",
			noisy, noisy == 1 ? "" : "s", BENCH_NOISE_SPREAD,
			100 * BENCH_NOISE_CV);
		for (unsigned i = 0; i < n; i++) {
			const struct bench_cell *c = cells[i];
			char name[64];

			if (c->error || !c->noise.noisy)
				continue;
			fprintf(f, "  %s %s %s: max/min %.2f, stdev %.0f%%\n",
				c->backend, c->style,
				c->bs ? storage_name(c, name, sizeof(name))
				      : c->scenario,
				c->noise.spread, 100 * c->noise.cv);
		}
		fprintf(f,
			"  Their ratios are worth less. Run again with more "
			"runs (--runs %u), on a quieter machine (nothing else "
			"running; a VM's neighbours count too), and compare "
			"runs with scripts/compare.sh.\n",
			bench_opt.runs * 2 + 1 > BENCH_MAX_RUNS
				? BENCH_MAX_RUNS
				: bench_opt.runs * 2 + 1);
	}
	parallel_note(f, cells, n);
	fflush(f);
}

/* The seed's read scenarios: times, ratios, cost and latency. */
static void read_tables(FILE *f, struct bench_cell *const *cells, unsigned n)
{
	fprintf(f, "\ntime: median of the runs; sync_ms: median of the paired "
		   "sync runs; ratio = median / sync_ms; x_limit = ratio / the "
		   "limit row's ratio\n");
	fprintf(f, "%-10s %-8s %-8s %9s %6s %9s %9s %9s %6s %-9s %7s %7s %s\n",
		"backend", "style", "scenario", "median_ms", "+-sd%", "min_ms",
		"max_ms", "sync_ms", "ratio", "limit", "x_limit", "sys/op",
		"noise");
	for (unsigned i = 0; i < n; i++) {
		const struct bench_cell *c = cells[i];

		if (c->bs)
			continue;
		fprintf(f, "%-10s %-8s %-8s", c->backend, c->style,
			c->scenario);
		if (c->error) {
			fprintf(f, "  error: %s\n", c->error);
			continue;
		}
		text_num(f, 9, c->median_ms, 2);
		text_num(f, 6, 100 * c->stdev_ms / c->median_ms, 1);
		text_num(f, 9, c->min_ms, 2);
		text_num(f, 9, c->max_ms, 2);
		text_num(f, 9, c->base_median_ms, 2);
		text_num(f, 6, c->ratio, 2);
		fprintf(f, " %-9s", c->limit ? c->limit : "-");
		text_num(f, 7, c->limit_ratio, 2);
		text_num(f, 7, c->syscalls_per_op, 2);
		fprintf(f, " %s\n", c->noise.noisy ? "NOISY" : "ok");
	}

	fprintf(f, "\ncost and latency: CPU time of the process per run "
		   "(all threads), per read, and per wall second; latency of "
		   "each read, submit to callback\n");
	fprintf(f, "%-10s %-8s %-8s %9s %9s %6s %9s %9s %9s %9s\n", "backend",
		"style", "scenario", "cpu_ms", "cpu_us/op", "util", "p50_us",
		"p99_us", "p99.9_us", "max_us");
	for (unsigned i = 0; i < n; i++) {
		const struct bench_cell *c = cells[i];

		if (c->error || c->bs)
			continue;
		fprintf(f, "%-10s %-8s %-8s", c->backend, c->style,
			c->scenario);
		text_num(f, 9, c->cpu_median_ms, 2);
		text_num(f, 9, c->cpu_us_per_op, 3);
		text_num(f, 6, c->cpu_util, 2);
		text_num(f, 9, pct_us(c, 0.50), 1);
		text_num(f, 9, pct_us(c, 0.99), 1);
		text_num(f, 9, pct_us(c, 0.999), 1);
		text_num(f, 9, pct_us(c, 1.0), 1);
		fputc('\n', f);
	}
}

/* The storage cells: rates, latency, cost. */
static void storage_table(FILE *f, struct bench_cell *const *cells, unsigned n)
{
	fprintf(f, "\nstorage: IOPS = median of the runs' operations per "
		   "second; MB/s = IOPS x bs; latency of each operation, "
		   "submit to callback; x_limit = the limit row's IOPS / the "
		   "cell's (random I/O), else as above\n");
	fprintf(f,
		"%-10s %-8s %-22s %7s %9s %8s %8s %8s %9s %9s %6s %-9s "
		"%7s %s\n",
		"backend", "style", "scenario", "bs", "iops", "mb_s", "p50_us",
		"p99_us", "p99.9_us", "cpu_us/op", "util", "limit", "x_limit",
		"extra");
	for (unsigned i = 0; i < n; i++) {
		const struct bench_cell *c = cells[i];
		char name[64];

		if (!c->bs)
			continue;
		fprintf(f, "%-10s %-8s %-22s %7zu", c->backend, c->style,
			storage_name(c, name, sizeof(name)), c->bs);
		if (c->error) {
			fprintf(f, "  error: %s\n", c->error);
			continue;
		}
		text_num(f, 9, c->iops, 0);
		text_num(f, 8, c->mb_s, 1);
		text_num(f, 8, pct_us(c, 0.50), 1);
		text_num(f, 8, pct_us(c, 0.99), 1);
		text_num(f, 9, pct_us(c, 0.999), 1);
		text_num(f, 9, c->cpu_us_per_op, 2);
		text_num(f, 6, c->cpu_util, 2);
		fprintf(f, " %-9s", c->limit ? c->limit : "-");
		text_num(f, 7, c->limit_ratio, 2);
		if (c->resident >= 0)
			fprintf(f, " resident %.2f%%", 100 * c->resident);
		for (unsigned e = 0; e < c->nextra; e++)
			fprintf(f, " %s=%.*f", c->extra[e].key,
				c->extra[e].decimals, c->extra[e].value);
		fputc('\n', f);
	}
}

/* ----------------------------------------------------------------- files */

static FILE *create_exclusive(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);

	return fd < 0 ? NULL : fdopen(fd, "w");
}

static void open_files(void)
{
	char path[600];
	time_t t = time(NULL);
	struct stat st;
	const char *dir = bench_opt.out_dir;

	if (bench_opt.no_out)
		return;
	if (!dir) {
		if (stat("bench", &st) < 0 || !S_ISDIR(st.st_mode))
			return; /* not run from the repository */
		dir = "bench/results";
	}
	snprintf(out_dir, sizeof(out_dir), "%s", dir);
	if (mkdir(out_dir, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "ringbench: mkdir %s: %s\n", out_dir,
			strerror(errno));
		exit(1);
	}
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime(&t));
	/* Two runs in the same second get their own files. */
	for (int i = 0; i < 100 && !json_out; i++) {
		if (i)
			snprintf(stamp + 15, sizeof(stamp) - 15, "-%d", i);
		snprintf(path, sizeof(path), "%s/%s.json", out_dir, stamp);
		json_out = create_exclusive(path);
	}
	snprintf(path, sizeof(path), "%s/%s.csv", out_dir, stamp);
	csv_out = json_out ? fopen(path, "w") : NULL;
	if (!json_out || !csv_out) {
		fprintf(stderr, "ringbench: cannot write results in %s: %s\n",
			out_dir, strerror(errno));
		exit(1);
	}
	fprintf(csv_out,
		"backend,style,scenario,n,runs,warmup,bytes,median_ms,min_ms,"
		"max_ms,stdev_ms,baseline_ms,ratio,limit,limit_ratio,ops_per_s,"
		"syscalls_per_op,cpu_ms,cpu_us_per_op,cpu_util,lat_p50_us,"
		"lat_p99_us,lat_p999_us,lat_max_us,noisy,mode,qd,bs,iops,mb_s,"
		"fsync,resident_before,runs_ms,extras,error\n");
}

void bench_report_open(const struct bench_machine *m)
{
	open_files();
	text_header(bench_report_text(), m);
	if (bench_opt.json)
		json_meta(stdout, m);
	if (json_out)
		json_meta(json_out, m);
	fflush(stdout);
}

void bench_report_cell(const struct bench_cell *c)
{
	text_progress(bench_report_text(), c);
	if (bench_opt.json)
		json_cell(stdout, c);
	if (json_out)
		json_cell(json_out, c);
	if (csv_out)
		csv_cell(csv_out, c);
}

void bench_report_json(const char *fmt, ...)
{
	va_list ap;

	if (bench_opt.json) {
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
		fflush(stdout);
	}
	if (json_out) {
		va_start(ap, fmt);
		vfprintf(json_out, fmt, ap);
		va_end(ap);
		fflush(json_out);
	}
}

static void remove_run_files(void)
{
	char path[600];

	snprintf(path, sizeof(path), "%s/%s.json", out_dir, stamp);
	unlink(path);
	snprintf(path, sizeof(path), "%s/%s.csv", out_dir, stamp);
	unlink(path);
}

void bench_report_close(struct bench_cell *const *cells, unsigned n)
{
	unsigned timed = 0;

	for (unsigned i = 0; i < n; i++)
		timed += !cells[i]->error;
	if (!json_out)
		return;
	fclose(json_out);
	fclose(csv_out);
	json_out = csv_out = NULL;
	if (!n) {
		remove_run_files();
		return;
	}
	if (!timed) {
		fprintf(stderr,
			"ringbench: no cell ran; %s/latest.* left as "
			"they were, this run is in %s/%s.json\n",
			out_dir, out_dir, stamp);
		return;
	}
	/* The newest run, for scripts/plot.sh and the README. */
	for (int i = 0; i < 2; i++) {
		const char *ext = i ? "csv" : "json";
		char path[600], target[80];

		snprintf(path, sizeof(path), "%s/latest.%s", out_dir, ext);
		snprintf(target, sizeof(target), "%s.%s", stamp, ext);
		unlink(path);
		if (symlink(target, path) < 0)
			fprintf(stderr, "ringbench: symlink %s: %s\n", path,
				strerror(errno));
	}
	fprintf(bench_report_text(), "ringbench: results in %s/%s.{json,csv}\n",
		out_dir, stamp);
}
