/* SPDX-License-Identifier: MIT */
/*
 * loadgen.c - the echo load generator: closed loop, each connection sends
 * a message, waits for all of it to come back, records the latency, sends
 * the next.
 *
 * It is written with liburing directly, not with the loop under test, and
 * spends as little as it can per message so that it is not the bottleneck:
 * one multishot receive per connection into a provided buffer ring, sends
 * with IOSQE_CQE_SKIP_SUCCESS (no CQE unless one fails; MSG_WAITALL makes
 * the kernel finish a short one), DEFER_TASKRUN when the kernel has it,
 * one io_uring_enter per batch of completions, its sockets as fixed files
 * and its ring fd registered. Its CPU use is reported
 * next to the server's: near 100% means the generator, not the server,
 * set the pace.
 *
 * Every echoed byte is checked: a message carries its sequence number in
 * its first 8 bytes, then a pattern of its connection.
 */
#include <errno.h>
#include <liburing.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ringnet.h"

#define NBUFS	 4096
#define BGID	 1
#define TAG_RECV 0
#define TAG_SEND 1

/* A log-linear latency histogram: 64 sub-buckets per power of two of
 * nanoseconds, about 1.5% resolution. */
#define SUB_BITS 6
#define HBUCKETS (64 << SUB_BITS)

struct hist {
	uint64_t n[HBUCKETS];
	uint64_t count, max;
	double sum;
};

static unsigned hbucket(uint64_t v)
{
	unsigned msb;

	if (v < (1u << SUB_BITS))
		return (unsigned)v;
	msb = 63u - (unsigned)__builtin_clzll(v);
	return ((msb - SUB_BITS + 1) << SUB_BITS) |
	       (unsigned)((v >> (msb - SUB_BITS)) & ((1u << SUB_BITS) - 1));
}

static double hvalue(unsigned b)
{
	unsigned e = b >> SUB_BITS, m = b & ((1u << SUB_BITS) - 1);

	if (!e)
		return m;
	/* The middle of the bucket. */
	return ldexp((double)((1u << SUB_BITS) | m) + 0.5, (int)e - 1);
}

static void hadd(struct hist *h, uint64_t ns)
{
	h->n[hbucket(ns)]++;
	h->count++;
	h->sum += (double)ns;
	if (ns > h->max)
		h->max = ns;
}

static double hpct(const struct hist *h, double p)
{
	uint64_t want = (uint64_t)ceil(p * (double)h->count), seen = 0;

	if (!h->count)
		return 0;
	for (unsigned b = 0; b < HBUCKETS; b++) {
		seen += h->n[b];
		if (seen >= want)
			return hvalue(b);
	}
	return (double)h->max;
}

struct gconn {
	int fd;
	uint32_t got;  /* bytes of the current echo so far */
	uint64_t seq;  /* the current message's number */
	uint64_t t0;   /* when it was sent */
	uint64_t done; /* echoes completed in the window */
	unsigned char *msg;
};

struct gen {
	const struct gen_opts *o;
	struct io_uring ring;
	struct io_uring_buf_ring *br;
	size_t br_len;
	char *bufs;
	unsigned buf_size;
	unsigned nback;
	struct gconn *c;
	bool fixed; /* the sockets are registered: index i is connection i */
	struct hist *h;
	bool measuring;
	uint64_t requests;
	char *error;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static unsigned char pat(int conn, unsigned i)
{
	return (unsigned char)(conn * 13 + i * 7 + (i >> 8));
}

static struct io_uring_sqe *sqe_get(struct gen *g)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&g->ring);

	if (!sqe) {
		io_uring_submit(&g->ring);
		sqe = io_uring_get_sqe(&g->ring);
	}
	return sqe;
}

static void arm_recv(struct gen *g, int i)
{
	struct io_uring_sqe *sqe = sqe_get(g);

	io_uring_prep_recv_multishot(sqe, g->fixed ? i : g->c[i].fd, NULL, 0,
				     0);
	sqe->flags |= IOSQE_BUFFER_SELECT | (g->fixed ? IOSQE_FIXED_FILE : 0);
	sqe->buf_group = BGID;
	io_uring_sqe_set_data64(sqe, ((uint64_t)i << 1) | TAG_RECV);
}

static void send_msg(struct gen *g, int i, uint64_t now)
{
	struct gconn *c = &g->c[i];
	struct io_uring_sqe *sqe = sqe_get(g);

	c->seq++;
	memcpy(c->msg, &c->seq, sizeof(c->seq));
	c->got = 0;
	c->t0 = now;
	io_uring_prep_send(sqe, g->fixed ? i : c->fd, c->msg, g->o->msg_size,
			   MSG_NOSIGNAL | MSG_WAITALL);
	sqe->flags |=
		IOSQE_CQE_SKIP_SUCCESS | (g->fixed ? IOSQE_FIXED_FILE : 0);
	io_uring_sqe_set_data64(sqe, ((uint64_t)i << 1) | TAG_SEND);
}

static void fail(struct gen *g, const char *what, int conn, int err)
{
	if (!g->error[0])
		snprintf(g->error, 160, "%s (connection %d): %s", what, conn,
			 strerror(err < 0 ? -err : err));
}

/* Checks the echoed bytes [got, got + len) of connection i's message. */
static bool check(struct gen *g, int i, const unsigned char *p, unsigned len)
{
	struct gconn *c = &g->c[i];

	for (unsigned k = 0; k < len; k++)
		if (p[k] != c->msg[c->got + k])
			return false;
	return true;
}

static void on_recv(struct gen *g, int i, int res, unsigned flags)
{
	struct gconn *c = &g->c[i];
	unsigned bid;
	uint64_t now;

	if (flags & IORING_CQE_F_BUFFER) {
		bid = flags >> IORING_CQE_BUFFER_SHIFT;
		if (res > 0) {
			if (c->got + (unsigned)res > g->o->msg_size ||
			    !check(g, i,
				   (unsigned char *)g->bufs +
					   (size_t)bid * g->buf_size,
				   (unsigned)res))
				fail(g, "wrong bytes echoed", i, EPROTO);
			c->got += (unsigned)res;
		}
		io_uring_buf_ring_add(
			g->br, g->bufs + (size_t)bid * g->buf_size, g->buf_size,
			(unsigned short)bid, io_uring_buf_ring_mask(NBUFS),
			(int)g->nback++);
	}
	if (res == 0)
		fail(g, "server closed", i, ECONNRESET);
	else if (res < 0 && res != -ENOBUFS)
		fail(g, "recv", i, res);
	if (!(flags & IORING_CQE_F_MORE) && (res > 0 || res == -ENOBUFS))
		arm_recv(g, i);
	if (c->got == g->o->msg_size) {
		now = now_ns();
		if (g->measuring) {
			hadd(g->h, now - c->t0);
			g->requests++;
			c->done++;
		}
		send_msg(g, i, now);
	}
}

static int setup(struct gen *g)
{
	const struct gen_opts *o = g->o;
	struct io_uring_params p;
	struct io_uring_buf_reg reg;
	int ret, one = 1;

	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER |
		  IORING_SETUP_DEFER_TASKRUN;
	p.cq_entries = 4 * NBUFS;
	ret = io_uring_queue_init_params(2048, &g->ring, &p);
	if (ret == -EINVAL) {
		p.flags = IORING_SETUP_CQSIZE;
		ret = io_uring_queue_init_params(2048, &g->ring, &p);
	}
	if (ret < 0)
		return ret;
	g->buf_size = o->msg_size < 2048 ? 2048 : o->msg_size;
	g->bufs = malloc((size_t)NBUFS * g->buf_size);
	g->br_len = NBUFS * sizeof(struct io_uring_buf);
	g->br = mmap(NULL, g->br_len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!g->bufs || g->br == MAP_FAILED)
		return -ENOMEM;
	memset(&reg, 0, sizeof(reg));
	reg.ring_addr = (uint64_t)(uintptr_t)g->br;
	reg.ring_entries = NBUFS;
	reg.bgid = BGID;
	ret = io_uring_register_buf_ring(&g->ring, &reg, 0);
	if (ret < 0)
		return ret;
	io_uring_buf_ring_init(g->br);
	for (unsigned b = 0; b < NBUFS; b++)
		io_uring_buf_ring_add(g->br, g->bufs + (size_t)b * g->buf_size,
				      g->buf_size, (unsigned short)b,
				      io_uring_buf_ring_mask(NBUFS), (int)b);
	io_uring_buf_ring_advance(g->br, NBUFS);

	g->c = calloc((size_t)o->conns, sizeof(*g->c));
	if (!g->c)
		return -ENOMEM;
	for (int i = 0; i < o->conns; i++) {
		struct gconn *c = &g->c[i];

		c->fd = socket(o->addr->sa.sa_family,
			       SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c->fd < 0 || connect(c->fd, &o->addr->sa, o->addr->len) < 0)
			return -errno;
		setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		/* The generator's own congestion control only: it runs on
		 * every ACK the server's echo carries. */
		if (o->cc)
			setsockopt(c->fd, IPPROTO_TCP, TCP_CONGESTION, o->cc,
				   (socklen_t)strlen(o->cc));
		c->msg = malloc(o->msg_size < 8 ? 8 : o->msg_size);
		if (!c->msg)
			return -ENOMEM;
		for (unsigned k = 0; k < o->msg_size; k++)
			c->msg[k] = pat(i, k);
	}
	/* Both save a file lookup per operation; neither is essential. */
	{
		int *fds = malloc((size_t)o->conns * sizeof(*fds));

		for (int i = 0; fds && i < o->conns; i++)
			fds[i] = g->c[i].fd;
		g->fixed =
			fds && io_uring_register_files(&g->ring, fds,
						       (unsigned)o->conns) == 0;
		free(fds);
	}
	io_uring_register_ring_fd(&g->ring);
	return 0;
}

static int server_mark(const struct gen_opts *o, struct echo_mark *m)
{
	char cmd = 'm';
	size_t got = 0;
	ssize_t n;

	if (write(o->ctl, &cmd, 1) != 1)
		return -errno;
	while (got < sizeof(*m)) {
		n = read(o->reply, (char *)m + got, sizeof(*m) - got);
		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		got += (size_t)n;
	}
	return 0;
}

/* Busy seconds of the given CPUs so far, whoever ran on them: all but
 * idle and iowait in /proc/stat. -1 for a CPU means none. */
static double cpus_busy_s(const int cpus[2])
{
	char line[256], name[16];
	unsigned long long v[10];
	double sum = 0;
	FILE *f = fopen("/proc/stat", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		int cpu;

		if (sscanf(line,
			   "cpu%d %llu %llu %llu %llu %llu %llu %llu %llu",
			   &cpu, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5],
			   &v[6], &v[7]) != 9)
			continue;
		if (cpu != cpus[0] && cpu != cpus[1])
			continue;
		(void)name;
		sum += (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
	}
	fclose(f);
	return sum / (double)sysconf(_SC_CLK_TCK);
}

static double tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static double ru_cpu_s(const struct rusage *ru)
{
	return tv_s(ru->ru_utime) + tv_s(ru->ru_stime);
}

int gen_run(const struct gen_opts *o, struct gen_result *r)
{
	struct gen g;
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts = { .tv_sec = 0, .tv_nsec = 20000000 };
	struct rusage ru0, ru1;
	uint64_t start, t_warm, t_end, w0 = 0, w1 = 0, now;
	double busy0 = 0;
	unsigned head, n;
	int ret, phase = 0;

	memset(r, 0, sizeof(*r));
	memset(&g, 0, sizeof(g));
	g.o = o;
	g.error = r->error;
	g.h = calloc(1, sizeof(*g.h));
	if (!g.h)
		return -ENOMEM;
	ret = setup(&g);
	if (ret < 0) {
		snprintf(r->error, sizeof(r->error), "setup: %s",
			 strerror(-ret));
		goto out;
	}
	start = now_ns();
	for (int i = 0; i < o->conns; i++) {
		arm_recv(&g, i);
		send_msg(&g, i, start);
	}
	t_warm = start + (uint64_t)(o->warmup_s * 1e9);
	t_end = t_warm + (uint64_t)(o->duration_s * 1e9);
	while (phase < 2 && !r->error[0]) {
		ret = io_uring_submit_and_wait_timeout(&g.ring, &cqe, 1, &ts,
						       NULL);
		if (ret < 0 && ret != -ETIME && ret != -EINTR) {
			snprintf(r->error, sizeof(r->error), "wait: %s",
				 strerror(-ret));
			break;
		}
		n = 0;
		io_uring_for_each_cqe(&g.ring, head, cqe)
		{
			int i = (int)(cqe->user_data >> 1);

			if ((cqe->user_data & 1) == TAG_SEND)
				fail(&g, "send", i, cqe->res);
			else
				on_recv(&g, i, cqe->res, cqe->flags);
			n++;
		}
		io_uring_cq_advance(&g.ring, n);
		if (g.nback) {
			io_uring_buf_ring_advance(g.br, (int)g.nback);
			g.nback = 0;
		}
		now = now_ns();
		if (phase == 0 && now >= t_warm) {
			getrusage(RUSAGE_SELF, &ru0);
			busy0 = cpus_busy_s(o->cpus);
			if (server_mark(o, &r->m0) < 0)
				fail(&g, "server mark", -1, EPIPE);
			w0 = now_ns();
			g.measuring = true;
			phase = 1;
		} else if (phase == 1 && now >= t_end) {
			g.measuring = false;
			w1 = now_ns();
			getrusage(RUSAGE_SELF, &ru1);
			r->busy_s = cpus_busy_s(o->cpus) - busy0;
			if (server_mark(o, &r->m1) < 0)
				fail(&g, "server mark", -1, EPIPE);
			phase = 2;
		}
	}
	if (phase == 2) {
		r->requests = g.requests;
		r->wall_s = (double)(w1 - w0) / 1e9;
		r->cpu_s = ru_cpu_s(&ru1) - ru_cpu_s(&ru0);
		r->lat_p50_us = hpct(g.h, 0.50) / 1e3;
		r->lat_p99_us = hpct(g.h, 0.99) / 1e3;
		r->lat_p999_us = hpct(g.h, 0.999) / 1e3;
		r->lat_max_us = (double)g.h->max / 1e3;
		r->lat_mean_us =
			g.h->count ? g.h->sum / (double)g.h->count / 1e3 : 0;
		/* Fairness: a server that serves some connections and
		 * starves the rest shows good latencies for the ones it
		 * serves, and the starved ones' messages never complete,
		 * so they are in no percentile. Count them. */
		for (int i = 0; i < o->conns; i++) {
			uint64_t age = w1 > g.c[i].t0 ? w1 - g.c[i].t0 : 0;

			r->conns_served += g.c[i].done > 0;
			if (g.c[i].got < o->msg_size &&
			    (double)age / 1e3 > r->oldest_wait_us)
				r->oldest_wait_us = (double)age / 1e3;
		}
	}
out:
	if (g.c)
		for (int i = 0; i < o->conns; i++) {
			if (g.c[i].fd > 0)
				close(g.c[i].fd);
			free(g.c[i].msg);
		}
	free(g.c);
	io_uring_queue_exit(&g.ring);
	if (g.br && g.br != MAP_FAILED)
		munmap(g.br, g.br_len);
	free(g.bufs);
	free(g.h);
	return r->error[0] ? -1 : 0;
}
