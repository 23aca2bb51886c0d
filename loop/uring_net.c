/* SPDX-License-Identifier: MIT */
/*
 * uring_net.c - socket requests on io_uring: which SQEs each one takes and
 * what its CQEs mean, the provided buffer ring, and the order of sends.
 *
 *  - accept is one multishot IORING_OP_ACCEPT (5.19): a CQE per connection
 *    with IORING_CQE_F_MORE while it stays armed.
 *  - recv_stream is one multishot IORING_OP_RECV (6.0) that picks its
 *    buffers from the loop's provided buffer ring (5.19). liburing 2.3 has
 *    io_uring_register_buf_ring() and io_uring_buf_ring_add/advance() but
 *    not io_uring_setup_buf_ring() (2.4), so the ring's memory is mmap'ed
 *    here. A buffer goes back into the ring when its item's callback has
 *    returned (net.c batches them: one tail update per batch).
 *  - A multishot request that ends without IORING_CQE_F_MORE is re-armed
 *    unless it really ended: the kernel also stops one when the ring ran
 *    dry (-ENOBUFS: the stream waits in user space until buffers come
 *    back), when the CQ overflowed, or at its own discretion after a
 *    result. A connection reset before accept (-ECONNABORTED) ends a
 *    multishot accept too, and is skipped.
 *  - A CQE that ends a recv without data (end of stream) may still carry a
 *    buffer: it goes straight back.
 *  - send uses MSG_WAITALL, with which the kernel itself continues a short
 *    send on a stream socket (io_net_retry(), 5.19); a short result still
 *    continues from user space (a signal, an older kernel). A cancelled
 *    send reports the bytes it sent rather than -ECANCELED; the loop turns
 *    it into -ECANCELED as for any cancelled request.
 *  - Sends on one socket go out in order: io_uring would run two sends on
 *    one socket side by side, and a short one continued later would
 *    interleave with the next. Each fd has at most one send in flight;
 *    the others wait behind it in user space (a table indexed by fd).
 *  - send_zc (6.0) posts its result with IORING_CQE_F_MORE, then a
 *    notification (IORING_CQE_F_NOTIF) once the kernel let go of the
 *    buffer; the callback waits for both.
 *  - connect with a timeout is IORING_OP_CONNECT linked to an
 *    IORING_OP_LINK_TIMEOUT: both always post a CQE, and a timeout that
 *    fired shows as -ETIME on its own CQE and -ECANCELED on the connect's.
 *  - Sockets are O_NONBLOCK for the epoll backend's sake. io_uring's socket
 *    operations ignore the file's O_NONBLOCK (they poll and retry), which
 *    is checked by the tests (a recv waits for data).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "net.h"
#include "uring.h"

#define BGID 0 /* the loop's one buffer group */

/* Where a socket request is (rl__uring_net_req.step). */
enum {
	NET_RING = 0, /* on the ring, or in pending/cont on its way there */
	NET_STARVED,  /* a recv stream waiting for buffers */
	NET_SENDQ,    /* a send waiting behind another on its fd */
};

/* What this backend keeps in a socket request (its private words). The
 * first field lines up with rl__uring_req.slot, which the core reads. */
struct rl__uring_net_req {
	int32_t slot;	  /* always -1: sockets take no direct slot */
	int32_t step;	  /* NET_* */
	int32_t res;	  /* connect: its CQE; send: the first error;
			   * accept: -ENOMEM once it failed (net.h) */
	int32_t tres;	  /* connect: the link timeout's CQE */
	uint16_t owed;	  /* connect: CQEs still to come */
	uint16_t notifs;  /* send_zc: notifications still to come */
	uint8_t inflight; /* send: a chunk is on the ring */
	uint8_t zc;	  /* send: zero-copy */
	uint64_t sent;	  /* send: bytes gone */
	struct __kernel_timespec ts; /* connect: the timeout */
};
RL__REQ_BE_FITS(struct rl__uring_net_req);

static inline struct rl__uring_net_req *unr(rl_req *req)
{
	return RL__REQ_BE(struct rl__uring_net_req, req);
}

static inline bool is_zc(const rl_loop *loop, const rl_req *req)
{
	return req->op == RL_OP_SEND && (loop->opt.flags & RL_SEND_ZC);
}

/* ------------------------------------------------------------ send order */

/* The fd's send queue, the table grown to hold it; NULL without memory. */
static struct rl__uring_sendq *sendq(struct rl__uring *u, int fd)
{
	struct rl__uring_net *un = &u->net;
	struct rl__uring_sendq *t;
	uint32_t n;

	if ((uint32_t)fd < un->nsendq)
		return &un->sendq[fd];
	n = un->nsendq ? un->nsendq : 64;
	while (n <= (uint32_t)fd)
		n *= 2;
	t = realloc(un->sendq, n * sizeof(*t));
	if (!t)
		return NULL;
	memset(t + un->nsendq, 0, (n - un->nsendq) * sizeof(*t));
	un->sendq = t;
	un->nsendq = n;
	return &t[fd];
}

/* A send finished: the next one on its fd may go. */
static void send_done(rl_loop *loop, struct rl__uring *u, rl_req *req,
		      int64_t res)
{
	struct rl__uring_net *un = &u->net;
	struct rl__uring_sendq *q;
	rl_req *next;

	if ((uint32_t)req->fd < un->nsendq) {
		q = &un->sendq[req->fd];
		if (q->active == req) {
			next = rl__fifo_pop(&q->wait);
			q->active = next;
			if (next) {
				unr(next)->step = NET_RING;
				rl__uring_push_or_queue(loop, u, next,
							&u->pending);
			}
		}
	}
	rl__uring_complete(loop, rl__u(loop), req, res);
}

/* ----------------------------------------------------------- submission */

void rl__uring_net_submit(rl_loop *loop, struct rl__uring *u, rl_req *req)
{
	struct rl__uring_net_req *ur = unr(req);
	struct rl__uring_sendq *q;

	memset(ur, 0, sizeof(*ur));
	ur->slot = -1;
	if (req->op == RL_OP_SEND || req->op == RL_OP_SENDMSG) {
		ur->zc = is_zc(loop, req);
		q = sendq(u, req->fd);
		if (!q) {
			rl__uring_complete(loop, rl__u(loop), req, -ENOMEM);
			return;
		}
		if (q->active) {
			ur->step = NET_SENDQ;
			rl__fifo_push(&q->wait, req);
			return;
		}
		q->active = req;
	}
	rl__uring_push_or_queue(loop, u, req, &u->pending);
}

struct rl__uring_need rl__uring_net_need(const struct rl__uring *u, rl_req *req)
{
	struct rl__uring_need need = { .sqes = 1, .slot = false };

	(void)u;
	/* A connect with a timeout is two SQEs; a zero-copy send is one SQE
	 * that owes two CQEs, which is what the core counts. */
	if ((req->op == RL_OP_CONNECT && req->offset > 0) ||
	    (req->op == RL_OP_SEND && unr(req)->zc))
		need.sqes = 2;
	need.multishot =
		req->op == RL_OP_ACCEPT || req->op == RL_OP_RECV_STREAM;
	return need;
}

static void prep_send(struct rl__uring *u, rl_req *req,
		      struct io_uring_sqe *sqe)
{
	struct rl__uring_net_req *ur = unr(req);
	size_t left = req->len - ur->sent;
	unsigned chunk =
		left > RL__NET_MAX_IO ? RL__NET_MAX_IO : (unsigned)left;
	const char *p = (const char *)req->buf + ur->sent;
	int flags = rl__net_msg_flags(req) | MSG_WAITALL;

	(void)u;
	if (ur->zc)
		io_uring_prep_send_zc(sqe, req->fd, p, chunk, flags, 0);
	else
		io_uring_prep_send(sqe, req->fd, p, chunk, flags);
	ur->inflight = 1;
}

static void prep_connect(struct rl__uring *u, rl_req *req,
			 struct io_uring_sqe *sqe)
{
	struct rl__uring_net_req *ur = unr(req);
	uint64_t ms = (uint64_t)req->offset;

	io_uring_prep_connect(sqe, req->fd, (const struct sockaddr *)req->ptr,
			      req->count);
	ur->owed = 1;
	if (req->offset <= 0)
		return;
	sqe->flags |= IOSQE_IO_LINK;
	/* The kernel reads the timespec when it takes the SQE: it lives in
	 * the request, which outlives both CQEs. */
	ur->ts.tv_sec = (long long)(ms / 1000);
	ur->ts.tv_nsec = (long long)(ms % 1000) * 1000000;
	sqe = io_uring_get_sqe(&u->ring);
	io_uring_prep_link_timeout(sqe, &ur->ts, 0);
	io_uring_sqe_set_data64(sqe, rl__udata(req, RL__TAG_LINK_TIMEOUT));
	ur->owed = 2;
}

void rl__uring_net_prep(rl_loop *loop, struct rl__uring *u, rl_req *req)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	(void)loop;
	io_uring_sqe_set_data64(sqe, rl__udata(req, RL__TAG_MAIN));
	switch (req->op) {
	case RL_OP_ACCEPT:
		io_uring_prep_multishot_accept(sqe, req->fd, NULL, NULL,
					       SOCK_NONBLOCK | SOCK_CLOEXEC);
		break;
	case RL_OP_ACCEPT_ONE:
		io_uring_prep_accept(sqe, req->fd, NULL, NULL,
				     SOCK_NONBLOCK | SOCK_CLOEXEC);
		break;
	case RL_OP_RECV_STREAM:
		io_uring_prep_recv_multishot(sqe, req->fd, NULL, 0, 0);
		sqe->flags |= IOSQE_BUFFER_SELECT;
		sqe->buf_group = BGID;
		break;
	case RL_OP_RECV:
		io_uring_prep_recv(sqe, req->fd, req->buf, req->len, 0);
		break;
	case RL_OP_SEND:
		prep_send(u, req, sqe);
		break;
	case RL_OP_SHUTDOWN:
		io_uring_prep_shutdown(sqe, req->fd, req->flags);
		break;
	case RL_OP_SENDMSG:
		io_uring_prep_sendmsg(sqe, req->fd,
				      (const struct msghdr *)req->ptr,
				      MSG_NOSIGNAL);
		break;
	case RL_OP_RECVMSG:
		io_uring_prep_recvmsg(sqe, req->fd, (struct msghdr *)req->ptr,
				      0);
		break;
	case RL_OP_CONNECT:
		prep_connect(u, req, sqe);
		break;
	}
	/* prep_*() reset user_data: set it again. */
	io_uring_sqe_set_data64(sqe, rl__udata(req, RL__TAG_MAIN));
}

/* Puts a stream back on the ring, or a send's next chunk. */
static void rearm(rl_loop *loop, struct rl__uring *u, rl_req *req)
{
	unr(req)->step = NET_RING;
	rl__uring_push_or_queue(loop, u, req, &u->cont);
}

/* ------------------------------------------------------------ buffers */

static uint32_t ring_free(const rl_loop *loop, const struct rl__uring *u)
{
	return loop->net->nbufs - u->net.out;
}

/*
 * Re-arms as many starved streams as the ring has buffers, oldest first:
 * each needs at least one, and more would only run dry again. Called when
 * buffers come back, when a stream starves (buffers may have come back
 * while its CQE was on its way), and when a stream ends (it may have been
 * re-armed for a buffer it never took).
 */
static void wake_starved(rl_loop *loop, struct rl__uring *u)
{
	rl_req *req;

	if (rl__fifo_empty(&u->net.starved) || u->closing)
		return;
	for (uint32_t room = ring_free(loop, u);
	     room && (req = rl__fifo_pop(&u->net.starved)); room--)
		rearm(loop, u, req);
}

static void starve(rl_loop *loop, struct rl__uring *u, rl_req *req)
{
	unr(req)->step = NET_STARVED;
	rl__fifo_push(&u->net.starved, req);
	loop->stats.net_dry++;
	wake_starved(loop, u);
}

int rl__uring_net_setup(rl_loop *loop)
{
	struct rl__uring *u = rl__u(loop);
	struct rl__uring_net *un = &u->net;
	struct rl__net *n = loop->net;
	struct io_uring_buf_reg reg;
	long page = sysconf(_SC_PAGESIZE);
	size_t len = n->nbufs * sizeof(struct io_uring_buf);
	int ret;

	len = (len + (size_t)page - 1) & ~((size_t)page - 1);
	un->br = mmap(NULL, len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	loop->stats.syscalls++;
	if (un->br == MAP_FAILED) {
		un->br = NULL;
		return -ENOMEM;
	}
	un->br_len = len;
	memset(&reg, 0, sizeof(reg));
	reg.ring_addr = (uint64_t)(uintptr_t)un->br;
	reg.ring_entries = n->nbufs;
	reg.bgid = BGID;
	ret = io_uring_register_buf_ring(&u->ring, &reg, 0);
	loop->stats.syscalls++;
	if (ret < 0) {
		munmap(un->br, un->br_len);
		un->br = NULL;
		return ret;
	}
	io_uring_buf_ring_init(un->br);
	for (uint32_t i = 0; i < n->nbufs; i++)
		io_uring_buf_ring_add(un->br, rl__net_buf(n, i), n->bufsize,
				      (unsigned short)i,
				      io_uring_buf_ring_mask(n->nbufs), (int)i);
	io_uring_buf_ring_advance(un->br, (int)n->nbufs);
	/* The ring is the free list here. */
	n->nfree = 0;
	un->out = 0;
	return 0;
}

void rl__uring_net_bufs_back(rl_loop *loop, const uint16_t *ids, unsigned cnt)
{
	struct rl__uring *u = rl__u(loop);
	struct rl__uring_net *un = &u->net;
	struct rl__net *n = loop->net;
	int mask = io_uring_buf_ring_mask(n->nbufs);

	for (unsigned i = 0; i < cnt; i++)
		io_uring_buf_ring_add(un->br, rl__net_buf(n, ids[i]),
				      n->bufsize, ids[i], mask, (int)i);
	io_uring_buf_ring_advance(un->br, (int)cnt);
	un->out -= cnt;
	wake_starved(loop, u);
}

/* ---------------------------------------------------------- completions */

/*
 * A connection that found no room in the item queue ends the stream with
 * -ENOMEM (net.h): the multishot accept is cancelled, and the connections
 * it still posts before its last CQE are closed, so none comes after the
 * error.
 */
static void accept_cqe(rl_loop *loop, struct rl__uring *u, rl_req *req,
		       int32_t res, bool more)
{
	struct rl__uring_net_req *ur = unr(req);

	if (res >= 0 && ur->res < 0) {
		close(res);
		loop->stats.syscalls++;
	} else if (res >= 0 &&
		   rl__net_push(loop, req, res, RL__NET_NO_BUF) < 0) {
		ur->res = -ENOMEM;
		if (more)
			rl__uring_cancel_sqe(loop, u,
					     rl__udata(req, RL__TAG_MAIN));
	}
	if (more)
		return;
	if (ur->res < 0)
		rl__uring_complete(loop, rl__u(loop), req, ur->res);
	else if (rl__net_stopping(loop, req))
		rl__uring_complete(loop, rl__u(loop), req, -ECANCELED);
	else if (res >= 0 || rl__net_accept_skip(res))
		rearm(loop, u, req);
	else
		rl__uring_complete(loop, rl__u(loop), req, res);
}

static void recv_stream_cqe(rl_loop *loop, struct rl__uring *u, rl_req *req,
			    int32_t res, uint32_t flags)
{
	int32_t bid = RL__NET_NO_BUF;

	if (flags & IORING_CQE_F_BUFFER) {
		bid = (int32_t)(flags >> IORING_CQE_BUFFER_SHIFT);
		rl__net_buf_out(loop->net, (uint32_t)bid);
		u->net.out++;
	}
	if (res > 0 && bid != RL__NET_NO_BUF)
		(void)rl__net_push(loop, req, res, bid);
	else if (bid != RL__NET_NO_BUF)
		rl__net_buf_back(loop, (uint32_t)bid);
	if (flags & IORING_CQE_F_MORE)
		return;
	if (res > 0 && !rl__net_stopping(loop, req)) {
		rearm(loop, u, req);
	} else if (res == -ENOBUFS && !rl__net_stopping(loop, req)) {
		starve(loop, u, req);
	} else {
		rl__complete(loop, req,
			     rl__net_stopping(loop, req) ? -ECANCELED : res);
		wake_starved(loop, u);
	}
}

static void send_cqe(rl_loop *loop, struct rl__uring *u, rl_req *req,
		     int32_t res, uint32_t flags)
{
	struct rl__uring_net_req *ur = unr(req);
	bool stopping = rl__net_stopping(loop, req);

	if (flags & IORING_CQE_F_NOTIF) {
		ur->notifs--;
		u->cq_owed--;
	} else {
		/* A zero-copy send owes two CQEs; without F_MORE no
		 * notification follows. */
		if (ur->zc && (flags & IORING_CQE_F_MORE))
			ur->notifs++;
		u->cq_owed -= ur->zc && !(flags & IORING_CQE_F_MORE) ? 2 : 1;
		ur->inflight = 0;
		if (res < 0 && !ur->res)
			ur->res = res;
		else if (res > 0)
			ur->sent += (uint64_t)res;
		if (!ur->res && ur->sent < req->len && !stopping) {
			rearm(loop, u, req);
			return;
		}
	}
	if (ur->inflight || ur->notifs)
		return;
	if (ur->res)
		send_done(loop, u, req, ur->res);
	else if (ur->sent < req->len)
		send_done(loop, u, req, -ECANCELED);
	else
		send_done(loop, u, req, (int64_t)ur->sent);
}

static void connect_cqe(rl_loop *loop, struct rl__uring *u, rl_req *req,
			unsigned tag, int32_t res)
{
	struct rl__uring_net_req *ur = unr(req);

	u->cq_owed--;
	if (tag == RL__TAG_LINK_TIMEOUT)
		ur->tres = res;
	else
		ur->res = res;
	if (--ur->owed)
		return;
	if (ur->res == -ECANCELED && ur->tres == -ETIME)
		rl__uring_complete(loop, rl__u(loop), req, -ETIMEDOUT);
	else
		rl__uring_complete(loop, rl__u(loop), req,
				   ur->res < 0 ? ur->res : req->fd);
}

void rl__uring_net_cqe(rl_loop *loop, struct rl__uring *u, rl_req *req,
		       unsigned tag, int32_t res, uint32_t flags)
{
	switch (req->op) {
	case RL_OP_ACCEPT:
		accept_cqe(loop, u, req, res, flags & IORING_CQE_F_MORE);
		return;
	case RL_OP_RECV_STREAM:
		recv_stream_cqe(loop, u, req, res, flags);
		return;
	case RL_OP_SEND:
		send_cqe(loop, u, req, res, flags);
		return;
	case RL_OP_CONNECT:
		connect_cqe(loop, u, req, tag, res);
		return;
	case RL_OP_SENDMSG:
		u->cq_owed--;
		send_done(loop, u, req, res);
		return;
	case RL_OP_ACCEPT_ONE:
		/* A connection reset before it was taken: wait for the
		 * next one, as the stream does. */
		if (rl__net_accept_skip(res) && !rl__net_stopping(loop, req)) {
			u->cq_owed--;
			rearm(loop, u, req);
			return;
		}
		break;
	}
	u->cq_owed--;
	rl__uring_complete(loop, rl__u(loop), req, res);
}

/* ----------------------------------------------------------- cancelling */

/* A request that is not on the ring ends now. A send between two chunks
 * of a zero-copy send still waits for the notifications of the first. */
static void finish_waiting(rl_loop *loop, struct rl__uring *u, rl_req *req)
{
	struct rl__uring_net_req *ur = unr(req);

	if (req->op == RL_OP_SENDMSG) {
		send_done(loop, u, req, -ECANCELED);
		return;
	}
	if (req->op != RL_OP_SEND) {
		rl__uring_complete(loop, rl__u(loop), req, -ECANCELED);
		return;
	}
	ur->inflight = 0;
	if (!ur->res)
		ur->res = -ECANCELED;
	if (!ur->notifs)
		send_done(loop, u, req, -ECANCELED);
}

void rl__uring_net_cancel(rl_loop *loop, struct rl__uring *u, rl_req *req)
{
	struct rl__uring_net_req *ur = unr(req);

	switch (ur->step) {
	case NET_STARVED:
		rl__fifo_remove(&u->net.starved, req);
		rl__uring_complete(loop, rl__u(loop), req, -ECANCELED);
		return;
	case NET_SENDQ:
		rl__fifo_remove(&u->net.sendq[req->fd].wait, req);
		rl__uring_complete(loop, rl__u(loop), req, -ECANCELED);
		return;
	}
	if ((rl__req(req)->state & RL__REQ_QUEUED) &&
	    (rl__fifo_remove(&u->pending, req) ||
	     rl__fifo_remove(&u->cont, req))) {
		rl__req(req)->state &= ~(uint32_t)RL__REQ_QUEUED;
		finish_waiting(loop, u, req);
		if (req->op == RL_OP_RECV_STREAM)
			wake_starved(loop, u);
		return;
	}
	/* On the ring: its last CQE will say -ECANCELED (or what it did).
	 * A send between chunks with notifications to come has nothing on
	 * the ring: those CQEs end it. */
	if (req->op == RL_OP_SEND && !ur->inflight)
		return;
	rl__uring_cancel_sqe(loop, u, rl__udata(req, RL__TAG_MAIN));
}

void rl__uring_net_closing(rl_loop *loop, struct rl__uring *u)
{
	struct rl__uring_net *un = &u->net;
	struct rl__fifo keep = { 0 };
	rl_req *req;

	while ((req = rl__fifo_pop(&un->starved)))
		rl__uring_complete(loop, rl__u(loop), req, -ECANCELED);
	for (uint32_t fd = 0; fd < un->nsendq; fd++) {
		while ((req = rl__fifo_pop(&un->sendq[fd].wait)))
			rl__uring_complete(loop, rl__u(loop), req, -ECANCELED);
		un->sendq[fd].active = NULL;
	}
	/* Continuations (re-armed streams, a send's next chunk) would go on
	 * the ring after the close's cancel: end them now. */
	while ((req = rl__fifo_pop(&u->cont))) {
		if (!rl__op_is_net(req->op)) {
			rl__fifo_push(&keep, req);
			continue;
		}
		rl__req(req)->state &= ~(uint32_t)RL__REQ_QUEUED;
		finish_waiting(loop, u, req);
	}
	u->cont = keep;
}

void rl__uring_net_destroy(struct rl__uring *u)
{
	struct rl__uring_net *un = &u->net;

	/* After io_uring_queue_exit(): the kernel no longer looks at it. */
	if (un->br)
		munmap(un->br, un->br_len);
	un->br = NULL;
	free(un->sendq);
	un->sendq = NULL;
	un->nsendq = 0;
}
