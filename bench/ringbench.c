/* SPDX-License-Identifier: MIT */
/*
 * ringbench - the same file-reading workloads through every backend and
 * every style, beside the limits of the machine measured in the same run.
 *
 * The matrix: scenarios (parallel, blocking) x subjects. The subjects are
 * the baselines (sync, sync-mt, raw-uring: baseline_*.c) and every
 * backend x style (bench_<style>.c on a loop). Each scenario names the row
 * that bounds it: raw-uring for the uring cells, sync-mt (parallel) or
 * sync (blocking) for the others. A new scenario adds a column to
 * scenarios[], its functions to the styles and baselines that can run it,
 * and the limit rows it is compared with; cell.c measures it and report.c
 * prints it unchanged.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"
#include "cell.h"
#include "files.h"
#include "machine.h"
#include "options.h"
#include "report.h"

enum { SC_PARALLEL, SC_BLOCKING, SC_COUNT };

struct scenario {
	const char *name;
	const char *limit_uring; /* the limit of the uring cells */
	const char *limit_other; /* ... of every other row */
};

static const struct scenario scenarios[SC_COUNT] = {
	[SC_PARALLEL] = { "parallel", "raw-uring", "sync-mt" },
	[SC_BLOCKING] = { "blocking", "raw-uring", "sync" },
};

struct baseline {
	const char *name;
	int (*open)(struct bench_ctx *ctx);
	void (*close)(struct bench_ctx *ctx);
	bench_fn run[SC_COUNT]; /* NULL: no such row */
};

static const struct baseline baselines[] = {
	{ "sync",
	  bench_sync_open,
	  bench_sync_close,
	  { bench_sync_run, bench_sync_run } },
	{ "sync-mt",
	  bench_sync_mt_open,
	  bench_sync_mt_close,
	  { bench_sync_mt_run, NULL } },
	{ "raw-uring",
	  bench_raw_uring_open,
	  bench_raw_uring_close,
	  { bench_raw_uring_parallel, bench_raw_uring_blocking } },
};

#define NBASELINES (sizeof(baselines) / sizeof(baselines[0]))

struct style {
	const char *name;
	bench_fn run[SC_COUNT];
	void (*free)(struct bench_ctx *ctx);
};

static const struct style styles[] = {
	{ "callback",
	  { bench_callback_parallel, bench_callback_blocking },
	  bench_callback_free },
	{ "promise",
	  { bench_promise_parallel, bench_promise_blocking },
	  bench_promise_free },
	{ "coro",
	  { bench_coro_parallel, bench_coro_blocking },
	  bench_coro_free },
};

#define NSTYLES (sizeof(styles) / sizeof(styles[0]))

struct backend {
	const char *name;
	int kind;
	unsigned flags;
};

static const struct backend backends[] = {
	{ "uring", RL_BACKEND_URING, 0 },
	{ "epoll", RL_BACKEND_EPOLL, 0 },
	{ "epoll-pool", RL_BACKEND_EPOLL, RL_NO_INLINE },
};

#define NBACKENDS (sizeof(backends) / sizeof(backends[0]))

static const char *const backend_names[] = {
	"sync", "sync-mt", "raw-uring", "uring", "epoll", "epoll-pool", NULL,
};
static const char *const style_names[] = {
	"baseline", "callback", "promise", "coro", NULL,
};
static const char *const scenario_names[] = { "parallel", "blocking", NULL };

static struct bench_files files;
static struct bench_cell **cells;
static unsigned ncells;
static uint64_t *lat_t0;

/* The baseline rows to run: asked for, or the limit of a row asked for. */
static bool want_base[NBASELINES][SC_COUNT];

/* ------------------------------------------------------------ selection */

static bool selected(const char *backend, const char *style, unsigned sc)
{
	return bench_listed(bench_opt.backends, backend) &&
	       bench_listed(bench_opt.styles, style) &&
	       bench_listed(bench_opt.scenarios, scenarios[sc].name);
}

static const char *limit_of(const char *backend, unsigned sc)
{
	return strcmp(backend, "uring") ? scenarios[sc].limit_other
					: scenarios[sc].limit_uring;
}

static void want_limit(const char *backend, unsigned sc)
{
	const char *limit = limit_of(backend, sc);

	for (unsigned b = 0; b < NBASELINES; b++)
		if (!strcmp(baselines[b].name, limit) && baselines[b].run[sc])
			want_base[b][sc] = true;
}

/* Decides the rows; returns how many there are. */
static unsigned select_rows(void)
{
	unsigned rows = 0;

	for (unsigned b = 0; b < NBASELINES; b++)
		for (unsigned sc = 0; sc < SC_COUNT; sc++)
			want_base[b][sc] =
				baselines[b].run[sc] &&
				selected(baselines[b].name, "baseline", sc);
	for (unsigned k = 0; k < NBACKENDS; k++)
		for (unsigned s = 0; s < NSTYLES; s++)
			for (unsigned sc = 0; sc < SC_COUNT; sc++) {
				if (!selected(backends[k].name, styles[s].name,
					      sc))
					continue;
				rows++;
				if (bench_opt.limits)
					want_limit(backends[k].name, sc);
			}
	/* The baselines asked for bring their own limits, one level deep:
	 * raw-uring asked for alone brings sync-mt and sync. */
	if (bench_opt.limits)
		for (unsigned b = NBASELINES; b-- > 0;)
			for (unsigned sc = 0; sc < SC_COUNT; sc++)
				if (baselines[b].run[sc] &&
				    selected(baselines[b].name, "baseline", sc))
					want_limit(baselines[b].name, sc);
	for (unsigned b = 0; b < NBASELINES; b++)
		for (unsigned sc = 0; sc < SC_COUNT; sc++)
			rows += want_base[b][sc];
	return rows;
}

/* ---------------------------------------------------------------- cells */

static struct bench_cell *add_cell(const char *backend, const char *style,
				   unsigned sc)
{
	static unsigned cap;
	struct bench_cell *c = bench_cell_new(
		backend, style, scenarios[sc].name, limit_of(backend, sc));

	if (ncells == cap) {
		struct bench_cell **nc;

		cap = cap ? 2 * cap : 32;
		nc = realloc(cells, cap * sizeof(*cells));
		if (!nc) {
			perror("ringbench");
			exit(1);
		}
		cells = nc;
	}
	cells[ncells++] = c;
	return c;
}

/* limit_ratio: the cell's ratio over its limit row's ratio. Both are taken
 * against the sync runs paired with them, so a machine that got slower
 * between the two rows does not show as a difference between them. */
static void set_limit_ratio(struct bench_cell *c)
{
	if (c->error || !c->limit)
		return;
	if (!strcmp(c->backend, c->limit)) {
		c->limit_ratio = 1;
		return;
	}
	for (unsigned i = 0; i < ncells; i++) {
		const struct bench_cell *l = cells[i];

		if (!strcmp(l->backend, c->limit) &&
		    !strcmp(l->scenario, c->scenario) && !l->error)
			c->limit_ratio = c->ratio / l->ratio;
	}
}

static void finish(struct bench_cell *c)
{
	bench_cell_finish(c);
	set_limit_ratio(c);
	bench_report_cell(c);
}

static struct bench_ctx new_ctx(rl_loop *loop)
{
	return (struct bench_ctx){
		.loop = loop,
		.opt = &bench_opt.loop,
		.paths = files.paths,
		.npaths = files.count,
		.size = files.size,
		.expect = files.expect,
		.n = bench_opt.n,
		.window = bench_opt.window,
		.coro_window = bench_opt.coro_window,
	};
}

static void run_baseline(const struct baseline *b, unsigned sc,
			 const struct bench_subject *pair)
{
	struct bench_cell *c = add_cell(b->name, "baseline", sc);
	struct bench_ctx ctx = new_ctx(NULL);
	struct bench_subject s = { b->run[sc], &ctx };
	int ret = b->open(&ctx);

	if (ret < 0) {
		BENCH_CELL_FAIL(c, "setup failed: %s", rl_strerror(ret));
	} else {
		/* The sync row is its own pair. */
		bench_cell_measure(c, &s, strcmp(b->name, "sync") ? pair : NULL,
				   lat_t0);
		if (!strcmp(b->name, "sync-mt"))
			bench_cell_extra(c, "threads", bench_sync_mt_threads(),
					 0);
		if (!strcmp(b->name, "raw-uring"))
			bench_cell_extra(c, "inflight",
					 sc == SC_PARALLEL
						 ? bench_raw_uring_window(&ctx)
						 : 1,
					 0);
		b->close(&ctx);
	}
	finish(c);
}

/* A baseline row, after the limit row it is compared with (sync-mt before
 * sync in parallel), so that every row's limit ratio is known when the row
 * is reported. */
static void run_baseline_row(unsigned b, unsigned sc,
			     const struct bench_subject *pair)
{
	static bool done[NBASELINES][SC_COUNT];
	const char *limit = limit_of(baselines[b].name, sc);

	if (done[b][sc] || !want_base[b][sc])
		return;
	done[b][sc] = true;
	for (unsigned l = 0; l < NBASELINES; l++)
		if (l != b && !strcmp(baselines[l].name, limit))
			run_baseline_row(l, sc, pair);
	run_baseline(&baselines[b], sc, pair);
}

static void run_backend(const struct backend *k,
			const struct bench_subject *pair)
{
	struct rl_options opt = bench_opt.loop;
	rl_loop *loop = NULL;
	int ret;

	opt.backend = k->kind;
	opt.flags |= k->flags;
	ret = rl_loop_open(&loop, &opt);
	/* A ring smaller than a read_file chain (4 SQEs) never has room for
	 * one, and the loop waited for it forever (issue 12, item 3). Until
	 * rl_loop_open() refuses such a ring itself, the bench does. */
	if (ret == 0 && k->kind == RL_BACKEND_URING && opt.entries &&
	    opt.entries < 4) {
		rl_loop_close(loop);
		ret = -EINVAL;
	}
	for (unsigned s = 0; s < NSTYLES; s++) {
		const struct style *st = &styles[s];
		struct bench_ctx ctx = new_ctx(loop);

		for (unsigned sc = 0; sc < SC_COUNT; sc++) {
			struct bench_subject subj = { st->run[sc], &ctx };
			struct bench_cell *c;

			if (!st->run[sc] || !selected(k->name, st->name, sc))
				continue;
			c = add_cell(k->name, st->name, sc);
			if (ret < 0)
				BENCH_CELL_FAIL(c, "loop init refused: %s",
						rl_strerror(ret));
			else
				bench_cell_measure(c, &subj, pair, lat_t0);
			finish(c);
		}
		if (ret == 0 && st->free)
			st->free(&ctx);
	}
	if (ret == 0)
		rl_loop_close(loop);
}

int main(int argc, char **argv)
{
	struct bench_machine machine;
	struct bench_ctx pair_ctx;
	struct bench_subject pair;
	struct rusage ru;
	uint64_t t0 = bench_now_ns();
	unsigned rows;
	int ret;

	bench_opts_parse(argc, argv);
	bench_check_list("--backend", bench_opt.backends, backend_names);
	bench_check_list("--style", bench_opt.styles, style_names);
	bench_check_list("--scenario", bench_opt.scenarios, scenario_names);
	rows = select_rows();
	if (!rows) {
		fprintf(stderr,
			"ringbench: nothing to run: no cell is in "
			"--backend %s --style %s --scenario %s\n",
			bench_opt.backends ? bench_opt.backends : "all",
			bench_opt.styles ? bench_opt.styles : "all",
			bench_opt.scenarios ? bench_opt.scenarios : "all");
		return 2;
	}
	ret = bench_files_make(&files, bench_opt.file, bench_opt.files,
			       bench_opt.size);
	if (ret < 0)
		return ret == -1 ? 2 : 1;
	bench_opt.size = files.size;
	bench_opt.files = files.count;
	if (bench_opt.latency) {
		lat_t0 = calloc(bench_opt.n, sizeof(*lat_t0));
		if (!lat_t0) {
			perror("ringbench");
			return 1;
		}
	}

	bench_machine_probe(&machine);
	bench_report_open(&machine);

	pair_ctx = new_ctx(NULL);
	pair = (struct bench_subject){ bench_sync_run, &pair_ctx };
	if (bench_sync_open(&pair_ctx) < 0) {
		perror("ringbench");
		return 1;
	}
	for (unsigned b = 0; b < NBASELINES; b++)
		for (unsigned sc = 0; sc < SC_COUNT; sc++)
			run_baseline_row(b, sc, &pair);
	for (unsigned k = 0; k < NBACKENDS; k++)
		run_backend(&backends[k], &pair);
	bench_sync_close(&pair_ctx);

	bench_report_table(cells, ncells);
	if (bench_opt.micro)
		fprintf(bench_report_text(), "switch round trip: %.2f ns\n",
			bench_coro_switch_ns(10000000));
	getrusage(RUSAGE_SELF, &ru);
	fprintf(bench_report_text(),
		"\npeak RSS: %.1f MB; %u cells in %.1f s\n",
		(double)ru.ru_maxrss / 1024, ncells,
		(double)(bench_now_ns() - t0) / 1e9);
	bench_report_close(cells, ncells);
	for (unsigned i = 0; i < ncells; i++)
		free(cells[i]);
	free(cells);
	free(lat_t0);
	return 0;
}
