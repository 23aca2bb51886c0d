/* SPDX-License-Identifier: MIT */
/*
 * req.h - what the loop keeps in a request's private words.
 *
 * struct rl_req ends in RL_REQ_PRIVATE_WORDS words that only the loop
 * reads. The loop core's part comes first; the rest belongs to the backend
 * that runs the request, which lays its own struct over it (be) and checks
 * with a static assertion that it fits. The words are only ever accessed
 * through these structs (rl_req_init() and the submitting calls clear them
 * with memset), never as the public array.
 */
#ifndef RINGLOOP_REQ_H
#define RINGLOOP_REQ_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>

#include "ringloop/ringloop.h"

#define RL__REQ_BE_WORDS (RL_REQ_PRIVATE_WORDS - 5)

struct rl__req_priv {
	rl_req *next;	/* ready, pending and pool queues */
	uint32_t state; /* RL__REQ_* */
	uint32_t spare;
	size_t cap;		       /* read_file: the buffer's capacity */
	void (*work)(rl_req *);	       /* a thread pool job */
	rl_timer *deadline;	       /* rl_req_deadline()'s timer, or NULL */
	uint64_t be[RL__REQ_BE_WORDS]; /* the backend's */
};

static_assert(sizeof(struct rl__req_priv) == sizeof(((rl_req *)0)->priv),
	      "struct rl__req_priv must fill rl_req.priv exactly");

static inline struct rl__req_priv *rl__req(rl_req *req)
{
	return (struct rl__req_priv *)(void *)req->priv.words;
}

static inline const struct rl__req_priv *rl__req_c(const rl_req *req)
{
	return (const struct rl__req_priv *)(const void *)req->priv.words;
}

/* The backend's struct T over req's backend words. */
#define RL__REQ_BE(T, req) ((T *)(void *)rl__req(req)->be)
#define RL__REQ_BE_FITS(T)                                                 \
	static_assert(sizeof(T) <= sizeof(((struct rl__req_priv *)0)->be), \
		      #T " must fit in a request's backend words")

#endif /* RINGLOOP_REQ_H */
