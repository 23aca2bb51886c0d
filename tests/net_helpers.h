/* SPDX-License-Identifier: MIT */
/*
 * net_helpers.h - what the socket tests share: loopback listeners and
 * connected pairs made with plain syscalls (the peer side of a test), a
 * data pattern whose order can be checked, collectors for streams, and a
 * bounded "run until".
 *
 * Only loopback addresses. Every wait is bounded: trun_until() fails the
 * test after 20 s instead of hanging, and keeps a timer running so that
 * RL_RUN_ONCE returns even when nothing else happens.
 */
#ifndef RL_TEST_NET_HELPERS_H
#define RL_TEST_NET_HELPERS_H

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

#define TNET_FAMILIES 3
static const int tnet_family[TNET_FAMILIES] = { AF_INET, AF_INET6, AF_UNIX };

static inline const char *tnet_name(int family)
{
	return family == AF_INET    ? "ipv4"
	       : family == AF_INET6 ? "ipv6"
				    : "unix";
}

/* An address to listen on: port 0 on loopback, or a fresh Unix path. */
static inline void taddr(struct rl_addr *a, int family)
{
	static int seq;
	char name[32];

	if (family == AF_UNIX) {
		snprintf(name, sizeof(name), "sock%d", seq++);
		cr_assert_eq(rl_addr_unix(a, tpath(name)), 0);
		unlink(tpath(name));
		return;
	}
	cr_assert_eq(rl_addr_ip(a, family == AF_INET ? "127.0.0.1" : "::1", 0),
		     0);
}

/* A listening socket; *a is then its real address (its port). */
static inline int tlisten(struct rl_addr *a, int family, int backlog)
{
	int fd;

	taddr(a, family);
	fd = rl_net_listen(a, backlog, RL_LISTEN_NODELAY);
	cr_assert_geq(fd, 0, "listen %s: %s", tnet_name(family),
		      rl_strerror(fd));
	if (family != AF_UNIX)
		cr_assert_eq(rl_net_local_addr(fd, a), 0);
	return fd;
}

/* A blocking connect with plain syscalls. */
static inline int tconnect(const struct rl_addr *a)
{
	int fd = socket(a->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(connect(fd, &a->sa, a->len), 0, "connect: %s",
		     strerror(errno));
	return fd;
}

/* A connected pair: *loop_side is non-blocking (as the loop's sockets
 * are), *peer blocking. */
static inline void tpair(int family, int *loop_side, int *peer)
{
	struct rl_addr a;
	int lfd = tlisten(&a, family, 8);

	*peer = tconnect(&a);
	*loop_side = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	cr_assert_geq(*loop_side, 0);
	close(lfd);
	if (family == AF_UNIX)
		unlink(((struct sockaddr_un *)(void *)&a.ss)->sun_path);
}

/* The pattern: a byte that depends on its offset, so a lost, doubled or
 * reordered chunk shows. */
static inline unsigned char tpat(size_t off)
{
	return (unsigned char)(off * 7 + off / 251);
}

static inline void tpat_fill(void *buf, size_t off, size_t len)
{
	unsigned char *b = buf;

	for (size_t i = 0; i < len; i++)
		b[i] = tpat(off + i);
}

static inline void tpat_check(const void *buf, size_t off, size_t len)
{
	const unsigned char *b = buf;

	for (size_t i = 0; i < len; i++)
		if (b[i] != tpat(off + i))
			cr_assert_fail("byte %zu is %u, want %u", off + i, b[i],
				       tpat(off + i));
}

/* A stream receiver that checks the pattern as data comes. */
struct tsink {
	rl_req req;
	size_t bytes;
	int items;
	int finals;
	int items_after_final;
	int64_t final;
	bool check; /* data is the pattern */
};

static inline void tsink_cb(rl_req *req)
{
	struct tsink *s = req->data;

	if (rl_req_more(req)) {
		cr_assert_gt(req->result, 0);
		cr_assert_eq((size_t)req->result, req->len);
		cr_assert_not_null(req->buf);
		if (s->finals)
			s->items_after_final++;
		if (s->check)
			tpat_check(req->buf, s->bytes, req->len);
		s->bytes += req->len;
		s->items++;
		return;
	}
	s->finals++;
	s->final = req->result;
}

static inline void tsink_start(rl_loop *loop, struct tsink *s, int fd,
			       bool check)
{
	memset(s, 0, sizeof(*s));
	s->req.data = s;
	s->check = check;
	cr_assert_eq(rl_net_recv_stream(loop, &s->req, fd, tsink_cb), 0);
}

/* An accept stream that keeps the fds it gets. */
#define TACC_MAX 64
struct tacc {
	rl_req req;
	int fds[TACC_MAX];
	int n;
	int finals;
	int64_t final;
};

static inline void tacc_cb(rl_req *req)
{
	struct tacc *a = req->data;

	if (rl_req_more(req)) {
		cr_assert_geq(req->result, 0);
		cr_assert_lt(a->n, TACC_MAX);
		a->fds[a->n++] = (int)req->result;
		return;
	}
	a->finals++;
	a->final = req->result;
}

static inline void tacc_start(rl_loop *loop, struct tacc *a, int lfd)
{
	memset(a, 0, sizeof(*a));
	a->req.data = a;
	cr_assert_eq(rl_net_accept(loop, &a->req, lfd, tacc_cb), 0);
}

static inline void tacc_close_all(struct tacc *a)
{
	for (int i = 0; i < a->n; i++)
		close(a->fds[i]);
	a->n = 0;
}

static inline void tguard_cb(rl_timer *t, int status)
{
	(void)t;
	(void)status;
}

/* Runs the loop until cond holds, failing the test after 20 s. */
#define trun_until(loop, cond)                                         \
	do {                                                           \
		rl_timer guard_;                                       \
		uint64_t t0_ = tnow_ms();                              \
		rl_timer_init(&guard_);                                \
		rl_timer_start((loop), &guard_, 10, 10, tguard_cb);    \
		while (!(cond)) {                                      \
			cr_assert_lt(tnow_ms() - t0_, 20000,           \
				     "timed out waiting for " #cond);  \
			cr_assert_geq(rl_run((loop), RL_RUN_ONCE), 0); \
		}                                                      \
		rl_timer_stop((loop), &guard_);                        \
	} while (0)

/*
 * A client that never reads the answers: sends 64 KiB chunks on the
 * non-blocking fd, running the loop between them, until 50 sends in a row
 * (a millisecond apart) took nothing (the server stopped reading, TCP
 * holds the client back) or limit bytes went. With off, the chunks carry
 * the pattern from *off on (tpat()), and *off moves on; without, zeros.
 * each(arg), when given, runs after every turn of the loop. Returns the
 * bytes sent.
 */
static inline size_t tflood_from(rl_loop *loop, int fd, size_t *off,
				 size_t limit, void (*each)(void *arg),
				 void *arg)
{
	enum { CHUNK = 65536 };
	unsigned char *chunk = calloc(1, CHUNK);
	size_t sent = 0;

	cr_assert_not_null(chunk);
	for (int idle = 0; idle < 50 && sent < limit;) {
		size_t want = limit - sent < CHUNK ? limit - sent : CHUNK;
		ssize_t w;

		if (off)
			tpat_fill(chunk, *off, want);
		w = send(fd, chunk, want, MSG_DONTWAIT);
		if (w > 0) {
			sent += (size_t)w;
			if (off)
				*off += (size_t)w;
			idle = 0;
		} else {
			idle++;
		}
		rl_run(loop, RL_RUN_NOWAIT);
		if (each)
			each(arg);
		if (w <= 0)
			usleep(1000);
	}
	free(chunk);
	return sent;
}

static inline size_t tflood(rl_loop *loop, int fd, size_t limit,
			    void (*each)(void *arg), void *arg)
{
	return tflood_from(loop, fd, NULL, limit, each, arg);
}

/* Runs the loop for about ms milliseconds. */
static inline void trun_for(rl_loop *loop, uint64_t ms)
{
	uint64_t end = tnow_ms() + ms;

	trun_until(loop, tnow_ms() >= end);
}

#endif
