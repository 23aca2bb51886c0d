/* SPDX-License-Identifier: MIT */
/*
 * test_core_attack.c - attacks on the loop core (rl_run()'s modes,
 * rl_stop(), posts and the sleep protocol, timers) and on the io_uring
 * backend's internals (direct-descriptor slots and the files that linger
 * in them, the adaptive submission, the CQ budget, cancels racing
 * completions). Each test says what ringloop.h promises and checks
 * exactly that, on every backend configuration: what io_uring does its
 * own way must give the same results on epoll.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fs_helpers.h"
#include "helpers.h"

static bool under_valgrind(void)
{
	return getenv("RL_VALGRIND") != NULL;
}

/* Under Valgrind everything runs some 50 times slower: counts shrink. */
static int scaled(int plain, int valgrind)
{
	return under_valgrind() ? valgrind : plain;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void no_op_timer(rl_timer *t, int status)
{
	(void)t;
	(void)status;
}

/* A timer due ms after the real now (rl_now_ms() may be stale: see
 * run_once_bounded() in test_fs_write.c). */
static void start_from_real_now(rl_loop *loop, rl_timer *t, uint64_t ms,
				uint64_t repeat_ms, rl_timer_cb cb)
{
	uint64_t now = tnow_ms(), then = rl_now_ms(loop);

	cr_assert_eq(rl_timer_start(loop, t, (now > then ? now - then : 0) + ms,
				    repeat_ms, cb),
		     0);
}

/* ------------------------------------------------------------ rl_run() */

/*
 * rl_run() of a loop from inside one of its own callbacks is -EBUSY, in
 * every mode, and so is rl_loop_close(); rl_run() of another loop from
 * there runs that loop (the header's "a loop is run and used by one
 * thread" holds: both are this thread's), and the outer loop's rl_run()
 * goes on unharmed afterwards.
 */
struct nested {
	rl_loop *outer, *inner;
	int outer_calls, inner_calls, inner_ran;
	int busy[4], inner_busy[2];
	struct one read;
	rl_timer inner_timer;
	char buf[64];
};

static struct nested *g_nested;

static void inner_timer_cb(rl_timer *t, int status)
{
	struct nested *n = g_nested;

	(void)t;
	cr_assert_eq(status, 0);
	n->inner_calls++;
	/* Inside the inner loop's callback, nested in the outer's: both are
	 * running. */
	n->inner_busy[0] = rl_run(n->outer, RL_RUN_NOWAIT);
	n->inner_busy[1] = rl_run(n->inner, RL_RUN_ONCE);
}

static void outer_timer_cb(rl_timer *t, int status)
{
	struct nested *n = g_nested;

	(void)t;
	cr_assert_eq(status, 0);
	n->outer_calls++;
	n->busy[0] = rl_run(n->outer, RL_RUN_DEFAULT);
	n->busy[1] = rl_run(n->outer, RL_RUN_ONCE);
	n->busy[2] = rl_run(n->outer, RL_RUN_NOWAIT);
	n->busy[3] = rl_loop_close(n->outer);
	cr_assert_eq(rl_fs_read_file(n->inner, one_req(&n->read),
				     tfile("nested", 40), n->buf,
				     sizeof(n->buf), 0, tseen_cb),
		     0);
	rl_timer_init(&n->inner_timer);
	cr_assert_eq(
		rl_timer_start(n->inner, &n->inner_timer, 0, 0, inner_timer_cb),
		0);
	n->inner_ran = rl_run(n->inner, RL_RUN_DEFAULT);
}

static void
run_inside_a_callback_is_ebusy_another_loop_runs(const struct tp *tp)
{
	struct nested n = { 0 };
	rl_timer t;
	rl_loop *inner;

	g_nested = &n;
	n.outer = tloop(tp);
	inner = tloop(tp);
	n.inner = inner;
	rl_timer_init(&t);
	cr_assert_eq(rl_timer_start(n.outer, &t, 1, 0, outer_timer_cb), 0);
	cr_assert_eq(rl_run(n.outer, RL_RUN_DEFAULT), 1);
	cr_assert_eq(n.outer_calls, 1);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(n.busy[i], -EBUSY, "call %d gave %d", i,
			     n.busy[i]);
	cr_assert_eq(n.inner_calls, 1);
	cr_assert_eq(n.inner_busy[0], -EBUSY);
	cr_assert_eq(n.inner_busy[1], -EBUSY);
	cr_assert_eq(n.read.s.calls, 1);
	cr_assert_eq(n.read.s.result, 40);
	tcheck("nested", n.buf, 40);
	cr_assert_eq(n.inner_ran, 2);
	/* Both loops are whole after it. */
	cr_assert_eq(rl_timer_start(n.outer, &t, 0, 0, no_op_timer), 0);
	cr_assert_eq(rl_run(n.outer, RL_RUN_DEFAULT), 1);
	cr_assert_eq(rl_run(inner, RL_RUN_NOWAIT), 0);
	cr_assert_eq(rl_loop_close(inner), 0);
	tclose(n.outer);
}

/*
 * rl_stop(): "makes the current rl_run() return after the callback batch
 * it is in". Called before rl_run() there is no current one: the next
 * rl_run() is not cut short. Twice in a batch is once. From a timer, the
 * timers of the same batch still run, the later ones wait for the next
 * rl_run(). From a post made by another thread, rl_run() returns with
 * a ref still held.
 */
struct stopper {
	rl_loop *loop;
	int calls[4];
	int order[4], n;
};

static struct stopper *g_stop;

static void stop_timer_cb(rl_timer *t, int status)
{
	int i = (int)(intptr_t)t->data;

	cr_assert_eq(status, 0);
	g_stop->calls[i]++;
	g_stop->order[g_stop->n++] = i;
	if (i == 0) {
		rl_stop(g_stop->loop);
		rl_stop(g_stop->loop);
	}
}

static void stop_post_cb(struct rl_post *post)
{
	struct stopper *s = post->data;

	s->calls[0]++;
	rl_stop(s->loop);
}

static void *stop_poster(void *arg)
{
	struct rl_post *post = arg;
	struct stopper *s = post->data;

	sleep_ms(20);
	cr_assert_eq(rl_post(s->loop, post, stop_post_cb), 0);
	return NULL;
}

static void stop_before_twice_from_a_timer_and_from_a_post(const struct tp *tp)
{
	struct stopper s = { 0 };
	struct rl_post post = { .data = &s };
	rl_timer t[4], far;
	pthread_t th;
	rl_loop *loop = tloop(tp);

	alarm(20);
	g_stop = &s;
	s.loop = loop;
	/* Before rl_run(): no effect on the run that follows. */
	rl_stop(loop);
	rl_timer_init(&t[3]);
	t[3].data = (void *)(intptr_t)3;
	start_from_real_now(loop, &t[3], 5, 0, stop_timer_cb);
	cr_assert_eq(rl_run(loop, RL_RUN_DEFAULT), 1);
	cr_assert_eq(s.calls[3], 1);

	/* Three timers due together, the first stops twice; one due well
	 * after them. */
	memset(&s, 0, sizeof(s));
	s.loop = loop;
	for (int i = 0; i < 4; i++) {
		rl_timer_init(&t[i]);
		t[i].data = (void *)(intptr_t)i;
	}
	/* One offset for the three, so that they are due at the same loop
	 * time: counted each from its own real now, which a slow Valgrind
	 * moves on between them, they let the first stop the run before the
	 * third was due. */
	{
		uint64_t now = tnow_ms(), then = rl_now_ms(loop);
		uint64_t off = now > then ? now - then : 0;

		for (int i = 0; i < 3; i++)
			cr_assert_eq(rl_timer_start(loop, &t[i], off + 2, 0,
						    stop_timer_cb),
				     0);
		cr_assert_eq(
			rl_timer_start(loop, &t[3], off + 60, 0, stop_timer_cb),
			0);
	}
	cr_assert_eq(rl_run(loop, RL_RUN_DEFAULT), 3);
	cr_assert_eq(s.n, 3);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(s.order[i], i);
	cr_assert_eq(s.calls[3], 0, "rl_stop() did not stop the run");
	cr_assert_eq(rl_run(loop, RL_RUN_DEFAULT), 1);
	cr_assert_eq(s.calls[3], 1);

	/* From a post: the loop holds a ref and a timer far away, so only
	 * the stop ends the run. */
	tskip_uring_threads_under_valgrind(tp);
	memset(&s, 0, sizeof(s));
	s.loop = loop;
	rl_timer_init(&far);
	cr_assert_eq(rl_timer_start(loop, &far, 100000, 0, no_op_timer), 0);
	rl_ref(loop);
	cr_assert_eq(pthread_create(&th, NULL, stop_poster, &post), 0);
	cr_assert_geq(rl_run(loop, RL_RUN_DEFAULT), 0);
	pthread_join(th, NULL);
	cr_assert_eq(s.calls[0], 1);
	rl_unref(loop);
	cr_assert_eq(rl_timer_stop(loop, &far), 0);
	cr_assert_eq(rl_run(loop, RL_RUN_DEFAULT), 0);
	alarm(0);
	tclose(loop);
}

/*
 * A loop whose only pending thing is a timer years away: RL_RUN_NOWAIT
 * returns at once with nothing run, and RL_RUN_ONCE with a timer due now
 * beside it runs that one without sleeping. The farthest timeout the
 * header allows (RL_TIMEOUT_MAX_MS, about 292 years) is a sleep like any
 * other: a post wakes it, and the loop does not spin on it meanwhile (a
 * timeout that overflowed in the kernel would end every wait at once).
 */
static void far_post_cb(struct rl_post *post)
{
	struct stopper *s = post->data;

	s->calls[0]++;
	rl_stop(s->loop);
}

static void *far_poster(void *arg)
{
	struct rl_post *post = arg;
	struct stopper *s = post->data;

	sleep_ms(100);
	cr_assert_eq(rl_post(s->loop, post, far_post_cb), 0);
	return NULL;
}

static void timer_years_away(const struct tp *tp, uint64_t ms)
{
	struct stopper s = { 0 };
	struct rl_post post = { .data = &s };
	struct rl_stats st0, st1;
	rl_timer far, now;
	int fired = 0;
	pthread_t th;
	rl_loop *loop;

	tskip_uring_threads_under_valgrind(tp);
	loop = tloop(tp);
	s.loop = loop;
	alarm(20);
	rl_timer_init(&far);
	cr_assert_eq(rl_timer_start(loop, &far, ms, 0, no_op_timer), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rl_run(loop, RL_RUN_NOWAIT), 0);
	rl_timer_init(&now);
	now.data = &fired;
	cr_assert_eq(rl_timer_start(loop, &now, 0, 0, no_op_timer), 0);
	cr_assert_eq(rl_run(loop, RL_RUN_ONCE), 1);

	rl_loop_stats(loop, &st0);
	cr_assert_eq(pthread_create(&th, NULL, far_poster, &post), 0);
	cr_assert_geq(rl_run(loop, RL_RUN_DEFAULT), 0);
	pthread_join(th, NULL);
	rl_loop_stats(loop, &st1);
	cr_assert_eq(s.calls[0], 1);
	/* A loop sleeping on one far timer: a handful of waits, not a
	 * spin of thousands. */
	cr_assert_lt(st1.enters + st1.waits - st0.enters - st0.waits, 50,
		     "the loop spun: %llu waits while it slept on a timer "
		     "%llu ms away",
		     (unsigned long long)(st1.enters + st1.waits - st0.enters -
					  st0.waits),
		     (unsigned long long)ms);
	cr_assert_eq(rl_timer_cancel(loop, &far), 0);
	cr_assert_eq(rl_run(loop, RL_RUN_DEFAULT), 1);
	alarm(0);
	tclose(loop);
}

/* rl_stop() in every position; a loop sleeping on timers a year and the
 * longest timeout away. */
CORE_TEST(core_attack, stop_and_timers_years_away)
{
	stop_before_twice_from_a_timer_and_from_a_post(tp);
	timer_years_away(tp, 365ull * 24 * 3600 * 1000);
	timer_years_away(tp, RL_TIMEOUT_MAX_MS);
}

/* --------------------------------------------------------------- timers */

/*
 * A timer whose -ECANCELED callback starts and cancels it again (a retry
 * loop written with cancel as its "now"), chained for ever: the loop must
 * still run I/O between its turns, as it does for a timer restarted with
 * no delay from its own callback (timers started during a pass wait for
 * the next one). Here the read of a pipe that has data must complete while the
 * chain still goes on; the chain stops once the read has come.
 */
struct chain {
	rl_loop *loop;
	rl_timer timer;
	rl_req read;
	int reads;
	int64_t result;
	long turns, limit, turns_at_read;
	bool zero_ms;
};

static void chain_read_cb(rl_req *req)
{
	struct chain *c = req->data;

	c->reads++;
	c->result = req->result;
	c->turns_at_read = c->turns;
}

static void chain_timer_cb(rl_timer *t, int status)
{
	struct chain *c = t->data;

	c->turns++;
	if (c->reads || c->turns >= c->limit)
		return;
	/* Valgrind's scheduler is not fair: a thread that never blocks can
	 * keep the others (the pool's worker reading the pipe) off the CPU
	 * for good. A short pause inside the callback lets them run; the
	 * loop itself still never sleeps. */
	if (under_valgrind() && c->turns % 1000 == 0)
		usleep(100);
	if (c->zero_ms) {
		cr_assert_eq(status, 0);
		cr_assert_eq(rl_timer_start(c->loop, t, 0, 0, chain_timer_cb),
			     0);
		return;
	}
	cr_assert_eq(status, -ECANCELED);
	cr_assert_eq(rl_timer_start(c->loop, t, 100000, 0, chain_timer_cb), 0);
	cr_assert_eq(rl_timer_cancel(c->loop, t), 0);
}

static void timer_chain_lets_io_through(const struct tp *tp, bool zero_ms)
{
	struct chain c = { 0 };
	char buf[8];
	int p[2];

	c.loop = tloop(tp);
	c.limit = scaled(2000000, 20000);
	c.zero_ms = zero_ms;
	alarm(60);
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	c.read.data = &c;
	cr_assert_eq(rl_fs_read(c.loop, &c.read, p[0], buf, sizeof(buf), -1,
				chain_read_cb),
		     0);
	/* The read goes to the kernel (or the pool) empty-handed, then
	 * the data comes: its completion arrives while the chain runs. */
	cr_assert_eq(rl_run(c.loop, RL_RUN_NOWAIT), 0);
	rl_timer_init(&c.timer);
	c.timer.data = &c;
	cr_assert_eq(rl_timer_start(c.loop, &c.timer, 0, 0, chain_timer_cb), 0);
	if (!zero_ms)
		cr_assert_eq(rl_timer_cancel(c.loop, &c.timer), 0);
	cr_assert_eq(write(p[1], "abc", 3), 3);
	trun(c.loop);
	alarm(0);
	cr_assert_eq(c.reads, 1);
	cr_assert_eq(c.result, 3);
	cr_assert_lt(c.turns_at_read, c.limit,
		     "the read came only after the chain ended (%ld turns)",
		     c.turns);
	cr_assert_lt(c.turns, c.limit);
	close(p[0]);
	close(p[1]);
	tclose(c.loop);
}

/* The two chains: a 0 ms timer restarted from its own callback, and a
 * -ECANCELED callback that starts and cancels its timer again. */
BACKEND_TEST(core_attack, timer_chains_for_ever_let_a_read_in)
{
	timer_chain_lets_io_through(tp, true);
	timer_chain_lets_io_through(tp, false);
}

/*
 * Thousands of timers with one deadline, started in one go, fire in
 * start order. Each even one, when it fires, cancels the odd one after
 * it (still in the heap: equal deadlines fire in start order) and
 * restarts itself with 0 ms; the odd ones get exactly one callback, with
 * -ECANCELED, and the restarted even ones fire once more, in a later
 * pass, again in order.
 */
struct herd {
	rl_loop *loop;
	rl_timer *t;
	int n;
	int *fired, *cancelled;
	int *log, nlog;
	int stop_ret_errors;
};

static struct herd *g_herd;

static void herd_cb(rl_timer *t, int status)
{
	struct herd *h = g_herd;
	int i = (int)(t - h->t);

	h->log[h->nlog++] = status < 0 ? -1 - i : i;
	if (status < 0) {
		cr_assert_eq(status, -ECANCELED);
		cr_assert_eq(i % 2, 1);
		h->cancelled[i]++;
		/* Idle once its last callback runs. */
		if (rl_timer_stop(h->loop, t) != -ENOENT)
			h->stop_ret_errors++;
		return;
	}
	h->fired[i]++;
	cr_assert_eq(i % 2, 0, "timer %d fired after its cancel", i);
	if (h->fired[i] == 1) {
		if (i + 1 < h->n)
			cr_assert_eq(rl_timer_cancel(h->loop, &h->t[i + 1]), 0,
				     "timer %d not active", i + 1);
		cr_assert_eq(rl_timer_start(h->loop, t, 0, 0, herd_cb), 0);
	}
}

static void equal_deadlines_cancel_and_restart_each_other(const struct tp *tp)
{
	struct herd h = { 0 };
	int n = scaled(4000, 400), evens = 0, odd_seen = 0, k;
	rl_loop *loop = tloop(tp);

	g_herd = &h;
	h.loop = loop;
	h.n = n;
	h.t = calloc(n, sizeof(*h.t));
	h.fired = calloc(n, sizeof(int));
	h.cancelled = calloc(n, sizeof(int));
	h.log = calloc(3 * n, sizeof(int));
	cr_assert(h.t && h.fired && h.cancelled && h.log);
	/* One now for all: the same deadline. */
	for (int i = 0; i < n; i++)
		cr_assert_eq(rl_timer_start(loop, &h.t[i], 5, 0, herd_cb), 0);
	trun(loop);
	for (int i = 0; i < n; i++) {
		if (i % 2 == 0) {
			cr_assert_eq(h.fired[i], 2, "timer %d fired %d times",
				     i, h.fired[i]);
			evens++;
		} else {
			cr_assert_eq(h.fired[i], 0);
			cr_assert_eq(h.cancelled[i], 1,
				     "timer %d: %d cancel callbacks", i,
				     h.cancelled[i]);
		}
	}
	cr_assert_eq(h.stop_ret_errors, 0);
	cr_assert_eq(h.nlog, 2 * evens + (n - evens));
	/* The first pass: every even timer in order, then (a later pass)
	 * the cancels in the order made, and the restarted ones in order. */
	for (k = 0; k < evens; k++)
		cr_assert_eq(h.log[k], 2 * k, "log[%d] = %d", k, h.log[k]);
	for (; k < h.nlog; k++) {
		if (h.log[k] < 0) {
			cr_assert_eq(h.log[k], -1 - (2 * odd_seen + 1));
			odd_seen++;
		}
	}
	cr_assert_eq(odd_seen, n - evens);
	for (int i = 0, e = 0; i < n; i++)
		cr_assert_eq(rl_timer_stop(loop, &h.t[i]), -ENOENT, "%d %d", i,
			     e);
	free(h.t);
	free(h.fired);
	free(h.cancelled);
	free(h.log);
	tclose(loop);
}

/*
 * A loop thread stalled 50 ms in a callback: every timer that became due
 * meanwhile runs once, in deadline order (start order among equal ones),
 * in the batch after the stall; a repeating timer does not fire in a
 * burst to catch up (it is re-armed from the loop's now).
 */
struct stall {
	rl_loop *loop;
	rl_timer t[24], rep, staller;
	int log[64], nlog;
	uint64_t rep_now[64];
	int nrep;
};

static struct stall *g_stall;

static void stall_log_cb(rl_timer *t, int status)
{
	struct stall *s = g_stall;

	cr_assert_eq(status, 0);
	s->log[s->nlog++] = (int)(t - s->t);
}

static void stall_rep_cb(rl_timer *t, int status)
{
	struct stall *s = g_stall;

	cr_assert_eq(status, 0);
	s->rep_now[s->nrep++] = rl_now_ms(s->loop);
	if (s->nrep == 6)
		cr_assert_eq(rl_timer_stop(s->loop, t), 0);
}

static void stall_cb(rl_timer *t, int status)
{
	(void)t;
	cr_assert_eq(status, 0);
	sleep_ms(50);
}

static void stalled_loop_runs_due_timers_once_in_order(const struct tp *tp)
{
	struct stall s = { 0 };
	/* Deadlines in ms, some equal, all within the stall. */
	static const int due[24] = { 30, 5,  10, 5,  20, 20, 40, 15,
				     5,	 35, 25, 10, 30, 5,  45, 20,
				     40, 10, 15, 25, 35, 30, 5,	 45 };
	int order[24], k = 0;
	rl_loop *loop = tloop(tp);

	g_stall = &s;
	s.loop = loop;
	alarm(20);
	rl_timer_init(&s.staller);
	start_from_real_now(loop, &s.staller, 1, 0, stall_cb);
	/* From the same loop now as the staller: the deadlines' order is
	 * the one of due[]. */
	for (int i = 0; i < 24; i++)
		cr_assert_eq(rl_timer_start(loop, &s.t[i], 1 + due[i], 0,
					    stall_log_cb),
			     0);
	cr_assert_eq(rl_timer_start(loop, &s.rep, 2, 10, stall_rep_cb), 0);
	trun(loop);
	alarm(0);
	cr_assert_eq(s.nlog, 24);
	for (int d = 0; d <= 45; d++)
		for (int i = 0; i < 24; i++)
			if (due[i] == d)
				order[k++] = i;
	for (int i = 0; i < 24; i++)
		cr_assert_eq(s.log[i], order[i],
			     "position %d: timer %d, not %d", i, s.log[i],
			     order[i]);
	cr_assert_eq(s.nrep, 6);
	for (int i = 1; i < s.nrep; i++)
		cr_assert_geq(
			s.rep_now[i] - s.rep_now[i - 1], 10,
			"the repeating timer fired twice within %llu ms",
			(unsigned long long)(s.rep_now[i] - s.rep_now[i - 1]));
	tclose(loop);
}

/* ------------------------------------------------- posts and the sleep */

/*
 * Four threads post 100,000 posts each while the loop is run in every
 * mode in turn (ONCE, NOWAIT, DEFAULT), posts calling rl_stop() now and
 * then, with and without the idle poll: none is lost, none runs twice,
 * each thread's posts run in the order it made them.
 */
enum { POSTERS = 4 };

struct flood {
	rl_loop *loop;
	struct rl_post *posts[POSTERS];
	int per_thread;
	int next[POSTERS];
	long total;
	int errors;
	atomic_int started;
};

struct flood_arg {
	struct flood *f;
	int t;
};

static void flood_cb(struct rl_post *post)
{
	struct flood_arg *a = post->data;
	struct flood *f = a->f;
	int i = (int)(post - f->posts[a->t]);

	if (i != f->next[a->t])
		f->errors++;
	f->next[a->t] = i + 1;
	f->total++;
	if (f->total % 997 == 0)
		rl_stop(f->loop);
}

static void *flood_thread(void *arg)
{
	struct flood_arg *a = arg;
	struct flood *f = a->f;

	atomic_fetch_add(&f->started, 1);
	for (int i = 0; i < f->per_thread; i++) {
		int ret;

		f->posts[a->t][i].data = a;
		ret = rl_post(f->loop, &f->posts[a->t][i], flood_cb);
		if (ret != 0)
			abort();
		if (i % 4096 == 0)
			sleep_ms(1); /* let the loop fall asleep now and then */
	}
	return NULL;
}

static void post_flood(const struct tp *tp, int64_t spin_ns)
{
	struct rl_options opt;
	struct flood f = { 0 };
	struct flood_arg args[POSTERS];
	pthread_t th[POSTERS];
	long want, rounds = 0;
	rl_loop *loop;

	tskip_uring_threads_under_valgrind(tp);
	rl_options_init(&opt);
	opt.idle_spin_ns = spin_ns;
	loop = tloop_opts(tp, &opt);
	f.loop = loop;
	f.per_thread = scaled(100000, 5000);
	want = (long)POSTERS * f.per_thread;
	alarm(120);
	for (int t = 0; t < POSTERS; t++) {
		f.posts[t] = calloc(f.per_thread, sizeof(struct rl_post));
		cr_assert(f.posts[t]);
		args[t] = (struct flood_arg){ &f, t };
	}
	rl_ref(loop);
	for (int t = 0; t < POSTERS; t++)
		cr_assert_eq(
			pthread_create(&th[t], NULL, flood_thread, &args[t]),
			0);
	while (f.total < want) {
		static const enum rl_run_mode modes[3] = { RL_RUN_ONCE,
							   RL_RUN_NOWAIT,
							   RL_RUN_DEFAULT };
		enum rl_run_mode m = modes[rounds++ % 3];

		/* DEFAULT runs until a post stops it: only while posts are
		 * still to come. */
		if (m == RL_RUN_DEFAULT && want - f.total < 997)
			m = RL_RUN_ONCE;
		cr_assert_geq(rl_run(loop, m), 0);
	}
	for (int t = 0; t < POSTERS; t++)
		pthread_join(th[t], NULL);
	rl_unref(loop);
	cr_assert_eq(rl_run(loop, RL_RUN_DEFAULT), 0);
	alarm(0);
	cr_assert_eq(f.total, want);
	cr_assert_eq(f.errors, 0, "%d posts out of order or twice", f.errors);
	for (int t = 0; t < POSTERS; t++) {
		cr_assert_eq(f.next[t], f.per_thread);
		free(f.posts[t]);
	}
	tclose(loop);
}

/* Without the idle poll, then with it. */
CORE_TEST(core_attack, post_flood_across_run_modes)
{
	post_flood(tp, -1);
	post_flood(tp, 200000);
}

/*
 * A post whose callback posts itself again, for ever: the loop never
 * sleeps (a post is always waiting), but it must still take I/O
 * completions and run timers between the posts. A pipe read whose data
 * comes only after many posts, and a timer, must both call back; then
 * the post stops.
 */
struct repost {
	rl_loop *loop;
	struct rl_post post;
	long posts, limit;
	int wfd, reads, timer_calls;
	int64_t result;
	rl_timer timer;
	rl_req read;
	char buf[8];
};

static void repost_cb(struct rl_post *post)
{
	struct repost *r = post->data;

	r->posts++;
	if (r->posts == 1000)
		cr_assert_eq(write(r->wfd, "xyz", 3), 3);
	/* Valgrind's unfair scheduler (see chain_timer_cb()). */
	if (under_valgrind() && r->posts % 1000 == 0)
		usleep(100);
	if ((r->reads && r->timer_calls) || r->posts >= r->limit)
		return;
	cr_assert_eq(rl_post(r->loop, post, repost_cb), 0);
}

static void repost_read_cb(rl_req *req)
{
	struct repost *r = req->data;

	r->reads++;
	r->result = req->result;
}

static void repost_timer_cb(rl_timer *t, int status)
{
	struct repost *r = t->data;

	cr_assert_eq(status, 0);
	r->timer_calls++;
}

BACKEND_TEST(core_attack, post_reposting_for_ever_lets_io_and_timers_in)
{
	struct repost r = { 0 };
	int p[2];
	rl_loop *loop = tloop(tp);

	alarm(60);
	r.loop = loop;
	r.limit = scaled(5000000, 200000);
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	r.wfd = p[1];
	r.read.data = &r;
	cr_assert_eq(rl_fs_read(loop, &r.read, p[0], r.buf, sizeof(r.buf), -1,
				repost_read_cb),
		     0);
	rl_timer_init(&r.timer);
	r.timer.data = &r;
	start_from_real_now(loop, &r.timer, 20, 0, repost_timer_cb);
	r.post.data = &r;
	cr_assert_eq(rl_post(loop, &r.post, repost_cb), 0);
	trun(loop);
	alarm(0);
	cr_assert_eq(r.reads, 1);
	cr_assert_eq(r.result, 3);
	cr_assert_eq(r.timer_calls, 1);
	cr_assert_lt(r.posts, r.limit, "the read or the timer starved");
	close(p[0]);
	close(p[1]);
	tclose(loop);
}

/* ------------------------------------------------- files left in slots */

/*
 * io_uring leaves a finished read_file's file open in its direct
 * descriptor slot, for the slot's next open to replace. A FIFO's reader
 * must not stay open behind the program's back (docs/experiments.md,
 * "the slot's next open closes the file"; test_special.c checks it for a
 * loop run to idle): a writer would then find a reader that will never
 * read, and its data would be lost. Here the loop is driven the other
 * ways a program drives it: RL_RUN_ONCE until the callback, then no more
 * rl_run(); RL_RUN_NOWAIT polls; rl_stop() from the callback. Once
 * rl_run() has returned with the callback run, a new writer must find no
 * reader (ENXIO), with no further rl_run().
 */
static int writer_errno(const char *fifo)
{
	int fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

static void stop_cb(rl_req *req)
{
	tseen_cb(req);
	rl_stop(req->loop);
}

static void fifo_reader_goes(const struct tp *tp, enum rl_run_mode mode,
			     bool stop)
{
	char name[32], buf[16];
	const char *fifo;
	struct tseen s = { 0 };
	rl_req req = { .data = &s };
	int wfd = -1;
	rl_loop *loop = tloop(tp);

	signal(SIGPIPE, SIG_IGN);
	alarm(20);
	snprintf(name, sizeof(name), "fifo%d%d", (int)mode, (int)stop);
	fifo = tpath(name);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_assert_eq(rl_fs_read_file(loop, &req, fifo, buf, sizeof(buf), 0,
				     stop ? stop_cb : tseen_cb),
		     0);
	/* The read_file's open lets a non-blocking writer in. */
	while (wfd < 0) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		wfd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (wfd < 0) {
			cr_assert_eq(errno, ENXIO);
			usleep(1000);
		}
	}
	cr_assert_eq(write(wfd, "abc", 3), 3);
	close(wfd);
	while (!s.calls) {
		cr_assert_geq(rl_run(loop, mode), 0);
		if (mode == RL_RUN_NOWAIT && !s.calls)
			usleep(1000);
	}
	cr_assert_eq(s.calls, 1);
	cr_assert_eq(s.result, 3);
	cr_assert_eq(memcmp(buf, "abc", 3), 0);
	cr_assert_eq(writer_errno(fifo), ENXIO,
		     "rl_run() returned with the FIFO's reader still open");
	trun(loop);
	alarm(0);
	tclose(loop);
}

/* RL_RUN_ONCE, RL_RUN_NOWAIT, rl_stop(); then more files than the SQ
 * has entries (below). */
static void more_lingering_files_than_sq_entries(const struct tp *tp);
static void fifo_closed_with_the_cq_budget_full(const struct tp *tp);

BACKEND_TEST(core_attack, fifo_reader_goes_when_rl_run_returns)
{
	fifo_reader_goes(tp, RL_RUN_ONCE, false);
	fifo_reader_goes(tp, RL_RUN_NOWAIT, false);
	fifo_reader_goes(tp, RL_RUN_DEFAULT, true);
	more_lingering_files_than_sq_entries(tp);
	fifo_closed_with_the_cq_budget_full(tp);
}

/*
 * A burst of read_files of every kind of file at once, with 4 slots and
 * an SQ of 4: FIFOs (a writer thread each that writes and closes), procfs
 * files, /dev/null, and regular files from empty to larger than the first
 * buffer. FIFO reads hold their slots until their writer is done; the
 * rest wait for slots, or go to plain fds when none comes free. Every
 * one calls back once with its whole content.
 */
enum { MIX_FIFOS = 3, MIX_FILES = 6, MIX_N = MIX_FIFOS + 4 + MIX_FILES };

struct mix_writer {
	const char *path;
	char msg[32];
	unsigned delay_ms;
};

static void *mix_writer_main(void *arg)
{
	struct mix_writer *w = arg;
	int fd;

	sleep_ms(w->delay_ms);
	fd = open(w->path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (write(fd, w->msg, strlen(w->msg)) < 0) {
		/* The test sees the short content. */
	}
	close(fd);
	return NULL;
}

static void mixed_burst_with_four_slots_and_a_tiny_sq(const struct tp *tp)
{
	static const size_t sizes[MIX_FILES] = { 0, 1, 100, 4095, 4096, 70000 };
	struct rl_options opt;
	struct mix_writer w[MIX_FIFOS];
	struct one o[MIX_N];
	const char *files[MIX_FILES];
	pthread_t th[MIX_FIFOS];
	int rounds = scaled(5, 2);
	rl_loop *loop;

	tskip_uring_threads_under_valgrind(tp);
	rl_options_init(&opt);
	opt.direct_slots = 4;
	opt.entries = 4;
	loop = tloop_opts(tp, &opt);
	signal(SIGPIPE, SIG_IGN);
	alarm(60);
	for (int i = 0; i < MIX_FILES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "mix%d", i);
		files[i] = spath(name);
		tfile(name, sizes[i]);
	}
	for (int r = 0; r < rounds; r++) {
		int k = 0;

		for (int i = 0; i < MIX_FIFOS; i++) {
			char name[32];

			snprintf(name, sizeof(name), "mixfifo%d_%d", r, i);
			w[i].path = spath(name);
			cr_assert_eq(mkfifo(w[i].path, 0600), 0);
			snprintf(w[i].msg, sizeof(w[i].msg),
				 "fifo %d of round %d", i, r);
			w[i].delay_ms = (unsigned)(5 * i);
			cr_assert_eq(rl_fs_read_file(loop, one_req(&o[k++]),
						     w[i].path, NULL, 0,
						     RL_READ_FILE_GROW,
						     tseen_cb),
				     0);
		}
		cr_assert_eq(rl_fs_read_file(loop, one_req(&o[k++]),
					     "/proc/self/status", NULL, 0,
					     RL_READ_FILE_GROW, tseen_cb),
			     0);
		cr_assert_eq(rl_fs_read_file(loop, one_req(&o[k++]),
					     "/proc/self/maps", NULL, 0,
					     RL_READ_FILE_GROW, tseen_cb),
			     0);
		for (int i = 0; i < 2; i++)
			cr_assert_eq(rl_fs_read_file(loop, one_req(&o[k++]),
						     "/dev/null", NULL, 0,
						     RL_READ_FILE_GROW,
						     tseen_cb),
				     0);
		for (int i = 0; i < MIX_FILES; i++)
			cr_assert_eq(rl_fs_read_file(loop, one_req(&o[k++]),
						     files[i], NULL, 0,
						     RL_READ_FILE_GROW,
						     tseen_cb),
				     0);
		for (int i = 0; i < MIX_FIFOS; i++)
			cr_assert_eq(pthread_create(&th[i], NULL,
						    mix_writer_main, &w[i]),
				     0);
		bool all = false;
		while (!all) {
			cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
			all = true;
			for (int i = 0; i < MIX_N; i++)
				all = all && o[i].s.calls;
		}
		for (int i = 0; i < MIX_FIFOS; i++)
			pthread_join(th[i], NULL);
		for (int i = 0; i < MIX_N; i++)
			cr_assert_eq(o[i].s.calls, 1,
				     "request %d: %d callbacks", i,
				     o[i].s.calls);
		for (int i = 0; i < MIX_FIFOS; i++) {
			cr_assert_eq(o[i].s.result, (int64_t)strlen(w[i].msg),
				     "fifo %d: %lld", i,
				     (long long)o[i].s.result);
			cr_assert_eq(memcmp(o[i].req.buf, w[i].msg,
					    strlen(w[i].msg)),
				     0);
		}
		k = MIX_FIFOS;
		for (int i = 0; i < 2; i++, k++) {
			cr_assert_gt(o[k].s.result, 0, "procfs %d: %lld", i,
				     (long long)o[k].s.result);
			cr_assert_eq(memchr(o[k].req.buf, '\n',
					    (size_t)o[k].s.result) != NULL,
				     true);
		}
		for (int i = 0; i < 2; i++, k++)
			cr_assert_eq(o[k].s.result, 0);
		for (int i = 0; i < MIX_FILES; i++, k++) {
			char name[16];

			snprintf(name, sizeof(name), "mix%d", i);
			cr_assert_eq(o[k].s.result, (int64_t)sizes[i],
				     "%s: %lld", name,
				     (long long)o[k].s.result);
			tcheck(name, o[k].req.buf, sizes[i]);
		}
		for (int i = 0; i < MIX_N; i++)
			free(o[i].req.buf);
	}
	trun(loop);
	alarm(0);
	tclose(loop);
}

/*
 * A file lingering in its slot while the program replaces, renames and
 * truncates it: each read_file, submitted from the callback of the one
 * before (so the slot's next open replaces the lingering file), reads
 * what the path names now, never the file that lingers.
 */
struct morph {
	rl_loop *loop;
	const char *path, *other;
	int step, calls;
	int64_t results[8];
	char data[8][32];
	char buf[64];
	rl_req req;
};

static void morph_cb(rl_req *req)
{
	struct morph *m = req->data;
	int fd;

	m->results[m->calls] = req->result;
	if (req->result > 0)
		memcpy(m->data[m->calls], req->buf,
		       (size_t)req->result < 32 ? (size_t)req->result : 32);
	m->calls++;
	switch (m->step++) {
	case 0: /* replaced: unlinked, then created anew */
		cr_assert_eq(unlink(m->path), 0);
		fd = open(m->path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		cr_assert_geq(fd, 0);
		cr_assert_eq(write(fd, "second", 6), 6);
		close(fd);
		break;
	case 1: /* another file renamed over it */
		cr_assert_eq(rename(m->other, m->path), 0);
		break;
	case 2: /* truncated in place */
		cr_assert_eq(truncate(m->path, 2), 0);
		break;
	case 3: /* gone */
		cr_assert_eq(unlink(m->path), 0);
		break;
	default:
		return;
	}
	rl_req_init(req);
	req->data = m;
	cr_assert_eq(rl_fs_read_file(m->loop, req, m->path, m->buf,
				     sizeof(m->buf), 0, morph_cb),
		     0);
}

static void
lingering_file_replaced_renamed_truncated_unlinked(const struct tp *tp)
{
	struct morph m = { 0 };
	int fd;
	rl_loop *loop = tloop(tp);

	m.loop = loop;
	m.path = spath("morph");
	m.other = spath("morph-other");
	fd = open(m.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert_eq(write(fd, "first!", 6), 6);
	close(fd);
	fd = open(m.other, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert_eq(write(fd, "the third", 9), 9);
	close(fd);
	m.req.data = &m;
	cr_assert_eq(rl_fs_read_file(loop, &m.req, m.path, m.buf, sizeof(m.buf),
				     0, morph_cb),
		     0);
	trun(loop);
	cr_assert_eq(m.calls, 5);
	cr_assert_eq(m.results[0], 6);
	cr_assert_eq(memcmp(m.data[0], "first!", 6), 0);
	cr_assert_eq(m.results[1], 6);
	cr_assert_eq(memcmp(m.data[1], "second", 6), 0);
	cr_assert_eq(m.results[2], 9);
	cr_assert_eq(memcmp(m.data[2], "the third", 9), 0);
	cr_assert_eq(m.results[3], 2);
	cr_assert_eq(memcmp(m.data[3], "th", 2), 0);
	cr_assert_eq(m.results[4], -ENOENT);
	tclose(loop);
}

/*
 * fork() while a read_file's file lingers in its slot (a FIFO's reader):
 * the child holds the ring's fd (it is close-on-exec, not close-on-fork)
 * and sleeps; the parent's loop still closes the file, and the FIFO has
 * no reader while the child lives. The parent's loop works on after.
 */
static void fork_cb(rl_req *req)
{
	pid_t *pid = req->data;

	cr_assert_eq(req->result, 3);
	*pid = fork();
	cr_assert_geq(*pid, 0);
	if (*pid == 0) {
		sleep_ms(200);
		_exit(0);
	}
}

static void fork_while_a_file_lingers(const struct tp *tp)
{
	char buf[16];
	const char *fifo = spath("forkfifo");
	pid_t pid = -1;
	rl_req req = { .data = &pid };
	struct one o;
	int wfd = -1, status;
	rl_loop *loop = tloop(tp);

	signal(SIGPIPE, SIG_IGN);
	alarm(20);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_assert_eq(
		rl_fs_read_file(loop, &req, fifo, buf, sizeof(buf), 0, fork_cb),
		0);
	while (wfd < 0) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		wfd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (wfd < 0)
			usleep(1000);
	}
	cr_assert_eq(write(wfd, "abc", 3), 3);
	close(wfd);
	while (pid < 0)
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
	cr_assert_eq(writer_errno(fifo), ENXIO,
		     "the FIFO's reader is still open after the fork");
	cr_assert_eq(rl_fs_read_file(loop, one_req(&o), tfile("afterfork", 300),
				     NULL, 0, RL_READ_FILE_GROW, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 300);
	tcheck("afterfork", o.req.buf, 300);
	free(o.req.buf);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	alarm(0);
	tclose(loop);
}

BACKEND_TEST(core_attack, lingering_files_changed_under_them_and_forked)
{
	lingering_file_replaced_renamed_truncated_unlinked(tp);
	fork_while_a_file_lingers(tp);
}

/* --------------------------------------------------- adaptive submission */

/*
 * The adaptive submission learns from what completes inline: bursts of
 * cached read_files push async_score down, batches of pipe reads that
 * complete later push it up. Alternating the two flips it back and
 * forth; with submit_batch 1, 4 and one larger than any burst, it does
 * not learn at all. Every request completes once with its data, and
 * the pipe reads in the order their data came.
 */
static void alternate_bursts(const struct tp *tp, unsigned submit_batch)
{
	enum { FILES = 16, PIPES = 8 };
	struct rl_options opt;
	struct one f[FILES], p[PIPES];
	char fbuf[FILES][128], pbuf[PIPES][8];
	int fds[PIPES][2], rounds = scaled(12, 3);
	const char *path = tfile("alt", 100);
	rl_loop *loop;

	rl_options_init(&opt);
	opt.submit_batch = submit_batch;
	opt.entries = 16;
	loop = tloop_opts(tp, &opt);
	alarm(60);
	for (int i = 0; i < PIPES; i++)
		cr_assert_eq(pipe2(fds[i], O_CLOEXEC), 0);
	for (int r = 0; r < rounds; r++) {
		/* Some rounds pipes first, some files first. */
		bool pipes_first = r % 3 == 1;

		for (int pass = 0; pass < 2; pass++) {
			if ((pass == 0) == pipes_first) {
				for (int i = 0; i < PIPES; i++)
					cr_assert_eq(
						rl_fs_read(loop, one_req(&p[i]),
							   fds[i][0], pbuf[i],
							   8, -1, tseen_cb),
						0);
			} else {
				for (int i = 0; i < FILES; i++)
					cr_assert_eq(
						rl_fs_read_file(loop,
								one_req(&f[i]),
								path, fbuf[i],
								sizeof(fbuf[i]),
								0, tseen_cb),
						0);
			}
		}
		/* The files complete; the pipe reads wait for data. */
		for (int i = 0; i < 4; i++)
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		for (int i = 0; i < PIPES; i++) {
			char msg[8];

			snprintf(msg, sizeof(msg), "p%d.%d", r % 10, i);
			cr_assert_eq(write(fds[i][1], msg, 4), 4);
		}
		trun(loop);
		for (int i = 0; i < FILES; i++) {
			cr_assert_eq(f[i].s.calls, 1);
			cr_assert_eq(f[i].s.result, 100);
			tcheck("alt", fbuf[i], 100);
		}
		for (int i = 0; i < PIPES; i++) {
			char msg[8];

			snprintf(msg, sizeof(msg), "p%d.%d", r % 10, i);
			cr_assert_eq(p[i].s.calls, 1);
			cr_assert_eq(p[i].s.result, 4);
			cr_assert_eq(memcmp(pbuf[i], msg, 4), 0);
		}
	}
	alarm(0);
	for (int i = 0; i < PIPES; i++) {
		close(fds[i][0]);
		close(fds[i][1]);
	}
	tclose(loop);
}

/* The adaptive default, then submit_batch 1, 4 and huge. */
BACKEND_TEST(core_attack, adaptive_submission_flipping_and_fixed_batches)
{
	alternate_bursts(tp, 0);
	alternate_bursts(tp, 1);
	alternate_bursts(tp, 4);
	alternate_bursts(tp, 1u << 30);
}

/* ------------------------------------------------------- CQ and SQ room */

/*
 * The smallest rings the loop takes (4 SQ entries, a CQ of 16: the CQ
 * budget is then 8 CQEs) under thousands of completions per tick: read_
 * files, pipe reads, 0 ms timers, with a callback that stalls the loop
 * now and then while the kernel keeps completing. Then every pipe read
 * still in the kernel cancelled at once: each cancel posts a CQE of its
 * own beside the cancelled read's, more than the CQ holds. Nothing may be
 * lost: every callback exactly once, with its result.
 */
struct pressure {
	int calls, timer_calls, stalls;
};

static struct pressure *g_press;

static void pressure_cb(rl_req *req)
{
	tseen_cb(req);
	if (++g_press->calls % 500 == 0) {
		g_press->stalls++;
		sleep_ms(5);
	}
}

static void pressure_timer_cb(rl_timer *t, int status)
{
	(void)t;
	cr_assert_eq(status, 0);
	g_press->timer_calls++;
}

static void smallest_rings_under_thousands_of_completions(const struct tp *tp)
{
	struct rl_options opt;
	struct pressure pr = { 0 };
	int nf = scaled(3000, 200), np = scaled(300, 40),
	    nt = scaled(1000, 100);
	struct one *f = calloc(nf, sizeof(*f)), *p = calloc(np, sizeof(*p));
	char(*fbuf)[64] = calloc(nf, 64), (*pbuf)[4] = calloc(np, 4);
	rl_timer *t = calloc(nt, sizeof(*t));
	int(*fds)[2] = calloc(np, sizeof(*fds));
	const char *path = tfile("press", 50);
	rl_loop *loop;

	cr_assert(f && p && fbuf && pbuf && t && fds);
	rl_options_init(&opt);
	opt.entries = 4;
	opt.cq_entries = 16;
	loop = tloop_opts(tp, &opt);
	g_press = &pr;
	alarm(120);
	for (int i = 0; i < np; i++)
		cr_assert_eq(pipe2(fds[i], O_CLOEXEC), 0);
	/* Half the pipes have data already, half get it later. */
	for (int i = 0; i < np; i += 2)
		cr_assert_eq(write(fds[i][1], "now", 3), 3);
	for (int i = 0; i < nf; i++) {
		cr_assert_eq(rl_fs_read_file(loop, one_req(&f[i]), path,
					     fbuf[i], 64, 0, pressure_cb),
			     0);
		if (i < nt)
			cr_assert_eq(rl_timer_start(loop, &t[i], 0, 0,
						    pressure_timer_cb),
				     0);
		if (i < np)
			cr_assert_eq(rl_fs_read(loop, one_req(&p[i]), fds[i][0],
						pbuf[i], 4, -1, pressure_cb),
				     0);
	}
	for (int i = 0; i < 3; i++)
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	for (int i = 1; i < np; i += 2)
		if (i % 4 == 1)
			cr_assert_eq(write(fds[i][1], "later", 4), 4);
	/* Until every file and the pipes with data are done. */
	for (;;) {
		int done = 0;

		for (int i = 0; i < nf; i++)
			done += f[i].s.calls;
		for (int i = 0; i < np; i++)
			done += (i % 4 != 3) ? p[i].s.calls : 0;
		if (done == nf + np - np / 4)
			break;
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
	}
	/* The rest wait in the kernel or in the loop's queue: cancel all. */
	for (int i = 3; i < np; i += 4)
		cr_assert_eq(rl_cancel(loop, &p[i].req), 0);
	trun(loop);
	alarm(0);
	for (int i = 0; i < nf; i++) {
		cr_assert_eq(f[i].s.calls, 1);
		cr_assert_eq(f[i].s.result, 50, "read_file %d: %lld", i,
			     (long long)f[i].s.result);
		tcheck("press", fbuf[i], 50);
	}
	for (int i = 0; i < np; i++) {
		cr_assert_eq(p[i].s.calls, 1, "pipe read %d: %d calls", i,
			     p[i].s.calls);
		if (i % 2 == 0) {
			cr_assert_eq(p[i].s.result, 3);
			cr_assert_eq(memcmp(pbuf[i], "now", 3), 0);
		} else if (i % 4 == 1) {
			cr_assert_eq(p[i].s.result, 4);
			cr_assert_eq(memcmp(pbuf[i], "late", 4), 0);
		} else {
			cr_assert_eq(p[i].s.result, -ECANCELED,
				     "pipe read %d: %lld", i,
				     (long long)p[i].s.result);
		}
	}
	cr_assert_eq(pr.timer_calls, nt);
	for (int i = 0; i < np; i++) {
		close(fds[i][0]);
		close(fds[i][1]);
	}
	free(f);
	free(p);
	free(fbuf);
	free(pbuf);
	free(t);
	free(fds);
	tclose(loop);
}

/*
 * write_files with an fsync take four SQEs at once: with an SQ of 4 the
 * wake-up's read never finds room beside one. Posts from another thread
 * must still get through while such a burst runs, and every file must
 * be whole.
 */
struct wf_poster {
	rl_loop *loop;
	struct rl_post posts[200];
	atomic_int ran;
	int n;
};

static void wf_post_cb(struct rl_post *post)
{
	struct wf_poster *w = post->data;

	atomic_fetch_add(&w->ran, 1);
}

static void *wf_poster_main(void *arg)
{
	struct wf_poster *w = arg;

	for (int i = 0; i < w->n; i++) {
		w->posts[i].data = w;
		cr_assert_eq(rl_post(w->loop, &w->posts[i], wf_post_cb), 0);
		usleep(200);
	}
	return NULL;
}

BACKEND_TEST(core_attack, fsynced_write_files_fill_a_tiny_sq_posts_get_in)
{
	struct rl_options opt;
	struct wf_poster w = { 0 };
	int n = scaled(60, 10);
	struct one *o = calloc(n, sizeof(*o));
	const char **paths = calloc(n, sizeof(*paths));
	unsigned char *data = pattern("wfsq", 10000);
	pthread_t th;
	rl_loop *loop;

	tskip_uring_threads_under_valgrind(tp);
	cr_assert(o && paths);
	rl_options_init(&opt);
	opt.entries = 4;
	loop = tloop_opts(tp, &opt);
	alarm(60);
	w.loop = loop;
	w.n = 200;
	rl_ref(loop);
	cr_assert_eq(pthread_create(&th, NULL, wf_poster_main, &w), 0);
	for (int i = 0; i < n; i++) {
		char name[32];

		snprintf(name, sizeof(name), "wfsq%d", i);
		paths[i] = spath(name);
		cr_assert_eq(rl_fs_write_file(loop, one_req(&o[i]), paths[i],
					      data, 1000 + (size_t)i * 100,
					      i % 2 ? RL_WRITE_FILE_FSYNC
						    : RL_WRITE_FILE_DATASYNC,
					      0644, tseen_cb),
			     0);
	}
	while (atomic_load(&w.ran) < w.n)
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
	pthread_join(th, NULL);
	rl_unref(loop);
	trun(loop);
	alarm(0);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(o[i].s.calls, 1);
		cr_assert_eq(o[i].s.result, 1000 + i * 100, "%d: %lld", i,
			     (long long)o[i].s.result);
		check_content(paths[i], data, 1000 + (size_t)i * 100);
	}
	free(data);
	free(o);
	free(paths);
	tclose(loop);
}

/* ------------------------------------------------ cancels against results */

/*
 * A cancel made from another request's callback, in the same batch as the
 * cancelled request's own completion (or just before it): exactly one
 * callback, with -ECANCELED or the real result, and the real result only
 * when it is whole: a read_file's every byte, a write_file's file with
 * all of its content, a stat's size. rl_cancel() says 0 or -ENOENT
 * (callback due); after -ENOENT the result is the real one. Each round
 * moves the cancel a little (the trigger submitted before or after the
 * target, after a few turns of the loop), so that it lands at every
 * step of the chains.
 */
enum race_kind {
	RACE_READ_FILE,
	RACE_READ_FILE_BIG,
	RACE_WRITE_FILE,
	RACE_WRITE_FILE_BIG,
	RACE_STAT,
	RACE_KINDS
};

struct race {
	rl_loop *loop;
	rl_req target, trigger;
	rl_timer timer;
	int kind, target_calls, trigger_calls, cancel_ret;
	int64_t result;
	struct statx stx;
	char small[256];
	const char *path, *wpath;
	unsigned char *data;
	size_t len;
};

static void race_target_cb(rl_req *req)
{
	struct race *r = req->data;

	r->target_calls++;
	r->result = req->result;
}

static void race_cancel(struct race *r)
{
	r->cancel_ret = rl_cancel(r->loop, &r->target);
}

static void race_trigger_cb(rl_req *req)
{
	struct race *r = req->data;

	r->trigger_calls++;
	race_cancel(r);
}

static void race_timer_cb(rl_timer *t, int status)
{
	struct race *r = t->data;

	cr_assert_eq(status, 0);
	r->trigger_calls++;
	race_cancel(r);
}

static void race_submit_target(struct race *r)
{
	rl_req_init(&r->target);
	r->target.data = r;
	switch (r->kind) {
	case RACE_READ_FILE:
		cr_assert_eq(rl_fs_read_file(r->loop, &r->target, r->path,
					     r->small, sizeof(r->small), 0,
					     race_target_cb),
			     0);
		break;
	case RACE_READ_FILE_BIG:
		cr_assert_eq(rl_fs_read_file(r->loop, &r->target, r->path, NULL,
					     0, RL_READ_FILE_GROW,
					     race_target_cb),
			     0);
		break;
	case RACE_WRITE_FILE:
	case RACE_WRITE_FILE_BIG:
		cr_assert_eq(rl_fs_write_file(r->loop, &r->target, r->wpath,
					      r->data, r->len, 0, 0644,
					      race_target_cb),
			     0);
		break;
	case RACE_STAT:
		cr_assert_eq(rl_fs_stat(r->loop, &r->target, r->path, &r->stx,
					race_target_cb),
			     0);
		break;
	}
}

static void race_check(struct race *r, const char *name, size_t size)
{
	cr_assert_eq(r->target_calls, 1, "kind %d: %d callbacks", r->kind,
		     r->target_calls);
	cr_assert(r->cancel_ret == 0 || r->cancel_ret == -ENOENT,
		  "rl_cancel: %d", r->cancel_ret);
	if (r->cancel_ret == -ENOENT)
		cr_assert_neq(r->result, -ECANCELED);
	if (r->result == -ECANCELED)
		goto done;
	switch (r->kind) {
	case RACE_READ_FILE:
	case RACE_READ_FILE_BIG:
		cr_assert_eq(r->result, (int64_t)size, "kind %d: %lld", r->kind,
			     (long long)r->result);
		tcheck(name, r->target.buf, size);
		break;
	case RACE_WRITE_FILE:
	case RACE_WRITE_FILE_BIG:
		cr_assert_eq(r->result, (int64_t)r->len, "kind %d: %lld",
			     r->kind, (long long)r->result);
		check_content(r->wpath, r->data, r->len);
		break;
	case RACE_STAT:
		cr_assert_eq(r->result, 0);
		cr_assert_eq(r->stx.stx_size, size);
		break;
	}
done:
	if (r->kind == RACE_READ_FILE_BIG)
		free(r->target.buf);
}

static void cancel_from_a_callback_races_the_completion(const struct tp *tp)
{
	enum { SMALL = 200, BIG = 3 << 20 };
	struct race r = { 0 };
	const char *small = spath("race-small"), *big = spath("race-big");
	int rounds = scaled(60, 6);
	rl_loop *loop = tloop(tp);

	alarm(120);
	tfile("race-small", SMALL);
	tfile("race-big", BIG);
	r.loop = loop;
	r.wpath = spath("race-out");
	r.data = pattern("race-out", BIG);
	for (int kind = 0; kind < RACE_KINDS; kind++) {
		for (int i = 0; i < rounds; i++) {
			bool big_one = kind == RACE_READ_FILE_BIG ||
				       kind == RACE_WRITE_FILE_BIG;
			int turns = i % 6;

			r.kind = kind;
			r.path = big_one ? big : small;
			r.len = kind == RACE_WRITE_FILE_BIG ? BIG : SMALL;
			r.target_calls = r.trigger_calls = 0;
			r.cancel_ret = 1;
			rl_req_init(&r.trigger);
			r.trigger.data = &r;
			/* The trigger: a stat, before or after the target, or
			 * a 0 ms timer after a few turns of the loop. */
			if (i % 3 == 0)
				cr_assert_eq(rl_fs_stat(loop, &r.trigger, small,
							&r.stx,
							race_trigger_cb),
					     0);
			race_submit_target(&r);
			if (i % 3 == 1)
				cr_assert_eq(rl_fs_stat(loop, &r.trigger, small,
							&r.stx,
							race_trigger_cb),
					     0);
			if (i % 3 == 2) {
				for (int k = 0; k < turns; k++)
					cr_assert_geq(
						rl_run(loop, RL_RUN_NOWAIT), 0);
				if (!r.target_calls) {
					rl_timer_init(&r.timer);
					r.timer.data = &r;
					cr_assert_eq(rl_timer_start(
							     loop, &r.timer, 0,
							     0, race_timer_cb),
						     0);
				} else {
					r.trigger_calls = 1;
					r.cancel_ret = -ENOENT;
				}
			}
			trun(loop);
			cr_assert_eq(r.trigger_calls, 1);
			race_check(&r, big_one ? "race-big" : "race-small",
				   big_one ? BIG : SMALL);
		}
	}
	alarm(0);
	free(r.data);
	tclose(loop);
}

/*
 * Reads that wait for ever (pipes nobody writes to, sockets whose peer
 * says nothing: idle connections) each hold a CQE of the loop's CQ
 * budget while they wait. With as many of them as the budget (8 CQEs
 * with a CQ of 16; 4088 with the default ring), every request after them
 * waited with them, for ever. New requests must still run: read_files,
 * a timer, a write to one of the pipes, which completes one of the
 * reads; then the rest are cancelled.
 */
static void idle_reads_do_not_hold_the_cq_budget(const struct tp *tp)
{
	enum { IDLE = 24, FILES = 40 };
	struct rl_options opt;
	struct one idle[IDLE], f[FILES];
	char ibuf[IDLE][8], fbuf[FILES][64];
	int fds[IDLE][2], fired = 0;
	const char *path = tfile("budget", 30);
	rl_timer t;
	rl_loop *loop;

	rl_options_init(&opt);
	opt.entries = 4;
	opt.cq_entries = 16;
	loop = tloop_opts(tp, &opt);
	alarm(30);
	for (int i = 0; i < IDLE; i++) {
		if (i % 2)
			cr_assert_eq(socketpair(AF_UNIX,
						SOCK_STREAM | SOCK_CLOEXEC, 0,
						fds[i]),
				     0);
		else
			cr_assert_eq(pipe2(fds[i], O_CLOEXEC), 0);
		if (i % 2)
			cr_assert_eq(rl_net_recv(loop, one_req(&idle[i]),
						 fds[i][0], ibuf[i], 8,
						 tseen_cb),
				     0);
		else
			cr_assert_eq(rl_fs_read(loop, one_req(&idle[i]),
						fds[i][0], ibuf[i], 8, -1,
						tseen_cb),
				     0);
	}
	for (int i = 0; i < 3; i++)
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	for (int i = 0; i < FILES; i++)
		cr_assert_eq(rl_fs_read_file(loop, one_req(&f[i]), path,
					     fbuf[i], 64, 0, tseen_cb),
			     0);
	rl_timer_init(&t);
	t.data = &fired;
	start_from_real_now(loop, &t, 5, 0, no_op_timer);
	for (bool done = false; !done;) {
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
		done = true;
		for (int i = 0; i < FILES; i++)
			done = done && f[i].s.calls;
	}
	for (int i = 0; i < FILES; i++) {
		cr_assert_eq(f[i].s.calls, 1);
		cr_assert_eq(f[i].s.result, 30);
		tcheck("budget", fbuf[i], 30);
	}
	/* One of the idle ones gets its data, the rest are cancelled. */
	cr_assert_eq(write(fds[IDLE - 1][1], "wake", 4), 4);
	while (!idle[IDLE - 1].s.calls)
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
	cr_assert_eq(idle[IDLE - 1].s.result, 4);
	for (int i = 0; i < IDLE - 1; i++)
		cr_assert_eq(rl_cancel(loop, &idle[i].req), 0);
	trun(loop);
	alarm(0);
	for (int i = 0; i < IDLE - 1; i++) {
		cr_assert_eq(idle[i].s.calls, 1);
		cr_assert_eq(idle[i].s.result, -ECANCELED);
	}
	for (int i = 0; i < IDLE; i++) {
		close(fds[i][0]);
		close(fds[i][1]);
	}
	tclose(loop);
}

/*
 * "It may restart or cancel itself from its callback" (struct rl_timer):
 * also a repeating timer, which the loop has re-armed by the time its
 * callback runs. The restart replaces the re-arm: here a timer repeating
 * every 10 s restarts itself as a one-shot of 1 ms, fires once more and
 * is idle. Outside its callback an active timer stays -EBUSY.
 */
struct rearm {
	rl_loop *loop;
	int calls, start_ret, again_ret;
};

static void rearm_cb(rl_timer *t, int status)
{
	struct rearm *r = t->data;

	cr_assert_eq(status, 0);
	if (++r->calls == 1) {
		r->start_ret = rl_timer_start(r->loop, t, 1, 0, rearm_cb);
		if (r->start_ret < 0) /* fail now, not in 10 s */
			rl_timer_stop(r->loop, t);
		/* Started once from here, it is an active timer again. */
		r->again_ret = rl_timer_start(r->loop, t, 1, 0, rearm_cb);
	}
}

static void
repeating_timer_restarts_itself_from_its_callback(const struct tp *tp)
{
	struct rearm r = { 0 };
	rl_timer t;
	rl_loop *loop = tloop(tp);

	alarm(20);
	r.loop = loop;
	rl_timer_init(&t);
	t.data = &r;
	cr_assert_eq(rl_timer_start(loop, &t, 1, 10000, rearm_cb), 0);
	cr_assert_eq(rl_timer_start(loop, &t, 1, 0, rearm_cb), -EBUSY);
	trun(loop);
	alarm(0);
	cr_assert_eq(r.start_ret, 0, "restart from its callback: %d",
		     r.start_ret);
	cr_assert_eq(r.again_ret, -EBUSY);
	cr_assert_eq(r.calls, 2);
	cr_assert_eq(rl_timer_stop(loop, &t), -ENOENT);
	tclose(loop);
}

/*
 * -ECANCELED callbacks that stop and cancel other timers: a cancelled
 * timer whose callback is still owed, stopped from another's -ECANCELED
 * callback in the same pass, gets none; one cancelled from there gets
 * its own in a later pass.
 */
struct owed {
	rl_loop *loop;
	rl_timer t[3];
	int calls[3], stop_ret, cancel_ret;
};

static void owed_cb(rl_timer *t, int status)
{
	struct owed *o = t->data;
	int i = (int)(t - o->t);

	o->calls[i]++;
	if (i == 0) {
		cr_assert_eq(status, -ECANCELED);
		o->stop_ret = rl_timer_stop(o->loop, &o->t[1]);
		o->cancel_ret = rl_timer_cancel(o->loop, &o->t[2]);
	} else {
		cr_assert_eq(status, -ECANCELED);
	}
}

static void cancelled_callbacks_stop_and_cancel_others(const struct tp *tp)
{
	struct owed o = { 0 };
	rl_loop *loop = tloop(tp);

	o.loop = loop;
	for (int i = 0; i < 3; i++) {
		o.t[i].data = &o;
		cr_assert_eq(rl_timer_start(loop, &o.t[i], 100000, 0, owed_cb),
			     0);
	}
	cr_assert_eq(rl_timer_cancel(loop, &o.t[0]), 0);
	cr_assert_eq(rl_timer_cancel(loop, &o.t[1]), 0);
	trun(loop);
	cr_assert_eq(o.stop_ret, 0);
	cr_assert_eq(o.cancel_ret, 0);
	cr_assert_eq(o.calls[0], 1);
	cr_assert_eq(o.calls[1], 0, "a stopped timer got its callback");
	cr_assert_eq(o.calls[2], 1);
	tclose(loop);
}

/*
 * Once the CQ budget has stretched over reads that waited (see
 * idle_reads_do_not_hold_the_cq_budget), they may all complete at once,
 * with a burst of read_files besides: more CQEs than the CQ holds (16).
 * The kernel keeps the rest in its overflow list; every read must still
 * get its own data, exactly once, and the read_files cancelled from
 * there (queued or in flight) exactly one callback each.
 */
struct ovf {
	rl_loop *loop;
	struct one *f;
	int nf, cancels, cancel_ok;
};

static struct ovf *g_ovf;

/* The first idle read's callback cancels every other read_file. */
static void ovf_first_cb(rl_req *req)
{
	struct ovf *o = g_ovf;

	tseen_cb(req);
	for (int i = 1; i < o->nf; i += 2) {
		int ret = rl_cancel(o->loop, &o->f[i].req);

		o->cancels++;
		if (ret == 0 || ret == -ENOENT)
			o->cancel_ok++;
	}
}

static void
stretched_budget_overflows_the_cq_losing_nothing(const struct tp *tp)
{
	enum { IDLE = 40, FILES = 60 };
	struct rl_options opt;
	struct ovf ov = { 0 };
	struct one idle[IDLE], f[FILES];
	char ibuf[IDLE][8], fbuf[FILES][64];
	int fds[IDLE][2];
	const char *path = tfile("ovf", 20);
	rl_loop *loop;

	rl_options_init(&opt);
	opt.entries = 4;
	opt.cq_entries = 16;
	loop = tloop_opts(tp, &opt);
	g_ovf = &ov;
	ov.loop = loop;
	ov.f = f;
	ov.nf = FILES;
	alarm(30);
	for (int i = 0; i < IDLE; i++) {
		cr_assert_eq(pipe2(fds[i], O_CLOEXEC), 0);
		cr_assert_eq(rl_fs_read(loop, one_req(&idle[i]), fds[i][0],
					ibuf[i], 8, -1,
					i == 0 ? ovf_first_cb : tseen_cb),
			     0);
	}
	/* Let the budget stretch over all of them: NOWAIT turns for a
	 * while, no sleep needed. */
	for (uint64_t end = tnow_ms() + 60; tnow_ms() < end;) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(2000);
	}
	/* Every pipe gets its data at once, and a burst of read_files is
	 * submitted before the loop looks. */
	for (int i = 0; i < IDLE; i++) {
		char msg[8];

		snprintf(msg, sizeof(msg), "d%03d", i);
		cr_assert_eq(write(fds[i][1], msg, 4), 4);
	}
	for (int i = 0; i < FILES; i++)
		cr_assert_eq(rl_fs_read_file(loop, one_req(&f[i]), path,
					     fbuf[i], 64, 0, tseen_cb),
			     0);
	trun(loop);
	alarm(0);
	for (int i = 0; i < IDLE; i++) {
		char msg[8];

		snprintf(msg, sizeof(msg), "d%03d", i);
		cr_assert_eq(idle[i].s.calls, 1, "read %d: %d callbacks", i,
			     idle[i].s.calls);
		cr_assert_eq(idle[i].s.result, 4, "read %d: %lld", i,
			     (long long)idle[i].s.result);
		cr_assert_eq(memcmp(ibuf[i], msg, 4), 0);
	}
	cr_assert_eq(ov.cancel_ok, ov.cancels);
	for (int i = 0; i < FILES; i++) {
		cr_assert_eq(f[i].s.calls, 1);
		if (i % 2 && f[i].s.result == -ECANCELED)
			continue;
		cr_assert_eq(f[i].s.result, 20, "read_file %d: %lld", i,
			     (long long)f[i].s.result);
		tcheck("ovf", fbuf[i], 20);
	}
	for (int i = 0; i < IDLE; i++) {
		close(fds[i][0]);
		close(fds[i][1]);
	}
	tclose(loop);
}

/*
 * rl_loop_close() with the CQ budget stretched over idle reads and
 * sockets, read_files queued behind them: every callback runs once, with
 * -ECANCELED (the read_files may have finished first), and nothing
 * lingers or leaks.
 */
static void close_with_the_cq_budget_stretched(const struct tp *tp)
{
	enum { IDLE = 32, FILES = 30 };
	struct rl_options opt;
	struct one idle[IDLE], f[FILES];
	char ibuf[IDLE][8], fbuf[FILES][64];
	int fds[IDLE][2];
	const char *path = tfile("closest", 20);
	rl_loop *loop;
	int base = tfd_count();

	rl_options_init(&opt);
	opt.entries = 4;
	opt.cq_entries = 16;
	loop = tloop_opts(tp, &opt);
	alarm(30);
	for (int i = 0; i < IDLE; i++) {
		if (i % 2) {
			cr_assert_eq(socketpair(AF_UNIX,
						SOCK_STREAM | SOCK_CLOEXEC, 0,
						fds[i]),
				     0);
			cr_assert_eq(rl_net_recv(loop, one_req(&idle[i]),
						 fds[i][0], ibuf[i], 8,
						 tseen_cb),
				     0);
		} else {
			cr_assert_eq(pipe2(fds[i], O_CLOEXEC), 0);
			cr_assert_eq(rl_fs_read(loop, one_req(&idle[i]),
						fds[i][0], ibuf[i], 8, -1,
						tseen_cb),
				     0);
		}
	}
	for (uint64_t end = tnow_ms() + 30; tnow_ms() < end;) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(2000);
	}
	for (int i = 0; i < FILES; i++)
		cr_assert_eq(rl_fs_read_file(loop, one_req(&f[i]), path,
					     fbuf[i], 64, 0, tseen_cb),
			     0);
	cr_assert_eq(rl_loop_close(loop), 0);
	alarm(0);
	for (int i = 0; i < IDLE; i++) {
		cr_assert_eq(idle[i].s.calls, 1);
		cr_assert_eq(idle[i].s.result, -ECANCELED);
	}
	for (int i = 0; i < FILES; i++) {
		cr_assert_eq(f[i].s.calls, 1);
		cr_assert(f[i].s.result == -ECANCELED || f[i].s.result == 20,
			  "read_file %d: %lld", i, (long long)f[i].s.result);
	}
	for (int i = 0; i < IDLE; i++) {
		close(fds[i][0]);
		close(fds[i][1]);
	}
	cr_assert_eq(tfd_count(), base, "fds leaked: %d, %d at start",
		     tfd_count(), base);
}

/* The smallest rings under load; idle reads filling the CQ budget; then
 * the stretched budget overflowing the CQ; then the loop closed with it
 * stretched. */
BACKEND_TEST(core_attack, idle_reads_and_the_cq_budget)
{
	smallest_rings_under_thousands_of_completions(tp);
	idle_reads_do_not_hold_the_cq_budget(tp);
	stretched_budget_overflows_the_cq_losing_nothing(tp);
	close_with_the_cq_budget_stretched(tp);
}

/*
 * Deadlines on read_files waiting for the one slot, held by a FIFO's
 * read_file that no writer will end (it has a deadline too): a deadline
 * that passes while its request waits in the loop's queue ends it with
 * -ETIMEDOUT, one that does not lets it complete (on plain fds once the
 * slot stayed taken, or in the slot), and the FIFO's read ends with
 * -ETIMEDOUT. One callback each, no timer callback ever.
 */
static void deadlines_of_requests_waiting_for_a_slot(const struct tp *tp)
{
	enum { N = 8 };
	struct rl_options opt;
	struct one fifo_read, f[N];
	rl_timer tf, t[N];
	char fbuf[N][64], buf[16];
	const char *fifo = spath("deadfifo");
	const char *path = tfile("deadline", 20);
	rl_loop *loop;

	rl_options_init(&opt);
	opt.direct_slots = 1;
	loop = tloop_opts(tp, &opt);
	alarm(30);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_assert_eq(rl_fs_read_file(loop, one_req(&fifo_read), fifo, buf,
				     sizeof(buf), 0, tseen_cb),
		     0);
	rl_timer_init(&tf);
	cr_assert_eq(rl_req_deadline(loop, &fifo_read.req, &tf, 60), 0);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(rl_fs_read_file(loop, one_req(&f[i]), path,
					     fbuf[i], 64, 0, tseen_cb),
			     0);
		rl_timer_init(&t[i]);
		cr_assert_eq(rl_req_deadline(loop, &f[i].req, &t[i],
					     i % 2 ? 1 : 5000),
			     0);
	}
	trun(loop);
	alarm(0);
	cr_assert_eq(fifo_read.s.calls, 1);
	cr_assert_eq(fifo_read.s.result, -ETIMEDOUT, "fifo: %lld",
		     (long long)fifo_read.s.result);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(f[i].s.calls, 1);
		if (i % 2 == 0 || f[i].s.result != -ETIMEDOUT) {
			cr_assert_eq(f[i].s.result, 20, "read_file %d: %lld", i,
				     (long long)f[i].s.result);
			tcheck("deadline", fbuf[i], 20);
		}
		cr_assert_eq(rl_timer_stop(loop, &t[i]), -ENOENT);
	}
	cr_assert_eq(rl_timer_stop(loop, &tf), -ENOENT);
	tclose(loop);
}

/*
 * "On io_uring the default ring belongs to that thread for good ...:
 * rl_run() on another thread fails with -EEXIST". It must fail before it
 * runs anything: a timer that became due meanwhile must not have its
 * callback run on the wrong thread first (the loop is not thread-safe),
 * in any mode; the owner runs it later. Where any thread may run the
 * loop (epoll, the shared ring), the other thread simply runs it.
 */
struct owner {
	rl_loop *loop;
	rl_timer timer;
	int calls;
	pthread_t ran_on;
	int run_ret, finish_ret;
	sem_t ran, go_on;
};

static void owner_timer_cb(rl_timer *t, int status)
{
	struct owner *o = t->data;

	cr_assert_eq(status, 0);
	o->calls++;
	o->ran_on = pthread_self();
}

/* Enters the ring (this thread owns it from then on), lets the test try
 * its runs, then runs the loop to the end and closes it. */
static void *owner_main(void *arg)
{
	struct owner *o = arg;

	start_from_real_now(o->loop, &o->timer, 30, 0, owner_timer_cb);
	o->run_ret = rl_run(o->loop, RL_RUN_NOWAIT);
	sem_post(&o->ran);
	sem_wait(&o->go_on);
	o->finish_ret = rl_run(o->loop, RL_RUN_DEFAULT);
	if (o->finish_ret >= 0)
		o->finish_ret = rl_loop_close(o->loop);
	return NULL;
}

BACKEND_TEST(core_attack, run_on_a_thread_not_the_rings_runs_nothing)
{
	struct owner o = { 0 };
	pthread_t th;
	bool single;
	int base = tfd_count();

	tskip_uring_threads_under_valgrind(tp);
	alarm(20);
	o.loop = tloop(tp);
	single = tp->backend == RL_BACKEND_URING &&
		 (rl_loop_flags(o.loop) & RL_SINGLE_ISSUER);
	rl_timer_init(&o.timer);
	o.timer.data = &o;
	sem_init(&o.ran, 0, 0);
	sem_init(&o.go_on, 0, 0);
	cr_assert_eq(pthread_create(&th, NULL, owner_main, &o), 0);
	sem_wait(&o.ran);
	cr_assert_eq(o.run_ret, 0);
	sleep_ms(40); /* the timer is due now */
	for (int mode = 0; mode < 3 && single; mode++) {
		int ret = rl_run(o.loop, (enum rl_run_mode)mode);

		cr_assert_eq(ret, -EEXIST, "mode %d: %d", mode, ret);
		cr_assert_eq(o.calls, 0,
			     "a callback ran on the wrong thread (mode %d)",
			     mode);
	}
	if (!single) {
		/* Any thread may run it: this one does. */
		cr_assert_eq(rl_run(o.loop, RL_RUN_NOWAIT), 1);
		cr_assert_eq(o.calls, 1);
		cr_assert(pthread_equal(o.ran_on, pthread_self()));
	}
	sem_post(&o.go_on);
	pthread_join(th, NULL);
	alarm(0);
	cr_assert_eq(o.finish_ret, 0);
	cr_assert_eq(o.calls, 1);
	if (single)
		cr_assert(pthread_equal(o.ran_on, th));
	cr_assert_eq(tfd_count(), base, "fds leaked");
	sem_destroy(&o.ran);
	sem_destroy(&o.go_on);
}

/*
 * rl_run() once rl_loop_close() has begun. A close hook may run the loop
 * (ringloop.h: "fn may submit, cancel and call rl_run()"): a read_file it
 * submits completes there, with its data. A callback run by the close
 * itself (a request cancelled by it) is inside the loop: rl_run() and
 * rl_loop_close() are -EBUSY there, and a new submission fails fast with
 * -ECANCELED, its callback never run.
 */
struct closing {
	rl_close_hook hook;
	struct one in_hook, late;
	struct tseen cancelled_seen;
	rl_req cancelled;
	char buf[64], lbuf[64];
	int hook_calls, hook_run, cb_runs[3], cb_close, cb_submit;
	const char *path;
};

static struct closing *g_closing;

static int closing_hook(rl_close_hook *hook, rl_loop *loop)
{
	struct closing *c = g_closing;

	(void)hook;
	c->hook_calls++;
	cr_assert_eq(rl_fs_read_file(loop, one_req(&c->in_hook), c->path,
				     c->buf, sizeof(c->buf), 0, tseen_cb),
		     0);
	while (!c->in_hook.s.calls)
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
	c->hook_run = 1;
	return 0;
}

static void closing_cancelled_cb(rl_req *req)
{
	struct closing *c = g_closing;

	tseen_cb(req);
	c->cb_runs[0] = rl_run(req->loop, RL_RUN_NOWAIT);
	c->cb_runs[1] = rl_run(req->loop, RL_RUN_ONCE);
	c->cb_runs[2] = rl_run(req->loop, RL_RUN_DEFAULT);
	c->cb_close = rl_loop_close(req->loop);
	c->cb_submit = rl_fs_read_file(req->loop, one_req(&c->late), c->path,
				       c->lbuf, sizeof(c->lbuf), 0, tseen_cb);
}

static void run_while_the_loop_closes(const struct tp *tp)
{
	struct closing c = { 0 };
	char rbuf[8];
	int p[2];
	rl_loop *loop;

	/* Before the loop: tclose() counts the fds against its start. */
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	loop = tloop(tp);
	g_closing = &c;
	alarm(20);
	c.path = tfile("closing", 33);
	c.cancelled.data = &c.cancelled_seen;
	cr_assert_eq(rl_fs_read(loop, &c.cancelled, p[0], rbuf, sizeof(rbuf),
				-1, closing_cancelled_cb),
		     0);
	cr_assert_eq(rl_run(loop, RL_RUN_NOWAIT), 0);
	rl_loop_on_close(loop, &c.hook, closing_hook);
	tclose(loop);
	alarm(0);
	cr_assert_eq(c.hook_calls, 1);
	cr_assert_eq(c.hook_run, 1);
	cr_assert_eq(c.in_hook.s.calls, 1);
	cr_assert_eq(c.in_hook.s.result, 33);
	tcheck("closing", c.buf, 33);
	cr_assert_eq(c.cancelled_seen.calls, 1);
	/* The hook ran the loop, but the pipe read waits on: the close
	 * cancels it. */
	cr_assert_eq(c.cancelled_seen.result, -ECANCELED);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(c.cb_runs[i], -EBUSY, "run %d: %d", i,
			     c.cb_runs[i]);
	cr_assert_eq(c.cb_close, -EBUSY);
	cr_assert_eq(c.cb_submit, -ECANCELED);
	cr_assert_eq(c.late.s.calls, 0);
	close(p[0]);
	close(p[1]);
}

/* rl_run() nested in a callback of its own loop and of another one, and
 * while the loop closes. */
BACKEND_TEST(core_attack, run_nested_and_while_closing)
{
	run_inside_a_callback_is_ebusy_another_loop_runs(tp);
	run_while_the_loop_closes(tp);
}

/*
 * More files linger than the SQ has entries (6 FIFOs read by read_file,
 * an SQ of 4): when rl_run() returns, every one of them must be closed,
 * not only those whose close found room in the SQ.
 */
static void more_lingering_files_than_sq_entries(const struct tp *tp)
{
	enum { N = 6 };
	struct rl_options opt;
	struct one o[N];
	char bufs[N][16];
	const char *fifos[N];
	int wfd[N];
	rl_loop *loop;

	rl_options_init(&opt);
	opt.entries = 4;
	opt.direct_slots = 8;
	loop = tloop_opts(tp, &opt);
	signal(SIGPIPE, SIG_IGN);
	alarm(20);
	for (int i = 0; i < N; i++) {
		char name[32];

		snprintf(name, sizeof(name), "manyfifo%d", i);
		fifos[i] = spath(name);
		cr_assert_eq(mkfifo(fifos[i], 0600), 0);
		cr_assert_eq(rl_fs_read_file(loop, one_req(&o[i]), fifos[i],
					     bufs[i], sizeof(bufs[i]), 0,
					     tseen_cb),
			     0);
		wfd[i] = -1;
	}
	for (int opened = 0; opened < N;) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		for (int i = 0; i < N; i++) {
			if (wfd[i] >= 0)
				continue;
			wfd[i] = open(fifos[i],
				      O_WRONLY | O_NONBLOCK | O_CLOEXEC);
			if (wfd[i] >= 0)
				opened++;
		}
		usleep(1000);
	}
	/* Every writer writes and goes at once: the reads end together. */
	for (int i = 0; i < N; i++) {
		cr_assert_eq(write(wfd[i], "xy", 2), 2);
		close(wfd[i]);
	}
	for (bool all = false; !all;) {
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
		all = true;
		for (int i = 0; i < N; i++)
			all = all && o[i].s.calls;
	}
	for (int i = 0; i < N; i++) {
		cr_assert_eq(o[i].s.result, 2);
		cr_assert_eq(writer_errno(fifos[i]), ENXIO,
			     "FIFO %d still has its reader", i);
	}
	trun(loop);
	alarm(0);
	tclose(loop);
}

/*
 * A timer cancelled from a request's callback in the batch where it falls
 * due: timers run before the batch's request callbacks, so the one-shot
 * has fired (status 0) and the cancel says -ENOENT, or it was not due yet
 * and gets one -ECANCELED callback. Either way exactly one callback; a
 * repeating one fires and then ends with its -ECANCELED.
 */
struct tcrace {
	rl_loop *loop;
	rl_timer t;
	int fired, cancelled, cancel_ret;
};

static void tcrace_timer_cb(rl_timer *t, int status)
{
	struct tcrace *r = t->data;

	if (status == 0)
		r->fired++;
	else if (status == -ECANCELED)
		r->cancelled++;
}

static void tcrace_req_cb(rl_req *req)
{
	struct tcrace *r = req->data;

	r->cancel_ret = rl_timer_cancel(r->loop, &r->t);
}

static void timer_cancelled_from_a_completion_in_its_batch(const struct tp *tp)
{
	struct tcrace r = { 0 };
	const char *path = tfile("tcrace", 10);
	int rounds = scaled(200, 20), fired_total = 0;
	char buf[16];
	rl_req req;
	rl_loop *loop = tloop(tp);

	r.loop = loop;
	for (int i = 0; i < rounds; i++) {
		bool repeat = i % 4 == 3;

		r.fired = r.cancelled = 0;
		r.cancel_ret = 1;
		rl_timer_init(&r.t);
		r.t.data = &r;
		rl_req_init(&req);
		req.data = &r;
		cr_assert_eq(rl_timer_start(loop, &r.t, (unsigned)(i % 3),
					    repeat ? 1 : 0, tcrace_timer_cb),
			     0);
		cr_assert_eq(rl_fs_read_file(loop, &req, path, buf, sizeof(buf),
					     0, tcrace_req_cb),
			     0);
		if (i % 2)
			tspin_us((unsigned)(i % 7) * 150);
		trun(loop);
		if (repeat) {
			cr_assert_eq(r.cancel_ret, 0);
			cr_assert_eq(r.cancelled, 1);
		} else if (r.cancel_ret == 0) {
			cr_assert_eq(r.fired, 0);
			cr_assert_eq(r.cancelled, 1);
		} else {
			cr_assert_eq(r.cancel_ret, -ENOENT);
			cr_assert_eq(r.fired, 1);
			cr_assert_eq(r.cancelled, 0);
		}
		fired_total += r.fired;
		cr_assert_eq(rl_timer_stop(loop, &r.t), -ENOENT);
	}
	(void)fired_total;
	tclose(loop);
}

/* Cancels from callbacks against completions: the file requests, then a
 * timer. */
BACKEND_TEST(core_attack, cancels_race_completions)
{
	cancel_from_a_callback_races_the_completion(tp);
	timer_cancelled_from_a_completion_in_its_batch(tp);
}

/*
 * A FIFO's read_file ends while idle reads hold the whole CQ budget
 * (submitted from its callback): its file must still be closed when
 * rl_run() returns, budget or not.
 */
struct full_budget {
	rl_loop *loop;
	struct one idle[3];
	char ibuf[3][8];
	int (*fds)[2];
	int calls;
};

static void full_budget_cb(rl_req *req)
{
	struct full_budget *b = req->data;

	b->calls++;
	cr_assert_eq(req->result, 2);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rl_fs_read(b->loop, one_req(&b->idle[i]),
					b->fds[5 + i][0], b->ibuf[i], 8, -1,
					tseen_cb),
			     0);
}

static void fifo_closed_with_the_cq_budget_full(const struct tp *tp)
{
	struct rl_options opt;
	struct full_budget b = { 0 };
	struct one idle[5];
	char ibuf[5][8], buf[8];
	int fds[8][2], wfd = -1;
	const char *fifo = spath("budgetfifo");
	rl_req req = { .data = &b };
	rl_loop *loop;

	for (int i = 0; i < 8; i++)
		cr_assert_eq(pipe2(fds[i], O_CLOEXEC), 0);
	rl_options_init(&opt);
	opt.entries = 4;
	opt.cq_entries = 16; /* a budget of 8 CQEs */
	loop = tloop_opts(tp, &opt);
	b.loop = loop;
	b.fds = fds;
	signal(SIGPIPE, SIG_IGN);
	alarm(20);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(rl_fs_read(loop, one_req(&idle[i]), fds[i][0],
					ibuf[i], 8, -1, tseen_cb),
			     0);
	cr_assert_eq(rl_fs_read_file(loop, &req, fifo, buf, sizeof(buf), 0,
				     full_budget_cb),
		     0);
	while (wfd < 0) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		wfd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (wfd < 0)
			usleep(1000);
	}
	cr_assert_eq(write(wfd, "ok", 2), 2);
	close(wfd);
	while (!b.calls)
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
	cr_assert_eq(writer_errno(fifo), ENXIO,
		     "the FIFO kept its reader: the CQ budget was full");
	for (int i = 0; i < 5; i++)
		cr_assert_eq(rl_cancel(loop, &idle[i].req), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rl_cancel(loop, &b.idle[i].req), 0);
	trun(loop);
	alarm(0);
	tclose(loop);
	for (int i = 0; i < 8; i++) {
		close(fds[i][0]);
		close(fds[i][1]);
	}
}

/* Timers: equal deadlines cancelling and restarting each other, a
 * stalled loop's due timers, a repeating timer restarting itself, and
 * -ECANCELED callbacks stopping and cancelling others. */
CORE_TEST(core_attack, timers_equal_stalled_restarted_cancelled)
{
	equal_deadlines_cancel_and_restart_each_other(tp);
	stalled_loop_runs_due_timers_once_in_order(tp);
	repeating_timer_restarts_itself_from_its_callback(tp);
	cancelled_callbacks_stop_and_cancel_others(tp);
}

/* Slots: a burst of every kind of file on 4 of them, and deadlines of
 * read_files waiting for the only one. */
BACKEND_TEST(core_attack, slots_mixed_burst_and_deadlines)
{
	deadlines_of_requests_waiting_for_a_slot(tp);
	mixed_burst_with_four_slots_and_a_tiny_sq(tp);
}
