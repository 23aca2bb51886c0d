/* SPDX-License-Identifier: MIT */
/*
 * callback.h - the Node-like callback style over the loop.
 *
 *   rl_cb_fs_read_file(cbs, path, done, arg);
 *   void done(int err, const void *data, size_t len, void *arg);
 *
 * err is 0 or -errno. data (len bytes) is valid only during the callback:
 * the request and its buffer go back to a per-loop pool afterwards and are
 * reused, so steady-state reads allocate nothing. Callbacks run on the loop
 * thread, never inside rl_cb_fs_read_file().
 *
 * Ownership: rl_cb_ctx_open() makes the pool for one loop. Close the loop
 * first (pending reads then complete with -ECANCELED), then rl_cb_ctx_close().
 */
#ifndef RINGLOOP_CALLBACK_H
#define RINGLOOP_CALLBACK_H

#include <stddef.h>

#include "ringloop.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Only what these headers declare is exported from the shared library. */
#pragma GCC visibility push(default)

typedef struct rl_cb_ctx rl_cb_ctx;

typedef void (*rl_cb_data_fn)(int err, const void *data, size_t len,
				   void *arg);

/* Returns 0 and sets *out, or -ENOMEM. */
int rl_cb_ctx_open(rl_loop *loop, rl_cb_ctx **out);

/* Frees the pool. -EBUSY (and nothing freed) while reads are in flight. */
int rl_cb_ctx_close(rl_cb_ctx *cbs);

/* Reads the whole file. Returns 0, or -errno with done never called. */
int rl_cb_fs_read_file(rl_cb_ctx *cbs, const char *path,
		    rl_cb_data_fn done, void *arg);

/* Gives back pooled requests (and their buffers) not in use, keeping at
 * least keep of them; returns how many were freed. The pool grows under
 * load by itself and shrinks only when asked, off the hot path. */
size_t rl_cb_ctx_trim(rl_cb_ctx *cbs, size_t keep);

/* Requests in flight, and requests the pool holds (for tests). */
size_t rl_cb_ctx_in_flight(const rl_cb_ctx *cbs);
size_t rl_cb_ctx_pooled(const rl_cb_ctx *cbs);

#pragma GCC visibility pop

#ifdef __cplusplus
}
#endif
#endif
