/* SPDX-License-Identifier: MIT */
/* test_coro.c - stackful coroutines: every suspending call, errors, join,
 * await, many coroutines, the guard page and closing. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coro_helpers.h"
#include "ringloop/promise.h"

/* ------------------------------------------------------------ basic calls */

struct rf {
	const char *path;
	char buf[64];
	int64_t res;
	int calls;
	pthread_t thread;
};

static int64_t read_one(void *arg)
{
	struct rf *r = arg;

	r->calls++;
	r->thread = pthread_self();
	r->res = rl_coro_fs_read_file(r->path, r->buf, sizeof(r->buf));
	return r->res;
}

BACKEND_TEST(coro, read_file)
{
	struct rf r = { .path = tfile("small", 12) };
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);
	rl_coro *co;

	cr_assert_eq(rl_coro_spawn(s, &co, read_one, &r, NULL), 0);
	cr_assert_eq(r.calls, 0, "the coroutine ran inside spawn");
	trun(loop);
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(r.res, 12);
	cr_assert(pthread_equal(r.thread, pthread_self()));
	tcheck("small", r.buf, 12);
	cr_assert(rl_coro_done(co));
	tsched_close(s);
	tclose(loop);
}

struct seq {
	const char *path;
	const char *missing;
	int steps;
	int fd;
	int64_t n1, n2, n3;
	int close_res, stat_res, sleep_res, yield_res, open_missing;
	int64_t rf_missing;
	int stat_missing;
	uint64_t size;
	char buf[300];
	uint64_t slept_ms;
};

static int64_t sequence(void *arg)
{
	struct seq *q = arg;
	struct statx stx;
	rl_loop *loop = rl_coro_loop();
	uint64_t t0;

	q->fd = rl_coro_fs_open(q->path, O_RDONLY | O_CLOEXEC, 0);
	q->steps++;
	q->n1 = rl_coro_fs_read(q->fd, q->buf, 100, 0);
	q->steps++;
	q->n2 = rl_coro_fs_read(q->fd, q->buf + 100, 200, 100);
	q->steps++;
	q->n3 = rl_coro_fs_read(q->fd, q->buf, 10, 1000); /* past the end */
	q->steps++;
	q->close_res = rl_coro_fs_close(q->fd);
	q->steps++;
	q->stat_res = rl_coro_fs_stat(q->path, &stx);
	q->size = stx.stx_size;
	q->steps++;
	t0 = rl_now_ms(loop);
	q->sleep_res = rl_coro_sleep(20);
	q->slept_ms = rl_now_ms(loop) - t0;
	q->steps++;
	q->yield_res = rl_coro_yield();
	q->steps++;
	q->open_missing = rl_coro_fs_open(q->missing, O_RDONLY, 0);
	q->rf_missing =
		rl_coro_fs_read_file(q->missing, q->buf, sizeof(q->buf));
	q->stat_missing = rl_coro_fs_stat(q->missing, &stx);
	return 7;
}

BACKEND_TEST(coro, every_suspending_call)
{
	struct seq q = { .path = tfile("seq", 250),
			 .missing = tpath("no-such-file") };
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);
	struct rl_stats st;

	cr_assert_eq(rl_coro_spawn(s, NULL, sequence, &q, NULL), 0);
	trun(loop);
	cr_assert_eq(q.steps, 8);
	cr_assert_geq(q.fd, 0);
	cr_assert_eq(q.n1, 100);
	cr_assert_eq(q.n2, 150);
	cr_assert_eq(q.n3, 0);
	cr_assert_eq(q.close_res, 0);
	cr_assert_eq(q.stat_res, 0);
	cr_assert_eq(q.size, 250);
	cr_assert_eq(q.sleep_res, 0);
	cr_assert_geq(q.slept_ms, 19);
	cr_assert_eq(q.yield_res, 0);
	cr_assert_eq(q.open_missing, -ENOENT);
	cr_assert_eq(q.rf_missing, -ENOENT);
	cr_assert_eq(q.stat_missing, -ENOENT);
	tcheck("seq", q.buf, 250);
	rl_loop_stats(loop, &st);
	/* open, 3 reads, close, stat, and 3 failing requests. */
	cr_assert_eq(st.completions, 9);
	tsched_close(s);
	tclose(loop);
}

struct grow {
	const char *path;
	void *buf;
	size_t cap;
	int64_t res;
};

static int64_t grow_fn(void *arg)
{
	struct grow *g = arg;

	g->res = rl_coro_fs_read_file_grow(g->path, &g->buf, &g->cap);
	return 0;
}

BACKEND_TEST(coro, read_file_grow)
{
	struct grow g = { .path = tfile("grow", 100000) };
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);

	cr_assert_eq(rl_coro_spawn(s, NULL, grow_fn, &g, NULL), 0);
	trun(loop);
	cr_assert_eq(g.res, 100000);
	cr_assert_geq(g.cap, 100000);
	tcheck("grow", g.buf, 100000);
	free(g.buf);
	tsched_close(s);
	tclose(loop);
}

/* Every suspending call made outside a coroutine is -EPERM, not a crash. */
Test(coro, outside_a_coroutine_is_eperm)
{
	char buf[8];
	struct statx stx;
	void *gb = NULL;
	size_t gcap = 0;

	cr_assert_eq(rl_coro_fs_read_file("/etc/hostname", buf, sizeof(buf)),
		     -EPERM);
	cr_assert_eq(rl_coro_fs_read_file_grow("/etc/hostname", &gb, &gcap),
		     -EPERM);
	cr_assert_eq(rl_coro_fs_open("/etc/hostname", O_RDONLY, 0), -EPERM);
	cr_assert_eq(rl_coro_fs_read(0, buf, 1, 0), -EPERM);
	cr_assert_eq(rl_coro_fs_close(0), -EPERM);
	cr_assert_eq(rl_coro_fs_stat("/", &stx), -EPERM);
	cr_assert_eq(rl_coro_sleep(1), -EPERM);
	cr_assert_eq(rl_coro_yield(), -EPERM);
	cr_assert_eq(rl_coro_join(NULL), -EPERM);
	cr_assert_eq(rl_coro_await(NULL, NULL), -EPERM);
	cr_assert_null(rl_coro_self());
	cr_assert_null(rl_coro_loop());
}

BACKEND_TEST(coro, bad_arguments)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);
	struct rl_coro_options small = { .stack_size = 4096 };
	rl_coro *co = (rl_coro *)1;

	cr_assert_eq(rl_coro_spawn(s, &co, NULL, NULL, NULL), -EINVAL);
	cr_assert_null(co);
	cr_assert_eq(rl_coro_spawn(s, &co, read_one, NULL, &small), -EINVAL);
	cr_assert_eq(rl_coro_spawn(NULL, &co, read_one, NULL, NULL), -EINVAL);
	cr_assert_eq(rl_coro_ctx_open(loop, NULL, NULL), -EINVAL);
	tsched_close(s);
	tclose(loop);
}

/* ------------------------------------------------------------------ join */

static int64_t child(void *arg)
{
	int *ran = arg;

	(*ran)++;
	rl_coro_sleep(1);
	return 42;
}

static int64_t quick(void *arg)
{
	int *ran = arg;

	(*ran)++;
	return -ENOENT;
}

struct joins {
	rl_coro_ctx *s;
	int ran;
	int64_t v_wait, v_done, v_self, v_twice;
	int b_was_done;
};

static int64_t parent(void *arg)
{
	struct joins *j = arg;
	rl_coro *a, *b, *c;

	if (rl_coro_spawn(j->s, &a, child, &j->ran, NULL) ||
	    rl_coro_spawn(j->s, &b, quick, &j->ran, NULL) ||
	    rl_coro_spawn(j->s, &c, child, &j->ran, NULL))
		return -1;
	j->v_self = rl_coro_join(rl_coro_self());
	/* a sleeps: join waits for it. */
	j->v_wait = rl_coro_join(a);
	/* b finished long ago: join returns at once. */
	j->b_was_done = rl_coro_done(b);
	j->v_done = rl_coro_join(b);
	if (rl_coro_detach(c) != 0)
		return -2;
	j->v_twice = rl_coro_detach(c);
	return 1;
}

BACKEND_TEST(coro, join_returns_the_value)
{
	rl_loop *loop = tloop(tp);
	struct joins j = { .s = tsched(loop) };
	struct rl_coro_ctx_stats st;
	rl_coro *p;

	cr_assert_eq(rl_coro_spawn(j.s, &p, parent, &j, NULL), 0);
	trun(loop);
	cr_assert_eq(j.ran, 3);
	cr_assert_eq(j.v_self, -EDEADLK);
	cr_assert_eq(j.v_wait, 42);
	cr_assert_eq(j.v_done, -ENOENT);
	cr_assert(j.b_was_done);
	cr_assert_eq(j.v_twice, -EINVAL);
	rl_coro_ctx_stats(j.s, &st);
	cr_assert_eq(st.spawned, 4);
	cr_assert_eq(st.finished, 4);
	cr_assert_eq(st.handles, 1); /* p, never joined: freed by close */
	tsched_close(j.s);
	tclose(loop);
}

static int64_t joiner2(void *arg)
{
	rl_coro *target = arg;

	return rl_coro_join(target);
}

BACKEND_TEST(coro, second_joiner_is_einval)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);
	int ran = 0;
	rl_coro *t, *j1, *j2;
	int64_t (*get)(void *) = joiner2;

	cr_assert_eq(rl_coro_spawn(s, &t, child, &ran, NULL), 0);
	cr_assert_eq(rl_coro_spawn(s, &j1, get, t, NULL), 0);
	cr_assert_eq(rl_coro_spawn(s, &j2, get, t, NULL), 0);
	trun(loop);
	cr_assert(rl_coro_done(j1) && rl_coro_done(j2));
	cr_assert_eq(ran, 1);
	tsched_close(s);
	tclose(loop);
}

/* ----------------------------------------------------------------- await */

struct aw {
	rl_promise_ctx *ctx;
	const char *path;
	const char *missing;
	rl_promise *pending;
	char buf[32];
	int r_ready, r_read, r_missing, r_pending, r_rejected;
	struct rl_value v_ready, v_read, v_pending;
};

static int64_t awaiter(void *arg)
{
	struct aw *a = arg;
	struct rl_value v = { 5, NULL };

	a->r_ready = rl_coro_await(rl_promise_resolved(a->ctx, v), &a->v_ready);
	a->r_read =
		rl_coro_await(rl_promise_fs_read_file(a->ctx, a->path, a->buf,
						      sizeof(a->buf)),
			      &a->v_read);
	a->r_missing =
		rl_coro_await(rl_promise_fs_read_file(a->ctx, a->missing,
						      a->buf, sizeof(a->buf)),
			      NULL);
	a->r_rejected = rl_coro_await(rl_promise_rejected(a->ctx, -EIO), NULL);
	a->r_pending = rl_coro_await(a->pending, &a->v_pending);
	return 0;
}

static void settle_later(rl_timer *t, int status)
{
	struct rl_value v = { 99, NULL };

	if (!status)
		rl_promise_resolve(t->data, v);
}

BACKEND_TEST(coro, await_fulfilled_and_rejected)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);
	struct aw a = { .path = tfile("aw", 20), .missing = tpath("nope") };
	rl_timer t = { 0 };

	cr_assert_eq(rl_promise_ctx_open(loop, &a.ctx), 0);
	a.pending = rl_promise_new(a.ctx);
	t.data = rl_promise_ref(a.pending);
	cr_assert_eq(rl_timer_start(loop, &t, 5, 0, settle_later), 0);
	cr_assert_eq(rl_coro_spawn(s, NULL, awaiter, &a, NULL), 0);
	trun(loop);
	cr_assert_eq(a.r_ready, 0);
	cr_assert_eq(a.v_ready.i, 5);
	cr_assert_eq(a.r_read, 0);
	cr_assert_eq(a.v_read.i, 20);
	tcheck("aw", a.buf, 20);
	cr_assert_eq(a.r_missing, -ENOENT);
	cr_assert_eq(a.r_rejected, -EIO);
	cr_assert_eq(a.r_pending, 0);
	cr_assert_eq(a.v_pending.i, 99);
	rl_promise_unref(t.data);
	tsched_close(s);
	cr_assert_eq(rl_promise_ctx_live(a.ctx), 0);
	cr_assert_eq(rl_promise_ctx_close(a.ctx), 0);
	tclose(loop);
}

static int64_t await_forever(void *arg)
{
	return rl_coro_await(arg, NULL);
}

/* An await nothing settles is withdrawn when the scheduler closes: the
 * coroutine gets -ECANCELED and returns, and the promise is freed with the
 * last reference, which the await held. */
BACKEND_TEST(coro, close_withdraws_an_await)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);
	rl_promise_ctx *ctx;
	rl_promise *p;
	rl_coro *co;

	cr_assert_eq(rl_promise_ctx_open(loop, &ctx), 0);
	p = rl_promise_new(ctx);
	/* The await takes the only reference: nothing can settle p now. */
	cr_assert_eq(rl_coro_spawn(s, &co, await_forever, p, NULL), 0);
	trun(loop);
	cr_assert_not(rl_coro_done(co));
	cr_assert_eq(rl_promise_ctx_live(ctx), 1, "the await keeps p alive");
	cr_assert_eq(rl_coro_ctx_close(s), -EBUSY, "a coroutine is alive");
	/* The loop's close closes the promise context (opened last) first,
	 * then the scheduler, whose withdrawal of the await needs p: the
	 * context's memory stays until the close's very end. */
	tclose(loop);
}

/* A promise that settled before the close still delivers its outcome:
 * the subscription's microtask is queued already and cannot be withdrawn. */
static struct rl_value settled_value;

static int64_t await_value(void *arg)
{
	return rl_coro_await(arg, &settled_value);
}

BACKEND_TEST(coro, close_after_settle_delivers_the_value)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);
	rl_promise_ctx *ctx;
	rl_promise *p;

	cr_assert_eq(rl_promise_ctx_open(loop, &ctx), 0);
	p = rl_promise_new(ctx);
	settled_value = (struct rl_value){ 0, NULL };
	cr_assert_eq(
		rl_coro_spawn(s, NULL, await_value, rl_promise_ref(p), NULL),
		0);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0); /* it awaits */
	cr_assert_eq(rl_promise_resolve(p, (struct rl_value){ 7, NULL }), 0);
	rl_promise_unref(p);
	tclose(loop); /* closes both contexts */
	cr_assert_eq(settled_value.i, 7);
}

/* ------------------------------------------------------ many at once, RSS */

#define MANY 10000

struct many {
	const char *path;
	unsigned started, alive, max_alive, done, bad;
	long rss_at_peak_kb;
};

static long rss_now_kb(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int64_t many_fn(void *arg)
{
	struct many *m = arg;
	char buf[16];

	m->started++;
	if (++m->alive > m->max_alive)
		m->max_alive = m->alive;
	if (m->started == MANY)
		m->rss_at_peak_kb = rss_now_kb();
	/* All 10,000 are suspended here at once. */
	if (rl_coro_sleep(1) != 0)
		m->bad++;
	if (rl_coro_fs_read_file(m->path, buf, sizeof(buf)) != 12)
		m->bad++;
	else
		for (int i = 0; i < 12; i++)
			if ((unsigned char)buf[i] != tbyte("many", (size_t)i))
				m->bad++;
	m->alive--;
	m->done++;
	return 0;
}

BACKEND_TEST(coro, ten_thousand_alive_at_once)
{
	struct many m = { .path = tfile("many", 12) };
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);
	struct rusage ru0, ru1;
	long rss0;

	getrusage(RUSAGE_SELF, &ru0);
	rss0 = rss_now_kb();
	for (int i = 0; i < MANY; i++)
		cr_assert_eq(rl_coro_spawn(s, NULL, many_fn, &m, NULL), 0);
	trun(loop);
	getrusage(RUSAGE_SELF, &ru1);
	cr_assert_eq(m.started, MANY);
	cr_assert_eq(m.max_alive, MANY);
	cr_assert_eq(m.done, MANY);
	cr_assert_eq(m.bad, 0);
	{
		double per = (double)(m.rss_at_peak_kb - rss0) * 1024.0 / MANY;

		cr_log_info("coro: %.0f bytes resident per coroutine (%ld KiB "
			    "for %d; ru_maxrss %ld -> %ld KiB)",
			    per, m.rss_at_peak_kb - rss0, MANY, ru0.ru_maxrss,
			    ru1.ru_maxrss);
		fprintf(stderr,
			"coro/ten_thousand(%s): %.0f bytes resident "
			"per coroutine\n",
			tp_name(tp), per);
#if !defined(RL_SAN)
		if (!getenv("RL_VALGRIND"))
			cr_assert_lt(per, 8192.0, "%.0f bytes per coroutine",
				     per);
#endif
	}
	tsched_close(s);
	tclose(loop);
}

/* Stacks are recycled: coroutines one after another share one mapping. */
static int64_t chain(void *arg)
{
	rl_coro_ctx *s = arg;
	rl_coro *next;
	int64_t total = 0;
	int ran = 0;

	for (int i = 0; i < 100; i++) {
		if (rl_coro_spawn(s, &next, quick, &ran, NULL))
			return -1;
		total += rl_coro_join(next);
	}
	return total;
}

BACKEND_TEST(coro, stacks_are_pooled)
{
	rl_loop *loop = tloop(tp);
	rl_coro_pool *pool;
	struct rl_coro_ctx_options opt = { .pool = NULL };
	struct rl_coro_pool_stats ps;
	rl_coro_ctx *s;

	cr_assert_eq(rl_coro_pool_open(&pool, 0), 0);
	opt.pool = pool;
	cr_assert_eq(rl_coro_ctx_open(loop, &s, &opt), 0);
	cr_assert_eq(rl_coro_spawn(s, NULL, chain, s, NULL), 0);
	trun(loop);
	rl_coro_pool_stats(pool, &ps);
	/* chain's own stack, plus one reused for each child. */
	cr_assert_eq(ps.maps, 2);
	cr_assert_eq(ps.reuses, 99);
	cr_assert_eq(ps.mapped, 2);
	cr_assert_eq(ps.idle, 2);
	tsched_close(s);
	tclose(loop);
	cr_assert_eq(rl_coro_pool_close(pool), 0);
}

/* A bigger stack when asked for one. */
static int64_t big_frame(void *arg)
{
	volatile char big[200 * 1024];

	(void)arg;
	for (size_t i = 0; i < sizeof(big); i += 512)
		big[i] = (char)i;
	return big[4096] + rl_coro_yield();
}

BACKEND_TEST(coro, stack_size_option)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);
	struct rl_coro_options opt = { .stack_size = 512 * 1024,
				       .name = "big" };
	rl_coro *co;

	cr_assert_eq(rl_coro_spawn(s, &co, big_frame, NULL, &opt), 0);
	cr_assert_str_eq(rl_coro_name(co), "big");
	cr_assert_gt(rl_coro_id(co), 0);
	trun(loop);
	cr_assert(rl_coro_done(co));
	tsched_close(s);
	tclose(loop);
}

/* ------------------------------------------------------------ guard page */

static int __attribute__((noinline)) recurse(volatile int depth)
{
	volatile char pad[256];

	pad[0] = (char)depth;
	if (depth > 1000000000)
		return 0;
	return recurse(depth + 1) + pad[0];
}

static int64_t overflow(void *arg)
{
	(void)arg;
	return recurse(0);
}

Test(coro, guard_page_names_the_overflowing_coroutine)
{
	int pipefd[2], status;
	char msg[512] = { 0 };
	ssize_t n, got = 0;
	pid_t pid;

	cr_assert_eq(pipe(pipefd), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct rl_coro_options opt = { .name = "deep-recursion" };
		rl_loop *loop;
		rl_coro_ctx *s;

		dup2(pipefd[1], STDERR_FILENO);
		close(pipefd[0]);
		if (rl_loop_open(&loop, NULL) ||
		    rl_coro_ctx_open(loop, &s, NULL) ||
		    rl_coro_spawn(s, NULL, overflow, NULL, &opt))
			_exit(3);
		rl_run(loop, RL_RUN_DEFAULT);
		_exit(4); /* survived: the guard did not work */
	}
	close(pipefd[1]);
	while ((n = read(pipefd[0], msg + got, sizeof(msg) - 1 - (size_t)got)) >
	       0)
		got += n;
	close(pipefd[0]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFSIGNALED(status), "child exited with %d, stderr: %s",
		  WIFEXITED(status) ? WEXITSTATUS(status) : -1, msg);
	cr_assert_eq(WTERMSIG(status), SIGSEGV);
	cr_assert_not_null(strstr(msg, "coroutine"), "stderr: %s", msg);
	cr_assert_not_null(strstr(msg, "(deep-recursion)"), "stderr: %s", msg);
	cr_assert_not_null(strstr(msg, "stack overflow"), "stderr: %s", msg);
}

/* --------------------------------------------------------------- closing */

struct closing {
	rl_coro *sleeper;
	int64_t sleep_res, join_res, yield_res, read_res, late_res;
	int reader_sleep_res, yielder_sleep_res;
	char late_buf[8];
	int yields, finished, spawn_res;
	const char *path;
	rl_coro_ctx *s;
};

static int64_t c_sleeper(void *arg)
{
	struct closing *c = arg;

	c->sleep_res = rl_coro_sleep(100000);
	/* Unwinding: every further call fails at once. */
	c->late_res =
		rl_coro_fs_read_file(c->path, c->late_buf, sizeof(c->late_buf));
	c->finished++;
	return 5;
}

static int64_t c_joiner(void *arg)
{
	struct closing *c = arg;

	c->join_res = rl_coro_join(c->sleeper);
	c->finished++;
	return 0;
}

static int64_t c_yielder(void *arg)
{
	struct closing *c = arg;
	/* A yield only lets other microtasks run (rl_task_queue): waiting
	 * for the close takes a real wait. */
	if (rl_coro_yield() == 0)
		c->yields++;
	c->yielder_sleep_res = rl_coro_sleep(100000);
	c->yield_res = rl_coro_yield();
	c->finished++;
	return 0;
}

static int unused_ran;

static int64_t c_reader(void *arg)
{
	struct closing *c = arg;
	char buf[16];

	/* In flight when the scheduler closes: either it finished in time
	 * or it was cancelled, never anything else. The sleep is surely
	 * cancelled, and the spawn after it refused. */
	c->read_res = rl_coro_fs_read_file(c->path, buf, sizeof(buf));
	c->reader_sleep_res = rl_coro_sleep(100000);
	c->spawn_res = rl_coro_spawn(c->s, NULL, quick, &unused_ran, NULL);
	c->finished++;
	return 0;
}

BACKEND_TEST(coro, closing_cancels_and_unwinds)
{
	struct closing c = { .path = tfile("cl", 12) };
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);
	int calls = 0;
	rl_coro *late;

	c.s = s;
	cr_assert_eq(rl_coro_spawn(s, &c.sleeper, c_sleeper, &c, NULL), 0);
	cr_assert_eq(rl_coro_spawn(s, NULL, c_joiner, &c, NULL), 0);
	cr_assert_eq(rl_coro_spawn(s, NULL, c_yielder, &c, NULL), 0);
	cr_assert_eq(rl_coro_spawn(s, NULL, c_reader, &c, NULL), 0);
	/* Every one starts and suspends. */
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	/* One that never got to start. */
	cr_assert_eq(rl_coro_spawn(s, &late, quick, &calls, NULL), 0);
	cr_assert_eq(rl_coro_ctx_close(s), -EBUSY, "coroutines are alive");
	tclose(loop); /* the scheduler closes with the loop */
	cr_assert_eq(c.sleep_res, -ECANCELED);
	cr_assert_eq(c.late_res, -ECANCELED);
	cr_assert_eq(c.join_res, -ECANCELED);
	cr_assert_eq(c.yields, 1);
	cr_assert_eq(c.yielder_sleep_res, -ECANCELED);
	cr_assert_eq(c.yield_res, -ECANCELED);
	cr_assert(c.read_res == 12 || c.read_res == -ECANCELED, "%ld",
		  (long)c.read_res);
	cr_assert_eq(c.reader_sleep_res, -ECANCELED);
	cr_assert_eq(c.spawn_res, -ECANCELED);
	cr_assert_eq(unused_ran, 0);
	cr_assert_eq(c.finished, 4);
	cr_assert_eq(calls, 1); /* started, and saw the scheduler closing */
}

/* rl_loop_close() alone closes the scheduler first (its close hook): every
 * kind of wait is cancelled, every coroutine returns, nothing leaks. */
struct by_loop {
	int fd;		   /* a pipe nobody writes to */
	rl_promise *never; /* a promise nothing settles */
	int64_t read_res, sleep_res, await_res, late_res;
	int finished;
};

static int64_t bl_reader(void *arg)
{
	struct by_loop *b = arg;
	char c;

	b->read_res = rl_coro_fs_read(b->fd, &c, 1, -1);
	b->finished++;
	return 0;
}

static int64_t bl_sleeper(void *arg)
{
	struct by_loop *b = arg;

	b->sleep_res = rl_coro_sleep(60000);
	b->finished++;
	return 0;
}

static int64_t bl_awaiter(void *arg)
{
	struct by_loop *b = arg;

	b->await_res = rl_coro_await(b->never, NULL);
	b->finished++;
	return 0;
}

static int64_t bl_late(void *arg)
{
	struct by_loop *b = arg;

	b->late_res = rl_coro_sleep(60000);
	b->finished++;
	return 0;
}

BACKEND_TEST(coro, loop_close_closes_the_scheduler)
{
	struct by_loop b = { 0 };
	rl_promise_ctx *ctx;
	rl_coro_ctx *s;
	rl_loop *loop;
	int fds[2];

	/* Before tloop(), which counts the fds open at the start. */
	cr_assert_eq(pipe(fds), 0);
	b.fd = fds[0];
	loop = tloop(tp);
	s = tsched(loop);
	cr_assert_eq(rl_promise_ctx_open(loop, &ctx), 0);
	b.never = rl_promise_new(ctx);
	cr_assert_eq(rl_coro_spawn(s, NULL, bl_reader, &b, NULL), 0);
	cr_assert_eq(rl_coro_spawn(s, NULL, bl_sleeper, &b, NULL), 0);
	cr_assert_eq(rl_coro_spawn(s, NULL, bl_awaiter, &b, NULL), 0);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(rl_coro_spawn(s, NULL, bl_late, &b, NULL), 0);
	cr_assert_eq(b.finished, 0);
	tclose(loop); /* no rl_coro_ctx_close() */
	cr_assert_eq(b.finished, 4);
	cr_assert_eq(b.read_res, -ECANCELED);
	cr_assert_eq(b.sleep_res, -ECANCELED);
	cr_assert_eq(b.await_res, -ECANCELED);
	cr_assert_eq(b.late_res, -ECANCELED);
	close(fds[0]);
	close(fds[1]);
}

/* sched_close from inside the loop (a callback) would have to wait there. */
static rl_coro_ctx *busy_sched;
static int busy_res;

static void close_from_cb(rl_timer *t, int status)
{
	(void)t;
	(void)status;
	busy_res = rl_coro_ctx_close(busy_sched);
}

static int64_t sleepy(void *arg)
{
	(void)arg;
	return rl_coro_sleep(10);
}

BACKEND_TEST(coro, close_inside_the_loop_is_ebusy)
{
	rl_loop *loop = tloop(tp);
	rl_timer t = { 0 };

	busy_sched = tsched(loop);
	cr_assert_eq(rl_coro_spawn(busy_sched, NULL, sleepy, NULL, NULL), 0);
	cr_assert_eq(rl_timer_start(loop, &t, 1, 0, close_from_cb), 0);
	trun(loop);
	cr_assert_eq(busy_res, -EBUSY);
	tsched_close(busy_sched);
	tclose(loop);
}

/* ------------------------------------------------------ ids, threads */

/* Coroutine ids are unique in the process, also when loops on several
 * threads spawn at the same time. */
#define ID_SPAWNS 10000

struct id_run {
	uint64_t ids[ID_SPAWNS];
	int err;
};

static int64_t nothing(void *arg)
{
	(void)arg;
	return 0;
}

static void *spawn_ids(void *arg)
{
	struct id_run *r = arg;
	rl_loop *loop;
	rl_coro_ctx *s;
	rl_coro *co;

	r->err = rl_loop_open(&loop, NULL);
	if (r->err)
		return NULL;
	r->err = rl_coro_ctx_open(loop, &s, NULL);
	for (int i = 0; i < ID_SPAWNS && !r->err; i++) {
		r->err = rl_coro_spawn(s, &co, nothing, NULL, NULL);
		if (!r->err) {
			r->ids[i] = rl_coro_id(co);
			rl_coro_detach(co);
		}
	}
	rl_run(loop, RL_RUN_DEFAULT);
	rl_loop_close(loop);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

Test(coro, ids_are_unique_across_threads)
{
	static struct id_run runs[2];
	static uint64_t all[2 * ID_SPAWNS];
	pthread_t th[2];

	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, spawn_ids, &runs[i]),
			     0);
	for (int i = 0; i < 2; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(runs[i].err, 0, "%s", rl_strerror(runs[i].err));
		memcpy(all + i * ID_SPAWNS, runs[i].ids, sizeof(runs[i].ids));
	}
	qsort(all, 2 * ID_SPAWNS, sizeof(all[0]), cmp_u64);
	for (int i = 1; i < 2 * ID_SPAWNS; i++)
		cr_assert_neq(all[i], all[i - 1], "id %llu given twice",
			      (unsigned long long)all[i]);
}

/* An explicit close with coroutines alive refuses (-EBUSY) and frees
 * nothing; the loop's close then cancels and unwinds them. */
static int64_t sleep_long(void *arg)
{
	*(int64_t *)arg = rl_coro_sleep(60000);
	return 0;
}

BACKEND_TEST(coro, explicit_close_with_coroutines_alive_is_ebusy)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);
	int64_t res = 1;
	rl_coro *co;

	cr_assert_eq(rl_coro_spawn(s, &co, sleep_long, &res, NULL), 0);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(rl_coro_ctx_close(s), -EBUSY);
	cr_assert_not(rl_coro_done(co));
	tclose(loop);
	cr_assert_eq(res, -ECANCELED);
}
