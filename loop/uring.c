/* SPDX-License-Identifier: MIT */
/*
 * uring.c - the io_uring backend's core, through liburing: the ring, the
 * queues of requests waiting for room, waiting and reaping, the wake-up,
 * cancelling. What each operation puts on the ring is in uring_fs.c.
 *
 * Kernel and liburing quirks handled here:
 *
 *  - liburing 2.3 (Debian 12): io_uring_prep_openat_direct() with
 *    IORING_FILE_INDEX_ALLOC is broken (fixed in 2.4), so direct
 *    descriptors use explicit slots from our own free list. Direct
 *    descriptors need 5.15, sparse file tables 5.19.
 *  - A sparse file table larger than RLIMIT_NOFILE fails with EMFILE: the
 *    table is clamped to the limit.
 *  - An eventfd read through the ring is the cross-thread wake-up. The
 *    eventfd must be blocking: on an O_NONBLOCK file io_uring hands -EAGAIN
 *    back instead of waiting.
 *  - Before IORING_FEAT_NODROP (5.5) an overflowing CQ dropped CQEs; with
 *    it, 5.x kernels answer io_uring_enter with -EBUSY while the overflow
 *    backlog is non-empty. The loop keeps the CQEs it may be owed within the
 *    CQ size, so neither happens in practice, and -EBUSY is handled by
 *    reaping first anyway.
 *  - DEFER_TASKRUN (6.1) requires SINGLE_ISSUER; the kernel refuses the
 *    combination otherwise with -EINVAL, which rl_loop_open() returns.
 *    The default ring (no ring knob asked for) is SINGLE_ISSUER |
 *    DEFER_TASKRUN: where the kernel refuses it (-EINVAL: before 6.1),
 *    the plain ring is set up instead and the backend's reason says so.
 *  - SINGLE_ISSUER (6.0) binds a ring to the task that creates it, unless
 *    it is set up with IORING_SETUP_R_DISABLED (5.10): then to the task
 *    that enables it. A loop may be opened on one thread and run on
 *    another, so such a ring is set up disabled and enabled by the first
 *    enter, on the thread that makes it (ring_start()). An enter on a
 *    disabled ring fails with -EBADFD; one from another task than the
 *    issuer (submit, GETEVENTS with DEFER_TASKRUN, register) with -EEXIST.
 *    File tables and the io-wq cap register on a disabled ring (6.18).
 *    liburing 2.3 declares io_uring_enable_rings() but does not export
 *    it (2.4 does): the register call is made directly.
 *  - A registered ring fd lives in the registering thread's table: it is
 *    registered at the first enter too, on the thread that runs the loop.
 *  - Closing sends IORING_ASYNC_CANCEL_ANY, for requests that would wait
 *    forever (a FIFO's open or read in an io-wq worker).
 *  - The kernel refuses more than 32768 SQ entries or 65536 CQ entries
 *    with -EINVAL unless IORING_SETUP_CLAMP (5.6) is set; it is, so a big
 *    size (and its 16-times CQ) is clamped and the sizes the kernel chose
 *    are read back.
 *  - Kernels before 5.12 charge a ring's memory to RLIMIT_MEMLOCK: under
 *    the 64 KiB many containers still set, the default ring fails with
 *    -ENOMEM. Smaller rings are tried before giving up (and AUTO then
 *    falls back to epoll, see loop.c).
 *  - An openat that an io-wq worker ran and a cancel interrupted completes
 *    with -ERESTARTSYS (-512) on 6.18, a code user space never sees from
 *    a syscall: the CQE handler turns the restart codes into -EINTR.
 *  - With SQPOLL a submit only wakes the kernel's poller: SQEs leave the
 *    SQ when it gets to them, so a full SQ may stay full for a while
 *    after io_uring_submit(). Anything that must get an SQE (the
 *    wake-up's read, a cancel) waits for room with io_uring_sqring_wait()
 *    or is queued and sent later; nothing is ever dropped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include "uring.h"

#define BATCH	 256
#define CQ_SPARE 8 /* CQEs kept for the wake-up read and cancels */
/* rl__uring_settle(): enters at most this many times, each running a
 * pass of the kernel's task work, however many chains a burst left. */
#define SETTLE_ROUNDS 1024
/* DEFER_TASKRUN: a wait that reaped this many CQEs, or an enter that
 * posted as many, suggests the kernel stopped short of its pending task
 * work (see get_events_batch()). */
#define DEFER_BUSY 16
/* DEFER_TASKRUN: at most this many enters in a row to run task work
 * (see get_events_batch()); with the kernel's 20 items per pass, enough
 * for about a BATCH of linked chains' steps. */
#define TW_ROUNDS 12
/* The largest request (a linked read_file) takes 3 SQEs at once, and the
 * wake-up's read must find room beside it: a smaller ring could never
 * take the one with the other. */
#define MIN_ENTRIES 4
/* The smallest ring tried when the kernel has no memory for a bigger. */
#define ENOMEM_FLOOR 16
/* How long the loop sleeps at most when its wake-up read found no room in
 * the SQ: posts are then seen at the next iteration instead. */
#define WAKE_RETRY_NS 1000000
/* How long a finished read_file's file may stay open in its slot while
 * the loop has other file work (see flush_lingering()). */
#define LINGER_NS 10000000u
/* How long no slot may come free, with requests waiting for one, before
 * those requests run on plain fds instead (see unstick_slots()). */
#define SLOT_STUCK_NS 10000000u
/* How long the CQ budget may stay full, nothing pushed or reaped, with
 * requests waiting for it, before what is in flight stops counting
 * against it (see unstick_cq()). */
#define CQ_STUCK_NS 10000000u
/* Adaptive submission (see learn()): an enter submitting fewer SQEs than
 * LEARN_MIN teaches nothing; at ASYNC_EAGER the loop submits every
 * EAGER_BATCH SQEs as they come. */
#define LEARN_MIN   4
#define ASYNC_MAX   3
#define ASYNC_EAGER 2
#define EAGER_BATCH 4
/* How long a closing loop waits for completions before it asks the
 * kernel again to cancel everything (see cancel_all()). */
#define CANCEL_ALL_AGAIN_NS 100000000u

static void uring_destroy(rl_loop *loop);

/* The knobs that choose a ring: with none of them asked for, the loop
 * sets up its default ring. */
#define RING_KNOBS                                                           \
	(RL_SQPOLL | RL_SINGLE_ISSUER | RL_DEFER_TASKRUN | RL_COOP_TASKRUN | \
	 RL_IOPOLL | RL_SHARED_RING)
#define DEFAULT_RING (RL_SINGLE_ISSUER | RL_DEFER_TASKRUN)

static unsigned setup_flags(unsigned f)
{
	unsigned s = 0;

	if (f & RL_SQPOLL)
		s |= IORING_SETUP_SQPOLL;
	if (f & RL_SINGLE_ISSUER)
		s |= IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_R_DISABLED;
	if (f & RL_DEFER_TASKRUN)
		s |= IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
	if (f & RL_COOP_TASKRUN)
		s |= IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG;
	if (f & RL_IOPOLL)
		s |= IORING_SETUP_IOPOLL;
	return s;
}

/* The direct descriptor table, sized to what RLIMIT_NOFILE allows. */
static int init_slots(rl_loop *loop, struct rl__uring *u, unsigned slots)
{
	struct rlimit rl;
	int ret;

	/* The kernel refuses a file table larger than RLIMIT_NOFILE
	 * (EMFILE), so a low limit shrinks the table instead of failing the
	 * loop: requests then wait for a free slot. */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < slots)
		slots = rl.rlim_cur > 1 ? (unsigned)rl.rlim_cur : 1;
	u->free_slots = malloc(slots * sizeof(*u->free_slots));
	u->slot_file = calloc(slots, sizeof(*u->slot_file));
	u->slot_iov = calloc(slots, sizeof(*u->slot_iov));
	if (!u->free_slots || !u->slot_file || !u->slot_iov)
		return -ENOMEM;
	ret = io_uring_register_files_sparse(&u->ring, slots);
	loop->stats.syscalls++;
	if (ret < 0)
		return ret;
	/* Pop order 0, 1, 2...: the free list is a stack. */
	for (unsigned i = 0; i < slots; i++)
		u->free_slots[i] = (int32_t)(slots - 1 - i);
	u->nfree = slots;
	u->nslots = slots;
	u->direct = true;
	return 0;
}

/* The ring itself, with the knobs of flags; on ENOMEM a smaller one,
 * when the size was ours. */
static int init_ring(rl_loop *loop, struct rl__uring *u,
		     const struct rl_options *opt, unsigned flags,
		     struct io_uring_params *p)
{
	unsigned entries = opt->entries ? opt->entries : 256;
	int ret;

	for (;;) {
		memset(p, 0, sizeof(*p));
		p->flags = setup_flags(flags) | IORING_SETUP_CQSIZE |
			   IORING_SETUP_CLAMP;
		p->cq_entries =
			opt->cq_entries ? opt->cq_entries : 16 * entries;
		if (opt->flags & RL_SQPOLL)
			p->sq_thread_idle = opt->sqpoll_idle_ms
						    ? opt->sqpoll_idle_ms
						    : 1000;
		ret = io_uring_queue_init_params(entries, &u->ring, p);
		loop->stats.syscalls++;
		if (ret != -ENOMEM || opt->entries || entries <= ENOMEM_FLOOR)
			return ret;
		entries /= 2;
	}
}

static int uring_setup(rl_loop *loop, struct rl__uring *u,
		       const struct rl_options *opt)
{
	struct io_uring_params p;
	unsigned slots = opt->direct_slots ? opt->direct_slots : 1024;
	int ret;

	if (opt->entries && opt->entries < MIN_ENTRIES)
		return -EINVAL;
	if ((opt->flags & RL_SHARED_RING) && (opt->flags & DEFAULT_RING))
		return -EINVAL;
	if (!(opt->flags & RING_KNOBS)) {
		ret = init_ring(loop, u, opt, opt->flags | DEFAULT_RING, &p);
		if (ret == 0) {
			loop->opt.flags |= DEFAULT_RING;
		} else if (ret == -EINVAL) {
			/* A kernel without DEFER_TASKRUN: the plain ring. */
			ret = init_ring(loop, u, opt, opt->flags, &p);
			snprintf(loop->reason_buf, sizeof(loop->reason_buf),
				 "%s; plain ring (DEFER_TASKRUN: EINVAL)",
				 loop->backend_reason);
			loop->backend_reason = loop->reason_buf;
		}
	} else {
		ret = init_ring(loop, u, opt, opt->flags, &p);
	}
	if (ret < 0)
		return ret;
	loop->be = u;
	u->single_issuer = loop->opt.flags & RL_SINGLE_ISSUER;
	u->defer_taskrun = loop->opt.flags & RL_DEFER_TASKRUN;
	u->disabled = u->single_issuer;
	u->register_ring = opt->flags & RL_REGISTER_RING;
	u->started = !u->disabled && !u->register_ring;
	u->sqpoll = opt->flags & RL_SQPOLL;
	u->iopoll = opt->flags & RL_IOPOLL;
	u->submit_batch = opt->submit_batch;
	u->sqe_flags = (opt->flags & RL_FORCE_ASYNC) ? IOSQE_ASYNC : 0;
	if (p.sq_entries < MIN_ENTRIES || p.cq_entries <= CQ_SPARE + 3)
		return -EINVAL;
	u->cq_budget = p.cq_entries - CQ_SPARE;

	if (!(opt->flags & RL_NO_DIRECT)) {
		ret = init_slots(loop, u, slots);
		if (ret < 0)
			return ret;
	}
	u->link = u->direct && !(opt->flags & RL_NO_LINK);

	if (opt->iowq_max) {
		unsigned vals[2] = { opt->iowq_max, opt->iowq_max };

		ret = io_uring_register_iowq_max_workers(&u->ring, vals);
		loop->stats.syscalls++;
		if (ret < 0)
			return ret;
	}
	u->efd = eventfd(0, EFD_CLOEXEC);
	loop->stats.syscalls++;
	return u->efd < 0 ? -errno : 0;
}

static int uring_init(rl_loop *loop, const struct rl_options *opt)
{
	struct rl__uring *u = calloc(1, sizeof(*u));
	int ret;

	if (!u)
		return -ENOMEM;
	u->efd = -1;
	ret = uring_setup(loop, u, opt);
	if (ret < 0) {
		loop->opt.flags = opt->flags;
		/* Set up far enough to be the loop's: its destroy frees it. */
		if (loop->be == u)
			uring_destroy(loop);
		else
			free(u);
	}
	return ret;
}

/* ------------------------------------------------------------ submission */

/*
 * Before the ring's first enter, on the thread that makes it: enables a
 * ring set up disabled (that thread becomes its single issuer) and
 * registers the ring fd in that thread's table. Every path that enters
 * the ring comes through here first.
 */
static int ring_start(rl_loop *loop, struct rl__uring *u)
{
	int ret;

	if (u->started)
		return 0;
	if (u->disabled) {
		ret = io_uring_register(u->ring.ring_fd,
					IORING_REGISTER_ENABLE_RINGS, NULL, 0);
		loop->stats.syscalls++;
		if (ret < 0)
			return ret;
		u->disabled = false;
		u->issuer = pthread_self();
	}
	if (u->register_ring) {
		ret = io_uring_register_ring_fd(&u->ring);
		loop->stats.syscalls++;
		if (ret < 0)
			return ret;
		u->register_ring = false;
	}
	u->started = true;
	return 0;
}

/* Counts the io_uring_enter that liburing makes for a submit: always
 * without SQPOLL; with SQPOLL only when the poller sleeps. */
static void count_submit(rl_loop *loop, struct rl__uring *u, bool wait)
{
	u->poll_idle_ns = 0;
	if (wait || !u->sqpoll ||
	    (IO_URING_READ_ONCE(*u->ring.sq.kflags) & IORING_SQ_NEED_WAKEUP)) {
		loop->stats.syscalls++;
		loop->stats.enters++;
	}
}

/*
 * A wait that must not block: whether an enter could bring anything. On
 * a ring set up with IORING_SETUP_TASKRUN_FLAG (the default ring and
 * RL_COOP_TASKRUN), the kernel sets IORING_SQ_TASKRUN when it queues task
 * work for the ring, which on a DEFER_TASKRUN ring is how every completion
 * arrives (checked on 6.18: a pipe read completed by another thread's
 * write, an IORING_OP_MSG_RING from another ring); it sets
 * IORING_SQ_CQ_OVERFLOW when CQEs wait for room in the CQ. With neither
 * and no SQE to submit an enter returns empty. One exception: an enter
 * that ran its limit of task work (6.13+, its retry_llist) clears the
 * flag with items left, and a ring without the flag never sets it; so the
 * loop enters anyway once its non-blocking waits have found no reason to
 * for RL__URING_POLL_ENTER_NS, and a blocking wait runs everything first.
 * That time counts from the first such wait, so an enter costs no clock
 * read, and neither does a wait that finds work.
 */
static bool poll_needs_enter(rl_loop *loop, struct rl__uring *u)
{
	unsigned flags = IO_URING_READ_ONCE(*u->ring.sq.kflags);
	int64_t no_sleep = -1;

	return io_uring_sq_ready(&u->ring) ||
	       (flags & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW)) ||
	       rl__stuck_for(&u->poll_idle_ns, rl__now(loop),
			     RL__URING_POLL_ENTER_NS, &no_sleep);
}

/*
 * DEFER_TASKRUN: completions are posted only by the issuer's own enters,
 * and an enter with GETEVENTS runs a few of the ring's pending task work
 * items per pass (6.13+: IO_LOCAL_TW_DEFAULT_MAX, 20, at most two passes
 * when it does not sleep), so a burst of linked chains needs several
 * enters to post what is ready. Asking for more completions with a zero
 * timeout would run more per enter, but when fewer are ready the kernel
 * arms an hrtimer and goes through the scheduler before it returns -ETIME
 * (io_cqring_wait()), which is dear on a VM, where programming the timer
 * exits to the host; a disk's completions never reach such a batch. So
 * the loop asks for none (no timer, never a sleep) and enters again, at
 * most max_rounds times (the rest is run by the loop's next wait):
 *
 *  - busy 0: while the last enter still posted completions or the kernel
 *    says that task work waits (IORING_SQ_TASKRUN, set up with
 *    IORING_SETUP_TASKRUN_FLAG);
 *  - busy > 0: only while the kernel says task work waits and the last
 *    enter posted at least busy completions, i.e. ran about a full pass
 *    of the task work that was queued at once. Completions that trickle
 *    in from io-wq workers or a device set the flag too, one or two at a
 *    time; entering for each of them would cost a syscall per request.
 */
static int get_events_batch(rl_loop *loop, struct rl__uring *u,
			    unsigned max_rounds, unsigned busy)
{
	unsigned rounds = 0, before, posted;
	bool taskrun;
	int ret, submitted = 0;

	for (;;) {
		before = io_uring_cq_ready(&u->ring);
		count_submit(loop, u, true);
		ret = io_uring_submit_and_get_events(&u->ring);
		if (ret < 0)
			return submitted ? submitted : ret;
		submitted += ret;
		if (++rounds >= max_rounds)
			break;
		posted = io_uring_cq_ready(&u->ring) - before;
		taskrun = IO_URING_READ_ONCE(*u->ring.sq.kflags) &
			  IORING_SQ_TASKRUN;
		if (busy ? !(taskrun && posted >= busy) : !(posted || taskrun))
			break;
	}
	return submitted;
}

/*
 * Submits what is in the SQ. A refusal that passes (-EBUSY: completions
 * must be reaped first; -EAGAIN: no memory for now; -EINTR) leaves the
 * SQEs there for the next try. Anything else means the ring is unusable:
 * it is kept, and the next wait() returns it instead of sleeping on SQEs
 * that will never go.
 */
/*
 * Adaptive submission. A device that works on what it was given in step
 * (a virtio disk completes a whole queue depth at once) starts on the
 * next requests only once they are submitted, so submitting them at the
 * loop's next wait, after every callback of the batch has run, leaves it
 * idle meanwhile; fio submits each I/O as it comes. But requests that
 * complete inline in the enter (reads of cached files, sends into socket
 * buffers with room) gain nothing from going early and would pay one
 * enter per few requests. What the loop submits tells which case it is
 * in: an enter that submitted n >= LEARN_MIN SQEs and found fewer than
 * n / 2 of them completed when it returned counts towards "a device"
 * (async_score up), any other towards "inline" (down). Completions that
 * arrived meanwhile from earlier requests count as inline, so the error
 * is on the side of the old behaviour. With SQPOLL the enter does not
 * run the requests, and an explicit submit_batch overrides the guess:
 * neither learns.
 */
static bool learning(const struct rl__uring *u)
{
	return !u->submit_batch && !u->sqpoll;
}

static void learn(struct rl__uring *u, int submitted, unsigned cq_before)
{
	unsigned done = io_uring_cq_ready(&u->ring) - cq_before;

	if (!learning(u) || submitted < LEARN_MIN)
		return;
	if (2 * done < (unsigned)submitted) {
		if (u->async_score < ASYNC_MAX)
			u->async_score++;
	} else if (u->async_score) {
		u->async_score--;
	}
}

static int flush_sq(rl_loop *loop, struct rl__uring *u)
{
	unsigned cq_before = io_uring_cq_ready(&u->ring);
	int ret;

	if (!io_uring_sq_ready(&u->ring))
		return 0;
	ret = ring_start(loop, u);
	if (ret == 0 && u->defer_taskrun) {
		/* The task work of what goes (the next step of a linked
		 * chain) runs in the same enters, so that learn() sees what
		 * completes inline as it does on the plain ring, and so that
		 * a burst submitted one full SQ at a time does not pile up
		 * in the kernel: with one enter per flush (the kernel runs
		 * about 20 items of task work per pass), a burst of cached
		 * read_files kept up to every slot's chain (1,024) half
		 * done in the kernel until the loop's next wait, and the
		 * kernel's cost per read grows with that backlog (its lists
		 * walked, its requests and files cold in the cache; see
		 * docs/experiments.md). More enters only while they run
		 * full passes of task work: requests that completed inline
		 * (a small submit_batch of cached reads), went to a device
		 * or to io-wq leave none, or let it trickle in, and cost
		 * one enter as before. */
		ret = get_events_batch(loop, u, TW_ROUNDS, DEFER_BUSY);
	} else if (ret == 0) {
		count_submit(loop, u, false);
		ret = io_uring_submit(&u->ring);
	}
	if (ret > 0)
		learn(u, ret, cq_before);
	if (ret < 0 && ret != -EBUSY && ret != -EAGAIN && ret != -EINTR &&
	    !u->error)
		u->error = ret;
	return ret;
}

/* An SQE, submitting what is queued to make room if needed. NULL when
 * the SQ stays full (SQPOLL not there yet, or a passing refusal). */
static struct io_uring_sqe *get_sqe(rl_loop *loop, struct rl__uring *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	if (!sqe) {
		flush_sq(loop, u);
		sqe = io_uring_get_sqe(&u->ring);
	}
	return sqe;
}

/* The most recently freed slot: a lingering file in it is replaced by
 * the open that takes it. */
static int32_t take_slot(rl_loop *loop, struct rl__uring *u)
{
	int32_t slot = u->free_slots[--u->nfree];

	if (u->slot_file[slot]) {
		u->nlinger--;
		loop->backend_busy--;
	}
	return slot;
}

/*
 * Puts req's SQEs on the ring. Returns false, having changed nothing, when
 * the SQ, the CQ budget or the slot table has no room.
 */
/* What req's next step takes: SQEs, a slot, and the CQEs the loop will
 * be owed for it (none counted for a multishot request: see struct
 * rl__uring_need). */
static struct rl__uring_need need_of(struct rl__uring *u, rl_req *req,
				     unsigned *owed)
{
	struct rl__uring_need need = rl__op_is_net(req->op)
					     ? rl__uring_net_need(u, req)
					     : rl__uring_fs_need(u, req);

	*owed = need.multishot ? 0 : need.sqes;
	return need;
}

/* Whether owed more CQEs would pass the CQ budget now. */
static bool over_budget(const struct rl__uring *u, unsigned owed)
{
	return u->cq_owed + owed > u->cq_budget + u->cq_stretch;
}

static bool push(rl_loop *loop, struct rl__uring *u, rl_req *req)
{
	unsigned owed;
	struct rl__uring_need need = need_of(u, req, &owed);

	if (over_budget(u, owed))
		return false;
	if (need.slot && !u->nfree)
		return false;
	if (io_uring_sq_space_left(&u->ring) < need.sqes) {
		flush_sq(loop, u);
		if (io_uring_sq_space_left(&u->ring) < need.sqes)
			return false;
	}
	if (!req->buf && (rl__req(req)->state & RL__REQ_LOAN)) {
		/* Its chain goes to the kernel now: the buffer is taken
		 * now (loan.c). Without one it ends here, pushed. */
		int ret = rl__loan_take(loop, req);

		if (ret < 0) {
			rl__uring_complete(loop, u, req, ret);
			return true;
		}
	}
	if (need.slot)
		rl__ur(req)->slot = take_slot(loop, u);
	u->cq_owed += owed;
	u->cq_stuck_ns = 0;
	u->pushed_since_cancel_all = true;
	if (rl__op_is_net(req->op))
		rl__uring_net_prep(loop, u, req);
	else
		rl__uring_fs_prep(u, req);
	return true;
}

/* Nothing overtakes a request already waiting on q, so each queue stays
 * in FIFO order. */
void rl__uring_push_or_queue(rl_loop *loop, struct rl__uring *u, rl_req *req,
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
static bool push_queue(rl_loop *loop, struct rl__uring *u, struct rl__fifo *q)
{
	rl_req *req;

	while ((req = rl__fifo_pop(q))) {
		/* Off q before push(): a lent read that cannot get its buffer
		 * completes inside push(), and rl__complete() links it into
		 * the ready queue through the word that links q, which would
		 * cut off every request queued behind it. */
		if (!push(loop, u, req)) {
			rl__fifo_push_head(q, req);
			return false;
		}
		rl__req(req)->state &= ~(uint32_t)RL__REQ_QUEUED;
	}
	return true;
}

static void uring_submit(rl_loop *loop, rl_req *req)
{
	struct rl__uring *u = rl__u(loop);

	if (rl__op_is_net(req->op)) {
		rl__uring_net_submit(loop, u, req);
		return;
	}
	rl__uring_fs_start(u, req);
	rl__uring_push_or_queue(loop, u, req, &u->pending);
	/* Early submission: always with an explicit submit_batch, else once
	 * the loop has learnt that its requests go to a device (learn()). */
	if (u->submit_batch) {
		if (io_uring_sq_ready(&u->ring) >= u->submit_batch)
			flush_sq(loop, u);
	} else if (u->async_score >= ASYNC_EAGER &&
		   io_uring_sq_ready(&u->ring) >= EAGER_BATCH) {
		flush_sq(loop, u);
	}
}

static bool push_cancels(rl_loop *loop, struct rl__uring *u);
static void recancel(rl_loop *loop, struct rl__uring *u);

/* What frees room first: cancels, then the steps of requests holding a
 * slot, then new requests. */
static __attribute__((noinline)) void push_waiting(rl_loop *loop,
						   struct rl__uring *u)
{
	if (u->recancel_due)
		recancel(loop, u);
	if (push_cancels(loop, u) && push_queue(loop, u, &u->cont))
		push_queue(loop, u, &u->pending);
}

/* Called twice per wait, and nearly always with nothing to push: one look
 * at the four sources, inline, before any call. */
static inline void push_pending(rl_loop *loop, struct rl__uring *u)
{
	if (u->ncancels || u->cancel_any || u->recancel_due ||
	    !rl__fifo_empty(&u->cont) || !rl__fifo_empty(&u->pending))
		push_waiting(loop, u);
}

/* ----------------------------------------------------------- completion */

/* Puts slot back on the free list; one that holds a file lingers. */
static void free_slot(rl_loop *loop, struct rl__uring *u, int32_t slot)
{
	u->free_slots[u->nfree++] = slot;
	u->slots_stuck_ns = 0;
	if (u->slot_file[slot]) {
		if (!u->nlinger++)
			u->linger_since = 0;
		loop->backend_busy++;
	}
}

void rl__uring_release_slot(rl_loop *loop, struct rl__uring *u, rl_req *req)
{
	struct rl__uring_req *ur = rl__ur(req);

	if (u->direct && ur->slot >= 0) {
		free_slot(loop, u, ur->slot);
		ur->slot = -1;
	}
}

void rl__uring_release_closed_slot(rl_loop *loop, struct rl__uring *u,
				   rl_req *req)
{
	if (u->direct && rl__ur(req)->slot >= 0)
		u->slot_file[rl__ur(req)->slot] = 0;
	rl__uring_release_slot(loop, u, req);
}

void rl__uring_linger_slot(rl_loop *loop, struct rl__uring *u, rl_req *req)
{
	u->slot_file[rl__ur(req)->slot] = 1;
	rl__uring_release_slot(loop, u, req);
}

/* Closes the files lingering in free slots; each slot leaves the free
 * list until its close's CQE, so no open can take it before the close has
 * run. A file left open here stays open while the loop sleeps or after
 * rl_run() has returned (uring_leave()), so nothing holds a close back: a
 * full SQ is submitted to make room (more files may linger than the SQ
 * has entries), and the CQ budget is not asked (requests waiting for ever
 * may hold all of it, see unstick_cq()): a close's CQE that finds the CQ
 * full waits in the kernel's overflow list, one per slot at most. */
static void close_lingering(rl_loop *loop, struct rl__uring *u)
{
	unsigned i, n = 0;

	for (i = 0; i < u->nfree; i++) {
		int32_t slot = u->free_slots[i];
		struct io_uring_sqe *sqe = NULL;

		if (u->slot_file[slot])
			sqe = get_sqe(loop, u);
		if (!sqe) {
			u->free_slots[n++] = slot;
			continue;
		}
		io_uring_prep_close_direct(sqe, (unsigned)slot);
		io_uring_sqe_set_data64(sqe,
					(uint64_t)slot << 3 | RL__TAG_SLOT);
		u->cq_owed++;
		u->nlinger--;
		u->nslot_closes++;
	}
	u->nfree = n;
}

/*
 * Lingering files must not stay open while the loop sleeps for long: they
 * are closed when the loop is about to sleep with no slot in use (no file
 * work in flight), or once they have lingered LINGER_NS; before that, a
 * sleep lasts no longer than that. A burst's slots are taken again by its
 * next requests in the meantime, without any close.
 */
static int64_t flush_lingering(rl_loop *loop, struct rl__uring *u,
			       int64_t timeout_ns)
{
	bool idle;

	if (!u->nlinger)
		return timeout_ns;
	idle = u->nfree + u->nslot_closes == u->nslots;
	if (u->closing || (idle && timeout_ns != 0) ||
	    rl__stuck_for(&u->linger_since, rl__now(loop), LINGER_NS,
			  &timeout_ns))
		close_lingering(loop, u);
	return timeout_ns;
}

/* Whether req waits for a slot: a read_file or write_file before its open. */
static bool wants_slot(struct rl__uring *u, rl_req *req)
{
	return !rl__op_is_net(req->op) && rl__uring_fs_need(u, req).slot;
}

/*
 * A read_file holds its slot until its file is read to the end, and a
 * read of a FIFO with no writer never ends: enough of them hold every
 * slot for good, and every read_file and write_file queued behind them
 * (and whatever is queued behind those) would wait with them. A burst
 * frees slots every few microseconds; so when none has come free for
 * SLOT_STUCK_NS while requests wait for one, the waiting read_files and
 * write_files run on plain fds instead, as with RL_NO_DIRECT (one SQE per
 * step, an fd each; out of fds they wait for one as those do). Until
 * then, a sleep lasts no longer than that.
 */
static int64_t unstick_slots(rl_loop *loop, struct rl__uring *u,
			     int64_t timeout_ns)
{
	rl_req *req;

	if (u->nfree || u->closing || !u->pending.head ||
	    !wants_slot(u, u->pending.head)) {
		u->slots_stuck_ns = 0;
		return timeout_ns;
	}
	if (!rl__stuck_for(&u->slots_stuck_ns, rl__now(loop), SLOT_STUCK_NS,
			   &timeout_ns))
		return timeout_ns;
	u->slots_stuck_ns = 0;
	for (req = u->pending.head; req; req = rl__req(req)->next) {
		if (wants_slot(u, req))
			rl__uring_fs_unslot(req);
	}
	push_pending(loop, u);
	return timeout_ns;
}

/*
 * Requests out of fds wait for one the loop's own read_files and
 * write_files give back (uring_fs.c). When none has come back for
 * RL__FD_STUCK_NS (every fd held by FIFO reads that wait for a writer,
 * say), they fail with -EMFILE, what their open said. Until then, a
 * sleep lasts no longer than that.
 */
static int64_t unstick_fds(rl_loop *loop, struct rl__uring *u,
			   int64_t timeout_ns)
{
	rl_req *req;

	if (u->closing || rl__fifo_empty(&u->fd_wait)) {
		u->fds_stuck_ns = 0;
		return timeout_ns;
	}
	if (!rl__stuck_for(&u->fds_stuck_ns, rl__now(loop), RL__FD_STUCK_NS,
			   &timeout_ns))
		return timeout_ns;
	u->fds_stuck_ns = 0;
	while ((req = rl__fifo_pop(&u->fd_wait))) {
		rl__req(req)->state &= ~(uint32_t)RL__REQ_QUEUED;
		rl__uring_release_slot(loop, u, req);
		rl__uring_complete(loop, u, req, -EMFILE);
	}
	return 0;
}

/*
 * The CQ budget keeps what the loop may be owed within the CQ, but a
 * request that waits for an event that may never come (a read of a pipe
 * or a socket nobody writes to, a FIFO's open) holds its share of it as
 * long as it waits. Enough of them hold all of it, and every request
 * after them would wait with them, for ever: a server with as many idle
 * connections as the budget (4088 CQEs on the default ring) would stop
 * serving. So when the budget stays full for CQ_STUCK_NS, nothing pushed
 * and nothing reaped, while requests wait for it, what is in flight
 * then stops counting against it: the budget stretches by what is owed.
 * Should those requests complete together later, with the CQ full of
 * others, the CQEs that do not fit
 * wait in the kernel's overflow list (IORING_FEAT_NODROP, 5.5): none is
 * lost. The stretch shrinks back as what is owed falls (reap()). Until
 * then, a sleep lasts no longer than that.
 */
static int64_t unstick_cq(rl_loop *loop, struct rl__uring *u,
			  int64_t timeout_ns)
{
	rl_req *head = u->cont.head ? u->cont.head : u->pending.head;
	unsigned owed;

	if (u->closing || !head) {
		u->cq_stuck_ns = 0;
		return timeout_ns;
	}
	need_of(u, head, &owed);
	if (!over_budget(u, owed)) {
		u->cq_stuck_ns = 0;
		return timeout_ns;
	}
	if (!rl__stuck_for(&u->cq_stuck_ns, rl__now(loop), CQ_STUCK_NS,
			   &timeout_ns))
		return timeout_ns;
	u->cq_stretch = u->cq_owed;
	u->cq_stuck_ns = 0;
	push_pending(loop, u);
	/* What still waits (more idle reads) bounds the sleep again. */
	return unstick_cq(loop, u, timeout_ns);
}

/* Drops the cancels still queued for req: its next life must not meet
 * them. Queued cancels are rare (a full SQ), so this is usually one
 * test. */
static void forget_cancels(struct rl__uring *u, rl_req *req)
{
	uintptr_t base = (uintptr_t)req;
	unsigned i, n = 0;

	for (i = 0; i < u->ncancels; i++)
		if ((u->cancels[i] & ~(uint64_t)RL__TAG_MASK) != base)
			u->cancels[n++] = u->cancels[i];
	u->ncancels = n;
}

void rl__uring_recancel_list(struct rl__uring *u, rl_req *req, unsigned tag)
{
	struct rl__uring_req *ur = rl__ur(req);

	ur->cancel_tags |= (uint8_t)(1u << tag);
	if (ur->recancel_listed)
		return;
	if (u->nrecancel == u->recancel_cap) {
		unsigned cap = u->recancel_cap ? 2 * u->recancel_cap : 16;
		rl_req **grown = realloc(u->recancel, cap * sizeof(*grown));

		if (!grown)
			return;
		u->recancel = grown;
		u->recancel_cap = cap;
	}
	u->recancel[u->nrecancel++] = req;
	ur->recancel_listed = true;
}

/* Sends the cancels of every listed request again, once per batch of
 * -ENOENT answers: those that wait in user space (QUEUED) or are done are
 * left alone, and each leaves the list when it completes. */
static void recancel(rl_loop *loop, struct rl__uring *u)
{
	u->recancel_due = false;
	for (unsigned i = 0; i < u->nrecancel; i++) {
		rl_req *req = u->recancel[i];
		uint32_t state = rl__req(req)->state;

		if (!(state & RL__REQ_CANCEL) ||
		    (state & (RL__REQ_DONE | RL__REQ_QUEUED)))
			continue;
		for (unsigned tag = 0; tag <= RL__TAG_MASK; tag++)
			if (rl__ur(req)->cancel_tags & (1u << tag))
				rl__uring_cancel_sqe(loop, u,
						     rl__udata(req, tag));
	}
}

static void unlist_recancel(struct rl__uring *u, rl_req *req)
{
	for (unsigned i = 0; i < u->nrecancel; i++)
		if (u->recancel[i] == req) {
			u->recancel[i] = u->recancel[--u->nrecancel];
			break;
		}
	rl__ur(req)->recancel_listed = false;
}

void rl__uring_complete(rl_loop *loop, struct rl__uring *u, rl_req *req,
			int64_t res)
{
	if (u->ncancels)
		forget_cancels(u, req);
	/* Only read_files and write_files are listed; a socket request's
	 * backend words are another struct (uring_net.c). */
	if (u->nrecancel &&
	    (req->op == RL_OP_READ_FILE || req->op == RL_OP_WRITE_FILE) &&
	    rl__ur(req)->recancel_listed)
		unlist_recancel(u, req);
	rl__complete(loop, req, res);
}

static void handle_cqe(rl_loop *loop, struct rl__uring *u, uint64_t ud,
		       int32_t res, uint32_t flags)
{
	unsigned tag = ud & RL__TAG_MASK;
	rl_req *req = (rl_req *)(uintptr_t)(ud & ~(uint64_t)RL__TAG_MASK);

	if (tag == RL__TAG_WAKE) {
		u->wake_armed = false;
		if (res >= 0)
			loop->stats.wakeups++;
		return;
	}
	if (tag == RL__TAG_CANCEL) {
		/* A cross-loop wake-up that failed (uring_msg.c). */
		if (req)
			rl__msg_ring_failed((rl_loop *)(void *)req);
		else if (res == -ENOENT && u->nrecancel)
			u->recancel_due = true;
		return;
	}
	/* Kernel-internal restart codes (ERESTARTSYS 512 ... 516) never
	 * belong in user space, but on 6.18 an openat that io-wq ran and
	 * a cancel interrupted (a FIFO's open waiting for a peer) completes
	 * with -ERESTARTSYS: it is an interrupted call, -EINTR. */
	if (res <= -512 && res >= -516)
		res = -EINTR;
	if (tag == RL__TAG_SLOT) {
		/* A lingering file is closed: its slot is free again. */
		u->cq_owed--;
		u->nslot_closes--;
		u->slot_file[ud >> 3] = 0;
		u->free_slots[u->nfree++] = (int32_t)(ud >> 3);
		loop->backend_busy--;
		return;
	}
	if (rl__op_is_net(req->op))
		rl__uring_net_cqe(loop, u, req, tag, res, flags);
	else
		rl__uring_fs_cqe(loop, u, req, tag, res);
}

/* Takes the CQEs that are there. io_uring_peek_batch_cqe() is not used:
 * on a ring set up with IORING_SETUP_TASKRUN_FLAG it enters the kernel
 * itself when the CQ is empty and task work waits, a syscall the loop's
 * counters (and the bench's syscalls per op) would not see; the loop's
 * waits run the task work instead. */
static int reap(rl_loop *loop, struct rl__uring *u)
{
	struct io_uring_cqe *cqe;
	unsigned head, n;
	int total = 0;

	do {
		n = 0;
		io_uring_for_each_cqe(&u->ring, head, cqe)
		{
			handle_cqe(loop, u, cqe->user_data, cqe->res,
				   cqe->flags);
			if (++n == BATCH)
				break;
		}
		io_uring_cq_advance(&u->ring, n);
		total += (int)n;
	} while (n == BATCH);
	/* A closing loop that makes progress needs no new cancel pass. */
	if (u->closing && total)
		u->cancel_all_ns = rl__clock_ns();
	if (total) {
		u->cq_stuck_ns = 0;
		/* The stretch covers only what is still owed (unstick_cq()). */
		if (u->cq_stretch > u->cq_owed)
			u->cq_stretch = u->cq_owed;
	}
	return total;
}

/*
 * Arms the eventfd read that lets rl_post() wake a sleeping loop. It must
 * never be lost to a full SQ: the SQ is flushed to make room, and with
 * SQPOLL (whose poller empties the SQ when it gets to it) the loop waits
 * for room. Returns false only when the SQ stays full anyway (a passing
 * refusal of the submit): the caller then sleeps no longer than
 * WAKE_RETRY_NS, and the next iteration sees the posts.
 */
static bool arm_wake(rl_loop *loop, struct rl__uring *u)
{
	struct io_uring_sqe *sqe;

	if (u->wake_armed || u->closing)
		return true;
	sqe = get_sqe(loop, u);
	if (!sqe && u->sqpoll) {
		loop->stats.syscalls++;
		loop->stats.enters++;
		io_uring_sqring_wait(&u->ring);
		sqe = io_uring_get_sqe(&u->ring);
	}
	if (!sqe)
		return false;
	io_uring_prep_read(sqe, u->efd, &u->wake_buf, sizeof(u->wake_buf), 0);
	io_uring_sqe_set_data64(sqe, RL__TAG_WAKE);
	u->wake_armed = true;
	return true;
}

static int uring_wait(rl_loop *loop, int64_t timeout_ns)
{
	struct rl__uring *u = rl__u(loop);
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts;
	bool entered = false;
	int ret;

	ret = ring_start(loop, u);
	if (ret < 0)
		return ret;
	push_pending(loop, u);
	if (!io_uring_cq_ready(&u->ring))
		timeout_ns = flush_lingering(loop, u, timeout_ns);
	timeout_ns = unstick_slots(loop, u, timeout_ns);
	timeout_ns = unstick_cq(loop, u, timeout_ns);
	timeout_ns = unstick_fds(loop, u, timeout_ns);
	if ((u->ncancels || u->cancel_any) && timeout_ns != 0) {
		/* Cancels that still found no room may be all that can end
		 * what fills the SQ (reads of pipes nobody writes to): never
		 * sleep on them. With SQPOLL, wait for the poller to make
		 * room; else look again soon. */
		if (u->sqpoll) {
			flush_sq(loop, u);
			loop->stats.syscalls++;
			loop->stats.enters++;
			io_uring_sqring_wait(&u->ring);
			push_pending(loop, u);
		}
		if ((u->ncancels || u->cancel_any) &&
		    (timeout_ns < 0 || timeout_ns > WAKE_RETRY_NS))
			timeout_ns = WAKE_RETRY_NS;
	}
	if (u->error) {
		ret = u->error;
		u->error = 0;
		return ret;
	}
	/* IOPOLL: polled I/O completes only when an enter polls for it, and
	 * the kernel fails the wake-up read (an eventfd cannot be polled) at
	 * once on such a ring, which would end every wait before it polled.
	 * So the loop never sleeps in the kernel there: each wait is one
	 * enter that submits and polls, and rl_run() comes round again. */
	/* About to sleep with a batch to submit: submit it on its own first,
	 * so that learn() sees whether it completes inline. If it did, the
	 * wait below takes those completions without sleeping and without a
	 * second enter; if not, the sleep costs one more enter, once per
	 * batch of requests that go to a device. */
	if (!u->iopoll && timeout_ns != 0 && learning(u) &&
	    !io_uring_cq_ready(&u->ring) &&
	    io_uring_sq_ready(&u->ring) >= LEARN_MIN) {
		flush_sq(loop, u);
		entered = true;
	}
	/* DEFER_TASKRUN: the last wait reaped a batch, so more task work is
	 * likely pending; it runs (get_events_batch()) before the loop
	 * decides to sleep. */
	if (u->defer_taskrun && u->last_reaped >= DEFER_BUSY && !entered &&
	    timeout_ns != 0 && !io_uring_cq_ready(&u->ring)) {
		ret = get_events_batch(loop, u, TW_ROUNDS, 0);
		if (ret < 0 && ret != -EBUSY && ret != -EINTR && ret != -EAGAIN)
			return ret;
		entered = true;
	}
	if (u->iopoll) {
		count_submit(loop, u, true);
		ret = io_uring_submit_and_get_events(&u->ring);
		if (ret < 0 && ret != -EBUSY && ret != -EINTR)
			return ret;
	} else if (io_uring_cq_ready(&u->ring) || timeout_ns == 0) {
		/* Completions are there already, or the caller must not
		 * block: submit what is queued and take what is ready. With
		 * DEFER_TASKRUN, completions only appear from an enter, so
		 * one is made whenever there are some to take. */
		if (u->defer_taskrun) {
			if ((!entered || io_uring_sq_ready(&u->ring)) &&
			    (timeout_ns != 0 || poll_needs_enter(loop, u)))
				ret = get_events_batch(loop, u, TW_ROUNDS, 0);
			if (ret < 0 && ret != -EBUSY && ret != -EINTR &&
			    ret != -EAGAIN)
				return ret;
		} else if (poll_needs_enter(loop, u)) {
			count_submit(loop, u, true);
			ret = io_uring_submit_and_get_events(&u->ring);
			if (ret < 0 && ret != -EBUSY && ret != -EINTR &&
			    ret != -EAGAIN)
				return ret;
		}
	} else {
		if (!arm_wake(loop, u) &&
		    (timeout_ns < 0 || timeout_ns > WAKE_RETRY_NS))
			timeout_ns = WAKE_RETRY_NS;
		count_submit(loop, u, true);
		if (timeout_ns > 0) {
			ts.tv_sec = timeout_ns / 1000000000;
			ts.tv_nsec = timeout_ns % 1000000000;
		}
		ret = io_uring_submit_and_wait_timeout(
			&u->ring, &cqe, 1, timeout_ns > 0 ? &ts : NULL, NULL);
		if (ret < 0 && ret != -ETIME && ret != -EINTR &&
		    ret != -EBUSY && ret != -EAGAIN)
			return ret;
	}
	ret = reap(loop, u);
	u->last_reaped = (unsigned)ret;
	/* Budget freed by what was reaped lets waiting requests go now, in
	 * this iteration's submit, instead of one enter later. */
	push_pending(loop, u);
	return ret;
}

/* ------------------------------------------------------------ cancelling */

static bool prep_cancel(rl_loop *loop, struct rl__uring *u, uint64_t target,
			unsigned flags)
{
	struct io_uring_sqe *sqe = get_sqe(loop, u);

	if (!sqe)
		return false;
	io_uring_prep_cancel64(sqe, target, flags);
	io_uring_sqe_set_data64(sqe, RL__TAG_CANCEL);
	return true;
}

/* A cancel that finds the SQ full waits in a queue of its own (the only
 * allocation off the hot path: cancels under a full SQ are rare), ahead
 * of everything else at the next submit. */
void rl__uring_cancel_sqe(rl_loop *loop, struct rl__uring *u, uint64_t target)
{
	uint64_t *grown;

	if (!u->ncancels && prep_cancel(loop, u, target, 0))
		return;
	if (u->ncancels == u->cancels_cap) {
		unsigned cap = u->cancels_cap ? 2 * u->cancels_cap : 16;

		grown = realloc(u->cancels, cap * sizeof(*grown));
		if (!grown) {
			/* No memory: wait for room instead, unless the ring
			 * refuses for good (the next wait says so). */
			while (!prep_cancel(loop, u, target, 0) && !u->error) {
				int ret = ring_start(loop, u);

				loop->stats.syscalls++;
				loop->stats.enters++;
				if (ret == 0)
					ret = io_uring_get_events(&u->ring);
				if (ret < 0 && ret != -EINTR && ret != -EBUSY &&
				    ret != -EAGAIN)
					u->error = ret;
				else if (u->sqpoll)
					io_uring_sqring_wait(&u->ring);
			}
			return;
		}
		u->cancels = grown;
		u->cancels_cap = cap;
	}
	u->cancels[u->ncancels++] = target;
}

static bool push_cancels(rl_loop *loop, struct rl__uring *u)
{
	unsigned i = 0;

	if (u->cancel_any) {
		if (!prep_cancel(loop, u, 0,
				 IORING_ASYNC_CANCEL_ANY |
					 IORING_ASYNC_CANCEL_ALL))
			return false;
		u->cancel_any = false;
	}
	while (i < u->ncancels && prep_cancel(loop, u, u->cancels[i], 0))
		i++;
	if (i) {
		memmove(u->cancels, u->cancels + i,
			(u->ncancels - i) * sizeof(*u->cancels));
		u->ncancels -= i;
	}
	return !u->ncancels;
}

/* Closing: what never reached the kernel finishes now; what did is asked
 * to stop. Chains are short and finish by themselves, and their CQEs are
 * handled whatever they say. Continuations hold an open file: they run to
 * their close, which reports -ECANCELED as their steps see closing. */
static void cancel_all(rl_loop *loop, struct rl__uring *u)
{
	rl_req *req;

	u->closing = true;
	close_lingering(loop, u);
	rl__uring_fs_closing(u);
	rl__uring_net_closing(loop, u);
	while ((req = rl__fifo_pop(&u->pending))) {
		rl__req(req)->state &= ~(uint32_t)RL__REQ_QUEUED;
		rl__uring_release_slot(loop, u, req);
		rl__uring_complete(loop, u, req, -ECANCELED);
	}
	/* ALL (5.19): every request, not just the first found; a stream
	 * would otherwise wait for its own pass. rl_loop_close() calls this
	 * until everything has called back: it is sent again when requests
	 * went to the kernel since, or when nothing completed for
	 * CANCEL_ALL_AGAIN_NS (for one that slipped past, a FIFO's open an
	 * io-wq worker was about to start), not at each call: a pass costs
	 * time in proportion to what is in flight, and with DEFER_TASKRUN
	 * the cancelled requests complete over many enters. */
	if (u->pushed_since_cancel_all ||
	    rl__clock_ns() - u->cancel_all_ns >= CANCEL_ALL_AGAIN_NS) {
		if (!prep_cancel(loop, u, 0,
				 IORING_ASYNC_CANCEL_ANY |
					 IORING_ASYNC_CANCEL_ALL))
			u->cancel_any = true;
		u->pushed_since_cancel_all = false;
		flush_sq(loop, u);
		u->cancel_all_ns = rl__clock_ns();
		return;
	}
	flush_sq(loop, u);
}

static void uring_cancel(rl_loop *loop, rl_req *req)
{
	struct rl__uring *u = rl__u(loop);

	if (!req) {
		cancel_all(loop, u);
		return;
	}
	if (rl__op_is_net(req->op)) {
		rl__uring_net_cancel(loop, u, req);
		return;
	}
	if ((rl__req(req)->state & RL__REQ_QUEUED) &&
	    rl__fifo_remove(&u->pending, req)) {
		rl__req(req)->state &= ~(uint32_t)RL__REQ_QUEUED;
		rl__uring_release_slot(loop, u, req);
		rl__uring_complete(loop, u, req, -ECANCELED);
		return;
	}
	rl__uring_fs_cancel(loop, u, req);
}

/* The wake-ups of other loops queued as MSG_RING SQEs (uring_msg.c), and
 * whatever waits with them; nothing when the last wait took them. An
 * error is kept for the next wait to report, as flush_sq() does. */
static void uring_flush(rl_loop *loop)
{
	flush_sq(loop, rl__u(loop));
}

void rl__uring_settle(rl_loop *loop, struct rl__uring *u, uint32_t sq_end)
{
	/* flush_sq() starts the ring if it waits for its first enter, and
	 * on the default ring runs a first pass of task work. */
	if ((int32_t)(sq_end - IO_URING_READ_ONCE(*u->ring.sq.khead)) > 0 &&
	    flush_sq(loop, u) < 0)
		return;
	/* The plain ring runs task work as the enter returns. */
	for (unsigned i = 0; u->defer_taskrun && i < SETTLE_ROUNDS; i++) {
		if (!(IO_URING_READ_ONCE(*u->ring.sq.kflags) &
		      IORING_SQ_TASKRUN) ||
		    get_events_batch(loop, u, 1, 0) < 0)
			return;
	}
}

/*
 * rl_run() returns. Files still lingering in slots with no slot in use
 * would stay open until the caller runs the loop again, which may be
 * never, or much later than LINGER_NS: a FIFO's reader that stays open
 * takes a new writer's data, which nobody will read. flush_lingering()
 * closes them when the loop is about to sleep with no slot in use; a
 * return from rl_run() (RL_RUN_ONCE, RL_RUN_NOWAIT, rl_stop()) is such a
 * sleep as far as the files can tell, so they are closed now, and the
 * closes go to the kernel at once. A burst in flight (a slot in use)
 * keeps them for its next opens, as at a wait.
 */
static void uring_leave(rl_loop *loop)
{
	struct rl__uring *u = rl__u(loop);

	if (!u->nlinger || u->nfree + u->nslot_closes != u->nslots)
		return;
	close_lingering(loop, u);
	flush_sq(loop, u);
}

static void uring_wake(rl_loop *loop)
{
	struct rl__uring *u = rl__u(loop);
	uint64_t one = 1;

	/* Another thread's syscall: not counted in the loop's stats. */
	if (write(u->efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, the loop wakes anyway. */
	}
}

/*
 * rl_loop_close() on another thread than the ring's issuer could neither
 * cancel nor reap what is in flight: it is refused before anything is
 * closed. The kernel is asked, with a register call that changes nothing
 * (the io-wq cap read back), which it refuses with -EEXIST to any task
 * but the issuer: a thread id reused after the issuer's never passes.
 */
static int uring_check_thread(rl_loop *loop)
{
	struct rl__uring *u = rl__u(loop);
	unsigned vals[2] = { 0, 0 };
	int ret;

	if (!u->single_issuer || u->disabled)
		return 0;
	ret = io_uring_register_iowq_max_workers(&u->ring, vals);
	loop->stats.syscalls++;
	return ret == -EEXIST ? ret : 0;
}

/*
 * rl_run() on another thread than the ring's issuer fails with -EEXIST
 * (ringloop.h), and must do so before it runs a callback there, which an
 * enter's refusal would only tell after the first batch. The issuer is
 * known from ring_start(); only a thread that is not it asks the kernel,
 * which has the last word. (A thread that got the pthread_t of an issuer
 * that exited passes here, and its first enter then fails.)
 */
static int uring_check_run(rl_loop *loop)
{
	struct rl__uring *u = rl__u(loop);
	int ret;

	if (!u->single_issuer || u->disabled ||
	    pthread_equal(u->issuer, pthread_self()))
		return 0;
	ret = uring_check_thread(loop);
	if (ret == 0)
		u->issuer = pthread_self();
	return ret;
}

static void uring_destroy(rl_loop *loop)
{
	struct rl__uring *u = rl__u(loop);

	if (!u)
		return;
	/* The eventfd read must not outlive the buffer it reads into. It was
	 * armed by an enter, so the ring is started. An enter refused for
	 * good (-EEXIST: the ring's issuer is another thread, which
	 * rl_loop_close() refuses before it gets here) leaves it to the
	 * ring's teardown, which cancels it. */
	if (u->wake_armed) {
		uint64_t one = 1;

		if (write(u->efd, &one, sizeof(one)) == sizeof(one)) {
			while (u->wake_armed) {
				struct io_uring_cqe *cqe;
				int ret = io_uring_submit_and_wait(&u->ring, 1);

				if (ret < 0 && ret != -EINTR &&
				    ret != -EAGAIN && ret != -EBUSY)
					break;
				while (io_uring_peek_cqe(&u->ring, &cqe) == 0) {
					if ((cqe->user_data & RL__TAG_MASK) ==
					    RL__TAG_WAKE)
						u->wake_armed = false;
					io_uring_cqe_seen(&u->ring, cqe);
				}
			}
		}
	}
	io_uring_queue_exit(&u->ring);
	rl__uring_net_destroy(u);
	if (u->efd >= 0)
		close(u->efd);
	free(u->free_slots);
	free(u->slot_file);
	free(u->slot_iov);
	free(u->cancels);
	free(u->recancel);
	free(u);
	loop->be = NULL;
}

const char *rl_loop_ring(const rl_loop *loop)
{
	unsigned f = loop->opt.flags;

	if (loop->backend != &rl__backend_uring)
		return "none";
	return (f & RL_DEFER_TASKRUN)	? "defer-taskrun"
	       : (f & RL_SINGLE_ISSUER) ? "single-issuer"
	       : (f & RL_SQPOLL)	? "sqpoll"
	       : (f & RL_IOPOLL)	? "iopoll"
	       : (f & RL_COOP_TASKRUN)	? "coop-taskrun"
					: "shared";
}

const struct rl__backend rl__backend_uring = {
	.name = "uring",
	.late_loan = true,
	.init = uring_init,
	.destroy = uring_destroy,
	.check_thread = uring_check_thread,
	.check_run = uring_check_run,
	.submit = uring_submit,
	.cancel = uring_cancel,
	.wait = uring_wait,
	.wake = uring_wake,
	.flush = uring_flush,
	.leave = uring_leave,
	.register_buffers = rl__uring_register_buffers,
	.net_setup = rl__uring_net_setup,
	.net_bufs_back = rl__uring_net_bufs_back,
	.ring = rl__uring_ring,
};
