/* SPDX-License-Identifier: MIT */
/*
 * spread.c - a burst of read_files spread over the loops of a group.
 *
 * The home loop (where the caller submitted the request) keeps the
 * request on its books: it is in flight there, counted, cancellable, and
 * its callback runs there. What travels is a shard: a request of the
 * helper loop's own (the shadow) with the caller's arguments. The helper
 * submits the shadow to its backend like any read_file; when it has
 * finished, the shard goes back home, where the result, the buffer (which
 * the helper may have grown) and its length go into the caller's request,
 * which completes through rl__complete() as if the home backend had run
 * it. A cancel travels as a message of its own.
 *
 * Shards travel in batches, one message per batch: the shards for one
 * loop wait on a list until the batch of callbacks that made them ends (a
 * microtask flushes the lists) or BATCH of them are there, so that a
 * burst costs a message per BATCH reads each way, not one per read.
 *
 * Shards come from the home loop's own pool (chunks freed with the
 * group), and only the home thread takes and returns them: the helper
 * touches a shard between the message that brings it and the one that
 * sends it back. A shard goes back to the pool when every message it sent
 * has come home (a cancel may still be on its way after the result);
 * until then it holds a reference on the home loop, whose close waits for
 * it.
 */
#include <errno.h>
#include <stdlib.h>

#include "group.h"

#define CHUNK 64
#define BATCH 64

struct rl__shard {
	rl_req shadow; /* the helper's request */
	rl_req *orig;  /* the caller's, on the home loop */
	rl_loop *home, *helper;
	const char *path;
	void *buf;
	size_t len;
	unsigned flags;
	unsigned msgs; /* messages not home yet (home thread) */
	bool sent;     /* its batch has left */
	bool cancel_sent;
	struct rl_post go, back, cancel; /* go, back: a batch's carrier */
	struct rl__shard *batch;	 /* the next one in its batch */
	struct rl__shard *prev, *next;	 /* inflight list, or the free list */
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

static void complete_home(struct rl__shard *sh, int64_t result)
{
	rl_req *orig = sh->orig;

	rl__req(orig)->state &= ~(uint32_t)RL__REQ_SPREAD;
	*shard_of(orig) = NULL;
	sh->orig = NULL;
	rl__complete(sh->home, orig, result);
	shard_home(sh);
}

/* On the home loop: a batch of results is here. */
static void back_cb(struct rl_post *post)
{
	struct rl__shard *sh = RL__CONTAINER(post, struct rl__shard, back),
			 *next;

	for (; sh; sh = next) {
		rl_req *orig = sh->orig;

		next = sh->batch;
		orig->buf = sh->shadow.buf;
		orig->len = sh->shadow.len;
		rl__req(orig)->cap = rl__req(&sh->shadow)->cap;
		complete_home(sh, sh->shadow.result);
	}
}

/* ------------------------------------------------------------ batches */

static void flush_cb(rl_task *task);

/* Puts sh on list (a batch to loop, or back home), flushed at the end of
 * the current batch of callbacks, or now when it is full. */
static void batch_add(rl_loop *loop, struct rl__batch *b, struct rl__shard *sh)
{
	struct rl__spread *s = &loop->member->spread;

	sh->batch = NULL;
	if (b->tail)
		b->tail->batch = sh;
	else
		b->head = sh;
	b->tail = sh;
	if (++b->count >= BATCH) {
		rl__spread_flush(loop, b);
		return;
	}
	if (!s->flush_queued) {
		s->flush_queued = true;
		rl_task_queue(loop, &s->flush, flush_cb);
	}
}

static void go_cb(struct rl_post *post);

/* On the helper: a shadow finished; its shard goes home with the others
 * that finish in this batch of callbacks. The home loop cannot be shut
 * down before: the caller's request is still in flight there. */
static void shadow_cb(rl_req *req)
{
	struct rl__shard *sh = req->data;
	rl_loop *helper = sh->helper;

	batch_add(helper, &helper->member->spread.home[sh->home->member->index],
		  sh);
}

/* Sends batch b of loop's list (to b's loop: a helper, or home). A
 * helper that shuts down refuses it: the group closes, and the requests
 * end with -ECANCELED (a refused return trip cannot happen: see
 * shadow_cb). */
void rl__spread_flush(rl_loop *loop, struct rl__batch *b)
{
	struct rl__shard *sh = b->head, *next;
	bool home = b->to_home;

	if (!sh)
		return;
	b->head = b->tail = NULL;
	b->count = 0;
	if (home) {
		rl_post(sh->home, &sh->back, back_cb);
		return;
	}
	for (next = sh; next; next = next->batch)
		next->sent = true;
	if (rl_post(sh->helper, &sh->go, go_cb) == 0)
		return;
	(void)loop;
	for (; sh; sh = next) {
		next = sh->batch;
		complete_home(sh, -ECANCELED);
	}
}

static void flush_cb(rl_task *task)
{
	struct rl__spread *s = RL__CONTAINER(task, struct rl__spread, flush);
	struct rl__member *m = RL__CONTAINER(s, struct rl__member, spread);

	s->flush_queued = false;
	for (unsigned i = 0; i < m->group->n; i++) {
		rl__spread_flush(m->loop, &s->to[i]);
		rl__spread_flush(m->loop, &s->home[i]);
	}
}

/* On the helper: a batch of shards arrives. */
static void go_cb(struct rl_post *post)
{
	struct rl__shard *sh = RL__CONTAINER(post, struct rl__shard, go), *next;
	rl_loop *helper = sh->helper;
	bool spread = helper->spread;
	int ret;

	/* A shadow runs where it arrived: it is never spread again. */
	helper->spread = false;
	for (; sh; sh = next) {
		next = sh->batch;
		sh->shadow.data = sh;
		ret = rl_fs_read_file(sh->helper, &sh->shadow, sh->path,
				      sh->buf, sh->len, sh->flags, shadow_cb);
		if (ret < 0) {
			sh->shadow.result = ret;
			sh->shadow.buf = sh->buf;
			sh->shadow.len = sh->len;
			rl__req(&sh->shadow)->cap = sh->len;
			shadow_cb(&sh->shadow);
		}
	}
	helper->spread = spread;
}

/* ------------------------------------------------------------ cancels */

static void cancel_home_cb(struct rl_post *post)
{
	shard_home(RL__CONTAINER(post, struct rl__shard, cancel));
}

/* On the helper: the caller cancelled. The shadow may have finished
 * already (its result is on its way home, or there); it is never
 * submitted again before this message is home. */
static void cancel_cb(struct rl_post *post)
{
	struct rl__shard *sh = RL__CONTAINER(post, struct rl__shard, cancel);

	if (rl__req(&sh->shadow)->state & RL__REQ_ACTIVE)
		rl_cancel(sh->helper, &sh->shadow);
	if (rl_post(sh->home, &sh->cancel, cancel_home_cb) < 0) {
		/* The home loop only shuts down with its shards home. */
	}
}

void rl__spread_cancel(rl_loop *loop, rl_req *req)
{
	struct rl__shard *sh = *shard_of(req);
	struct rl__spread *s = &loop->member->spread;

	if (!sh || sh->cancel_sent)
		return;
	/* Its batch goes first, so that the helper sees the shard before
	 * the cancel (one sender's messages arrive in order). */
	if (!sh->sent)
		rl__spread_flush(loop, &s->to[sh->helper->member->index]);
	if (!sh->orig)
		return; /* refused with the batch: done already */
	sh->cancel_sent = true;
	sh->msgs++;
	if (rl_post(sh->helper, &sh->cancel, cancel_cb) < 0)
		sh->msgs--; /* the helper has finished everything already */
}

/* ------------------------------------------------------------- submit */

bool rl__spread_submit(rl_loop *loop, rl_req *req)
{
	struct rl__member *m = loop->member;
	rl_group *g = m->group;
	struct rl__spread *s = &m->spread;
	struct rl__shard *sh;
	unsigned i = s->next++ % g->n;

	if (i == m->index || loop->closing || !s->to ||
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
	sh->flags =
		(rl__req(req)->state & RL__REQ_OWNBUF) ? RL_READ_FILE_GROW : 0;
	if (rl__req(req)->state & RL__REQ_REGULAR)
		sh->flags |= RL_READ_FILE_REGULAR;
	sh->msgs = 1;
	sh->sent = false;
	sh->cancel_sent = false;
	rl_req_init(&sh->shadow);
	shard_link(s, loop, sh);
	rl__req(req)->state |= RL__REQ_SPREAD;
	*shard_of(req) = sh;
	batch_add(loop, &s->to[i], sh);
	return true;
}

/* The home loop closes: what it spread is cancelled, and it waits for
 * every shard's messages (it still runs normally here). */
static int spread_close(rl_close_hook *hook, rl_loop *loop)
{
	struct rl__spread *s = RL__CONTAINER(hook, struct rl__spread, hook);
	struct rl__shard *sh, *next;

	loop->spread = false;
	/* Every batch out first: the cancels below then only post, and the
	 * list they walk stays as it is. */
	for (unsigned i = 0; i < loop->member->group->n; i++)
		rl__spread_flush(loop, &s->to[i]);
	for (sh = s->inflight; sh; sh = next) {
		next = sh->next;
		if (sh->orig && !(rl__req(sh->orig)->state & RL__REQ_CANCEL)) {
			rl__req(sh->orig)->state |= RL__REQ_CANCEL;
			rl__spread_cancel(loop, sh->orig);
		}
	}
	while (s->out)
		if (rl_run(loop, RL_RUN_ONCE) < 0)
			break;
	return 0;
}

int rl__spread_init(struct rl__member *m)
{
	struct rl__spread *s = &m->spread;
	unsigned n = m->group->n;

	s->to = calloc(n, sizeof(*s->to));
	s->home = calloc(n, sizeof(*s->home));
	if (!s->to || !s->home)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++)
		s->home[i].to_home = true;
	rl_loop_on_close(m->loop, &s->hook, spread_close);
	return 0;
}

void rl__spread_free(struct rl__member *m)
{
	struct chunk *c = m->spread.chunks, *next;

	for (; c; c = next) {
		next = c->next;
		free(c);
	}
	m->spread.chunks = NULL;
	free(m->spread.to);
	free(m->spread.home);
	m->spread.to = m->spread.home = NULL;
}
