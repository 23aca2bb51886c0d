/* SPDX-License-Identifier: MIT */
/*
 * backend_epoll.c - the fallback backend: epoll for the loop's own fds, a
 * thread pool (threadpool.c) for file work, and an inline fast path that
 * does the work on the loop thread when the kernel can do it without
 * blocking.
 *
 * Kernel quirks handled here:
 *
 *  - openat2() exists since 5.6 and RESOLVE_CACHED since 5.12. With it, a
 *    lookup that would have to block (a dentry not in the cache, a
 *    permission check that needs a sleeping lock) fails with EAGAIN
 *    instead; a cached negative dentry still gives ENOENT, so every other
 *    error is the real answer. Older kernels answer ENOSYS (no openat2) or
 *    EINVAL (unknown resolve flag): the fast path for opens is then marked
 *    unavailable for the loop's lifetime and everything goes to the pool.
 *    openat2() is stricter than openat() (unknown flag bits, a mode without
 *    O_CREAT: EINVAL), so an EINVAL for a caller's rl_fs_open() flags only
 *    sends that open to the pool. RESOLVE_CACHED also refuses O_CREAT,
 *    O_TRUNC and O_TMPFILE with EAGAIN, so those go to the pool directly.
 *  - RESOLVE_CACHED covers the path walk only: opening a FIFO waits for a
 *    peer and a device open may wait too. The inline open therefore adds
 *    O_NONBLOCK (which also turns a lease break into EAGAIN instead of a
 *    wait), keeps the fd only for a regular file or directory, and clears
 *    O_NONBLOCK again with F_SETFL when the caller did not ask for it.
 *    The price, for a FIFO only: the attempt is a reader for a moment, so
 *    a writer waiting in open() for one gets through before the worker's
 *    real open. Knowing the type first would cost a syscall on every
 *    regular file, which is what this path is for.
 *  - RWF_NOWAIT (4.14; buffered reads of regular files since 5.x) fails
 *    with EAGAIN when the data is not in the page cache, with EOPNOTSUPP on
 *    files that do not support it (procfs, some devices), and may also
 *    return a SHORT read when only the first pages are cached. A short
 *    read is therefore never taken for the end of the file: read_file
 *    compares with st_size and otherwise keeps reading (0 is the only real
 *    end), and rl_fs_read() of a regular file reads on until 0 or EAGAIN.
 *  - Regular files cannot be polled (epoll_ctl says EPERM), so a blocking
 *    read of one goes to a worker. Pipes, sockets and character devices
 *    CAN block forever, and a worker stuck in read() could not be
 *    cancelled: those reads are polled on the loop thread instead
 *    (EPOLLIN | EPOLLONESHOT) and read with RWF_NOWAIT once ready, so
 *    rl_cancel() just drops the registration. A descriptor with O_NONBLOCK
 *    waits for data all the same, as io_uring does (it polls any file that
 *    supports RWF_NOWAIT rather than answering -EAGAIN). epoll
 *    refuses to register the same fd twice (EEXIST), so a second read
 *    waiting on the same fd registers a dup() of it. A device that cannot
 *    be polled, or that refuses RWF_NOWAIT once ready, is read by a worker.
 *  - epoll_pwait2() (5.11) takes a nanosecond timeout; before it, the
 *    millisecond timeout of epoll_wait() is rounded UP so that a timer
 *    never fires early.
 *  - The eventfd is non-blocking and only read when epoll reports it, so
 *    a read never waits; one read resets any number of writes.
 *
 * Closing an fd while a read on it is in flight is undefined, as with
 * read(2) from another thread; with the poll path it may also leave a
 * stale epoll registration when the file has other descriptors.
 *
 * How a request travels. submit() only queues it; the next wait() runs
 * the fast path (unless RL_NO_INLINE): read_file is openat2 + fstat +
 * preadv2 + close, as many syscalls as the plain synchronous loop; read is
 * a preadv2; close is a close(); open is openat2 (+ fstat + F_SETFL). stat
 * always goes to the pool: statx() may block on a cold dentry or inode and
 * has no documented way to refuse to. A burst of fast-path requests in one
 * tick (SHARE_MIN or more) is shared: it goes on the pool's queue, and the
 * loop takes jobs off it alongside the workers, so the burst runs on every
 * CPU instead of only the loop's. What the fast path finishes waits on a
 * list until the end of that wait(), which hands it to rl__complete(): the
 * callback runs on a later tick, and until then rl_cancel() treats it as
 * in flight (it gets -ECANCELED, a second cancel -EALREADY), as on
 * io_uring. What cannot be done without blocking goes to the pool; a
 * read_file that stops half-way starts over in the worker, with a fresh
 * open (without O_NONBLOCK), from offset 0.
 *
 * The loop's own waiting is epoll: the eventfd (workers' completions and
 * rl_post()) and the watched reads; timers come from loop.c as wait()'s
 * timeout. Before sleeping with fewer jobs out than CPUs, wait() polls
 * the done list for a few tens of microseconds (threadpool.h), which a
 * cached file job usually beats, so a chain of small jobs costs no
 * wake-up at all. With more, every CPU has a worker to run and a spin
 * would only steal from one; the loop sleeps instead, and the workers
 * wake it once per RL__POOL_BATCH completions while jobs are queued.
 *
 * The io_uring-only knobs in rl_options.flags are ignored here, so that
 * RL_BACKEND_AUTO works with them on a kernel without io_uring.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <linux/time_types.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "threadpool.h"

#ifndef SYS_openat2
#define SYS_openat2 437 /* the same number on every architecture */
#endif
#ifndef SYS_epoll_pwait2
#define SYS_epoll_pwait2 441
#endif
#ifndef RESOLVE_CACHED
#define RESOLVE_CACHED 0x20
#endif
#ifndef O_TMPFILE
#define O_TMPFILE 0 /* (O_TMPFILE includes O_DIRECTORY: compare all bits) */
#endif

/* Where a request is (ep_req.step); only the loop thread reads or writes it. */
enum {
	EP_NONE = 0,
	EP_INLINE,   /* waiting for the next wait() to try the fast path */
	EP_BATCH,    /* waiting to be handed to the pool at the next wait() */
	EP_POOL,     /* on the pool's queue, or running on a worker */
	EP_WATCH,    /* a read waiting for its fd to become readable */
	EP_FINISHED, /* finished inline; its completion is due next wait() */
};

/* What is known about a read's fd (kept in ep_req.bflags). Set by the loop thread before the hand-off to a worker. */
enum {
	RD_SEEKABLE = 1, /* a regular file or block device: read it blocking */
	RD_BLOCKING = 2, /* cannot be polled: a blocking read is all there is */
	EP_TRIED = 4,	 /* the fast path failed once: leave it to a worker */
};

/* A worker's answer for a read of a pipe, socket or device that has
 * nothing to read yet: "poll it on the loop thread". */
#define RES_POLL INT64_MIN

#define MAX_EVENTS 64

/*
 * Sharing. A burst of at least this many fast-path requests in one tick is
 * shared with the workers instead of running on the loop thread alone: it
 * goes on the pool's queue, at most (CPUs - 1) workers are woken, and the
 * loop takes jobs off the same queue and runs them itself with the fast
 * path. Below it, the hand-off costs more than it saves.
 */
#define SHARE_MIN 8

struct ep {
	int epfd;
	int efd;
	bool inline_ok;	 /* the fast path is on (no RL_NO_INLINE) */
	bool openat2_ok; /* openat2 + RESOLVE_CACHED work on this kernel */
	bool probed;	 /* openat2_ok was checked after an EINVAL */
	bool pwait2_ok;	 /* epoll_pwait2 exists */
	bool closing;
	unsigned ncpu;	 /* CPUs this process may run on */
	unsigned nwatch;
	unsigned ninline;	  /* EP_INLINE */
	uint64_t in_pool;	  /* jobs handed to the pool, not reaped */
	struct rl__spin spin;	  /* whether spinning for jobs paid lately */
	struct rl__fifo inl;	  /* EP_INLINE */
	struct rl__fifo batch;	  /* EP_BATCH */
	struct rl__fifo finished; /* EP_FINISHED */
	struct rl__fifo watched;  /* EP_WATCH */
	struct rl__pool pool;
};

/* What this backend keeps in a request (its private words, req.h). */
struct ep_req {
	int32_t slot;	 /* a watched read's dup()ed fd, or -1 */
	int32_t step;	 /* EP_*: where the request is */
	uint32_t bflags; /* RD_* and EP_TRIED */
	int64_t res[2];	 /* a job's result; a read's bytes so far */
};
RL__REQ_BE_FITS(struct ep_req);

static struct ep_req *EP(rl_req *req)
{
	return RL__REQ_BE(struct ep_req, req);
}

static struct ep *E(rl_loop *loop)
{
	return loop->be;
}

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
 * result in ep_req.res[0]; they touch nothing else the loop owns. A blocking
 * call interrupted by the pool's signal (threadpool.h) is retried unless
 * the job was asked to give up; then it fails with -EINTR, which the loop
 * reports as -ECANCELED. */

static int open_retrying(const char *path, int flags, mode_t mode)
{
	int fd;

	do {
		fd = openat(AT_FDCWD, path, flags, mode);
	} while (fd < 0 && errno == EINTR && !rl__pool_job_cancelled());
	return fd < 0 ? -errno : fd;
}

static void job_open(rl_req *req)
{
	EP(req)->res[0] = open_retrying(req->path, req->flags,
					 (mode_t)req->mode);
}

/* close() is never retried: on Linux the fd is gone even after EINTR. */
static void job_close(rl_req *req)
{
	EP(req)->res[0] = close(req->fd) < 0 ? -errno : 0;
}

static void job_stat(rl_req *req)
{
	int ret;

	do {
		ret = statx(AT_FDCWD, req->path, 0, STATX_BASIC_STATS,
			    req->stx);
	} while (ret < 0 && errno == EINTR && !rl__pool_job_cancelled());
	EP(req)->res[0] = ret < 0 ? -errno : 0;
}

/* The blocking read to the end of an open file (fs.c). */
static int64_t read_file_fd(rl_req *req, int fd)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return -EISDIR;
	return rl__read_file_fd(req, fd, &st, 0, rl__pool_job_cancelled, NULL);
}

/* read_file is one job: open, fstat, read to the end, close. */
static void job_read_file(rl_req *req)
{
	int fd = open_retrying(req->path, O_RDONLY | O_CLOEXEC, 0);

	if (fd < 0) {
		EP(req)->res[0] = fd;
		return;
	}
	EP(req)->res[0] = read_file_fd(req, fd);
	close(fd);
}

static ssize_t read_at(int fd, void *buf, size_t len, int64_t offset,
		       int flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };

	/* preadv2 with offset -1 reads at the file position, like read(). */
	return preadv2(fd, &iov, 1, (off_t)offset, flags);
}

/* True for the file types a read may wait on forever, which the loop
 * polls instead of letting a worker block. */
static bool pollable_type(mode_t mode)
{
	return S_ISFIFO(mode) || S_ISSOCK(mode) || S_ISCHR(mode);
}

static void job_read(rl_req *req)
{
	size_t got = (size_t)EP(req)->res[1];
	int64_t off = req->offset;
	struct stat st;
	ssize_t r;

	if (!(EP(req)->bflags & (RD_SEEKABLE | RD_BLOCKING))) {
		/* Straight from rl_fs_read() (no fast path): find out whether
		 * this read may wait forever before doing it. */
		if (fstat(req->fd, &st) < 0) {
			EP(req)->res[0] = -errno;
			return;
		}
		if (pollable_type(st.st_mode)) {
			r = read_at(req->fd, req->buf, req->len, off,
				    RWF_NOWAIT);
			if (r >= 0)
				EP(req)->res[0] = r;
			else if (errno == EAGAIN || errno == EOPNOTSUPP)
				EP(req)->res[0] = RES_POLL;
			else
				EP(req)->res[0] = -errno;
			return;
		}
	}
	/* A regular file: one blocking read gives everything up to the end
	 * of the file, after what the fast path may have read already. */
	do {
		r = read_at(req->fd, (char *)req->buf + got, req->len - got,
			    off < 0 ? -1 : off + (int64_t)got, 0);
	} while (r < 0 && errno == EINTR && !rl__pool_job_cancelled());
	if (r < 0)
		EP(req)->res[0] = got ? (int64_t)got : -errno;
	else
		EP(req)->res[0] = (int64_t)(got + (size_t)r);
}

static void (*const jobs[])(rl_req *) = {
	[RL_OP_OPEN] = job_open,
	[RL_OP_READ] = job_read,
	[RL_OP_CLOSE] = job_close,
	[RL_OP_STAT] = job_stat,
	[RL_OP_READ_FILE] = job_read_file,
};

/* ------------------------------------------------------ loop-side helpers */

static void to_pool(struct ep *ep, rl_req *req)
{
	rl__req(req)->work = jobs[req->op];
	EP(req)->step = EP_BATCH;
	rl__fifo_push(&ep->batch, req);
}

/* The request's result is known, but rl__complete() waits for the next
 * wait(): until then it is in flight as far as rl_cancel() can tell, which
 * answers -EALREADY for a second cancel, as for a request in the kernel. */
static void defer_complete(struct ep *ep, rl_req *req, int64_t res)
{
	EP(req)->res[0] = res;
	EP(req)->step = EP_FINISHED;
	rl__fifo_push(&ep->finished, req);
}

/* Finished on the loop thread by the fast path. */
static void finish_inline(rl_loop *loop, struct ep *ep, rl_req *req,
			  int64_t res)
{
	defer_complete(ep, req, res);
	loop->stats.inline_completions++;
}

static void sys_close(rl_loop *loop, int fd)
{
	close(fd);
	loop->stats.syscalls++;
}

static void unwatch(rl_loop *loop, struct ep *ep, rl_req *req)
{
	int fd = EP(req)->slot >= 0 ? EP(req)->slot : req->fd;

	epoll_ctl(ep->epfd, EPOLL_CTL_DEL, fd, NULL);
	loop->stats.syscalls++;
	if (EP(req)->slot >= 0) {
		sys_close(loop, EP(req)->slot);
		EP(req)->slot = -1;
	}
	rl__fifo_remove(&ep->watched, req);
	ep->nwatch--;
	EP(req)->step = EP_NONE;
}

/* Registers a read with epoll. Returns false when its fd cannot be polled
 * (EPERM) or epoll refuses it otherwise: a worker reads it then. */
static bool watch(rl_loop *loop, struct ep *ep, rl_req *req)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT,
				  .data.ptr = req };
	int fd;

	EP(req)->slot = -1;
	loop->stats.syscalls++;
	if (epoll_ctl(ep->epfd, EPOLL_CTL_ADD, req->fd, &ev) < 0) {
		if (errno != EEXIST)
			return false;
		/* Another read waits on this fd already. epoll keys its
		 * entries on (fd, file), so a duplicate fd is a new entry. */
		fd = fcntl(req->fd, F_DUPFD_CLOEXEC, 0);
		loop->stats.syscalls++;
		if (fd < 0)
			return false;
		loop->stats.syscalls++;
		if (epoll_ctl(ep->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			sys_close(loop, fd);
			return false;
		}
		EP(req)->slot = fd;
	}
	EP(req)->step = EP_WATCH;
	rl__fifo_push(&ep->watched, req);
	ep->nwatch++;
	return true;
}

/* A read that may wait forever: poll it, or give it to a worker when it
 * cannot be polled. */
static void watch_or_block(rl_loop *loop, struct ep *ep, rl_req *req)
{
	if (watch(loop, ep, req))
		return;
	EP(req)->bflags |= RD_BLOCKING;
	to_pool(ep, req);
}

/* A watched fd became readable (or hung up, or failed). */
static void watch_ready(rl_loop *loop, struct ep *ep, rl_req *req)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT,
				  .data.ptr = req };
	ssize_t r;
	int err;

	r = read_at(req->fd, req->buf, req->len, req->offset, RWF_NOWAIT);
	loop->stats.syscalls++;
	err = r < 0 ? errno : 0;
	if (err == EAGAIN) {
		/* Somebody else took the data: wait again. */
		loop->stats.syscalls++;
		if (epoll_ctl(ep->epfd, EPOLL_CTL_MOD,
			      EP(req)->slot >= 0 ? EP(req)->slot : req->fd,
			      &ev) == 0)
			return;
		err = EOPNOTSUPP;
	}
	unwatch(loop, ep, req);
	if (err == EOPNOTSUPP) {
		/* Readable, but it refuses RWF_NOWAIT: a worker does the
		 * (most likely immediate) blocking read. */
		EP(req)->bflags |= RD_BLOCKING;
		to_pool(ep, req);
		return;
	}
	loop->stats.inline_completions++;
	rl__complete(loop, req, err ? -err : r);
}

/* ------------------------------------------------------------ fast path */

/* Every syscall below runs on the loop thread and counts in stats.syscalls:
 * the bench divides that by the operations to compare with io_uring. */

/* After an EINVAL from a caller's open flags: is it the flags or the
 * kernel? Asks once, with flags every openat2 kernel accepts. */
static void probe_openat2(rl_loop *loop, struct ep *ep)
{
	int fd;

	ep->probed = true;
	fd = sys_openat2("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC,
			 RESOLVE_CACHED);
	loop->stats.syscalls++;
	if (fd >= 0)
		sys_close(loop, fd);
	else if (errno == EINVAL || errno == ENOSYS || errno == E2BIG)
		ep->openat2_ok = false;
}

/* openat2 with RESOLVE_CACHED: the fd, or -errno for a real failure, or
 * -EAGAIN when the pool must do it. */
static int open_cached(rl_loop *loop, struct ep *ep, const char *path,
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

static bool inline_open(rl_loop *loop, struct ep *ep, rl_req *req)
{
	struct stat st;
	int fd;

	/* RESOLVE_CACHED refuses these (EAGAIN); O_PATH takes no
	 * O_NONBLOCK in openat2 and is cheap in the pool anyway. */
	if ((req->flags & (O_CREAT | O_TRUNC | O_PATH)) ||
	    (O_TMPFILE && (req->flags & O_TMPFILE) == O_TMPFILE))
		return false;
	fd = open_cached(loop, ep, req->path, req->flags | O_NONBLOCK, false);
	if (fd == -EAGAIN)
		return false;
	if (fd < 0) {
		finish_inline(loop, ep, req, fd);
		return true;
	}
	loop->stats.syscalls++;
	if (fstat(fd, &st) < 0 || !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
		/* A FIFO or device: its open means something else without
		 * O_NONBLOCK (waiting for a peer), so do the real one. */
		sys_close(loop, fd);
		return false;
	}
	if (!(req->flags & O_NONBLOCK)) {
		/* F_SETFL only changes the status flags, and all of them but
		 * O_NONBLOCK are already what the caller asked for. */
		loop->stats.syscalls++;
		if (fcntl(fd, F_SETFL, req->flags & ~O_NONBLOCK) < 0) {
			sys_close(loop, fd);
			return false;
		}
	}
	finish_inline(loop, ep, req, fd);
	return true;
}

/*
 * read_file on the loop thread: openat2 (cached lookup only), fstat,
 * preadv2 RWF_NOWAIT, close. Returns false, with nothing left open, when
 * something would block; the pool then does the whole job again.
 */
static bool inline_read_file(rl_loop *loop, struct ep *ep, rl_req *req)
{
	struct stat st;
	int64_t res;
	int fd;

	fd = open_cached(loop, ep, req->path,
			 O_RDONLY | O_CLOEXEC | O_NONBLOCK, true);
	if (fd == -EAGAIN)
		return false;
	if (fd < 0) {
		finish_inline(loop, ep, req, fd);
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
	if (!S_ISREG(st.st_mode)) {
		/* A FIFO or device would wait in a blocking open and read,
		 * as on io_uring: a worker does exactly that. */
		sys_close(loop, fd);
		return false;
	}
	res = rl__read_file_fd(req, fd, &st, RWF_NOWAIT, NULL,
			       &loop->stats.syscalls);
	if (res == RL__WOULD_BLOCK) {
		/* Not all cached: a worker reads it again, blocking. */
		sys_close(loop, fd);
		return false;
	}
out:
	sys_close(loop, fd);
	finish_inline(loop, ep, req, res);
	return true;
}

static bool inline_read(rl_loop *loop, struct ep *ep, rl_req *req)
{
	struct stat st;
	size_t got = 0;
	ssize_t r;
	int err;

	for (;;) {
		r = read_at(req->fd, (char *)req->buf + got, req->len - got,
			    req->offset < 0 ? -1 : req->offset + (int64_t)got,
			    RWF_NOWAIT);
		loop->stats.syscalls++;
		if (r < 0)
			break;
		got += (size_t)r;
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
		 * it blocking, from where the fast path stopped. */
		EP(req)->res[1] = (int64_t)got;
		EP(req)->bflags |= RD_SEEKABLE;
		to_pool(ep, req);
		return true;
	}
	if (err != EAGAIN && err != EOPNOTSUPP && err != EINTR) {
		finish_inline(loop, ep, req, -err);
		return true;
	}
	loop->stats.syscalls++;
	if (fstat(req->fd, &st) < 0) {
		finish_inline(loop, ep, req, -errno);
		return true;
	}
	if (!pollable_type(st.st_mode)) {
		EP(req)->bflags |= RD_SEEKABLE;
		return false;
	}
	watch_or_block(loop, ep, req);
	return true;
done:
	finish_inline(loop, ep, req, (int64_t)got);
	return true;
}

static bool try_inline(rl_loop *loop, struct ep *ep, rl_req *req)
{
	switch (req->op) {
	case RL_OP_READ_FILE:
		return ep->openat2_ok && inline_read_file(loop, ep, req);
	case RL_OP_OPEN:
		return ep->openat2_ok && inline_open(loop, ep, req);
	case RL_OP_READ:
		return inline_read(loop, ep, req);
	case RL_OP_CLOSE:
		loop->stats.syscalls++;
		finish_inline(loop, ep, req, close(req->fd) < 0 ? -errno : 0);
		return true;
	}
	/* stat stays in the pool: statx() may block on a cold dentry or
	 * inode, and nothing documented makes it refuse to (AT_STATX_DONT_SYNC
	 * only concerns network file systems' attribute caches). */
	return false;
}

/* ---------------------------------------------------------- the backend */

/* Whether the fast path may finish this request; stat always goes to the
 * pool (see try_inline()). */
static bool may_inline(const struct ep *ep, const rl_req *req)
{
	switch (req->op) {
	case RL_OP_READ_FILE:
	case RL_OP_OPEN:
		return ep->inline_ok && ep->openat2_ok;
	case RL_OP_READ:
	case RL_OP_CLOSE:
		return ep->inline_ok;
	}
	return false;
}

/* The fast path for one request; what it cannot finish goes to the pool. */
static void run_one(rl_loop *loop, struct ep *ep, rl_req *req)
{
	EP(req)->step = EP_NONE;
	if ((EP(req)->bflags & EP_TRIED) || !may_inline(ep, req) ||
	    !try_inline(loop, ep, req)) {
		EP(req)->bflags |= EP_TRIED;
		to_pool(ep, req);
	}
}

/*
 * Runs the fast path for what submit() queued since the last wait(). A
 * few requests run on the loop thread; a burst is shared with the
 * workers, which take jobs off the pool's queue while the loop does the
 * same and runs them with the fast path, so that a burst of cached reads
 * uses every CPU instead of one (see SHARE_MIN). Workers do their jobs
 * the blocking way; a job the loop takes and cannot finish without
 * blocking goes back to them, once.
 */
static void run_inline(rl_loop *loop, struct ep *ep)
{
	struct rl__fifo share = { 0 };
	rl_req *req;

	if (ep->ninline < SHARE_MIN || ep->ncpu < 2) {
		while ((req = rl__fifo_pop(&ep->inl)))
			run_one(loop, ep, req);
		ep->ninline = 0;
		return;
	}
	rl__fifo_splice(&share, &ep->inl);
	for (req = share.head; req; req = rl__req(req)->next) {
		rl__req(req)->work = jobs[req->op];
		EP(req)->step = EP_POOL;
	}
	ep->in_pool += ep->ninline;
	ep->ninline = 0;
	/* The loop is the other CPU's worker. */
	loop->stats.syscalls += rl__pool_submit(&ep->pool, &share, ep->ncpu - 1);
	while ((req = rl__pool_take(&ep->pool))) {
		ep->in_pool--;
		run_one(loop, ep, req);
	}
}

static void submit(rl_loop *loop, rl_req *req)
{
	struct ep *ep = E(loop);

	EP(req)->step = EP_NONE;
	EP(req)->slot = -1;
	EP(req)->bflags = 0;
	EP(req)->res[0] = 0;
	EP(req)->res[1] = 0;
	if (ep->inline_ok) {
		/* Not now: the next wait() sees the whole burst. Requests
		 * the fast path cannot do (stat) wait in the same queue, so
		 * that the pool gets a tick's requests in submission order. */
		EP(req)->step = EP_INLINE;
		rl__fifo_push(&ep->inl, req);
		ep->ninline++;
		return;
	}
	to_pool(ep, req);
}

static void flush_batch(rl_loop *loop, struct ep *ep)
{
	uint64_t n = 0;

	if (rl__fifo_empty(&ep->batch))
		return;
	for (rl_req *r = ep->batch.head; r; r = rl__req(r)->next) {
		EP(r)->step = EP_POOL;
		n++;
	}
	ep->in_pool += n;
	/* Each worker woken may cost a futex call on this thread. */
	loop->stats.syscalls +=
		rl__pool_submit(&ep->pool, &ep->batch, ep->pool.nthreads);
}

static int pool_done(rl_loop *loop, struct ep *ep, rl_req *req)
{
	int64_t res = EP(req)->res[0];

	/* Interrupted because the loop closes (a cancelled request becomes
	 * -ECANCELED in rl__complete() anyway). Not a close: Linux has
	 * closed the fd even when close() says EINTR. */
	if (res == -EINTR && ep->closing && req->op != RL_OP_CLOSE)
		res = -ECANCELED;

	EP(req)->step = EP_NONE;
	if (res == RES_POLL) {
		if ((rl__req(req)->state & RL__REQ_CANCEL) || ep->closing) {
			rl__complete(loop, req, -ECANCELED);
			return 1;
		}
		watch_or_block(loop, ep, req);
		return 0;
	}
	rl__complete(loop, req, res);
	return 1;
}

/* Moves what finished inline or on a worker to the loop's ready queue. */
static int reap(rl_loop *loop, struct ep *ep)
{
	struct rl__fifo done = { 0 };
	rl_req *req;
	int n = 0;

	while ((req = rl__fifo_pop(&ep->finished))) {
		EP(req)->step = EP_NONE;
		rl__complete(loop, req, EP(req)->res[0]);
		n++;
	}
	rl__pool_take_done(&ep->pool, &done);
	while ((req = rl__fifo_pop(&done))) {
		ep->in_pool--;
		loop->stats.pool_jobs++;
		n += pool_done(loop, ep, req);
	}
	return n;
}

/*
 * Jobs are out and nothing else can happen without a syscall: poll the
 * done list (and the posts) for a short while before sleeping, so a job
 * that takes a few microseconds costs no eventfd round trip. Returns the
 * time spent, which comes off the timeout.
 */
static int64_t spin_for_done(rl_loop *loop, struct ep *ep, int64_t limit_ns)
{
	uint64_t start = rl__clock_ns(), now = start;
	unsigned i = 0;

	if (limit_ns < 0 || limit_ns > RL__POOL_SPIN_NS)
		limit_ns = RL__POOL_SPIN_NS;
	while (!rl__pool_has_done(&ep->pool) &&
	       !atomic_load_explicit(&loop->posts, memory_order_relaxed)) {
		rl__cpu_relax();
		if (++i % 64 == 0 &&
		    (int64_t)((now = rl__clock_ns()) - start) >= limit_ns)
			break;
	}
	return (int64_t)(now - start);
}

static int poll_fds(rl_loop *loop, struct ep *ep, int64_t timeout_ns,
		    struct epoll_event *evs)
{
	struct __kernel_timespec ts;
	int64_t ms;
	int n;

	loop->stats.syscalls++;
	loop->stats.waits++;
	if (timeout_ns > 0 && ep->pwait2_ok) {
		ts.tv_sec = timeout_ns / 1000000000;
		ts.tv_nsec = timeout_ns % 1000000000;
		n = (int)syscall(SYS_epoll_pwait2, ep->epfd, evs, MAX_EVENTS,
				 &ts, NULL, (size_t)0);
		if (n >= 0 || errno != ENOSYS)
			return n < 0 ? -errno : n;
		ep->pwait2_ok = false;
		loop->stats.syscalls++;
		loop->stats.waits++;
	}
	if (timeout_ns < 0)
		ms = -1;
	else
		ms = (timeout_ns + 999999) / 1000000; /* never early */
	if (ms > INT_MAX)
		ms = INT_MAX;
	n = epoll_wait(ep->epfd, evs, MAX_EVENTS, (int)ms);
	return n < 0 ? -errno : n;
}

/*
 * How long the loop may sleep while jobs are out, given that workers hold
 * wake-ups back while jobs are queued (threadpool.h): RL__POOL_HOLD_NS
 * with jobs queued. With none queued, only a rare interleaving (a worker
 * that saw the last job still queued, whose taker then blocks for good)
 * leaves a completion unannounced; ten times as long is enough for that.
 * With a single job out nothing is ever held back.
 */
static int64_t hold_cap(struct ep *ep, int64_t timeout_ns, bool *capped)
{
	int64_t cap;

	*capped = false;
	if (ep->in_pool < 2)
		return timeout_ns;
	cap = rl__pool_queued(&ep->pool) ? RL__POOL_HOLD_NS
					 : 10 * RL__POOL_HOLD_NS;
	if (timeout_ns >= 0 && timeout_ns <= cap)
		return timeout_ns;
	*capped = true;
	return cap;
}

static int wait(rl_loop *loop, int64_t timeout_ns)
{
	struct ep *ep = E(loop);
	struct epoll_event evs[MAX_EVENTS];
	uint64_t count, start;
	int64_t t;
	int n, i, done;
	bool sleep, capped;

	run_inline(loop, ep);
	flush_batch(loop, ep);
	done = reap(loop, ep);
	/* Spin only while a CPU is left over: with every CPU running a
	 * worker, the spin would take one of them away. */
	if (!done && timeout_ns != 0 && ep->in_pool &&
	    ep->in_pool < ep->ncpu && !ep->nwatch && RL__POOL_SPIN_NS > 0 &&
	    rl__spin_allowed(&ep->spin)) {
		int64_t spent = spin_for_done(loop, ep, timeout_ns);

		if (timeout_ns > 0)
			timeout_ns = spent >= timeout_ns ? 0 : timeout_ns - spent;
		done = reap(loop, ep);
		rl__spin_outcome(&ep->spin, done > 0);
	}
	for (;;) {
		/* Completions in hand, or no waiting allowed, or a job
		 * finished just now: only the watched fds need a look, if
		 * there are some. */
		sleep = !done && timeout_ns != 0 &&
			rl__pool_may_sleep(&ep->pool);
		capped = false;
		if (sleep) {
			t = hold_cap(ep, timeout_ns, &capped);
		} else {
			if (!ep->nwatch)
				return done + reap(loop, ep);
			t = 0;
		}
		start = capped && timeout_ns > 0 ? rl__clock_ns() : 0;
		n = poll_fds(loop, ep, t, evs);
		if (sleep)
			rl__pool_awake(&ep->pool);
		if (n < 0)
			return n == -EINTR ? done + reap(loop, ep) : n;
		for (i = 0; i < n; i++) {
			rl_req *req = evs[i].data.ptr;

			if (req) {
				watch_ready(loop, ep, req);
				done++;
				continue;
			}
			/* The eventfd: workers finished jobs, or rl_post(). */
			loop->stats.syscalls++;
			if (read(ep->efd, &count, sizeof(count)) ==
			    sizeof(count))
				loop->stats.wakeups++;
		}
		/* A request a watch sent to the pool goes now, not a wait
		 * later. */
		flush_batch(loop, ep);
		done += reap(loop, ep);
		/* Only the hold-back cap ran out, and nothing was held back:
		 * sleep on for what is left of the caller's timeout, so
		 * that RL_RUN_ONCE still waits for something to happen. */
		if (done || n || !capped)
			return done;
		if (timeout_ns > 0) {
			timeout_ns -= (int64_t)(rl__clock_ns() - start);
			if (timeout_ns <= 0)
				return done;
		}
	}
}

static void cancel(rl_loop *loop, rl_req *req)
{
	struct ep *ep = E(loop);
	struct rl__fifo gone = { 0 };

	if (!req) {
		/* Closing: nothing new starts. Running jobs finish and
		 * report their real result; finished ones are reaped as
		 * usual by the next wait(). */
		ep->closing = true;
		rl__fifo_splice(&gone, &ep->inl);
		ep->ninline = 0;
		rl__fifo_splice(&gone, &ep->batch);
		while ((req = rl__fifo_pop(&gone))) {
			EP(req)->step = EP_NONE;
			rl__complete(loop, req, -ECANCELED);
		}
		rl__pool_cancel_all(&ep->pool, &gone);
		while ((req = rl__fifo_pop(&gone))) {
			ep->in_pool--;
			EP(req)->step = EP_NONE;
			rl__complete(loop, req, -ECANCELED);
		}
		while ((req = ep->watched.head)) {
			unwatch(loop, ep, req);
			rl__complete(loop, req, -ECANCELED);
		}
		/* Jobs blocked for good (a FIFO's open, a device's read)
		 * would keep the close waiting: interrupt them, again on
		 * every pass of the close, until they have finished. */
		rl__pool_interrupt(&ep->pool, NULL);
		return;
	}
	switch (EP(req)->step) {
	case EP_INLINE:
		rl__fifo_remove(&ep->inl, req);
		ep->ninline--;
		break;
	case EP_BATCH:
		rl__fifo_remove(&ep->batch, req);
		break;
	case EP_POOL:
		if (!rl__pool_cancel(&ep->pool, req)) {
			/* Running: its result becomes -ECANCELED; if it
			 * blocks, the interrupt ends the wait. */
			rl__pool_interrupt(&ep->pool, req);
			return;
		}
		ep->in_pool--;
		break;
	case EP_WATCH:
		unwatch(loop, ep, req);
		break;
	default:
		/* Finished inline: rl__complete() turns the result into
		 * -ECANCELED when the next wait() reaps it. */
		return;
	}
	defer_complete(ep, req, -ECANCELED);
}

/* Thread-safe; called by workers (through the pool) and by rl_post(). */
static void notify(void *arg)
{
	struct ep *ep = arg;
	uint64_t one = 1;

	/* EAGAIN means the counter is saturated: the loop wakes anyway. */
	if (write(ep->efd, &one, sizeof(one)) < 0) {
	}
}

static void wake(rl_loop *loop)
{
	notify(E(loop));
}

static void destroy(rl_loop *loop)
{
	struct ep *ep = E(loop);

	if (!ep)
		return;
	/* Joining first: a worker's last eventfd write must find it open. */
	rl__pool_destroy(&ep->pool);
	close(ep->efd);
	close(ep->epfd);
	free(ep);
	loop->be = NULL;
}

static int init(rl_loop *loop, const struct rl_options *opt)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
	struct ep *ep;
	int ret;

	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -ENOMEM;
	ep->inline_ok = !(opt->flags & RL_NO_INLINE);
	ep->ncpu = rl__pool_size(0);
	ep->openat2_ok = true;
	ep->pwait2_ok = true;
	ep->efd = -1;
	ep->epfd = epoll_create1(EPOLL_CLOEXEC);
	loop->stats.syscalls++;
	if (ep->epfd < 0)
		goto fail_errno;
	ep->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	loop->stats.syscalls++;
	if (ep->efd < 0)
		goto fail_errno;
	loop->stats.syscalls++;
	if (epoll_ctl(ep->epfd, EPOLL_CTL_ADD, ep->efd, &ev) < 0)
		goto fail_errno;
	ret = rl__pool_init(&ep->pool, rl__pool_size(opt->pool_threads),
			    notify, ep);
	if (ret < 0)
		goto fail;
	loop->be = ep;
	return 0;

fail_errno:
	ret = -errno;
fail:
	if (ep->efd >= 0)
		close(ep->efd);
	if (ep->epfd >= 0)
		close(ep->epfd);
	free(ep);
	return ret;
}

const struct rl__backend rl__backend_epoll = {
	.name = "epoll",
	.init = init,
	.destroy = destroy,
	.submit = submit,
	.cancel = cancel,
	.wait = wait,
	.wake = wake,
};
