/* SPDX-License-Identifier: MIT */
/*
 * epoll_watch.c - the fds the epoll backend polls on the loop thread: the
 * reads of pipes, sockets and devices (epoll_fs.c), and socket requests
 * (epoll_net.c).
 *
 * A table indexed by fd holds, for each fd, the requests waiting for it to
 * become readable and those waiting for it to become writable, in order.
 * epoll watches the fd level-triggered for what the queues need; the
 * registration stays while requests come and go, so a socket with a
 * stream receive armed costs one epoll_ctl() for its whole life, and a
 * request that leaves its queue costs nothing until the next wait() finds
 * nobody asked for the fd again (then it is dropped from epoll, or trimmed).
 *
 * A caller may close an fd once its requests are done and get the same
 * number back for a new file before the next wait(). epoll forgot the old
 * file by itself then, but the table still says "registered": so an fd
 * that is registered with both queues empty is registered again (MOD, or
 * ADD when MOD says ENOENT) when a request comes for it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "epoll.h"

#define FIRE_IN	 (EPOLLIN | EPOLLERR | EPOLLHUP)
#define FIRE_OUT (EPOLLOUT | EPOLLERR | EPOLLHUP)
/* Requests served per queue per event: a pipe's readers finishing one
 * after another; sends queued on a socket that drained. */
#define SERVE_MAX 16

static struct rl__ep_fd *entry(struct rl__ep *ep, int fd)
{
	struct rl__ep_fd *t;
	uint32_t n;

	if ((uint32_t)fd < ep->nfds)
		return &ep->fds[fd];
	n = ep->nfds ? ep->nfds : 64;
	while (n <= (uint32_t)fd)
		n *= 2;
	t = realloc(ep->fds, n * sizeof(*t));
	if (!t)
		return NULL;
	memset(t + ep->nfds, 0, (n - ep->nfds) * sizeof(*t));
	ep->fds = t;
	ep->nfds = n;
	return &t[fd];
}

static uint32_t wanted(const struct rl__ep_fd *e)
{
	return (e->in.head ? EPOLLIN : 0u) | (e->out.head ? EPOLLOUT : 0u);
}

/* Registers fd for want (0: drops it). */
static int ctl(rl_loop *loop, struct rl__ep *ep, int fd, struct rl__ep_fd *e,
	       uint32_t want)
{
	struct epoll_event ev = { .events = want, .data.u64 = (uint64_t)fd };
	int op = !want	     ? EPOLL_CTL_DEL
		 : e->events ? EPOLL_CTL_MOD
			     : EPOLL_CTL_ADD;

	loop->stats.syscalls++;
	if (epoll_ctl(ep->epfd, op, fd, &ev) < 0) {
		if (op == EPOLL_CTL_DEL) {
			/* Closed already: epoll dropped it itself. */
			e->events = 0;
			return 0;
		}
		if ((op == EPOLL_CTL_MOD && errno == ENOENT) ||
		    (op == EPOLL_CTL_ADD && errno == EEXIST)) {
			op = op == EPOLL_CTL_MOD ? EPOLL_CTL_ADD
						 : EPOLL_CTL_MOD;
			loop->stats.syscalls++;
			if (epoll_ctl(ep->epfd, op, fd, &ev) == 0)
				goto done;
		}
		return -errno;
	}
done:
	e->events = want;
	return 0;
}

static void mark_dirty(struct rl__ep *ep, int fd, struct rl__ep_fd *e)
{
	if (e->dirty)
		return;
	e->dirty = true;
	e->dirty_next = ep->dirty_head;
	ep->dirty_head = fd;
}

int rl__ep_watch(rl_loop *loop, struct rl__ep *ep, rl_req *req, bool out)
{
	struct rl__ep_fd *e = entry(ep, req->fd);
	bool idle;
	int ret;

	if (!e)
		return -ENOMEM;
	idle = e->events && !e->in.head && !e->out.head;
	rl__fifo_push(out ? &e->out : &e->in, req);
	if (wanted(e) != e->events || idle) {
		ret = ctl(loop, ep, req->fd, e, wanted(e));
		if (ret < 0) {
			rl__fifo_remove(out ? &e->out : &e->in, req);
			return ret;
		}
	}
	if (out)
		rl__epr(req)->bflags |= RL__EP_OUT;
	else
		rl__epr(req)->bflags &= ~(uint32_t)RL__EP_OUT;
	rl__epr(req)->step = RL__EP_WATCH;
	ep->nwatch++;
	return 0;
}

void rl__ep_unwatch(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	struct rl__ep_fd *e = &ep->fds[req->fd];

	(void)loop;
	rl__fifo_remove((rl__epr(req)->bflags & RL__EP_OUT) ? &e->out : &e->in,
			req);
	rl__epr(req)->bflags &= ~(uint32_t)RL__EP_OUT;
	rl__epr(req)->step = RL__EP_NONE;
	ep->nwatch--;
	if (wanted(e) != e->events)
		mark_dirty(ep, req->fd, e);
}

/* Level-triggered: a request that found nothing to do just stays. */
bool rl__ep_rewatch(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	(void)loop;
	(void)ep;
	(void)req;
	return true;
}

bool rl__ep_writers(const struct rl__ep *ep, int fd)
{
	return (uint32_t)fd < ep->nfds && ep->fds[fd].out.head;
}

/* Serves the head of one queue, and the next ones while the heads finish. */
static void serve(rl_loop *loop, struct rl__ep *ep, int fd, bool out,
		  uint32_t events)
{
	rl_req *req;

	for (int i = 0; i < SERVE_MAX; i++) {
		struct rl__ep_fd *e = &ep->fds[fd];

		req = out ? e->out.head : e->in.head;
		if (!req)
			return;
		if (rl__op_is_net(req->op))
			rl__ep_net_ready(loop, ep, req, events);
		else
			rl__ep_fs_ready(loop, ep, req);
		e = &ep->fds[fd];
		if ((out ? e->out.head : e->in.head) == req)
			return; /* still waiting */
	}
}

void rl__ep_fd_event(rl_loop *loop, struct rl__ep *ep, int fd, uint32_t events)
{
	struct rl__ep_fd *e;

	if ((uint32_t)fd >= ep->nfds)
		return;
	if (events & FIRE_IN)
		serve(loop, ep, fd, false, events);
	if (events & FIRE_OUT)
		serve(loop, ep, fd, true, events);
	e = &ep->fds[fd];
	if (wanted(e) != e->events)
		mark_dirty(ep, fd, e);
}

void rl__ep_flush_dirty(rl_loop *loop, struct rl__ep *ep)
{
	while (ep->dirty_head >= 0) {
		int fd = ep->dirty_head;
		struct rl__ep_fd *e = &ep->fds[fd];

		ep->dirty_head = e->dirty_next;
		e->dirty = false;
		if (wanted(e) != e->events &&
		    ctl(loop, ep, fd, e, wanted(e)) < 0)
			e->events = 0; /* the fd is gone */
	}
}

void rl__ep_watch_close(rl_loop *loop, struct rl__ep *ep)
{
	rl_req *req;

	for (uint32_t fd = 0; fd < ep->nfds; fd++) {
		struct rl__ep_fd *e = &ep->fds[fd];

		while ((req = e->in.head) || (req = e->out.head)) {
			if (rl__op_is_net(req->op)) {
				rl__ep_net_cancel(loop, ep, req);
				continue;
			}
			rl__ep_unwatch(loop, ep, req);
			/* A read_file reading a stream: its fd goes too. */
			if (rl__epr(req)->bflags & RL__EP_STREAM)
				rl__ep_fs_stream_close(loop, ep, req);
			rl__complete(loop, req, -ECANCELED);
		}
	}
}

void rl__ep_watch_free(struct rl__ep *ep)
{
	free(ep->fds);
	ep->fds = NULL;
	ep->nfds = 0;
}
