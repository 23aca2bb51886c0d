/* SPDX-License-Identifier: MIT */
/*
 * epoll.h - what the epoll backend's files share: the backend's state,
 * what it keeps in a request, and the hooks between the core (epoll.c:
 * queues, sharing bursts with the pool, waiting, watching fds, cancelling)
 * and the operations (epoll_fs.c: pool jobs and the inline fast path).
 *
 * How a request travels. submit() only queues it; the next wait() runs
 * the fast path on the loop thread (unless RL_NO_INLINE), which finishes
 * what the kernel can do without blocking; the rest goes to the thread
 * pool (threadpool.c), whose workers do it the blocking way. A request
 * finished inline waits on the finished list until the end of that
 * wait(), so its callback runs on a later tick and rl_cancel() still sees
 * it in flight, as on io_uring. A read that may wait forever (a pipe, a
 * socket, a character device) is polled on the loop thread instead of
 * blocking a worker, so cancelling it just drops the registration.
 *
 * The io_uring-only knobs in rl_options.flags are ignored here, so that
 * RL_BACKEND_AUTO works with them on a kernel without io_uring.
 */
#ifndef RINGLOOP_EPOLL_H
#define RINGLOOP_EPOLL_H

#include "internal.h"
#include "threadpool.h"

/* Where a request is (rl__ep_req.step); only the loop thread reads or
 * writes it. */
enum {
	RL__EP_NONE = 0,
	RL__EP_INLINE,	 /* waiting for the next wait() to try the fast path */
	RL__EP_BATCH,	 /* waiting to be handed to the pool at the next wait() */
	RL__EP_POOL,	 /* on the pool's queue, or running on a worker */
	RL__EP_WATCH,	 /* a read waiting for its fd to become readable */
	RL__EP_FINISHED, /* finished inline; its completion is due next wait() */
};

/* What is known about a read's fd (rl__ep_req.bflags), set by the loop
 * thread before the hand-off to a worker. */
enum {
	RL__RD_SEEKABLE = 1, /* a regular file or block device: read blocking */
	RL__RD_BLOCKING = 2, /* cannot be polled: a blocking read is all there is */
	RL__EP_TRIED = 4,    /* the fast path failed once: leave it to a worker */
};

/* A worker's answer for a read of a pipe, socket or device that has
 * nothing to read yet: "poll it on the loop thread". */
#define RL__RES_POLL INT64_MIN

struct rl__ep {
	int epfd;
	int efd;	 /* workers' completions and rl_post() */
	bool inline_ok;	 /* the fast path is on (no RL_NO_INLINE) */
	bool openat2_ok; /* openat2 + RESOLVE_CACHED work on this kernel */
	bool probed;	 /* openat2_ok was checked after an EINVAL */
	bool pwait2_ok;	 /* epoll_pwait2 exists */
	bool closing;
	unsigned ncpu;	 /* CPUs this process may run on */
	unsigned nwatch;
	unsigned ninline;	  /* RL__EP_INLINE */
	uint64_t in_pool;	  /* jobs handed to the pool, not reaped */
	struct rl__spin spin;	  /* whether spinning for jobs paid lately */
	struct rl__fifo inl;	  /* RL__EP_INLINE */
	struct rl__fifo batch;	  /* RL__EP_BATCH */
	struct rl__fifo finished; /* RL__EP_FINISHED */
	struct rl__fifo watched;  /* RL__EP_WATCH */
	struct rl__pool pool;
	uint64_t *direct; /* fds opened with O_DIRECT, a bitmap (epoll_fs.c) */
	unsigned ndirect; /* its words */
};

/* What this backend keeps in a request (its private words, req.h). */
struct rl__ep_req {
	int32_t slot;	 /* a watched read's dup()ed fd, or -1 */
	int32_t step;	 /* RL__EP_*: where the request is */
	uint32_t bflags; /* RL__RD_* and RL__EP_TRIED */
	int64_t res[2];	 /* a job's result; a read's bytes so far */
};
RL__REQ_BE_FITS(struct rl__ep_req);

static inline struct rl__ep_req *rl__epr(rl_req *req)
{
	return RL__REQ_BE(struct rl__ep_req, req);
}

static inline struct rl__ep *rl__ep(rl_loop *loop)
{
	return loop->be;
}

/* ------------------------------------------------ core, for the operations */

/* Queues req for the pool; it goes at the next wait(). */
void rl__ep_to_pool(struct rl__ep *ep, rl_req *req);
/* req finished on the loop thread with res; its callback runs after the
 * current wait(). */
void rl__ep_finish_inline(rl_loop *loop, struct rl__ep *ep, rl_req *req,
			  int64_t res);
/* close(fd), counted as a loop syscall. */
void rl__ep_sys_close(rl_loop *loop, int fd);
/* A read that may wait forever: poll its fd, or give it to a worker when
 * the fd cannot be polled. */
void rl__ep_watch_or_block(rl_loop *loop, struct rl__ep *ep, rl_req *req);
/* Re-arms the one-shot watch of req; false when epoll refuses. */
bool rl__ep_rewatch(rl_loop *loop, struct rl__ep *ep, rl_req *req);
void rl__ep_unwatch(rl_loop *loop, struct rl__ep *ep, rl_req *req);

/* -------------------------------------------------- operations, for the core */

/* The pool job that does req the blocking way, on a worker. */
void (*rl__ep_fs_job(const rl_req *req))(rl_req *);
/* Whether the fast path may finish req on the loop thread. */
bool rl__ep_fs_may_inline(const struct rl__ep *ep, const rl_req *req);
/* The fast path: true when req finished (or went to be watched, or to the
 * pool from where it stopped); false when the pool must do it all. */
bool rl__ep_fs_try_inline(rl_loop *loop, struct rl__ep *ep, rl_req *req);
/* A watched fd became readable (or hung up, or failed). */
void rl__ep_fs_ready(rl_loop *loop, struct rl__ep *ep, rl_req *req);
/* req finished with res (before rl__complete()): what the operations
 * learn from it (which fds are O_DIRECT). */
void rl__ep_fs_done(struct rl__ep *ep, rl_req *req, int64_t res);
void rl__ep_fs_free(struct rl__ep *ep);

#endif /* RINGLOOP_EPOLL_H */
