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
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

BACKEND_TEST(core_attack, run_inside_a_callback_is_ebusy_another_loop_runs)
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

BACKEND_TEST(core_attack, stop_before_twice_from_a_timer_and_from_a_post)
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
	for (int i = 0; i < 3; i++)
		start_from_real_now(loop, &t[i], 2, 0, stop_timer_cb);
	start_from_real_now(loop, &t[3], 60, 0, stop_timer_cb);
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
	/* 100 ms of a sleeping loop: a handful of waits, not thousands. */
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

BACKEND_TEST(core_attack, timer_a_year_away)
{
	timer_years_away(tp, 365ull * 24 * 3600 * 1000);
}

BACKEND_TEST(core_attack, timer_at_the_longest_timeout)
{
	timer_years_away(tp, RL_TIMEOUT_MAX_MS);
}

/* --------------------------------------------------------------- timers */

/*
 * A timer whose -ECANCELED callback starts and cancels it again (a retry
 * loop written with cancel as its "now"), chained for ever: the loop must
 * still run I/O between its turns, as it does for a 0 ms timer restarted
 * from its own callback (timers started during a pass wait for the next
 * one). Here the read of a pipe that has data must complete while the
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

BACKEND_TEST(core_attack, zero_ms_timer_restarted_for_ever_lets_a_read_in)
{
	timer_chain_lets_io_through(tp, true);
}

BACKEND_TEST(core_attack, cancel_callback_cancelling_again_lets_a_read_in)
{
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

BACKEND_TEST(core_attack, equal_deadlines_cancel_and_restart_each_other)
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

BACKEND_TEST(core_attack, stalled_loop_runs_due_timers_once_in_order)
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

BACKEND_TEST(core_attack, post_flood_across_run_modes, .timeout = 240)
{
	post_flood(tp, -1);
}

BACKEND_TEST(core_attack, post_flood_across_run_modes_idle_poll, .timeout = 240)
{
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

BACKEND_TEST(core_attack, fifo_reader_goes_after_run_once)
{
	fifo_reader_goes(tp, RL_RUN_ONCE, false);
}

BACKEND_TEST(core_attack, fifo_reader_goes_after_run_nowait)
{
	fifo_reader_goes(tp, RL_RUN_NOWAIT, false);
}

BACKEND_TEST(core_attack, fifo_reader_goes_after_stop)
{
	fifo_reader_goes(tp, RL_RUN_DEFAULT, true);
}
