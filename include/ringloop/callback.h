/* SPDX-License-Identifier: MIT */
/*
 * callback.h - the Node-like callback style over the loop.
 *
 *   rl_cb_fs_read_file(cbs, path, done, arg);
 *   void done(int err, const void *data, size_t len, void *arg);
 *
 *   rl_cb_fs_write(cbs, fd, buf, len, -1, wrote, arg);
 *   void wrote(int err, int64_t value, void *arg);
 *
 * Every file operation of the loop (ringloop.h) has one here, with the
 * same arguments and results: the callback gets err 0 and the request's
 * result as value (the fd of an open, the bytes of a read or write, 0 for
 * the rest), or err -errno and value 0. A call that fails returns -errno
 * and its callback never runs. Callbacks run on the loop thread, never
 * inside the call that submitted them. Buffers, iovecs, paths and statx
 * structs passed in stay the caller's and must live until the callback.
 *
 * read_file comes in the three forms every style has:
 *
 *   rl_cb_fs_read_file       the layer's buffer, grown to fit the file
 *                            (RL_READ_FILE_GROW) and pooled: data is valid
 *                            only during the callback, and steady-state
 *                            reads allocate nothing.
 *   rl_cb_fs_read_file_buf   the caller's buffer of len bytes: data is buf;
 *                            a larger file fails with -EFBIG.
 *   rl_cb_fs_read_file_grow  the caller's buffer grown to fit: buf is NULL
 *                            or malloc'ed (cap bytes) and is handed over;
 *                            the callback hands it back as data (grown,
 *                            maybe moved; NULL only if there never was
 *                            one), on failure too, and the caller frees
 *                            it. Its capacity is at least len.
 *
 * Ownership: rl_cb_ctx_open() makes the pool of requests for one loop,
 * and the loop closes it: rl_loop_close() cancels the context's requests
 * in flight, runs their callbacks (with -ECANCELED, or the real result of
 * one that finished first) and frees the context; the handle is invalid
 * after it. From the start of that close, the context's operations
 * refuse with -ECANCELED. rl_cb_ctx_close() before that frees the context
 * at once when none of its requests is in flight, and refuses (-EBUSY,
 * nothing freed) while one is, while a connection or server still
 * finishes a close, when called from one of its own callbacks, or once
 * the loop's close has begun. The pooled read_file keeps at most 1 MiB
 * of buffer per idle request: a bigger one is freed when its request
 * comes back.
 */
#ifndef RINGLOOP_CALLBACK_H
#define RINGLOOP_CALLBACK_H

#include <stddef.h>
#include <stdint.h>

#include "ringloop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Only what these headers declare is exported from the shared library. */
#pragma GCC visibility push(default)

typedef struct rl_cb_ctx rl_cb_ctx;

/* read_file's callback: the data, or err < 0. */
typedef void (*rl_cb_data_fn)(int err, const void *data, size_t len, void *arg);

/* Every other operation's: err 0 and the result, or err < 0 and 0. */
typedef void (*rl_cb_fn)(int err, int64_t value, void *arg);

/* Returns 0 and sets *out, or -ENOMEM. */
int rl_cb_ctx_open(rl_loop *loop, rl_cb_ctx **out);

/* Frees the pool: 0, or -EBUSY (and nothing freed) while requests are in
 * flight, while a connection or server still finishes a close (run the
 * loop first), from inside one of the context's callbacks, or once the
 * loop's close has begun (the loop frees it then). */
int rl_cb_ctx_close(rl_cb_ctx *cbs);

/* ------------------------------------------------------------ read_file */

/* The three forms above. Each returns 0, or -errno with done never
 * called. */
int rl_cb_fs_read_file(rl_cb_ctx *cbs, const char *path, rl_cb_data_fn done,
		       void *arg);
int rl_cb_fs_read_file_buf(rl_cb_ctx *cbs, const char *path, void *buf,
			   size_t len, rl_cb_data_fn done, void *arg);
int rl_cb_fs_read_file_grow(rl_cb_ctx *cbs, const char *path, void *buf,
			    size_t cap, rl_cb_data_fn done, void *arg);

/* ------------------------------------------------- the other operations */

/* Each is its loop request (rl_fs_*, ringloop.h says what it does). */
int rl_cb_fs_open(rl_cb_ctx *cbs, const char *path, int flags, unsigned mode,
		  rl_cb_fn done, void *arg);
int rl_cb_fs_close(rl_cb_ctx *cbs, int fd, rl_cb_fn done, void *arg);
int rl_cb_fs_read(rl_cb_ctx *cbs, int fd, void *buf, size_t len, int64_t offset,
		  rl_cb_fn done, void *arg);
int rl_cb_fs_readv(rl_cb_ctx *cbs, int fd, const struct iovec *iov,
		   unsigned iovcnt, int64_t offset, rl_cb_fn done, void *arg);
int rl_cb_fs_read_fixed(rl_cb_ctx *cbs, int fd, void *buf, size_t len,
			int64_t offset, unsigned index, rl_cb_fn done,
			void *arg);
int rl_cb_fs_write(rl_cb_ctx *cbs, int fd, const void *buf, size_t len,
		   int64_t offset, rl_cb_fn done, void *arg);
int rl_cb_fs_writev(rl_cb_ctx *cbs, int fd, const struct iovec *iov,
		    unsigned iovcnt, int64_t offset, rl_cb_fn done, void *arg);
int rl_cb_fs_write_fixed(rl_cb_ctx *cbs, int fd, const void *buf, size_t len,
			 int64_t offset, unsigned index, rl_cb_fn done,
			 void *arg);
int rl_cb_fs_write_file(rl_cb_ctx *cbs, const char *path, const void *buf,
			size_t len, unsigned flags, unsigned mode,
			rl_cb_fn done, void *arg);
int rl_cb_fs_stat(rl_cb_ctx *cbs, const char *path, struct statx *stx,
		  rl_cb_fn done, void *arg);
int rl_cb_fs_fstat(rl_cb_ctx *cbs, int fd, struct statx *stx, rl_cb_fn done,
		   void *arg);
int rl_cb_fs_fsync(rl_cb_ctx *cbs, int fd, unsigned flags, rl_cb_fn done,
		   void *arg);
int rl_cb_fs_ftruncate(rl_cb_ctx *cbs, int fd, int64_t length, rl_cb_fn done,
		       void *arg);
int rl_cb_fs_fallocate(rl_cb_ctx *cbs, int fd, int mode, int64_t offset,
		       int64_t len, rl_cb_fn done, void *arg);
int rl_cb_fs_unlink(rl_cb_ctx *cbs, const char *path, rl_cb_fn done, void *arg);
int rl_cb_fs_rmdir(rl_cb_ctx *cbs, const char *path, rl_cb_fn done, void *arg);
int rl_cb_fs_mkdir(rl_cb_ctx *cbs, const char *path, unsigned mode,
		   rl_cb_fn done, void *arg);
int rl_cb_fs_rename(rl_cb_ctx *cbs, const char *from, const char *to,
		    unsigned flags, rl_cb_fn done, void *arg);

/* ------------------------------------------------------------- sockets */

/*
 * Sockets, Node-like: a server calls back once per connection; a
 * connection calls back with its data as it comes, writes with a
 * completion, ends its side, closes. The loop's socket calls (ringloop.h,
 * "Sockets") are underneath: on io_uring, one multishot accept per server
 * and one multishot receive per reading connection, into buffers the loop
 * provides (rl_options.net_bufs of net_buf_size bytes).
 *
 *	static void on_data(int err, const void *data, size_t len, void *arg)
 *	{
 *		rl_cb_conn *c = arg;
 *
 *		if (err < 0 || !len)		// an error, or the peer's end
 *			rl_cb_net_close(c, NULL, NULL);
 *		else				// echo it: hold the buffer
 *			rl_cb_net_write(c, rl_cb_net_hold(c), len, sent, c);
 *	}
 *	static void on_conn(int err, rl_cb_conn *c, void *arg)
 *	{
 *		if (!err)
 *			rl_cb_net_read_start(c, on_data, c);
 *	}
 *	rl_cb_net_listen(cbs, &addr, 0, 0, on_conn, NULL, &srv);
 *
 * (sent() gives the buffer back with rl_cb_net_release()). A connection
 * (rl_cb_conn) and a server (rl_cb_server) belong to the context: each
 * lives until its close has called back (or, when never closed, until the
 * context is freed, which closes its socket). Their sockets are the loop's
 * (non-blocking, close-on-exec) and are closed by rl_cb_net_close() and
 * rl_cb_net_server_close().
 *
 * Reading. rl_cb_net_read_start() starts the data callbacks: err 0 and
 * len > 0 for data (valid during the callback: copy it, or keep the
 * loop's buffer with rl_cb_net_hold()); err 0 and len 0 once, when the
 * peer has ended its side (the connection may still write); err < 0 once
 * when reading fails (-ECONNRESET...), times out (-ETIMEDOUT, see
 * rl_cb_net_set_timeout()), or the loop closes (-ECANCELED). No data
 * callback follows the end or an error. rl_cb_net_read_stop() pauses:
 * no data callback until the next read_start, and the kernel then keeps
 * what the peer sends (TCP slows the peer down). Data received before the
 * stop is kept and comes first after the next read_start; nothing is lost.
 * A peer's reset is err -ECONNRESET for reading on every backend, even
 * when a write took the kernel's one report of it (a TCP connection not
 * ended on our side, rl_cb_net_end(), that the kernel has closed is a
 * reset, not an end).
 *
 * Writing. rl_cb_net_write() sends all of buf, in order after the writes
 * before it; buf stays the caller's and must live until done runs
 * (err 0 and value len, or err < 0: -EPIPE, -ECONNRESET, -ECANCELED
 * after a close). The layer keeps no copy, so a peer that does not read
 * costs the writes in flight and nothing more: rl_cb_net_write_queued()
 * says how many bytes wait, and a server that stops reading while it is
 * high (read_stop, read_start from a write's callback) keeps its memory
 * bounded whatever the peer does.
 *
 * Ending. rl_cb_net_end() shuts down the writing side once every write
 * before it has gone out (the peer reads the end of the stream);
 * rl_cb_net_close() cancels what is in flight (reading ends with
 * -ECANCELED, unsent writes with -ECANCELED, and so does the done of an
 * rl_cb_net_end() still waiting for them), closes the socket, calls
 * done, and frees the connection: the handle is invalid after that
 * callback (and must not be used after rl_cb_net_close() except inside
 * the callbacks still due).
 *
 * The fd-level calls further down (rl_cb_net_accept, _recv, _send,
 * _shutdown, _sendmsg, _recvmsg) are the loop's requests on any socket,
 * with the callback of every other operation here: value is the new fd,
 * or the byte count, or 0.
 */
typedef struct rl_cb_server rl_cb_server;
typedef struct rl_cb_conn rl_cb_conn;

/* A new connection (err 0, conn), or a connection that could not be had
 * (err < 0, conn NULL). */
typedef void (*rl_cb_conn_fn)(int err, rl_cb_conn *conn, void *arg);

/*
 * Listens on addr (rl_net_listen(): backlog <= 0 means SOMAXCONN, flags
 * are enum rl_listen_flags) and calls on_conn for every connection it
 * accepts. on_conn with err < 0 is a notice: -EMFILE, -ENFILE, -ENOMEM
 * or -ENOBUFS when accepting ran out of fds or memory (the connections
 * wait in the backlog and the server tries again every
 * RL_CB_NET_RETRY_MS), any other error when the listener failed for good
 * (the server then accepts nothing more and waits for its close). Returns
 * 0 and sets *out, or -errno (-EADDRINUSE...): on_conn never runs then.
 */
#define RL_CB_NET_RETRY_MS 50
int rl_cb_net_listen(rl_cb_ctx *cbs, const struct rl_addr *addr, int backlog,
		     unsigned flags, rl_cb_conn_fn on_conn, void *arg,
		     rl_cb_server **out);
/* The listening socket (its address: rl_net_local_addr()). */
int rl_cb_net_server_fd(const rl_cb_server *srv);
/* Stops accepting and closes the listener; done (may be NULL) runs after
 * the last on_conn, then the server is freed. Connections it accepted go
 * on. Returns 0, or -EALREADY when closing already. */
int rl_cb_net_server_close(rl_cb_server *srv, rl_cb_fn done, void *arg);

/* Connects to addr (rl_net_connect(): flags are enum rl_connect_flags,
 * timeout_ms 0 for none): done gets the connection, or err < 0
 * (-ECONNREFUSED, -ETIMEDOUT, -ECANCELED...). */
int rl_cb_net_connect(rl_cb_ctx *cbs, const struct rl_addr *addr,
		      unsigned flags, uint64_t timeout_ms, rl_cb_conn_fn done,
		      void *arg);
/* Makes a connection of a connected stream socket the program has (a
 * socketpair, an fd from rl_cb_net_accept()); the connection owns fd from
 * then on. Returns 0, or -EINVAL, -ENOMEM. */
int rl_cb_net_wrap(rl_cb_ctx *cbs, int fd, rl_cb_conn **out);
int rl_cb_net_fd(const rl_cb_conn *conn);

/* Starts (or resumes) the data callbacks; calling it again while reading
 * replaces on_data and arg. Returns 0, or -EPIPE after the end or an
 * error was delivered, -ECANCELED when closing, -ENOMEM. */
int rl_cb_net_read_start(rl_cb_conn *conn, rl_cb_data_fn on_data, void *arg);
/* Pauses the data callbacks (see above). Returns 0, or -ENOENT when not
 * reading. */
int rl_cb_net_read_stop(rl_cb_conn *conn);
/* In a data callback: keeps its data (the loop's buffer) past the
 * callback and returns it, or NULL when there is none. Give it back with
 * rl_cb_net_release(): until then the loop cannot use the buffer. */
void *rl_cb_net_hold(rl_cb_conn *conn);
int rl_cb_net_release(rl_cb_conn *conn, void *data);
/* An idle timeout: while reading, when no data has come for ms, reading
 * ends with -ETIMEDOUT. 0 turns it off. Returns 0, or -EINVAL past
 * RL_TIMEOUT_MAX_MS (ringloop.h). */
int rl_cb_net_set_timeout(rl_cb_conn *conn, uint64_t ms);

/* Writes all of buf (see above); done may be NULL. Returns 0, or -EPIPE
 * after rl_cb_net_end(), -ECANCELED when closing, -ENOMEM. */
int rl_cb_net_write(rl_cb_conn *conn, const void *buf, size_t len,
		    rl_cb_fn done, void *arg);
/* Bytes of writes not completed yet. */
size_t rl_cb_net_write_queued(const rl_cb_conn *conn);
/* Ends the writing side after the writes before it (shutdown SHUT_WR);
 * done (may be NULL) gets 0 or -errno. Returns 0, or -EALREADY. */
int rl_cb_net_end(rl_cb_conn *conn, rl_cb_fn done, void *arg);
/* Closes the connection (see above); done may be NULL. Returns 0, or
 * -EALREADY when closing already. */
int rl_cb_net_close(rl_cb_conn *conn, rl_cb_fn done, void *arg);

/* The loop's requests on a socket fd, one callback each (value: the
 * accepted fd, which is the caller's; the bytes received, 0 at the end;
 * the bytes sent, all of them; 0). */
int rl_cb_net_accept(rl_cb_ctx *cbs, int lfd, rl_cb_fn done, void *arg);
int rl_cb_net_recv(rl_cb_ctx *cbs, int fd, void *buf, size_t len, rl_cb_fn done,
		   void *arg);
int rl_cb_net_send(rl_cb_ctx *cbs, int fd, const void *buf, size_t len,
		   unsigned flags, rl_cb_fn done, void *arg);
int rl_cb_net_shutdown(rl_cb_ctx *cbs, int fd, int how, rl_cb_fn done,
		       void *arg);
/* Datagrams (rl_net_udp() makes the socket): one sendmsg or recvmsg. */
int rl_cb_net_sendmsg(rl_cb_ctx *cbs, int fd, const struct msghdr *msg,
		      rl_cb_fn done, void *arg);
int rl_cb_net_recvmsg(rl_cb_ctx *cbs, int fd, struct msghdr *msg, rl_cb_fn done,
		      void *arg);

/* ---------------------------------------------------------------- pool */

/* Gives back pooled requests not in use, keeping at
 * least keep of them; returns how many were freed. The pool grows under
 * load by itself and shrinks only when asked, off the hot path. */
size_t rl_cb_ctx_trim(rl_cb_ctx *cbs, size_t keep);

/* Requests in flight and requests the pool holds (for tests). The
 * pooled read_file's buffers are the loop's (rl_fs_loans_out()). */
size_t rl_cb_ctx_in_flight(const rl_cb_ctx *cbs);
size_t rl_cb_ctx_pooled(const rl_cb_ctx *cbs);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
