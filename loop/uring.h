/* SPDX-License-Identifier: MIT */
/*
 * uring.h - what the io_uring backend's files share: the backend's state,
 * what it keeps in a request, and the hooks between the core (uring.c:
 * the ring, queueing, waiting, cancelling) and the operations
 * (uring_fs.c: which SQEs a request takes and what its CQEs mean).
 *
 * Nothing here is seen outside the backend: the loop knows it only as
 * rl__backend_uring.
 */
#ifndef RINGLOOP_URING_H
#define RINGLOOP_URING_H

#include <liburing.h>
#include <pthread.h>

#include "internal.h"

/* The longest a non-blocking wait goes without entering the kernel
 * (poll_needs_enter() in uring.c says why it enters at all). */
#define RL__URING_POLL_ENTER_NS 50000

/* user_data is a request pointer with a tag in its low bits (requests are
 * at least 8-byte aligned), or a bare tag for the loop's own SQEs. */
enum {
	RL__TAG_MAIN = 0,   /* the request's only SQE, or a chain's read */
	RL__TAG_OPEN = 1,   /* a chain's open (CQE only on failure) */
	RL__TAG_CLOSE = 2,  /* a chain's close: the chain's last CQE */
	RL__TAG_WAKE = 3,   /* the eventfd read */
	RL__TAG_CANCEL = 4, /* an async cancel; its CQE is ignored */
	RL__TAG_PROBE = 5,  /* a read_file's end-of-file probe */
	RL__TAG_LINK_TIMEOUT = 6, /* a connect's linked timeout */
	RL__TAG_SLOT = 7,	  /* the close of a slot: slot << 3 | tag */
	RL__TAG_MASK = 7,
	/* A cross-loop wake-up (uring_msg.c) shares the cancels' tag, whose
	 * CQEs are ignored: bare on the target's ring, with the target loop's
	 * pointer on the sender's when it failed. */
	RL__TAG_MSG = RL__TAG_CANCEL,
};

/* Sockets (uring_net.c): the provided buffer ring, the streams waiting
 * for buffers, and per fd, the send in flight and those queued behind it
 * (so that sends on one socket go out in order). */
struct rl__uring_sendq {
	rl_req *active;
	struct rl__fifo wait;
};

struct rl__uring_net {
	struct io_uring_buf_ring *br;
	size_t br_len;
	uint32_t out;		 /* buffers not in the ring */
	struct rl__fifo starved; /* recv streams the ring ran dry for */
	struct rl__uring_sendq *sendq;
	uint32_t nsendq;
};

struct rl__uring {
	struct io_uring ring;
	bool direct; /* direct descriptors registered */
	bool link;   /* read_file as one linked chain */
	bool sqpoll;
	bool iopoll; /* RL_IOPOLL: wait by polling, never sleep */
	/* SINGLE_ISSUER: the ring was set up disabled and belongs to the
	 * thread that enables it, the first that enters it (ring_start() in
	 * uring.c). */
	bool single_issuer;
	pthread_t issuer;     /* ... that thread, once the ring is enabled */
	bool defer_taskrun;   /* completions are posted only by our enters */
	unsigned last_reaped; /* CQEs the last wait reaped */
	/* Loop time a non-blocking wait first found no reason to enter
	 * since the last enter; 0: entered since (poll_needs_enter()). */
	uint64_t poll_idle_ns;
	/* Until the first enter (ring_start()): whether the ring is still
	 * disabled, and its fd still to be registered (RL_REGISTER_RING). */
	bool started;
	bool disabled;
	bool register_ring;
	unsigned submit_batch; /* rl_options.submit_batch */
	/* With submit_batch 0: how sure the loop is that what it submits
	 * goes to a device and completes later, rather than inline in the
	 * enter (learn() in uring.c). At ASYNC_EAGER or more, requests are
	 * submitted in small batches as they come, not at the next wait. */
	uint8_t async_score;
	uint8_t sqe_flags; /* on every file request's SQEs (IOSQE_ASYNC) */
	bool closing;
	int error; /* a submit failed for good: the next wait says so */
	int32_t *free_slots;
	unsigned nfree;
	unsigned nslots;
	/* Per slot: 1 while it may hold a file. A read_file leaves its file
	 * in the slot when it calls back ("lingering"): the next open into
	 * that slot replaces it, which the kernel does without an SQE of its
	 * own (an open into an occupied slot closes what was there, 5.18),
	 * and the ones still lingering when the loop is about to sleep with
	 * no other file work, or when rl_run() returns with none, are closed
	 * then (flush_lingering() and uring_leave() in uring.c). */
	uint8_t *slot_file;
	/* Per slot: the two buffers of a read_file chain's read when it
	 * has no probe (RL_READ_FILE_REGULAR), the caller's and the byte
	 * after it, for as long as the slot's chain may be submitted. */
	struct iovec (*slot_iov)[2];
	unsigned nlinger;      /* free slots that hold a file */
	unsigned nslot_closes; /* their closes in flight */
	/* Loop time a wait first found files lingering since nlinger last
	 * left 0, or 0 (rl__stuck_for()). */
	uint64_t linger_since;
	/* Loop time a wait found every slot taken with requests waiting
	 * for one, 0 once a slot is freed (rl__stuck_for()). */
	uint64_t slots_stuck_ns;
	unsigned cq_budget; /* CQEs we may be owed at once */
	unsigned cq_owed;
	/* CQEs owed by requests that stopped counting against the budget
	 * because nothing moved for CQ_STUCK_NS (unstick_cq() in uring.c),
	 * and the loop time a wait found the budget full, 0 once it moves
	 * (a push or a reap). */
	unsigned cq_stretch;
	uint64_t cq_stuck_ns;
	/* Cancels that found no room in the SQ: their targets, sent before
	 * anything else as soon as there is room. cancel_any: the loop's
	 * close asked the kernel to drop everything. */
	uint64_t *cancels;
	unsigned ncancels, cancels_cap;
	/* SQPOLL: read_files and write_files cancelled while in the kernel,
	 * until they complete. The SQ thread runs a chain's open and, later,
	 * the task work that issues its next step; a cancel it takes in
	 * between finds nothing (-ENOENT), and the step then waits for ever
	 * on a FIFO. recancel_due: such a cancel came back -ENOENT, so the
	 * cancels of every listed request go again (recancel() in uring.c). */
	rl_req **recancel;
	unsigned nrecancel, recancel_cap;
	bool cancel_any;
	bool recancel_due;
	/* The loop's close: requests pushed since it last asked the kernel
	 * to cancel everything, and when that was (cancel_all()). */
	bool pushed_since_cancel_all;
	uint64_t cancel_all_ns;
	struct rl__fifo pending; /* waiting for SQ room, CQ budget or a slot */
	/* Next steps of requests that hold a slot already. They go before
	 * pending: a request waiting for a slot must never stand in front of
	 * the requests that will free one. */
	struct rl__fifo cont;
	/* read_files whose plain open met EMFILE/ENFILE while other
	 * read_files held fds: they retry as those close. */
	struct rl__fifo fd_wait;
	unsigned fds_held;
	uint64_t fds_stuck_ns; /* a wait found waiters; 0: an fd came back */
	int efd;
	bool wake_armed;
	uint64_t wake_buf;
	struct rl__uring_net net;
};

/* What this backend keeps in a request (its private words, req.h). */
struct rl__uring_req {
	int32_t slot; /* direct descriptor slot, or -1 */
	int32_t step; /* where a multi-step request is (uring_fs.c) */
	char probe;   /* the byte after a read, if any */
	/* read_file, write_file: runs on a plain fd, without a slot,
	 * because the table stayed full (rl__uring_slotted()). */
	bool plain;
	/* SQPOLL: the tags whose SQEs a cancel was sent for, and whether
	 * req is on rl__uring.recancel. */
	uint8_t cancel_tags;
	bool recancel_listed;
	/* The SQ tail after its last SQEs: until the kernel's head passes
	 * it, they wait in the SQ (rl__uring_fs_cancel()). */
	uint32_t sq_end;
	int64_t res[2]; /* read_file: the read's result; bytes so far */
};
RL__REQ_BE_FITS(struct rl__uring_req);

static inline struct rl__uring_req *rl__ur(rl_req *req)
{
	return RL__REQ_BE(struct rl__uring_req, req);
}

/* Whether req's file is a direct descriptor in its slot (ur->slot), or a
 * plain fd in req->fd: with RL_NO_DIRECT, or when it ran without a slot
 * (uring.c, unstick_slots()). */
static inline bool rl__uring_slotted(const struct rl__uring *u, rl_req *req)
{
	return u->direct && !rl__ur(req)->plain;
}

static inline struct rl__uring *rl__u(rl_loop *loop)
{
	return loop->be;
}

static inline uint64_t rl__udata(rl_req *req, unsigned tag)
{
	return (uint64_t)(uintptr_t)req | tag;
}

/* ------------------------------------------------ core, for the operations */

/* Pushes req now, or queues it at the end of q (pending for new requests,
 * cont for the next step of one that holds a slot or an fd). */
void rl__uring_push_or_queue(rl_loop *loop, struct rl__uring *u, rl_req *req,
			     struct rl__fifo *q);

/* Asks the kernel to cancel the SQE whose user_data is target. */
void rl__uring_cancel_sqe(rl_loop *loop, struct rl__uring *u, uint64_t target);
/* Before a chain's cancel: sends its SQEs if they still wait in the SQ
 * (sq_end: the SQ tail after them) and, on a DEFER_TASKRUN ring, runs the
 * task work the kernel holds until none is left, so that the chain's next
 * step (issued from task work) is where the cancel can find it. Costs
 * nothing when neither waits: a storm of cancels enters once. */
void rl__uring_settle(rl_loop *loop, struct rl__uring *u, uint32_t sq_end);

/* Gives req's direct descriptor slot back, if it holds one, as it is: a
 * failed open leaves in it whatever it held before. */
void rl__uring_release_slot(rl_loop *loop, struct rl__uring *u, rl_req *req);

/* Gives req's slot back after req closed its file: the slot is empty. */
void rl__uring_release_closed_slot(rl_loop *loop, struct rl__uring *u,
				   rl_req *req);

/* Gives req's slot back with req's file still open in it: req may call
 * back at once. The file is closed when another open takes the slot, or
 * before the loop sleeps without file work (see struct rl__uring). */
void rl__uring_linger_slot(rl_loop *loop, struct rl__uring *u, rl_req *req);

/* SQPOLL: keeps req, a read_file or write_file whose cancel was just sent
 * for its SQE of tag, on the list whose cancels go again while one finds
 * nothing. Without memory, the cancel goes once, as on other rings. */
void rl__uring_recancel_list(struct rl__uring *u, rl_req *req, unsigned tag);

/* req is finished: rl__complete(), and no cancel of it is left queued
 * (req may be submitted again at once, and must not meet it). */
void rl__uring_complete(rl_loop *loop, struct rl__uring *u, rl_req *req,
			int64_t res);

/* -------------------------------------------------- operations, for the core */

/* What the next push of req takes: SQEs (each may be owed a CQE) and
 * whether it needs a direct descriptor slot. */
struct rl__uring_need {
	unsigned sqes;
	bool slot;
	/* A multishot request (a socket stream) is left out of the CQ
	 * budget: it may live for ever, idle, and its CQEs have no bound
	 * anyway. A CQ it overflows (6.x keeps the CQEs, IORING_FEAT_NODROP)
	 * ends it without IORING_CQE_F_MORE, and uring_net.c re-arms it. */
	bool multishot;
};

/* Sets up a new request's private words (slot and step). */
void rl__uring_fs_start(struct rl__uring *u, rl_req *req);
struct rl__uring_need rl__uring_fs_need(const struct rl__uring *u, rl_req *req);
/* A read_file or write_file that waits for a slot runs on a plain fd
 * instead, one step at a time (the table stayed full: see uring.c). */
void rl__uring_fs_unslot(rl_req *req);
/* Puts req's SQEs on the ring; the core checked there is room. */
void rl__uring_fs_prep(struct rl__uring *u, rl_req *req);
/* A CQE of req (tag: which of its SQEs). */
void rl__uring_fs_cqe(rl_loop *loop, struct rl__uring *u, rl_req *req,
		      unsigned tag, int32_t res);
/* Best effort to stop req in the kernel (rl_cancel). */
void rl__uring_fs_cancel(rl_loop *loop, struct rl__uring *u, rl_req *req);
/* The loop closes: the fd waiters go back to pending, to be cancelled. */
void rl__uring_fs_closing(struct rl__uring *u);
/* The backend's register_buffers (uring_fs_write.c). */
int rl__uring_register_buffers(rl_loop *loop, const struct iovec *iov,
			       unsigned n);

/* Sockets (uring_net.c), the same hooks for the socket requests. */
void rl__uring_net_submit(rl_loop *loop, struct rl__uring *u, rl_req *req);
struct rl__uring_need rl__uring_net_need(const struct rl__uring *u,
					 rl_req *req);
void rl__uring_net_prep(rl_loop *loop, struct rl__uring *u, rl_req *req);
void rl__uring_net_cqe(rl_loop *loop, struct rl__uring *u, rl_req *req,
		       unsigned tag, int32_t res, uint32_t flags);
/* rl_cancel() of a socket request, wherever it is (pending included). */
void rl__uring_net_cancel(rl_loop *loop, struct rl__uring *u, rl_req *req);
/* The loop closes: what waits in user space finishes with -ECANCELED. */
void rl__uring_net_closing(rl_loop *loop, struct rl__uring *u);
void rl__uring_net_destroy(struct rl__uring *u);
int rl__uring_net_setup(rl_loop *loop);
void rl__uring_net_bufs_back(rl_loop *loop, const uint16_t *ids, unsigned n);

/* Cross-loop wake-ups (uring_msg.c): the backend's ring(). */
bool rl__uring_ring(rl_loop *from, rl_loop *to);

#endif /* RINGLOOP_URING_H */
