/* SPDX-License-Identifier: MIT */
/*
 * timer.c - timers on a binary min-heap keyed by (deadline, start order).
 *
 * The heap array grows by doubling when a timer starts and never on the
 * completion path. Equal deadlines fire in the order the timers started,
 * so a test can write down the expected order. A cancelled timer leaves the
 * heap at once and waits on a short list to run its -ECANCELED callback on
 * the next batch, never inside rl_timer_cancel().
 */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"

static bool timer_less(const rl_timer *a, const rl_timer *b)
{
	if (a->due_ns != b->due_ns)
		return a->due_ns < b->due_ns;
	return a->seq < b->seq;
}

static void heap_set(rl_loop *loop, uint32_t i, rl_timer *t)
{
	loop->heap[i] = t;
	t->index = i;
}

static void sift_up(rl_loop *loop, uint32_t i)
{
	rl_timer *t = loop->heap[i];

	while (i > 0) {
		uint32_t parent = (i - 1) / 2;

		if (!timer_less(t, loop->heap[parent]))
			break;
		heap_set(loop, i, loop->heap[parent]);
		i = parent;
	}
	heap_set(loop, i, t);
}

static void sift_down(rl_loop *loop, uint32_t i)
{
	rl_timer *t = loop->heap[i];

	for (;;) {
		uint32_t child = 2 * i + 1;

		if (child >= loop->heap_len)
			break;
		if (child + 1 < loop->heap_len &&
		    timer_less(loop->heap[child + 1], loop->heap[child]))
			child++;
		if (!timer_less(loop->heap[child], t))
			break;
		heap_set(loop, i, loop->heap[child]);
		i = child;
	}
	heap_set(loop, i, t);
}

static void heap_remove(rl_loop *loop, rl_timer *t)
{
	uint32_t i = t->index;
	rl_timer *last = loop->heap[--loop->heap_len];

	if (i == loop->heap_len)
		return;
	heap_set(loop, i, last);
	if (i > 0 && timer_less(last, loop->heap[(i - 1) / 2]))
		sift_up(loop, i);
	else
		sift_down(loop, i);
}

static int heap_insert(rl_loop *loop, rl_timer *t)
{
	if (loop->heap_len == loop->heap_cap) {
		uint32_t cap = loop->heap_cap ? loop->heap_cap * 2 : 16;
		rl_timer **h = realloc(loop->heap, cap * sizeof(*h));

		if (!h)
			return -ENOMEM;
		loop->heap = h;
		loop->heap_cap = cap;
	}
	heap_set(loop, loop->heap_len++, t);
	sift_up(loop, t->index);
	return 0;
}

int rl_timer_start(rl_loop *loop, rl_timer *timer, uint64_t timeout_ms,
		   uint64_t repeat_ms, rl_timer_cb cb)
{
	int ret;

	if (!loop || !timer || !cb)
		return -EINVAL;
	if (loop->closing)
		return -ECANCELED;
	/* Beyond ~584 years of nanoseconds the deadline would wrap. */
	if (timeout_ms > RL_TIMEOUT_MAX_MS || repeat_ms > RL_TIMEOUT_MAX_MS)
		return -EINVAL;
	/* A repeating timer is re-armed before its callback runs; the first
	 * start from that callback, which ringloop.h allows, replaces the
	 * re-arm. Any later one meets an active timer, as anywhere else. */
	if (timer == loop->timer_firing) {
		loop->timer_firing = NULL;
		if (timer->state == RL__TIMER_ACTIVE) {
			heap_remove(loop, timer);
			timer->state = RL__TIMER_IDLE;
		}
	}
	if (timer->state != RL__TIMER_IDLE)
		return -EBUSY;
	timer->cb = cb;
	timer->due_ns = rl__now(loop) + timeout_ms * 1000000u;
	timer->repeat_ns = repeat_ms * 1000000u;
	timer->seq = loop->timer_seq++;
	ret = heap_insert(loop, timer);
	if (ret < 0)
		return ret;
	timer->state = RL__TIMER_ACTIVE;
	return 0;
}

int rl_timer_cancel(rl_loop *loop, rl_timer *timer)
{
	if (!loop || !timer)
		return -EINVAL;
	if (timer->state != RL__TIMER_ACTIVE)
		return -ENOENT;
	heap_remove(loop, timer);
	timer->state = RL__TIMER_CANCELLED;
	rl__list_add_tail(&loop->cancelled, &timer->link);
	return 0;
}

int rl_timer_stop(rl_loop *loop, rl_timer *timer)
{
	if (!loop || !timer)
		return -EINVAL;
	if (timer->state == RL__TIMER_ACTIVE) {
		heap_remove(loop, timer);
		timer->state = RL__TIMER_IDLE;
		return 0;
	}
	if (timer->state != RL__TIMER_CANCELLED)
		return -ENOENT;
	rl__list_del(&timer->link);
	timer->state = RL__TIMER_IDLE;
	return 0;
}

int64_t rl__timers_next_ns(rl_loop *loop)
{
	uint64_t due, now;

	if (!loop->heap_len)
		return -1;
	due = loop->heap[0]->due_ns;
	now = rl__now(loop);
	return due <= now ? 0 : (int64_t)(due - now);
}

int rl__timers_run(rl_loop *loop)
{
	/* Timers started (or re-armed) during this pass wait for the next
	 * one, so a callback restarting itself with 0 ms cannot spin here. */
	uint64_t limit = loop->timer_seq;
	struct rl_link *link, due;
	int n = 0;

	/* Cancelled timers first: their cancel happened before this batch.
	 * Only those: a timer cancelled by one of these callbacks (one that
	 * restarts and cancels itself again, a retry written that way) waits
	 * for the next pass, as a restarted timer does, or a chain of them
	 * would keep the loop here for ever, away from its I/O. */
	rl__list_init(&due);
	rl__list_splice_tail(&due, &loop->cancelled);
	while ((link = rl__list_pop(&due))) {
		rl_timer *t = RL__CONTAINER(link, rl_timer, link);

		t->state = RL__TIMER_IDLE;
		t->cb(t, -ECANCELED);
		n++;
	}
	/* A repeating timer is re-armed from now, not from its old deadline,
	 * so a slow callback cannot make it fire in a burst; it goes back
	 * with a fresh seq, after every timer already due in this pass. */
	while (loop->heap_len && loop->heap[0]->due_ns <= rl__now(loop) &&
	       loop->heap[0]->seq < limit) {
		rl_timer *t = loop->heap[0];

		heap_remove(loop, t);
		if (t->repeat_ns) {
			t->due_ns = rl__now(loop) + t->repeat_ns;
			t->seq = loop->timer_seq++;
			heap_insert(loop, t); /* cannot fail: it just left */
		} else {
			t->state = RL__TIMER_IDLE;
		}
		loop->timer_firing = t->repeat_ns ? t : NULL;
		t->cb(t, 0);
		loop->timer_firing = NULL;
		n++;
	}
	return n;
}

void rl__timers_cancel_all(rl_loop *loop)
{
	while (loop->heap_len)
		rl_timer_cancel(loop, loop->heap[0]);
}

void rl__timers_free(rl_loop *loop)
{
	free(loop->heap);
	loop->heap = NULL;
	loop->heap_len = loop->heap_cap = 0;
}
