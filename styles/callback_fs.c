/* SPDX-License-Identifier: MIT */
/*
 * callback_fs.c - the file operations of the callback style: each takes
 * an entry from the context's pool (callback.c), submits its request, and
 * calls the caller back from the request's callback, then puts the entry
 * back. A submission the loop refuses gives its -errno back at once, and
 * the callback never runs.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "callback_internal.h"

/* The pooled read_file's first guess stops growing here. */
#define MAX_GUESS (1u << 20)
/* The reads after which the guess may fall back (learn()). */
#define GUESS_WINDOW 128

/* An entry for a request about to be submitted, or NULL (*ret set). */
static struct rl__cb_entry *take(rl_cb_ctx *cbs, bool has_done, void *arg,
				 int *ret)
{
	struct rl__cb_entry *e;

	if (!cbs || !has_done) {
		*ret = -EINVAL;
		return NULL;
	}
	if (cbs->closed) {
		/* The loop is closing: it would refuse the request anyway. */
		*ret = -ECANCELED;
		return NULL;
	}
	e = rl__cb_entry_get(cbs);
	if (!e) {
		*ret = -ENOMEM;
		return NULL;
	}
	e->arg = arg;
	return e;
}

/* What the submitting call said: the entry is in flight, or back. */
static int submitted(rl_cb_ctx *cbs, struct rl__cb_entry *e, int ret)
{
	if (ret < 0) {
		rl__cb_entry_put(cbs, e);
		return ret;
	}
	cbs->in_flight++;
	return 0;
}

/* ------------------------------------------------------------ read_file */

/* The power of two that holds n bytes, within the guess's bounds. */
static size_t guess_for(size_t n)
{
	size_t g = RL__CB_FIRST_GUESS;

	while (g < n && g < MAX_GUESS)
		g *= 2;
	return g;
}

/*
 * The guess learns from a file of n bytes. It grows at once to fit a file
 * larger than itself, so a run of large files costs one second pass, not
 * one each. It falls back once per GUESS_WINDOW reads, to fit the largest
 * file of that window and the one before: the loop takes a buffer of the
 * guess for every read under way (on epoll at submission), and one large
 * file must not make every later read of small ones ask for its size.
 */
static void learn(rl_cb_ctx *cbs, size_t n)
{
	if (n > cbs->guess)
		cbs->guess = guess_for(n);
	if (n > cbs->guess_max[0])
		cbs->guess_max[0] = n;
	if (++cbs->guess_reads < GUESS_WINDOW)
		return;
	cbs->guess = guess_for(cbs->guess_max[0] > cbs->guess_max[1]
				       ? cbs->guess_max[0]
				       : cbs->guess_max[1]);
	cbs->guess_max[1] = cbs->guess_max[0];
	cbs->guess_max[0] = 0;
	cbs->guess_reads = 0;
}

/* The pooled read_file: the loop lends the buffer for the callback, and
 * the guess for the next reads learns the sizes read. */
static void pooled_done(rl_req *req)
{
	struct rl__cb_entry *e = (struct rl__cb_entry *)req;
	rl_cb_ctx *cbs = e->cbs;
	int64_t res = req->result;

	cbs->in_flight--;
	if (res >= 0)
		learn(cbs, (size_t)res);
	/* The entry goes back to the pool after the callback, so its buffer
	 * stays valid while the callback reads it; a read the callback
	 * starts takes another entry, and a close it tries is refused. */
	cbs->dispatching++;
	if (res < 0)
		e->done.data((int)res, NULL, 0, e->arg);
	else
		e->done.data(0, req->buf, (size_t)res, e->arg);
	cbs->dispatching--;
	rl__cb_entry_put(cbs, e);
}

int rl_cb_fs_read_file(rl_cb_ctx *cbs, const char *path, rl_cb_data_fn done,
		       void *arg)
{
	int ret;
	struct rl__cb_entry *e = take(cbs, done != NULL, arg, &ret);

	if (!e)
		return ret;
	e->done.data = done;
	/* A submission that fails allocates nothing (fs.c checks first). */
	ret = rl_fs_read_file(cbs->loop, &e->req, path, NULL, cbs->guess,
			      RL_READ_FILE_GROW | RL_READ_FILE_LOAN,
			      pooled_done);
	return submitted(cbs, e, ret);
}

/* The caller's buffer, fixed or grown: data is that buffer. */
static void caller_done(rl_req *req)
{
	struct rl__cb_entry *e = (struct rl__cb_entry *)req;
	rl_cb_ctx *cbs = e->cbs;
	rl_cb_data_fn done = e->done.data;
	void *arg = e->arg;
	int64_t res = req->result;
	void *buf = req->buf;

	cbs->in_flight--;
	rl__cb_entry_put(cbs, e);
	/* The context refuses to close from inside its callbacks. */
	cbs->dispatching++;
	if (res < 0)
		done((int)res, buf, 0, arg);
	else
		done(0, buf, (size_t)res, arg);
	cbs->dispatching--;
}

static int read_file_into(rl_cb_ctx *cbs, const char *path, void *buf,
			  size_t len, unsigned flags, rl_cb_data_fn done,
			  void *arg)
{
	int ret;
	struct rl__cb_entry *e = take(cbs, done != NULL, arg, &ret);

	if (!e)
		return ret;
	e->done.data = done;
	ret = rl_fs_read_file(cbs->loop, &e->req, path, buf, len, flags,
			      caller_done);
	return submitted(cbs, e, ret);
}

int rl_cb_fs_read_file_buf(rl_cb_ctx *cbs, const char *path, void *buf,
			   size_t len, rl_cb_data_fn done, void *arg)
{
	return read_file_into(cbs, path, buf, len, 0, done, arg);
}

int rl_cb_fs_read_file_grow(rl_cb_ctx *cbs, const char *path, void *buf,
			    size_t cap, rl_cb_data_fn done, void *arg)
{
	return read_file_into(cbs, path, buf, cap, RL_READ_FILE_GROW, done,
			      arg);
}

/* ------------------------------------------------- everything else */

/* Every other request: (err, value) - the fd, the byte count or 0. */
static void res_done(rl_req *req)
{
	struct rl__cb_entry *e = (struct rl__cb_entry *)req;
	rl_cb_ctx *cbs = e->cbs;
	rl_cb_fn done = e->done.res;
	void *arg = e->arg;
	int64_t res = req->result;

	cbs->in_flight--;
	/* Back first: a request the callback starts may reuse it. */
	rl__cb_entry_put(cbs, e);
	cbs->dispatching++;
	if (res < 0)
		done((int)res, 0, arg);
	else
		done(0, res, arg);
	cbs->dispatching--;
}

/* The shape of every operation below: take an entry, submit, account. */
#define CB_SUBMIT(call)                                                       \
	do {                                                                  \
		int ret_;                                                     \
		struct rl__cb_entry *e = take(cbs, done != NULL, arg, &ret_); \
                                                                              \
		if (!e)                                                       \
			return ret_;                                          \
		e->done.res = done;                                           \
		ret_ = (call);                                                \
		return submitted(cbs, e, ret_);                               \
	} while (0)

int rl_cb_fs_open(rl_cb_ctx *cbs, const char *path, int flags, unsigned mode,
		  rl_cb_fn done, void *arg)
{
	CB_SUBMIT(rl_fs_open(cbs->loop, &e->req, path, flags, mode, res_done));
}

int rl_cb_fs_close(rl_cb_ctx *cbs, int fd, rl_cb_fn done, void *arg)
{
	CB_SUBMIT(rl_fs_close(cbs->loop, &e->req, fd, res_done));
}

int rl_cb_fs_read(rl_cb_ctx *cbs, int fd, void *buf, size_t len, int64_t offset,
		  rl_cb_fn done, void *arg)
{
	CB_SUBMIT(
		rl_fs_read(cbs->loop, &e->req, fd, buf, len, offset, res_done));
}

int rl_cb_fs_readv(rl_cb_ctx *cbs, int fd, const struct iovec *iov,
		   unsigned iovcnt, int64_t offset, rl_cb_fn done, void *arg)
{
	CB_SUBMIT(rl_fs_readv(cbs->loop, &e->req, fd, iov, iovcnt, offset,
			      res_done));
}

int rl_cb_fs_read_fixed(rl_cb_ctx *cbs, int fd, void *buf, size_t len,
			int64_t offset, unsigned index, rl_cb_fn done,
			void *arg)
{
	CB_SUBMIT(rl_fs_read_fixed(cbs->loop, &e->req, fd, buf, len, offset,
				   index, res_done));
}

int rl_cb_fs_write(rl_cb_ctx *cbs, int fd, const void *buf, size_t len,
		   int64_t offset, rl_cb_fn done, void *arg)
{
	CB_SUBMIT(rl_fs_write(cbs->loop, &e->req, fd, buf, len, offset,
			      res_done));
}

int rl_cb_fs_writev(rl_cb_ctx *cbs, int fd, const struct iovec *iov,
		    unsigned iovcnt, int64_t offset, rl_cb_fn done, void *arg)
{
	CB_SUBMIT(rl_fs_writev(cbs->loop, &e->req, fd, iov, iovcnt, offset,
			       res_done));
}

int rl_cb_fs_write_fixed(rl_cb_ctx *cbs, int fd, const void *buf, size_t len,
			 int64_t offset, unsigned index, rl_cb_fn done,
			 void *arg)
{
	CB_SUBMIT(rl_fs_write_fixed(cbs->loop, &e->req, fd, buf, len, offset,
				    index, res_done));
}

int rl_cb_fs_write_file(rl_cb_ctx *cbs, const char *path, const void *buf,
			size_t len, unsigned flags, unsigned mode,
			rl_cb_fn done, void *arg)
{
	CB_SUBMIT(rl_fs_write_file(cbs->loop, &e->req, path, buf, len, flags,
				   mode, res_done));
}

int rl_cb_fs_stat(rl_cb_ctx *cbs, const char *path, struct statx *stx,
		  rl_cb_fn done, void *arg)
{
	CB_SUBMIT(rl_fs_stat(cbs->loop, &e->req, path, stx, res_done));
}

int rl_cb_fs_fstat(rl_cb_ctx *cbs, int fd, struct statx *stx, rl_cb_fn done,
		   void *arg)
{
	CB_SUBMIT(rl_fs_fstat(cbs->loop, &e->req, fd, stx, res_done));
}

int rl_cb_fs_fsync(rl_cb_ctx *cbs, int fd, unsigned flags, rl_cb_fn done,
		   void *arg)
{
	CB_SUBMIT(rl_fs_fsync(cbs->loop, &e->req, fd, flags, res_done));
}

int rl_cb_fs_ftruncate(rl_cb_ctx *cbs, int fd, int64_t length, rl_cb_fn done,
		       void *arg)
{
	CB_SUBMIT(rl_fs_ftruncate(cbs->loop, &e->req, fd, length, res_done));
}

int rl_cb_fs_fallocate(rl_cb_ctx *cbs, int fd, int mode, int64_t offset,
		       int64_t len, rl_cb_fn done, void *arg)
{
	CB_SUBMIT(rl_fs_fallocate(cbs->loop, &e->req, fd, mode, offset, len,
				  res_done));
}

int rl_cb_fs_unlink(rl_cb_ctx *cbs, const char *path, rl_cb_fn done, void *arg)
{
	CB_SUBMIT(rl_fs_unlink(cbs->loop, &e->req, path, res_done));
}

int rl_cb_fs_rmdir(rl_cb_ctx *cbs, const char *path, rl_cb_fn done, void *arg)
{
	CB_SUBMIT(rl_fs_rmdir(cbs->loop, &e->req, path, res_done));
}

int rl_cb_fs_mkdir(rl_cb_ctx *cbs, const char *path, unsigned mode,
		   rl_cb_fn done, void *arg)
{
	CB_SUBMIT(rl_fs_mkdir(cbs->loop, &e->req, path, mode, res_done));
}

int rl_cb_fs_rename(rl_cb_ctx *cbs, const char *from, const char *to,
		    unsigned flags, rl_cb_fn done, void *arg)
{
	CB_SUBMIT(rl_fs_rename(cbs->loop, &e->req, from, to, flags, res_done));
}

/* ------------------------------------------- for the other operations */

/* The steps above, for the socket operations (callback_net.c). */
struct rl__cb_entry *rl__cb_take(rl_cb_ctx *cbs, bool has_done, void *arg,
				 int *ret)
{
	return take(cbs, has_done, arg, ret);
}

int rl__cb_submitted(rl_cb_ctx *cbs, struct rl__cb_entry *e, int ret)
{
	return submitted(cbs, e, ret);
}

void rl__cb_res_done(rl_req *req)
{
	res_done(req);
}
