/* SPDX-License-Identifier: MIT */
/*
 * callback.c - Node-like callbacks: the context and its pool of entries,
 * one per request in flight (the operations are in callback_fs.c).
 *
 * Each pooled entry is a request plus the caller's callback and argument,
 * and keeps the buffer its last pooled read_file grew, so a loop reading
 * files of a similar size stops allocating after the first few reads.
 * Entries come in chunks; a chunk is freed only by rl_cb_ctx_close() or
 * rl_cb_ctx_trim().
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "callback_internal.h"

#define CHUNK 64

struct rl__cb_chunk {
	struct rl__cb_chunk *next;
	struct rl__cb_entry e[CHUNK];
};

/* A new entry's first buffer: small, because ten thousand reads in flight
 * each hold one, and learned from the files read so far (callback_fs.c),
 * because a read that outgrows it costs a second pass. */
#define FIRST_GUESS 256

int rl_cb_ctx_open(rl_loop *loop, rl_cb_ctx **out)
{
	rl_cb_ctx *cbs;

	if (!loop || !out)
		return -EINVAL;
	cbs = calloc(1, sizeof(*cbs));
	if (!cbs)
		return -ENOMEM;
	cbs->loop = loop;
	cbs->guess = FIRST_GUESS;
	*out = cbs;
	return 0;
}

int rl_cb_ctx_close(rl_cb_ctx *cbs)
{
	struct rl__cb_chunk *c, *next;

	if (!cbs)
		return -EINVAL;
	if (cbs->in_flight)
		return -EBUSY;
	for (c = cbs->chunks; c; c = next) {
		next = c->next;
		for (int i = 0; i < CHUNK; i++)
			free(c->e[i].buf);
		free(c);
	}
	free(cbs);
	return 0;
}

struct rl__cb_entry *rl__cb_entry_get(rl_cb_ctx *cbs)
{
	struct rl__cb_entry *e = cbs->free;

	if (!e) {
		struct rl__cb_chunk *c = calloc(1, sizeof(*c));

		if (!c)
			return NULL;
		c->next = cbs->chunks;
		cbs->chunks = c;
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
	struct rl__cb_chunk **pc = &cbs->chunks, *c;
	size_t freed = 0;

	while ((c = *pc)) {
		bool busy = false;

		for (int i = 0; i < CHUNK && !busy; i++)
			busy = c->e[i].in_use;
		if (busy || cbs->pooled - CHUNK < keep) {
			pc = &c->next;
			continue;
		}
		*pc = c->next;
		for (int i = 0; i < CHUNK; i++)
			free(c->e[i].buf);
		free(c);
		cbs->pooled -= CHUNK;
		freed += CHUNK;
	}
	cbs->free = NULL;
	for (c = cbs->chunks; c; c = c->next)
		for (int i = CHUNK - 1; i >= 0; i--)
			if (!c->e[i].in_use) {
				c->e[i].next_free = cbs->free;
				cbs->free = &c->e[i];
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
