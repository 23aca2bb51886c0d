/* SPDX-License-Identifier: MIT */
/*
 * test_promise.c - the promise core: then/catch/finally, adoption, double
 * settles, reaction timing, the microtask order against JavaScript's, a
 * million-link chain on a small stack, and what happens at loop close.
 * Every test ends with the loop closed and no promise alive.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "promise_helpers.h"
#include "ringloop/promise.h"

/* The log the reactions write, checked against a written expectation. */
static const char *logv[64];
static int nlog;

static void log_it(struct rl_outcome *o, void *arg)
{
	(void)o;
	cr_assert_lt(nlog, 64);
	logv[nlog++] = arg;
}

static void check_log(const char *const *want, int n)
{
	char got[1024] = "", exp[1024] = "";

	for (int i = 0; i < nlog; i++)
		snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s ",
			 logv[i]);
	for (int i = 0; i < n; i++)
		snprintf(exp + strlen(exp), sizeof(exp) - strlen(exp), "%s ",
			 want[i]);
	cr_assert_str_eq(got, exp);
}

struct seen {
	int ok, err;
	int last_err;
	int64_t last;
	rl_promise_ctx *ctx;
};

static void add_one(struct rl_outcome *o, void *arg)
{
	struct seen *s = arg;

	s->ok++;
	s->last = o->value.i;
	o->value.i++;
}

static void note_err(struct rl_outcome *o, void *arg)
{
	struct seen *s = arg;

	s->err++;
	s->last_err = o->reason;
}

/* Catches: records the error and recovers with value 100. */
static void recover(struct rl_outcome *o, void *arg)
{
	note_err(o, arg);
	o->value = V(100);
}

static void rethrow(struct rl_outcome *o, void *arg)
{
	note_err(o, arg);
	o->err = o->reason;
}

static void throw_eio(struct rl_outcome *o, void *arg)
{
	struct seen *s = arg;

	s->ok++;
	o->err = -EIO;
}

CORE_TEST(promise, then_chain_values)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct seen s = { 0 };
	rl_promise *p = rl_promise_resolved(ctx, V(1));

	for (int i = 0; i < 10; i++)
		p = rl_then(p, add_one, note_err, &s);
	/* Reactions never run inside then(), even on a settled promise. */
	cr_assert_eq(s.ok, 0);
	texpect(p, RL_PROMISE_PENDING, 0, 0);
	trun(loop);
	cr_assert_eq(s.ok, 10);
	cr_assert_eq(s.err, 0);
	texpect(p, RL_PROMISE_FULFILLED, 0, 11);
	rl_promise_unref(p);
	tend(loop, ctx);
}

CORE_TEST(promise, error_propagates_through_chain)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct seen s = { 0 }, c = { 0 }, after = { 0 };
	rl_promise *p = rl_promise_rejected(ctx, -ENOENT);

	/* Three links without an error handler pass the rejection on. */
	p = rl_then(p, add_one, NULL, &s);
	p = rl_then(p, add_one, NULL, &s);
	p = rl_then(p, add_one, NULL, &s);
	p = rl_catch(p, rethrow, &c);
	p = rl_catch(p, recover, &c);
	p = rl_then(p, add_one, note_err, &after);
	trun(loop);
	cr_assert_eq(s.ok, 0);
	cr_assert_eq(c.err, 2);
	cr_assert_eq(c.last_err, -ENOENT);
	cr_assert_eq(after.ok, 1);
	cr_assert_eq(after.last, 100);
	texpect(p, RL_PROMISE_FULFILLED, 0, 101);
	rl_promise_unref(p);
	tend(loop, ctx);
}

CORE_TEST(promise, throw_in_then_rejects)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct seen t = { 0 }, s = { 0 }, c = { 0 };
	rl_promise *p = rl_promise_resolved(ctx, V(5));

	p = rl_then(p, throw_eio, NULL, &t);
	p = rl_then(p, add_one, NULL, &s);
	p = rl_catch(p, note_err, &c);
	trun(loop);
	cr_assert_eq(t.ok, 1);
	cr_assert_eq(s.ok, 0);
	cr_assert_eq(c.err, 1);
	cr_assert_eq(c.last_err, -EIO);
	/* A catch handler that returns normally recovers, as in JavaScript,
	 * here with the value the rejection carried. */
	texpect(p, RL_PROMISE_FULFILLED, 0, 5);
	rl_promise_unref(p);
	tend(loop, ctx);
}

static void fin_count(struct rl_outcome *o, void *arg)
{
	struct seen *s = arg;

	s->ok++;
	s->last_err = o->reason;
	/* A finally handler changing the value changes nothing. */
	o->value = V(-1);
}

static void fin_throw(struct rl_outcome *o, void *arg)
{
	(void)arg;
	o->err = -EPIPE;
}

static void fin_adopt_rejected(struct rl_outcome *o, void *arg)
{
	o->adopt = rl_promise_rejected(arg, -EXDEV);
}

CORE_TEST(promise, finally_passes_through)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct seen f1 = { 0 }, f2 = { 0 };
	rl_promise *a, *b, *c, *d;

	a = rl_finally(rl_promise_resolved(ctx, V(42)), fin_count, &f1);
	b = rl_finally(rl_promise_rejected(ctx, -EACCES), fin_count, &f2);
	c = rl_finally(rl_promise_resolved(ctx, V(1)), fin_throw, NULL);
	d = rl_finally(rl_promise_resolved(ctx, V(1)), fin_adopt_rejected, ctx);
	trun(loop);
	cr_assert_eq(f1.ok, 1);
	cr_assert_eq(f1.last_err, 0);
	cr_assert_eq(f2.ok, 1);
	cr_assert_eq(f2.last_err, -EACCES);
	texpect(a, RL_PROMISE_FULFILLED, 0, 42);
	texpect(b, RL_PROMISE_REJECTED, -EACCES, 0);
	texpect(c, RL_PROMISE_REJECTED, -EPIPE, 0);
	texpect(d, RL_PROMISE_REJECTED, -EXDEV, 0);
	rl_promise_unref(a);
	rl_promise_unref(b);
	rl_promise_unref(c);
	rl_promise_unref(d);
	tend(loop, ctx);
}

/* finally waits for the promise its handler returns (here: a timer). */
static void fin_sleep(struct rl_outcome *o, void *arg)
{
	o->adopt = rl_promise_sleep(arg, 5);
}

CORE_TEST(promise, finally_waits_for_adopted)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise *p;
	uint64_t t0 = rl_now_ms(loop);

	p = rl_finally(rl_promise_resolved(ctx, V(9)), fin_sleep, ctx);
	trun(loop);
	cr_assert_geq(rl_now_ms(loop) - t0, 5);
	texpect(p, RL_PROMISE_FULFILLED, 0, 9);
	rl_promise_unref(p);
	tend(loop, ctx);
}

static void add_one_quiet(struct rl_outcome *o, void *arg)
{
	(void)arg;
	o->value.i++;
}

static void adopt_sleep(struct rl_outcome *o, void *arg)
{
	o->adopt = rl_then(rl_promise_sleep(arg, 1), add_one_quiet, NULL, NULL);
}

static void adopt_resolved(struct rl_outcome *o, void *arg)
{
	o->adopt = rl_promise_resolved(arg, V(o->value.i * 2));
}

static void adopt_rejected(struct rl_outcome *o, void *arg)
{
	o->adopt = rl_promise_rejected(arg, -ESRCH);
}

CORE_TEST(promise, adoption)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise *a, *b, *c, *m, *n;

	/* A reaction returning a pending promise: the derived promise
	 * follows it (sleep fulfils with 0, the then adds one). */
	a = rl_then(rl_promise_resolved(ctx, V(7)), adopt_sleep, NULL, ctx);
	b = rl_then(rl_promise_resolved(ctx, V(7)), adopt_resolved, NULL, ctx);
	c = rl_then(rl_promise_resolved(ctx, V(7)), adopt_rejected, NULL, ctx);
	/* The program's own adoption, and an adopted promise settled later. */
	m = rl_promise_new(ctx);
	n = rl_promise_new(ctx);
	cr_assert_eq(rl_promise_adopt(m, rl_promise_ref(n)), 0);
	cr_assert_eq(rl_promise_resolve(m, V(1)), -EALREADY);
	cr_assert_eq(rl_promise_adopt(m, rl_promise_resolved(ctx, V(1))),
		     -EALREADY);
	m = rl_then(m, add_one_quiet, NULL, NULL);
	trun(loop);
	texpect(m, RL_PROMISE_PENDING, 0, 0);
	cr_assert_eq(rl_promise_resolve(n, V(30)), 0);
	trun(loop);
	texpect(a, RL_PROMISE_FULFILLED, 0, 1);
	texpect(b, RL_PROMISE_FULFILLED, 0, 14);
	texpect(c, RL_PROMISE_REJECTED, -ESRCH, 0);
	texpect(m, RL_PROMISE_FULFILLED, 0, 31);
	rl_promise_unref(a);
	rl_promise_unref(b);
	rl_promise_unref(c);
	rl_promise_unref(m);
	rl_promise_unref(n);
	tend(loop, ctx);
}

CORE_TEST(promise, double_settle_ignored)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct seen s = { 0 }, e = { 0 };
	rl_promise *p = rl_promise_new(ctx), *d;

	d = rl_then(rl_promise_ref(p), add_one, note_err, &s);
	cr_assert_eq(rl_promise_resolve(p, V(3)), 0);
	cr_assert_eq(s.ok, 0, "reaction ran inside resolve");
	cr_assert_eq(rl_promise_resolve(p, V(4)), -EALREADY);
	cr_assert_eq(rl_promise_reject(p, -EIO), -EALREADY);
	cr_assert_eq(rl_promise_reject(p, 5), -EINVAL);
	/* Only promises from rl_promise_new are the program's to settle. */
	cr_assert_eq(rl_promise_resolve(d, V(1)), -EPERM);
	trun(loop);
	cr_assert_eq(s.ok, 1);
	cr_assert_eq(s.err, 0);
	cr_assert_eq(s.last, 3);
	texpect(p, RL_PROMISE_FULFILLED, 0, 3);
	texpect(d, RL_PROMISE_FULFILLED, 0, 4);
	cr_assert_eq(rl_promise_reject(p, -EIO), -EALREADY);
	rl_promise_unref(p);
	rl_promise_unref(d);

	p = rl_promise_new(ctx);
	d = rl_catch(rl_promise_ref(p), note_err, &e);
	cr_assert_eq(rl_promise_reject(p, -ENOSPC), 0);
	cr_assert_eq(rl_promise_resolve(p, V(1)), -EALREADY);
	trun(loop);
	cr_assert_eq(e.err, 1);
	cr_assert_eq(e.last_err, -ENOSPC);
	rl_promise_unref(p);
	rl_promise_unref(d);
	tend(loop, ctx);
}

/* Promises nothing can settle any more are freed with their reactions,
 * which never run. */
CORE_TEST(promise, dropped_pending_freed)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct seen s = { 0 };
	rl_promise *p = rl_promise_new(ctx), *q;

	q = rl_then(rl_promise_ref(p), add_one, note_err, &s);
	for (int i = 0; i < 100; i++)
		q = rl_then(q, add_one, note_err, &s);
	rl_promise_unref(q);
	cr_assert_eq(rl_promise_ctx_live(ctx), 102);
	rl_promise_unref(p);
	cr_assert_eq(rl_promise_ctx_live(ctx), 0);
	trun(loop);
	cr_assert_eq(s.ok + s.err, 0);
	tend(loop, ctx);
}

/* A chain the program dropped still runs to the end. */
BACKEND_TEST(promise, dropped_chain_still_runs)
{
	const char *path = tfile("drop", 12);
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct seen s = { 0 };
	char buf[64] = { 0 }; /* io_uring writes are invisible to valgrind */

	rl_promise_unref(
		rl_then(rl_promise_fs_read_file(ctx, path, buf, sizeof(buf)),
			add_one, note_err, &s));
	trun(loop);
	cr_assert_eq(s.ok, 1);
	cr_assert_eq(s.last, 12);
	tcheck("drop", buf, 12);
	tend(loop, ctx);
}

static void sub_cb(rl_promise *p, void *arg)
{
	struct seen *s = arg;
	struct rl_settlement r;

	s->ok++;
	rl_promise_result(p, &r);
	s->last = r.value.i;
	rl_promise_unref(p);
}

CORE_TEST(promise, subscribe)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct seen s = { 0 };
	rl_promise *p = rl_promise_new(ctx);

	cr_assert_eq(rl_promise_subscribe(rl_promise_ref(p), sub_cb, &s), 0);
	cr_assert_eq(rl_promise_subscribe(rl_promise_resolved(ctx, V(8)),
					  sub_cb, &s),
		     0);
	cr_assert_eq(s.ok, 0);
	trun(loop);
	cr_assert_eq(s.ok, 1);
	cr_assert_eq(s.last, 8);
	rl_promise_resolve(p, V(6));
	rl_promise_unref(p);
	trun(loop);
	cr_assert_eq(s.ok, 2);
	cr_assert_eq(s.last, 6);
	cr_assert_eq(rl_promise_subscribe(NULL, sub_cb, &s), -EINVAL);
	tend(loop, ctx);
}

/*
 * The microtask order of this JavaScript program (run with node 18+ to
 * regenerate the expectation):
 *
 *	const log = [], L = (s) => () => { log.push(s); };
 *	const a = Promise.resolve(1), b = Promise.reject(-5);
 *	let resolveC; const c = new Promise(r => resolveC = r);
 *	a.then(L('a1')).then(L('a2')).then(L('a3')).then(L('a4'));
 *	b.catch(L('b1')).then(L('b2'));
 *	a.finally(L('af')).then(L('af2'));
 *	b.finally(L('bf')).catch(L('bf2'));
 *	a.then(() => { log.push('ad'); return Promise.resolve(7); })
 *	 .then(L('ad2'));
 *	Promise.all([a, c]).then(L('all'));
 *	Promise.race([c, b]).catch(L('race'));
 *	Promise.any([b, c]).then(L('any'));
 *	Promise.allSettled([a, b]).then(L('settled'));
 *	c.then(L('c1'));
 *	a.then(() => { log.push('resolveC'); resolveC(3); });
 */
static rl_promise *order_c;

static void log_adopt(struct rl_outcome *o, void *arg)
{
	log_it(o, "ad");
	o->adopt = rl_promise_resolved(arg, V(7));
}

static void log_resolve_c(struct rl_outcome *o, void *arg)
{
	(void)arg;
	log_it(o, "resolveC");
	cr_assert_eq(rl_promise_resolve(order_c, V(3)), 0);
}

#define R(x)	rl_promise_ref(x)
#define DROP(x) rl_promise_unref(x)

CORE_TEST(promise, microtask_order_matches_javascript)
{
	static const char *const want[] = {
		"a1",  "b1",  "af",   "bf",	 "ad",	"resolveC",
		"a2",  "b2",  "race", "settled", "c1",	"a3",
		"all", "any", "a4",   "af2",	 "bf2", "ad2",
	};
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise *a = rl_promise_resolved(ctx, V(1));
	rl_promise *b = rl_promise_rejected(ctx, -5);
	rl_promise *c = rl_promise_new(ctx), *v[2], *p;

	nlog = 0;
	order_c = c;
	p = rl_then(R(a), log_it, NULL, "a1");
	p = rl_then(p, log_it, NULL, "a2");
	p = rl_then(p, log_it, NULL, "a3");
	DROP(rl_then(p, log_it, NULL, "a4"));
	DROP(rl_then(rl_catch(R(b), log_it, "b1"), log_it, NULL, "b2"));
	DROP(rl_then(rl_finally(R(a), log_it, "af"), log_it, NULL, "af2"));
	DROP(rl_catch(rl_finally(R(b), log_it, "bf"), log_it, "bf2"));
	DROP(rl_then(rl_then(R(a), log_adopt, NULL, ctx), log_it, NULL, "ad2"));
	v[0] = R(a), v[1] = R(c);
	DROP(rl_then(rl_all(ctx, v, 2), log_it, NULL, "all"));
	v[0] = R(c), v[1] = R(b);
	DROP(rl_catch(rl_race(ctx, v, 2), log_it, "race"));
	v[0] = R(b), v[1] = R(c);
	DROP(rl_then(rl_any(ctx, v, 2), log_it, NULL, "any"));
	v[0] = R(a), v[1] = R(b);
	DROP(rl_then(rl_all_settled(ctx, v, 2), log_it, NULL, "settled"));
	DROP(rl_then(R(c), log_it, NULL, "c1"));
	DROP(rl_then(R(a), log_resolve_c, NULL, NULL));
	cr_assert_eq(nlog, 0);
	trun(loop);
	check_log(want, sizeof(want) / sizeof(want[0]));
	DROP(a);
	DROP(b);
	DROP(c);
	tend(loop, ctx);
}

/*
 * A million-link then-chain on a thread with a 256 KiB stack: with a
 * reaction that recursed into the next one, this would overflow at once.
 * It runs on its own thread, so the assertions wait for the main thread.
 */
#define CHAIN_LINKS 1000000

struct chain {
	const struct tp *tp;
	int open_err;
	int64_t result;
	int state;
	int runs;
	size_t live_before, live_after;
	uint64_t ms;
};

static void count_link(struct rl_outcome *o, void *arg)
{
	(void)arg;
	o->value.i++;
}

static void *chain_thread(void *arg)
{
	struct chain *ch = arg;
	struct rl_options opt;
	struct rl_settlement r = { 0, { 0, NULL } };
	rl_promise_ctx *ctx;
	rl_promise *first, *p;
	rl_loop *loop;
	uint64_t t0;

	rl_options_init(&opt);
	opt.backend = ch->tp->backend;
	opt.flags = ch->tp->flags;
	ch->open_err = rl_loop_open(&loop, &opt);
	if (ch->open_err)
		return NULL;
	rl_promise_ctx_open(loop, &ctx);
	t0 = rl_now_ms(loop);
	first = rl_promise_new(ctx);
	p = rl_promise_ref(first);
	for (int i = 0; i < CHAIN_LINKS; i++)
		p = rl_then(p, count_link, NULL, NULL);
	ch->live_before = rl_promise_ctx_live(ctx);
	rl_promise_resolve(first, (struct rl_value){ 0, NULL });
	rl_promise_unref(first);
	ch->runs = rl_run(loop, RL_RUN_DEFAULT);
	ch->state = rl_promise_result(p, &r);
	ch->result = r.value.i;
	rl_promise_unref(p);
	ch->live_after = rl_promise_ctx_live(ctx);
	rl_run(loop, RL_RUN_NOWAIT);
	ch->ms = rl_now_ms(loop) - t0;
	rl_promise_ctx_close(ctx);
	rl_loop_close(loop);
	return NULL;
}

/* The microtask queue is the same on every backend, and a million links
 * take a while under ASan, so this runs once, on the default backend. */
Test(promise, million_link_chain_constant_stack)
{
	static const struct tp deflt = { RL_BACKEND_AUTO, 0, "auto" };
	struct chain ch = { .tp = &deflt };
	pthread_attr_t attr;
	pthread_t t;

	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	cr_assert_eq(pthread_create(&t, &attr, chain_thread, &ch), 0);
	pthread_join(t, NULL);
	pthread_attr_destroy(&attr);
	cr_assert_eq(ch.open_err, 0, "%s", rl_strerror(ch.open_err));
	cr_assert_eq(ch.live_before, CHAIN_LINKS + 1);
	cr_assert_geq(ch.runs, CHAIN_LINKS);
	cr_assert_eq(ch.state, RL_PROMISE_FULFILLED);
	cr_assert_eq(ch.result, CHAIN_LINKS);
	cr_assert_eq(ch.live_after, 0);
	cr_log_info("%d-link chain built and run in %lu ms", CHAIN_LINKS,
		    (unsigned long)ch.ms);
}

/* Closing the loop with requests in flight: they reject with -ECANCELED,
 * the chains behind them run during the close (a reaction there may even
 * start a request: it is refused with -ECANCELED), and the context goes
 * with the loop, with whatever promises the program still holds: under
 * ASan, nothing leaks. */
static void start_another(struct rl_outcome *o, void *arg)
{
	struct seen *s = arg;
	rl_promise_ctx *ctx = s->ctx;
	rl_promise *again;

	note_err(o, arg);
	again = rl_promise_fs_read_file(ctx, "/etc/hostname", NULL, 0);
	cr_assert_eq(rl_promise_result(again, NULL), RL_PROMISE_REJECTED);
	rl_promise_unref(again);
}

BACKEND_TEST(promise, loop_close_rejects_pending)
{
	const char *path = tfile("close", 12);
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct seen s = { 0 }, t = { .ctx = ctx };
	char buf[4][64] = { { 0 } };
	rl_promise *keep, *sleepy;

	for (int i = 0; i < 4; i++)
		rl_promise_unref(rl_catch(
			rl_then(rl_promise_fs_read_file(ctx, path, buf[i], 64),
				add_one, NULL, &s),
			note_err, &s));
	sleepy = rl_then(rl_promise_sleep(ctx, 100000), add_one, start_another,
			 &t);
	keep = rl_promise_new(ctx);
	/* Requests and timers in flight: the context cannot close yet. */
	cr_assert_eq(rl_promise_ctx_close(ctx), -EBUSY);
	tclose(loop); /* closes the context; sleepy and keep go with it */
	/* Read files either completed before the close or were cancelled. */
	cr_assert_eq(s.ok + s.err, 4);
	cr_assert_eq(t.ok, 0);
	cr_assert_eq(t.err, 1);
	cr_assert_eq(t.last_err, -ECANCELED);
	(void)sleepy;
	(void)keep;
}

/*
 * Closing the context from inside one of its own reactions, with promises
 * alive and the reaction's own record still in use: -EBUSY, nothing
 * freed. The loop's close closes the context afterwards.
 */
struct self_close {
	rl_promise_ctx *ctx;
	int calls;
	int close_ret;
};

static void close_in_reaction(struct rl_outcome *o, void *arg)
{
	struct self_close *sc = arg;

	(void)o;
	sc->calls++;
	sc->close_ret = rl_promise_ctx_close(sc->ctx);
}

BACKEND_TEST(promise, close_from_own_reaction_is_ebusy)
{
	const char *path = tfile("selfclose", 12);
	struct self_close sc = { 0 };
	char buf[64];
	rl_loop *loop = tloop(tp);
	rl_promise *p;

	sc.ctx = topen(loop);
	p = rl_then(rl_promise_fs_read_file(sc.ctx, path, buf, sizeof(buf)),
		    close_in_reaction, NULL, &sc);
	p = rl_then(p, NULL, NULL, NULL);
	rl_promise_unref(p);
	trun(loop);
	cr_assert_eq(sc.calls, 1);
	cr_assert_eq(sc.close_ret, -EBUSY);
	tclose(loop); /* closes the context; ASan checks nothing leaks */
}

/* rl_strerror() knows the promise layer's own code, and describes errno
 * codes as strerror() does (no ringloop meaning pinned on -EBUSY). */
CORE_TEST(promise, strerror_of_every_layer)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);

	cr_assert(strstr(rl_strerror(RL_EAGGREGATE), "reject") != NULL,
		  "RL_EAGGREGATE: %s", rl_strerror(RL_EAGGREGATE));
	cr_assert_str_eq(rl_strerror(-EBUSY), strerror(EBUSY));
	cr_assert_str_eq(rl_strerror(-EFBIG), strerror(EFBIG));
	cr_assert_str_eq(rl_strerror(-ECANCELED), strerror(ECANCELED));
	cr_assert_str_eq(rl_strerror(-EINVAL), strerror(EINVAL));
	cr_assert(strstr(rl_strerror(RL_EUSER - 5), "-200005") != NULL,
		  "an unknown code says its number: %s",
		  rl_strerror(RL_EUSER - 5));
	cr_assert_eq(rl_promise_ctx_close(ctx), 0);
	tclose(loop);
}
