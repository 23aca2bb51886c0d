/* SPDX-License-Identifier: MIT */
/*
 * epoll_net.c - socket requests on the epoll backend: non-blocking
 * syscalls on the loop thread, and readiness from the fd table
 * (epoll_watch.c) when they would block.
 *
 * Every request first tries its syscall at the next wait() (as io_uring
 * does when it issues an SQE), so a bad fd or a socket that is ready
 * answers at once with the kernel's own error; only EAGAIN puts it in line
 * for its fd. Then:
 *
 *  - accept takes up to ACCEPT_BATCH connections per readiness event;
 *  - recv_stream reads into the loop's provided buffers (net.h), the same
 *    pool and sizes as io_uring's ring, up to RECV_BATCH buffers per event
 *    and stopping at the first short read (the socket is empty then). When
 *    no buffer is free the stream leaves its fd's queue and waits on the
 *    starved list; buffers coming back re-arm as many streams as there are
 *    buffers;
 *  - a send goes behind the sends already waiting on its fd, so the bytes
 *    of successive sends never interleave;
 *  - connect() says EINPROGRESS for TCP and waits for writability, then
 *    SO_ERROR tells the outcome. Its timeout is a deadline kept here,
 *    soonest first, that shortens the wait.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "epoll.h"
#include "net.h"

#define ACCEPT_BATCH 64
#define RECV_BATCH   8

/* step()'s answers besides a final result. */
#define AGAIN  INT64_MIN       /* wait for the fd */
#define STARVE (INT64_MIN + 1) /* a recv stream found no free buffer */

static int64_t sys_err(int err)
{
	return err == EWOULDBLOCK ? AGAIN : -(int64_t)err;
}

/* ------------------------------------------------------------ deadlines */

static void deadline_add(struct rl__ep *ep, rl_req *req, uint64_t due)
{
	rl_req **pp = &ep->deadlines;

	rl__epr(req)->due_ns = due;
	while (*pp && rl__epr(*pp)->due_ns <= due)
		pp = &rl__epr(*pp)->dnext;
	rl__epr(req)->dnext = *pp;
	*pp = req;
}

static void deadline_remove(struct rl__ep *ep, rl_req *req)
{
	rl_req **pp = &ep->deadlines;

	if (!rl__epr(req)->due_ns)
		return;
	while (*pp && *pp != req)
		pp = &rl__epr(*pp)->dnext;
	if (*pp)
		*pp = rl__epr(req)->dnext;
	rl__epr(req)->due_ns = 0;
	rl__epr(req)->dnext = NULL;
}

/* ------------------------------------------------------------- the steps */

static int64_t accept_step(rl_loop *loop, rl_req *req)
{
	int fd;

	for (int i = 0; i < ACCEPT_BATCH; i++) {
		fd = accept4(req->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		loop->stats.syscalls++;
		if (fd >= 0) {
			/* No room for it (net.h): it was closed, and the
			 * stream ends after the connections before it. */
			if (rl__net_push(loop, req, fd, RL__NET_NO_BUF) < 0)
				return -ENOMEM;
			continue;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return AGAIN;
		if (!rl__net_accept_skip(-errno))
			return -errno;
	}
	return AGAIN; /* more next time: level-triggered */
}

static int64_t accept_one_step(rl_loop *loop, rl_req *req)
{
	int fd;

	do {
		fd = accept4(req->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		loop->stats.syscalls++;
	} while (fd < 0 && rl__net_accept_skip(-errno));
	return fd >= 0 ? fd : sys_err(errno);
}

static int64_t recv_stream_step(rl_loop *loop, rl_req *req)
{
	struct rl__net *n = loop->net;
	ssize_t r;
	int32_t id;

	for (int i = 0; i < RECV_BATCH; i++) {
		id = rl__net_buf_take(n);
		if (id == RL__NET_NO_BUF)
			return STARVE;
		r = recv(req->fd, rl__net_buf(n, (uint32_t)id), n->bufsize,
			 MSG_DONTWAIT);
		loop->stats.syscalls++;
		if (r > 0) {
			rl__net_buf_out(n, (uint32_t)id);
			(void)rl__net_push(loop, req, (int32_t)r, id);
			if ((size_t)r < n->bufsize)
				return AGAIN;
			continue;
		}
		n->freeb[n->nfree++] = (uint16_t)id;
		if (r == 0)
			return 0;
		if (errno != EINTR)
			return sys_err(errno);
	}
	return AGAIN;
}

static int64_t recv_step(rl_loop *loop, rl_req *req)
{
	ssize_t r;

	do {
		r = recv(req->fd, req->buf, req->len, MSG_DONTWAIT);
		loop->stats.syscalls++;
	} while (r < 0 && errno == EINTR);
	return r >= 0 ? r : sys_err(errno);
}

static int64_t send_step(rl_loop *loop, rl_req *req)
{
	int flags = rl__net_msg_flags(req) | MSG_DONTWAIT;
	size_t sent = (size_t)rl__epr(req)->res[1], chunk;
	ssize_t r;

	do {
		chunk = req->len - sent;
		if (chunk > RL__NET_MAX_IO)
			chunk = RL__NET_MAX_IO;
		r = send(req->fd, (const char *)req->buf + sent, chunk, flags);
		loop->stats.syscalls++;
		if (r > 0 || (r == 0 && !chunk))
			sent += (size_t)r;
		else if (r == 0)
			return -EPIPE; /* no stream socket says this */
		else if (errno != EINTR)
			break;
	} while (sent < req->len);
	rl__epr(req)->res[1] = (int64_t)sent;
	if (sent == req->len)
		return (int64_t)sent;
	return sys_err(errno);
}

/*
 * connect(): 0 at once (a Unix socket with room in the backlog), or
 * EINPROGRESS (TCP), after which writability means it is over and
 * SO_ERROR says how. A Unix socket whose listener's backlog is full says
 * EAGAIN, and io_uring hands that -EAGAIN to the caller (6.18): so does
 * this backend. Polling would not help: an unconnected Unix socket polls
 * writable at once.
 */
static int64_t connect_step(rl_loop *loop, rl_req *req, bool ready)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (ready && rl__epr(req)->res[1]) {
		loop->stats.syscalls++;
		if (getsockopt(req->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			return -errno;
		return err ? -(int64_t)err : req->fd;
	}
	loop->stats.syscalls++;
	if (connect(req->fd, (const struct sockaddr *)req->ptr, req->count) ==
	    0)
		return req->fd;
	if (errno == EINPROGRESS) {
		rl__epr(req)->res[1] = 1;
		return AGAIN;
	}
	return -errno;
}

static int64_t msg_step(rl_loop *loop, rl_req *req)
{
	ssize_t r;

	do {
		if (req->op == RL_OP_SENDMSG)
			r = sendmsg(req->fd, (const struct msghdr *)req->ptr,
				    MSG_NOSIGNAL | MSG_DONTWAIT);
		else
			r = recvmsg(req->fd, (struct msghdr *)req->ptr,
				    MSG_DONTWAIT);
		loop->stats.syscalls++;
	} while (r < 0 && errno == EINTR);
	return r >= 0 ? r : sys_err(errno);
}

static int64_t step(rl_loop *loop, rl_req *req, bool ready)
{
	int64_t r;

	switch (req->op) {
	case RL_OP_ACCEPT:
		return accept_step(loop, req);
	case RL_OP_ACCEPT_ONE:
		return accept_one_step(loop, req);
	case RL_OP_RECV_STREAM:
		return recv_stream_step(loop, req);
	case RL_OP_RECV:
		return recv_step(loop, req);
	case RL_OP_SEND:
		return send_step(loop, req);
	case RL_OP_CONNECT:
		return connect_step(loop, req, ready);
	case RL_OP_SENDMSG:
	case RL_OP_RECVMSG:
		return msg_step(loop, req);
	}
	/* RL_OP_SHUTDOWN */
	loop->stats.syscalls++;
	r = shutdown(req->fd, req->flags);
	return r < 0 ? -errno : 0;
}

/* ---------------------------------------------------------- the backend */

static void wake_starved(rl_loop *loop, struct rl__ep *ep);

static void finish(rl_loop *loop, struct rl__ep *ep, rl_req *req, int64_t res)
{
	deadline_remove(ep, req);
	rl__epr(req)->step = RL__EP_NONE;
	loop->stats.inline_completions++;
	rl__complete(loop, req, res);
	/* It may have been woken for a buffer it never took. */
	if (req->op == RL_OP_RECV_STREAM)
		wake_starved(loop, ep);
}

static void starve(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	rl__epr(req)->step = RL__EP_STARVED;
	rl__fifo_push(&ep->starved, req);
	loop->stats.net_dry++;
}

static void watch_or_finish(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	int ret = rl__ep_watch(loop, ep, req,
			       req->op == RL_OP_SEND ||
				       req->op == RL_OP_SENDMSG ||
				       req->op == RL_OP_CONNECT);

	if (ret < 0)
		finish(loop, ep, req, ret);
}

/* Puts as many starved streams back in line for their fds as there are
 * free buffers, oldest first (see uring_net.c). */
static void wake_starved(rl_loop *loop, struct rl__ep *ep)
{
	rl_req *req;

	if (!loop->net || ep->closing)
		return;
	for (uint32_t room = loop->net->nfree;
	     room && (req = rl__fifo_pop(&ep->starved)); room--)
		watch_or_finish(loop, ep, req);
}

void rl__ep_net_submit(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	struct rl__ep_req *er = rl__epr(req);

	(void)loop;
	memset(er, 0, sizeof(*er));
	er->slot = -1;
	er->step = RL__EP_NET_NEW;
	rl__fifo_push(&ep->net_new, req);
}

static int start(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	int64_t r;

	/* Behind a send that waits for room, a send waits too. */
	if ((req->op == RL_OP_SEND || req->op == RL_OP_SENDMSG) &&
	    rl__ep_writers(ep, req->fd)) {
		watch_or_finish(loop, ep, req);
		return 0;
	}
	r = step(loop, req, false);
	if (r == AGAIN) {
		if (req->op == RL_OP_CONNECT && req->offset > 0)
			deadline_add(ep, req,
				     rl__clock_ns() +
					     (uint64_t)req->offset * 1000000u);
		watch_or_finish(loop, ep, req);
	} else if (r == STARVE) {
		starve(loop, ep, req);
	} else {
		finish(loop, ep, req, r);
	}
	return 1;
}

int rl__ep_net_run(rl_loop *loop, struct rl__ep *ep)
{
	rl_req *req;
	uint64_t now;
	int n = 0;

	if (ep->deadlines) {
		now = rl__clock_ns();
		while ((req = ep->deadlines) && rl__epr(req)->due_ns <= now) {
			rl__ep_unwatch(loop, ep, req);
			finish(loop, ep, req, -ETIMEDOUT);
			n++;
		}
	}
	while ((req = rl__fifo_pop(&ep->net_new)))
		n += start(loop, ep, req);
	return n;
}

int64_t rl__ep_net_timeout(struct rl__ep *ep, int64_t timeout_ns)
{
	uint64_t now, due;
	int64_t left;

	if (!ep->deadlines)
		return timeout_ns;
	now = rl__clock_ns();
	due = rl__epr(ep->deadlines)->due_ns;
	left = due > now ? (int64_t)(due - now) : 0;
	return timeout_ns < 0 || left < timeout_ns ? left : timeout_ns;
}

void rl__ep_net_ready(rl_loop *loop, struct rl__ep *ep, rl_req *req,
		      uint32_t events)
{
	int64_t r;

	(void)events;
	r = step(loop, req, true);
	if (r == AGAIN)
		return;
	rl__ep_unwatch(loop, ep, req);
	if (r == STARVE)
		starve(loop, ep, req);
	else
		finish(loop, ep, req, r);
}

void rl__ep_net_cancel(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	switch (rl__epr(req)->step) {
	case RL__EP_NET_NEW:
		rl__fifo_remove(&ep->net_new, req);
		break;
	case RL__EP_WATCH:
		rl__ep_unwatch(loop, ep, req);
		break;
	case RL__EP_STARVED:
		rl__fifo_remove(&ep->starved, req);
		break;
	default:
		return;
	}
	deadline_remove(ep, req);
	rl__epr(req)->step = RL__EP_NONE;
	rl__complete(loop, req, -ECANCELED);
	if (req->op == RL_OP_RECV_STREAM)
		wake_starved(loop, ep);
}

void rl__ep_net_closing(rl_loop *loop, struct rl__ep *ep)
{
	rl_req *req;

	while ((req = ep->net_new.head) || (req = ep->starved.head))
		rl__ep_net_cancel(loop, ep, req);
}

int rl__ep_net_setup(rl_loop *loop)
{
	(void)loop;
	return 0; /* the free stack net.c filled is this backend's */
}

void rl__ep_net_bufs_back(rl_loop *loop, const uint16_t *ids, unsigned cnt)
{
	struct rl__net *n = loop->net;

	for (unsigned i = 0; i < cnt; i++)
		n->freeb[n->nfree++] = ids[i];
	wake_starved(loop, rl__ep(loop));
}
