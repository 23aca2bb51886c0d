/* SPDX-License-Identifier: MIT */
/*
 * promise_remote.c - settling a promise from another loop of a group (or
 * any thread): the settlement travels to the promise's loop as a message
 * (rl_post) and settles it there, where everything about the promise
 * lives. The handle is taken on the promise's loop, so the references it
 * holds (the promise's, and the loop's, which a pending promise alone
 * would not keep alive) are counted on that loop's thread only.
 */
#include <errno.h>
#include <stdlib.h>

#include "promise_internal.h"

struct rl_promise_remote {
	struct rl_post post;
	rl_promise *p;
	rl_loop *loop;
	int err;
	struct rl_value value;
};

rl_promise_remote *rl_promise_remote_new(rl_promise *p)
{
	rl_promise_remote *r;

	if (!p)
		return NULL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->p = rl_promise_ref(p);
	r->loop = rl_promise_ctx_loop(p->ctx);
	rl_ref(r->loop);
	/* The context must not be freed under the handle (ctx_close). */
	p->ctx->remotes++;
	return r;
}

/* On the promise's loop. */
static void settle_here(struct rl_post *post)
{
	rl_promise_remote *r = RL__CONTAINER(post, rl_promise_remote, post);

	if (r->err < 0)
		rl_promise_reject_value(r->p, r->err, r->value);
	else
		rl_promise_resolve(r->p, r->value);
	r->p->ctx->remotes--;
	rl_promise_unref(r->p);
	rl_unref(r->loop);
	free(r);
}

static int remote_send(rl_promise_remote *r, int err, struct rl_value value)
{
	int ret;

	if (!r)
		return -EINVAL;
	r->err = err;
	r->value = value;
	ret = rl_post(r->loop, &r->post, settle_here);
	/* The loop closes: it frees the promise and the context itself (the
	 * count of handles, the loop thread's, no longer matters then). */
	if (ret < 0)
		free(r);
	return ret;
}

int rl_promise_remote_resolve(rl_promise_remote *r, struct rl_value value)
{
	return remote_send(r, 0, value);
}

int rl_promise_remote_reject(rl_promise_remote *r, int err)
{
	struct rl_value none = { 0 };

	if (err >= 0)
		return -EINVAL;
	return remote_send(r, err, none);
}

void rl_promise_remote_drop(rl_promise_remote *r)
{
	if (!r)
		return;
	r->p->ctx->remotes--;
	rl_promise_unref(r->p);
	rl_unref(r->loop);
	free(r);
}
