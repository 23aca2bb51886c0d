/* SPDX-License-Identifier: MIT */
/*
 * promise_fs.c - promises for the loop's requests and timers.
 *
 * Each one is a request record from the context's pool (the rl_req or
 * rl_timer the loop needs, and the promise) holding one reference to its
 * promise until the callback has run. The callback settles the promise and
 * puts the record back, so steady state allocates nothing. A request the
 * loop refuses at once gives a promise rejected with that error; when the
 * loop closes, the loop runs the callbacks with -ECANCELED.
 */
#include <errno.h>
#include <stdbool.h>

#include "promise_internal.h"

struct rl__op {
	union {
		rl_req req;
		rl_timer timer;
	} u;
	rl_promise *p;
	struct rl__op *prev, *next; /* the context's ops in flight */
	bool timer;
	bool cancelled; /* a timer: rl_promise_cancel() stopped it */
};

size_t rl__op_size(void)
{
	return sizeof(struct rl__op);
}

/* A request record and its promise: one reference for the caller, one
 * for the request (or the timer, when timer is true). */
static struct rl__op *op_new(rl_promise_ctx *ctx, bool timer)
{
	struct rl__op *op = rl__record_get(&ctx->ops);

	if (!op)
		return NULL;
	op->p = rl__promise_alloc(ctx, RL__P_REQ, 2);
	if (!op->p) {
		rl__record_put(&ctx->ops, op);
		return NULL;
	}
	/* A recycled record held a request or a timer, a fresh chunk's
	 * holds garbage: initialise the one this use submits. */
	if (timer)
		rl_timer_init(&op->u.timer);
	else
		rl_req_init(&op->u.req);
	op->timer = timer;
	op->cancelled = false;
	op->p->u.op = op; /* rl_promise_cancel() finds the request */
	return op;
}

static void op_link(rl_promise_ctx *ctx, struct rl__op *op)
{
	op->prev = NULL;
	op->next = ctx->in_flight;
	if (ctx->in_flight)
		ctx->in_flight->prev = op;
	ctx->in_flight = op;
}

static void op_unlink(rl_promise_ctx *ctx, struct rl__op *op)
{
	if (op->prev)
		op->prev->next = op->next;
	else
		ctx->in_flight = op->next;
	if (op->next)
		op->next->prev = op->prev;
}

void rl__ops_cancel_all(rl_promise_ctx *ctx)
{
	for (struct rl__op *op = ctx->in_flight; op; op = op->next) {
		if (op->timer)
			op->cancelled |=
				rl_timer_cancel(ctx->loop, &op->u.timer) == 0;
		else
			rl_cancel(ctx->loop, &op->u.req);
	}
}

/* A context the loop has closed starts nothing: a promise rejected with
 * -ECANCELED, as the loop would answer a little later. */
static struct rl__op *op_start(rl_promise_ctx *ctx, bool timer,
			       rl_promise **refused)
{
	*refused = NULL;
	if (!ctx)
		return NULL;
	if (ctx->closed) {
		*refused = rl_promise_rejected(ctx, -ECANCELED);
		return NULL;
	}
	return op_new(ctx, timer);
}

static void op_done(struct rl__op *op, int err, struct rl_value value)
{
	rl_promise *p = op->p;
	rl_promise_ctx *ctx = p->ctx;

	op_unlink(ctx, op);
	p->u.op = NULL;
	rl__settle(p, err, value, NULL);
	rl__record_put(&ctx->ops, op);
	rl_promise_unref(p);
}

/* Submitting failed: the promise rejects now, the request never ran. */
static rl_promise *op_submitted(struct rl__op *op, int ret)
{
	rl_promise *p = op->p;

	if (ret < 0) {
		p->u.op = NULL;
		rl__settle(p, ret, (struct rl_value){ 0, NULL }, NULL);
		p->refs--; /* the request's reference; the caller's remains */
		rl__record_put(&p->ctx->ops, op);
		return p;
	}
	p->ctx->inflight++;
	op_link(p->ctx, op);
	return p;
}

/* What a fulfilled request's promise holds (promise.h lists it). */
static struct rl_value req_value(const rl_req *req)
{
	struct rl_value value = { req->result, NULL };

	switch (req->op) {
	case RL_OP_READ_FILE:
	case RL_OP_READ:
	case RL_OP_READ_FIXED:
		value.p = req->buf;
		break;
	case RL_OP_STAT:
	case RL_OP_FSTAT:
		value.p = req->stx;
		break;
	case RL_OP_RECV:
		value.p = req->buf;
		break;
	case RL_OP_RECVMSG:
		value.p = req->ptr;
		break;
	}
	return value;
}

static void req_cb(rl_req *req)
{
	struct rl__op *op = RL__CONTAINER(req, struct rl__op, u.req);
	struct rl_value value = { req->result, NULL };

	op->p->ctx->inflight--;
	if (req->result >= 0)
		value = req_value(req);
	op_done(op, req->result < 0 ? (int)req->result : 0, value);
}

/* read_file into a buffer the loop grows: the buffer is the caller's
 * again, fulfilled or rejected. */
static void grow_cb(rl_req *req)
{
	struct rl__op *op = RL__CONTAINER(req, struct rl__op, u.req);
	struct rl_value value = { req->result, req->buf };

	op->p->ctx->inflight--;
	op_done(op, req->result < 0 ? (int)req->result : 0, value);
}

rl_promise *rl_promise_fs_read_file(rl_promise_ctx *ctx, const char *path,
				    void *buf, size_t len)
{
	rl_promise *refused;
	struct rl__op *op = op_start(ctx, false, &refused);

	if (!op)
		return refused;
	return op_submitted(op, rl_fs_read_file(ctx->loop, &op->u.req, path,
						buf, len, 0, req_cb));
}

rl_promise *rl_promise_fs_read_file_grow(rl_promise_ctx *ctx, const char *path,
					 void *buf, size_t cap)
{
	rl_promise *refused;
	/* Refused by a closing context like the others: a submission that
	 * failed, so buf stays the caller's (the rejection's p is NULL). */
	struct rl__op *op = op_start(ctx, false, &refused);

	if (!op)
		return refused;
	return op_submitted(op,
			    rl_fs_read_file(ctx->loop, &op->u.req, path, buf,
					    cap, RL_READ_FILE_GROW, grow_cb));
}

rl_promise *rl_promise_fs_open(rl_promise_ctx *ctx, const char *path, int flags,
			       unsigned mode)
{
	rl_promise *refused;
	struct rl__op *op = op_start(ctx, false, &refused);

	if (!op)
		return refused;
	return op_submitted(op, rl_fs_open(ctx->loop, &op->u.req, path, flags,
					   mode, req_cb));
}

rl_promise *rl_promise_fs_read(rl_promise_ctx *ctx, int fd, void *buf,
			       size_t len, int64_t offset)
{
	rl_promise *refused;
	struct rl__op *op = op_start(ctx, false, &refused);

	if (!op)
		return refused;
	return op_submitted(op, rl_fs_read(ctx->loop, &op->u.req, fd, buf, len,
					   offset, req_cb));
}

rl_promise *rl_promise_fs_close(rl_promise_ctx *ctx, int fd)
{
	rl_promise *refused;
	struct rl__op *op = op_start(ctx, false, &refused);

	if (!op)
		return refused;
	return op_submitted(op, rl_fs_close(ctx->loop, &op->u.req, fd, req_cb));
}

rl_promise *rl_promise_fs_stat(rl_promise_ctx *ctx, const char *path,
			       struct statx *stx)
{
	rl_promise *refused;
	struct rl__op *op = op_start(ctx, false, &refused);

	if (!op)
		return refused;
	return op_submitted(
		op, rl_fs_stat(ctx->loop, &op->u.req, path, stx, req_cb));
}

/* The shape of every request below. It goes through op_start() too: a
 * reaction run by the loop's close must get a rejected promise, not a
 * request that still runs (the loop only refuses new requests once the
 * close hooks are done), so a chain of them cannot keep the close going. */
#define PROMISE_SUBMIT(call)                                        \
	do {                                                        \
		rl_promise *refused;                                \
		struct rl__op *op = op_start(ctx, false, &refused); \
                                                                    \
		if (!op)                                            \
			return refused;                             \
		return op_submitted(op, (call));                    \
	} while (0)

rl_promise *rl_promise_fs_readv(rl_promise_ctx *ctx, int fd,
				const struct iovec *iov, unsigned iovcnt,
				int64_t offset)
{
	PROMISE_SUBMIT(rl_fs_readv(ctx->loop, &op->u.req, fd, iov, iovcnt,
				   offset, req_cb));
}

rl_promise *rl_promise_fs_read_fixed(rl_promise_ctx *ctx, int fd, void *buf,
				     size_t len, int64_t offset, unsigned index)
{
	PROMISE_SUBMIT(rl_fs_read_fixed(ctx->loop, &op->u.req, fd, buf, len,
					offset, index, req_cb));
}

rl_promise *rl_promise_fs_write(rl_promise_ctx *ctx, int fd, const void *buf,
				size_t len, int64_t offset)
{
	PROMISE_SUBMIT(rl_fs_write(ctx->loop, &op->u.req, fd, buf, len, offset,
				   req_cb));
}

rl_promise *rl_promise_fs_writev(rl_promise_ctx *ctx, int fd,
				 const struct iovec *iov, unsigned iovcnt,
				 int64_t offset)
{
	PROMISE_SUBMIT(rl_fs_writev(ctx->loop, &op->u.req, fd, iov, iovcnt,
				    offset, req_cb));
}

rl_promise *rl_promise_fs_write_fixed(rl_promise_ctx *ctx, int fd,
				      const void *buf, size_t len,
				      int64_t offset, unsigned index)
{
	PROMISE_SUBMIT(rl_fs_write_fixed(ctx->loop, &op->u.req, fd, buf, len,
					 offset, index, req_cb));
}

rl_promise *rl_promise_fs_write_file(rl_promise_ctx *ctx, const char *path,
				     const void *buf, size_t len,
				     unsigned flags, unsigned mode)
{
	PROMISE_SUBMIT(rl_fs_write_file(ctx->loop, &op->u.req, path, buf, len,
					flags, mode, req_cb));
}

rl_promise *rl_promise_fs_fstat(rl_promise_ctx *ctx, int fd, struct statx *stx)
{
	PROMISE_SUBMIT(rl_fs_fstat(ctx->loop, &op->u.req, fd, stx, req_cb));
}

rl_promise *rl_promise_fs_fsync(rl_promise_ctx *ctx, int fd, unsigned flags)
{
	PROMISE_SUBMIT(rl_fs_fsync(ctx->loop, &op->u.req, fd, flags, req_cb));
}

rl_promise *rl_promise_fs_ftruncate(rl_promise_ctx *ctx, int fd, int64_t length)
{
	PROMISE_SUBMIT(
		rl_fs_ftruncate(ctx->loop, &op->u.req, fd, length, req_cb));
}

rl_promise *rl_promise_fs_fallocate(rl_promise_ctx *ctx, int fd, int mode,
				    int64_t offset, int64_t len)
{
	PROMISE_SUBMIT(rl_fs_fallocate(ctx->loop, &op->u.req, fd, mode, offset,
				       len, req_cb));
}

rl_promise *rl_promise_fs_unlink(rl_promise_ctx *ctx, const char *path)
{
	PROMISE_SUBMIT(rl_fs_unlink(ctx->loop, &op->u.req, path, req_cb));
}

rl_promise *rl_promise_fs_rmdir(rl_promise_ctx *ctx, const char *path)
{
	PROMISE_SUBMIT(rl_fs_rmdir(ctx->loop, &op->u.req, path, req_cb));
}

rl_promise *rl_promise_fs_mkdir(rl_promise_ctx *ctx, const char *path,
				unsigned mode)
{
	PROMISE_SUBMIT(rl_fs_mkdir(ctx->loop, &op->u.req, path, mode, req_cb));
}

rl_promise *rl_promise_fs_rename(rl_promise_ctx *ctx, const char *from,
				 const char *to, unsigned flags)
{
	PROMISE_SUBMIT(
		rl_fs_rename(ctx->loop, &op->u.req, from, to, flags, req_cb));
}

static void timer_cb(rl_timer *timer, int status)
{
	struct rl__op *op = RL__CONTAINER(timer, struct rl__op, u.timer);

	op->p->ctx->inflight--;
	op_done(op, status < 0 ? status : 0, (struct rl_value){ 0, NULL });
}

rl_promise *rl_promise_sleep(rl_promise_ctx *ctx, uint64_t ms)
{
	rl_promise *refused;
	struct rl__op *op = op_start(ctx, true, &refused);

	if (!op)
		return refused;
	return op_submitted(
		op, rl_timer_start(ctx->loop, &op->u.timer, ms, 0, timer_cb));
}

/* ------------------------------------------------------------ cancel */

int rl_promise_cancel(rl_promise *p)
{
	struct rl__op *op;
	int ret;

	if (p && p->pkind == RL__P_CONN_READ)
		return rl__conn_read_cancel(p);
	if (!p || p->pkind != RL__P_REQ)
		return -EINVAL;
	op = p->u.op;
	if (!op || p->state != RL_PROMISE_PENDING)
		return -ENOENT;
	if (!op->timer)
		return rl_cancel(p->ctx->loop, &op->u.req);
	/* A cancelled timer owes its -ECANCELED callback until the next
	 * batch, and rl_timer_cancel() says -ENOENT for it, as for a timer
	 * that has fired; promise.h promises -EALREADY, as rl_cancel() of
	 * a request says, and rl_promise_timeout() relies on it. */
	if (op->cancelled)
		return -EALREADY;
	ret = rl_timer_cancel(p->ctx->loop, &op->u.timer);
	if (ret == 0)
		op->cancelled = true;
	return ret;
}

/* ------------------------------------------- for the other operations */

rl_req *rl__op_req_new(rl_promise_ctx *ctx, rl_promise **refused)
{
	struct rl__op *op = op_start(ctx, false, refused);

	return op ? &op->u.req : NULL;
}

rl_promise *rl__op_req_submitted(rl_req *req, int ret)
{
	return op_submitted(RL__CONTAINER(req, struct rl__op, u.req), ret);
}

void rl__op_req_cb(rl_req *req)
{
	req_cb(req);
}
