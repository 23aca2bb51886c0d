/* SPDX-License-Identifier: MIT */
/*
 * promise_timeout.c - rl_promise_timeout(): a race of a promise and a
 * sleep in which the loser is cancelled.
 *
 * A record, from the context's array blocks, holds a reference to both
 * racers and subscribes to each; the promise it returns is settled by
 * whichever subscription decides. When the sleep wins over a request
 * promise, the request is cancelled and the decision waits for it: the
 * request may have finished before the cancel reached it, and then its
 * real outcome (data received, bytes sent) is the one to give. The record
 * goes when both subscriptions have run; a watched promise that can never
 * settle is unsubscribed, so nothing waits for it.
 */
#include <errno.h>
#include <stdbool.h>

#include "promise_internal.h"

static const struct rl_value none = { 0, NULL };

struct deadline {
	rl_promise *src;   /* the watched promise: our reference */
	rl_promise *sleep; /* the timer's promise: our reference */
	rl_promise *out;   /* what the caller gets: our reference */
	int waiting;	   /* subscriptions still to run */
	bool fired;	   /* the sleep won and cancelled src's request */
};

static void finish(struct deadline *d)
{
	rl_promise_ctx *ctx;

	if (--d->waiting)
		return;
	ctx = d->out->ctx;
	rl_promise_unref(d->src);
	rl_promise_unref(d->sleep);
	rl_promise_unref(d->out);
	rl__block_put(ctx, d);
}

static void src_settled(rl_promise *src, void *arg)
{
	struct deadline *d = arg;

	if (d->out->state == RL_PROMISE_PENDING) {
		if (d->fired && src->err == -ECANCELED)
			rl__settle(d->out, -ETIMEDOUT, none, NULL);
		else
			rl__settle(d->out, src->err, src->value,
				   rl__value_owner(src));
	}
	/* The sleep lost: its timer goes now, not when it would end. */
	rl_promise_cancel(d->sleep);
	rl_promise_unref(src);
	finish(d);
}

static void sleep_settled(rl_promise *sleep, void *arg)
{
	struct deadline *d = arg;
	int ret;

	if (sleep->state == RL_PROMISE_FULFILLED &&
	    d->out->state == RL_PROMISE_PENDING) {
		ret = rl_promise_cancel(d->src);
		if (ret == 0 || ret == -EALREADY) {
			d->fired = true; /* src_settled decides */
		} else if (ret == -EINVAL) {
			/* Nothing to cancel: the timeout rejects now, and
			 * stops waiting for src, which may never settle. */
			rl__settle(d->out, -ETIMEDOUT, none, NULL);
			if (rl_promise_unsubscribe(d->src, src_settled, d) == 0)
				d->waiting--;
		}
		/* -ENOENT: src has settled, its subscription is queued. */
	} else if (sleep->state == RL_PROMISE_REJECTED &&
		   d->out->state == RL_PROMISE_PENDING &&
		   d->src->pkind != RL__P_REQ &&
		   d->src->pkind != RL__P_CONN_READ) {
		/* The sleep did not run its course and src did not end it:
		 * the loop's close cancelled it (or refused it, for a
		 * timeout made during the close). A request src is
		 * cancelled by the close too and decides by itself, with
		 * its real result if it had one; any other src may never
		 * settle, and the timeout would stay pending for ever,
		 * its reactions never run, where the context's timers
		 * reject with -ECANCELED. It takes the sleep's error. (Asked
		 * of pkind, not of rl_promise_cancel(), which would cancel a
		 * connection's read when the sleep failed to start.) */
		rl__settle(d->out, sleep->err, none, NULL);
		if (rl_promise_unsubscribe(d->src, src_settled, d) == 0)
			d->waiting--;
	}
	rl_promise_unref(sleep);
	finish(d);
}

rl_promise *rl_promise_timeout(rl_promise *p, uint64_t ms)
{
	rl_promise_ctx *ctx;
	struct deadline *d;
	rl_promise *out;

	if (!p)
		return NULL;
	ctx = p->ctx;
	if (ms > RL_TIMEOUT_MAX_MS) {
		/* No race: the sleep would reject, and p would run without
		 * a timeout. p goes on, as when the sleep loses. */
		rl_promise_unref(p);
		return rl_promise_rejected(ctx, -EINVAL);
	}
	d = rl__block_get(ctx, sizeof(*d));
	/* Settled by its two inputs, like a combinator: the program cannot
	 * settle it (rl_promise_resolve() says -EPERM). */
	out = d ? rl__promise_alloc(ctx, RL__P_COMB, 2) : NULL;
	d = out ? d : (rl__block_put(ctx, d), NULL);
	if (!d) {
		rl_promise_unref(p);
		return NULL;
	}
	d->src = p;
	d->out = out;
	d->fired = false;
	d->sleep = rl_promise_sleep(ctx, ms);
	d->waiting = 2;
	if (!d->sleep ||
	    rl_promise_subscribe(rl_promise_ref(p), src_settled, d) < 0) {
		/* No race to run. */
		rl_promise_cancel(d->sleep);
		rl_promise_unref(d->sleep);
		rl_promise_unref(p);
		rl__settle(out, -ENOMEM, none, NULL);
		rl_promise_unref(out);
		rl__block_put(ctx, d);
		return out;
	}
	if (rl_promise_subscribe(rl_promise_ref(d->sleep), sleep_settled, d) <
	    0) {
		/* src's subscription runs alone and finds out settled. */
		rl_promise_cancel(d->sleep);
		rl__settle(out, -ENOMEM, none, NULL);
		d->waiting = 1;
	}
	return out;
}
