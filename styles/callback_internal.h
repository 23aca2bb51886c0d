/* SPDX-License-Identifier: MIT */
/*
 * callback_internal.h - what the callback style's files share: the
 * context and its pool of entries (callback.c), used by the operations
 * (callback_fs.c).
 */
#ifndef RL_CALLBACK_INTERNAL_H
#define RL_CALLBACK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "ringloop/callback.h"
#include "list.h"

/*
 * A pooled entry: the request, the caller's callback and argument, and
 * the buffer of the pooled read_file (kept apart from the request, whose
 * fields every submission rewrites). The request comes first: its
 * callback finds the entry from it.
 */
struct rl__cb_entry {
	rl_req req;
	union {
		rl_cb_data_fn data; /* read_file */
		rl_cb_fn res;	    /* everything else */
		rl_cb_conn_fn conn; /* rl_cb_net_connect() */
	} done;
	void *arg;
	rl_cb_ctx *cbs;
	struct rl__cb_entry *next_free;
	bool in_use;
};

struct rl__cb_chunk;

/* The size of the pooled read_file's first buffer: small, and learned
 * from the files read so far (callback_fs.c), because a read that
 * outgrows it costs a second pass. */
#define RL__CB_FIRST_GUESS 256

struct rl_cb_ctx {
	rl_loop *loop;
	rl_close_hook close_hook; /* rl_loop_close() closes us */
	struct rl__cb_entry *free;
	struct rl_link chunks; /* struct rl__cb_chunk */
	size_t in_flight;
	size_t pooled;
	size_t guess;	      /* the first buffer of a new entry's read_file */
	size_t guess_max[2];  /* the largest file of this window, the last */
	unsigned guess_reads; /* reads learned from in this window */
	unsigned dispatching; /* our callbacks running now */
	bool closed;	      /* closed by the loop, freed at its end */
	struct rl_link conns; /* rl_cb_conn: alive (callback_net.c) */
	struct rl_link servers; /* rl_cb_server: alive */
};

/* An entry for one request (NULL: out of memory), and back to the pool. */
struct rl__cb_entry *rl__cb_entry_get(rl_cb_ctx *cbs);
void rl__cb_entry_put(rl_cb_ctx *cbs, struct rl__cb_entry *e);

/* The steps of every operation (callback_fs.c): an entry for a request
 * about to be submitted (NULL with *ret set), what its submission said
 * (the entry in flight, or back), and the callback of the operations
 * whose caller gets (err, value). */
struct rl__cb_entry *rl__cb_take(rl_cb_ctx *cbs, bool has_done, void *arg,
				 int *ret);
int rl__cb_submitted(rl_cb_ctx *cbs, struct rl__cb_entry *e, int ret);
void rl__cb_res_done(rl_req *req);

/* Frees the connections and servers still alive, closing their sockets
 * (callback_net.c); the loop is not touched: it may be gone already. */
void rl__cb_net_free(rl_cb_ctx *cbs);

/* Whether a connection or server has a task queued or a timer running on
 * the loop (callback_net.c): freeing it then would leave the loop
 * pointing into freed memory. */
bool rl__cb_net_busy(const rl_cb_ctx *cbs);

#endif /* RL_CALLBACK_INTERNAL_H */
