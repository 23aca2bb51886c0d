/* SPDX-License-Identifier: MIT */
/* coro_helpers.h - what the coroutine test files share. */
#ifndef RL_TEST_CORO_HELPERS_H
#define RL_TEST_CORO_HELPERS_H

#include "coro.h"
#include "helpers.h"

/* A scheduler with opt (may be NULL). */
static inline rl_coro_sched *tsched_opts(rl_loop *loop,
					 const struct rl_coro_sched_options *opt)
{
	rl_coro_sched *s = NULL;

	cr_assert_eq(rl_coro_sched_open(loop, &s, opt), 0);
	return s;
}

static inline rl_coro_sched *tsched(rl_loop *loop)
{
	return tsched_opts(loop, NULL);
}

/* Checks no coroutine is left alive, then closes the scheduler. */
static inline void tsched_close(rl_coro_sched *s)
{
	struct rl_coro_sched_stats st;

	rl_coro_sched_stats(s, &st);
	cr_assert_eq(st.alive, 0, "%zu coroutines still alive", st.alive);
	cr_assert_eq(rl_coro_sched_close(s), 0);
}

#endif
