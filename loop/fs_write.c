/* SPDX-License-Identifier: MIT */
/*
 * fs_write.c - the write side of file requests, and the other requests
 * beyond open/read/close/stat/read_file: argument checks and hand-off to
 * the backend (fs.c has the shared checks and says why they are made
 * here), and the loop's set of registered buffers.
 *
 * The checks made here are those the two backends would otherwise answer
 * differently, or that the loop needs to hold the request at all (a
 * length that fits, an iovec count the continuation of a short write can
 * walk). Everything else (a bad fd, a missing file, a negative length for
 * ftruncate) is the kernel's to say, on either backend.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "internal.h"

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

/* io_uring's limits for a buffer set (IORING_MAX_REG_BUFFERS, and the
 * largest buffer it registers), kept on every backend. */
#define MAX_BUFS    (1u << 14)
#define MAX_BUF_LEN ((size_t)1 << 30)

static int check_rw(rl_loop *loop, rl_req *req, rl_req_cb cb, int fd,
		    const void *buf, size_t len, int64_t offset)
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
	return 0;
}

static int submit_rw(rl_loop *loop, rl_req *req, uint8_t op, int fd,
		     const void *buf, size_t len, int64_t offset, rl_req_cb cb)
{
	rl__fs_prep(loop, req, op, cb);
	req->fd = fd;
	req->buf = (void *)buf; /* a write only reads it */
	req->len = len;
	req->offset = offset;
	return rl__fs_accept(loop, req);
}

int rl_fs_write(rl_loop *loop, rl_req *req, int fd, const void *buf, size_t len,
		int64_t offset, rl_req_cb cb)
{
	int ret = check_rw(loop, req, cb, fd, buf, len, offset);

	if (ret < 0)
		return ret;
	return submit_rw(loop, req, RL_OP_WRITE, fd, buf, len, offset, cb);
}

/* The total of the iovecs' lengths, which the loop keeps in req->len. */
static int iov_total(const struct iovec *iov, unsigned iovcnt, size_t *out)
{
	size_t total = 0;

	if (iovcnt > IOV_MAX)
		return -EINVAL;
	if (!iov && iovcnt)
		return -EFAULT;
	for (unsigned i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > RL__MAX_IO - total)
			return -EINVAL;
		total += iov[i].iov_len;
	}
	*out = total;
	return 0;
}

static int submit_vec(rl_loop *loop, rl_req *req, uint8_t op, int fd,
		      const struct iovec *iov, unsigned iovcnt, int64_t offset,
		      rl_req_cb cb)
{
	int ret = rl__fs_check_req(loop, req, cb);
	size_t total = 0;

	if (ret < 0)
		return ret;
	if (fd < 0)
		return -EBADF;
	if (offset < -1)
		return -EINVAL;
	ret = iov_total(iov, iovcnt, &total);
	if (ret < 0)
		return ret;
	rl__fs_prep(loop, req, op, cb);
	req->fd = fd;
	req->iov = iov;
	req->count = iovcnt;
	req->len = total;
	req->offset = offset;
	return rl__fs_accept(loop, req);
}

int rl_fs_readv(rl_loop *loop, rl_req *req, int fd, const struct iovec *iov,
		unsigned iovcnt, int64_t offset, rl_req_cb cb)
{
	return submit_vec(loop, req, RL_OP_READV, fd, iov, iovcnt, offset, cb);
}

int rl_fs_writev(rl_loop *loop, rl_req *req, int fd, const struct iovec *iov,
		 unsigned iovcnt, int64_t offset, rl_req_cb cb)
{
	return submit_vec(loop, req, RL_OP_WRITEV, fd, iov, iovcnt, offset, cb);
}

/* ------------------------------------------------------ registered buffers */

int rl_loop_register_buffers(rl_loop *loop, const struct iovec *iov, unsigned n)
{
	struct iovec *copy = NULL;
	int ret;

	if (!loop || n > MAX_BUFS)
		return -EINVAL;
	if (!iov && n)
		return -EFAULT;
	if (loop->closing)
		return -ECANCELED;
	/* A request queued in user space (a full SQ) would be prepared
	 * later against the new set; and on epoll, checks made at submit
	 * would no longer hold. */
	if (loop->active_reqs)
		return -EBUSY;
	for (unsigned i = 0; i < n; i++)
		if (!iov[i].iov_base || !iov[i].iov_len ||
		    iov[i].iov_len > MAX_BUF_LEN)
			return -EINVAL;
	if (n) {
		copy = malloc(n * sizeof(*copy));
		if (!copy)
			return -ENOMEM;
		memcpy(copy, iov, n * sizeof(*copy));
	}
	/* The old set goes first (io_uring refuses to register over one);
	 * if the new one then fails, the loop has none. */
	if (loop->nbufs && loop->backend->register_buffers) {
		ret = loop->backend->register_buffers(loop, NULL, 0);
		if (ret < 0) {
			free(copy);
			return ret;
		}
	}
	free(loop->bufs);
	loop->bufs = NULL;
	loop->nbufs = 0;
	if (n && loop->backend->register_buffers) {
		ret = loop->backend->register_buffers(loop, copy, n);
		if (ret < 0) {
			free(copy);
			return ret;
		}
	}
	loop->bufs = copy;
	loop->nbufs = n;
	return 0;
}

void rl__fs_free(rl_loop *loop)
{
	free(loop->bufs);
	loop->bufs = NULL;
	loop->nbufs = 0;
}

/* [buf, buf + len) inside registered buffer index, as io_uring checks it
 * (-EFAULT otherwise); checked at submit so every backend says the same. */
static int check_fixed(const rl_loop *loop, const void *buf, size_t len,
		       unsigned index)
{
	uintptr_t lo, hi, start = (uintptr_t)buf;

	if (index >= loop->nbufs)
		return -EFAULT;
	lo = (uintptr_t)loop->bufs[index].iov_base;
	hi = lo + loop->bufs[index].iov_len;
	if (start < lo || start > hi || len > hi - start)
		return -EFAULT;
	return 0;
}

static int submit_fixed(rl_loop *loop, rl_req *req, uint8_t op, int fd,
			const void *buf, size_t len, int64_t offset,
			unsigned index, rl_req_cb cb)
{
	int ret = check_rw(loop, req, cb, fd, buf, len, offset);

	if (ret < 0 || (ret = check_fixed(loop, buf, len, index)) < 0)
		return ret;
	rl__fs_prep(loop, req, op, cb);
	req->fd = fd;
	req->buf = (void *)buf; /* a write only reads it */
	req->len = len;
	req->offset = offset;
	req->count = index;
	return rl__fs_accept(loop, req);
}

int rl_fs_read_fixed(rl_loop *loop, rl_req *req, int fd, void *buf, size_t len,
		     int64_t offset, unsigned index, rl_req_cb cb)
{
	return submit_fixed(loop, req, RL_OP_READ_FIXED, fd, buf, len, offset,
			    index, cb);
}

int rl_fs_write_fixed(rl_loop *loop, rl_req *req, int fd, const void *buf,
		      size_t len, int64_t offset, unsigned index, rl_req_cb cb)
{
	return submit_fixed(loop, req, RL_OP_WRITE_FIXED, fd, buf, len, offset,
			    index, cb);
}

/* -------------------------------------------------------- fd operations */

/* Each call checks everything first, then prepares: a call that fails
 * leaves the request as it was. */
static int check_fd(rl_loop *loop, rl_req *req, rl_req_cb cb, int fd)
{
	int ret = rl__fs_check_req(loop, req, cb);

	if (ret < 0)
		return ret;
	return fd < 0 ? -EBADF : 0;
}

int rl_fs_fsync(rl_loop *loop, rl_req *req, int fd, unsigned flags,
		rl_req_cb cb)
{
	int ret = check_fd(loop, req, cb, fd);

	if (ret < 0)
		return ret;
	if (flags & ~(unsigned)RL_FSYNC_DATASYNC)
		return -EINVAL;
	rl__fs_prep(loop, req, RL_OP_FSYNC, cb);
	req->fd = fd;
	req->flags = (int)flags;
	return rl__fs_accept(loop, req);
}

int rl_fs_ftruncate(rl_loop *loop, rl_req *req, int fd, int64_t length,
		    rl_req_cb cb)
{
	int ret = check_fd(loop, req, cb, fd);

	if (ret < 0)
		return ret;
	rl__fs_prep(loop, req, RL_OP_FTRUNCATE, cb);
	req->fd = fd;
	req->offset = length;
	return rl__fs_accept(loop, req);
}

int rl_fs_fallocate(rl_loop *loop, rl_req *req, int fd, int mode,
		    int64_t offset, int64_t len, rl_req_cb cb)
{
	int ret = check_fd(loop, req, cb, fd);

	if (ret < 0)
		return ret;
	/* fallocate(2) says EINVAL for these too; checked here so that len
	 * fits the request's size_t. */
	if (offset < 0 || len <= 0)
		return -EINVAL;
	rl__fs_prep(loop, req, RL_OP_FALLOCATE, cb);
	req->fd = fd;
	req->flags = mode;
	req->offset = offset;
	req->len = (size_t)len;
	return rl__fs_accept(loop, req);
}

int rl_fs_fstat(rl_loop *loop, rl_req *req, int fd, struct statx *stx,
		rl_req_cb cb)
{
	int ret = check_fd(loop, req, cb, fd);

	if (ret < 0)
		return ret;
	if (!stx)
		return -EFAULT;
	rl__fs_prep(loop, req, RL_OP_FSTAT, cb);
	req->fd = fd;
	req->stx = stx;
	return rl__fs_accept(loop, req);
}

/* ------------------------------------------------------ path operations */

static int check_path(rl_loop *loop, rl_req *req, rl_req_cb cb,
		      const char *path)
{
	int ret = rl__fs_check_req(loop, req, cb);

	return ret < 0 ? ret : rl__fs_check_path(path);
}

static int submit_path(rl_loop *loop, rl_req *req, uint8_t op, const char *path,
		       unsigned mode, rl_req_cb cb)
{
	int ret = check_path(loop, req, cb, path);

	if (ret < 0)
		return ret;
	rl__fs_prep(loop, req, op, cb);
	req->path = path;
	req->mode = mode;
	return rl__fs_accept(loop, req);
}

int rl_fs_unlink(rl_loop *loop, rl_req *req, const char *path, rl_req_cb cb)
{
	return submit_path(loop, req, RL_OP_UNLINK, path, 0, cb);
}

int rl_fs_rmdir(rl_loop *loop, rl_req *req, const char *path, rl_req_cb cb)
{
	return submit_path(loop, req, RL_OP_RMDIR, path, 0, cb);
}

int rl_fs_mkdir(rl_loop *loop, rl_req *req, const char *path, unsigned mode,
		rl_req_cb cb)
{
	return submit_path(loop, req, RL_OP_MKDIR, path, mode, cb);
}

int rl_fs_rename(rl_loop *loop, rl_req *req, const char *from, const char *to,
		 unsigned flags, rl_req_cb cb)
{
	int ret = check_path(loop, req, cb, from);

	if (ret < 0 || (ret = rl__fs_check_path(to)) < 0)
		return ret;
	rl__fs_prep(loop, req, RL_OP_RENAME, cb);
	req->path = from;
	req->path2 = to;
	req->flags = (int)flags;
	return rl__fs_accept(loop, req);
}

int rl_fs_write_file(rl_loop *loop, rl_req *req, const char *path,
		     const void *buf, size_t len, unsigned flags, unsigned mode,
		     rl_req_cb cb)
{
	const unsigned known = RL_WRITE_FILE_FSYNC | RL_WRITE_FILE_DATASYNC |
			       RL_WRITE_FILE_EXCL | RL_WRITE_FILE_APPEND;
	int ret = check_path(loop, req, cb, path);

	if (ret < 0)
		return ret;
	if (flags & ~known)
		return -EINVAL;
	if (!buf && len)
		return -EFAULT;
	if (len > RL__MAX_IO)
		return -EINVAL;
	rl__fs_prep(loop, req, RL_OP_WRITE_FILE, cb);
	req->path = path;
	req->buf = (void *)buf; /* a write only reads it */
	req->len = len;
	req->flags = (int)flags;
	req->mode = mode;
	return rl__fs_accept(loop, req);
}
