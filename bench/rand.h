/* SPDX-License-Identifier: MIT */
/*
 * rand.h - randread and randwrite: the large file they work on, what its
 * blocks hold, and the state of a run that the styles share.
 *
 * The file (1 GiB by default) is made once and reused across runs and
 * invocations: bench/data/rand-<size>.dat, or under $TMPDIR when ringbench
 * does not run from the repository. Every 8-byte word at byte offset o
 * holds bench_rand_word(o) ^ gen, where gen is the generation of the write
 * that put its block there: 0 for the layout, a new value for every
 * randwrite run. A block read back is right when all its words agree with
 * its offset and with one generation, so a read of the wrong block, a
 * short or torn read, or stale data all show. Before a run of cells a
 * sample of blocks is read back; a file that fails (another program - fio's
 * randwrite - wrote over it) is laid out again, which never counts toward
 * a run.
 *
 * What a read is checked for: every read, the first word of each 512-byte
 * sector and the last word of the block, which must agree with its offset
 * and one generation (a wrong block, a block torn between two writes at
 * any sector, or stale data all show); one read in BENCH_RAND_FULL (and
 * randwrite's read-back), every byte. A whole check of every read touches
 * a block's cache lines straight after the device wrote them, and at high
 * depths that delays the next submissions enough to show in the IOPS
 * (docs/bench.md has the measurement); fio checks nothing unless asked.
 *
 * A run: rand->qd operations in flight, the lanes. Each lane issues one
 * operation at a random block (bench_rand_issue), and when it completes
 * (bench_rand_complete) issues the next while bench_rand_more() says the
 * run goes on: until rand->run_ns have passed since bench_rand_begin(), or
 * rand->run_ops operations were issued. Offsets come from one generator
 * per run, uniform over the file's blocks.
 */
#ifndef RINGBENCH_RAND_H
#define RINGBENCH_RAND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench.h"

/* randwrite checks the last blocks it wrote after every run. */
#define BENCH_RAND_RECENT 64
/* One read in this many is checked byte for byte. */
#define BENCH_RAND_FULL 16

struct bench_rand {
	/* The cell. */
	int fd;		     /* the file, opened with O_DIRECT */
	uint64_t blocks;     /* blocks of bs bytes in the file */
	size_t bs;	     /* bytes per operation */
	unsigned qd;	     /* operations in flight */
	bool write;	     /* randwrite */
	bool fixed;	     /* lane i uses registered buffer i */
	unsigned char *bufs; /* qd buffers of bs bytes, 4096-aligned */
	uint64_t *lane_off;  /* the offset each lane works on */
	uint64_t run_ns;     /* a run lasts this long... */
	uint64_t run_ops;    /* ...or issues this many operations */

	/* One run. */
	uint64_t gen; /* what randwrite writes in this run */
	uint64_t deadline;
	uint64_t issued;
	uint64_t rng;
	uint64_t recent[BENCH_RAND_RECENT]; /* randwrite: offsets written */
	unsigned nrecent;
};

static inline uint64_t bench_rand_word(uint64_t off)
{
	return (off + 1) * 0x9E3779B97F4A7C15ull;
}

/* len bytes (a multiple of 8) of the content at file offset off. */
void bench_pattern_fill(void *buf, size_t len, uint64_t off, uint64_t gen);
/* Whether buf holds a block at off of one generation (then in *gen). */
bool bench_pattern_check(const void *buf, size_t len, uint64_t off,
			 uint64_t *gen);
/* The same, on the first word of each 512-byte sector and the last word
 * only (len: a multiple of 512). */
bool bench_pattern_stamps(const void *buf, size_t len, uint64_t off,
			  uint64_t *gen);

/* xorshift64*: a uniform 64-bit value. */
static inline uint64_t bench_rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1Dull;
}

/* A block in [0, n), uniform. */
static inline uint64_t bench_rng_below(uint64_t *s, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)bench_rng_next(s) * n) >> 64);
}

/* Starts a run: its deadline, its generator, randwrite's generation. */
void bench_rand_begin(struct bench_ctx *ctx);

static inline bool bench_rand_more(const struct bench_rand *r)
{
	return r->run_ops ? r->issued < r->run_ops
			  : bench_now_ns() < r->deadline;
}

static inline unsigned char *bench_rand_buf(const struct bench_rand *r,
					    unsigned lane)
{
	return r->bufs + (size_t)lane * r->bs;
}

/* Picks lane's next block (and fills its buffer for randwrite), starts
 * its latency; returns the offset. */
static inline uint64_t bench_rand_issue(struct bench_ctx *ctx, unsigned lane)
{
	struct bench_rand *r = ctx->rand;
	uint64_t off = bench_rng_below(&r->rng, r->blocks) * r->bs;

	if (r->write)
		bench_pattern_fill(bench_rand_buf(r, lane), r->bs, off, r->gen);
	r->lane_off[lane] = off;
	r->issued++;
	bench_op_start(ctx, lane);
	return off;
}

/* Lane's operation finished with res: latency, count, check. */
static inline void bench_rand_complete(struct bench_ctx *ctx, unsigned lane,
				       int64_t res)
{
	struct bench_rand *r = ctx->rand;
	uint64_t gen;

	bench_op_done(ctx, lane);
	if (res != (int64_t)r->bs) {
		ctx->errors++;
	} else if (r->write) {
		r->recent[r->nrecent++ % BENCH_RAND_RECENT] = r->lane_off[lane];
	} else if (!(ctx->ops % BENCH_RAND_FULL
			     ? bench_pattern_stamps(bench_rand_buf(r, lane),
						    r->bs, r->lane_off[lane],
						    &gen)
			     : bench_pattern_check(bench_rand_buf(r, lane),
						   r->bs, r->lane_off[lane],
						   &gen))) {
		ctx->errors++;
	}
	ctx->ops++;
}

/* randwrite, after a run: reads back the last blocks it wrote (at most
 * BENCH_RAND_RECENT) and counts those not of this run's generation. */
int bench_rand_verify(struct bench_ctx *ctx);

/* ------------------------------------------------------------- the file */

struct bench_randfile {
	char path[512];
	uint64_t size;
	unsigned dio_align; /* O_DIRECT offset alignment its file system asks */
};

/*
 * Makes sure path (NULL: the default) is a file of size bytes holding the
 * pattern, laying it out when it is missing, of another size, or (when
 * content matters: randread) wrong. randwrite alone needs the size only:
 * it reads back what it wrote itself. Prints what it does on stderr.
 * Returns 0, or -errno after saying why (-EINVAL: O_DIRECT refused there,
 * or bs not aligned as it must be). With keep, never lays it out: a
 * missing file or one of another size is an error, and what is in it is
 * what the cells will read.
 */
int bench_randfile_prepare(struct bench_randfile *f, const char *path,
			   uint64_t size, size_t bs, bool content, bool keep);

#endif
