/* SPDX-License-Identifier: MIT */
/*
 * test_coro_fpctl.c - the floating-point control state through the
 * scheduler: each coroutine keeps its own rounding mode (and, on x86-64,
 * its x87 precision), and the loop thread keeps the one rl_run() or
 * rl_loop_close() was called with: both sides' control words are saved
 * and restored at every switch (coro.c).
 */
#include <errno.h>
#include <fenv.h>
#include <stdint.h>
#include <stdlib.h>

#include "coro_helpers.h"

#if defined(__x86_64__)
static uint16_t x87_cw(void)
{
	uint16_t cw;

	__asm__ volatile("fnstcw %0" : "=m"(cw));
	return cw;
}

static void x87_set_cw(uint16_t cw)
{
	__asm__ volatile("fldcw %0" : : "m"(cw));
}

static unsigned sse_rounding(void)
{
	uint32_t mx;

	__asm__ volatile("stmxcsr %0" : "=m"(mx));
	return (mx >> 13) & 3;
}

/* x87 precision control, bits 8-9: 0 = single, 3 = extended. */
#define PC_MASK	  0x0300u
#define PC_SINGLE 0x0000u
#endif

/* Whether the whole state of this thread is mode: fegetround(), and on
 * x86-64 the x87 and SSE rounding fields separately (fesetround() sets
 * both, and the switch keeps them in two different registers). */
static bool mode_is(int mode)
{
	if (fegetround() != mode)
		return false;
#if defined(__x86_64__)
	{
		unsigned rc = mode == FE_TONEAREST  ? 0
			      : mode == FE_DOWNWARD ? 1
			      : mode == FE_UPWARD   ? 2
						    : 3;

		if (((x87_cw() >> 10) & 3) != rc || sse_rounding() != rc)
			return false;
	}
#endif
	return true;
}

/* --------------------------------------- every side keeps its own state */

struct fp_co {
	const char *path;
	int mode;
	int steps, bad;
	bool single; /* also run with x87 single precision */
};

enum { FP_ROUNDS = 20 };

static bool own_state(const struct fp_co *c)
{
	if (!mode_is(c->mode))
		return false;
#if defined(__x86_64__)
	if (c->single && (x87_cw() & PC_MASK) != PC_SINGLE)
		return false;
#endif
	return true;
}

static int64_t fp_worker(void *arg)
{
	struct fp_co *c = arg;
	char buf[64];

	fesetround(c->mode);
#if defined(__x86_64__)
	if (c->single)
		x87_set_cw((uint16_t)((x87_cw() & ~PC_MASK) | PC_SINGLE));
#endif
	for (int i = 0; i < FP_ROUNDS; i++) {
		/* Three ways back in: a request's callback, a timer's, and
		 * a microtask. */
		if (rl_coro_fs_read_file(c->path, buf, sizeof(buf)) != 16)
			c->bad++;
		c->bad += !own_state(c);
		c->steps++;
		if (rl_coro_sleep(0) != 0)
			c->bad++;
		c->bad += !own_state(c);
		c->steps++;
		if (rl_coro_yield() != 0)
			c->bad++;
		c->bad += !own_state(c);
		c->steps++;
	}
	return 0;
}

/* The loop thread's view: callbacks run with the mode rl_run() was called
 * with, whatever the coroutines switching in and out between them use. */
struct fp_cb {
	rl_loop *loop;
	rl_req req;
	const char *path;
	char buf[64];
	int calls, bad;
};

static void fp_cb_done(rl_req *req)
{
	struct fp_cb *c = req->data;

	c->calls++;
	if (req->result != 16 || !mode_is(FE_DOWNWARD))
		c->bad++;
#if defined(__x86_64__)
	if ((x87_cw() & PC_MASK) == PC_SINGLE)
		c->bad++;
#endif
	if (c->calls < 3 * FP_ROUNDS) {
		c->req.data = c;
		cr_assert_eq(rl_fs_read_file(c->loop, &c->req, c->path, c->buf,
					     sizeof(c->buf), 0, fp_cb_done),
			     0);
	}
}

BACKEND_TEST(coro_fpctl, each_side_keeps_its_own_state)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);
	const char *path = tfile("fp", 16);
	struct fp_co co[3] = {
		{ .path = path, .mode = FE_UPWARD, .single = true },
		{ .path = path, .mode = FE_TOWARDZERO },
		{ .path = path, .mode = FE_TONEAREST },
	};
	struct fp_cb cb = { .loop = loop, .path = path };
	int old = fegetround();

	/* Valgrind keeps no x87 precision: after FLDCW of single precision
	 * (0x007f), FNSTCW still reads 0x037f (extended) there. */
	co[0].single = !getenv("RL_VALGRIND");
	fesetround(FE_DOWNWARD);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rl_coro_spawn(s, NULL, fp_worker, &co[i], NULL),
			     0);
	cb.req.data = &cb;
	cr_assert_eq(rl_fs_read_file(loop, &cb.req, path, cb.buf,
				     sizeof(cb.buf), 0, fp_cb_done),
		     0);
	trun(loop);
	cr_assert(mode_is(FE_DOWNWARD), "rl_run() returned another mode");
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(co[i].steps, 3 * FP_ROUNDS, "coroutine %d", i);
		cr_assert_eq(co[i].bad, 0, "coroutine %d lost its state", i);
	}
	cr_assert_eq(cb.calls, 3 * FP_ROUNDS);
	cr_assert_eq(cb.bad, 0, "a callback ran with a coroutine's state");
	fesetround(old);
	tsched_close(s);
	tclose(loop);
}

/* ------------------------------- the resumer's state, run after run */

struct fp_sleeper {
	int mode;
	int resumes, bad;
	bool stop;
};

static int64_t fp_sleeper(void *arg)
{
	struct fp_sleeper *c = arg;

	fesetround(c->mode);
	while (!c->stop) {
		if (rl_coro_sleep(0) != 0)
			c->bad++;
		c->bad += !mode_is(c->mode);
		c->resumes++;
	}
	return 0;
}

/* A program may change its mode between two rl_run() calls: the switch
 * back from a coroutine must restore the new one, not the one the
 * previous run was called with. */
CORE_TEST(coro_fpctl, each_run_keeps_the_mode_it_was_called_with)
{
	static const int modes[] = { FE_TONEAREST, FE_UPWARD, FE_DOWNWARD,
				     FE_TONEAREST, FE_UPWARD };
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);
	struct fp_sleeper c = { .mode = FE_TOWARDZERO };
	int old = fegetround();

	cr_assert_eq(rl_coro_spawn(s, NULL, fp_sleeper, &c, NULL), 0);
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		int before = c.resumes;

		fesetround(modes[i]);
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
		/* The check means something only if the coroutine went in
		 * and out during this run. */
		cr_assert_gt(c.resumes, before, "run %zu switched nothing", i);
		cr_assert(mode_is(modes[i]),
			  "run %zu came back in another mode", i);
	}
	c.stop = true;
	trun(loop);
	cr_assert_eq(c.bad, 0);
	fesetround(old);
	tsched_close(s);
	tclose(loop);
}

/* ------------------------------------------------------------- closing */

struct fp_closed {
	int64_t slept;
	int bad;
};

static int64_t fp_long_sleeper(void *arg)
{
	struct fp_closed *c = arg;

	fesetround(FE_UPWARD);
	c->slept = rl_coro_sleep(60000);
	c->bad += !mode_is(FE_UPWARD);
	return 0;
}

/* rl_loop_close() unwinds a suspended coroutine on the loop thread; the
 * caller of rl_loop_close() gets its own mode back, not the coroutine's
 * nor the one the last rl_run() was called with. */
CORE_TEST(coro_fpctl, close_gives_the_caller_its_mode_back)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);
	struct fp_closed c = { .slept = 1 };
	int old = fegetround();

	fesetround(FE_TONEAREST);
	cr_assert_eq(rl_coro_spawn(s, NULL, fp_long_sleeper, &c, NULL), 0);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(c.slept, 1, "the coroutine did not start and sleep");
	fesetround(FE_DOWNWARD);
	tclose(loop); /* closes s too (its close hook) */
	cr_assert_eq(c.slept, -ECANCELED);
	cr_assert_eq(c.bad, 0);
	cr_assert(mode_is(FE_DOWNWARD), "close came back in another mode");
	fesetround(old);
}

/* ------------------------------------------------------ nested loops */

struct fp_nest {
	rl_loop *b;
	rl_timer t;
	bool cb_ran;
	int before, after; /* loop A's coroutine, around the callback */
	int b_resumes, bad;
};

static void nest_cb(rl_timer *t, int status);

static int64_t nest_a(void *arg)
{
	struct fp_nest *n = arg;

	fesetround(FE_TOWARDZERO);
	while (!n->cb_ran || n->after < 3) {
		if (rl_coro_sleep(0) != 0)
			n->bad++;
		n->bad += !mode_is(FE_TOWARDZERO);
		if (n->cb_ran)
			n->after++;
		else if (++n->before == 2)
			/* The callback runs after some switches. */
			cr_assert_eq(rl_timer_start(rl_coro_loop(), &n->t, 0, 0,
						    nest_cb),
				     0);
	}
	return 0;
}

static int64_t nest_b(void *arg)
{
	struct fp_nest *n = arg;

	fesetround(FE_DOWNWARD);
	for (int i = 0; i < 3; i++) {
		if (rl_coro_sleep(0) != 0)
			n->bad++;
		n->bad += !mode_is(FE_DOWNWARD);
		n->b_resumes++;
	}
	return 0;
}

/* Loop A's callback changes the mode for its own duration and runs loop B
 * inside, which switches in and out of B's coroutine. */
static void nest_cb(rl_timer *t, int status)
{
	struct fp_nest *n = t->data;

	cr_assert_eq(status, 0);
	fesetround(FE_UPWARD);
	cr_assert_geq(rl_run(n->b, RL_RUN_DEFAULT), 0);
	/* rl_run(B) gave the callback its own mode back... */
	cr_assert(mode_is(FE_UPWARD), "rl_run(B) came back in another mode");
	fesetround(FE_TONEAREST); /* ...and the callback hands A's back */
	n->cb_ran = true;
}

/* Each rl_run() gives its caller its own mode, nested or not: B's switches
 * must not restore A's mode into the callback, nor A's later switches the
 * callback's. */
CORE_TEST(coro_fpctl, nested_runs_keep_each_callers_mode)
{
	rl_loop *a = tloop(tp), *b = tloop(tp);
	rl_coro_ctx *sa = tsched(a), *sb = tsched(b);
	struct fp_nest n = { .b = b };
	int old = fegetround();

	n.t.data = &n;
	fesetround(FE_TONEAREST);
	cr_assert_eq(rl_coro_spawn(sa, NULL, nest_a, &n, NULL), 0);
	cr_assert_eq(rl_coro_spawn(sb, NULL, nest_b, &n, NULL), 0);
	trun(a);
	cr_assert(mode_is(FE_TONEAREST), "rl_run(A) came back in another mode");
	cr_assert(n.cb_ran);
	cr_assert_eq(n.before, 2);
	cr_assert_eq(n.after, 3);
	cr_assert_eq(n.b_resumes, 3);
	cr_assert_eq(n.bad, 0, "a coroutine lost its mode");
	fesetround(old);
	tsched_close(sb);
	tsched_close(sa);
	cr_assert_eq(rl_loop_close(b), 0);
	tclose(a); /* checks the fds of both */
}

/* --------------------------------------------------- exception flags */

#if defined(__x86_64__)
/* MXCSR's exception flags alone: fetestexcept() would also see the x87
 * status word, which is the thread's and not switched. */
#define SSE_IE 0x01u /* invalid */
#define SSE_ZE 0x04u /* divide by zero */
#define SSE_OE 0x08u /* overflow */
#define SSE_PE 0x20u /* inexact */

static unsigned sse_flags(void)
{
	uint32_t mx;

	__asm__ volatile("stmxcsr %0" : "=m"(mx));
	return mx & 0x3fu;
}

static void sse_clear_flags(void)
{
	uint32_t mx;

	__asm__ volatile("stmxcsr %0" : "=m"(mx));
	mx &= ~0x3fu;
	__asm__ volatile("ldmxcsr %0" : : "m"(mx));
}

struct fp_flags {
	unsigned raise; /* this coroutine's own flag */
	int checks, bad;
};

static int64_t flagger(void *arg)
{
	struct fp_flags *f = arg;
	volatile double one = 1.0, zero = 0.0, r;

	sse_clear_flags();
	r = f->raise == SSE_ZE ? one / zero : zero / zero;
	(void)r;
	for (int i = 0; i < 10; i++) {
		if (rl_coro_sleep(0) != 0 || rl_coro_yield() != 0)
			f->bad++;
		/* Its own flag, and nothing the others raised. */
		f->bad += sse_flags() != f->raise;
		f->checks++;
	}
	return 0;
}

/* Each coroutine has its own SSE exception flags, and the flags the caller
 * of rl_run() had set survive the coroutines' switches (coro.h says what
 * happens to flags raised by callbacks: they may not). */
CORE_TEST(coro_fpctl, exception_flags_are_per_context)
{
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);
	struct fp_flags f[2] = { { .raise = SSE_ZE }, { .raise = SSE_IE } };
	volatile double big = 1e308, r;

	if (getenv("RL_VALGRIND"))
		cr_skip_test("Valgrind does not track the SSE exception flags");
	for (int i = 0; i < 2; i++)
		cr_assert_eq(rl_coro_spawn(s, NULL, flagger, &f[i], NULL), 0);
	sse_clear_flags();
	r = big * 10.0; /* overflow and inexact: the caller's flags */
	(void)r;
	cr_assert_eq(sse_flags(), SSE_OE | SSE_PE);
	trun(loop);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(f[i].checks, 10);
		cr_assert_eq(f[i].bad, 0, "coroutine %d saw other flags", i);
	}
	cr_assert_eq(sse_flags(), SSE_OE | SSE_PE,
		     "the caller's flags changed: %#x", sse_flags());
	sse_clear_flags();
	tsched_close(s);
	tclose(loop);
}
#endif /* __x86_64__ */
