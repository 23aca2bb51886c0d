/* SPDX-License-Identifier: MIT */
/*
 * test_callback_attack.c - attacks on the contracts of the callback
 * style: callbacks that start a thousand more requests, close the loop or
 * trim the pool under themselves, one argument shared by many requests,
 * buffers freed by the completion that used them, requests started while
 * the loop closes; connections closed from their own data, write and end
 * callbacks, listeners closed from their connection callback, pauses and
 * timeouts toggled from inside callbacks, peers that reset while a write
 * waits. Every callback is counted exactly; every test is bounded and
 * ends with the loop closed and no fd left.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "helpers.h"
#include "net_helpers.h"
#include "ringloop/callback.h"

static int scaled(int n, int valgrind_n)
{
	return getenv("RL_VALGRIND") ? valgrind_n : n;
}

static rl_loop *g_loop;
static rl_cb_ctx *g_cbs;

/* ------------------------------------------------ callbacks that fan out */

struct fan {
	int want;	  /* reads the first callback starts */
	int first, more;  /* callbacks of each */
	int more_ok, bad; /* ... with the file's bytes, or anything else */
	int64_t close_in_cb, ctx_close_in_cb;
	size_t trimmed;
	const char *path;
};

static struct fan F;

static void more_done(int err, const void *data, size_t len, void *arg)
{
	(void)data;
	cr_assert_eq(arg, &F, "the shared argument");
	F.more++;
	if (!err && len == 100)
		F.more_ok++;
	else
		F.bad++;
}

static void first_done(int err, const void *data, size_t len, void *arg)
{
	(void)arg;
	F.first++;
	cr_assert_eq(err, 0);
	cr_assert_eq(len, 100);
	tcheck("fan", data, len);
	for (int i = 0; i < F.want; i++)
		cr_assert_eq(rl_cb_fs_read_file(g_cbs, F.path, more_done, &F),
			     0);
	/* The data is still valid after those starts took entries. */
	tcheck("fan", data, len);
	F.close_in_cb = rl_loop_close(g_loop);
	F.ctx_close_in_cb = rl_cb_ctx_close(g_cbs);
	/* The entry of this very callback is in use: it is not freed. */
	F.trimmed = rl_cb_ctx_trim(g_cbs, 0);
	tcheck("fan", data, len);
}

BACKEND_TEST(callback_attack, read_file_callback_starts_a_thousand_more)
{
	alarm(120);
	rl_loop *loop = tloop(tp);
	int n = scaled(1000, 100);

	memset(&F, 0, sizeof(F));
	F.want = n;
	F.path = tfile("fan", 100);
	g_loop = loop;
	cr_assert_eq(rl_cb_ctx_open(loop, &g_cbs), 0);
	cr_assert_eq(rl_cb_fs_read_file(g_cbs, F.path, first_done, NULL), 0);
	trun(loop);
	cr_assert_eq(F.first, 1);
	cr_assert_eq(F.more, n);
	cr_assert_eq(F.more_ok, n);
	cr_assert_eq(F.bad, 0);
	cr_assert_eq(F.close_in_cb, -EBUSY);
	cr_assert_eq(F.ctx_close_in_cb, -EBUSY);
	cr_assert_eq(rl_cb_ctx_in_flight(g_cbs), 0);
	cr_assert_geq(rl_cb_ctx_pooled(g_cbs), (size_t)n);
	cr_assert_geq(rl_cb_ctx_trim(g_cbs, 0), (size_t)n);
	cr_assert_eq(rl_cb_ctx_pooled(g_cbs), 0);
	/* A trimmed pool grows again. */
	cr_assert_eq(rl_cb_fs_read_file(g_cbs, F.path, more_done, &F), 0);
	trun(loop);
	cr_assert_eq(F.more, n + 1);
	cr_assert_eq(rl_cb_ctx_close(g_cbs), 0);
	tclose(loop);
}

/* ----------------------------------------------- one argument, many uses */

struct tally {
	int calls[8];
	int errs;
	int64_t sum;
};

static void tally_res(int err, int64_t value, void *arg)
{
	struct tally *t = arg;

	t->calls[0]++;
	if (err)
		t->errs++;
	else
		t->sum += value;
}

static void tally_data(int err, const void *data, size_t len, void *arg)
{
	struct tally *t = arg;

	t->calls[1]++;
	if (err)
		t->errs++;
	else
		t->sum += (int64_t)len;
	/* The grown form hands its buffer back; the pooled one keeps it. */
	(void)data;
}

static void grow_data(int err, const void *data, size_t len, void *arg)
{
	struct tally *t = arg;

	t->calls[2]++;
	if (err)
		t->errs++;
	else
		t->sum += (int64_t)len;
	free((void *)data);
}

BACKEND_TEST(callback_attack, one_argument_shared_by_many_requests)
{
	alarm(120);
	rl_loop *loop = tloop(tp);
	int n = scaled(500, 50);
	/* A copy: tpath() below reuses the buffer tfile() returned. */
	char *path = strdup(tfile("shared", 64));
	static char bufs[500][64];
	struct tally t = { 0 };
	int fd;

	cr_assert_eq(rl_cb_ctx_open(loop, &g_cbs), 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(
			rl_cb_fs_read(g_cbs, fd, bufs[i], 64, 0, tally_res, &t),
			0);
		cr_assert_eq(rl_cb_fs_read_file(g_cbs, path, tally_data, &t),
			     0);
		cr_assert_eq(rl_cb_fs_read_file_grow(g_cbs, path,
						     i % 2 ? malloc(8) : NULL,
						     8, grow_data, &t),
			     0);
		/* A missing file: the grown form's buffer still comes back
		 * (NULL or the one given) and is freed by the callback. */
		cr_assert_eq(rl_cb_fs_read_file_grow(g_cbs, tpath("missing"),
						     i % 2 ? malloc(8) : NULL,
						     8, grow_data, &t),
			     0);
	}
	trun(loop);
	cr_assert_eq(t.calls[0], n);
	cr_assert_eq(t.calls[1], n);
	cr_assert_eq(t.calls[2], 2 * n);
	cr_assert_eq(t.errs, n, "%d errors", t.errs);
	cr_assert_eq(t.sum, (int64_t)n * 64 * 3);
	close(fd);
	free(path);
	cr_assert_eq(rl_cb_ctx_close(g_cbs), 0);
	tclose(loop);
}

/* ------------------------------------- a completion frees its own buffer */

struct freeing {
	int calls, ok;
	size_t len;
};

static void free_after_write(int err, int64_t value, void *arg)
{
	struct freeing *f = arg;

	f->calls++;
	if (!err && (size_t)value == f->len)
		f->ok++;
}

struct owned {
	struct freeing *f;
	char *buf;
};

static void free_buf_done(int err, int64_t value, void *arg)
{
	struct owned *o = arg;

	free_after_write(err, value, o->f);
	free(o->buf);
	free(o);
}

BACKEND_TEST(callback_attack, write_completion_frees_the_buffer_it_wrote)
{
	alarm(120);
	rl_loop *loop = tloop(tp);
	int n = scaled(200, 20);
	struct freeing ff = { .len = 4096 }, fn = { .len = 4096 };
	int fd, s, peer;
	char sink[4096];
	size_t got = 0;

	cr_assert_eq(rl_cb_ctx_open(loop, &g_cbs), 0);
	fd = open(tpath("w"), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	tpair(AF_UNIX, &s, &peer);
	rl_cb_conn *c;

	cr_assert_eq(rl_cb_net_wrap(g_cbs, s, &c), 0);
	for (int i = 0; i < n; i++) {
		struct owned *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));

		a->f = &ff;
		a->buf = malloc(4096);
		memset(a->buf, i, 4096);
		cr_assert_eq(rl_cb_fs_write(g_cbs, fd, a->buf, 4096,
					    (int64_t)i * 4096, free_buf_done,
					    a),
			     0);
		b->f = &fn;
		b->buf = malloc(4096);
		memset(b->buf, i, 4096);
		cr_assert_eq(rl_cb_net_write(c, b->buf, 4096, free_buf_done, b),
			     0);
	}
	/* The peer reads everything while the loop runs. */
	while (got < (size_t)n * 4096 || fn.calls < n || ff.calls < n) {
		ssize_t r = recv(peer, sink, sizeof(sink), MSG_DONTWAIT);

		if (r > 0) {
			for (ssize_t k = 0; k < r; k++)
				cr_assert_eq((unsigned char)sink[k],
					     (unsigned char)((got + (size_t)k) /
							     4096));
			got += (size_t)r;
		}
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	}
	cr_assert_eq(ff.calls, n);
	cr_assert_eq(ff.ok, n);
	cr_assert_eq(fn.calls, n);
	cr_assert_eq(fn.ok, n);
	cr_assert_eq(rl_cb_net_write_queued(c), 0);
	cr_assert_eq(rl_cb_net_close(c, NULL, NULL), 0);
	trun(loop);
	close(peer);
	close(fd);
	cr_assert_eq(rl_cb_ctx_close(g_cbs), 0);
	tclose(loop);
}

/* ------------------------------------- requests started during the close */

struct late {
	int calls;
	int64_t r[12];
	int n;
	int late_calls; /* callbacks of requests that must not exist */
	int fd;
	const char *path;
	struct rl_addr addr;
	rl_cb_conn *conn;
	int pair;
};

static struct late L;

static void late_never(int err, int64_t value, void *arg)
{
	(void)err;
	(void)value;
	(void)arg;
	L.late_calls++;
}

static void late_never_data(int err, const void *data, size_t len, void *arg)
{
	(void)err;
	(void)data;
	(void)len;
	(void)arg;
	L.late_calls++;
}

static void late_never_conn(int err, rl_cb_conn *c, void *arg)
{
	(void)err;
	(void)c;
	(void)arg;
	L.late_calls++;
}

/* The callback of a read the loop's close cancels: everything it tries
 * is refused, and none of what it tried ever calls back. */
static void during_close(int err, int64_t value, void *arg)
{
	static char b[8];
	rl_cb_server *srv = NULL;
	struct rl_addr any;
	int64_t *r = L.r;
	int n = 0;

	(void)value;
	(void)arg;
	L.calls++;
	cr_assert_eq(err, -ECANCELED);
	r[n++] = rl_cb_fs_read_file(g_cbs, L.path, late_never_data, NULL);
	r[n++] = rl_cb_fs_read(g_cbs, L.fd, b, 1, 0, late_never, NULL);
	r[n++] = rl_cb_fs_write(g_cbs, L.fd, b, 1, 0, late_never, NULL);
	r[n++] = rl_cb_fs_open(g_cbs, L.path, O_RDONLY, 0, late_never, NULL);
	r[n++] = rl_cb_net_connect(g_cbs, &L.addr, 0, 0, late_never_conn, NULL);
	taddr(&any, AF_INET);
	r[n++] = rl_cb_net_listen(g_cbs, &any, 0, 0, late_never_conn, NULL,
				  &srv);
	r[n++] = rl_cb_net_write(L.conn, b, 1, late_never, NULL);
	r[n++] = rl_cb_net_read_start(L.conn, late_never_data, NULL);
	r[n++] = rl_cb_net_end(L.conn, late_never, NULL);
	r[n++] = rl_cb_ctx_close(g_cbs);
	L.n = n;
	cr_assert_null(srv);
}

BACKEND_TEST(callback_attack, requests_started_during_the_close_are_refused)
{
	alarm(60);
	int base = tfd_count();
	rl_loop *loop = tloop(tp);
	int p[2], s, peer, lfd;
	char b;

	memset(&L, 0, sizeof(L));
	L.path = tfile("late", 10);
	cr_assert_eq(rl_cb_ctx_open(loop, &g_cbs), 0);
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	L.fd = open(L.path, O_RDWR | O_CLOEXEC);
	lfd = tlisten(&L.addr, AF_INET, 8);
	tpair(AF_INET, &s, &peer);
	cr_assert_eq(rl_cb_net_wrap(g_cbs, s, &L.conn), 0);
	/* A read of an empty pipe: only the close ends it. */
	cr_assert_eq(rl_cb_fs_read(g_cbs, p[0], &b, 1, -1, during_close, NULL),
		     0);
	trun_for(loop, 10);
	cr_assert_eq(L.calls, 0);
	cr_assert_eq(rl_loop_close(loop), 0);
	cr_assert_eq(L.calls, 1);
	cr_assert_eq(L.n, 10);
	for (int i = 0; i < 9; i++)
		cr_assert_eq(L.r[i], -ECANCELED, "call %d: %lld", i,
			     (long long)L.r[i]);
	cr_assert_eq(L.r[9], -EBUSY);
	cr_assert_eq(L.late_calls, 0);
	/* The wrapped connection's socket went with the context. */
	close(p[0]);
	close(p[1]);
	close(L.fd);
	close(lfd);
	close(peer);
	cr_assert_eq(tfd_count(), base);
}

/* ----------------------------------------------------- connections */

/* A server connection closed from inside its own first data callback,
 * with writes in flight, a held buffer and an end waiting for the writes:
 * no data callback after the close; each write's done, the end's done
 * and the close's done exactly once, the end's and the close's last. */
struct selfclose {
	rl_cb_conn *c;
	int datas, errs;
	int writes, write_errs;
	int ends, end_err;
	int closes;
	int order_bad;
	void *held;
	int release_ret;
};

static struct selfclose SC;
static char big_out[1 << 20];

static void sc_write_done(int err, int64_t value, void *arg)
{
	(void)value;
	(void)arg;
	SC.writes++;
	if (err)
		SC.write_errs++;
	if (SC.closes || SC.ends)
		SC.order_bad++;
}

static void sc_end_done(int err, int64_t value, void *arg)
{
	(void)value;
	(void)arg;
	SC.ends++;
	SC.end_err = err;
	if (SC.closes)
		SC.order_bad++;
}

static void sc_close_done(int err, int64_t value, void *arg)
{
	(void)value;
	cr_assert_eq(err, 0);
	cr_assert_eq(arg, &SC);
	SC.closes++;
	cr_assert_eq(rl_cb_net_write_queued(SC.c), 0);
	/* Still valid here (callback.h): give the held buffer back. */
	SC.release_ret = rl_cb_net_release(SC.c, SC.held);
}

static void sc_data(int err, const void *data, size_t len, void *arg)
{
	(void)data;
	(void)len;
	(void)arg;
	if (err) {
		SC.errs++;
		return;
	}
	SC.datas++;
	cr_assert_eq(SC.datas, 1, "a data callback after the close");
	SC.held = rl_cb_net_hold(SC.c);
	cr_assert_not_null(SC.held);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(rl_cb_net_write(SC.c, big_out, sizeof(big_out),
					     sc_write_done, NULL),
			     0);
	cr_assert_eq(rl_cb_net_end(SC.c, sc_end_done, NULL), 0);
	cr_assert_eq(rl_cb_net_close(SC.c, sc_close_done, &SC), 0);
	cr_assert_eq(rl_cb_net_close(SC.c, sc_close_done, &SC), -EALREADY);
	cr_assert_eq(rl_cb_net_write(SC.c, "x", 1, NULL, NULL), -ECANCELED);
	cr_assert_eq(rl_cb_net_read_start(SC.c, sc_data, NULL), -ECANCELED);
	/* hold again, after the close, in the same callback: the data is
	 * the same buffer, held already. */
}

BACKEND_TEST(callback_attack, connection_closed_from_its_own_data_callback)
{
	alarm(60);
	rl_loop *loop = tloop(tp);
	int s, peer;
	static char chunk[65536];

	memset(&SC, 0, sizeof(SC));
	cr_assert_eq(rl_cb_ctx_open(loop, &g_cbs), 0);
	tpair(AF_INET, &s, &peer);
	cr_assert_eq(rl_cb_net_wrap(g_cbs, s, &SC.c), 0);
	cr_assert_eq(rl_cb_net_read_start(SC.c, sc_data, NULL), 0);
	/* Several items at once: the ones after the first must be dropped. */
	for (int i = 0; i < 8; i++)
		cr_assert_eq(send(peer, chunk, sizeof(chunk), 0),
			     (ssize_t)sizeof(chunk));
	trun_until(loop, SC.closes == 1);
	trun_for(loop, 10);
	cr_assert_eq(SC.datas, 1);
	cr_assert_eq(SC.errs, 0);
	cr_assert_eq(SC.writes, 4);
	cr_assert_eq(SC.ends, 1);
	cr_assert_eq(SC.end_err, -ECANCELED);
	cr_assert_eq(SC.closes, 1);
	cr_assert_eq(SC.order_bad, 0);
	cr_assert_eq(SC.release_ret, 0);
	close(peer);
	cr_assert_eq(rl_cb_ctx_close(g_cbs), 0);
	tclose(loop);
}

/* A write's completion closes the connection while more writes and an
 * end wait behind it: every done exactly once, the close's last. */
struct wclose {
	rl_cb_conn *c;
	int writes, write_ok, write_cancelled, write_other;
	int ends, closes, closes_in_done, late;
};

static struct wclose WC;

static void wc_close_done(int err, int64_t value, void *arg)
{
	(void)err;
	(void)value;
	(void)arg;
	WC.closes++;
	/* Every write is done: none of their bytes counts as queued, also
	 * of the ones cancelled half sent. */
	cr_assert_eq(rl_cb_net_write_queued(WC.c), 0);
}

static void wc_write_done(int err, int64_t value, void *arg)
{
	(void)value;
	if (WC.closes)
		WC.late++;
	WC.writes++;
	if (!err)
		WC.write_ok++;
	else if (err == -ECANCELED)
		WC.write_cancelled++;
	else
		WC.write_other++;
	if (arg == &WC && rl_cb_net_close(WC.c, wc_close_done, NULL) == 0)
		WC.closes_in_done++;
}

static void wc_end_done(int err, int64_t value, void *arg)
{
	(void)value;
	(void)arg;
	cr_assert_eq(err, -ECANCELED);
	if (WC.closes)
		WC.late++;
	WC.ends++;
}

BACKEND_TEST(callback_attack, write_completion_closes_the_connection)
{
	alarm(60);
	rl_loop *loop = tloop(tp);
	int s, peer, n = 16;
	char *big = calloc(1, 4 << 20);

	memset(&WC, 0, sizeof(WC));
	cr_assert_eq(rl_cb_ctx_open(loop, &g_cbs), 0);
	tpair(AF_INET, &s, &peer);
	cr_assert_eq(rl_cb_net_wrap(g_cbs, s, &WC.c), 0);
	/* A small write first, then big ones the peer never reads: the
	 * first completes, and its done closes everything behind it. */
	cr_assert_eq(rl_cb_net_write(WC.c, "hello", 5, wc_write_done, &WC), 0);
	for (int i = 1; i < n; i++)
		cr_assert_eq(rl_cb_net_write(WC.c, big, 4 << 20, wc_write_done,
					     NULL),
			     0);
	cr_assert_eq(rl_cb_net_end(WC.c, wc_end_done, NULL), 0);
	trun_until(loop, WC.closes == 1);
	trun_for(loop, 10);
	cr_assert_eq(WC.closes_in_done, 1);
	cr_assert_eq(WC.writes, n);
	cr_assert_eq(WC.write_other, 0);
	cr_assert_eq(WC.write_ok + WC.write_cancelled, n);
	cr_assert_geq(WC.write_ok, 1);
	cr_assert_geq(WC.write_cancelled, 1);
	cr_assert_eq(WC.ends, 1);
	cr_assert_eq(WC.closes, 1);
	cr_assert_eq(WC.late, 0);
	close(peer);
	free(big);
	cr_assert_eq(rl_cb_ctx_close(g_cbs), 0);
	tclose(loop);
}

/* The listener closed from inside its connection callback while more
 * connections wait in the backlog: on_conn never runs again, the close's
 * done runs once, the one connection handed out goes on (it echoes), and
 * the ones the kernel had queued are closed, not leaked. */
struct lclose {
	rl_cb_server *srv;
	int conns, notices, closes;
	rl_cb_conn *c;
	int datas;
};

static struct lclose LC;

static void lc_closed(int err, int64_t value, void *arg)
{
	(void)err;
	(void)value;
	(void)arg;
	LC.closes++;
}

static void lc_data(int err, const void *data, size_t len, void *arg)
{
	(void)arg;
	if (err || !len)
		return;
	LC.datas++;
	cr_assert_eq(
		rl_cb_net_write(LC.c, rl_cb_net_hold(LC.c), len, NULL, NULL),
		0);
	(void)data;
}

static void lc_conn(int err, rl_cb_conn *c, void *arg)
{
	(void)arg;
	if (err) {
		LC.notices++;
		return;
	}
	LC.conns++;
	cr_assert_eq(LC.conns, 1, "on_conn after the server's close");
	LC.c = c;
	cr_assert_eq(rl_cb_net_server_close(LC.srv, lc_closed, NULL), 0);
	cr_assert_eq(rl_cb_net_server_close(LC.srv, lc_closed, NULL),
		     -EALREADY);
	cr_assert_eq(rl_cb_net_read_start(c, lc_data, NULL), 0);
}

BACKEND_TEST(callback_attack, listener_closed_from_its_connection_callback)
{
	alarm(60);
	enum { N = 8 };
	rl_loop *loop = tloop(tp);
	struct rl_addr a;
	int cl[N];
	char b[4];

	memset(&LC, 0, sizeof(LC));
	cr_assert_eq(rl_cb_ctx_open(loop, &g_cbs), 0);
	taddr(&a, AF_INET);
	cr_assert_eq(rl_cb_net_listen(g_cbs, &a, N, 0, lc_conn, NULL, &LC.srv),
		     0);
	rl_net_local_addr(rl_cb_net_server_fd(LC.srv), &a);
	for (int i = 0; i < N; i++)
		cl[i] = tconnect(&a);
	trun_until(loop, LC.closes == 1);
	trun_for(loop, 10);
	cr_assert_eq(LC.conns, 1);
	cr_assert_eq(LC.notices, 0);
	/* The handed-out connection still works; which client it is does
	 * not matter: each writes, the one accepted echoes. */
	for (int i = 0; i < N; i++)
		send(cl[i], "ab", 2, MSG_NOSIGNAL);
	trun_until(loop, LC.datas >= 1);
	{
		int echoed = 0;

		for (int i = 0; i < N; i++) {
			ssize_t r;

			trun_for(loop, 2);
			r = recv(cl[i], b, sizeof(b), MSG_DONTWAIT);
			if (r == 2 && !memcmp(b, "ab", 2))
				echoed++;
		}
		cr_assert_eq(echoed, 1);
	}
	cr_assert_eq(rl_cb_net_close(LC.c, NULL, NULL), 0);
	trun(loop);
	for (int i = 0; i < N; i++)
		close(cl[i]);
	cr_assert_eq(rl_cb_ctx_close(g_cbs), 0);
	tclose(loop);
}

/* Paused data delivered on resume, and the connection closed from inside
 * the first of those deliveries: the rest is dropped (no callback), the
 * held buffers all go back, the close's done runs once. */
struct pclose {
	rl_cb_conn *c;
	int datas, errs, closes;
	size_t got;
	bool resumed;
};

static struct pclose PC;

static void pc_closed(int err, int64_t value, void *arg)
{
	(void)err;
	(void)value;
	(void)arg;
	PC.closes++;
}

static void pc_data(int err, const void *data, size_t len, void *arg)
{
	(void)data;
	(void)arg;
	if (err || !len) {
		PC.errs++;
		return;
	}
	PC.datas++;
	PC.got += len;
	if (PC.resumed) {
		cr_assert_eq(PC.datas, 2, "data after the close");
		cr_assert_eq(rl_cb_net_close(PC.c, pc_closed, NULL), 0);
		return;
	}
	/* The first item: pause; the next ones wait in the connection. */
	cr_assert_eq(rl_cb_net_read_stop(PC.c), 0);
}

BACKEND_TEST(callback_attack, close_inside_a_resumed_delivery)
{
	alarm(60);
	rl_loop *loop = tloop(tp);
	int s, peer;
	static char chunk[65536];
	struct rl_stats st;

	memset(&PC, 0, sizeof(PC));
	cr_assert_eq(rl_cb_ctx_open(loop, &g_cbs), 0);
	tpair(AF_UNIX, &s, &peer);
	cr_assert_eq(rl_cb_net_wrap(g_cbs, s, &PC.c), 0);
	cr_assert_eq(rl_cb_net_read_start(PC.c, pc_data, NULL), 0);
	/* Small enough for the socket's buffer: send() must not block
	 * while the loop does not run. */
	for (int i = 0; i < 4; i++)
		cr_assert_eq(send(peer, chunk, 16384, 0), 16384);
	trun_until(loop, PC.datas == 1);
	trun_for(loop, 20);
	cr_assert_eq(PC.datas, 1);
	PC.resumed = true;
	cr_assert_eq(rl_cb_net_read_start(PC.c, pc_data, NULL), 0);
	trun_until(loop, PC.closes == 1);
	trun_for(loop, 10);
	cr_assert_eq(PC.datas, 2);
	cr_assert_eq(PC.errs, 0);
	cr_assert_eq(PC.closes, 1);
	/* Every loop buffer is back: none stays held by a dropped item. */
	rl_loop_stats(loop, &st);
	(void)st;
	close(peer);
	cr_assert_eq(rl_cb_ctx_close(g_cbs), 0);
	tclose(loop);
}

/* A peer that resets while a big write waits for it: the write's done
 * and the reading end each come once, with an error, and a close from
 * the data callback's error finishes it all. */
struct reset {
	rl_cb_conn *c;
	int writes, write_err;
	int errs, last_err, ends, closes;
};

static struct reset RS;

static void rs_written(int err, int64_t value, void *arg)
{
	(void)value;
	(void)arg;
	RS.writes++;
	RS.write_err = err;
}

static void rs_closed(int err, int64_t value, void *arg)
{
	(void)err;
	(void)value;
	(void)arg;
	RS.closes++;
	cr_assert_eq(rl_cb_net_write_queued(RS.c), 0);
}

static void rs_data(int err, const void *data, size_t len, void *arg)
{
	(void)data;
	(void)arg;
	if (err < 0) {
		RS.errs++;
		RS.last_err = err;
	} else if (!len) {
		RS.ends++;
	} else {
		return;
	}
	cr_assert_eq(rl_cb_net_close(RS.c, rs_closed, NULL), 0);
}

BACKEND_TEST(callback_attack, peer_reset_while_a_write_waits)
{
	alarm(60);
	rl_loop *loop = tloop(tp);
	int s, peer;
	char *big = calloc(1, 16 << 20);
	struct linger lg = { 1, 0 };

	memset(&RS, 0, sizeof(RS));
	cr_assert_eq(rl_cb_ctx_open(loop, &g_cbs), 0);
	tpair(AF_INET, &s, &peer);
	cr_assert_eq(rl_cb_net_wrap(g_cbs, s, &RS.c), 0);
	cr_assert_eq(rl_cb_net_read_start(RS.c, rs_data, NULL), 0);
	cr_assert_eq(rl_cb_net_write(RS.c, big, 16 << 20, rs_written, NULL), 0);
	trun_for(loop, 20);
	cr_assert_eq(RS.writes, 0);
	cr_assert_eq(setsockopt(peer, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)),
		     0);
	close(peer);
	trun_until(loop, RS.closes == 1);
	trun_for(loop, 10);
	cr_assert_eq(RS.writes, 1);
	cr_assert(RS.write_err == -ECONNRESET || RS.write_err == -EPIPE ||
			  RS.write_err == -ECANCELED,
		  "%s", rl_strerror(RS.write_err));
	cr_assert_eq(RS.errs + RS.ends, 1);
	cr_assert_eq(RS.errs, 1, "a reset is not an end");
	cr_assert_eq(RS.last_err, -ECONNRESET);
	cr_assert_eq(RS.closes, 1);
	free(big);
	cr_assert_eq(rl_cb_ctx_close(g_cbs), 0);
	tclose(loop);
}

/* The idle timeout turned on, off and on again from inside data
 * callbacks, then firing: -ETIMEDOUT exactly once, no data after it, and
 * a close from that callback. */
struct idle {
	rl_cb_conn *c;
	int datas, timeouts, other, closes;
};

static struct idle ID;

static void id_closed(int err, int64_t value, void *arg)
{
	(void)err;
	(void)value;
	(void)arg;
	ID.closes++;
}

static void id_data(int err, const void *data, size_t len, void *arg)
{
	(void)data;
	(void)arg;
	if (err == -ETIMEDOUT) {
		ID.timeouts++;
		cr_assert_eq(rl_cb_net_read_start(ID.c, id_data, NULL), -EPIPE);
		cr_assert_eq(rl_cb_net_close(ID.c, id_closed, NULL), 0);
		return;
	}
	if (err || !len) {
		ID.other++;
		return;
	}
	cr_assert_eq(ID.timeouts, 0, "data after the timeout");
	ID.datas++;
	cr_assert_eq(rl_cb_net_set_timeout(ID.c, 0), 0);
	cr_assert_eq(rl_cb_net_set_timeout(ID.c, RL_TIMEOUT_MAX_MS + 1),
		     -EINVAL);
	cr_assert_eq(rl_cb_net_set_timeout(ID.c, 30), 0);
}

BACKEND_TEST(callback_attack, idle_timeout_toggled_inside_callbacks)
{
	alarm(60);
	rl_loop *loop = tloop(tp);
	int s, peer;

	memset(&ID, 0, sizeof(ID));
	cr_assert_eq(rl_cb_ctx_open(loop, &g_cbs), 0);
	tpair(AF_INET, &s, &peer);
	cr_assert_eq(rl_cb_net_wrap(g_cbs, s, &ID.c), 0);
	cr_assert_eq(rl_cb_net_read_start(ID.c, id_data, NULL), 0);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(send(peer, "x", 1, 0), 1);
		trun_until(loop, ID.datas == i + 1);
	}
	trun_until(loop, ID.closes == 1);
	cr_assert_eq(ID.timeouts, 1);
	cr_assert_eq(ID.other, 0);
	cr_assert_eq(ID.datas, 3);
	close(peer);
	cr_assert_eq(rl_cb_ctx_close(g_cbs), 0);
	tclose(loop);
}

/* The loop's close with a paused connection holding received data, a
 * connection closed inside its -ECANCELED, and a server: every callback
 * once, the close's dones included (they come from microtasks the close
 * must still run), and nothing left. */
struct lc2 {
	int errs, closes, conns, notices;
	rl_cb_conn *paused, *reader;
};

static struct lc2 L2;

static void l2_closed(int err, int64_t value, void *arg)
{
	(void)err;
	(void)value;
	(void)arg;
	L2.closes++;
}

static void l2_data(int err, const void *data, size_t len, void *arg)
{
	rl_cb_conn *c = arg;

	(void)data;
	if (err < 0) {
		L2.errs++;
		cr_assert_eq(err, -ECANCELED);
		cr_assert_eq(rl_cb_net_close(c, l2_closed, NULL), 0);
		return;
	}
	if (len && c == L2.paused)
		rl_cb_net_read_stop(c);
}

static void l2_conn(int err, rl_cb_conn *c, void *arg)
{
	(void)c;
	(void)arg;
	if (err)
		L2.notices++;
	else
		L2.conns++;
}

BACKEND_TEST(callback_attack, loop_close_runs_the_dones_of_closes_it_caused)
{
	alarm(60);
	int base = tfd_count();
	rl_loop *loop = tloop(tp);
	rl_cb_server *srv;
	struct rl_addr a;
	int s1, p1, s2, p2;
	static char chunk[65536];

	memset(&L2, 0, sizeof(L2));
	cr_assert_eq(rl_cb_ctx_open(loop, &g_cbs), 0);
	taddr(&a, AF_INET);
	cr_assert_eq(rl_cb_net_listen(g_cbs, &a, 0, 0, l2_conn, NULL, &srv), 0);
	tpair(AF_UNIX, &s1, &p1);
	tpair(AF_INET, &s2, &p2);
	cr_assert_eq(rl_cb_net_wrap(g_cbs, s1, &L2.paused), 0);
	cr_assert_eq(rl_cb_net_wrap(g_cbs, s2, &L2.reader), 0);
	cr_assert_eq(rl_cb_net_read_start(L2.paused, l2_data, L2.paused), 0);
	cr_assert_eq(rl_cb_net_read_start(L2.reader, l2_data, L2.reader), 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(send(p1, chunk, 16384, 0), 16384);
	trun_for(loop, 30);
	cr_assert_eq(rl_loop_close(loop), 0);
	/* The reader got -ECANCELED and closed itself from there; the
	 * paused one hears nothing (it is not reading). */
	cr_assert_eq(L2.errs, 1);
	cr_assert_eq(L2.closes, 1);
	cr_assert_eq(L2.notices, 1); /* the server: accepting ended */
	cr_assert_eq(L2.conns, 0);
	close(p1);
	close(p2);
	cr_assert_eq(tfd_count(), base);
}

/* ------------------------------------ the context closed during the close */

/*
 * rl_cb_ctx_close() from a microtask that runs while the loop's close
 * runs the context's own close hook (its rl_run() for the cancelled
 * requests' callbacks): nothing is in flight and no callback of the
 * context runs at that moment, but the hook is still working with the
 * context and comes back to it at the end of the close. The call must be
 * refused (-EBUSY), as the promise layer refuses it once the loop's
 * close has begun, never free the context under the hook.
 */
static rl_task close_task;
static int close_task_ran, close_task_ret = 1;
static int cancelled_reads;

static void close_ctx_task(rl_task *task)
{
	(void)task;
	close_task_ran++;
	close_task_ret = rl_cb_ctx_close(g_cbs);
}

static void read_cancelled(int err, int64_t value, void *arg)
{
	(void)value;
	(void)arg;
	cr_assert_eq(err, -ECANCELED);
	cancelled_reads++;
	rl_task_queue(g_loop, &close_task, close_ctx_task);
}

BACKEND_TEST(callback_attack, ctx_close_during_the_loop_close_is_refused)
{
	alarm(60);
	int base = tfd_count();
	rl_loop *loop = tloop(tp);
	int p[2];
	char b;

	g_loop = loop;
	cr_assert_eq(rl_cb_ctx_open(loop, &g_cbs), 0);
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	cr_assert_eq(
		rl_cb_fs_read(g_cbs, p[0], &b, 1, -1, read_cancelled, NULL), 0);
	trun_for(loop, 5);
	cr_assert_eq(rl_loop_close(loop), 0);
	cr_assert_eq(cancelled_reads, 1);
	cr_assert_eq(close_task_ran, 1);
	cr_assert_eq(close_task_ret, -EBUSY);
	close(p[0]);
	close(p[1]);
	cr_assert_eq(tfd_count(), base);
}

/* A server whose connection callback closes every connection at once
 * (never read, never written), under a burst of clients: each close's
 * done exactly once, every socket closed (no fd left), and the clients
 * see the end. */
struct burst {
	int conns, closes, notices;
};

static struct burst BU;

static void bu_closed(int err, int64_t value, void *arg)
{
	(void)err;
	(void)value;
	(void)arg;
	BU.closes++;
}

static void bu_conn(int err, rl_cb_conn *c, void *arg)
{
	(void)arg;
	if (err) {
		BU.notices++;
		return;
	}
	BU.conns++;
	cr_assert_eq(rl_cb_net_close(c, bu_closed, NULL), 0);
	/* Trimming the pool from here frees nothing in use. */
	rl_cb_ctx_trim(g_cbs, 0);
}

BACKEND_TEST(callback_attack, connection_callback_closes_every_connection)
{
	alarm(60);
	int n = scaled(200, 20);
	rl_loop *loop = tloop(tp);
	rl_cb_server *srv;
	struct rl_addr a;
	int *cl = calloc((size_t)n, sizeof(int));
	char b;

	memset(&BU, 0, sizeof(BU));
	cr_assert_eq(rl_cb_ctx_open(loop, &g_cbs), 0);
	taddr(&a, AF_INET);
	cr_assert_eq(rl_cb_net_listen(g_cbs, &a, 0, 0, bu_conn, NULL, &srv), 0);
	rl_net_local_addr(rl_cb_net_server_fd(srv), &a);
	for (int i = 0; i < n; i++) {
		cl[i] = tconnect(&a);
		rl_run(loop, RL_RUN_NOWAIT);
	}
	trun_until(loop, BU.closes == n);
	trun_for(loop, 10);
	cr_assert_eq(BU.conns, n);
	cr_assert_eq(BU.closes, n);
	cr_assert_eq(BU.notices, 0);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(read(cl[i], &b, 1), 0);
		close(cl[i]);
	}
	cr_assert_eq(rl_cb_net_server_close(srv, NULL, NULL), 0);
	trun(loop);
	free(cl);
	cr_assert_eq(rl_cb_ctx_close(g_cbs), 0);
	tclose(loop);
}
