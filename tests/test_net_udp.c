/* SPDX-License-Identifier: MIT */
/*
 * test_net_udp.c - datagrams: rl_net_udp(), rl_net_sendmsg() and
 * rl_net_recvmsg() over UDP (IPv4, IPv6) and Unix datagram sockets, on
 * every backend configuration.
 */
#include <fcntl.h>

#include "net_helpers.h"

struct tmsg {
	rl_req req;
	struct msghdr msg;
	struct iovec iov;
	struct sockaddr_storage name;
	char buf[256];
	int calls;
	int64_t result;
};

static void tmsg_cb(rl_req *req)
{
	struct tmsg *m = req->data;

	cr_assert_eq(rl_req_more(req), 0);
	m->calls++;
	m->result = req->result;
}

/* A message of len bytes at buf, to (or from) addr when it is not NULL. */
static void tmsg_init(struct tmsg *m, const void *data, size_t len,
		      const struct rl_addr *to)
{
	memset(m, 0, sizeof(*m));
	m->req.data = m;
	if (data)
		memcpy(m->buf, data, len);
	m->iov.iov_base = m->buf;
	m->iov.iov_len = len;
	m->msg.msg_iov = &m->iov;
	m->msg.msg_iovlen = 1;
	if (to) {
		memcpy(&m->name, &to->ss, to->len);
		m->msg.msg_name = &m->name;
		m->msg.msg_namelen = to->len;
	} else {
		m->msg.msg_name = &m->name;
		m->msg.msg_namelen = sizeof(m->name);
	}
}

/* A bound datagram socket and its address. */
static int tudp(struct rl_addr *a, int family, const char *name)
{
	int fd;

	if (family == AF_UNIX) {
		cr_assert_eq(rl_addr_unix(a, tpath(name)), 0);
		unlink(tpath(name));
	} else {
		rl_addr_ip(a, family == AF_INET ? "127.0.0.1" : "::1", 0);
	}
	fd = rl_net_udp(a, 0);
	cr_assert_geq(fd, 0, "udp %s: %s", tnet_name(family), rl_strerror(fd));
	cr_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
	if (family != AF_UNIX)
		cr_assert_eq(rl_net_local_addr(fd, a), 0);
	return fd;
}

BACKEND_TEST(net_udp, ping_pong_every_family)
{
	rl_loop *loop = tloop(tp);
	struct rl_addr a, b;
	struct tmsg rx, tx, rx2, tx2;
	int fa, fb;

	for (int i = 0; i < TNET_FAMILIES; i++) {
		int f = tnet_family[i];

		fa = tudp(&a, f, "dga");
		fb = tudp(&b, f, "dgb");
		/* a waits; b sends to it. */
		tmsg_init(&rx, NULL, sizeof(rx.buf), NULL);
		cr_assert_eq(
			rl_net_recvmsg(loop, &rx.req, fa, &rx.msg, tmsg_cb), 0);
		trun_for(loop, 20);
		cr_assert_eq(rx.calls, 0);
		tmsg_init(&tx, "ping", 4, &a);
		cr_assert_eq(
			rl_net_sendmsg(loop, &tx.req, fb, &tx.msg, tmsg_cb), 0);
		trun_until(loop, rx.calls == 1 && tx.calls == 1);
		cr_assert_eq(tx.result, 4, "%s: %s", tnet_name(f),
			     rl_strerror((int)tx.result));
		cr_assert_eq(rx.result, 4);
		cr_assert_eq(memcmp(rx.buf, "ping", 4), 0);
		/* The sender's address came with it: reply there. */
		cr_assert_eq(rx.msg.msg_namelen, b.len);
		cr_assert_eq(memcmp(&rx.name, &b.ss, b.len), 0);
		tmsg_init(&rx2, NULL, sizeof(rx2.buf), NULL);
		cr_assert_eq(
			rl_net_recvmsg(loop, &rx2.req, fb, &rx2.msg, tmsg_cb),
			0);
		tmsg_init(&tx2, "pong!", 5, NULL);
		memcpy(&tx2.name, &rx.name, rx.msg.msg_namelen);
		tx2.msg.msg_namelen = rx.msg.msg_namelen;
		cr_assert_eq(
			rl_net_sendmsg(loop, &tx2.req, fa, &tx2.msg, tmsg_cb),
			0);
		trun_until(loop, rx2.calls == 1 && tx2.calls == 1);
		cr_assert_eq(rx2.result, 5);
		cr_assert_eq(memcmp(rx2.buf, "pong!", 5), 0);
		close(fa);
		close(fb);
	}
	tclose(loop);
}

BACKEND_TEST(net_udp, truncation_and_empty_datagrams)
{
	rl_loop *loop = tloop(tp);
	struct rl_addr a, b;
	struct tmsg rx, tx;
	int fa, fb;

	fa = tudp(&a, AF_INET, "x");
	fb = tudp(&b, AF_INET, "y");
	tmsg_init(&tx, "0123456789abcdef", 16, &a);
	cr_assert_eq(rl_net_sendmsg(loop, &tx.req, fb, &tx.msg, tmsg_cb), 0);
	tmsg_init(&rx, NULL, 6, NULL);
	cr_assert_eq(rl_net_recvmsg(loop, &rx.req, fa, &rx.msg, tmsg_cb), 0);
	trun_until(loop, rx.calls == 1 && tx.calls == 1);
	cr_assert_eq(rx.result, 6);
	cr_assert(rx.msg.msg_flags & MSG_TRUNC);
	cr_assert_eq(memcmp(rx.buf, "012345", 6), 0);
	/* An empty datagram is a datagram: 0, not an end. */
	tmsg_init(&tx, NULL, 0, &a);
	cr_assert_eq(rl_net_sendmsg(loop, &tx.req, fb, &tx.msg, tmsg_cb), 0);
	tmsg_init(&rx, NULL, sizeof(rx.buf), NULL);
	cr_assert_eq(rl_net_recvmsg(loop, &rx.req, fa, &rx.msg, tmsg_cb), 0);
	trun_until(loop, rx.calls == 1 && tx.calls == 1);
	cr_assert_eq(tx.result, 0);
	cr_assert_eq(rx.result, 0);
	cr_assert_eq(rx.msg.msg_flags & MSG_TRUNC, 0);
	close(fa);
	close(fb);
	tclose(loop);
}

/* A connected UDP socket whose peer's port is closed: the ICMP error
 * comes back as -ECONNREFUSED on the next operation. */
BACKEND_TEST(net_udp, connected_to_a_closed_port)
{
	rl_loop *loop = tloop(tp);
	struct rl_addr a, gone;
	struct tmsg rx, tx;
	int fa, fg;

	fa = tudp(&a, AF_INET, "c");
	fg = tudp(&gone, AF_INET, "g");
	close(fg);
	cr_assert_eq(connect(fa, &gone.sa, gone.len), 0);
	tmsg_init(&rx, NULL, sizeof(rx.buf), NULL);
	cr_assert_eq(rl_net_recvmsg(loop, &rx.req, fa, &rx.msg, tmsg_cb), 0);
	tmsg_init(&tx, "x", 1, NULL);
	tx.msg.msg_name = NULL;
	tx.msg.msg_namelen = 0;
	cr_assert_eq(rl_net_sendmsg(loop, &tx.req, fa, &tx.msg, tmsg_cb), 0);
	trun_until(loop, rx.calls == 1 && tx.calls == 1);
	cr_assert_eq(tx.result, 1);
	cr_assert_eq(rx.result, -ECONNREFUSED, "%s",
		     rl_strerror((int)rx.result));
	close(fa);
	tclose(loop);
}

BACKEND_TEST(net_udp, errors_cancel_and_close)
{
	rl_loop *loop = tloop(tp);
	struct rl_addr a, big;
	struct tmsg rx, rx2, tx;
	static char huge[70000];
	int fa;

	cr_assert_eq(rl_net_udp(NULL, 0), -EFAULT);
	rl_addr_ip(&a, "127.0.0.1", 0);
	cr_assert_eq(rl_net_udp(&a, RL_LISTEN_V6ONLY), -EINVAL);
	cr_assert_eq(rl_net_udp(&a, RL_LISTEN_NODELAY), -EINVAL);
	fa = tudp(&a, AF_INET, "e");
	cr_assert_eq(rl_net_udp(&a, 0), -EADDRINUSE);
	tmsg_init(&rx, NULL, 8, NULL);
	cr_assert_eq(rl_net_recvmsg(loop, &rx.req, -1, &rx.msg, tmsg_cb),
		     -EBADF);
	cr_assert_eq(rl_net_recvmsg(loop, &rx.req, fa, NULL, tmsg_cb), -EFAULT);
	/* Larger than any UDP datagram. */
	tmsg_init(&tx, NULL, 0, &a);
	tx.iov.iov_base = huge;
	tx.iov.iov_len = sizeof(huge);
	cr_assert_eq(rl_net_sendmsg(loop, &tx.req, fa, &tx.msg, tmsg_cb), 0);
	trun_until(loop, tx.calls == 1);
	cr_assert_eq(tx.result, -EMSGSIZE);
	/* To an address of the wrong family. */
	rl_addr_ip(&big, "::1", 9);
	tmsg_init(&tx, "x", 1, &big);
	cr_assert_eq(rl_net_sendmsg(loop, &tx.req, fa, &tx.msg, tmsg_cb), 0);
	trun_until(loop, tx.calls == 1);
	cr_assert(tx.result == -EAFNOSUPPORT || tx.result == -EINVAL, "%s",
		  rl_strerror((int)tx.result));
	/* A receive nobody sends to: cancelled; another one left to the
	 * loop's close. */
	tmsg_init(&rx, NULL, 8, NULL);
	cr_assert_eq(rl_net_recvmsg(loop, &rx.req, fa, &rx.msg, tmsg_cb), 0);
	trun_for(loop, 10);
	cr_assert_eq(rl_cancel(loop, &rx.req), 0);
	trun_until(loop, rx.calls == 1);
	cr_assert_eq(rx.result, -ECANCELED);
	tmsg_init(&rx2, NULL, 8, NULL);
	cr_assert_eq(rl_net_recvmsg(loop, &rx2.req, fa, &rx2.msg, tmsg_cb), 0);
	trun_for(loop, 10);
	cr_assert_eq(rl_loop_close(loop), 0);
	cr_assert_eq(rx2.calls, 1);
	cr_assert_eq(rx2.result, -ECANCELED);
	close(fa);
}
