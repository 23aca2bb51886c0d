/* SPDX-License-Identifier: MIT */
/*
 * ringloop.h - the one public header of the ringloop event loop.
 *
 * The loop is completion-based, like io_uring itself. The caller owns every
 * request (struct rl_req) and timer (struct rl_timer): it keeps the struct
 * alive from the submitting call until its callback has run. The contract,
 * identical on every backend:
 *
 *   - A submitting call returns 0, and then the callback runs exactly once,
 *     on the loop thread, from rl_run() or rl_loop_close(), never inside the
 *     submitting call. req->result is >= 0 on success or -errno.
 *   - A submitting call that fails returns -errno, and the callback never
 *     runs. errno is never used as a channel.
 *   - rl_cancel() on a request in flight makes its callback run with
 *     -ECANCELED, unless the request did its work before the cancel could
 *     stop it and undoing it is impossible (a read or receive that took
 *     bytes from a pipe or socket, a close: see rl_fs_read() and
 *     rl_fs_close());
 *     rl_loop_close() cancels everything still in flight and runs every
 *     pending callback before it frees the loop.
 *   - Stream requests (rl_net_accept(), rl_net_recv_stream()) are the one
 *     exception to "exactly once": one submission, then one callback per
 *     item with rl_req_more(req) true, then exactly one final callback
 *     with rl_req_more(req) false. See "Sockets" below.
 *
 * Everything here must be called on the loop thread, except rl_post(),
 * which any thread may call. A loop is run and used by one thread: the
 * first that makes it enter the kernel (rl_run(), or a submission that
 * goes to the kernel at once: a full io_uring SQ, submit_batch),
 * whichever thread opened it. On io_uring the default ring belongs to
 * that thread for good (SINGLE_ISSUER, see RL_SHARED_RING): rl_run() on
 * another thread fails with -EEXIST, and so does rl_loop_close(), which
 * must be called on the loop's thread.
 */
#ifndef RINGLOOP_H
#define RINGLOOP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Only what these headers declare is exported from the shared library. */
#pragma GCC visibility push(default)

/* ---------------------------------------------------------------- version */

#define RL_VERSION_MAJOR 0
#define RL_VERSION_MINOR 2
#define RL_VERSION_PATCH 0
/* 0xMMmmpp, as rl_version() returns it. */
#define RL_VERSION_HEX \
	((RL_VERSION_MAJOR << 16) | (RL_VERSION_MINOR << 8) | RL_VERSION_PATCH)

typedef struct rl_loop rl_loop;
typedef struct rl_req rl_req;
typedef struct rl_timer rl_timer;
typedef struct rl_task rl_task;

/* A link in one of the loop's intrusive lists, inside the structs the
 * caller owns (tasks, timers, close hooks): private to the loop, zero
 * while the struct is on no list. */
struct rl_link {
	struct rl_link *next;
	struct rl_link *prev;
};

/* ---------------------------------------------------------------- options */

enum rl_backend_kind {
	RL_BACKEND_AUTO = 0, /* io_uring, else epoll when io_uring is refused */
	RL_BACKEND_URING = 1,
	RL_BACKEND_EPOLL = 2,
};

/*
 * Knobs for kernel experiments. All are off by default.
 *
 * The io_uring ring. With none of RL_SQPOLL, RL_SINGLE_ISSUER,
 * RL_DEFER_TASKRUN, RL_COOP_TASKRUN, RL_IOPOLL and RL_SHARED_RING, the
 * loop sets up its default ring, SINGLE_ISSUER | DEFER_TASKRUN (Linux
 * 6.1): the kernel runs completion work when the loop asks for
 * completions, in one go, rather than interrupting it, which is what
 * makes busy socket servers fast. The ring belongs to the thread that
 * first enters it (see the top of this file). On a kernel that refuses
 * those flags the loop sets up the plain ring instead, and
 * rl_loop_backend_reason() says so. rl_loop_flags() tells which ring a
 * loop has. Any ring knob asked for gives exactly the ring asked for
 * (RL_SINGLE_ISSUER alone, say), which also belongs to the first thread
 * that enters it when it has SINGLE_ISSUER.
 */
enum rl_flags {
	RL_SQPOLL = 1u << 0,	     /* io_uring: kernel thread polls the SQ */
	RL_SINGLE_ISSUER = 1u << 1,  /* io_uring: IORING_SETUP_SINGLE_ISSUER */
	RL_DEFER_TASKRUN = 1u << 2,  /* io_uring: IORING_SETUP_DEFER_TASKRUN */
	RL_COOP_TASKRUN = 1u << 3,   /* io_uring: IORING_SETUP_COOP_TASKRUN */
	RL_REGISTER_RING = 1u << 4,  /* io_uring: register the ring fd */
	RL_NO_LINK = 1u << 5,	     /* io_uring: read_file as 3 round trips */
	RL_NO_DIRECT = 1u << 6,	     /* io_uring: plain fds, not direct ones */
	RL_NO_INLINE = 1u << 7,	     /* epoll: no inline fast path, pool only */
	RL_SEND_ZC = 1u << 8,	     /* io_uring: every rl_net_send() is a
				      * zero-copy IORING_OP_SEND_ZC */
	RL_FORCE_ASYNC = 1u << 9,    /* io_uring: IOSQE_ASYNC on every file
				      * request, so io-wq workers run them
				      * (see iowq_max for their number) */
	RL_IOPOLL = 1u << 10,	     /* io_uring: IORING_SETUP_IOPOLL. Only
				      * reads and writes of O_DIRECT fds work
				      * on such a ring: the kernel refuses
				      * every other request (an open too)
				      * with -EINVAL, and direct I/O on a
				      * device without poll queues with
				      * -EOPNOTSUPP. The loop then polls and
				      * never sleeps in the kernel. */
	RL_SHARED_RING = 1u << 11,   /* io_uring: the plain ring, which any
				      * thread may enter, instead of the
				      * default SINGLE_ISSUER |
				      * DEFER_TASKRUN one (with either of
				      * those: -EINVAL) */
	RL_NO_AIO = 1u << 12,	     /* epoll: reads and writes of O_DIRECT
				      * files go to the pool, not to Linux
				      * AIO (see rl_fs_open()) */
	RL_REGULAR_FILES = 1u << 13, /* every read_file on this loop is
				      * RL_READ_FILE_REGULAR, the styles'
				      * included: only for a program that
				      * reads regular files it chose */
};

/* The default of rl_options.read_file_max: 1 GiB. */
#define RL_READ_FILE_MAX_DEFAULT ((size_t)1 << 30)

struct rl_options {
	int backend;	/* enum rl_backend_kind */
	unsigned flags; /* enum rl_flags */
	/* io_uring SQ entries; 0 = 256. At least 4 (a linked read_file
	 * takes 3 SQEs at once, and the wake-up one more): smaller fails
	 * with -EINVAL. Sizes above
	 * the kernel's maximum (32768) are clamped, and so is the CQ. When
	 * the kernel cannot allocate the default ring (ENOMEM), smaller
	 * ones are tried, down to 16 entries. */
	unsigned entries;
	/* io_uring CQ entries; 0 = 16 * entries. The loop keeps what it may
	 * be owed within the CQ, but requests that wait for ever (reads of
	 * idle pipes and sockets) stop counting once nothing has moved for a
	 * while (CQ_STUCK_NS in loop/uring.c), so they never hold up the
	 * rest. */
	unsigned cq_entries;
	/* io_uring: the direct descriptor table; 0 = 1024, at most
	 * RLIMIT_NOFILE. A read_file or write_file holds a slot from its
	 * open to its close, and waits in the loop while none is free.
	 * When none has come free for a while (SLOT_STUCK_NS in
	 * loop/uring.c; every slot held by requests that do not end, such
	 * as read_files of FIFOs nobody writes to), the waiting ones run on
	 * plain fds instead, one step at a time. */
	unsigned direct_slots;
	unsigned iowq_max;	 /* io-wq worker cap (bounded and unbounded);
				 * 0 = the kernel's default */
	unsigned sqpoll_idle_ms; /* SQPOLL thread idle time; 0 = 1000 */
	unsigned pool_threads;	 /* epoll: thread pool size; 0 = CPU count */
	unsigned net_bufs;	 /* buffers the loop provides to stream
				 * receives (a power of two, at most 32768);
				 * 0 = 256 */
	unsigned net_buf_size;	 /* size of each of them; 0 = 4096 */
	/* The largest buffer a read_file with RL_READ_FILE_GROW may grow
	 * to; a file that does not fit fails with -EFBIG. 0 =
	 * RL_READ_FILE_MAX_DEFAULT (1 GiB). The buffer grows with what was
	 * read (doubling), never ahead of it on the word of a size the
	 * file system reports, so an endless file (/dev/zero) costs at
	 * most this much memory before -EFBIG. */
	size_t read_file_max;
	/*
	 * epoll: the signal that interrupts a pool worker blocked in a
	 * system call when its request is cancelled or the loop closes (a
	 * FIFO's open waiting for a peer, a read of a device that cannot be
	 * polled). 0 = SIGRTMIN + 6; -1 = none; else that signal number.
	 * The loop installs a handler that does nothing (without
	 * SA_RESTART) only when the program left the signal at SIG_DFL, and
	 * unblocks it only in its workers. With none (or a signal the
	 * program handles itself), a worker blocked for good cannot be
	 * interrupted: cancelling its request, or closing the loop, waits
	 * until the system call ends by itself.
	 */
	int pool_signal;
	/*
	 * io_uring: when file requests go to the kernel. N > 0: as soon as
	 * N SQEs wait. 0, the default, adapts: the loop watches whether
	 * what it submits completes inline (cached reads) or later (direct
	 * I/O to a disk, reads of pipes); in the first case everything
	 * waits for one io_uring_enter at the loop's next wait, in the
	 * second requests go in batches of 4 as they are made, so that a
	 * device gets them while the loop is still running callbacks. The
	 * stats' enters count shows what it chose.
	 */
	unsigned submit_batch;
	/*
	 * How long rl_run(), when it would sleep, first polls for work (new
	 * messages and posts, the backend's completions) without sleeping,
	 * in nanoseconds, at most 1 s (more fails with -EINVAL). Waking a
	 * thread that sleeps costs tens of microseconds on a virtual machine
	 * (the CPU halts and the host must schedule it again); a loop that
	 * polls instead reacts within a microsecond, and since it is awake,
	 * messages to it need no wake-up at all. The poll stops at once when
	 * anything arrives or a timer is due, and is bounded per sleep: a
	 * loop with nothing to do sleeps after one poll, using no CPU. Polls
	 * that come back empty make the next ones rarer (a loaded machine
	 * goes back to plain sleeping). 0 = the default:
	 * RL_GROUP_IDLE_SPIN_NS for the loops of a group (rl_group_open()),
	 * where latency between loops is the point, and no polling for a loop
	 * of its own; < 0 = never poll. On epoll "never" covers the thread
	 * pool as well: by default the loop polls a while for a job that is
	 * out (when a CPU is left for it) and a worker for its next job,
	 * which saves a wake-up per hand-off at the cost of some CPU
	 * (docs/experiments.md measures both); < 0 turns both off.
	 */
	int64_t idle_spin_ns;
};

/* rl_options.idle_spin_ns of a group's loops when it is left at 0. */
#define RL_GROUP_IDLE_SPIN_NS 50000
/* The largest rl_options.idle_spin_ns. */
#define RL_IDLE_SPIN_MAX_NS 1000000000

/* Fills *opt with the defaults (every field 0 means "default"). */
void rl_options_init(struct rl_options *opt);

/*
 * Signals. The epoll backend runs file work in a pool of threads, and a
 * job can block for good (the open() of a FIFO nobody writes to). To
 * cancel such a job, or to close its loop, the pool interrupts the worker
 * with a signal, SIGRTMIN + 6, so that the blocking call fails with EINTR.
 * The first pool of the process installs a handler for that signal, once
 * and process-wide, that does nothing (without SA_RESTART) - but only if
 * the signal is still at SIG_DFL then: a program that uses SIGRTMIN + 6
 * itself installs its own handler before opening a loop, and the pool
 * leaves it alone. Blocked jobs then cannot be interrupted: the callback
 * of a cancelled one waits for the job to finish, and so does
 * rl_loop_close(). The workers
 * block every other signal, so process-directed signals go to the
 * program's own threads. The io_uring backend sends no signal.
 *
 * Threads. The epoll backend starts its pool's workers in rl_loop_open(),
 * and one more thread for each request that may block for good while the
 * others are busy with such requests (an open of a FIFO for writing, a
 * write into a pipe, a read of a device that cannot be polled: up to 64
 * at once). When the system refuses that thread (pthread_create() fails,
 * -EAGAIN at RLIMIT_NPROC), the request ends with that error at once
 * rather than wait for a thread that may never come; what a write_file
 * wrote into a full pipe before then stays written. The io_uring backend
 * starts no thread of its own.
 */

/* ------------------------------------------------------------- lifecycle */

/*
 * Creates a loop. opt may be NULL for the defaults. With RL_BACKEND_AUTO the
 * environment variable RINGLOOP_BACKEND=uring|epoll|auto picks the backend;
 * AUTO falls back to epoll when io_uring_setup is missing or refused
 * (ENOSYS, EPERM, EACCES) or cannot get memory for a ring (ENOMEM, e.g.
 * under a low RLIMIT_MEMLOCK on kernels before 5.12, which charge rings
 * to it), and rl_loop_backend_reason() says why. Asking for uring where
 * it is refused fails with that error; an unsupported knob or combination
 * of knobs fails with -EINVAL. An epoll loop starts its pool's threads
 * here: when the system refuses one (RLIMIT_NPROC, a seccomp filter,
 * memory), the open fails with pthread_create()'s error, -EAGAIN, and
 * nothing is left running. Returns 0 and sets *out, or -errno.
 */
int rl_loop_open(rl_loop **out, const struct rl_options *opt);

/*
 * Runs the close hooks (below), then cancels every request and timer still
 * in flight, runs their callbacks (with -ECANCELED or their real result),
 * waits for the kernel and worker threads to let go of them, and frees the
 * loop. Must not be called from a callback. Returns 0, or -EBUSY when
 * called from inside rl_run() or when a hook refused, or -EEXIST when
 * called on another thread than the one its io_uring ring belongs to
 * (nothing closed then). A loop never run closes on any thread.
 */
int rl_loop_close(rl_loop *loop);

/*
 * Close hooks: how a layer built on the loop (the style contexts) shuts
 * down with it. rl_loop_close() takes each hook off the loop, newest
 * first, and calls fn while the loop still works normally (fn may submit,
 * cancel and call rl_run()). fn returns:
 *
 *   0               done: the hook is off the loop for good;
 *   RL_CLOSE_AGAIN  closed, but call fn once more at the very end of
 *                   rl_loop_close(), after every request's callback and
 *                   every other hook has run, just before the loop is
 *                   freed (fn must not submit anything then). A layer
 *                   frees its memory there, which the callbacks of other
 *                   layers may still touch until then;
 *   -EBUSY          it cannot let go yet: the hook goes back on the loop
 *                   and rl_loop_close() returns -EBUSY.
 *
 * The caller owns the struct, as with requests.
 */
#define RL_CLOSE_AGAIN 1

typedef struct rl_close_hook rl_close_hook;
struct rl_close_hook {
	int (*fn)(rl_close_hook *hook, rl_loop *loop);
	struct rl_link link; /* private */
};

void rl_loop_on_close(rl_loop *loop, rl_close_hook *hook,
		      int (*fn)(rl_close_hook *hook, rl_loop *loop));
/* Takes a hook off before the loop closes (also one waiting for its last
 * call); a no-op for one not on it. */
void rl_loop_off_close(rl_loop *loop, rl_close_hook *hook);

/* "uring" or "epoll": the backend the loop runs on. */
const char *rl_loop_backend(const rl_loop *loop);

/* Why the loop chose its backend, e.g. "io_uring_setup: EPERM", or
 * "io_uring_setup: ENOMEM (RLIMIT_MEMLOCK 64 KiB)"; on io_uring it ends
 * with "; plain ring (DEFER_TASKRUN: EINVAL)" when the kernel refused the
 * default ring. */
const char *rl_loop_backend_reason(const rl_loop *loop);

/* The knobs (enum rl_flags) the loop runs with: those of its options,
 * plus RL_SINGLE_ISSUER | RL_DEFER_TASKRUN when it has the default
 * io_uring ring. */
unsigned rl_loop_flags(const rl_loop *loop);

/* The io_uring ring the loop has, for reports: "defer-taskrun" (the
 * default, with SINGLE_ISSUER), "single-issuer", "sqpoll", "iopoll",
 * "coop-taskrun" or "shared" (the plain ring); "none" on epoll. */
const char *rl_loop_ring(const rl_loop *loop);

enum rl_run_mode {
	RL_RUN_DEFAULT = 0, /* until nothing is alive, or rl_stop() */
	RL_RUN_ONCE = 1,    /* wait for one batch of completions, run it;
			     * when callbacks were due already (timers),
			     * run them and what is ready, not waiting */
	RL_RUN_NOWAIT = 2,  /* run what is ready without waiting */
};

/*
 * Runs the loop. Returns the number of callbacks it ran (>= 0) or -errno.
 * Alive means: requests in flight, active timers, queued tasks or refs.
 */
int rl_run(rl_loop *loop, enum rl_run_mode mode);

/* Makes the current rl_run() return after the callback batch it is in. */
void rl_stop(rl_loop *loop);

/* Keep the loop alive with nothing in flight (e.g. while another thread
 * may rl_post()). Calls must balance. */
void rl_ref(rl_loop *loop);
void rl_unref(rl_loop *loop);

/* The loop's idea of now, CLOCK_MONOTONIC in milliseconds: one value for a
 * whole iteration of the loop, read from the clock when the iteration
 * first needs it (before its callbacks when a timer is pending). */
uint64_t rl_now_ms(const rl_loop *loop);

/* The library's version as RL_VERSION_HEX encodes it, and as "0.2.0": the
 * library the program runs with, which may be newer than the headers it
 * was built with. */
unsigned rl_version(void);
const char *rl_version_string(void);

/*
 * A description of a result: for -errno codes, the C library's (as
 * strerror() gives it, whatever the call that returned it: what ringloop
 * means by a code is in the documentation of the function returning it);
 * for codes of the layers above the loop (e.g. the promise layer's
 * RL_EAGGREGATE), the description that layer registered; else "unknown
 * error N". Never NULL; thread-safe.
 */
const char *rl_strerror(int err);

/*
 * How a layer above the loop describes its own codes (outside the errno
 * range, e.g. <= -100000): describe returns a string for the codes it
 * owns and NULL for others. Registering the same function twice is a
 * no-op. Returns 0, or -ENOSPC when 8 are registered already.
 */
int rl_strerror_register(const char *(*describe)(int err));

/* --------------------------------------------------------------- counters */

struct rl_stats {
	uint64_t submissions;	     /* requests accepted by submitting calls */
	uint64_t completions;	     /* request callbacks run */
	uint64_t syscalls;	     /* syscalls the loop thread made */
	uint64_t enters;	     /* ... of which io_uring_enter */
	uint64_t waits;		     /* ... of which epoll_wait */
	uint64_t pool_jobs;	     /* jobs the thread pool's workers ran */
	uint64_t inline_completions; /* requests finished on the loop thread */
	uint64_t wakeups;	     /* eventfd wake-ups the loop consumed */
	uint64_t queued;	     /* requests that waited in user space
				      * (SQ full, CQ budget or slots) */
	uint64_t net_dry;	     /* times a stream receive waited for a
				      * provided buffer (all in use) */
	uint64_t aio;		     /* epoll: direct reads and writes the
				      * kernel took with Linux AIO (those it
				      * sent back as would-block went on to
				      * the pool: pool_jobs) */
};

void rl_loop_stats(const rl_loop *loop, struct rl_stats *out);

/* The buffers RL_READ_FILE_LOAN lends: how many are out now (taken by
 * reads under way or held by running callbacks), and the bytes the loop
 * keeps for the next loans (at most 64 MiB, none larger than 1 MiB). */
size_t rl_fs_loans_out(const rl_loop *loop);
size_t rl_fs_loans_kept(const rl_loop *loop);

/* --------------------------------------------------------------- requests */

enum rl_op {
	RL_OP_NONE = 0,
	RL_OP_OPEN,
	RL_OP_READ,
	RL_OP_CLOSE,
	RL_OP_STAT,
	RL_OP_READ_FILE,
	RL_OP_WRITE,
	RL_OP_READV,
	RL_OP_WRITEV,
	RL_OP_READ_FIXED,
	RL_OP_WRITE_FIXED,
	RL_OP_FSYNC,
	RL_OP_FTRUNCATE,
	RL_OP_FALLOCATE,
	RL_OP_UNLINK,
	RL_OP_RMDIR,
	RL_OP_MKDIR,
	RL_OP_RENAME,
	RL_OP_FSTAT,
	RL_OP_WRITE_FILE,
	RL_OP_ACCEPT, /* a stream */
	RL_OP_CONNECT,
	RL_OP_RECV,
	RL_OP_RECV_STREAM, /* a stream */
	RL_OP_SEND,
	RL_OP_SHUTDOWN,
	RL_OP_ACCEPT_ONE,
	RL_OP_SENDMSG,
	RL_OP_RECVMSG,
};

typedef void (*rl_req_cb)(rl_req *req);

/* read_file flags */
enum rl_read_file_flags {
	/* req->buf is NULL or came from malloc(): the loop may realloc() it to
	 * fit the whole file. The caller frees req->buf. */
	RL_READ_FILE_GROW = 1u << 0,
	/* With RL_READ_FILE_GROW and buf NULL: the buffer is the loop's,
	 * lent for the callback only. The loop takes it when the read
	 * starts, not at submission, and takes it back when the callback
	 * returns, for the next lent read: a burst of read_files holds as
	 * many buffers as it has reads under way, not one per request.
	 * len is the size asked (0: a page): the buffer holds at least
	 * that, rounded up to a power of two of at least 256 bytes, but
	 * never more than rl_options.read_file_max, and grows to fit the
	 * file as with RL_READ_FILE_GROW. */
	RL_READ_FILE_LOAN = 1u << 1,
	/* The caller knows that path names a regular file of a disk file
	 * system (ext4, xfs, btrfs, tmpfs...) that nobody appends to while
	 * it is read: a read shorter than asked is its end. The io_uring
	 * backend then leaves out of its linked chain the one-byte probe
	 * that proves the end of files it knows nothing of (one request and
	 * one completion fewer per read_file). A file larger than the buffer
	 * is still read whole. On a file of another kind (procfs or sysfs, a
	 * FIFO, a terminal, a device), the result may end at the first short
	 * read: a page, a record, what a writer had written so far. Do not
	 * set it for a path someone else chooses. The epoll backend learns
	 * the file's type from fstat() on every read_file anyway, and reads
	 * as it does without the flag. */
	RL_READ_FILE_REGULAR = 1u << 2,
};

/*
 * A request. Zero it (or call rl_req_init()) before its first submission;
 * from then on the loop leaves it reusable whenever its callback has run.
 * The caller may set data, and reads result (and, for read_file, buf and
 * len) in the callback. The argument fields hold what was submitted. priv
 * belongs to the loop and its backend while the request is in flight: its
 * size is fixed, its content is nobody else's business, and a backend can
 * change what it keeps there without changing this layout.
 */
#define RL_REQ_PRIVATE_WORDS 12

struct rl_req {
	void *data;	/* the caller's, never touched by the loop */
	int64_t result; /* >= 0 or -errno, valid in the callback */
	rl_req_cb cb;
	rl_loop *loop;
	uint8_t op; /* enum rl_op */

	/* Arguments, kept as submitted. For read_file, buf and len describe
	 * the data in the callback (buf may have been grown); for readv and
	 * writev, len is the total of the iovecs' lengths. */
	int fd;
	int flags;
	unsigned mode;
	const char *path;
	const char *path2;
	void *buf;
	size_t len;
	int64_t offset;
	union {
		struct statx *stx;
		const struct iovec *iov;
		void *ptr;
	};
	uint32_t count; /* iovcnt, address length... per operation */

	struct {
		uint64_t words[RL_REQ_PRIVATE_WORDS];
	} priv;
};

/* Zeroes req: what a request must be before its first submission. */
void rl_req_init(rl_req *req);

/*
 * Opens path with open(2)'s flags and mode (O_CREAT, O_EXCL, O_TRUNC,
 * O_APPEND, O_DIRECT... all as open(2) takes them); result is the new fd.
 * The fd is the caller's to close. If the request is cancelled after the
 * kernel opened the file, the loop closes the fd itself. On epoll, open
 * O_DIRECT files with this call rather than open(2): the loop then knows
 * that their reads wait for the device even where buffered reads would
 * not, and hands their reads and writes at an offset to the kernel with
 * Linux AIO (io_submit with RWF_NOWAIT; what would block goes to the
 * pool), or to the pool with RL_NO_AIO or where the kernel has no AIO
 * (an O_DIRECT fd from open(2) is read on the loop thread). Special files
 * open as a blocking open(2) would let them, on every backend: an open for
 * writing of a FIFO waits for a reader; an open for reading of a FIFO
 * returns at once (as io_uring's does) and reads through the loop then
 * wait for the writer.
 */
int rl_fs_open(rl_loop *loop, rl_req *req, const char *path, int flags,
	       unsigned mode, rl_req_cb cb);

/*
 * Reads up to len bytes at offset (or at the fd's position when offset is
 * -1); result is the byte count, 0 at end of file. A read may return less
 * than len (a pipe, a socket), as read(2) does. A file without a position
 * (a pipe, a FIFO, a socket, most character devices) ignores the offset
 * and reads what comes next, on every backend. A read of a pipe or FIFO
 * waits for data; one whose writer has not come yet waits for it (end of
 * file is a writer that came and went). Such a read
 * cancelled after it took bytes from the stream reports those bytes
 * (result > 0) rather than -ECANCELED: they are gone from the stream.
 */
int rl_fs_read(rl_loop *loop, rl_req *req, int fd, void *buf, size_t len,
	       int64_t offset, rl_req_cb cb);

/* Closes fd; result 0 or -errno. -ECANCELED (cancelled, or the loop
 * closed, before the close ran) leaves fd open: it is still the caller's.
 * Any other result means fd is gone, even -EINTR (Linux closes first), and
 * a close cancelled too late to stop it reports its real result. */
int rl_fs_close(rl_loop *loop, rl_req *req, int fd, rl_req_cb cb);

/* statx() of path (following symlinks), basic stats, into *stx. */
int rl_fs_stat(rl_loop *loop, rl_req *req, const char *path, struct statx *stx,
	       rl_req_cb cb);

/*
 * Reads the whole file at path to end of file. Without RL_READ_FILE_GROW,
 * buf/len is the caller's buffer and a file larger than len fails with
 * -EFBIG. With RL_READ_FILE_GROW, buf (NULL or malloc'ed, len its size) is
 * grown as needed, up to rl_options.read_file_max; a larger file fails
 * with -EFBIG. The cap bounds what the loop allocates: with buf NULL, a
 * len past it gets a buffer of the cap, while a buffer the caller passes
 * is never shrunk, and a file that fits it is read whole. result is the file size read; req->buf and req->len then
 * hold the data and its capacity (also after a failure: the caller frees
 * req->buf). A FIFO or a character device is read as a blocking read(2)
 * would, to its end of file: every byte the stream handed over is in the
 * result, however it arrived.
 */
int rl_fs_read_file(rl_loop *loop, rl_req *req, const char *path, void *buf,
		    size_t len, unsigned flags, rl_req_cb cb);

/* ------------------------------------------------------ writing to files */

/*
 * Writes. Every write below (write, writev, write_fixed, write_file)
 * writes ALL of its data or fails: a short write (a pipe with less room, a
 * file system filling up) is continued by the loop from where it stopped,
 * and the callback says len (the total) only when every byte went through.
 * A write that fails half-way, or is cancelled, reports -errno (-ENOSPC,
 * -EPIPE, -ECANCELED...), and then the file may hold a part of the data.
 * A write to a pipe or socket waits for room, also when the fd is
 * O_NONBLOCK, as a read waits for data; it holds no thread meanwhile on
 * either backend (epoll polls the fd for room on the loop's thread). A
 * write to a pipe whose reader is gone, or to a stream socket whose peer
 * is, fails with -EPIPE; the kernel also raises SIGPIPE on the loop's
 * thread then, as write(2) does (on io_uring, and on epoll for write,
 * writev and write_fixed), so a program writing to pipes or sockets with
 * these calls ignores SIGPIPE (rl_net_send() never raises it).
 * Likewise a write across RLIMIT_FSIZE writes what fits below the limit
 * and fails with -EFBIG; the kernel may raise SIGXFSZ on the loop's
 * thread then, whose default action ends the process: on io_uring for a
 * write it issues inline (such as an O_DIRECT one), on epoll for an
 * O_DIRECT write at an offset at or past the limit, which goes through
 * AIO from the loop's thread. So a program that sets a file size limit
 * ignores SIGXFSZ. The epoll backend's other writes run on the pool's
 * workers, which block signals: only -EFBIG comes.
 *
 * offset is a position in the file, or -1 for the fd's file position
 * (which the write then advances); an fd opened with O_APPEND appends
 * whatever offset says, and a file without a position (a pipe, a socket)
 * ignores it, as rl_fs_read() does. Two writes in flight on one file
 * position (-1) go out in no defined order: chain them, or give offsets.
 *
 * O_DIRECT: an fd opened with O_DIRECT needs buffers, offsets and lengths
 * aligned as its file system says (rl_fs_fstat() below tells: the
 * stx_dio_mem_align and stx_dio_offset_align fields); a misaligned read
 * or write fails with -EINVAL in its callback, on every backend.
 *
 * "Done" means handed to the kernel (the page cache, for buffered files),
 * as with write(2): rl_fs_fsync(), or RL_WRITE_FILE_FSYNC, makes it
 * durable.
 */

/* Writes len bytes at offset (-1: the file position); result is len. */
int rl_fs_write(rl_loop *loop, rl_req *req, int fd, const void *buf, size_t len,
		int64_t offset, rl_req_cb cb);

/*
 * Vectored reads and writes: iovcnt buffers (at most IOV_MAX, 1024; iov
 * and the buffers stay the caller's and must live until the callback).
 * The loop sets req->len to the total of the lengths. readv may return
 * less than that, as rl_fs_read() does; writev writes it all.
 */
int rl_fs_readv(rl_loop *loop, rl_req *req, int fd, const struct iovec *iov,
		unsigned iovcnt, int64_t offset, rl_req_cb cb);
int rl_fs_writev(rl_loop *loop, rl_req *req, int fd, const struct iovec *iov,
		 unsigned iovcnt, int64_t offset, rl_req_cb cb);

/*
 * Registered (fixed) buffers. rl_loop_register_buffers() makes iov[0..n-1]
 * the loop's buffer set (n = 0: none), replacing the previous one. Each
 * buffer is non-empty and at most 1 GiB, n at most 16384; the loop keeps a
 * copy of iov, not of the memory, which stays the caller's and must live
 * as long as it is registered (until the next call, or rl_loop_close()).
 * Returns 0, -EINVAL for a bad set, -EBUSY while requests are in flight,
 * or what the kernel says (on io_uring the pages are pinned:
 * io_uring_register_buffers(), -ENOMEM or -EOPNOTSUPP for memory it
 * cannot pin, such as a file mapping).
 *
 * rl_fs_read_fixed() and rl_fs_write_fixed() are rl_fs_read() and
 * rl_fs_write() on [buf, buf + len), which must lie inside registered
 * buffer index (else -EFAULT, from the submitting call). On io_uring they
 * are IORING_OP_READ_FIXED and WRITE_FIXED, which skip mapping the pages
 * at every request; on epoll they are plain reads and writes, with the
 * same results.
 */
int rl_loop_register_buffers(rl_loop *loop, const struct iovec *iov,
			     unsigned n);
int rl_fs_read_fixed(rl_loop *loop, rl_req *req, int fd, void *buf, size_t len,
		     int64_t offset, unsigned index, rl_req_cb cb);
int rl_fs_write_fixed(rl_loop *loop, rl_req *req, int fd, const void *buf,
		      size_t len, int64_t offset, unsigned index, rl_req_cb cb);

/* rl_fs_fsync() flags */
enum rl_fsync_flags {
	RL_FSYNC_DATASYNC = 1u << 0, /* fdatasync(): data, and only the
				      * metadata needed to read it back */
};

/* fsync() (or fdatasync() with RL_FSYNC_DATASYNC) of fd; result 0. */
int rl_fs_fsync(rl_loop *loop, rl_req *req, int fd, unsigned flags,
		rl_req_cb cb);

/* ftruncate(): fd's file becomes length bytes long; result 0. On io_uring
 * this needs IORING_OP_FTRUNCATE (Linux 6.9); before it, the loop thread
 * makes the call itself. */
int rl_fs_ftruncate(rl_loop *loop, rl_req *req, int fd, int64_t length,
		    rl_req_cb cb);

/* fallocate(fd, mode, offset, len): mode 0 allocates (and extends the file),
 * or FALLOC_FL_* flags (KEEP_SIZE, PUNCH_HOLE...); result 0. */
int rl_fs_fallocate(rl_loop *loop, rl_req *req, int fd, int mode,
		    int64_t offset, int64_t len, rl_req_cb cb);

/* unlink(), rmdir() and mkdir() of path; result 0. */
int rl_fs_unlink(rl_loop *loop, rl_req *req, const char *path, rl_req_cb cb);
int rl_fs_rmdir(rl_loop *loop, rl_req *req, const char *path, rl_req_cb cb);
int rl_fs_mkdir(rl_loop *loop, rl_req *req, const char *path, unsigned mode,
		rl_req_cb cb);

/* renameat2() of from to to; flags 0 (replace to if it exists, as
 * rename() does), or RENAME_NOREPLACE, RENAME_EXCHANGE; result 0. */
int rl_fs_rename(rl_loop *loop, rl_req *req, const char *from, const char *to,
		 unsigned flags, rl_req_cb cb);

/* statx() of the open file fd into *stx; result 0. It asks for the basic
 * stats and STATX_DIOALIGN (Linux 6.1): stx->stx_mask says which came. */
int rl_fs_fstat(rl_loop *loop, rl_req *req, int fd, struct statx *stx,
		rl_req_cb cb);

/* rl_fs_write_file() flags */
enum rl_write_file_flags {
	RL_WRITE_FILE_FSYNC = 1u << 0,	  /* fsync() before the close */
	RL_WRITE_FILE_DATASYNC = 1u << 1, /* fdatasync() before the close */
	RL_WRITE_FILE_EXCL = 1u << 2,	  /* fail with -EEXIST if path exists */
	RL_WRITE_FILE_APPEND = 1u << 3,	  /* append instead of truncating */
};

/*
 * Writes a whole file: creates path (with mode, as open(2) does, under
 * the umask) or truncates it, writes len bytes of buf, fsyncs if asked,
 * and closes it. result is len, or -errno of the first step that failed
 * (the file may then exist, partly written). On io_uring this is one
 * linked chain (open, write, fsync, close on a direct descriptor) in a
 * single submission; on epoll, one job of the thread pool.
 */
int rl_fs_write_file(rl_loop *loop, rl_req *req, const char *path,
		     const void *buf, size_t len, unsigned flags, unsigned mode,
		     rl_req_cb cb);

/*
 * Cancels a request in flight: its callback runs with -ECANCELED, or with
 * its real result when it did what cannot be undone before the cancel
 * reached it (a read, readv, read_fixed, recv or recvmsg that took bytes,
 * which are gone from a pipe or a socket; a close that ran).
 * Returns 0, -ENOENT when the request is not in flight any more (its
 * callback ran, or is due), -EALREADY when it was cancelled already, or
 * -EINVAL when it was never submitted to this loop (req->loop is another
 * loop, or none: a request only initialised). What a cancelled
 * request did before it stopped stays done: a cancelled write, rename or
 * unlink may have happened, all or (a write) in part. The loop only ever
 * reports success for what happened. Likewise an rl_net_accept_one()
 * that got its connection before the cancel (or a deadline) reached it
 * reports the connection, so none is lost to a cancel.
 */
int rl_cancel(rl_loop *loop, rl_req *req);

/* ----------------------------------------------------------------- timers */

/*
 * The longest timeout any call takes, in milliseconds: about 292 years,
 * past which a deadline in nanoseconds would wrap. Every call that takes a
 * timeout or a delay in milliseconds (timers, rl_req_deadline(),
 * rl_net_connect(), and the styles' calls with a timeout_ms or ms) fails
 * with -EINVAL above it, before it starts anything: no request goes out,
 * no byte is read or written (a promise call gives a promise rejected
 * with -EINVAL). UINT64_MAX, a common "forever", is such a value: pass 0
 * for no timeout.
 */
#define RL_TIMEOUT_MAX_MS (UINT64_MAX / 2000000u)

typedef void (*rl_timer_cb)(rl_timer *timer, int status);

/*
 * A timer: the callback runs with status 0 when it fires, every repeat_ms
 * again when repeat_ms > 0, and once with -ECANCELED when cancelled. It may
 * restart or cancel itself from its callback (a repeating one too: the
 * restart replaces its next period).
 */
struct rl_timer {
	void *data;
	rl_timer_cb cb;
	/* private */
	uint64_t due_ns;
	uint64_t repeat_ns;
	uint64_t seq;	     /* FIFO order among equal deadlines */
	uint32_t index;	     /* position in the heap */
	uint32_t state;	     /* RL__TIMER_* */
	struct rl_link link; /* cancelled-timer queue */
};

/* Zeroes timer: what a timer must be before its first start (a zeroed
 * struct is initialised). The loop leaves it reusable after its last
 * callback. */
void rl_timer_init(rl_timer *timer);

/* The timeout counts from the loop's now (rl_now_ms()), one value per
 * iteration, as libuv's timers do: a timer started by a callback that
 * runs late in a long batch may fire up to that much before timeout_ms
 * have passed since the call. */
int rl_timer_start(rl_loop *loop, rl_timer *timer, uint64_t timeout_ms,
		   uint64_t repeat_ms, rl_timer_cb cb);

/* Stops a timer: its callback runs once more with -ECANCELED, on a later
 * tick. Returns 0 or -ENOENT when the timer is not active. */
int rl_timer_cancel(rl_loop *loop, rl_timer *timer);

/* Stops a timer without any further callback, including the -ECANCELED
 * one a cancelled timer still owes. Returns 0, or -ENOENT when the timer
 * is idle. The cheap way to drop a timeout that is no longer needed. */
int rl_timer_stop(rl_loop *loop, rl_timer *timer);

/*
 * A deadline for a request in flight, any request (streams included): if
 * its final callback has not come timeout_ms from now, the loop cancels it
 * and that callback says -ETIMEDOUT (or the real result, when the request
 * finished first). timer is the caller's, idle (zeroed, rl_timer_init()'ed
 * or stopped), and belongs to the loop, data and cb included, until the
 * request's final callback, which stops it: no timer callback ever runs.
 * Calling again with the same timer moves the deadline (from a stream's
 * item callback: an idle timeout); with another timer, replaces it.
 * Returns 0; -ENOENT when req is not in flight or its result is known;
 * -EALREADY when it is cancelled; -EBUSY when timer is in use otherwise.
 *
 * The same done by hand: start a timer whose callback calls rl_cancel(),
 * and rl_timer_stop() it in the request's callback.
 */
int rl_req_deadline(rl_loop *loop, rl_req *req, rl_timer *timer,
		    uint64_t timeout_ms);

/* ---------------------------------------------------------------- sockets */

/*
 * Sockets: TCP over IPv4 and IPv6, Unix stream sockets, and datagrams (UDP,
 * Unix), with the same results on every backend (docs/net.md tells how).
 *
 * Every socket the loop makes (rl_net_listen(), rl_net_connect(), the
 * connections rl_net_accept() hands out) is non-blocking and close-on-exec,
 * and is a plain fd that belongs to the caller: close it with close(2) or
 * rl_fs_close() once no request on it is in flight. Closing an fd that a
 * request still uses is undefined, as with a syscall on another thread;
 * on io_uring the request even keeps the socket open. So end a stream
 * first: rl_cancel() it, or shutdown(fd, SHUT_RDWR), which ends it with 0.
 * Sends never raise SIGPIPE: a send to a closed peer fails with -EPIPE.
 *
 * Streams. rl_net_accept() and rl_net_recv_stream() are submitted once and
 * call back many times:
 *
 *   - once per item (a connection; a chunk of data), with req->result >= 0
 *     and rl_req_more(req) true;
 *   - then exactly once more, the final callback, with rl_req_more(req)
 *     false and req->result 0 at the end of the stream (the peer shut down
 *     its side), -ECANCELED after rl_cancel() or rl_loop_close(), or
 *     another -errno. After it the request is idle and may be submitted
 *     again.
 *
 * rl_cancel() of a stream returns 0 and ends it: the final callback, with
 * -ECANCELED, comes once the kernel has stopped it, after the items the
 * loop had received by then (data already taken off the socket,
 * connections already accepted: they are the caller's as any item is).
 * So no byte is lost, and a reader can stop a stream, and later start
 * another one or an rl_net_recv() on the socket, without a gap. When the
 * final result is known already (an end of stream or an error waiting to
 * be delivered, maybe behind items), rl_cancel() returns -ENOENT and the
 * stream's remaining callbacks come as they would have. rl_loop_close()
 * ends every stream without its pending items (buffers recycled, accepted
 * connections closed): each gets its final callback, with -ECANCELED or
 * the result it had already.
 *
 * Order. A stream's items come in order, and its final callback after its
 * last item. Sends on one socket go out and complete in submission order,
 * even when the loop has to continue a short write. Two receives in flight
 * on one socket (two rl_net_recv(), or one beside a stream) split the data
 * between them in no defined way: don't.
 *
 * Timeouts. rl_net_connect() takes one. Any other request, streams
 * included, gets one from rl_req_deadline() (below).
 */

/* A socket address (IPv4, IPv6 or Unix) and its length. */
struct rl_addr {
	union {
		struct sockaddr sa;
		struct sockaddr_storage ss;
	};
	socklen_t len;
};

/* Fills *addr from a numeric IPv4 or IPv6 address ("127.0.0.1", "::1"; no
 * name lookup, which could block) and a port. Returns 0 or -EINVAL. */
int rl_addr_ip(struct rl_addr *addr, const char *ip, uint16_t port);

/* Fills *addr with a Unix socket path; a leading '@' names an abstract
 * socket. Returns 0, -EINVAL (empty) or -ENAMETOOLONG. */
int rl_addr_unix(struct rl_addr *addr, const char *path);

/* The port of an IPv4 or IPv6 address, or -EAFNOSUPPORT. */
int rl_addr_port(const struct rl_addr *addr);

/* Writes "1.2.3.4:80", "[::1]:80" or the Unix path into buf (always
 * terminated when size > 0). Returns the length it needed, or -errno. */
int rl_addr_format(const struct rl_addr *addr, char *buf, size_t size);

/* The local and the peer address of a socket (a listener bound to port 0
 * tells its port this way). Return 0 or -errno. */
int rl_net_local_addr(int fd, struct rl_addr *addr);
int rl_net_peer_addr(int fd, struct rl_addr *addr);

/* Sets or clears TCP_NODELAY (no Nagle delay for small writes). Returns 0
 * or -errno (-EOPNOTSUPP on a Unix socket). */
int rl_net_nodelay(int fd, int on);

enum rl_listen_flags {
	RL_LISTEN_REUSEPORT = 1u << 0, /* SO_REUSEPORT: one port, many loops */
	RL_LISTEN_V6ONLY = 1u << 1,    /* IPv6 only, no IPv4-mapped peers */
	RL_LISTEN_NODELAY = 1u << 2,   /* TCP_NODELAY, which accepted
					* connections inherit */
};

/*
 * Creates a socket bound to addr and listening on it, synchronously (none
 * of it blocks). TCP listeners get SO_REUSEADDR. A Unix path must not
 * exist yet (remove a stale one first). backlog <= 0 means SOMAXCONN.
 * Returns the fd, or -errno (-EADDRINUSE, -EACCES, -EINVAL...).
 */
int rl_net_listen(const struct rl_addr *addr, int backlog, unsigned flags);

/*
 * A stream of the connections accepted on the listening socket fd: each
 * item's req->result is a connected socket, the caller's. A connection
 * that its peer reset before it was accepted is skipped. Running out of
 * fds (-EMFILE, -ENFILE) or memory (-ENOBUFS, -ENOMEM) ends the stream with
 * that error: the connections waiting stay in the listener's backlog, and
 * a new rl_net_accept() takes them once fds are free again. The loop's
 * own memory too: a burst of connections may need its queue of items to
 * grow, and when it cannot, the stream ends with -ENOMEM after the
 * connections queued before; the one that found no room is closed (on
 * io_uring, so are those the kernel had accepted before the stream
 * stopped), never delivered after the error.
 */
int rl_net_accept(rl_loop *loop, rl_req *req, int fd, rl_req_cb cb);

/* Accepts one connection (a plain request, one callback): result is the
 * connected socket, the caller's, or -errno as for rl_net_accept(). For a
 * "wait for the next client" call; a server taking many connections does
 * better with the stream. */
int rl_net_accept_one(rl_loop *loop, rl_req *req, int fd, rl_req_cb cb);

enum rl_connect_flags {
	RL_CONNECT_NODELAY = 1u << 0, /* TCP_NODELAY on the new socket */
};

/*
 * Creates a socket of addr's family and connects it to addr. result is
 * the connected socket, the caller's to close; on failure (and when
 * cancelled) the loop closes it itself. timeout_ms > 0: the connect fails
 * with -ETIMEDOUT when it has not succeeded by then; 0: as long as the
 * kernel tries. addr must stay valid until the callback. While the
 * request is in flight req->fd is the new socket.
 */
int rl_net_connect(rl_loop *loop, rl_req *req, const struct rl_addr *addr,
		   unsigned flags, uint64_t timeout_ms, rl_req_cb cb);

/* Receives up to len (> 0) bytes into buf, waiting for data as long as it
 * takes; result is the byte count, 0 at the end of the stream. */
int rl_net_recv(rl_loop *loop, rl_req *req, int fd, void *buf, size_t len,
		rl_req_cb cb);

/*
 * A stream of the data received on fd, in buffers the loop provides
 * (rl_options.net_bufs buffers of net_buf_size bytes, shared by the loop's
 * streams). Each item: req->buf and req->len are the data, req->result ==
 * req->len > 0. The buffer is the loop's again when the callback returns,
 * unless the callback keeps it with rl_net_buf_hold(). The final callback
 * says 0 at the end of the stream, or -errno. When every buffer is in use,
 * the streams wait until buffers come back (the kernel keeps the data and
 * TCP slows the peer): never an error. Queueing a received chunk for its
 * callback needs no memory (the loop's queue has room for one item per
 * buffer from the first stream on), so a stream never loses data, nor
 * fails, for lack of memory once it runs.
 */
int rl_net_recv_stream(rl_loop *loop, rl_req *req, int fd, rl_req_cb cb);

/* In a stream item's callback: keeps its buffer past the callback, and
 * returns it (req->buf). The streams cannot use it until it is given back
 * with rl_net_buf_release(). NULL when the callback has no buffer. */
void *rl_net_buf_hold(rl_req *req);

/* Gives a held buffer back. Returns 0, or -EINVAL when buf is not a
 * buffer of this loop that is held. */
int rl_net_buf_release(rl_loop *loop, void *buf);

enum rl_send_flags {
	RL_SEND_MORE = 1u << 0, /* MSG_MORE: more follows, fill packets */
};

/*
 * Sends all len bytes of buf. A short write is continued where it
 * stopped; result is len once the kernel has all of it (buf is the
 * caller's again), or -errno (-EPIPE, -ECONNRESET...: a prefix may have
 * gone out). While the peer does not read, the request just stays in
 * flight, and the loop keeps no copy of the data. With RL_SEND_ZC on
 * io_uring the kernel sends from buf without a copy, and the callback
 * comes when the kernel has let go of buf: for a cancelled send whose
 * data the peer has not read, that is when the connection goes away.
 */
int rl_net_send(rl_loop *loop, rl_req *req, int fd, const void *buf, size_t len,
		unsigned flags, rl_req_cb cb);

/* shutdown(2) of fd: how is SHUT_RD, SHUT_WR or SHUT_RDWR. result 0 or
 * -errno (-ENOTCONN). After SHUT_WR the peer reads the end of the stream
 * once it has read what was sent before. */
int rl_net_shutdown(rl_loop *loop, rl_req *req, int fd, int how, rl_req_cb cb);

/* In a callback: nonzero when more callbacks of this request follow (a
 * stream's item), 0 in a request's final (or only) callback. */
int rl_req_more(const rl_req *req);

/*
 * Datagrams. rl_net_udp() makes a datagram socket (UDP, or a Unix
 * datagram socket) bound to addr (port 0: any), synchronously; flags are
 * RL_LISTEN_REUSEPORT and RL_LISTEN_V6ONLY. Returns the fd or -errno.
 */
int rl_net_udp(const struct rl_addr *addr, unsigned flags);

/*
 * One sendmsg(2) of msg on fd: result is the bytes sent, a datagram whole,
 * or -errno (-ECONNREFUSED on a connected UDP socket whose peer's port is
 * closed, -EMSGSIZE). msg, and the address, iovecs and control data it
 * points to, stay the caller's and must stay valid until the callback. It
 * waits for room like rl_net_send(), and keeps its place in the fd's order
 * of sends. Meant for datagram sockets: on a stream socket the count may be
 * short, where rl_net_send() would go on.
 */
int rl_net_sendmsg(rl_loop *loop, rl_req *req, int fd, const struct msghdr *msg,
		   rl_req_cb cb);

/*
 * One recvmsg(2) into msg, waiting for a datagram: result is its size, 0
 * for an empty one. msg->msg_namelen then holds the sender's address
 * length, and msg->msg_flags has MSG_TRUNC when the datagram did not fit.
 * msg and its buffers must stay valid until the callback.
 */
int rl_net_recvmsg(rl_loop *loop, rl_req *req, int fd, struct msghdr *msg,
		   rl_req_cb cb);

/* ------------------------------------------------- cross-thread wake-ups */

/*
 * Posts a callback to the loop from any thread. The callback runs once on
 * the loop thread. A post does not keep the loop alive: a thread that will
 * post to an otherwise idle loop needs rl_ref() first. A post that races
 * with rl_loop_close() either runs its callback during the close or fails
 * with -ESHUTDOWN; posting after rl_loop_close() has returned is a use
 * after free, as with any freed object.
 */
struct rl_post {
	void *data;
	void (*cb)(struct rl_post *post);
	struct rl_post *next; /* private */
};

int rl_post(rl_loop *loop, struct rl_post *post,
	    void (*cb)(struct rl_post *post));

/* --------------------------------------------------------------- microtasks */

/*
 * A task runs on the loop thread after the current batch of callbacks, in
 * FIFO order, before the loop waits again; tasks queued by tasks run in the
 * same drain. This is the promise layer's microtask queue.
 */
struct rl_task {
	void (*fn)(rl_task *task);
	struct rl_link link; /* private */
};

void rl_task_queue(rl_loop *loop, rl_task *task, void (*fn)(rl_task *task));

/* ----------------------------------------------------------------- groups */

/*
 * A group of loops, one per CPU by default, each on its own thread with its
 * own ring or epoll set, as one program. Loop 0 is the caller's: the
 * thread that opened the group runs it with rl_run(), as any loop. Every
 * other loop runs on a thread of the group from rl_group_open() to
 * rl_group_close(), idle until work comes to it: a message (rl_post() to
 * it), a share of rl_group_run(), or requests of a spread burst.
 *
 * Messages. rl_post() to a loop of the group is the cross-loop message:
 * its callback runs on the target loop's thread. The messages one thread
 * sends to one loop run in the order it sent them; none is lost. Only a
 * sleeping loop is woken, once per sleep; a busy one finds its messages
 * after its current batch. A loop of an io_uring group wakes another with
 * IORING_OP_MSG_RING, sent with its own next io_uring_enter() or when its
 * rl_run() returns (so a callback that blocks after a post, waiting for
 * what the target does, needs RL_MSG_WAKE_EVENTFD); other threads, loops
 * of other groups, epoll loops and RL_MSG_WAKE_EVENTFD write the target's
 * eventfd.
 *
 * Spreading. A loop with spread on (RL_GROUP_SPREAD, rl_loop_spread())
 * hands its read_files to the group's loops in turn, itself included:
 * each runs its share on its own ring or pool, and the result comes back
 * as a message, so the request completes on the loop that submitted it,
 * with the same callback, result and buffer as without spreading (a
 * grown buffer included); rl_cancel() and deadlines work as usual. Every
 * style built on the loop spreads with it, unchanged.
 *
 * Thread per core. rl_group_run() runs a function on every loop's thread,
 * each loop running its own share of the work (its own promise and
 * coroutine contexts, opened there), and returns when every share is done.
 *
 * Closing. rl_group_close() closes every loop on its own thread, all at
 * once: each cancels what is in flight and runs its callbacks, messages
 * accepted before run, and rl_post() to a closing loop fails with
 * -ESHUTDOWN (it stays safe to call until rl_group_close() returns). The
 * loops of a group close only that way: rl_loop_close() of one says
 * -EBUSY.
 */
typedef struct rl_group rl_group;

/* How a loop of a group wakes another that sleeps. */
enum rl_msg_wake {
	RL_MSG_WAKE_DEFAULT = 0, /* the faster way the backend has */
	RL_MSG_WAKE_RING = 1,	 /* io_uring: IORING_OP_MSG_RING */
	RL_MSG_WAKE_EVENTFD = 2, /* an eventfd write */
};

enum rl_group_flags {
	RL_GROUP_SPREAD = 1u << 0, /* every loop starts with spread on */
	RL_GROUP_PIN = 1u << 1,	   /* loop i's thread on the i-th CPU the
				    * process may use (loop 0 is the
				    * caller's: it is not moved) */
};

struct rl_group_options {
	unsigned loops;		/* 0 = the CPUs the process may run on */
	unsigned flags;		/* enum rl_group_flags */
	int msg_wake;		/* enum rl_msg_wake */
	struct rl_options loop; /* every loop's options */
};

void rl_group_options_init(struct rl_group_options *opt);

/*
 * Opens the loops (at most 256), each on the thread that will run it, and
 * starts their threads. Returns 0 and sets *out, or -errno (a loop that
 * could not open, or -EAGAIN from pthread_create() for a thread the
 * system refused: the threads already started are stopped and joined,
 * their loops closed, and nothing is left running).
 */
int rl_group_open(rl_group **out, const struct rl_group_options *opt);

/* Closes every loop (see above) and frees the group; on the thread that
 * opened it, not inside rl_run(). Returns 0, or, with nothing closed:
 * -EBUSY when loop 0 is running or the caller is on the thread of another
 * loop of the group (one of its callbacks, its share); -EEXIST on another
 * thread than the opener's when loop 0's ring belongs to the opener (as
 * rl_loop_close() says). The group is freed by the call that returns 0:
 * a second close is a use after free. */
int rl_group_close(rl_group *group);

unsigned rl_group_size(const rl_group *group);
/* Loop i of the group (0: the caller's), or NULL past the end. */
rl_loop *rl_group_loop(const rl_group *group, unsigned i);
/* The index of loop in its group, or -1 when it is in none. */
int rl_loop_group_index(const rl_loop *loop);

/*
 * Thread per core: runs fn(loop, i, arg) on the thread of every loop i of
 * the group (loop 0's on the caller's, which must be the opener's and not
 * in rl_run()), outside rl_run(), so fn may run the loop itself (an
 * rl_run() there returns when the loop's own work is done, as on a loop
 * of no group). Then each loop runs until its share is done, i.e. until
 * it has nothing alive (what rl_run() would return on). Returns once
 * every share is done: 0, or -EBUSY.
 */
int rl_group_run(rl_group *group,
		 void (*fn)(rl_loop *loop, unsigned i, void *arg), void *arg);

/* Turns spreading on or off for the read_files submitted on loop from now
 * on (on its thread). Returns 0, or -EINVAL when loop is in no group. */
int rl_loop_spread(rl_loop *loop, int on);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* RINGLOOP_H */
