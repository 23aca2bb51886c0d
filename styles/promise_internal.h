/* SPDX-License-Identifier: MIT */
/*
 * promise_internal.h - what the promise files share: the records, the
 * pools and the settle/reference primitives.
 *
 * Everything that waits for a promise to settle is a "waiter": a derived
 * promise (then, catch, finally, adoption), a combinator's input record or
 * a subscription. A waiter sits on its source's list until the source
 * settles, then its embedded rl_task is queued on the loop, and it runs as
 * a microtask. A derived promise embeds its own waiter, because it has
 * exactly one producer at a time: that keeps a then-link at one record, so
 * a chain of a million links is a million records, not two million.
 *
 * References: a source's waiting list holds one reference to every waiting
 * derived promise (and an input record holds one to its combinator); a
 * queued waiter holds one to the source it reads; a request in flight holds
 * one to its promise. A waiting list does not hold its source: a source
 * nothing else refers to can never settle, and is freed with its waiters.
 */
#ifndef RL_PROMISE_INTERNAL_H
#define RL_PROMISE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringloop/promise.h"
#include "list.h"

/* What a waiter does when it runs. */
enum rl__wkind {
	RL__W_NONE = 0,
	RL__W_THEN,    /* promise: run on_ok/on_err, settle or adopt */
	RL__W_FINALLY, /* promise: run fn, then wait via a thunk */
	RL__W_THUNK, /* promise: q settled; take orig's outcome or q's error */
	RL__W_ADOPT_JOB, /* promise: the "resolve thenable" job: start waiting */
	RL__W_ADOPT,	 /* promise: the adopted promise settled: copy it */
	RL__W_ALL,	 /* input record of rl_all */
	RL__W_ALL_SETTLED, /* input record of rl_all_settled */
	RL__W_ANY,	   /* input record of rl_any */
	RL__W_RACE,	   /* input record of rl_race */
	RL__W_SUB,	   /* rl_promise_subscribe */
};

struct rl__op;

struct rl__waiter {
	rl_task task;
	struct rl__waiter *next; /* source's list; destroy work list */
	rl_promise *src;	 /* set when queued: the settled source */
	uint8_t kind;		 /* enum rl__wkind */
};

/* What produces a promise's outcome. */
enum rl__pkind {
	RL__P_PLAIN = 0, /* settled by the program, or at creation */
	RL__P_DERIVED,	 /* settled by its own waiter */
	RL__P_COMB,	 /* a combinator: settled by its input records */
	RL__P_REQ,	 /* a loop request or timer */
	RL__P_CONN_READ, /* a connection's read (promise_conn.c) */
};

struct rl_promise {
	struct rl__waiter w; /* for derived promises */
	rl_promise_ctx *ctx;
	uint32_t refs;
	uint8_t state;	/* enum rl_promise_state */
	uint8_t pkind;	/* enum rl__pkind */
	uint8_t locked; /* resolved to a promise: the program can't settle */
	int err;
	struct rl_value value;
	struct rl__waiter *waiters; /* LIFO while pending; reversed to run */
	rl_promise *hold; /* the promise value.p points into, or NULL */
	union {
		struct {
			rl_reaction_fn ok, err;
			void *arg; /* RL__W_THUNK: the original promise */
		} h;
		struct {
			void *block; /* entries then holds, from the blocks */
			size_t n;
			size_t remaining;
		} c;
		struct rl__op *op; /* RL__P_REQ: its record, while in flight */
		/* RL__P_CONN_READ: its connection, while pending */
		struct rl_promise_conn *conn;
	} u;
};

/* A combinator's input, or a subscription. */
struct rl__input {
	struct rl__waiter w;
	union {
		rl_promise *comb;
		rl_settle_fn fn;
	} to;
	union {
		size_t index;
		void *arg;
	} at;
};

/* A fixed-size record pool: chunks from malloc, never returned before the
 * context closes, records recycled through a free list. */
struct rl__record_pool {
	size_t size;
	size_t chunk; /* records in the next chunk */
	void *free;
	void *chunks;
	size_t live;
};

/* Size classes for combinator arrays: 2^k bytes, k < RL__BLOCK_CLASSES. */
#define RL__BLOCK_MIN	  6
#define RL__BLOCK_CLASSES 48

struct rl__op;

struct rl_promise_ctx {
	rl_loop *loop;
	rl_close_hook close_hook; /* rl_loop_close() closes us */
	struct rl__op *in_flight; /* requests and timers in flight */
	unsigned dispatching;	  /* reactions of ours running now */
	bool closed;		  /* closed by the loop, freed at its end */
	struct rl__record_pool promises;
	struct rl__record_pool inputs;
	struct rl__record_pool ops;
	void *blocks[RL__BLOCK_CLASSES]; /* free lists of array blocks */
	void *all_blocks;		 /* every block, freed at close */
	size_t block_live;
	size_t queued;	 /* waiters queued as microtasks */
	size_t inflight; /* requests and timers in flight */
	size_t conns;	 /* connections open (promise_conn.c) */
	size_t remotes;	 /* handles of rl_promise_remote_new() out */
	size_t subs;	 /* subscriptions that have not run */
};

void *rl__record_get(struct rl__record_pool *pool);
void rl__record_put(struct rl__record_pool *pool, void *rec);
void *rl__block_get(rl_promise_ctx *ctx, size_t bytes);
void rl__block_put(rl_promise_ctx *ctx, void *block);

/* A fresh promise with refs references. */
rl_promise *rl__promise_alloc(rl_promise_ctx *ctx, uint8_t pkind,
			      uint32_t refs);
/*
 * Settles p unless it is settled already (-EALREADY). owner is the promise
 * value.p points into (p keeps a reference to it), or NULL.
 */
int rl__settle(rl_promise *p, int err, struct rl_value value,
	       rl_promise *owner);
/* The promise whose memory p's value points into, or NULL. */
rl_promise *rl__value_owner(rl_promise *p);
/* Makes w wait for src (queued at once when src is settled already). */
void rl__wait(rl_promise *src, struct rl__waiter *w, uint8_t kind);
/* The size of a request record (promise_fs.c). */
size_t rl__op_size(void);
/* Cancels every request and timer in flight (promise_fs.c). */
void rl__ops_cancel_all(rl_promise_ctx *ctx);
/*
 * For the request promises of other files (promise_net.c), the steps of
 * promise_fs.c: a request record's rl_req (NULL: no memory, or *refused
 * set to a rejected promise when the loop has closed the context), what its
 * submission said (the promise: pending, or rejected with the error),
 * and the callback that settles it with the request's result (the value
 * promise.h lists for its operation).
 */
rl_req *rl__op_req_new(rl_promise_ctx *ctx, rl_promise **refused);
rl_promise *rl__op_req_submitted(rl_req *req, int ret);
void rl__op_req_cb(rl_req *req);
/* rl_promise_cancel() of a connection's read (promise_conn.c). */
int rl__conn_read_cancel(rl_promise *p);
/* Runs a combinator's input record (promise_combinators.c). */
void rl__input_run(struct rl__input *in);
/* Frees a combinator's block, dropping the references it holds. */
void rl__comb_release(rl_promise *p, rl_promise **work);
/* Drops one reference; a promise that reaches 0 goes on *work. */
void rl__drop(rl_promise *p, rl_promise **work);

static inline struct rl__input *rl__input_of(struct rl__waiter *w)
{
	return RL__CONTAINER(w, struct rl__input, w);
}

#endif /* RL_PROMISE_INTERNAL_H */
