/* SPDX-License-Identifier: MIT */
/*
 * epoll_fs_write.c - the epoll backend's pool jobs for writes (write,
 * writev, write_fixed, write_file) and for the requests beyond open, read,
 * close and stat (fsync, ftruncate, fallocate, unlink, rmdir, mkdir,
 * rename, fstat). None of them has a fast path (epoll_fs.c says why).
 *
 * As in epoll_fs.c, a job runs on a worker, reads the request's arguments
 * and leaves its result in res[0]. A call interrupted by the pool's signal
 * is retried unless the job was asked to give up, and then fails with
 * -EINTR, which the loop reports as -ECANCELED.
 *
 * A write finishes what a short write left, as on io_uring (ringloop.h).
 * The loop thread finds out the fd's type before it hands a write over
 * (inline_write() in epoll_fs.c); where it did not (the epoll-pool
 * configuration, a burst shared with the workers) a regular worker does:
 * a pipe, socket or device goes back to the loop thread, which polls it
 * for room and writes with RWF_NOWAIT as room comes (write_stream()),
 * so a write to a pipe nobody reads holds no thread, is cancelled at
 * once, and works when the system refuses the loop new threads; an
 * O_NONBLOCK fd waits the same way. A device that cannot be polled or refuses RWF_NOWAIT is
 * written in the slow lane (epoll.h), where the worker waits for room in
 * poll(), which the pool's signal interrupts. write_file's stream (a
 * FIFO whose reader is slow) is handed to the slow lane likewise.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "epoll_fs.h"

#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN 0x00002000U /* Linux 6.1 */
#endif

/* -errno of a call that failed with EINTR: retry (0), or give up. */
static int interrupted(void)
{
	return rl__pool_job_cancelled() ? -EINTR : 0;
}

/* Waits until fd takes more data (or has an error to report). */
static int wait_writable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };

	for (;;) {
		int n = poll(&p, 1, -1);

		if (n > 0)
			return (p.revents & POLLNVAL) ? -EBADF : 0;
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n < 0 && interrupted())
			return -EINTR;
	}
}

/* Writes all of req's data to fd; len, or -errno. A write that AIO cut
 * short (epoll_aio.c) goes on from where it stopped, res[1]. A caller
 * that must not wait (a regular worker) gets RL__RES_SLOW when fd has no
 * room, with what was written so far in res[1]. */
static int64_t write_all(rl_req *req, int fd, bool may_wait)
{
	size_t done = (size_t)rl__epr(req)->res[1];
	ssize_t r;
	int err;

	/* At least one call, also for len 0: a bad fd fails as on io_uring. */
	for (;;) {
		r = rl__ep_rw(req, fd, done, 0, true);
		if (r >= 0) {
			done += (size_t)r;
			if (done >= req->len)
				return (int64_t)req->len;
			if (r == 0)
				return -EIO; /* as uring_fs_write.c */
			/* A blocking pipe write cut short by the pool's
			 * signal returns what it wrote, not EINTR. */
			if (interrupted())
				return -EINTR;
			continue;
		}
		err = errno;
		if (err == EINTR && !interrupted())
			continue;
		if (err == EAGAIN && !may_wait) {
			rl__epr(req)->res[1] = (int64_t)done;
			return RL__RES_SLOW;
		}
		if (err == EAGAIN && (err = -wait_writable(fd)) == 0)
			continue;
		return -err;
	}
}

/* A pipe, socket or device may take nothing for good (nobody reads): a
 * write to one is never done on a regular worker, whose blocked writes
 * would hold back every stat and read behind them. The loop thread polls
 * the fd for room instead (epoll_fs.c); one that cannot be
 * polled, or that refuses RWF_NOWAIT, comes back here in the slow lane
 * (RL__RD_BLOCKING), where write_all() waits. */
void rl__ep_job_write(rl_req *req)
{
	struct stat st;

	if (!(rl__epr(req)->bflags & (RL__RD_BLOCKING | RL__RD_SEEKABLE)) &&
	    fstat(req->fd, &st) == 0 && rl__ep_stream_type(st.st_mode)) {
		rl__epr(req)->res[0] = RL__RES_POLL;
		return;
	}
	rl__epr(req)->res[0] = write_all(req, req->fd, true);
}

static int sync_fd(int fd, bool datasync)
{
	int ret;

	do {
		ret = datasync ? fdatasync(fd) : fsync(fd);
	} while (ret < 0 && errno == EINTR && !interrupted());
	return ret < 0 ? -errno : 0;
}

void rl__ep_job_fsync(rl_req *req)
{
	rl__epr(req)->res[0] = sync_fd(req->fd, req->flags & RL_FSYNC_DATASYNC);
}

void rl__ep_job_ftruncate(rl_req *req)
{
	int ret;

	do {
		ret = ftruncate(req->fd, (off_t)req->offset);
	} while (ret < 0 && errno == EINTR && !interrupted());
	rl__epr(req)->res[0] = ret < 0 ? -errno : 0;
}

void rl__ep_job_fallocate(rl_req *req)
{
	int ret;

	do {
		ret = fallocate(req->fd, req->flags, (off_t)req->offset,
				(off_t)req->len);
	} while (ret < 0 && errno == EINTR && !interrupted());
	rl__epr(req)->res[0] = ret < 0 ? -errno : 0;
}

void rl__ep_job_path(rl_req *req)
{
	int ret;

	do {
		switch (req->op) {
		case RL_OP_UNLINK:
			ret = unlinkat(AT_FDCWD, req->path, 0);
			break;
		case RL_OP_RMDIR:
			ret = unlinkat(AT_FDCWD, req->path, AT_REMOVEDIR);
			break;
		case RL_OP_MKDIR:
			ret = mkdirat(AT_FDCWD, req->path, (mode_t)req->mode);
			break;
		default: /* RL_OP_RENAME */
			ret = renameat2(AT_FDCWD, req->path, AT_FDCWD,
					req->path2, (unsigned)req->flags);
			break;
		}
	} while (ret < 0 && errno == EINTR && !interrupted());
	rl__epr(req)->res[0] = ret < 0 ? -errno : 0;
}

void rl__ep_job_fstat(rl_req *req)
{
	int ret = statx(req->fd, "", AT_EMPTY_PATH,
			STATX_BASIC_STATS | STATX_DIOALIGN, req->stx);

	rl__epr(req)->res[0] = ret < 0 ? -errno : 0;
}

/* write_file is one job: open (create or truncate), write everything,
 * fsync if asked, close. The first failure is the result; the file is
 * closed whatever happened, except when a regular worker hands the rest
 * of the job over to the slow lane (below). */
void rl__ep_job_write_file(rl_req *req)
{
	bool slow = rl__epr(req)->bflags & RL__RD_BLOCKING;
	int oflags = O_WRONLY | O_CREAT | O_CLOEXEC;
	int64_t res;
	int fd = req->fd;

	oflags |= (req->flags & RL_WRITE_FILE_APPEND) ? O_APPEND : O_TRUNC;
	if (req->flags & RL_WRITE_FILE_EXCL)
		oflags |= O_EXCL;
	/* A regular worker never waits for a FIFO's reader (ENXIO) or a
	 * lease break (EAGAIN): those go to the slow lane, whose open
	 * blocks, as rl_fs_open()'s do (epoll_fs.c). The flag changes
	 * nothing for a regular file's writes; a stream's fd keeps it, and
	 * write_all() waits for room in the slow lane. */
	if (!slow)
		oflags |= O_NONBLOCK;
	if (fd >= 0) {
		/* A regular worker opened it and found no room: go on. */
		req->fd = -1;
		rl__epr(req)->bflags &= ~(uint32_t)RL__EP_STREAM;
	} else {
		do {
			fd = openat(AT_FDCWD, req->path, oflags,
				    (mode_t)req->mode);
		} while (fd < 0 && errno == EINTR && !interrupted());
	}
	if (fd < 0) {
		res = -errno;
		if (!slow && (res == -ENXIO || res == -EAGAIN))
			res = RL__RES_SLOW;
		rl__epr(req)->res[0] = res;
		return;
	}
	res = req->len ? write_all(req, fd, slow) : 0;
	if (res == RL__RES_SLOW) {
		/* A pipe or socket whose reader is slow or gone may take
		 * nothing for good. Closing the fd here would tell a FIFO's
		 * reader that the data ended, so the slow lane takes it over
		 * open (req->fd, RL__EP_STREAM: the loop closes it if the
		 * request is dropped before it runs) and goes on from
		 * res[1]. */
		req->fd = fd;
		rl__epr(req)->bflags |= RL__EP_STREAM;
		rl__epr(req)->res[0] = res;
		return;
	}
	if (res >= 0 &&
	    (req->flags & (RL_WRITE_FILE_FSYNC | RL_WRITE_FILE_DATASYNC)))
		res = sync_fd(fd, !(req->flags & RL_WRITE_FILE_FSYNC));
	/* close() is never retried: the fd is gone even after EINTR. */
	if (close(fd) < 0 && res >= 0)
		res = -errno;
	rl__epr(req)->res[0] = res < 0 ? res : (int64_t)req->len;
}
