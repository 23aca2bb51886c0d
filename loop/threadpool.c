/* SPDX-License-Identifier: MIT */
/*
 * threadpool.c - the epoll backend's workers.
 *
 * Locking rule. The pool has exactly one mutex, pool->lock, which guards
 * the job queue and the idle/signalled/stop bookkeeping, and nothing else.
 * Whoever holds it takes no other lock, makes no blocking call, and never
 * runs a job or calls notify(): it only moves list pointers and counters.
 * The list of finished jobs is not under any lock (workers push with a
 * compare-and-swap, the loop takes it whole with an exchange), so a worker
 * that finishes a job never waits for the loop, and the loop never waits for
 * a worker except for the few instructions a queue operation lasts. Because
 * no code path ever holds two locks, there is no order to get wrong; keep
 * it that way: anything new that needs a lock of its own must not be taken
 * while pool->lock is held, nor pool->lock while it is held.
 *
 * Ownership. A request on the queue belongs to the pool; once a worker pops
 * it, to that worker alone, which reads its arguments and writes only its
 * result fields (the backend's words, the read_file buffer); once pushed on the done
 * list, to the loop again. The mutex and the exchange on the done list give
 * the happens-before edges between those owners. Workers never touch
 * the request's state nor anything in the loop: rl_cancel() may set
 * RL__REQ_CANCEL while a job runs, and the loop applies it afterwards.
 *
 * Wake-ups. The loop hands jobs over in batches and signals the condition
 * variable only for workers that sleep on it and have not been signalled
 * yet, so a burst of 10,000 jobs costs at most one futex wake per worker.
 * A worker notifies the loop (one eventfd write) only when the loop has
 * said it is going to sleep, and only the first worker to see that does:
 * one write per sleep, however many jobs finish meanwhile, and none while
 * the loop is awake. The loop takes the whole done list at once, so a
 * batch of completions is one wake-up and one pass.
 *
 * Spinning. A worker whose queue runs dry polls it briefly before it
 * sleeps (one worker at a time, and not counted as idle, so the loop does
 * not signal it), and the loop polls the done list briefly before it
 * sleeps (backend_epoll.c). A chain of short jobs, each submitted by the
 * previous one's callback, then moves between the two threads through
 * shared memory alone. The window is RL__POOL_SPIN_NS, tens of
 * microseconds: longer than a cached file job, far shorter than a disk
 * read, so waiting for real I/O still sleeps almost at once. Spins that
 * come back empty make the next ones rarer (struct rl__spin), so that an
 * oversubscribed machine, where spinning only delays the other thread,
 * goes back to sleeping.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "threadpool.h"

static void *worker(void *arg);

unsigned rl__pool_size(unsigned asked)
{
	cpu_set_t set;
	long n = 0;

	if (asked)
		return asked > RL__POOL_MAX_THREADS ? RL__POOL_MAX_THREADS
						    : asked;
	/* The CPUs this process may run on, which a container's cpuset or
	 * taskset narrows; sysconf() counts every online CPU instead. */
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = CPU_COUNT(&set);
	if (n <= 0)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n <= 0)
		n = 1;
	return n > RL__POOL_MAX_THREADS ? RL__POOL_MAX_THREADS : (unsigned)n;
}

/*
 * The loop sleeps only after rl__pool_may_sleep() set loop_asleep and then
 * found the done list empty; a worker publishes its job on the list and
 * then reads loop_asleep. Both pairs are sequentially consistent, so at
 * least one side sees the other: either the loop finds the job and does
 * not sleep, or the worker finds the flag and wakes it. The exchange makes
 * that ONE eventfd write per sleep, however many jobs finish meanwhile;
 * while the loop is awake (running callbacks, spinning) jobs finish
 * without any syscall at all. A worker that sees jobs still queued may
 * hold its wake-up back (RL__POOL_BATCH); the loop bounds how long by
 * never sleeping long while jobs are out (backend_epoll.c).
 */
static void post_done(struct rl__pool *pool, rl_req *req)
{
	rl_req *head = atomic_load_explicit(&pool->done, memory_order_relaxed);
	unsigned pending;

	do {
		rl__req(req)->next = head;
	} while (!atomic_compare_exchange_weak_explicit(&pool->done, &head, req,
							memory_order_seq_cst,
							memory_order_relaxed));
	pending = atomic_fetch_add_explicit(&pool->ndone, 1,
					    memory_order_relaxed) +
		  1;
	if (!atomic_load_explicit(&pool->loop_asleep, memory_order_seq_cst))
		return;
	if (pool->hold_back && pending < RL__POOL_BATCH &&
	    atomic_load_explicit(&pool->queued, memory_order_seq_cst))
		return; /* held back: another job will finish soon */
	if (atomic_exchange_explicit(&pool->loop_asleep, 0,
				     memory_order_seq_cst))
		pool->notify(pool->arg);
}

bool rl__pool_may_sleep(struct rl__pool *pool)
{
	atomic_store_explicit(&pool->loop_asleep, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&pool->done, memory_order_seq_cst)) {
		atomic_store_explicit(&pool->loop_asleep, 0,
				      memory_order_relaxed);
		return false;
	}
	return true;
}

/* Polls the queue length for a while, without the lock. */
static void spin_for_jobs(struct rl__pool *pool)
{
	uint64_t end = rl__clock_ns() + RL__POOL_SPIN_NS;
	unsigned i = 0;

	for (;;) {
		if (atomic_load_explicit(&pool->queued, memory_order_relaxed) ||
		    atomic_load_explicit(&pool->stopping, memory_order_relaxed))
			return;
		rl__cpu_relax();
		if (++i % 64 == 0 && rl__clock_ns() >= end)
			return;
	}
}

static __thread struct rl__worker *self;

static void on_interrupt(int sig)
{
	(void)sig; /* the point is the EINTR it causes */
}

/* Signals whose handler is ours, installed once per process each. */
static pthread_mutex_t installed_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t installed[(_NSIG + 63) / 64];

static bool interrupt_install(int signo)
{
	struct sigaction sa, old;
	uint64_t bit = 1ull << (signo % 64);
	bool ours = false;

	pthread_mutex_lock(&installed_lock);
	if (installed[signo / 64] & bit) {
		ours = true;
	} else if (sigaction(signo, NULL, &old) == 0 &&
		   old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO)) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_interrupt;
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = 0; /* no SA_RESTART: blocking calls get EINTR */
		if (sigaction(signo, &sa, NULL) == 0) {
			installed[signo / 64] |= bit;
			ours = true;
		}
	}
	pthread_mutex_unlock(&installed_lock);
	return ours;
}

int rl__pool_signal(int option)
{
	int signo = option ? option : RL__POOL_SIGNAL;

	if (option < 0 || signo <= 0 || signo >= _NSIG)
		return 0;
	return interrupt_install(signo) ? signo : 0;
}

bool rl__pool_job_cancelled(void)
{
	rl_req *job;

	if (!self)
		return false;
	job = atomic_load_explicit(&self->job, memory_order_relaxed);
	return job && atomic_load_explicit(&self->give_up,
					   memory_order_relaxed) == job;
}

bool rl__pool_job_has_company(void)
{
	return self &&
	       atomic_load_explicit(&self->pool->queued, memory_order_relaxed);
}

void rl__pool_job_again(void)
{
	if (self)
		self->again = true;
}

unsigned rl__pool_interrupt(struct rl__pool *pool, rl_req *req)
{
	unsigned sent = 0;

	if (!pool->signo)
		return 0;
	for (unsigned i = 0; i < pool->nthreads; i++) {
		struct rl__worker *w = &pool->workers[i];
		rl_req *job = atomic_load(&w->job);

		if (!job || (req && job != req))
			continue;
		atomic_store(&w->give_up, job);
		/* The job may finish meanwhile: the signal then interrupts
		 * nothing, or the worker's wait for the next job, which
		 * retries. */
		if (pthread_kill(w->thread, pool->signo) == 0)
			sent++;
	}
	return sent;
}

unsigned rl__pool_interrupt_again(struct rl__pool *pool)
{
	unsigned busy = 0;

	if (!pool->signo)
		return 0;
	for (unsigned i = 0; i < pool->nthreads; i++) {
		struct rl__worker *w = &pool->workers[i];
		rl_req *job = atomic_load(&w->job);

		if (!job || atomic_load(&w->give_up) != job)
			continue;
		busy++;
		pthread_kill(w->thread, pool->signo);
	}
	return busy;
}

static void run_job(struct rl__worker *w, rl_req *req)
{
	rl__req(req)->work(req);
	atomic_store(&w->job, NULL);
}

static void *worker(void *arg)
{
	struct rl__worker *w = arg;
	struct rl__pool *pool = w->pool;
	sigset_t only;
	rl_req *req;

	self = w;
	/* Started with every signal blocked (see start_worker()); only the
	 * interrupt gets through, and it does nothing but interrupt. */
	if (pool->signo) {
		sigemptyset(&only);
		sigaddset(&only, pool->signo);
		pthread_sigmask(SIG_UNBLOCK, &only, NULL);
	}
	pthread_mutex_lock(&pool->lock);
	for (;;) {
		if (rl__fifo_empty(&pool->queue) && !pool->stop &&
		    !pool->spinning && pool->spin && RL__POOL_SPIN_NS > 0 &&
		    rl__spin_allowed(&pool->spin_state)) {
			/* Not idle while it spins: nobody signals it. */
			pool->spinning = true;
			pthread_mutex_unlock(&pool->lock);
			spin_for_jobs(pool);
			pthread_mutex_lock(&pool->lock);
			pool->spinning = false;
			rl__spin_outcome(&pool->spin_state,
					 !rl__fifo_empty(&pool->queue));
		}
		while (rl__fifo_empty(&pool->queue) && !pool->stop) {
			pool->idle++;
			pthread_cond_wait(&pool->cond, &pool->lock);
			pool->idle--;
			if (pool->signalled)
				pool->signalled--;
		}
		if (rl__fifo_empty(&pool->queue))
			break; /* stopping, and nothing left to do */
		req = rl__fifo_pop(&pool->queue);
		atomic_fetch_sub_explicit(&pool->queued, 1,
					  memory_order_seq_cst);
		/* Still under the lock: rl__pool_cancel() either finds req
		 * queued or, after it, rl__pool_interrupt() finds it here. */
		atomic_store(&w->give_up, NULL);
		atomic_store(&w->job, req);
		pthread_mutex_unlock(&pool->lock);

		w->again = false;
		run_job(w, req);
		/* A job that asked to run again goes back on the queue (its
		 * worker is free for the next one at once), unless the loop
		 * asked it to give up. A cancel that comes between its two
		 * runs finds it queued (rl__pool_cancel()) or, in the few
		 * instructions before this lock, nowhere: the loop then
		 * turns the second run's result into -ECANCELED. Every other
		 * job goes to the done list without the lock. */
		if (w->again) {
			pthread_mutex_lock(&pool->lock);
			if (atomic_load(&w->give_up) != req) {
				rl__fifo_push(&pool->queue, req);
				atomic_fetch_add_explicit(&pool->queued, 1,
							  memory_order_seq_cst);
				continue;
			}
			pthread_mutex_unlock(&pool->lock);
		}
		post_done(pool, req);
		pthread_mutex_lock(&pool->lock);
	}
	pthread_mutex_unlock(&pool->lock);
	return NULL;
}

static void stop_workers(struct rl__pool *pool, unsigned started)
{
	pthread_mutex_lock(&pool->lock);
	pool->stop = true;
	atomic_store(&pool->stopping, true);
	pthread_mutex_unlock(&pool->lock);
	pthread_cond_broadcast(&pool->cond);
	for (unsigned i = 0; i < started; i++)
		pthread_join(pool->workers[i].thread, NULL);
}

/* Starts worker i. Workers start with every signal blocked, so a
 * process-directed signal goes to one of the application's own threads,
 * and a job's syscall is never interrupted by the application's handlers.
 * Returns 0 or the pthread error. */
static int start_worker(struct rl__pool *pool, unsigned i)
{
	struct rl__worker *w = &pool->workers[i];
	sigset_t all, old;
	int ret;

	w->pool = pool;
	atomic_init(&w->job, NULL);
	atomic_init(&w->give_up, false);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	ret = pthread_create(&w->thread, NULL, worker, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!ret)
		pthread_setname_np(w->thread, "rl-worker");
	return ret;
}

int rl__pool_init(struct rl__pool *pool, const struct rl__pool_config *cfg,
		  void (*notify)(void *arg), void *arg)
{
	unsigned i;
	int ret;

	memset(pool, 0, sizeof(*pool));
	atomic_init(&pool->done, NULL);
	atomic_init(&pool->ndone, 0);
	atomic_init(&pool->queued, 0);
	atomic_init(&pool->stopping, false);
	atomic_init(&pool->loop_asleep, 0);
	pool->notify = notify;
	pool->arg = arg;
	pool->signo = cfg->signo;
	pool->hold_back = cfg->hold_back;
	pool->spin = cfg->spin;
	pool->max_threads = cfg->max_threads > cfg->threads ? cfg->max_threads
							    : cfg->threads;
	if (!pool->max_threads)
		pool->max_threads = 1;
	pool->workers = calloc(pool->max_threads, sizeof(*pool->workers));
	if (!pool->workers)
		return -ENOMEM;
	ret = pthread_mutex_init(&pool->lock, NULL);
	if (ret) {
		free(pool->workers);
		return -ret;
	}
	ret = pthread_cond_init(&pool->cond, NULL);
	if (ret) {
		pthread_mutex_destroy(&pool->lock);
		free(pool->workers);
		return -ret;
	}
	for (i = 0; i < cfg->threads; i++) {
		ret = start_worker(pool, i);
		if (ret)
			break;
		pool->nthreads = i + 1;
	}
	if (ret) {
		stop_workers(pool, pool->nthreads);
		pthread_cond_destroy(&pool->cond);
		pthread_mutex_destroy(&pool->lock);
		free(pool->workers);
		return -ret;
	}
	return 0;
}

void rl__pool_destroy(struct rl__pool *pool)
{
	stop_workers(pool, pool->nthreads);
	pthread_cond_destroy(&pool->cond);
	pthread_mutex_destroy(&pool->lock);
	free(pool->workers);
	pool->workers = NULL;
}

unsigned rl__pool_submit(struct rl__pool *pool, struct rl__fifo *jobs,
			 unsigned max_active)
{
	unsigned n = 0, wake = 0, awake;

	for (rl_req *r = jobs->head; r; r = rl__req(r)->next)
		n++;
	if (!n)
		return 0;
	pthread_mutex_lock(&pool->lock);
	rl__fifo_splice(&pool->queue, jobs);
	atomic_fetch_add_explicit(&pool->queued, n, memory_order_relaxed);
	/* Wake only sleepers nobody has woken yet, no more of them than
	 * there are new jobs the spinning worker (if any) leaves (a signal
	 * to a worker that will find the queue empty is a wasted futex call
	 * on both sides), and none beyond max_active: a worker more than
	 * there are CPUs for only takes turns with the others. */
	if (pool->spinning)
		n--; /* the spinning worker takes one without a signal */
	awake = pool->nthreads - pool->idle + pool->signalled;
	if (pool->idle > pool->signalled && awake < max_active) {
		wake = pool->idle - pool->signalled;
		if (wake > max_active - awake)
			wake = max_active - awake;
		if (wake > n)
			wake = n;
		pool->signalled += wake;
	}
	pthread_mutex_unlock(&pool->lock);
	for (unsigned i = 0; i < wake; i++)
		pthread_cond_signal(&pool->cond);
	return wake;
}

int rl__pool_submit_alone(struct rl__pool *pool, rl_req *req)
{
	int ret;

	pthread_mutex_lock(&pool->lock);
	rl__fifo_push(&pool->queue, req);
	atomic_fetch_add_explicit(&pool->queued, 1, memory_order_relaxed);
	if (pool->idle > pool->signalled) {
		pool->signalled++;
		pthread_mutex_unlock(&pool->lock);
		pthread_cond_signal(&pool->cond);
		return 1;
	}
	pthread_mutex_unlock(&pool->lock);
	if (pool->nthreads >= pool->max_threads)
		return 0; /* at the cap: it waits for a worker to be free */
	ret = start_worker(pool, pool->nthreads);
	if (ret == 0) {
		pthread_mutex_lock(&pool->lock);
		pool->nthreads++;
		pthread_mutex_unlock(&pool->lock);
		return 1;
	}
	/* No thread for it (EAGAIN: the system refused one). Left on the
	 * queue, it would wait for a busy worker, which may be blocked for
	 * good, or, with none, for the next job's attempt to start one: a
	 * program that only waits for it would hang. So it comes back, unless
	 * a worker that just finished took it meanwhile. */
	if (rl__pool_cancel(pool, req))
		return -ret;
	return 0;
}

rl_req *rl__pool_take(struct rl__pool *pool)
{
	rl_req *req;

	if (!atomic_load_explicit(&pool->queued, memory_order_relaxed))
		return NULL;
	pthread_mutex_lock(&pool->lock);
	req = rl__fifo_pop(&pool->queue);
	if (req)
		atomic_fetch_sub_explicit(&pool->queued, 1,
					  memory_order_seq_cst);
	pthread_mutex_unlock(&pool->lock);
	return req;
}

bool rl__pool_cancel(struct rl__pool *pool, rl_req *req)
{
	bool found;

	pthread_mutex_lock(&pool->lock);
	found = rl__fifo_remove(&pool->queue, req);
	if (found)
		atomic_fetch_sub_explicit(&pool->queued, 1,
					  memory_order_seq_cst);
	pthread_mutex_unlock(&pool->lock);
	return found;
}

void rl__pool_cancel_all(struct rl__pool *pool, struct rl__fifo *out)
{
	pthread_mutex_lock(&pool->lock);
	rl__fifo_splice(out, &pool->queue);
	atomic_store_explicit(&pool->queued, 0, memory_order_relaxed);
	pthread_mutex_unlock(&pool->lock);
}

void rl__pool_take_done(struct rl__pool *pool, struct rl__fifo *out)
{
	rl_req *list, *rev = NULL, *next;

	if (!rl__pool_has_done(pool))
		return;
	list = atomic_exchange_explicit(&pool->done, NULL,
					memory_order_acquire);
	atomic_store_explicit(&pool->ndone, 0, memory_order_relaxed);
	/* The list is LIFO; reverse it so callbacks run in finishing order. */
	while (list) {
		next = rl__req(list)->next;
		rl__req(list)->next = rev;
		rev = list;
		list = next;
	}
	while (rev) {
		next = rl__req(rev)->next;
		rl__fifo_push(out, rev);
		rev = next;
	}
}
