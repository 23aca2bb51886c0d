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
 * nothing freed) while one is, or when called from one of its own
 * callbacks. The pooled read_file keeps at most 1 MiB of buffer per idle
 * request: a bigger one is freed when its request comes back.
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
typedef void (*rl_cb_data_fn)(int err, const void *data, size_t len,
			      void *arg);

/* Every other operation's: err 0 and the result, or err < 0 and 0. */
typedef void (*rl_cb_fn)(int err, int64_t value, void *arg);

/* Returns 0 and sets *out, or -ENOMEM. */
int rl_cb_ctx_open(rl_loop *loop, rl_cb_ctx **out);

/* Frees the pool: 0, or -EBUSY (and nothing freed) while requests are in
 * flight or from inside one of the context's callbacks. */
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
int rl_cb_fs_read(rl_cb_ctx *cbs, int fd, void *buf, size_t len,
		  int64_t offset, rl_cb_fn done, void *arg);
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
			size_t len, unsigned flags, unsigned mode, rl_cb_fn done,
			void *arg);
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
int rl_cb_fs_unlink(rl_cb_ctx *cbs, const char *path, rl_cb_fn done,
		    void *arg);
int rl_cb_fs_rmdir(rl_cb_ctx *cbs, const char *path, rl_cb_fn done,
		   void *arg);
int rl_cb_fs_mkdir(rl_cb_ctx *cbs, const char *path, unsigned mode,
		   rl_cb_fn done, void *arg);
int rl_cb_fs_rename(rl_cb_ctx *cbs, const char *from, const char *to,
		    unsigned flags, rl_cb_fn done, void *arg);

/* ---------------------------------------------------------------- pool */

/* Gives back pooled requests (and their buffers) not in use, keeping at
 * least keep of them; returns how many were freed. The pool grows under
 * load by itself and shrinks only when asked, off the hot path. */
size_t rl_cb_ctx_trim(rl_cb_ctx *cbs, size_t keep);

/* Requests in flight, requests the pool holds, and the bytes of buffer
 * its idle requests keep for the pooled read_file (at most 1 MiB each)
 * (for tests). */
size_t rl_cb_ctx_in_flight(const rl_cb_ctx *cbs);
size_t rl_cb_ctx_pooled(const rl_cb_ctx *cbs);
size_t rl_cb_ctx_buffered(const rl_cb_ctx *cbs);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
