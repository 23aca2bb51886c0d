/* SPDX-License-Identifier: MIT */
/*
 * coro_conn.c - a blocking-looking connection for coroutines:
 * rl_coro_conn_read() and rl_coro_conn_write() over one receive stream
 * per connection (conn_rx.c) and the loop's in-order sends.
 *
 * A read that finds nothing queued parks its buffer in the stream and
 * suspends; the stream's callback copies the data in and switches
 * straight back into the coroutine, as a request's callback does. The
 * read's record (with its timeout timer) lives on the coroutine's stack,
 * and whatever ends the wait - data, the end of the stream, the timer, a
 * close, the scheduler closing - takes it out of the connection before
 * the coroutine resumes, so a read never touches the connection after
 * it was woken: a close from another coroutine may free it meanwhile.
 *
 * A write is one rl_net_send() on the coroutine's own request; writes in
 * flight (and shutdowns) are on a list, so that a close can cancel them
 * and close the socket only once the kernel is done with it.
 *
 * Closing the loop with connections open: the connection's close hook
 * drops its queue and wakes its reader with -ECANCELED; the program may
 * still rl_coro_conn_close() it while the loop closes, and the ones it
 * did not close are closed and freed at the end of rl_loop_close().
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn_rx.h"
#include "coro_internal.h"

struct read_wait {
	rl_coro *co;
	rl_coro_conn *c;
	rl_timer timer;
	bool timed;
};

struct write_wait {
	rl_coro *co;
	rl_coro_conn *c;
	struct rl_link link; /* the connection's writes in flight */
};

struct rl_coro_conn {
	struct rl__rx rx;
	rl_coro_ctx *sched;
	rl_loop *loop;
	int fd;
	unsigned nwrites;
	bool closed;		  /* rl_coro_conn_close() was called */
	struct read_wait *reader; /* parked in rx */
	struct rl_link writes;	  /* struct write_wait */
	rl_close_hook hook;
};

static void conn_free(rl_coro_conn *c)
{
	close(c->fd);
	free(c);
}

/* A closed connection goes once nothing of it is in flight. */
static void maybe_free(rl_coro_conn *c)
{
	if (c->closed && !c->rx.on && !c->nwrites)
		conn_free(c);
}

/* Takes the parked reader out of the connection: from then on the read
 * only touches its own record. */
static struct read_wait *reader_take(rl_coro_conn *c)
{
	struct read_wait *rw = c->reader;

	c->reader = NULL;
	rl__rx_unpark(&c->rx);
	if (rw->timed)
		rl_timer_stop(c->loop, &rw->timer);
	return rw;
}

static void rx_wake(struct rl__rx *rx, int64_t res)
{
	rl_coro_conn *c = RL__CONTAINER(rx, rl_coro_conn, rx);
	struct read_wait *rw = c->reader;

	c->reader = NULL;
	if (rw->timed)
		rl_timer_stop(c->loop, &rw->timer);
	rl__coro_io_done(rw->co, res);
}

static void rx_idle(struct rl__rx *rx)
{
	maybe_free(RL__CONTAINER(rx, rl_coro_conn, rx));
}

/* The read's timeout: the waiter leaves, the stream goes on. */
static void read_timeout(rl_timer *timer, int status)
{
	struct read_wait *rw = RL__CONTAINER(timer, struct read_wait, timer);

	rw->timed = false; /* fired: nothing to stop */
	reader_take(rw->c);
	rl__coro_io_done(rw->co, status < 0 ? status : -ETIMEDOUT);
}

/* The scheduler closes while the coroutine reads. */
static void read_cancel(rl_coro *co)
{
	struct read_wait *rw = co->wait_obj;

	reader_take(rw->c);
	rl__coro_wake_later(co, -ECANCELED);
}

/* rl_loop_close(): the first call ends reading, the last frees a
 * connection the program did not close. */
static int close_with_loop(rl_close_hook *hook, rl_loop *loop)
{
	rl_coro_conn *c = RL__CONTAINER(hook, rl_coro_conn, hook);
	struct read_wait *rw;

	(void)loop;
	if (c->rx.closed) {
		conn_free(c);
		return 0;
	}
	if (c->reader) {
		rw = reader_take(c);
		rl__coro_wake_later(rw->co, -ECANCELED);
	}
	rl__rx_close(&c->rx);
	return RL_CLOSE_AGAIN;
}

int rl_coro_conn_open(int fd, rl_coro_conn **out)
{
	int err;
	rl_coro *co = rl__coro_enter(&err);
	rl_coro_conn *c;

	if (!co)
		return err;
	if (fd < 0 || !out)
		return -EINVAL;
	c = malloc(sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->sched = co->sched;
	c->loop = co->sched->loop;
	c->fd = fd;
	c->nwrites = 0;
	c->closed = false;
	c->reader = NULL;
	rl__list_init(&c->writes);
	rl__rx_init(&c->rx, c->loop, fd, rx_wake, rx_idle, NULL);
	rl_loop_on_close(c->loop, &c->hook, close_with_loop);
	*out = c;
	return 0;
}

int rl_coro_conn_fd(const rl_coro_conn *c)
{
	return c ? c->fd : -EINVAL;
}

size_t rl_coro_conn_buffered(const rl_coro_conn *c)
{
	return c ? c->rx.bytes : 0;
}

int64_t rl_coro_conn_read(rl_coro_conn *c, void *buf, size_t len,
			  uint64_t timeout_ms)
{
	int err;
	rl_coro *co = rl__coro_enter(&err);
	struct read_wait rw;
	rl_coro_ctx *s;
	int64_t res;

	if (!co)
		return err;
	if (!c || (!buf && len) || timeout_ms > RL_TIMEOUT_MAX_MS)
		return -EINVAL;
	if (c->reader)
		return -EBUSY;
	if (c->rx.closed)
		return -ECANCELED;
	if (!len)
		return 0;
	if (rl__rx_read(&c->rx, buf, len, &res))
		return res;
	err = rl__rx_park(&c->rx, buf, len);
	if (err < 0)
		return err;
	rw.co = co;
	rw.c = c;
	rw.timed = false;
	if (timeout_ms) {
		rl_timer_init(&rw.timer);
		err = rl_timer_start(c->loop, &rw.timer, timeout_ms, 0,
				     read_timeout);
		if (err < 0) {
			rl__rx_unpark(&c->rx);
			return err;
		}
		rw.timed = true;
	}
	/* rw lives on this stack while the coroutine is suspended, and
	 * whatever wakes it takes rw out of the connection first. */
	s = co->sched;
	co->wait = RL__WAIT_AWAIT;
	co->wait_obj = &rw;
	co->wait_cancel = read_cancel;
	c->reader = co->wait_obj;
	s->io_waiting++; /* start pacing, see coro.c */
	res = rl__coro_suspend(co);
	s->io_waiting--;
	return res;
}

static void write_done(rl_req *req)
{
	struct write_wait *ww = req->data;
	rl_coro_conn *c = ww->c;
	rl_coro *co = ww->co;

	rl__list_del(&ww->link);
	c->nwrites--;
	maybe_free(c);
	rl__coro_io_done(co, req->result);
}

/* Waits for req, submitted with write_done and ww as its data, counted
 * among the connection's requests so that a close cancels it and keeps
 * the socket open until it is done. ww lives on the caller's stack, which
 * stays while the coroutine is suspended here. */
static int64_t wait_tracked(rl_coro_conn *c, rl_coro *co, struct write_wait *ww,
			    rl_req *req, uint64_t timeout_ms)
{
	rl_timer deadline;

	rl__list_add_tail(&c->writes, &ww->link);
	c->nwrites++;
	/* The request's callback stops the timer before the coroutine
	 * resumes, so it may live on this stack. rl_req_deadline() cannot
	 * fail here: the request is in flight, the timer idle, and the
	 * caller checked the timeout. */
	if (timeout_ms) {
		rl_timer_init(&deadline);
		rl_req_deadline(c->loop, req, &deadline, timeout_ms);
	}
	return rl__coro_wait_req(co, req, 0);
}

int64_t rl_coro_conn_write(rl_coro_conn *c, const void *buf, size_t len,
			   uint64_t timeout_ms)
{
	int err;
	rl_coro *co = rl__coro_enter(&err);
	struct write_wait ww;
	rl_req *req;

	if (!co)
		return err;
	if (!c || (!buf && len) || timeout_ms > RL_TIMEOUT_MAX_MS)
		return -EINVAL;
	if (c->rx.closed)
		return -ECANCELED;
	if (!len)
		return 0;
	ww.co = co;
	ww.c = c;
	req = rl__coro_req(co);
	req->data = &ww;
	err = rl_net_send(c->loop, req, c->fd, buf, len, 0, write_done);
	if (err < 0)
		return err;
	return wait_tracked(c, co, &ww, req, timeout_ms);
}

/* Tracked as a write is: a close from another coroutine must not close
 * the socket under the shutdown request, whose fd number a new socket
 * could take before the request runs. */
int rl_coro_conn_shutdown(rl_coro_conn *c)
{
	int err;
	rl_coro *co;
	struct write_wait ww;
	rl_req *req;

	if (!c)
		return -EINVAL;
	co = rl__coro_enter(&err);
	if (!co)
		return err;
	if (c->rx.closed)
		return -ECANCELED;
	ww.co = co;
	ww.c = c;
	req = rl__coro_req(co);
	req->data = &ww;
	c->rx.shut = true;
	err = rl_net_shutdown(c->loop, req, c->fd, SHUT_WR, write_done);
	if (err < 0)
		return err;
	return (int)wait_tracked(c, co, &ww, req, 0);
}

int rl_coro_conn_close(rl_coro_conn *c)
{
	struct read_wait *rw;
	struct rl_link *link;

	if (!c)
		return -EINVAL;
	if (c->closed)
		return -EALREADY;
	c->closed = true;
	rl_loop_off_close(c->loop, &c->hook);
	if (c->reader) {
		rw = reader_take(c);
		rl__coro_wake_later(rw->co, -ECANCELED);
	}
	rl__rx_close(&c->rx);
	rl__list_for_each(link, &c->writes)
	{
		struct write_wait *ww =
			RL__CONTAINER(link, struct write_wait, link);

		rl_cancel(c->loop, &ww->co->req);
	}
	maybe_free(c);
	return 0;
}
