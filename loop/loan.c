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
 * Buffers that come back wait on a LIFO stack per power-of-two size class
 * (256 B to 1 MiB), so the next loan of that size gets the one written
 * last, and a few big files among many small ones neither give the small
 * reads big buffers nor make them allocate. A buffer is filed under the
 * largest class it holds (a read may have grown it to any size), and a
 * loan takes from the smallest class that holds what it asks for. A class
 * keeps at most as many buffers as were ever out at once (a read that
 * asks for little and grows to a big file leaves a big buffer each time,
 * which the next such read does not ask for), buffers over 1 MiB are not
 * kept, and nothing past LOAN_KEEP_BYTES in all.
 */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"
#include "req.h"

#define LOAN_KEEP_BYTES ((size_t)64 << 20) /* see rl_fs_loans_kept() */
#define LOAN_MIN	((size_t)1 << RL__LOAN_MIN_SHIFT)
#define LOAN_MAX	(LOAN_MIN << (RL__LOAN_CLASSES - 1))

/* What a kept buffer holds in its first bytes. */
struct rl__loan {
	struct rl__loan *next;
	size_t cap;
};

/* The smallest class of at least want bytes (want <= LOAN_MAX). */
static unsigned class_up(size_t want)
{
	if (want <= LOAN_MIN)
		return 0;
	return (unsigned)(64 - __builtin_clzll((unsigned long long)want - 1)) -
	       RL__LOAN_MIN_SHIFT;
}

/* The largest class cap bytes hold (LOAN_MIN <= cap). */
static unsigned class_down(size_t cap)
{
	unsigned c = (unsigned)(63 - __builtin_clzll((unsigned long long)cap)) -
		     RL__LOAN_MIN_SHIFT;

	return c < RL__LOAN_CLASSES ? c : RL__LOAN_CLASSES - 1;
}

/* Gives req the buffer its read fills: a kept one when one of a class
 * large enough for the size asked waits, a new one of that class
 * otherwise. Returns 0 or -ENOMEM. */
int rl__loan_take(rl_loop *loop, rl_req *req)
{
	size_t want = rl__req(req)->cap, max = loop->opt.read_file_max;
	struct rl__loan *l = NULL;
	void *buf;

	/* read_file_max bounds the buffer a read may use, and the loop
	 * picks a lent buffer's size: neither the hint nor the rounding up
	 * to a class may pass it, or a file larger than the cap would fit
	 * (and the buffer be larger than the cap). Kept buffers never pass
	 * it: each was lent and grown within it. */
	if (want > max)
		want = max;
	if (want <= LOAN_MAX) {
		unsigned c = class_up(want);

		l = loop->loans[c];
		if (l) {
			loop->loans[c] = l->next;
			loop->loans_n[c]--;
			loop->loans_kept -= l->cap;
			want = l->cap;
		} else if ((LOAN_MIN << c) < max) {
			want = LOAN_MIN << c;
		} else {
			want = max;
		}
	}
	buf = l ? (void *)l : malloc(want);
	if (!buf)
		return -ENOMEM;
	req->buf = buf;
	req->len = rl__req(req)->cap = want;
	if (++loop->loans_out > loop->loans_peak)
		loop->loans_peak = loop->loans_out;
	return 0;
}

/* A lent buffer of cap bytes is back: its callback has returned. */
void rl__loan_back(rl_loop *loop, void *buf, size_t cap)
{
	struct rl__loan *l = buf;
	unsigned c;

	loop->loans_out--;
	if (cap < LOAN_MIN || cap > LOAN_MAX ||
	    loop->loans_kept + cap > LOAN_KEEP_BYTES) {
		free(buf);
		return;
	}
	c = class_down(cap);
	if (loop->loans_n[c] >= loop->loans_peak) {
		free(buf);
		return;
	}
	loop->loans_n[c]++;
	l->cap = cap;
	l->next = loop->loans[c];
	loop->loans[c] = l;
	loop->loans_kept += cap;
}

size_t rl_fs_loans_out(const rl_loop *loop)
{
	return loop ? loop->loans_out : 0;
}

size_t rl_fs_loans_kept(const rl_loop *loop)
{
	return loop ? loop->loans_kept : 0;
}

void rl__loan_free(rl_loop *loop)
{
	for (unsigned c = 0; c < RL__LOAN_CLASSES; c++) {
		while (loop->loans[c]) {
			struct rl__loan *l = loop->loans[c];

			loop->loans[c] = l->next;
			free(l);
		}
		loop->loans_n[c] = 0;
	}
	loop->loans_kept = 0;
}
