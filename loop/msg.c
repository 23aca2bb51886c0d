/* SPDX-License-Identifier: MIT */
/*
 * msg.c - how a cross-loop message (an rl_post()) wakes its target.
 *
 * The message itself always travels the same way: pushed on the target's
 * lock-free stack of posts, which the target drains after each wait, so
 * the messages of one sender run in the order it sent them whatever wakes
 * the target. Only the wake-up differs, and only a sleeping target gets
 * one (loop.c sets "asleep" before it waits): the one sender that takes
 * the flag rings the target, every other message rides along.
 *
 * Two ways to ring, on io_uring: an eventfd write (a syscall of the
 * sender; the target's ring has a read of that eventfd armed while it
 * sleeps), or IORING_OP_MSG_RING, an SQE on the sender's own ring that
 * posts a CQE on the target's, and goes to the kernel with the sender's
 * next io_uring_enter (no syscall of its own). The ring way needs the
 * sender to be a loop thread (its SQ is not thread-safe) of the same
 * group (whose loops all stay valid until the group is closed, so the
 * SQE, submitted later, never names a ring that is gone). It can fail
 * when the target's CQ is full (-EOVERFLOW): the sender's ring then gets
 * a CQE, and the wake-up goes again through the eventfd. On epoll the
 * eventfd is the only way.
 */
#include "internal.h"

static bool may_ring(const rl_loop *from, const rl_loop *to)
{
	return from && from != to && from->member && to->member &&
	       from->msg_wake != RL_MSG_WAKE_EVENTFD &&
	       from->backend == to->backend && from->backend->ring;
}

void rl__msg_wake(rl_loop *to)
{
	rl_loop *from = rl__loop_current;

	if (!atomic_load_explicit(&to->asleep, memory_order_seq_cst) ||
	    !atomic_exchange_explicit(&to->asleep, false, memory_order_seq_cst))
		return;
	if (may_ring(from, to) && from->backend->ring(from, to))
		return;
	to->backend->wake(to);
}

void rl__msg_ring_failed(rl_loop *to)
{
	to->backend->wake(to);
}
