/* SPDX-License-Identifier: MIT */
/*
 * ringbench - the same file-reading workloads through every backend and
 * every style, beside a raw synchronous loop that marks the machine's limit.
 *
 * Each cell (backend x style x scenario) runs --runs times after one warm-up
 * run. Every run of a cell is paired with a run of the synchronous baseline
 * made right before it, so a cell's ratio compares runs taken under the same
 * load on a shared machine; the ratio is median(cell) / median(its paired
 * baseline runs).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define MAX_RUNS 101
#define MAX_FILES 1024

struct style {
	const char *name;
	bench_fn parallel;
	bench_fn blocking;
	void (*free)(struct bench_ctx *ctx);
};

struct backend {
	const char *name;
	int kind;
	unsigned flags;
};

struct knobs {
	unsigned n, runs, files, window;
	size_t coro_window; /* 0: the scheduler's default */
	size_t size;
	const char *file;
	struct rl_options opt; /* knob flags shared by every backend */
	bool json, micro, no_out;
	const char *out_dir;
	const char *backends, *styles, *scenarios;
};

struct cell {
	const char *backend, *style, *scenario;
	unsigned runs;
	double ms[MAX_RUNS], base_ms[MAX_RUNS];
	double syscalls_per_op;
	const char *error;
	char errbuf[160];
};

static struct knobs K = {
	.n = 10000,
	.runs = 9,
	.files = 1,
	.size = 12,
};

static FILE *json_out, *csv_out;
static struct cell cells[64];
static unsigned ncells;

/* ------------------------------------------------------------ utilities */

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(const double *v, unsigned n)
{
	double s[MAX_RUNS];

	memcpy(s, v, n * sizeof(*v));
	qsort(s, n, sizeof(*s), cmp_double);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static double vmin(const double *v, unsigned n)
{
	double m = v[0];

	for (unsigned i = 1; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
}

static double vmax(const double *v, unsigned n)
{
	double m = v[0];

	for (unsigned i = 1; i < n; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

static bool listed(const char *list, const char *name)
{
	size_t len = strlen(name);

	if (!list || !strcmp(list, "all"))
		return true;
	for (const char *p = list; (p = strstr(p, name)); p += len)
		if ((p == list || p[-1] == ',') && (p[len] == 0 || p[len] == ','))
			return true;
	return false;
}

/* ------------------------------------------------------- the bench files */

static char tmpdir[256];
static const char *paths[MAX_FILES];
static unsigned char *expect;

static void cleanup_files(void)
{
	if (!tmpdir[0])
		return;
	for (unsigned i = 0; i < K.files; i++)
		if (paths[i])
			unlink(paths[i]);
	rmdir(tmpdir);
}

/* The seed's file says "Hello, world" (12 bytes); other sizes repeat it. */
static int make_files(void)
{
	static const char hello[] = "Hello, world";
	const char *base = getenv("TMPDIR");

	if (K.file) {
		struct stat st;
		int fd = open(K.file, O_RDONLY | O_CLOEXEC);

		if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			fprintf(stderr, "ringbench: --file %s: %s\n", K.file,
				fd < 0 ? strerror(errno) : "not a regular file");
			return -1;
		}
		K.size = (size_t)st.st_size;
		expect = malloc(K.size + 1);
		if (!expect || read(fd, expect, K.size) != (ssize_t)K.size) {
			fprintf(stderr, "ringbench: cannot read %s\n", K.file);
			return -1;
		}
		close(fd);
		K.files = 1;
		paths[0] = K.file;
		return 0;
	}
	expect = malloc(K.size + 1);
	if (!expect)
		return -1;
	for (size_t i = 0; i < K.size; i++)
		expect[i] = (unsigned char)hello[i % (sizeof(hello) - 1)];
	snprintf(tmpdir, sizeof(tmpdir), "%s/ringbench-XXXXXX",
		 base && *base ? base : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("ringbench: mkdtemp");
		return -1;
	}
	atexit(cleanup_files);
	for (unsigned i = 0; i < K.files; i++) {
		char p[300];
		int fd;

		snprintf(p, sizeof(p), "%s/text-%u.txt", tmpdir, i);
		paths[i] = strdup(p);
		fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, expect, K.size) != (ssize_t)K.size) {
			perror("ringbench: writing the bench file");
			return -1;
		}
		close(fd);
	}
	return 0;
}

/* ------------------------------------------------------------- baseline */

/* The machine's limit: open, fstat, read, close in a plain loop, checking
 * every byte, as a synchronous program would. Four syscalls a read. */
static double baseline_run(uint64_t *errors)
{
	static unsigned char *buf;
	static size_t cap;
	double t0 = now_ms();

	if (cap < K.size + 1) {
		free(buf);
		cap = K.size + 1;
		buf = malloc(cap);
	}
	for (unsigned i = 0; i < K.n; i++) {
		struct stat st;
		ssize_t got = 0, r;
		int fd = open(paths[i % K.files], O_RDONLY | O_CLOEXEC);

		if (fd < 0 || fstat(fd, &st) < 0) {
			(*errors)++;
			if (fd >= 0)
				close(fd);
			continue;
		}
		while (got < st.st_size &&
		       (r = read(fd, buf + got, (size_t)(st.st_size - got))) > 0)
			got += r;
		close(fd);
		if (got != (ssize_t)K.size || memcmp(buf, expect, K.size))
			(*errors)++;
	}
	return now_ms() - t0;
}

/* ----------------------------------------------------------------- cells */

static const struct backend backends[] = {
	{ "uring", RL_BACKEND_URING, 0 },
	{ "epoll", RL_BACKEND_EPOLL, 0 },
	{ "epoll-pool", RL_BACKEND_EPOLL, RL_NO_INLINE },
};

static struct style styles[3];

static void init_styles(void)
{
	styles[0] = (struct style){ "callback", bench_callback_parallel,
				    bench_callback_blocking,
				    bench_callback_free };
	styles[1] = (struct style){ "promise", bench_promise_parallel,
				    bench_promise_blocking,
				    bench_promise_free };
	styles[2] = (struct style){ "coro", bench_coro_parallel,
				    bench_coro_blocking, bench_coro_free };
}

static void knobs_json(FILE *f)
{
	const struct rl_options *o = &K.opt;

	fprintf(f,
		"\"knobs\":{\"size\":%zu,\"files\":%u,\"window\":%u,"
		"\"entries\":%u,\"sqpoll\":%d,\"single_issuer\":%d,"
		"\"defer_taskrun\":%d,\"coop_taskrun\":%d,\"no_link\":%d,"
		"\"no_direct\":%d,\"register_ring\":%d,\"iowq_max\":%u,"
		"\"pool_threads\":%u,\"no_inline\":%d,\"coro_window\":%zu}",
		K.size, K.files, K.window, o->entries,
		!!(o->flags & RL_SQPOLL), !!(o->flags & RL_SINGLE_ISSUER),
		!!(o->flags & RL_DEFER_TASKRUN),
		!!(o->flags & RL_COOP_TASKRUN), !!(o->flags & RL_NO_LINK),
		!!(o->flags & RL_NO_DIRECT), !!(o->flags & RL_REGISTER_RING),
		o->iowq_max, o->pool_threads, !!(o->flags & RL_NO_INLINE),
		K.coro_window);
}

static void emit(struct cell *c)
{
	double med = 0, base = 0;

	if (!c->error) {
		med = median(c->ms, c->runs);
		base = median(c->base_ms, c->runs);
	}
	/* Progress line, as the seed printed its results. */
	if (c->error)
		fprintf(K.json ? stderr : stdout,
			"%-10s %-8s %-8s reading file %u times: error: %s\n",
			c->backend, c->style, c->scenario, K.n, c->error);
	else
		fprintf(K.json ? stderr : stdout,
			"%-10s %-8s %-8s reading file %u times: %8.2f ms "
			"(min %.2f, max %.2f)  %5.2fx sync  %5.2f syscalls/op\n",
			c->backend, c->style, c->scenario, K.n, med,
			vmin(c->ms, c->runs), vmax(c->ms, c->runs),
			base > 0 ? med / base : 0, c->syscalls_per_op);
	fflush(stdout);

	for (int pass = 0; pass < 2; pass++) {
		FILE *f = pass == 0 ? (K.json ? stdout : NULL) : json_out;

		if (!f)
			continue;
		fprintf(f,
			"{\"backend\":\"%s\",\"style\":\"%s\",\"scenario\":\"%s\","
			"\"n\":%u,\"runs\":%u,\"bytes\":%zu,",
			c->backend, c->style, c->scenario, K.n, c->runs, K.size);
		if (c->error)
			fprintf(f, "\"error\":\"%s\",", c->error);
		else
			fprintf(f,
				"\"median_ms\":%.3f,\"min_ms\":%.3f,"
				"\"max_ms\":%.3f,\"baseline_ms\":%.3f,"
				"\"ratio\":%.3f,\"ops_per_s\":%.0f,"
				"\"syscalls_per_op\":%.3f,",
				med, vmin(c->ms, c->runs), vmax(c->ms, c->runs),
				base, base > 0 ? med / base : 0,
				med > 0 ? K.n / (med / 1e3) : 0,
				c->syscalls_per_op);
		knobs_json(f);
		fprintf(f, "}\n");
	}
	if (csv_out) {
		if (c->error)
			fprintf(csv_out, "%s,%s,%s,%u,%u,%zu,,,,,,,,\"%s\"\n",
				c->backend, c->style, c->scenario, K.n, c->runs,
				K.size, c->error);
		else
			fprintf(csv_out,
				"%s,%s,%s,%u,%u,%zu,%.3f,%.3f,%.3f,%.3f,%.3f,"
				"%.0f,%.3f,\n",
				c->backend, c->style, c->scenario, K.n, c->runs,
				K.size, med, vmin(c->ms, c->runs),
				vmax(c->ms, c->runs), base,
				base > 0 ? med / base : 0,
				med > 0 ? K.n / (med / 1e3) : 0,
				c->syscalls_per_op);
	}
}

static struct cell *new_cell(const char *backend, const char *style,
			     const char *scenario)
{
	struct cell *c = &cells[ncells++];

	memset(c, 0, sizeof(*c));
	c->backend = backend;
	c->style = style;
	c->scenario = scenario;
	return c;
}

static void run_baseline(const char *scenario)
{
	struct cell *c = new_cell("sync", "baseline", scenario);
	uint64_t errors = 0;

	baseline_run(&errors); /* warm-up: caches, page tables */
	for (unsigned r = 0; r < K.runs; r++) {
		c->ms[r] = baseline_run(&errors);
		c->base_ms[r] = c->ms[r];
	}
	c->runs = K.runs;
	c->syscalls_per_op = 4;
	if (errors) {
		snprintf(c->errbuf, sizeof(c->errbuf),
			 "%llu reads returned wrong content",
			 (unsigned long long)errors);
		c->error = c->errbuf;
	}
	emit(c);
}

static void run_cell(rl_loop *loop, struct bench_ctx *ctx,
		     const struct backend *b, const struct style *s,
		     const char *scenario, bench_fn fn)
{
	struct cell *c = new_cell(b->name, s->name, scenario);
	struct rl_stats st0, st1;
	uint64_t base_err = 0, syscalls = 0;
	int ret;

	ctx->loop = loop;
	ctx->errors = 0;
	ret = fn(ctx); /* warm-up: pools, buffers, page cache */
	for (unsigned r = 0; r < K.runs && ret == 0 && !ctx->errors; r++) {
		double t0;

		c->base_ms[r] = baseline_run(&base_err);
		rl_loop_stats(loop, &st0);
		t0 = now_ms();
		ret = fn(ctx);
		c->ms[r] = now_ms() - t0;
		rl_loop_stats(loop, &st1);
		syscalls += st1.syscalls - st0.syscalls;
		c->runs = r + 1;
	}
	if (ret < 0) {
		snprintf(c->errbuf, sizeof(c->errbuf), "run failed: %s",
			 rl_strerror(ret));
		c->error = c->errbuf;
	} else if (ctx->errors) {
		snprintf(c->errbuf, sizeof(c->errbuf),
			 "%llu reads failed or returned wrong content",
			 (unsigned long long)ctx->errors);
		c->error = c->errbuf;
	} else {
		c->syscalls_per_op = (double)syscalls / ((double)K.n * c->runs);
	}
	emit(c);
}

static void run_backend(const struct backend *b)
{
	struct rl_options opt = K.opt;
	rl_loop *loop;
	int ret;

	opt.backend = b->kind;
	opt.flags |= b->flags;
	ret = rl_loop_open(&loop, &opt);
	for (unsigned si = 0; si < 3; si++) {
		const struct style *s = &styles[si];
		struct bench_ctx ctx = {
			.paths = paths,
			.npaths = K.files,
			.size = K.size,
			.expect = expect,
			.n = K.n,
			.window = K.window,
			.coro_window = K.coro_window,
		};

		if (!listed(K.styles, s->name))
			continue;
		for (int sc = 0; sc < 2; sc++) {
			const char *scenario = sc ? "blocking" : "parallel";

			if (!listed(K.scenarios, scenario))
				continue;
			if (ret < 0) {
				struct cell *c =
					new_cell(b->name, s->name, scenario);

				snprintf(c->errbuf, sizeof(c->errbuf),
					 "loop init refused: %s",
					 rl_strerror(ret));
				c->error = c->errbuf;
				emit(c);
				continue;
			}
			run_cell(loop, &ctx, b, s, scenario,
				 sc ? s->blocking : s->parallel);
		}
		if (ret == 0 && s->free)
			s->free(&ctx);
	}
	if (ret == 0)
		rl_loop_close(loop);
}

/* ---------------------------------------------------------------- table */

static void print_table(void)
{
	FILE *f = K.json ? stderr : stdout;

	fprintf(f, "\n%-10s %-8s %-8s %9s %9s %9s %7s %10s %9s\n", "backend",
		"style", "scenario", "median_ms", "min_ms", "max_ms", "ratio",
		"ops/s", "sys/op");
	for (unsigned i = 0; i < ncells; i++) {
		struct cell *c = &cells[i];
		double med, base;

		if (c->error) {
			fprintf(f, "%-10s %-8s %-8s  error: %s\n", c->backend,
				c->style, c->scenario, c->error);
			continue;
		}
		med = median(c->ms, c->runs);
		base = median(c->base_ms, c->runs);
		fprintf(f, "%-10s %-8s %-8s %9.2f %9.2f %9.2f %6.2fx %10.0f %9.2f\n",
			c->backend, c->style, c->scenario, med,
			vmin(c->ms, c->runs), vmax(c->ms, c->runs), med / base,
			K.n / (med / 1e3), c->syscalls_per_op);
	}
}

/* --------------------------------------------------------------- options */

static void usage(FILE *f)
{
	fprintf(f,
"usage: ringbench [options]\n"
"  --json             one JSON object per cell on stdout (table on stderr)\n"
"  --backend LIST     uring,epoll,epoll-pool (default all)\n"
"  --style LIST       callback,promise,coro (default all)\n"
"  --scenario LIST    parallel,blocking (default both)\n"
"  -n N               reads per run (default 10000)\n"
"  --runs R           measured runs per cell (default 9, max 101)\n"
"  --size BYTES       size of the bench file (default 12, \"Hello, world\")\n"
"  --file PATH        read this file instead of a generated one\n"
"  --files K          spread reads over K distinct files (default 1)\n"
"  --window W         parallel: at most W reads in flight (default all)\n"
"  --entries E        io_uring SQ entries (default 256)\n"
"  --sqpoll           io_uring: IORING_SETUP_SQPOLL\n"
"  --single-issuer    io_uring: IORING_SETUP_SINGLE_ISSUER\n"
"  --defer-taskrun    io_uring: IORING_SETUP_DEFER_TASKRUN (needs single-issuer)\n"
"  --coop-taskrun     io_uring: IORING_SETUP_COOP_TASKRUN\n"
"  --no-link          io_uring: read_file as open, read, close round trips\n"
"  --no-direct        io_uring: plain fds instead of direct descriptors\n"
"  --register-ring    io_uring: register the ring fd\n"
"  --iowq-max W       io_uring: cap io-wq workers at W\n"
"  --pool-threads T   epoll: thread pool size (default CPU count)\n"
"  --no-inline        epoll: no inline fast path (pool only)\n"
"  --coro-window W    coro: a start waits while W coroutines wait for I/O\n"
"                     (default 256; 0 = never wait)\n"
"  --micro            also measure the coroutine switch round trip\n"
"  --out DIR          write DIR/<timestamp>.json and .csv (default bench/results)\n"
"  --no-out           write no result files\n"
"  --help             this text\n");
}

static unsigned long num(const char *s, const char *what)
{
	char *end;
	unsigned long v = strtoul(s, &end, 0);

	if (!*s || *end || (long)v < 0) {
		fprintf(stderr, "ringbench: %s: not a number: %s\n", what, s);
		exit(2);
	}
	return v;
}

static size_t size_arg(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 0);

	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'm' || *end == 'M')
		v <<= 20, end++;
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end == 'B')
		end++;
	if (!*s || *end || v > (1ull << 30)) {
		fprintf(stderr, "ringbench: --size: bad size %s (max 1 GiB)\n", s);
		exit(2);
	}
	return (size_t)v;
}

static void parse(int argc, char **argv)
{
	enum { O_JSON = 256, O_BACKEND, O_STYLE, O_SCEN, O_RUNS, O_SIZE,
	       O_FILE, O_FILES, O_WINDOW, O_ENTRIES, O_SQPOLL, O_SINGLE,
	       O_DEFER, O_COOP, O_NOLINK, O_NODIRECT, O_REGRING, O_IOWQ,
	       O_POOL, O_NOINLINE, O_CWINDOW, O_MICRO, O_OUT, O_NOOUT };
	static const struct option lo[] = {
		{ "json", no_argument, 0, O_JSON },
		{ "backend", required_argument, 0, O_BACKEND },
		{ "style", required_argument, 0, O_STYLE },
		{ "scenario", required_argument, 0, O_SCEN },
		{ "runs", required_argument, 0, O_RUNS },
		{ "size", required_argument, 0, O_SIZE },
		{ "file", required_argument, 0, O_FILE },
		{ "files", required_argument, 0, O_FILES },
		{ "window", required_argument, 0, O_WINDOW },
		{ "entries", required_argument, 0, O_ENTRIES },
		{ "sqpoll", no_argument, 0, O_SQPOLL },
		{ "single-issuer", no_argument, 0, O_SINGLE },
		{ "defer-taskrun", no_argument, 0, O_DEFER },
		{ "coop-taskrun", no_argument, 0, O_COOP },
		{ "no-link", no_argument, 0, O_NOLINK },
		{ "no-direct", no_argument, 0, O_NODIRECT },
		{ "register-ring", no_argument, 0, O_REGRING },
		{ "iowq-max", required_argument, 0, O_IOWQ },
		{ "pool-threads", required_argument, 0, O_POOL },
		{ "no-inline", no_argument, 0, O_NOINLINE },
		{ "coro-window", required_argument, 0, O_CWINDOW },
		{ "micro", no_argument, 0, O_MICRO },
		{ "out", required_argument, 0, O_OUT },
		{ "no-out", no_argument, 0, O_NOOUT },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	int c;

	rl_options_init(&K.opt);
	while ((c = getopt_long(argc, argv, "n:h", lo, NULL)) != -1) {
		switch (c) {
		case 'n': K.n = (unsigned)num(optarg, "-n"); break;
		case O_JSON: K.json = true; break;
		case O_BACKEND: K.backends = optarg; break;
		case O_STYLE: K.styles = optarg; break;
		case O_SCEN: K.scenarios = optarg; break;
		case O_RUNS: K.runs = (unsigned)num(optarg, "--runs"); break;
		case O_SIZE: K.size = size_arg(optarg); break;
		case O_FILE: K.file = optarg; break;
		case O_FILES: K.files = (unsigned)num(optarg, "--files"); break;
		case O_WINDOW: K.window = (unsigned)num(optarg, "--window"); break;
		case O_ENTRIES: K.opt.entries = (unsigned)num(optarg, "--entries"); break;
		case O_SQPOLL: K.opt.flags |= RL_SQPOLL; break;
		case O_SINGLE: K.opt.flags |= RL_SINGLE_ISSUER; break;
		case O_DEFER: K.opt.flags |= RL_DEFER_TASKRUN; break;
		case O_COOP: K.opt.flags |= RL_COOP_TASKRUN; break;
		case O_NOLINK: K.opt.flags |= RL_NO_LINK; break;
		case O_NODIRECT: K.opt.flags |= RL_NO_DIRECT; break;
		case O_REGRING: K.opt.flags |= RL_REGISTER_RING; break;
		case O_IOWQ: K.opt.iowq_max = (unsigned)num(optarg, "--iowq-max"); break;
		case O_POOL: K.opt.pool_threads = (unsigned)num(optarg, "--pool-threads"); break;
		case O_NOINLINE: K.opt.flags |= RL_NO_INLINE; break;
		case O_CWINDOW:
			K.coro_window = num(optarg, "--coro-window");
			if (!K.coro_window)
				K.coro_window = SIZE_MAX;
			break;
		case O_MICRO: K.micro = true; break;
		case O_OUT: K.out_dir = optarg; break;
		case O_NOOUT: K.no_out = true; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ringbench: unexpected argument %s\n", argv[optind]);
		usage(stderr);
		exit(2);
	}
	if (!K.n || !K.runs || K.runs > MAX_RUNS || !K.files ||
	    K.files > MAX_FILES) {
		fprintf(stderr, "ringbench: need n >= 1, 1 <= runs <= %d, "
				"1 <= files <= %d\n", MAX_RUNS, MAX_FILES);
		exit(2);
	}
}

static void open_outputs(void)
{
	char stamp[64], path[512];
	time_t t = time(NULL);
	const char *dir = K.out_dir;
	struct stat st;

	if (K.no_out)
		return;
	if (!dir) {
		if (stat("bench", &st) < 0 || !S_ISDIR(st.st_mode))
			return; /* not run from the repository */
		dir = "bench/results";
	}
	mkdir(dir, 0755);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime(&t));
	snprintf(path, sizeof(path), "%s/%s.json", dir, stamp);
	json_out = fopen(path, "w");
	snprintf(path, sizeof(path), "%s/%s.csv", dir, stamp);
	csv_out = fopen(path, "w");
	if (!json_out || !csv_out) {
		fprintf(stderr, "ringbench: cannot write results in %s: %s\n",
			dir, strerror(errno));
		exit(1);
	}
	fprintf(csv_out, "backend,style,scenario,n,runs,bytes,median_ms,min_ms,"
			 "max_ms,baseline_ms,ratio,ops_per_s,syscalls_per_op,"
			 "error\n");
	/* The newest run, for scripts/plot.sh and the README. */
	for (int i = 0; i < 2; i++) {
		char target[80];
		const char *ext = i ? "csv" : "json";

		snprintf(path, sizeof(path), "%s/latest.%s", dir, ext);
		snprintf(target, sizeof(target), "%s.%s", stamp, ext);
		unlink(path);
		if (symlink(target, path) < 0) {
			/* Only a convenience: the timestamped files exist. */
		}
	}
	fprintf(stderr, "ringbench: results in %s/%s.{json,csv}\n", dir, stamp);
}

int main(int argc, char **argv)
{
	struct rusage ru;
	char coro_window[48] = "";

	parse(argc, argv);
	init_styles();
	if (make_files() < 0)
		return 1;
	open_outputs();

	if (K.coro_window == SIZE_MAX)
		snprintf(coro_window, sizeof(coro_window), ", coro-window all");
	else if (K.coro_window)
		snprintf(coro_window, sizeof(coro_window), ", coro-window %zu",
			 K.coro_window);
	fprintf(K.json ? stderr : stdout,
		"ringbench: %u reads of a %zu-byte file (%u file%s), %u runs per "
		"cell, window %u%s%s%s%s%s%s%s%s%s%s\n",
		K.n, K.size, K.files, K.files > 1 ? "s" : "", K.runs, K.window,
		K.opt.flags & RL_SQPOLL ? ", sqpoll" : "",
		K.opt.flags & RL_SINGLE_ISSUER ? ", single-issuer" : "",
		K.opt.flags & RL_DEFER_TASKRUN ? ", defer-taskrun" : "",
		K.opt.flags & RL_COOP_TASKRUN ? ", coop-taskrun" : "",
		K.opt.flags & RL_NO_LINK ? ", no-link" : "",
		K.opt.flags & RL_NO_DIRECT ? ", no-direct" : "",
		K.opt.flags & RL_REGISTER_RING ? ", register-ring" : "",
		K.opt.flags & RL_NO_INLINE ? ", no-inline" : "",
		K.opt.iowq_max ? ", iowq-max" : "", coro_window);

	if (listed(K.backends, "sync")) {
		if (listed(K.scenarios, "parallel"))
			run_baseline("parallel");
		if (listed(K.scenarios, "blocking"))
			run_baseline("blocking");
	}
	for (unsigned i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (listed(K.backends, backends[i].name))
			run_backend(&backends[i]);

	print_table();
	if (K.micro) {
		fprintf(K.json ? stderr : stdout,
			"switch round trip: %.2f ns\n",
			bench_coro_switch_ns(10000000));
	}
	getrusage(RUSAGE_SELF, &ru);
	fprintf(K.json ? stderr : stdout, "peak RSS: %.1f MB\n",
		ru.ru_maxrss / 1024.0);
	if (json_out)
		fclose(json_out);
	if (csv_out)
		fclose(csv_out);
	return 0;
}
