/* SPDX-License-Identifier: MIT */
/*
 * uring_fs.h - what the io_uring backend's two files of file operations
 * share: uring_fs.c (the dispatch, single-SQE requests and read_file) and
 * uring_fs_write.c (writes, which finish what a short write left, and
 * write_file). Neither the core (uring.c) nor anything outside the backend
 * includes it.
 */
#ifndef RINGLOOP_URING_FS_H
#define RINGLOOP_URING_FS_H

#include "uring.h"

/* Where a multi-step request is (rl__uring_req.step). STEP_CHAIN: one
 * linked chain in flight; the others run one SQE at a time (no link, no
 * direct descriptors, or what is left after a chain stopped early). */
enum {
	STEP_CHAIN = 0,
	STEP_OPEN,
	STEP_READ,  /* read_file: a read and its probe */
	STEP_WRITE, /* write_file: the data, or what is left of it */
	STEP_SYNC,  /* write_file: fsync or fdatasync */
	STEP_CLOSE,
};

/* write_file's fsync in a chain: the probe's tag, which write_file does
 * not use otherwise. */
#define RL__TAG_SYNC RL__TAG_PROBE

/* Whether req should stop at its next step: cancelled, or the loop
 * closes. */
static inline bool rl__uring_stopping(const struct rl__uring *u, rl_req *req)
{
	return (rl__req(req)->state & RL__REQ_CANCEL) || u->closing;
}

/* A request that held a plain fd closed it: one waiting for an fd may try
 * again (uring_fs.c). fd_wait: req's open met EMFILE or ENFILE while
 * others hold fds; it waits for one of them (at most RL__FD_STUCK_NS
 * with none given back, uring.c). */
void rl__uring_fd_released(struct rl__uring *u);
void rl__uring_fd_wait(struct rl__uring *u, rl_req *req);

/* uring_fs_write.c: writes (write, writev, write_fixed) and write_file. */
void rl__uring_write_prep(struct rl__uring *u, rl_req *req);
void rl__uring_write_cqe(rl_loop *loop, struct rl__uring *u, rl_req *req,
			 int32_t res);
/* A write stopped between two of its SQEs: -ECANCELED. */
void rl__uring_write_stop(rl_loop *loop, rl_req *req);
struct rl__uring_need rl__uring_wf_need(const struct rl__uring *u, rl_req *req);
void rl__uring_wf_prep(struct rl__uring *u, rl_req *req);
void rl__uring_wf_cqe(rl_loop *loop, struct rl__uring *u, rl_req *req,
		      unsigned tag, int32_t res);

#endif /* RINGLOOP_URING_FS_H */
