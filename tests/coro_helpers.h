/* SPDX-License-Identifier: MIT */
/* coro_helpers.h - what the coroutine test files share. */
#ifndef RL_TEST_CORO_HELPERS_H
#define RL_TEST_CORO_HELPERS_H

#include "ringloop/coro.h"
#include "helpers.h"

/* A scheduler with opt (may be NULL). */
static inline rl_coro_ctx *tsched_opts(rl_loop *loop,
				       const struct rl_coro_ctx_options *opt)
{
	rl_coro_ctx *s = NULL;

	cr_assert_eq(rl_coro_ctx_open(loop, &s, opt), 0);
	return s;
}

static inline rl_coro_ctx *tsched(rl_loop *loop)
{
	return tsched_opts(loop, NULL);
}

/* Checks no coroutine is left alive, then closes the scheduler. */
static inline void tsched_close(rl_coro_ctx *s)
{
	struct rl_coro_ctx_stats st;

	rl_coro_ctx_stats(s, &st);
	cr_assert_eq(st.alive, 0, "%zu coroutines still alive", st.alive);
	cr_assert_eq(rl_coro_ctx_close(s), 0);
}

#endif
