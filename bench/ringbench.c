/* SPDX-License-Identifier: MIT */
/*
 * ringbench - the same workloads through every backend and every style,
 * beside the limits of the machine measured in the same run.
 *
 * The matrix: scenarios x subjects. The subjects are the baselines (sync,
 * sync-mt, raw-uring: baseline_*.c) and every backend x style
 * (bench_<style>.c on a loop). Each scenario names the row that bounds it:
 * raw-uring for the uring cells, sync-mt (parallel) or sync (blocking,
 * random I/O) for the others.
 *
 * Scenarios come in groups, run one after the other, each with what it
 * needs made first (storage.h): the seed's reads of a cached file
 * (parallel, blocking: the default), write, cold, randread, randwrite.
 * The fixed-size groups pair every measured run with a run of the sync
 * loop doing the same work; the random I/O groups run a cell per queue
 * depth, for a fixed time, unpaired, beside their limits at that depth.
 * A new scenario adds a line to scenarios[], its functions to the styles
 * and baselines that can run it, and the limit rows it is compared with;
 * cell.c measures it and report.c prints it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"
#include "bench_group.h"
#include "cell.h"
#include "files.h"
#include "machine.h"
#include "options.h"
#include "report.h"
#include "storage.h"

enum {
	SC_PARALLEL,
	SC_BLOCKING,
	SC_WRITE_PAR,
	SC_WRITE_BLK,
	SC_COLD_PAR,
	SC_COLD_BLK,
	SC_RANDREAD,
	SC_RANDWRITE,
	SC_COUNT
};

enum { G_READ, G_WRITE, G_COLD, G_RANDREAD, G_RANDWRITE, G_COUNT };
enum { P_PARALLEL, P_BLOCKING, P_RAND };

struct scenario {
	const char *name; /* its JSON "scenario" */
	const char *mode; /* its JSON "mode" (write, cold), or NULL */
	unsigned group, pattern;
	const char *limit_uring; /* the limit of the uring cells */
	const char *limit_other; /* ... of every other row */
};

static const struct scenario scenarios[SC_COUNT] = {
	[SC_PARALLEL] = { "parallel", NULL, G_READ, P_PARALLEL, "raw-uring",
			  "sync-mt" },
	[SC_BLOCKING] = { "blocking", NULL, G_READ, P_BLOCKING, "raw-uring",
			  "sync" },
	[SC_WRITE_PAR] = { "write", "parallel", G_WRITE, P_PARALLEL,
			   "raw-uring", "sync-mt" },
	[SC_WRITE_BLK] = { "write", "blocking", G_WRITE, P_BLOCKING,
			   "raw-uring", "sync" },
	[SC_COLD_PAR] = { "cold", "parallel", G_COLD, P_PARALLEL, "raw-uring",
			  "sync-mt" },
	[SC_COLD_BLK] = { "cold", "blocking", G_COLD, P_BLOCKING, "raw-uring",
			  "sync" },
	[SC_RANDREAD] = { "randread", NULL, G_RANDREAD, P_RAND, "raw-uring",
			  "sync" },
	[SC_RANDWRITE] = { "randwrite", NULL, G_RANDWRITE, P_RAND, "raw-uring",
			   "sync" },
};

static bool is_rand(unsigned sc)
{
	return scenarios[sc].pattern == P_RAND;
}

struct baseline {
	const char *name;
	int (*open)(struct bench_ctx *ctx);
	void (*close)(struct bench_ctx *ctx);
	int (*rand_open)(struct bench_ctx *ctx);
	void (*rand_close)(struct bench_ctx *ctx);
	bench_fn run[SC_COUNT]; /* NULL: no such row */
};

static const struct baseline baselines[] = {
	{ "sync",
	  bench_sync_open,
	  bench_sync_close,
	  bench_sync_rand_open,
	  bench_sync_rand_close,
	  { bench_sync_run, bench_sync_run, bench_sync_run, bench_sync_run,
	    bench_sync_run, bench_sync_run, bench_sync_rand_run,
	    bench_sync_rand_run } },
	{ "sync-mt",
	  bench_sync_mt_open,
	  bench_sync_mt_close,
	  NULL,
	  NULL,
	  { bench_sync_mt_run, NULL, bench_sync_mt_run, NULL, bench_sync_mt_run,
	    NULL, NULL, NULL } },
	{ "raw-uring",
	  bench_raw_uring_open,
	  bench_raw_uring_close,
	  bench_raw_uring_rand_open,
	  bench_raw_uring_rand_close,
	  { bench_raw_uring_parallel, bench_raw_uring_blocking,
	    bench_raw_uring_parallel, bench_raw_uring_blocking,
	    bench_raw_uring_parallel, bench_raw_uring_blocking,
	    bench_raw_uring_rand_run, bench_raw_uring_rand_run } },
};

#define NBASELINES (sizeof(baselines) / sizeof(baselines[0]))

struct style {
	const char *name;
	bench_fn parallel, blocking, rand;
	void (*free)(struct bench_ctx *ctx);
};

static const struct style styles[] = {
	{ "callback", bench_callback_parallel, bench_callback_blocking,
	  bench_callback_rand, bench_callback_free },
	{ "promise", bench_promise_parallel, bench_promise_blocking,
	  bench_promise_rand, bench_promise_free },
	{ "coro", bench_coro_parallel, bench_coro_blocking, bench_coro_rand,
	  bench_coro_free },
};

#define NSTYLES (sizeof(styles) / sizeof(styles[0]))

static bench_fn style_fn(const struct style *st, unsigned sc)
{
	switch (scenarios[sc].pattern) {
	case P_PARALLEL:
		return st->parallel;
	case P_BLOCKING:
		return st->blocking;
	default:
		return st->rand;
	}
}

/* How a backend's rows use loops: one; a group whose loop 0 spreads the
 * burst over the others; a group whose loops each read a share. */
enum { ONE_LOOP, SPREAD, TPC };

struct backend {
	const char *name;
	int kind;
	unsigned flags;
	int loops; /* ONE_LOOP, SPREAD or TPC */
};

static const struct backend backends[] = {
	{ "uring", RL_BACKEND_URING, 0, ONE_LOOP },
	/* read_file told that its file is regular (RL_READ_FILE_REGULAR):
	 * the chain without its probe, as the raw chain is. */
	{ "uring-regular", RL_BACKEND_URING, RL_REGULAR_FILES, ONE_LOOP },
	{ "epoll", RL_BACKEND_EPOLL, 0, ONE_LOOP },
	{ "epoll-pool", RL_BACKEND_EPOLL, RL_NO_INLINE | RL_NO_AIO, ONE_LOOP },
	{ "uring-spread", RL_BACKEND_URING, 0, SPREAD },
	{ "epoll-spread", RL_BACKEND_EPOLL, 0, SPREAD },
	{ "uring-tpc", RL_BACKEND_URING, 0, TPC },
	{ "epoll-tpc", RL_BACKEND_EPOLL, 0, TPC },
};

#define NBACKENDS (sizeof(backends) / sizeof(backends[0]))

static const char *const backend_names[] = {
	"sync",		 "sync-mt",   "raw-uring",  "uring",
	"uring-regular", "epoll",     "epoll-pool", "uring-spread",
	"epoll-spread",	 "uring-tpc", "epoll-tpc",  NULL,
};
static const char *const style_names[] = {
	"baseline", "callback", "promise", "coro", NULL,
};
static const char *const scenario_names[] = {
	"parallel", "blocking",	 "write",   "cold",
	"randread", "randwrite", "storage", NULL,
};
static const char *const mode_names[] = { "parallel", "blocking", NULL };

static struct bench_files files;
static struct bench_cell **cells;
static unsigned ncells;
static uint64_t *lat_t0;
/* Why the group running cannot run at all (its files could not be
 * made): every cell of it says so. */
static char group_error[300];

/* The baseline rows to run: asked for, or the limit of a row asked for. */
static bool want_base[NBASELINES][SC_COUNT];

/* ------------------------------------------------------------ selection */

static bool selected(const char *backend, const char *style, unsigned sc)
{
	/* The rows on several loops are the parallel read_file only: the
	 * blocking scenario has one read in flight, by definition. */
	if ((strstr(backend, "-spread") || strstr(backend, "-tpc")) &&
	    sc != SC_PARALLEL)
		return false;
	/* The regular row differs from uring in read_file alone: the
	 * seed's reads of a cached file. It vouches for ringbench's own
	 * files only; a --file may be a procfs one. */
	if (!strcmp(backend, "uring-regular") &&
	    (scenarios[sc].group != G_READ || bench_opt.file))
		return false;
	return bench_listed(bench_opt.backends, backend) &&
	       bench_listed(bench_opt.styles, style) &&
	       bench_scenario_selected(scenarios[sc].name, scenarios[sc].mode);
}

static const char *limit_of(const char *backend, unsigned sc)
{
	return strcmp(backend, "uring") && strcmp(backend, "uring-regular")
		       ? scenarios[sc].limit_other
		       : scenarios[sc].limit_uring;
}

static void want_limit(const char *backend, unsigned sc)
{
	const char *limit = limit_of(backend, sc);

	for (unsigned b = 0; b < NBASELINES; b++)
		if (!strcmp(baselines[b].name, limit) && baselines[b].run[sc])
			want_base[b][sc] = true;
}

/* Decides the rows; returns how many there are (per queue depth). */
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

static bool group_selected(unsigned g)
{
	for (unsigned sc = 0; sc < SC_COUNT; sc++) {
		if (scenarios[sc].group != g)
			continue;
		for (unsigned b = 0; b < NBASELINES; b++)
			if (want_base[b][sc])
				return true;
		for (unsigned k = 0; k < NBACKENDS; k++)
			for (unsigned s = 0; s < NSTYLES; s++)
				if (selected(backends[k].name, styles[s].name,
					     sc))
					return true;
	}
	return false;
}

/* ---------------------------------------------------------------- cells */

static struct bench_cell *add_cell(const char *backend, const char *style,
				   unsigned sc, unsigned qd)
{
	static unsigned cap;
	unsigned g = scenarios[sc].group;
	struct bench_cell *c = bench_cell_new(
		backend, style, scenarios[sc].name, limit_of(backend, sc));

	c->mode = scenarios[sc].mode;
	if (g != G_READ) {
		c->qd = qd;
		c->bs = is_rand(sc) ? bench_opt.bs : files.size;
		c->fsync = g == G_WRITE ? bench_opt.fsync : -1;
		c->timed = is_rand(sc);
	}
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
	if (group_error[0])
		BENCH_CELL_FAIL(c, "%s", group_error);
	return c;
}

static bool same_cell_kind(const struct bench_cell *a,
			   const struct bench_cell *b)
{
	return !strcmp(a->scenario, b->scenario) &&
	       (a->mode == b->mode ||
		(a->mode && b->mode && !strcmp(a->mode, b->mode))) &&
	       (!a->timed || a->qd == b->qd);
}

/* limit_ratio: the cell's ratio over its limit row's ratio. Both are taken
 * against the sync runs paired with them, so a machine that got slower
 * between the two rows does not show as a difference between them. A
 * random I/O cell has no pair: the limit row's IOPS over the cell's; nor
 * has any cell with --no-pair: the medians. */
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

		if (!strcmp(l->backend, c->limit) && same_cell_kind(l, c) &&
		    !l->error) {
			if (c->timed)
				c->limit_ratio = l->iops / c->iops;
			else if (bench_opt.pair)
				c->limit_ratio = c->ratio / l->ratio;
			else
				c->limit_ratio = c->median_ms / l->median_ms;
		}
	}
}

static void finish(struct bench_cell *c)
{
	bench_cell_finish(c);
	set_limit_ratio(c);
	bench_report_cell(c);
}

/* A cell's context: what its scenario works on. */
static struct bench_ctx new_ctx(rl_loop *loop, unsigned sc,
				struct bench_rand *rand)
{
	struct bench_ctx ctx = {
		.loop = loop,
		.opt = &bench_opt.loop,
		.paths = files.paths,
		.npaths = files.count,
		.size = files.size,
		.expect = files.expect,
		.n = bench_opt.n,
		.window = bench_opt.window,
		.coro_window = bench_opt.coro_window,
		.resident = -1,
	};
	const struct bench_fileset *set = NULL;

	switch (scenarios[sc].group) {
	case G_WRITE:
		set = bench_storage_writes();
		ctx.op = BENCH_WRITE_FILE;
		ctx.write_flags = bench_opt.fsync ? RL_WRITE_FILE_FSYNC : 0;
		break;
	case G_COLD:
		set = bench_storage_cold();
		break;
	case G_RANDREAD:
	case G_RANDWRITE:
		ctx.rand = rand;
		break;
	}
	if (set) {
		ctx.paths = set->paths;
		ctx.npaths = set->count;
	}
	return ctx;
}

/* The hooks around every run of a scenario (storage.h). */
static void set_hooks(struct bench_subject *s, unsigned sc)
{
	switch (scenarios[sc].group) {
	case G_WRITE:
		s->before = bench_write_before;
		s->after = bench_write_after;
		break;
	case G_COLD:
		s->before = bench_cold_before;
		break;
	case G_RANDWRITE:
		s->after = bench_rand_after;
		break;
	}
}

/* Operations in flight in a fixed-size scenario: 1 when blocking; in
 * parallel, what the row lets be in flight at once. */
static unsigned fixed_qd(const char *backend, const char *style, unsigned sc,
			 const struct bench_ctx *ctx)
{
	unsigned w = bench_effective_window();

	if (scenarios[sc].pattern == P_BLOCKING || !strcmp(backend, "sync"))
		return 1;
	if (!strcmp(backend, "sync-mt"))
		return bench_sync_mt_threads();
	if (!strcmp(backend, "raw-uring"))
		return bench_raw_uring_window(ctx);
	if (!strcmp(style, "coro") && bench_effective_coro_window() < w)
		return (unsigned)bench_effective_coro_window();
	return w;
}

/* ------------------------------------------------------------ baselines */

static void run_baseline(const struct baseline *b, unsigned sc,
			 const struct bench_subject *pair, unsigned qd)
{
	struct bench_rand rand;
	struct bench_ctx ctx = new_ctx(NULL, sc, &rand);
	struct bench_subject s = { b->run[sc], &ctx, NULL, NULL };
	struct bench_cell *c = add_cell(
		b->name, "baseline", sc,
		is_rand(sc) ? qd : fixed_qd(b->name, "baseline", sc, &ctx));
	char why[300];
	int ret;

	if (c->error) {
		finish(c);
		return;
	}
	set_hooks(&s, sc);
	if (is_rand(sc)) {
		ret = bench_rand_subject_open(
			&rand, NULL, qd, sc == SC_RANDWRITE, why, sizeof(why));
		if (ret == 0) {
			ret = b->rand_open(&ctx);
			if (ret < 0)
				bench_rand_subject_close(&rand, NULL);
		}
		if (ret < 0 && !c->error)
			snprintf(why, sizeof(why), "setup failed: %s",
				 rl_strerror(ret));
	} else {
		ret = b->open(&ctx);
		snprintf(why, sizeof(why), "setup failed: %s",
			 rl_strerror(ret));
	}
	if (ret < 0) {
		BENCH_CELL_FAIL(c, "%s", why);
		finish(c);
		return;
	}
	/* The sync row is its own pair. */
	bench_cell_measure(c, &s, strcmp(b->name, "sync") ? pair : NULL,
			   lat_t0);
	if (!strcmp(b->name, "sync-mt") ||
	    (is_rand(sc) && !strcmp(b->name, "sync")))
		bench_cell_extra(c, "threads",
				 c->qd ? c->qd : bench_sync_mt_threads(), 0);
	if (!strcmp(b->name, "raw-uring"))
		bench_cell_extra(c, "inflight",
				 c->qd ? c->qd
				 : scenarios[sc].pattern == P_PARALLEL
					 ? bench_raw_uring_window(&ctx)
					 : 1,
				 0);
	if (is_rand(sc)) {
		b->rand_close(&ctx);
		bench_rand_subject_close(&rand, NULL);
	} else {
		b->close(&ctx);
	}
	finish(c);
}

/* A baseline row, after the limit row it is compared with (sync-mt before
 * sync in parallel), so that every row's limit ratio is known when the row
 * is reported. done[][] says which rows of this round ran already. */
static void run_baseline_row(unsigned b, unsigned sc,
			     const struct bench_subject *pair, unsigned qd,
			     bool done[NBASELINES][SC_COUNT])
{
	const char *limit = limit_of(baselines[b].name, sc);

	if (done[b][sc] || !want_base[b][sc])
		return;
	done[b][sc] = true;
	for (unsigned l = 0; l < NBASELINES; l++)
		if (l != b && !strcmp(baselines[l].name, limit))
			run_baseline_row(l, sc, pair, qd, done);
	run_baseline(&baselines[b], sc, pair, qd);
}

/* ------------------------------------------------------------- backends */

static int open_loop(const struct backend *k, unsigned pool_threads,
		     rl_loop **loop)
{
	struct rl_options opt = bench_opt.loop;
	int ret;

	opt.backend = k->kind;
	opt.flags |= k->flags;
	if (pool_threads)
		opt.pool_threads = pool_threads;
	*loop = NULL;
	ret = rl_loop_open(loop, &opt);
	/* A ring smaller than a read_file chain (4 SQEs) never has room for
	 * one, and the loop waited for it forever (issue 12, item 3). Until
	 * rl_loop_open() refuses such a ring itself, the bench does. */
	if (ret == 0 && k->kind == RL_BACKEND_URING && opt.entries &&
	    opt.entries < 4) {
		rl_loop_close(*loop);
		*loop = NULL;
		ret = -EINVAL;
	}
	return ret;
}

/* A group of --loops loops with k's knobs; *loop is its loop 0, which
 * spreads for the spread rows. */
static int open_group(const struct backend *k, struct bench_group *bg,
		      rl_loop **loop)
{
	struct rl_options opt = bench_opt.loop;
	int ret;

	opt.backend = k->kind;
	opt.flags |= k->flags;
	ret = bench_group_open(bg, &opt, bench_opt.loops, k->loops == SPREAD);
	*loop = ret == 0 ? rl_group_loop(bg->g, 0) : NULL;
	return ret;
}

/* The fixed-size scenarios of group g on backend k, every style. */
static void run_backend(const struct backend *k, unsigned g,
			const struct bench_subject *pair)
{
	struct bench_group bg = { 0 };
	rl_loop *loop = NULL;
	int ret = -EINVAL;
	bool any = false;

	for (unsigned s = 0; s < NSTYLES; s++)
		for (unsigned sc = 0; sc < SC_COUNT; sc++)
			any |= scenarios[sc].group == g &&
			       selected(k->name, styles[s].name, sc);
	if (!any)
		return;
	if (group_error[0])
		;
	else if (k->loops == ONE_LOOP)
		ret = open_loop(k, 0, &loop);
	else
		ret = open_group(k, &bg, &loop);
	for (unsigned s = 0; s < NSTYLES; s++) {
		const struct style *st = &styles[s];
		struct bench_ctx ctx;

		for (unsigned sc = 0; sc < SC_COUNT; sc++) {
			struct bench_subject subj;
			struct bench_cell *c;

			if (scenarios[sc].group != g ||
			    !selected(k->name, st->name, sc))
				continue;
			ctx = new_ctx(loop, sc, NULL);
			subj = (struct bench_subject){ style_fn(st, sc), &ctx,
						       NULL, NULL };
			set_hooks(&subj, sc);
			if (k->loops == TPC) {
				/* Each loop runs the style's scenario on its
				 * share, with a context of its own. */
				bg.fn = subj.fn;
				bg.free = st->free;
				ctx.group = &bg;
				subj.fn = bench_tpc_run;
			}
			c = add_cell(k->name, st->name, sc,
				     fixed_qd(k->name, st->name, sc, &ctx));
			if (c->error)
				; /* the group's error */
			else if (ret < 0)
				BENCH_CELL_FAIL(c, "loop init refused: %s",
						rl_strerror(ret));
			else
				bench_cell_measure(c, &subj, pair, lat_t0);
			if (ret == 0 && k->loops != ONE_LOOP)
				bench_cell_extra(c, "loops", bg.loops, 0);
			finish(c);
			if (ret == 0 && st->free)
				st->free(&ctx);
			if (ret == 0 && k->loops == TPC)
				bench_group_free_styles(&bg);
		}
	}
	if (ret == 0 && k->loops == ONE_LOOP)
		rl_loop_close(loop);
	else if (ret == 0)
		bench_group_close(&bg);
}

/* Random I/O scenario sc at queue depth qd on backend k, every style, on
 * a loop of its own (pool_threads: 0 for the default pool). */
static void run_backend_rand(const struct backend *k, unsigned sc, unsigned qd,
			     unsigned pool_threads)
{
	struct bench_rand rand;
	rl_loop *loop = NULL;
	char why[300] = "";
	int ret = -EINVAL;
	bool any = false, epoll = k->kind == RL_BACKEND_EPOLL;

	for (unsigned s = 0; s < NSTYLES; s++)
		any |= selected(k->name, styles[s].name, sc);
	if (!any)
		return;
	memset(&rand, 0, sizeof(rand));
	rand.fd = -1;
	if (!group_error[0]) {
		ret = open_loop(k, pool_threads, &loop);
		if (ret < 0)
			snprintf(why, sizeof(why), "loop init refused: %s",
				 rl_strerror(ret));
		else
			ret = bench_rand_subject_open(&rand, loop, qd,
						      sc == SC_RANDWRITE, why,
						      sizeof(why));
	}
	for (unsigned s = 0; s < NSTYLES; s++) {
		const struct style *st = &styles[s];
		struct bench_ctx ctx = new_ctx(loop, sc, &rand);
		struct bench_subject subj = { st->rand, &ctx, NULL, NULL };
		struct bench_cell *c;

		if (!selected(k->name, st->name, sc))
			continue;
		set_hooks(&subj, sc);
		c = add_cell(k->name, st->name, sc, qd);
		if (epoll)
			bench_cell_extra(
				c, "pool_threads",
				pool_threads ? pool_threads
					     : bench_effective_pool_threads(),
				0);
		if (c->error)
			; /* the group's error */
		else if (ret < 0)
			BENCH_CELL_FAIL(c, "%s", why);
		else
			bench_cell_measure(c, &subj, NULL, lat_t0);
		finish(c);
		if (loop && ret == 0 && st->free)
			st->free(&ctx);
	}
	if (ret == 0)
		bench_rand_subject_close(&rand, loop);
	if (loop)
		rl_loop_close(loop);
}

/* --------------------------------------------------------------- groups */

static void group_header(unsigned g)
{
	FILE *f = bench_report_text();
	const struct bench_randfile *rf = bench_storage_randfile();
	char qds[64] = "";

	for (unsigned i = 0, len = 0; i < bench_opt.nqd; i++)
		len += (unsigned)snprintf(qds + len, sizeof(qds) - len, "%s%u",
					  i ? "," : "", bench_opt.qd[i]);
	switch (g) {
	case G_WRITE:
		fprintf(f,
			"\nwrite: %u files of %zu bytes per run, each a new "
			"file in a fresh directory, %s; read back and removed "
			"after every run\n",
			bench_opt.n, files.size,
			bench_opt.fsync ? "fsync before close" : "no fsync");
		break;
	case G_COLD:
		fprintf(f,
			"\ncold: %u reads of %u files of %zu bytes, their page "
			"cache dropped before every run%s\n",
			bench_opt.n, bench_opt.cold_files, files.size,
			bench_opt.n > bench_opt.cold_files
				? " (more reads than files: the rest hit "
				  "the cache)"
				: "");
		break;
	case G_RANDREAD:
	case G_RANDWRITE:
		fprintf(f,
			"\n%s: %zu-byte blocks of %s (%llu MiB), O_DIRECT, "
			"queue depths %s, runs of ",
			g == G_RANDREAD ? "randread" : "randwrite",
			bench_opt.bs, rf->path,
			(unsigned long long)(rf->size >> 20), qds);
		if (bench_opt.run_ops)
			fprintf(f, "%u operations", bench_opt.run_ops);
		else
			fprintf(f, "%u ms", bench_opt.run_ms);
		fprintf(f, "%s\n",
			bench_opt.fixed_bufs ? ", registered buffers" : "");
		break;
	}
	fflush(f);
}

/* Makes what group g needs; on failure, every cell of it says why. */
static void group_setup(unsigned g)
{
	int ret = 0;

	group_error[0] = 0;
	switch (g) {
	case G_WRITE:
		ret = bench_storage_write_setup(bench_opt.n, files.expect,
						files.size);
		break;
	case G_COLD:
		ret = bench_storage_cold_setup(bench_opt.cold_files,
					       files.expect, files.size);
		break;
	case G_RANDREAD:
	case G_RANDWRITE:
		ret = bench_storage_rand_setup();
		break;
	}
	if (ret < 0)
		snprintf(group_error, sizeof(group_error),
			 "the scenario's files could not be made: %s",
			 rl_strerror(ret));
	group_header(g);
}

static void run_rand_group(unsigned g)
{
	unsigned sc = g == G_RANDREAD ? SC_RANDREAD : SC_RANDWRITE;
	unsigned def = bench_effective_pool_threads();

	for (unsigned q = 0; q < bench_opt.nqd; q++) {
		unsigned qd = bench_opt.qd[q];
		bool done[NBASELINES][SC_COUNT] = { { 0 } };

		for (unsigned b = 0; b < NBASELINES; b++)
			run_baseline_row(b, sc, NULL, qd, done);
		for (unsigned k = 0; k < NBACKENDS; k++) {
			run_backend_rand(&backends[k], sc, qd, 0);
			/* The pool's threads bound what is in flight on
			 * epoll: a row with as many threads as the depth. */
			if (bench_opt.pool_qd &&
			    backends[k].flags & RL_NO_INLINE &&
			    !bench_opt.loop.pool_threads && qd > def)
				run_backend_rand(&backends[k], sc, qd, qd);
		}
	}
}

static void run_group(unsigned g)
{
	struct bench_ctx pair_ctx;
	struct bench_subject pair;
	const struct bench_subject *pp;
	bool done[NBASELINES][SC_COUNT] = { { 0 } };
	unsigned first = 0;

	if (!group_selected(g))
		return;
	group_setup(g);
	if (g == G_RANDREAD || g == G_RANDWRITE) {
		run_rand_group(g);
		return;
	}
	while (scenarios[first].group != g)
		first++;
	pair_ctx = new_ctx(NULL, first, NULL);
	pair = (struct bench_subject){ bench_sync_run, &pair_ctx, NULL, NULL };
	set_hooks(&pair, first);
	if (bench_sync_open(&pair_ctx) < 0) {
		perror("ringbench");
		exit(1);
	}
	/* --no-pair: the cells alone, for a profiler. */
	pp = bench_opt.pair ? &pair : NULL;
	for (unsigned b = 0; b < NBASELINES; b++)
		for (unsigned sc = 0; sc < SC_COUNT; sc++)
			if (scenarios[sc].group == g)
				run_baseline_row(b, sc, pp, 0, done);
	for (unsigned k = 0; k < NBACKENDS; k++)
		run_backend(&backends[k], g, pp);
	bench_sync_close(&pair_ctx);
}

/* ------------------------------------------------------------------ main */

static int check_storage_options(void)
{
	bool write = bench_scenario_selected("write", NULL);
	bool cold = bench_scenario_selected("cold", NULL);

	if ((write || cold) && !files.size) {
		fprintf(stderr, "ringbench: write and cold need a file of at "
				"least one byte (--size)\n");
		return -1;
	}
	if (write && bench_opt.n > BENCH_MAX_WRITE_N) {
		fprintf(stderr,
			"ringbench: write: -n %u is more than %u files per "
			"run\n",
			bench_opt.n, BENCH_MAX_WRITE_N);
		return -1;
	}
	if (bench_opt.rand_size % bench_opt.bs ||
	    bench_opt.rand_size < bench_opt.bs) {
		fprintf(stderr,
			"ringbench: --rand-size %llu is not a multiple of "
			"--bs %zu\n",
			(unsigned long long)bench_opt.rand_size, bench_opt.bs);
		return -1;
	}
	return 0;
}

/*
 * --micro: the cross-loop round trip with each way to wake a loop, each
 * with its loops sleeping at once between messages (idle_spin_ns -1) and
 * with a group's default spin before the sleep; then what that spin costs
 * a group with no messages at all: one timer on loop 0, firing once, or
 * every millisecond.
 */
static void micro_msg(void)
{
	static const struct {
		const char *name, *key;
		int backend, wake;
	} ways[] = {
		{ "uring, IORING_OP_MSG_RING", "uring-msg-ring",
		  RL_BACKEND_URING, RL_MSG_WAKE_RING },
		{ "uring, eventfd", "uring-eventfd", RL_BACKEND_URING,
		  RL_MSG_WAKE_EVENTFD },
		{ "epoll, eventfd", "epoll-eventfd", RL_BACKEND_EPOLL,
		  RL_MSG_WAKE_EVENTFD },
	};
	/* Off, and the group's default or the --idle-spin asked for. */
	const int64_t spins[] = { -1, bench_opt.loop.idle_spin_ns
					      ? bench_opt.loop.idle_spin_ns
					      : RL_GROUP_IDLE_SPIN_NS };
	static const struct {
		const char *name;
		unsigned period_ms, ticks;
	} idles[] = { { "idle", 300, 1 }, { "1 ms timer", 1, 300 } };
	unsigned nspins = spins[1] > 0 ? 2 : 1;
	FILE *f = bench_report_text();

	for (unsigned i = 0; i < sizeof(ways) / sizeof(ways[0]); i++)
		for (unsigned s = 0; s < nspins; s++) {
			struct bench_msg_rtt r;
			int64_t spin = spins[s];
			int ret = bench_msg_rtt(ways[i].backend, ways[i].wake,
						spin, 20000, &r);

			if (ret < 0) {
				fprintf(f,
					"cross-loop round trip (%s, spin "
					"%lld ns): %s\n",
					ways[i].name,
					(long long)(spin < 0 ? 0 : spin),
					rl_strerror(ret));
				continue;
			}
			fprintf(f,
				"cross-loop round trip (%s, spin %lld ns): "
				"p50 %.2f us, p99 %.2f us, CPU %.2f us per "
				"round trip (util %.2f)\n",
				ways[i].name, (long long)(spin < 0 ? 0 : spin),
				r.p50_us, r.p99_us, r.cpu_us_per_rt,
				r.cpu_util);
			bench_report_json(
				"{\"micro\":\"msg_rtt\",\"mechanism\":\"%s\","
				"\"idle_spin_ns\":%lld,\"iterations\":%u,"
				"\"p50_us\":%.3f,\"p99_us\":%.3f,"
				"\"cpu_us_per_rt\":%.3f,\"cpu_util\":%.3f}\n",
				ways[i].key, (long long)(spin < 0 ? 0 : spin),
				20000u, r.p50_us, r.p99_us, r.cpu_us_per_rt,
				r.cpu_util);
		}
	for (unsigned b = 0; b < 2; b++)
		for (unsigned k = 0; k < sizeof(idles) / sizeof(idles[0]); k++)
			for (unsigned s = 0; s < nspins; s++) {
				int backend =
					b ? RL_BACKEND_EPOLL : RL_BACKEND_URING;
				int64_t spin = spins[s];
				double util = 0;
				int ret = bench_group_idle_cpu(
					backend, spin, idles[k].period_ms,
					idles[k].ticks, &util);

				if (ret < 0) {
					fprintf(f, "group CPU: %s\n",
						rl_strerror(ret));
					continue;
				}
				fprintf(f,
					"group of 2 %s loops, %s, spin %lld "
					"ns: CPU util %.4f\n",
					b ? "epoll" : "uring", idles[k].name,
					(long long)(spin < 0 ? 0 : spin), util);
				bench_report_json(
					"{\"micro\":\"group_idle_cpu\","
					"\"backend\":\"%s\",\"timer_ms\":%u,"
					"\"ticks\":%u,\"idle_spin_ns\":%lld,"
					"\"cpu_util\":%.5f}\n",
					b ? "epoll" : "uring",
					idles[k].period_ms, idles[k].ticks,
					(long long)(spin < 0 ? 0 : spin), util);
			}
}

int main(int argc, char **argv)
{
	struct bench_machine machine;
	struct rusage ru;
	uint64_t t0 = bench_now_ns();
	unsigned rows, nlat = 0;
	int ret;

	bench_opts_parse(argc, argv);
	if (bench_opt.drop_cache)
		return bench_cache_drop_path(bench_opt.drop_cache);
	bench_check_list("--backend", bench_opt.backends, backend_names);
	bench_check_list("--style", bench_opt.styles, style_names);
	bench_check_list("--scenario", bench_opt.scenarios, scenario_names);
	bench_check_list("--mode", bench_opt.modes, mode_names);
	rows = select_rows();
	if (!rows) {
		fprintf(stderr,
			"ringbench: nothing to run: no cell is in "
			"--backend %s --style %s --scenario %s%s%s\n",
			bench_opt.backends ? bench_opt.backends : "all",
			bench_opt.styles ? bench_opt.styles : "all",
			bench_opt.scenarios ? bench_opt.scenarios
					    : "parallel,blocking",
			bench_opt.modes ? " --mode " : "",
			bench_opt.modes ? bench_opt.modes : "");
		return 2;
	}
	ret = bench_files_make(&files, bench_opt.file, bench_opt.files,
			       bench_opt.size);
	if (ret < 0)
		return ret == -1 ? 2 : 1;
	bench_opt.size = files.size;
	bench_opt.files = files.count;
	if (check_storage_options() < 0)
		return 2;
	if (bench_opt.latency) {
		nlat = bench_opt.n;
		for (unsigned q = 0; q < bench_opt.nqd; q++)
			if (bench_opt.qd[q] > nlat)
				nlat = bench_opt.qd[q];
		lat_t0 = calloc(nlat, sizeof(*lat_t0));
		if (!lat_t0) {
			perror("ringbench");
			return 1;
		}
	}

	bench_machine_probe(&machine);
	bench_report_open(&machine);

	for (unsigned g = 0; g < G_COUNT; g++) {
		run_group(g);
		/* What write left dirty goes to the disk now, not during the
		 * next group's runs. */
		if (g == G_WRITE && group_selected(g))
			bench_storage_sync();
	}
	group_error[0] = 0;

	bench_report_table(cells, ncells);
	if (bench_opt.micro) {
		fprintf(bench_report_text(), "switch round trip: %.2f ns\n",
			bench_coro_switch_ns(10000000));
		micro_msg();
	}
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
