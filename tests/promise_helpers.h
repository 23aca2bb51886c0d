/* SPDX-License-Identifier: MIT */
/* promise_helpers.h - what the promise test files share. */
#ifndef RL_TEST_PROMISE_HELPERS_H
#define RL_TEST_PROMISE_HELPERS_H

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

#endif
