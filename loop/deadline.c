/* SPDX-License-Identifier: MIT */
/*
 * deadline.c - rl_req_deadline(): a timeout for any request, made of a
 * caller's timer and rl_cancel().
 *
 * The request points at its timer (rl__req(req)->deadline) and the timer
 * at its request (timer->data). Whichever comes first ends the pair: the
 * timer firing cancels the request and marks it, so that rl__complete()
 * reports -ETIMEDOUT instead of -ECANCELED; the request getting its result
 * stops the timer without a callback. Nothing is allocated, and a request
 * that finishes in time costs one heap insert and one heap removal.
 */
#include <errno.h>

#include "internal.h"

static void deadline_fired(rl_timer *timer, int status)
{
	rl_req *req = timer->data;
	rl_loop *loop;

	/* Only rl_loop_close() cancels a bound timer (rl__timers_cancel_all);
	 * the request is being cancelled then anyway. */
	if (status < 0 || !req)
		return;
	loop = req->loop;
	timer->data = NULL;
	rl__req(req)->deadline = NULL;
	if ((rl__req(req)->state & RL__REQ_ACTIVE) &&
	    !(rl__req(req)->state & (RL__REQ_DONE | RL__REQ_CANCEL))) {
		rl__req(req)->state |= RL__REQ_CANCEL | RL__REQ_TIMEDOUT;
		loop->backend->cancel(loop, req);
	}
}

int rl_req_deadline(rl_loop *loop, rl_req *req, rl_timer *timer,
		    uint64_t timeout_ms)
{
	struct rl__req_priv *p;
	int ret;

	/* Checked first: a deadline that cannot be set leaves the old one. */
	if (!loop || !req || !timer || req->loop != loop ||
	    timeout_ms > RL_TIMEOUT_MAX_MS)
		return -EINVAL;
	p = rl__req(req);
	/* The answers of rl_cancel(), in its order. */
	if (!(p->state & RL__REQ_ACTIVE))
		return -ENOENT;
	if (p->state & RL__REQ_CANCEL)
		return -EALREADY;
	if (p->state & RL__REQ_DONE)
		return -ENOENT;
	if (timer->state != RL__TIMER_IDLE && p->deadline != timer)
		return -EBUSY;
	if (p->deadline)
		rl_timer_stop(loop, p->deadline);
	timer->data = req;
	ret = rl_timer_start(loop, timer, timeout_ms, 0, deadline_fired);
	if (ret < 0) {
		if (p->deadline) {
			p->deadline->data = NULL;
			p->deadline = NULL;
		}
		return ret;
	}
	p->deadline = timer;
	return 0;
}

void rl__deadline_done(rl_loop *loop, rl_req *req)
{
	rl_timer *timer = rl__req(req)->deadline;

	rl__req(req)->deadline = NULL;
	rl_timer_stop(loop, timer);
	timer->data = NULL;
}
