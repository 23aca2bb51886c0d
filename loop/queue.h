/* SPDX-License-Identifier: MIT */
/*
 * queue.h - the intrusive FIFO of requests.
 *
 * A request is on at most one queue at a time (ready, a backend's pending
 * queue, or the thread pool's), so one link field, rl__req(req)->next, serves
 * them all and no queue ever allocates.
 */
#ifndef RINGLOOP_QUEUE_H
#define RINGLOOP_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

#include "req.h"

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
	rl__req(req)->next = NULL;
	if (q->tail)
		rl__req(q->tail)->next = req;
	else
		q->head = req;
	q->tail = req;
}

static inline struct rl_req *rl__fifo_pop(struct rl__fifo *q)
{
	struct rl_req *req = q->head;

	if (req) {
		q->head = rl__req(req)->next;
		if (!q->head)
			q->tail = NULL;
		rl__req(req)->next = NULL;
	}
	return req;
}

/* Puts req back at the head of q, where rl__fifo_pop() took it from. */
static inline void rl__fifo_push_head(struct rl__fifo *q, struct rl_req *req)
{
	rl__req(req)->next = q->head;
	q->head = req;
	if (!q->tail)
		q->tail = req;
}

/* Moves every request of src to the end of dst. */
static inline void rl__fifo_splice(struct rl__fifo *dst, struct rl__fifo *src)
{
	if (!src->head)
		return;
	if (dst->tail)
		rl__req(dst->tail)->next = src->head;
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
		cur = rl__req(cur)->next;
	}
	if (!cur)
		return false;
	if (prev)
		rl__req(prev)->next = rl__req(cur)->next;
	else
		q->head = rl__req(cur)->next;
	if (q->tail == cur)
		q->tail = prev;
	rl__req(cur)->next = NULL;
	return true;
}
#endif /* RINGLOOP_QUEUE_H */
