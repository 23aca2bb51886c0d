/* SPDX-License-Identifier: MIT */
/*
 * threadpool.h - worker threads for blocking file work: a fixed set for
 * the regular lane, and a set that grows on demand for the slow lane
 * (jobs that may block for good, see epoll.h).
 *
 * A job is a request: the loop sets rl__req(req)->work and hands the request
 * over; a worker runs work(req), which leaves its result in the request
 * (in the backend's words), and posts the request back on a lock-free list. The
 * pool calls notify() (an eventfd write) only for a loop that said it is going
 * to sleep, once per sleep, so a burst of completions costs the loop one
 * wake-up at most. See threadpool.c for the locking rule.
 *
 * Every function but the worker side is for the loop thread only.
 */
#ifndef RINGLOOP_THREADPOOL_H
#define RINGLOOP_THREADPOOL_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "internal.h"
#include "spin.h"

#define RL__POOL_MAX_THREADS 256

/*
 * Spinning. A worker that finds the queue empty polls it for up to
 * RL__POOL_SPIN_NS before it sleeps on the condition variable (one worker
 * at a time), and the loop polls the done list as long before it sleeps in
 * epoll_wait. A job handed over and finished within that window then costs
 * no futex call and no eventfd round trip on either side: that is what
 * makes a chain of small jobs (each started by the previous one's
 * callback) cheap. 0 turns spinning off.
 */
#ifndef RL__POOL_SPIN_NS
#define RL__POOL_SPIN_NS 50000
#endif

/*
 * Holding back. While jobs wait on the queue, the workers are busy anyway
 * and the loop has nothing to hand them: waking it for every completion
 * only takes a CPU away from a worker (a futex, a context switch and an
 * epoll_wait per job, which doubled a burst's time on two CPUs). So a
 * worker that finishes a job while others are queued wakes a sleeping loop
 * only once RL__POOL_BATCH completions are waiting; the last job of a
 * burst always wakes it. A loop that sleeps with jobs queued sleeps at most
 * RL__POOL_HOLD_NS, so slow or stuck jobs behind cannot hold a completion
 * back for longer than that.
 */
#define RL__POOL_BATCH	 64
#define RL__POOL_HOLD_NS 1000000

struct rl__pool_config {
	unsigned threads;     /* started at init */
	unsigned max_threads; /* rl__pool_submit_alone() starts more, up to
			       * this */
	int signo;	      /* the interrupt (see below); 0: none */
	bool hold_back;	      /* hold wake-ups back while jobs are queued */
	bool spin;	      /* workers spin for jobs before sleeping */
};

struct rl__pool {
	/* Job queue and the worker bookkeeping, all under lock. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct rl__fifo queue; /* jobs not started yet */
	unsigned idle;	       /* workers asleep on cond */
	unsigned signalled;    /* wake-ups sent and not yet taken */
	bool spinning;	       /* a worker polls the queue before sleeping */
	struct rl__spin spin_state; /* whether workers' spins paid lately */
	bool stop;
	atomic_uint queued;   /* the queue's length, for the spinner */
	atomic_bool stopping; /* stop, for the spinner */

	/* The loop is (about to be) asleep in epoll_wait: the next worker to
	 * finish a job must wake it. Cleared by whoever wakes it. */
	atomic_int loop_asleep;

	/* Finished jobs, pushed by any worker, taken whole by the loop, and
	 * how many were pushed since the loop last took them. */
	_Atomic(rl_req *) done;
	atomic_uint ndone;

	/* Wakes the sleeping loop; set once at init, called by workers. */
	void (*notify)(void *arg);
	void *arg;

	/* Set at init; nthreads grows (loop thread, under lock) up to
	 * max_threads. */
	unsigned nthreads, max_threads;
	int signo;
	bool hold_back, spin;
	struct rl__worker *workers;
};

/*
 * Interrupting. A job can block for good: open() of a FIFO waits for a
 * peer, a read of a device that cannot be polled waits for data. Such a
 * worker could never be joined, and closing the loop would hang. So each
 * worker runs its jobs with one signal unblocked (rl_options.pool_signal,
 * RL__POOL_SIGNAL by default), whose handler does nothing and is
 * installed without SA_RESTART: the signal makes the blocking syscall
 * fail with EINTR. The job's own EINTR retries stop once its worker was
 * asked to give up. A signal sent just before the worker enters the
 * syscall is lost, so the loop sends it again (rl__pool_interrupt_again())
 * until the job has finished: closing on every pass, a cancel with a
 * growing period (epoll.c). The handler is only installed when the program left that
 * signal at SIG_DFL; otherwise (or with no signal) nothing is interrupted.
 */
#define RL__POOL_SIGNAL (SIGRTMIN + 6)

/* The signal a pool of a loop with option pool_signal uses: 0 when there
 * is none or its handler could not be ours. */
int rl__pool_signal(int option);

struct rl__worker {
	struct rl__pool *pool;
	pthread_t thread;
	/* The job it runs, or NULL; set when the worker takes it off the
	 * queue, under the pool's lock, so that a cancel finds every job
	 * either queued or here. */
	_Atomic(rl_req *) job;
	/* The job the loop asked to give up (set before the signal): a job
	 * gives up when this is itself, so a request that names a job the
	 * worker has left behind changes nothing. NULL when taking a job. */
	_Atomic(rl_req *) give_up;
	/* The job asked to go back to the end of the queue
	 * (rl__pool_job_again()); only its worker touches it. */
	bool again;
};

/* For a job, on its worker: whether it was asked to give up (stop
 * retrying after EINTR). */
bool rl__pool_job_cancelled(void);

/* For a job, on its worker: whether other jobs wait in its pool's queue. */
bool rl__pool_job_has_company(void);

/* For a job, on its worker: once it returns, put it back at the end of
 * the queue instead of on the done list, to run again (from the start)
 * after the jobs queued behind it. A job asked to give up meanwhile goes
 * to the done list with the result it left. */
void rl__pool_job_again(void);

/* Interrupts the worker running req, or every busy worker when req is
 * NULL. Returns how many signals it sent. Loop thread. */
unsigned rl__pool_interrupt(struct rl__pool *pool, rl_req *req);

/* Signals again every worker still running a job it was asked to give up:
 * the first signal may have come before the job's blocking syscall.
 * Returns how many are still running one. Loop thread. */
unsigned rl__pool_interrupt_again(struct rl__pool *pool);

/* The thread count option resolved: 0 means the CPUs this process may use. */
unsigned rl__pool_size(unsigned asked);

/* Starts cfg->threads workers. Returns 0 or -errno (nothing left
 * running). */
int rl__pool_init(struct rl__pool *pool, const struct rl__pool_config *cfg,
		  void (*notify)(void *arg), void *arg);

/* Stops and joins every worker. The queue must be empty and no job may be
 * running or unclaimed on the done list (the loop has drained it). */
void rl__pool_destroy(struct rl__pool *pool);

/*
 * Hands a batch of jobs (linked by rl__req(req)->next) to the workers, waking
 * sleeping ones until at most max_active workers are awake (running,
 * spinning or signalled); pass pool->max_threads for "as many as help".
 * It starts no worker: a pool that grows (the slow lane) takes its jobs
 * one at a time through rl__pool_submit_alone(). Returns the number of
 * workers it woke (each may be a futex call).
 */
unsigned rl__pool_submit(struct rl__pool *pool, struct rl__fifo *jobs,
			 unsigned max_active);

/*
 * Hands req, a job that may block for good, to a worker of its own: a
 * sleeping one, or one started for it. Returns the workers woken or
 * started (0 or 1; 0 also when it waits in the queue because the pool is
 * at max_threads), or -errno when no worker could be started for it (the
 * system refused a thread): then req is not in the pool, and the caller
 * ends it.
 */
int rl__pool_submit_alone(struct rl__pool *pool, rl_req *req);

/* Takes the oldest job no worker has started, for the loop thread to run
 * itself; NULL when there is none. */
rl_req *rl__pool_take(struct rl__pool *pool);

/* Takes req off the queue if no worker has started it. Returns whether it
 * did; false means it is running or already finished. */
bool rl__pool_cancel(struct rl__pool *pool, rl_req *req);

/* Takes every job not started yet off the queue, onto *out. */
void rl__pool_cancel_all(struct rl__pool *pool, struct rl__fifo *out);

/*
 * The loop is going to sleep. Returns false, and the loop must not sleep,
 * when a finished job is there already; otherwise the next job to finish
 * will notify(). Pair with rl__pool_awake() after the sleep.
 */
bool rl__pool_may_sleep(struct rl__pool *pool);

static inline void rl__pool_awake(struct rl__pool *pool)
{
	atomic_store_explicit(&pool->loop_asleep, 0, memory_order_relaxed);
}

/* Whether jobs wait on the queue, not started yet. */
static inline bool rl__pool_queued(struct rl__pool *pool)
{
	return atomic_load_explicit(&pool->queued, memory_order_seq_cst) != 0;
}

/* Cheap check (no lock, no syscall) for finished jobs. */
static inline bool rl__pool_has_done(struct rl__pool *pool)
{
	return atomic_load_explicit(&pool->done, memory_order_relaxed) != NULL;
}

/* Takes every finished job, in the order they finished, onto *out. */
void rl__pool_take_done(struct rl__pool *pool, struct rl__fifo *out);

#endif /* RINGLOOP_THREADPOOL_H */
