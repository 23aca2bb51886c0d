/* SPDX-License-Identifier: MIT */
/*
 * test_coro_conn.c - coroutine connections (rl_coro_conn_*): reads from
 * the receive stream through its queue, on every backend configuration:
 * echo, reads smaller than a stream item, a timeout that loses nothing,
 * a peer reset and a half-close after data, a close while a read and a
 * write are suspended, the loop closing with connections open, and a
 * peer that sends far more than the reader reads.
 */
#include <fcntl.h>
#include <stdint.h>

#include "coro_helpers.h"
#include "net_helpers.h"

/* ------------------------------------------------------------ echo */

struct echo {
	struct rl_addr a;
	int lfd;
	int served, client_done;
	int64_t server_end, client_end;
	size_t server_bytes;
};

static int64_t echo_server(void *arg)
{
	struct echo *e = arg;
	rl_coro_conn *c;
	char buf[1000]; /* smaller than a loop buffer: items split */
	int64_t n;
	int fd = rl_coro_net_accept(e->lfd, 5000);

	cr_assert_geq(fd, 0, "%s", rl_strerror(fd));
	cr_assert_eq(rl_coro_conn_open(fd, &c), 0);
	cr_assert_eq(rl_coro_conn_fd(c), fd);
	while ((n = rl_coro_conn_read(c, buf, sizeof(buf), 5000)) > 0) {
		e->server_bytes += (size_t)n;
		cr_assert_eq(rl_coro_conn_write(c, buf, (size_t)n, 5000), n);
	}
	e->server_end = n;
	cr_assert_eq(rl_coro_conn_close(c), 0);
	e->served++;
	return 0;
}

/* Sends 256 KiB of the pattern in pieces, reads it all back while
 * sending, then ends its side and reads the end. */
static int64_t echo_client(void *arg)
{
	enum { LEN = 256 * 1024, PIECE = 12345 };
	struct echo *e = arg;
	static unsigned char msg[LEN], back[LEN];
	rl_coro_conn *c;
	size_t sent = 0, got = 0;
	int64_t n;
	int fd = rl_coro_net_connect(&e->a, RL_CONNECT_NODELAY, 5000);

	cr_assert_geq(fd, 0, "%s", rl_strerror(fd));
	cr_assert_eq(rl_coro_conn_open(fd, &c), 0);
	tpat_fill(msg, 0, LEN);
	while (got < LEN) {
		if (sent < LEN) {
			size_t k = LEN - sent < PIECE ? LEN - sent : PIECE;

			cr_assert_eq(rl_coro_conn_write(c, msg + sent, k, 5000),
				     (int64_t)k);
			sent += k;
		}
		/* Read what came, up to what was sent. */
		while (got < sent) {
			n = rl_coro_conn_read(c, back + got, sent - got, 5000);
			cr_assert_gt(n, 0, "%s", rl_strerror((int)n));
			got += (size_t)n;
		}
	}
	tpat_check(back, 0, LEN);
	cr_assert_eq(rl_coro_conn_shutdown(c), 0);
	e->client_end = rl_coro_conn_read(c, back, LEN, 5000);
	cr_assert_eq(rl_coro_conn_close(c), 0);
	e->client_done++;
	return 0;
}

BACKEND_TEST(coro_conn, echo_every_family)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	struct echo e;

	for (int f = 0; f < TNET_FAMILIES; f++) {
		memset(&e, 0, sizeof(e));
		e.lfd = tlisten(&e.a, tnet_family[f], 8);
		e.server_end = e.client_end = 1;
		cr_assert_eq(rl_coro_spawn(sched, NULL, echo_server, &e, NULL),
			     0);
		cr_assert_eq(rl_coro_spawn(sched, NULL, echo_client, &e, NULL),
			     0);
		trun(loop);
		cr_assert_eq(e.served, 1);
		cr_assert_eq(e.client_done, 1);
		cr_assert_eq(e.server_bytes, 256 * 1024);
		cr_assert_eq(e.server_end, 0);
		cr_assert_eq(e.client_end, 0);
		close(e.lfd);
	}
	tsched_close(sched);
	tclose(loop);
}

/* --------------------------------------------------- reads and ends */

struct rd {
	int s, peer;
	rl_coro_conn *c;
	int64_t r[8];
	size_t buffered[4];
	unsigned char buf[1000];
	bool go; /* the test has done its part */
	int done;
};

/* Waits (bounded) until the test sets rd->go. */
static void wait_go(struct rd *d)
{
	for (int i = 0; i < 4000 && !d->go; i++)
		rl_coro_sleep(5);
	cr_assert(d->go);
}

/* 1000 bytes wait in the socket; reads of 7 take them, the first one
 * leaves the rest of the stream's item queued. */
static int64_t small_reads_body(void *arg)
{
	struct rd *d = arg;
	size_t got = 0;
	int64_t n;

	cr_assert_eq(rl_coro_conn_open(d->s, &d->c), 0);
	cr_assert_eq(rl_coro_conn_buffered(d->c), 0);
	n = rl_coro_conn_read(d->c, d->buf, 7, 5000);
	cr_assert_eq(n, 7);
	d->buffered[0] = rl_coro_conn_buffered(d->c);
	got = 7;
	while (got < 1000) {
		n = rl_coro_conn_read(d->c, d->buf + got,
				      1000 - got < 7 ? 1000 - got : 7, 5000);
		cr_assert_gt(n, 0, "%s", rl_strerror((int)n));
		got += (size_t)n;
		d->r[0]++;
	}
	tpat_check(d->buf, 0, 1000);
	d->buffered[1] = rl_coro_conn_buffered(d->c);
	d->r[1] = rl_coro_conn_read(d->c, d->buf, 1, 5000); /* the end */
	d->r[2] = rl_coro_conn_read(d->c, d->buf, 1, 5000); /* again */
	rl_coro_conn_close(d->c);
	d->done++;
	return 0;
}

BACKEND_TEST(coro_conn, reads_smaller_than_an_item)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	unsigned char msg[1000];
	struct rd d;

	memset(&d, 0, sizeof(d));
	tpair(AF_INET, &d.s, &d.peer);
	tpat_fill(msg, 0, sizeof(msg));
	cr_assert_eq(write(d.peer, msg, sizeof(msg)), (ssize_t)sizeof(msg));
	cr_assert_eq(shutdown(d.peer, SHUT_WR), 0);
	cr_assert_eq(rl_coro_spawn(sched, NULL, small_reads_body, &d, NULL), 0);
	trun(loop);
	cr_assert_eq(d.done, 1);
	/* One item of 1000 bytes (the data was there before the stream
	 * started): 993 stayed queued after the first read. */
	cr_assert_eq(d.buffered[0], 993);
	cr_assert_eq(d.buffered[1], 0);
	cr_assert_eq(d.r[0], 142); /* 993 / 7, rounded up */
	cr_assert_eq(d.r[1], 0);
	cr_assert_eq(d.r[2], 0);
	close(d.peer);
	tsched_close(sched);
	tclose(loop);
}

/* A read times out; the stream keeps running; the bytes that come next
 * wait for the next read, which takes them without waiting. */
static int64_t timeout_body(void *arg)
{
	struct rd *d = arg;
	uint64_t t0;

	cr_assert_eq(rl_coro_conn_open(d->s, &d->c), 0);
	t0 = rl_now_ms(rl_coro_loop());
	d->r[0] = rl_coro_conn_read(d->c, d->buf, sizeof(d->buf), 50);
	d->r[1] = (int64_t)(tnow_ms() - t0);
	wait_go(d);
	for (int i = 0; i < 4000 && rl_coro_conn_buffered(d->c) < 5; i++)
		rl_coro_sleep(5);
	d->buffered[0] = rl_coro_conn_buffered(d->c);
	d->r[2] = rl_coro_conn_read(d->c, d->buf, sizeof(d->buf), 5000);
	d->r[3] = rl_coro_conn_read(d->c, d->buf + 5, sizeof(d->buf) - 5, 30);
	rl_coro_conn_close(d->c);
	d->done++;
	return 0;
}

BACKEND_TEST(coro_conn, timeout_then_the_next_read_gets_the_bytes)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	struct rd d;

	memset(&d, 0, sizeof(d));
	tpair(AF_INET, &d.s, &d.peer);
	cr_assert_eq(rl_coro_spawn(sched, NULL, timeout_body, &d, NULL), 0);
	trun_until(loop, d.r[0] != 0);
	cr_assert_eq(d.r[0], -ETIMEDOUT);
	cr_assert_geq(d.r[1], 40);
	cr_assert_eq(write(d.peer, "hello", 5), 5);
	d.go = true;
	trun(loop);
	cr_assert_eq(d.done, 1);
	cr_assert_eq(d.buffered[0], 5);
	cr_assert_eq(d.r[2], 5);
	cr_assert_eq(memcmp(d.buf, "hello", 5), 0);
	cr_assert_eq(d.r[3], -ETIMEDOUT);
	close(d.peer);
	tsched_close(sched);
	tclose(loop);
}

/* The peer resets the connection after sending: the data comes first,
 * then -ECONNRESET, on every later read too. */
static int64_t reset_body(void *arg)
{
	struct rd *d = arg;

	cr_assert_eq(rl_coro_conn_open(d->s, &d->c), 0);
	d->r[0] = rl_coro_conn_read(d->c, d->buf, 1, 5000);
	wait_go(d);
	d->r[1] = rl_coro_conn_read(d->c, d->buf + 1, sizeof(d->buf) - 1, 5000);
	d->r[2] = rl_coro_conn_read(d->c, d->buf, sizeof(d->buf), 5000);
	d->r[3] = rl_coro_conn_read(d->c, d->buf, sizeof(d->buf), 5000);
	d->r[4] = rl_coro_conn_write(d->c, "x", 1, 5000);
	rl_coro_conn_close(d->c);
	d->done++;
	return 0;
}

BACKEND_TEST(coro_conn, peer_reset_after_data)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	struct linger lin = { 1, 0 };
	struct rd d;

	memset(&d, 0, sizeof(d));
	tpair(AF_INET, &d.s, &d.peer);
	cr_assert_eq(write(d.peer, "abc", 3), 3);
	cr_assert_eq(rl_coro_spawn(sched, NULL, reset_body, &d, NULL), 0);
	trun_until(loop, d.r[0] != 0);
	cr_assert_eq(d.r[0], 1);
	setsockopt(d.peer, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
	close(d.peer);
	trun_for(loop, 30);
	d.go = true;
	trun(loop);
	cr_assert_eq(d.done, 1);
	cr_assert_eq(d.r[1], 2);
	cr_assert_eq(memcmp(d.buf, "abc", 3), 0);
	cr_assert_eq(d.r[2], -ECONNRESET);
	cr_assert_eq(d.r[3], -ECONNRESET);
	cr_assert(d.r[4] == -ECONNRESET || d.r[4] == -EPIPE, "%s",
		  rl_strerror((int)d.r[4]));
	tsched_close(sched);
	tclose(loop);
}

/* Half-close both ways: the peer ends its side after "xy" (read: data,
 * then 0, again 0), and the connection still writes; then the
 * connection ends its own side and the peer reads the end. */
static int64_t half_body(void *arg)
{
	struct rd *d = arg;

	cr_assert_eq(rl_coro_conn_open(d->s, &d->c), 0);
	d->r[0] = rl_coro_conn_read(d->c, d->buf, sizeof(d->buf), 5000);
	d->r[1] = rl_coro_conn_read(d->c, d->buf + 2, sizeof(d->buf), 5000);
	d->r[2] = rl_coro_conn_read(d->c, d->buf + 2, sizeof(d->buf), 5000);
	d->r[3] = rl_coro_conn_write(d->c, "back", 4, 5000);
	d->r[4] = rl_coro_conn_shutdown(d->c);
	rl_coro_conn_close(d->c);
	d->done++;
	return 0;
}

BACKEND_TEST(coro_conn, half_close)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	char buf[8];
	struct rd d;

	memset(&d, 0, sizeof(d));
	tpair(AF_UNIX, &d.s, &d.peer);
	cr_assert_eq(write(d.peer, "xy", 2), 2);
	cr_assert_eq(shutdown(d.peer, SHUT_WR), 0);
	cr_assert_eq(rl_coro_spawn(sched, NULL, half_body, &d, NULL), 0);
	trun(loop);
	cr_assert_eq(d.done, 1);
	cr_assert_eq(d.r[0], 2);
	cr_assert_eq(memcmp(d.buf, "xy", 2), 0);
	cr_assert_eq(d.r[1], 0);
	cr_assert_eq(d.r[2], 0);
	cr_assert_eq(d.r[3], 4);
	cr_assert_eq(d.r[4], 0);
	cr_assert_eq(read(d.peer, buf, sizeof(buf)), 4);
	cr_assert_eq(memcmp(buf, "back", 4), 0);
	cr_assert_eq(read(d.peer, buf, sizeof(buf)), 0);
	close(d.peer);
	tsched_close(sched);
	tclose(loop);
}

/* ---------------------------------------------------------- closing */

struct cl {
	int s, peer;
	rl_coro_conn *c;
	int64_t read_res, write_res;
	int reading, writing, returned;
	bool close_after;
};

static int64_t cl_reader(void *arg)
{
	struct cl *k = arg;
	char buf[16];

	k->reading++;
	k->read_res = rl_coro_conn_read(k->c, buf, sizeof(buf), 0);
	if (k->close_after)
		cr_assert_eq(rl_coro_conn_close(k->c), 0);
	k->returned++;
	return 0;
}

static int64_t cl_writer(void *arg)
{
	struct cl *k = arg;
	char *big = calloc(1, 16 << 20);

	k->writing++;
	k->write_res = rl_coro_conn_write(k->c, big, 16 << 20, 0);
	free(big);
	k->returned++;
	return 0;
}

static int64_t cl_open(void *arg)
{
	struct cl *k = arg;

	cr_assert_eq(rl_coro_conn_open(k->s, &k->c), 0);
	return 0;
}

/* rl_coro_conn_close() from outside any coroutine while one coroutine
 * is suspended in read and another in a write the peer never reads: both
 * return -ECANCELED, and the socket is closed (tclose() counts fds). */
BACKEND_TEST(coro_conn, close_while_suspended)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	struct cl k;

	memset(&k, 0, sizeof(k));
	tpair(AF_INET, &k.s, &k.peer);
	cr_assert_eq(rl_coro_spawn(sched, NULL, cl_open, &k, NULL), 0);
	trun(loop);
	cr_assert_not_null(k.c);
	cr_assert_eq(rl_coro_spawn(sched, NULL, cl_reader, &k, NULL), 0);
	cr_assert_eq(rl_coro_spawn(sched, NULL, cl_writer, &k, NULL), 0);
	trun_until(loop, k.reading && k.writing);
	trun_for(loop, 30);
	cr_assert_eq(k.returned, 0);
	cr_assert_eq(rl_coro_conn_close(k.c), 0);
	trun(loop);
	cr_assert_eq(k.returned, 2);
	cr_assert_eq(k.read_res, -ECANCELED);
	cr_assert(k.write_res == -ECANCELED || k.write_res == -EPIPE ||
			  k.write_res == -ECONNRESET,
		  "%s", rl_strerror((int)k.write_res));
	/* The connection closed its socket: after what the write got out,
	 * the peer sees the end. */
	{
		static char sink[65536];
		ssize_t r;

		while ((r = read(k.peer, sink, sizeof(sink))) > 0)
			;
		cr_assert_eq(r, 0);
	}
	close(k.peer);
	tsched_close(sched);
	tclose(loop);
}

/* rl_loop_close() with two connections open and a read suspended on
 * each: both reads return -ECANCELED; one coroutine closes its
 * connection, the other leaves it to the loop, which closes its socket
 * and frees it (no fd left, nothing leaked under the sanitizers). */
BACKEND_TEST(coro_conn, loop_close_with_conns_open)
{
	int base = tfd_count();
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	struct cl k[2];

	for (int i = 0; i < 2; i++) {
		memset(&k[i], 0, sizeof(k[i]));
		tpair(i ? AF_UNIX : AF_INET6, &k[i].s, &k[i].peer);
		k[i].close_after = i == 0;
		cr_assert_eq(rl_coro_spawn(sched, NULL, cl_open, &k[i], NULL),
			     0);
	}
	trun(loop);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(rl_coro_spawn(sched, NULL, cl_reader, &k[i], NULL),
			     0);
	trun_until(loop, k[0].reading && k[1].reading);
	trun_for(loop, 20);
	cr_assert_eq(rl_loop_close(loop), 0);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(k[i].returned, 1);
		cr_assert_eq(k[i].read_res, -ECANCELED);
		close(k[i].peer);
	}
	cr_assert_eq(tfd_count(), base);
}

/* -------------------------------------------------- back-pressure */

struct flood {
	int s, peer;
	rl_coro_conn *c;
	int64_t first, last;
	size_t total;
	bool started, go;
	int done;
};

static int64_t flood_body(void *arg)
{
	struct flood *f = arg;
	char *buf = malloc(65536);
	int64_t n;

	cr_assert_eq(rl_coro_conn_open(f->s, &f->c), 0);
	f->first = rl_coro_conn_read(f->c, buf, 1, 5000);
	f->total = f->first > 0 ? (size_t)f->first : 0;
	f->started = true;
	/* Stop reading while the peer sends as much as it can. */
	for (int i = 0; i < 20000 && !f->go; i++)
		rl_coro_sleep(1);
	while ((n = rl_coro_conn_read(f->c, buf, 65536, 5000)) > 0)
		f->total += (size_t)n;
	f->last = n;
	free(buf);
	rl_coro_conn_close(f->c);
	f->done++;
	return 0;
}

/*
 * A peer sends far more than the reader reads: the connection keeps a
 * few of the loop's buffers (its stream stops), never all of them, the
 * kernel holds the rest and stops the peer; once the reader reads again
 * every byte comes, in full.
 */
BACKEND_TEST(coro_conn, peer_sending_more_than_read_stays_bounded)
{
	struct rl_options opt;
	rl_loop *loop;
	rl_coro_ctx *sched;
	struct flood f;
	size_t sent, held;

	rl_options_init(&opt);
	opt.net_bufs = 256;
	opt.net_buf_size = 4096;
	loop = tloop_opts(tp, &opt);
	sched = tsched(loop);
	memset(&f, 0, sizeof(f));
	tpair(AF_INET, &f.s, &f.peer);
	fcntl(f.peer, F_SETFL, O_NONBLOCK);
	cr_assert_eq(send(f.peer, "!", 1, 0), 1);
	cr_assert_eq(rl_coro_spawn(sched, NULL, flood_body, &f, NULL), 0);
	trun_until(loop, f.started);
	sent = tflood(loop, f.peer, 64u << 20, NULL, NULL);
	cr_assert_lt(sent, 64u << 20, "the connection never stopped reading");
	held = rl_coro_conn_buffered(f.c);
	/* Without the stop the stream would take every one of the loop's
	 * 256 buffers (1 MiB) before the kernel held anything back. */
	cr_assert_lt(held, 64 * 4096, "%zu bytes held", held);
	cr_assert_gt(held, 0);
	f.go = true;
	shutdown(f.peer, SHUT_WR);
	trun(loop);
	cr_assert_eq(f.done, 1);
	cr_assert_eq(f.first, 1);
	cr_assert_eq(f.last, 0);
	cr_assert_eq(f.total, sent + 1);
	close(f.peer);
	tsched_close(sched);
	tclose(loop);
}

/* ------------------------------------------------------------ misuse */

static int64_t misuse_body(void *arg)
{
	struct rd *d = arg;
	char b;

	d->r[0] = rl_coro_conn_open(-1, &d->c);
	cr_assert_eq(rl_coro_conn_open(d->s, &d->c), 0);
	d->r[1] = rl_coro_conn_read(d->c, &b, 0, 0);
	d->r[2] = rl_coro_conn_read(NULL, &b, 1, 0);
	d->r[3] = rl_coro_conn_write(d->c, NULL, 0, 0);
	d->r[4] = rl_coro_conn_read(d->c, &b, 1, 0); /* suspends */
	d->done++;
	return 0;
}

static int64_t second_reader(void *arg)
{
	struct rd *d = arg;
	char b;

	d->r[5] = rl_coro_conn_read(d->c, &b, 1, 0);
	d->done++;
	return 0;
}

BACKEND_TEST(coro_conn, misuse)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *sched = tsched(loop);
	rl_coro_conn *c;
	char b;
	struct rd d;

	memset(&d, 0, sizeof(d));
	tpair(AF_INET, &d.s, &d.peer);
	cr_assert_eq(rl_coro_conn_open(d.s, &c), -EPERM);
	cr_assert_eq(rl_coro_conn_read(NULL, &b, 1, 0), -EPERM);
	cr_assert_eq(rl_coro_spawn(sched, NULL, misuse_body, &d, NULL), 0);
	trun_for(loop, 20);
	cr_assert_eq(rl_coro_spawn(sched, NULL, second_reader, &d, NULL), 0);
	trun_until(loop, d.done == 1);
	cr_assert_eq(d.r[0], -EINVAL);
	cr_assert_eq(d.r[1], 0);
	cr_assert_eq(d.r[2], -EINVAL);
	cr_assert_eq(d.r[3], 0);
	cr_assert_eq(d.r[5], -EBUSY);
	cr_assert_eq(write(d.peer, "z", 1), 1);
	/* The open connection's stream keeps the loop busy: run until the
	 * read is done, then close it. */
	trun_until(loop, d.done == 2);
	cr_assert_eq(d.r[4], 1);
	cr_assert_eq(rl_coro_conn_close(d.c), 0);
	trun(loop);
	close(d.peer);
	tsched_close(sched);
	tclose(loop);
}
