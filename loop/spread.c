/* SPDX-License-Identifier: MIT */
/*
 * spread.c - a burst of read_files spread over the loops of a group.
 *
 * The home loop (where the caller submitted the request) keeps the
 * request on its books: it is in flight there, counted, cancellable, and
 * its callback runs there. What travels is a shard: a request of the
 * helper loop's own (the shadow) with the caller's arguments, sent as a
 * message. The helper submits the shadow to its backend like any
 * read_file; its callback posts the shard back home, where the result,
 * the buffer (which the helper may have grown) and its length go into
 * the caller's request, which completes through rl__complete() as if the
 * home backend had run it. A cancel travels as a message too.
 *
 * Shards come from the home loop's own pool (chunks never freed before
 * the group closes), and only the home thread takes and returns them, so
 * no lock is needed: the helper touches a shard between the message that
 * brings it and the one that sends it back. A shard goes back to the pool
 * when every message it sent has come home (a cancel may still be on its
 * way after the result); until then it holds a reference on the home
 * loop, and the home loop's close waits for it.
 */
#include <errno.h>
#include <stdlib.h>

#include "group.h"

#define CHUNK 64

struct rl__shard {
	rl_req shadow; /* the helper's request */
	rl_req *orig;  /* the caller's, on the home loop */
	rl_loop *home, *helper;
	const char *path;
	void *buf;
	size_t len;
	unsigned flags;
	unsigned msgs;	   /* messages not home yet (home thread) */
	bool cancel_sent;
	struct rl_post go, back, cancel;
	struct rl__shard *prev, *next; /* inflight list, or the free list */
};

struct chunk {
	struct chunk *next;
	struct rl__shard shard[CHUNK];
};

static struct rl__shard **shard_of(rl_req *req)
{
	static_assert(sizeof(struct rl__shard *) <=
			      sizeof(((struct rl__req_priv *)0)->be),
		      "a shard pointer must fit in the backend words");
	return (struct rl__shard **)(void *)rl__req(req)->be;
}

static struct rl__shard *shard_get(struct rl__spread *s)
{
	struct rl__shard *sh = s->free;

	if (!sh) {
		struct chunk *c = calloc(1, sizeof(*c));

		if (!c)
			return NULL;
		c->next = s->chunks;
		s->chunks = c;
		for (unsigned i = 0; i < CHUNK; i++) {
			c->shard[i].next = s->free;
			s->free = &c->shard[i];
		}
		sh = s->free;
	}
	s->free = sh->next;
	return sh;
}

static void shard_link(struct rl__spread *s, rl_loop *home,
		       struct rl__shard *sh)
{
	sh->prev = NULL;
	sh->next = s->inflight;
	if (s->inflight)
		s->inflight->prev = sh;
	s->inflight = sh;
	if (s->out++ == 0)
		rl_ref(home);
}

/* One message of sh is home; the last one gives it back to the pool. */
static void shard_home(struct rl__shard *sh)
{
	struct rl__spread *s = &sh->home->member->spread;

	if (--sh->msgs)
		return;
	if (sh->prev)
		sh->prev->next = sh->next;
	else
		s->inflight = sh->next;
	if (sh->next)
		sh->next->prev = sh->prev;
	sh->next = s->free;
	s->free = sh;
	if (--s->out == 0)
		rl_unref(sh->home);
}

/* On the home loop: the result is here. */
static void back_cb(struct rl_post *post)
{
	struct rl__shard *sh = RL__OUTER(post, struct rl__shard, back);
	rl_req *orig = sh->orig;

	orig->buf = sh->shadow.buf;
	orig->len = sh->shadow.len;
	rl__req(orig)->cap = rl__req(&sh->shadow)->cap;
	rl__req(orig)->state &= ~(uint32_t)RL__REQ_SPREAD;
	*shard_of(orig) = NULL;
	sh->orig = NULL;
	rl__complete(sh->home, orig, sh->shadow.result);
	shard_home(sh);
}

/* On the helper: the shadow finished; its result goes home. The home
 * loop cannot be shut down yet: the caller's request is still in flight
 * there. */
static void shadow_cb(rl_req *req)
{
	struct rl__shard *sh = req->data;

	rl_post(sh->home, &sh->back, back_cb);
}

/* On the helper: the shard arrives. */
static void go_cb(struct rl_post *post)
{
	struct rl__shard *sh = RL__OUTER(post, struct rl__shard, go);
	int ret;

	sh->shadow.data = sh;
	ret = rl_fs_read_file(sh->helper, &sh->shadow, sh->path, sh->buf,
			      sh->len, sh->flags, shadow_cb);
	if (ret < 0) {
		sh->shadow.result = ret;
		sh->shadow.buf = sh->buf;
		sh->shadow.len = sh->len;
		rl__req(&sh->shadow)->cap = sh->len;
		rl_post(sh->home, &sh->back, back_cb);
	}
}

static void cancel_home_cb(struct rl_post *post)
{
	shard_home(RL__OUTER(post, struct rl__shard, cancel));
}

/* On the helper: the caller cancelled. The shadow may have finished
 * already (its result is on its way home, or there); it is never
 * submitted again before this message is home. */
static void cancel_cb(struct rl_post *post)
{
	struct rl__shard *sh = RL__OUTER(post, struct rl__shard, cancel);

	if (rl__req(&sh->shadow)->state & RL__REQ_ACTIVE)
		rl_cancel(sh->helper, &sh->shadow);
	if (rl_post(sh->home, &sh->cancel, cancel_home_cb) < 0) {
		/* The home loop only shuts down with its shards home. */
	}
}

bool rl__spread_submit(rl_loop *loop, rl_req *req)
{
	struct rl__member *m = loop->member;
	rl_group *g = m->group;
	struct rl__spread *s = &m->spread;
	struct rl__shard *sh;
	unsigned i = s->next++ % g->n;

	if (i == m->index || loop->closing ||
	    atomic_load_explicit(&g->closing, memory_order_relaxed))
		return false;
	sh = shard_get(s);
	if (!sh)
		return false;
	sh->orig = req;
	sh->home = loop;
	sh->helper = g->m[i].loop;
	sh->path = req->path;
	sh->buf = req->buf;
	sh->len = req->len;
	sh->flags = (rl__req(req)->state & RL__REQ_OWNBUF) ? RL_READ_FILE_GROW
							  : 0;
	sh->msgs = 1;
	sh->cancel_sent = false;
	rl_req_init(&sh->shadow);
	if (rl_post(sh->helper, &sh->go, go_cb) < 0) {
		/* The helper shuts down (the group closes): run it here. */
		sh->next = s->free;
		s->free = sh;
		return false;
	}
	shard_link(s, loop, sh);
	rl__req(req)->state |= RL__REQ_SPREAD;
	*shard_of(req) = sh;
	return true;
}

void rl__spread_cancel(rl_loop *loop, rl_req *req)
{
	struct rl__shard *sh = *shard_of(req);

	(void)loop;
	if (!sh || sh->cancel_sent)
		return;
	sh->cancel_sent = true;
	sh->msgs++;
	if (rl_post(sh->helper, &sh->cancel, cancel_cb) < 0)
		sh->msgs--; /* the helper has finished everything already */
}

/* The home loop closes: what it spread is cancelled, and it waits for
 * every shard's messages (it still runs normally here). */
static int spread_close(rl_close_hook *hook, rl_loop *loop)
{
	struct rl__spread *s = RL__OUTER(hook, struct rl__spread, hook);
	struct rl__shard *sh;

	loop->spread = false;
	for (sh = s->inflight; sh; sh = sh->next)
		if (sh->orig && !(rl__req(sh->orig)->state & RL__REQ_CANCEL)) {
			rl__req(sh->orig)->state |= RL__REQ_CANCEL;
			rl__spread_cancel(loop, sh->orig);
		}
	while (s->out)
		if (rl_run(loop, RL_RUN_ONCE) < 0)
			break;
	return 0;
}

void rl__spread_init(struct rl__member *m)
{
	rl_loop_on_close(m->loop, &m->spread.hook, spread_close);
}

void rl__spread_free(struct rl__member *m)
{
	struct chunk *c = m->spread.chunks, *next;

	for (; c; c = next) {
		next = c->next;
		free(c);
	}
	m->spread.chunks = NULL;
}
