/* SPDX-License-Identifier: MIT */
/*
 * group.h - what group.c (the loops and their threads) and spread.c (a
 * burst handed to the other loops) share.
 */
#ifndef RINGLOOP_GROUP_H
#define RINGLOOP_GROUP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

#include "internal.h"
#include "list.h"

#define RL__GROUP_MAX 256

struct rl__shard;

/* Shards waiting to travel together, to one loop. */
struct rl__batch {
	struct rl__shard *head, *tail;
	unsigned count;
	bool to_home; /* results going home, not requests going out */
};

/* A loop's spreading, touched by its own thread only. */
struct rl__spread {
	struct rl__shard *free;	    /* shards ready for reuse */
	struct rl__shard *inflight; /* shards with messages not home yet */
	void *chunks;		    /* what the shards were allocated in */
	uint64_t out;		    /* shards on inflight */
	unsigned next;		    /* the loop the next read_file goes to */
	struct rl__batch *to;	    /* [loop]: its own shards, going out */
	struct rl__batch *home;	    /* [loop]: others' shards, going home */
	rl_task flush;		    /* sends the batches after a callback
				      * batch */
	bool flush_queued;
	rl_close_hook hook;
};

struct rl__member {
	rl_group *group;
	unsigned index;
	rl_loop *loop;
	pthread_t thread;
	bool has_thread;
	int open_err;
	/* The member's thread only. */
	bool quit;
	bool share_pending; /* rl_group_run() asked for a share */
	bool share_active;  /* a share ran: done when the loop is idle */
	struct rl_post quit_post, share_post, done_post;
	struct rl__spread spread;
};

struct rl_group {
	unsigned n;
	struct rl_group_options opt;
	struct rl__member *m;
	_Atomic bool closing; /* no read_file is spread any more */

	/* Opening: the workers report their loop, then wait for go. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned reported;
	int go; /* 1: run; -1: a loop failed, shut down */

	/* rl_group_run(), on loop 0's thread */
	void (*share_fn)(rl_loop *loop, unsigned i, void *arg);
	void *share_arg;
	unsigned shares_left;
};

/* spread.c */
int rl__spread_init(struct rl__member *m);
void rl__spread_flush(rl_loop *loop, struct rl__batch *b);
void rl__spread_free(struct rl__member *m);

#endif /* RINGLOOP_GROUP_H */
