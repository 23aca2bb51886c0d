/* SPDX-License-Identifier: MIT */
/*
 * test_callback_net.c - sockets in the callback style: servers and
 * connections (data callbacks, writes, end, close, pause, idle timeout),
 * the fd-level requests and datagrams, and the failures of the issue at
 * this level (peer reset, half-close, a client that never reads, a slow
 * sender, running out of fds, closing the loop with connections open), on
 * every backend configuration, with exact callback counts.
 */
#include <fcntl.h>
#include <sys/resource.h>

#include "net_helpers.h"
#include "ringloop/callback.h"

struct res {
	int calls;
	int err;
	int64_t value;
};

static void res_cb(int err, int64_t value, void *arg)
{
	struct res *r = arg;

	r->calls++;
	r->err = err;
	r->value = value;
}

/* Closes the context (nothing of it in flight), then the loop, and checks
 * every fd is back. */
static void close_all(rl_loop *loop, rl_cb_ctx *cbs)
{
	trun(loop);
	cr_assert_eq(rl_cb_ctx_in_flight(cbs), 0);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}

/* ------------------------------------------------------ an echo server */

/*
 * The server side of most tests: echoes what it reads, from the loop's
 * buffer (held until the write is done), or from a copy (copy = true), and
 * pauses reading while more than high bytes of writes wait (high > 0).
 */
struct echo {
	rl_cb_ctx *cbs;
	rl_cb_server *srv;
	bool copy;
	size_t high;
	int conns, notices, closed, ends, errors, pauses;
	int last_err;
	size_t bytes, max_queued;
	int writes_failed, closed_by_write;
};

struct echo_conn {
	struct echo *e;
	rl_cb_conn *c;
	bool paused, closing;
};

struct echo_write {
	struct echo_conn *ec;
	void *held;
	char *copy;
};

static void echo_data(int err, const void *data, size_t len, void *arg);

static void echo_closed(int err, int64_t value, void *arg)
{
	struct echo_conn *ec = arg;

	cr_assert_eq(err, 0);
	cr_assert_eq(value, 0);
	ec->e->closed++;
	free(ec);
}

static void echo_written(int err, int64_t value, void *arg)
{
	struct echo_write *w = arg;
	struct echo_conn *ec = w->ec;

	if (err < 0) {
		/* The peer is gone: so is the connection. */
		ec->e->writes_failed++;
		if (!ec->closing) {
			ec->e->closed_by_write++;
			ec->closing = true;
			cr_assert_eq(rl_cb_net_close(ec->c, echo_closed, ec),
				     0);
		}
	} else
		cr_assert_gt(value, 0);
	if (w->held)
		cr_assert_eq(rl_cb_net_release(ec->c, w->held), 0);
	free(w->copy);
	free(w);
	if (ec->paused && err == 0 && !ec->closing &&
	    rl_cb_net_write_queued(ec->c) <= ec->e->high / 2) {
		ec->paused = false;
		cr_assert_eq(rl_cb_net_read_start(ec->c, echo_data, ec), 0);
	}
}

static void echo_data(int err, const void *data, size_t len, void *arg)
{
	struct echo_conn *ec = arg;
	struct echo *e = ec->e;
	struct echo_write *w;
	size_t q;

	if (err < 0 || !len) {
		if (err < 0) {
			e->errors++;
			e->last_err = err;
		} else {
			e->ends++;
		}
		cr_assert(!ec->closing);
		ec->closing = true;
		cr_assert_eq(rl_cb_net_close(ec->c, echo_closed, ec), 0);
		return;
	}
	e->bytes += len;
	w = calloc(1, sizeof(*w));
	w->ec = ec;
	if (e->copy) {
		w->copy = malloc(len);
		memcpy(w->copy, data, len);
	} else {
		w->held = rl_cb_net_hold(ec->c);
		cr_assert_eq(w->held, data);
	}
	cr_assert_eq(rl_cb_net_write(ec->c, e->copy ? w->copy : w->held, len,
				     echo_written, w),
		     0);
	q = rl_cb_net_write_queued(ec->c);
	if (q > e->max_queued)
		e->max_queued = q;
	if (e->high && q > e->high && !ec->paused) {
		ec->paused = true;
		e->pauses++;
		cr_assert_eq(rl_cb_net_read_stop(ec->c), 0);
	}
}

static void echo_conn(int err, rl_cb_conn *c, void *arg)
{
	struct echo *e = arg;
	struct echo_conn *ec;

	if (err < 0) {
		e->notices++;
		e->last_err = err;
		return;
	}
	e->conns++;
	ec = calloc(1, sizeof(*ec));
	ec->e = e;
	ec->c = c;
	cr_assert_eq(rl_cb_net_read_start(c, echo_data, ec), 0);
}

static void echo_listen(struct echo *e, rl_cb_ctx *cbs, struct rl_addr *a,
			int family)
{
	memset(e, 0, sizeof(*e));
	e->cbs = cbs;
	taddr(a, family);
	cr_assert_eq(rl_cb_net_listen(cbs, a, 64, RL_LISTEN_NODELAY, echo_conn,
				      e, &e->srv),
		     0);
	if (family != AF_UNIX)
		cr_assert_eq(rl_net_local_addr(rl_cb_net_server_fd(e->srv), a),
			     0);
}

/* ------------------------------------------------------ a test client */

struct client {
	rl_cb_conn *c;
	int connects, err;
	int datas, ends, errors, last_err;
	size_t got;
	bool check; /* the data is the pattern */
	unsigned char *copy;
	size_t cap;
};

static void client_data(int err, const void *data, size_t len, void *arg)
{
	struct client *cl = arg;

	if (err < 0) {
		cl->errors++;
		cl->last_err = err;
		return;
	}
	if (!len) {
		cl->ends++;
		return;
	}
	cr_assert_eq(cl->ends + cl->errors, 0, "data after the end");
	if (cl->check)
		tpat_check(data, cl->got, len);
	if (cl->copy && cl->got + len <= cl->cap)
		memcpy(cl->copy + cl->got, data, len);
	cl->got += len;
	cl->datas++;
}

static void client_connected(int err, rl_cb_conn *c, void *arg)
{
	struct client *cl = arg;

	cl->connects++;
	cl->err = err;
	cl->c = c;
	if (!err)
		cr_assert_eq(rl_cb_net_read_start(c, client_data, cl), 0);
}

static void client_connect(rl_cb_ctx *cbs, struct client *cl,
			   const struct rl_addr *a)
{
	memset(cl, 0, sizeof(*cl));
	cl->check = true;
	cr_assert_eq(rl_cb_net_connect(cbs, a, RL_CONNECT_NODELAY, 5000,
				       client_connected, cl),
		     0);
}

/* ------------------------------------------------------------- tests */

/* Echo over IPv4, IPv6 and Unix: connect, write (several writes at once,
 * in order), read back, end (the server sees the end and closes), the
 * client sees the end, closes; every callback exactly once. */
BACKEND_TEST(callback_net, echo_every_family)
{
	enum { LEN = 100000, PARTS = 10 };
	rl_loop *loop = tloop(tp);
	rl_cb_ctx *cbs;
	unsigned char *msg = malloc(LEN);
	struct res w[PARTS], end, cl_closed, srv_closed;
	struct echo e;
	struct client cl;
	struct rl_addr a;

	tpat_fill(msg, 0, LEN);
	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	for (int f = 0; f < TNET_FAMILIES; f++) {
		echo_listen(&e, cbs, &a, tnet_family[f]);
		client_connect(cbs, &cl, &a);
		trun_until(loop, cl.connects == 1);
		cr_assert_eq(cl.err, 0, "%s: %s", tnet_name(tnet_family[f]),
			     rl_strerror(cl.err));
		memset(w, 0, sizeof(w));
		for (int i = 0; i < PARTS; i++)
			cr_assert_eq(
				rl_cb_net_write(cl.c, msg + i * (LEN / PARTS),
						LEN / PARTS, res_cb, &w[i]),
				0);
		trun_until(loop, cl.got == LEN);
		for (int i = 0; i < PARTS; i++) {
			cr_assert_eq(w[i].calls, 1);
			cr_assert_eq(w[i].err, 0);
			cr_assert_eq(w[i].value, LEN / PARTS);
		}
		cr_assert_eq(rl_cb_net_write_queued(cl.c), 0);
		memset(&end, 0, sizeof(end));
		cr_assert_eq(rl_cb_net_end(cl.c, res_cb, &end), 0);
		cr_assert_eq(rl_cb_net_end(cl.c, res_cb, &end), -EALREADY);
		cr_assert_eq(rl_cb_net_write(cl.c, msg, 1, NULL, NULL), -EPIPE);
		trun_until(loop, e.closed == 1 && cl.ends == 1);
		cr_assert_eq(end.calls, 1);
		cr_assert_eq(end.err, 0);
		cr_assert_eq(e.conns, 1);
		cr_assert_eq(e.ends, 1);
		cr_assert_eq(e.errors, 0);
		cr_assert_eq(e.bytes, LEN);
		cr_assert_eq(cl.errors, 0);
		/* Reading is over: it cannot start again. */
		cr_assert_eq(rl_cb_net_read_start(cl.c, client_data, &cl),
			     -EPIPE);
		memset(&cl_closed, 0, sizeof(cl_closed));
		cr_assert_eq(rl_cb_net_close(cl.c, res_cb, &cl_closed), 0);
		cr_assert_eq(rl_cb_net_close(cl.c, res_cb, &cl_closed),
			     -EALREADY);
		memset(&srv_closed, 0, sizeof(srv_closed));
		cr_assert_eq(rl_cb_net_server_close(e.srv, res_cb, &srv_closed),
			     0);
		cr_assert_eq(rl_cb_net_server_close(e.srv, res_cb, &srv_closed),
			     -EALREADY);
		trun(loop);
		cr_assert_eq(cl_closed.calls, 1);
		cr_assert_eq(srv_closed.calls, 1);
		cr_assert_eq(e.notices, 0);
		cr_assert_eq(cl.datas > 0, 1);
	}
	free(msg);
	close_all(loop, cbs);
}

/* Bad arguments fail at once; a refused and a timed-out connect call back
 * once with the error; the context refuses to close while reading. */
BACKEND_TEST(callback_net, errors)
{
	rl_loop *loop = tloop(tp);
	rl_cb_ctx *cbs;
	struct rl_addr a, bad;
	struct client cl;
	rl_cb_server *srv;
	rl_cb_conn *c;
	int lfd, fd, s, peer;

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	memset(&bad, 0, sizeof(bad));
	cr_assert_eq(rl_cb_net_listen(cbs, &bad, 0, 0, echo_conn, NULL, &srv),
		     -EAFNOSUPPORT);
	cr_assert_eq(rl_cb_net_listen(cbs, NULL, 0, 0, echo_conn, NULL, &srv),
		     -EFAULT);
	cr_assert_eq(rl_cb_net_listen(cbs, &bad, 0, 0, NULL, NULL, &srv),
		     -EINVAL);
	cr_assert_eq(rl_cb_net_connect(cbs, &bad, 0, 0, client_connected, &cl),
		     -EAFNOSUPPORT);
	cr_assert_eq(rl_cb_net_connect(cbs, &bad, 0, 0, NULL, &cl), -EINVAL);
	cr_assert_eq(rl_cb_net_wrap(cbs, -1, &c), -EINVAL);
	cr_assert_eq(rl_cb_net_recv(cbs, -1, &a, 1, res_cb, NULL), -EBADF);
	cr_assert_eq(rl_cb_net_send(cbs, 0, &a, 1, 99, res_cb, NULL), -EINVAL);
	cr_assert_eq(rl_cb_net_shutdown(cbs, 0, 99, res_cb, NULL), -EINVAL);
	cr_assert_eq(rl_cb_net_accept(cbs, -1, res_cb, NULL), -EBADF);
	cr_assert_eq(rl_cb_ctx_in_flight(cbs), 0);

	/* Refused: a port nobody listens on any more. */
	lfd = tlisten(&a, AF_INET, 1);
	close(lfd);
	client_connect(cbs, &cl, &a);
	trun_until(loop, cl.connects == 1);
	cr_assert_eq(cl.err, -ECONNREFUSED);
	cr_assert_null(cl.c);

	/* Timed out: a TCP listener whose backlog is full drops SYNs. */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	taddr(&a, AF_INET);
	cr_assert_eq(bind(fd, &a.sa, a.len), 0);
	cr_assert_eq(listen(fd, 0), 0);
	rl_net_local_addr(fd, &a);
	peer = tconnect(&a);
	memset(&cl, 0, sizeof(cl));
	cr_assert_eq(rl_cb_net_connect(cbs, &a, 0, 100, client_connected, &cl),
		     0);
	trun_until(loop, cl.connects == 1);
	cr_assert_eq(cl.err, -ETIMEDOUT);
	close(peer);
	close(fd);

	/* A wrapped socket: reading keeps a request in flight. */
	tpair(AF_UNIX, &s, &peer);
	cr_assert_eq(rl_cb_net_wrap(cbs, s, &c), 0);
	cr_assert_eq(rl_cb_net_fd(c), s);
	cr_assert_eq(rl_cb_net_read_stop(c), -ENOENT);
	cr_assert_eq(rl_cb_net_read_start(c, NULL, NULL), -EINVAL);
	memset(&cl, 0, sizeof(cl));
	cr_assert_eq(rl_cb_net_read_start(c, client_data, &cl), 0);
	cr_assert_null(rl_cb_net_hold(c)); /* not in a data callback */
	trun_for(loop, 5);
	cr_assert_eq(rl_cb_ctx_in_flight(cbs), 1);
	cr_assert_eq(rl_cb_ctx_close(cbs), -EBUSY);
	cr_assert_eq(rl_cb_net_close(c, NULL, NULL), 0);
	cr_assert_eq(rl_cb_net_read_start(c, client_data, &cl), -ECANCELED);
	cr_assert_eq(rl_cb_net_write(c, "x", 1, NULL, NULL), -ECANCELED);
	cr_assert_eq(rl_cb_net_end(c, NULL, NULL), -ECANCELED);
	trun(loop);
	/* Closing ends nothing the program did not ask for: no data
	 * callback after a close. */
	cr_assert_eq(cl.errors + cl.ends + cl.datas, 0);
	/* The peer sees the socket closed. */
	{
		char b;

		cr_assert_eq(read(peer, &b, 1), 0);
	}
	close(peer);
	close_all(loop, cbs);
}

/* Pausing in the middle of a flow of data, many times: every byte comes,
 * once, in order, never while paused. */
struct pauser {
	rl_cb_conn *c;
	size_t got;
	int datas, ends, while_paused;
	bool paused;
	int pauses;
};

static void pauser_data(int err, const void *data, size_t len, void *arg)
{
	struct pauser *p = arg;

	cr_assert_eq(err, 0);
	if (!len) {
		p->ends++;
		return;
	}
	if (p->paused)
		p->while_paused++;
	tpat_check(data, p->got, len);
	p->got += len;
	p->datas++;
	/* Pause every third chunk, from inside the callback. */
	if (p->datas % 3 == 0) {
		cr_assert_eq(rl_cb_net_read_stop(p->c), 0);
		p->paused = true;
		p->pauses++;
	}
}

BACKEND_TEST(callback_net, pause_and_resume_lose_nothing)
{
	enum { TOTAL = 1 << 20, CHUNK = 3000 };
	struct rl_options opt;
	rl_loop *loop;
	rl_cb_ctx *cbs;
	struct pauser p;
	unsigned char *buf = malloc(CHUNK);
	size_t sent = 0;
	int s, peer;

	rl_options_init(&opt);
	opt.net_bufs = 16; /* small buffers: many items per write */
	opt.net_buf_size = 1024;
	loop = tloop_opts(tp, &opt);
	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	tpair(AF_INET, &s, &peer);
	fcntl(peer, F_SETFL, O_NONBLOCK);
	memset(&p, 0, sizeof(p));
	cr_assert_eq(rl_cb_net_wrap(cbs, s, &p.c), 0);
	cr_assert_eq(rl_cb_net_read_start(p.c, pauser_data, &p), 0);
	while (p.got < TOTAL) {
		/* Feed the peer side as it drains. */
		while (sent < TOTAL) {
			size_t n = TOTAL - sent < CHUNK ? TOTAL - sent : CHUNK;
			ssize_t w;

			tpat_fill(buf, sent, n);
			w = send(peer, buf, n, MSG_DONTWAIT);
			if (w <= 0)
				break;
			sent += (size_t)w;
		}
		if (sent == TOTAL)
			shutdown(peer, SHUT_WR);
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
		if (p.paused) {
			/* Stay paused for a turn: nothing may come. */
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
			p.paused = false;
			cr_assert_eq(rl_cb_net_read_start(p.c, pauser_data, &p),
				     0);
		}
	}
	trun_until(loop, p.ends == 1);
	cr_assert_eq(p.got, TOTAL);
	cr_assert_eq(p.while_paused, 0);
	cr_assert_gt(p.pauses, 10);
	cr_assert_eq(rl_cb_net_close(p.c, NULL, NULL), 0);
	close(peer);
	free(buf);
	close_all(loop, cbs);
}

/* A client that never reads: the server (echoing from copies) pauses
 * while its writes wait, so the bytes it keeps stay bounded however much
 * the client sends; when the client goes, the writes fail and the
 * connection closes. */
BACKEND_TEST(callback_net, client_that_never_reads_stays_bounded)
{
	enum { HIGH = 64 << 10, TOTAL = 32 << 20 };
	rl_loop *loop = tloop(tp);
	rl_cb_ctx *cbs;
	struct echo e;
	struct rl_addr a;
	size_t sent;
	int fd, sndbuf = 1 << 16;

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	echo_listen(&e, cbs, &a, AF_INET);
	e.copy = true;
	e.high = HIGH;
	fd = tconnect(&a);
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	fcntl(fd, F_SETFL, O_NONBLOCK);
	trun_until(loop, e.conns == 1);
	/* Send until the kernel takes no more for a while: the server has
	 * stopped reading and TCP holds the client back. */
	sent = tflood(loop, fd, TOTAL, NULL, NULL);
	cr_assert_lt(sent, TOTAL, "the server never stopped taking data");
	cr_assert_geq(e.pauses, 1);
	/* The writes it keeps: at most one burst past the high mark. */
	cr_assert_leq(e.max_queued, HIGH + 64 * 4096, "queued %zu bytes",
		      e.max_queued);
	cr_assert_lt(rl_cb_ctx_pooled(cbs), 1024);
	/* The client goes away (a reset, with unread data). */
	close(fd);
	trun_until(loop, e.closed == 1);
	cr_assert_geq(e.writes_failed + e.errors, 1);
	cr_assert_eq(rl_cb_net_server_close(e.srv, NULL, NULL), 0);
	close_all(loop, cbs);
}

/* A peer reset in the middle of reading and in the middle of writing:
 * one error each, no data callback after it. */
BACKEND_TEST(callback_net, peer_reset_mid_read_and_mid_write)
{
	rl_loop *loop = tloop(tp);
	rl_cb_ctx *cbs;
	struct client cl;
	struct res w;
	struct linger lin = { 1, 0 };
	char *big = calloc(1, 8 << 20);
	int s, peer;

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	/* Mid-read: some data, then a reset. */
	tpair(AF_INET, &s, &peer);
	memset(&cl, 0, sizeof(cl));
	cr_assert_eq(rl_cb_net_wrap(cbs, s, &cl.c), 0);
	cr_assert_eq(rl_cb_net_read_start(cl.c, client_data, &cl), 0);
	cr_assert_eq(write(peer, "abc", 3), 3);
	trun_until(loop, cl.got == 3);
	setsockopt(peer, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
	close(peer);
	trun_until(loop, cl.errors + cl.ends == 1);
	trun_for(loop, 10);
	cr_assert_eq(cl.errors, 1);
	cr_assert_eq(cl.last_err, -ECONNRESET);
	cr_assert_eq(cl.ends, 0);
	cr_assert_eq(rl_cb_net_close(cl.c, NULL, NULL), 0);

	/* Mid-write: 8 MiB to a peer that reads nothing, then resets. */
	tpair(AF_INET, &s, &peer);
	memset(&cl, 0, sizeof(cl));
	cr_assert_eq(rl_cb_net_wrap(cbs, s, &cl.c), 0);
	cr_assert_eq(rl_cb_net_read_start(cl.c, client_data, &cl), 0);
	memset(&w, 0, sizeof(w));
	cr_assert_eq(rl_cb_net_write(cl.c, big, 8 << 20, res_cb, &w), 0);
	trun_for(loop, 20);
	cr_assert_eq(w.calls, 0);
	cr_assert_eq(rl_cb_net_write_queued(cl.c), (size_t)8 << 20);
	setsockopt(peer, SOL_SOCKET, SO_LINGER, &lin, sizeof(lin));
	close(peer);
	trun_until(loop, w.calls == 1 && cl.errors + cl.ends == 1);
	cr_assert(w.err == -ECONNRESET || w.err == -EPIPE, "%s",
		  rl_strerror(w.err));
	/* The kernel reports the reset once: when the write took it, the
	 * stream ended with 0, and the connection tells the reader the
	 * write's reset instead of an end (before: an end on io_uring). */
	trun_for(loop, 10);
	cr_assert_eq(cl.ends, 0);
	cr_assert_eq(cl.errors, 1);
	cr_assert_eq(cl.last_err, -ECONNRESET, "%s", rl_strerror(cl.last_err));
	cr_assert_eq(rl_cb_net_write_queued(cl.c), 0);
	cr_assert_eq(rl_cb_net_close(cl.c, NULL, NULL), 0);
	free(big);
	close_all(loop, cbs);
}

/* Half-close: the client ends its side; the server reads the end and
 * still writes; the client reads that, then the server's end. */
struct half {
	rl_cb_conn *c;
	int ends;
	size_t got;
};

static void half_server_data(int err, const void *data, size_t len, void *arg)
{
	struct half *h = arg;

	(void)data;
	cr_assert_eq(err, 0);
	if (len) {
		h->got += len;
		return;
	}
	h->ends++;
	/* The peer ended its side: answer, then end ours. */
	cr_assert_eq(rl_cb_net_write(h->c, "after-end", 9, NULL, NULL), 0);
	cr_assert_eq(rl_cb_net_end(h->c, NULL, NULL), 0);
}

BACKEND_TEST(callback_net, half_close)
{
	rl_loop *loop = tloop(tp);
	rl_cb_ctx *cbs;
	struct client cl;
	struct half h;
	struct res end;
	int s, peer;

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	tpair(AF_INET6, &s, &peer);
	memset(&h, 0, sizeof(h));
	memset(&cl, 0, sizeof(cl));
	cr_assert_eq(rl_cb_net_wrap(cbs, s, &h.c), 0);
	cr_assert_eq(rl_cb_net_wrap(cbs, peer, &cl.c), 0);
	cl.copy = calloc(1, 64);
	cl.cap = 64;
	cr_assert_eq(rl_cb_net_read_start(h.c, half_server_data, &h), 0);
	cr_assert_eq(rl_cb_net_read_start(cl.c, client_data, &cl), 0);
	cr_assert_eq(rl_cb_net_write(cl.c, "hello", 5, NULL, NULL), 0);
	memset(&end, 0, sizeof(end));
	cr_assert_eq(rl_cb_net_end(cl.c, res_cb, &end), 0);
	trun_until(loop, cl.ends == 1);
	cr_assert_eq(h.got, 5);
	cr_assert_eq(h.ends, 1);
	cr_assert_eq(end.calls, 1);
	cr_assert_eq(end.err, 0);
	cr_assert_eq(cl.got, 9);
	cr_assert_eq(memcmp(cl.copy, "after-end", 9), 0);
	cr_assert_eq(cl.errors, 0);
	free(cl.copy);
	cr_assert_eq(rl_cb_net_close(h.c, NULL, NULL), 0);
	cr_assert_eq(rl_cb_net_close(cl.c, NULL, NULL), 0);
	close_all(loop, cbs);
}

/* A client that sends one byte at a time, slowly (every 30 ms, the short
 * version of one byte a second): an idle timeout of 300 ms never fires
 * while bytes come, and fires once they stop. */
BACKEND_TEST(callback_net, slow_sender_and_idle_timeout)
{
	rl_loop *loop = tloop(tp);
	rl_cb_ctx *cbs;
	struct client cl;
	uint64_t t0;
	int s, peer;

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	tpair(AF_INET, &s, &peer);
	memset(&cl, 0, sizeof(cl));
	cl.check = true;
	cr_assert_eq(rl_cb_net_wrap(cbs, s, &cl.c), 0);
	cr_assert_eq(rl_cb_net_set_timeout(cl.c, 300), 0);
	cr_assert_eq(rl_cb_net_read_start(cl.c, client_data, &cl), 0);
	for (size_t i = 0; i < 10; i++) {
		unsigned char b = tpat(i);

		cr_assert_eq(write(peer, &b, 1), 1);
		trun_until(loop, cl.got == i + 1);
		trun_for(loop, 30);
	}
	cr_assert_eq(cl.errors, 0);
	t0 = tnow_ms();
	trun_until(loop, cl.errors == 1);
	cr_assert_eq(cl.last_err, -ETIMEDOUT);
	cr_assert_geq(tnow_ms() - t0, 250);
	cr_assert_eq(cl.got, 10);

	/* Turned off, nothing fires. */
	cr_assert_eq(rl_cb_net_close(cl.c, NULL, NULL), 0);
	close(peer);
	tpair(AF_INET, &s, &peer);
	memset(&cl, 0, sizeof(cl));
	cr_assert_eq(rl_cb_net_wrap(cbs, s, &cl.c), 0);
	cr_assert_eq(rl_cb_net_set_timeout(cl.c, 50), 0);
	cr_assert_eq(rl_cb_net_read_start(cl.c, client_data, &cl), 0);
	cr_assert_eq(rl_cb_net_set_timeout(cl.c, 0), 0);
	trun_for(loop, 150);
	cr_assert_eq(cl.errors, 0);
	cr_assert_eq(rl_cb_net_close(cl.c, NULL, NULL), 0);
	close(peer);
	close_all(loop, cbs);
}

/* Closing the loop with a server, reading connections, a write stuck on a
 * peer that does not read and a connect in flight: every callback runs
 * once, with -ECANCELED (or its real result), and nothing is left. */
BACKEND_TEST(callback_net, close_loop_with_connections_open)
{
	int base = tfd_count();
	rl_loop *loop = tloop(tp);
	rl_cb_ctx *cbs;
	struct echo e;
	struct client cl[4], pending;
	struct res w;
	struct rl_addr a, full;
	char *big = calloc(1, 16 << 20);
	int fd, filler;

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	echo_listen(&e, cbs, &a, AF_INET);
	for (int i = 0; i < 4; i++)
		client_connect(cbs, &cl[i], &a);
	trun_until(loop, e.conns == 4 && cl[0].connects + cl[1].connects +
							 cl[2].connects +
							 cl[3].connects ==
						 4);
	/* The echo server writes back into a client that stopped reading. */
	cr_assert_eq(rl_cb_net_read_stop(cl[0].c), 0);
	memset(&w, 0, sizeof(w));
	cr_assert_eq(rl_cb_net_write(cl[0].c, big, 16 << 20, res_cb, &w), 0);
	/* A connect that waits (a full backlog). */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	taddr(&full, AF_INET);
	cr_assert_eq(bind(fd, &full.sa, full.len), 0);
	cr_assert_eq(listen(fd, 0), 0);
	rl_net_local_addr(fd, &full);
	filler = tconnect(&full);
	memset(&pending, 0, sizeof(pending));
	cr_assert_eq(
		rl_cb_net_connect(cbs, &full, 0, 0, client_connected, &pending),
		0);
	trun_for(loop, 30);
	cr_assert_eq(w.calls, 0);

	cr_assert_eq(rl_loop_close(loop), 0);
	/* The clients still reading, and the server's connections, got
	 * -ECANCELED; client 0 was paused and hears nothing. */
	for (int i = 1; i < 4; i++) {
		cr_assert_eq(cl[i].errors, 1);
		cr_assert_eq(cl[i].last_err, -ECANCELED);
	}
	cr_assert_eq(cl[0].errors + cl[0].ends, 0);
	/* Each server connection closed once: on its read's -ECANCELED, or
	 * on its write's, whichever came first. */
	cr_assert_eq(e.errors + e.closed_by_write, 4);
	cr_assert_eq(e.closed, 4);
	cr_assert_eq(e.notices, 1); /* the server: accepting ended */
	cr_assert_eq(e.last_err, -ECANCELED);
	cr_assert_eq(w.calls, 1);
	cr_assert_eq(w.err, -ECANCELED);
	cr_assert_eq(pending.connects, 1);
	cr_assert_eq(pending.err, -ECANCELED);
	/* The loop's close closed the context too, and it freed the
	 * connections and the server the program did not close (the fd
	 * count below checks their sockets). */
	close(filler);
	close(fd);
	cr_assert_eq(tfd_count(), base);
	free(big);
}

/* Out of fds while accepting: the server says -EMFILE, tries again, and
 * takes the connections that waited once fds are free. */
BACKEND_TEST(callback_net, emfile_then_the_server_recovers)
{
	enum { N = 6, ROOM = 3 };
	rl_loop *loop = tloop(tp);
	rl_cb_ctx *cbs;
	struct echo e;
	struct rl_addr a;
	struct rlimit old, low;
	int cfd[N], probe[ROOM + 1];

	if (getenv("RL_VALGRIND"))
		cr_skip_test("Valgrind refuses to lower RLIMIT_NOFILE");
	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	/* The clients' sockets first, then exactly ROOM + 1 free fd numbers
	 * below the limit: the listener takes one. The limit must be low
	 * before the server starts: io_uring reads it when it prepares the
	 * accept (Linux 6.18), which for a multishot accept is once. */
	for (int i = 0; i < N; i++)
		cfd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	for (int i = 0; i <= ROOM; i++)
		probe[i] = dup(0);
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)probe[ROOM] + 1;
	for (int i = 0; i <= ROOM; i++)
		close(probe[i]);
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	echo_listen(&e, cbs, &a, AF_INET);
	for (int i = 0; i < N; i++)
		cr_assert_eq(connect(cfd[i], &a.sa, a.len), 0);
	trun_until(loop, e.notices >= 1);
	cr_assert_eq(e.last_err, -EMFILE, "%s", rl_strerror(e.last_err));
	cr_assert_eq(e.conns, ROOM);
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	/* The retry (a new accept, with the limit of now) takes the rest. */
	trun_until(loop, e.conns == N);
	for (int i = 0; i < N; i++)
		close(cfd[i]);
	trun_until(loop, e.closed == N);
	cr_assert_eq(rl_cb_net_server_close(e.srv, NULL, NULL), 0);
	close_all(loop, cbs);
}

/* The fd-level requests: accept one, recv into the caller's buffer,
 * send, shutdown; datagrams with sendmsg and recvmsg. */
BACKEND_TEST(callback_net, fd_level_requests_and_datagrams)
{
	rl_loop *loop = tloop(tp);
	rl_cb_ctx *cbs;
	struct res acc, rcv, snd, shut, smsg, rmsg;
	struct rl_addr a, b;
	char buf[16] = { 0 }, dgram[32] = { 0 };
	struct iovec siov = { (void *)"datagram", 8 }, riov = { dgram, 32 };
	struct msghdr sm, rm;
	struct sockaddr_storage from;
	int lfd, cfd, s, u1, u2;

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	lfd = tlisten(&a, AF_INET, 4);
	memset(&acc, 0, sizeof(acc));
	cr_assert_eq(rl_cb_net_accept(cbs, lfd, res_cb, &acc), 0);
	cfd = tconnect(&a);
	trun_until(loop, acc.calls == 1);
	cr_assert_eq(acc.err, 0);
	s = (int)acc.value;
	cr_assert_geq(s, 0);

	memset(&rcv, 0, sizeof(rcv));
	cr_assert_eq(rl_cb_net_recv(cbs, s, buf, sizeof(buf), res_cb, &rcv), 0);
	cr_assert_eq(write(cfd, "ping", 4), 4);
	trun_until(loop, rcv.calls == 1);
	cr_assert_eq(rcv.value, 4);
	cr_assert_eq(memcmp(buf, "ping", 4), 0);
	memset(&snd, 0, sizeof(snd));
	cr_assert_eq(rl_cb_net_send(cbs, s, "pong", 4, 0, res_cb, &snd), 0);
	memset(&shut, 0, sizeof(shut));
	trun_until(loop, snd.calls == 1);
	cr_assert_eq(snd.value, 4);
	cr_assert_eq(rl_cb_net_shutdown(cbs, s, SHUT_WR, res_cb, &shut), 0);
	trun_until(loop, shut.calls == 1);
	cr_assert_eq(shut.err, 0);
	cr_assert_eq(read(cfd, buf, sizeof(buf)), 4);
	cr_assert_eq(read(cfd, buf, sizeof(buf)), 0);
	/* The end of the stream: 0. */
	close(cfd);
	memset(&rcv, 0, sizeof(rcv));
	cr_assert_eq(rl_cb_net_recv(cbs, s, buf, sizeof(buf), res_cb, &rcv), 0);
	trun_until(loop, rcv.calls == 1);
	cr_assert_eq(rcv.err, 0);
	cr_assert_eq(rcv.value, 0);
	close(s);
	close(lfd);

	rl_addr_ip(&a, "127.0.0.1", 0);
	u1 = rl_net_udp(&a, 0);
	u2 = rl_net_udp(&a, 0);
	cr_assert_geq(u1, 0);
	cr_assert_geq(u2, 0);
	rl_net_local_addr(u2, &b);
	memset(&rm, 0, sizeof(rm));
	rm.msg_name = &from;
	rm.msg_namelen = sizeof(from);
	rm.msg_iov = &riov;
	rm.msg_iovlen = 1;
	memset(&rmsg, 0, sizeof(rmsg));
	cr_assert_eq(rl_cb_net_recvmsg(cbs, u2, &rm, res_cb, &rmsg), 0);
	memset(&sm, 0, sizeof(sm));
	sm.msg_name = &b.ss;
	sm.msg_namelen = b.len;
	sm.msg_iov = &siov;
	sm.msg_iovlen = 1;
	memset(&smsg, 0, sizeof(smsg));
	cr_assert_eq(rl_cb_net_sendmsg(cbs, u1, &sm, res_cb, &smsg), 0);
	trun_until(loop, smsg.calls == 1 && rmsg.calls == 1);
	cr_assert_eq(smsg.value, 8);
	cr_assert_eq(rmsg.value, 8);
	cr_assert_eq(memcmp(dgram, "datagram", 8), 0);
	close(u1);
	close(u2);
	close_all(loop, cbs);
}

/* A context cannot be closed from inside one of its socket callbacks (it
 * would be freed under the code that runs after the callback): -EBUSY
 * from a data callback, a write's completion, the end of the stream and
 * the close's callback, even when nothing else of it is in flight. */
struct busy {
	rl_cb_ctx *cbs;
	rl_cb_conn *c;
	int in_data, in_write, in_end, in_close, calls;
};

static void busy_written(int err, int64_t value, void *arg)
{
	struct busy *b = arg;

	(void)err;
	(void)value;
	b->in_write = rl_cb_ctx_close(b->cbs);
	b->calls++;
}

static void busy_closed(int err, int64_t value, void *arg)
{
	struct busy *b = arg;

	(void)err;
	(void)value;
	b->in_close = rl_cb_ctx_close(b->cbs);
	b->calls++;
}

static void busy_data(int err, const void *data, size_t len, void *arg)
{
	struct busy *b = arg;

	(void)data;
	cr_assert_eq(err, 0);
	if (!len) {
		b->in_end = rl_cb_ctx_close(b->cbs);
		cr_assert_eq(rl_cb_net_close(b->c, busy_closed, b), 0);
	} else {
		b->in_data = rl_cb_ctx_close(b->cbs);
		cr_assert_eq(rl_cb_net_write(b->c, "ok", 2, busy_written, b),
			     0);
	}
	b->calls++;
}

BACKEND_TEST(callback_net, close_context_from_a_callback_is_refused)
{
	rl_loop *loop = tloop(tp);
	struct busy b;
	char buf[4];
	int s, peer;

	memset(&b, 0, sizeof(b));
	cr_assert_eq(rl_cb_ctx_open(loop, &b.cbs), 0);
	tpair(AF_INET, &s, &peer);
	cr_assert_eq(rl_cb_net_wrap(b.cbs, s, &b.c), 0);
	cr_assert_eq(rl_cb_net_read_start(b.c, busy_data, &b), 0);
	cr_assert_eq(write(peer, "x", 1), 1);
	trun_until(loop, b.calls == 2);
	cr_assert_eq(read(peer, buf, sizeof(buf)), 2);
	cr_assert_eq(shutdown(peer, SHUT_WR), 0);
	trun_until(loop, b.calls == 4);
	cr_assert_eq(b.in_data, -EBUSY);
	cr_assert_eq(b.in_write, -EBUSY);
	cr_assert_eq(b.in_end, -EBUSY);
	cr_assert_eq(b.in_close, -EBUSY);
	close(peer);
	close_all(loop, b.cbs);
}
