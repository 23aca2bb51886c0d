/* SPDX-License-Identifier: MIT */
/*
 * promise_combinators.c - all, all_settled, any and race.
 *
 * A combinator is a promise plus one input record per input, each waiting
 * on its input like a then() would (so it reacts on the same microtask as
 * JavaScript's Promise.all's internal then). The records hold a reference
 * to the combinator; the combinator keeps a counter of inputs still to
 * come and, for all/all_settled/any, one array block holding the entries
 * followed by one "hold" per entry: the promise an entry's value points
 * into, kept alive as long as the array is. Every step is O(1), so a
 * combinator of n inputs costs O(n) in total.
 */
#include <errno.h>
#include <string.h>

#include "promise_internal.h"

static size_t entry_size(uint8_t kind)
{
	switch (kind) {
	case RL__W_ALL:
		return sizeof(struct rl_value);
	case RL__W_ALL_SETTLED:
	case RL__W_ANY:
		return sizeof(struct rl_settlement);
	default:
		return 0;
	}
}

static rl_promise **holds_of(rl_promise *c)
{
	return (rl_promise **)((char *)c->u.c.block +
			       c->u.c.n * entry_size(c->w.kind));
}

void rl__comb_release(rl_promise *c, rl_promise **work)
{
	rl_promise **holds;
	size_t i;

	if (!c->u.c.block)
		return;
	holds = holds_of(c);
	for (i = 0; i < c->u.c.n; i++)
		rl__drop(holds[i], work);
	rl__block_put(c->ctx, c->u.c.block);
	c->u.c.block = NULL;
}

/* Keeps the promise src's value points into alive with the array. */
static void hold_entry(rl_promise *c, size_t i, rl_promise *src)
{
	rl_promise *owner = rl__value_owner(src);

	if (owner)
		holds_of(c)[i] = rl_promise_ref(owner);
}

static void record(rl_promise *c, size_t i, rl_promise *src)
{
	struct rl_settlement *e = (struct rl_settlement *)c->u.c.block + i;

	e->err = src->err;
	e->value = src->value;
	hold_entry(c, i, src);
}

void rl__input_run(struct rl__input *in)
{
	rl_promise *src = in->w.src, *c = in->to.comb;
	size_t i = in->at.index;
	bool ok = src->state == RL_PROMISE_FULFILLED;
	struct rl_value all = { (int64_t)c->u.c.n, c->u.c.block };

	if (c->state != RL_PROMISE_PENDING)
		goto out;
	switch (in->w.kind) {
	case RL__W_ALL:
		if (!ok) {
			rl__settle(c, src->err, src->value,
				   rl__value_owner(src));
			break;
		}
		((struct rl_value *)c->u.c.block)[i] = src->value;
		hold_entry(c, i, src);
		if (--c->u.c.remaining == 0)
			rl__settle(c, 0, all, NULL);
		break;
	case RL__W_ALL_SETTLED:
		record(c, i, src);
		if (--c->u.c.remaining == 0)
			rl__settle(c, 0, all, NULL);
		break;
	case RL__W_ANY:
		if (ok) {
			rl__settle(c, 0, src->value, rl__value_owner(src));
			break;
		}
		record(c, i, src);
		if (--c->u.c.remaining == 0)
			rl__settle(c, RL_EAGGREGATE, all, NULL);
		break;
	case RL__W_RACE:
		rl__settle(c, src->err, src->value, rl__value_owner(src));
		break;
	}
out:
	rl__record_put(&c->ctx->inputs, in);
	rl_promise_unref(src);
	rl_promise_unref(c);
}

static void unref_from(rl_promise *const *ps, size_t from, size_t n)
{
	for (size_t i = from; i < n; i++)
		rl_promise_unref(ps[i]);
}

static rl_promise *combine(rl_promise_ctx *ctx, rl_promise *const *ps, size_t n,
			   uint8_t kind)
{
	size_t esize = entry_size(kind), i;
	rl_promise *c;

	bool foreign = false;

	for (i = 0; i < n; i++) {
		if (!ps[i])
			break;
		/* An input record of ours cannot wait on another context's
		 * promise: that context would free it into its own pool,
		 * and run and count its microtask. */
		foreign |= ps[i]->ctx != ctx;
	}
	if (!ctx || (n && !ps) || i < n)
		goto fail;
	if (foreign) {
		unref_from(ps, 0, n);
		return rl_promise_rejected(ctx, -EXDEV);
	}
	c = rl__promise_alloc(ctx, RL__P_COMB, 1);
	if (!c)
		goto fail;
	c->w.kind = kind;
	c->u.c.n = n;
	c->u.c.remaining = n;
	if (n && esize) {
		c->u.c.block = rl__block_get(ctx, n * (esize + sizeof(void *)));
		if (!c->u.c.block) {
			rl_promise_unref(c);
			goto fail;
		}
		memset(holds_of(c), 0, n * sizeof(void *));
	}
	for (i = 0; i < n; i++) {
		struct rl__input *in = rl__record_get(&ctx->inputs);

		if (!in) {
			rl__settle(c, -ENOMEM, (struct rl_value){ 0, NULL },
				   NULL);
			unref_from(ps, i, n);
			return c;
		}
		in->to.comb = rl_promise_ref(c);
		in->at.index = i;
		rl__wait(ps[i], &in->w, kind);
		rl_promise_unref(ps[i]);
	}
	/* The empty cases, settled at once as in JavaScript. race of none
	 * stays pending for ever. */
	if (n == 0 && kind == RL__W_ANY)
		rl__settle(c, RL_EAGGREGATE, (struct rl_value){ 0, NULL },
			   NULL);
	else if (n == 0 && kind != RL__W_RACE)
		rl__settle(c, 0, (struct rl_value){ 0, NULL }, NULL);
	return c;
fail:
	if (ps)
		unref_from(ps, 0, n);
	return NULL;
}

rl_promise *rl_all(rl_promise_ctx *ctx, rl_promise *const *ps, size_t n)
{
	return combine(ctx, ps, n, RL__W_ALL);
}

rl_promise *rl_all_settled(rl_promise_ctx *ctx, rl_promise *const *ps, size_t n)
{
	return combine(ctx, ps, n, RL__W_ALL_SETTLED);
}

rl_promise *rl_any(rl_promise_ctx *ctx, rl_promise *const *ps, size_t n)
{
	return combine(ctx, ps, n, RL__W_ANY);
}

rl_promise *rl_race(rl_promise_ctx *ctx, rl_promise *const *ps, size_t n)
{
	return combine(ctx, ps, n, RL__W_RACE);
}
