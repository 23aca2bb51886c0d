/* SPDX-License-Identifier: MIT */
/*
 * net.h - what the socket files share (net.c, uring_net.c, epoll_net.c):
 * the queue of stream items and the pool of provided buffers.
 *
 * Stream items. A stream request (accept, recv_stream) is one request with
 * many results. The backends report each one with rl__net_push() into a
 * per-loop FIFO of items, which the loop delivers at the start of its next
 * callback batch, before the ready queue: a stream's final result goes
 * through rl__complete() and the ready queue like any request's, so it
 * always comes after the stream's items. A request is on the ready queue at
 * most once, which is why items cannot use it: several items of one stream
 * can arrive in one wait().
 *
 * Provided buffers. rl_options.net_bufs buffers of net_buf_size bytes in one
 * slab, made at the first rl_net_recv_stream(). Each one is free (the
 * backend's: in the io_uring buffer ring, or on the epoll backend's free
 * stack), out (in an item, or in its callback), or held (kept by the user
 * with rl_net_buf_hold()). A buffer goes back to the backend when its
 * callback returns, or when rl_net_buf_release() gives it back.
 */
#ifndef RINGLOOP_NET_H
#define RINGLOOP_NET_H

#include <errno.h>

#include "internal.h"

enum {
	RL__BUF_FREE = 0,
	RL__BUF_OUT = 1,
	RL__BUF_HELD = 2,
};

#define RL__NET_NO_BUF (-1)

struct rl__net_item {
	rl_req *req;
	int32_t res;
	int32_t buf; /* a provided buffer's id, or RL__NET_NO_BUF */
};

struct rl__net {
	/*
	 * Items not delivered yet: a ring of icap (a power of two) entries,
	 * never shrunk. A receive item holds a provided buffer, each its own,
	 * so at most nbufs of them are queued; the ring always has room for
	 * those beside the accepted connections queued (icap >= nbufs +
	 * naccepts), and a receive item is queued without any allocation:
	 * no byte of a stream is ever lost for memory. Only an accepted
	 * connection may grow the ring (a multishot accept posts one per
	 * connection, as many as the backlog holds, nothing the loop owns
	 * bounds them); when it cannot, its stream ends with -ENOMEM.
	 */
	struct rl__net_item *items;
	uint32_t icap, ihead, icount;
	uint32_t naccepts; /* queued items without a buffer: connections */

	/* The provided buffers; slab is NULL until the first stream recv. */
	char *slab;
	size_t slab_len;
	uint32_t nbufs, bufsize;
	uint8_t *bstate; /* RL__BUF_* per buffer */
	uint16_t *freeb; /* the epoll backend's free stack */
	uint32_t nfree;
	uint16_t *back; /* going back to the backend after a batch */
	uint32_t nback;
	int32_t cur;	 /* the buffer of the item being delivered */
	rl_req *cur_req; /* ... and its request */
};

/* The loop's socket state, made on first use. Returns 0 or -ENOMEM. */
int rl__net_get(rl_loop *loop);

/* Makes the provided buffers, once (then calls backend->net_setup). */
int rl__net_bufs(rl_loop *loop);

static inline char *rl__net_buf(const struct rl__net *n, uint32_t id)
{
	return n->slab + (size_t)id * n->bufsize;
}

/*
 * Backend -> loop: an item of stream req (res >= 0; buf: the provided
 * buffer holding it, or RL__NET_NO_BUF for an accepted connection).
 * Returns 0. A receive item (with a buffer) always finds room. An
 * accepted connection for which the queue cannot grow is closed and
 * -ENOMEM returned: the backend then ends the stream with -ENOMEM, after
 * the items queued before it, and queues none of it after.
 */
int rl__net_push(rl_loop *loop, rl_req *req, int32_t res, int32_t buf);

/* A buffer the kernel filled (io_uring) or the backend took (epoll) is
 * out now. */
static inline void rl__net_buf_out(struct rl__net *n, uint32_t id)
{
	n->bstate[id] = RL__BUF_OUT;
}

/* Gives an out buffer that carries no item back to the backend at once
 * (an end-of-stream CQE that still took one). */
void rl__net_buf_back(rl_loop *loop, uint32_t id);

/* epoll: a free buffer, or RL__NET_NO_BUF. */
static inline int32_t rl__net_buf_take(struct rl__net *n)
{
	if (!n->nfree)
		return RL__NET_NO_BUF;
	return n->freeb[--n->nfree];
}

/* The send flags every send gets: no SIGPIPE, and MSG_MORE on request. */
int rl__net_msg_flags(const rl_req *req);

/* Whether req is being stopped: cancelled, or its loop closing. */
static inline bool rl__net_stopping(const rl_loop *loop, const rl_req *req)
{
	return (rl__req_c(req)->state & RL__REQ_CANCEL) || loop->closing;
}

/* Accept errors that concern one connection only, which accept(2) says
 * to treat like EAGAIN: skipped, not the end of the stream. */
static inline bool rl__net_accept_skip(int err)
{
	switch (-err) {
	case ECONNABORTED:
	case EINTR:
	case EPROTO:
	case EPERM:
	case ENETDOWN:
	case ENOPROTOOPT:
	case EHOSTDOWN:
	case ENONET:
	case EHOSTUNREACH:
	case ENETUNREACH:
		return true;
	}
	return false;
}

/* The largest single send or recv the loop hands to the kernel; a longer
 * send continues where it stopped. */
#define RL__NET_MAX_IO (1u << 30)

#endif /* RINGLOOP_NET_H */
