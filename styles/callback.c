/* SPDX-License-Identifier: MIT */
/*
 * callback.c - Node-like callbacks: a pooled request per read_file.
 *
 * Each pooled entry is a request plus the caller's callback and argument,
 * and keeps the buffer its last read grew, so a loop reading files of a
 * similar size stops allocating after the first few reads. Entries come in
 * chunks; a chunk is freed only by rl_cb_ctx_close().
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "ringloop/callback.h"

#define CHUNK 64

struct entry {
	rl_req req;
	rl_cb_data_fn done;
	void *arg;
	rl_cb_ctx *cbs;
	struct entry *next_free;
	bool in_use;
};

struct chunk {
	struct chunk *next;
	struct entry e[CHUNK];
};

struct rl_cb_ctx {
	rl_loop *loop;
	struct entry *free;
	struct chunk *chunks;
	size_t in_flight;
	size_t pooled;
	size_t guess; /* first buffer for a new entry */
};

/* A new entry's first buffer: small, because ten thousand reads in flight
 * each hold one, and learned from the files read so far, because a read
 * that outgrows it costs a second pass. */
#define FIRST_GUESS 256
#define MAX_GUESS (1u << 20)

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
	struct chunk *c, *next;

	if (!cbs)
		return -EINVAL;
	if (cbs->in_flight)
		return -EBUSY;
	for (c = cbs->chunks; c; c = next) {
		next = c->next;
		for (int i = 0; i < CHUNK; i++)
			free(c->e[i].req.buf);
		free(c);
	}
	free(cbs);
	return 0;
}

static struct entry *entry_get(rl_cb_ctx *cbs)
{
	struct entry *e = cbs->free;

	if (!e) {
		struct chunk *c = calloc(1, sizeof(*c));

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

static void entry_put(rl_cb_ctx *cbs, struct entry *e)
{
	e->in_use = false;
	e->next_free = cbs->free;
	cbs->free = e;
}

static void read_file_done(rl_req *req)
{
	struct entry *e = (struct entry *)req;
	rl_cb_ctx *cbs = e->cbs;
	rl_cb_data_fn done = e->done;
	void *arg = e->arg;
	int64_t res = req->result;

	cbs->in_flight--;
	if (res > 0 && (size_t)res > cbs->guess && cbs->guess < MAX_GUESS) {
		while (cbs->guess < (size_t)res && cbs->guess < MAX_GUESS)
			cbs->guess *= 2;
	}
	/* The entry goes back to the pool after the callback, so its buffer
	 * stays valid while the callback reads it; a read the callback
	 * starts takes another entry. */
	if (res < 0)
		done((int)res, NULL, 0, arg);
	else
		done(0, req->buf, (size_t)res, arg);
	entry_put(cbs, e);
}

int rl_cb_fs_read_file(rl_cb_ctx *cbs, const char *path,
		    rl_cb_data_fn done, void *arg)
{
	struct entry *e;
	int ret;

	if (!cbs || !done)
		return -EINVAL;
	e = entry_get(cbs);
	if (!e)
		return -ENOMEM;
	e->done = done;
	e->arg = arg;
	ret = rl_fs_read_file(cbs->loop, &e->req, path, e->req.buf,
			   e->req.buf ? e->req.len : cbs->guess,
			   RL_READ_FILE_GROW, read_file_done);
	if (ret < 0) {
		entry_put(cbs, e);
		return ret;
	}
	cbs->in_flight++;
	return 0;
}

/* Frees every chunk none of whose entries is in use, keeping at least
 * keep entries pooled, then rebuilds the free list from what is left. Not
 * on a hot path: after a burst, the caller decides when to give memory
 * back. */
size_t rl_cb_ctx_trim(rl_cb_ctx *cbs, size_t keep)
{
	struct chunk **pc = &cbs->chunks, *c;
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
			free(c->e[i].req.buf);
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
