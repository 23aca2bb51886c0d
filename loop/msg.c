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
 * a CQE, and the wake-up goes again through the eventfd. The SQE must not
 * wait in the sender's ring after its rl_run() returns (rl__msg_flush()).
 * On epoll the eventfd is the only way.
 */
#include "group.h"

/* Only within a group: the loops of another group may be closed and
 * freed before the SQE leaves (the sender may be inside a callback that
 * closes that group), and the SQE would then ring a closed fd, whose
 * failure names a freed loop (rl__msg_ring_failed()). */
static bool may_ring(const rl_loop *from, const rl_loop *to)
{
	return from && from != to && from->member && to->member &&
	       from->member->group == to->member->group &&
	       from->msg_wake != RL_MSG_WAKE_EVENTFD &&
	       from->backend == to->backend && from->backend->ring;
}

void rl__msg_wake(rl_loop *to)
{
	rl_loop *from = rl__loop_current;

	if (!atomic_load_explicit(&to->asleep, memory_order_seq_cst) ||
	    !atomic_exchange_explicit(&to->asleep, false, memory_order_seq_cst))
		return;
	if (may_ring(from, to) && from->backend->ring(from, to)) {
		from->msg_unsent = true;
		return;
	}
	to->backend->wake(to);
}

/*
 * The SQE that rings the target leaves with the sender's next enter. A
 * sender whose rl_run() returns may not enter again for a long time (a
 * loop run to idle, then the thread waits for what the target does): the
 * target, whose "asleep" flag the sender took, would sleep on with its
 * messages, and no other sender would wake it. So the wake-ups go before
 * rl_run() returns; a group's worker, which enters again at once, leaves
 * them to that enter (group.c).
 */
void rl__msg_flush(rl_loop *loop)
{
	if (!loop->msg_unsent)
		return;
	loop->msg_unsent = false;
	if (loop->backend->flush)
		loop->backend->flush(loop);
}

void rl__msg_ring_failed(rl_loop *to)
{
	to->backend->wake(to);
}
