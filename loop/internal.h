/* SPDX-License-Identifier: MIT */
/*
 * internal.h - the backend contract and what the loop's files share.
 *
 * A backend is a small table of functions (struct rl__backend). The loop
 * core (loop.c) owns the lifecycle, the run modes, timers, the ready queue,
 * tasks and posts; fs.c validates requests and hands them to the backend.
 * A backend only moves requests to the kernel or its workers and reports
 * each one finished, once, with rl__complete().
 */
#ifndef RINGLOOP_INTERNAL_H
#define RINGLOOP_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "ringloop/ringloop.h"
#include "list.h"
#include "queue.h"
#include "spin.h"

/* Request states (rl__req(req)->state). */
enum {
	RL__REQ_IDLE = 0,
	RL__REQ_ACTIVE = 1u << 0,   /* submitted, callback not run yet */
	RL__REQ_CANCEL = 1u << 1,   /* rl_cancel() asked for -ECANCELED */
	RL__REQ_DONE = 1u << 2,	    /* result known, callback queued */
	RL__REQ_QUEUED = 1u << 3,   /* in a backend's user-space queue */
	RL__REQ_OWNBUF = 1u << 4,   /* read_file: buffer may be realloc'ed */
	RL__REQ_STREAM = 1u << 5,   /* many callbacks: items, then a final */
	RL__REQ_MORE = 1u << 6,	    /* an item's callback is running */
	RL__REQ_TIMEDOUT = 1u << 7, /* cancelled by its deadline */
	RL__REQ_SPREAD = 1u << 8,   /* runs on another loop of its group */
	RL__REQ_LOAN = 1u << 9,	    /* read_file: lent buffer (loan.c) */
	RL__REQ_REGULAR = 1u << 10, /* read_file: RL_READ_FILE_REGULAR */
};

/* Timer states (timer->state). */
enum {
	RL__TIMER_IDLE = 0,
	RL__TIMER_ACTIVE = 1,	 /* in the heap */
	RL__TIMER_CANCELLED = 2, /* waiting to run its -ECANCELED callback */
};

struct rl__backend {
	const char *name;
	/* Sets loop->be. Returns 0 or -errno (nothing left allocated). */
	int (*init)(rl_loop *loop, const struct rl_options *opt);
	/* Frees everything; called when no request is in flight. */
	void (*destroy)(rl_loop *loop);
	/* Whether rl_loop_close() may close the loop on this thread: 0, or
	 * -errno (-EEXIST: the ring belongs to another thread). NULL: any
	 * thread may. */
	int (*check_thread)(rl_loop *loop);
	/* The same for rl_run(), which must fail before it runs anything:
	 * cheap, as it is called at every rl_run(). NULL: any thread may. */
	int (*check_run)(rl_loop *loop);
	/* Takes RL_READ_FILE_LOAN buffers itself (rl__loan_take()) when a
	 * read_file starts, rather than at its submission. */
	bool late_loan;
	/* Takes an accepted request. It must finish later via rl__complete().
	 * Never fails: what cannot go to the kernel now waits in a queue. */
	void (*submit)(rl_loop *loop, rl_req *req);
	/* Best effort to make an in-flight request finish early; the loop has
	 * already set RL__REQ_CANCEL and will report -ECANCELED. With req NULL
	 * (loop closing): finish everything queued in user space with
	 * -ECANCELED and ask the kernel or workers to drop what they hold. */
	void (*cancel)(rl_loop *loop, rl_req *req);
	/* Pushes queued work out, waits up to timeout_ns (-1: forever, 0: not
	 * at all) for completions or a wake-up, and reports what finished.
	 * Returns >= 0 or -errno. */
	int (*wait)(rl_loop *loop, int64_t timeout_ns);
	/* Thread-safe: makes a wait() in progress (or the next one) return. */
	void (*wake)(rl_loop *loop);
	/* Registers iov[0..n-1] as the fixed buffers with the kernel, none
	 * being registered; n 0 unregisters them. No request is in flight.
	 * NULL: nothing to do beyond the loop's own copy (fs_write.c). */
	int (*register_buffers)(rl_loop *loop, const struct iovec *iov,
				unsigned n);
	/* Sockets (net.c). net_setup: the provided buffers exist now (net.h),
	 * all of them free; take them. net_bufs_back: these buffers are free
	 * again (their callbacks returned, or the user released them). */
	int (*net_setup)(rl_loop *loop);
	void (*net_bufs_back)(rl_loop *loop, const uint16_t *ids, unsigned n);
	/* Called on from's thread, from inside rl_run(): wakes the sleeping
	 * loop to (of the same backend) through from's own ring, without a
	 * syscall of its own. Returns false when it cannot (no room); the
	 * caller then uses to's wake(). NULL: the backend has no such way. */
	bool (*ring)(rl_loop *from, rl_loop *to);
	/* On the loop's thread: pushes to the kernel what waits in user
	 * space for the next wait (the wake-ups ring() queued), without
	 * waiting. NULL: the backend never keeps anything back. */
	void (*flush)(rl_loop *loop);
	/* On the loop's thread, when rl_run() returns without an error: lets
	 * go of what the backend keeps only while the loop runs (files
	 * lingering in io_uring slots), since nothing of the loop may run
	 * again for a long time. NULL: nothing to let go of. */
	void (*leave)(rl_loop *loop);
};

extern const struct rl__backend rl__backend_uring;
extern const struct rl__backend rl__backend_epoll;

/* Size classes of lent read_file buffers: 256 B to 1 MiB (loan.c). */
#define RL__LOAN_MIN_SHIFT 8
#define RL__LOAN_CLASSES   13
struct rl__loan;

struct rl_loop {
	const struct rl__backend *backend;
	void *be;
	struct rl_options opt;
	const char *backend_reason;
	char reason_buf[80];

	struct rl__fifo ready;		 /* requests whose callback is due */
	struct rl_link tasks;		 /* rl_task, FIFO */
	_Atomic(struct rl_post *) posts; /* LIFO pushed by any thread */
	_Atomic int posters;		 /* rl_post() calls in progress */
	_Atomic bool dead;		 /* closing: rl_post() refuses */

	/* timers: a binary min-heap on (due_ns, seq) */
	rl_timer **heap;
	uint32_t heap_len, heap_cap;
	uint64_t timer_seq;
	struct rl_link cancelled; /* rl_timer, FIFO */
	/* The repeating timer whose status 0 callback runs now, until that
	 * callback starts it again (rl_timer_start()). */
	rl_timer *timer_firing;

	struct iovec *bufs; /* rl_loop_register_buffers(), a copy */
	/* read_file buffers back from their loans (loan.c): a LIFO stack
	 * per power-of-two size class, linked through the buffers. */
	struct rl__loan *loans[RL__LOAN_CLASSES];
	size_t loans_n[RL__LOAN_CLASSES]; /* buffers on each stack */
	size_t loans_kept;		  /* bytes on the stacks */
	size_t loans_out;		  /* taken, not back yet */
	size_t loans_peak;		  /* the most ever out at once */
	unsigned nbufs;
	struct rl__net *net; /* sockets' shared state (net.h), made lazily */
	struct rl_link close_hooks;   /* rl_close_hook, newest first */
	struct rl_link release_hooks; /* closed, waiting for their last call,
				       * oldest closed first */
	uint64_t active_reqs;	      /* submitted, callback not yet run */
	/* Work the backend still owes after the callbacks it concerns have
	 * run (io_uring: the close of a read_file's direct descriptor):
	 * rl_run() goes on until it is done, so an idle loop holds no file
	 * open behind the program's back. */
	uint64_t backend_busy;
	uint64_t refs;
	/* The loop's now (rl__now()): read from the clock at most once per
	 * iteration, and only when something asks for it (a timer, a
	 * watchdog); now_stale says the iteration has not asked yet. */
	uint64_t now_ns;
	bool now_stale;
	bool stop;
	bool closing;
	int running; /* nesting guard for rl_run() */

	struct rl_stats stats;

	/* Cross-loop messages (msg.c): set while the loop sleeps in its
	 * backend's wait, taken by the one poster that wakes it. */
	_Atomic bool asleep;
	uint8_t msg_wake; /* enum rl_msg_wake: how this loop wakes others */
	/* This loop's thread only: a wake-up of another loop waits in this
	 * loop's ring for its next enter (msg.c, rl__msg_flush()). */
	bool msg_unsent;
	/* The group the loop belongs to (group.c), or NULL; spread: its
	 * read_files go to the group's other loops (spread.c). */
	struct rl__member *member;
	bool spread;

	/* The CPUs a burst of this loop's file work may use (0: every CPU
	 * the process may run on). A group's loops share the CPUs between
	 * them (group.c): an epoll loop's pool then adds no workers to CPUs
	 * the other loops already keep busy. */
	unsigned burst_cpus;

	/* rl_run()'s poll before a sleep (loop.c): its bound in ns (0: none)
	 * and whether polls paid lately. */
	uint64_t idle_spin_ns;
	struct rl__spin idle_spin;
};

/* The loop running on this thread (inside rl_run()), or NULL. */
extern __thread rl_loop *rl__loop_current;

/* msg.c: makes a sleeping loop see the post just pushed to it. */
void rl__msg_wake(rl_loop *loop);
/* msg.c: a wake-up sent through the ring failed (the target's CQ was
 * full): sends it again the other way. */
void rl__msg_ring_failed(rl_loop *to);
/* msg.c: sends the wake-ups this loop queued in its ring now, when the
 * loop will not enter its backend again soon (rl_run() returns). */
void rl__msg_flush(rl_loop *loop);
/* loop.c: rl_run() without rl__msg_flush() at its return, for a group's
 * worker, which enters its backend again at once. */
int rl__run(rl_loop *loop, enum rl_run_mode mode);

/* spread.c: takes an accepted read_file to another loop of the group;
 * false: run it here. Cancels one that is there. */
bool rl__spread_submit(rl_loop *loop, rl_req *req);
void rl__spread_cancel(rl_loop *loop, rl_req *req);

/* loop.c: rl_loop_close() in two steps, for a group, whose loops must
 * stay valid (posts to them refused) until every one has shut down. */
int rl__loop_shutdown(rl_loop *loop);
void rl__loop_free(rl_loop *loop);

/* Backend -> loop: req finished with result; queues its callback. The loop
 * turns the result into -ECANCELED when the request was cancelled. */
void rl__complete(rl_loop *loop, rl_req *req, int64_t result);

/*
 * How long read_files and write_files out of fds wait for one of the
 * loop's own to give an fd back before they fail with -EMFILE. A FIFO's
 * read_file gives its fd back only when its writer leaves, which may be
 * never: enough of them hold every fd the process may have, and without
 * a bound the waiters would wait with them, for ever. A burst of file
 * work gives fds back every few microseconds.
 */
#define RL__FD_STUCK_NS 1000000000u

/* loop.c */
uint64_t rl__clock_ns(void);

/* The loop's now, CLOCK_MONOTONIC in ns: the same value for the whole of
 * an iteration, read when the iteration first asks. An iteration with no
 * timer and nothing stuck reads no clock. */
static inline uint64_t rl__now(rl_loop *loop)
{
	if (loop->now_stale) {
		loop->now_ns = rl__clock_ns();
		loop->now_stale = false;
	}
	return loop->now_ns;
}

/*
 * The backends' watchdogs (slots, CQ budget, fds that nothing gives back)
 * ask whether a condition has held with nothing moving for limit_ns.
 * *since is when a wait first found it (0: nothing seen yet, or something
 * moved since, which resets it). It is stamped at a check, with the
 * time of that check, never when something moves: a move may be recorded
 * with a loop time taken before a long sleep, or outside rl_run(), and
 * an old stamp would make the condition look stuck at once. Returns true
 * once it has held that long; until then bounds *timeout_ns (a sleep, -1
 * for none) to what is left.
 */
static inline bool rl__stuck_for(uint64_t *since, uint64_t now,
				 uint64_t limit_ns, int64_t *timeout_ns)
{
	uint64_t age;

	if (!*since)
		*since = now;
	age = now - *since;
	if (age >= limit_ns)
		return true;
	if (*timeout_ns < 0 || (uint64_t)*timeout_ns > limit_ns - age)
		*timeout_ns = (int64_t)(limit_ns - age);
	return false;
}
bool rl__alive(const rl_loop *loop);
/* Runs the posts that wait; returns how many. */
int rl__drain_posts(rl_loop *loop);

/* net.c: stream items, delivered before the ready queue of a batch (so a
 * stream's final callback, which goes through rl__complete(), comes after
 * its items); the socket side of rl__complete(), given the result before
 * a cancel turns it into -ECANCELED. */
int rl__net_run_items(rl_loop *loop);
bool rl__net_items_pending(const rl_loop *loop);
void rl__net_complete(rl_loop *loop, rl_req *req, int64_t result);
void rl__net_free(rl_loop *loop);
int rl__net_options_check(const struct rl_options *opt);

/* Every operation after the file ones is a socket's (net.c). */
static inline bool rl__op_is_net(unsigned op)
{
	return op >= RL_OP_ACCEPT;
}

/* A read of an fd into the caller's memory (not read_file). */
static inline bool rl__op_is_read(unsigned op)
{
	return op == RL_OP_READ || op == RL_OP_READV || op == RL_OP_READ_FIXED;
}

/* A write of the caller's memory to an fd (not write_file). */
static inline bool rl__op_is_write(unsigned op)
{
	return op == RL_OP_WRITE || op == RL_OP_WRITEV ||
	       op == RL_OP_WRITE_FIXED;
}

/* timer.c */
int64_t rl__timers_next_ns(rl_loop *loop);
int rl__timers_run(rl_loop *loop);
void rl__timers_cancel_all(rl_loop *loop);
void rl__timers_free(rl_loop *loop);
/* A timer armed or a cancelled one to call back: inline, since the run
 * loop asks on every pass and nearly always hears no. */
static inline bool rl__timers_alive(const rl_loop *loop)
{
	return loop->heap_len || !rl__list_empty(&loop->cancelled);
}
/* rl_req_deadline(): the timer of a request that has its result now. */
void rl__deadline_done(rl_loop *loop, rl_req *req);

/* fs.c: what every submitting call does (fs_write.c too). */
/* The largest single read or write the loop accepts; Linux caps one at
 * MAX_RW_COUNT (INT_MAX rounded down to a page) anyway. */
#define RL__MAX_IO ((size_t)INT_MAX)

int rl__fs_check_path(const char *path);
int rl__fs_check_req(rl_loop *loop, rl_req *req, rl_req_cb cb);
/* Clears req (but data) and sets what every request has. */
void rl__fs_prep(rl_loop *loop, rl_req *req, uint8_t op, rl_req_cb cb);
/* Accepts a request checked and prepared: in flight from here on. */
int rl__fs_accept(rl_loop *loop, rl_req *req);

/* fs.c: synchronous helpers the backends share. */
/* rl__read_file_fd()'s answer when a RWF_NOWAIT read would block. */
#define RL__WOULD_BLOCK INT64_MIN

struct stat;
int64_t rl__read_file_fd(rl_req *req, int fd, const struct stat *st,
			 int rwflags, bool (*give_up)(void), uint64_t *reads);
/*
 * Makes room in a loop-owned read_file buffer for more than the cap
 * bytes it holds: doubles it, up to the loop's read_file_max. -EFBIG for
 * a caller's buffer, or one at the maximum already; -ENOMEM.
 */
int rl__read_file_grow(rl_req *req);
/* Grows a loop-owned buffer at once to hold size bytes and one more, for
 * a regular file whose size is known (fstat): -EFBIG at once when that
 * passes read_file_max. A no-op for a caller's buffer. */
int rl__read_file_reserve(rl_req *req, uint64_t size);
/* fs_write.c: frees the registered buffers' copy (rl_loop_close()). */
void rl__fs_free(rl_loop *loop);
/* loan.c: the buffers of RL_READ_FILE_LOAN. take gives req its buffer
 * when its read starts (0 or -ENOMEM); back takes it again after the
 * callback; free frees what waits, at the loop's close. */
int rl__loan_take(rl_loop *loop, rl_req *req);
void rl__loan_back(rl_loop *loop, void *buf, size_t cap);
void rl__loan_free(rl_loop *loop);

/* The read_file buffer a request starts with (loop-grown mode). */
#define RL__READ_FILE_FIRST 4096

#endif /* RINGLOOP_INTERNAL_H */
