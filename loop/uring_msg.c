/* SPDX-License-Identifier: MIT */
/*
 * uring_msg.c - waking another io_uring loop through the sender's ring
 * (msg.c says when): one IORING_OP_MSG_RING SQE (5.18), which posts a CQE
 * on the target's ring. That CQE carries the bare RL__TAG_MSG, which the
 * target ignores: all it has to do is end the target's wait. On the
 * sender's ring the SQE posts a CQE only when it fails
 * (IOSQE_CQE_SKIP_SUCCESS, 5.17); its user_data names the target, whose
 * wake-up then goes through the eventfd (uring.c).
 */
#include "uring.h"

bool rl__uring_ring(rl_loop *from, rl_loop *to)
{
	struct rl__uring *u = rl__u(from);
	struct io_uring_sqe *sqe;

	if (u->closing)
		return false;
	sqe = io_uring_get_sqe(&u->ring);
	if (!sqe)
		return false;
	io_uring_prep_msg_ring(sqe, rl__u(to)->ring.ring_fd, 0, RL__TAG_MSG, 0);
	sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, (uint64_t)(uintptr_t)to | RL__TAG_MSG);
	return true;
}
