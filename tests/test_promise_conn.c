/* SPDX-License-Identifier: MIT */
/*
 * test_promise_conn.c - promise connections (rl_promise_conn_*): read
 * promises settled from the receive stream's queue, on every backend
 * configuration: an echo chain, reads smaller than a stream item, a
 * timeout that loses nothing, a peer reset and a half-close after data,
 * a close with a read pending, the loop closing with connections open,
 * and a peer that sends far more than the reader reads.
 */
#include <fcntl.h>

#include "net_helpers.h"
#include "promise_helpers.h"

/* Reads len bytes into buf with a timeout, and waits for the outcome. */
static void tread(rl_loop *loop, rl_promise_conn *c, void *buf, size_t len,
		  uint64_t ms, struct tsettled *s)
{
	twatch(rl_promise_conn_read(c, buf, len, ms), s);
	trun_until(loop, s->calls == 1);
}

/* ------------------------------------------------------------ echo */

/* The server: read -> write what came -> read ... until the end, then
 * close. */
struct econn {
	rl_promise_conn *c;
	size_t bytes;
	int end, closed;
	char buf[1000]; /* smaller than a loop buffer: items split */
};

static void e_read(struct econn *k);

static void e_written(struct rl_outcome *o, void *arg)
{
	struct econn *k = arg;

	cr_assert_eq(o->reason, 0, "%s", rl_strerror(o->reason));
	e_read(k);
}

static void e_got(struct rl_outcome *o, void *arg)
{
	struct econn *k = arg;

	if (o->reason < 0 || o->value.i == 0) {
		k->end = o->reason;
		cr_assert_eq(rl_promise_conn_close(k->c), 0);
		k->closed++;
		return;
	}
	cr_assert_eq(o->value.p, k->buf);
	k->bytes += (size_t)o->value.i;
	rl_promise_unref(
		rl_then(rl_promise_conn_write(k->c, k->buf, (size_t)o->value.i),
			e_written, NULL, k));
}

static void e_read(struct econn *k)
{
	rl_promise_unref(
		rl_then(rl_promise_conn_read(k->c, k->buf, sizeof(k->buf), 0),
			e_got, e_got, k));
}

BACKEND_TEST(promise_conn, echo_every_family)
{
	enum { LEN = 200000 };
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	static unsigned char msg[LEN], back[LEN];
	struct econn k;

	tpat_fill(msg, 0, LEN);
	for (int f = 0; f < TNET_FAMILIES; f++) {
		int sfd, peer;
		size_t sent = 0, got = 0;

		memset(&k, 0, sizeof(k));
		tpair(tnet_family[f], &sfd, &peer);
		fcntl(peer, F_SETFL, O_NONBLOCK);
		cr_assert_eq(rl_promise_conn_open(ctx, sfd, &k.c), 0);
		cr_assert_eq(rl_promise_conn_fd(k.c), sfd);
		e_read(&k);
		while (got < LEN) {
			ssize_t n;

			if (sent < LEN) {
				n = send(peer, msg + sent, LEN - sent,
					 MSG_DONTWAIT);
				if (n > 0)
					sent += (size_t)n;
			}
			rl_run(loop, RL_RUN_NOWAIT);
			n = recv(peer, back + got, LEN - got, MSG_DONTWAIT);
			if (n > 0)
				got += (size_t)n;
		}
		tpat_check(back, 0, LEN);
		cr_assert_eq(shutdown(peer, SHUT_WR), 0);
		trun_until(loop, k.closed == 1);
		cr_assert_eq(k.end, 0);
		cr_assert_eq(k.bytes, LEN);
		close(peer);
	}
	trun(loop);
	tend(loop, ctx);
}

/* --------------------------------------------------- reads and ends */

BACKEND_TEST(promise_conn, reads_smaller_than_an_item_then_the_end)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	unsigned char msg[1000], buf[1000];
	rl_promise_conn *c;
	struct tsettled s;
	size_t got = 0;
	int sfd, peer, reads = 0;

	tpair(AF_INET, &sfd, &peer);
	tpat_fill(msg, 0, sizeof(msg));
	cr_assert_eq(write(peer, msg, sizeof(msg)), (ssize_t)sizeof(msg));
	cr_assert_eq(shutdown(peer, SHUT_WR), 0);
	cr_assert_eq(rl_promise_conn_open(ctx, sfd, &c), 0);
	tread(loop, c, buf, 7, 5000, &s);
	cr_assert_eq(s.err, 0);
	cr_assert_eq(s.v.i, 7);
	cr_assert_eq(s.v.p, buf);
	cr_assert_eq(rl_promise_conn_buffered(c), 993);
	got = 7;
	while (got < sizeof(buf)) {
		size_t k = sizeof(buf) - got < 7 ? sizeof(buf) - got : 7;
		rl_promise *p = rl_promise_conn_read(c, buf + got, k, 5000);

		/* Queued data: fulfilled at once. */
		cr_assert_eq(rl_promise_state(p), RL_PROMISE_FULFILLED);
		twatch(p, &s);
		trun_until(loop, s.calls == 1);
		cr_assert_eq(s.v.i, (int64_t)k);
		got += k;
		reads++;
	}
	cr_assert_eq(reads, 142);
	tpat_check(buf, 0, sizeof(buf));
	cr_assert_eq(rl_promise_conn_buffered(c), 0);
	tread(loop, c, buf, 1, 5000, &s);
	cr_assert_eq(s.err, 0);
	cr_assert_eq(s.v.i, 0);
	tread(loop, c, buf, 1, 5000, &s); /* again */
	cr_assert_eq(s.v.i, 0);
	cr_assert_eq(rl_promise_conn_close(c), 0);
	close(peer);
	trun(loop);
	tend(loop, ctx);
}

/* A read times out, the bytes that come next wait for the next read. */
BACKEND_TEST(promise_conn, timeout_then_the_next_read_gets_the_bytes)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise_conn *c;
	char buf[16];
	struct tsettled s;
	int sfd, peer;

	tpair(AF_INET, &sfd, &peer);
	cr_assert_eq(rl_promise_conn_open(ctx, sfd, &c), 0);
	tread(loop, c, buf, sizeof(buf), 40, &s);
	cr_assert_eq(s.err, -ETIMEDOUT);
	cr_assert_eq(write(peer, "hello", 5), 5);
	trun_until(loop, rl_promise_conn_buffered(c) == 5);
	tread(loop, c, buf, sizeof(buf), 5000, &s);
	cr_assert_eq(s.err, 0);
	cr_assert_eq(s.v.i, 5);
	cr_assert_eq(memcmp(buf, "hello", 5), 0);
	/* A second read while one is pending: -EBUSY. */
	twatch(rl_promise_conn_read(c, buf, sizeof(buf), 0), &s);
	{
		struct tsettled busy;

		twatch(rl_promise_conn_read(c, buf, sizeof(buf), 0), &busy);
		trun_until(loop, busy.calls == 1);
		cr_assert_eq(busy.err, -EBUSY);
	}
	/* Closing rejects the pending one. */
	cr_assert_eq(rl_promise_conn_close(c), 0);
	trun_until(loop, s.calls == 1);
	cr_assert_eq(s.err, -ECANCELED);
	close(peer);
	trun(loop);
	tend(loop, ctx);
}

/* Data, then the peer's reset: the data first, then -ECONNRESET. */
BACKEND_TEST(promise_conn, peer_reset_after_data)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct linger lin = { 1, 0 };
	rl_promise_conn *c;
	char buf[16];
	struct tsettled s;
	int sfd, peer;

	tpair(AF_INET, &sfd, &peer);
	cr_assert_eq(write(peer, "abc", 3), 3);
	cr_assert_eq(rl_promise_conn_open(ctx, sfd, &c), 0);
	tread(loop, c, buf, 1, 5000, &s);
	cr_assert_eq(s.v.i, 1);
	setsockopt(peer, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
	close(peer);
	trun_for(loop, 30);
	tread(loop, c, buf + 1, sizeof(buf) - 1, 5000, &s);
	cr_assert_eq(s.err, 0);
	cr_assert_eq(s.v.i, 2);
	cr_assert_eq(memcmp(buf, "abc", 3), 0);
	tread(loop, c, buf, sizeof(buf), 5000, &s);
	cr_assert_eq(s.err, -ECONNRESET);
	tread(loop, c, buf, sizeof(buf), 5000, &s);
	cr_assert_eq(s.err, -ECONNRESET);
	cr_assert_eq(rl_promise_conn_close(c), 0);
	trun(loop);
	tend(loop, ctx);
}

/* The peer ends its side; the connection still writes, then ends its
 * own. */
BACKEND_TEST(promise_conn, half_close)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise_conn *c;
	char buf[16];
	struct tsettled s;
	int sfd, peer;

	tpair(AF_UNIX, &sfd, &peer);
	cr_assert_eq(write(peer, "xy", 2), 2);
	cr_assert_eq(shutdown(peer, SHUT_WR), 0);
	cr_assert_eq(rl_promise_conn_open(ctx, sfd, &c), 0);
	tread(loop, c, buf, sizeof(buf), 5000, &s);
	cr_assert_eq(s.v.i, 2);
	tread(loop, c, buf, sizeof(buf), 5000, &s);
	cr_assert_eq(s.err, 0);
	cr_assert_eq(s.v.i, 0);
	twatch(rl_promise_conn_write(c, "back", 4), &s);
	trun_until(loop, s.calls == 1);
	cr_assert_eq(s.v.i, 4);
	twatch(rl_promise_conn_shutdown(c), &s);
	trun_until(loop, s.calls == 1);
	cr_assert_eq(s.err, 0);
	cr_assert_eq(read(peer, buf, sizeof(buf)), 4);
	cr_assert_eq(memcmp(buf, "back", 4), 0);
	cr_assert_eq(read(peer, buf, sizeof(buf)), 0);
	cr_assert_eq(rl_promise_conn_close(c), 0);
	close(peer);
	trun(loop);
	tend(loop, ctx);
}

/* ---------------------------------------------------------- closing */

/* Closing with a read pending and a write the peer never reads: the read
 * rejects with -ECANCELED, the write fails, the socket closes. */
BACKEND_TEST(promise_conn, close_with_read_and_write_pending)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	char *big = calloc(1, 16 << 20), buf[16];
	static char sink[65536];
	rl_promise_conn *c;
	struct tsettled r, w;
	int sfd, peer;
	ssize_t n;

	tpair(AF_INET, &sfd, &peer);
	cr_assert_eq(rl_promise_conn_open(ctx, sfd, &c), 0);
	twatch(rl_promise_conn_read(c, buf, sizeof(buf), 0), &r);
	twatch(rl_promise_conn_write(c, big, 16 << 20), &w);
	trun_for(loop, 30);
	cr_assert_eq(r.calls + w.calls, 0);
	cr_assert_eq(rl_promise_conn_close(c), 0);
	trun(loop);
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(r.err, -ECANCELED);
	cr_assert_eq(w.calls, 1);
	cr_assert_lt(w.err, 0);
	while ((n = read(peer, sink, sizeof(sink))) > 0)
		;
	cr_assert_eq(n, 0);
	free(big);
	close(peer);
	tend(loop, ctx);
}

/* rl_loop_close() with two connections open, a read pending on each:
 * both reject with -ECANCELED; a reaction closes one, the loop frees the
 * other and closes its socket. */
static void close_it(struct rl_outcome *o, void *arg)
{
	cr_assert_eq(o->reason, -ECANCELED);
	cr_assert_eq(rl_promise_conn_close(arg), 0);
}

static void leave_it(struct rl_outcome *o, void *arg)
{
	int *left = arg;

	cr_assert_eq(o->reason, -ECANCELED);
	(*left)++;
}

BACKEND_TEST(promise_conn, loop_close_with_conns_open)
{
	int base = tfd_count();
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise_conn *c[2];
	int sfd[2], peer[2], left = 0;
	char buf[2][8];

	for (int i = 0; i < 2; i++) {
		tpair(i ? AF_UNIX : AF_INET6, &sfd[i], &peer[i]);
		cr_assert_eq(rl_promise_conn_open(ctx, sfd[i], &c[i]), 0);
	}
	rl_promise_unref(rl_then(rl_promise_conn_read(c[0], buf[0], 8, 0), NULL,
				 close_it, c[0]));
	rl_promise_unref(rl_then(rl_promise_conn_read(c[1], buf[1], 8, 0), NULL,
				 leave_it, &left));
	trun_for(loop, 20);
	cr_assert_eq(rl_loop_close(loop), 0);
	cr_assert_eq(left, 1);
	for (int i = 0; i < 2; i++)
		close(peer[i]);
	cr_assert_eq(tfd_count(), base);
}

/* -------------------------------------------------- back-pressure */

BACKEND_TEST(promise_conn, peer_sending_more_than_read_stays_bounded)
{
	struct rl_options opt;
	rl_loop *loop;
	rl_promise_ctx *ctx;
	rl_promise_conn *c;
	char *buf = malloc(65536);
	struct tsettled s;
	size_t sent, held, total = 0;
	int sfd, peer;

	rl_options_init(&opt);
	opt.net_bufs = 256;
	opt.net_buf_size = 4096;
	loop = tloop_opts(tp, &opt);
	ctx = topen(loop);
	tpair(AF_INET, &sfd, &peer);
	fcntl(peer, F_SETFL, O_NONBLOCK);
	cr_assert_eq(rl_promise_conn_open(ctx, sfd, &c), 0);
	cr_assert_eq(send(peer, "!", 1, 0), 1);
	tread(loop, c, buf, 1, 5000, &s);
	cr_assert_eq(s.v.i, 1);
	sent = tflood(loop, peer, 64u << 20, NULL, NULL);
	cr_assert_lt(sent, 64u << 20, "the connection never stopped reading");
	held = rl_promise_conn_buffered(c);
	cr_assert_lt(held, 64 * 4096, "%zu bytes held", held);
	cr_assert_gt(held, 0);
	shutdown(peer, SHUT_WR);
	for (;;) {
		tread(loop, c, buf, 65536, 5000, &s);
		cr_assert_eq(s.err, 0, "%s", rl_strerror(s.err));
		if (s.v.i == 0)
			break;
		total += (size_t)s.v.i;
	}
	cr_assert_eq(total, sent);
	cr_assert_eq(rl_promise_conn_close(c), 0);
	close(peer);
	free(buf);
	trun(loop);
	tend(loop, ctx);
}
