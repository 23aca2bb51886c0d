/* SPDX-License-Identifier: MIT */
/*
 * promise.h - promises and combinators over the ringloop event loop.
 *
 * A promise settles once: fulfilled with a value, or rejected with an error
 * (a negative int: -errno, or a code of the program's own, see RL_EUSER).
 * Later settles are ignored and reported by their return value. Reactions
 * (then, catch, finally, combinator inputs) never run inside the call that
 * settles a promise or attaches a reaction: they run from the loop's
 * microtask queue (rl_task_queue), drained on the loop thread after every
 * batch of callbacks, in the order JavaScript would run them. Chains of any
 * length therefore run with a constant stack depth.
 *
 * THE CONTEXT. Promises and reaction records come from pools owned by a
 * struct rl_promise_ctx, one per loop, opened with rl_promise_ctx_open().
 * The pools grow in chunks and recycle records, so steady state does not
 * call malloc. The loop closes the context: rl_loop_close() cancels its
 * requests and timers (their promises reject with -ECANCELED), runs the
 * reactions that follow while the loop still works, and frees the
 * context at its very end; the context and every promise handle are
 * invalid after it. From the start of that close, request promises of
 * the context reject with -ECANCELED at once. rl_promise_ctx_close()
 * before that frees the context when no request, timer or microtask of
 * it is in flight, no connection of it is open and no subscription (a
 * coroutine's await) waits on one of its promises, and refuses (-EBUSY,
 * nothing freed) while one is, when called from one of its own
 * reactions, or once the loop's close has begun (the loop frees it
 * then, e.g. after a subscription that ran in that close called it).
 * Every promise handle becomes
 * invalid once the context is freed. rl_promise_ctx_live() counts live
 * promises: 0 when everything was freed.
 *
 * OWNERSHIP: REFERENCES MOVE. Every function that returns a promise gives
 * the caller one reference to it. Every function that takes a promise
 * argument CONSUMES the caller's reference to it (rl_then, rl_catch,
 * rl_finally, rl_all..., rl_promise_subscribe, the promise adopted by
 * rl_promise_adopt, and setting out->adopt in a reaction); the settling
 * calls (rl_promise_resolve, rl_promise_reject...) only borrow it. So a
 * chain is written without any bookkeeping:
 *
 *	p = rl_promise_fs_read_file(ctx, path, buf, len);
 *	p = rl_then(p, on_data, NULL, arg);
 *	p = rl_catch(p, on_error, arg);
 *	rl_promise_unref(p);		// not interested in the end result
 *
 * To keep using a promise after passing it on, take another reference
 * first with rl_promise_ref(). Drop a reference with rl_promise_unref().
 * A promise is freed when no reference is left; pending work keeps what it
 * needs alive by itself (a request in flight holds its promise, a reaction
 * holds the promise it will settle), so a dropped promise still runs its
 * chain to the end, and a promise nothing can settle any more (e.g. a
 * dropped rl_promise_new() one, or race of none) is freed with its
 * reactions. Functions taking a promise accept NULL (an earlier allocation
 * failure) and then return NULL themselves; NULL is returned only when
 * memory runs out.
 *
 * VALUES. A value is struct rl_value { int64_t i; void *p; }: a number, a
 * pointer, or both (a length and a data pointer). What each source gives:
 *
 *	rl_promise_fs_read_file   i = bytes read, p = buf (the caller's buffer)
 *	rl_promise_fs_read_file_grow  i = bytes read, p = the buffer, grown
 *				  (the caller's to free; rejected: p is it
 *				  too, or NULL if the submission failed)
 *	rl_promise_fs_read        i = bytes read (0 at EOF), p = buf
 *	  ..._read_fixed          the same
 *	rl_promise_fs_readv       i = bytes read, p = NULL
 *	rl_promise_fs_write       i = bytes written (all of them), p = NULL
 *	  ..._writev, _write_fixed, _write_file   the same
 *	rl_promise_fs_open        i = the fd (the program's to close), p = NULL
 *	rl_promise_fs_stat        i = 0, p = stx (the caller's struct statx)
 *	  ..._fstat               the same
 *	rl_promise_fs_close       i = 0, and so the rest: fsync, ftruncate,
 *				  fallocate, unlink, rmdir, mkdir, rename
 *	rl_promise_net_accept  i = the connected socket (the program's)
 *	rl_promise_net_connect the same
 *	rl_promise_net_recv    i = bytes received (0 at the end), p = buf
 *	rl_promise_net_send    i = bytes sent (all of them), p = NULL
 *	rl_promise_net_shutdown  i = 0
 *	rl_promise_net_sendmsg i = bytes sent, p = NULL
 *	rl_promise_net_recvmsg i = the datagram's size, p = msg
 *	rl_promise_sleep       i = 0
 *	rl_promise_timeout     what the promise it watches gives
 *	rl_all                 i = n, p = struct rl_value[n], in input order
 *	rl_all_settled         i = n, p = struct rl_settlement[n]
 *	rl_any                 the first fulfilment's value
 *	rl_race                the first settlement's value or error
 *
 * A rejection carries an error and a value too (usually {0, NULL}); any()
 * rejects with RL_EAGGREGATE and value i = n, p = struct rl_settlement[n],
 * every input's error in input order.
 *
 * The arrays of all(), all_settled() and any() belong to the combinator's
 * promise. They stay valid while that promise lives - and a promise that
 * settles with the same value (a then that passes it on, an adoption)
 * keeps the owner alive too, so the pointer stays good down the chain.
 * Buffers and structs the caller passed in (buf, stx) stay the caller's.
 *
 * All of this must be called on the loop thread. Promises of different
 * contexts (two loops, even on one thread) do not mix: a promise adopting
 * one of another context (rl_promise_adopt() says -EXDEV; a reaction's
 * adopt rejects the derived promise with -EXDEV), and a combinator given
 * one (its promise rejects with -EXDEV), are refused. Across loops, use
 * rl_promise_remote_new().
 */
#ifndef RL_PROMISE_H
#define RL_PROMISE_H

#include <stddef.h>
#include <stdint.h>

#include "ringloop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Only what these headers declare is exported from the shared library. */
#pragma GCC visibility push(default)

typedef struct rl_promise rl_promise;
typedef struct rl_promise_ctx rl_promise_ctx;

/* any() rejected because every input rejected (see rl_any). The promise
 * layer registers its description with rl_strerror_register() when a
 * context opens. */
#define RL_EAGGREGATE (-100000)
/* Program-defined error codes should be <= RL_EUSER, away from -errno. */
#define RL_EUSER (-200000)

struct rl_value {
	int64_t i;
	void *p;
};

/* The outcome of a settled promise: err == 0 fulfilled with value, err < 0
 * rejected with err (and value as its detail). */
struct rl_settlement {
	int err;
	struct rl_value value;
};

enum rl_promise_state {
	RL_PROMISE_PENDING = 0,
	RL_PROMISE_FULFILLED = 1,
	RL_PROMISE_REJECTED = 2,
};

/* ---------------------------------------------------------------- context */

/* Opens the promise context of loop. Returns 0 and sets *out, or -errno. */
int rl_promise_ctx_open(rl_loop *loop, rl_promise_ctx **out);

/* Frees the context and its pools (see above): 0, or -EBUSY while a
 * request, timer or microtask of the context is still in flight, while a
 * connection of it is open, a handle of rl_promise_remote_new() is out or
 * a subscription has not run (a coroutine awaits one of its promises),
 * from inside one of its reactions, or during the loop's close. */
int rl_promise_ctx_close(rl_promise_ctx *ctx);

/* Promises alive now (a debug count; 0 when nothing leaked). */
size_t rl_promise_ctx_live(const rl_promise_ctx *ctx);

rl_loop *rl_promise_ctx_loop(const rl_promise_ctx *ctx);

/* --------------------------------------------------------- basic promises */

/* A pending promise the program settles itself. */
rl_promise *rl_promise_new(rl_promise_ctx *ctx);
/* Promises already fulfilled with value, or rejected with err (< 0). */
rl_promise *rl_promise_resolved(rl_promise_ctx *ctx, struct rl_value value);
rl_promise *rl_promise_rejected(rl_promise_ctx *ctx, int err);

/*
 * Settle p, a promise from rl_promise_new() (-EPERM for any other: those
 * settle by themselves). They do not consume the caller's reference to p.
 * Return 0, or -EALREADY when p was settled (or resolved to another
 * promise) already; the later settle is then ignored. rl_promise_reject
 * needs err < 0 (-EINVAL otherwise). rl_promise_adopt resolves p to q: p
 * settles as q does (two microtasks later, like JavaScript's
 * resolve(thenable)); it consumes the reference to q, also when it fails.
 */
int rl_promise_resolve(rl_promise *p, struct rl_value value);
int rl_promise_reject(rl_promise *p, int err);
int rl_promise_reject_value(rl_promise *p, int err, struct rl_value value);
int rl_promise_adopt(rl_promise *p, rl_promise *q);

/*
 * Settling from another loop of a group, or from any thread. On p's loop,
 * rl_promise_remote_new() makes a handle that holds a reference to p and
 * keeps p's loop alive (rl_ref) until it is used; NULL without memory.
 * Any thread then settles p with it, once: the settlement travels to p's
 * loop as a message (rl_post) and settles p there as rl_promise_resolve()
 * or rl_promise_reject() would (a promise settled already ignores it), and
 * the handle is freed there. They return 0, or -ESHUTDOWN when p's loop is
 * closing (the handle is freed, p is not settled), -EINVAL for err >= 0
 * (the handle stays usable). rl_promise_remote_drop(), on p's loop, lets
 * go of a handle that will not be used. While a handle is out,
 * rl_promise_ctx_close() of p's context says -EBUSY. A handle is used
 * once: settling or dropping it again is a use after free.
 */
typedef struct rl_promise_remote rl_promise_remote;

rl_promise_remote *rl_promise_remote_new(rl_promise *p);
int rl_promise_remote_resolve(rl_promise_remote *r, struct rl_value value);
int rl_promise_remote_reject(rl_promise_remote *r, int err);
void rl_promise_remote_drop(rl_promise_remote *r);

rl_promise *rl_promise_ref(rl_promise *p);
void rl_promise_unref(rl_promise *p);

/* State, and the outcome once settled (*out untouched while pending). */
enum rl_promise_state rl_promise_state(const rl_promise *p);
enum rl_promise_state rl_promise_result(const rl_promise *p,
					struct rl_settlement *out);

/* --------------------------------------------------------------- reactions */

/*
 * What a reaction sees and decides, with JavaScript's meaning. reason is
 * the source's error (0 when it fulfilled); value starts as the source's
 * value and err starts at 0. So a handler that does nothing fulfils the
 * derived promise with the source's value - for a catch handler, that is
 * recovering, as a JavaScript handler that returns normally. The handler
 * may change value (fulfil with another value), set err < 0 (reject: the
 * "throw"; a catch handler rethrows with err = reason), or set adopt to a
 * promise (reference moved) whose outcome the derived promise will take,
 * as when a JavaScript handler returns a promise.
 */
struct rl_outcome {
	int err;
	struct rl_value value;
	rl_promise *adopt;
	int reason;
};

typedef void (*rl_reaction_fn)(struct rl_outcome *out, void *arg);

/*
 * then: when p fulfils, on_ok runs (NULL: pass the value on); when it
 * rejects, on_err runs (NULL: pass the error on). Returns the derived
 * promise. Consumes the reference to p.
 */
rl_promise *rl_then(rl_promise *p, rl_reaction_fn on_ok, rl_reaction_fn on_err,
		    void *arg);
/* then(p, NULL, on_err, arg). */
rl_promise *rl_catch(rl_promise *p, rl_reaction_fn on_err, void *arg);
/*
 * finally: fn runs on either outcome (out->reason and out->value show it);
 * the derived promise settles like p, unless fn throws (sets err < 0) or
 * sets adopt to a promise that rejects: then it rejects with that error.
 * A value fn sets is ignored. With adopt set, the derived promise waits
 * for that promise first.
 */
rl_promise *rl_finally(rl_promise *p, rl_reaction_fn fn, void *arg);

/*
 * The low-level hook for other layers (e.g. a coroutine's await): fn runs
 * once from a microtask when p has settled (a later microtask if p is
 * settled already), and receives the caller's reference to p, which it
 * must drop with rl_promise_unref() - after it is done with a value that
 * points into a combinator's array, which lives as long as p. If p can
 * never settle and nothing else holds it, p is freed and fn never runs.
 */
typedef void (*rl_settle_fn)(rl_promise *p, void *arg);
/* Returns 0, or -EINVAL (p NULL) / -ENOMEM: then fn never runs and the
 * reference to p is dropped. */
int rl_promise_subscribe(rl_promise *p, rl_settle_fn fn, void *arg);

/*
 * Withdraws the subscription of fn and arg to p while p is still pending:
 * fn will not run. Returns 0, or -ENOENT when there is no such pending
 * subscription (p settled already: fn's microtask is queued and fn will
 * run). p is borrowed, not consumed: the caller must hold a reference.
 */
int rl_promise_unsubscribe(rl_promise *p, rl_settle_fn fn, void *arg);

/* ------------------------------------------------------------- combinators */

/*
 * JavaScript's Promise.all/allSettled/any/race over ps[0..n-1]. They
 * consume the n references (ps itself stays the caller's and may be reused
 * at once). Inputs may be settled already; NULL inputs give NULL.
 *
 *   all:         fulfils with every value in input order (struct rl_value
 *                array); rejects with the first rejection; all of none
 *                fulfils at once.
 *   all_settled: never rejects; fulfils with a struct rl_settlement per
 *                input, in input order.
 *   any:         fulfils with the first fulfilment; when every input
 *                rejected, rejects with RL_EAGGREGATE, value.p = struct
 *                rl_settlement[n] holding each input's error in input
 *                order. any of none rejects at once (value.i = 0).
 *   race:        settles as the first input that settles; race of none
 *                never settles.
 */
rl_promise *rl_all(rl_promise_ctx *ctx, rl_promise *const *ps, size_t n);
rl_promise *rl_all_settled(rl_promise_ctx *ctx, rl_promise *const *ps,
			   size_t n);
rl_promise *rl_any(rl_promise_ctx *ctx, rl_promise *const *ps, size_t n);
rl_promise *rl_race(rl_promise_ctx *ctx, rl_promise *const *ps, size_t n);

/* -------------------------------------------------- loop request promises */

/*
 * Promises for the loop's requests, one per file operation of ringloop.h
 * (which says what each does), with the same arguments. A request that
 * fails to submit gives a promise rejected with that error. When the loop
 * closes, pending ones reject with -ECANCELED (or settle with their real
 * result). buf, iov, path and stx must stay valid until the promise
 * settles. The values are listed at the top of this file.
 *
 * read_file comes in the forms every style has: into the caller's buffer
 * of len bytes (a larger file rejects with -EFBIG), and _grow, into a
 * buffer the loop grows to fit (RL_READ_FILE_GROW): buf is NULL or
 * malloc'ed (cap bytes) and is handed over; the promise's value hands it
 * back (grown, maybe moved), rejected too, for the caller to free. (The
 * callback style's third form, a pooled buffer valid during the
 * callback, has no promise twin: a value outlives any callback.)
 */
rl_promise *rl_promise_fs_read_file(rl_promise_ctx *ctx, const char *path,
				    void *buf, size_t len);
rl_promise *rl_promise_fs_read_file_grow(rl_promise_ctx *ctx, const char *path,
					 void *buf, size_t cap);
rl_promise *rl_promise_fs_open(rl_promise_ctx *ctx, const char *path, int flags,
			       unsigned mode);
rl_promise *rl_promise_fs_read(rl_promise_ctx *ctx, int fd, void *buf,
			       size_t len, int64_t offset);
rl_promise *rl_promise_fs_readv(rl_promise_ctx *ctx, int fd,
				const struct iovec *iov, unsigned iovcnt,
				int64_t offset);
rl_promise *rl_promise_fs_read_fixed(rl_promise_ctx *ctx, int fd, void *buf,
				     size_t len, int64_t offset,
				     unsigned index);
rl_promise *rl_promise_fs_write(rl_promise_ctx *ctx, int fd, const void *buf,
				size_t len, int64_t offset);
rl_promise *rl_promise_fs_writev(rl_promise_ctx *ctx, int fd,
				 const struct iovec *iov, unsigned iovcnt,
				 int64_t offset);
rl_promise *rl_promise_fs_write_fixed(rl_promise_ctx *ctx, int fd,
				      const void *buf, size_t len,
				      int64_t offset, unsigned index);
rl_promise *rl_promise_fs_write_file(rl_promise_ctx *ctx, const char *path,
				     const void *buf, size_t len,
				     unsigned flags, unsigned mode);
rl_promise *rl_promise_fs_close(rl_promise_ctx *ctx, int fd);
rl_promise *rl_promise_fs_stat(rl_promise_ctx *ctx, const char *path,
			       struct statx *stx);
rl_promise *rl_promise_fs_fstat(rl_promise_ctx *ctx, int fd, struct statx *stx);
rl_promise *rl_promise_fs_fsync(rl_promise_ctx *ctx, int fd, unsigned flags);
rl_promise *rl_promise_fs_ftruncate(rl_promise_ctx *ctx, int fd,
				    int64_t length);
rl_promise *rl_promise_fs_fallocate(rl_promise_ctx *ctx, int fd, int mode,
				    int64_t offset, int64_t len);
rl_promise *rl_promise_fs_unlink(rl_promise_ctx *ctx, const char *path);
rl_promise *rl_promise_fs_rmdir(rl_promise_ctx *ctx, const char *path);
rl_promise *rl_promise_fs_mkdir(rl_promise_ctx *ctx, const char *path,
				unsigned mode);
rl_promise *rl_promise_fs_rename(rl_promise_ctx *ctx, const char *from,
				 const char *to, unsigned flags);
rl_promise *rl_promise_sleep(rl_promise_ctx *ctx, uint64_t ms);

/* -------------------------------------------------------------- sockets */

/*
 * The loop's socket requests (ringloop.h, "Sockets"), one promise each,
 * with the values listed at the top of this file. accept takes one
 * connection (rl_net_accept_one()); a server loops on it, or keeps a few
 * in flight. buf, addr and msg must stay valid until the promise settles.
 * Close a socket with rl_promise_fs_close() (or close(2)) once nothing is
 * in flight on it.
 *
 *	p = rl_promise_timeout(rl_promise_net_recv(ctx, fd, buf, len), 5000);
 *	p = rl_then(p, got_data, on_error, conn);
 */
rl_promise *rl_promise_net_accept(rl_promise_ctx *ctx, int lfd);
rl_promise *rl_promise_net_connect(rl_promise_ctx *ctx,
				   const struct rl_addr *addr, unsigned flags,
				   uint64_t timeout_ms);
rl_promise *rl_promise_net_recv(rl_promise_ctx *ctx, int fd, void *buf,
				size_t len);
rl_promise *rl_promise_net_send(rl_promise_ctx *ctx, int fd, const void *buf,
				size_t len, unsigned flags);
rl_promise *rl_promise_net_shutdown(rl_promise_ctx *ctx, int fd, int how);
rl_promise *rl_promise_net_sendmsg(rl_promise_ctx *ctx, int fd,
				   const struct msghdr *msg);
rl_promise *rl_promise_net_recvmsg(rl_promise_ctx *ctx, int fd,
				   struct msghdr *msg);

/*
 * Connections: reads from the loop's receive stream (one
 * rl_net_recv_stream() per connection, in the loop's provided buffers)
 * instead of one receive request per read, so a read costs no submission
 * while data flows. rl_promise_conn_open() takes fd over: the connection
 * closes it. The receive stream starts with the first read.
 *
 * rl_promise_conn_read() gives a promise of up to len bytes into buf:
 * fulfilled at once with what is buffered, else when data comes; value
 * i = the bytes (0 at the end of the stream), p = buf. It rejects with
 * the stream's error (-ECONNRESET...), the end and the error coming only
 * after every byte received before them was read, and again on every
 * later read. A peer's reset rejects with -ECONNRESET on every backend,
 * even when a write took the kernel's one report of it (a TCP connection
 * not shut down on our side that the kernel has closed is a reset, not
 * an end). timeout_ms > 0: rejects with -ETIMEDOUT past it, and what
 * arrives later waits for the next read (no byte is lost).
 * rl_promise_cancel() of a pending read withdraws it the same way (it
 * rejects with -ECANCELED, having taken no byte), and so does
 * rl_promise_timeout() of one (-ETIMEDOUT).
 * One read at a time: -EBUSY while one is pending; -ECANCELED once the
 * connection is closed (by the loop). Data that arrives while no read is
 * pending waits in the loop's buffers, at most a few per connection: then
 * the receive stream pauses and the kernel keeps the rest (TCP slows the
 * peer) until a read empties the queue.
 *
 * rl_promise_conn_write() is rl_promise_net_send() of all len bytes, in
 * order with the other writes; rl_promise_conn_shutdown() ends the
 * sending side (SHUT_WR, value i = 0). buf must stay valid until the
 * promise settles.
 *
 * rl_promise_conn_close(): a pending read rejects with -ECANCELED, writes
 * in flight fail (the socket is shut down under them), and the socket is
 * closed and the connection freed once nothing of it is in flight. The
 * handle is invalid after it. Connections still open when the loop closes
 * are ended by rl_loop_close() (their reads reject with -ECANCELED; the
 * reactions that follow may still close them) and freed at its end.
 * rl_promise_conn_buffered() tells how many received bytes wait for a
 * read.
 *
 *	static void got(struct rl_outcome *o, void *arg)	// an echo
 *	{
 *		struct conn *k = arg;
 *
 *		if (o->reason < 0 || o->value.i == 0) {
 *			rl_promise_conn_close(k->c);
 *			return;
 *		}
 *		rl_promise_unref(rl_promise_conn_write(k->c, k->buf,
 *						       (size_t)o->value.i));
 *		rl_promise_unref(rl_then(rl_promise_conn_read(k->c, k->buf,
 *							      sizeof(k->buf), 0),
 *					 got, got, k));
 *	}
 */
typedef struct rl_promise_conn rl_promise_conn;
int rl_promise_conn_open(rl_promise_ctx *ctx, int fd, rl_promise_conn **out);
rl_promise *rl_promise_conn_read(rl_promise_conn *conn, void *buf, size_t len,
				 uint64_t timeout_ms);
rl_promise *rl_promise_conn_write(rl_promise_conn *conn, const void *buf,
				  size_t len);
rl_promise *rl_promise_conn_shutdown(rl_promise_conn *conn);
int rl_promise_conn_close(rl_promise_conn *conn);
int rl_promise_conn_fd(const rl_promise_conn *conn);
size_t rl_promise_conn_buffered(const rl_promise_conn *conn);

/* ------------------------------------------- cancellation and timeouts */

/*
 * Cancels the loop request or timer behind p, a pending promise of this
 * file's request functions (rl_promise_fs_*, rl_promise_net_*,
 * rl_promise_sleep, rl_promise_conn_read): p then rejects with
 * -ECANCELED, or settles with the request's real result when it had
 * finished. p is borrowed. Returns 0,
 * -ENOENT when p is settled (or its request is done), -EALREADY when
 * cancelled already, -EINVAL for any other promise (those have no request
 * of their own: cancel the one they wait for).
 */
int rl_promise_cancel(rl_promise *p);

/*
 * A timeout: a promise that settles as p does, unless ms milliseconds
 * pass first. It is rl_race() of p and a sleep of ms that rejects with
 * -ETIMEDOUT, where the loser is cancelled, not left running: when p
 * settles first the sleep's timer is cancelled; when the sleep wins and p
 * is a request promise, p's request is cancelled, and the timeout's
 * promise rejects with -ETIMEDOUT once the request has stopped - or
 * takes p's outcome, when the request finished before the cancel reached
 * it (so a receive that got data is never reported as timed out, and its
 * bytes are never lost). For any other p, the timeout rejects with
 * -ETIMEDOUT when the sleep ends, and p goes on; if the loop closes
 * first (its close cancels the sleep), the timeout rejects with
 * -ECANCELED, as a request p would. A timeout longer than
 * RL_TIMEOUT_MAX_MS (ringloop.h) rejects with -EINVAL at once, and p goes
 * on. Consumes the reference to p; NULL when p is NULL or memory runs
 * out.
 */
rl_promise *rl_promise_timeout(rl_promise *p, uint64_t ms);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif /* RL_PROMISE_H */
