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
 * it in flight, as on io_uring.
 *
 * Nothing that may wait for good blocks a regular worker, so a few such
 * requests never hold back the stats and reads behind them:
 *
 *  - A read that may wait forever (a pipe, a socket, a character device)
 *    is polled on the loop thread instead, so cancelling it just drops
 *    the registration. So is a read_file of such a file: its open is done
 *    with O_NONBLOCK (which, for a FIFO opened for reading, is a reader
 *    that does not wait for a writer), and the file is then read, kept
 *    open, as its data comes (epoll reports nothing before a writer came,
 *    so its end is a writer that came and went, as for a blocking read).
 *  - What cannot be polled and may still block (an open of a FIFO for
 *    writing, which waits for a reader; a read of a device without poll
 *    support; a write to a pipe, a socket or a device) goes to the slow
 *    lane: a second pool, whose workers are
 *    started as such jobs come, up to RL__SLOW_MAX, and interrupted by the
 *    pool's signal when their request is cancelled. A job for which no
 *    worker is idle and none can be started (the system refused the
 *    thread) ends with that error, -EAGAIN, at once (rl__ep_to_slow()).
 *
 * Out of fds. A read_file or write_file that meets EMFILE or ENFILE while
 * the loop's own read_files and write_files hold fds waits for one of them
 * to give its fd back (as the io_uring backend does); only when none is
 * held, and none was given back since it started, does it fail. A
 * write_file counts as holding one from its hand-over to the pool until
 * its result, but not while the slow lane's open waits for a FIFO's
 * reader, maybe for good.
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
	RL__EP_INLINE, /* waiting for the next wait() to try the fast path */
	RL__EP_BATCH,  /* waiting to be handed to the pool at the next wait() */
	RL__EP_POOL,   /* on the pool's queue, or running on a worker */
	RL__EP_SLOW,   /* in the slow lane (queued or running) */
	RL__EP_WATCH,  /* waiting for its fd to become readable (writable) */
	RL__EP_FINISHED, /* finished inline; its completion is due next wait() */
	RL__EP_NET_NEW,	 /* a socket request, started at the next wait() */
	RL__EP_STARVED,	 /* a recv stream waiting for provided buffers */
	RL__EP_FD_WAIT,	 /* a read_file waiting for an fd (see above) */
	RL__EP_AIO_QUEUED, /* a direct read or write for the next io_submit */
	RL__EP_AIO,	   /* in the kernel through AIO (epoll_aio.c) */
};

/* What is known about a read's fd (rl__ep_req.bflags), set by the loop
 * thread before the hand-off to a worker, or by the worker while it runs
 * the job (it owns the request until the loop takes it back). */
enum {
	RL__RD_SEEKABLE = 1, /* a regular file or block device: read (or
			      * write) blocking */
	RL__RD_BLOCKING =
		2, /* cannot be polled: a blocking read is all there is */
	RL__EP_TRIED = 4, /* the fast path failed once: leave it to a worker */
	RL__EP_OUT = 8,	  /* watched for writing (else for reading) */
	RL__EP_STREAM = 16, /* req->fd is open: a read_file reading a stream,
			     * a write_file waiting for the slow lane (set
			     * and cleared by its jobs) */
	RL__EP_HELD = 32,   /* a read_/write_file counted in fds_held */
	RL__EP_AGAIN = 64,  /* a read_file's job on its second pass (set by
			     * its worker, epoll_fs.c job_read_file()) */
};

/* The eventfd's epoll data; a watched fd's data is the fd itself. */
#define RL__EP_EFD_TAG UINT64_MAX

/*
 * A watched fd (epoll_watch.c): the requests waiting for it to become
 * readable, and those waiting for it to become writable, each served in
 * order from the head. events is what epoll has registered for it
 * (level-triggered), 0 when not registered. A request leaving a queue does
 * not change the registration at once: the fd goes on the dirty list, and
 * the next wait() updates epoll if nobody asked for the fd meanwhile.
 */
struct rl__ep_fd {
	struct rl__fifo in;
	struct rl__fifo out;
	uint32_t events;
	int32_t dirty_next; /* the dirty list, -1 at its end */
	bool dirty;
};

/* Workers' answers that are not results. POLL: a read of a pipe, socket
 * or device has nothing to read yet: poll it on the loop thread. STREAM:
 * a read_file opened a FIFO or device, kept open in req->fd: read it as
 * it comes. SLOW: it would block, maybe for good (an open of a FIFO for
 * writing with no reader, a lease; a write to a pipe, socket or device):
 * the slow lane does it. */
#define RL__RES_POLL   INT64_MIN
#define RL__RES_STREAM (INT64_MIN + 1)
#define RL__RES_SLOW   (INT64_MIN + 2)

/* The slow lane's worker cap. */
#define RL__SLOW_MAX 64

/* The first and the longest period between the signals that interrupt a
 * cancelled job again (struct rl__ep.interrupt_ns). */
#define RL__EP_INTERRUPT_MIN_NS 1000000
#define RL__EP_INTERRUPT_MAX_NS 128000000

struct rl__ep {
	int epfd;
	int efd;	 /* workers' completions and rl_post() */
	bool inline_ok;	 /* the fast path is on (no RL_NO_INLINE) */
	bool openat2_ok; /* openat2 + RESOLVE_CACHED work on this kernel */
	bool probed;	 /* openat2_ok was checked after an EINVAL */
	bool pwait2_ok;	 /* epoll_pwait2 exists */
	bool closing;
	bool poll_owed; /* the last wait() skipped polling the fds */
	bool spin_ok;	/* the loop and its workers may poll before sleeping */
	unsigned ncpu;	/* CPUs this process may run on */
	unsigned nwatch;
	unsigned ninline;	  /* RL__EP_INLINE */
	uint64_t in_pool;	  /* jobs handed to the pool, not reaped */
	uint64_t in_slow;	  /* ... to the slow lane */
	uint64_t fds_held;	  /* read_/write_files that may hold an fd */
	uint32_t fd_gen;	  /* fds they gave back */
	uint64_t fds_stuck_ns;	  /* a wait found waiters; 0: an fd came back */
	struct rl__fifo fd_wait;  /* RL__EP_FD_WAIT */
	struct rl__spin spin;	  /* whether spinning for jobs paid lately */
	struct rl__fifo inl;	  /* RL__EP_INLINE */
	struct rl__fifo batch;	  /* RL__EP_BATCH */
	struct rl__fifo finished; /* RL__EP_FINISHED */
	struct rl__pool pool;
	/* fds opened with O_DIRECT, a bitmap, each word followed by the
	 * word of those whose files io_submit() refused (epoll_fs.c) */
	uint64_t *direct;
	unsigned ndirect;      /* its pairs of words */
	struct rl__ep_fd *fds; /* indexed by fd, grown on demand */
	uint32_t nfds;
	int32_t dirty_head; /* fds whose registration may be stale */
	/* Sockets (epoll_net.c). */
	struct rl__fifo net_new; /* RL__EP_NET_NEW */
	struct rl__fifo starved; /* RL__EP_STARVED */
	rl_req *deadlines;	 /* connects with a timeout, soonest first */
	struct rl__pool slow;	 /* jobs that may block for good */
	/* A cancelled job may still block: its signal can come just before
	 * its syscall. Until the cancelled jobs have left the workers, the
	 * loop signals them again at interrupt_due_ns, every interrupt_ns
	 * (doubling up to RL__EP_INTERRUPT_MAX_NS); 0: none is running. */
	uint64_t interrupt_due_ns;
	uint64_t interrupt_ns;
	/* Direct I/O through Linux AIO (epoll_aio.c). */
	uint64_t aio_ctx;	   /* aio_context_t, 0 until the first use */
	bool aio_off;		   /* RL_NO_AIO, or the kernel refused */
	unsigned in_aio;	   /* RL__EP_AIO */
	unsigned naio_queued;	   /* RL__EP_AIO_QUEUED */
	struct rl__fifo aio_queue; /* RL__EP_AIO_QUEUED */
};

/* What this backend keeps in a request (its private words, req.h). */
struct rl__ep_req {
	int32_t slot;	 /* unused, -1 */
	int32_t step;	 /* RL__EP_*: where the request is */
	uint32_t bflags; /* RL__RD_*, RL__EP_* */
	uint32_t gen;	 /* read_file: rl__ep.fd_gen when it last started */
	int64_t res[2];	 /* a job's result; a read's (a send's) bytes so far */
	uint64_t due_ns; /* a connect's deadline, 0 for none */
	rl_req *dnext;	 /* the deadline list */
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
/* Hands req to the slow lane now, to run work. */
void rl__ep_to_slow(rl_loop *loop, struct rl__ep *ep, rl_req *req,
		    void (*work)(rl_req *));
/* req finished on the loop thread with res; its callback runs after the
 * current wait(). */
void rl__ep_finish_inline(rl_loop *loop, struct rl__ep *ep, rl_req *req,
			  int64_t res);
/* close(fd), counted as a loop syscall. */
void rl__ep_sys_close(rl_loop *loop, int fd);
/* A read or write that may wait forever: poll its fd, or give it to the
 * slow lane when the fd cannot be polled. */
void rl__ep_watch_or_block(rl_loop *loop, struct rl__ep *ep, rl_req *req);
/* Gives req to the slow lane to wait there, in a blocking call
 * (RL__RD_BLOCKING), with its operation's slow job. */
void rl__ep_block(rl_loop *loop, struct rl__ep *ep, rl_req *req);
/* req waits again after a spurious wake-up; false when epoll refuses. */
bool rl__ep_rewatch(rl_loop *loop, struct rl__ep *ep, rl_req *req);
void rl__ep_unwatch(rl_loop *loop, struct rl__ep *ep, rl_req *req);

/* epoll_watch.c: the fd table. */
/* Puts req in line for its fd to become readable (out: writable) and
 * makes sure epoll watches for that. Returns 0 or -errno (-EPERM: the fd
 * cannot be polled, -EBADF, -ENOMEM), and then req is not watched. */
int rl__ep_watch(rl_loop *loop, struct rl__ep *ep, rl_req *req, bool out);
/* Whether requests wait to write on fd (a new send goes behind them). */
bool rl__ep_writers(const struct rl__ep *ep, int fd);
/* epoll said events for fd: serves the requests at the heads of its
 * queues. */
void rl__ep_fd_event(rl_loop *loop, struct rl__ep *ep, int fd, uint32_t events);
/* Brings epoll's registrations in line with the queues (before a wait). */
void rl__ep_flush_dirty(rl_loop *loop, struct rl__ep *ep);
/* Closing: every watched request finishes with -ECANCELED. */
void rl__ep_watch_close(rl_loop *loop, struct rl__ep *ep);
void rl__ep_watch_free(struct rl__ep *ep);

/* epoll_net.c: socket requests. */
void rl__ep_net_submit(rl_loop *loop, struct rl__ep *ep, rl_req *req);
/* Times out connects and starts what was submitted since the last wait();
 * returns how many requests finished or had items. */
int rl__ep_net_run(rl_loop *loop, struct rl__ep *ep);
/* timeout_ns, shortened to the soonest connect deadline. */
int64_t rl__ep_net_timeout(struct rl__ep *ep, int64_t timeout_ns);
/* A watched socket request's fd is ready. */
void rl__ep_net_ready(rl_loop *loop, struct rl__ep *ep, rl_req *req,
		      uint32_t events);
void rl__ep_net_cancel(rl_loop *loop, struct rl__ep *ep, rl_req *req);
void rl__ep_net_closing(rl_loop *loop, struct rl__ep *ep);
int rl__ep_net_setup(rl_loop *loop);
void rl__ep_net_bufs_back(rl_loop *loop, const uint16_t *ids, unsigned n);

/* fds of the loop's read_files and write_files (see "Out of fds" above).
 * held: req may hold one from now on. released: it holds none any more
 * (gave one back, or never got one); a request waiting for an fd may try
 * again. */
void rl__ep_fd_held(struct rl__ep *ep, rl_req *req);
void rl__ep_fd_released(rl_loop *loop, struct rl__ep *ep, rl_req *req);
/* The loop thread closed a read_file's fd (the fast path). */
void rl__ep_fd_gave_back(struct rl__ep *ep);
/* A read_file (write_file) met EMFILE/ENFILE: true when it will try
 * again (later, or at once), false when it must fail with that error. */
bool rl__ep_fd_wait(rl_loop *loop, struct rl__ep *ep, rl_req *req);

/* -------------------------------------------------- operations, for the core */

/* The pool job that does req the blocking way, on a worker. */
void (*rl__ep_fs_job(const rl_req *req))(rl_req *);
/* The slow lane's job for req: a blocking open, a read of a device that
 * cannot be polled, a read_file of one. */
void (*rl__ep_fs_slow_job(const rl_req *req))(rl_req *);
/* Whether the fast path may finish req on the loop thread. */
bool rl__ep_fs_may_inline(const struct rl__ep *ep, const rl_req *req);
/* The fast path: true when req finished (or went to be watched, or to the
 * pool from where it stopped); false when the pool must do it all. */
bool rl__ep_fs_try_inline(rl_loop *loop, struct rl__ep *ep, rl_req *req);
/* A read_file whose open found a FIFO or a device, open in req->fd: read
 * it as its data comes (polled), or in the slow lane. */
void rl__ep_fs_stream(rl_loop *loop, struct rl__ep *ep, rl_req *req);
/* A watched fd became readable, or writable for a write (or hung up, or
 * failed). */
void rl__ep_fs_ready(rl_loop *loop, struct rl__ep *ep, rl_req *req);
/* A write to a pipe, socket or device, back from the worker that found
 * the fd's type: tried at once, then polled for room. 1 when it
 * completed, else 0. */
int rl__ep_fs_write_stream(rl_loop *loop, struct rl__ep *ep, rl_req *req);
/* req finished with res (before rl__complete()): what the operations
 * learn from it (which fds are O_DIRECT). */
void rl__ep_fs_done(struct rl__ep *ep, rl_req *req, int64_t res);
void rl__ep_fs_free(struct rl__ep *ep);
/* Whether rl_fs_open() opened fd with O_DIRECT (a hint: see epoll_fs.c). */
bool rl__ep_fs_is_direct(const struct rl__ep *ep, int fd);
/* ... and whether AIO may take its reads and writes: io_submit() has not
 * refused its file (no RWF_NOWAIT there) since it was opened. */
bool rl__ep_fs_aio_ok(const struct rl__ep *ep, int fd);
void rl__ep_fs_no_aio(struct rl__ep *ep, int fd);
/* A read_file streaming from req->fd ends (cancel, close, its end): the
 * fd is closed. */
void rl__ep_fs_stream_close(rl_loop *loop, struct rl__ep *ep, rl_req *req);

/* epoll_aio.c: reads and writes of O_DIRECT fds through Linux AIO. */
/* Queues req for the next io_submit() when AIO can do it; false when it
 * takes the usual way. */
bool rl__ep_aio_take(rl_loop *loop, struct rl__ep *ep, rl_req *req);
/* Submits what is queued (before a wait). */
void rl__ep_aio_flush(rl_loop *loop, struct rl__ep *ep);
/* Completes what the kernel finished; returns how many completed. */
int rl__ep_aio_reap(rl_loop *loop, struct rl__ep *ep);
/* Takes req out of the queue if it is still there; false when it is in
 * the kernel (it finishes as it will). */
bool rl__ep_aio_cancel(struct rl__ep *ep, rl_req *req);
/* Closing: the queued requests finish with -ECANCELED. */
void rl__ep_aio_closing(rl_loop *loop, struct rl__ep *ep);
void rl__ep_aio_free(struct rl__ep *ep);

#endif /* RINGLOOP_EPOLL_H */
