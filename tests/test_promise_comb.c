/* SPDX-License-Identifier: MIT */
/*
 * test_promise_comb.c - all, all_settled, any and race with JavaScript's
 * meaning (empty inputs, settled inputs, mixed order of fulfilment and
 * rejection), and the promises of loop requests. Every test ends with the
 * loop closed and no promise alive.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "promise_helpers.h"
#include "ringloop/promise.h"

static struct rl_settlement result(rl_promise *p, enum rl_promise_state st)
{
	struct rl_settlement r = { 1, { -1, NULL } };

	cr_assert_eq(rl_promise_result(p, &r), st, "state %d, want %d",
		     rl_promise_state(p), st);
	return r;
}

/* Pending promises the test settles in an order of its choosing. */
static void news(rl_promise_ctx *ctx, rl_promise **p, rl_promise **in, int n)
{
	for (int i = 0; i < n; i++) {
		p[i] = rl_promise_new(ctx);
		in[i] = rl_promise_ref(p[i]);
	}
}

static void unrefs(rl_promise **p, int n)
{
	for (int i = 0; i < n; i++)
		rl_promise_unref(p[i]);
}

BACKEND_TEST(promise_comb, all_values_in_input_order)
{
	const char *f1 = tfile("one", 12), *f2 = tfile("two", 300);
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	char b1[64] = { 0 }, b2[512] = { 0 }; /* see test_promise.c */
	rl_promise *p[3], *in[5], *all;
	struct rl_settlement r;
	struct rl_value *v;

	news(ctx, p, in, 3);
	in[3] = rl_promise_fs_read_file(ctx, f1, b1, sizeof(b1));
	in[4] = rl_promise_fs_read_file(ctx, f2, b2, sizeof(b2));
	all = rl_all(ctx, in, 5);
	/* Settled in reverse order; the values keep the input order. */
	rl_promise_resolve(p[2], V(30));
	rl_promise_resolve(p[1], V(20));
	trun(loop);
	result(all, RL_PROMISE_PENDING);
	rl_promise_resolve(p[0], V(10));
	trun(loop);
	r = result(all, RL_PROMISE_FULFILLED);
	cr_assert_eq(r.value.i, 5);
	v = r.value.p;
	cr_assert_eq(v[0].i, 10);
	cr_assert_eq(v[1].i, 20);
	cr_assert_eq(v[2].i, 30);
	cr_assert_eq(v[3].i, 12);
	cr_assert_eq(v[3].p, b1);
	cr_assert_eq(v[4].i, 300);
	cr_assert_eq(v[4].p, b2);
	tcheck("one", b1, 12);
	tcheck("two", b2, 300);
	unrefs(p, 3);
	rl_promise_unref(all);
	tend(loop, ctx);
}

CORE_TEST(promise_comb, all_rejects_with_first_rejection)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise *p[3], *in[3], *all;

	news(ctx, p, in, 3);
	all = rl_all(ctx, in, 3);
	rl_promise_resolve(p[0], V(1));
	rl_promise_reject(p[2], -EIO);
	rl_promise_reject(p[1], -ENOENT);
	trun(loop);
	cr_assert_eq(result(all, RL_PROMISE_REJECTED).err, -EIO);
	unrefs(p, 3);
	rl_promise_unref(all);
	tend(loop, ctx);
}

CORE_TEST(promise_comb, all_of_settled_inputs)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise *in[3], *all, *bad;
	struct rl_value *v;

	in[0] = rl_promise_resolved(ctx, V(1));
	in[1] = rl_promise_resolved(ctx, V(2));
	in[2] = rl_promise_resolved(ctx, V(3));
	all = rl_all(ctx, in, 3);
	/* Settled inputs still settle the combinator from microtasks. */
	result(all, RL_PROMISE_PENDING);
	in[0] = rl_promise_resolved(ctx, V(1));
	in[1] = rl_promise_rejected(ctx, -EBADF);
	in[2] = rl_promise_rejected(ctx, -EPERM);
	bad = rl_all(ctx, in, 3);
	trun(loop);
	v = result(all, RL_PROMISE_FULFILLED).value.p;
	cr_assert_eq(v[0].i + v[1].i * 10 + v[2].i * 100, 321);
	cr_assert_eq(result(bad, RL_PROMISE_REJECTED).err, -EBADF);
	rl_promise_unref(all);
	rl_promise_unref(bad);
	tend(loop, ctx);
}

CORE_TEST(promise_comb, empty_inputs)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise *all, *set, *any, *race;

	all = rl_all(ctx, NULL, 0);
	set = rl_all_settled(ctx, NULL, 0);
	any = rl_any(ctx, NULL, 0);
	race = rl_race(ctx, NULL, 0);
	/* all, all_settled and any of none settle at once. */
	cr_assert_eq(result(all, RL_PROMISE_FULFILLED).value.i, 0);
	cr_assert_eq(result(set, RL_PROMISE_FULFILLED).value.i, 0);
	cr_assert_eq(result(any, RL_PROMISE_REJECTED).err, RL_EAGGREGATE);
	trun(loop);
	/* race of none never settles. */
	result(race, RL_PROMISE_PENDING);
	rl_promise_unref(all);
	rl_promise_unref(set);
	rl_promise_unref(any);
	rl_promise_unref(race);
	tend(loop, ctx);
}

BACKEND_TEST(promise_comb, all_settled_never_rejects)
{
	const char *path = tfile("s", 12);
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise *p[2], *in[4], *set;
	struct rl_settlement *e;
	char buf[64] = { 0 }; /* io_uring writes are invisible to valgrind */

	news(ctx, p, in, 2);
	in[2] = rl_promise_fs_read_file(ctx, tpath("missing"), buf,
					sizeof(buf));
	in[3] = rl_promise_fs_read_file(ctx, path, buf, sizeof(buf));
	set = rl_all_settled(ctx, in, 4);
	rl_promise_reject(p[1], -EAGAIN);
	rl_promise_resolve(p[0], V(7));
	trun(loop);
	cr_assert_eq(result(set, RL_PROMISE_FULFILLED).value.i, 4);
	e = result(set, RL_PROMISE_FULFILLED).value.p;
	cr_assert_eq(e[0].err, 0);
	cr_assert_eq(e[0].value.i, 7);
	cr_assert_eq(e[1].err, -EAGAIN);
	cr_assert_eq(e[2].err, -ENOENT);
	cr_assert_eq(e[3].err, 0);
	cr_assert_eq(e[3].value.i, 12);
	unrefs(p, 2);
	rl_promise_unref(set);
	tend(loop, ctx);
}

CORE_TEST(promise_comb, any_first_fulfilment)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise *p[3], *in[3], *any;

	news(ctx, p, in, 3);
	any = rl_any(ctx, in, 3);
	rl_promise_reject(p[0], -EIO);
	rl_promise_resolve(p[2], V(3));
	rl_promise_resolve(p[1], V(2));
	trun(loop);
	cr_assert_eq(result(any, RL_PROMISE_FULFILLED).value.i, 3);
	unrefs(p, 3);
	rl_promise_unref(any);
	tend(loop, ctx);
}

CORE_TEST(promise_comb, any_all_rejected_aggregates_in_input_order)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise *p[3], *in[4], *any;
	struct rl_settlement r, *e;

	news(ctx, p, in, 3);
	in[3] = rl_promise_rejected(ctx, -EPERM); /* settled already */
	any = rl_any(ctx, in, 4);
	rl_promise_reject(p[2], -EIO);
	rl_promise_reject(p[0], -ENOENT);
	trun(loop);
	result(any, RL_PROMISE_PENDING);
	rl_promise_reject(p[1], -EBUSY);
	trun(loop);
	r = result(any, RL_PROMISE_REJECTED);
	cr_assert_eq(r.err, RL_EAGGREGATE);
	cr_assert_eq(r.value.i, 4);
	e = r.value.p;
	cr_assert_eq(e[0].err, -ENOENT);
	cr_assert_eq(e[1].err, -EBUSY);
	cr_assert_eq(e[2].err, -EIO);
	cr_assert_eq(e[3].err, -EPERM);
	unrefs(p, 3);
	rl_promise_unref(any);
	tend(loop, ctx);
}

CORE_TEST(promise_comb, race_first_settlement)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise *p[2], *in[2], *r1, *r2, *r3;

	news(ctx, p, in, 2);
	r1 = rl_race(ctx, in, 2);
	rl_promise_reject(p[1], -ETIMEDOUT);
	rl_promise_resolve(p[0], V(1));
	in[0] = rl_promise_sleep(ctx, 50);
	in[1] = rl_promise_resolved(ctx, V(5));
	r2 = rl_race(ctx, in, 2);
	/* A timer against a never-settling promise: the timer wins. */
	in[0] = rl_promise_new(ctx);
	in[1] = rl_promise_sleep(ctx, 1);
	r3 = rl_race(ctx, in, 2);
	trun(loop);
	cr_assert_eq(result(r1, RL_PROMISE_REJECTED).err, -ETIMEDOUT);
	cr_assert_eq(result(r2, RL_PROMISE_FULFILLED).value.i, 5);
	cr_assert_eq(result(r3, RL_PROMISE_FULFILLED).value.i, 0);
	unrefs(p, 2);
	rl_promise_unref(r1);
	rl_promise_unref(r2);
	rl_promise_unref(r3);
	tend(loop, ctx);
}

/* all()'s array outlives the all() promise when a later promise carries
 * it on: the chain holds it. */
static void pass(struct rl_outcome *o, void *arg)
{
	(void)o;
	(void)arg;
}

CORE_TEST(promise_comb, array_lives_down_the_chain)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise *in[2], *p, *outer[2];
	struct rl_value *v, *w;

	in[0] = rl_promise_resolved(ctx, V(4));
	in[1] = rl_promise_resolved(ctx, V(5));
	p = rl_then(rl_then(rl_all(ctx, in, 2), pass, NULL, NULL), NULL, NULL,
		    NULL);
	/* Nested: an all() of an all(). */
	in[0] = rl_promise_resolved(ctx, V(6));
	outer[0] = rl_all(ctx, in, 1);
	outer[1] = rl_promise_resolved(ctx, V(7));
	outer[0] = rl_all(ctx, outer, 2);
	trun(loop);
	/* Only p and outer[0] are referenced by the test now. */
	v = result(p, RL_PROMISE_FULFILLED).value.p;
	cr_assert_eq(v[0].i, 4);
	cr_assert_eq(v[1].i, 5);
	v = result(outer[0], RL_PROMISE_FULFILLED).value.p;
	w = v[0].p;
	cr_assert_eq(w[0].i, 6);
	cr_assert_eq(v[1].i, 7);
	rl_promise_unref(p);
	rl_promise_unref(outer[0]);
	tend(loop, ctx);
}

/* open -> read -> close -> stat, each step started in the reaction to the
 * previous one. */
struct fsrun {
	rl_promise_ctx *ctx;
	const char *path;
	int fd;
	char buf[64];
	struct statx stx;
	int steps;
};

static void opened(struct rl_outcome *o, void *arg)
{
	struct fsrun *f = arg;

	f->steps++;
	f->fd = (int)o->value.i;
	o->adopt = rl_promise_fs_read(f->ctx, f->fd, f->buf, sizeof(f->buf), 0);
}

static void got_data(struct rl_outcome *o, void *arg)
{
	struct fsrun *f = arg;

	f->steps++;
	cr_assert_eq(o->value.i, 20);
	cr_assert_eq(o->value.p, f->buf);
	o->adopt = rl_promise_fs_close(f->ctx, f->fd);
}

static void closed(struct rl_outcome *o, void *arg)
{
	struct fsrun *f = arg;

	f->steps++;
	o->adopt = rl_promise_fs_stat(f->ctx, f->path, &f->stx);
}

BACKEND_TEST(promise_comb, request_promises_chain)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	struct fsrun f = { .ctx = ctx, .path = tfile("chain", 20), .fd = -1 };
	rl_promise *p, *miss;
	struct rl_settlement r;
	char buf[8] = { 0 };

	p = rl_promise_fs_open(ctx, f.path, O_RDONLY, 0);
	p = rl_then(p, opened, NULL, &f);
	p = rl_then(p, got_data, NULL, &f);
	p = rl_then(p, closed, NULL, &f);
	miss = rl_promise_fs_read_file(ctx, tpath("nope"), buf, sizeof(buf));
	trun(loop);
	cr_assert_eq(f.steps, 3);
	tcheck("chain", f.buf, 20);
	r = result(p, RL_PROMISE_FULFILLED);
	cr_assert_eq(r.value.p, &f.stx);
	cr_assert_eq(f.stx.stx_size, 20);
	cr_assert_eq(result(miss, RL_PROMISE_REJECTED).err, -ENOENT);
	rl_promise_unref(p);
	rl_promise_unref(miss);
	tend(loop, ctx);
}

/* A request the loop refuses at once gives a rejected promise. */
CORE_TEST(promise_comb, submit_failure_rejects)
{
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);
	rl_promise *p = rl_promise_fs_read_file(ctx, NULL, NULL, 0);

	cr_assert_not_null(p);
	cr_assert_lt(result(p, RL_PROMISE_REJECTED).err, 0);
	rl_promise_unref(p);
	cr_assert_null(rl_then(NULL, pass, NULL, NULL));
	cr_assert_null(rl_all(ctx, (rl_promise *[]){ NULL }, 1));
	tend(loop, ctx);
}
