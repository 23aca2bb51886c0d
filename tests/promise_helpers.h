/* SPDX-License-Identifier: MIT */
/* promise_helpers.h - what the promise test files share. */
#ifndef RL_TEST_PROMISE_HELPERS_H
#define RL_TEST_PROMISE_HELPERS_H

#include <string.h>

#include "helpers.h"
#include "ringloop/promise.h"

static inline rl_promise_ctx *topen(rl_loop *loop)
{
	rl_promise_ctx *ctx = NULL;

	cr_assert_eq(rl_promise_ctx_open(loop, &ctx), 0);
	return ctx;
}

/* Checks no promise is left, then closes the context and the loop. */
static inline void tend(rl_loop *loop, rl_promise_ctx *ctx)
{
	cr_assert_eq(rl_promise_ctx_live(ctx), 0, "%zu promises leaked",
		     rl_promise_ctx_live(ctx));
	cr_assert_eq(rl_promise_ctx_close(ctx), 0);
	tclose(loop);
}

static inline struct rl_value V(int64_t i) {
	return (struct rl_value){ i, NULL };
}

/* Checks p's state, and its error or integer value once settled. */
static inline void
texpect(rl_promise *p, enum rl_promise_state st, int err, int64_t i)
{
	struct rl_settlement r = { 1, { -1, NULL } };

	cr_assert_eq(rl_promise_result(p, &r), st, "state %d, want %d",
		     rl_promise_state(p), st);
	if (st == RL_PROMISE_PENDING)
		return;
	cr_assert_eq(r.err, err, "err %d, want %d", r.err, err);
	if (st == RL_PROMISE_FULFILLED)
		cr_assert_eq(r.value.i, i, "value %ld, want %ld",
			     (long)r.value.i, (long)i);
}

/* What a promise settled with, seen from a subscription (twatch()). */
struct tsettled {
	int calls;
	int err;
	struct rl_value v;
};

static inline void tsettled_fn(rl_promise *p, void *arg)
{
	struct tsettled *s = arg;
	struct rl_settlement o;

	cr_assert_neq(rl_promise_result(p, &o), RL_PROMISE_PENDING);
	s->calls++;
	s->err = o.err;
	s->v = o.value;
	rl_promise_unref(p);
}

/* Subscribes s to p (which it unrefs when p settles). */
static inline void twatch(rl_promise *p, struct tsettled *s)
{
	memset(s, 0, sizeof(*s));
	cr_assert_not_null(p);
	cr_assert_eq(rl_promise_subscribe(p, tsettled_fn, s), 0);
}

#endif
