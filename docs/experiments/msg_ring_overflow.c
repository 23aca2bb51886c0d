/* SPDX-License-Identifier: MIT */
/*
 * msg_ring_overflow.c - does IORING_OP_MSG_RING fail when the target's CQ
 * is full? (docs/experiments.md, "The idle spin before a sleep"). Ring a
 * (the target, a 4-entry CQ, never reaped) receives 20 x 32 MSG_RINGs from
 * ring b; prints how many succeeded and failed, and a's SQ flags
 * (IORING_SQ_CQ_OVERFLOW = 2: the kernel kept the extra CQEs on its
 * overflow list). Usage: msg_ring_overflow [defer] (defer: the target is
 * a SINGLE_ISSUER | DEFER_TASKRUN ring).
 */
#include <liburing.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct io_uring a, b;
	struct io_uring_params p;
	int ok = 0, failed = 0, ret;

	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_CQSIZE;
	p.cq_entries = 4;
	if (argc > 1 && !strcmp(argv[1], "defer"))
		p.flags |=
			IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	ret = io_uring_queue_init_params(4, &a, &p);
	if (ret < 0 || io_uring_queue_init(64, &b, 0) < 0) {
		fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-ret));
		return 1;
	}
	for (int round = 0; round < 20; round++) {
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;

		for (int i = 0; i < 32; i++) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&b);

			io_uring_prep_msg_ring(sqe, a.ring_fd, 0, 1, 0);
		}
		io_uring_submit_and_wait(&b, 32);
		io_uring_for_each_cqe(&b, head, cqe)
		{
			if (cqe->res < 0 && failed++ < 3)
				printf("MSG_RING: %s\n", strerror(-cqe->res));
			else if (cqe->res >= 0)
				ok++;
			n++;
		}
		io_uring_cq_advance(&b, n);
	}
	printf("target CQ %u entries: %d MSG_RINGs succeeded, %d failed; "
	       "target sq_flags 0x%x\n",
	       p.cq_entries, ok, failed, *a.sq.kflags);
	return 0;
}
