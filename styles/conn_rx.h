/* SPDX-License-Identifier: MIT */
/*
 * conn_rx.h - the receive side of the coroutine and promise connections
 * (rl_coro_conn_*, rl_promise_conn_*): one rl_net_recv_stream() per
 * connection, whose items wait in a queue until a read copies them out.
 *
 * A read takes what is queued at once. When nothing is, the style parks
 * one waiter (a buffer and a length) and the next item is copied straight
 * into it; then the style's wake function runs, from the stream's
 * callback, with the byte count, or with the end of the stream (0 or
 * -errno) once everything before it was read.
 *
 * Back-pressure. Each queued item holds one of the loop's buffers, which
 * every stream of the loop shares. A connection whose program stops
 * reading must not take them all, so at RL__RX_HOLD_MAX queued items the
 * stream is cancelled; the items the loop had received by then still come
 * (ringloop.h: a cancelled stream's items) and join the queue, and the
 * kernel keeps the rest, which slows the peer down through TCP. The
 * stream starts again when a read has emptied the queue.
 */
#ifndef RL_CONN_RX_H
#define RL_CONN_RX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringloop/ringloop.h"

/* Queued items past which the stream is stopped. */
#define RL__RX_HOLD_MAX 4
/* Queue slots inside the struct; more (only for the items that arrive
 * after a stop) come from malloc. */
#define RL__RX_INLINE 8

struct rl__rx_chunk {
	char *buf;    /* a held loop buffer */
	uint32_t off; /* bytes of it already read */
	uint32_t len;
};

struct rl__rx {
	rl_loop *loop;
	int fd;
	rl_req req; /* the stream, req.data = this */
	/* Runs when the parked waiter is done: res is the bytes copied into
	 * its buffer, or the end of the stream (0 or -errno). It runs from
	 * the stream's callback, as the last thing that callback does with
	 * this struct, so it may free it. */
	void (*wake)(struct rl__rx *rx, int64_t res);
	/* Runs when the stream's final callback came after rl__rx_close():
	 * the owner may free what holds this struct then. */
	void (*idle)(struct rl__rx *rx);
	size_t *inflight; /* the owner's count of requests, or NULL */

	struct rl__rx_chunk *q; /* FIFO: n items from head, cap slots */
	unsigned head, n, cap;
	size_t bytes;  /* queued bytes not read yet */
	int final;     /* the end of the stream, once ended */
	bool on;       /* the stream is in flight */
	bool stopping; /* cancelled for back-pressure */
	bool ended;    /* final is known: no new stream */
	bool closed;   /* rl__rx_close(): items are dropped */
	bool waiting;  /* a waiter is parked */
	bool shut;     /* the owner shut our side down (SHUT_WR) */
	char *wbuf;
	size_t wlen;
	struct rl__rx_chunk inl[RL__RX_INLINE];
};

void rl__rx_init(struct rl__rx *rx, rl_loop *loop, int fd,
		 void (*wake)(struct rl__rx *rx, int64_t res),
		 void (*idle)(struct rl__rx *rx), size_t *inflight);

/* A read that does not wait: true with *res the bytes copied (> 0), or
 * the end of the stream (0 or -errno) when nothing is queued; false when
 * there is nothing yet (then park a waiter). */
bool rl__rx_read(struct rl__rx *rx, void *buf, size_t len, int64_t *res);

/* Parks the waiter (len > 0), starting the stream if it is not running.
 * Returns 0, or the -errno of a stream that could not start (the end of
 * the stream from then on). */
int rl__rx_park(struct rl__rx *rx, void *buf, size_t len);

/* The waiter leaves without data (a timeout, a cancel); what comes next
 * stays queued for the next read. */
static inline void rl__rx_unpark(struct rl__rx *rx)
{
	rx->waiting = false;
}

/*
 * What the end of a stream (a receive that got 0) means on socket fd:
 * 0, or -ECONNRESET when the connection was aborted. The kernel reports a
 * peer's reset once (sock_error() clears it); when a send takes it (on
 * io_uring a send continued inside the kernel even loses it, reporting
 * the bytes it sent, and the next chunk gets -EPIPE), a receive then sees
 * only the end. A TCP socket we did not shut down reaches TCP_CLOSE only
 * by an abort (a reset, a timeout): the peer's orderly end leaves it in
 * CLOSE_WAIT. So this asks the kernel (TCP_INFO) once, at the end; with
 * shut true (our side was shut down, and CLOSE follows an orderly close
 * too) and for other sockets it says 0.
 */
int rl__conn_end(int fd, bool shut);

/* Drops the queue (the buffers go back to the loop), forgets any waiter
 * (wake will not run) and cancels the stream. Returns true while the
 * stream is still in flight: idle runs when it has ended. */
bool rl__rx_close(struct rl__rx *rx);

#endif /* RL_CONN_RX_H */
