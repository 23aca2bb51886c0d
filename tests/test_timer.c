/* SPDX-License-Identifier: MIT */
/* test_timer.c - one-shot and repeating timers, order, cancel, restart. */
#include <errno.h>

#include "helpers.h"

struct tlog {
	int order[32];
	int n;
	int status[32];
};

static struct tlog *g_log;

static void log_cb(rl_timer *t, int status)
{
	g_log->status[g_log->n] = status;
	g_log->order[g_log->n++] = (int)(intptr_t)t->data;
}

BACKEND_TEST(timer, fire_in_deadline_then_start_order)
{
	struct tlog log = { 0 };
	rl_timer t[4] = { 0 };
	rl_loop *loop = tloop(tp);

	g_log = &log;
	for (int i = 0; i < 4; i++)
		t[i].data = (void *)(intptr_t)i;
	cr_assert_eq(rl_timer_start(loop, &t[0], 30, 0, log_cb), 0);
	cr_assert_eq(rl_timer_start(loop, &t[1], 10, 0, log_cb), 0);
	cr_assert_eq(rl_timer_start(loop, &t[2], 20, 0, log_cb), 0);
	cr_assert_eq(rl_timer_start(loop, &t[3], 10, 0, log_cb), 0);
	cr_assert_eq(rl_timer_start(loop, &t[3], 10, 0, log_cb), -EBUSY);
	cr_assert_eq(log.n, 0);
	trun(loop);
	cr_assert_eq(log.n, 4);
	cr_assert_eq(log.order[0], 1);
	cr_assert_eq(log.order[1], 3);
	cr_assert_eq(log.order[2], 2);
	cr_assert_eq(log.order[3], 0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(log.status[i], 0);
	tclose(loop);
}

static int repeats;

static void repeat_cb(rl_timer *t, int status)
{
	if (status == -ECANCELED) {
		repeats += 1000;
		return;
	}
	if (++repeats == 3)
		cr_assert_eq(rl_timer_cancel(t->data, t), 0);
}

BACKEND_TEST(timer, repeat_then_cancel_from_callback)
{
	rl_timer t = { 0 };
	rl_loop *loop = tloop(tp);

	repeats = 0;
	t.data = loop;
	cr_assert_eq(rl_timer_start(loop, &t, 1, 2, repeat_cb), 0);
	trun(loop);
	cr_assert_eq(repeats, 1003, "3 fires and one -ECANCELED, got %d",
		     repeats);
	cr_assert_eq(rl_timer_cancel(loop, &t), -ENOENT);
	tclose(loop);
}

static int restarts;

static void restart_cb(rl_timer *t, int status)
{
	cr_assert_eq(status, 0);
	if (++restarts < 5)
		cr_assert_eq(rl_timer_start(t->data, t, 0, 0, restart_cb), 0);
}

BACKEND_TEST(timer, restart_from_own_callback)
{
	rl_timer t = { 0 };
	rl_loop *loop = tloop(tp);

	restarts = 0;
	t.data = loop;
	cr_assert_eq(rl_timer_start(loop, &t, 0, 0, restart_cb), 0);
	/* A 0 ms restart waits for the next pass over the timers: ONCE makes
	 * at most two (before and after its one wait), so it cannot spin. */
	int ran = rl_run(loop, RL_RUN_ONCE);

	cr_assert(ran >= 1 && ran <= 2, "ran %d", ran);
	cr_assert_eq(restarts, ran);
	trun(loop);
	cr_assert_eq(restarts, 5);
	tclose(loop);
}

BACKEND_TEST(timer, cancel_runs_callback_later)
{
	struct tlog log = { 0 };
	rl_timer t = { .data = (void *)(intptr_t)7 };
	rl_loop *loop = tloop(tp);

	g_log = &log;
	cr_assert_eq(rl_timer_start(loop, &t, 100000, 0, log_cb), 0);
	cr_assert_eq(rl_timer_cancel(loop, &t), 0);
	cr_assert_eq(log.n, 0, "cancel must not run the callback inline");
	cr_assert_eq(rl_timer_cancel(loop, &t), -ENOENT);
	trun(loop);
	cr_assert_eq(log.n, 1);
	cr_assert_eq(log.status[0], -ECANCELED);
	cr_assert_eq(log.order[0], 7);
	tclose(loop);
}

BACKEND_TEST(timer, close_cancels_pending_timers)
{
	struct tlog log = { 0 };
	rl_timer t[3] = { { .data = (void *)(intptr_t)0 },
			  { .data = (void *)(intptr_t)1 },
			  { .data = (void *)(intptr_t)2 } };
	rl_loop *loop = tloop(tp);

	g_log = &log;
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rl_timer_start(loop, &t[i], 60000, 0, log_cb), 0);
	tclose(loop);
	cr_assert_eq(log.n, 3);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(log.status[i], -ECANCELED);
}

BACKEND_TEST(timer, bad_arguments)
{
	rl_timer t = { 0 };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_timer_start(loop, &t, 1, 0, NULL), -EINVAL);
	cr_assert_eq(rl_timer_start(loop, NULL, 1, 0, log_cb), -EINVAL);
	cr_assert_eq(rl_timer_start(loop, &t, UINT64_MAX, 0, log_cb), -EINVAL);
	cr_assert_eq(rl_run(loop, RL_RUN_DEFAULT), 0);
	tclose(loop);
}
