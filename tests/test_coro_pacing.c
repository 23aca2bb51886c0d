/* SPDX-License-Identifier: MIT */
/*
 * test_coro_pacing.c - coroutine starts paced by the requests in flight
 * (rl_coro_ctx_options.start_window), and warm stacks handed on.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
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

/* Returns how many starts the window let through unpaced (a stall of
 * the loop: a busy machine, a slow pool), which may widen it. */
static uint64_t run_readers(const struct tp *tp, size_t window, struct pace *p,
			    struct reader *rs)
{
	struct rl_coro_ctx_stats ss;
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
	rl_coro_ctx_stats(s, &ss);
	tsched_close(s);
	tclose(loop);
	return ss.unpaced;
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

	uint64_t unpaced = run_readers(tp, 4, &p, rs);

	/* Only a stall of the loop lets starts through unpaced, each one
	 * widening the window by one for a while. */
	if (unpaced == 0)
		cr_assert_eq(p.max_waiting, 4);
	else
		cr_assert_leq(p.max_waiting, 4 + (int)unpaced);
	cr_assert_geq(p.max_waiting, 4);
	cr_assert_leq(distinct_pages(&p), 4 + (int)unpaced,
		      "%d stacks for a window of 4 (%d unpaced): not reused",
		      distinct_pages(&p), (int)unpaced);
}

/* SIZE_MAX turns pacing off: every coroutine starts at once. */
BACKEND_TEST(coro_pacing, unlimited_window_starts_all)
{
	struct pace p = { .path = tfile("paced", 12) };
	struct reader rs[READERS];

	cr_assert_eq(run_readers(tp, SIZE_MAX, &p, rs), 0,
		     "nothing is put off without a window");
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
	struct rl_coro_ctx_stats ss;
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
	rl_coro_ctx_stats(s, &ss);
	/* Starts let through by a stall of the loop (unpaced) may each
	 * have needed a stack of their own. */
	cr_assert_leq(ps.maps, 2 * RL_CORO_START_WINDOW + ss.unpaced,
		      "%llu stacks for %u coroutines (%llu unpaced)",
		      (unsigned long long)ps.maps, n,
		      (unsigned long long)ss.unpaced);
	tsched_close(s);
	tclose(loop);
	cr_assert_eq(rl_coro_pool_close(pool), 0);
}

/*
 * Pacing must never hold a start back for good. A server's coroutines
 * live as long as their connections and wait on I/O most of the time: a
 * window's worth of idle connections (nothing ever completes) or of busy
 * ones (each completion is followed by the next wait) once kept every
 * later coroutine from starting, so the next client was never served.
 */
struct hold {
	int rfd, wfd;  /* a pipe: the held coroutines read it */
	int held_done; /* held coroutines finished */
	int64_t res[2];
	bool late_ran; /* the coroutine spawned after the window filled */
	bool guard;    /* the guard timer fired: the late one never ran */
	int rounds;    /* ping-pong rounds (the busy variant) */
};

static int64_t held_reader(void *arg)
{
	struct hold *h = arg;
	char c;
	int64_t r = rl_coro_fs_read(h->rfd, &c, 1, -1);

	h->res[h->held_done++] = r;
	return r;
}

static int64_t late_writer(void *arg)
{
	struct hold *h = arg;

	h->late_ran = true;
	/* Lets the held readers go: one byte each. */
	return rl_coro_fs_write(h->wfd, "ab", 2, -1);
}

static void guard_fired(rl_timer *t, int status)
{
	struct hold *h = t->data;

	if (status == 0 && !h->late_ran) {
		h->guard = true;
		/* Unblocks the readers so that the test ends and fails. */
		if (write(h->wfd, "ab", 2) != 2)
			abort();
	}
}

BACKEND_TEST(coro_pacing, idle_waiters_do_not_hold_a_start_for_good)
{
	struct rl_coro_ctx_options opt = { .start_window = 2 };
	struct hold h = { 0 };
	struct rl_coro_ctx_stats ss;
	rl_timer guard;
	rl_coro_ctx *s;
	rl_loop *loop;
	int fds[2];

	cr_assert_eq(pipe(fds), 0);
	loop = tloop(tp);
	s = tsched_opts(loop, &opt);
	h.rfd = fds[0];
	h.wfd = fds[1];
	for (int i = 0; i < 2; i++)
		cr_assert_eq(rl_coro_spawn(s, NULL, held_reader, &h, NULL), 0);
	cr_assert_eq(rl_coro_spawn(s, NULL, late_writer, &h, NULL), 0);
	rl_timer_init(&guard);
	guard.data = &h;
	cr_assert_eq(rl_timer_start(loop, &guard, 10000, 0, guard_fired), 0);
	/* The guard keeps the loop alive; stop it once everything ran. */
	while (h.held_done < 2)
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
	rl_timer_stop(loop, &guard);
	trun(loop);
	cr_assert(!h.guard,
		  "the coroutine spawned after the window filled "
		  "did not start while the window's coroutines waited");
	cr_assert(h.late_ran);
	rl_coro_ctx_stats(s, &ss);
	cr_assert_eq(ss.unpaced, 1, "the late start went through unpaced");
	cr_assert_eq(h.res[0], 1);
	cr_assert_eq(h.res[1], 1);
	tsched_close(s);
	tclose(loop);
	close(fds[0]);
	close(fds[1]);
}

/* The busy variant: two coroutines bounce a byte between two pipes, so a
 * request of the window completes all the time and the next one is
 * always submitted before the scheduler looks at its put-off starts. */
struct bounce {
	int in, out;
	struct hold *h;
};

enum { BOUNCE_CAP = 2000000 };

static int64_t bouncer(void *arg)
{
	struct bounce *b = arg;
	char c;

	for (;;) {
		int64_t r = rl_coro_fs_read(b->in, &c, 1, -1);

		if (r != 1)
			return r;
		if (c == 'q') { /* pass the stop on, then stop */
			rl_coro_fs_write(b->out, "q", 1, -1);
			return 0;
		}
		b->h->rounds++;
		if (b->h->late_ran || b->h->rounds >= BOUNCE_CAP)
			c = 'q';
		if (rl_coro_fs_write(b->out, &c, 1, -1) != 1)
			return -EIO;
		if (c == 'q')
			return 0;
	}
}

static int64_t late_flag(void *arg)
{
	((struct hold *)arg)->late_ran = true;
	return 0;
}

BACKEND_TEST(coro_pacing, busy_waiters_do_not_hold_a_start_for_good,
	     .timeout = 120)
{
	struct rl_coro_ctx_options opt = { .start_window = 2 };
	struct hold h = { 0 };
	struct bounce b[2];
	rl_coro_ctx *s;
	rl_loop *loop;
	int p1[2], p2[2];

	cr_assert_eq(pipe(p1), 0);
	cr_assert_eq(pipe(p2), 0);
	loop = tloop(tp);
	s = tsched_opts(loop, &opt);
	b[0] = (struct bounce){ .in = p1[0], .out = p2[1], .h = &h };
	b[1] = (struct bounce){ .in = p2[0], .out = p1[1], .h = &h };
	cr_assert_eq(write(p1[1], "x", 1), 1);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(rl_coro_spawn(s, NULL, bouncer, &b[i], NULL), 0);
	cr_assert_eq(rl_coro_spawn(s, NULL, late_flag, &h, NULL), 0);
	trun(loop);
	cr_assert(h.late_ran);
	cr_assert_lt(h.rounds, BOUNCE_CAP,
		     "the coroutine spawned after the window filled started "
		     "only when the bouncing stopped");
	tsched_close(s);
	tclose(loop);
	for (int i = 0; i < 2; i++) {
		close(p1[i]);
		close(p2[i]);
	}
}
