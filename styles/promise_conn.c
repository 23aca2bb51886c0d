/* SPDX-License-Identifier: MIT */
/*
 * promise_conn.c - connections for the promise style: a read promise
 * settled from the connection's receive stream (conn_rx.c), and writes
 * that are the loop's in-order sends.
 *
 * A read that finds data queued gives a promise fulfilled at once; one
 * that does not parks its buffer in the stream and gives a pending
 * promise, which the stream's callback settles (its reactions run from
 * the microtask queue, as always). The program cannot settle the pending
 * promise itself; rl_promise_cancel() withdraws the read. The
 * connection's stream counts among the context's requests in flight
 * while it runs.
 *
 * Closing the loop with connections open: the connection's close hook
 * runs before the context's (it was put on later) and ends reading (a
 * pending read rejects with -ECANCELED); the program may still close the
 * connection from the reactions that follow, and the ones it did not
 * close are closed and freed at the end of rl_loop_close().
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "conn_rx.h"
#include "promise_internal.h"

struct rl_promise_conn {
	struct rl__rx rx;
	rl_promise_ctx *ctx;
	rl_loop *loop;
	int fd;
	unsigned nwrites; /* sends in flight */
	bool closed;	  /* rl_promise_conn_close() was called */
	rl_promise *rd;	  /* the pending read, our reference */
	void *rbuf;
	rl_timer timer; /* its timeout */
	bool timed;
	rl_close_hook hook;
};

static void conn_free(rl_promise_conn *c)
{
	close(c->fd);
	free(c);
}

static void maybe_free(rl_promise_conn *c)
{
	if (c->closed && !c->rx.on && !c->nwrites)
		conn_free(c);
}

/* Settles the pending read: res bytes into its buffer, 0 at the end, or
 * the error. */
static void read_settle(rl_promise_conn *c, int64_t res)
{
	rl_promise *p = c->rd;

	c->rd = NULL;
	p->u.conn = NULL;
	if (c->timed) {
		c->timed = false;
		rl_timer_stop(c->loop, &c->timer);
	}
	if (res < 0)
		rl__settle(p, (int)res, (struct rl_value){ 0, NULL }, NULL);
	else
		rl__settle(p, 0, (struct rl_value){ res, c->rbuf }, NULL);
	rl_promise_unref(p);
}

/*
 * rl_promise_cancel() of a pending read, and so rl_promise_timeout() of
 * one: the read leaves the connection and rejects with -ECANCELED. A
 * parked read has taken no byte (the first item settles it), so nothing
 * is lost: what comes later waits for the next read. Without this the
 * promise had no request to cancel, and a timeout of it never fired
 * while the peer sent nothing.
 */
int rl__conn_read_cancel(rl_promise *p)
{
	rl_promise_conn *c = p->u.conn;

	if (!c || p->state != RL_PROMISE_PENDING)
		return -ENOENT;
	rl__rx_unpark(&c->rx);
	read_settle(c, -ECANCELED);
	return 0;
}

static void rx_wake(struct rl__rx *rx, int64_t res)
{
	read_settle(RL__CONTAINER(rx, rl_promise_conn, rx), res);
}

static void rx_idle(struct rl__rx *rx)
{
	maybe_free(RL__CONTAINER(rx, rl_promise_conn, rx));
}

static void read_timeout(rl_timer *timer, int status)
{
	rl_promise_conn *c = RL__CONTAINER(timer, rl_promise_conn, timer);

	c->timed = false;
	rl__rx_unpark(&c->rx);
	read_settle(c, status < 0 ? status : -ETIMEDOUT);
}

/* Ends reading: the pending read rejects with -ECANCELED. */
static void end_reading(rl_promise_conn *c)
{
	if (c->rd) {
		rl__rx_unpark(&c->rx);
		read_settle(c, -ECANCELED);
	}
	rl__rx_close(&c->rx);
}

static int close_with_loop(rl_close_hook *hook, rl_loop *loop)
{
	rl_promise_conn *c = RL__CONTAINER(hook, rl_promise_conn, hook);

	(void)loop;
	if (c->rx.closed) {
		conn_free(c);
		return 0;
	}
	end_reading(c);
	return RL_CLOSE_AGAIN;
}

int rl_promise_conn_open(rl_promise_ctx *ctx, int fd, rl_promise_conn **out)
{
	rl_promise_conn *c;

	if (!ctx || fd < 0 || !out)
		return -EINVAL;
	if (ctx->closed)
		return -ECANCELED;
	c = malloc(sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->ctx = ctx;
	c->loop = ctx->loop;
	c->fd = fd;
	c->nwrites = 0;
	c->closed = false;
	c->rd = NULL;
	c->rbuf = NULL;
	c->timed = false;
	rl_timer_init(&c->timer);
	rl__rx_init(&c->rx, c->loop, fd, rx_wake, rx_idle, &ctx->inflight);
	rl_loop_on_close(c->loop, &c->hook, close_with_loop);
	ctx->conns++;
	*out = c;
	return 0;
}

int rl_promise_conn_fd(const rl_promise_conn *c)
{
	return c ? c->fd : -EINVAL;
}

size_t rl_promise_conn_buffered(const rl_promise_conn *c)
{
	return c ? c->rx.bytes : 0;
}

rl_promise *rl_promise_conn_read(rl_promise_conn *c, void *buf, size_t len,
				 uint64_t timeout_ms)
{
	rl_promise_ctx *ctx;
	rl_promise *p;
	int64_t res;
	int ret;

	if (!c)
		return NULL;
	ctx = c->ctx;
	if ((!buf && len) || timeout_ms > RL_TIMEOUT_MAX_MS)
		return rl_promise_rejected(ctx, -EINVAL);
	if (c->rd)
		return rl_promise_rejected(ctx, -EBUSY);
	if (c->rx.closed || ctx->closed)
		return rl_promise_rejected(ctx, -ECANCELED);
	if (!len)
		return rl_promise_resolved(ctx, (struct rl_value){ 0, buf });
	if (rl__rx_read(&c->rx, buf, len, &res)) {
		if (res < 0)
			return rl_promise_rejected(ctx, (int)res);
		return rl_promise_resolved(ctx, (struct rl_value){ res, buf });
	}
	/* One reference for the caller, one for the connection. */
	p = rl__promise_alloc(ctx, RL__P_CONN_READ, 2);
	if (!p)
		return NULL;
	ret = rl__rx_park(&c->rx, buf, len);
	if (ret == 0 && timeout_ms) {
		ret = rl_timer_start(c->loop, &c->timer, timeout_ms, 0,
				     read_timeout);
		if (ret < 0)
			rl__rx_unpark(&c->rx);
		else
			c->timed = true;
	}
	if (ret < 0) {
		rl__settle(p, ret, (struct rl_value){ 0, NULL }, NULL);
		p->refs--; /* the connection's; the caller's remains */
		return p;
	}
	c->rd = p;
	c->rbuf = buf;
	p->u.conn = c; /* rl_promise_cancel() finds the read */
	return p;
}

static void write_cb(rl_req *req)
{
	rl_promise_conn *c = req->data;

	c->nwrites--;
	rl__op_req_cb(req);
	maybe_free(c);
}

/* A send or a shutdown, counted so that the socket closes after it. */
#define CONN_OP(c, call)                                                  \
	do {                                                              \
		rl_promise *refused_;                                     \
		rl_req *req;                                              \
		int ret_;                                                 \
                                                                          \
		if (!(c))                                                 \
			return NULL;                                      \
		if ((c)->rx.closed)                                       \
			return rl_promise_rejected((c)->ctx, -ECANCELED); \
		req = rl__op_req_new((c)->ctx, &refused_);                \
		if (!req)                                                 \
			return refused_;                                  \
		req->data = (c);                                          \
		ret_ = (call);                                            \
		if (ret_ == 0)                                            \
			(c)->nwrites++;                                   \
		return rl__op_req_submitted(req, ret_);                   \
	} while (0)

rl_promise *rl_promise_conn_write(rl_promise_conn *c, const void *buf,
				  size_t len)
{
	CONN_OP(c, rl_net_send(c->loop, req, c->fd, buf, len, 0, write_cb));
}

rl_promise *rl_promise_conn_shutdown(rl_promise_conn *c)
{
	if (c && !c->rx.closed)
		c->rx.shut = true;
	CONN_OP(c, rl_net_shutdown(c->loop, req, c->fd, SHUT_WR, write_cb));
}

int rl_promise_conn_close(rl_promise_conn *c)
{
	if (!c)
		return -EINVAL;
	if (c->closed)
		return -EALREADY;
	c->closed = true;
	c->ctx->conns--; /* what is left of it counts in ctx->inflight */
	rl_loop_off_close(c->loop, &c->hook);
	end_reading(c);
	/* Sends to a peer that does not read would wait for it; ending the
	 * socket makes them fail now, so the socket can close. */
	if (c->nwrites)
		shutdown(c->fd, SHUT_RDWR);
	maybe_free(c);
	return 0;
}
