/* SPDX-License-Identifier: MIT */
/*
 * uring_fs_write.c - writes on io_uring: write, writev and write_fixed,
 * which the loop finishes when the kernel wrote less than asked, and
 * write_file, a linked chain when it can be; and the registered buffers.
 *
 * Short writes. A write to a pipe returns what fitted in the pipe (6.18
 * writes 64 KiB of a larger buffer into an empty pipe and completes), a
 * file system filling up returns what it could allocate before -ENOSPC. A
 * short CQE is therefore not the end: the rest goes out as the next SQE,
 * from where the kernel stopped, until all is written, the kernel says
 * -errno, or the request is stopped (then -ECANCELED: part of the data
 * was written, none of it reported as written).
 *
 * Short writes at the file position (offset -1) of a regular file or
 * block device need more: the kernel finishes a partial write of those
 * itself (io_uring/rw.c, need_complete_io()), so a short CQE means that
 * its retry failed; it then reports the bytes written but leaves f_pos
 * where the write started (kiocb_done() moves f_pos only when the last
 * attempt succeeded; 6.18 does so). Going on at the file position would
 * write the rest over the start, and on a file system whose overwrite
 * needs no new block (tmpfs full to the last page) "succeed". So such a
 * write goes on at explicit offsets from the position lseek() reports,
 * and puts f_pos after what it wrote when it ends, as write(2) would.
 * A pipe or socket has no position: its rest goes at -1 as before.
 * Neither does an O_APPEND fd need one: its writes go at the end of the
 * file whatever the offset, so its rest goes at -1 too, and the kernel
 * moves f_pos to the end when that succeeds; when the write fails or is
 * stopped, f_pos is put at the end, where write(2) leaves it (not after
 * the bytes counted from where f_pos was, which another fd's appends or
 * an lseek() may have left anywhere before the end).
 *
 * write_file's chain is open -> write -> [fsync] -> close on one direct
 * descriptor slot, in one submission:
 *
 *  - Every link is a plain IOSQE_IO_LINK, unlike read_file's: a short
 *    write must stop the chain before the close, so that the slot still
 *    holds the file and the rest can be written into it.
 *  - IOSQE_CQE_SKIP_SUCCESS on the open and the write. A request with it
 *    that fails (a short write counts as failed for links) posts its CQE
 *    after all, and the kernel then posts none for the links it cancelled
 *    (REQ_F_SKIP_LINK_CQES). So a chain posts exactly one CQE: the close's
 *    when everything went through, else the one of the step that failed.
 *    The fsync is the exception: the kernel does not count its failure
 *    as one for links (see prep_chain()), so it posts its CQE always and
 *    is hard-linked to the close, whose CQE follows it.
 *  - After a failure at the open, nothing was opened. After one at the
 *    write or the fsync, the slot holds the open file: the request goes
 *    on one SQE at a time (the rest of the write, the fsync, the close).
 *  - The write goes at explicit offsets (0, then where a short write
 *    stopped), not at the file position (see above); O_APPEND ignores
 *    them and appends, and a FIFO has no offsets.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uring_fs.h"

/* ---------------------------------------------------------- registering */

int rl__uring_register_buffers(rl_loop *loop, const struct iovec *iov,
			       unsigned n)
{
	struct rl__uring *u = rl__u(loop);

	loop->stats.syscalls++;
	if (!n)
		return io_uring_unregister_buffers(&u->ring);
	return io_uring_register_buffers(&u->ring, iov, n);
}

/* ------------------------------------------------------------ writes */

/*
 * A write keeps in its backend words: res[1] the bytes written so far,
 * res[0] the file offset where its data starts (req->offset, or where the
 * file position was, see above), or -1 for the file position; step is
 * WRITE_MOVE_POS once it took over the file position from the kernel,
 * WRITE_STREAM once it knows its fd has none, WRITE_APPEND once it knows
 * its fd appends (see the top of this file).
 */
enum { WRITE_MOVE_POS = 1, WRITE_STREAM = 2, WRITE_APPEND = 3 };

/* The rest of a write: what follows the res[1] bytes written so far. */
void rl__uring_write_prep(struct rl__uring *u, rl_req *req)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	size_t done = (size_t)rl__ur(req)->res[1];
	int64_t base = rl__ur(req)->res[0];
	uint64_t off = base < 0 ? (uint64_t)-1 : (uint64_t)base + done;
	const char *buf = (const char *)req->buf + done;
	unsigned left = (unsigned)(req->len - done);
	const struct iovec *iov = req->iov;
	unsigned i = 0;

	switch (req->op) {
	case RL_OP_WRITE:
		io_uring_prep_write(sqe, req->fd, buf, left, off);
		break;
	case RL_OP_WRITE_FIXED:
		io_uring_prep_write_fixed(sqe, req->fd, buf, left, off,
					  (int)req->count);
		break;
	case RL_OP_WRITEV:
		/* The caller's iovecs are const: after a short write, the
		 * rest of a partly written one goes alone, and the iovecs
		 * after it follow as a writev of the caller's array. */
		while (i < req->count && done >= iov[i].iov_len)
			done -= iov[i++].iov_len;
		if (done)
			io_uring_prep_write(
				sqe, req->fd,
				(const char *)iov[i].iov_base + done,
				(unsigned)(iov[i].iov_len - done), off);
		else
			io_uring_prep_writev(sqe, req->fd, iov + i,
					     req->count - i, off);
		break;
	}
	io_uring_sqe_set_data64(sqe, rl__udata(req, RL__TAG_MAIN));
}

/*
 * Folds a write's result into the bytes written so far. Returns 1 when
 * data is left to write (and the request may go on), 0 when all of it is
 * written, -errno when the write failed or must stop.
 */
static int written(struct rl__uring *u, rl_req *req, int32_t res)
{
	struct rl__uring_req *ur = rl__ur(req);

	if (res < 0)
		return res;
	ur->res[1] += res;
	if ((size_t)ur->res[1] >= req->len)
		return 0;
	/* Nothing written of a non-empty rest: the file takes no more, and
	 * asking again would loop forever. */
	if (res == 0)
		return -EIO;
	return rl__uring_stopping(u, req) ? -ECANCELED : 1;
}

/* A write at the file position came back short (see the top of this
 * file): on a regular file or block device, go on at explicit offsets from
 * where the kernel left f_pos. */
static void take_position(rl_loop *loop, rl_req *req, int32_t res)
{
	struct rl__uring_req *ur = rl__ur(req);
	struct stat st;
	off_t pos;
	int fl;

	if (ur->step == WRITE_STREAM || ur->step == WRITE_APPEND)
		return;
	ur->step = WRITE_STREAM;
	loop->stats.syscalls++;
	if (fstat(req->fd, &st) < 0 ||
	    !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode)))
		return;
	loop->stats.syscalls++;
	fl = fcntl(req->fd, F_GETFL);
	if (fl >= 0 && (fl & O_APPEND)) {
		ur->step = WRITE_APPEND;
		return;
	}
	loop->stats.syscalls++;
	pos = lseek(req->fd, 0, SEEK_CUR);
	if (pos < 0)
		return;
	/* f_pos is where this write's last SQE started, and its res bytes
	 * are there; the bytes before them (res[1] counts both) are
	 * before it. */
	ur->res[0] = (int64_t)pos - (ur->res[1] - res);
	ur->step = WRITE_MOVE_POS;
}

/* The write is over with ret (< 0, or 0: all written). */
static void write_end(rl_loop *loop, rl_req *req, int ret)
{
	struct rl__uring_req *ur = rl__ur(req);

	if (ur->step == WRITE_MOVE_POS) {
		/* After the bytes written, as write(2) leaves it. */
		loop->stats.syscalls++;
		lseek(req->fd, (off_t)(ur->res[0] + ur->res[1]), SEEK_SET);
	} else if (ur->step == WRITE_APPEND && ret < 0) {
		/* The last attempt failed, so the kernel left f_pos where
		 * it was: at the end, as after write(2) on O_APPEND. */
		loop->stats.syscalls++;
		lseek(req->fd, 0, SEEK_END);
	}
	rl__uring_complete(loop, rl__u(loop), req,
			   ret < 0 ? ret : (int64_t)req->len);
}

void rl__uring_write_stop(rl_loop *loop, rl_req *req)
{
	write_end(loop, req, -ECANCELED);
}

void rl__uring_write_cqe(rl_loop *loop, struct rl__uring *u, rl_req *req,
			 int32_t res)
{
	struct rl__uring_req *ur = rl__ur(req);
	int ret;

	u->cq_owed -= 1;
	/* An offset on an fd without a position: io_uring ignores it for a
	 * pipe, and a socket takes offset 0 but refuses any other (-ESPIPE,
	 * sock_write_iter()), which the rest of a write at 0 cut short by
	 * the socket's buffer asks for; the write goes on at -1 then, as on
	 * a pipe and on the epoll backend (rl__ep_rw()). */
	if (res == -ESPIPE && ur->res[0] >= 0 && !rl__uring_stopping(u, req)) {
		ur->res[0] = -1;
		ur->step = WRITE_STREAM;
		rl__uring_push_or_queue(loop, u, req, &u->cont);
		return;
	}
	ret = written(u, req, res);
	if (ret == 1 && rl__ur(req)->res[0] < 0)
		take_position(loop, req, res);
	if (ret == 1)
		rl__uring_push_or_queue(loop, u, req, &u->cont);
	else
		write_end(loop, req, ret);
}

/* --------------------------------------------------------- write_file */

static int wf_oflags(const rl_req *req)
{
	int o = O_WRONLY | O_CREAT;

	o |= (req->flags & RL_WRITE_FILE_APPEND) ? O_APPEND : O_TRUNC;
	if (req->flags & RL_WRITE_FILE_EXCL)
		o |= O_EXCL;
	return o;
}

static bool wf_sync(const rl_req *req)
{
	return req->flags & (RL_WRITE_FILE_FSYNC | RL_WRITE_FILE_DATASYNC);
}

static unsigned wf_fsync_flags(const rl_req *req)
{
	return (req->flags & RL_WRITE_FILE_FSYNC) ? 0 : IORING_FSYNC_DATASYNC;
}

static unsigned chain_len(const rl_req *req)
{
	return wf_sync(req) ? 4 : 3;
}

struct rl__uring_need rl__uring_wf_need(const struct rl__uring *u, rl_req *req)
{
	int32_t step = rl__ur(req)->step;
	struct rl__uring_need need = { .sqes = 1, .slot = false };

	if (step == STEP_CHAIN)
		need.sqes = chain_len(req);
	need.slot = rl__uring_slotted(u, req) &&
		    (step == STEP_CHAIN || step == STEP_OPEN);
	return need;
}

static void prep_chain(struct rl__uring *u, rl_req *req)
{
	unsigned slot = (unsigned)rl__ur(req)->slot;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	/* No O_CLOEXEC: a direct descriptor refuses it (uring_fs.c). */
	io_uring_prep_openat_direct(sqe, AT_FDCWD, req->path, wf_oflags(req),
				    (mode_t)req->mode, slot);
	sqe->flags |= IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, rl__udata(req, RL__TAG_OPEN));

	sqe = io_uring_get_sqe(&u->ring);
	io_uring_prep_write(sqe, (int)slot, req->buf, (unsigned)req->len, 0);
	sqe->flags |= IOSQE_FIXED_FILE | IOSQE_IO_LINK | IOSQE_CQE_SKIP_SUCCESS;
	io_uring_sqe_set_data64(sqe, rl__udata(req, RL__TAG_MAIN));

	if (wf_sync(req)) {
		/* Not CQE_SKIP_SUCCESS, and a hard link to the close: a
		 * failed fsync does not mark itself failed for links (6.18's
		 * io_fsync() only sets its result), so with SKIP_SUCCESS its
		 * error would post no CQE and the close would run as if all
		 * went well. Its CQE always comes, and the close after it
		 * whatever it says. */
		sqe = io_uring_get_sqe(&u->ring);
		io_uring_prep_fsync(sqe, (int)slot, wf_fsync_flags(req));
		sqe->flags |= IOSQE_FIXED_FILE | IOSQE_IO_HARDLINK;
		io_uring_sqe_set_data64(sqe, rl__udata(req, RL__TAG_SYNC));
	}

	sqe = io_uring_get_sqe(&u->ring);
	io_uring_prep_close_direct(sqe, slot);
	io_uring_sqe_set_data64(sqe, rl__udata(req, RL__TAG_CLOSE));
}

/* One step: the file is the slot, or a plain fd in req->fd. */
static void prep_step(struct rl__uring *u, rl_req *req)
{
	struct rl__uring_req *ur = rl__ur(req);
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	size_t done = (size_t)ur->res[1];
	bool slotted = rl__uring_slotted(u, req);
	int fd = slotted ? ur->slot : req->fd;

	switch (ur->step) {
	case STEP_OPEN:
		if (slotted)
			io_uring_prep_openat_direct(
				sqe, AT_FDCWD, req->path, wf_oflags(req),
				(mode_t)req->mode, (unsigned)ur->slot);
		else
			io_uring_prep_openat(sqe, AT_FDCWD, req->path,
					     wf_oflags(req) | O_CLOEXEC,
					     (mode_t)req->mode);
		break;
	case STEP_WRITE:
		io_uring_prep_write(sqe, fd, (const char *)req->buf + done,
				    (unsigned)(req->len - done), done);
		break;
	case STEP_SYNC:
		io_uring_prep_fsync(sqe, fd, wf_fsync_flags(req));
		break;
	default:
		if (slotted)
			io_uring_prep_close_direct(sqe, (unsigned)ur->slot);
		else
			io_uring_prep_close(sqe, req->fd);
		break;
	}
	if (slotted && (ur->step == STEP_WRITE || ur->step == STEP_SYNC))
		sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data64(sqe, rl__udata(req, RL__TAG_MAIN));
}

void rl__uring_wf_prep(struct rl__uring *u, rl_req *req)
{
	if (rl__ur(req)->step == STEP_CHAIN)
		prep_chain(u, req);
	else
		prep_step(u, req);
}

/* What follows a write (ret from written()): the rest of the data, the
 * fsync, or the close. res[0] keeps the error the request will report once
 * its file is closed. A request stopped with all its data written skips
 * the fsync it asked for, and so fails; without one it has succeeded. */
static void after_write(struct rl__uring *u, rl_req *req, int ret)
{
	struct rl__uring_req *ur = rl__ur(req);

	ur->step = STEP_CLOSE;
	if (ret < 0)
		ur->res[0] = ret;
	else if (ret == 1)
		ur->step = STEP_WRITE;
	else if (!wf_sync(req))
		;
	else if (rl__uring_stopping(u, req))
		ur->res[0] = -ECANCELED;
	else
		ur->step = STEP_SYNC;
}

/* The close ran (res: its result): the request is over. */
static void finish(rl_loop *loop, struct rl__uring *u, rl_req *req, int32_t res)
{
	struct rl__uring_req *ur = rl__ur(req);

	rl__uring_release_closed_slot(loop, u, req);
	if (!rl__uring_slotted(u, req) && req->fd >= 0) {
		req->fd = -1;
		u->fds_held--;
		rl__uring_fd_released(u);
	}
	if (ur->res[0] < 0)
		rl__uring_complete(loop, rl__u(loop), req, ur->res[0]);
	else
		rl__uring_complete(loop, rl__u(loop), req,
				   res < 0 ? res : (int64_t)req->len);
}

/* The chain posts one CQE: the open or write that failed, or the close;
 * with an fsync, the fsync's first and then the close's. */
static void chain_cqe(rl_loop *loop, struct rl__uring *u, rl_req *req,
		      unsigned tag, int32_t res)
{
	struct rl__uring_req *ur = rl__ur(req);

	if (tag == RL__TAG_SYNC) {
		/* The close runs after it (hard link): its CQE, which
		 * step_cqe() takes, ends the request. */
		u->cq_owed -= chain_len(req) - 1;
		ur->res[0] = res < 0 ? res : 0;
		ur->step = STEP_CLOSE;
		return;
	}
	u->cq_owed -= chain_len(req);
	switch (tag) {
	case RL__TAG_OPEN:
		/* Nothing was opened: the slot holds what it held. */
		rl__uring_release_slot(loop, u, req);
		rl__uring_complete(loop, rl__u(loop), req, res);
		return;
	case RL__TAG_MAIN:
		after_write(u, req, written(u, req, res));
		break;
	default: /* RL__TAG_CLOSE */
		finish(loop, u, req, res);
		return;
	}
	rl__uring_push_or_queue(loop, u, req, &u->cont);
}

static void step_cqe(rl_loop *loop, struct rl__uring *u, rl_req *req,
		     int32_t res)
{
	struct rl__uring_req *ur = rl__ur(req);

	u->cq_owed -= 1;
	switch (ur->step) {
	case STEP_OPEN:
		if ((res == -EMFILE || res == -ENFILE) && u->fds_held &&
		    !rl__uring_stopping(u, req)) {
			/* As read_file (uring_fs.c): wait for one of our own
			 * files to close rather than fail. */
			rl__uring_fd_wait(u, req);
			return;
		}
		if (res < 0) {
			rl__uring_release_slot(loop, u, req);
			rl__uring_complete(loop, rl__u(loop), req, res);
			return;
		}
		if (!rl__uring_slotted(u, req)) {
			req->fd = res;
			u->fds_held++;
		}
		if (rl__uring_stopping(u, req)) {
			ur->res[0] = -ECANCELED;
			ur->step = STEP_CLOSE;
		} else {
			/* Zero bytes to write: on to the fsync or close. */
			after_write(u, req, req->len ? 1 : 0);
		}
		break;
	case STEP_WRITE:
		after_write(u, req, written(u, req, res));
		break;
	case STEP_SYNC:
		ur->res[0] = res < 0 ? res : 0;
		ur->step = STEP_CLOSE;
		break;
	default:
		finish(loop, u, req, res);
		return;
	}
	rl__uring_push_or_queue(loop, u, req, &u->cont);
}

void rl__uring_wf_cqe(rl_loop *loop, struct rl__uring *u, rl_req *req,
		      unsigned tag, int32_t res)
{
	if (rl__ur(req)->step == STEP_CHAIN)
		chain_cqe(loop, u, req, tag, res);
	else
		step_cqe(loop, u, req, res);
}
