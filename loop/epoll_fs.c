/* SPDX-License-Identifier: MIT */
/*
 * epoll_fs.c - file requests on the epoll backend: the jobs the pool's
 * workers run (the blocking way), and the fast path that finishes a
 * request on the loop thread when the kernel can do it without blocking.
 *
 * The fast path: read_file is openat2 + fstat + preadv2 + close, as many
 * syscalls as the plain synchronous loop; read (readv, read_fixed) is a
 * preadv2; close is a close(); open is openat2 (+ F_SETFL); a write
 * (writev, write_fixed) to a pipe, socket or device is written on the loop
 * thread as the fd has room (inline_write(), write_stream()). stat, writes
 * to files and everything else always go to the pool (see
 * rl__ep_fs_may_inline()); their jobs are in epoll_fs_write.c. What the fast path cannot finish
 * without blocking goes to the pool; a read_file of a regular file that
 * stops half-way starts over in the worker, with a fresh open, from
 * offset 0.
 *
 * Special files are opened as io_uring opens them: first with O_NONBLOCK.
 * That never waits for a FIFO's peer: a FIFO opened for reading is a
 * reader at once (kept, never closed and opened again, which would let a
 * writer through to a FIFO with no reader: SIGPIPE), and one opened for
 * writing with no reader fails with ENXIO, after which the slow lane does
 * the blocking open(2), which waits for a reader.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "epoll_fs.h"

#ifndef SYS_openat2
#define SYS_openat2 437 /* the same number on every architecture */
#endif
#ifndef RESOLVE_CACHED
#define RESOLVE_CACHED 0x20
#endif
#ifndef O_TMPFILE
#define O_TMPFILE 0 /* (O_TMPFILE includes O_DIRECTORY: compare all bits) */
#endif

/*
 * openat2() exists since 5.6 and RESOLVE_CACHED since 5.12; glibc 2.36
 * has no wrapper. With RESOLVE_CACHED, a lookup that would have to block
 * (a dentry not in the cache, a permission check that needs a sleeping
 * lock) fails with EAGAIN instead; a cached negative dentry still gives
 * ENOENT, so every other error is the real answer. Older kernels answer
 * ENOSYS (no openat2) or EINVAL (unknown resolve flag): the fast path for
 * opens is then marked unavailable for the loop's lifetime. openat2() is
 * stricter than openat() (unknown flag bits, a mode without O_CREAT:
 * EINVAL), so an EINVAL for a caller's rl_fs_open() flags only sends that
 * open to the pool. RESOLVE_CACHED also refuses O_CREAT, O_TRUNC and
 * O_TMPFILE with EAGAIN, so those go to the pool directly.
 */
static int sys_openat2(const char *path, int flags, uint64_t resolve)
{
	struct open_how how;

	memset(&how, 0, sizeof(how));
	how.flags = (uint64_t)(unsigned)flags;
	how.resolve = resolve;
	return (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
}

/* ------------------------------------------------------------ pool jobs */

/* These run on a worker. They read the request's arguments and leave the
 * result in ep_req.res[0]; they touch nothing else the loop owns (but
 * req->fd for a read_file that found a stream). A blocking call
 * interrupted by the pool's signal (threadpool.h) is retried unless the
 * job was asked to give up; then it fails with -EINTR, which the loop
 * reports as -ECANCELED. */

static int open_retrying(const char *path, int flags, mode_t mode)
{
	int fd;

	do {
		fd = openat(AT_FDCWD, path, flags, mode);
	} while (fd < 0 && errno == EINTR && !rl__pool_job_cancelled());
	return fd < 0 ? -errno : fd;
}

/* A job that was asked to give up and failed failed because of that (a
 * signal ends a wait with EINTR, or a copy to a buffer with EFAULT): the
 * loop reports it as cancelled, not as the kernel's error. */
static int64_t given_up(int64_t res)
{
	return res < 0 && rl__pool_job_cancelled() ? -EINTR : res;
}

/* An open that would block (see the top): a FIFO for writing with no
 * reader (ENXIO), a lease to break (EWOULDBLOCK). */
static bool open_would_block(int flags, int err)
{
	return !(flags & O_NONBLOCK) &&
	       (err == -EAGAIN ||
		(err == -ENXIO && (flags & O_ACCMODE) == O_WRONLY));
}

/* O_NONBLOCK off again when the caller did not ask for it. F_SETFL sets
 * the status flags, all of which but O_NONBLOCK are as asked already. */
static int64_t as_asked(int fd, int flags)
{
	int err;

	if ((flags & O_NONBLOCK) ||
	    fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0)
		return fd;
	err = -errno;
	close(fd);
	return err;
}

/* The regular lane's open: O_NONBLOCK, so that it never waits for a peer;
 * what would wait goes to the slow lane. */
static void job_open(rl_req *req)
{
	int fd;

	/* O_PATH opens nothing (no FIFO waits for a peer), and its fd takes
	 * no F_SETFL: the caller's flags as they are. */
	if (req->flags & O_PATH) {
		rl__epr(req)->res[0] =
			open_retrying(req->path, req->flags, (mode_t)req->mode);
		return;
	}
	fd = open_retrying(req->path, req->flags | O_NONBLOCK,
			   (mode_t)req->mode);

	if (fd < 0)
		rl__epr(req)->res[0] =
			open_would_block(req->flags, fd) ? RL__RES_SLOW : fd;
	else
		rl__epr(req)->res[0] = as_asked(fd, req->flags);
}

/* The slow lane's open: the blocking open(2) itself. */
static void job_open_blocking(rl_req *req)
{
	rl__epr(req)->res[0] = given_up(
		open_retrying(req->path, req->flags, (mode_t)req->mode));
}

/* close() is never retried: on Linux the fd is gone even after EINTR. */
static void job_close(rl_req *req)
{
	rl__epr(req)->res[0] = close(req->fd) < 0 ? -errno : 0;
}

static void job_stat(rl_req *req)
{
	int ret;

	do {
		ret = statx(AT_FDCWD, req->path, 0, STATX_BASIC_STATS,
			    req->stx);
	} while (ret < 0 && errno == EINTR && !rl__pool_job_cancelled());
	rl__epr(req)->res[0] = given_up(ret < 0 ? -errno : 0);
}

/*
 * read_file is one job: open, fstat, read to the end, close. The open is
 * O_NONBLOCK (see the top); a stream stays open and goes back to the loop
 * (RL__RES_STREAM), which reads it as its data comes. For a regular file
 * O_NONBLOCK changes nothing: its reads block all the same.
 */
static void job_read_file(rl_req *req)
{
	int fd = open_retrying(req->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);
	struct stat st;
	int64_t res;
	/* With other jobs waiting, a first pass reads without waiting for
	 * the disk (RWF_NOWAIT): a miss starts the file's readahead and
	 * the job goes to the end of the queue, so the worker starts the
	 * next files' I/O instead of sleeping on this one, and a burst of
	 * cold files reaches the disk at depth rather than one per worker.
	 * The second pass (RL__EP_AGAIN) blocks as before. */
	bool first = !(rl__epr(req)->bflags & RL__EP_AGAIN) &&
		     rl__pool_job_has_company();

	if (fd < 0) {
		rl__epr(req)->res[0] = fd;
		return;
	}
	if (fstat(fd, &st) < 0) {
		res = -errno;
	} else if (S_ISDIR(st.st_mode)) {
		res = -EISDIR;
	} else if (rl__ep_stream_type(st.st_mode)) {
		req->fd = fd;
		rl__epr(req)->res[0] = RL__RES_STREAM;
		return;
	} else {
		res = rl__read_file_fd(req, fd, &st, first ? RWF_NOWAIT : 0,
				       rl__pool_job_cancelled, NULL);
		if (res == RL__WOULD_BLOCK) {
			/* Queued again, it is the loop's to take as well:
			 * TRIED keeps it from a fast path that would miss
			 * the same way. */
			rl__epr(req)->bflags |= RL__EP_AGAIN | RL__EP_TRIED;
			rl__pool_job_again();
			res = -EINTR; /* the result if it was cancelled */
		}
	}
	close(fd);
	rl__epr(req)->res[0] = given_up(res);
}

/* At most this many of a request's iovecs go into one syscall once its
 * first bytes are done (the rest follows in the next one). */
#define RW_IOV 64

/*
 * Whether rl__ep_rw() at skip passes fewer iovecs than are left: when
 * skip falls inside an iovec, the first ones are copied (cut) and at most
 * RW_IOV go, so a read that fills them all has not reached the end of the
 * request, nor of a regular file.
 */
static bool rw_capped(const rl_req *req, size_t skip)
{
	const struct iovec *iov = req->iov;
	unsigned cnt = req->count;

	if (req->op != RL_OP_READV && req->op != RL_OP_WRITEV)
		return false;
	while (cnt && skip >= iov->iov_len) {
		skip -= iov->iov_len;
		iov++;
		cnt--;
	}
	return skip && cnt > RW_IOV;
}

/* A file without a position refuses an offset (ESPIPE): it reads or
 * writes what comes next, as io_uring does, on every backend (see
 * rl_fs_read()). */
ssize_t rl__ep_rw(rl_req *req, int fd, size_t skip, int rwflags, bool write)
{
	struct iovec local[RW_IOV];
	const struct iovec *iov = local;
	unsigned cnt = 1;
	/* Offset -1: the file position, like read() and write(). */
	off_t off = req->offset < 0 ? -1 : (off_t)(req->offset + (int64_t)skip);
	ssize_t r;

	if (req->op == RL_OP_READV || req->op == RL_OP_WRITEV) {
		iov = req->iov;
		cnt = req->count;
		while (cnt && skip >= iov->iov_len) {
			skip -= iov->iov_len;
			iov++;
			cnt--;
		}
		if (skip && cnt) {
			/* The caller's iovecs are const: copy the ones that
			 * go now, the first one cut. (skip is short of the
			 * total, so an iovec is left: cnt says so to the
			 * analyzer, which cannot know it.) */
			cnt = cnt < RW_IOV ? cnt : RW_IOV;
			memcpy(local, iov, cnt * sizeof(*iov));
			local[0].iov_base = (char *)local[0].iov_base + skip;
			local[0].iov_len -= skip;
			iov = local;
		}
	} else {
		local[0].iov_base = (char *)req->buf + skip;
		local[0].iov_len = req->len - skip;
	}
	r = write ? pwritev2(fd, iov, (int)cnt, off, rwflags)
		  : preadv2(fd, iov, (int)cnt, off, rwflags);
	if (r < 0 && errno == ESPIPE && off >= 0)
		r = write ? pwritev2(fd, iov, (int)cnt, -1, rwflags)
			  : preadv2(fd, iov, (int)cnt, -1, rwflags);
	return r;
}

/* The slow lane's read_file of a device that cannot be polled: blocking
 * reads of req->fd (O_NONBLOCK cleared by the loop) to its end. */
static void job_read_stream(rl_req *req)
{
	struct stat st;

	if (fstat(req->fd, &st) < 0)
		rl__epr(req)->res[0] = -errno;
	else
		rl__epr(req)->res[0] = given_up(rl__read_file_fd(
			req, req->fd, &st, 0, rl__pool_job_cancelled, NULL));
}

/*
 * A FIFO that no writer has opened yet reads as empty and ended (0), like
 * one whose writer came and went; but a blocking open would still be
 * waiting for that writer, and io_uring's read waits for it. Only poll
 * tells them apart: it reports nothing until a writer came, then POLLHUP
 * once it left. So a 0 from a FIFO is its end only when poll agrees.
 * poll() of a regular file always reports POLLIN: a 0 stays an end.
 */
static bool no_writer_yet(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, 0) == 0;
}

/*
 * Regular files cannot be polled (epoll_ctl says EPERM), so a blocking
 * read of one goes to a worker. Pipes, sockets and character devices CAN
 * block forever, and a worker stuck in read() could not be cancelled:
 * those reads are polled on the loop thread instead (EPOLLIN |
 * EPOLLONESHOT) and read with RWF_NOWAIT once ready, so rl_cancel() just
 * drops the registration. A descriptor with O_NONBLOCK waits for data all
 * the same, as io_uring does (it polls any file that supports RWF_NOWAIT
 * rather than answering -EAGAIN). A device that cannot be polled, or that
 * refuses RWF_NOWAIT once ready, is read in the slow lane.
 */
static void job_read(rl_req *req)
{
	size_t got = (size_t)rl__epr(req)->res[1];
	struct stat st;
	ssize_t r;

	if (!(rl__epr(req)->bflags & (RL__RD_SEEKABLE | RL__RD_BLOCKING))) {
		/* Straight from rl_fs_read() (no fast path): find out whether
		 * this read may wait forever before doing it. */
		if (fstat(req->fd, &st) < 0) {
			rl__epr(req)->res[0] = -errno;
			return;
		}
		if (rl__ep_stream_type(st.st_mode)) {
			r = rl__ep_rw(req, req->fd, 0, RWF_NOWAIT, false);
			if (r == 0 && req->len && no_writer_yet(req->fd))
				rl__epr(req)->res[0] = RL__RES_POLL;
			else if (r >= 0)
				rl__epr(req)->res[0] = r;
			else if (errno == EAGAIN || errno == EOPNOTSUPP)
				rl__epr(req)->res[0] = RL__RES_POLL;
			else
				rl__epr(req)->res[0] = -errno;
			return;
		}
	}
	/* A regular file (or, in the slow lane, a device that cannot be
	 * polled): one blocking read gives everything up to the end of the
	 * file, after what the fast path (or AIO) read already; more than
	 * one only when that call could not take every iovec left. */
	for (;;) {
		size_t skip = got;

		r = rl__ep_rw(req, req->fd, skip, 0, false);
		if (r < 0 && errno == EINTR && !rl__pool_job_cancelled())
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got >= req->len || !rw_capped(req, skip))
			break;
	}
	if (r < 0)
		rl__epr(req)->res[0] = got ? (int64_t)got : given_up(-errno);
	else
		rl__epr(req)->res[0] = (int64_t)got;
}

static void (*const jobs[])(rl_req *) = {
	[RL_OP_OPEN] = job_open,
	[RL_OP_READ] = job_read,
	[RL_OP_CLOSE] = job_close,
	[RL_OP_STAT] = job_stat,
	[RL_OP_READ_FILE] = job_read_file,
	[RL_OP_WRITE] = rl__ep_job_write,
	[RL_OP_READV] = job_read,
	[RL_OP_WRITEV] = rl__ep_job_write,
	[RL_OP_READ_FIXED] = job_read,
	[RL_OP_WRITE_FIXED] = rl__ep_job_write,
	[RL_OP_FSYNC] = rl__ep_job_fsync,
	[RL_OP_FTRUNCATE] = rl__ep_job_ftruncate,
	[RL_OP_FALLOCATE] = rl__ep_job_fallocate,
	[RL_OP_UNLINK] = rl__ep_job_path,
	[RL_OP_RMDIR] = rl__ep_job_path,
	[RL_OP_MKDIR] = rl__ep_job_path,
	[RL_OP_RENAME] = rl__ep_job_path,
	[RL_OP_FSTAT] = rl__ep_job_fstat,
	[RL_OP_WRITE_FILE] = rl__ep_job_write_file,
};

void (*rl__ep_fs_job(const rl_req *req))(rl_req *)
{
	return jobs[req->op];
}

void (*rl__ep_fs_slow_job(const rl_req *req))(rl_req *)
{
	switch (req->op) {
	case RL_OP_OPEN:
		return job_open_blocking;
	case RL_OP_READ_FILE:
		return job_read_stream;
	}
	return jobs[req->op];
}

/* ------------------------------------------------------------ fast path */

/* Every syscall below runs on the loop thread and counts in stats.syscalls:
 * the bench divides that by the operations to compare with io_uring. */

/* After an EINVAL from a caller's open flags: is it the flags or the
 * kernel? Asks once, with flags every openat2 kernel accepts. */
static void probe_openat2(rl_loop *loop, struct rl__ep *ep)
{
	int fd;

	ep->probed = true;
	fd = sys_openat2("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC,
			 RESOLVE_CACHED);
	loop->stats.syscalls++;
	if (fd >= 0)
		rl__ep_sys_close(loop, fd);
	else if (errno == EINVAL || errno == ENOSYS || errno == E2BIG)
		ep->openat2_ok = false;
}

/* openat2 with RESOLVE_CACHED: the fd, or -errno for a real failure, or
 * -EAGAIN when the pool must do it. */
static int open_cached(rl_loop *loop, struct rl__ep *ep, const char *path,
		       int flags, bool fixed_flags)
{
	int fd = sys_openat2(path, flags, RESOLVE_CACHED);
	int err;

	loop->stats.syscalls++;
	if (fd >= 0)
		return fd;
	err = errno;
	if (err == ENOSYS || err == E2BIG || (err == EINVAL && fixed_flags)) {
		ep->openat2_ok = false;
		return -EAGAIN;
	}
	if (err == EINVAL) {
		if (!ep->probed)
			probe_openat2(loop, ep);
		return -EAGAIN;
	}
	return -err;
}

/*
 * RESOLVE_CACHED covers the path walk only: opening a FIFO waits for a
 * peer and a device open may wait too. The inline open therefore adds
 * O_NONBLOCK (which also turns a lease break into EAGAIN instead of a
 * wait), as io_uring's first try does, and keeps what it opened, whatever
 * its type; it clears O_NONBLOCK again with F_SETFL when the caller did
 * not ask for it. A FIFO for writing with no reader (ENXIO) goes to the
 * slow lane, whose blocking open waits for one.
 */
static bool inline_open(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	int fd;

	/* RESOLVE_CACHED refuses these (EAGAIN); O_PATH takes no
	 * O_NONBLOCK in openat2 and is cheap in the pool anyway. */
	if ((req->flags & (O_CREAT | O_TRUNC | O_PATH)) ||
	    (O_TMPFILE && (req->flags & O_TMPFILE) == O_TMPFILE))
		return false;
	fd = open_cached(loop, ep, req->path, req->flags | O_NONBLOCK, false);
	if (fd == -EAGAIN)
		return false;
	if (fd == -ENXIO && open_would_block(req->flags, fd)) {
		rl__ep_to_slow(loop, ep, req, job_open_blocking);
		return true;
	}
	if (fd >= 0 && !(req->flags & O_NONBLOCK))
		loop->stats.syscalls++;
	rl__ep_finish_inline(loop, ep, req,
			     fd < 0 ? fd : as_asked(fd, req->flags));
	return true;
}

/* A read_file's open failed: out of fds may mean waiting for the loop's
 * own to be given back (see epoll.h). */
static void read_file_failed(rl_loop *loop, struct rl__ep *ep, rl_req *req,
			     int err)
{
	if ((err == -EMFILE || err == -ENFILE) && rl__ep_fd_wait(loop, ep, req))
		return;
	rl__ep_finish_inline(loop, ep, req, err);
}

/*
 * read_file on the loop thread: openat2 (cached lookup only), fstat,
 * preadv2 RWF_NOWAIT, close. Returns false, with nothing left open, when
 * something would block; the pool then does the whole job again. A FIFO
 * or a device stays open and is read as its data comes.
 */
static bool inline_read_file(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	struct stat st;
	int64_t res;
	int fd;

	fd = open_cached(loop, ep, req->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK,
			 true);
	if (fd == -EAGAIN)
		return false;
	if (fd < 0) {
		read_file_failed(loop, ep, req, fd);
		return true;
	}
	loop->stats.syscalls++;
	if (fstat(fd, &st) < 0) {
		res = -errno;
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		res = -EISDIR;
		goto out;
	}
	if (rl__ep_stream_type(st.st_mode)) {
		req->fd = fd;
		rl__ep_fd_held(ep, req);
		rl__ep_fs_stream(loop, ep, req);
		return true;
	}
	res = rl__read_file_fd(req, fd, &st, RWF_NOWAIT, NULL,
			       &loop->stats.syscalls);
	if (res == RL__WOULD_BLOCK) {
		/* Not all cached: a worker reads it again, blocking. */
		rl__ep_sys_close(loop, fd);
		rl__ep_fd_gave_back(ep);
		return false;
	}
out:
	rl__ep_sys_close(loop, fd);
	rl__ep_fd_gave_back(ep);
	rl__ep_finish_inline(loop, ep, req, res);
	return true;
}

/*
 * RWF_NOWAIT (4.14; buffered reads of regular files since 5.x) fails with
 * EAGAIN when the data is not in the page cache, with EOPNOTSUPP on files
 * that do not support it (procfs, some devices), and may also return a
 * SHORT read when only the first pages are cached. A short read is
 * therefore never taken for the end of a regular file: read on until 0 or
 * EAGAIN.
 */
static bool inline_read(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	struct stat st;
	size_t got = 0;
	ssize_t r;
	int err;

	for (;;) {
		r = rl__ep_rw(req, req->fd, got, RWF_NOWAIT, false);
		loop->stats.syscalls++;
		if (r < 0)
			break;
		got += (size_t)r;
		if (r == 0 && got == 0 && req->len) {
			/* End of file, or a FIFO whose writer is still to
			 * come (see no_writer_yet()). */
			loop->stats.syscalls++;
			if (!no_writer_yet(req->fd))
				goto done;
			errno = EAGAIN;
			break;
		}
		if (r == 0 || got == req->len)
			goto done;
		if (got == (size_t)r) {
			/* A first short read: the whole answer for a pipe or
			 * socket, but maybe a partial cache hit on a file. */
			loop->stats.syscalls++;
			if (fstat(req->fd, &st) < 0 || !S_ISREG(st.st_mode))
				goto done;
		}
	}
	err = errno;
	if (got) {
		if (err != EAGAIN && err != EINTR)
			goto done; /* the bytes read so far are the answer */
		/* The rest of a regular file is not cached: a worker reads
		 * it blocking, from where the fast path stopped. TRIED: the
		 * loop may take the job back off the pool's queue
		 * (run_inline()), and a second fast path would start again
		 * at byte 0 of the buffer, from a file position already
		 * past the prefix. */
		rl__epr(req)->res[1] = (int64_t)got;
		rl__epr(req)->bflags |= RL__RD_SEEKABLE | RL__EP_TRIED;
		rl__ep_to_pool(ep, req);
		return true;
	}
	if (err != EAGAIN && err != EOPNOTSUPP && err != EINTR) {
		rl__ep_finish_inline(loop, ep, req, -err);
		return true;
	}
	loop->stats.syscalls++;
	if (fstat(req->fd, &st) < 0) {
		rl__ep_finish_inline(loop, ep, req, -errno);
		return true;
	}
	if (!rl__ep_stream_type(st.st_mode)) {
		rl__epr(req)->bflags |= RL__RD_SEEKABLE;
		return false;
	}
	rl__ep_watch_or_block(loop, ep, req);
	return true;
done:
	rl__ep_finish_inline(loop, ep, req, (int64_t)got);
	return true;
}

/*
 * A write on the loop thread: only the fd's type is found here. A pipe,
 * socket or device is written at once as far as it has room, and polled
 * for the rest (write_some()); anything else goes to the pool, marked so
 * that its worker does not ask for the type again. Before, a worker found
 * the type, so every write to a pipe made a trip to a worker and back.
 * statx() of an open fd asking for the type only, with AT_STATX_DONT_SYNC,
 * never waits: the inode is in memory while the fd is open, and the file
 * systems that revalidate attributes over the network (NFS, FUSE, CIFS)
 * skip it with that flag. A bad fd goes to the pool too, whose write
 * fails as before.
 */
static int64_t write_some(rl_loop *loop, rl_req *req);

static bool inline_write(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	struct statx stx;
	int64_t res;

	loop->stats.syscalls++;
	if (statx(req->fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE,
		  &stx) < 0)
		return false;
	if (!rl__ep_stream_type(stx.stx_mode)) {
		rl__epr(req)->bflags |= RL__RD_SEEKABLE;
		return false;
	}
	res = write_some(loop, req);
	if (res == RL__RES_POLL)
		rl__ep_watch_or_block(loop, ep, req);
	else if (res == RL__RES_SLOW)
		rl__ep_block(loop, ep, req);
	else
		rl__ep_finish_inline(loop, ep, req, res);
	return true;
}

bool rl__ep_fs_try_inline(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	switch (req->op) {
	case RL_OP_WRITE:
	case RL_OP_WRITEV:
	case RL_OP_WRITE_FIXED:
		return inline_write(loop, ep, req);
	case RL_OP_READ_FILE:
		return ep->openat2_ok && inline_read_file(loop, ep, req);
	case RL_OP_OPEN:
		return ep->openat2_ok && inline_open(loop, ep, req);
	case RL_OP_READ:
	case RL_OP_READV:
	case RL_OP_READ_FIXED:
		return inline_read(loop, ep, req);
	case RL_OP_CLOSE:
		loop->stats.syscalls++;
		rl__ep_finish_inline(loop, ep, req,
				     close(req->fd) < 0 ? -errno : 0);
		return true;
	}
	/* stat stays in the pool: statx() may block on a cold dentry or
	 * inode, and nothing documented makes it refuse to (AT_STATX_DONT_SYNC
	 * only concerns network file systems' attribute caches). So do the
	 * writes to files (inline_write() sends them): ext4 (6.18) answers a
	 * buffered RWF_NOWAIT write with EOPNOTSUPP, a try would cost a
	 * syscall for nothing; and the rest
	 * (fsync, unlink, rename...) may wait for the disk. */
	return false;
}

/* ------------------------------------------------------- O_DIRECT files */

/*
 * A direct read waits for the device even with RWF_NOWAIT (6.18, ext4: a
 * 4 KiB read took 70-180 us inside preadv2, on the loop thread), so the
 * fast path must leave reads of O_DIRECT files to the pool, where a burst
 * of them runs in parallel. Asking the fd (F_GETFL) would cost a syscall
 * per read; instead the loop remembers the fds that rl_fs_open() opened
 * with O_DIRECT, until rl_fs_close() or another rl_fs_open() that gets
 * the same number. It is only a hint: an fd closed with close(2) and
 * reused by open(2) for a buffered file merely loses the fast path, and
 * an O_DIRECT fd from open(2) is read on the loop thread (rl_fs_open()
 * says so).
 */
bool rl__ep_fs_is_direct(const struct rl__ep *ep, int fd)
{
	unsigned w = (unsigned)fd / 64;

	return w < ep->ndirect && (ep->direct[2 * w] >> (fd % 64) & 1);
}

/*
 * A file system may take O_DIRECT but not RWF_NOWAIT (tmpfs since 6.6,
 * NFS, FUSE, 9p): io_submit() refuses each of its iocbs with EOPNOTSUPP,
 * and the pool does the request. The fd is noted, until it is closed or
 * opened again through the loop, so that its requests go to the pool
 * straight away rather than each costing a refused syscall first.
 */
bool rl__ep_fs_aio_ok(const struct rl__ep *ep, int fd)
{
	unsigned w = (unsigned)fd / 64;

	return w < ep->ndirect && (ep->direct[2 * w] >> (fd % 64) & 1) &&
	       !(ep->direct[2 * w + 1] >> (fd % 64) & 1);
}

void rl__ep_fs_no_aio(struct rl__ep *ep, int fd)
{
	unsigned w = (unsigned)fd / 64;

	if (w < ep->ndirect)
		ep->direct[2 * w + 1] |= (uint64_t)1 << (fd % 64);
}

/* fd is opened with O_DIRECT (on) or closed; either way a new file. */
static void mark_direct(struct rl__ep *ep, int fd, bool on)
{
	unsigned w = (unsigned)fd / 64;
	uint64_t bit = (uint64_t)1 << (fd % 64);

	if (w >= ep->ndirect) {
		unsigned n = w + 1 > 2 * ep->ndirect ? w + 1 : 2 * ep->ndirect;
		uint64_t *p;

		if (!on)
			return;
		p = realloc(ep->direct, 2 * n * sizeof(*p));
		if (!p)
			return; /* a hint lost: the reads stay on the loop */
		memset(p + 2 * ep->ndirect, 0,
		       2 * (n - ep->ndirect) * sizeof(*p));
		ep->direct = p;
		ep->ndirect = n;
	}
	if (on)
		ep->direct[2 * w] |= bit;
	else
		ep->direct[2 * w] &= ~bit;
	ep->direct[2 * w + 1] &= ~bit;
}

void rl__ep_fs_done(struct rl__ep *ep, rl_req *req, int64_t res)
{
	/* Any open through the loop names a new file: a buffered one clears
	 * a mark left by an O_DIRECT fd that close(2) freed. */
	if (req->op == RL_OP_OPEN && res >= 0)
		mark_direct(ep, (int)res, req->flags & O_DIRECT);
	else if (req->op == RL_OP_CLOSE && res != -ECANCELED)
		mark_direct(ep, req->fd, false);
}

void rl__ep_fs_free(struct rl__ep *ep)
{
	free(ep->direct);
	ep->direct = NULL;
	ep->ndirect = 0;
}

/* Whether the fast path may finish this request, or (a write) find out
 * where it goes; stat always goes to the pool (see try_inline()), and so
 * do reads and writes of O_DIRECT files. */
bool rl__ep_fs_may_inline(const struct rl__ep *ep, const rl_req *req)
{
	switch (req->op) {
	case RL_OP_READ_FILE:
	case RL_OP_OPEN:
		return ep->inline_ok && ep->openat2_ok;
	case RL_OP_READ:
	case RL_OP_READV:
	case RL_OP_READ_FIXED:
	case RL_OP_WRITE:
	case RL_OP_WRITEV:
	case RL_OP_WRITE_FIXED:
		return ep->inline_ok && !rl__ep_fs_is_direct(ep, req->fd);
	case RL_OP_CLOSE:
		return ep->inline_ok;
	}
	return false;
}

/* ------------------------------------------------ read_file of a stream */

/*
 * How much one readiness may read before the loop looks at anything else:
 * a device that never runs dry (/dev/urandom) must not hold the loop for
 * the whole of read_file_max.
 */
#define STREAM_BUDGET (1u << 20)

void rl__ep_fs_stream_close(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	if (req->fd >= 0)
		rl__ep_sys_close(loop, req->fd);
	req->fd = -1;
	rl__epr(req)->bflags &= ~(uint32_t)RL__EP_STREAM;
	rl__ep_fd_released(loop, ep, req);
}

static void stream_done(rl_loop *loop, struct rl__ep *ep, rl_req *req,
			int64_t res)
{
	rl__ep_fs_stream_close(loop, ep, req);
	loop->stats.inline_completions++;
	rl__complete(loop, req, res);
}

void rl__ep_fs_stream(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	int fl;

	rl__epr(req)->bflags |= RL__EP_STREAM;
	rl__epr(req)->res[1] = 0;
	if (rl__ep_watch(loop, ep, req, false) == 0)
		return;
	/* No poll support: blocking reads in the slow lane. */
	loop->stats.syscalls += 2;
	fl = fcntl(req->fd, F_GETFL);
	if (fl < 0 || fcntl(req->fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
		stream_done(loop, ep, req, -errno);
		return;
	}
	rl__ep_to_slow(loop, ep, req, job_read_stream);
}

/* The watched stream ends with res: no more polling, the fd closed. */
static void stream_end(rl_loop *loop, struct rl__ep *ep, rl_req *req,
		       int64_t res)
{
	rl__ep_unwatch(loop, ep, req);
	stream_done(loop, ep, req, res);
}

/* Nothing more to read now: wait for the next readiness. */
static void stream_wait(rl_loop *loop, struct rl__ep *ep, rl_req *req,
			size_t got)
{
	rl__epr(req)->res[1] = (int64_t)got;
	if (!rl__ep_rewatch(loop, ep, req))
		stream_end(loop, ep, req, -EIO);
}

/*
 * The stream is readable (or hung up): read what is there. A 0 after
 * readiness is its end (epoll reports a FIFO only once a writer came).
 * EAGAIN: wait for more. A full buffer grows (by what was read) if the
 * loop owns it; one that cannot grow takes one byte more, into a
 * sentinel, which tells its end (0) from -EFBIG.
 */
static void stream_ready(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	size_t got = (size_t)rl__epr(req)->res[1], budget = STREAM_BUDGET;
	size_t room;
	char sentinel;
	ssize_t r;
	int ret;

	for (;;) {
		room = rl__req(req)->cap - got;
		if (!room) {
			ret = rl__read_file_grow(req);
			if (!ret)
				continue;
			if (ret != -EFBIG) {
				stream_end(loop, ep, req, ret);
				return;
			}
			r = read(req->fd, &sentinel, 1);
			loop->stats.syscalls++;
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0 && errno == EAGAIN) {
				stream_wait(loop, ep, req, got);
				return;
			}
			stream_end(loop, ep, req,
				   r > 0   ? -EFBIG
				   : r < 0 ? -errno
					   : (int64_t)got);
			return;
		}
		if (!budget) {
			/* Let the loop breathe, and come back. */
			stream_wait(loop, ep, req, got);
			return;
		}
		r = read(req->fd, (char *)req->buf + got,
			 room < budget ? room : budget);
		loop->stats.syscalls++;
		if (r > 0) {
			got += (size_t)r;
			budget -= (size_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN) {
			stream_wait(loop, ep, req, got);
			return;
		}
		stream_end(loop, ep, req, r < 0 ? -errno : (int64_t)got);
		return;
	}
}

/* ------------------------------------------------- writes to streams */

/* Attempts per readiness of a watched write: a reader as fast as the loop
 * would otherwise keep it copying a large buffer with every other
 * callback waiting; the level-triggered watch comes back for the rest. */
#define WRITE_TRIES 16

/*
 * Writes what a pipe, socket or device takes without waiting, from where
 * the last attempt stopped (res[1]), WRITE_TRIES times at most. Returns
 * len or -errno when the write is over, RL__RES_POLL when the fd is full
 * or the tries are used up, RL__RES_SLOW when the fd refuses RWF_NOWAIT
 * (an eventfd, a terminal). On the loop thread, which gets SIGPIPE when
 * the reader is gone (ringloop.h).
 */
static int64_t write_some(rl_loop *loop, rl_req *req)
{
	size_t done = (size_t)rl__epr(req)->res[1];
	ssize_t r = 0;

	for (int i = 0; i < WRITE_TRIES; i++) {
		r = rl__ep_rw(req, req->fd, done, RWF_NOWAIT, true);
		loop->stats.syscalls++;
		if (r < 0)
			break;
		done += (size_t)r;
		rl__epr(req)->res[1] = (int64_t)done;
		if (done >= req->len)
			return (int64_t)req->len;
		if (r == 0)
			return -EIO; /* as the pool's write_all() */
	}
	if (r >= 0 || errno == EAGAIN || errno == EINTR)
		return RL__RES_POLL;
	if (errno == EOPNOTSUPP)
		return RL__RES_SLOW;
	return -errno;
}

/*
 * A write to a stream: back from the worker that found the fd's type
 * (watched false), or watched and its fd has room now. Tried at once, so
 * that what has room, a write of nothing, and an fd that fails every
 * write (an epoll fd's -EINVAL) end here; polled for room while the fd is
 * full. Returns 1 when the request completed, else 0.
 */
static int write_stream(rl_loop *loop, struct rl__ep *ep, rl_req *req,
			bool watched)
{
	int64_t res = write_some(loop, req);

	if (res == RL__RES_POLL) {
		/* Level-triggered: a watched one just stays. */
		if (!watched)
			rl__ep_watch_or_block(loop, ep, req);
		return 0;
	}
	if (watched)
		rl__ep_unwatch(loop, ep, req);
	if (res == RL__RES_SLOW) {
		rl__ep_block(loop, ep, req);
		return 0;
	}
	loop->stats.inline_completions++;
	rl__complete(loop, req, res);
	return 1;
}

int rl__ep_fs_write_stream(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	return write_stream(loop, ep, req, false);
}

/* ------------------------------------------------------------ watched reads */

void rl__ep_fs_ready(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	ssize_t r;
	int err;

	if (req->op == RL_OP_READ_FILE) {
		stream_ready(loop, ep, req);
		return;
	}
	if (rl__op_is_write(req->op)) {
		write_stream(loop, ep, req, true);
		return;
	}
	r = rl__ep_rw(req, req->fd, 0, RWF_NOWAIT, false);
	loop->stats.syscalls++;
	err = r < 0 ? errno : 0;
	if (err == EAGAIN) {
		/* Somebody else took the data: wait again. */
		if (rl__ep_rewatch(loop, ep, req))
			return;
		err = EOPNOTSUPP;
	}
	rl__ep_unwatch(loop, ep, req);
	if (err == EOPNOTSUPP) {
		/* Readable, but it refuses RWF_NOWAIT: the slow lane does the
		 * (most likely immediate) blocking read. */
		rl__epr(req)->bflags |= RL__RD_BLOCKING;
		rl__ep_to_slow(loop, ep, req, job_read);
		return;
	}
	loop->stats.inline_completions++;
	rl__complete(loop, req, err ? -err : r);
}
