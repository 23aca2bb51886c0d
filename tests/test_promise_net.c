/* SPDX-License-Identifier: MIT */
/*
 * test_promise_net.c - sockets as promises: every request, its value and
 * errors, rl_promise_cancel(), rl_promise_timeout() (the loser of the
 * race cancelled, the data of a receive that won never lost), and the
 * failures of the issue at this level (peer reset, half-close, a client
 * that never reads, a slow sender, closing the loop with promises
 * pending), on every backend configuration.
 */
#include <fcntl.h>

#include "net_helpers.h"
#include "promise_helpers.h"

/* -------------------------------------------- a promise echo server */

/* Each connection: recv, then send what came, then recv again... until
 * the end or an error; then close. One request in flight at a time. */
struct pserver {
	rl_promise_ctx *ctx;
	int lfd;
	int accepted, closed, errors, last_err;
	size_t bytes;
	rl_promise *acc; /* the accept in flight, to cancel it */
};

struct pconn {
	struct pserver *s;
	int fd;
	char buf[4096];
};

static void pconn_recv(struct pconn *c);

static void pconn_end(struct pconn *c, int err)
{
	if (err < 0) {
		c->s->errors++;
		c->s->last_err = err;
	}
	c->s->closed++;
	close(c->fd);
	free(c);
}

static void pconn_sent(struct rl_outcome *o, void *arg)
{
	struct pconn *c = arg;

	if (o->reason < 0) {
		pconn_end(c, o->reason);
		return;
	}
	pconn_recv(c);
}

static void pconn_got(struct rl_outcome *o, void *arg)
{
	struct pconn *c = arg;
	rl_promise *p;

	if (o->reason < 0 || o->value.i == 0) {
		pconn_end(c, o->reason);
		return;
	}
	cr_assert_eq(o->value.p, c->buf);
	c->s->bytes += (size_t)o->value.i;
	p = rl_promise_net_send(c->s->ctx, c->fd, c->buf, (size_t)o->value.i,
				0);
	rl_promise_unref(rl_then(p, pconn_sent, pconn_sent, c));
}

static void pconn_recv(struct pconn *c)
{
	rl_promise *p =
		rl_promise_net_recv(c->s->ctx, c->fd, c->buf, sizeof(c->buf));

	rl_promise_unref(rl_then(p, pconn_got, pconn_got, c));
}

static void paccept(struct pserver *s);

static void paccepted(struct rl_outcome *o, void *arg)
{
	struct pserver *s = arg;
	struct pconn *c;

	rl_promise_unref(s->acc);
	s->acc = NULL;
	if (o->reason < 0)
		return;
	s->accepted++;
	c = calloc(1, sizeof(*c));
	c->s = s;
	c->fd = (int)o->value.i;
	pconn_recv(c);
	paccept(s);
}

static void paccept(struct pserver *s)
{
	rl_promise *p = rl_promise_net_accept(s->ctx, s->lfd);

	s->acc = rl_promise_ref(p);
	rl_promise_unref(rl_then(p, paccepted, paccepted, s));
}

/* ------------------------------------------------------------- tests */

/* Connect, send, receive the echo, shut down the writing side, see the
 * end; every family. */
BACKEND_TEST(promise_net, echo_every_family)
{
	enum { LEN = 50000 };
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct pserver s;
	struct rl_addr a;
	struct tsettled conn, snd, rcv, shut;
	unsigned char *msg = malloc(LEN), *back = malloc(LEN);
	int fd;

	tpat_fill(msg, 0, LEN);
	for (int f = 0; f < TNET_FAMILIES; f++) {
		memset(&s, 0, sizeof(s));
		s.ctx = ctx;
		s.lfd = tlisten(&a, tnet_family[f], 8);
		paccept(&s);
		twatch(rl_promise_net_connect(ctx, &a, RL_CONNECT_NODELAY,
					      5000),
		       &conn);
		trun_until(loop, conn.calls == 1 && s.accepted == 1);
		cr_assert_eq(conn.err, 0, "%s", rl_strerror(conn.err));
		fd = (int)conn.v.i;
		cr_assert_geq(fd, 0);
		twatch(rl_promise_net_send(ctx, fd, msg, LEN, 0), &snd);
		for (size_t got = 0; got < LEN; got += (size_t)rcv.v.i) {
			twatch(rl_promise_net_recv(ctx, fd, back + got,
						   LEN - got),
			       &rcv);
			trun_until(loop, rcv.calls == 1);
			cr_assert_eq(rcv.err, 0);
			cr_assert_gt(rcv.v.i, 0);
			cr_assert_eq(rcv.v.p, back + got);
		}
		cr_assert_eq(memcmp(msg, back, LEN), 0);
		cr_assert_eq(snd.calls, 1);
		cr_assert_eq(snd.v.i, LEN);
		twatch(rl_promise_net_shutdown(ctx, fd, SHUT_WR), &shut);
		twatch(rl_promise_net_recv(ctx, fd, back, LEN), &rcv);
		/* The shutdown completes on an io-wq worker on io_uring: the
		 * server may see the end before its promise settles. */
		trun_until(loop,
			   rcv.calls == 1 && s.closed == 1 && shut.calls == 1);
		cr_assert_eq(shut.calls, 1);
		cr_assert_eq(shut.err, 0);
		cr_assert_eq(rcv.err, 0);
		cr_assert_eq(rcv.v.i, 0); /* the server closed */
		cr_assert_eq(s.bytes, LEN);
		cr_assert_eq(s.errors, 0);
		close(fd);
		/* Stop the server: its accept in flight rejects. */
		cr_assert_eq(rl_promise_cancel(s.acc), 0);
		twatch(rl_promise_fs_close(ctx, s.lfd), &shut);
		trun(loop);
		cr_assert_null(s.acc);
		cr_assert_eq(shut.err, 0);
	}
	free(msg);
	free(back);
	tend(loop, ctx);
}

/* Errors: a bad argument rejects at once; refused and timed-out
 * connects; datagrams. */
BACKEND_TEST(promise_net, errors_and_datagrams)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct tsettled r, s2;
	struct rl_addr a, b;
	char dgram[16] = { 0 };
	struct iovec siov = { (void *)"hello", 5 }, riov = { dgram, 16 };
	struct msghdr sm, rm;
	int lfd, u1, u2, peer;

	twatch(rl_promise_net_recv(ctx, -1, dgram, 1), &r);
	trun(loop);
	cr_assert_eq(r.err, -EBADF);
	twatch(rl_promise_net_send(ctx, 0, dgram, 1, 99), &r);
	trun(loop);
	cr_assert_eq(r.err, -EINVAL);
	cr_assert_null(rl_promise_net_accept(NULL, 0));

	lfd = tlisten(&a, AF_INET, 1);
	close(lfd);
	twatch(rl_promise_net_connect(ctx, &a, 0, 0), &r);
	trun(loop);
	cr_assert_eq(r.err, -ECONNREFUSED);

	/* A full backlog drops SYNs: the connect's own timeout. */
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	taddr(&a, AF_INET);
	cr_assert_eq(bind(lfd, &a.sa, a.len), 0);
	cr_assert_eq(listen(lfd, 0), 0);
	rl_net_local_addr(lfd, &a);
	peer = tconnect(&a);
	twatch(rl_promise_net_connect(ctx, &a, 0, 100), &r);
	trun(loop);
	cr_assert_eq(r.err, -ETIMEDOUT);
	close(peer);
	close(lfd);

	rl_addr_ip(&a, "::1", 0);
	u1 = rl_net_udp(&a, 0);
	u2 = rl_net_udp(&a, 0);
	rl_net_local_addr(u2, &b);
	memset(&rm, 0, sizeof(rm));
	rm.msg_iov = &riov;
	rm.msg_iovlen = 1;
	memset(&sm, 0, sizeof(sm));
	sm.msg_name = &b.ss;
	sm.msg_namelen = b.len;
	sm.msg_iov = &siov;
	sm.msg_iovlen = 1;
	twatch(rl_promise_net_recvmsg(ctx, u2, &rm), &r);
	twatch(rl_promise_net_sendmsg(ctx, u1, &sm), &s2);
	trun(loop);
	cr_assert_eq(s2.v.i, 5);
	cr_assert_eq(r.v.i, 5);
	cr_assert_eq(r.v.p, &rm);
	cr_assert_eq(memcmp(dgram, "hello", 5), 0);
	close(u1);
	close(u2);
	tend(loop, ctx);
}

/* rl_promise_cancel() on each kind of promise. */
BACKEND_TEST(promise_net, cancel)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct tsettled r, t, d;
	rl_promise *p, *q, *derived;
	char buf[8];
	int s, peer;

	tpair(AF_INET, &s, &peer);
	p = rl_promise_net_recv(ctx, s, buf, sizeof(buf));
	derived = rl_then(rl_promise_ref(p), NULL, NULL, NULL);
	cr_assert_eq(rl_promise_cancel(derived), -EINVAL);
	cr_assert_eq(rl_promise_cancel(NULL), -EINVAL);
	cr_assert_eq(rl_promise_cancel(p), 0);
	cr_assert_eq(rl_promise_cancel(p), -EALREADY);
	twatch(rl_promise_ref(p), &r);
	twatch(derived, &d);
	q = rl_promise_sleep(ctx, 60000);
	cr_assert_eq(rl_promise_cancel(q), 0);
	twatch(q, &t);
	trun(loop); /* no minute-long wait: the timer went */
	cr_assert_eq(r.err, -ECANCELED);
	cr_assert_eq(d.err, -ECANCELED);
	cr_assert_eq(t.err, -ECANCELED);
	cr_assert_eq(rl_promise_cancel(p), -ENOENT);
	rl_promise_unref(p);
	/* A refused submission has nothing to cancel. */
	p = rl_promise_net_recv(ctx, -1, buf, 1);
	cr_assert_eq(rl_promise_cancel(p), -ENOENT);
	rl_promise_unref(p);
	/* The data after a cancelled recv is still in the socket. */
	cr_assert_eq(write(peer, "xy", 2), 2);
	twatch(rl_promise_net_recv(ctx, s, buf, sizeof(buf)), &r);
	trun(loop);
	cr_assert_eq(r.v.i, 2);
	close(s);
	close(peer);
	tend(loop, ctx);
}

/* A timeout that fires: the receive is cancelled (no request left, no
 * promise leaked) and -ETIMEDOUT comes after about the time; one that does
 * not: the value, and the sleep's timer does not keep the loop waiting. */
BACKEND_TEST(promise_net, timeout_cancels_the_loser)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct tsettled r;
	rl_promise *p;
	char buf[8];
	uint64_t t0;
	int s, peer;

	tpair(AF_INET, &s, &peer);
	/* The sleep counts from the loop's now, taken once per iteration
	 * (here: when the loop opened), which the clock may be past. */
	t0 = rl_now_ms(loop);
	twatch(rl_promise_timeout(rl_promise_net_recv(ctx, s, buf, 8), 80), &r);
	trun(loop);
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(r.err, -ETIMEDOUT);
	cr_assert_geq(tnow_ms() - t0, 70);
	cr_assert_eq(rl_promise_ctx_live(ctx), 0);

	/* In time: the data, and no 60 s wait for the sleep. */
	cr_assert_eq(write(peer, "abc", 3), 3);
	t0 = tnow_ms();
	twatch(rl_promise_timeout(rl_promise_net_recv(ctx, s, buf, 8), 60000),
	       &r);
	trun(loop);
	cr_assert_eq(r.err, 0);
	cr_assert_eq(r.v.i, 3);
	cr_assert_eq(r.v.p, buf);
	cr_assert_lt(tnow_ms() - t0, 30000);
	cr_assert_eq(rl_promise_ctx_live(ctx), 0);

	/* A promise with no request: rejected at the time, then dropped
	 * without a leak. */
	p = rl_promise_new(ctx);
	twatch(rl_promise_timeout(rl_promise_ref(p), 20), &r);
	trun(loop);
	cr_assert_eq(r.err, -ETIMEDOUT);
	cr_assert_eq(rl_promise_resolve(p, V(1)), 0);
	rl_promise_unref(p);
	trun(loop);
	cr_assert_eq(rl_promise_ctx_live(ctx), 0);
	cr_assert_null(rl_promise_timeout(NULL, 1));
	close(s);
	close(peer);
	tend(loop, ctx);
}

/* Data and deadline at once, many times: either the receive's data comes,
 * or -ETIMEDOUT and the data is still in the socket. Never lost. */
BACKEND_TEST(promise_net, timeout_racing_data_loses_nothing)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct tsettled r;
	char buf[8];
	int s, peer, got = 0, timed = 0;

	tpair(AF_INET, &s, &peer);
	for (int i = 0; i < 200; i++) {
		cr_assert_eq(write(peer, "abcd", 4), 4);
		twatch(rl_promise_timeout(rl_promise_net_recv(ctx, s, buf, 8),
					  (uint64_t)(i % 2)),
		       &r);
		trun(loop);
		cr_assert_eq(r.calls, 1);
		if (r.err == 0) {
			cr_assert_eq(r.v.i, 4);
			got++;
		} else {
			cr_assert_eq(r.err, -ETIMEDOUT);
			cr_assert_eq(recv(s, buf, 8, MSG_DONTWAIT), 4);
			timed++;
		}
	}
	cr_assert_eq(got + timed, 200);
	cr_assert_eq(recv(s, buf, 8, MSG_DONTWAIT), -1);
	close(s);
	close(peer);
	tend(loop, ctx);
}

/* Peer reset in the middle of a receive and of a send. */
BACKEND_TEST(promise_net, peer_reset)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct tsettled r;
	struct linger lin = { 1, 0 };
	char buf[8], *big = calloc(1, 8 << 20);
	int s, peer;

	tpair(AF_INET, &s, &peer);
	twatch(rl_promise_net_recv(ctx, s, buf, sizeof(buf)), &r);
	trun_for(loop, 10);
	setsockopt(peer, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
	close(peer);
	trun(loop);
	cr_assert_eq(r.err, -ECONNRESET);
	close(s);

	tpair(AF_INET6, &s, &peer);
	twatch(rl_promise_net_send(ctx, s, big, 8 << 20, 0), &r);
	trun_for(loop, 20);
	cr_assert_eq(r.calls, 0);
	setsockopt(peer, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
	close(peer);
	trun(loop);
	cr_assert(r.err == -ECONNRESET || r.err == -EPIPE, "%s",
		  rl_strerror(r.err));
	close(s);
	free(big);
	tend(loop, ctx);
}

/* The most promises of ctx alive at once, noted after each turn of the
 * loop. */
struct live {
	rl_promise_ctx *ctx;
	size_t max;
};

static void note_live(void *arg)
{
	struct live *l = arg;

	if (rl_promise_ctx_live(l->ctx) > l->max)
		l->max = rl_promise_ctx_live(l->ctx);
}

/* A client that never reads: the promise server has one request in
 * flight per connection, so once its send waits, it reads no more, and
 * TCP stops the client: the promises alive stay a handful. */
BACKEND_TEST(promise_net, client_that_never_reads_stays_bounded)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct pserver s;
	struct rl_addr a;
	struct live live = { ctx, 0 };
	size_t sent;
	int fd;

	memset(&s, 0, sizeof(s));
	s.ctx = ctx;
	s.lfd = tlisten(&a, AF_INET, 8);
	paccept(&s);
	fd = tconnect(&a);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	trun_until(loop, s.accepted == 1);
	sent = tflood(loop, fd, 64u << 20, note_live, &live);
	cr_assert_lt(sent, 64u << 20, "the server never stopped reading");
	cr_assert_leq(live.max, 8, "%zu promises", live.max);
	close(fd);
	trun_until(loop, s.closed == 1);
	cr_assert_eq(rl_promise_cancel(s.acc), 0);
	trun(loop);
	close(s.lfd);
	tend(loop, ctx);
}

/* Half-close: our side shuts down writing and still receives. */
BACKEND_TEST(promise_net, half_close)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct tsettled shut, r;
	char buf[16];
	int s, peer;

	tpair(AF_UNIX, &s, &peer);
	twatch(rl_promise_net_shutdown(ctx, s, SHUT_WR), &shut);
	trun(loop);
	cr_assert_eq(shut.err, 0);
	cr_assert_eq(read(peer, buf, sizeof(buf)), 0);
	cr_assert_eq(write(peer, "late", 4), 4);
	twatch(rl_promise_net_recv(ctx, s, buf, sizeof(buf)), &r);
	trun(loop);
	cr_assert_eq(r.v.i, 4);
	close(peer);
	twatch(rl_promise_net_recv(ctx, s, buf, sizeof(buf)), &r);
	trun(loop);
	cr_assert_eq(r.err, 0);
	cr_assert_eq(r.v.i, 0);
	close(s);
	tend(loop, ctx);
}

/* One byte at a time, slowly, each receive with its own timeout that the
 * bytes beat; then silence, and the timeout. */
BACKEND_TEST(promise_net, slow_sender)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct tsettled r;
	unsigned char b, out;
	int s, peer;

	tpair(AF_INET, &s, &peer);
	for (size_t i = 0; i < 8; i++) {
		twatch(rl_promise_timeout(rl_promise_net_recv(ctx, s, &b, 1),
					  1000),
		       &r);
		trun_for(loop, 30);
		cr_assert_eq(r.calls, 0);
		out = tpat(i);
		cr_assert_eq(write(peer, &out, 1), 1);
		trun(loop);
		cr_assert_eq(r.err, 0);
		cr_assert_eq(r.v.i, 1);
		cr_assert_eq(b, tpat(i));
	}
	twatch(rl_promise_timeout(rl_promise_net_recv(ctx, s, &b, 1), 50), &r);
	trun(loop);
	cr_assert_eq(r.err, -ETIMEDOUT);
	close(s);
	close(peer);
	tend(loop, ctx);
}

/* Closing the loop with an accept, a receive, a send that waits, a
 * connect and a timeout pending: every one rejects with -ECANCELED. */
BACKEND_TEST(promise_net, close_loop_with_promises_pending)
{
	int base = tfd_count();
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct tsettled acc, rcv, snd, conn, tmo;
	struct rl_addr a, full;
	char buf[8], *big = calloc(1, 16 << 20);
	int lfd, s, peer, s2, peer2, fd, filler;

	lfd = tlisten(&a, AF_INET, 8);
	tpair(AF_INET, &s, &peer);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	taddr(&full, AF_INET);
	cr_assert_eq(bind(fd, &full.sa, full.len), 0);
	cr_assert_eq(listen(fd, 0), 0);
	rl_net_local_addr(fd, &full);
	filler = tconnect(&full);
	twatch(rl_promise_net_accept(ctx, lfd), &acc);
	twatch(rl_promise_net_send(ctx, s, big, 16 << 20, 0), &snd);
	twatch(rl_promise_net_recv(ctx, s, buf, sizeof(buf)), &rcv);
	twatch(rl_promise_net_connect(ctx, &full, 0, 0), &conn);
	tpair(AF_UNIX, &s2, &peer2);
	twatch(rl_promise_timeout(rl_promise_net_recv(ctx, s2, buf, 8), 60000),
	       &tmo);
	trun_for(loop, 20);
	cr_assert_eq(rl_loop_close(loop), 0);
	cr_assert_eq(acc.err, -ECANCELED);
	cr_assert_eq(snd.err, -ECANCELED);
	cr_assert_eq(rcv.err, -ECANCELED);
	cr_assert_eq(conn.err, -ECANCELED);
	cr_assert_eq(tmo.err, -ECANCELED);
	cr_assert_eq(acc.calls + snd.calls + rcv.calls + conn.calls + tmo.calls,
		     5);
	/* The loop's close freed the context. */
	close(lfd);
	close(s);
	close(peer);
	close(filler);
	close(fd);
	close(s2);
	close(peer2);
	cr_assert_eq(tfd_count(), base);
	free(big);
}
