/* SPDX-License-Identifier: MIT */
/*
 * options.c - ringbench's command line (see options.h and --help).
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "options.h"
#include "ringloop/coro.h"

struct bench_opts bench_opt = {
	.n = 10000,
	.runs = 9,
	.warmup = 1,
	.files = 1,
	.size = 12,
	.latency = true,
	.limits = true,
	.pair = true,
	.cold_files = 10000,
	.qd = { 1, 8, 32, 128 },
	.nqd = 4,
	.bs = 4096,
	.rand_size = 1ull << 30,
	.run_ms = 1000,
	.pool_qd = true,
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: ringbench [options]\n"
		"  --json             meta record, then one JSON object per cell, on stdout\n"
		"                     (the text report goes to stderr)\n"
		"  --backend LIST     sync,sync-mt,raw-uring,uring,uring-regular,epoll,\n"
		"                     epoll-pool,uring-spread,epoll-spread,uring-tpc,\n"
		"                     epoll-tpc (all); uring-regular: read_file told\n"
		"                     its file is regular, no end-of-file probe (not\n"
		"                     with --file)\n"
		"  --style LIST       baseline,callback,promise,coro (all)\n"
		"  --scenario LIST    parallel,blocking (the default: the seed's reads of a\n"
		"                     cached file), write, cold, randread, randwrite;\n"
		"                     storage = the last four; all = every one\n"
		"  --mode LIST        write, cold: parallel,blocking (both)\n"
		"  --no-limits        only the rows asked for, not the limits they are\n"
		"                     compared with (sync-mt, raw-uring, sync)\n"
		"  --no-pair          no sync run before each measured run, so that a\n"
		"                     profiler sees the cell alone; ratio is then 1 and\n"
		"                     x limit compares medians\n"
		"  -n N               reads per run (10000; 1..%u)\n"
		"  --runs R           measured runs per cell (9; 1..%d)\n"
		"  --warmup W         unmeasured runs before them (1; 0..%d)\n"
		"  --no-latency       do not time each read (see docs/bench.md)\n"
		"  --size BYTES       size of the bench file (12, \"Hello, world\"; 4K, 1M...)\n"
		"  --file PATH        read this regular file (procfs too) instead\n"
		"  --files K          spread reads over K distinct files (1; 1..%d)\n"
		"  --window W         parallel: at most W reads in flight (0 = all)\n"
		"  --entries E        io_uring SQ entries (256; 1..%u)\n"
		"  --cq-entries C     io_uring CQ entries (16 x SQ, at most %u)\n"
		"  --slots S          io_uring: direct descriptor slots, i.e. read_file\n"
		"                     and write_file chains in flight (1024; 1..32768)\n"
		"  --sqpoll           io_uring: IORING_SETUP_SQPOLL\n"
		"  --single-issuer    io_uring: IORING_SETUP_SINGLE_ISSUER\n"
		"  --defer-taskrun    io_uring: IORING_SETUP_DEFER_TASKRUN (needs single-issuer)\n"
		"  --coop-taskrun     io_uring: IORING_SETUP_COOP_TASKRUN\n"
		"  --no-link          io_uring: read_file as open, read, close round trips\n"
		"  --no-direct        io_uring: plain fds instead of direct descriptors\n"
		"  --register-ring    io_uring: register the ring fd\n"
		"  --shared-ring      io_uring: the plain ring, not the default\n"
		"                     SINGLE_ISSUER | DEFER_TASKRUN one (raw-uring\n"
		"                     follows)\n"
		"  --iowq-max W       io_uring: cap io-wq workers at W (0 = kernel default)\n"
		"  --submit-batch S   io_uring: submit once S SQEs wait, not at the loop's\n"
		"                     next wait (0 = the default: at the wait)\n"
		"  --pool-threads T   epoll: thread pool size (0 = CPU count)\n"
		"  --no-inline        epoll: no inline fast path (pool only)\n"
		"  --coro-window W    coro: a start waits while W coroutines wait for I/O\n"
		"                     (%d; 0 = never wait)\n"
		"storage:\n"
		"  --fsync            write: fsync each file before closing it\n"
		"  --cold-files K     cold: K distinct files, read n times in all (10000;\n"
		"                     1..%u)\n"
		"  --qd LIST          randread, randwrite: queue depths (1,8,32,128; 1..%u)\n"
		"  --bs BYTES         their block size (4K; a multiple of 512, up to 1M)\n"
		"  --rand-size BYTES  their file's size (1G; made once and reused)\n"
		"  --rand-file PATH   their file (bench/data/rand-<size>.dat, or under\n"
		"                     $TMPDIR when not run from the repository)\n"
		"  --no-layout        take --rand-file as it is, never lay it out (its\n"
		"                     blocks must be ringbench's: the cells check them)\n"
		"  --time MS          a random I/O run lasts MS milliseconds (1000)...\n"
		"  --ops N            ...or N operations\n"
		"  --fixed-bufs       registered buffers (read/write_fixed)\n"
		"  --no-pool-qd       no epoll-pool rows with as many threads as the qd\n"
		"  --force-async      io_uring: IOSQE_ASYNC on every file request\n"
		"  --iopoll           io_uring: IORING_SETUP_IOPOLL\n"
		"  --drop-cache PATH  drop the page cache of PATH (a file, or the files\n"
		"                     of a directory), print the share of its pages\n"
		"                     still resident, and exit (for scripts/peers.sh)\n"
		"  --loops N          loops of the spread and tpc rows (0 = one per CPU;\n"
		"                     0..256); the other rows run on one loop\n"
		"  --idle-spin NS     every loop polls up to NS ns before it sleeps\n"
		"                     (rl_options.idle_spin_ns; 0 = never, and on\n"
		"                     epoll neither the loop for its pool nor the\n"
		"                     pool's workers; default: the library's, which\n"
		"                     spins on group loops only)\n"
		"  --micro            also measure the coroutine switch round trip, the\n"
		"                     cross-loop message round trip (with and without\n"
		"                     the idle spin) and what the spin costs a group\n"
		"                     with nothing to do\n"
		"  --out DIR          write DIR/<timestamp>.json and .csv (bench/results)\n"
		"  --no-out           write no result files\n"
		"  --help             this text\n",
		BENCH_MAX_N, BENCH_MAX_RUNS, BENCH_MAX_WARMUP, BENCH_MAX_FILES,
		BENCH_MAX_ENTRIES, BENCH_MAX_CQ_ENTRIES, RL_CORO_START_WINDOW,
		BENCH_MAX_COLD_FILES, BENCH_MAX_QD);
}

static void bad(const char *opt, const char *what, const char *value)
{
	fprintf(stderr, "ringbench: %s: %s: '%s'\n", opt, what, value);
	exit(2);
}

/* A decimal number within [min, max]: no sign, no trailing text, no
 * wrap-around (-n 4294967297 is out of range, not 1). */
static unsigned long long num(const char *opt, const char *s,
			      unsigned long long min, unsigned long long max)
{
	char *end;
	unsigned long long v;

	if (!isdigit((unsigned char)s[0]))
		bad(opt, "not a number", s);
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end)
		bad(opt, "not a number", s);
	if (errno == ERANGE || v < min || v > max) {
		fprintf(stderr,
			"ringbench: %s: '%s' is out of range (%llu..%llu)\n",
			opt, s, min, max);
		exit(2);
	}
	return v;
}

/* Bytes, with an optional K/M/G/T suffix (KiB, kB... are the same here),
 * at most max. */
static unsigned long long bytes_arg(const char *opt, const char *s,
				    unsigned long long max)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!isdigit((unsigned char)s[0]))
		bad(opt, "not a size", s);
	errno = 0;
	v = strtoull(s, &end, 10);
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 't':
	case 'T':
		shift = 40;
		end++;
		break;
	}
	if (shift && *end == 'i')
		end++;
	if (shift && *end == 'B')
		end++;
	if (*end)
		bad(opt, "not a size", s);
	if (errno == ERANGE || v > (max >> shift)) {
		fprintf(stderr, "ringbench: %s: '%s' is more than %llu %s\n",
			opt, s, max >= (1ull << 30) ? max >> 30 : max >> 10,
			max >= (1ull << 30) ? "GiB" : "KiB");
		exit(2);
	}
	return v << shift;
}

/* A comma-separated list of queue depths. */
static void qd_list(const char *s)
{
	char buf[256], *tok, *save = NULL;

	if (strlen(s) >= sizeof(buf))
		bad("--qd", "too long", s);
	snprintf(buf, sizeof(buf), "%s", s);
	bench_opt.nqd = 0;
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (bench_opt.nqd == BENCH_MAX_QDS)
			bad("--qd", "more than 8 depths", s);
		bench_opt.qd[bench_opt.nqd++] =
			(unsigned)num("--qd", tok, 1, BENCH_MAX_QD);
	}
	if (!bench_opt.nqd)
		bad("--qd", "no depth", s);
}

static void record_args(int argc, char **argv)
{
	size_t len = 0;

	for (int i = 0; i < argc; i++) {
		const char *a = i ? argv[i] : "ringbench";
		bool quote = strpbrk(a, " \t\"'") != NULL || !*a;
		int w = snprintf(bench_opt.args + len,
				 sizeof(bench_opt.args) - len,
				 quote ? "%s'%s'" : "%s%s", i ? " " : "", a);

		if (w < 0 || (size_t)w >= sizeof(bench_opt.args) - len)
			break;
		len += (size_t)w;
	}
}

void bench_opts_parse(int argc, char **argv)
{
	enum {
		O_JSON = 256,
		O_BACKEND,
		O_STYLE,
		O_SCEN,
		O_RUNS,
		O_WARMUP,
		O_SIZE,
		O_FILE,
		O_FILES,
		O_WINDOW,
		O_ENTRIES,
		O_SLOTS,
		O_CQ,
		O_SQPOLL,
		O_SINGLE,
		O_SHARED,
		O_DEFER,
		O_COOP,
		O_NOLINK,
		O_NODIRECT,
		O_REGRING,
		O_IOWQ,
		O_SUBMITB,
		O_POOL,
		O_NOINLINE,
		O_CWINDOW,
		O_MICRO,
		O_LOOPS,
		O_SPIN,
		O_OUT,
		O_NOOUT,
		O_NOLAT,
		O_NOLIMITS,
		O_NOPAIR,
		O_MODE,
		O_FSYNC,
		O_COLDFILES,
		O_QD,
		O_BS,
		O_RANDSIZE,
		O_RANDFILE,
		O_TIME,
		O_OPS,
		O_FIXED,
		O_NOLAYOUT,
		O_NOPOOLQD,
		O_FASYNC,
		O_IOPOLL,
		O_DROP
	};
	static const struct option lo[] = {
		{ "json", no_argument, 0, O_JSON },
		{ "backend", required_argument, 0, O_BACKEND },
		{ "style", required_argument, 0, O_STYLE },
		{ "scenario", required_argument, 0, O_SCEN },
		{ "runs", required_argument, 0, O_RUNS },
		{ "warmup", required_argument, 0, O_WARMUP },
		{ "size", required_argument, 0, O_SIZE },
		{ "file", required_argument, 0, O_FILE },
		{ "files", required_argument, 0, O_FILES },
		{ "window", required_argument, 0, O_WINDOW },
		{ "entries", required_argument, 0, O_ENTRIES },
		{ "cq-entries", required_argument, 0, O_CQ },
		{ "slots", required_argument, 0, O_SLOTS },
		{ "sqpoll", no_argument, 0, O_SQPOLL },
		{ "single-issuer", no_argument, 0, O_SINGLE },
		{ "shared-ring", no_argument, 0, O_SHARED },
		{ "defer-taskrun", no_argument, 0, O_DEFER },
		{ "coop-taskrun", no_argument, 0, O_COOP },
		{ "no-link", no_argument, 0, O_NOLINK },
		{ "no-direct", no_argument, 0, O_NODIRECT },
		{ "register-ring", no_argument, 0, O_REGRING },
		{ "iowq-max", required_argument, 0, O_IOWQ },
		{ "submit-batch", required_argument, 0, O_SUBMITB },
		{ "pool-threads", required_argument, 0, O_POOL },
		{ "no-inline", no_argument, 0, O_NOINLINE },
		{ "coro-window", required_argument, 0, O_CWINDOW },
		{ "micro", no_argument, 0, O_MICRO },
		{ "idle-spin", required_argument, 0, O_SPIN },
		{ "loops", required_argument, 0, O_LOOPS },
		{ "out", required_argument, 0, O_OUT },
		{ "no-out", no_argument, 0, O_NOOUT },
		{ "no-latency", no_argument, 0, O_NOLAT },
		{ "no-limits", no_argument, 0, O_NOLIMITS },
		{ "no-pair", no_argument, 0, O_NOPAIR },
		{ "mode", required_argument, 0, O_MODE },
		{ "fsync", no_argument, 0, O_FSYNC },
		{ "cold-files", required_argument, 0, O_COLDFILES },
		{ "qd", required_argument, 0, O_QD },
		{ "bs", required_argument, 0, O_BS },
		{ "rand-size", required_argument, 0, O_RANDSIZE },
		{ "rand-file", required_argument, 0, O_RANDFILE },
		{ "time", required_argument, 0, O_TIME },
		{ "ops", required_argument, 0, O_OPS },
		{ "fixed-bufs", no_argument, 0, O_FIXED },
		{ "no-layout", no_argument, 0, O_NOLAYOUT },
		{ "no-pool-qd", no_argument, 0, O_NOPOOLQD },
		{ "force-async", no_argument, 0, O_FASYNC },
		{ "iopoll", no_argument, 0, O_IOPOLL },
		{ "drop-cache", required_argument, 0, O_DROP },
		{ "help", no_argument, 0, 'h' },
		{ 0, 0, 0, 0 },
	};
	struct bench_opts *o = &bench_opt;
	unsigned long long cw;
	int c;

	record_args(argc, argv);
	rl_options_init(&o->loop);
	while ((c = getopt_long(argc, argv, "n:h", lo, NULL)) != -1) {
		switch (c) {
		case 'n':
			o->n = (unsigned)num("-n", optarg, 1, BENCH_MAX_N);
			break;
		case O_JSON:
			o->json = true;
			break;
		case O_BACKEND:
			o->backends = optarg;
			break;
		case O_STYLE:
			o->styles = optarg;
			break;
		case O_SCEN:
			o->scenarios = optarg;
			break;
		case O_RUNS:
			o->runs = (unsigned)num("--runs", optarg, 1,
						BENCH_MAX_RUNS);
			break;
		case O_WARMUP:
			o->warmup = (unsigned)num("--warmup", optarg, 0,
						  BENCH_MAX_WARMUP);
			break;
		case O_SIZE:
			o->size =
				(size_t)bytes_arg("--size", optarg, 1ull << 30);
			break;
		case O_FILE:
			o->file = optarg;
			break;
		case O_FILES:
			o->files = (unsigned)num("--files", optarg, 1,
						 BENCH_MAX_FILES);
			break;
		case O_WINDOW:
			o->window = (unsigned)num("--window", optarg, 0,
						  BENCH_MAX_N);
			break;
		case O_ENTRIES:
			o->loop.entries = (unsigned)num("--entries", optarg, 1,
							BENCH_MAX_ENTRIES);
			break;
		case O_SLOTS:
			o->loop.direct_slots =
				(unsigned)num("--slots", optarg, 1, 32768);
			break;
		case O_CQ:
			o->loop.cq_entries =
				(unsigned)num("--cq-entries", optarg, 1,
					      2 * BENCH_MAX_ENTRIES);
			break;
		case O_SQPOLL:
			o->loop.flags |= RL_SQPOLL;
			break;
		case O_SINGLE:
			o->loop.flags |= RL_SINGLE_ISSUER;
			break;
		case O_SHARED:
			o->loop.flags |= RL_SHARED_RING;
			break;
		case O_DEFER:
			o->loop.flags |= RL_DEFER_TASKRUN;
			break;
		case O_COOP:
			o->loop.flags |= RL_COOP_TASKRUN;
			break;
		case O_NOLINK:
			o->loop.flags |= RL_NO_LINK;
			break;
		case O_NODIRECT:
			o->loop.flags |= RL_NO_DIRECT;
			break;
		case O_REGRING:
			o->loop.flags |= RL_REGISTER_RING;
			break;
		case O_IOWQ:
			o->loop.iowq_max =
				(unsigned)num("--iowq-max", optarg, 0, 1000000);
			break;
		case O_SUBMITB:
			o->loop.submit_batch = (unsigned)num("--submit-batch",
							     optarg, 0, 1024);
			break;
		case O_POOL:
			o->loop.pool_threads = (unsigned)num("--pool-threads",
							     optarg, 0, 1024);
			break;
		case O_NOINLINE:
			o->loop.flags |= RL_NO_INLINE;
			break;
		case O_CWINDOW:
			cw = num("--coro-window", optarg, 0, BENCH_MAX_N);
			o->coro_window_all = cw == 0;
			o->coro_window = cw ? (size_t)cw : SIZE_MAX;
			break;
		case O_MICRO:
			o->micro = true;
			break;
		case O_LOOPS:
			o->loops = (unsigned)num("--loops", optarg, 0, 256);
			break;
		case O_SPIN:
			/* rl_options: 0 is the default, < 0 none. */
			o->loop.idle_spin_ns = (int64_t)num(
				"--idle-spin", optarg, 0, RL_IDLE_SPIN_MAX_NS);
			if (!o->loop.idle_spin_ns)
				o->loop.idle_spin_ns = -1;
			break;
		case O_OUT:
			o->out_dir = optarg;
			break;
		case O_NOOUT:
			o->no_out = true;
			break;
		case O_NOLAT:
			o->latency = false;
			break;
		case O_NOLIMITS:
			o->limits = false;
			break;
		case O_NOPAIR:
			o->pair = false;
			break;
		case O_MODE:
			o->modes = optarg;
			break;
		case O_FSYNC:
			o->fsync = true;
			break;
		case O_COLDFILES:
			o->cold_files = (unsigned)num("--cold-files", optarg, 1,
						      BENCH_MAX_COLD_FILES);
			break;
		case O_QD:
			qd_list(optarg);
			break;
		case O_BS:
			o->bs = (size_t)bytes_arg("--bs", optarg, BENCH_MAX_BS);
			if (!o->bs || o->bs % 512)
				bad("--bs", "not a multiple of 512", optarg);
			break;
		case O_RANDSIZE:
			o->rand_size =
				bytes_arg("--rand-size", optarg,
					  (uint64_t)BENCH_MAX_RAND_MB << 20);
			break;
		case O_RANDFILE:
			o->rand_file = optarg;
			break;
		case O_TIME:
			o->run_ms = (unsigned)num("--time", optarg, 1, 3600000);
			o->run_ops = 0;
			break;
		case O_OPS:
			o->run_ops =
				(unsigned)num("--ops", optarg, 1, BENCH_MAX_N);
			break;
		case O_FIXED:
			o->fixed_bufs = true;
			break;
		case O_NOLAYOUT:
			o->no_layout = true;
			break;
		case O_NOPOOLQD:
			o->pool_qd = false;
			break;
		case O_FASYNC:
			o->loop.flags |= RL_FORCE_ASYNC;
			break;
		case O_IOPOLL:
			o->loop.flags |= RL_IOPOLL;
			break;
		case O_DROP:
			o->drop_cache = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ringbench: unexpected argument '%s'\n",
			argv[optind]);
		usage(stderr);
		exit(2);
	}
	/* The loop's default CQ is 16 SQ entries; past 2048 entries that is
	 * more than the kernel accepts without IORING_SETUP_CLAMP, so the
	 * bench asks for the largest CQ it allows instead of failing. */
	if (!o->loop.cq_entries &&
	    16ull * bench_effective_entries() > BENCH_MAX_CQ_ENTRIES)
		o->loop.cq_entries = BENCH_MAX_CQ_ENTRIES;
}

void bench_check_list(const char *option, const char *list,
		      const char *const *valid)
{
	const char *p = list;

	if (!list)
		return;
	for (;;) {
		size_t len = strcspn(p, ",");
		bool ok = len == 3 && !strncmp(p, "all", 3);

		for (unsigned i = 0; valid[i] && !ok; i++)
			ok = strlen(valid[i]) == len &&
			     !strncmp(p, valid[i], len);
		if (!ok) {
			fprintf(stderr,
				"ringbench: %s: unknown name '%.*s' "
				"(valid: ",
				option, (int)len, p);
			for (unsigned i = 0; valid[i]; i++)
				fprintf(stderr, "%s, ", valid[i]);
			fprintf(stderr, "all)\n");
			exit(2);
		}
		if (!p[len])
			break;
		p += len + 1;
	}
}

bool bench_scenario_selected(const char *scenario, const char *mode)
{
	static const char *const storage[] = { "write", "cold", "randread",
					       "randwrite", NULL };
	const char *list = bench_opt.scenarios;
	bool is_storage = false, listed;

	for (unsigned i = 0; storage[i]; i++)
		is_storage |= !strcmp(storage[i], scenario);
	if (!list)
		listed = !is_storage;
	else
		listed = bench_listed(list, scenario) ||
			 (is_storage && bench_listed(list, "storage"));
	return listed && (!mode || bench_listed(bench_opt.modes, mode));
}

bool bench_listed(const char *list, const char *name)
{
	size_t len = strlen(name);

	if (!list)
		return true;
	for (const char *p = list;;) {
		size_t l = strcspn(p, ",");

		if ((l == len && !strncmp(p, name, len)) ||
		    (l == 3 && !strncmp(p, "all", 3)))
			return true;
		if (!p[l])
			return false;
		p += l + 1;
	}
}

unsigned bench_effective_window(void)
{
	unsigned w = bench_opt.window;

	return w && w < bench_opt.n ? w : bench_opt.n;
}

/* The defaults rl_options documents for a 0. */
unsigned bench_effective_entries(void)
{
	return bench_opt.loop.entries ? bench_opt.loop.entries : 256;
}

unsigned bench_effective_cq_entries(void)
{
	return bench_opt.loop.cq_entries ? bench_opt.loop.cq_entries
					 : 16 * bench_effective_entries();
}

unsigned bench_effective_pool_threads(void)
{
	return bench_opt.loop.pool_threads ? bench_opt.loop.pool_threads
					   : bench_sync_mt_threads();
}

size_t bench_effective_coro_window(void)
{
	size_t w = bench_opt.coro_window ? bench_opt.coro_window
					 : RL_CORO_START_WINDOW;

	/* No more coroutines than reads can wait at once. */
	return w < bench_opt.n ? w : bench_opt.n;
}
