/* SPDX-License-Identifier: MIT */
/*
 * backend_uring.c - the io_uring backend, through liburing.
 *
 * Kernel and liburing quirks handled here:
 *
 *  - liburing 2.3 (Debian 12): io_uring_prep_openat_direct() with
 *    IORING_FILE_INDEX_ALLOC is broken (fixed in 2.4), so direct descriptors
 *    use explicit slots from our own free list.
 *  - A short read counts as a failure for IOSQE_IO_LINK and would cancel
 *    what follows it, leaking the slot (every read of a file smaller than
 *    the buffer is "short"). The read -> probe -> close links are therefore
 *    IOSQE_IO_HARDLINK; open -> read stays a plain link so a failed open
 *    cancels the rest.
 *  - A short read is not the end of every file: procfs and sysfs files say
 *    size 0 and return a page or a record per read. A chain is therefore
 *    open -> read -> probe (one byte at the file position) -> close; the
 *    probe's CQE is skipped when it reads a byte, so the usual chain costs
 *    two CQEs (read, probe at EOF) plus the close's.
 *  - A read CQE can reach user space before the linked close has run, so a
 *    slot is only reused after the close's own CQE. The chain's callback
 *    runs on that CQE too: the close is always the last CQE of its chain
 *    (failed links are completed after the request that failed them).
 *  - IOSQE_CQE_SKIP_SUCCESS (5.17) on the open: its CQE exists only when
 *    it fails, and then the kernel posts no CQE for the linked read and
 *    close it cancelled, so that CQE ends the chain. Direct descriptors
 *    need 5.15, sparse file tables 5.19.
 *  - openat into a direct slot rejects O_CLOEXEC with -EINVAL (a direct
 *    descriptor is not in the fd table, so there is nothing to close on
 *    exec); plain opens keep O_CLOEXEC.
 *  - An eventfd read through the ring is the cross-thread wake-up. The
 *    eventfd must be blocking: on an O_NONBLOCK file io_uring hands -EAGAIN
 *    back instead of waiting.
 *  - Before IORING_FEAT_NODROP (5.5) an overflowing CQ dropped CQEs; with
 *    it, 5.x kernels answer io_uring_enter with -EBUSY while the overflow
 *    backlog is non-empty. The loop keeps the CQEs it may be owed within the
 *    CQ size (a chain reserves 3: open error, read, close), so neither
 *    happens in practice, and -EBUSY is handled by reaping first anyway.
 *  - A sparse file table larger than RLIMIT_NOFILE fails with EMFILE: the
 *    table is clamped to the limit.
 *  - DEFER_TASKRUN (6.1) requires SINGLE_ISSUER; the kernel refuses the
 *    combination otherwise with -EINVAL, which rl_loop_open() returns.
 *  - A FIFO nobody writes to. A plain IORING_OP_OPENAT of it completed at
 *    once with an fd on 6.18 (the non-blocking first attempt does not wait
 *    for a writer, unlike open(2)); the linked open of a read_file chain
 *    goes to an io-wq worker and waits there, and a read or the end-of-file
 *    probe waits for data. All of them wait forever without a writer, so
 *    rl_cancel() sends an async cancel for the open, the read and (once
 *    the read has ended, since the hard link then issues it) the probe;
 *    closing sends IORING_ASYNC_CANCEL_ANY, and cancels probes the same way.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "internal.h"

/* user_data is a request pointer with a tag in its low bits (requests are
 * at least 8-byte aligned), or a bare tag for the loop's own SQEs. */
enum {
	TAG_MAIN = 0,  /* the request's only SQE, or a chain's read */
	TAG_OPEN = 1,  /* a chain's open (CQE only on failure) */
	TAG_CLOSE = 2, /* a chain's close: the chain's last CQE */
	TAG_WAKE = 3,  /* the eventfd read */
	TAG_CANCEL = 4, /* an async cancel; its CQE is ignored */
	TAG_PROBE = 5, /* a read_file's end-of-file probe */
	TAG_MASK = 7,
};

/* Step of a read_file that runs one SQE at a time (no link, no direct
 * descriptors, or a file that outgrew its first buffer). */
enum { STEP_CHAIN = 0, STEP_OPEN, STEP_READ, STEP_CLOSE };

#define BATCH 256
#define CQ_SPARE 8 /* CQEs kept for the wake-up read and cancels */

struct uring {
	struct io_uring ring;
	bool direct;	/* direct descriptors registered */
	bool link;	/* read_file as one linked chain */
	bool sqpoll;
	bool closing;
	int32_t *free_slots;
	unsigned nfree;
	unsigned cq_budget; /* CQEs we may be owed at once */
	unsigned cq_owed;
	struct rl__fifo pending; /* waiting for SQ room, CQ budget or a slot */
	/* Next steps of read_files that hold a slot already. They go before
	 * pending: a request waiting for a slot must never stand in front of
	 * the requests that will free one. */
	struct rl__fifo cont;
	/* read_files whose plain open met EMFILE/ENFILE while other
	 * read_files held fds: they retry as those close. */
	struct rl__fifo fd_wait;
	unsigned fds_held;
	int efd;
	bool wake_armed;
	uint64_t wake_buf;
};

/* What this backend keeps in a request (its private words, req.h). */
struct uring_req {
	int32_t slot;	   /* direct descriptor slot, or -1 */
	int32_t step;	   /* STEP_*: where a read_file is */
	int32_t probe_res; /* read_file: what the end-of-file probe read */
	char probe;	   /* the byte after a read, if any */
	int64_t res[2];	   /* read_file: the read's result; bytes so far */
};
RL__REQ_BE_FITS(struct uring_req);

static struct uring_req *UR(rl_req *req)
{
	return RL__REQ_BE(struct uring_req, req);
}

static struct uring *U(rl_loop *loop)
{
	return loop->be;
}

static uint64_t udata(rl_req *req, unsigned tag)
{
	return (uint64_t)(uintptr_t)req | tag;
}

static int setup_flags(unsigned f, unsigned *out)
{
	unsigned s = 0;

	if (f & RL_SQPOLL)
		s |= IORING_SETUP_SQPOLL;
	if (f & RL_SINGLE_ISSUER)
		s |= IORING_SETUP_SINGLE_ISSUER;
	if (f & RL_DEFER_TASKRUN)
		s |= IORING_SETUP_DEFER_TASKRUN;
	if (f & RL_COOP_TASKRUN)
		s |= IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
	*out = s;
	return 0;
}

static void destroy(rl_loop *loop);

static int init(rl_loop *loop, const struct rl_options *opt)
{
	struct io_uring_params p;
	struct uring *u;
	unsigned entries = opt->entries ? opt->entries : 256;
	unsigned slots = opt->direct_slots ? opt->direct_slots : 1024;
	int ret;

	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->efd = -1;
	memset(&p, 0, sizeof(p));
	setup_flags(opt->flags, &p.flags);
	p.flags |= IORING_SETUP_CQSIZE;
	p.cq_entries = opt->cq_entries ? opt->cq_entries : 16 * entries;
	if (opt->flags & RL_SQPOLL)
		p.sq_thread_idle = opt->sqpoll_idle_ms ? opt->sqpoll_idle_ms
						       : 1000;
	ret = io_uring_queue_init_params(entries, &u->ring, &p);
	loop->stats.syscalls++;
	if (ret < 0) {
		free(u);
		return ret;
	}
	loop->be = u;
	u->sqpoll = opt->flags & RL_SQPOLL;
	if (p.cq_entries <= CQ_SPARE + 3) {
		destroy(loop);
		return -EINVAL;
	}
	u->cq_budget = p.cq_entries - CQ_SPARE;

	if (!(opt->flags & RL_NO_DIRECT)) {
		struct rlimit rl;

		/* The kernel refuses a file table larger than RLIMIT_NOFILE
		 * (EMFILE), so a low limit shrinks the table instead of
		 * failing the loop: requests then wait for a free slot. */
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < slots)
			slots = rl.rlim_cur > 1 ? (unsigned)rl.rlim_cur : 1;
		u->free_slots = malloc(slots * sizeof(*u->free_slots));
		if (!u->free_slots) {
			destroy(loop);
			return -ENOMEM;
		}
		ret = io_uring_register_files_sparse(&u->ring, slots);
		loop->stats.syscalls++;
		if (ret < 0) {
			destroy(loop);
			return ret;
		}
		/* Pop order 0, 1, 2...: the free list is a stack. */
		for (unsigned i = 0; i < slots; i++)
			u->free_slots[i] = (int32_t)(slots - 1 - i);
		u->nfree = slots;
		u->direct = true;
	}
	u->link = u->direct && !(opt->flags & RL_NO_LINK);

	if (opt->flags & RL_REGISTER_RING) {
		ret = io_uring_register_ring_fd(&u->ring);
		loop->stats.syscalls++;
		if (ret < 0) {
			destroy(loop);
			return ret;
		}
	}
	if (opt->iowq_max) {
		unsigned vals[2] = { opt->iowq_max, opt->iowq_max };

		ret = io_uring_register_iowq_max_workers(&u->ring, vals);
		loop->stats.syscalls++;
		if (ret < 0) {
			destroy(loop);
			return ret;
		}
	}
	u->efd = eventfd(0, EFD_CLOEXEC);
	loop->stats.syscalls++;
	if (u->efd < 0) {
		ret = -errno;
		destroy(loop);
		return ret;
	}
	return 0;
}

/* ------------------------------------------------------------ submission */

/* Counts the io_uring_enter that liburing makes for a submit: always
 * without SQPOLL; with SQPOLL only when the poller sleeps. */
static void count_submit(rl_loop *loop, struct uring *u, bool wait)
{
	if (wait || !u->sqpoll ||
	    (IO_URING_READ_ONCE(*u->ring.sq.kflags) & IORING_SQ_NEED_WAKEUP)) {
		loop->stats.syscalls++;
		loop->stats.enters++;
	}
}

static void flush_sq(rl_loop *loop, struct uring *u)
{
	if (!io_uring_sq_ready(&u->ring))
		return;
	count_submit(loop, u, false);
	io_uring_submit(&u->ring);
}

/* SQEs a request's next push takes, and CQEs it may be owed for them. */
static unsigned cqes_for(const struct uring *u, rl_req *req)
{
	if (req->op != RL_OP_READ_FILE)
		return 1;
	if (UR(req)->step == STEP_CHAIN && u->link)
		return 4;
	return UR(req)->step == STEP_READ ? 2 : 1;
}

/* The read of a read_file and its probe: the read fills what is left of
 * the buffer, then a one-byte read at the file position that follows tells
 * whether the file goes on, which also tells "exactly full" from "larger".
 * A short read alone does not prove the end of a file: procfs and sysfs
 * files report size 0 and hand out a page or a record at a time. */
static void prep_read_pair(struct uring *u, rl_req *req, int fd,
			   unsigned flags, unsigned probe_flags)
{
	size_t got = (size_t)UR(req)->res[1];
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	/* Offset -1: the file position, so the probe starts where the read
	 * ended without knowing how much it read. */
	io_uring_prep_read(sqe, fd, (char *)req->buf + got,
			   (unsigned)(rl__req(req)->cap - got), (uint64_t)-1);
	sqe->flags |= IOSQE_IO_HARDLINK | flags;
	io_uring_sqe_set_data64(sqe, udata(req, TAG_MAIN));

	sqe = io_uring_get_sqe(&u->ring);
	io_uring_prep_read(sqe, fd, &UR(req)->probe, 1, (uint64_t)-1);
	sqe->flags |= flags | probe_flags;
	io_uring_sqe_set_data64(sqe, udata(req, TAG_PROBE));
}

static void prep_read_file_step(struct uring *u, rl_req *req,
				struct io_uring_sqe *sqe)
{
	switch (UR(req)->step) {
	case STEP_OPEN:
		if (u->direct)
			io_uring_prep_openat_direct(sqe, AT_FDCWD, req->path,
						    O_RDONLY, 0,
						    (unsigned)UR(req)->slot);
		else
			io_uring_prep_openat(sqe, AT_FDCWD, req->path,
					     O_RDONLY | O_CLOEXEC, 0);
		break;
	case STEP_CLOSE:
		if (u->direct)
			io_uring_prep_close_direct(sqe, (unsigned)UR(req)->slot);
		else
			io_uring_prep_close(sqe, req->fd);
		break;
	}
	io_uring_sqe_set_data64(sqe, udata(req, TAG_MAIN));
}

/*
 * Puts req's SQEs on the ring. Returns false, having changed nothing, when
 * the SQ, the CQ budget or the slot table has no room.
 */
static bool push(rl_loop *loop, struct uring *u, rl_req *req)
{
	unsigned need = cqes_for(u, req);
	bool chain = need == 4;
	bool wants_slot = req->op == RL_OP_READ_FILE && u->direct &&
			  (chain || UR(req)->step == STEP_OPEN);
	struct io_uring_sqe *sqe;

	if (u->cq_owed + need > u->cq_budget)
		return false;
	if (wants_slot && !u->nfree)
		return false;
	if (io_uring_sq_space_left(&u->ring) < need) {
		flush_sq(loop, u);
		if (io_uring_sq_space_left(&u->ring) < need)
			return false;
	}
	if (wants_slot)
		UR(req)->slot = u->free_slots[--u->nfree];
	u->cq_owed += need;

	if (chain) {
		unsigned slot = (unsigned)UR(req)->slot;

		sqe = io_uring_get_sqe(&u->ring);
		io_uring_prep_openat_direct(sqe, AT_FDCWD, req->path,
					    O_RDONLY, 0, slot);
		sqe->flags |= IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
		io_uring_sqe_set_data64(sqe, udata(req, TAG_OPEN));

		/* The probe's CQE is skipped when it reads a byte: the close
		 * that ends the chain tells that it ran. */
		UR(req)->probe_res = 1;
		prep_read_pair(u, req, (int)slot, IOSQE_FIXED_FILE,
			       IOSQE_IO_HARDLINK | IOSQE_CQE_SKIP_SUCCESS);
		sqe = io_uring_get_sqe(&u->ring);
		io_uring_prep_close_direct(sqe, slot);
		io_uring_sqe_set_data64(sqe, udata(req, TAG_CLOSE));
		return true;
	}

	if (req->op == RL_OP_READ_FILE && UR(req)->step == STEP_READ) {
		/* Both CQEs come: the probe's ends the step. */
		UR(req)->probe_res = 0;
		prep_read_pair(u, req, u->direct ? UR(req)->slot : req->fd,
			       u->direct ? IOSQE_FIXED_FILE : 0, 0);
		return true;
	}
	sqe = io_uring_get_sqe(&u->ring);
	switch (req->op) {
	case RL_OP_OPEN:
		io_uring_prep_openat(sqe, AT_FDCWD, req->path, req->flags,
				     req->mode);
		break;
	case RL_OP_READ:
		io_uring_prep_read(sqe, req->fd, req->buf, (unsigned)req->len,
				   (uint64_t)req->offset);
		break;
	case RL_OP_CLOSE:
		io_uring_prep_close(sqe, req->fd);
		break;
	case RL_OP_STAT:
		io_uring_prep_statx(sqe, AT_FDCWD, req->path, 0,
				    STATX_BASIC_STATS, req->stx);
		break;
	case RL_OP_READ_FILE:
		prep_read_file_step(u, req, sqe);
		return true;
	}
	io_uring_sqe_set_data64(sqe, udata(req, TAG_MAIN));
	return true;
}

/* Pushes req now, or queues it at the end of q: nothing overtakes a
 * request already waiting on q, so each queue stays in FIFO order. */
static void push_or_queue(rl_loop *loop, struct uring *u, rl_req *req,
			  struct rl__fifo *q)
{
	if (rl__fifo_empty(q) && push(loop, u, req))
		return;
	rl__req(req)->state |= RL__REQ_QUEUED;
	loop->stats.queued++;
	rl__fifo_push(q, req);
}

/* Moves queued requests of q to the ring until one does not fit. Returns
 * whether q was emptied. */
static bool push_queue(rl_loop *loop, struct uring *u, struct rl__fifo *q)
{
	rl_req *req;

	while ((req = q->head)) {
		if (!push(loop, u, req))
			return false;
		rl__fifo_pop(q);
		rl__req(req)->state &= ~(uint32_t)RL__REQ_QUEUED;
	}
	return true;
}

static void submit(rl_loop *loop, rl_req *req)
{
	struct uring *u = U(loop);

	UR(req)->slot = -1;
	if (req->op == RL_OP_READ_FILE) {
		UR(req)->step = u->link ? STEP_CHAIN : STEP_OPEN;
		UR(req)->res[0] = 0;
		UR(req)->res[1] = 0;
	}
	push_or_queue(loop, u, req, &u->pending);
}

static void push_pending(rl_loop *loop, struct uring *u)
{
	if (push_queue(loop, u, &u->cont))
		push_queue(loop, u, &u->pending);
}

/* ----------------------------------------------------------- completion */

static void release_slot(struct uring *u, rl_req *req)
{
	if (u->direct && UR(req)->slot >= 0) {
		u->free_slots[u->nfree++] = UR(req)->slot;
		UR(req)->slot = -1;
	}
}

/*
 * Folds a finished read pair into the request: the read's r bytes, and the
 * probe's byte when it read one. Returns 1 when the file goes on, 0 at its
 * end, -errno on an error or when a caller's buffer is too small (-EFBIG).
 */
static int absorb(rl_req *req, int32_t r, int32_t p)
{
	size_t got = (size_t)UR(req)->res[1];
	int ret;

	if (r < 0)
		return r;
	got += (size_t)r;
	UR(req)->res[1] = (int64_t)got;
	if (p <= 0)
		return p;
	if (got == rl__req(req)->cap) {
		ret = rl__read_file_grow(req, 2 * (got + 1));
		if (ret < 0)
			return ret;
	}
	((char *)req->buf)[got] = UR(req)->probe;
	UR(req)->res[1] = (int64_t)got + 1;
	return 1;
}

/* Re-runs a read_file as single steps from offset 0 and a fresh open, with
 * the buffer it has (grown already if it was too small): the data returned
 * then comes from one open file, even if the path was renamed over. */
static void restart_stepwise(rl_loop *loop, struct uring *u, rl_req *req)
{
	UR(req)->step = STEP_OPEN;
	UR(req)->res[0] = 0;
	UR(req)->res[1] = 0;
	push_or_queue(loop, u, req, &u->pending);
}

static void cancel_sqe(rl_loop *loop, struct uring *u, uint64_t target);

static void chain_cqe(rl_loop *loop, struct uring *u, rl_req *req,
		      unsigned tag, int32_t res)
{
	int ret;

	switch (tag) {
	case TAG_OPEN:
		/* Only a failed open posts a CQE, and then the kernel omits
		 * the CQEs of the reads and close it cancelled: the chain is
		 * over, and the slot was never filled. */
		u->cq_owed -= 4;
		release_slot(u, req);
		rl__complete(loop, req, res);
		return;
	case TAG_MAIN:
		UR(req)->res[0] = res;
		/* The probe runs next (hard link) and, on a FIFO, may wait
		 * for a writer as the read did: cancel it too. */
		if ((rl__req(req)->state & RL__REQ_CANCEL) || u->closing)
			cancel_sqe(loop, u, udata(req, TAG_PROBE));
		return;
	case TAG_PROBE:
		/* Posted only when the probe read nothing (or failed). */
		UR(req)->probe_res = res;
		return;
	}
	/* TAG_CLOSE: the chain is over and its slot is free again. */
	u->cq_owed -= 4;
	release_slot(u, req);
	ret = absorb(req, (int32_t)UR(req)->res[0], UR(req)->probe_res);
	if (ret == 1 && !(rl__req(req)->state & RL__REQ_CANCEL) && !u->closing)
		restart_stepwise(loop, u, req); /* bigger, or procfs-like */
	else
		rl__complete(loop, req, ret < 0 ? ret : UR(req)->res[1]);
}

/* A read_file closed its fd: one that waited for an fd may try again,
 * ahead of new requests. */
static void fd_released(struct uring *u)
{
	rl_req *req = rl__fifo_pop(&u->fd_wait);

	if (req)
		rl__fifo_push(&u->cont, req);
}

static void step_cqe(rl_loop *loop, struct uring *u, rl_req *req,
		     unsigned tag, int32_t res)
{
	int ret;

	u->cq_owed -= 1;
	switch (UR(req)->step) {
	case STEP_OPEN:
		if ((res == -EMFILE || res == -ENFILE) && u->fds_held &&
		    !(rl__req(req)->state & RL__REQ_CANCEL) && !u->closing) {
			/* Out of fds because our own read_files hold them:
			 * wait for one of them to close instead of failing.
			 * Only an open that no close can help fails. */
			rl__req(req)->state |= RL__REQ_QUEUED;
			rl__fifo_push(&u->fd_wait, req);
			return;
		}
		if (res < 0) {
			release_slot(u, req);
			rl__complete(loop, req, res);
			return;
		}
		if (!u->direct) {
			req->fd = res;
			u->fds_held++;
		}
		UR(req)->step = STEP_READ;
		break;
	case STEP_READ:
		if (tag == TAG_MAIN) {
			/* The step ends with the probe's CQE, which the
			 * hard link orders after this one. On a FIFO the
			 * probe may wait as the read did: cancel it too. */
			UR(req)->res[0] = res;
			if ((rl__req(req)->state & RL__REQ_CANCEL) || u->closing)
				cancel_sqe(loop, u, udata(req, TAG_PROBE));
			return;
		}
		ret = absorb(req, (int32_t)UR(req)->res[0], res);
		if (ret <= 0 || rl__req(req)->state & RL__REQ_CANCEL ||
		    u->closing) {
			UR(req)->res[0] = ret < 0	  ? ret
					   : ret == 0 ? UR(req)->res[1]
						      : -ECANCELED;
			UR(req)->step = STEP_CLOSE;
		}
		break;
	case STEP_CLOSE:
		release_slot(u, req);
		if (!u->direct) {
			req->fd = -1;
			u->fds_held--;
			fd_released(u);
		}
		rl__complete(loop, req, UR(req)->res[0]);
		return;
	}
	push_or_queue(loop, u, req, &u->cont);
}

static void handle_cqe(rl_loop *loop, struct uring *u, uint64_t ud,
		       int32_t res)
{
	unsigned tag = ud & TAG_MASK;
	rl_req *req = (rl_req *)(uintptr_t)(ud & ~(uint64_t)TAG_MASK);

	if (tag == TAG_WAKE) {
		u->wake_armed = false;
		if (res >= 0)
			loop->stats.wakeups++;
		return;
	}
	if (tag == TAG_CANCEL)
		return;
	if (req->op == RL_OP_READ_FILE) {
		if (UR(req)->step == STEP_CHAIN)
			chain_cqe(loop, u, req, tag, res);
		else
			step_cqe(loop, u, req, tag, res);
		return;
	}
	u->cq_owed -= 1;
	rl__complete(loop, req, res);
}

static int reap(rl_loop *loop, struct uring *u)
{
	struct io_uring_cqe *cqes[BATCH];
	unsigned n, i;
	int total = 0;

	do {
		n = io_uring_peek_batch_cqe(&u->ring, cqes, BATCH);
		for (i = 0; i < n; i++)
			handle_cqe(loop, u, cqes[i]->user_data, cqes[i]->res);
		io_uring_cq_advance(&u->ring, n);
		total += (int)n;
	} while (n == BATCH);
	return total;
}

static void arm_wake(struct uring *u)
{
	struct io_uring_sqe *sqe;

	if (u->wake_armed || u->closing)
		return;
	sqe = io_uring_get_sqe(&u->ring);
	if (!sqe)
		return; /* next time: posts are drained every iteration */
	io_uring_prep_read(sqe, u->efd, &u->wake_buf, sizeof(u->wake_buf), 0);
	io_uring_sqe_set_data64(sqe, TAG_WAKE);
	u->wake_armed = true;
}

static int wait(rl_loop *loop, int64_t timeout_ns)
{
	struct uring *u = U(loop);
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts;
	int ret;

	push_pending(loop, u);
	if (io_uring_cq_ready(&u->ring) || timeout_ns == 0) {
		/* Completions are there already, or the caller must not
		 * block: submit what is queued and take what is ready. With
		 * DEFER_TASKRUN, completions only appear from an enter. */
		if (io_uring_sq_ready(&u->ring) ||
		    (loop->opt.flags & RL_DEFER_TASKRUN) ||
		    (IO_URING_READ_ONCE(*u->ring.sq.kflags) &
		     IORING_SQ_TASKRUN)) {
			count_submit(loop, u, true);
			ret = io_uring_submit_and_get_events(&u->ring);
			if (ret < 0 && ret != -EBUSY && ret != -EINTR)
				return ret;
		}
	} else {
		arm_wake(u);
		count_submit(loop, u, true);
		if (timeout_ns > 0) {
			ts.tv_sec = timeout_ns / 1000000000;
			ts.tv_nsec = timeout_ns % 1000000000;
		}
		ret = io_uring_submit_and_wait_timeout(
			&u->ring, &cqe, 1, timeout_ns > 0 ? &ts : NULL, NULL);
		if (ret < 0 && ret != -ETIME && ret != -EINTR && ret != -EBUSY)
			return ret;
	}
	ret = reap(loop, u);
	/* Budget freed by what was reaped lets waiting requests go now, in
	 * this iteration's submit, instead of one enter later. */
	push_pending(loop, u);
	return ret;
}

static void cancel_sqe(rl_loop *loop, struct uring *u, uint64_t target)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	if (!sqe) {
		flush_sq(loop, u);
		sqe = io_uring_get_sqe(&u->ring);
		if (!sqe)
			return;
	}
	io_uring_prep_cancel64(sqe, target, 0);
	io_uring_sqe_set_data64(sqe, TAG_CANCEL);
}

static void cancel(rl_loop *loop, rl_req *req)
{
	struct uring *u = U(loop);
	struct io_uring_sqe *sqe;

	if (!req) {
		/* Closing: what never reached the kernel finishes now; what
		 * did is asked to stop. Chains are short and finish by
		 * themselves, and their CQEs are handled whatever they say. */
		u->closing = true;
		rl__fifo_splice(&u->pending, &u->fd_wait);
		while ((req = rl__fifo_pop(&u->pending))) {
			rl__req(req)->state &= ~(uint32_t)RL__REQ_QUEUED;
			release_slot(u, req);
			rl__complete(loop, req, -ECANCELED);
		}
		/* Continuations hold an open file: let them run to their
		 * close, which reports -ECANCELED as their steps see closing. */
		sqe = io_uring_get_sqe(&u->ring);
		if (sqe) {
			io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
			io_uring_sqe_set_data64(sqe, TAG_CANCEL);
		}
		flush_sq(loop, u);
		return;
	}
	if ((rl__req(req)->state & RL__REQ_QUEUED) &&
	    (rl__fifo_remove(&u->pending, req) ||
	     rl__fifo_remove(&u->fd_wait, req))) {
		rl__req(req)->state &= ~(uint32_t)RL__REQ_QUEUED;
		release_slot(u, req);
		rl__complete(loop, req, -ECANCELED);
		return;
	}
	/* In the kernel: most requests finish soon and report -ECANCELED
	 * then, but a read of a pipe with no writer, or an open of a FIFO
	 * (read_file's chain or step, or rl_fs_open) in an io-wq worker, can
	 * wait forever; an async cancel interrupts those. A chain is
	 * cancelled at its open: the rest of it fails after it, down to the
	 * close. A cancel that finds nothing answers -ENOENT, ignored. */
	if (req->op == RL_OP_READ_FILE)
		cancel_sqe(loop, u, udata(req, TAG_OPEN));
	cancel_sqe(loop, u, udata(req, TAG_MAIN));
}

static void wake(rl_loop *loop)
{
	struct uring *u = U(loop);
	uint64_t one = 1;

	/* Another thread's syscall: not counted in the loop's stats. */
	if (write(u->efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, the loop wakes anyway. */
	}
}

static void destroy(rl_loop *loop)
{
	struct uring *u = U(loop);

	if (!u)
		return;
	/* The eventfd read must not outlive the buffer it reads into. */
	if (u->wake_armed) {
		uint64_t one = 1;

		if (write(u->efd, &one, sizeof(one)) == sizeof(one)) {
			while (u->wake_armed) {
				struct io_uring_cqe *cqe;

				io_uring_submit_and_wait(&u->ring, 1);
				while (io_uring_peek_cqe(&u->ring, &cqe) == 0) {
					if ((cqe->user_data & TAG_MASK) ==
					    TAG_WAKE)
						u->wake_armed = false;
					io_uring_cqe_seen(&u->ring, cqe);
				}
			}
		}
	}
	io_uring_queue_exit(&u->ring);
	if (u->efd >= 0)
		close(u->efd);
	free(u->free_slots);
	free(u);
	loop->be = NULL;
}

const struct rl__backend rl__backend_uring = {
	.name = "uring",
	.init = init,
	.destroy = destroy,
	.submit = submit,
	.cancel = cancel,
	.wait = wait,
	.wake = wake,
};
