/* SPDX-License-Identifier: MIT */
/*
 * test_coro_net.c - sockets in coroutines: every call, its results and
 * errors, timeouts, and the failures of the issue at this level (peer
 * reset, half-close, a client that never reads, a slow sender, closing the
 * loop with coroutines blocked in every call), on every backend
 * configuration.
 */
#include <fcntl.h>
#include <stdint.h>

#include "coro_helpers.h"
#include "net_helpers.h"

/* ----------------------------------------------- a coroutine echo server */

struct cserver {
	rl_coro_ctx *sched;
	int lfd;
	int max; /* connections to take, then return */
	int accepted, closed, errors, last_err;
	size_t bytes;
};

struct cconn {
	struct cserver *s;
	int fd;
};

static int64_t echo_conn(void *arg)
{
	struct cconn *c = arg;
	char buf[4096];
	int64_t n;

	while ((n = rl_coro_net_recv(c->fd, buf, sizeof(buf), 0)) > 0) {
		c->s->bytes += (size_t)n;
		n = rl_coro_net_send(c->fd, buf, (size_t)n, 0);
		if (n < 0)
			break;
	}
	if (n < 0) {
		c->s->errors++;
		c->s->last_err = (int)n;
	}
	c->s->closed++;
	close(c->fd);
	free(c);
	return 0;
}

static int64_t echo_server(void *arg)
{
	struct cserver *s = arg;
	int fd;

	while (s->accepted < s->max) {
		struct cconn *c = calloc(1, sizeof(*c));

		fd = rl_coro_net_accept(s->lfd, 0);
		cr_assert_geq(fd, 0, "%s", rl_strerror(fd));
		c->s = s;
		c->fd = fd;
		s->accepted++;
		cr_assert_eq(rl_coro_spawn(s->sched, NULL, echo_conn, c, NULL),
			     0);
	}
	return 0;
}

/* ------------------------------------------------------------- tests */

struct client_run {
	struct rl_addr a;
	int family;
	int64_t result;
	bool done;
};

/* A client: connect, send 64 KiB of the pattern, read it back, shut down
 * writing, read the end. */
static int64_t echo_client(void *arg)
{
	enum { LEN = 65536 };
	struct client_run *r = arg;
	static unsigned char msg[LEN], back[LEN];
	int64_t n;
	size_t got = 0;
	int fd;

	tpat_fill(msg, 0, LEN);
	fd = rl_coro_net_connect(&r->a, RL_CONNECT_NODELAY, 5000);
	if (fd < 0)
		return fd;
	n = rl_coro_net_send(fd, msg, LEN, 1000);
	cr_assert_eq(n, LEN);
	while (got < LEN) {
		n = rl_coro_net_recv(fd, back + got, LEN - got, 5000);
		cr_assert_gt(n, 0, "%s", rl_strerror((int)n));
		got += (size_t)n;
	}
	cr_assert_eq(memcmp(msg, back, LEN), 0);
	cr_assert_eq(rl_coro_net_shutdown(fd, SHUT_WR), 0);
	cr_assert_eq(rl_coro_net_recv(fd, back, LEN, 5000), 0);
	cr_assert_eq(rl_coro_fs_close(fd), 0);
	r->done = true;
	return (int64_t)got;
}

BACKEND_TEST(coro_net, echo_every_family)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	struct cserver s;
	struct client_run r;
	rl_coro *srv, *cl;

	for (int f = 0; f < TNET_FAMILIES; f++) {
		memset(&s, 0, sizeof(s));
		s.sched = sched;
		s.max = 1;
		s.lfd = tlisten(&r.a, tnet_family[f], 8);
		r.done = false;
		cr_assert_eq(rl_coro_spawn(sched, &srv, echo_server, &s, NULL),
			     0);
		cr_assert_eq(rl_coro_spawn(sched, &cl, echo_client, &r, NULL),
			     0);
		trun_until(loop, r.done && s.closed == 1);
		cr_assert_eq(rl_coro_join(cl), -EPERM); /* not in a coroutine */
		cr_assert_eq(s.bytes, 65536);
		cr_assert_eq(s.errors, 0);
		cr_assert_eq(s.accepted, 1);
		cr_assert(rl_coro_done(srv));
		cr_assert(rl_coro_done(cl));
		rl_coro_detach(srv);
		rl_coro_detach(cl);
		close(s.lfd);
	}
	tsched_close(sched);
	tclose(loop);
}

/* Outside a coroutine: -EPERM. Errors: bad fds, refused, timed out. */
struct errs {
	struct rl_addr refused, full;
	int64_t r[8];
};

static int64_t errors_body(void *arg)
{
	struct errs *e = arg;
	char b;

	e->r[0] = rl_coro_net_recv(-1, &b, 1, 0);
	e->r[1] = rl_coro_net_send(0, NULL, 1, 0);
	e->r[2] = rl_coro_net_accept(-1, 0);
	e->r[3] = rl_coro_net_connect(&e->refused, 0, 0);
	e->r[4] = rl_coro_net_connect(&e->full, 0, 100);
	e->r[5] = rl_coro_net_shutdown(-1, SHUT_WR);
	e->r[6] = rl_coro_net_recv(0, &b, 0, 0);
	return 0;
}

BACKEND_TEST(coro_net, errors)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	struct errs e;
	char b;
	int lfd, full, filler;

	cr_assert_eq(rl_coro_net_recv(0, &b, 1, 0), -EPERM);
	cr_assert_eq(rl_coro_net_accept(0, 0), -EPERM);
	lfd = tlisten(&e.refused, AF_INET, 1);
	close(lfd);
	full = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	taddr(&e.full, AF_INET);
	cr_assert_eq(bind(full, &e.full.sa, e.full.len), 0);
	cr_assert_eq(listen(full, 0), 0);
	rl_net_local_addr(full, &e.full);
	filler = tconnect(&e.full);
	cr_assert_eq(rl_coro_spawn(sched, NULL, errors_body, &e, NULL), 0);
	trun(loop);
	cr_assert_eq(e.r[0], -EBADF);
	cr_assert_eq(e.r[1], -EFAULT);
	cr_assert_eq(e.r[2], -EBADF);
	cr_assert_eq(e.r[3], -ECONNREFUSED);
	cr_assert_eq(e.r[4], -ETIMEDOUT);
	cr_assert_eq(e.r[5], -EBADF);
	cr_assert_eq(e.r[6], -EINVAL);
	close(filler);
	close(full);
	tsched_close(sched);
	tclose(loop);
}

/* Timeouts: a receive with nothing to read, an accept with nobody
 * coming, a send to a peer that does not read; a receive whose data
 * comes in time. Every socket still works after. */
struct touts {
	int s, peer, lfd;
	int64_t recv, accept, send, recv_ok;
	uint64_t recv_ms;
	char buf[8];
};

static int64_t timeouts_body(void *arg)
{
	struct touts *t = arg;
	char *big = calloc(1, 16 << 20);
	/* A deadline counts from the loop's idea of now, taken once per
	 * iteration (ringloop.h), which may be behind the clock by the time
	 * the coroutine runs (by tens of ms under Valgrind). */
	uint64_t t0 = rl_now_ms(rl_coro_loop());

	t->recv = rl_coro_net_recv(t->s, t->buf, sizeof(t->buf), 60);
	t->recv_ms = tnow_ms() - t0;
	t->accept = rl_coro_net_accept(t->lfd, 30);
	t->send = rl_coro_net_send(t->s, big, 16 << 20, 50);
	t->recv_ok = rl_coro_net_recv(t->s, t->buf, sizeof(t->buf), 5000);
	free(big);
	return 0;
}

BACKEND_TEST(coro_net, timeouts)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	struct touts t;
	struct rl_addr a;
	rl_coro *co;

	memset(&t, 0, sizeof(t));
	tpair(AF_INET, &t.s, &t.peer);
	t.lfd = tlisten(&a, AF_INET, 4);
	cr_assert_eq(rl_coro_spawn(sched, &co, timeouts_body, &t, NULL), 0);
	trun_until(loop, t.send != 0);
	cr_assert_eq(t.recv, -ETIMEDOUT);
	cr_assert_geq(t.recv_ms, 50);
	cr_assert_eq(t.accept, -ETIMEDOUT);
	cr_assert_eq(t.send, -ETIMEDOUT);
	cr_assert_eq(write(t.peer, "ok", 2), 2);
	trun(loop);
	cr_assert_eq(t.recv_ok, 2);
	cr_assert_eq(memcmp(t.buf, "ok", 2), 0);
	rl_coro_detach(co);
	close(t.s);
	close(t.peer);
	close(t.lfd);
	tsched_close(sched);
	tclose(loop);
}

/* Peer reset while receiving, and while sending; half-close; datagrams. */
struct misc {
	int s1, p1, s2, p2, s3, p3, u1, u2;
	struct rl_addr ub;
	int64_t reset_recv, reset_send, half_shut, half_recv, half_end;
	int64_t dsend, drecv;
	char buf[16];
	bool recv_waiting, send_waiting;
};

static int64_t misc_reset_recv(void *arg)
{
	struct misc *m = arg;

	m->recv_waiting = true;
	m->reset_recv = rl_coro_net_recv(m->s1, m->buf, sizeof(m->buf), 0);
	return 0;
}

static int64_t misc_reset_send(void *arg)
{
	struct misc *m = arg;
	char *big = calloc(1, 8 << 20);

	m->send_waiting = true;
	m->reset_send = rl_coro_net_send(m->s2, big, 8 << 20, 0);
	free(big);
	return 0;
}

static int64_t misc_half_and_dgram(void *arg)
{
	struct misc *m = arg;
	char dgram[16] = { 0 };
	struct iovec siov = { (void *)"dgram", 5 }, riov = { dgram, 16 };
	struct msghdr sm, rm;

	m->half_shut = rl_coro_net_shutdown(m->s3, SHUT_WR);
	m->half_recv = rl_coro_net_recv(m->s3, m->buf, sizeof(m->buf), 5000);
	m->half_end = rl_coro_net_recv(m->s3, m->buf, sizeof(m->buf), 5000);
	memset(&sm, 0, sizeof(sm));
	sm.msg_name = &m->ub.ss;
	sm.msg_namelen = m->ub.len;
	sm.msg_iov = &siov;
	sm.msg_iovlen = 1;
	memset(&rm, 0, sizeof(rm));
	rm.msg_iov = &riov;
	rm.msg_iovlen = 1;
	m->dsend = rl_coro_net_sendmsg(m->u1, &sm, 1000);
	m->drecv = rl_coro_net_recvmsg(m->u2, &rm, 1000);
	cr_assert_eq(memcmp(dgram, "dgram", 5), 0);
	return 0;
}

BACKEND_TEST(coro_net, reset_half_close_and_datagrams)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	struct linger lin = { 1, 0 };
	struct rl_addr a;
	struct misc m;
	char buf[16];

	memset(&m, 0, sizeof(m));
	tpair(AF_INET, &m.s1, &m.p1);
	tpair(AF_INET6, &m.s2, &m.p2);
	tpair(AF_UNIX, &m.s3, &m.p3);
	rl_addr_ip(&a, "127.0.0.1", 0);
	m.u1 = rl_net_udp(&a, 0);
	m.u2 = rl_net_udp(&a, 0);
	rl_net_local_addr(m.u2, &m.ub);
	cr_assert_eq(rl_coro_spawn(sched, NULL, misc_reset_recv, &m, NULL), 0);
	cr_assert_eq(rl_coro_spawn(sched, NULL, misc_reset_send, &m, NULL), 0);
	trun_until(loop, m.recv_waiting && m.send_waiting);
	trun_for(loop, 20);
	setsockopt(m.p1, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
	close(m.p1);
	setsockopt(m.p2, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
	close(m.p2);
	trun(loop);
	cr_assert_eq(m.reset_recv, -ECONNRESET);
	cr_assert(m.reset_send == -ECONNRESET || m.reset_send == -EPIPE, "%s",
		  rl_strerror((int)m.reset_send));

	/* shutdown returns 0 or -errno: 1 means not yet, so the blocking
	 * read below runs only once the write side is shut. */
	m.half_shut = 1;
	cr_assert_eq(rl_coro_spawn(sched, NULL, misc_half_and_dgram, &m, NULL),
		     0);
	trun_until(loop, m.half_shut == 0 && read(m.p3, buf, 16) == 0);
	cr_assert_eq(write(m.p3, "still", 5), 5);
	close(m.p3);
	trun(loop);
	cr_assert_eq(m.half_recv, 5);
	cr_assert_eq(m.half_end, 0);
	cr_assert_eq(m.dsend, 5);
	cr_assert_eq(m.drecv, 5);
	close(m.s1);
	close(m.s2);
	close(m.s3);
	close(m.u1);
	close(m.u2);
	tsched_close(sched);
	tclose(loop);
}

/* A client that never reads: each connection's coroutine waits in its
 * send and reads no more, so TCP stops the client, and the server holds
 * one buffer on one stack. */
BACKEND_TEST(coro_net, client_that_never_reads_stays_bounded)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	struct cserver s;
	struct rl_addr a;
	struct rl_coro_ctx_stats st;
	size_t sent;
	int fd;

	memset(&s, 0, sizeof(s));
	s.sched = sched;
	s.max = 1;
	s.lfd = tlisten(&a, AF_INET, 8);
	cr_assert_eq(rl_coro_spawn(sched, NULL, echo_server, &s, NULL), 0);
	fd = tconnect(&a);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	trun_until(loop, s.accepted == 1);
	sent = tflood(loop, fd, 64u << 20, NULL, NULL);
	cr_assert_lt(sent, 64u << 20, "the server never stopped reading");
	rl_coro_ctx_stats(sched, &st);
	cr_assert_eq(st.alive, 1); /* the connection's, waiting in send */
	/* The client goes: the send fails, the coroutine ends. */
	close(fd);
	trun_until(loop, s.closed == 1);
	cr_assert_eq(s.errors, 1);
	close(s.lfd);
	tsched_close(sched);
	tclose(loop);
}

/* One byte at a time, slowly, each receive with a timeout the bytes
 * beat. */
struct slow {
	int s;
	int got;
	int64_t last;
};

static int64_t slow_body(void *arg)
{
	struct slow *sl = arg;
	unsigned char b;
	int64_t n;

	while ((n = rl_coro_net_recv(sl->s, &b, 1, 1000)) == 1) {
		cr_assert_eq(b, tpat((size_t)sl->got));
		sl->got++;
	}
	sl->last = n;
	return 0;
}

BACKEND_TEST(coro_net, slow_sender)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	struct slow sl = { 0 };
	int peer;

	tpair(AF_INET, &sl.s, &peer);
	cr_assert_eq(rl_coro_spawn(sched, NULL, slow_body, &sl, NULL), 0);
	for (size_t i = 0; i < 8; i++) {
		unsigned char b = tpat(i);

		trun_for(loop, 30);
		cr_assert_eq(write(peer, &b, 1), 1);
	}
	trun_until(loop, sl.got == 8);
	close(peer);
	trun(loop);
	cr_assert_eq(sl.last, 0);
	close(sl.s);
	tsched_close(sched);
	tclose(loop);
}

/* Closing the loop with coroutines blocked in accept, recv, send and
 * connect: each call returns -ECANCELED and every coroutine returns. */
struct blocked {
	int lfd, s, s2;
	struct rl_addr full;
	int64_t r[4];
	int returned;
};

static int64_t blocked_accept(void *arg)
{
	struct blocked *b = arg;

	b->r[0] = rl_coro_net_accept(b->lfd, 0);
	b->returned++;
	return 0;
}

static int64_t blocked_recv(void *arg)
{
	struct blocked *b = arg;
	char buf[8];

	b->r[1] = rl_coro_net_recv(b->s, buf, sizeof(buf), 60000);
	b->returned++;
	return 0;
}

static int64_t blocked_send(void *arg)
{
	struct blocked *b = arg;
	char *big = calloc(1, 16 << 20);

	b->r[2] = rl_coro_net_send(b->s2, big, 16 << 20, 0);
	free(big);
	b->returned++;
	return 0;
}

static int64_t blocked_connect(void *arg)
{
	struct blocked *b = arg;

	b->r[3] = rl_coro_net_connect(&b->full, 0, 0);
	b->returned++;
	return 0;
}

BACKEND_TEST(coro_net, close_loop_with_coroutines_blocked)
{
	int base = tfd_count();
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	struct blocked b;
	struct rl_addr a;
	int p, p2, full, filler;

	memset(&b, 0, sizeof(b));
	b.lfd = tlisten(&a, AF_INET, 4);
	tpair(AF_INET, &b.s, &p);
	tpair(AF_UNIX, &b.s2, &p2);
	full = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	taddr(&b.full, AF_INET);
	cr_assert_eq(bind(full, &b.full.sa, b.full.len), 0);
	cr_assert_eq(listen(full, 0), 0);
	rl_net_local_addr(full, &b.full);
	filler = tconnect(&b.full);
	cr_assert_eq(rl_coro_spawn(sched, NULL, blocked_accept, &b, NULL), 0);
	cr_assert_eq(rl_coro_spawn(sched, NULL, blocked_recv, &b, NULL), 0);
	cr_assert_eq(rl_coro_spawn(sched, NULL, blocked_send, &b, NULL), 0);
	cr_assert_eq(rl_coro_spawn(sched, NULL, blocked_connect, &b, NULL), 0);
	trun_for(loop, 30);
	cr_assert_eq(b.returned, 0);
	cr_assert_eq(rl_loop_close(loop), 0);
	cr_assert_eq(b.returned, 4);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(b.r[i], -ECANCELED, "call %d: %s", i,
			     rl_strerror((int)b.r[i]));
	close(b.lfd);
	close(b.s);
	close(p);
	close(b.s2);
	close(p2);
	close(filler);
	close(full);
	cr_assert_eq(tfd_count(), base);
}
