/* SPDX-License-Identifier: MIT */
/* test_loop.c - lifecycle, run modes, stop, close with work in flight,
 * cancel, posts from other threads, tasks and counters. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

BACKEND_TEST(loop, open_run_empty_close)
{
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_run(loop, RL_RUN_DEFAULT), 0);
	cr_assert_eq(rl_run(loop, RL_RUN_ONCE), 0);
	cr_assert_eq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(rl_run(loop, (enum rl_run_mode)7), -EINVAL);
	tclose(loop);
}

Test(loop, bad_options)
{
	struct rl_options opt;
	rl_loop *loop = (rl_loop *)1;

	cr_assert_eq(rl_loop_open(NULL, NULL), -EINVAL);
	rl_options_init(&opt);
	opt.backend = 42;
	cr_assert_eq(rl_loop_open(&loop, &opt), -EINVAL);
	cr_assert_null(loop);
	rl_options_init(&opt);
	opt.backend = RL_BACKEND_URING;
	opt.flags = RL_DEFER_TASKRUN; /* needs SINGLE_ISSUER */
	cr_assert_eq(rl_loop_open(&loop, &opt), -EINVAL);
}

/* Close with requests in flight: each callback runs exactly once, with
 * -ECANCELED or its real result; no fd is left open. */
BACKEND_TEST(loop, close_with_requests_in_flight)
{
	enum { N = 300 };
	const char *path = tfile("inflight", 100);
	static rl_req reqs[N];
	static char bufs[N][128];
	struct tseen s = { 0 };
	rl_loop *loop = tloop(tp);
	int cancelled = 0, done = 0;

	for (int i = 0; i < N; i++) {
		reqs[i] = (rl_req){ .data = &s };
		cr_assert_eq(rl_fs_read_file(loop, &reqs[i], path, bufs[i], 128,
					     0, tseen_cb),
			     0);
	}
	cr_assert_eq(s.calls, 0);
	tclose(loop);
	cr_assert_eq(s.calls, N);
	for (int i = 0; i < N; i++) {
		if (reqs[i].result == -ECANCELED)
			cancelled++;
		else if (reqs[i].result == 100)
			done++;
	}
	cr_assert_eq(cancelled + done, N, "only -ECANCELED or 100 allowed");
}

static void resubmit_during_close_cb(rl_req *req)
{
	struct tseen *s = req->data;
	char buf[4];

	s->calls++;
	s->result = rl_fs_read_file(req->loop, req, "/nonexistent", buf, 4, 0,
				    resubmit_during_close_cb);
}

BACKEND_TEST(loop, submit_during_close_fails_fast)
{
	const char *path = tfile("closing", 10);
	struct tseen s = { 0 };
	char buf[64];
	rl_req req = { .data = &s };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_fs_read_file(loop, &req, path, buf, 64, 0,
				     resubmit_during_close_cb),
		     0);
	tclose(loop);
	cr_assert_eq(s.calls, 1);
	cr_assert_eq(s.result, -ECANCELED);
}

BACKEND_TEST(loop, cancel_request)
{
	const char *path = tfile("cancel", 10);
	struct tseen s1 = { 0 }, s2 = { 0 };
	char b1[64], b2[64];
	rl_req r1 = { .data = &s1 }, r2 = { .data = &s2 };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_fs_read_file(loop, &r1, path, b1, 64, 0, tseen_cb), 0);
	cr_assert_eq(rl_fs_read_file(loop, &r2, path, b2, 64, 0, tseen_cb), 0);
	cr_assert_eq(rl_cancel(loop, &r1), 0);
	cr_assert_eq(rl_cancel(loop, &r1), -EALREADY);
	trun(loop);
	cr_assert_eq(s1.calls, 1);
	cr_assert_eq(s1.result, -ECANCELED);
	cr_assert_eq(s2.calls, 1);
	cr_assert_eq(s2.result, 10);
	cr_assert_eq(rl_cancel(loop, &r2), -ENOENT, "already completed");
	tclose(loop);
}

/* A read on a pipe with no writer would wait forever: cancel must end it. */
BACKEND_TEST(loop, cancel_blocked_pipe_read)
{
	int p[2];
	struct tseen s = { 0 };
	char buf[16];
	rl_req req = { .data = &s };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	cr_assert_eq(
		rl_fs_read(loop, &req, p[0], buf, sizeof(buf), -1, tseen_cb),
		0);
	cr_assert_eq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(s.calls, 0);
	cr_assert_eq(rl_cancel(loop, &req), 0);
	trun(loop);
	cr_assert_eq(s.calls, 1);
	cr_assert_eq(s.result, -ECANCELED);
	close(p[0]);
	close(p[1]);
	tclose(loop);
}

struct poster {
	rl_loop *loop;
	struct rl_post posts[100];
	atomic_int *ran;
};

static void post_cb(struct rl_post *post)
{
	struct poster *p = post->data;

	atomic_fetch_add(p->ran, 1);
	if (atomic_load(p->ran) == 100)
		rl_unref(p->loop);
}

static void *post_thread(void *arg)
{
	struct poster *p = arg;

	for (int i = 0; i < 100; i++) {
		p->posts[i].data = p;
		cr_assert_eq(rl_post(p->loop, &p->posts[i], post_cb), 0);
		if (i % 10 == 0)
			usleep(100);
	}
	return NULL;
}

BACKEND_TEST(loop, post_from_another_thread)
{
	atomic_int ran = 0;
	struct poster p = { .ran = &ran };
	pthread_t th;
	rl_loop *loop;

	tskip_uring_threads_under_valgrind(tp); /* the posting thread */
	loop = tloop(tp);
	p.loop = loop;
	rl_ref(loop);
	cr_assert_eq(pthread_create(&th, NULL, post_thread, &p), 0);
	trun(loop);
	pthread_join(th, NULL);
	cr_assert_eq(atomic_load(&ran), 100);
	tclose(loop);
}

static void count_post(struct rl_post *post)
{
	(*(int *)post->data)++;
}

/* rl_run() returns the callbacks it ran, and a post's is one of them. */
BACKEND_TEST(loop, run_counts_post_callbacks)
{
	struct rl_post posts[3];
	int ran = 0;
	rl_loop *loop = tloop(tp);

	for (int i = 0; i < 3; i++) {
		posts[i].data = &ran;
		cr_assert_eq(rl_post(loop, &posts[i], count_post), 0);
	}
	cr_assert_eq(rl_run(loop, RL_RUN_NOWAIT), 3);
	cr_assert_eq(ran, 3);
	cr_assert_eq(rl_post(loop, &posts[0], count_post), 0);
	cr_assert_eq(rl_run(loop, RL_RUN_DEFAULT), 1);
	cr_assert_eq(ran, 4);
	tclose(loop);
}

struct order {
	int log[16];
	int n;
	rl_loop *loop;
	rl_task tasks[4];
};

static struct order *g_order;

static void task_log(rl_task *t)
{
	int idx = (int)(t - g_order->tasks);

	g_order->log[g_order->n++] = 10 + idx;
	if (idx == 0) /* a task queued by a task runs in the same drain */
		rl_task_queue(g_order->loop, &g_order->tasks[3], task_log);
}

static void task_req_cb(rl_req *req)
{
	g_order->log[g_order->n++] = (int)(intptr_t)req->data;
	if ((intptr_t)req->data == 1) {
		rl_task_queue(g_order->loop, &g_order->tasks[0], task_log);
		rl_task_queue(g_order->loop, &g_order->tasks[1], task_log);
	}
}

BACKEND_TEST(loop, tasks_run_after_the_callback_batch)
{
	struct order o = { 0 };
	rl_req r = { .data = (void *)(intptr_t)1 };
	char buf[64];
	const char *path = tfile("tasks", 5);
	rl_loop *loop = tloop(tp);

	g_order = &o;
	o.loop = loop;
	cr_assert_eq(rl_fs_read_file(loop, &r, path, buf, 64, 0, task_req_cb),
		     0);
	trun(loop);
	cr_assert_eq(o.n, 4);
	cr_assert_eq(o.log[0], 1);
	cr_assert_eq(o.log[1], 10);
	cr_assert_eq(o.log[2], 11);
	cr_assert_eq(o.log[3], 13);
	tclose(loop);
}

static void stop_cb(rl_req *req)
{
	struct tseen *s = req->data;

	s->calls++;
	rl_stop(req->loop);
}

BACKEND_TEST(loop, stop_returns_and_run_resumes)
{
	const char *path = tfile("stop", 3);
	struct tseen s1 = { 0 }, s2 = { 0 };
	char b1[8], b2[8];
	rl_req r1 = { .data = &s1 }, r2 = { .data = &s2 };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_fs_read_file(loop, &r1, path, b1, 8, 0, stop_cb), 0);
	trun(loop);
	cr_assert_eq(s1.calls, 1);
	/* A request submitted after stop runs on the next rl_run(). */
	cr_assert_eq(rl_fs_read_file(loop, &r2, path, b2, 8, 0, tseen_cb), 0);
	trun(loop);
	cr_assert_eq(s2.calls, 1);
	cr_assert_eq(s2.result, 3);
	tclose(loop);
}

BACKEND_TEST(loop, counters)
{
	const char *path = tfile("stats", 12);
	struct tseen s = { 0 };
	char buf[64];
	rl_req req = { .data = &s };
	struct rl_stats before, after;
	rl_loop *loop = tloop(tp);

	rl_loop_stats(loop, &before);
	cr_assert_eq(rl_fs_read_file(loop, &req, path, buf, 64, 0, tseen_cb),
		     0);
	trun(loop);
	rl_loop_stats(loop, &after);
	cr_assert_eq(after.submissions - before.submissions, 1);
	cr_assert_eq(after.completions - before.completions, 1);
	if (tp->backend == RL_BACKEND_URING) {
		/* A SINGLE_ISSUER ring (the default) is enabled by its first
		 * enter, with one register call before it. */
		unsigned enable = !!(rl_loop_flags(loop) & RL_SINGLE_ISSUER);

		cr_assert_geq(after.enters - before.enters, 1);
		cr_assert_eq(after.syscalls - before.syscalls,
			     after.enters - before.enters + enable,
			     "io_uring: every syscall of the run is an enter "
			     "(and the enable of a single issuer's ring)");
	}
	/* One io_uring_enter for the chain; the close of its direct
	 * descriptor rides with the next submit, or, when nothing comes
	 * before the loop would go idle, takes one of its own. */
	if (tp->backend == RL_BACKEND_URING && tp->flags == 0)
		cr_assert_eq(
			after.enters - before.enters, 2,
			"a lone read_file: its chain, then its close; got %llu",
			(unsigned long long)(after.enters - before.enters));
	/* (Not without openat2: under Valgrind 3.19 the pool does it.) */
	if (tp->backend == RL_BACKEND_EPOLL && !(tp->flags & RL_NO_INLINE) &&
	    thave_resolve_cached())
		cr_assert_geq(after.syscalls - before.syscalls, 3,
			      "the inline path opens, reads and closes");
	/* Pool-only: the loop may find the completion while spinning, with
	 * no syscall of its own; the job count is what it must show. */
	if (tp->flags & RL_NO_INLINE)
		cr_assert_eq(after.pool_jobs - before.pool_jobs, 1);
	tclose(loop);
}

/* In a chain of read_files, each one started from the previous one's
 * callback, every read_file costs one io_uring_enter: the close of the
 * previous file goes with the next chain. */
struct blocking_chain {
	rl_loop *loop;
	const char *path;
	char buf[64];
	int left, bad;
	rl_req req;
};

static void chain_next(rl_req *req)
{
	struct blocking_chain *c = req->data;

	if (req->result != 12)
		c->bad++;
	if (--c->left > 0)
		cr_assert_eq(rl_fs_read_file(c->loop, req, c->path, c->buf,
					     sizeof(c->buf), 0, chain_next),
			     0);
}

BACKEND_TEST(loop, one_enter_per_read_file_in_a_chain)
{
	enum { N = 100 };
	struct blocking_chain c = { .path = tfile("chain", 12), .left = N };
	struct rl_stats before, after;
	rl_loop *loop;

	if (tp->backend != RL_BACKEND_URING || tp->flags)
		cr_skip_test("the linked chain of io_uring only");
	loop = tloop(tp);
	c.loop = loop;
	c.req.data = &c;
	rl_loop_stats(loop, &before);
	cr_assert_eq(rl_fs_read_file(loop, &c.req, c.path, c.buf, sizeof(c.buf),
				     0, chain_next),
		     0);
	trun(loop);
	rl_loop_stats(loop, &after);
	cr_assert_eq(c.left, 0);
	cr_assert_eq(c.bad, 0);
	cr_assert_eq(after.enters - before.enters, N + 1,
		     "%d read_files in a chain: %llu enters", N,
		     (unsigned long long)(after.enters - before.enters));
	tclose(loop);
}

/* A post made while the loop closes (here from a callback the close runs)
 * still runs before rl_loop_close() returns. */
static int posted_during_close;

static void close_post_cb(struct rl_post *post)
{
	(void)post;
	posted_during_close++;
}

static void post_from_cancelled_cb(rl_req *req)
{
	static struct rl_post post;

	tseen_cb(req);
	cr_assert_eq(rl_post(req->loop, &post, close_post_cb), 0);
}

BACKEND_TEST(loop, post_during_close_runs)
{
	const char *path = tfile("postclose", 10);
	struct tseen s = { 0 };
	char buf[16];
	rl_req req = { .data = &s };
	rl_loop *loop = tloop(tp);

	posted_during_close = 0;
	cr_assert_eq(rl_fs_read_file(loop, &req, path, buf, 16, 0,
				     post_from_cancelled_cb),
		     0);
	tclose(loop);
	cr_assert_eq(s.calls, 1);
	cr_assert_eq(posted_during_close, 1);
}

/* A second cancel answers -EALREADY even when the first one finished the
 * request at once (it was still waiting in user space). */
BACKEND_TEST(loop, second_cancel_of_queued_request)
{
	enum { N = 64 };
	const char *path = tfile("queued", 10);
	struct rl_options opt;
	static rl_req reqs[N];
	static char bufs[N][16];
	struct tseen s = { 0 };
	rl_loop *loop;

	rl_options_init(&opt);
	opt.entries = 4;
	opt.cq_entries = 16;
	opt.pool_threads = 1;
	loop = tloop_opts(tp, &opt);
	for (int i = 0; i < N; i++) {
		reqs[i] = (rl_req){ .data = &s };
		cr_assert_eq(rl_fs_read_file(loop, &reqs[i], path, bufs[i], 16,
					     0, tseen_cb),
			     0);
	}
	cr_assert_eq(rl_cancel(loop, &reqs[N - 1]), 0);
	cr_assert_eq(rl_cancel(loop, &reqs[N - 1]), -EALREADY);
	trun(loop);
	cr_assert_eq(s.calls, N);
	cr_assert_eq(reqs[N - 1].result, -ECANCELED);
	tclose(loop);
}

/* Close hooks run newest first, before anything is cancelled, with the
 * loop still working; one that refuses makes rl_loop_close() return
 * -EBUSY with nothing closed, and runs again at the next close. */
static int hook_order[8], hook_n, a_refusals;

static void hook_timer_cb(rl_timer *t, int status)
{
	(void)t;
	cr_assert_eq(status, 0, "a hook's timer must fire normally");
	hook_order[hook_n++] = 9;
}

static int hook_a(rl_close_hook *h, rl_loop *loop)
{
	(void)h;
	(void)loop;
	hook_order[hook_n++] = 1;
	return a_refusals-- > 0 ? -EBUSY : 0;
}

static int hook_b(rl_close_hook *h, rl_loop *loop)
{
	rl_timer t = { 0 };

	(void)h;
	hook_order[hook_n++] = 2;
	/* The loop still runs timers from a hook. */
	cr_assert_eq(rl_timer_start(loop, &t, 0, 0, hook_timer_cb), 0);
	cr_assert_geq(rl_run(loop, RL_RUN_DEFAULT), 0);
	return 0;
}

static int hook_c(rl_close_hook *h, rl_loop *loop)
{
	(void)h;
	(void)loop;
	hook_order[hook_n++] = 3;
	return 0;
}

CORE_TEST(loop, close_hooks)
{
	rl_loop *loop = tloop(tp);
	rl_close_hook a, b, c;

	hook_n = 0;
	a_refusals = 1;
	rl_loop_on_close(loop, &a, hook_a);
	rl_loop_on_close(loop, &b, hook_b);
	rl_loop_on_close(loop, &c, hook_c);
	rl_loop_off_close(loop, &c);
	rl_loop_off_close(loop, &c); /* not on the loop: a no-op */
	cr_assert_eq(rl_loop_close(loop), -EBUSY);
	cr_assert_eq(hook_n, 3);
	cr_assert_eq(hook_order[0], 2);
	cr_assert_eq(hook_order[1], 9);
	cr_assert_eq(hook_order[2], 1);
	/* Still open and working; a refused hook stays on the loop. */
	cr_assert_eq(rl_run(loop, RL_RUN_NOWAIT), 0);
	tclose(loop);
	cr_assert_eq(hook_n, 4);
	cr_assert_eq(hook_order[3], 1);
}
