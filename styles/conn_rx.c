/* SPDX-License-Identifier: MIT */
/*
 * conn_rx.c - a receive stream with a queue of its items, shared by the
 * coroutine and promise connections (conn_rx.h says what it does).
 *
 * The stream's items are the loop's buffers: an item a parked waiter
 * takes whole goes back to the loop when the callback returns, so in the
 * steady state of a request-response protocol (a read parked before the
 * data comes) nothing is held and nothing is queued. Only the rest of an
 * item larger than the waiter's buffer, or items that come while nobody
 * reads, are held, and each goes back as soon as its last byte is read.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "conn_rx.h"

static void rx_cb(rl_req *req);

void rl__rx_init(struct rl__rx *rx, rl_loop *loop, int fd,
		 void (*wake)(struct rl__rx *rx, int64_t res),
		 void (*idle)(struct rl__rx *rx), size_t *inflight)
{
	memset(rx, 0, sizeof(*rx));
	rx->loop = loop;
	rx->fd = fd;
	rx->wake = wake;
	rx->idle = idle;
	rx->inflight = inflight;
	rx->q = rx->inl;
	rx->cap = RL__RX_INLINE;
	rl_req_init(&rx->req);
}

/* Starts the stream; a failure is the end of the stream. */
static int arm(struct rl__rx *rx)
{
	int ret;

	rx->req.data = rx;
	ret = rl_net_recv_stream(rx->loop, &rx->req, rx->fd, rx_cb);
	if (ret < 0) {
		rx->ended = true;
		rx->final = ret;
		return ret;
	}
	rx->on = true;
	if (rx->inflight)
		(*rx->inflight)++;
	return 0;
}

/* Back-pressure: the stream stops; its final callback says -ECANCELED
 * after the items already received. */
static void stop(struct rl__rx *rx)
{
	if (rx->on && !rx->stopping && rl_cancel(rx->loop, &rx->req) == 0)
		rx->stopping = true;
}

static bool push(struct rl__rx *rx, char *buf, uint32_t off, uint32_t len)
{
	if (rx->n == rx->cap) {
		unsigned cap = 2 * rx->cap;
		struct rl__rx_chunk *q = malloc(cap * sizeof(*q));

		if (!q)
			return false;
		for (unsigned i = 0; i < rx->n; i++)
			q[i] = rx->q[(rx->head + i) % rx->cap];
		if (rx->q != rx->inl)
			free(rx->q);
		rx->q = q;
		rx->cap = cap;
		rx->head = 0;
	}
	rx->q[(rx->head + rx->n) % rx->cap] =
		(struct rl__rx_chunk){ buf, off, len };
	rx->n++;
	rx->bytes += len - off;
	return true;
}

/* The connection cannot go on without losing data: reading fails with
 * err once the queue is read. */
static void fail(struct rl__rx *rx, int err)
{
	if (!rx->ended) {
		rx->ended = true;
		rx->final = err;
	}
	stop(rx);
}

static void rx_item(struct rl__rx *rx, rl_req *req)
{
	size_t len = req->len, n = 0;
	char *held;

	if (rx->closed)
		return; /* the buffer goes back by itself */
	if (rx->waiting) {
		/* A waiter is parked only on an empty queue. */
		n = len < rx->wlen ? len : rx->wlen;
		memcpy(rx->wbuf, req->buf, n);
	}
	if (n < len) {
		held = rl_net_buf_hold(req);
		if (!push(rx, held, (uint32_t)n, (uint32_t)len)) {
			rl_net_buf_release(rx->loop, held);
			fail(rx, -ENOMEM);
		} else if (rx->n >= RL__RX_HOLD_MAX) {
			stop(rx);
		}
	}
	if (rx->waiting) {
		rx->waiting = false;
		rx->wake(rx, (int64_t)n);
	}
}

static void rx_final(struct rl__rx *rx, int res)
{
	bool stopped = rx->stopping;

	rx->on = false;
	rx->stopping = false;
	if (rx->inflight)
		(*rx->inflight)--;
	if (rx->closed) {
		rx->idle(rx);
		return;
	}
	if (rx->ended) {
		res = rx->final; /* an earlier failure */
	} else if (res == -ECANCELED && stopped) {
		/* Our stop. With queued data the read that empties the queue
		 * starts the next stream; else it starts now. */
		if (rx->n)
			return;
		if (arm(rx) == 0)
			return;
		res = rx->final;
	} else {
		if (res == 0)
			res = rl__conn_end(rx->fd, rx->shut);
		rx->ended = true;
		rx->final = res;
	}
	if (rx->waiting && !rx->n) {
		rx->waiting = false;
		rx->wake(rx, res);
	}
}

static void rx_cb(rl_req *req)
{
	struct rl__rx *rx = req->data;

	if (rl_req_more(req))
		rx_item(rx, req);
	else
		rx_final(rx, (int)req->result);
}

int rl__conn_end(int fd, bool shut)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (shut)
		return 0;
	memset(&ti, 0, sizeof(ti));
	/* Not TCP (a Unix socket): EOPNOTSUPP, and the end it is. */
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) < 0)
		return 0;
	return ti.tcpi_state == TCP_CLOSE ? -ECONNRESET : 0;
}

bool rl__rx_read(struct rl__rx *rx, void *buf, size_t len, int64_t *res)
{
	char *to = buf;
	size_t got = 0;

	if (!rx->n) {
		if (!rx->ended)
			return false;
		*res = rx->final;
		return true;
	}
	while (got < len && rx->n) {
		struct rl__rx_chunk *ch = &rx->q[rx->head];
		size_t m = ch->len - ch->off;

		if (m > len - got)
			m = len - got;
		memcpy(to + got, ch->buf + ch->off, m);
		got += m;
		ch->off += (uint32_t)m;
		rx->bytes -= m;
		if (ch->off == ch->len) {
			rl_net_buf_release(rx->loop, ch->buf);
			rx->head = (rx->head + 1) % rx->cap;
			rx->n--;
		}
	}
	/* The queue is empty: a stream stopped for back-pressure starts
	 * again, so that the next read finds data coming. */
	if (!rx->n && !rx->on && !rx->ended && !rx->closed)
		arm(rx);
	*res = (int64_t)got;
	return true;
}

int rl__rx_park(struct rl__rx *rx, void *buf, size_t len)
{
	int ret;

	if (!rx->on) {
		ret = arm(rx);
		if (ret < 0)
			return ret;
	}
	rx->waiting = true;
	rx->wbuf = buf;
	rx->wlen = len;
	return 0;
}

bool rl__rx_close(struct rl__rx *rx)
{
	rx->closed = true;
	rx->waiting = false;
	while (rx->n) {
		rl_net_buf_release(rx->loop, rx->q[rx->head].buf);
		rx->head = (rx->head + 1) % rx->cap;
		rx->n--;
	}
	rx->bytes = 0;
	if (rx->q != rx->inl) {
		free(rx->q);
		rx->q = rx->inl;
		rx->cap = RL__RX_INLINE;
	}
	rx->head = 0;
	if (rx->on && !rx->stopping && rl_cancel(rx->loop, &rx->req) == 0)
		rx->stopping = true;
	return rx->on;
}
