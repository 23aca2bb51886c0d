/* SPDX-License-Identifier: MIT */
/*
 * epoll.c - the epoll backend's core: epoll for the loop's own fds (the
 * eventfd the workers and rl_post() write, and watched reads), the thread
 * pool for blocking work, and the queues in between. What each operation
 * does is in epoll_fs.c; epoll.h tells how a request travels.
 *
 * Closing an fd while a read on it is in flight is undefined, as with
 * read(2) from another thread; with the poll path it may also leave a
 * stale epoll registration when the file has other descriptors.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "epoll.h"

#define MAX_EVENTS 64

/*
 * Sharing. A burst of at least this many fast-path requests in one tick is
 * shared with the workers instead of running on the loop thread alone: it
 * goes on the pool's queue, at most (CPUs - 1) workers are woken, and the
 * loop takes jobs off the same queue and runs them itself with the fast
 * path. Below it, the hand-off costs more than it saves.
 */
#define SHARE_MIN 8

/* ------------------------------------------------------ loop-side helpers */

void rl__ep_to_pool(struct rl__ep *ep, rl_req *req)
{
	rl__req(req)->work = rl__ep_fs_job(req);
	rl__epr(req)->step = RL__EP_BATCH;
	rl__fifo_push(&ep->batch, req);
}

/* ------------------------------------------------------------ out of fds */

/* The requests that open an fd of their own and wait for one when the
 * loop's others hold them all (see epoll.h). */
static bool takes_fd(const rl_req *req)
{
	return req->op == RL_OP_READ_FILE || req->op == RL_OP_WRITE_FILE;
}

void rl__ep_fd_held(struct rl__ep *ep, rl_req *req)
{
	if (!(rl__epr(req)->bflags & RL__EP_HELD)) {
		rl__epr(req)->bflags |= RL__EP_HELD;
		ep->fds_held++;
	}
}

/* Starts req again, from the pool: the regular lane's job (a write_file
 * whose open in the slow lane failed starts over with the open that never
 * waits for a FIFO's reader). */
static void fd_retry(struct rl__ep *ep, rl_req *req)
{
	rl__epr(req)->gen = ep->fd_gen;
	rl__epr(req)->bflags &= ~(uint32_t)RL__RD_BLOCKING;
	rl__epr(req)->bflags |= RL__EP_TRIED;
	rl__ep_to_pool(ep, req);
}

/* Nothing of the loop's holds an fd any more: a waiter that saw an fd
 * given back since it started tries again; the others can only fail. */
static void fd_wait_drain(rl_loop *loop, struct rl__ep *ep)
{
	rl_req *req;

	while ((req = rl__fifo_pop(&ep->fd_wait))) {
		if (rl__epr(req)->gen != ep->fd_gen) {
			fd_retry(ep, req);
			continue;
		}
		rl__epr(req)->step = RL__EP_NONE;
		rl__complete(loop, req, -EMFILE);
	}
}

void rl__ep_fd_gave_back(struct rl__ep *ep)
{
	rl_req *waiter;

	ep->fd_gen++;
	ep->fds_stuck_ns = 0;
	if ((waiter = rl__fifo_pop(&ep->fd_wait)))
		fd_retry(ep, waiter);
}

/* req no longer holds an fd; gave_back: it had one (or may have had). */
static void fd_unhold(rl_loop *loop, struct rl__ep *ep, rl_req *req,
		      bool gave_back)
{
	if (!(rl__epr(req)->bflags & RL__EP_HELD))
		return;
	rl__epr(req)->bflags &= ~(uint32_t)RL__EP_HELD;
	ep->fds_held--;
	if (gave_back)
		rl__ep_fd_gave_back(ep);
	if (!ep->fds_held && !rl__fifo_empty(&ep->fd_wait))
		fd_wait_drain(loop, ep);
}

void rl__ep_fd_released(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	fd_unhold(loop, ep, req, true);
}

bool rl__ep_fd_wait(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	fd_unhold(loop, ep, req, false);
	if (ep->closing || (rl__req(req)->state & RL__REQ_CANCEL))
		return false;
	if (rl__epr(req)->gen != ep->fd_gen) {
		/* An fd was given back since it started: try again. */
		fd_retry(ep, req);
		return true;
	}
	if (!ep->fds_held)
		return false;
	/* The wait's bound counts from the first wait that finds a waiter
	 * (unstick_fds()). */
	rl__epr(req)->step = RL__EP_FD_WAIT;
	rl__fifo_push(&ep->fd_wait, req);
	return true;
}

/* Waiters for an fd that none of the loop's requests gave back for
 * RL__FD_STUCK_NS (FIFO reads waiting for writers may hold them all)
 * fail with -EMFILE, what their open said. Until then, a sleep lasts no
 * longer than that. */
static int64_t unstick_fds(rl_loop *loop, struct rl__ep *ep, int64_t timeout_ns)
{
	rl_req *req;

	if (ep->closing || rl__fifo_empty(&ep->fd_wait)) {
		ep->fds_stuck_ns = 0;
		return timeout_ns;
	}
	/* The clock, not the loop's now: this runs again after a capped
	 * sleep inside the same wait. Rare: only while requests wait. */
	if (!rl__stuck_for(&ep->fds_stuck_ns, rl__clock_ns(), RL__FD_STUCK_NS,
			   &timeout_ns))
		return timeout_ns;
	ep->fds_stuck_ns = 0;
	while ((req = rl__fifo_pop(&ep->fd_wait))) {
		rl__epr(req)->step = RL__EP_NONE;
		rl__complete(loop, req, -EMFILE);
	}
	return 0;
}

/* The request's result is known, but rl__complete() waits for the next
 * wait(): until then it is in flight as far as rl_cancel() can tell, which
 * answers -EALREADY for a second cancel, as for a request in the kernel. */
static void defer_complete(struct rl__ep *ep, rl_req *req, int64_t res)
{
	rl__epr(req)->res[0] = res;
	rl__epr(req)->step = RL__EP_FINISHED;
	rl__fifo_push(&ep->finished, req);
}

/* Finished on the loop thread by the fast path. */
void rl__ep_finish_inline(rl_loop *loop, struct rl__ep *ep, rl_req *req,
			  int64_t res)
{
	defer_complete(ep, req, res);
	loop->stats.inline_completions++;
}

/*
 * Jobs that may block for good are rare: each goes to the slow lane at
 * once, which starts a worker for it if none is idle. When the system
 * refuses that thread (pthread_create() says EAGAIN), the request ends
 * with that error, as a queued one does when cancelled (its stream's fd
 * closed): queued, it would wait for a worker that may never come.
 */
void rl__ep_to_slow(rl_loop *loop, struct rl__ep *ep, rl_req *req,
		    void (*work)(rl_req *))
{
	int ret;

	rl__req(req)->work = work;
	rl__epr(req)->step = RL__EP_SLOW;
	ret = rl__pool_submit_alone(&ep->slow, req);
	if (ret >= 0) {
		ep->in_slow++;
		loop->stats.syscalls += (unsigned)ret;
		return;
	}
	loop->stats.syscalls++; /* the clone that failed */
	if (rl__epr(req)->bflags & RL__EP_STREAM)
		rl__ep_fs_stream_close(loop, ep, req);
	fd_unhold(loop, ep, req, false);
	defer_complete(ep, req, ret);
}

void rl__ep_sys_close(rl_loop *loop, int fd)
{
	close(fd);
	loop->stats.syscalls++;
}

/* A read or write that may wait forever: poll it (epoll_watch.c), or give
 * it to the slow lane when its fd cannot be polled (epoll says EPERM). */
void rl__ep_watch_or_block(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	if (rl__ep_watch(loop, ep, req, rl__op_is_write(req->op)) < 0)
		rl__ep_block(loop, ep, req);
}

void rl__ep_block(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	rl__epr(req)->bflags |= RL__RD_BLOCKING;
	rl__ep_to_slow(loop, ep, req, rl__ep_fs_slow_job(req));
}

/* ---------------------------------------------------------- the backend */

/* The CPUs a burst may run on: every one, or the loop's share of them in
 * a group (loop->burst_cpus). */
static unsigned burst_cpus(const rl_loop *loop, const struct rl__ep *ep)
{
	return loop->burst_cpus && loop->burst_cpus < ep->ncpu
		       ? loop->burst_cpus
		       : ep->ncpu;
}

/* The fast path for one request; what it cannot finish goes to the pool. */
static void run_one(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	rl__epr(req)->step = RL__EP_NONE;
	rl__epr(req)->gen = ep->fd_gen;
	if ((rl__epr(req)->bflags & RL__EP_TRIED) ||
	    !rl__ep_fs_may_inline(ep, req) ||
	    !rl__ep_fs_try_inline(loop, ep, req)) {
		rl__epr(req)->bflags |= RL__EP_TRIED;
		rl__ep_to_pool(ep, req);
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
static void run_inline(rl_loop *loop, struct rl__ep *ep)
{
	struct rl__fifo share = { 0 };
	unsigned cpus = burst_cpus(loop, ep);
	rl_req *req;

	if (ep->ninline < SHARE_MIN || cpus < 2) {
		while ((req = rl__fifo_pop(&ep->inl)))
			run_one(loop, ep, req);
		ep->ninline = 0;
		return;
	}
	rl__fifo_splice(&share, &ep->inl);
	for (req = share.head; req; req = rl__req(req)->next) {
		rl__req(req)->work = rl__ep_fs_job(req);
		rl__epr(req)->step = RL__EP_POOL;
		rl__epr(req)->gen = ep->fd_gen;
		if (takes_fd(req))
			rl__ep_fd_held(ep, req);
	}
	ep->in_pool += ep->ninline;
	ep->ninline = 0;
	/* The loop is the other CPU's worker. */
	loop->stats.syscalls += rl__pool_submit(&ep->pool, &share, cpus - 1);
	while ((req = rl__pool_take(&ep->pool))) {
		ep->in_pool--;
		/* The loop thread's own attempt holds its fd only while it
		 * runs: no longer one of the pool's. */
		fd_unhold(loop, ep, req, false);
		run_one(loop, ep, req);
	}
}

static void ep_submit(rl_loop *loop, rl_req *req)
{
	struct rl__ep *ep = rl__ep(loop);

	if (rl__op_is_net(req->op)) {
		rl__ep_net_submit(loop, ep, req);
		return;
	}
	rl__epr(req)->step = RL__EP_NONE;
	rl__epr(req)->slot = -1;
	rl__epr(req)->bflags = 0;
	rl__epr(req)->gen = ep->fd_gen;
	rl__epr(req)->res[0] = 0;
	rl__epr(req)->res[1] = 0;
	if (rl__ep_aio_take(loop, ep, req))
		return;
	if (ep->inline_ok) {
		/* Not now: the next wait() sees the whole burst. Requests
		 * the fast path cannot do (stat) wait in the same queue, so
		 * that the pool gets a tick's requests in submission order. */
		rl__epr(req)->step = RL__EP_INLINE;
		rl__fifo_push(&ep->inl, req);
		ep->ninline++;
		return;
	}
	rl__ep_to_pool(ep, req);
}

static void flush_batch(rl_loop *loop, struct rl__ep *ep)
{
	uint64_t n = 0;

	if (rl__fifo_empty(&ep->batch))
		return;
	for (rl_req *r = ep->batch.head; r; r = rl__req(r)->next) {
		rl__epr(r)->step = RL__EP_POOL;
		if (takes_fd(r))
			rl__ep_fd_held(ep, r);
		n++;
	}
	ep->in_pool += n;
	/* Each worker woken may cost a futex call on this thread. */
	loop->stats.syscalls +=
		rl__pool_submit(&ep->pool, &ep->batch, ep->pool.max_threads);
}

/* A read_file's job came back from a lane. */
static int read_file_done(rl_loop *loop, struct rl__ep *ep, rl_req *req,
			  int64_t res)
{
	bool stopping = (rl__req(req)->state & RL__REQ_CANCEL) || ep->closing;

	if (res == RL__RES_STREAM) {
		/* It opened a FIFO or a device (req->fd), and holds it. */
		if (stopping) {
			rl__ep_fs_stream_close(loop, ep, req);
			rl__complete(loop, req, -ECANCELED);
			return 1;
		}
		rl__ep_fs_stream(loop, ep, req);
		return 0;
	}
	if (rl__epr(req)->bflags & RL__EP_STREAM) {
		/* The slow lane read a stream to its end: close it. */
		rl__ep_fs_stream_close(loop, ep, req);
	} else if ((res == -EMFILE || res == -ENFILE) &&
		   rl__ep_fd_wait(loop, ep, req)) {
		return 0;
	} else {
		fd_unhold(loop, ep, req, true);
	}
	rl__complete(loop, req, res);
	return 1;
}

/* A write_file's job came back from a lane with its result: out of fds
 * while the loop's own files hold them, it waits for one, as a read_file
 * does (and as on io_uring); else its fd (if it got one) was closed. */
static int write_file_done(rl_loop *loop, struct rl__ep *ep, rl_req *req,
			   int64_t res)
{
	if ((res == -EMFILE || res == -ENFILE) && rl__ep_fd_wait(loop, ep, req))
		return 0;
	if (rl__epr(req)->bflags & RL__EP_HELD)
		fd_unhold(loop, ep, req, true);
	else
		rl__ep_fd_gave_back(ep); /* the slow lane's open, if any */
	rl__complete(loop, req, res);
	return 1;
}

static int pool_done(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	int64_t res = rl__epr(req)->res[0];
	bool stopping = (rl__req(req)->state & RL__REQ_CANCEL) || ep->closing;

	/* Interrupted because the loop closes (a cancelled request becomes
	 * -ECANCELED in rl__complete() anyway). Not a close: Linux has
	 * closed the fd even when close() says EINTR. */
	if (res == -EINTR && ep->closing && req->op != RL_OP_CLOSE)
		res = -ECANCELED;

	rl__epr(req)->step = RL__EP_NONE;
	rl__ep_fs_done(ep, req, res);
	if (req->op == RL_OP_READ_FILE)
		return read_file_done(loop, ep, req, res);
	if (res == RL__RES_POLL || res == RL__RES_SLOW) {
		if (stopping) {
			if (rl__epr(req)->bflags & RL__EP_STREAM)
				rl__ep_fs_stream_close(loop, ep, req);
			fd_unhold(loop, ep, req, false);
			rl__complete(loop, req, -ECANCELED);
			return 1;
		}
		if (res == RL__RES_POLL && rl__op_is_write(req->op)) {
			return rl__ep_fs_write_stream(loop, ep, req);
		} else if (res == RL__RES_POLL) {
			rl__ep_watch_or_block(loop, ep, req);
		} else {
			/* A write_file with no fd open yet (its FIFO has no
			 * reader) may wait for one for good: it holds none
			 * meanwhile, so nothing waits for it to give one
			 * back. Its fd, once the slow lane opened it, is
			 * announced when it is done (write_file_done()). */
			if (req->op == RL_OP_WRITE_FILE &&
			    !(rl__epr(req)->bflags & RL__EP_STREAM))
				fd_unhold(loop, ep, req, false);
			rl__ep_block(loop, ep, req);
		}
		return 0;
	}
	if (req->op == RL_OP_WRITE_FILE)
		return write_file_done(loop, ep, req, res);
	rl__complete(loop, req, res);
	return 1;
}

/* What finished on the loop thread, to the loop's ready queue. */
static int reap_finished(rl_loop *loop, struct rl__ep *ep)
{
	rl_req *req;
	int n = 0;

	while ((req = rl__fifo_pop(&ep->finished))) {
		rl__epr(req)->step = RL__EP_NONE;
		rl__ep_fs_done(ep, req, rl__epr(req)->res[0]);
		rl__complete(loop, req, rl__epr(req)->res[0]);
		n++;
	}
	return n;
}

/* Moves what finished inline or on a worker to the loop's ready queue. */
static int reap(rl_loop *loop, struct rl__ep *ep)
{
	struct rl__fifo done = { 0 };
	rl_req *req;
	int n = reap_finished(loop, ep);

	rl__pool_take_done(&ep->pool, &done);
	while ((req = rl__fifo_pop(&done))) {
		ep->in_pool--;
		loop->stats.pool_jobs++;
		n += pool_done(loop, ep, req);
	}
	rl__pool_take_done(&ep->slow, &done);
	while ((req = rl__fifo_pop(&done))) {
		ep->in_slow--;
		loop->stats.pool_jobs++;
		n += pool_done(loop, ep, req);
	}
	if (ep->in_aio)
		n += rl__ep_aio_reap(loop, ep);
	/* A job the slow lane had no thread for finished just now (see
	 * rl__ep_to_slow()): counted here, or the loop would sleep on it. */
	return n + reap_finished(loop, ep);
}

/*
 * Jobs are out and nothing else can happen without a syscall: poll the
 * done list (and the posts) for a short while before sleeping, so a job
 * that takes a few microseconds costs no eventfd round trip. Returns the
 * time spent, which comes off the timeout.
 */
static int64_t spin_for_done(rl_loop *loop, struct rl__ep *ep, int64_t limit_ns)
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

static int poll_fds(rl_loop *loop, struct rl__ep *ep, int64_t timeout_ns,
		    struct epoll_event *evs)
{
	struct timespec ts;
	int64_t ms;
	int n;

	loop->stats.syscalls++;
	loop->stats.waits++;
	/* epoll_pwait2() (5.11) takes a nanosecond timeout; before it, the
	 * millisecond timeout of epoll_wait() is rounded UP so that a timer
	 * never fires early. */
	if (timeout_ns > 0 && ep->pwait2_ok) {
		ts.tv_sec = timeout_ns / 1000000000;
		ts.tv_nsec = timeout_ns % 1000000000;
		n = epoll_pwait2(ep->epfd, evs, MAX_EVENTS, &ts, NULL);
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
static int64_t hold_cap(struct rl__ep *ep, int64_t timeout_ns, bool *capped)
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

/* A cancelled job was signalled: signal it again later, in case that
 * signal came just before its blocking syscall (threadpool.h), which would
 * then wait for good. */
static void interrupt_later(struct rl__ep *ep)
{
	if (ep->interrupt_due_ns)
		return;
	ep->interrupt_ns = RL__EP_INTERRUPT_MIN_NS;
	ep->interrupt_due_ns = rl__clock_ns() + ep->interrupt_ns;
}

/* Signals the cancelled jobs still on a worker again when it is time,
 * less and less often (a job in an uninterruptible wait, say of a disk,
 * ends when it ends), and stops once none is left. */
static void interrupt_if_due(struct rl__ep *ep)
{
	uint64_t now;

	if (!ep->interrupt_due_ns ||
	    (now = rl__clock_ns()) < ep->interrupt_due_ns)
		return;
	/* Both lanes, always: a sum, not a ||. */
	if (rl__pool_interrupt_again(&ep->pool) +
		    rl__pool_interrupt_again(&ep->slow) ==
	    0) {
		ep->interrupt_due_ns = 0;
		return;
	}
	if (ep->interrupt_ns < RL__EP_INTERRUPT_MAX_NS)
		ep->interrupt_ns *= 2;
	ep->interrupt_due_ns = now + ep->interrupt_ns;
}

/* A sleep of t ends in time for the next signal, if one is due. */
static int64_t interrupt_cap(const struct rl__ep *ep, int64_t t, bool *capped)
{
	uint64_t now;
	int64_t left;

	if (!ep->interrupt_due_ns || t == 0)
		return t;
	now = rl__clock_ns();
	left = now >= ep->interrupt_due_ns
		       ? 0
		       : (int64_t)(ep->interrupt_due_ns - now);
	if (t >= 0 && t <= left)
		return t;
	*capped = true;
	return left;
}

static int ep_wait(rl_loop *loop, int64_t timeout_ns)
{
	struct rl__ep *ep = rl__ep(loop);
	struct epoll_event evs[MAX_EVENTS];
	uint64_t count, start;
	int64_t t;
	int n, i, done;
	bool sleep, capped;

	/* Registrations first: a socket request started now may reuse an
	 * fd that a finished one left registered. */
	rl__ep_flush_dirty(loop, ep);
	done = rl__ep_net_run(loop, ep);
	timeout_ns = rl__ep_net_timeout(ep, timeout_ns);
	run_inline(loop, ep);
	rl__ep_aio_flush(loop, ep);
	flush_batch(loop, ep);
	done += reap(loop, ep);
	/* Spin only while a CPU is left over: with every CPU running a
	 * worker, the spin would take one of them away. */
	if (!done && timeout_ns != 0 && ep->in_pool &&
	    ep->in_pool < burst_cpus(loop, ep) && !ep->nwatch &&
	    RL__POOL_SPIN_NS > 0 && ep->spin_ok &&
	    rl__spin_allowed(&ep->spin)) {
		int64_t spent = spin_for_done(loop, ep, timeout_ns);

		if (timeout_ns > 0)
			timeout_ns =
				spent >= timeout_ns ? 0 : timeout_ns - spent;
		done = reap(loop, ep);
		rl__spin_outcome(&ep->spin, done > 0);
	}
	for (;;) {
		/* What the reaping sent to the pool (a retry, a read that
		 * found nothing to poll, a direct read AIO could not do
		 * without blocking) goes before any sleep, and so do the
		 * direct reads and writes queued since the last flush. */
		rl__ep_aio_flush(loop, ep);
		flush_batch(loop, ep);
		interrupt_if_due(ep);
		/* After the inline work, which may have met EMFILE. */
		timeout_ns = unstick_fds(loop, ep, timeout_ns);
		/* Completions in hand, or no waiting allowed, or a job
		 * finished just now: only the watched fds need a look, if
		 * there are some. */
		sleep = !done && timeout_ns != 0 &&
			rl__pool_may_sleep(&ep->pool);
		if (sleep && !rl__pool_may_sleep(&ep->slow)) {
			rl__pool_awake(&ep->pool);
			sleep = false;
		}
		capped = false;
		if (sleep) {
			t = hold_cap(ep, timeout_ns, &capped);
			t = interrupt_cap(ep, t, &capped);
		} else {
			if (!ep->nwatch)
				return done + reap(loop, ep);
			/* Completions in hand (sends that finished at once,
			 * say): their callbacks may go first, but only
			 * every other time, so watched fds are never kept
			 * waiting for more than one pass. */
			if (done && !ep->poll_owed) {
				ep->poll_owed = true;
				return done + reap(loop, ep);
			}
			t = 0;
		}
		ep->poll_owed = false;
		start = capped && timeout_ns > 0 ? rl__clock_ns() : 0;
		n = poll_fds(loop, ep, t, evs);
		rl__pool_awake(&ep->pool);
		rl__pool_awake(&ep->slow);
		if (n < 0)
			return n == -EINTR ? done + reap(loop, ep) : n;
		for (i = 0; i < n; i++) {
			if (evs[i].data.u64 != RL__EP_EFD_TAG) {
				rl__ep_fd_event(loop, ep, (int)evs[i].data.u64,
						evs[i].events);
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

/* A watched request is dropped: a stream's fd goes with it. */
static void drop_watched(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	rl__ep_unwatch(loop, ep, req);
	if (rl__epr(req)->bflags & RL__EP_STREAM)
		rl__ep_fs_stream_close(loop, ep, req);
}

static void ep_cancel(rl_loop *loop, rl_req *req)
{
	struct rl__ep *ep = rl__ep(loop);
	struct rl__fifo gone = { 0 };

	if (req && rl__op_is_net(req->op)) {
		rl__ep_net_cancel(loop, ep, req);
		return;
	}
	if (!req) {
		/* Closing: nothing new starts. Running jobs finish and
		 * report their real result; finished ones are reaped as
		 * usual by the next wait(). */
		ep->closing = true;
		rl__fifo_splice(&gone, &ep->inl);
		ep->ninline = 0;
		rl__fifo_splice(&gone, &ep->batch);
		rl__fifo_splice(&gone, &ep->fd_wait);
		rl__ep_aio_closing(loop, ep);
		while ((req = rl__fifo_pop(&gone))) {
			rl__epr(req)->step = RL__EP_NONE;
			fd_unhold(loop, ep, req, false);
			rl__complete(loop, req, -ECANCELED);
		}
		rl__pool_cancel_all(&ep->pool, &gone);
		while ((req = rl__fifo_pop(&gone))) {
			ep->in_pool--;
			rl__epr(req)->step = RL__EP_NONE;
			fd_unhold(loop, ep, req, false);
			rl__complete(loop, req, -ECANCELED);
		}
		rl__pool_cancel_all(&ep->slow, &gone);
		while ((req = rl__fifo_pop(&gone))) {
			ep->in_slow--;
			rl__epr(req)->step = RL__EP_NONE;
			if (rl__epr(req)->bflags & RL__EP_STREAM)
				rl__ep_fs_stream_close(loop, ep, req);
			fd_unhold(loop, ep, req, false);
			rl__complete(loop, req, -ECANCELED);
		}
		rl__ep_watch_close(loop, ep);
		rl__ep_net_closing(loop, ep);
		/* Jobs blocked for good (a FIFO's open, a device's read)
		 * would keep the close waiting: interrupt them, again on
		 * every pass of the close, until they have finished. */
		rl__pool_interrupt(&ep->pool, NULL);
		rl__pool_interrupt(&ep->slow, NULL);
		return;
	}
	switch (rl__epr(req)->step) {
	case RL__EP_INLINE:
		rl__fifo_remove(&ep->inl, req);
		ep->ninline--;
		break;
	case RL__EP_BATCH:
		rl__fifo_remove(&ep->batch, req);
		break;
	case RL__EP_FD_WAIT:
		rl__fifo_remove(&ep->fd_wait, req);
		break;
	case RL__EP_POOL:
		if (!rl__pool_cancel(&ep->pool, req)) {
			/* Running: its result becomes -ECANCELED; if it
			 * blocks, the interrupt ends the wait. */
			if (rl__pool_interrupt(&ep->pool, req))
				interrupt_later(ep);
			return;
		}
		ep->in_pool--;
		fd_unhold(loop, ep, req, false);
		break;
	case RL__EP_SLOW:
		if (!rl__pool_cancel(&ep->slow, req)) {
			if (rl__pool_interrupt(&ep->slow, req))
				interrupt_later(ep);
			return;
		}
		ep->in_slow--;
		if (rl__epr(req)->bflags & RL__EP_STREAM)
			rl__ep_fs_stream_close(loop, ep, req);
		fd_unhold(loop, ep, req, false);
		break;
	case RL__EP_WATCH:
		drop_watched(loop, ep, req);
		break;
	case RL__EP_AIO_QUEUED:
		rl__ep_aio_cancel(ep, req);
		break;
	default:
		/* Finished inline: rl__complete() turns the result into
		 * -ECANCELED when the next wait() reaps it. */
		return;
	}
	defer_complete(ep, req, -ECANCELED);
}

/* Thread-safe; called by workers (through the pool) and by rl_post(). */
static void ep_notify(void *arg)
{
	struct rl__ep *ep = arg;
	uint64_t one = 1;

	/* EAGAIN means the counter is saturated: the loop wakes anyway. */
	if (write(ep->efd, &one, sizeof(one)) < 0) {
	}
}

static void ep_wake(rl_loop *loop)
{
	ep_notify(rl__ep(loop));
}

static void ep_destroy(rl_loop *loop)
{
	struct rl__ep *ep = rl__ep(loop);

	if (!ep)
		return;
	/* Joining first: a worker's last eventfd write must find it open. */
	rl__pool_destroy(&ep->pool);
	rl__ep_aio_free(ep);
	rl__ep_fs_free(ep);
	rl__ep_watch_free(ep);
	rl__pool_destroy(&ep->slow);
	close(ep->efd);
	close(ep->epfd);
	free(ep);
	loop->be = NULL;
}

static int ep_init(rl_loop *loop, const struct rl_options *opt)
{
	struct epoll_event ev = { .events = EPOLLIN,
				  .data.u64 = RL__EP_EFD_TAG };
	struct rl__pool_config cfg;
	struct rl__ep *ep;
	int ret, signo;

	ep = calloc(1, sizeof(*ep));
	if (!ep)
		return -ENOMEM;
	ep->inline_ok = !(opt->flags & RL_NO_INLINE);
	/* "Never poll" (rl_options.idle_spin_ns < 0) holds for the pool too:
	 * the loop sleeps at once while jobs are out, and a worker with no
	 * job sleeps at once, trading the latency of a wake-up for the CPU
	 * the polls cost (docs/experiments.md). */
	ep->spin_ok = opt->idle_spin_ns >= 0;
	ep->aio_off = opt->flags & RL_NO_AIO;
	ep->ncpu = rl__pool_size(0);
	ep->openat2_ok = true;
	ep->dirty_head = -1;
	ep->pwait2_ok = true;
	ep->efd = -1;
	ep->epfd = epoll_create1(EPOLL_CLOEXEC);
	loop->stats.syscalls++;
	if (ep->epfd < 0)
		goto fail_errno;
	/* Non-blocking, and only read when epoll reports it, so a read never
	 * waits; one read resets any number of writes. */
	ep->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	loop->stats.syscalls++;
	if (ep->efd < 0)
		goto fail_errno;
	loop->stats.syscalls++;
	if (epoll_ctl(ep->epfd, EPOLL_CTL_ADD, ep->efd, &ev) < 0)
		goto fail_errno;
	signo = rl__pool_signal(opt->pool_signal);
	cfg = (struct rl__pool_config){
		.threads = rl__pool_size(opt->pool_threads),
		.signo = signo,
		.hold_back = true,
		.spin = ep->spin_ok,
	};
	ret = rl__pool_init(&ep->pool, &cfg, ep_notify, ep);
	if (ret < 0)
		goto fail;
	/* The slow lane starts no worker until a job comes. */
	cfg = (struct rl__pool_config){ .max_threads = RL__SLOW_MAX,
					.signo = signo };
	ret = rl__pool_init(&ep->slow, &cfg, ep_notify, ep);
	if (ret < 0) {
		rl__pool_destroy(&ep->pool);
		goto fail;
	}
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
	.init = ep_init,
	.destroy = ep_destroy,
	.submit = ep_submit,
	.cancel = ep_cancel,
	.wait = ep_wait,
	.wake = ep_wake,
	.net_setup = rl__ep_net_setup,
	.net_bufs_back = rl__ep_net_bufs_back,
};
