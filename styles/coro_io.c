/* SPDX-License-Identifier: MIT */
/*
 * coro_io.c - the loop's requests and timers as suspending calls.
 *
 * Each call uses the rl_req inside its coroutine's handle (a coroutine
 * waits for one request at a time) and keeps its rl_timer on the
 * coroutine's own stack: the coroutine stays suspended until the
 * callback has run, so the struct outlives its use without any
 * allocation. The request is not on the stack because the loop links
 * requests into its pending and ready queues and walks them: with
 * thousands of coroutines alive, every stack page is cold by then, and
 * the handles' slabs are dense (see struct rl_coro). The callback, on
 * the loop thread inside rl_run(), switches straight back into the
 * coroutine with the result (rl__coro_io_done()), with no queue in
 * between.
 */
#include <errno.h>

#include "coro_internal.h"

static void req_done(rl_req *req)
{
	rl__coro_io_done(req->data, req->result);
}

/* The coroutine's one request, ready for a submitting call. It was
 * initialised with its handle's slab, and the loop leaves it reusable
 * after each callback. */
static rl_req *coro_req(rl_coro *co)
{
	rl_req *req = &co->req;

	req->data = co;
	return req;
}

/* Waits for a request the caller submitted (ret: the submit's result). */
static int64_t wait_req(rl_coro *co, rl_req *req, int ret)
{
	rl_coro_ctx *s = co->sched;
	int64_t v;

	if (ret < 0)
		return ret;
	co->wait = RL__WAIT_REQ;
	co->wait_obj = req;
	s->io_waiting++; /* start pacing, see coro.c */
	v = rl__coro_suspend(co);
	s->io_waiting--;
	return v;
}

int64_t rl_coro_fs_read_file(const char *path, void *buf, size_t len)
{
	int err;
	rl_coro *co = rl__coro_enter(&err);
	rl_req *req;

	if (!co)
		return err;
	req = coro_req(co);
	return wait_req(co, req,
			rl_fs_read_file(co->sched->loop, req, path, buf, len, 0,
					req_done));
}

int64_t rl_coro_fs_read_file_grow(const char *path, void **buf, size_t *cap)
{
	int err;
	rl_coro *co = rl__coro_enter(&err);
	rl_req *req;
	int64_t ret;

	if (!co)
		return err;
	if (!buf || !cap)
		return -EINVAL;
	req = coro_req(co);
	req->buf = NULL; /* stays NULL if the submit fails early */
	ret = wait_req(co, req,
		       rl_fs_read_file(co->sched->loop, req, path, *buf, *cap,
				       RL_READ_FILE_GROW, req_done));
	/* The loop may have grown the buffer, also on a failed read. */
	if (req->buf) {
		*buf = req->buf;
		*cap = req->len;
	}
	return ret;
}

int rl_coro_fs_open(const char *path, int flags, unsigned mode)
{
	int err;
	rl_coro *co = rl__coro_enter(&err);
	rl_req *req;

	if (!co)
		return err;
	req = coro_req(co);
	return (int)wait_req(
		co, req,
		rl_fs_open(co->sched->loop, req, path, flags, mode, req_done));
}

int64_t rl_coro_fs_read(int fd, void *buf, size_t len, int64_t offset)
{
	int err;
	rl_coro *co = rl__coro_enter(&err);
	rl_req *req;

	if (!co)
		return err;
	req = coro_req(co);
	return wait_req(co, req,
			rl_fs_read(co->sched->loop, req, fd, buf, len, offset,
				   req_done));
}

int rl_coro_fs_close(int fd)
{
	int err;
	rl_coro *co = rl__coro_enter(&err);
	rl_req *req;

	if (!co)
		return err;
	req = coro_req(co);
	return (int)wait_req(co, req,
			     rl_fs_close(co->sched->loop, req, fd, req_done));
}

int rl_coro_fs_stat(const char *path, struct statx *stx)
{
	int err;
	rl_coro *co = rl__coro_enter(&err);
	rl_req *req;

	if (!co)
		return err;
	req = coro_req(co);
	return (int)wait_req(
		co, req, rl_fs_stat(co->sched->loop, req, path, stx, req_done));
}

/* The shape of every call below: enter, submit the coroutine's request,
 * wait for it. */
#define CORO_SUBMIT(T, call)                         \
	do {                                         \
		int err_;                            \
		rl_coro *co = rl__coro_enter(&err_); \
		rl_req *req;                         \
                                                     \
		if (!co)                             \
			return err_;                 \
		req = coro_req(co);                  \
		return (T)wait_req(co, req, (call)); \
	} while (0)

int64_t rl_coro_fs_readv(int fd, const struct iovec *iov, unsigned iovcnt,
			 int64_t offset)
{
	CORO_SUBMIT(int64_t, rl_fs_readv(co->sched->loop, req, fd, iov, iovcnt,
					 offset, req_done));
}

int64_t rl_coro_fs_read_fixed(int fd, void *buf, size_t len, int64_t offset,
			      unsigned index)
{
	CORO_SUBMIT(int64_t, rl_fs_read_fixed(co->sched->loop, req, fd, buf,
					      len, offset, index, req_done));
}

int64_t rl_coro_fs_write(int fd, const void *buf, size_t len, int64_t offset)
{
	CORO_SUBMIT(int64_t, rl_fs_write(co->sched->loop, req, fd, buf, len,
					 offset, req_done));
}

int64_t rl_coro_fs_writev(int fd, const struct iovec *iov, unsigned iovcnt,
			  int64_t offset)
{
	CORO_SUBMIT(int64_t, rl_fs_writev(co->sched->loop, req, fd, iov, iovcnt,
					  offset, req_done));
}

int64_t rl_coro_fs_write_fixed(int fd, const void *buf, size_t len,
			       int64_t offset, unsigned index)
{
	CORO_SUBMIT(int64_t, rl_fs_write_fixed(co->sched->loop, req, fd, buf,
					       len, offset, index, req_done));
}

int64_t rl_coro_fs_write_file(const char *path, const void *buf, size_t len,
			      unsigned flags, unsigned mode)
{
	CORO_SUBMIT(int64_t, rl_fs_write_file(co->sched->loop, req, path, buf,
					      len, flags, mode, req_done));
}

int rl_coro_fs_fstat(int fd, struct statx *stx)
{
	CORO_SUBMIT(int, rl_fs_fstat(co->sched->loop, req, fd, stx, req_done));
}

int rl_coro_fs_fsync(int fd, unsigned flags)
{
	CORO_SUBMIT(int,
		    rl_fs_fsync(co->sched->loop, req, fd, flags, req_done));
}

int rl_coro_fs_ftruncate(int fd, int64_t length)
{
	CORO_SUBMIT(int, rl_fs_ftruncate(co->sched->loop, req, fd, length,
					 req_done));
}

int rl_coro_fs_fallocate(int fd, int mode, int64_t offset, int64_t len)
{
	CORO_SUBMIT(int, rl_fs_fallocate(co->sched->loop, req, fd, mode, offset,
					 len, req_done));
}

int rl_coro_fs_unlink(const char *path)
{
	CORO_SUBMIT(int, rl_fs_unlink(co->sched->loop, req, path, req_done));
}

int rl_coro_fs_rmdir(const char *path)
{
	CORO_SUBMIT(int, rl_fs_rmdir(co->sched->loop, req, path, req_done));
}

int rl_coro_fs_mkdir(const char *path, unsigned mode)
{
	CORO_SUBMIT(int,
		    rl_fs_mkdir(co->sched->loop, req, path, mode, req_done));
}

int rl_coro_fs_rename(const char *from, const char *to, unsigned flags)
{
	CORO_SUBMIT(int, rl_fs_rename(co->sched->loop, req, from, to, flags,
				      req_done));
}

static void timer_done(rl_timer *timer, int status)
{
	rl__coro_resume(timer->data, status);
}

int rl_coro_sleep(uint64_t ms)
{
	int err;
	rl_coro *co = rl__coro_enter(&err);
	rl_timer timer;

	if (!co)
		return err;
	rl_timer_init(&timer);
	timer.data = co;
	err = rl_timer_start(co->sched->loop, &timer, ms, 0, timer_done);
	if (err < 0)
		return err;
	co->wait = RL__WAIT_TIMER;
	co->wait_obj = &timer;
	return (int)rl__coro_suspend(co);
}

/* ------------------------------------------- for the other operations */

rl_req *rl__coro_req(rl_coro *co)
{
	return coro_req(co);
}

void rl__coro_req_done(rl_req *req)
{
	req_done(req);
}

int64_t rl__coro_wait_req(rl_coro *co, rl_req *req, int ret)
{
	return wait_req(co, req, ret);
}
