/* SPDX-License-Identifier: MIT */
/*
 * storage.h - what the storage scenarios need around their cells: their
 * files, made once per invocation; the hooks that run, untimed, around
 * every run (cell.h: before and after); and a subject's hold on the
 * random I/O file.
 *
 *   write: n file names in a fresh directory of a scratch directory; the
 *          directory is made before every run, and after it every file is
 *          read back, compared, and removed with it.
 *   cold:  K files (--cold-files) written and synced once; before every
 *          run their page cache is dropped and checked (cold.h).
 *   randread, randwrite: the large file (rand.h), laid out once; each
 *          subject opens it with O_DIRECT (a loop through rl_fs_open(), so
 *          that the epoll backend sends its reads to the pool) and has
 *          qd aligned buffers, registered with --fixed-bufs.
 */
#ifndef RINGBENCH_STORAGE_H
#define RINGBENCH_STORAGE_H

#include <stdbool.h>
#include <stddef.h>

#include "bench.h"
#include "cold.h"
#include "rand.h"

/* Each makes its files (once) and returns 0, or -errno after saying why.
 * content/size: what every write and cold file holds. */
int bench_storage_write_setup(unsigned n, const unsigned char *content,
			      size_t size);
int bench_storage_cold_setup(unsigned k, const unsigned char *content,
			     size_t size);
int bench_storage_rand_setup(void);

/* The sets, for a cell's context. */
const struct bench_fileset *bench_storage_writes(void);
const struct bench_fileset *bench_storage_cold(void);
const struct bench_randfile *bench_storage_randfile(void);

/* The hooks. */
int bench_write_before(struct bench_ctx *ctx);
int bench_write_after(struct bench_ctx *ctx);
int bench_cold_before(struct bench_ctx *ctx);
int bench_rand_after(struct bench_ctx *ctx);

/*
 * A subject's hold on the random I/O file: r gets qd lanes of buffers and
 * the file opened with O_DIRECT, on loop (NULL for the baselines: open(2)).
 * With loop, the buffers are registered when r->fixed, and a first read
 * through the loop makes sure it works: a loop whose knobs the kernel
 * refuses for direct I/O (IOPOLL without poll queues) fails here, with the
 * kernel's answer in why. Returns 0 or -errno.
 */
int bench_rand_subject_open(struct bench_rand *r, rl_loop *loop, unsigned qd,
			    bool write, char *why, size_t len);
void bench_rand_subject_close(struct bench_rand *r, rl_loop *loop);

/* Writes out what the write scenario left dirty (syncfs of its file
 * system), so that its write-back does not land in a later run. */
void bench_storage_sync(void);

/* Removes what the setups made (the rand file stays: it is reused). */
void bench_storage_cleanup(void);

#endif
