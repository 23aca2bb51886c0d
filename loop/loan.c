/* SPDX-License-Identifier: MIT */
/*
 * loan.c - read_file buffers the loop lends (RL_READ_FILE_LOAN).
 *
 * A lent buffer is taken when the read starts and comes back when the
 * callback returns, so a burst of 10,000 read_files holds buffers only for
 * the reads under way: on io_uring the chains in the kernel, not the
 * requests still waiting for a slot. The buffers the burst touches then
 * stay in the CPU's caches, where one buffer per request would not.
 *
 * Buffers that come back wait on a LIFO stack, linked through their first
 * bytes, so the next loan gets the one that was written last. They all
 * have loan_cap bytes: the size the loop lends grows to the largest buffer
 * that came back (a read grew it to fit its file), up to LOAN_MAX_CAP, and
 * buffers smaller than that are freed as they return. The stack keeps at
 * most LOAN_KEEP_BYTES; past it, returning buffers are freed.
 */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"
#include "req.h"

#define LOAN_MAX_CAP ((size_t)1 << 20) /* see rl_fs_loans_kept() */
#define LOAN_KEEP_BYTES ((size_t)64 << 20)

static void *pop(rl_loop *loop)
{
	void *buf = loop->loans;

	loop->loans = *(void **)buf;
	loop->nloans--;
	return buf;
}

/* Gives req the buffer its read fills: one from the stack when it is large
 * enough for the size asked, a new one otherwise. Returns 0 or -ENOMEM. */
int rl__loan_take(rl_loop *loop, rl_req *req)
{
	size_t want = rl__req(req)->cap;
	void *buf;

	if (loop->loans && loop->loan_cap >= want) {
		want = loop->loan_cap;
		buf = pop(loop);
	} else {
		buf = malloc(want);
		if (!buf)
			return -ENOMEM;
	}
	req->buf = buf;
	req->len = rl__req(req)->cap = want;
	loop->loans_out++;
	return 0;
}

/* A lent buffer of cap bytes is back: its callback has returned. */
void rl__loan_back(rl_loop *loop, void *buf, size_t cap)
{
	loop->loans_out--;
	if (cap > loop->loan_cap && cap <= LOAN_MAX_CAP) {
		/* Reads need more now: what waits is too small for them. */
		while (loop->loans)
			free(pop(loop));
		loop->loan_cap = cap;
	}
	if (cap != loop->loan_cap ||
	    (size_t)(loop->nloans + 1) * cap > LOAN_KEEP_BYTES) {
		free(buf);
		return;
	}
	*(void **)buf = loop->loans;
	loop->loans = buf;
	loop->nloans++;
}

size_t rl_fs_loans_out(const rl_loop *loop)
{
	return loop ? loop->loans_out : 0;
}

size_t rl_fs_loans_kept(const rl_loop *loop)
{
	return loop ? loop->nloans * loop->loan_cap : 0;
}

void rl__loan_free(rl_loop *loop)
{
	while (loop->loans)
		free(pop(loop));
	loop->loan_cap = 0;
}
