/* SPDX-License-Identifier: MIT */
/*
 * test_net.c - sockets: every operation's success and error paths over
 * IPv4, IPv6 and Unix streams, on every backend configuration, with the
 * callback counts that the stream contract promises.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>

#include "net_helpers.h"

/* ------------------------------------------------------------ addresses */

Test(net, addresses)
{
	struct rl_addr a;
	char buf[160], longp[200];

	cr_assert_eq(rl_addr_ip(&a, "127.0.0.1", 8080), 0);
	cr_assert_eq(a.sa.sa_family, AF_INET);
	cr_assert_eq(a.len, sizeof(struct sockaddr_in));
	cr_assert_eq(rl_addr_port(&a), 8080);
	cr_assert_eq(rl_addr_format(&a, buf, sizeof(buf)), 14);
	cr_assert_str_eq(buf, "127.0.0.1:8080");

	cr_assert_eq(rl_addr_ip(&a, "::1", 443), 0);
	cr_assert_eq(a.sa.sa_family, AF_INET6);
	cr_assert_eq(rl_addr_port(&a), 443);
	rl_addr_format(&a, buf, sizeof(buf));
	cr_assert_str_eq(buf, "[::1]:443");
	cr_assert_eq(rl_addr_ip(&a, "[::1]", 1), 0);
	cr_assert_eq(a.sa.sa_family, AF_INET6);

	/* Names would need a lookup, which can block: refused. */
	cr_assert_eq(rl_addr_ip(&a, "localhost", 1), -EINVAL);
	cr_assert_eq(rl_addr_ip(&a, "1.2.3", 1), -EINVAL);
	cr_assert_eq(rl_addr_ip(&a, "", 1), -EINVAL);
	cr_assert_eq(rl_addr_ip(NULL, "::1", 1), -EINVAL);

	cr_assert_eq(rl_addr_unix(&a, "/tmp/x.sock"), 0);
	cr_assert_eq(a.sa.sa_family, AF_UNIX);
	rl_addr_format(&a, buf, sizeof(buf));
	cr_assert_str_eq(buf, "/tmp/x.sock");
	cr_assert_eq(rl_addr_port(&a), -EAFNOSUPPORT);
	cr_assert_eq(rl_addr_unix(&a, "@ringloop-abstract"), 0);
	rl_addr_format(&a, buf, sizeof(buf));
	cr_assert_str_eq(buf, "@ringloop-abstract");
	memset(longp, 'x', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	cr_assert_eq(rl_addr_unix(&a, longp), -ENAMETOOLONG);
	cr_assert_eq(rl_addr_unix(&a, ""), -EINVAL);

	/* A short buffer still gets a terminated prefix and the length. */
	rl_addr_ip(&a, "127.0.0.1", 80);
	cr_assert_eq(rl_addr_format(&a, buf, 4), 12);
	cr_assert_str_eq(buf, "127");
}

Test(net, listen_errors)
{
	struct rl_addr a, b;
	int fd, fd2;

	cr_assert_eq(rl_net_listen(NULL, 0, 0), -EFAULT);
	memset(&a, 0, sizeof(a));
	cr_assert_eq(rl_net_listen(&a, 0, 0), -EAFNOSUPPORT);
	rl_addr_ip(&a, "127.0.0.1", 0);
	cr_assert_eq(rl_net_listen(&a, 0, RL_LISTEN_V6ONLY), -EINVAL);
	cr_assert_eq(rl_net_listen(&a, 0, 1u << 20), -EINVAL);

	fd = rl_net_listen(&a, 0, 0);
	cr_assert_geq(fd, 0);
	cr_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
	cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	cr_assert_eq(rl_net_local_addr(fd, &b), 0);
	cr_assert_gt(rl_addr_port(&b), 0);
	/* The same port again, without SO_REUSEPORT. */
	fd2 = rl_net_listen(&b, 0, 0);
	cr_assert_eq(fd2, -EADDRINUSE);
	close(fd);

	/* A Unix path that exists. */
	rl_addr_unix(&a, tpath("taken"));
	fd = rl_net_listen(&a, 0, 0);
	cr_assert_geq(fd, 0);
	cr_assert_eq(rl_net_listen(&a, 0, 0), -EADDRINUSE);
	cr_assert_eq(rl_net_listen(&a, 0, RL_LISTEN_REUSEPORT), -EOPNOTSUPP);
	close(fd);

	/* Two listeners on one port with SO_REUSEPORT. */
	rl_addr_ip(&a, "::1", 0);
	fd = rl_net_listen(&a, 0, RL_LISTEN_REUSEPORT | RL_LISTEN_V6ONLY);
	cr_assert_geq(fd, 0);
	rl_net_local_addr(fd, &b);
	fd2 = rl_net_listen(&b, 0, RL_LISTEN_REUSEPORT | RL_LISTEN_V6ONLY);
	cr_assert_geq(fd2, 0);
	close(fd);
	close(fd2);
	cr_assert_eq(rl_net_nodelay(-1, 1), -EBADF);
}

/* ------------------------------------------------------ bad arguments */

BACKEND_TEST(net, bad_arguments_fail_synchronously)
{
	rl_loop *loop = tloop(tp);
	struct tseen seen = { 0 };
	struct rl_addr a, bad;
	struct rl_options opt;
	rl_loop *l2;
	rl_req r;
	char c;
	int lfd;

	rl_req_init(&r);
	r.data = &seen;
	cr_assert_eq(rl_net_accept(loop, &r, -1, tseen_cb), -EBADF);
	cr_assert_eq(rl_net_accept(loop, &r, 0, NULL), -EINVAL);
	cr_assert_eq(rl_net_accept(NULL, &r, 0, tseen_cb), -EINVAL);
	cr_assert_eq(rl_net_recv(loop, &r, -1, &c, 1, tseen_cb), -EBADF);
	cr_assert_eq(rl_net_recv(loop, &r, 0, NULL, 5, tseen_cb), -EFAULT);
	cr_assert_eq(rl_net_recv_stream(loop, &r, -1, tseen_cb), -EBADF);
	cr_assert_eq(rl_net_send(loop, &r, 0, NULL, 5, 0, tseen_cb), -EFAULT);
	cr_assert_eq(rl_net_send(loop, &r, -1, &c, 1, 0, tseen_cb), -EBADF);
	cr_assert_eq(rl_net_send(loop, &r, 0, &c, 1, 1u << 9, tseen_cb),
		     -EINVAL);
	cr_assert_eq(rl_net_shutdown(loop, &r, 0, 7, tseen_cb), -EINVAL);
	cr_assert_eq(rl_net_shutdown(loop, &r, -1, SHUT_WR, tseen_cb), -EBADF);
	cr_assert_eq(rl_net_connect(loop, &r, NULL, 0, 0, tseen_cb), -EFAULT);
	memset(&bad, 0, sizeof(bad));
	cr_assert_eq(rl_net_connect(loop, &r, &bad, 0, 0, tseen_cb),
		     -EAFNOSUPPORT);
	rl_addr_ip(&a, "127.0.0.1", 1);
	cr_assert_eq(rl_net_connect(loop, &r, &a, 1u << 5, 0, tseen_cb),
		     -EINVAL);
	bad = a;
	bad.len = 1;
	cr_assert_eq(rl_net_connect(loop, &r, &bad, 0, 0, tseen_cb), -EINVAL);
	cr_assert_eq(rl_net_buf_release(loop, &c), -EINVAL);
	cr_assert_null(rl_net_buf_hold(&r));
	cr_assert_eq(rl_req_more(&r), 0);

	/* A request in flight cannot be submitted again. */
	lfd = tlisten(&a, AF_INET, 4);
	cr_assert_eq(rl_net_accept(loop, &r, lfd, tseen_cb), 0);
	cr_assert_eq(rl_net_accept(loop, &r, lfd, tseen_cb), -EBUSY);
	cr_assert_eq(rl_net_recv(loop, &r, lfd, &c, 1, tseen_cb), -EBUSY);
	cr_assert_eq(rl_cancel(loop, &r), 0);
	cr_assert_eq(rl_cancel(loop, &r), -EALREADY);
	trun(loop);
	cr_assert_eq(seen.calls, 1);
	cr_assert_eq(seen.result, -ECANCELED);
	close(lfd);

	/* Provided buffers: a power of two, at most 32768. */
	rl_options_init(&opt);
	opt.backend = tp->backend;
	opt.net_bufs = 3;
	cr_assert_eq(rl_loop_open(&l2, &opt), -EINVAL);
	opt.net_bufs = 65536;
	cr_assert_eq(rl_loop_open(&l2, &opt), -EINVAL);
	tclose(loop);
}

/* ---------------------------------------------------------------- echo */

struct tdone {
	rl_req req;
	int calls;
	int64_t result;
};

static void tdone_cb(rl_req *req)
{
	struct tdone *d = req->data;

	cr_assert_eq(rl_req_more(req), 0);
	d->calls++;
	d->result = req->result;
}

static void tdone_init(struct tdone *d)
{
	memset(d, 0, sizeof(*d));
	d->req.data = d;
}

/* Accept, connect, a stream of data one way, a reply the other way, half
 * close, end of stream both ways: over every family. */
static void echo_one_family(rl_loop *loop, int family)
{
	enum { LEN = 300000 };
	struct rl_addr a, peer;
	struct tacc acc;
	struct tsink sink;
	struct tdone conn, snd, shut, rcv;
	char *data = malloc(LEN), reply[16];
	int lfd, cfd, sfd;

	tpat_fill(data, 0, LEN);
	lfd = tlisten(&a, family, 16);
	tacc_start(loop, &acc, lfd);
	tdone_init(&conn);
	cr_assert_eq(rl_net_connect(loop, &conn.req, &a, RL_CONNECT_NODELAY,
				    5000, tdone_cb),
		     0);
	trun_until(loop, conn.calls == 1 && acc.n == 1);
	cr_assert_geq(conn.result, 0, "%s connect: %s", tnet_name(family),
		      rl_strerror((int)conn.result));
	cfd = (int)conn.result;
	sfd = acc.fds[0];
	cr_assert(fcntl(sfd, F_GETFL) & O_NONBLOCK);
	cr_assert(fcntl(sfd, F_GETFD) & FD_CLOEXEC);
	cr_assert(fcntl(cfd, F_GETFL) & O_NONBLOCK);
	cr_assert_eq(rl_net_peer_addr(cfd, &peer), 0);
	cr_assert_eq(peer.sa.sa_family, family);
	if (family != AF_UNIX)
		cr_assert_eq(rl_addr_port(&peer), rl_addr_port(&a));

	tsink_start(loop, &sink, sfd, true);
	tdone_init(&snd);
	cr_assert_eq(rl_net_send(loop, &snd.req, cfd, data, LEN, 0, tdone_cb),
		     0);
	trun_until(loop, snd.calls == 1);
	cr_assert_eq(snd.result, LEN);
	tdone_init(&shut);
	cr_assert_eq(rl_net_shutdown(loop, &shut.req, cfd, SHUT_WR, tdone_cb),
		     0);
	/* io_uring runs a shutdown on an io-wq worker, so the peer may see the
	 * end of the stream before the shutdown's own completion arrives: the
	 * two fds' completions have no order between them. */
	trun_until(loop, sink.finals == 1 && shut.calls == 1);
	cr_assert_eq(shut.calls, 1);
	cr_assert_eq(shut.result, 0);
	cr_assert_eq(sink.final, 0, "%s: %s", tnet_name(family),
		     rl_strerror((int)sink.final));
	cr_assert_eq(sink.bytes, LEN);
	cr_assert_geq(sink.items, 1);
	cr_assert_eq(sink.items_after_final, 0);

	/* The other way, after the half close: the client still reads. */
	tdone_init(&snd);
	cr_assert_eq(rl_net_send(loop, &snd.req, sfd, "bye", 3, 0, tdone_cb),
		     0);
	tdone_init(&rcv);
	cr_assert_eq(rl_net_recv(loop, &rcv.req, cfd, reply, sizeof(reply),
				 tdone_cb),
		     0);
	trun_until(loop, rcv.calls == 1 && snd.calls == 1);
	cr_assert_eq(snd.result, 3);
	cr_assert_eq(rcv.result, 3);
	cr_assert_eq(memcmp(reply, "bye", 3), 0);
	close(sfd);
	tdone_init(&rcv);
	cr_assert_eq(rl_net_recv(loop, &rcv.req, cfd, reply, sizeof(reply),
				 tdone_cb),
		     0);
	trun_until(loop, rcv.calls == 1);
	cr_assert_eq(rcv.result, 0);

	cr_assert_eq(rl_cancel(loop, &acc.req), 0);
	trun_until(loop, acc.finals == 1);
	cr_assert_eq(acc.final, -ECANCELED);
	cr_assert_eq(acc.n, 1);
	cr_assert_eq(conn.calls, 1);
	close(cfd);
	close(lfd);
	free(data);
}

BACKEND_TEST(net, echo_every_family)
{
	rl_loop *loop = tloop(tp);

	for (int i = 0; i < TNET_FAMILIES; i++)
		echo_one_family(loop, tnet_family[i]);
	tclose(loop);
}

/* ------------------------------------------------------------- connect */

BACKEND_TEST(net, connect_refused_and_missing)
{
	rl_loop *loop = tloop(tp);
	struct rl_addr a;
	struct tdone d;
	int fd;

	for (int i = 0; i < 2; i++) {
		/* A bound port nobody listens on. */
		taddr(&a, tnet_family[i]);
		fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		cr_assert_eq(bind(fd, &a.sa, a.len), 0);
		rl_net_local_addr(fd, &a);
		tdone_init(&d);
		cr_assert_eq(
			rl_net_connect(loop, &d.req, &a, 0, 2000, tdone_cb), 0);
		cr_assert_geq(d.req.fd, 0);
		trun_until(loop, d.calls == 1);
		cr_assert_eq(d.result, -ECONNREFUSED, "%s: %s",
			     tnet_name(tnet_family[i]),
			     rl_strerror((int)d.result));
		close(fd);
	}
	/* A Unix path that does not exist; one with no listener. */
	rl_addr_unix(&a, tpath("nobody"));
	tdone_init(&d);
	cr_assert_eq(rl_net_connect(loop, &d.req, &a, 0, 0, tdone_cb), 0);
	trun_until(loop, d.calls == 1);
	cr_assert_eq(d.result, -ENOENT);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(bind(fd, &a.sa, a.len), 0);
	tdone_init(&d);
	cr_assert_eq(rl_net_connect(loop, &d.req, &a, 0, 0, tdone_cb), 0);
	trun_until(loop, d.calls == 1);
	cr_assert_eq(d.result, -ECONNREFUSED);
	close(fd);
	tclose(loop); /* checks the loop closed every socket it made */
}

/* A TCP listener whose backlog is full drops SYNs: a connect to it waits
 * until its timeout. */
static int full_listener(struct rl_addr *a, int family, int *filler)
{
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	taddr(a, family);
	cr_assert_eq(bind(fd, &a->sa, a->len), 0);
	cr_assert_eq(listen(fd, 0), 0);
	rl_net_local_addr(fd, a);
	*filler = tconnect(a);
	return fd;
}

BACKEND_TEST(net, connect_timeout)
{
	rl_loop *loop = tloop(tp);
	struct rl_addr a, ok;
	struct tdone d, d2;
	struct tacc acc;
	uint64_t t0;
	int lfd, filler, lfd2;

	for (int i = 0; i < 2; i++) {
		lfd = full_listener(&a, tnet_family[i], &filler);
		tdone_init(&d);
		t0 = tnow_ms();
		cr_assert_eq(rl_net_connect(loop, &d.req, &a, 0, 150, tdone_cb),
			     0);
		trun_until(loop, d.calls == 1);
		cr_assert_eq(d.result, -ETIMEDOUT, "%s: %s",
			     tnet_name(tnet_family[i]),
			     rl_strerror((int)d.result));
		cr_assert_geq(tnow_ms() - t0, 140);
		close(filler);
		close(lfd);
	}
	/* A timeout that does not fire, and a cancelled connect. */
	lfd2 = tlisten(&ok, AF_INET, 8);
	tacc_start(loop, &acc, lfd2);
	tdone_init(&d);
	cr_assert_eq(rl_net_connect(loop, &d.req, &ok, 0, 5000, tdone_cb), 0);
	lfd = full_listener(&a, AF_INET, &filler);
	tdone_init(&d2);
	cr_assert_eq(rl_net_connect(loop, &d2.req, &a, 0, 5000, tdone_cb), 0);
	trun_until(loop, d.calls == 1 && acc.n == 1);
	cr_assert_geq(d.result, 0);
	cr_assert_eq(d2.calls, 0);
	cr_assert_eq(rl_cancel(loop, &d2.req), 0);
	trun_until(loop, d2.calls == 1);
	cr_assert_eq(d2.result, -ECANCELED);
	rl_cancel(loop, &acc.req);
	trun_until(loop, acc.finals == 1);
	tacc_close_all(&acc);
	close((int)d.result);
	close(filler);
	close(lfd);
	close(lfd2);
	tclose(loop);
}

/* ---------------------------------------------------------------- recv */

BACKEND_TEST(net, recv_errors)
{
	rl_loop *loop = tloop(tp);
	struct tdone d;
	struct tsink sink;
	char buf[8];
	int p[2], fd;

	/* Not a socket: a pipe, a regular file. */
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	tdone_init(&d);
	cr_assert_eq(
		rl_net_recv(loop, &d.req, p[0], buf, sizeof(buf), tdone_cb), 0);
	trun_until(loop, d.calls == 1);
	cr_assert_eq(d.result, -ENOTSOCK);
	fd = open(tfile("plain", 10), O_RDONLY | O_CLOEXEC);
	tsink_start(loop, &sink, fd, false);
	trun_until(loop, sink.finals == 1);
	cr_assert_eq(sink.final, -ENOTSOCK);
	cr_assert_eq(sink.items, 0);
	tdone_init(&d);
	cr_assert_eq(rl_net_send(loop, &d.req, p[1], "x", 1, 0, tdone_cb), 0);
	trun_until(loop, d.calls == 1);
	cr_assert_eq(d.result, -ENOTSOCK);
	tdone_init(&d);
	cr_assert_eq(rl_net_shutdown(loop, &d.req, fd, SHUT_RDWR, tdone_cb), 0);
	trun_until(loop, d.calls == 1);
	cr_assert_eq(d.result, -ENOTSOCK);
	tdone_init(&d);
	cr_assert_eq(rl_net_accept(loop, &d.req, fd, tdone_cb), 0);
	trun_until(loop, d.calls == 1);
	cr_assert_eq(d.result, -ENOTSOCK);
	close(p[0]);
	close(p[1]);
	close(fd);

	/* A closed fd number. */
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	close(fd);
	tdone_init(&d);
	cr_assert_eq(rl_net_recv(loop, &d.req, fd, buf, sizeof(buf), tdone_cb),
		     0);
	trun_until(loop, d.calls == 1);
	cr_assert_eq(d.result, -EBADF);
	tclose(loop);
}

BACKEND_TEST(net, recv_waits_for_data_then_eof)
{
	rl_loop *loop = tloop(tp);
	struct tdone d;
	char buf[64];
	int s, peer;

	for (int i = 0; i < TNET_FAMILIES; i++) {
		tpair(tnet_family[i], &s, &peer);
		tdone_init(&d);
		cr_assert_eq(rl_net_recv(loop, &d.req, s, buf, sizeof(buf),
					 tdone_cb),
			     0);
		/* O_NONBLOCK socket, nothing to read: it waits. */
		trun_for(loop, 30);
		cr_assert_eq(d.calls, 0);
		cr_assert_eq(write(peer, "hello", 5), 5);
		trun_until(loop, d.calls == 1);
		cr_assert_eq(d.result, 5);
		cr_assert_eq(memcmp(buf, "hello", 5), 0);
		/* A zero-length receive would look like the end. */
		tdone_init(&d);
		cr_assert_eq(rl_net_recv(loop, &d.req, s, buf, 0, tdone_cb),
			     -EINVAL);
		close(peer);
		tdone_init(&d);
		cr_assert_eq(rl_net_recv(loop, &d.req, s, buf, sizeof(buf),
					 tdone_cb),
			     0);
		trun_until(loop, d.calls == 1);
		cr_assert_eq(d.result, 0);
		close(s);
	}
	tclose(loop);
}

/* ---------------------------------------------------------------- send */

BACKEND_TEST(net, send_to_closed_peer_is_epipe)
{
	rl_loop *loop = tloop(tp);
	struct tdone d;
	char *big = calloc(1, 1 << 20);
	int s, peer;

	for (int i = 0; i < TNET_FAMILIES; i++) {
		tpair(tnet_family[i], &s, &peer);
		cr_assert_eq(shutdown(peer, SHUT_RD), 0);
		close(peer);
		/* Whatever the first send does, one of them fails, and no
		 * SIGPIPE kills the test. */
		for (int k = 0; k < 8; k++) {
			tdone_init(&d);
			cr_assert_eq(rl_net_send(loop, &d.req, s, big, 1 << 20,
						 0, tdone_cb),
				     0);
			trun_until(loop, d.calls == 1);
			if (d.result < 0)
				break;
		}
		cr_assert(d.result == -EPIPE || d.result == -ECONNRESET,
			  "%s: %s", tnet_name(tnet_family[i]),
			  rl_strerror((int)d.result));
		close(s);
	}
	free(big);
	tclose(loop);
}

/* Many sends submitted at once, each one byte, then one big one: they go
 * out in submission order. */
BACKEND_TEST(net, sends_keep_submission_order)
{
	enum { N = 300, BIG = 3 << 20 };
	rl_loop *loop = tloop(tp);
	static struct tdone d[N + 1];
	static unsigned char bytes[N];
	unsigned char *big = malloc(BIG);
	struct tsink sink;
	int s, peer_s, i;

	for (int f = 0; f < TNET_FAMILIES; f++) {
		/* Both ends in the loop: s sends, peer_s receives. */
		tpair(tnet_family[f], &s, &peer_s);
		fcntl(peer_s, F_SETFL, O_NONBLOCK);
		tpat_fill(bytes, 0, N);
		tpat_fill(big, N, BIG);
		for (i = 0; i < N; i++) {
			tdone_init(&d[i]);
			cr_assert_eq(rl_net_send(loop, &d[i].req, s, &bytes[i],
						 1, 0, tdone_cb),
				     0);
		}
		tdone_init(&d[N]);
		cr_assert_eq(
			rl_net_send(loop, &d[N].req, s, big, BIG, 0, tdone_cb),
			0);
		tsink_start(loop, &sink, peer_s, true);
		trun_until(loop, d[N].calls == 1);
		for (i = 0; i < N; i++) {
			cr_assert_eq(d[i].calls, 1);
			cr_assert_eq(d[i].result, 1);
		}
		cr_assert_eq(d[N].result, BIG);
		shutdown(s, SHUT_WR);
		trun_until(loop, sink.finals == 1);
		cr_assert_eq(sink.bytes, N + BIG);
		cr_assert_eq(sink.final, 0);
		close(s);
		close(peer_s);
	}
	free(big);
	tclose(loop);
}

/* A peer that never reads: the send stays in flight, the loop's memory
 * does not grow with it, and cancel ends it. */
static long rss_kb(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	cr_assert_not_null(f);
	cr_assert_eq(fscanf(f, "%ld %ld", &pages, &rss), 2);
	fclose(f);
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

BACKEND_TEST(net, peer_never_reads)
{
	enum { LEN = 64 << 20 };
	rl_loop *loop = tloop(tp);
	char *data = malloc(LEN);
	struct tdone d;
	long before;
	int s, peer, queued = 0;

	memset(data, 'z', LEN);
	tpair(AF_INET, &s, &peer);
	before = rss_kb();
	tdone_init(&d);
	cr_assert_eq(rl_net_send(loop, &d.req, s, data, LEN, 0, tdone_cb), 0);
	trun_for(loop, 200);
	cr_assert_eq(d.calls, 0, "the send finished: %s",
		     rl_strerror((int)d.result));
	/* The kernel holds what fits in the socket buffers; nothing is
	 * copied into the process. */
	cr_assert_lt(rss_kb() - before, 4096, "RSS grew by %ld KiB",
		     rss_kb() - before);
	cr_assert_eq(ioctl(s, TIOCOUTQ, &queued), 0);
	cr_assert_gt(queued, 0);
	cr_assert_lt(queued, LEN);
	cr_assert_eq(rl_cancel(loop, &d.req), 0);
	trun_until(loop, d.calls == 1);
	cr_assert_eq(d.result, -ECANCELED);
	trun(loop);
	cr_assert_eq(d.calls, 1);
	close(s);
	close(peer);
	free(data);
	tclose(loop);
}

/* --------------------------------------------------------------- resets */

static void reset_close(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	close(fd);
}

BACKEND_TEST(net, peer_reset_mid_recv)
{
	rl_loop *loop = tloop(tp);
	struct tsink sink;
	struct tdone d;
	char buf[16];
	int s, peer;

	for (int i = 0; i < 2; i++) {
		tpair(tnet_family[i], &s, &peer);
		tsink_start(loop, &sink, s, false);
		cr_assert_eq(write(peer, "abc", 3), 3);
		trun_until(loop, sink.bytes == 3);
		reset_close(peer);
		trun_until(loop, sink.finals == 1);
		cr_assert_eq(sink.final, -ECONNRESET, "%s",
			     rl_strerror((int)sink.final));
		cr_assert_eq(sink.items, 1);
		close(s);

		/* The same for a single receive. */
		tpair(tnet_family[i], &s, &peer);
		tdone_init(&d);
		cr_assert_eq(rl_net_recv(loop, &d.req, s, buf, sizeof(buf),
					 tdone_cb),
			     0);
		trun_for(loop, 10);
		reset_close(peer);
		trun_until(loop, d.calls == 1);
		cr_assert_eq(d.result, -ECONNRESET);
		close(s);
	}
	tclose(loop);
}

BACKEND_TEST(net, peer_reset_mid_send)
{
	enum { LEN = 32 << 20 };
	rl_loop *loop = tloop(tp);
	char *data = calloc(1, LEN);
	struct tdone d;
	int s, peer;

	for (int i = 0; i < 2; i++) {
		tpair(tnet_family[i], &s, &peer);
		tdone_init(&d);
		cr_assert_eq(
			rl_net_send(loop, &d.req, s, data, LEN, 0, tdone_cb),
			0);
		trun_for(loop, 30);
		cr_assert_eq(d.calls, 0);
		reset_close(peer);
		trun_until(loop, d.calls == 1);
		cr_assert(d.result == -ECONNRESET || d.result == -EPIPE, "%s",
			  rl_strerror((int)d.result));
		close(s);
	}
	free(data);
	tclose(loop);
}

/* ----------------------------------------------------------- shutdown */

BACKEND_TEST(net, half_close_and_shutdown_errors)
{
	rl_loop *loop = tloop(tp);
	struct tsink sink;
	struct tdone d;
	char buf[16];
	int s, peer, fd;

	for (int i = 0; i < TNET_FAMILIES; i++) {
		tpair(tnet_family[i], &s, &peer);
		tsink_start(loop, &sink, s, false);
		cr_assert_eq(write(peer, "ping", 4), 4);
		cr_assert_eq(shutdown(peer, SHUT_WR), 0);
		trun_until(loop, sink.finals == 1);
		cr_assert_eq(sink.final, 0);
		cr_assert_eq(sink.bytes, 4);
		/* The peer shut its writing side only: it still reads. */
		tdone_init(&d);
		cr_assert_eq(
			rl_net_send(loop, &d.req, s, "pong", 4, 0, tdone_cb),
			0);
		trun_until(loop, d.calls == 1);
		cr_assert_eq(d.result, 4);
		cr_assert_eq(read(peer, buf, sizeof(buf)), 4);
		tdone_init(&d);
		cr_assert_eq(
			rl_net_shutdown(loop, &d.req, s, SHUT_WR, tdone_cb), 0);
		trun_until(loop, d.calls == 1);
		cr_assert_eq(d.result, 0);
		cr_assert_eq(read(peer, buf, sizeof(buf)), 0);
		close(s);
		close(peer);
	}
	/* A socket that is not connected. */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	tdone_init(&d);
	cr_assert_eq(rl_net_shutdown(loop, &d.req, fd, SHUT_RDWR, tdone_cb), 0);
	trun_until(loop, d.calls == 1);
	cr_assert_eq(d.result, -ENOTCONN);
	close(fd);
	tclose(loop);
}

/* ------------------------------------------------------------- streams */

/* A client that sends one byte at a time: every byte arrives, in order,
 * in as many items as the loop happened to see. */
BACKEND_TEST(net, one_byte_at_a_time)
{
	enum { N = 400 };
	rl_loop *loop = tloop(tp);
	struct tsink sink;
	unsigned char b;
	int s, peer;

	tpair(AF_INET, &s, &peer);
	rl_net_nodelay(peer, 1);
	tsink_start(loop, &sink, s, true);
	for (int i = 0; i < N; i++) {
		b = tpat((size_t)i);
		cr_assert_eq(write(peer, &b, 1), 1);
		if (i % 50 == 0)
			trun_until(loop, sink.bytes == (size_t)i + 1);
	}
	shutdown(peer, SHUT_WR);
	trun_until(loop, sink.finals == 1);
	cr_assert_eq(sink.bytes, N);
	cr_assert_eq(sink.final, 0);
	cr_assert_geq(sink.items, N / 50);
	close(s);
	close(peer);
	tclose(loop);
}

/* Cancelling a stream in the middle of its items: the items the loop had
 * received still come, then the final callback with -ECANCELED, and
 * nothing after it; what the kernel still holds is read by the next
 * stream. Not a byte is lost or doubled. */
struct tcancel_in_item {
	rl_req req;
	int items, finals, after, cancels;
	size_t bytes;
	int64_t final;
};

static void cancel_in_item_cb(rl_req *req)
{
	struct tcancel_in_item *c = req->data;

	if (c->finals)
		c->after++;
	if (rl_req_more(req)) {
		tpat_check(req->buf, c->bytes, req->len);
		c->bytes += req->len;
		c->items++;
		if (!c->cancels++) {
			cr_assert_eq(rl_cancel(req->loop, req), 0);
			cr_assert_eq(rl_cancel(req->loop, req), -EALREADY);
		} else {
			cr_assert_eq(rl_cancel(req->loop, req), -EALREADY);
		}
		return;
	}
	c->finals++;
	c->final = req->result;
}

struct tcheck_rest {
	rl_req req;
	size_t bytes;
	int finals;
	int64_t final;
};

static void check_rest_cb(rl_req *req)
{
	struct tcheck_rest *r = req->data;

	if (rl_req_more(req)) {
		tpat_check(req->buf, r->bytes, req->len);
		r->bytes += req->len;
		return;
	}
	r->finals++;
	r->final = req->result;
}

BACKEND_TEST(net, cancel_stream_from_its_item)
{
	enum { CHUNK = 512, CHUNKS = 64 };
	rl_loop *loop = tloop(tp);
	struct tcancel_in_item c;
	struct tcheck_rest rest;
	char chunk[CHUNK];
	int s, peer;

	tpair(AF_UNIX, &s, &peer);
	memset(&c, 0, sizeof(c));
	c.req.data = &c;
	cr_assert_eq(rl_net_recv_stream(loop, &c.req, s, cancel_in_item_cb), 0);
	/* Plenty of data at once, so that several items are queued when
	 * the first one's callback cancels. */
	for (int i = 0; i < CHUNKS; i++) {
		tpat_fill(chunk, (size_t)i * CHUNK, CHUNK);
		cr_assert_eq(write(peer, chunk, sizeof(chunk)),
			     (ssize_t)sizeof(chunk));
	}
	trun_until(loop, c.finals == 1);
	trun_for(loop, 20);
	cr_assert_geq(c.items, 1);
	cr_assert_eq(c.finals, 1);
	cr_assert_eq(c.after, 0);
	cr_assert_eq(c.final, -ECANCELED);
	/* The stream can be started again and gets the rest, in order. */
	close(peer);
	memset(&rest, 0, sizeof(rest));
	rest.req.data = &rest;
	rest.bytes = c.bytes;
	cr_assert_eq(rl_net_recv_stream(loop, &rest.req, s, check_rest_cb), 0);
	trun_until(loop, rest.finals == 1);
	cr_assert_eq(rest.final, 0);
	cr_assert_eq(rest.bytes, (size_t)CHUNK * CHUNKS);
	close(s);
	tclose(loop);
}

/* A stream's held buffer stays valid until released. */
struct thold {
	rl_req req;
	void *held[4];
	char copy[4][8];
	int n, finals;
};

static void hold_cb(rl_req *req)
{
	struct thold *h = req->data;

	if (!rl_req_more(req)) {
		h->finals++;
		cr_assert_null(rl_net_buf_hold(req));
		return;
	}
	cr_assert_lt(h->n, 4);
	h->held[h->n] = rl_net_buf_hold(req);
	cr_assert_eq(h->held[h->n], req->buf);
	memcpy(h->copy[h->n], req->buf, req->len < 8 ? req->len : 8);
	h->n++;
}

BACKEND_TEST(net, held_buffers)
{
	struct rl_options opt;
	rl_loop *loop;
	struct thold h;
	int s, peer;

	rl_options_init(&opt);
	opt.net_bufs = 4;
	opt.net_buf_size = 8;
	loop = tloop_opts(tp, &opt);
	tpair(AF_UNIX, &s, &peer);
	memset(&h, 0, sizeof(h));
	h.req.data = &h;
	cr_assert_eq(rl_net_recv_stream(loop, &h.req, s, hold_cb), 0);
	/* Four writes of 8, each read into its own buffer (waiting for each
	 * keeps them apart), all held: the ring is dry. */
	for (int i = 0; i < 4; i++) {
		char m[8];

		memset(m, 'a' + i, sizeof(m));
		cr_assert_eq(write(peer, m, sizeof(m)), 8);
		trun_until(loop, h.n == i + 1);
	}
	cr_assert_eq(write(peer, "eeeeeeee", 8), 8);
	trun_for(loop, 30);
	cr_assert_eq(h.n, 4); /* no buffer, no item: it waits */
	cr_assert_eq(h.finals, 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(memcmp(h.held[i], h.copy[i], 8), 0);
	cr_assert_eq(rl_net_buf_release(loop, h.held[1]), 0);
	cr_assert_eq(rl_net_buf_release(loop, h.held[1]), -EINVAL);
	cr_assert_eq(rl_net_buf_release(loop, (char *)h.held[0] + 1), -EINVAL);
	h.n = 1; /* the released slot takes the next item */
	trun_until(loop, h.n == 2);
	cr_assert_eq(memcmp(h.copy[1], "eeeeeeee", 8), 0);
	close(peer);
	trun_for(loop, 20);
	/* Even the end of the stream waits for a buffer (io_uring picks one
	 * before it reads): not an error, the same on both backends. */
	cr_assert_eq(h.finals, 0);
	for (int i = 0; i < 4; i++)
		rl_net_buf_release(loop, h.held[i]);
	trun_until(loop, h.finals == 1);
	cr_assert_eq(h.req.result, 0);
	close(s);
	tclose(loop);
}

/* ------------------------------------------------- cancel vs. completion */

BACKEND_TEST(net, cancel_racing_completion)
{
	rl_loop *loop = tloop(tp);
	struct tdone d;
	char buf[4];
	int s, peer, ret, cancelled = 0, completed = 0;

	tpair(AF_INET, &s, &peer);
	for (int i = 0; i < 300; i++) {
		cr_assert_eq(write(peer, "x", 1), 1);
		tdone_init(&d);
		cr_assert_eq(rl_net_recv(loop, &d.req, s, buf, 1, tdone_cb), 0);
		/* Let it reach the kernel (or not) before cancelling. */
		for (int k = 0; k < i % 4; k++)
			rl_run(loop, RL_RUN_NOWAIT);
		ret = rl_cancel(loop, &d.req);
		trun_until(loop, d.calls == 1);
		trun(loop);
		cr_assert_eq(d.calls, 1);
		if (ret == 0 && d.result == -ECANCELED) {
			/* Stopped before it read: the byte is still there. */
			cr_assert_eq(recv(s, buf, 1, MSG_DONTWAIT), 1);
			cancelled++;
		} else {
			/* It read the byte first (maybe after the cancel was
			 * asked for): the byte is reported, never lost. */
			cr_assert(ret == 0 || ret == -ENOENT);
			cr_assert_eq(d.result, 1);
			completed++;
		}
		cr_assert_eq(recv(s, buf, 1, MSG_DONTWAIT), -1);
	}
	cr_assert_eq(cancelled + completed, 300);
	close(s);
	close(peer);
	tclose(loop);
}

/* ------------------------------------------------------------ deadlines */

BACKEND_TEST(net, deadlines)
{
	rl_loop *loop = tloop(tp);
	struct tdone d;
	struct tsink sink;
	rl_timer t, other;
	char buf[8];
	uint64_t t0;
	int s, peer;

	tpair(AF_INET, &s, &peer);
	rl_timer_init(&t);
	rl_timer_init(&other);
	/* Nothing to read: -ETIMEDOUT after the deadline. */
	tdone_init(&d);
	cr_assert_eq(rl_net_recv(loop, &d.req, s, buf, sizeof(buf), tdone_cb),
		     0);
	/* The deadline counts from the loop's idea of now (rl_now_ms()),
	 * which is what it is measured against. */
	cr_assert_eq(rl_req_deadline(loop, &d.req, &t, 60), 0);
	t0 = rl_now_ms(loop);
	trun_until(loop, d.calls == 1);
	cr_assert_eq(d.result, -ETIMEDOUT);
	cr_assert_geq(tnow_ms() - t0, 60);
	cr_assert_eq(rl_timer_stop(loop, &t), -ENOENT); /* idle again */

	/* Data first: the real result, and the timer is stopped. */
	tdone_init(&d);
	cr_assert_eq(rl_net_recv(loop, &d.req, s, buf, sizeof(buf), tdone_cb),
		     0);
	cr_assert_eq(rl_req_deadline(loop, &d.req, &t, 10000), 0);
	cr_assert_eq(rl_req_deadline(loop, &d.req, &other, 10000), 0);
	cr_assert_eq(rl_timer_stop(loop, &t), -ENOENT); /* replaced */
	cr_assert_eq(write(peer, "ok", 2), 2);
	trun_until(loop, d.calls == 1);
	cr_assert_eq(d.result, 2);
	cr_assert_eq(rl_timer_stop(loop, &other), -ENOENT);
	cr_assert_eq(rl_req_deadline(loop, &d.req, &t, 10), -ENOENT);

	/* A stream with an idle timeout, moved by every item: the items come
	 * 100 ms apart, 300 ms in all, past the 200 ms a deadline that did
	 * not move would have allowed; the margin of 100 ms keeps a loaded
	 * machine from firing it between two items. */
	tsink_start(loop, &sink, s, false);
	cr_assert_eq(rl_req_deadline(loop, &sink.req, &t, 200), 0);
	for (int i = 0; i < 3; i++) {
		trun_for(loop, 100);
		cr_assert_eq(write(peer, "z", 1), 1);
		trun_until(loop, sink.bytes == (size_t)i + 1);
		cr_assert_eq(rl_req_deadline(loop, &sink.req, &t, 200), 0);
	}
	cr_assert_eq(sink.finals, 0);
	trun_until(loop, sink.finals == 1);
	cr_assert_eq(sink.final, -ETIMEDOUT);

	/* A timer in use for something else; a cancelled request. */
	cr_assert_eq(rl_timer_start(loop, &other, 1000, 0, tguard_cb), 0);
	tdone_init(&d);
	cr_assert_eq(rl_net_recv(loop, &d.req, s, buf, sizeof(buf), tdone_cb),
		     0);
	cr_assert_eq(rl_req_deadline(loop, &d.req, &other, 10), -EBUSY);
	cr_assert_eq(rl_cancel(loop, &d.req), 0);
	cr_assert_eq(rl_req_deadline(loop, &d.req, &t, 10), -EALREADY);
	trun_until(loop, d.calls == 1);
	cr_assert_eq(d.result, -ECANCELED);
	cr_assert_eq(rl_timer_stop(loop, &other), 0);
	close(s);
	close(peer);
	tclose(loop);
}

CORE_TEST(net, timer_stop_runs_no_callback)
{
	rl_loop *loop = tloop(tp);
	rl_timer a, b;
	int calls = 0;

	rl_timer_init(&a);
	rl_timer_init(&b);
	a.data = b.data = &calls;
	cr_assert_eq(rl_timer_stop(loop, &a), -ENOENT);
	cr_assert_eq(rl_timer_start(loop, &a, 5, 0, tguard_cb), 0);
	cr_assert_eq(rl_timer_stop(loop, &a), 0);
	cr_assert_eq(rl_timer_stop(loop, &a), -ENOENT);
	/* A cancelled timer owes a callback: stop withdraws it. */
	cr_assert_eq(rl_timer_start(loop, &a, 5, 0, tguard_cb), 0);
	cr_assert_eq(rl_timer_start(loop, &b, 5, 0, tguard_cb), 0);
	cr_assert_eq(rl_timer_cancel(loop, &a), 0);
	cr_assert_eq(rl_timer_cancel(loop, &b), 0);
	cr_assert_eq(rl_timer_stop(loop, &b), 0);
	cr_assert_eq(rl_timer_stop(loop, &a), 0);
	cr_assert_eq(rl_run(loop, RL_RUN_DEFAULT), 0);
	tclose(loop);
}

/* RL_SEND_ZC: zero-copy sends on io_uring (a no-op on epoll) keep the
 * same contract: all of the data, in order, the callback once the kernel
 * let go of the buffer. */
BACKEND_TEST(net, zero_copy_sends)
{
	enum { N = 20, BIG = 2 << 20 };
	struct rl_options opt;
	rl_loop *loop;
	static struct tdone d[N + 1];
	unsigned char *big = malloc(BIG), small[N];
	struct tsink sink;
	bool cancelled[2];
	int s, peer, small_buf = 128 << 10;

	rl_options_init(&opt);
	opt.flags = RL_SEND_ZC;
	loop = tloop_opts(tp, &opt);
	tpair(AF_INET, &s, &peer);
	fcntl(peer, F_SETFL, O_NONBLOCK);
	/* Fixed sizes: no autotuning that lets the queues take 4 MiB. */
	cr_assert_eq(setsockopt(s, SOL_SOCKET, SO_SNDBUF, &small_buf,
				sizeof(small_buf)),
		     0);
	cr_assert_eq(setsockopt(peer, SOL_SOCKET, SO_RCVBUF, &small_buf,
				sizeof(small_buf)),
		     0);
	tpat_fill(small, 0, N);
	tpat_fill(big, N, BIG);
	for (int i = 0; i < N; i++) {
		tdone_init(&d[i]);
		cr_assert_eq(rl_net_send(loop, &d[i].req, s, &small[i], 1, 0,
					 tdone_cb),
			     0);
	}
	tdone_init(&d[N]);
	cr_assert_eq(rl_net_send(loop, &d[N].req, s, big, BIG, 0, tdone_cb), 0);
	tsink_start(loop, &sink, peer, true);
	trun_until(loop, d[N].calls == 1);
	for (int i = 0; i < N; i++)
		cr_assert_eq(d[i].result, 1);
	cr_assert_eq(d[N].result, BIG, "%s", rl_strerror((int)d[N].result));
	/*
	 * Zero-copy sends the peer stops taking, cancelled. The sink may take
	 * part of the first before its own cancel lands, and loopback copies
	 * what it delivers into the peer's queue (the pages come back at
	 * once), so a send can still finish in full before its cancel: the
	 * cancel then finds nothing (-ENOENT) and the callback said all of
	 * it. The small buffers set below keep at least one of the two
	 * unfinished.
	 */
	tdone_init(&d[0]);
	cr_assert_eq(rl_net_send(loop, &d[0].req, s, big, BIG, 0, tdone_cb), 0);
	tdone_init(&d[1]);
	cr_assert_eq(rl_net_send(loop, &d[1].req, s, big, BIG, 0, tdone_cb), 0);
	rl_cancel(loop, &sink.req);
	trun_until(loop, sink.finals == 1);
	trun_for(loop, 50);
	for (int i = 1; i >= 0; i--) {
		cancelled[i] = rl_cancel(loop, &d[i].req) == 0;
		cr_assert(cancelled[i] ||
				  (d[i].calls == 1 && d[i].result == BIG),
			  "send %d: not cancelled, %d calls, %lld", i,
			  d[i].calls, (long long)d[i].result);
	}
	cr_assert(cancelled[0] || cancelled[1]);
	trun_until(loop, d[1].calls == 1);
	if (cancelled[1])
		cr_assert_eq(d[1].result, -ECANCELED);
	/* On io_uring the kernel may still hold pages of big in the peer's
	 * queue: the first send's callback waits for them to be freed. */
	close(peer);
	trun_until(loop, d[0].calls == 1);
	if (cancelled[0])
		cr_assert_eq(d[0].result, -ECANCELED);
	cr_assert_eq(d[0].calls, 1);
	cr_assert_eq(d[1].calls, 1);
	close(s);
	free(big);
	tclose(loop);
}

/* One connection per request; the listener keeps the others. A cancel
 * that loses the race to a connection reports it; one that wins leaves it
 * in the backlog: never lost. */
BACKEND_TEST(net, accept_one_at_a_time)
{
	rl_loop *loop = tloop(tp);
	struct rl_addr a;
	struct tdone d;
	int lfd, c[3], got[3], ret;

	lfd = tlisten(&a, AF_INET, 8);
	tdone_init(&d);
	cr_assert_eq(rl_net_accept_one(loop, &d.req, lfd, tdone_cb), 0);
	trun_for(loop, 20);
	cr_assert_eq(d.calls, 0);
	for (int i = 0; i < 3; i++)
		c[i] = tconnect(&a);
	trun_until(loop, d.calls == 1);
	got[0] = (int)d.result;
	cr_assert_geq(got[0], 0);
	cr_assert(fcntl(got[0], F_GETFL) & O_NONBLOCK);
	for (int i = 1; i < 3; i++) {
		tdone_init(&d);
		cr_assert_eq(rl_net_accept_one(loop, &d.req, lfd, tdone_cb), 0);
		trun_until(loop, d.calls == 1);
		got[i] = (int)d.result;
		cr_assert_geq(got[i], 0);
	}
	for (int i = 0; i < 3; i++) {
		close(c[i]);
		close(got[i]);
	}
	/* Cancel racing a connection that is there already. */
	for (int i = 0; i < 50; i++) {
		c[0] = tconnect(&a);
		tdone_init(&d);
		cr_assert_eq(rl_net_accept_one(loop, &d.req, lfd, tdone_cb), 0);
		for (int k = 0; k < i % 3; k++)
			rl_run(loop, RL_RUN_NOWAIT);
		ret = rl_cancel(loop, &d.req);
		trun_until(loop, d.calls == 1);
		if (ret == 0 && d.result == -ECANCELED) {
			/* Stopped before it took the connection: the
			 * backlog still has it. */
			got[0] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			cr_assert_geq(got[0], 0);
			close(got[0]);
		} else {
			/* It took the connection first: reported. */
			cr_assert_geq(d.result, 0);
			close((int)d.result);
		}
		close(c[0]);
	}
	close(lfd);
	tclose(loop);
}

/* shutdown() ends a stream armed on the socket (the documented way to
 * close a connection with a stream in flight), on both backends. */
BACKEND_TEST(net, shutdown_ends_armed_streams)
{
	rl_loop *loop = tloop(tp);
	struct tsink sink;
	int s, peer;

	tpair(AF_INET, &s, &peer);
	tsink_start(loop, &sink, s, false);
	trun_for(loop, 10);
	cr_assert_eq(shutdown(s, SHUT_RDWR), 0);
	trun_until(loop, sink.finals == 1);
	cr_assert_eq(sink.final, 0);
	cr_assert_eq(sink.items, 0);
	close(s);
	close(peer);
	tclose(loop);
}
