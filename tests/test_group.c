/* SPDX-License-Identifier: MIT */
/*
 * test_group.c - groups of loops: opening and closing them, a read_file
 * burst spread over the group in every style (every byte back to the
 * right callback, on the issuing loop's thread), cancels and deadlines of
 * spread requests, a group closed with work everywhere in flight, a
 * promise settled from another loop, coroutines awaiting across loops,
 * and thread-per-core shares.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "helpers.h"
#include "ringloop/callback.h"
#include "ringloop/coro.h"
#include "ringloop/promise.h"

#define FILES 8
#define BURST 2000

/* The CPUs this process may run on. */
static unsigned tcpu_count(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return 1;
	return (unsigned)CPU_COUNT(&set);
}

/* Files of different sizes, some larger than a first buffer (4096). */
static const char *names[FILES] = { "a", "b", "c", "d", "e", "f", "g", "h" };
static const size_t sizes[FILES] = { 12, 1, 0, 4095, 4096, 4097, 70000, 333 };

static void make_files(void)
{
	for (int i = 0; i < FILES; i++)
		tfile(names[i], sizes[i]);
}

static char paths[FILES][512];

static void make_paths(void)
{
	make_files();
	for (int i = 0; i < FILES; i++)
		snprintf(paths[i], sizeof(paths[i]), "%s", tpath(names[i]));
}

/* What each loop's thread did (its loop's stats, read on its thread). */
struct stats_of {
	struct rl_stats st[4];
};

static void stats_share(rl_loop *loop, unsigned i, void *arg)
{
	rl_loop_stats(loop, &((struct stats_of *)arg)->st[i]);
}

Test(group, open_close_basics)
{
	struct rl_group_options opt;
	rl_group *g;
	int before = tfd_count();

	rl_group_options_init(&opt);
	opt.loops = 3;
	/* Under Valgrind 3.19, io_uring loops cannot wait beside each other
	 * (see tgroup()). */
	if (getenv("RL_VALGRIND"))
		opt.loop.backend = RL_BACKEND_EPOLL;
	cr_assert_eq(rl_group_open(&g, &opt), 0);
	cr_assert_eq(rl_group_size(g), 3);
	for (unsigned i = 0; i < 3; i++)
		cr_assert_eq(rl_loop_group_index(rl_group_loop(g, i)), (int)i);
	cr_assert_null(rl_group_loop(g, 3));
	cr_assert_neq(rl_group_loop(g, 0), rl_group_loop(g, 1));
	cr_assert_eq(rl_loop_close(rl_group_loop(g, 1)), -EBUSY);
	cr_assert_eq(rl_group_close(g), 0);
	cr_assert_eq(tfd_count(), before);

	opt.loops = 1000;
	cr_assert_eq(rl_group_open(&g, &opt), -EINVAL);
	opt.loops = 2;
	opt.flags = 1u << 30;
	cr_assert_eq(rl_group_open(&g, &opt), -EINVAL);
	opt.flags = 0;
	opt.msg_wake = 7;
	cr_assert_eq(rl_group_open(&g, &opt), -EINVAL);
	/* A loop's open error comes back, nothing left running. */
	opt.msg_wake = 0;
	opt.loop.backend = RL_BACKEND_EPOLL;
	opt.loop.pool_signal = -2;
	cr_assert_eq(rl_group_open(&g, &opt), -EINVAL);
	cr_assert_eq(tfd_count(), before);

	rl_loop *loop;

	cr_assert_eq(rl_loop_open(&loop, NULL), 0);
	cr_assert_eq(rl_loop_spread(loop, 1), -EINVAL);
	cr_assert_eq(rl_loop_group_index(loop), -1);
	cr_assert_eq(rl_loop_close(loop), 0);
}

/* ------------------------------------------------ spread, loop requests */

struct sreq {
	rl_req req;
	int file;
	int calls;
	pthread_t thread;
};

static void sreq_cb(rl_req *req)
{
	struct sreq *s = (struct sreq *)req;

	s->calls++;
	s->thread = pthread_self();
}

static void check_sreq(struct sreq *s, bool may_cancel)
{
	cr_assert_eq(s->calls, 1);
	cr_assert(pthread_equal(s->thread, pthread_self()));
	if (may_cancel && s->req.result == -ECANCELED) {
		free(s->req.buf);
		return;
	}
	cr_assert_eq(s->req.result, (int64_t)sizes[s->file], "file %s: %lld",
		     names[s->file], (long long)s->req.result);
	tcheck(names[s->file], s->req.buf, sizes[s->file]);
	free(s->req.buf);
}

/* A burst of BURST read_files spread from loop 0 of a group of three, of
 * which every regular-th is told that its file is regular (0: none):
 * every byte comes home, and each loop read its share. */
static void spread_burst(const struct tp *tp, int regular)
{
	alarm(60); /* a lost message or completion hangs here */
	struct sreq *s = calloc(BURST, sizeof(*s));
	struct stats_of so = { 0 };
	int before;
	rl_group *g;
	rl_loop *loop;

	make_paths();
	before = tfd_count();
	g = tgroup(tp, 3, RL_GROUP_SPREAD, RL_MSG_WAKE_DEFAULT);
	loop = rl_group_loop(g, 0);
	for (int i = 0; i < BURST; i++) {
		unsigned flags = RL_READ_FILE_GROW;

		if (regular && i % regular == 0)
			flags |= RL_READ_FILE_REGULAR;
		s[i].file = i % FILES;
		cr_assert_eq(rl_fs_read_file(loop, &s[i].req, paths[s[i].file],
					     NULL, 0, flags, sreq_cb),
			     0);
	}
	trun(loop);
	for (int i = 0; i < BURST; i++)
		check_sreq(&s[i], false);
	cr_assert_eq(rl_group_run(g, stats_share, &so), 0);
	/* Loop 0 completed all of them; each loop read its share. */
	cr_assert_geq(so.st[0].completions, BURST);
	for (int i = 1; i < 3; i++)
		cr_assert_geq(so.st[i].completions, BURST / 3 - 1,
			      "loop %d ran %llu", i,
			      (unsigned long long)so.st[i].completions);
	cr_assert_eq(rl_group_close(g), 0);
	cr_assert_eq(tfd_count(), before);
	free(s);
}

BACKEND_TEST(group, spread_burst_every_byte_home)
{
	spread_burst(tp, 0);
}

/* Half of them RL_READ_FILE_REGULAR: the flag travels with the shards. */
BACKEND_TEST(group, spread_burst_regular_files)
{
	spread_burst(tp, 2);
}

BACKEND_TEST(group, spread_cancel_and_deadline)
{
	alarm(60); /* a lost message or completion hangs here */
	struct sreq *s = calloc(BURST, sizeof(*s));
	rl_timer *timers = calloc(BURST, sizeof(*timers));
	int cancelled = 0;
	rl_group *g;
	rl_loop *loop;

	make_paths();
	g = tgroup(tp, 2, RL_GROUP_SPREAD, RL_MSG_WAKE_DEFAULT);
	loop = rl_group_loop(g, 0);
	for (int i = 0; i < BURST; i++) {
		s[i].file = i % FILES;
		cr_assert_eq(rl_fs_read_file(loop, &s[i].req, paths[s[i].file],
					     NULL, 0, RL_READ_FILE_GROW,
					     sreq_cb),
			     0);
		if (i % 2)
			cr_assert_eq(rl_cancel(loop, &s[i].req), 0);
		else
			cr_assert_eq(rl_req_deadline(loop, &s[i].req,
						     &timers[i], 60000),
				     0);
	}
	cr_assert_eq(rl_cancel(loop, &s[1].req), -EALREADY);
	trun(loop);
	for (int i = 0; i < BURST; i++) {
		if (s[i].req.result == -ECANCELED)
			cancelled++;
		check_sreq(&s[i], i % 2);
	}
	cr_assert_gt(cancelled, 0);
	cr_assert_eq(rl_cancel(loop, &s[0].req), -ENOENT);
	cr_assert_eq(rl_group_close(g), 0);
	free(timers);
	free(s);
}

/* ------------------------------------ closing with work everywhere */

struct everywhere {
	rl_group *g;
	struct sreq *s[3];
	struct rl_post go[3];
};

static void everywhere_go(struct rl_post *post)
{
	struct everywhere *e = post->data;
	unsigned i = (unsigned)(post - e->go);
	rl_loop *loop = rl_group_loop(e->g, i);

	for (int k = 0; k < BURST; k++) {
		e->s[i][k].file = k % FILES;
		cr_assert_eq(rl_fs_read_file(loop, &e->s[i][k].req,
					     paths[k % FILES], NULL, 0,
					     RL_READ_FILE_GROW, sreq_cb),
			     0);
	}
}

/* Every loop spreads a burst, and the group closes at once: every
 * callback runs exactly once (with its data or -ECANCELED), nothing
 * leaks, no fd stays open. */
BACKEND_TEST(group, close_with_work_everywhere_in_flight)
{
	alarm(60); /* a lost message or completion hangs here */
	struct everywhere e = { 0 };
	int before;

	make_paths();
	before = tfd_count();
	e.g = tgroup(tp, 3, RL_GROUP_SPREAD, RL_MSG_WAKE_DEFAULT);
	for (int i = 0; i < 3; i++)
		e.s[i] = calloc(BURST, sizeof(struct sreq));
	for (int i = 1; i < 3; i++) {
		e.go[i].data = &e;
		cr_assert_eq(
			rl_post(rl_group_loop(e.g, i), &e.go[i], everywhere_go),
			0);
	}
	e.go[0].data = &e;
	everywhere_go(&e.go[0]);
	cr_assert_eq(rl_run(rl_group_loop(e.g, 0), RL_RUN_ONCE) >= 0, 1);
	cr_assert_eq(rl_group_close(e.g), 0);
	for (int i = 0; i < 3; i++) {
		for (int k = 0; k < BURST; k++) {
			struct sreq *s = &e.s[i][k];

			cr_assert_eq(s->calls, 1, "loop %d req %d: %d calls", i,
				     k, s->calls);
			cr_assert(s->req.result == -ECANCELED ||
					  s->req.result ==
						  (int64_t)sizes[s->file],
				  "loop %d req %d: %lld", i, k,
				  (long long)s->req.result);
			free(s->req.buf);
		}
		free(e.s[i]);
	}
	cr_assert_eq(tfd_count(), before);
}

/* ------------------------------------------------ spread, every style */

struct cbcount {
	int calls, bad;
};

static void cb_data(int err, const void *data, size_t len, void *arg)
{
	struct cbcount *c = arg;
	int file = -1;

	for (int i = 0; i < FILES; i++)
		if (err == 0 && len == sizes[i] &&
		    (!len || ((const unsigned char *)data)[len - 1] ==
				     tbyte(names[i], len - 1)))
			file = i;
	if (file < 0)
		c->bad++;
	c->calls++;
}

BACKEND_TEST(group, spread_callback_style)
{
	alarm(60); /* a lost message or completion hangs here */
	struct cbcount c = { 0 };
	rl_cb_ctx *cbs;
	rl_group *g;

	make_paths();
	g = tgroup(tp, 2, RL_GROUP_SPREAD, RL_MSG_WAKE_DEFAULT);
	cr_assert_eq(rl_cb_ctx_open(rl_group_loop(g, 0), &cbs), 0);
	for (int i = 0; i < BURST; i++)
		cr_assert_eq(
			rl_cb_fs_read_file(cbs, paths[i % FILES], cb_data, &c),
			0);
	trun(rl_group_loop(g, 0));
	cr_assert_eq(c.calls, BURST);
	cr_assert_eq(c.bad, 0);
	cr_assert_eq(rl_group_close(g), 0);
}

BACKEND_TEST(group, spread_promise_style)
{
	alarm(60); /* a lost message or completion hangs here */
	static char bufs[BURST][16];
	rl_promise *ps[BURST], *all;
	rl_promise_ctx *ctx;
	struct rl_settlement v;
	rl_group *g;

	make_paths();
	g = tgroup(tp, 2, RL_GROUP_SPREAD, RL_MSG_WAKE_DEFAULT);
	cr_assert_eq(rl_promise_ctx_open(rl_group_loop(g, 0), &ctx), 0);
	for (int i = 0; i < BURST; i++)
		ps[i] = rl_promise_fs_read_file(ctx, paths[0], bufs[i],
						sizeof(bufs[i]));
	all = rl_all(ctx, ps, BURST);
	rl_promise_ref(all);
	trun(rl_group_loop(g, 0));
	cr_assert_eq(rl_promise_result(all, &v), RL_PROMISE_FULFILLED);
	for (int i = 0; i < BURST; i++) {
		cr_assert_eq(((struct rl_value *)v.value.p)[i].i, 12);
		tcheck(names[0], bufs[i], 12);
	}
	rl_promise_unref(all);
	cr_assert_eq(rl_group_close(g), 0);
}

static int coro_ok, coro_bad;

/* Reads into a buffer that holds every file (the largest is 70000). */
static int64_t read_whole(int f)
{
	char *buf = malloc(80000);
	int64_t n = rl_coro_fs_read_file(paths[f], buf, 80000);

	if (n == (int64_t)sizes[f])
		tcheck(names[f], buf, sizes[f]);
	free(buf);
	return n == (int64_t)sizes[f] ? 0 : -1;
}

static int64_t coro_reader(void *arg)
{
	int i = (int)(intptr_t)arg;

	if (read_whole(i % FILES) == 0)
		coro_ok++;
	else
		coro_bad++;
	return 0;
}

BACKEND_TEST(group, spread_coroutine_style)
{
	alarm(60); /* a lost message or completion hangs here */
	rl_coro *cos[BURST / 4];
	rl_coro_ctx *sched;
	rl_group *g;
	int64_t total = 0;

	make_paths();
	g = tgroup(tp, 2, RL_GROUP_SPREAD, RL_MSG_WAKE_DEFAULT);
	cr_assert_eq(rl_coro_ctx_open(rl_group_loop(g, 0), &sched, NULL), 0);
	for (int i = 0; i < BURST / 4; i++)
		cr_assert_eq(rl_coro_spawn(sched, &cos[i], coro_reader,
					   (void *)(intptr_t)i, NULL),
			     0);
	trun(rl_group_loop(g, 0));
	for (int i = 0; i < BURST / 4; i++) {
		cr_assert(rl_coro_done(cos[i]));
		cr_assert_eq(rl_coro_detach(cos[i]), 0);
	}
	(void)total;
	cr_assert_eq(coro_ok, BURST / 4);
	cr_assert_eq(coro_bad, 0);
	cr_assert_eq(rl_group_close(g), 0);
}

/* ------------------------------------- promises settled from elsewhere */

struct remote {
	rl_group *g;
	rl_promise_remote *r;
	struct rl_post post;
	rl_req req;
	char buf[64];
	pthread_t settled_on;
	int reactions;
	int64_t got;
};

/* On loop 1: read a file there, and settle loop 0's promise with it. */
static void remote_read_done(rl_req *req)
{
	struct remote *x = req->data;

	x->settled_on = pthread_self();
	cr_assert_eq(rl_promise_remote_resolve(
			     x->r, (struct rl_value){ .i = req->result }),
		     0);
}

static void remote_go(struct rl_post *post)
{
	struct remote *x = post->data;

	x->req.data = x;
	cr_assert_eq(rl_fs_read_file(rl_group_loop(x->g, 1), &x->req, paths[0],
				     x->buf, sizeof(x->buf), 0,
				     remote_read_done),
		     0);
}

static void remote_then(struct rl_outcome *out, void *arg)
{
	struct remote *x = arg;

	x->reactions++;
	x->got = out->value.i;
}

BACKEND_TEST(group, promise_settled_from_another_loop)
{
	alarm(60); /* a lost message or completion hangs here */
	struct remote x = { 0 };
	rl_promise_ctx *ctx;
	rl_promise *p;

	make_paths();
	x.g = tgroup(tp, 2, 0, RL_MSG_WAKE_DEFAULT);
	cr_assert_eq(rl_promise_ctx_open(rl_group_loop(x.g, 0), &ctx), 0);
	p = rl_promise_new(ctx);
	x.r = rl_promise_remote_new(p);
	cr_assert_not_null(x.r);
	cr_assert_eq(rl_promise_remote_reject(x.r, 1), -EINVAL);
	rl_promise_unref(rl_then(p, remote_then, NULL, &x));
	x.post.data = &x;
	cr_assert_eq(rl_post(rl_group_loop(x.g, 1), &x.post, remote_go), 0);
	/* The handle keeps loop 0 alive until the settlement is there. */
	trun(rl_group_loop(x.g, 0));
	cr_assert_eq(x.reactions, 1);
	cr_assert_eq(x.got, 12);
	cr_assert_not(pthread_equal(x.settled_on, pthread_self()));
	cr_assert_eq(rl_promise_ctx_live(ctx), 0);
	cr_assert_eq(rl_group_close(x.g), 0);
}

/* ---------------------------------------- coroutines across the loops */

#define CORO_N 50

struct across {
	rl_group *g;
	struct rl_post post[CORO_N];
	rl_promise_remote *r[CORO_N];
	int done;
};

static struct across *across_of;

/* On loop 1: settle coroutine i's promise with a value of loop 1's. */
static void across_settle(struct rl_post *post)
{
	unsigned i = (unsigned)(post - across_of->post);

	rl_promise_remote_resolve(across_of->r[i],
				  (struct rl_value){ .i = 1000 + i });
}

static rl_promise_ctx *across_ctx;

/* On loop 0: waits for loop 1, then reads a file itself. */
static int64_t across_coro(void *arg)
{
	unsigned i = (unsigned)(intptr_t)arg;
	rl_promise *p = rl_promise_new(across_ctx);
	struct rl_value v;
	char buf[16];

	across_of->r[i] = rl_promise_remote_new(p);
	rl_post(rl_group_loop(across_of->g, 1), &across_of->post[i],
		across_settle);
	if (rl_coro_await(p, &v) != 0 || v.i != 1000 + (int64_t)i)
		return -1;
	if (rl_coro_fs_read_file(paths[0], buf, sizeof(buf)) != 12)
		return -2;
	across_of->done++;
	return 0;
}

BACKEND_TEST(group, coroutines_await_across_loops)
{
	alarm(60); /* a lost message or completion hangs here */
	struct across a = { 0 };
	rl_coro_ctx *sched;
	rl_coro *cos[CORO_N];

	make_paths();
	across_of = &a;
	a.g = tgroup(tp, 2, 0, RL_MSG_WAKE_DEFAULT);
	cr_assert_eq(rl_promise_ctx_open(rl_group_loop(a.g, 0), &across_ctx),
		     0);
	cr_assert_eq(rl_coro_ctx_open(rl_group_loop(a.g, 0), &sched, NULL), 0);
	for (int i = 0; i < CORO_N; i++)
		cr_assert_eq(rl_coro_spawn(sched, &cos[i], across_coro,
					   (void *)(intptr_t)i, NULL),
			     0);
	trun(rl_group_loop(a.g, 0));
	for (int i = 0; i < CORO_N; i++) {
		cr_assert(rl_coro_done(cos[i]));
		cr_assert_eq(rl_coro_detach(cos[i]), 0);
	}
	cr_assert_eq(a.done, CORO_N);
	cr_assert_eq(rl_group_close(a.g), 0);
}

/* ----------------------------------------------------- thread per core */

struct tpc {
	int done[3];
	int bad[3];
	pthread_t thread[3];
};

static struct tpc *tpc_of;

static int64_t tpc_coro(void *arg)
{
	unsigned i = (unsigned)(intptr_t)arg;

	for (int k = 0; k < 20; k++)
		if (read_whole((int)((i + (unsigned)k) % FILES)) < 0)
			return -1;
	return 0;
}

static int64_t tpc_worker(void *arg)
{
	unsigned i = (unsigned)(intptr_t)arg;

	if (tpc_coro(arg) == 0)
		tpc_of->done[i]++;
	else
		tpc_of->bad[i]++;
	return 0;
}

/* On every loop's thread: a scheduler of its own, and its own share. */
static void tpc_share(rl_loop *loop, unsigned i, void *arg)
{
	rl_coro_ctx *sched;

	(void)arg;
	tpc_of->thread[i] = pthread_self();
	cr_assert_eq(rl_coro_ctx_open(loop, &sched, NULL), 0);
	for (int k = 0; k < 10; k++)
		cr_assert_eq(rl_coro_spawn(sched, NULL, tpc_worker,
					   (void *)(intptr_t)i, NULL),
			     0);
}

BACKEND_TEST(group, thread_per_core_shares)
{
	alarm(60); /* a lost message or completion hangs here */
	struct tpc t = { 0 };
	rl_group *g;

	make_paths();
	tpc_of = &t;
	g = tgroup(tp, 3, 0, RL_MSG_WAKE_DEFAULT);
	cr_assert_eq(rl_group_run(g, tpc_share, NULL), 0);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(t.done[i], 10, "loop %d: %d done, %d bad", i,
			     t.done[i], t.bad[i]);
		cr_assert_eq(t.bad[i], 0);
		for (int j = 0; j < i; j++)
			cr_assert_not(pthread_equal(t.thread[i], t.thread[j]));
	}
	/* Twice: a group runs as many rounds as the program wants. */
	memset(&t, 0, sizeof(t));
	cr_assert_eq(rl_group_run(g, tpc_share, NULL), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(t.done[i], 10);
	cr_assert_eq(rl_group_close(g), 0);
}

/* One loop per CPU: a burst of cached reads on one loop of the group runs
 * on that loop's thread, which is its share of the CPUs; the epoll pool
 * takes none of it (a lone epoll loop shares such a burst with its
 * workers: fastpath::counters_burst_shared). */
BACKEND_TEST(group, a_loop_per_cpu_keeps_its_burst)
{
	enum { N = 200 };
	static rl_req reqs[N];
	static char bufs[N][64];
	const char *path = tfile("burst", 12);
	struct tseen s = { 0 };
	struct rl_stats st;
	unsigned cpus = tcpu_count(), loops = cpus < 16 ? cpus : 16;
	rl_group *g;
	rl_loop *loop;

	g = tgroup(tp, loops, 0, RL_MSG_WAKE_DEFAULT);
	loop = rl_group_loop(g, 0);
	/* Warm: the dentry and the page are both cached. */
	reqs[0] = (rl_req){ .data = &s };
	cr_assert_eq(
		rl_fs_read_file(loop, &reqs[0], path, bufs[0], 64, 0, tseen_cb),
		0);
	trun(loop);
	cr_assert_eq(s.calls, 1);
	rl_loop_stats(loop, &st);
	for (int i = 0; i < N; i++) {
		reqs[i] = (rl_req){ .data = &s };
		cr_assert_eq(rl_fs_read_file(loop, &reqs[i], path, bufs[i], 64,
					     0, tseen_cb),
			     0);
	}
	trun(loop);
	cr_assert_eq(s.calls, N + 1);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(reqs[i].result, 12);
		tcheck("burst", bufs[i], 12);
	}
	if (tp->backend == RL_BACKEND_EPOLL && !(tp->flags & RL_NO_INLINE) &&
	    thave_resolve_cached() && cpus / loops < 2) {
		struct rl_stats now;

		rl_loop_stats(loop, &now);
		cr_assert_eq(now.pool_jobs, st.pool_jobs);
		cr_assert_eq(now.inline_completions - st.inline_completions, N);
	}
	cr_assert_eq(rl_group_close(g), 0);
}
