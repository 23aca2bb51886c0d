/* SPDX-License-Identifier: MIT */
/*
 * fs.c - file requests: argument checks, hand-off to the backend, cancel,
 * and the synchronous helpers the epoll backend's workers share.
 *
 * Every check that can fail does so here, before the request is accepted,
 * so a bad argument is a -errno from the submitting call and the callback
 * never runs. Checks the kernel makes anyway (a missing file, a directory,
 * a closed fd) are left to the kernel and arrive in the callback, so both
 * backends report exactly what the kernel says.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "internal.h"

/* Shared with fs_write.c: the checks every request makes, in this order,
 * and the hand-off. */
int rl__fs_check_path(const char *path)
{
	if (!path)
		return -EFAULT;
	if (!*path)
		return -ENOENT;
	if (strnlen(path, PATH_MAX) >= PATH_MAX)
		return -ENAMETOOLONG;
	return 0;
}

int rl__fs_check_req(rl_loop *loop, rl_req *req, rl_req_cb cb)
{
	if (!loop || !req || !cb)
		return -EINVAL;
	if (loop->closing)
		return -ECANCELED;
	if (rl__req(req)->state & RL__REQ_ACTIVE)
		return -EBUSY;
	return 0;
}

void rl__fs_prep(rl_loop *loop, rl_req *req, uint8_t op, rl_req_cb cb)
{
	void *data = req->data;

	memset(req, 0, sizeof(*req));
	req->data = data;
	req->loop = loop;
	req->op = op;
	req->cb = cb;
	req->fd = -1;
	req->offset = -1;
}

int rl__fs_accept(rl_loop *loop, rl_req *req)
{
	/* A lent buffer is taken as late as the backend can: io_uring
	 * takes it when the chain goes to the kernel. Elsewhere, and for a
	 * read another loop of the group may run, it is taken now. */
	if ((rl__req(req)->state & RL__REQ_LOAN) &&
	    (loop->spread || !loop->backend->late_loan)) {
		int ret = rl__loan_take(loop, req);

		if (ret < 0)
			return ret;
	}
	rl__req(req)->state |= RL__REQ_ACTIVE;
	loop->active_reqs++;
	loop->stats.submissions++;
	if (loop->spread && req->op == RL_OP_READ_FILE &&
	    rl__spread_submit(loop, req))
		return 0;
	loop->backend->submit(loop, req);
	return 0;
}

int rl_fs_open(rl_loop *loop, rl_req *req, const char *path, int flags,
	       unsigned mode, rl_req_cb cb)
{
	int ret = rl__fs_check_req(loop, req, cb);

	if (ret < 0 || (ret = rl__fs_check_path(path)) < 0)
		return ret;
	rl__fs_prep(loop, req, RL_OP_OPEN, cb);
	req->path = path;
	req->flags = flags;
	req->mode = mode;
	return rl__fs_accept(loop, req);
}

int rl_fs_read(rl_loop *loop, rl_req *req, int fd, void *buf, size_t len,
	       int64_t offset, rl_req_cb cb)
{
	int ret = rl__fs_check_req(loop, req, cb);

	if (ret < 0)
		return ret;
	if (fd < 0)
		return -EBADF;
	if (!buf && len)
		return -EFAULT;
	if (len > RL__MAX_IO || offset < -1)
		return -EINVAL;
	rl__fs_prep(loop, req, RL_OP_READ, cb);
	req->fd = fd;
	req->buf = buf;
	req->len = len;
	req->offset = offset;
	return rl__fs_accept(loop, req);
}

int rl_fs_close(rl_loop *loop, rl_req *req, int fd, rl_req_cb cb)
{
	int ret = rl__fs_check_req(loop, req, cb);

	if (ret < 0)
		return ret;
	if (fd < 0)
		return -EBADF;
	rl__fs_prep(loop, req, RL_OP_CLOSE, cb);
	req->fd = fd;
	return rl__fs_accept(loop, req);
}

int rl_fs_stat(rl_loop *loop, rl_req *req, const char *path, struct statx *stx,
	       rl_req_cb cb)
{
	int ret = rl__fs_check_req(loop, req, cb);

	if (ret < 0 || (ret = rl__fs_check_path(path)) < 0)
		return ret;
	if (!stx)
		return -EFAULT;
	rl__fs_prep(loop, req, RL_OP_STAT, cb);
	req->path = path;
	req->stx = stx;
	return rl__fs_accept(loop, req);
}

int rl_fs_read_file(rl_loop *loop, rl_req *req, const char *path, void *buf,
		    size_t len, unsigned flags, rl_req_cb cb)
{
	int ret = rl__fs_check_req(loop, req, cb);
	bool grow = flags & RL_READ_FILE_GROW;
	bool loan = flags & RL_READ_FILE_LOAN;

	if (ret < 0 || (ret = rl__fs_check_path(path)) < 0)
		return ret;
	if (flags & ~(unsigned)(RL_READ_FILE_GROW | RL_READ_FILE_LOAN |
				RL_READ_FILE_REGULAR))
		return -EINVAL;
	if (loan && (!grow || buf))
		return -EINVAL;
	if (!grow && !buf)
		return -EFAULT;
	if (len > RL__MAX_IO)
		return -EINVAL;
	if (loan) {
		/* The buffer is taken when the read starts (loan.c). */
		if (!len)
			len = RL__READ_FILE_FIRST;
	} else if (grow && (!buf || !len)) {
		/* The caller asked the loop for a buffer; a hint of 0 gets a
		 * page. Later requests reuse it if the caller passes it back.
		 * The loop never allocates past read_file_max, not even for a
		 * hint: a buffer that large would read a file the cap refuses. */
		size_t cap = len ? len : RL__READ_FILE_FIRST;
		void *p;

		if (cap > loop->opt.read_file_max)
			cap = loop->opt.read_file_max;
		p = realloc(buf, cap);

		if (!p)
			return -ENOMEM;
		buf = p;
		len = cap;
	}
	rl__fs_prep(loop, req, RL_OP_READ_FILE, cb);
	req->path = path;
	req->buf = buf;
	req->len = len;
	rl__req(req)->cap = len;
	if (grow)
		rl__req(req)->state |= RL__REQ_OWNBUF;
	if (loan)
		rl__req(req)->state |= RL__REQ_LOAN;
	if ((flags & RL_READ_FILE_REGULAR) ||
	    (loop->opt.flags & RL_REGULAR_FILES))
		rl__req(req)->state |= RL__REQ_REGULAR;
	return rl__fs_accept(loop, req);
}

int rl_cancel(rl_loop *loop, rl_req *req)
{
	if (!loop || !req || req->loop != loop)
		return -EINVAL;
	if (!(rl__req(req)->state & RL__REQ_ACTIVE))
		return -ENOENT;
	/* Before DONE: a request a backend finished at once because of the
	 * first cancel is still "cancelled", not "completed". */
	if (rl__req(req)->state & RL__REQ_CANCEL)
		return -EALREADY;
	if (rl__req(req)->state & RL__REQ_DONE)
		return -ENOENT;
	rl__req(req)->state |= RL__REQ_CANCEL;
	if (rl__req(req)->state & RL__REQ_SPREAD)
		rl__spread_cancel(loop, req);
	else
		loop->backend->cancel(loop, req);
	return 0;
}

static int resize(rl_req *req, size_t cap)
{
	void *p = realloc(req->buf, cap);

	if (!p)
		return -ENOMEM;
	req->buf = p;
	req->len = rl__req(req)->cap = cap;
	return 0;
}

/* Growth follows what was read, never a size the file system claims:
 * procfs says 0, /dev/zero says 0 and never ends, so each step at most
 * doubles what the file has proven to hold, and the loop's read_file_max
 * bounds the last one. */
int rl__read_file_grow(rl_req *req)
{
	size_t cap = rl__req(req)->cap, max = req->loop->opt.read_file_max;

	if (!(rl__req(req)->state & RL__REQ_OWNBUF) || cap >= max)
		return -EFBIG;
	return resize(req, cap > max / 2 ? max : 2 * cap);
}

int rl__read_file_reserve(rl_req *req, uint64_t size)
{
	size_t max = req->loop->opt.read_file_max;

	if (!(rl__req(req)->state & RL__REQ_OWNBUF) || size < rl__req(req)->cap)
		return 0;
	if (size > max)
		return -EFBIG;
	/* One byte more than the file, for the read that sees its end. */
	return resize(req, size < max ? (size_t)size + 1 : max);
}

/*
 * Reads the open file fd (st: what fstat said of it) to end of file into
 * the request's buffer, for the epoll backend's fast path and its workers
 * alike. A regular file's st_size is a hint: the buffer grows once to fit
 * it (or -EFBIG at once when it passes read_file_max). Each read goes
 * into the buffer plus a one-byte sentinel, so a full buffer and "the file
 * goes on" are told apart in the same call. A short read of a regular file
 * that reaches st_size is the end, as in the synchronous loop (four
 * syscalls in all with open, fstat and close); a size of 0 (procfs) or a
 * short read before st_size (a partial cache hit) proves nothing, and only
 * a 0 read ends those. A caller's buffer that cannot hold the file gives
 * -EFBIG.
 *
 * rwflags RWF_NOWAIT: anything that would block (EAGAIN, EOPNOTSUPP, EINTR)
 * returns RL__WOULD_BLOCK, and the caller starts over elsewhere. rwflags 0:
 * blocking reads, EINTR retried unless give_up (may be NULL) says so.
 * *reads (may be NULL) counts the read syscalls.
 */
int64_t rl__read_file_fd(rl_req *req, int fd, const struct stat *st,
			 int rwflags, bool (*give_up)(void), uint64_t *reads)
{
	struct iovec iov[2];
	char sentinel;
	size_t got = 0;
	ssize_t r;
	int ret;

	/* A regular file's size is a fair first guess (a sparse file of
	 * terabytes fails here, before any allocation); a size of 0 says
	 * nothing. */
	if (S_ISREG(st->st_mode) && st->st_size > 0) {
		ret = rl__read_file_reserve(req, (uint64_t)st->st_size);
		if (ret < 0)
			return ret;
	}
	for (;;) {
		/* A device that never runs dry (/dev/zero) never blocks
		 * either, so a signal cannot end its reads with EINTR: a job
		 * asked to give up stops between two reads. */
		if (give_up && give_up())
			return -EINTR;
		iov[0].iov_base = (char *)req->buf + got;
		iov[0].iov_len = rl__req(req)->cap - got;
		iov[1].iov_base = &sentinel;
		iov[1].iov_len = 1;
		do {
			/* Offset -1: the file position, which a pipe needs. */
			r = preadv2(fd, iov, 2, -1, rwflags);
			if (reads)
				(*reads)++;
		} while (r < 0 && errno == EINTR && !rwflags &&
			 !(give_up && give_up()));
		if (r < 0) {
			if (rwflags && (errno == EAGAIN ||
					errno == EOPNOTSUPP || errno == EINTR))
				return RL__WOULD_BLOCK;
			return -errno;
		}
		if (r == 0)
			break;
		if ((size_t)r > rl__req(req)->cap - got) {
			got = rl__req(req)->cap;
			ret = rl__read_file_grow(req);
			if (ret < 0)
				return ret;
			((char *)req->buf)[got++] = sentinel;
			continue;
		}
		got += (size_t)r;
		if (S_ISREG(st->st_mode) && st->st_size > 0 &&
		    got >= (size_t)st->st_size)
			break;
	}
	return (int64_t)got;
}
