/* SPDX-License-Identifier: MIT */
/*
 * test_net_attack.c - hostile and awkward uses of the connections
 * (rl_coro_conn_*, rl_promise_conn_*) and of the sockets under them, on
 * every backend configuration: peers that flood while nobody reads (every
 * byte checked against a pattern) on a buffer ring too small for them
 * all, the loop closed with connections in every state, peer resets with
 * reads and writes pending, writes after our own shutdown, reads
 * withdrawn by rl_promise_cancel() and rl_promise_timeout().
 *
 * Each test says what it proves, and a test written for a bug says how it
 * failed before the fix. Each ends with the loop closed and no fd,
 * promise or coroutine left (tclose(), tend(), tsched_close()).
 */
#include <fcntl.h>
#include <stdint.h>
#include <sys/resource.h>

#include "coro_helpers.h"
#include "net_helpers.h"
#include "promise_helpers.h"
#include "ringloop/callback.h"

/* ------------------------------------------------------------ helpers */

/* Runs the loop until cond holds or ms pass (then the caller's asserts
 * say what did not happen), never longer. */
#define trun_within(loop, cond, ms)                            \
	do {                                                   \
		uint64_t end_ = tnow_ms() + (ms);              \
		trun_until(loop, (cond) || tnow_ms() >= end_); \
	} while (0)

static void treset(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	close(fd);
}

/* ------------------------------- floods: bounded, every byte in order */

/*
 * Several connections whose peers flood while nobody reads, on a ring of
 * 16 buffers, fewer than the connections could hold between them: each
 * connection stops its stream (back-pressure), the ring runs dry at
 * times, and when the readers read, every byte of every connection comes
 * in order (the pattern), none lost or doubled.
 */
enum { DRY_CONNS = 6 };

struct dry {
	int s[DRY_CONNS], peer[DRY_CONNS];
	rl_coro_conn *c[DRY_CONNS];
	size_t sent[DRY_CONNS], got[DRY_CONNS];
	int64_t end[DRY_CONNS];
	int opened, done;
	bool go;
};

struct dry_arg {
	struct dry *d;
	int i;
};

static int64_t dry_reader(void *arg)
{
	struct dry_arg *a = arg;
	struct dry *d = a->d;
	int i = a->i;
	unsigned char *buf = malloc(3000); /* items split across reads */
	int64_t n;

	cr_assert_eq(rl_coro_conn_open(d->s[i], &d->c[i]), 0);
	/* The first read starts the stream, then nobody reads. */
	n = rl_coro_conn_read(d->c[i], buf, 1, 5000);
	cr_assert_eq(n, 1, "%s", rl_strerror((int)n));
	tpat_check(buf, 0, 1);
	d->got[i] = 1;
	d->opened++;
	for (int k = 0; k < 20000 && !d->go; k++)
		rl_coro_sleep(1);
	while ((n = rl_coro_conn_read(d->c[i], buf, 3000, 5000)) > 0) {
		tpat_check(buf, d->got[i], (size_t)n);
		d->got[i] += (size_t)n;
	}
	d->end[i] = n;
	free(buf);
	cr_assert_eq(rl_coro_conn_close(d->c[i]), 0);
	d->done++;
	return 0;
}

BACKEND_TEST(net_attack, coro_floods_on_a_dry_ring_every_byte_in_order)
{
	struct rl_options opt;
	struct dry d;
	struct dry_arg args[DRY_CONNS];
	rl_loop *loop;
	rl_coro_ctx *sched;
	struct rl_stats st;

	rl_options_init(&opt);
	opt.net_bufs = 16;
	opt.net_buf_size = 4096;
	loop = tloop_opts(tp, &opt);
	sched = tsched(loop);
	memset(&d, 0, sizeof(d));
	for (int i = 0; i < DRY_CONNS; i++) {
		unsigned char first = tpat(0);

		tpair(i % 2 ? AF_UNIX : AF_INET, &d.s[i], &d.peer[i]);
		fcntl(d.peer[i], F_SETFL, O_NONBLOCK);
		cr_assert_eq(send(d.peer[i], &first, 1, 0), 1);
		d.sent[i] = 1;
		args[i] = (struct dry_arg){ &d, i };
		cr_assert_eq(
			rl_coro_spawn(sched, NULL, dry_reader, &args[i], NULL),
			0);
	}
	trun_until(loop, d.opened == DRY_CONNS);
	for (int i = 0; i < DRY_CONNS; i++)
		tflood_from(loop, d.peer[i], &d.sent[i], 64u << 20, NULL, NULL);
	for (int i = 0; i < DRY_CONNS; i++) {
		cr_assert_lt(d.sent[i], 64u << 20, "conn %d never stopped", i);
		cr_assert_leq(rl_coro_conn_buffered(d.c[i]), 16 * 4096);
	}
	d.go = true;
	for (int i = 0; i < DRY_CONNS; i++)
		shutdown(d.peer[i], SHUT_WR);
	trun_until(loop, d.done == DRY_CONNS);
	rl_loop_stats(loop, &st);
	for (int i = 0; i < DRY_CONNS; i++) {
		cr_assert_eq(d.got[i], d.sent[i], "conn %d: %zu of %zu", i,
			     d.got[i], d.sent[i]);
		cr_assert_eq(d.end[i], 0, "%s", rl_strerror((int)d.end[i]));
		close(d.peer[i]);
	}
	trun(loop);
	tsched_close(sched);
	tclose(loop);
}

/* The same with promise connections, read in chained promises. */
struct pdry {
	rl_promise_conn *c;
	size_t got;
	int64_t end;
	int done;
	unsigned char buf[3000];
};

static void pdry_got(struct rl_outcome *o, void *arg);

static void pdry_read(struct pdry *k)
{
	rl_promise_unref(rl_then(
		rl_promise_conn_read(k->c, k->buf, sizeof(k->buf), 5000),
		pdry_got, pdry_got, k));
}

static void pdry_got(struct rl_outcome *o, void *arg)
{
	struct pdry *k = arg;

	if (o->reason < 0 || o->value.i == 0) {
		k->end = o->reason;
		cr_assert_eq(rl_promise_conn_close(k->c), 0);
		k->done++;
		return;
	}
	tpat_check(k->buf, k->got, (size_t)o->value.i);
	k->got += (size_t)o->value.i;
	pdry_read(k);
}

BACKEND_TEST(net_attack, promise_floods_on_a_dry_ring_every_byte_in_order)
{
	struct rl_options opt;
	static struct pdry k[DRY_CONNS];
	int sfd[DRY_CONNS], peer[DRY_CONNS];
	size_t sent[DRY_CONNS];
	rl_loop *loop;
	rl_promise_ctx *ctx;
	struct tsettled s;
	int done = 0;

	rl_options_init(&opt);
	opt.net_bufs = 16;
	opt.net_buf_size = 4096;
	loop = tloop_opts(tp, &opt);
	ctx = topen(loop);
	memset(k, 0, sizeof(k));
	for (int i = 0; i < DRY_CONNS; i++) {
		unsigned char first = tpat(0);

		tpair(i % 2 ? AF_UNIX : AF_INET6, &sfd[i], &peer[i]);
		fcntl(peer[i], F_SETFL, O_NONBLOCK);
		cr_assert_eq(rl_promise_conn_open(ctx, sfd[i], &k[i].c), 0);
		cr_assert_eq(send(peer[i], &first, 1, 0), 1);
		sent[i] = 1;
		twatch(rl_promise_conn_read(k[i].c, k[i].buf, 1, 5000), &s);
		trun_until(loop, s.calls == 1);
		cr_assert_eq(s.v.i, 1);
		k[i].got = 1;
	}
	for (int i = 0; i < DRY_CONNS; i++)
		tflood_from(loop, peer[i], &sent[i], 64u << 20, NULL, NULL);
	for (int i = 0; i < DRY_CONNS; i++) {
		cr_assert_lt(sent[i], 64u << 20, "conn %d never stopped", i);
		cr_assert_leq(rl_promise_conn_buffered(k[i].c), 16 * 4096);
		shutdown(peer[i], SHUT_WR);
		pdry_read(&k[i]);
	}
	trun_until(loop, (done = 0, ({
				  for (int i = 0; i < DRY_CONNS; i++)
					  done += k[i].done;
			  }),
			  done == DRY_CONNS));
	for (int i = 0; i < DRY_CONNS; i++) {
		cr_assert_eq(k[i].done, 1);
		cr_assert_eq(k[i].end, 0, "%s", rl_strerror((int)k[i].end));
		cr_assert_eq(k[i].got, sent[i], "conn %d: %zu of %zu", i,
			     k[i].got, sent[i]);
		close(peer[i]);
	}
	trun(loop);
	tend(loop, ctx);
}

/* ------------------------------------------ the loop closing on them */

/*
 * rl_loop_close() with coroutine connections in every state: a read
 * suspended; items queued and nobody reading; a stream stopped for
 * back-pressure; two writes in flight to a peer that never reads (the
 * second queued behind the first); a connection never read. Every
 * suspended call returns exactly once, a call made after the close began
 * says -ECANCELED, half the coroutines close their connection and the
 * loop frees the others: no fd left, nothing leaked (ASan, Valgrind).
 */
enum { LC_N = 5 };

struct lc {
	int s[LC_N], peer[LC_N];
	rl_coro_conn *c[LC_N];
	int64_t res[LC_N + 1], after[LC_N + 1];
	int started, returned;
};

struct lc_arg {
	struct lc *k;
	int i;
};

static int64_t lc_body(void *arg)
{
	struct lc_arg *a = arg;
	struct lc *k = a->k;
	int i = a->i, slot = i;
	char buf[64];

	if (i == LC_N) { /* the second writer of connection 3 */
		static char small[1024];

		k->started++;
		k->res[slot] =
			rl_coro_conn_write(k->c[3], small, sizeof(small), 0);
		k->after[slot] = rl_coro_conn_read(k->c[3], buf, 1, 0);
		k->returned++;
		return 0;
	}
	cr_assert_eq(rl_coro_conn_open(k->s[i], &k->c[i]), 0);
	if (i == 1 || i == 2) /* start the stream, then stop reading */
		cr_assert_eq(rl_coro_conn_read(k->c[i], buf, 1, 5000), 1);
	k->started++;
	switch (i) {
	case 0:
		k->res[i] = rl_coro_conn_read(k->c[i], buf, sizeof(buf), 0);
		break;
	case 1:
	case 2:
	case 4:
		k->res[i] = rl_coro_sleep(60000);
		break;
	case 3: {
		char *big = calloc(1, 16 << 20);

		k->res[i] = rl_coro_conn_write(k->c[i], big, 16 << 20, 0);
		free(big);
		break;
	}
	}
	/* The loop is closing: the connection says so. */
	k->after[i] = rl_coro_conn_read(k->c[i], buf, 1, 0);
	if (i % 2 == 0)
		cr_assert_eq(rl_coro_conn_close(k->c[i]), 0);
	k->returned++;
	return 0;
}

BACKEND_TEST(net_attack, coro_loop_close_with_conns_in_every_state)
{
	int base = tfd_count();
	struct rl_options opt;
	rl_loop *loop;
	rl_coro_ctx *sched;
	struct lc k;
	struct lc_arg args[LC_N + 1];
	size_t off = 0;

	rl_options_init(&opt);
	opt.net_bufs = 64;
	loop = tloop_opts(tp, &opt);
	sched = tsched(loop);
	memset(&k, 0, sizeof(k));
	for (int i = 0; i < LC_N; i++) {
		tpair(i % 2 ? AF_UNIX : AF_INET, &k.s[i], &k.peer[i]);
		fcntl(k.peer[i], F_SETFL, O_NONBLOCK);
	}
	cr_assert_eq(send(k.peer[1], "12345678", 8, 0), 8);
	cr_assert_eq(send(k.peer[2], "x", 1, 0), 1);
	for (int i = 0; i < LC_N; i++) {
		args[i] = (struct lc_arg){ &k, i };
		cr_assert_eq(
			rl_coro_spawn(sched, NULL, lc_body, &args[i], NULL), 0);
	}
	trun_until(loop, k.started == LC_N);
	args[LC_N] = (struct lc_arg){ &k, LC_N };
	cr_assert_eq(rl_coro_spawn(sched, NULL, lc_body, &args[LC_N], NULL), 0);
	trun_until(loop, k.started == LC_N + 1);
	off = 1;
	tflood_from(loop, k.peer[2], &off, 8u << 20, NULL, NULL);
	trun_for(loop, 20);
	cr_assert_gt(rl_coro_conn_buffered(k.c[1]), 0);
	cr_assert_gt(rl_coro_conn_buffered(k.c[2]), 0);
	cr_assert_eq(k.returned, 0);
	cr_assert_eq(rl_loop_close(loop), 0);
	cr_assert_eq(k.returned, LC_N + 1);
	cr_assert_eq(k.res[0], -ECANCELED);
	for (int i = 0; i <= LC_N; i++)
		cr_assert_eq(k.after[i], -ECANCELED, "%d: %s", i,
			     rl_strerror((int)k.after[i]));
	cr_assert_lt(k.res[3], 0);
	cr_assert_lt(k.res[LC_N], 0);
	for (int i = 0; i < LC_N; i++)
		close(k.peer[i]);
	cr_assert_eq(tfd_count(), base);
}

/* The same for promise connections: reactions to the reads that the
 * close rejects close half of them, and call read and write on the
 * closing connection first. */
struct plc {
	rl_promise_conn *c;
	int calls, err, after_read, after_write;
	bool close_it;
};

static void plc_after(rl_promise *p, void *arg)
{
	int *where = arg;
	struct rl_settlement o;

	rl_promise_result(p, &o);
	*where = o.err;
	rl_promise_unref(p);
}

static void plc_got(struct rl_outcome *o, void *arg)
{
	struct plc *k = arg;
	static char b[8];

	k->calls++;
	k->err = o->reason;
	cr_assert_eq(rl_promise_subscribe(rl_promise_conn_read(k->c, b, 1, 0),
					  plc_after, &k->after_read),
		     0);
	cr_assert_eq(rl_promise_subscribe(rl_promise_conn_write(k->c, "z", 1),
					  plc_after, &k->after_write),
		     0);
	if (k->close_it)
		cr_assert_eq(rl_promise_conn_close(k->c), 0);
}

BACKEND_TEST(net_attack, promise_loop_close_with_conns_in_every_state)
{
	int base = tfd_count();
	struct rl_options opt;
	rl_loop *loop;
	rl_promise_ctx *ctx;
	static struct plc k[4];
	static char buf[4][64];
	char *big = calloc(1, 16 << 20);
	int sfd[4], peer[4];
	struct tsettled s, w1, w2;
	size_t off = 1;

	rl_options_init(&opt);
	opt.net_bufs = 64;
	loop = tloop_opts(tp, &opt);
	ctx = topen(loop);
	memset(k, 0, sizeof(k));
	for (int i = 0; i < 4; i++) {
		tpair(i % 2 ? AF_UNIX : AF_INET, &sfd[i], &peer[i]);
		fcntl(peer[i], F_SETFL, O_NONBLOCK);
		cr_assert_eq(rl_promise_conn_open(ctx, sfd[i], &k[i].c), 0);
		k[i].close_it = i % 2 == 0;
	}
	/* 0: a read pending. */
	rl_promise_unref(rl_then(rl_promise_conn_read(k[0].c, buf[0], 64, 0),
				 plc_got, plc_got, &k[0]));
	/* 1: items queued, nobody reads. 2: flooded, stream stopped. */
	cr_assert_eq(send(peer[1], "12345678", 8, 0), 8);
	cr_assert_eq(send(peer[2], "x", 1, 0), 1);
	for (int i = 1; i <= 2; i++) {
		twatch(rl_promise_conn_read(k[i].c, buf[i], 1, 5000), &s);
		trun_until(loop, s.calls == 1);
		cr_assert_eq(s.v.i, 1);
	}
	tflood_from(loop, peer[2], &off, 8u << 20, NULL, NULL);
	/* 3: two writes to a peer that never reads, and a read pending. */
	twatch(rl_promise_conn_write(k[3].c, big, 16 << 20), &w1);
	twatch(rl_promise_conn_write(k[3].c, "tail", 4), &w2);
	rl_promise_unref(rl_then(rl_promise_conn_read(k[3].c, buf[3], 64, 0),
				 plc_got, plc_got, &k[3]));
	trun_for(loop, 20);
	cr_assert_gt(rl_promise_conn_buffered(k[1].c), 0);
	cr_assert_gt(rl_promise_conn_buffered(k[2].c), 0);
	cr_assert_eq(w1.calls + w2.calls + k[0].calls + k[3].calls, 0);
	cr_assert_eq(rl_loop_close(loop), 0);
	for (int i = 0; i < 4; i += 3) {
		cr_assert_eq(k[i].calls, 1);
		cr_assert_eq(k[i].err, -ECANCELED);
		cr_assert_eq(k[i].after_read, -ECANCELED);
		cr_assert_eq(k[i].after_write, -ECANCELED);
	}
	cr_assert_eq(w1.calls, 1);
	cr_assert_eq(w2.calls, 1);
	cr_assert_lt(w1.err, 0);
	cr_assert_lt(w2.err, 0);
	for (int i = 0; i < 4; i++)
		close(peer[i]);
	free(big);
	cr_assert_eq(tfd_count(), base);
}

/* ------------------------------------------------------ peer resets */

/*
 * The peer resets (SO_LINGER 0) while a coroutine is suspended in a read
 * and two others in writes, the second queued behind the first: each
 * returns exactly once with an error, none hangs; later reads and writes
 * keep failing with the same kind of error.
 */
struct rs {
	int s, peer;
	rl_coro_conn *c;
	int64_t r, w1, w2, r2, w3;
	int started, returned;
};

static int64_t rs_reader(void *arg)
{
	struct rs *k = arg;
	char buf[64];

	cr_assert_eq(rl_coro_conn_open(k->s, &k->c), 0);
	k->started++;
	k->r = rl_coro_conn_read(k->c, buf, sizeof(buf), 0);
	k->r2 = rl_coro_conn_read(k->c, buf, sizeof(buf), 0);
	k->returned++;
	return 0;
}

static int64_t rs_writer(void *arg)
{
	struct rs *k = arg;
	char *big = calloc(1, 16 << 20);

	k->started++;
	k->w1 = rl_coro_conn_write(k->c, big, 16 << 20, 0);
	free(big);
	k->returned++;
	return 0;
}

static int64_t rs_writer2(void *arg)
{
	struct rs *k = arg;
	static char small[4096];

	k->started++;
	k->w2 = rl_coro_conn_write(k->c, small, sizeof(small), 0);
	k->w3 = rl_coro_conn_write(k->c, small, sizeof(small), 0);
	k->returned++;
	return 0;
}

static bool reset_err(int64_t r)
{
	return r == -ECONNRESET || r == -EPIPE;
}

BACKEND_TEST(net_attack, coro_peer_reset_with_read_and_writes_pending)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	struct rs k;

	memset(&k, 0, sizeof(k));
	tpair(AF_INET, &k.s, &k.peer);
	cr_assert_eq(rl_coro_spawn(sched, NULL, rs_reader, &k, NULL), 0);
	trun_until(loop, k.started == 1);
	cr_assert_eq(rl_coro_spawn(sched, NULL, rs_writer, &k, NULL), 0);
	cr_assert_eq(rl_coro_spawn(sched, NULL, rs_writer2, &k, NULL), 0);
	trun_until(loop, k.started == 3);
	trun_for(loop, 30);
	cr_assert_eq(k.returned, 0);
	treset(k.peer);
	trun_until(loop, k.returned == 3);
	/* The kernel reports a reset once (sock_error() clears sk_err):
	 * when a send takes it, the receive sees the end of the stream (0).
	 * The connection keeps the send's reset for the read: before that,
	 * the read said 0 on io_uring, where the send took it first. */
	cr_assert_eq(k.r, -ECONNRESET, "%s", rl_strerror((int)k.r));
	cr_assert_eq(k.r2, k.r, "%s", rl_strerror((int)k.r2));
	cr_assert(reset_err(k.w1), "%s", rl_strerror((int)k.w1));
	cr_assert(reset_err(k.w2), "%s", rl_strerror((int)k.w2));
	cr_assert(reset_err(k.w3), "%s", rl_strerror((int)k.w3));
	cr_assert_eq(rl_coro_conn_close(k.c), 0);
	trun(loop);
	tsched_close(sched);
	tclose(loop);
}

/*
 * The same for a promise connection: a read pending and a write of 16 MiB
 * the peer never reads, then the peer resets. The read rejects with
 * -ECONNRESET, whichever of the two requests the kernel told, and so does
 * every later read. Before the fix, the read fulfilled with 0 (the end)
 * when the write took the reset.
 */
BACKEND_TEST(net_attack, promise_peer_reset_with_read_and_write_pending)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	char *big = calloc(1, 16 << 20);
	rl_promise_conn *c;
	struct tsettled r, w, r2;
	char buf[64];
	int sfd, peer;

	cr_assert_not_null(big);
	tpair(AF_INET, &sfd, &peer);
	cr_assert_eq(rl_promise_conn_open(ctx, sfd, &c), 0);
	twatch(rl_promise_conn_read(c, buf, sizeof(buf), 0), &r);
	twatch(rl_promise_conn_write(c, big, 16 << 20), &w);
	trun_for(loop, 30);
	cr_assert_eq(r.calls + w.calls, 0);
	treset(peer);
	trun_within(loop, r.calls == 1 && w.calls == 1, 5000);
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(w.calls, 1);
	cr_assert(reset_err(w.err), "%s", rl_strerror(w.err));
	cr_assert_eq(r.err, -ECONNRESET, "%s (value %lld)", rl_strerror(r.err),
		     (long long)r.v.i);
	twatch(rl_promise_conn_read(c, buf, sizeof(buf), 0), &r2);
	trun_until(loop, r2.calls == 1);
	cr_assert_eq(r2.err, -ECONNRESET, "%s", rl_strerror(r2.err));
	cr_assert_eq(rl_promise_conn_close(c), 0);
	trun(loop);
	free(big);
	tend(loop, ctx);
}

/* Our side shut down, then writes: a clear -EPIPE, reading goes on. */
static int64_t half_body(void *arg)
{
	struct rs *k = arg;
	char buf[8];

	cr_assert_eq(rl_coro_conn_open(k->s, &k->c), 0);
	cr_assert_eq(rl_coro_conn_shutdown(k->c), 0);
	k->w1 = rl_coro_conn_write(k->c, "late", 4, 0);
	k->w2 = rl_coro_conn_write(k->c, "late", 4, 0);
	k->r = rl_coro_conn_read(k->c, buf, sizeof(buf), 5000);
	k->r2 = rl_coro_conn_read(k->c, buf, sizeof(buf), 5000);
	cr_assert_eq(rl_coro_conn_close(k->c), 0);
	k->returned++;
	return 0;
}

BACKEND_TEST(net_attack, coro_writes_after_our_shutdown)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	struct rs k;
	char b[8];

	memset(&k, 0, sizeof(k));
	tpair(AF_INET6, &k.s, &k.peer);
	cr_assert_eq(write(k.peer, "ok", 2), 2);
	cr_assert_eq(shutdown(k.peer, SHUT_WR), 0);
	cr_assert_eq(rl_coro_spawn(sched, NULL, half_body, &k, NULL), 0);
	trun(loop);
	cr_assert_eq(k.returned, 1);
	cr_assert_eq(k.w1, -EPIPE, "%s", rl_strerror((int)k.w1));
	cr_assert_eq(k.w2, -EPIPE, "%s", rl_strerror((int)k.w2));
	cr_assert_eq(k.r, 2);
	cr_assert_eq(k.r2, 0);
	cr_assert_eq(read(k.peer, b, sizeof(b)), 0);
	close(k.peer);
	tsched_close(sched);
	tclose(loop);
}

/* --------------------------------------- promise reads: cancel, timeout */

/*
 * rl_promise_timeout() on a connection's read that no data answers: the
 * timeout must reject with -ETIMEDOUT (promise.h: a timeout settles at
 * ms), and the bytes that come later must wait for the next read, not
 * land in the withdrawn read's buffer. Before the fix the read's promise
 * had no request to cancel (rl_promise_cancel() said -ENOENT, which the
 * timeout took for "settled already"): it never settled, 2 s on every
 * backend.
 */
BACKEND_TEST(net_attack, promise_timeout_on_a_conn_read)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise_conn *c;
	char a[16] = { 0 }, b[16] = { 0 };
	struct tsettled t, r;
	int sfd, peer;

	tpair(AF_INET, &sfd, &peer);
	cr_assert_eq(rl_promise_conn_open(ctx, sfd, &c), 0);
	twatch(rl_promise_timeout(rl_promise_conn_read(c, a, sizeof(a), 0), 30),
	       &t);
	trun_within(loop, t.calls == 1, 2000);
	cr_assert_eq(t.calls, 1, "the timeout never settled: the read held it");
	cr_assert_eq(t.err, -ETIMEDOUT, "%s", rl_strerror(t.err));
	cr_assert_eq(write(peer, "hello", 5), 5);
	twatch(rl_promise_conn_read(c, b, sizeof(b), 0), &r);
	trun_until(loop, r.calls == 1);
	cr_assert_eq(r.err, 0, "%s", rl_strerror(r.err));
	cr_assert_eq(r.v.i, 5);
	cr_assert_eq(memcmp(b, "hello", 5), 0);
	for (size_t i = 0; i < sizeof(a); i++)
		cr_assert_eq(a[i], 0, "the withdrawn read's buffer got data");
	cr_assert_eq(rl_promise_conn_close(c), 0);
	close(peer);
	trun(loop);
	tend(loop, ctx);
}

/*
 * rl_promise_cancel() of a pending connection read: promise.h says 0 and
 * -ECANCELED for a pending promise of a request function, -ENOENT only
 * once it settled. The next read gets what comes after. Before the fix:
 * -ENOENT for the pending read.
 */
BACKEND_TEST(net_attack, promise_cancel_of_a_conn_read)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise_conn *c;
	char a[16] = { 0 }, b[16] = { 0 };
	struct tsettled r1, r2;
	rl_promise *p;
	int sfd, peer;

	tpair(AF_INET, &sfd, &peer);
	cr_assert_eq(rl_promise_conn_open(ctx, sfd, &c), 0);
	p = rl_promise_conn_read(c, a, sizeof(a), 0);
	twatch(rl_promise_ref(p), &r1);
	trun_for(loop, 10);
	cr_assert_eq(r1.calls, 0);
	cr_assert_eq(rl_promise_cancel(p), 0);
	cr_assert_eq(rl_promise_cancel(p), -ENOENT);
	rl_promise_unref(p);
	trun_within(loop, r1.calls == 1, 2000);
	cr_assert_eq(r1.calls, 1);
	cr_assert_eq(r1.err, -ECANCELED);
	cr_assert_eq(write(peer, "world", 5), 5);
	twatch(rl_promise_conn_read(c, b, sizeof(b), 0), &r2);
	trun_until(loop, r2.calls == 1);
	cr_assert_eq(r2.err, 0);
	cr_assert_eq(r2.v.i, 5);
	cr_assert_eq(memcmp(b, "world", 5), 0);
	cr_assert_eq(a[0], 0);
	cr_assert_eq(rl_promise_conn_close(c), 0);
	close(peer);
	trun(loop);
	tend(loop, ctx);
}

/* -------------------------------------- callback contexts and closes */

static void cb_count(int err, int64_t value, void *arg)
{
	int *n = arg;

	cr_assert_eq(err, 0);
	cr_assert_eq(value, 0);
	(*n)++;
}

/*
 * rl_cb_net_close() finishes from a microtask when nothing of the
 * connection is in flight (the callback style never frees inside a
 * call). rl_cb_ctx_close() right after it must refuse (-EBUSY) until that
 * task has run: before the fix it said 0 and freed the connection with
 * its task still queued on the loop, which then ran it on freed memory
 * (ASan: heap-use-after-free in conn_task) and never called done.
 */
BACKEND_TEST(net_attack, cb_ctx_close_waits_for_a_conn_close_task)
{
	rl_loop *loop = tloop(tp);
	rl_cb_ctx *cbs;
	rl_cb_conn *c;
	int sfd, peer, closed = 0;

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	tpair(AF_INET, &sfd, &peer);
	cr_assert_eq(rl_cb_net_wrap(cbs, sfd, &c), 0);
	cr_assert_eq(rl_cb_net_close(c, cb_count, &closed), 0);
	cr_assert_eq(rl_cb_ctx_close(cbs), -EBUSY);
	trun(loop);
	cr_assert_eq(closed, 1);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	close(peer);
	tclose(loop);
}

/*
 * rl_promise_ctx_close() with a connection open and nothing in flight
 * (never read, or read to its end): the connection points at the context,
 * so the context must refuse (-EBUSY) until the connection is closed.
 * Before the fix it said 0 and freed itself, and the connection's next
 * read used the freed context (ASan: heap-use-after-free in
 * rl_promise_conn_read).
 */
BACKEND_TEST(net_attack, promise_ctx_close_with_a_conn_open)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise_conn *c;
	struct tsettled r;
	char b[8];
	int sfd, peer;

	tpair(AF_UNIX, &sfd, &peer);
	cr_assert_eq(rl_promise_conn_open(ctx, sfd, &c), 0);
	cr_assert_eq(rl_promise_ctx_close(ctx), -EBUSY);
	cr_assert_eq(write(peer, "ab", 2), 2);
	cr_assert_eq(shutdown(peer, SHUT_WR), 0);
	for (int want = 2;; want = 0) {
		twatch(rl_promise_conn_read(c, b, sizeof(b), 5000), &r);
		trun_until(loop, r.calls == 1);
		cr_assert_eq(r.err, 0);
		cr_assert_eq(r.v.i, want);
		if (!want)
			break;
	}
	trun(loop);
	/* The stream has ended: nothing in flight, the connection open. */
	cr_assert_eq(rl_promise_ctx_close(ctx), -EBUSY);
	twatch(rl_promise_conn_read(c, b, sizeof(b), 0), &r);
	trun_until(loop, r.calls == 1);
	cr_assert_eq(r.v.i, 0);
	cr_assert_eq(rl_promise_conn_close(c), 0);
	close(peer);
	trun(loop);
	tend(loop, ctx);
}

/*
 * NULL handles get a clear answer in every style, never a crash. Before
 * the fix rl_cb_net_fd(), rl_cb_net_server_fd() and
 * rl_cb_net_write_queued() dereferenced NULL (SIGSEGV), where
 * rl_coro_conn_fd() and rl_promise_conn_fd() said -EINVAL.
 */
BACKEND_TEST(net_attack, null_handles_get_an_error)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	char b[4];

	cr_assert_eq(rl_cb_net_fd(NULL), -EINVAL);
	cr_assert_eq(rl_cb_net_server_fd(NULL), -EINVAL);
	cr_assert_eq(rl_cb_net_write_queued(NULL), 0);
	cr_assert_eq(rl_cb_net_read_start(NULL, NULL, NULL), -EINVAL);
	cr_assert_eq(rl_cb_net_read_stop(NULL), -EINVAL);
	cr_assert_null(rl_cb_net_hold(NULL));
	cr_assert_eq(rl_cb_net_write(NULL, b, 1, NULL, NULL), -EINVAL);
	cr_assert_eq(rl_cb_net_end(NULL, NULL, NULL), -EINVAL);
	cr_assert_eq(rl_cb_net_close(NULL, NULL, NULL), -EINVAL);
	cr_assert_eq(rl_cb_net_server_close(NULL, NULL, NULL), -EINVAL);
	cr_assert_eq(rl_promise_conn_fd(NULL), -EINVAL);
	cr_assert_eq(rl_promise_conn_buffered(NULL), 0);
	cr_assert_null(rl_promise_conn_read(NULL, b, 1, 0));
	cr_assert_null(rl_promise_conn_write(NULL, b, 1));
	cr_assert_null(rl_promise_conn_shutdown(NULL));
	cr_assert_eq(rl_promise_conn_close(NULL), -EINVAL);
	cr_assert_eq(rl_promise_conn_open(ctx, 0, NULL), -EINVAL);
	cr_assert_eq(rl_promise_conn_open(NULL, 0, NULL), -EINVAL);
	cr_assert_eq(rl_coro_conn_fd(NULL), -EINVAL);
	cr_assert_eq(rl_coro_conn_buffered(NULL), 0);
	cr_assert_eq(rl_coro_conn_close(NULL), -EINVAL);
	cr_assert_eq(rl_coro_conn_shutdown(NULL), -EINVAL);
	cr_assert_eq(rl_promise_cancel(NULL), -EINVAL);
	tend(loop, ctx);
}

/* ------------------------------- callback connections closed inside */

struct cbk {
	rl_cb_conn *c;
	int data, ends, closed, writes_ok, writes_err;
	int last_err;
	size_t bytes;
	bool stop_start; /* read_stop + read_start before closing */
	int close_at;	 /* close in the data callback number close_at */
};

static void cbk_closed(int err, int64_t value, void *arg)
{
	struct cbk *k = arg;

	cr_assert_eq(err, 0);
	cr_assert_eq(value, 0);
	k->closed++;
}

static void cbk_data(int err, const void *data, size_t len, void *arg)
{
	struct cbk *k = arg;

	cr_assert_eq(k->closed, 0, "a data callback after the close");
	if (err < 0 || !len) {
		k->ends++;
		k->last_err = err;
		return;
	}
	cr_assert_not_null(data);
	tpat_check(data, k->bytes, len);
	k->bytes += len;
	if (++k->data == k->close_at) {
		if (k->stop_start) {
			cr_assert_eq(rl_cb_net_read_stop(k->c), 0);
			cr_assert_eq(rl_cb_net_read_start(k->c, cbk_data, k),
				     0);
		}
		/* A held buffer given back inside the same callback. */
		void *held = rl_cb_net_hold(k->c);

		cr_assert_not_null(held);
		cr_assert_eq(rl_cb_net_release(k->c, held), 0);
		cr_assert_eq(rl_cb_net_close(k->c, cbk_closed, k), 0);
		cr_assert_eq(rl_cb_net_close(k->c, cbk_closed, k), -EALREADY);
		cr_assert_eq(rl_cb_net_write(k->c, "x", 1, NULL, NULL),
			     -ECANCELED);
		cr_assert_eq(rl_cb_net_read_start(k->c, cbk_data, k),
			     -ECANCELED);
	}
}

/*
 * rl_cb_net_close() from inside a data callback while more items of the
 * same stream wait to be delivered (the peer sent many small pieces
 * before the stream started, and paused data after a read_stop): no data
 * or end callback after it, done exactly once, the socket closed, no
 * buffer lost (a ring of 8 buffers must serve a second connection after).
 */
BACKEND_TEST(net_attack, cb_close_inside_its_data_callback)
{
	struct rl_options opt;
	rl_loop *loop;
	rl_cb_ctx *cbs;

	rl_options_init(&opt);
	opt.net_bufs = 8;
	opt.net_buf_size = 64;
	loop = tloop_opts(tp, &opt);
	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	for (int variant = 0; variant < 4; variant++) {
		unsigned char msg[4096];
		struct cbk k;
		int sfd, peer;
		ssize_t r;

		memset(&k, 0, sizeof(k));
		k.stop_start = variant & 1;
		k.close_at = variant & 2 ? 3 : 1;
		tpair(AF_UNIX, &sfd, &peer);
		tpat_fill(msg, 0, sizeof(msg));
		/* More than the ring holds: items queue, the ring runs dry. */
		cr_assert_eq(write(peer, msg, sizeof(msg)),
			     (ssize_t)sizeof(msg));
		cr_assert_eq(rl_cb_net_wrap(cbs, sfd, &k.c), 0);
		cr_assert_eq(rl_cb_net_read_start(k.c, cbk_data, &k), 0);
		trun_until(loop, k.closed == 1);
		trun(loop);
		cr_assert_eq(k.data, k.close_at);
		cr_assert_eq(k.ends, 0);
		cr_assert_eq(k.closed, 1);
		/* Our side is closed: the peer reads the end. */
		r = read(peer, msg, sizeof(msg));
		cr_assert(r == 0 || (r < 0 && errno == ECONNRESET));
		close(peer);
	}
	/* Every buffer came back: a new connection gets all of its data. */
	{
		unsigned char msg[2000];
		struct cbk k;
		int sfd, peer;

		memset(&k, 0, sizeof(k));
		tpair(AF_INET, &sfd, &peer);
		tpat_fill(msg, 0, sizeof(msg));
		cr_assert_eq(write(peer, msg, sizeof(msg)),
			     (ssize_t)sizeof(msg));
		shutdown(peer, SHUT_WR);
		cr_assert_eq(rl_cb_net_wrap(cbs, sfd, &k.c), 0);
		cr_assert_eq(rl_cb_net_read_start(k.c, cbk_data, &k), 0);
		trun_until(loop, k.ends == 1);
		cr_assert_eq(k.bytes, sizeof(msg));
		cr_assert_eq(k.last_err, 0);
		cr_assert_eq(rl_cb_net_close(k.c, cbk_closed, &k), 0);
		trun(loop);
		cr_assert_eq(k.closed, 1);
		close(peer);
	}
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}

/* A write's done callback closes the connection while two more writes
 * wait behind it, to a peer that reads nothing more: each of those gets
 * its done exactly once (-ECANCELED or an error), then the close's. */
struct cbw {
	rl_cb_conn *c;
	int done[3], err[3], closed;
};

static void cbw_done(int err, int64_t value, void *arg);

static void cbw_closed(int err, int64_t value, void *arg)
{
	struct cbw *k = arg;

	(void)err;
	(void)value;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(k->done[i], 1, "write %d after the close", i);
	k->closed++;
}

static void cbw_done0(int err, int64_t value, void *arg)
{
	struct cbw *k = arg;

	(void)value;
	k->done[0]++;
	k->err[0] = err;
	cr_assert_eq(rl_cb_net_close(k->c, cbw_closed, k), 0);
}

static void cbw_done(int err, int64_t value, void *arg)
{
	int *slot = arg; /* &k->done[i] */

	(void)value;
	slot[0]++;
	slot[3] = err; /* err[i] */
}

BACKEND_TEST(net_attack, cb_close_inside_a_write_callback_with_writes_behind)
{
	rl_loop *loop = tloop(tp);
	rl_cb_ctx *cbs;
	static char small[100], big[8 << 20];
	struct cbw k;
	int sfd, peer;

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	memset(&k, 0, sizeof(k));
	tpair(AF_INET, &sfd, &peer);
	cr_assert_eq(rl_cb_net_wrap(cbs, sfd, &k.c), 0);
	cr_assert_eq(rl_cb_net_write(k.c, small, sizeof(small), cbw_done0, &k),
		     0);
	cr_assert_eq(
		rl_cb_net_write(k.c, big, sizeof(big), cbw_done, &k.done[1]),
		0);
	cr_assert_eq(rl_cb_net_write(k.c, small, sizeof(small), cbw_done,
				     &k.done[2]),
		     0);
	trun_until(loop, k.closed == 1);
	trun(loop);
	cr_assert_eq(k.err[0], 0);
	cr_assert_lt(k.err[1], 0);
	cr_assert_lt(k.err[2], 0);
	cr_assert_eq(k.closed, 1);
	close(peer);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}

/* A promise connection closed from the reaction to a read that the
 * stream settled, with more items queued and two writes in flight to a
 * peer that does not read (the second queued behind the first): the
 * writes fail exactly once each, nothing leaks, the socket closes. */
struct prc {
	rl_promise_conn *c;
	int got, closed;
};

static void prc_got(struct rl_outcome *o, void *arg)
{
	struct prc *k = arg;

	cr_assert_eq(o->reason, 0);
	cr_assert_gt(o->value.i, 0);
	k->got++;
	cr_assert_gt(rl_promise_conn_buffered(k->c), 0);
	cr_assert_eq(rl_promise_conn_close(k->c), 0);
	k->closed++;
}

BACKEND_TEST(net_attack, promise_close_from_a_read_reaction_with_writes)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	char *big = calloc(1, 16 << 20);
	unsigned char msg[3000], buf[10];
	struct tsettled w1, w2;
	struct prc k;
	int sfd, peer;
	ssize_t r;

	memset(&k, 0, sizeof(k));
	tpair(AF_INET, &sfd, &peer);
	cr_assert_eq(rl_promise_conn_open(ctx, sfd, &k.c), 0);
	twatch(rl_promise_conn_write(k.c, big, 16 << 20), &w1);
	twatch(rl_promise_conn_write(k.c, "tail", 4), &w2);
	trun_for(loop, 20);
	tpat_fill(msg, 0, sizeof(msg));
	cr_assert_eq(write(peer, msg, sizeof(msg)), (ssize_t)sizeof(msg));
	rl_promise_unref(rl_then(rl_promise_conn_read(k.c, buf, sizeof(buf), 0),
				 prc_got, NULL, &k));
	trun_until(loop, w1.calls == 1 && w2.calls == 1);
	trun(loop);
	cr_assert_eq(k.got, 1);
	cr_assert_eq(k.closed, 1);
	cr_assert_lt(w1.err, 0);
	cr_assert_lt(w2.err, 0);
	shutdown(peer, SHUT_WR);
	while ((r = read(peer, big, 16 << 20)) > 0)
		;
	cr_assert(r == 0 || errno == ECONNRESET);
	free(big);
	close(peer);
	tend(loop, ctx);
}

/*
 * fd numbers reused at once: a connection is closed with its stream
 * armed (a read pending), and the next connection gets the same fd
 * number before the loop has run; its data must come, in order, to it
 * (epoll keeps a table by fd and drops registrations late; io_uring
 * keeps its send order by fd).
 */
BACKEND_TEST(net_attack, promise_fd_reuse_after_close_with_read_pending)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	int prev = -1, reused = 0;

	for (int i = 0; i < 40; i++) {
		rl_promise_conn *c;
		unsigned char buf[64], msg[64];
		struct tsettled r, old, w;
		int sfd, peer;

		tpair(i % 2 ? AF_UNIX : AF_INET, &sfd, &peer);
		reused += sfd == prev;
		prev = sfd;
		cr_assert_eq(rl_promise_conn_open(ctx, sfd, &c), 0);
		/* The read parks and arms the stream; the close follows
		 * before the loop runs for half of them. */
		twatch(rl_promise_conn_read(c, buf, sizeof(buf), 0), &old);
		if (i % 4 < 2) {
			cr_assert_eq(rl_promise_conn_close(c), 0);
			trun_until(loop, old.calls == 1);
			cr_assert_eq(old.err, -ECANCELED);
			close(peer);
			continue;
		}
		tpat_fill(msg, (size_t)i, sizeof(msg));
		cr_assert_eq(write(peer, msg, sizeof(msg)),
			     (ssize_t)sizeof(msg));
		trun_until(loop, old.calls == 1);
		cr_assert_eq(old.err, 0);
		cr_assert_gt(old.v.i, 0);
		tpat_check(buf, (size_t)i, (size_t)old.v.i);
		if (old.v.i < (int64_t)sizeof(msg)) {
			size_t got = (size_t)old.v.i;

			twatch(rl_promise_conn_read(c, buf + got,
						    sizeof(buf) - got, 5000),
			       &r);
			trun_until(loop, r.calls == 1);
			cr_assert_eq(r.v.i, (int64_t)(sizeof(msg) - got));
			tpat_check(buf, (size_t)i, sizeof(msg));
		}
		twatch(rl_promise_conn_write(c, msg, sizeof(msg)), &w);
		trun_until(loop, w.calls == 1);
		cr_assert_eq(w.v.i, (int64_t)sizeof(msg));
		cr_assert_eq(read(peer, buf, sizeof(buf)),
			     (ssize_t)sizeof(msg));
		tpat_check(buf, (size_t)i, sizeof(msg));
		cr_assert_eq(rl_promise_conn_close(c), 0);
		close(peer);
	}
	cr_assert_gt(reused, 0);
	trun(loop);
	tend(loop, ctx);
}

/* ------------------------------------------------- loop-level streams */

/* A stream that keeps every loop buffer its items bring. */
struct hog {
	rl_req req;
	void *held[8];
	int items, finals, nheld;
	size_t bytes;
	int64_t final;
};

static void hog_cb(rl_req *req)
{
	struct hog *h = req->data;

	if (rl_req_more(req)) {
		cr_assert_eq(h->finals, 0);
		h->items++;
		h->bytes += req->len;
		cr_assert_lt(h->nheld, 8);
		h->held[h->nheld] = rl_net_buf_hold(req);
		cr_assert_not_null(h->held[h->nheld]);
		h->nheld++;
		return;
	}
	h->finals++;
	h->final = req->result;
}

/*
 * A stream starved for buffers (every one held by another stream) is
 * cancelled: its final callback must come now, -ECANCELED, without
 * waiting for buffers, and no item after it once buffers come back. The
 * data stays in the socket: a new stream on the fd gets all of it.
 */
BACKEND_TEST(net_attack, starved_stream_cancelled)
{
	struct rl_options opt;
	rl_loop *loop;
	struct hog a, b;
	struct tsink s;
	int fa, pa, fb, pb;
	struct rl_stats st;
	unsigned char msg[100];

	rl_options_init(&opt);
	opt.net_bufs = 2;
	opt.net_buf_size = 16;
	loop = tloop_opts(tp, &opt);
	tpair(AF_INET, &fa, &pa);
	tpair(AF_UNIX, &fb, &pb);
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.req.data = &a;
	b.req.data = &b;
	cr_assert_eq(rl_net_recv_stream(loop, &a.req, fa, hog_cb), 0);
	cr_assert_eq(write(pa, "0123456789abcdef0123456789abcdef", 32), 32);
	trun_until(loop, a.nheld == 2);
	cr_assert_eq(a.bytes, 32);
	/* B: data waits, no buffer is free. */
	tpat_fill(msg, 0, sizeof(msg));
	cr_assert_eq(write(pb, msg, sizeof(msg)), (ssize_t)sizeof(msg));
	cr_assert_eq(rl_net_recv_stream(loop, &b.req, fb, hog_cb), 0);
	trun_for(loop, 30);
	cr_assert_eq(b.items, 0);
	rl_loop_stats(loop, &st);
	cr_assert_gt(st.net_dry, 0);
	cr_assert_eq(rl_cancel(loop, &b.req), 0);
	trun_within(loop, b.finals == 1, 2000);
	cr_assert_eq(b.finals, 1, "a starved stream's cancel waited");
	cr_assert_eq(b.final, -ECANCELED);
	/* The buffers come back: nothing more for B. */
	for (int i = 0; i < a.nheld; i++)
		cr_assert_eq(rl_net_buf_release(loop, a.held[i]), 0);
	a.nheld = 0;
	trun_for(loop, 20);
	cr_assert_eq(b.items, 0);
	cr_assert_eq(b.finals, 1);
	/* The data is still in the socket, whole and in order. */
	tsink_start(loop, &s, fb, true);
	shutdown(pb, SHUT_WR);
	trun_until(loop, s.finals == 1);
	cr_assert_eq(s.bytes, sizeof(msg));
	cr_assert_eq(s.final, 0);
	cr_assert_eq(rl_cancel(loop, &a.req), 0);
	trun_until(loop, a.finals == 1);
	cr_assert_eq(a.final, -ECANCELED);
	for (int i = 0; i < a.nheld; i++)
		cr_assert_eq(rl_net_buf_release(loop, a.held[i]), 0);
	close(fa);
	close(pa);
	close(fb);
	close(pb);
	tclose(loop);
}

/* One request's final result. */
static int64_t tone(rl_loop *loop, rl_req *req)
{
	struct tseen s = { 0, 0 };

	req->data = &s;
	trun_until(loop, s.calls == 1);
	return s.result;
}

/*
 * Streams and sends on sockets that cannot do them: each gets the
 * kernel's answer, once, the same on every backend (docs/net.md).
 */
BACKEND_TEST(net_attack, wrong_sockets_same_error_everywhere)
{
	rl_loop *loop = tloop(tp);
	struct rl_addr a;
	struct tsink s;
	rl_req req;
	int lfd = tlisten(&a, AF_INET, 8), sfd, peer, p[2];
	int64_t r;

	tpair(AF_INET, &sfd, &peer);
	cr_assert_eq(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);

	/* A receive stream on a listening socket. */
	tsink_start(loop, &s, lfd, false);
	trun_until(loop, s.finals == 1);
	cr_assert_eq(s.items, 0);
	cr_assert_eq(s.final, -ENOTCONN, "%s", rl_strerror((int)s.final));

	/* A receive stream on a pipe. */
	tsink_start(loop, &s, p[0], false);
	trun_until(loop, s.finals == 1);
	cr_assert_eq(s.final, -ENOTSOCK, "%s", rl_strerror((int)s.final));

	/* An accept stream on a connected socket. */
	rl_req_init(&req);
	cr_assert_eq(rl_net_accept(loop, &req, sfd, tseen_cb), 0);
	r = tone(loop, &req);
	cr_assert_eq(r, -EINVAL, "%s", rl_strerror((int)r));

	/* A send on a listening socket. */
	rl_req_init(&req);
	cr_assert_eq(rl_net_send(loop, &req, lfd, "x", 1, 0, tseen_cb), 0);
	r = tone(loop, &req);
	cr_assert(r == -ENOTCONN || r == -EPIPE, "%s", rl_strerror((int)r));
	{
		int64_t first = r;

		/* The same answer on every backend: compare with send(). */
		errno = 0;
		cr_assert_eq(send(lfd, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT),
			     -1);
		cr_assert_eq(first, -errno, "%s vs %s", rl_strerror((int)first),
			     strerror(errno));
	}

	/* A stream after our own SHUT_RD: the end, once. */
	cr_assert_eq(shutdown(sfd, SHUT_RD), 0);
	tsink_start(loop, &s, sfd, false);
	trun_until(loop, s.finals == 1);
	cr_assert_eq(s.items, 0);
	cr_assert_eq(s.final, 0, "%s", rl_strerror((int)s.final));

	/* A shutdown of a pipe. */
	rl_req_init(&req);
	cr_assert_eq(rl_net_shutdown(loop, &req, p[1], SHUT_WR, tseen_cb), 0);
	r = tone(loop, &req);
	cr_assert_eq(r, -ENOTSOCK, "%s", rl_strerror((int)r));

	trun_for(loop, 10);
	close(lfd);
	close(sfd);
	close(peer);
	close(p[0]);
	close(p[1]);
	tclose(loop);
}

/* ------------------------- callback reading paused and resumed often */

struct cbf {
	rl_cb_conn *c;
	size_t bytes, next_pause;
	int ends, pauses, resumes;
	int64_t end;
	bool paused;
	void *held[4];
	int nheld;
};

static void cbf_data(int err, const void *data, size_t len, void *arg)
{
	struct cbf *k = arg;

	if (err < 0 || !len) {
		k->ends++;
		k->end = err;
		return;
	}
	cr_assert_eq(k->ends, 0, "data after the end");
	tpat_check(data, k->bytes, len);
	k->bytes += len;
	/* Keep a few buffers for a while, as an echo does. */
	if (k->nheld < 4 && (k->bytes / len) % 3 == 0) {
		k->held[k->nheld] = rl_cb_net_hold(k->c);
		cr_assert_not_null(k->held[k->nheld]);
		k->nheld++;
	}
	if (k->bytes >= k->next_pause && !k->paused) {
		cr_assert_eq(rl_cb_net_read_stop(k->c), 0);
		cr_assert_eq(rl_cb_net_read_stop(k->c), -ENOENT);
		k->paused = true;
		k->pauses++;
		k->next_pause += 50000;
	}
}

/*
 * A callback connection paused (read_stop in its data callback) every
 * 50 KB while the peer floods, resumed from outside, holding some loop
 * buffers for a while: every byte comes once, in order, on a small ring.
 */
BACKEND_TEST(net_attack, cb_pause_resume_under_flood_every_byte_in_order)
{
	struct rl_options opt;
	rl_loop *loop;
	rl_cb_ctx *cbs;
	struct cbf k;
	size_t sent = 0;
	int sfd, peer;

	rl_options_init(&opt);
	opt.net_bufs = 16;
	opt.net_buf_size = 2048;
	loop = tloop_opts(tp, &opt);
	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	memset(&k, 0, sizeof(k));
	k.next_pause = 50000;
	tpair(AF_INET, &sfd, &peer);
	fcntl(peer, F_SETFL, O_NONBLOCK);
	cr_assert_eq(rl_cb_net_wrap(cbs, sfd, &k.c), 0);
	cr_assert_eq(rl_cb_net_read_start(k.c, cbf_data, &k), 0);
	for (int round = 0; round < 200 && sent < (2u << 20); round++) {
		tflood_from(loop, peer, &sent,
			    (2u << 20) - sent < 30000 ? (2u << 20) - sent
						      : 30000,
			    NULL, NULL);
		if (k.paused) {
			for (int i = 0; i < k.nheld; i++)
				cr_assert_eq(rl_cb_net_release(k.c, k.held[i]),
					     0);
			k.nheld = 0;
			k.paused = false;
			k.resumes++;
			cr_assert_eq(rl_cb_net_read_start(k.c, cbf_data, &k),
				     0);
		}
	}
	cr_assert_eq(sent, 2u << 20);
	shutdown(peer, SHUT_WR);
	for (int i = 0; i < 400 && !k.ends; i++) {
		trun_for(loop, 5);
		if (k.paused) {
			k.paused = false;
			cr_assert_eq(rl_cb_net_read_start(k.c, cbf_data, &k),
				     0);
		}
	}
	cr_assert_eq(k.ends, 1);
	cr_assert_eq(k.end, 0, "%s", rl_strerror((int)k.end));
	cr_assert_eq(k.bytes, sent);
	cr_assert_gt(k.pauses, 10);
	for (int i = 0; i < k.nheld; i++)
		cr_assert_eq(rl_cb_net_release(k.c, k.held[i]), 0);
	cr_assert_eq(rl_cb_net_close(k.c, NULL, NULL), 0);
	trun(loop);
	close(peer);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}

/* ------------------------------------------ callback end, then close */

struct cbe {
	int end_calls, end_err, close_calls, write_calls, write_err;
};

static void cbe_end(int err, int64_t value, void *arg)
{
	struct cbe *k = arg;

	(void)value;
	cr_assert_eq(k->close_calls, 0, "end's done after the close's");
	k->end_calls++;
	k->end_err = err;
}

static void cbe_closed(int err, int64_t value, void *arg)
{
	struct cbe *k = arg;

	(void)err;
	(void)value;
	k->close_calls++;
}

static void cbe_write(int err, int64_t value, void *arg)
{
	struct cbe *k = arg;

	(void)value;
	k->write_calls++;
	k->write_err = err;
}

/*
 * rl_cb_net_end() waits for the writes before it; rl_cb_net_close() then
 * cancels those writes. The end's done must still come, exactly once,
 * with an error, before the close's done: before the fix it never came
 * (the close dropped the waiting shutdown silently), so a program that
 * waits for it waited for ever.
 */
BACKEND_TEST(net_attack, cb_end_waiting_for_writes_then_close)
{
	rl_loop *loop = tloop(tp);
	rl_cb_ctx *cbs;
	rl_cb_conn *c;
	char *big = calloc(1, 16 << 20);
	struct cbe k;
	int sfd, peer;

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	memset(&k, 0, sizeof(k));
	tpair(AF_INET, &sfd, &peer);
	cr_assert_eq(rl_cb_net_wrap(cbs, sfd, &c), 0);
	cr_assert_eq(rl_cb_net_write(c, big, 16 << 20, cbe_write, &k), 0);
	cr_assert_eq(rl_cb_net_end(c, cbe_end, &k), 0);
	cr_assert_eq(rl_cb_net_end(c, cbe_end, &k), -EALREADY);
	trun_for(loop, 20);
	cr_assert_eq(k.write_calls + k.end_calls, 0);
	cr_assert_eq(rl_cb_net_close(c, cbe_closed, &k), 0);
	trun_until(loop, k.close_calls == 1);
	trun(loop);
	cr_assert_eq(k.write_calls, 1);
	cr_assert_lt(k.write_err, 0);
	cr_assert_eq(k.end_calls, 1, "the end's done never came");
	cr_assert_eq(k.end_err, -ECANCELED, "%s", rl_strerror(k.end_err));
	cr_assert_eq(k.close_calls, 1);
	free(big);
	close(peer);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}

/* ------------------------- coroutine shutdown racing a close */

struct csh {
	int s, peer;
	rl_coro_conn *c;
	int64_t res;
	int started, returned;
};

static int64_t csh_open(void *arg)
{
	struct csh *k = arg;

	cr_assert_eq(rl_coro_conn_open(k->s, &k->c), 0);
	return 0;
}

static int64_t csh_body(void *arg)
{
	struct csh *k = arg;

	k->started++;
	k->res = rl_coro_conn_shutdown(k->c);
	k->returned++;
	return 0;
}

/*
 * rl_coro_conn_close() while another coroutine's rl_coro_conn_shutdown()
 * is in flight, and a new socket takes the freed fd number before the
 * loop runs. The connection must not close its socket under the request
 * (the docs: closing an fd under a request is undefined): before the fix
 * the shutdown was not counted among the connection's requests, the
 * close closed the fd at once, and the shutdown then ran on the new
 * socket that got the number (its peer read the end of the stream).
 */
BACKEND_TEST(net_attack, coro_close_while_shutdown_in_flight)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	struct csh k;
	int sp[2];
	char b;

	memset(&k, 0, sizeof(k));
	tpair(AF_INET, &k.s, &k.peer);
	cr_assert_eq(rl_coro_spawn(sched, NULL, csh_open, &k, NULL), 0);
	trun(loop);
	cr_assert_not_null(k.c);
	cr_assert_eq(rl_coro_spawn(sched, NULL, csh_body, &k, NULL), 0);
	/* Runs the coroutine up to its suspension; the loop's I/O for the
	 * shutdown comes at the next wait. */
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	if (k.returned == 0) {
		int old = k.s, nfd;

		cr_assert_eq(k.started, 1);
		cr_assert_eq(
			socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp),
			0);
		cr_assert_eq(rl_coro_conn_close(k.c), 0);
		/* A new socket takes the lowest free number from the
		 * connection's: its own, if the close freed it. */
		nfd = fcntl(sp[0], F_DUPFD_CLOEXEC, old);
		cr_assert_geq(nfd, old);
		trun(loop);
		cr_assert_eq(k.returned, 1);
		cr_assert(k.res == 0 || k.res == -ECANCELED, "%s",
			  rl_strerror((int)k.res));
		/* The new socket was not touched: its peer sees no end. */
		errno = 0;
		cr_assert_eq(recv(sp[1], &b, 1, MSG_DONTWAIT), -1,
			     "the shutdown hit the new socket");
		cr_assert_eq(errno, EAGAIN);
		close(nfd);
		close(sp[0]);
		close(sp[1]);
	} else {
		/* The shutdown finished inside the first run (the backend
		 * issued it at once): nothing to race. */
		cr_assert_eq(k.res, 0);
		cr_assert_eq(rl_coro_conn_close(k.c), 0);
		trun(loop);
	}
	close(k.peer);
	tsched_close(sched);
	tclose(loop);
}

/* ------------------------------- the loop closing on callback conns */

struct cblc {
	int data[4], ends[4], end_err[4];
	int wdone, wdone_err, enddone, enddone_err; /* pairs for cblc_res */
	int closed, srv_conns, srv_err;
	bool loop_gone;
};

struct cblc_arg {
	struct cblc *k;
	int i;
};

static void cblc_data(int err, const void *data, size_t len, void *arg)
{
	struct cblc_arg *a = arg;

	(void)data;
	cr_assert(!a->k->loop_gone, "a callback after rl_loop_close()");
	if (err < 0 || !len) {
		a->k->ends[a->i]++;
		a->k->end_err[a->i] = err;
		return;
	}
	a->k->data[a->i]++;
}

static void cblc_res(int err, int64_t value, void *arg)
{
	int *slot = arg;

	(void)value;
	slot[0]++;
	slot[1] = err;
}

static void cblc_closed(int err, int64_t value, void *arg)
{
	struct cblc *k = arg;

	(void)err;
	(void)value;
	cr_assert(!k->loop_gone);
	k->closed++;
}

static void cblc_conn(int err, rl_cb_conn *conn, void *arg)
{
	struct cblc *k = arg;

	cr_assert(!k->loop_gone);
	cr_assert_null(conn);
	k->srv_conns++;
	k->srv_err = err;
}

/*
 * rl_loop_close() with callback connections in every state: reading (a
 * data callback due: -ECANCELED once), paused with data kept, a write in
 * flight to a peer that does not read with an end waiting behind it, a
 * close begun (its task queued), a server listening: every callback due
 * comes once (the server's on_conn once, -ECANCELED), none after
 * rl_loop_close() returns, no fd left.
 */
BACKEND_TEST(net_attack, cb_loop_close_with_conns_in_every_state)
{
	int base = tfd_count();
	rl_loop *loop = tloop(tp);
	rl_cb_ctx *cbs;
	rl_cb_conn *c[4];
	rl_cb_server *srv;
	struct rl_addr a;
	struct cblc k;
	struct cblc_arg args[4];
	char *big = calloc(1, 16 << 20);
	int sfd[4], peer[4];

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	memset(&k, 0, sizeof(k));
	for (int i = 0; i < 4; i++) {
		tpair(i % 2 ? AF_UNIX : AF_INET, &sfd[i], &peer[i]);
		cr_assert_eq(rl_cb_net_wrap(cbs, sfd[i], &c[i]), 0);
		args[i] = (struct cblc_arg){ &k, i };
	}
	taddr(&a, AF_INET6);
	cr_assert_eq(rl_cb_net_listen(cbs, &a, 8, 0, cblc_conn, &k, &srv), 0);
	/* 0: reading, nothing comes. */
	cr_assert_eq(rl_cb_net_read_start(c[0], cblc_data, &args[0]), 0);
	/* 1: paused with data kept: read, stop, then data arrives. */
	cr_assert_eq(rl_cb_net_read_start(c[1], cblc_data, &args[1]), 0);
	cr_assert_eq(rl_cb_net_read_stop(c[1]), 0);
	cr_assert_eq(write(peer[1], "kept", 4), 4);
	/* 2: a big write, then an end waiting behind it. */
	cr_assert_eq(rl_cb_net_write(c[2], big, 16 << 20, cblc_res, &k.wdone),
		     0);
	cr_assert_eq(rl_cb_net_end(c[2], cblc_res, &k.enddone), 0);
	trun_for(loop, 30);
	/* 3: a close begun, its task still queued. */
	cr_assert_eq(rl_cb_net_close(c[3], cblc_closed, &k), 0);
	cr_assert_eq(rl_loop_close(loop), 0);
	k.loop_gone = true;
	cr_assert_eq(k.ends[0], 1);
	cr_assert_eq(k.end_err[0], -ECANCELED);
	cr_assert_eq(k.data[0] + k.data[1], 0);
	cr_assert_eq(k.ends[1], 0); /* paused: no callback due */
	cr_assert_eq(k.wdone, 1);
	cr_assert_lt(k.wdone_err, 0);
	cr_assert_eq(k.enddone, 1);
	cr_assert_lt(k.enddone_err, 0);
	cr_assert_eq(k.closed, 1);
	/* The server's notice that it accepts no more. */
	cr_assert_eq(k.srv_conns, 1);
	cr_assert_eq(k.srv_err, -ECANCELED);
	for (int i = 0; i < 4; i++)
		close(peer[i]);
	free(big);
	cr_assert_eq(tfd_count(), base);
}

/* ------------------------------------- connections on the wrong fds */

/*
 * Promise connections made of a pipe and of a listening socket: reads
 * and writes reject with the kernel's answer, again on every later read,
 * never hang; closing closes the fds.
 */
BACKEND_TEST(net_attack, promise_conns_on_wrong_fds)
{
	int base = tfd_count();
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise_conn *cp, *cl;
	struct rl_addr a;
	struct tsettled r, w;
	char b[8];
	int p[2], lfd;

	cr_assert_eq(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	lfd = tlisten(&a, AF_INET, 8);
	cr_assert_eq(rl_promise_conn_open(ctx, p[0], &cp), 0);
	cr_assert_eq(rl_promise_conn_open(ctx, lfd, &cl), 0);
	for (int i = 0; i < 2; i++) {
		twatch(rl_promise_conn_read(cp, b, sizeof(b), 0), &r);
		trun_within(loop, r.calls == 1, 2000);
		cr_assert_eq(r.calls, 1);
		cr_assert_eq(r.err, -ENOTSOCK, "%s", rl_strerror(r.err));
		twatch(rl_promise_conn_read(cl, b, sizeof(b), 0), &r);
		trun_within(loop, r.calls == 1, 2000);
		cr_assert_eq(r.calls, 1);
		cr_assert_eq(r.err, -ENOTCONN, "%s", rl_strerror(r.err));
	}
	twatch(rl_promise_conn_write(cp, "x", 1), &w);
	trun_within(loop, w.calls == 1, 2000);
	cr_assert_eq(w.err, -ENOTSOCK, "%s", rl_strerror(w.err));
	twatch(rl_promise_conn_write(cl, "x", 1), &w);
	trun_within(loop, w.calls == 1, 2000);
	cr_assert_lt(w.err, 0);
	cr_assert_eq(rl_promise_conn_close(cp), 0);
	cr_assert_eq(rl_promise_conn_close(cl), 0);
	close(p[1]);
	trun(loop);
	tend(loop, ctx);
	cr_assert_eq(tfd_count(), base);
}

/* --------------------------------- callback idle timeout and pauses */

struct cbt {
	rl_cb_conn *c;
	int data, ends;
	int end_err;
};

static void cbt_data(int err, const void *data, size_t len, void *arg)
{
	struct cbt *k = arg;

	(void)data;
	if (err < 0 || !len) {
		k->ends++;
		k->end_err = err;
		return;
	}
	k->data++;
}

/*
 * An idle timeout counts only while reading: a connection paused for
 * three times longer than it does not time out; resumed, it gets its data; then,
 * idle while reading, it ends with -ETIMEDOUT, once.
 */
BACKEND_TEST(net_attack, cb_idle_timeout_not_while_paused)
{
	rl_loop *loop = tloop(tp);
	rl_cb_ctx *cbs;
	/* Long enough for a loaded machine, and for Valgrind, which runs
	 * the loop's first turns slowly enough to miss a short timeout
	 * with the data already there. */
	uint64_t ms = getenv("RL_VALGRIND") ? 1000 : 200;
	struct cbt k;
	int sfd, peer;

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	memset(&k, 0, sizeof(k));
	tpair(AF_INET, &sfd, &peer);
	cr_assert_eq(rl_cb_net_wrap(cbs, sfd, &k.c), 0);
	cr_assert_eq(rl_cb_net_set_timeout(k.c, ms), 0);
	cr_assert_eq(rl_cb_net_read_start(k.c, cbt_data, &k), 0);
	cr_assert_eq(write(peer, "a", 1), 1);
	trun_until(loop, k.data == 1);
	cr_assert_eq(rl_cb_net_read_stop(k.c), 0);
	trun_for(loop, 3 * ms);
	cr_assert_eq(k.ends, 0, "timed out while paused: %s",
		     rl_strerror(k.end_err));
	cr_assert_eq(write(peer, "b", 1), 1);
	cr_assert_eq(rl_cb_net_read_start(k.c, cbt_data, &k), 0);
	trun_until(loop, k.data == 2);
	trun_until(loop, k.ends == 1);
	cr_assert_eq(k.end_err, -ETIMEDOUT, "%s", rl_strerror(k.end_err));
	trun_for(loop, 20);
	cr_assert_eq(k.ends, 1);
	cr_assert_eq(k.data, 2);
	cr_assert_eq(rl_cb_net_close(k.c, NULL, NULL), 0);
	trun(loop);
	close(peer);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}

/* ---------------------------- the handle inside the close's callback */

struct cbd {
	rl_cb_conn *c;
	rl_cb_server *srv;
	void *held;
	int data, closed, srv_closed;
	int release_ret, fd_ret, close_ret, srv_fd_ret;
};

static void cbd_closed(int err, int64_t value, void *arg)
{
	struct cbd *k = arg;

	(void)err;
	(void)value;
	/* callback.h: the handle is invalid after this callback, so it is
	 * still valid in it: a buffer held in a data callback goes back
	 * through it here. */
	k->release_ret = rl_cb_net_release(k->c, k->held);
	k->fd_ret = rl_cb_net_fd(k->c);
	k->close_ret = rl_cb_net_close(k->c, NULL, NULL);
	k->closed++;
}

static void cbd_data(int err, const void *data, size_t len, void *arg)
{
	struct cbd *k = arg;

	(void)data;
	if (err < 0 || !len || k->data++)
		return;
	k->held = rl_cb_net_hold(k->c);
	cr_assert_not_null(k->held);
	cr_assert_eq(rl_cb_net_close(k->c, cbd_closed, k), 0);
}

static void cbd_srv_closed(int err, int64_t value, void *arg)
{
	struct cbd *k = arg;

	(void)err;
	(void)value;
	k->srv_fd_ret = rl_cb_net_server_fd(k->srv);
	k->srv_closed++;
}

static void cbd_conn(int err, rl_cb_conn *conn, void *arg)
{
	(void)err;
	(void)conn;
	(void)arg;
}

/*
 * The handle inside the close's done callback: callback.h says it is
 * invalid after that callback (and the server's close says done runs,
 * then the server is freed). Before the fix both were freed before done
 * ran, so giving back a held buffer through the connection there, or
 * asking the server its fd, read freed memory (ASan: heap-use-after-free
 * in rl_cb_net_release / rl_cb_net_server_fd; the plain build read stale
 * memory and passed).
 */
BACKEND_TEST(net_attack, cb_handle_valid_inside_its_close_callback)
{
	rl_loop *loop = tloop(tp);
	rl_cb_ctx *cbs;
	struct rl_addr a;
	struct cbd k;
	int sfd, peer, lfd;

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	memset(&k, 0, sizeof(k));
	tpair(AF_INET, &sfd, &peer);
	cr_assert_eq(rl_cb_net_wrap(cbs, sfd, &k.c), 0);
	cr_assert_eq(write(peer, "data", 4), 4);
	cr_assert_eq(rl_cb_net_read_start(k.c, cbd_data, &k), 0);
	trun_until(loop, k.closed == 1);
	cr_assert_eq(k.release_ret, 0);
	cr_assert_eq(k.fd_ret, sfd);
	cr_assert_eq(k.close_ret, -EALREADY);
	taddr(&a, AF_INET);
	cr_assert_eq(rl_cb_net_listen(cbs, &a, 8, 0, cbd_conn, &k, &k.srv), 0);
	lfd = rl_cb_net_server_fd(k.srv);
	cr_assert_eq(rl_cb_net_server_close(k.srv, cbd_srv_closed, &k), 0);
	trun_until(loop, k.srv_closed == 1);
	cr_assert_eq(k.srv_fd_ret, lfd);
	trun(loop);
	close(peer);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}

/* ------------------------------------------ timeouts past the limit */

/*
 * Every call that takes a timeout refuses one past RL_TIMEOUT_MAX_MS
 * with -EINVAL before it starts anything (ringloop.h): no byte taken or
 * sent, no connection accepted. Each call is made where, before the fix,
 * it would have done its work: data waiting, a connection in the backlog,
 * room to send. Before: rl_coro_net_* and rl_coro_conn_write() ran
 * without a timeout (the deadline's -EINVAL was ignored),
 * rl_coro_conn_read() and rl_promise_conn_read() returned queued data
 * (the check came only when parking), rl_promise_timeout() settled as p
 * did, and rl_cb_net_set_timeout() said 0.
 */
#define TOO_LONG (RL_TIMEOUT_MAX_MS + 1)

struct tl {
	int lfd, s, peer;
	struct rl_addr addr;
	int64_t r[16];
	int done;
};

static int64_t tl_body(void *arg)
{
	struct tl *k = arg;
	char buf[8] = { 0 };
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	rl_coro_conn *c;
	int fd;

	k->r[0] = rl_coro_net_accept(k->lfd, TOO_LONG);
	k->r[1] = rl_coro_net_recv(k->s, buf, sizeof(buf), TOO_LONG);
	k->r[2] = rl_coro_net_recvmsg(k->s, &msg, TOO_LONG);
	k->r[3] = rl_coro_net_send(k->s, "x", 1, TOO_LONG);
	k->r[4] = rl_coro_net_sendmsg(k->s, &msg, TOO_LONG);
	k->r[5] = rl_coro_net_connect(&k->addr, 0, TOO_LONG);
	k->r[6] = rl_coro_sleep(TOO_LONG);
	cr_assert_eq(rl_coro_conn_open(k->s, &c), 0);
	/* Queue what the peer sent: a read with the longest timeout takes
	 * one byte, the rest waits in the connection. */
	k->r[7] = rl_coro_conn_read(c, buf, 1, RL_TIMEOUT_MAX_MS);
	k->r[8] = rl_coro_conn_read(c, buf, sizeof(buf), TOO_LONG);
	k->r[9] = rl_coro_conn_write(c, "x", 1, TOO_LONG);
	k->r[10] = (int64_t)rl_coro_conn_buffered(c);
	cr_assert_eq(rl_coro_conn_close(c), 0);
	/* The longest timeout is a timeout, not an error. */
	fd = rl_coro_net_accept(k->lfd, RL_TIMEOUT_MAX_MS);
	k->r[11] = fd;
	if (fd >= 0)
		close(fd);
	k->done++;
	return 0;
}

BACKEND_TEST(net_attack, coro_timeouts_past_the_limit_are_einval)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	struct tl k;
	char b[16];
	int cl;

	memset(&k, 0, sizeof(k));
	k.lfd = tlisten(&k.addr, AF_INET, 8);
	cl = tconnect(&k.addr);
	tpair(AF_INET, &k.s, &k.peer);
	cr_assert_eq(write(k.peer, "hello", 5), 5);
	cr_assert_eq(rl_coro_spawn(sched, NULL, tl_body, &k, NULL), 0);
	trun_until(loop, k.done == 1);
	for (int i = 0; i <= 6; i++)
		cr_assert_eq(k.r[i], -EINVAL, "call %d: %lld", i,
			     (long long)k.r[i]);
	cr_assert_eq(k.r[7], 1);
	cr_assert_eq(k.r[8], -EINVAL, "%lld", (long long)k.r[8]);
	cr_assert_eq(k.r[9], -EINVAL, "%lld", (long long)k.r[9]);
	cr_assert_eq(k.r[10], 4, "the refused read took bytes");
	/* The connection in the backlog was left for the last accept. */
	cr_assert_geq(k.r[11], 0, "%s", rl_strerror((int)k.r[11]));
	close(cl);
	close(k.lfd);
	trun(loop);
	/* Nothing was sent by the refused sends and writes: the peer reads
	 * the end (the connection closed its socket) and no byte. */
	{
		struct timeval tv = { 2, 0 };

		cr_assert_eq(setsockopt(k.peer, SOL_SOCKET, SO_RCVTIMEO, &tv,
					sizeof(tv)),
			     0);
		cr_assert_eq(recv(k.peer, b, sizeof(b), 0), 0);
	}
	close(k.peer);
	tsched_close(sched);
	tclose(loop);
}

BACKEND_TEST(net_attack, promise_timeouts_past_the_limit_are_einval)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct tsettled t[6];
	struct rl_addr a;
	rl_promise_conn *c;
	rl_promise *sleep;
	char buf[8];
	int lfd, sfd, peer;

	lfd = tlisten(&a, AF_INET, 8);
	tpair(AF_INET, &sfd, &peer);
	cr_assert_eq(write(peer, "hello", 5), 5);
	cr_assert_eq(rl_promise_conn_open(ctx, sfd, &c), 0);
	twatch(rl_promise_conn_read(c, buf, 1, RL_TIMEOUT_MAX_MS), &t[0]);
	trun_until(loop, t[0].calls == 1);
	cr_assert_eq(t[0].err, 0);
	cr_assert_eq(t[0].v.i, 1);
	trun_until(loop, rl_promise_conn_buffered(c) == 4);
	twatch(rl_promise_conn_read(c, buf, sizeof(buf), TOO_LONG), &t[1]);
	twatch(rl_promise_net_connect(ctx, &a, 0, TOO_LONG), &t[2]);
	twatch(rl_promise_sleep(ctx, TOO_LONG), &t[3]);
	/* A timeout of a promise that would fulfil: refused, not raced. */
	sleep = rl_promise_sleep(ctx, 1);
	twatch(rl_promise_timeout(sleep, TOO_LONG), &t[4]);
	twatch(rl_promise_timeout(rl_promise_sleep(ctx, 1), RL_TIMEOUT_MAX_MS),
	       &t[5]);
	trun_until(loop, t[1].calls + t[2].calls + t[3].calls + t[4].calls +
					 t[5].calls ==
				 5);
	for (int i = 1; i <= 4; i++)
		cr_assert_eq(t[i].err, -EINVAL, "call %d: %s", i,
			     rl_strerror(t[i].err));
	cr_assert_eq(t[5].err, 0, "%s", rl_strerror(t[5].err));
	cr_assert_eq(rl_promise_conn_buffered(c), 4,
		     "the refused read took bytes");
	cr_assert_eq(rl_promise_conn_close(c), 0);
	close(peer);
	close(lfd);
	trun(loop);
	tend(loop, ctx);
}

static void tl_conn(int err, rl_cb_conn *c, void *arg)
{
	(void)err;
	(void)c;
	(*(int *)arg)++;
}

BACKEND_TEST(net_attack, cb_timeouts_past_the_limit_are_einval)
{
	rl_loop *loop = tloop(tp);
	rl_cb_ctx *cbs;
	rl_cb_conn *c;
	struct rl_addr a;
	rl_timer timer;
	rl_req req;
	struct tseen seen = { 0, 0 };
	char buf[8];
	int calls = 0, lfd, sfd, peer;

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	lfd = tlisten(&a, AF_INET, 8);
	tpair(AF_INET, &sfd, &peer);
	cr_assert_eq(rl_cb_net_wrap(cbs, sfd, &c), 0);
	cr_assert_eq(rl_cb_net_set_timeout(c, TOO_LONG), -EINVAL);
	cr_assert_eq(rl_cb_net_set_timeout(c, RL_TIMEOUT_MAX_MS), 0);
	cr_assert_eq(rl_cb_net_connect(cbs, &a, 0, TOO_LONG, tl_conn, &calls),
		     -EINVAL);
	/* The loop's own calls, for the record. */
	rl_timer_init(&timer);
	cr_assert_eq(rl_timer_start(loop, &timer, TOO_LONG, 0, tguard_cb),
		     -EINVAL);
	rl_req_init(&req);
	cr_assert_eq(rl_net_connect(loop, &req, &a, 0, TOO_LONG, tsink_cb),
		     -EINVAL);
	req.data = &seen;
	cr_assert_eq(rl_net_recv(loop, &req, peer, buf, sizeof(buf), tseen_cb),
		     0);
	cr_assert_eq(rl_req_deadline(loop, &req, &timer, TOO_LONG), -EINVAL);
	cr_assert_eq(rl_cancel(loop, &req), 0);
	trun_until(loop, seen.calls == 1);
	cr_assert_eq(seen.result, -ECANCELED);
	cr_assert_eq(rl_cb_net_close(c, NULL, NULL), 0);
	trun(loop);
	cr_assert_eq(calls, 0);
	close(peer);
	close(lfd);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}

/* ------------------------------------ the item queue out of memory */

/*
 * Out of memory, with real means: the address space is limited to what
 * is mapped now plus 1 MiB, and the heap is filled to that limit with
 * small blocks, so that from then on every malloc fails (glibc finds no
 * free chunk, and neither brk nor mmap can grow). The stack is grown
 * first, since it could not grow past the limit either. Not under the
 * sanitizers (their allocator aborts instead of failing) nor Valgrind
 * (its own allocator and address space): the tests skip there. While it
 * lasts nothing may allocate: no cr_assert (its failure message would),
 * and callbacks only count.
 */
#define TMEM_BLOCKS (1u << 20)

struct tmem {
	void **blocks;
	size_t n;
	struct rlimit old;
};

static bool tmem_unsupported(void)
{
#ifdef RL_SAN
	return true;
#else
	return getenv("RL_VALGRIND") != NULL;
#endif
}

static __attribute__((noinline)) void tmem_grow_stack(void)
{
	volatile char deep[512 << 10];

	memset((char *)deep, 1, sizeof(deep));
}

static void tmem_exhaust(struct tmem *m)
{
	char buf[128];
	struct rlimit lim;
	ssize_t r;
	int fd;

	tmem_grow_stack();
	m->blocks = malloc(TMEM_BLOCKS * sizeof(*m->blocks));
	cr_assert_not_null(m->blocks);
	m->n = 0;
	fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	cr_assert_gt(r, 0);
	buf[r] = '\0';
	cr_assert_eq(getrlimit(RLIMIT_AS, &m->old), 0);
	lim = m->old;
	lim.rlim_cur =
		(rlim_t)strtoul(buf, NULL, 10) * (rlim_t)sysconf(_SC_PAGESIZE) +
		(1u << 20);
	cr_assert_eq(setrlimit(RLIMIT_AS, &lim), 0);
	while (m->n < TMEM_BLOCKS && (m->blocks[m->n] = malloc(64)))
		m->n++;
	while (m->n < TMEM_BLOCKS && (m->blocks[m->n] = malloc(16)))
		m->n++;
}

/* Whether malloc still fails (checked before tmem_restore()). The
 * pointer goes through a volatile: clang removes a malloc whose block is
 * only freed, and takes it as successful. */
static void *volatile tmem_probe;

static bool tmem_still_exhausted(void)
{
	bool failed;

	tmem_probe = malloc(4096);
	failed = tmem_probe == NULL;
	free(tmem_probe);
	tmem_probe = NULL;
	return failed;
}

static void tmem_restore(struct tmem *m)
{
	cr_assert_eq(setrlimit(RLIMIT_AS, &m->old), 0);
	while (m->n)
		free(m->blocks[--m->n]);
	free(m->blocks);
	m->blocks = NULL;
}

/* Runs the loop until cond or ms pass, allocating nothing itself: its
 * guard timer (which wakes the loop when nothing else comes) is started
 * by the caller before malloc fails, and stopped after. */
#define trun_bare(loop, cond, ms)                            \
	do {                                                 \
		uint64_t end_ = tnow_ms() + (ms);            \
		while (!(cond) && tnow_ms() < end_)          \
			if (rl_run((loop), RL_RUN_ONCE) < 0) \
				break;                       \
	} while (0)

static void tguard_start(rl_loop *loop, rl_timer *guard)
{
	rl_timer_init(guard);
	cr_assert_eq(rl_timer_start(loop, guard, 10, 10, tguard_cb), 0);
}

/* A receive stream that checks the pattern and only counts. */
struct mrx {
	rl_req req;
	size_t bytes;
	int bad, finals;
	int64_t final;
};

static void mrx_cb(rl_req *req)
{
	struct mrx *s = req->data;
	const unsigned char *p = req->buf;

	if (!rl_req_more(req)) {
		s->finals++;
		s->final = req->result;
		return;
	}
	if (s->finals)
		s->bad++;
	for (size_t i = 0; i < req->len; i++) {
		if (p[i] != tpat(s->bytes + i)) {
			s->bad++;
			break;
		}
	}
	s->bytes += req->len;
}

/* Whether each stream got each bytes or ended. */
static bool mrx_settled(const struct mrx *rx, int n, size_t each)
{
	for (int i = 0; i < n; i++)
		if (rx[i].bytes < each && !rx[i].finals)
			return false;
	return true;
}

static int mrx_finals(const struct mrx *rx, int n)
{
	int f = 0;

	for (int i = 0; i < n; i++)
		f += rx[i].finals;
	return f;
}

/*
 * Sixteen receive streams get 32 KiB each in one go: 128 items of 4 KiB
 * in one wait, more than the 64 the item queue had at first. With malloc
 * failing, every byte still arrives, in order, and no stream ends. Before
 * the fix the queue grew by malloc when a burst filled it, and an item
 * that found no memory was dropped (its buffer recycled) while the
 * stream went on: a gap in the data (bytes short, the pattern broken).
 */
BACKEND_TEST(net_attack, recv_streams_lose_nothing_when_malloc_fails)
{
	enum { CONNS = 16, EACH = 32 << 10 };
	rl_loop *loop;
	static unsigned char msg[EACH];
	struct mrx rx[CONNS];
	int s[CONNS], peer[CONNS];
	ssize_t sent[CONNS];
	struct tmem m;
	rl_timer guard;
	bool exhausted;

	if (tmem_unsupported())
		cr_skip_test("malloc cannot be made to fail here");
	loop = tloop(tp);
	tpat_fill(msg, 0, EACH);
	for (int i = 0; i < CONNS; i++) {
		tpair(AF_INET, &s[i], &peer[i]);
		memset(&rx[i], 0, sizeof(rx[i]));
		rx[i].req.data = &rx[i];
		cr_assert_eq(rl_net_recv_stream(loop, &rx[i].req, s[i], mrx_cb),
			     0);
	}
	/* The streams wait for data, armed or watched, before malloc
	 * fails. */
	trun_for(loop, 20);
	tguard_start(loop, &guard);
	tmem_exhaust(&m);
	for (int i = 0; i < CONNS; i++)
		sent[i] = send(peer[i], msg, EACH, MSG_DONTWAIT);
	trun_bare(loop, mrx_settled(rx, CONNS, EACH), 5000);
	exhausted = tmem_still_exhausted();
	tmem_restore(&m);
	rl_timer_stop(loop, &guard);
	cr_assert(exhausted, "malloc did not fail: the test proves nothing");
	for (int i = 0; i < CONNS; i++) {
		cr_assert_eq(sent[i], EACH);
		cr_assert_eq(rx[i].finals, 0, "stream %d ended: %s", i,
			     rl_strerror((int)rx[i].final));
		cr_assert_eq(rx[i].bad, 0, "stream %d: a gap in the data", i);
		cr_assert_eq(rx[i].bytes, (size_t)EACH, "stream %d: %zu bytes",
			     i, rx[i].bytes);
	}
	for (int i = 0; i < CONNS; i++)
		cr_assert_eq(rl_cancel(loop, &rx[i].req), 0);
	trun_until(loop, mrx_finals(rx, CONNS) == CONNS);
	for (int i = 0; i < CONNS; i++) {
		cr_assert_eq(rx[i].final, -ECANCELED);
		close(s[i]);
		close(peer[i]);
	}
	tclose(loop);
}

/* An accept stream that only counts, keeping the fds it gets. */
#define MACC_MAX 256
struct macc {
	rl_req req;
	int fds[MACC_MAX];
	int n, finals, after_final, overflow;
	int64_t final;
};

static void macc_cb(rl_req *req)
{
	struct macc *a = req->data;

	if (!rl_req_more(req)) {
		a->finals++;
		a->final = req->result;
		return;
	}
	if (a->finals)
		a->after_final++;
	if (a->n < MACC_MAX)
		a->fds[a->n++] = (int)req->result;
	else
		a->overflow++;
}

/*
 * Two accept streams, each with 100 connections in its backlog, when
 * malloc fails: more connections in one wait than the item queue holds
 * (64), so it would have to grow. The connection that finds no room is
 * closed and its stream ends with -ENOMEM, after the connections queued
 * before it and with none after; the other connections stay in the
 * backlog (epoll) or are closed (io_uring posted them before its cancel
 * took). A stream that did not fail goes on and gets all of its
 * connections once memory is back. Before the fix a connection that
 * found no memory was closed and the stream went on, so a server lost
 * connections without a word.
 */
BACKEND_TEST(net_attack, accept_stream_ends_with_enomem_when_malloc_fails)
{
	enum { LISTENERS = 2, CONNS = 100 };
	rl_loop *loop;
	struct macc acc[LISTENERS];
	struct rl_addr a[LISTENERS];
	int lfd[LISTENERS], cl[LISTENERS][CONNS], failed = 0;
	int cerr = 0;
	struct tmem m;
	rl_timer guard;
	bool exhausted;

	if (tmem_unsupported())
		cr_skip_test("malloc cannot be made to fail here");
	loop = tloop(tp);
	for (int l = 0; l < LISTENERS; l++) {
		lfd[l] = tlisten(&a[l], AF_INET, 256);
		memset(&acc[l], 0, sizeof(acc[l]));
		acc[l].req.data = &acc[l];
		cr_assert_eq(rl_net_accept(loop, &acc[l].req, lfd[l], macc_cb),
			     0);
	}
	trun_for(loop, 20);
	tguard_start(loop, &guard);
	tmem_exhaust(&m);
	for (int l = 0; l < LISTENERS; l++) {
		for (int i = 0; i < CONNS; i++) {
			cl[l][i] =
				socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (cl[l][i] < 0 ||
			    connect(cl[l][i], &a[l].sa, a[l].len) < 0)
				cerr++;
		}
	}
	trun_bare(loop,
		  (acc[0].finals || acc[0].n == CONNS) &&
			  (acc[1].finals || acc[1].n == CONNS),
		  5000);
	exhausted = tmem_still_exhausted();
	tmem_restore(&m);
	rl_timer_stop(loop, &guard);
	cr_assert(exhausted, "malloc did not fail: the test proves nothing");
	cr_assert_eq(cerr, 0);
	for (int l = 0; l < LISTENERS; l++) {
		cr_assert_eq(acc[l].overflow, 0);
		cr_assert_eq(acc[l].after_final, 0);
		if (acc[l].finals) {
			cr_assert_eq(acc[l].final, -ENOMEM, "%s",
				     rl_strerror((int)acc[l].final));
			cr_assert_lt(acc[l].n, CONNS);
			failed++;
		}
	}
	cr_assert_geq(failed, 1, "no stream said -ENOMEM: connections lost");
	/* With memory back, a stream that goes on gets all of its own. */
	for (int l = 0; l < LISTENERS; l++) {
		if (!acc[l].finals) {
			trun_until(loop, acc[l].n == CONNS);
			cr_assert_eq(rl_cancel(loop, &acc[l].req), 0);
			trun_until(loop, acc[l].finals == 1);
			cr_assert_eq(acc[l].final, -ECANCELED);
		}
	}
	trun(loop);
	for (int l = 0; l < LISTENERS; l++) {
		for (int i = 0; i < acc[l].n; i++)
			close(acc[l].fds[i]);
		for (int i = 0; i < CONNS; i++)
			close(cl[l][i]);
		close(lfd[l]);
	}
	tclose(loop);
}

/* A style's reader while malloc fails: it only counts, and checks the
 * pattern. */
#define MSTYLE_EACH (32 << 10)

struct mstyle {
	rl_cb_conn *cb;
	rl_coro_conn *co;
	int s, peer;
	size_t bytes;
	int bad, ends, returned;
	int64_t err;
	unsigned char buf[MSTYLE_EACH];
};

static void mstyle_got(struct mstyle *k, const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		if (p[i] != tpat(k->bytes + i)) {
			k->bad++;
			break;
		}
	}
	k->bytes += len;
}

static void mstyle_cb_data(int err, const void *data, size_t len, void *arg)
{
	struct mstyle *k = arg;

	if (err < 0 || !len) {
		k->ends++;
		k->err = err;
		return;
	}
	mstyle_got(k, data, len);
}

static int64_t mstyle_coro(void *arg)
{
	struct mstyle *k = arg;
	int64_t n;

	while (k->bytes < MSTYLE_EACH) {
		n = rl_coro_conn_read(k->co, k->buf, sizeof(k->buf), 0);
		if (n <= 0) {
			k->ends++;
			k->err = n;
			break;
		}
		mstyle_got(k, k->buf, (size_t)n);
	}
	k->returned++;
	return 0;
}

static int64_t mstyle_open(void *arg)
{
	struct mstyle *k = arg;

	cr_assert_eq(rl_coro_conn_open(k->s, &k->co), 0);
	return 0;
}

static bool mstyle_settled(const struct mstyle *k, int n)
{
	for (int i = 0; i < n; i++)
		if (k[i].bytes < MSTYLE_EACH && !k[i].ends)
			return false;
	return true;
}

/*
 * The same burst through the styles' connections: eight callback
 * connections reading (their data callbacks run from the items) and
 * eight coroutines parked in rl_coro_conn_read(), 32 KiB each: 128 items
 * in one wait. With malloc failing every byte still comes, in order, and
 * no reader sees an end or an error. Before the fix the loop dropped the
 * items that found no memory: the readers saw a gap.
 */
BACKEND_TEST(net_attack, conn_readers_lose_nothing_when_malloc_fails)
{
	enum { PER = 8 };
	static struct mstyle cb[PER], co[PER];
	static unsigned char msg[MSTYLE_EACH];
	ssize_t sent[2 * PER];
	rl_loop *loop;
	rl_cb_ctx *cbs;
	rl_coro_ctx *sched;
	struct tmem m;
	rl_timer guard;
	bool exhausted;

	if (tmem_unsupported())
		cr_skip_test("malloc cannot be made to fail here");
	loop = tloop(tp);
	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	sched = tsched(loop);
	tpat_fill(msg, 0, MSTYLE_EACH);
	memset(cb, 0, sizeof(cb));
	memset(co, 0, sizeof(co));
	for (int i = 0; i < PER; i++) {
		tpair(AF_INET, &cb[i].s, &cb[i].peer);
		cr_assert_eq(rl_cb_net_wrap(cbs, cb[i].s, &cb[i].cb), 0);
		cr_assert_eq(
			rl_cb_net_read_start(cb[i].cb, mstyle_cb_data, &cb[i]),
			0);
		tpair(AF_INET, &co[i].s, &co[i].peer);
		cr_assert_eq(
			rl_coro_spawn(sched, NULL, mstyle_open, &co[i], NULL),
			0);
		trun_until(loop, co[i].co != NULL);
		cr_assert_eq(
			rl_coro_spawn(sched, NULL, mstyle_coro, &co[i], NULL),
			0);
	}
	/* Every reader waits, its stream armed or watched. */
	trun_for(loop, 20);
	tguard_start(loop, &guard);
	tmem_exhaust(&m);
	for (int i = 0; i < PER; i++) {
		sent[i] = send(cb[i].peer, msg, MSTYLE_EACH, MSG_DONTWAIT);
		sent[PER + i] =
			send(co[i].peer, msg, MSTYLE_EACH, MSG_DONTWAIT);
	}
	trun_bare(loop, mstyle_settled(cb, PER) && mstyle_settled(co, PER),
		  5000);
	exhausted = tmem_still_exhausted();
	tmem_restore(&m);
	rl_timer_stop(loop, &guard);
	cr_assert(exhausted, "malloc did not fail: the test proves nothing");
	for (int i = 0; i < 2 * PER; i++)
		cr_assert_eq(sent[i], MSTYLE_EACH);
	for (int i = 0; i < PER; i++) {
		cr_assert_eq(cb[i].ends, 0, "callback %d: %s", i,
			     rl_strerror((int)cb[i].err));
		cr_assert_eq(co[i].ends, 0, "coroutine %d: %s", i,
			     rl_strerror((int)co[i].err));
		cr_assert_eq(cb[i].bad + co[i].bad, 0, "%d: a gap in the data",
			     i);
		cr_assert_eq(cb[i].bytes, (size_t)MSTYLE_EACH, "callback %d",
			     i);
		cr_assert_eq(co[i].bytes, (size_t)MSTYLE_EACH, "coroutine %d",
			     i);
		cr_assert_eq(co[i].returned, 1);
	}
	for (int i = 0; i < PER; i++) {
		cr_assert_eq(rl_cb_net_close(cb[i].cb, NULL, NULL), 0);
		cr_assert_eq(rl_coro_conn_close(co[i].co), 0);
	}
	trun(loop);
	for (int i = 0; i < PER; i++) {
		close(cb[i].peer);
		close(co[i].peer);
	}
	tsched_close(sched);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}
