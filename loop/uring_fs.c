/* SPDX-License-Identifier: MIT */
/*
 * uring_fs.c - file requests on io_uring: which SQEs each one takes and
 * what its CQEs mean. Most take one SQE whose CQE is their result; writes
 * and write_file are in uring_fs_write.c. read_file is the interesting
 * one here: a linked chain when it can be, single steps otherwise.
 *
 * The chain is open -> read -> probe, on one direct descriptor slot,
 * submitted with the next batch in one io_uring_enter:
 *
 *  - A short read counts as a failure for IOSQE_IO_LINK and would cancel
 *    what follows it (every read of a file smaller than the buffer is
 *    "short"). The read -> probe link is therefore IOSQE_IO_HARDLINK;
 *    open -> read stays a plain link so a failed open cancels the rest.
 *  - A short read is not the end of every file: procfs and sysfs files say
 *    size 0 and return a page or a record per read. So a one-byte probe at
 *    the file position follows the read, and its CQE (the chain's last)
 *    tells the end of the file (0) from more to come (1).
 *  - The close is not part of the chain: the chain cannot tell whether it
 *    should run. When the probe finds more, the file must stay open: a
 *    FIFO or a device hands its bytes over once, so the rest is read from
 *    the same open file, step by step, never from a fresh open (which
 *    would lose what the stream gave already, and, with the reader gone a
 *    moment, make the writer fail with EPIPE). At the end, the request
 *    calls back at once and leaves its file in the slot
 *    (rl__uring_linger_slot()): the next chain's open into that slot
 *    closes it, as an open into an occupied slot does, so a read_file in
 *    a stream of them costs three SQEs (open, read, probe) and two CQEs,
 *    no close of its own. Files still lingering when the loop is about
 *    to sleep, or when rl_run() returns, are closed then (uring.c).
 *  - RL_READ_FILE_REGULAR: the caller vouches that a short read is the
 *    end, so the chain is open -> readv, the read asking for the buffer
 *    and the byte after it: fewer bytes than that are the whole file,
 *    all of them a file that goes on (read on in steps, as above). Two
 *    SQEs and one CQE; the next open into the slot closes the file.
 *  - IOSQE_CQE_SKIP_SUCCESS (5.17) on the open: its CQE exists only when
 *    it fails, and then the kernel posts no CQE for the linked read and
 *    probe it cancelled, so that CQE ends the chain.
 *  - openat into a direct slot rejects O_CLOEXEC with -EINVAL (a direct
 *    descriptor is not in the fd table, so there is nothing to close on
 *    exec); plain opens keep O_CLOEXEC.
 *  - FIFOs. IORING_OP_OPENAT first tries the open without blocking (with
 *    O_NONBLOCK, cleared afterwards on 6.18): a FIFO opened for reading
 *    returns at once, without waiting for a writer, and a read of it then
 *    waits for the writer's data (io_uring polls it; read(2) would answer
 *    0 there). A FIFO opened for writing with no reader fails that first
 *    try with -ENXIO, which the kernel returns as it is: the open is sent
 *    again with IOSQE_ASYNC, to an io-wq worker that waits for a reader
 *    as open(2) does. Such waits last forever without a peer, so
 *    rl_cancel() sends an async cancel for the open, the read and (once
 *    the read has ended, since the hard link then issues it) the probe.
 *  - A read with an offset of a file without a position (a pipe) reads
 *    what comes next: the kernel ignores the offset (the epoll backend
 *    does the same, see ringloop.h), except on a socket, which refuses
 *    it (-ESPIPE): the loop then reads again at -1 (read_offset()).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "uring_fs.h"

/* IORING_OP_FTRUNCATE came with Linux 6.9; liburing 2.3 has neither its
 * number nor a prep helper. */
#define RL__OP_FTRUNCATE 55

#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN 0x00002000U /* Linux 6.1 */
#endif

/* The most one read asks for; Linux reads at most MAX_RW_COUNT (INT_MAX
 * rounded down to a page) at once anyway, and the length is 32 bits. */
#define MAX_READ ((size_t)INT_MAX)
/* The longest read whose shortness proves the end of a regular file, for
 * RL_READ_FILE_REGULAR: below MAX_RW_COUNT on every page size (see
 * absorb_regular()). */
#define REGULAR_SURE_MAX (1 << 30)
/* The smallest page size: a read into a buffer with a page the caller
 * cannot write to stops on a multiple of it (store_probe()). */
#define PAGE_MIN 4096

/* What a plain open request keeps in step. */
enum { OPEN_FIRST = 0, OPEN_ASYNC = 1 };
/* ... and a read, readv or read_fixed: READ_NO_POS once its fd turned out
 * to have no position (see read_offset()). */
enum { READ_AT_OFFSET = 0, READ_NO_POS = 1 };

/* io_uring ignores the offset of a read of a pipe, but refuses one of a
 * socket (-ESPIPE: a socket is not FMODE_STREAM), where rl_fs_read()
 * promises what comes next on every fd without a position, as the epoll
 * backend does: such a read goes again at -1. */
static uint64_t read_offset(rl_req *req)
{
	return rl__ur(req)->step == READ_NO_POS ? (uint64_t)-1
						: (uint64_t)req->offset;
}

void rl__uring_fs_start(struct rl__uring *u, rl_req *req)
{
	struct rl__uring_req *ur = rl__ur(req);

	ur->slot = -1;
	ur->plain = false;
	ur->res[0] = 0;
	ur->res[1] = 0;
	ur->step = 0;
	if (rl__op_is_write(req->op))
		ur->res[0] = req->offset; /* see uring_fs_write.c */
	if (req->op == RL_OP_READ_FILE || req->op == RL_OP_WRITE_FILE)
		ur->step = u->link ? STEP_CHAIN : STEP_OPEN;
}

void rl__uring_fs_unslot(rl_req *req)
{
	rl__ur(req)->plain = true;
	rl__ur(req)->step = STEP_OPEN;
}

/* A read_file whose caller vouched for a regular file on a disk file
 * system: its chain ends with the read, no probe (RL_READ_FILE_REGULAR). */
static bool regular(rl_req *req)
{
	return rl__req(req)->state & RL__REQ_REGULAR;
}

/* What the read of a chain without a probe asks for in the buffer: all
 * of it, up to what one read can give (and a byte more, see
 * prep_chain()). */
static size_t regular_ask(rl_req *req)
{
	return rl__req(req)->cap < MAX_READ - 1 ? rl__req(req)->cap
						: MAX_READ - 1;
}

/* The SQEs of read_file's chain, and the CQEs owed for them. */
static unsigned chain_sqes(rl_req *req)
{
	return regular(req) ? 2 : 3;
}

struct rl__uring_need rl__uring_fs_need(const struct rl__uring *u, rl_req *req)
{
	struct rl__uring_need need = { .sqes = 1, .slot = false };
	int32_t step = rl__ur(req)->step;

	if (req->op == RL_OP_WRITE_FILE)
		return rl__uring_wf_need(u, req);
	if (req->op != RL_OP_READ_FILE)
		return need;
	if (step == STEP_CHAIN && u->link)
		need.sqes = chain_sqes(req);
	else if (step == STEP_READ)
		need.sqes = 2;
	need.slot = rl__uring_slotted(u, req) &&
		    (step == STEP_CHAIN || step == STEP_OPEN);
	return need;
}

/* The read of a read_file and its probe: the read fills what is left of
 * the buffer, then a one-byte read at the file position that follows tells
 * whether the file goes on, which also tells "exactly full" from "larger".
 * A short read alone does not prove the end of a file: procfs and sysfs
 * files report size 0 and hand out a page or a record at a time. */
static void prep_read_pair(struct rl__uring *u, rl_req *req, int fd,
			   unsigned flags, unsigned probe_flags)
{
	struct rl__uring_req *ur = rl__ur(req);
	size_t got = (size_t)ur->res[1], room = rl__req(req)->cap - got;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	/* Offset -1: the file position, so the probe starts where the read
	 * ended without knowing how much it read. */
	io_uring_prep_read(sqe, fd, (char *)req->buf + got,
			   (unsigned)(room < MAX_READ ? room : MAX_READ),
			   (uint64_t)-1);
	sqe->flags |= IOSQE_IO_HARDLINK | flags;
	io_uring_sqe_set_data64(sqe, rl__udata(req, RL__TAG_MAIN));

	sqe = io_uring_get_sqe(&u->ring);
	io_uring_prep_read(sqe, fd, &ur->probe, 1, (uint64_t)-1);
	sqe->flags |= flags | probe_flags;
	io_uring_sqe_set_data64(sqe, rl__udata(req, RL__TAG_PROBE));
}

static void prep_chain(struct rl__uring *u, rl_req *req)
{
	struct rl__uring_req *ur = rl__ur(req);
	unsigned slot = (unsigned)ur->slot;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	struct iovec *iov;

	io_uring_prep_openat_direct(sqe, AT_FDCWD, req->path, O_RDONLY, 0,
				    slot);
	sqe->flags |= IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, rl__udata(req, RL__TAG_OPEN));
	if (!regular(req)) {
		prep_read_pair(u, req, (int)slot, IOSQE_FIXED_FILE, 0);
		return;
	}
	/* The caller's word replaces the probe: the read ends the chain,
	 * and a short one ends the file. It asks for the byte after the
	 * buffer too, so that a file that fills the buffer exactly ends
	 * here as well, and a longer one is told apart at once. */
	iov = u->slot_iov[slot];
	iov[0].iov_base = req->buf;
	iov[0].iov_len = regular_ask(req);
	iov[1].iov_base = &ur->probe;
	iov[1].iov_len = 1;
	sqe = io_uring_get_sqe(&u->ring);
	io_uring_prep_readv(sqe, (int)slot, iov, 2, (uint64_t)-1);
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, rl__udata(req, RL__TAG_MAIN));
}

static void prep_read_file_step(struct rl__uring *u, rl_req *req)
{
	struct rl__uring_req *ur = rl__ur(req);
	bool slotted = rl__uring_slotted(u, req);
	struct io_uring_sqe *sqe;

	if (ur->step == STEP_READ) {
		/* Both CQEs come: the probe's ends the step. */
		prep_read_pair(u, req, slotted ? ur->slot : req->fd,
			       slotted ? IOSQE_FIXED_FILE : 0, 0);
		return;
	}
	sqe = io_uring_get_sqe(&u->ring);
	if (ur->step == STEP_OPEN) {
		if (slotted)
			io_uring_prep_openat_direct(sqe, AT_FDCWD, req->path,
						    O_RDONLY, 0,
						    (unsigned)ur->slot);
		else
			io_uring_prep_openat(sqe, AT_FDCWD, req->path,
					     O_RDONLY | O_CLOEXEC, 0);
	} else if (slotted) {
		io_uring_prep_close_direct(sqe, (unsigned)ur->slot);
	} else {
		io_uring_prep_close(sqe, req->fd);
	}
	io_uring_sqe_set_data64(sqe, rl__udata(req, RL__TAG_MAIN));
}

/* The requests that take one SQE and whose CQE is their result. */
static void prep_single(struct rl__uring *u, rl_req *req)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	switch (req->op) {
	case RL_OP_OPEN:
		io_uring_prep_openat(sqe, AT_FDCWD, req->path, req->flags,
				     req->mode);
		if (rl__ur(req)->step == OPEN_ASYNC)
			sqe->flags |= IOSQE_ASYNC;
		break;
	case RL_OP_READ:
		io_uring_prep_read(sqe, req->fd, req->buf, (unsigned)req->len,
				   read_offset(req));
		break;
	case RL_OP_CLOSE:
		io_uring_prep_close(sqe, req->fd);
		break;
	case RL_OP_STAT:
		io_uring_prep_statx(sqe, AT_FDCWD, req->path, 0,
				    STATX_BASIC_STATS, req->stx);
		break;
	case RL_OP_READV:
		io_uring_prep_readv(sqe, req->fd, req->iov, req->count,
				    read_offset(req));
		break;
	case RL_OP_READ_FIXED:
		io_uring_prep_read_fixed(sqe, req->fd, req->buf,
					 (unsigned)req->len, read_offset(req),
					 (int)req->count);
		break;
	case RL_OP_FSYNC:
		io_uring_prep_fsync(sqe, req->fd,
				    (req->flags & RL_FSYNC_DATASYNC)
					    ? IORING_FSYNC_DATASYNC
					    : 0);
		break;
	case RL_OP_FTRUNCATE:
		/* The length goes in off, everything else is zero. */
		io_uring_prep_rw(RL__OP_FTRUNCATE, sqe, req->fd, NULL, 0,
				 (uint64_t)req->offset);
		break;
	case RL_OP_FALLOCATE:
		io_uring_prep_fallocate(sqe, req->fd, req->flags,
					(off_t)req->offset, (off_t)req->len);
		break;
	case RL_OP_UNLINK:
		io_uring_prep_unlinkat(sqe, AT_FDCWD, req->path, 0);
		break;
	case RL_OP_RMDIR:
		io_uring_prep_unlinkat(sqe, AT_FDCWD, req->path, AT_REMOVEDIR);
		break;
	case RL_OP_MKDIR:
		io_uring_prep_mkdirat(sqe, AT_FDCWD, req->path,
				      (mode_t)req->mode);
		break;
	case RL_OP_RENAME:
		io_uring_prep_renameat(sqe, AT_FDCWD, req->path, AT_FDCWD,
				       req->path2, (unsigned)req->flags);
		break;
	case RL_OP_FSTAT:
		io_uring_prep_statx(sqe, req->fd, "", AT_EMPTY_PATH,
				    STATX_BASIC_STATS | STATX_DIOALIGN,
				    req->stx);
		break;
	}
	io_uring_sqe_set_data64(sqe, rl__udata(req, RL__TAG_MAIN));
}

void rl__uring_fs_prep(struct rl__uring *u, rl_req *req)
{
	unsigned first = u->ring.sq.sqe_tail;

	if (req->op == RL_OP_READ_FILE) {
		if (rl__ur(req)->step == STEP_CHAIN && u->link)
			prep_chain(u, req);
		else
			prep_read_file_step(u, req);
	} else if (req->op == RL_OP_WRITE_FILE) {
		rl__uring_wf_prep(u, req);
	} else if (rl__op_is_write(req->op)) {
		rl__uring_write_prep(u, req);
	} else {
		prep_single(u, req);
	}
	/* RL_FORCE_ASYNC: every SQE just prepared goes to io-wq. */
	for (unsigned t = first; u->sqe_flags && t != u->ring.sq.sqe_tail; t++)
		u->ring.sq.sqes[t & u->ring.sq.ring_mask].flags |= u->sqe_flags;
	rl__ur(req)->sq_end = u->ring.sq.sqe_tail;
}

/* ----------------------------------------------------------- completions */

/*
 * Puts the probe's byte at buf[got]. The kernel wrote the byte before it
 * (got > 0), so a byte on the same page can be written too; one that
 * starts a page the reads never reached (a read that stopped there, short,
 * or none yet) may be a page the caller cannot write to, where the kernel
 * stopped instead of failing. That rare byte goes through the kernel,
 * which says -EFAULT where a store would crash the program, as the epoll
 * backend's reads say.
 */
static int store_probe(rl_req *req, size_t got, char byte)
{
	char *at = (char *)req->buf + got;
	struct iovec local = { &byte, 1 }, remote = { at, 1 };

	if (got > 0 && (uintptr_t)at % PAGE_MIN != 0) {
		*at = byte;
		return 0;
	}
	req->loop->stats.syscalls++;
	if (process_vm_writev(getpid(), &local, 1, &remote, 1, 0) == 1)
		return 0;
	/* Refused outright (a seccomp filter, ENOSYS): the plain store, as
	 * before; the caller's buffer is writable unless the caller lied. */
	if (errno != EFAULT) {
		*at = byte;
		return 0;
	}
	return -EFAULT;
}

/*
 * Folds a finished read pair into the request: the read's r bytes, and the
 * probe's byte when it read one. Returns 1 when the file goes on, 0 at its
 * end, -errno on an error, or -EFBIG when the buffer is a caller's or at
 * the loop's read_file_max.
 */
static int absorb(rl_req *req, int32_t r, int32_t p)
{
	struct rl__uring_req *ur = rl__ur(req);
	size_t got = (size_t)ur->res[1];
	int ret;

	if (r < 0)
		return r;
	got += (size_t)r;
	ur->res[1] = (int64_t)got;
	if (p <= 0)
		return p;
	if (got == rl__req(req)->cap) {
		ret = rl__read_file_grow(req);
		if (ret < 0)
			return ret;
	}
	ret = store_probe(req, got, ur->probe);
	if (ret < 0)
		return ret;
	ur->res[1] = (int64_t)got + 1;
	return 1;
}

/*
 * Cancels the SQE of a read_file's or write_file's step (tag), after
 * rl__uring_settle(). On SQPOLL the SQ thread issues a chain's next step
 * from its own task work, which no enter of ours can run first, so the
 * cancel may find nothing: there the cancels go again while they do
 * (uring.c, recancel()).
 */
static void cancel_step(rl_loop *loop, struct rl__uring *u, rl_req *req,
			unsigned tag)
{
	rl__uring_cancel_sqe(loop, u, rl__udata(req, tag));
	if (u->sqpoll)
		rl__uring_recancel_list(u, req, tag);
}

/*
 * Cancels the probe of a read_file whose read ended while it was being
 * cancelled. On the default ring the hard link issues the probe from the
 * kernel's task work, which may not have run yet when the read's CQE is
 * reaped; a cancel submitted then finds nothing, and the probe, issued
 * after it, waits for ever on a FIFO nobody writes to (on 6.18, about
 * forty FIFO reads cancelled at once left one behind every time:
 * special::many_fifo_reads_cancelled_at_once). So the task work runs
 * first (rl__uring_settle()), and the cancel finds the probe issued, or
 * done.
 */
static void cancel_probe(rl_loop *loop, struct rl__uring *u, rl_req *req)
{
	rl__uring_settle(loop, u, rl__ur(req)->sq_end);
	cancel_step(loop, u, req, RL__TAG_PROBE);
}

/*
 * Folds the read that ends a chain without a probe (RL_READ_FILE_REGULAR)
 * into the request, as absorb() does a read and its probe: that read asked
 * for the buffer and the byte after it, so fewer bytes than that are the
 * whole file (0), and all of them a file that goes on (1).
 */
static int absorb_regular(rl_req *req, int32_t res)
{
	size_t ask = regular_ask(req);

	if (res >= 0 && (size_t)res > ask)
		return absorb(req, (int32_t)ask, 1);
	if (res >= REGULAR_SURE_MAX ||
	    (res > 0 && ((uintptr_t)req->buf + (size_t)res) % PAGE_MIN == 0)) {
		/* A read that stopped where a page of the buffer ends may
		 * have met a page the caller cannot write to (the kernel
		 * returns what it copied, not -EFAULT), and Linux reads at
		 * most MAX_RW_COUNT (a page short of 2 GiB) at once: such a
		 * read proves nothing, and the steps' next read (-EFAULT) or
		 * probe decides. */
		absorb(req, res, 0);
		return 1;
	}
	return absorb(req, res, 0);
}

static void chain_cqe(rl_loop *loop, struct rl__uring *u, rl_req *req,
		      unsigned tag, int32_t res)
{
	struct rl__uring_req *ur = rl__ur(req);
	bool stopping = (rl__req(req)->state & RL__REQ_CANCEL) || u->closing;
	int ret;

	switch (tag) {
	case RL__TAG_OPEN:
		/* Only a failed open posts a CQE, and then the kernel omits
		 * the CQEs of the read and probe it cancelled: the chain is
		 * over, and the slot holds what it held before. */
		u->cq_owed -= chain_sqes(req);
		rl__uring_release_slot(loop, u, req);
		rl__uring_complete(loop, u, req, res);
		return;
	case RL__TAG_MAIN:
		if (regular(req)) {
			/* The chain's last: no probe follows. */
			ret = absorb_regular(req, res);
			break;
		}
		ur->res[0] = res;
		/* The probe runs next (hard link) and, on a FIFO, may wait
		 * for a writer as the read did: cancel it too. */
		if (stopping)
			cancel_probe(loop, u, req);
		return;
	default:
		/* RL__TAG_PROBE: the chain is over. */
		ret = absorb(req, (int32_t)ur->res[0], res);
		break;
	}
	/* The file is still open. */
	u->cq_owed -= chain_sqes(req);
	if (ret == 1 && !stopping) {
		/* Larger than the buffer, a procfs file, or a stream: read
		 * on from the same open file. */
		ur->step = STEP_READ;
		rl__uring_push_or_queue(loop, u, req, &u->cont);
		return;
	}
	rl__uring_linger_slot(loop, u, req);
	rl__uring_complete(loop, u, req,
			   ret < 0    ? ret
			   : ret == 1 ? -ECANCELED
				      : ur->res[1]);
}

/* A read_file or write_file closed its fd: one that waited for an fd may
 * try again, ahead of new requests. */
void rl__uring_fd_released(struct rl__uring *u)
{
	rl_req *req = rl__fifo_pop(&u->fd_wait);

	u->fds_stuck_ns = 0;
	if (req)
		rl__fifo_push(&u->cont, req);
}

void rl__uring_fd_wait(struct rl__uring *u, rl_req *req)
{
	/* The wait's bound counts from the first wait that finds a waiter
	 * (uring.c, unstick_fds()). */
	rl__req(req)->state |= RL__REQ_QUEUED;
	rl__fifo_push(&u->fd_wait, req);
}

static void step_cqe(rl_loop *loop, struct rl__uring *u, rl_req *req,
		     unsigned tag, int32_t res)
{
	struct rl__uring_req *ur = rl__ur(req);
	bool stopping = (rl__req(req)->state & RL__REQ_CANCEL) || u->closing;
	int ret;

	u->cq_owed -= 1;
	switch (ur->step) {
	case STEP_OPEN:
		if ((res == -EMFILE || res == -ENFILE) && u->fds_held &&
		    !stopping) {
			/* Out of fds because our own read_files hold them:
			 * wait for one of them to close instead of failing.
			 * Only an open that no close can help fails. */
			rl__uring_fd_wait(u, req);
			return;
		}
		if (res < 0) {
			rl__uring_release_slot(loop, u, req);
			rl__uring_complete(loop, u, req, res);
			return;
		}
		if (!rl__uring_slotted(u, req)) {
			req->fd = res;
			u->fds_held++;
		}
		ur->step = STEP_READ;
		if (stopping) {
			/* Cancelled while it opened: the cancels found the
			 * open done and no read yet, and a read sent now
			 * would wait for ever on a FIFO nobody writes to.
			 * The file is closed instead. */
			ur->res[0] = -ECANCELED;
			ur->step = STEP_CLOSE;
		}
		break;
	case STEP_READ:
		if (tag == RL__TAG_MAIN) {
			/* The step ends with the probe's CQE, which the
			 * hard link orders after this one. On a FIFO the
			 * probe may wait as the read did: cancel it too. */
			ur->res[0] = res;
			if (stopping)
				cancel_probe(loop, u, req);
			return;
		}
		ret = absorb(req, (int32_t)ur->res[0], res);
		if (ret <= 0 || stopping) {
			ur->res[0] = ret < 0	? ret
				     : ret == 0 ? ur->res[1]
						: -ECANCELED;
			ur->step = STEP_CLOSE;
		}
		break;
	case STEP_CLOSE:
		rl__uring_release_closed_slot(loop, u, req);
		if (!rl__uring_slotted(u, req)) {
			req->fd = -1;
			u->fds_held--;
			rl__uring_fd_released(u);
		}
		rl__uring_complete(loop, u, req, ur->res[0]);
		return;
	}
	rl__uring_push_or_queue(loop, u, req, &u->cont);
}

void rl__uring_fs_cqe(rl_loop *loop, struct rl__uring *u, rl_req *req,
		      unsigned tag, int32_t res)
{
	/* A wait in an io-wq worker that the loop's close interrupted (a
	 * FIFO's open for writing, in rl_fs_open() or in write_file's chain
	 * or steps; a blocked write): -ECANCELED, as rl_loop_close() says,
	 * for every request that can wait, not only the single-SQE ones.
	 * Not a close: Linux has closed the fd even when close() says
	 * EINTR. */
	if (res == -EINTR && u->closing && req->op != RL_OP_CLOSE)
		res = -ECANCELED;
	if (req->op == RL_OP_READ_FILE) {
		if (rl__ur(req)->step == STEP_CHAIN)
			chain_cqe(loop, u, req, tag, res);
		else
			step_cqe(loop, u, req, tag, res);
		return;
	}
	if (req->op == RL_OP_WRITE_FILE) {
		rl__uring_wf_cqe(loop, u, req, tag, res);
		return;
	}
	if (rl__op_is_write(req->op)) {
		rl__uring_write_cqe(loop, u, req, res);
		return;
	}
	u->cq_owed -= 1;
	if (req->op == RL_OP_FTRUNCATE && res == -EINVAL) {
		/* A kernel before 6.9 does not know the opcode and says
		 * -EINVAL, as ftruncate() does for a bad length or fd type.
		 * Asking ftruncate() itself, on the loop thread, tells them
		 * apart and gives the same answer as the epoll backend. */
		loop->stats.syscalls++;
		res = ftruncate(req->fd, (off_t)req->offset) < 0 ? -errno : 0;
	}
	/* The kernel's non-blocking first try of a FIFO's open for writing
	 * with no reader: -ENXIO, where open(2) waits for one. Try again in
	 * an io-wq worker, which waits (see the top of this file). */
	if (req->op == RL_OP_OPEN && res == -ENXIO &&
	    rl__ur(req)->step == OPEN_FIRST && !(req->flags & O_NONBLOCK) &&
	    (req->flags & O_ACCMODE) == O_WRONLY) {
		/* (Cancelled before its wait began: it would have waited.) */
		if ((rl__req(req)->state & RL__REQ_CANCEL) || u->closing) {
			rl__uring_complete(loop, u, req, -ECANCELED);
			return;
		}
		rl__ur(req)->step = OPEN_ASYNC;
		rl__uring_push_or_queue(loop, u, req, &u->cont);
		return;
	}
	if (res == -ESPIPE && req->offset >= 0 &&
	    rl__ur(req)->step == READ_AT_OFFSET && rl__op_is_read(req->op) &&
	    !rl__uring_stopping(u, req)) {
		rl__ur(req)->step = READ_NO_POS;
		rl__uring_push_or_queue(loop, u, req, &u->cont);
		return;
	}
	rl__uring_complete(loop, u, req, res);
}

/* ------------------------------------------------------------- cancelling */

/* A read_file or write_file past its open, whose file (slot or fd) is
 * open until its close step has run. */
static bool holds_file(rl_req *req)
{
	int32_t step = rl__ur(req)->step;

	return (req->op == RL_OP_READ_FILE || req->op == RL_OP_WRITE_FILE) &&
	       (step == STEP_READ || step == STEP_WRITE || step == STEP_SYNC ||
		step == STEP_CLOSE);
}

void rl__uring_fs_cancel(rl_loop *loop, struct rl__uring *u, rl_req *req)
{
	if (rl__req(req)->state & RL__REQ_QUEUED) {
		/* Not in the kernel: waiting for an fd, or a next step
		 * waiting for room (cont). A read_file or write_file that
		 * holds its file open goes on to its close instead of its
		 * next read, write or fsync, which might wait forever on a
		 * FIFO, and a close already due stays: taken off the queue
		 * and completed here, it would leave its file open (a FIFO's
		 * reader would never see the end, a plain fd would leak). */
		if (holds_file(req)) {
			if (rl__ur(req)->step != STEP_CLOSE) {
				rl__ur(req)->res[0] = -ECANCELED;
				rl__ur(req)->step = STEP_CLOSE;
			}
			return;
		}
		/* The rest of a short write holds nothing, but may have to
		 * put the file position after what it wrote. */
		if (rl__op_is_write(req->op) &&
		    rl__fifo_remove(&u->cont, req)) {
			rl__req(req)->state &= ~(uint32_t)RL__REQ_QUEUED;
			rl__uring_write_stop(loop, req);
			return;
		}
		if (rl__fifo_remove(&u->fd_wait, req) ||
		    rl__fifo_remove(&u->cont, req)) {
			rl__req(req)->state &= ~(uint32_t)RL__REQ_QUEUED;
			rl__uring_release_slot(loop, u, req);
			rl__uring_complete(loop, u, req, -ECANCELED);
			return;
		}
	}
	/* In the kernel: most requests finish soon and report -ECANCELED
	 * then, but a read of a pipe with no writer, or an open of a FIFO
	 * (read_file's chain or step, or rl_fs_open) in an io-wq worker, can
	 * wait forever, and so can a write to a full pipe; an async cancel
	 * interrupts those. A chain is cancelled at its open, or at its
	 * read or write: the rest of it fails after it, down to the close.
	 * A cancel that finds nothing answers -ENOENT, ignored. */
	if (req->op == RL_OP_READ_FILE || req->op == RL_OP_WRITE_FILE) {
		/* The chain's next step must be issued first. On the default
		 * ring the read that follows a done open waits in the
		 * kernel's task work until the loop enters again; a cancel
		 * then finds nothing, and that read waits for ever on a FIFO
		 * nobody writes to (loan_attack::deadlines_fire_on_lent_reads,
		 * with the chain still in the SQ; ...::many_fifo_reads_timed_
		 * out_before_their_enter, with chains a burst left in task
		 * work). */
		rl__uring_settle(loop, u, rl__ur(req)->sq_end);
		cancel_step(loop, u, req, RL__TAG_OPEN);
		cancel_step(loop, u, req, RL__TAG_MAIN);
		return;
	}
	rl__uring_cancel_sqe(loop, u, rl__udata(req, RL__TAG_MAIN));
}

/* Closing: the fd waiters go back to pending, to be cancelled. What waits
 * in cont runs on: read_file and write_file steps hold a file and run to
 * its close; the rest of a short write makes one more attempt, whose CQE
 * sees the loop closing and stops it (uring_fs_write.c). */
void rl__uring_fs_closing(struct rl__uring *u)
{
	rl__fifo_splice(&u->pending, &u->fd_wait);
}
