/* SPDX-License-Identifier: MIT */
/*
 * callback.c - Node-like callbacks: the context and its pool of entries,
 * one per request in flight (the operations are in callback_fs.c).
 *
 * Each pooled entry is a request plus the caller's callback and argument.
 * Entries come in chunks; a chunk is freed by rl_cb_ctx_trim() or when the
 * context closes. The pooled read_file's buffers are not the entries':
 * the loop lends them (RL_READ_FILE_LOAN), so a burst of read_files holds
 * buffers only for the reads under way (callback_fs.c).
 *
 * Lifetime: the context puts a close hook on its loop, so rl_loop_close()
 * closes it (cancels its requests, runs their callbacks) and frees it at
 * the very end of the close. rl_cb_ctx_close() before that frees it only
 * when none of its requests is in flight and none of its callbacks is
 * running.
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>

#include "callback_internal.h"

#define CHUNK 64

struct rl__cb_chunk {
	struct rl_link link; /* the context's chunks */
	struct rl__cb_entry e[CHUNK];
};

static void ctx_free(rl_cb_ctx *cbs)
{
	struct rl__cb_chunk *c;
	struct rl_link *link;

	rl__cb_net_free(cbs);
	while ((link = rl__list_pop(&cbs->chunks))) {
		c = RL__CONTAINER(link, struct rl__cb_chunk, link);
		free(c);
	}
	free(cbs);
}

/*
 * rl_loop_close() of our loop: refuse new requests, cancel the ones in
 * flight and let their callbacks run; the memory goes at the last call,
 * when no callback of any layer can reach it any more.
 */
static int close_with_loop(rl_close_hook *hook, rl_loop *loop)
{
	rl_cb_ctx *cbs = RL__CONTAINER(hook, rl_cb_ctx, close_hook);
	struct rl__cb_chunk *c;
	struct rl_link *link;

	if (cbs->closed) {
		ctx_free(cbs);
		return 0;
	}
	cbs->closed = true;
	rl__list_for_each(link, &cbs->chunks)
	{
		c = RL__CONTAINER(link, struct rl__cb_chunk, link);
		for (int i = 0; i < CHUNK; i++)
			if (c->e[i].in_use)
				rl_cancel(loop, &c->e[i].req);
	}
	while (cbs->in_flight)
		if (rl_run(loop, RL_RUN_ONCE) < 0)
			break;
	return RL_CLOSE_AGAIN;
}

int rl_cb_ctx_open(rl_loop *loop, rl_cb_ctx **out)
{
	rl_cb_ctx *cbs;

	if (!loop || !out)
		return -EINVAL;
	cbs = calloc(1, sizeof(*cbs));
	if (!cbs)
		return -ENOMEM;
	cbs->loop = loop;
	rl__list_init(&cbs->chunks);
	rl__list_init(&cbs->conns);
	rl__list_init(&cbs->servers);
	cbs->guess = RL__CB_FIRST_GUESS;
	rl_loop_on_close(loop, &cbs->close_hook, close_with_loop);
	*out = cbs;
	return 0;
}

int rl_cb_ctx_close(rl_cb_ctx *cbs)
{
	if (!cbs)
		return -EINVAL;
	/* Once the loop's close has begun, its hook works with the context
	 * (its rl_run() for the cancelled callbacks, and its last call at
	 * the end of that close): a close from a microtask or another
	 * layer's callback run meanwhile would free it under the hook. The
	 * loop frees it then. */
	if (cbs->closed)
		return -EBUSY;
	/* A connection or server whose close (or read_start, or accept
	 * retry) waits for a task or a timer is not a request in flight,
	 * but ctx_free() would free it under the loop's task list. */
	if (cbs->in_flight || cbs->dispatching || rl__cb_net_busy(cbs))
		return -EBUSY;
	rl_loop_off_close(cbs->loop, &cbs->close_hook);
	ctx_free(cbs);
	return 0;
}

struct rl__cb_entry *rl__cb_entry_get(rl_cb_ctx *cbs)
{
	struct rl__cb_entry *e = cbs->free;

	if (!e) {
		struct rl__cb_chunk *c = calloc(1, sizeof(*c));

		if (!c)
			return NULL;
		rl__list_add_head(&cbs->chunks, &c->link);
		for (int i = 0; i < CHUNK; i++) {
			c->e[i].cbs = cbs;
			c->e[i].next_free = cbs->free;
			cbs->free = &c->e[i];
		}
		cbs->pooled += CHUNK;
		e = cbs->free;
	}
	cbs->free = e->next_free;
	e->in_use = true;
	return e;
}

void rl__cb_entry_put(rl_cb_ctx *cbs, struct rl__cb_entry *e)
{
	e->in_use = false;
	e->next_free = cbs->free;
	cbs->free = e;
}

/* Frees every chunk none of whose entries is in use, keeping at least
 * keep entries pooled, then rebuilds the free list from what is left. Not
 * on a hot path: after a burst, the caller decides when to give memory
 * back. */
size_t rl_cb_ctx_trim(rl_cb_ctx *cbs, size_t keep)
{
	struct rl_link *link, *next;
	struct rl__cb_chunk *c;
	size_t freed = 0;

	for (link = cbs->chunks.next; link != &cbs->chunks; link = next) {
		bool busy = false;

		next = link->next;
		c = RL__CONTAINER(link, struct rl__cb_chunk, link);
		for (int i = 0; i < CHUNK && !busy; i++)
			busy = c->e[i].in_use;
		if (busy || cbs->pooled - CHUNK < keep)
			continue;
		rl__list_del(link);
		free(c);
		cbs->pooled -= CHUNK;
		freed += CHUNK;
	}
	cbs->free = NULL;
	rl__list_for_each(link, &cbs->chunks)
	{
		c = RL__CONTAINER(link, struct rl__cb_chunk, link);
		for (int i = CHUNK - 1; i >= 0; i--)
			if (!c->e[i].in_use) {
				c->e[i].next_free = cbs->free;
				cbs->free = &c->e[i];
			}
	}
	return freed;
}

size_t rl_cb_ctx_in_flight(const rl_cb_ctx *cbs)
{
	return cbs->in_flight;
}

size_t rl_cb_ctx_pooled(const rl_cb_ctx *cbs)
{
	return cbs->pooled;
}
