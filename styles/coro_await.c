/* SPDX-License-Identifier: MIT */
/*
 * coro_await.c - a coroutine waits for a promise of the promise layer.
 *
 * The bridge is the promise layer's subscription hook: the settle function
 * runs from a microtask on the loop thread once the promise has settled
 * and switches straight back into the coroutine. The outcome travels in a
 * small record on the coroutine's stack, valid because the coroutine stays
 * suspended until that function has run. The await holds a reference to
 * the promise, so that a promise nothing else holds cannot vanish under
 * it; closing the scheduler withdraws the subscription and resumes the
 * coroutine with -ECANCELED. This file is apart from the
 * others so that a program without promises does not link the promise
 * layer.
 */
#include <errno.h>

#include "coro_internal.h"
#include "ringloop/promise.h"

struct await_rec {
	rl_coro *co;
	rl_promise *p; /* our own reference: p outlives the await */
	struct rl_settlement outcome;
};

static void settled(rl_promise *p, void *arg)
{
	struct await_rec *rec = arg;

	rl_promise_result(p, &rec->outcome);
	rl_promise_unref(p);
	rl_promise_unref(rec->p);
	rl__coro_resume(rec->co, rec->outcome.err);
}

/* The scheduler closes: withdraw the subscription, unless p has settled
 * and settled() is queued already (then it runs soon). */
static void cancel_await(rl_coro *co)
{
	struct await_rec *rec = co->wait_obj;

	if (rl_promise_unsubscribe(rec->p, settled, rec) < 0)
		return;
	rl_promise_unref(rec->p);
	rec->outcome.err = -ECANCELED;
	rl__coro_wake_later(co, -ECANCELED);
}

static int outcome(const struct rl_settlement *s, struct rl_value *value)
{
	if (value)
		*value = s->value;
	return s->err;
}

int rl_coro_await(rl_promise *p, struct rl_value *value)
{
	rl_coro *co = rl__coro_current;
	struct await_rec rec;
	int ret;

	if (!co) {
		rl_promise_unref(p);
		return -EPERM;
	}
	if (!p)
		return -ENOMEM;
	/* Settled already: no need to go round the microtask queue. */
	if (rl_promise_result(p, &rec.outcome) != RL_PROMISE_PENDING) {
		rl_promise_unref(p);
		return outcome(&rec.outcome, value);
	}
	if (co->sched->closing) {
		rl_promise_unref(p);
		return -ECANCELED;
	}
	rec.co = co;
	rec.p = rl_promise_ref(p);
	rec.outcome.err = 0;
	rec.outcome.value.i = 0;
	rec.outcome.value.p = NULL;
	ret = rl_promise_subscribe(p, settled, &rec);
	if (ret < 0) {
		/* The caller's reference is dropped; settled never runs. */
		rl_promise_unref(rec.p);
		return ret;
	}
	co->wait = RL__WAIT_AWAIT;
	co->wait_obj = &rec;
	co->wait_cancel = cancel_await;
	rl__coro_suspend(co);
	return outcome(&rec.outcome, value);
}
