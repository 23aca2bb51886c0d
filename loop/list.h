/* SPDX-License-Identifier: MIT */
/*
 * list.h - the one intrusive list of ringloop: doubly linked and circular,
 * its head a link like any other, so that insertion and removal anywhere
 * are O(1) and never allocate.
 *
 * Every list of the project that holds objects (microtasks, cancelled
 * timers, close hooks, coroutines alive and waiting to start, coroutine
 * stacks) uses it. Three shapes are not lists and stay what they are: the
 * request FIFO of queue.h (one word per request, the hot path), the
 * lock-free stacks that other threads push onto (posts, pool completions),
 * the registry of coroutine stacks that a signal handler walks without a
 * lock (unlinking here zeroes the link, which a handler walking at that
 * moment must not meet), and free-lists of allocators (stacks of unused
 * cells).
 *
 * A link that is on no list is zeroed (next == NULL): a zeroed struct
 * holding one is ready to be queued, and rl__list_linked() tells the two
 * states apart. A head must be rl__list_init()'ed (or RL__LIST_HEAD()'ed)
 * before use. It knows nothing of the loop, so the styles use it too.
 */
#ifndef RINGLOOP_LIST_H
#define RINGLOOP_LIST_H

#include <stdbool.h>
#include <stddef.h>

#include <ringloop/ringloop.h> /* struct rl_link */

/* The struct of type `type` whose member `member` is the link at ptr. */
#define RL__CONTAINER(ptr, type, member) \
	((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* A static head, linked to itself: an empty list. */
#define RL__LIST_HEAD(name)      \
	{                        \
		&(name), &(name) \
	}

static inline void rl__list_init(struct rl_link *head)
{
	head->next = head->prev = head;
}

static inline bool rl__list_empty(const struct rl_link *head)
{
	return head->next == head;
}

/* Whether a link (not a head) is on a list now. */
static inline bool rl__list_linked(const struct rl_link *link)
{
	return link->next != NULL;
}

static inline void rl__list_insert(struct rl_link *link, struct rl_link *prev,
				   struct rl_link *next)
{
	link->prev = prev;
	link->next = next;
	prev->next = link;
	next->prev = link;
}

/* Adds link at the front of the list (a stack's push). */
static inline void rl__list_add_head(struct rl_link *head, struct rl_link *link)
{
	rl__list_insert(link, head, head->next);
}

/* Adds link at the back of the list (a FIFO's push). */
static inline void rl__list_add_tail(struct rl_link *head, struct rl_link *link)
{
	rl__list_insert(link, head->prev, head);
}

/* Takes link off its list and zeroes it. */
static inline void rl__list_del(struct rl_link *link)
{
	link->prev->next = link->next;
	link->next->prev = link->prev;
	link->next = link->prev = NULL;
}

/* Takes the first link off the list and returns it; NULL when empty. */
static inline struct rl_link *rl__list_pop(struct rl_link *head)
{
	struct rl_link *link = head->next;
	struct rl_link *next = link->next;

	if (link == head)
		return NULL;
	head->next = next;
	next->prev = head;
	link->next = link->prev = NULL;
	return link;
}

/* Moves every link of src to the back of dst, in order; src ends empty. */
static inline void rl__list_splice_tail(struct rl_link *dst,
					struct rl_link *src)
{
	if (rl__list_empty(src))
		return;
	src->next->prev = dst->prev;
	dst->prev->next = src->next;
	src->prev->next = dst;
	dst->prev = src->prev;
	rl__list_init(src);
}

/* Walks the list front to back; the body must not unlink pos (take the
 * next link first, or pop, to remove while walking). */
#define rl__list_for_each(pos, head) \
	for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)

#endif /* RINGLOOP_LIST_H */
