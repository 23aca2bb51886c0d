/* SPDX-License-Identifier: MIT */
/*
 * test_coro_pacing.c - coroutine starts paced by the requests in flight
 * (rl_coro_ctx_options.start_window), and warm stacks handed on.
 */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>

#include "coro_helpers.h"

enum { READERS = 40 };

struct pace {
	const char *path;
	int next_start;	  /* the index the next start must have */
	int order_errors; /* starts out of spawn order */
	int waiting, max_waiting;
	int finished;
	uintptr_t pages[READERS]; /* the stack page each one ran on */
};

struct reader {
	struct pace *p;
	int index;
	char buf[16];
	int64_t res;
};

static int64_t paced_reader(void *arg)
{
	struct reader *r = arg;
	struct pace *p = r->p;

	/* The real frame, not a sanitizer's fake stack. */
	p->pages[r->index] = (uintptr_t)__builtin_frame_address(0) >> 12;
	if (r->index != p->next_start++)
		p->order_errors++;
	if (++p->waiting > p->max_waiting)
		p->max_waiting = p->waiting;
	r->res = rl_coro_fs_read_file(p->path, r->buf, sizeof(r->buf));
	p->waiting--;
	p->finished++;
	return r->res;
}

static void run_readers(const struct tp *tp, size_t window, struct pace *p,
			struct reader *rs)
{
	struct rl_coro_ctx_options opt = { .start_window = window };
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched_opts(loop, &opt);

	for (int i = 0; i < READERS; i++) {
		rs[i] = (struct reader){ .p = p, .index = i };
		cr_assert_eq(rl_coro_spawn(s, NULL, paced_reader, &rs[i], NULL),
			     0);
	}
	trun(loop);
	cr_assert_eq(p->finished, READERS);
	cr_assert_eq(p->order_errors, 0, "starts must keep spawn order");
	for (int i = 0; i < READERS; i++) {
		cr_assert_eq(rs[i].res, 12, "reader %d: %ld", i,
			     (long)rs[i].res);
		tcheck("paced", rs[i].buf, 12);
	}
	tsched_close(s);
	tclose(loop);
}

static int distinct_pages(const struct pace *p)
{
	int n = 0;

	for (int i = 0; i < READERS; i++) {
		int seen = 0;

		for (int j = 0; j < i; j++)
			seen |= p->pages[j] == p->pages[i];
		n += !seen;
	}
	return n;
}

/* At most start_window coroutines wait for requests; the ones started
 * later run on the stacks the finished ones gave back. */
BACKEND_TEST(coro_pacing, window_bounds_the_waiting)
{
	struct pace p = { .path = tfile("paced", 12) };
	struct reader rs[READERS];

	run_readers(tp, 4, &p, rs);
	cr_assert_eq(p.max_waiting, 4);
	cr_assert_leq(distinct_pages(&p), 4,
		      "%d stacks for a window of 4: not reused",
		      distinct_pages(&p));
}

/* SIZE_MAX turns pacing off: every coroutine starts at once. */
BACKEND_TEST(coro_pacing, unlimited_window_starts_all)
{
	struct pace p = { .path = tfile("paced", 12) };
	struct reader rs[READERS];

	run_readers(tp, SIZE_MAX, &p, rs);
	cr_assert_eq(p.max_waiting, READERS);
	cr_assert_eq(distinct_pages(&p), READERS);
}

/* Starts put off when the scheduler closes still run, and every call
 * they make fails with -ECANCELED; nothing is left alive. */
struct stuck {
	int fd; /* a pipe nobody writes to */
	int started;
	int64_t res[8];
};

static int64_t stuck_reader(void *arg)
{
	struct stuck *st = arg;
	int i = st->started++;
	char c;

	st->res[i] = rl_coro_fs_read(st->fd, &c, 1, -1);
	return st->res[i];
}

BACKEND_TEST(coro_pacing, close_runs_the_put_off_starts)
{
	struct rl_coro_ctx_options opt = { .start_window = 2 };
	struct stuck st = { 0 };
	struct rl_coro_ctx_stats ss;
	rl_coro_ctx *s;
	rl_loop *loop;
	int fds[2];

	/* Before tloop(), which counts the fds open at the start. */
	cr_assert_eq(pipe(fds), 0);
	loop = tloop(tp);
	s = tsched_opts(loop, &opt);
	st.fd = fds[0];
	for (int i = 0; i < 8; i++)
		cr_assert_eq(rl_coro_spawn(s, NULL, stuck_reader, &st, NULL),
			     0);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(st.started, 2, "the window is 2");
	rl_coro_ctx_stats(s, &ss);
	cr_assert_eq(ss.alive, 8);
	cr_assert_eq(rl_coro_ctx_close(s), -EBUSY, "coroutines are alive");
	tclose(loop); /* closes the scheduler */
	cr_assert_eq(st.started, 8);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(st.res[i], -ECANCELED, "reader %d: %ld", i,
			     (long)st.res[i]);
	close(fds[0]);
	close(fds[1]);
}

/*
 * Spawning costs no stack mapping: a stack is mapped (or taken from the
 * pool) when its coroutine starts. With the default window, a million
 * coroutines spawned at once that each read a file run on a few hundred
 * stacks; with a mapping per spawn they would hit vm.max_map_count
 * (65530 mappings, two per stack) at about 32,700. Fewer under the
 * sanitizers and Valgrind, still past that limit.
 */
struct million {
	const char *path;
	unsigned done, bad;
};

static int64_t million_fn(void *arg)
{
	struct million *m = arg;
	char buf[16];

	if (rl_coro_fs_read_file(m->path, buf, sizeof(buf)) != 12)
		m->bad++;
	m->done++;
	return 0;
}

BACKEND_TEST(coro_pacing, spawn_maps_no_stack, .timeout = 600)
{
	unsigned n = 1000000;
	struct million m = { .path = tfile("million", 12) };
	struct rl_coro_pool_stats ps;
	rl_coro_pool *pool;
	struct rl_coro_ctx_options opt = { .pool = NULL };
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s;

#if defined(RL_SAN)
	n = 100000;
#endif
	if (getenv("RL_VALGRIND"))
		n = 40000;
	if (tp->flags & RL_NO_INLINE)
		n /= 10; /* a thread hand-off per read: same time budget */
	if (n < 40000)
		n = 40000;
	cr_assert_eq(rl_coro_pool_open(&pool, 0), 0);
	opt.pool = pool;
	s = tsched_opts(loop, &opt);
	for (unsigned i = 0; i < n; i++) {
		int ret = rl_coro_spawn(s, NULL, million_fn, &m, NULL);

		cr_assert_eq(ret, 0, "spawn %u: %s", i, rl_strerror(ret));
	}
	rl_coro_pool_stats(pool, &ps);
	cr_assert_eq(ps.maps, 0, "%llu stacks mapped by spawning",
		     (unsigned long long)ps.maps);
	trun(loop);
	cr_assert_eq(m.done, n);
	cr_assert_eq(m.bad, 0);
	rl_coro_pool_stats(pool, &ps);
	cr_assert_leq(ps.maps, 2 * RL_CORO_START_WINDOW,
		      "%llu stacks for %u coroutines",
		      (unsigned long long)ps.maps, n);
	tsched_close(s);
	tclose(loop);
	cr_assert_eq(rl_coro_pool_close(pool), 0);
}
