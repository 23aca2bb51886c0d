/* SPDX-License-Identifier: MIT */
/*
 * queue.h - the intrusive FIFO of requests.
 *
 * A request is on at most one queue at a time (ready, a backend's pending
 * queue, or the thread pool's), so one link field, req->priv.next, serves
 * them all and no queue ever allocates.
 */
#ifndef RINGLOOP_QUEUE_H
#define RINGLOOP_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

#include "ringloop.h"

struct rl__fifo {
	struct rl_req *head;
	struct rl_req *tail;
};

static inline bool rl__fifo_empty(const struct rl__fifo *q)
{
	return q->head == NULL;
}

static inline void rl__fifo_push(struct rl__fifo *q, struct rl_req *req)
{
	req->priv.next = NULL;
	if (q->tail)
		q->tail->priv.next = req;
	else
		q->head = req;
	q->tail = req;
}

static inline struct rl_req *rl__fifo_pop(struct rl__fifo *q)
{
	struct rl_req *req = q->head;

	if (req) {
		q->head = req->priv.next;
		if (!q->head)
			q->tail = NULL;
		req->priv.next = NULL;
	}
	return req;
}

/* Moves every request of src to the end of dst. */
static inline void rl__fifo_splice(struct rl__fifo *dst, struct rl__fifo *src)
{
	if (!src->head)
		return;
	if (dst->tail)
		dst->tail->priv.next = src->head;
	else
		dst->head = src->head;
	dst->tail = src->tail;
	src->head = src->tail = NULL;
}

/* Removes req if it is on q; returns whether it was. O(n): cancel only. */
static inline bool rl__fifo_remove(struct rl__fifo *q, struct rl_req *req)
{
	struct rl_req *prev = NULL, *cur = q->head;

	while (cur && cur != req) {
		prev = cur;
		cur = cur->priv.next;
	}
	if (!cur)
		return false;
	if (prev)
		prev->priv.next = cur->priv.next;
	else
		q->head = cur->priv.next;
	if (q->tail == cur)
		q->tail = prev;
	cur->priv.next = NULL;
	return true;
}
#endif /* RINGLOOP_QUEUE_H */
