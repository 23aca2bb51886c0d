/* SPDX-License-Identifier: MIT */
/*
 * epoch.h - the loop's entry epoch, for the layers above the loop.
 *
 * rl__loop_epoch counts, per thread, every entry into and every return
 * from rl_run() and rl_loop_close(). While it stays the same, the thread
 * has not left the loop's dispatch (or stayed outside it), so state that
 * the dispatch keeps for the caller of rl_run() is still the caller's:
 * in particular the floating-point control words, which every callback
 * must hand back unchanged, as the SysV and AAPCS64 ABIs ask of every
 * function. The coroutine switch relies on that to read the resumer's
 * control words once per epoch instead of once per switch (coro.c).
 */
#ifndef RL_LOOP_EPOCH_H
#define RL_LOOP_EPOCH_H

#include <stdint.h>

/* Starts at 1, so that 0 never matches: a cache tagged 0 is empty. */
extern __thread uint64_t rl__loop_epoch __attribute__((tls_model("initial-exec")));

#endif
