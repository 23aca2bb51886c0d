/* SPDX-License-Identifier: MIT */
/*
 * epoll_aio.c - reads and writes of O_DIRECT files on the epoll backend
 * through Linux native AIO (io_submit), as fio's libaio engine and
 * nginx's `aio on` do it, instead of a pool worker each.
 *
 * Why: a direct read waits for the device (epoll_fs.c), so without AIO
 * each one costs a worker two sleeps and two hand-offs (the job to the
 * worker, the result back to the loop), where the device needs none:
 * the kernel can queue the I/O and signal its end. With AIO the loop
 * hands the kernel a batch of iocbs in one io_submit() at its next
 * wait(), each completion writes the loop's eventfd (IOCB_FLAG_RESFD),
 * and the loop reads the events from the context's ring in user space,
 * without a syscall. docs/experiments.md ("Linux AIO for direct I/O on
 * epoll") has what it measured.
 *
 * What goes this way: read, readv, read_fixed, write, writev and
 * write_fixed at an offset (not -1: AIO has no file position) on an fd
 * that rl_fs_open() opened with O_DIRECT (the backend's hint, see
 * rl__ep_fs_is_direct() in epoll_fs.c), unless RL_NO_AIO. Every iocb carries
 * RWF_NOWAIT (4.13), so io_submit() never blocks the loop thread: what
 * would wait for a lock, a block allocation (a write into a hole or past
 * the end of the file) or a request slot of a full device queue fails
 * with -EAGAIN instead, and the request goes to the pool, which does it
 * the blocking way. So does anything io_submit() refuses (a file without
 * NOWAIT support, too many iocbs in flight, a bad fd, too many iovecs):
 * the pool gets the same error from the same call, so the results and
 * error codes stay those of the pool path; an fd whose file refused
 * NOWAIT is remembered (rl__ep_fs_aio_ok()), so that its later requests
 * go to the pool without asking again. A write cut short is finished
 * by the pool from where it stopped (ringloop.h: short writes are
 * completed, never reported), and so is a read cut short inside a
 * regular file, which only a stale hint gives (read_goes_on()).
 *
 * The context is made at the first such request (io_setup counts against
 * the system's /proc/sys/fs/aio-max-nr, so loops that never read a direct
 * file take none); when the kernel refuses it (no AIO support, the limit
 * reached, a seccomp filter) the loop uses the pool for good, and so it
 * does when io_submit() itself is refused later (submit_refused()).
 *
 * Cancelling: block-device AIO cannot be cancelled (io_cancel() fails
 * with -EINVAL for it), so a request in the kernel finishes as it will,
 * and rl__complete() gives the caller -ECANCELED or the bytes read, as
 * for a pool job that was already running. A request still queued for
 * the next io_submit() is taken out at once. Closing the loop waits for
 * the requests in the kernel, whose buffers it must not give back before.
 */
#include <errno.h>
#include <linux/aio_abi.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "epoll.h"

/* cppcheck cannot evaluate __has_include (see styles/coro_stack.c). */
#if defined(__has_include) && !defined(__CPPCHECK__)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define RL__VALGRIND 1
#endif
#endif

#ifndef RWF_NOWAIT
#define RWF_NOWAIT 0x00000008
#endif

/* Events the context holds: the most requests in the kernel at once;
 * more go to the pool. The kernel makes room for at least this many. */
#define AIO_EVENTS 512

/* iocbs per io_submit(), and events taken from the ring per pass. */
#define AIO_BATCH 64

/*
 * The ring the kernel maps at the context's address (fs/aio.c, struct
 * aio_ring): the kernel writes an event, then (smp_wmb) the tail; the
 * process may take events itself by moving head, which the kernel reads
 * back when it needs room. Its layout is ABI: libaio and fio read it the
 * same way. A ring without the magic (some other kernel) is read with
 * io_getevents() instead.
 */
#define AIO_RING_MAGIC 0xa10a10a1u

struct aio_ring {
	unsigned id;
	unsigned nr;
	unsigned head;
	unsigned tail;
	unsigned magic;
	unsigned compat_features;
	unsigned incompat_features;
	unsigned header_length;
	struct io_event io_events[];
};

/*
 * Valgrind (3.19) takes the ring for io_setup()'s count of events, where
 * the kernel makes room for about twice as many (ring->nr): reading the
 * events past the first ones, once the head has gone round that far,
 * would look like reads of memory nobody mapped. The whole ring is the
 * process's to read.
 */
static void tell_valgrind_the_ring(aio_context_t ctx)
{
#ifdef RL__VALGRIND
	const struct aio_ring *ring = (const struct aio_ring *)(uintptr_t)ctx;

	if (RUNNING_ON_VALGRIND && ring->magic == AIO_RING_MAGIC)
		VALGRIND_MAKE_MEM_DEFINED(
			ring, sizeof(*ring) + (size_t)ring->nr *
						      sizeof(struct io_event));
#else
	(void)ctx;
#endif
}

/* Makes the context; false (and AIO off for good) when the kernel
 * refuses. */
static bool aio_setup(rl_loop *loop, struct rl__ep *ep)
{
	aio_context_t ctx = 0;

	loop->stats.syscalls++;
	if (syscall(SYS_io_setup, AIO_EVENTS, &ctx) < 0) {
		ep->aio_off = true;
		return false;
	}
	ep->aio_ctx = ctx;
	tell_valgrind_the_ring(ctx);
	return true;
}

bool rl__ep_aio_take(rl_loop *loop, struct rl__ep *ep, rl_req *req)
{
	if (ep->aio_off ||
	    !(rl__op_is_read(req->op) || rl__op_is_write(req->op)) ||
	    req->offset < 0 || !rl__ep_fs_aio_ok(ep, req->fd))
		return false;
	/* The context's events are all taken: this one waits in the pool
	 * rather than for a slot. */
	if (ep->in_aio + ep->naio_queued >= AIO_EVENTS)
		return false;
	if (!ep->aio_ctx && !aio_setup(loop, ep))
		return false;
	rl__epr(req)->step = RL__EP_AIO_QUEUED;
	rl__fifo_push(&ep->aio_queue, req);
	ep->naio_queued++;
	return true;
}

/* The request goes to the pool, which does (or finishes) it blocking. */
static void to_pool(struct rl__ep *ep, rl_req *req)
{
	rl__epr(req)->bflags |= RL__EP_TRIED;
	rl__ep_to_pool(ep, req);
}

static void prep(struct iocb *cb, rl_req *req, int efd)
{
	bool v = req->op == RL_OP_READV || req->op == RL_OP_WRITEV;

	memset(cb, 0, sizeof(*cb));
	cb->aio_data = (uint64_t)(uintptr_t)req;
	cb->aio_rw_flags = RWF_NOWAIT;
	if (rl__op_is_write(req->op))
		cb->aio_lio_opcode = v ? IOCB_CMD_PWRITEV : IOCB_CMD_PWRITE;
	else
		cb->aio_lio_opcode = v ? IOCB_CMD_PREADV : IOCB_CMD_PREAD;
	cb->aio_fildes = (uint32_t)req->fd;
	/* The kernel copies the iovecs at submission. */
	cb->aio_buf = (uint64_t)(uintptr_t)(v ? (const void *)req->iov
					      : (const void *)req->buf);
	cb->aio_nbytes = v ? req->count : req->len;
	cb->aio_offset = req->offset;
	cb->aio_flags = IOCB_FLAG_RESFD;
	cb->aio_resfd = (uint32_t)efd;
}

/* The queued requests go to the pool: AIO went off. */
static void aio_queue_to_pool(struct rl__ep *ep)
{
	rl_req *req;

	while ((req = rl__fifo_pop(&ep->aio_queue))) {
		ep->naio_queued--;
		to_pool(ep, req);
	}
}

/*
 * io_submit() failed with err: whether the syscall itself is refused (a
 * seccomp filter installed after the context was made: Docker's and
 * systemd's answer EPERM, or ENOSYS), rather than one iocb (an LSM may
 * say EPERM or EACCES for one file). An empty io_submit() asks without
 * blaming any iocb; refused, AIO goes off for good, as when io_setup()
 * is refused, instead of costing a refused syscall per request for ever.
 * Events already in the ring are still read (no syscall needed).
 */
static bool submit_refused(rl_loop *loop, struct rl__ep *ep, int err)
{
	if (err != EPERM && err != EACCES && err != ENOSYS)
		return false;
	loop->stats.syscalls++;
	if (syscall(SYS_io_submit, ep->aio_ctx, 0L, NULL) == 0)
		return false;
	ep->aio_off = true;
	return true;
}

void rl__ep_aio_flush(rl_loop *loop, struct rl__ep *ep)
{
	struct iocb cbs[AIO_BATCH], *ptrs[AIO_BATCH];
	rl_req *reqs[AIO_BATCH], *req;
	unsigned n, i;
	long r;
	int err;

	while (!rl__fifo_empty(&ep->aio_queue)) {
		n = 0;
		while (n < AIO_BATCH && (req = rl__fifo_pop(&ep->aio_queue))) {
			ep->naio_queued--;
			if (!rl__ep_fs_aio_ok(ep, req->fd)) {
				/* Its file refused an iocb of this flush. */
				to_pool(ep, req);
				continue;
			}
			reqs[n] = req;
			prep(&cbs[n], req, ep->efd);
			ptrs[n] = &cbs[n];
			rl__epr(req)->step = RL__EP_AIO;
			n++;
		}
		ep->in_aio += n;
		for (i = 0; i < n;) {
			if (i && !rl__ep_fs_aio_ok(ep, reqs[i]->fd)) {
				/* Its file refused an earlier one. */
				ep->in_aio--;
				to_pool(ep, reqs[i]);
				i++;
				continue;
			}
			loop->stats.syscalls++;
			r = syscall(SYS_io_submit, ep->aio_ctx, (long)(n - i),
				    &ptrs[i]);
			if (r > 0) {
				loop->stats.aio += (uint64_t)r;
				i += (unsigned)r;
				continue;
			}
			/* reqs[i] was refused (r == 0 cannot happen with
			 * iocbs to submit; treat it as a refusal too): the
			 * pool does it, and meets the same error if there
			 * is one. */
			err = r < 0 ? errno : 0;
			if (err && submit_refused(loop, ep, err)) {
				/* The rest of the batch, and of the queue,
				 * go with it. */
				for (; i < n; i++) {
					ep->in_aio--;
					to_pool(ep, reqs[i]);
				}
				aio_queue_to_pool(ep);
				return;
			}
			if (err == EOPNOTSUPP)
				rl__ep_fs_no_aio(ep, reqs[i]->fd);
			ep->in_aio--;
			to_pool(ep, reqs[i]);
			i++;
		}
	}
}

/*
 * A read that AIO cut short: the end of the file, or RWF_NOWAIT stopping
 * where the page cache does, when the fd is not O_DIRECT after all (the
 * backend's hint went stale: fcntl() took the flag away, or dup2() put a
 * buffered file on the number). Reported as it is, the short count would
 * tell the caller that the file ends there, where pread() and io_uring
 * give the whole range; so, as the fast path does (inline_read() in
 * epoll_fs.c), a regular file is read on when it goes on past what came.
 * A pipe or socket (a stale hint too) gives what it had. It costs a
 * syscall only when a read comes back short, at the end of a file.
 */
static bool read_goes_on(rl_loop *loop, const rl_req *req, size_t got)
{
	struct stat st;

	loop->stats.syscalls++;
	return fstat(req->fd, &st) == 0 && S_ISREG(st.st_mode) &&
	       req->offset + (int64_t)got < st.st_size;
}

/* An event for req: its result, or a retry in the pool. Returns 1 when
 * req completed. */
static int aio_done(rl_loop *loop, struct rl__ep *ep, rl_req *req, int64_t res)
{
	bool stopping = (rl__req(req)->state & RL__REQ_CANCEL) || ep->closing;
	size_t done = (size_t)rl__epr(req)->res[1];

	ep->in_aio--;
	rl__epr(req)->step = RL__EP_NONE;
	if (res == -EAGAIN || res == -EOPNOTSUPP) {
		/* RWF_NOWAIT: it would have blocked. */
		if (stopping) {
			rl__complete(loop, req, -ECANCELED);
			return 1;
		}
		to_pool(ep, req);
		return 0;
	}
	if (rl__op_is_read(req->op) && res > 0 && (size_t)res < req->len &&
	    !stopping && read_goes_on(loop, req, (size_t)res)) {
		/* Cut short inside a regular file: the pool reads the rest,
		 * from there. */
		rl__epr(req)->res[1] = res;
		rl__epr(req)->bflags |= RL__RD_SEEKABLE;
		to_pool(ep, req);
		return 0;
	}
	if (rl__op_is_write(req->op) && res >= 0 &&
	    done + (size_t)res < req->len) {
		/* A short write: the pool writes the rest, from there. */
		rl__epr(req)->res[1] = (int64_t)(done + (size_t)res);
		if (stopping) {
			rl__complete(loop, req, -ECANCELED);
			return 1;
		}
		to_pool(ep, req);
		return 0;
	}
	rl__complete(loop, req, res);
	return 1;
}

/* Takes up to max events off the ring; how many. */
static unsigned take_events(rl_loop *loop, struct rl__ep *ep,
			    struct io_event *evs, unsigned max)
{
	struct aio_ring *ring = (struct aio_ring *)(uintptr_t)ep->aio_ctx;
	struct timespec zero = { 0, 0 };
	long r;

	if (ring->magic == AIO_RING_MAGIC && !ring->incompat_features) {
		unsigned head = ring->head, n = 0;
		unsigned tail = __atomic_load_n(&ring->tail, __ATOMIC_ACQUIRE);

		while (head != tail && n < max) {
			evs[n++] = ring->io_events[head];
			head = head + 1 == ring->nr ? 0 : head + 1;
		}
		/* The events are copied: their slots are the kernel's. */
		__atomic_store_n(&ring->head, head, __ATOMIC_RELEASE);
		return n;
	}
	loop->stats.syscalls++;
	r = syscall(SYS_io_getevents, ep->aio_ctx, 0L, (long)max, evs, &zero);
	return r > 0 ? (unsigned)r : 0;
}

int rl__ep_aio_reap(rl_loop *loop, struct rl__ep *ep)
{
	struct io_event evs[AIO_BATCH];
	unsigned n;
	int done = 0;

	while (ep->in_aio && (n = take_events(loop, ep, evs, AIO_BATCH))) {
		for (unsigned i = 0; i < n; i++)
			done += aio_done(loop, ep,
					 (rl_req *)(uintptr_t)evs[i].data,
					 (int64_t)evs[i].res);
		if (n < AIO_BATCH)
			break;
	}
	return done;
}

bool rl__ep_aio_cancel(struct rl__ep *ep, rl_req *req)
{
	if (rl__epr(req)->step != RL__EP_AIO_QUEUED)
		return false;
	rl__fifo_remove(&ep->aio_queue, req);
	ep->naio_queued--;
	return true;
}

void rl__ep_aio_closing(rl_loop *loop, struct rl__ep *ep)
{
	rl_req *req;

	while ((req = rl__fifo_pop(&ep->aio_queue))) {
		ep->naio_queued--;
		rl__epr(req)->step = RL__EP_NONE;
		rl__complete(loop, req, -ECANCELED);
	}
}

void rl__ep_aio_free(struct rl__ep *ep)
{
	/* Nothing is in flight: the loop's close waited for every request.
	 * io_destroy() would wait for them anyway. */
	if (ep->aio_ctx)
		syscall(SYS_io_destroy, ep->aio_ctx);
	ep->aio_ctx = 0;
}
