/* SPDX-License-Identifier: MIT */
/*
 * coro.h - stackful coroutines over the ringloop event loop.
 *
 * A coroutine is a function running on its own stack. Inside it, the file
 * calls below look blocking: each one submits a loop request, suspends the
 * coroutine, and returns the request's result (>= 0 or -errno) once the
 * completion has arrived. The loop thread meanwhile runs other callbacks
 * and other coroutines. A coroutine only ever runs on its loop's thread:
 * it starts from a microtask, and is resumed straight from the callback of
 * the request or timer it waits for (or from a microtask for yield, join
 * and await).
 *
 *	static int64_t reader(void *arg)
 *	{
 *		char buf[64];
 *		int64_t n = rl_coro_fs_read_file(arg, buf, sizeof(buf));
 *
 *		return n;	// >= 0, or -ENOENT and friends
 *	}
 *
 *	rl_coro_ctx_open(loop, &sched, NULL);
 *	rl_coro_spawn(sched, &co, reader, "/etc/hostname", NULL);
 *	rl_run(loop, RL_RUN_DEFAULT);
 *	...
 *	rl_loop_close(loop);		// closes the scheduler first
 *
 * A suspending call (everything marked "suspends" below) made outside a
 * coroutine returns -EPERM and does nothing.
 *
 * OWNERSHIP AND CLOSING. The coroutines of a loop belong to a scheduler
 * object the program opens with rl_coro_ctx_open(), and the loop closes
 * it: the scheduler puts a close hook on the loop, so rl_loop_close()
 * closes it first, while the loop still runs. Closing the scheduler:
 *
 *   - makes every suspending call made from then on fail at once with
 *     -ECANCELED (and rl_coro_spawn too);
 *   - cancels what each suspended coroutine waits for: its request
 *     (rl_cancel) or its sleep timer, so -ECANCELED arrives as the result
 *     of the suspended call; a coroutine waiting in join or yield gets
 *     -ECANCELED too; an await of a promise is withdrawn (the promise
 *     layer's unsubscribe) and gets -ECANCELED, unless the promise has
 *     settled already and its outcome is on its way; one spawned but not
 *     started yet starts and sees every call fail;
 *   - runs the loop until every coroutine has returned; the scheduler,
 *     its stacks and every handle (joined or not) are freed at the end of
 *     rl_loop_close(), and are invalid after it.
 *
 * A coroutine that keeps waiting after -ECANCELED cannot: every call
 * fails at once while closing. Should the loop nevertheless go idle with a
 * coroutine suspended, rl_loop_close() returns -EBUSY, frees nothing and
 * may be called again.
 *
 * rl_coro_ctx_close() before that frees the scheduler at once when no
 * coroutine is alive (spawned and not returned), and refuses (-EBUSY,
 * nothing freed) while one is, from inside a coroutine, or once the
 * loop's close has begun (the loop frees it then).
 *
 * HANDLES. rl_coro_spawn() gives a handle (unless out is NULL: detached).
 * The handle stays valid until rl_coro_join() has returned the coroutine's
 * value, until rl_coro_detach(), or until the scheduler closes. A finished
 * coroutine gives its stack back to the pool at once; only its small
 * handle waits for the join.
 *
 * STACKS. Each stack is mmap'ed with a PROT_NONE guard page below it and
 * recycled through a pool, so a steady state of spawning makes no system
 * call. A coroutine gets its stack when it starts, not when it is
 * spawned: spawning costs no mapping, and a million coroutines spawned at
 * once run on a few hundred stacks (see start_window). One that cannot
 * get a stack when it starts never runs: it ends with -ENOMEM as its
 * value. Untouched stack pages cost no memory: a coroutine that stays
 * shallow uses about one page. Overflowing into the guard page ends the
 * process with SIGSEGV after a message on stderr naming the coroutine
 * (a handler on an alternate signal stack tells it apart from other
 * faults, which go to the previous handler). A frame larger than the guard
 * can jump over it: keep big buffers off coroutine stacks, or ask for a
 * bigger guard.
 *
 * FLOATING-POINT STATE. On x86-64 each coroutine has its own MXCSR and x87
 * control word: rounding modes, exception masks, x87 precision, and the
 * SSE exception flags. It starts with the control words of the code that
 * spawned it and keeps whatever it sets across every suspension. The code
 * that resumes a coroutine (a callback, a microtask, rl_coro_ctx_close())
 * gets back exactly the MXCSR and x87 control word it had when it resumed
 * it, flags included. The x87 exception flags (its status word) are the
 * thread's and never switched. AArch64 switches no floating-point control
 * or status: FPCR and FPSR are the thread's, shared by all.
 *
 * Everything here must be called on the loop thread.
 */
#ifndef RL_CORO_H
#define RL_CORO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "ringloop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Only what these headers declare is exported from the shared library. */
#pragma GCC visibility push(default)

typedef struct rl_coro rl_coro;
typedef struct rl_coro_ctx rl_coro_ctx;
typedef struct rl_coro_pool rl_coro_pool;

/* A coroutine's body. Its return value goes to rl_coro_join(); by the
 * loop's convention it is >= 0 or -errno, but any value passes. */
typedef int64_t (*rl_coro_fn)(void *arg);

/* The default usable stack size (a guard page comes on top). */
#define RL_CORO_STACK_DEFAULT (64u * 1024u)
/* The smallest stack rl_coro_spawn() accepts. */
#define RL_CORO_STACK_MIN (16u * 1024u)

/* ------------------------------------------------------------ stack pool */

/*
 * A pool of stacks. Each scheduler has a private one unless it is given
 * one to share: a pool outliving its schedulers keeps its stacks mapped
 * for the next loop (a benchmark opening a loop per run). A pool is used
 * by one thread at a time. guard_size 0 means one page.
 */
int rl_coro_pool_open(rl_coro_pool **out, size_t guard_size);

/* Unmaps every stack. Returns 0, or -EBUSY (and frees nothing) while a
 * stack is lent to a coroutine or a scheduler still shares the pool
 * (close it first). */
int rl_coro_pool_close(rl_coro_pool *pool);

struct rl_coro_pool_stats {
	size_t mapped;	 /* stacks mapped now */
	size_t idle;	 /* ... of which waiting in the pool */
	uint64_t maps;	 /* mmap calls made so far */
	uint64_t reuses; /* stacks handed out again without a mmap */
};

void rl_coro_pool_stats(const rl_coro_pool *pool,
			struct rl_coro_pool_stats *out);

/* ------------------------------------------------------------- scheduler */

/* The default of rl_coro_ctx_options.start_window. */
#define RL_CORO_START_WINDOW 256

struct rl_coro_ctx_options {
	size_t stack_size;  /* default for spawn; 0 = RL_CORO_STACK_DEFAULT */
	rl_coro_pool *pool; /* shared pool, or NULL for a private one */
	/* Start pacing: a coroutine due to start while this many coroutines
	 * of the scheduler wait for requests starts when one of those
	 * requests completes instead (coroutines already running never
	 * wait for it). Pacing never holds a start for good: when no
	 * coroutine started or finished for about two milliseconds (the
	 * waiters are a server's long-lived connections, idle or busy),
	 * another window's worth starts regardless.
	 * 0 = RL_CORO_START_WINDOW; SIZE_MAX: never. */
	size_t start_window;
};

/* Opens the coroutine scheduler of loop (one per loop is enough; opt may
 * be NULL). Returns 0 and sets *out, or -errno. */
int rl_coro_ctx_open(rl_loop *loop, rl_coro_ctx **out,
		     const struct rl_coro_ctx_options *opt);

/*
 * Frees the scheduler, its stacks and its handles, when no coroutine is
 * alive: 0, or -EBUSY (nothing freed) while one is, from inside a
 * coroutine, or once the loop's close has begun. rl_loop_close() closes
 * a scheduler with coroutines alive (see the top of this file).
 */
int rl_coro_ctx_close(rl_coro_ctx *sched);

rl_loop *rl_coro_ctx_loop(const rl_coro_ctx *sched);

struct rl_coro_ctx_stats {
	uint64_t spawned;
	uint64_t finished;
	size_t alive;	/* spawned and not finished */
	size_t handles; /* handles not yet joined, detached or freed */
	/* Starts the window let through because no coroutine had started
	 * or finished for a while (see start_window): each one may have
	 * made the window wider for a time. */
	uint64_t unpaced;
};

void rl_coro_ctx_stats(const rl_coro_ctx *sched, struct rl_coro_ctx_stats *out);

/* -------------------------------------------------------------- spawning */

struct rl_coro_options {
	size_t stack_size; /* usable bytes; 0 = the scheduler's default;
			     * rounded up to whole pages */
	const char *name;  /* for the overflow message; kept, not copied */
};

/*
 * Creates a coroutine running fn(arg). It starts from a microtask of the
 * loop, never inside rl_coro_spawn(), which may therefore be called before
 * rl_run() or from a coroutine. Starts keep spawn order. While many
 * coroutines wait for requests (see start_window) a start waits for one
 * of those to complete: ten thousand coroutines that each touched their
 * stack and then waited for their data do not fit in the caches, and the
 * reads flow as fast through a narrower window. Its stack is taken at
 * start, the most recently freed first (see STACKS above).
 * With out NULL the coroutine is detached. opt may be NULL. Returns 0, or
 * -EINVAL, -ENOMEM (no memory for its handle), -ECANCELED (scheduler
 * closing).
 */
int rl_coro_spawn(rl_coro_ctx *sched, rl_coro **out, rl_coro_fn fn, void *arg,
		  const struct rl_coro_options *opt);

/* Frees the handle when the coroutine is done, else when it finishes.
 * Returns 0, or -EINVAL when co is joined or detached already. */
int rl_coro_detach(rl_coro *co);

/* The running coroutine, or NULL outside any. */
rl_coro *rl_coro_self(void);
/* The running coroutine's loop, or NULL outside any. */
rl_loop *rl_coro_loop(void);
/* A coroutine's number (1, 2, ... per process) and name (may be NULL). */
uint64_t rl_coro_id(const rl_coro *co);
const char *rl_coro_name(const rl_coro *co);
/* Whether co has returned. */
int rl_coro_done(const rl_coro *co);

/* --------------------------------------- suspending calls (in coroutines) */

/*
 * Waits for co to return and gives its value; frees co's handle. Suspends.
 * -EDEADLK when co is the caller, -EINVAL when co is detached or joined
 * already (or of another scheduler), -ECANCELED when the scheduler closes
 * first.
 */
int64_t rl_coro_join(rl_coro *co);

/*
 * Goes to the back of the loop's microtask queue (rl_task_queue) and
 * continues when the microtasks before it - other coroutines starting or
 * yielding, promise reactions - have run. Completions are only collected
 * between drains of that queue, so a coroutine looping on yield alone
 * starves I/O; rl_coro_sleep(0) waits for the loop's next iteration
 * instead. Returns 0 (or -ECANCELED). Suspends.
 */
int rl_coro_yield(void);

/* Sleeps ms milliseconds on a loop timer. Returns 0. Suspends. */
int rl_coro_sleep(uint64_t ms);

/*
 * The loop's file requests (ringloop.h says what each does), each
 * suspending until it is done and returning its result: the fd of an
 * open, the bytes of a read or write (a write's are all of them), 0 for
 * the rest, or -errno. Suspends. Buffers, iovecs and statx structs may
 * live on the coroutine's stack.
 *
 * read_file comes in the forms every style has: into the caller's buffer
 * of len bytes (a larger file gives -EFBIG), and _grow, into a buffer the
 * loop grows to fit (RL_READ_FILE_GROW): *buf (NULL or malloc'ed, *cap
 * bytes) may be replaced, also when the read fails, and the caller frees
 * it. (The callback style's third form, a pooled buffer valid during the
 * callback, has no twin here: a coroutine keeps its data as long as it
 * likes.)
 */
int64_t rl_coro_fs_read_file(const char *path, void *buf, size_t len);
int64_t rl_coro_fs_read_file_grow(const char *path, void **buf, size_t *cap);
int64_t rl_coro_fs_write_file(const char *path, const void *buf, size_t len,
			      unsigned flags, unsigned mode);
int rl_coro_fs_open(const char *path, int flags, unsigned mode);
int rl_coro_fs_close(int fd);
int64_t rl_coro_fs_read(int fd, void *buf, size_t len, int64_t offset);
int64_t rl_coro_fs_readv(int fd, const struct iovec *iov, unsigned iovcnt,
			 int64_t offset);
int64_t rl_coro_fs_read_fixed(int fd, void *buf, size_t len, int64_t offset,
			      unsigned index);
int64_t rl_coro_fs_write(int fd, const void *buf, size_t len, int64_t offset);
int64_t rl_coro_fs_writev(int fd, const struct iovec *iov, unsigned iovcnt,
			  int64_t offset);
int64_t rl_coro_fs_write_fixed(int fd, const void *buf, size_t len,
			       int64_t offset, unsigned index);
int rl_coro_fs_stat(const char *path, struct statx *stx);
int rl_coro_fs_fstat(int fd, struct statx *stx);
int rl_coro_fs_fsync(int fd, unsigned flags);
int rl_coro_fs_ftruncate(int fd, int64_t length);
int rl_coro_fs_fallocate(int fd, int mode, int64_t offset, int64_t len);
int rl_coro_fs_unlink(const char *path);
int rl_coro_fs_rmdir(const char *path);
int rl_coro_fs_mkdir(const char *path, unsigned mode);
int rl_coro_fs_rename(const char *from, const char *to, unsigned flags);

/*
 * Sockets (ringloop.h, "Sockets"), each call suspending until it is done
 * and returning its result: the connected socket of an accept or a
 * connect (the caller's, to close with close(2) or rl_coro_fs_close()),
 * the bytes of a receive (0 at the end of the stream) or of a send (all
 * of them), 0 for shutdown, or -errno. timeout_ms > 0 bounds the wait:
 * past it the call returns -ETIMEDOUT (the request is cancelled; a
 * receive that got data just then returns the data, never losing it);
 * 0 waits as long as it takes; past RL_TIMEOUT_MAX_MS (ringloop.h) the
 * call is -EINVAL and does nothing. Buffers and msghdrs may live on the
 * coroutine's stack. An echo server:
 *
 *	static int64_t echo(void *arg)
 *	{
 *		int fd = (int)(intptr_t)arg;
 *		char buf[4096];
 *		int64_t n;
 *
 *		while ((n = rl_coro_net_recv(fd, buf, sizeof(buf), 0)) > 0)
 *			if (rl_coro_net_send(fd, buf, (size_t)n, 0) < 0)
 *				break;
 *		close(fd);
 *		return 0;
 *	}
 *	...	while ((fd = rl_coro_net_accept(lfd, 0)) >= 0)
 *			rl_coro_spawn(sched, NULL, echo, (void *)(intptr_t)fd,
 *				      NULL);
 *
 * accept takes one connection (rl_net_accept_one()); connect's flags are
 * enum rl_connect_flags. Datagrams: rl_net_udp() makes the socket.
 */
struct rl_addr;
struct msghdr;
int rl_coro_net_accept(int lfd, uint64_t timeout_ms);
int rl_coro_net_connect(const struct rl_addr *addr, unsigned flags,
			uint64_t timeout_ms);
int64_t rl_coro_net_recv(int fd, void *buf, size_t len, uint64_t timeout_ms);
int64_t rl_coro_net_send(int fd, const void *buf, size_t len,
			 uint64_t timeout_ms);
int rl_coro_net_shutdown(int fd, int how);
int64_t rl_coro_net_sendmsg(int fd, const struct msghdr *msg,
			    uint64_t timeout_ms);
int64_t rl_coro_net_recvmsg(int fd, struct msghdr *msg, uint64_t timeout_ms);

/*
 * Connections: a socket read and written as if blocking, with the loop's
 * receive stream underneath (one rl_net_recv_stream() per connection, in
 * the loop's provided buffers), so a read costs no submission when data
 * is flowing. The echo server:
 *
 *	static int64_t echo(void *arg)
 *	{
 *		rl_coro_conn *c;
 *		char buf[4096];
 *		int64_t n;
 *
 *		if (rl_coro_conn_open((int)(intptr_t)arg, &c) < 0)
 *			return close((int)(intptr_t)arg), 0;
 *		while ((n = rl_coro_conn_read(c, buf, sizeof(buf), 0)) > 0)
 *			if (rl_coro_conn_write(c, buf, (size_t)n, 0) < 0)
 *				break;
 *		rl_coro_conn_close(c);
 *		return 0;
 *	}
 *
 * rl_coro_conn_open() (in a coroutine) takes fd over: the connection
 * closes it. The receive stream starts with the first read.
 *
 * rl_coro_conn_read() returns at once what is buffered, up to len bytes;
 * when nothing is, it suspends until data comes and returns it. It
 * returns 0 at the end of the stream and -errno on an error (-ECONNRESET),
 * each only after every byte received before it was read, and again on
 * every later read. A peer's reset is -ECONNRESET on every backend, even
 * when a write took the kernel's one report of it (a TCP connection not
 * shut down on our side that the kernel has closed is a reset, not an
 * end). timeout_ms > 0: -ETIMEDOUT past it, and what arrives
 * later waits for the next read (no byte is lost). -EBUSY while another
 * coroutine reads the connection; -ECANCELED once it is closed (by the
 * loop) or when the scheduler closes. Data that arrives while nobody
 * reads waits in the loop's buffers, at most a few per connection: then
 * the receive stream pauses and the kernel keeps the rest, which slows
 * the peer down (TCP flow control), until a read empties the queue.
 *
 * rl_coro_conn_write() sends all len bytes, in order with the other
 * writes, and returns len or -errno (-EPIPE, -ECONNRESET, -ETIMEDOUT past
 * timeout_ms > 0: then a prefix may have gone out). Several coroutines may
 * write at once. rl_coro_conn_shutdown() ends the sending side (SHUT_WR):
 * the peer reads the end of the stream; reading goes on. Both suspend.
 *
 * rl_coro_conn_close() never suspends (it works while the scheduler
 * closes and outside coroutines): a read suspended on the connection
 * returns -ECANCELED, writes in flight are cancelled, and the socket is
 * closed and the connection freed once the kernel has let go of them.
 * The handle is invalid after it. Connections still open when the loop
 * closes are ended by rl_loop_close() (their reads return -ECANCELED;
 * closing them then is still fine) and freed at its end.
 *
 * rl_coro_conn_buffered() tells how many received bytes wait for a read.
 */
typedef struct rl_coro_conn rl_coro_conn;
int rl_coro_conn_open(int fd, rl_coro_conn **out);
int64_t rl_coro_conn_read(rl_coro_conn *conn, void *buf, size_t len,
			  uint64_t timeout_ms);
int64_t rl_coro_conn_write(rl_coro_conn *conn, const void *buf, size_t len,
			   uint64_t timeout_ms);
int rl_coro_conn_shutdown(rl_coro_conn *conn);
int rl_coro_conn_close(rl_coro_conn *conn);
int rl_coro_conn_fd(const rl_coro_conn *conn);
size_t rl_coro_conn_buffered(const rl_coro_conn *conn);

/*
 * Waits for a promise of the promise layer (promise.h) and consumes the
 * caller's reference to it. Returns 0 when it fulfilled, or its error
 * (< 0) when it rejected; *value (may be NULL) receives the value or the
 * rejection's detail. A promise settled already gives its outcome without
 * suspending. -ENOMEM for a NULL promise (a failed allocation upstream).
 * A value pointing into a combinator's array (all, all_settled, any) lives
 * only as long as the promise: to use it after the await, take a reference
 * of your own first (rl_promise_ref) and drop it when done.
 */
struct rl_promise;
struct rl_value;
int rl_coro_await(struct rl_promise *p, struct rl_value *value);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* RL_CORO_H */
