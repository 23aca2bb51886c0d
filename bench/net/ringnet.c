/* SPDX-License-Identifier: MIT */
/*
 * ringnet.c - the socket bench's driver: for each cell (backend, style,
 * connections, message size) it starts an echo server in a child process
 * pinned to one CPU, drives it from this process pinned to the other with
 * the load generator for a fixed time after a warm-up, and prints
 * requests/s, latency percentiles and the server's CPU per request, as a
 * table or as JSON lines (--json) with the fields of DESIGN.md.
 *
 * Cells of different backends for the same connections and size run next
 * to each other, and --runs R repeats the whole matrix R times in turn,
 * so that a ratio compares runs made under the same load of the machine.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ringnet.h"

static const struct echo_style *const styles[] = {
	&echo_style_loop, &echo_style_callback,	    &echo_style_promise,
	&echo_style_coro, &echo_style_promise_recv, &echo_style_coro_recv,
};

/* A backend and the io_uring setup flags it runs with: variants of one
 * backend run side by side in one invocation, so that their ratios come
 * from runs made under the same load of the machine. */
struct variant {
	const char *name;
	int backend;
	unsigned flags;
	const char *knobs;
};

/* "uring" is the loop's default ring (SINGLE_ISSUER | DEFER_TASKRUN),
 * "uring-shared" the plain one. */
static const struct variant variants[] = {
	{ "uring", RL_BACKEND_URING, 0, "" },
	{ "uring-shared", RL_BACKEND_URING, RL_SHARED_RING, "shared-ring" },
	{ "uring-coop", RL_BACKEND_URING, RL_COOP_TASKRUN, "coop-taskrun" },
	{ "epoll", RL_BACKEND_EPOLL, 0, "" },
};

struct cell {
	const struct variant *v;
	int backend;
	const struct echo_style *style;
	int conns;
	unsigned size;
	int nruns;
	struct gen_result run[16];
	double rps[16];
	int tries[16];
	char error[200];
};

static struct {
	char backends[64], styles[64], conns[64], sizes[64];
	double duration, warmup;
	int runs, server_cpu, client_cpu;
	bool json;
	double quiet_s;	   /* wait up to this long for a quiet second */
	double max_others; /* retry a run that others disturbed more */
	int tries;
	const char *gen_cc;
	struct echo_opts eo;
	char knobs[200];
} cfg = {
	.backends = "uring,epoll",
	.styles = "loop",
	.conns = "1,64,1000",
	.sizes = "64,4096",
	.duration = 3,
	.warmup = 0.5,
	.runs = 1,
	.quiet_s = 30,
	.max_others = 0.10,
	.tries = 4,
	.gen_cc = "reno",
	.server_cpu = 1,
	.client_cpu = 0,
	.eo = { .bufs = 4096, .buf_size = 4096 },
};

static int parse_list(const char *s, long *out, int max)
{
	char *copy = strdup(s), *tok, *save = NULL;
	int n = 0;

	for (tok = strtok_r(copy, ",", &save); tok && n < max;
	     tok = strtok_r(NULL, ",", &save)) {
		char *end;
		long v = strtol(tok, &end, 10);

		if (*end == 'k' || *end == 'K')
			v *= 1024;
		out[n++] = v;
	}
	free(copy);
	return n;
}

static void pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		perror("ringnet: sched_setaffinity");
}

/* Busy and total jiffies of the whole machine. */
static void machine_jiffies(unsigned long long *busy, unsigned long long *total)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");

	*busy = *total = 0;
	if (!f)
		return;
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
		   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 8) {
		*busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
		*total = *busy + v[3] + v[4];
	}
	fclose(f);
}

/* Waits, at most cfg.quiet_s, for a second in which the machine was at
 * least 95% idle: other people's builds and tests share it. */
static void wait_quiet(void)
{
	unsigned long long b0, t0, b1, t1;
	double waited = 0;

	while (waited < cfg.quiet_s) {
		machine_jiffies(&b0, &t0);
		usleep(500000);
		machine_jiffies(&b1, &t1);
		waited += 0.5;
		if (t1 > t0 && (double)(b1 - b0) / (double)(t1 - t0) < 0.05)
			return;
	}
}

static int read_mark(int fd, struct echo_mark *m)
{
	size_t got = 0;
	ssize_t n;

	while (got < sizeof(*m)) {
		n = read(fd, (char *)m + got, sizeof(*m) - got);
		if (n <= 0)
			return -EPIPE;
		got += (size_t)n;
	}
	return 0;
}

/* One run of one cell: a fresh server process, a fresh listener. */
static int run_once(struct cell *c, struct gen_result *r)
{
	struct echo_opts eo = cfg.eo;
	struct gen_opts go;
	struct echo_mark ready;
	struct rl_addr a;
	int ctl[2], reply[2], lfd, status;
	pid_t pid;
	char q = 'q';

	memset(r, 0, sizeof(*r));
	eo.backend = c->backend;
	eo.flags |= c->v->flags;
	rl_addr_ip(&a, "127.0.0.1", 0);
	lfd = rl_net_listen(&a, 4096, RL_LISTEN_NODELAY);
	if (lfd < 0) {
		snprintf(r->error, sizeof(r->error), "listen: %s",
			 rl_strerror(lfd));
		return -1;
	}
	rl_net_local_addr(lfd, &a);
	if (pipe2(ctl, O_CLOEXEC) < 0 || pipe2(reply, O_CLOEXEC) < 0) {
		snprintf(r->error, sizeof(r->error), "pipe: %s",
			 strerror(errno));
		close(lfd);
		return -1;
	}
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		close(ctl[1]);
		close(reply[0]);
		_exit(echo_server_main(c->style, &eo, lfd, ctl[0], reply[1],
				       cfg.server_cpu));
	}
	close(ctl[0]);
	close(reply[1]);
	close(lfd);
	if (pid < 0 || read_mark(reply[0], &ready) < 0 || ready.err) {
		snprintf(r->error, sizeof(r->error), "server: %s",
			 pid < 0     ? strerror(errno)
			 : ready.err ? rl_strerror(ready.err)
				     : "did not start");
		goto out;
	}
	memset(&go, 0, sizeof(go));
	go.addr = &a;
	go.conns = c->conns;
	go.msg_size = c->size;
	go.warmup_s = cfg.warmup;
	go.duration_s = cfg.duration;
	go.ctl = ctl[1];
	go.reply = reply[0];
	go.cpus[0] = cfg.server_cpu;
	go.cpus[1] = cfg.client_cpu;
	go.cc = strcmp(cfg.gen_cc, "system") ? cfg.gen_cc : NULL;
	gen_run(&go, r);
out:
	if (write(ctl[1], &q, 1) < 0) {
		/* The server is gone already: waitpid() tells. */
	}
	close(ctl[1]);
	if (pid > 0 && waitpid(pid, &status, 0) == pid && !r->error[0] &&
	    !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
		snprintf(r->error, sizeof(r->error), "server exit status %d",
			 status);
	close(reply[0]);
	return r->error[0] ? -1 : 0;
}

static double cpu_s(const struct echo_mark *m)
{
	return (double)m->ru.ru_utime.tv_sec + m->ru.ru_utime.tv_usec / 1e6 +
	       (double)m->ru.ru_stime.tv_sec + m->ru.ru_stime.tv_usec / 1e6;
}

/* What else ran on the two CPUs during a run, in CPUs. */
static double others_util(const struct gen_result *r)
{
	double o = (r->busy_s - (cpu_s(&r->m1) - cpu_s(&r->m0)) - r->cpu_s) /
		   r->wall_s;

	return o < 0 ? 0 : o;
}

/* One run, after a quiet second; again (up to cfg.tries) while other
 * work took more than cfg.max_others of a CPU meanwhile. Keeps the least
 * disturbed run. */
static int run_quiet(struct cell *c, struct gen_result *best, int *tries)
{
	struct gen_result r;
	int ret = -1;

	for (*tries = 1; *tries <= cfg.tries; (*tries)++) {
		wait_quiet();
		if (run_once(c, &r) < 0) {
			*best = r;
			return -1;
		}
		if (ret < 0 || others_util(&r) < others_util(best))
			*best = r;
		ret = 0;
		if (others_util(&r) <= cfg.max_others)
			break;
	}
	if (*tries > cfg.tries)
		*tries = cfg.tries;
	return ret;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The run whose requests/s is the median of the cell's runs. */
static const struct gen_result *median_run(const struct cell *c)
{
	double sorted[16];
	double med;

	memcpy(sorted, c->rps, (size_t)c->nruns * sizeof(double));
	qsort(sorted, (size_t)c->nruns, sizeof(double), cmp_double);
	med = sorted[(c->nruns - 1) / 2];
	for (int i = 0; i < c->nruns; i++)
		if (c->rps[i] == med)
			return &c->run[i];
	return &c->run[0];
}

static const char *backend_name(int b)
{
	return b == RL_BACKEND_URING ? "uring" : "epoll";
}

/* The io_uring ring a cell's server runs on, as a loop opened with its
 * options reports it ("none" on epoll): the default ring may have been
 * refused by the kernel. */
static const char *cell_ring(const struct cell *c)
{
	struct rl_options opt;
	const char *ring = "none";
	rl_loop *loop;

	rl_options_init(&opt);
	opt.backend = c->backend;
	opt.flags = cfg.eo.flags | c->v->flags;
	opt.entries = cfg.eo.entries;
	if (rl_loop_open(&loop, &opt) == 0) {
		ring = rl_loop_ring(loop);
		rl_loop_close(loop);
	}
	return ring;
}

/* The cell's knobs: its variant's, the command line's and the ring. */
static const char *cell_knobs(const struct cell *c)
{
	static char buf[300];

	snprintf(buf, sizeof(buf), "%s%s%s%sring=%s", c->v->knobs,
		 c->v->knobs[0] && cfg.knobs[0] ? " " : "", cfg.knobs,
		 c->v->knobs[0] || cfg.knobs[0] ? " " : "", cell_ring(c));
	return buf;
}

static void print_cell(const struct cell *c)
{
	const struct gen_result *r;
	double wall, scpu, req, others;
	int tries = 0;

	if (c->error[0]) {
		if (cfg.json)
			printf("{\"scenario\":\"echo\",\"backend\":\"%s\","
			       "\"variant\":\"%s\",\"style\":\"%s\","
			       "\"conns\":%d,\"msg_size\":%u,"
			       "\"knobs\":\"%s\",\"error\":\"%s\"}\n",
			       backend_name(c->backend), c->v->name,
			       c->style->name, c->conns, c->size, cell_knobs(c),
			       c->error);
		else
			printf("%-11s %-6s %6d %6u  error: %s\n", c->v->name,
			       c->style->name, c->conns, c->size, c->error);
		fflush(stdout);
		return;
	}
	r = median_run(c);
	wall = r->wall_s;
	req = (double)r->requests;
	scpu = cpu_s(&r->m1) - cpu_s(&r->m0);
	/* What else ran on the two CPUs: other processes, interrupts. */
	others = others_util(r);
	for (int i = 0; i < c->nruns; i++)
		tries += c->tries[i];
	if (cfg.json) {
		printf("{\"scenario\":\"echo\",\"backend\":\"%s\","
		       "\"variant\":\"%s\",\"style\":\"%s\","
		       "\"conns\":%d,\"msg_size\":%u,"
		       "\"runs\":%d,\"duration_s\":%.3f,\"requests\":%llu,"
		       "\"rps\":%.0f,\"rps_runs\":[",
		       backend_name(c->backend), c->v->name, c->style->name,
		       c->conns, c->size, c->nruns, wall,
		       (unsigned long long)r->requests, req / wall);
		for (int i = 0; i < c->nruns; i++)
			printf("%s%.0f", i ? "," : "", c->rps[i]);
		printf("],\"lat_p50_us\":%.1f,\"lat_p99_us\":%.1f,"
		       "\"lat_p999_us\":%.1f,\"lat_max_us\":%.1f,"
		       "\"lat_mean_us\":%.1f,\"cpu_ms\":%.1f,"
		       "\"cpu_util\":%.3f,\"cpu_us_per_req\":%.3f,"
		       "\"gen_cpu_util\":%.3f,\"syscalls_per_op\":%.3f,"
		       "\"enters_per_op\":%.3f,\"waits_per_op\":%.3f,"
		       "\"net_dry\":%llu,\"others_cpu_util\":%.3f,"
		       "\"conns_served\":%d,\"oldest_wait_us\":%.1f,"
		       "\"tries\":%d,\"knobs\":\"%s\"}\n",
		       r->lat_p50_us, r->lat_p99_us, r->lat_p999_us,
		       r->lat_max_us, r->lat_mean_us, scpu * 1e3, scpu / wall,
		       req ? scpu * 1e6 / req : 0, r->cpu_s / wall,
		       req ? (double)(r->m1.st.syscalls - r->m0.st.syscalls) /
				       req
			   : 0,
		       req ? (double)(r->m1.st.enters - r->m0.st.enters) / req
			   : 0,
		       req ? (double)(r->m1.st.waits - r->m0.st.waits) / req
			   : 0,
		       (unsigned long long)(r->m1.st.net_dry -
					    r->m0.st.net_dry),
		       others, r->conns_served, r->oldest_wait_us, tries,
		       cell_knobs(c));
	} else {
		printf("%-11s %-6s %6d %6u %10.0f %9.1f %9.1f %8.2f %6.0f%% "
		       "%6.0f%% %7.2f %6.0f%%\n",
		       c->v->name, c->style->name, c->conns, c->size,
		       req / wall, r->lat_p50_us, r->lat_p99_us,
		       req ? scpu * 1e6 / req : 0, 100 * scpu / wall,
		       100 * r->cpu_s / wall,
		       req ? (double)(r->m1.st.syscalls - r->m0.st.syscalls) /
				       req
			   : 0,
		       100 * others);
	}
	if (r->conns_served < c->conns)
		fprintf(stderr,
			"ringnet: %s %s, %d conns: only %d connections were "
			"answered in the window (the oldest unanswered message "
			"waited %.0f ms): the server starves the others, and "
			"its latencies leave them out\n",
			c->v->name, c->style->name, c->conns, r->conns_served,
			r->oldest_wait_us / 1e3);
	fflush(stdout);
}

static void print_meta(void)
{
	struct utsname u;
	char model[128] = "unknown", line[256], commit[64] = "unknown";
	FILE *f = fopen("/proc/cpuinfo", "r");

	if (f) {
		while (fgets(line, sizeof(line), f))
			if (!strncmp(line, "model name", 10)) {
				char *p = strchr(line, ':');

				if (p) {
					snprintf(model, sizeof(model), "%s",
						 p + 2);
					model[strcspn(model, "\n")] = '\0';
				}
				break;
			}
		fclose(f);
	}
	f = popen("git rev-parse --short HEAD 2>/dev/null", "r");
	if (f) {
		if (fgets(commit, sizeof(commit), f))
			commit[strcspn(commit, "\n")] = '\0';
		pclose(f);
	}
	uname(&u);
	if (cfg.json)
		printf("{\"meta\":{\"kernel\":\"%s\",\"cpu\":\"%s\","
		       "\"cpus\":%ld,\"liburing\":\"2.3\",\"compiler\":"
		       "\"%s\",\"commit\":\"%s\",\"server_cpu\":%d,"
		       "\"client_cpu\":%d,\"gen_cc\":\"%s\",\"knobs\":\"%s\"}}\n",
		       u.release, model, sysconf(_SC_NPROCESSORS_ONLN),
		       __VERSION__, commit, cfg.server_cpu, cfg.client_cpu,
		       cfg.gen_cc, cfg.knobs);
	else
		printf("# echo over loopback TCP: %s, %s, %ld CPUs, server on "
		       "CPU %d, generator on CPU %d, %.1f s after %.1f s "
		       "warm-up%s%s\n"
		       "%-11s %-6s %6s %6s %10s %9s %9s %8s %7s %7s %7s %7s\n",
		       u.release, model, sysconf(_SC_NPROCESSORS_ONLN),
		       cfg.server_cpu, cfg.client_cpu, cfg.duration, cfg.warmup,
		       cfg.knobs[0] ? ", knobs: " : "", cfg.knobs, "backend",
		       "style", "conns", "size", "req/s", "p50 us", "p99 us",
		       "cpu us/r", "srv cpu", "gen cpu", "sys/r", "others");
}

static void usage(void)
{
	fprintf(stderr,
		"usage: ringnet [options]\n"
		"  --backend LIST     uring,epoll (uring: the loop's default ring,\n"
		"                     SINGLE_ISSUER + DEFER_TASKRUN); also\n"
		"                     uring-shared (the plain ring) and uring-coop\n"
		"                     (COOP_TASKRUN), run side by side\n"
		"  --style LIST       loop,callback,promise,coro,\n"
		"                     promise-recv,coro-recv (loop)\n"
		"  --conns LIST       1,64,1000\n"
		"  --size LIST        message sizes, 64,4096 (4k works)\n"
		"  --duration S       measured seconds per run (3)\n"
		"  --warmup S         seconds before measuring (0.5)\n"
		"  --runs R           runs per cell, median reported (1)\n"
		"  --server-cpu N     --client-cpu N   pinning (1, 0; -1: none)\n"
		"  --bufs N           provided buffers (4096)\n"
		"  --buf-size N       their size (4096)\n"
		"  --copy             echo from a copy, not the held buffer\n"
		"  --entries E        io_uring SQ entries\n"
		"  --single-issuer --defer-taskrun --coop-taskrun\n"
		"  --register-ring --send-zc --sqpoll   io_uring knobs\n"
		"  --quiet S          before each run, wait up to S s for a\n"
		"                     quiet second (30; 0: don't)\n"
		"  --max-others F     retry a run while other work used more\n"
		"                     than F of a CPU meanwhile (0.10)\n"
		"  --tries N          ... at most N times, keep the quietest (4)\n"
		"  --gen-cc NAME      the generator's TCP congestion control\n"
		"                     (reno; system: the default)\n"
		"  --json             JSON lines\n");
}

static void knob(const char *name)
{
	size_t n = strlen(cfg.knobs);

	snprintf(cfg.knobs + n, sizeof(cfg.knobs) - n, "%s%s", n ? " " : "",
		 name);
}

int main(int argc, char **argv)
{
	enum {
		O_BACKEND = 256,
		O_STYLE,
		O_CONNS,
		O_SIZE,
		O_DURATION,
		O_WARMUP,
		O_RUNS,
		O_SCPU,
		O_CCPU,
		O_BUFS,
		O_BUFSIZE,
		O_COPY,
		O_ENTRIES,
		O_SI,
		O_DT,
		O_CT,
		O_RR,
		O_ZC,
		O_SQPOLL,
		O_JSON,
		O_QUIET,
		O_MAXO,
		O_TRIES,
		O_GENCC
	};
	static const struct option lo[] = { { "backend", 1, 0, O_BACKEND },
					    { "style", 1, 0, O_STYLE },
					    { "conns", 1, 0, O_CONNS },
					    { "size", 1, 0, O_SIZE },
					    { "duration", 1, 0, O_DURATION },
					    { "warmup", 1, 0, O_WARMUP },
					    { "runs", 1, 0, O_RUNS },
					    { "server-cpu", 1, 0, O_SCPU },
					    { "client-cpu", 1, 0, O_CCPU },
					    { "bufs", 1, 0, O_BUFS },
					    { "buf-size", 1, 0, O_BUFSIZE },
					    { "copy", 0, 0, O_COPY },
					    { "entries", 1, 0, O_ENTRIES },
					    { "single-issuer", 0, 0, O_SI },
					    { "defer-taskrun", 0, 0, O_DT },
					    { "coop-taskrun", 0, 0, O_CT },
					    { "register-ring", 0, 0, O_RR },
					    { "send-zc", 0, 0, O_ZC },
					    { "sqpoll", 0, 0, O_SQPOLL },
					    { "json", 0, 0, O_JSON },
					    { "quiet", 1, 0, O_QUIET },
					    { "max-others", 1, 0, O_MAXO },
					    { "tries", 1, 0, O_TRIES },
					    { "gen-cc", 1, 0, O_GENCC },
					    { "help", 0, 0, 'h' },
					    { 0, 0, 0, 0 } };
	long conns[16], sizes[16];
	int nconns, nsizes, nb = 0, ns = 0, opt, ncells = 0;
	const struct variant *vsel[8];
	const struct echo_style *sel[8];
	struct cell *cells;
	char buf[32];

	signal(SIGPIPE, SIG_IGN);
	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (opt) {
		case O_BACKEND:
			snprintf(cfg.backends, sizeof(cfg.backends), "%s",
				 optarg);
			break;
		case O_STYLE:
			snprintf(cfg.styles, sizeof(cfg.styles), "%s", optarg);
			break;
		case O_CONNS:
			snprintf(cfg.conns, sizeof(cfg.conns), "%s", optarg);
			break;
		case O_SIZE:
			snprintf(cfg.sizes, sizeof(cfg.sizes), "%s", optarg);
			break;
		case O_DURATION:
			cfg.duration = atof(optarg);
			break;
		case O_WARMUP:
			cfg.warmup = atof(optarg);
			break;
		case O_RUNS:
			cfg.runs = atoi(optarg);
			if (cfg.runs < 1 || cfg.runs > 16)
				cfg.runs = 1;
			break;
		case O_SCPU:
			cfg.server_cpu = atoi(optarg);
			break;
		case O_CCPU:
			cfg.client_cpu = atoi(optarg);
			break;
		case O_BUFS:
			cfg.eo.bufs = (unsigned)atoi(optarg);
			snprintf(buf, sizeof(buf), "bufs=%s", optarg);
			knob(buf);
			break;
		case O_BUFSIZE:
			cfg.eo.buf_size = (unsigned)atoi(optarg);
			snprintf(buf, sizeof(buf), "buf-size=%s", optarg);
			knob(buf);
			break;
		case O_COPY:
			cfg.eo.copy = true;
			knob("copy");
			break;
		case O_ENTRIES:
			cfg.eo.entries = (unsigned)atoi(optarg);
			snprintf(buf, sizeof(buf), "entries=%s", optarg);
			knob(buf);
			break;
		case O_SI:
			cfg.eo.flags |= RL_SINGLE_ISSUER;
			knob("single-issuer");
			break;
		case O_DT:
			cfg.eo.flags |= RL_DEFER_TASKRUN;
			knob("defer-taskrun");
			break;
		case O_CT:
			cfg.eo.flags |= RL_COOP_TASKRUN;
			knob("coop-taskrun");
			break;
		case O_RR:
			cfg.eo.flags |= RL_REGISTER_RING;
			knob("register-ring");
			break;
		case O_ZC:
			cfg.eo.flags |= RL_SEND_ZC;
			knob("send-zc");
			break;
		case O_SQPOLL:
			cfg.eo.flags |= RL_SQPOLL;
			knob("sqpoll");
			break;
		case O_JSON:
			cfg.json = true;
			break;
		case O_QUIET:
			cfg.quiet_s = atof(optarg);
			break;
		case O_MAXO:
			cfg.max_others = atof(optarg);
			break;
		case O_GENCC:
			cfg.gen_cc = optarg;
			break;
		case O_TRIES:
			cfg.tries = atoi(optarg) < 1 ? 1 : atoi(optarg);
			break;
		default:
			usage();
			return opt == 'h' ? 0 : 2;
		}
	}
	{
		char *copy = strdup(cfg.backends), *tok, *save = NULL;

		for (tok = strtok_r(copy, ",", &save); tok && nb < 8;
		     tok = strtok_r(NULL, ",", &save))
			for (size_t i = 0;
			     i < sizeof(variants) / sizeof(variants[0]); i++)
				if (!strcmp(tok, variants[i].name))
					vsel[nb++] = &variants[i];
		free(copy);
	}
	/* Whole names: "promise" is a prefix of "promise-recv". Listed
	 * order is the order of the table. */
	{
		char *copy = strdup(cfg.styles), *tok, *save = NULL;
		size_t nstyles = sizeof(styles) / sizeof(styles[0]);

		for (tok = strtok_r(copy, ",", &save); tok && ns < (int)nstyles;
		     tok = strtok_r(NULL, ",", &save))
			for (size_t i = 0; i < nstyles; i++)
				if (!strcmp(tok, styles[i]->name))
					sel[ns++] = styles[i];
		free(copy);
	}
	nconns = parse_list(cfg.conns, conns, 16);
	nsizes = parse_list(cfg.sizes, sizes, 16);
	if (!nb || !ns || !nconns || !nsizes) {
		usage();
		return 2;
	}
	cells = calloc((size_t)(nb * ns * nconns * nsizes), sizeof(*cells));
	for (int ci = 0; ci < nconns; ci++)
		for (int si = 0; si < nsizes; si++)
			for (int st = 0; st < ns; st++)
				for (int b = 0; b < nb; b++) {
					struct cell *c = &cells[ncells++];

					c->v = vsel[b];
					c->backend = vsel[b]->backend;
					c->style = sel[st];
					c->conns = (int)conns[ci];
					c->size = (unsigned)sizes[si];
				}
	pin(cfg.client_cpu);
	print_meta();
	/* Run r of every cell, then run r + 1: cells of a group print as
	 * soon as their last run is in. */
	for (int r = 0; r < cfg.runs; r++)
		for (int i = 0; i < ncells; i++) {
			struct cell *c = &cells[i];

			if (c->error[0])
				continue;
			if (run_quiet(c, &c->run[c->nruns],
				      &c->tries[c->nruns]) < 0) {
				snprintf(c->error, sizeof(c->error), "%s",
					 c->run[c->nruns].error);
			} else {
				c->rps[c->nruns] =
					(double)c->run[c->nruns].requests /
					c->run[c->nruns].wall_s;
				c->nruns++;
			}
			if (r == cfg.runs - 1 || c->error[0])
				print_cell(c);
		}
	free(cells);
	return 0;
}
