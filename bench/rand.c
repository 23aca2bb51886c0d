/* SPDX-License-Identifier: MIT */
/*
 * rand.c - the random I/O file and its content (see rand.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rand.h"

#define LAYOUT_CHUNK (1u << 20)
#define SAMPLE	     64

void bench_pattern_fill(void *buf, size_t len, uint64_t off, uint64_t gen)
{
	uint64_t *w = buf, x = bench_rand_word(off);
	const uint64_t step = bench_rand_word(8) - bench_rand_word(0);

	for (size_t i = 0; i < len / 8; i++, x += step)
		w[i] = x ^ gen;
}

bool bench_pattern_check(const void *buf, size_t len, uint64_t off,
			 uint64_t *gen)
{
	const uint64_t *w = buf;
	uint64_t x = bench_rand_word(off), g = w[0] ^ x, bad = 0;
	const uint64_t step = bench_rand_word(8) - bench_rand_word(0);

	/* No early exit: the loop stays branch-free, and a block is either
	 * right (the common case) or the run fails anyway. */
	for (size_t i = 0; i < len / 8; i++, x += step)
		bad |= w[i] ^ x ^ g;
	*gen = g;
	return bad == 0;
}

bool bench_pattern_stamps(const void *buf, size_t len, uint64_t off,
			  uint64_t *gen)
{
	const uint64_t *w = buf;
	uint64_t g = w[0] ^ bench_rand_word(off), bad = 0;
	size_t last = len / 8 - 1;

	for (size_t i = 64; i < len / 8; i += 64)
		bad |= w[i] ^ bench_rand_word(off + 8 * i) ^ g;
	bad |= w[last] ^ bench_rand_word(off + 8 * last) ^ g;
	*gen = g;
	return bad == 0;
}

void bench_rand_begin(struct bench_ctx *ctx)
{
	struct bench_rand *r = ctx->rand;
	uint64_t now = bench_now_ns();

	r->rng = now | 1;
	r->gen = bench_rng_next(&r->rng) | 1;
	r->deadline = now + r->run_ns;
	r->issued = 0;
	r->nrecent = 0;
	ctx->ops = 0;
}

int bench_rand_verify(struct bench_ctx *ctx)
{
	struct bench_rand *r = ctx->rand;
	unsigned n =
		r->nrecent < BENCH_RAND_RECENT ? r->nrecent : BENCH_RAND_RECENT;
	unsigned char *buf;
	uint64_t gen;

	if (!r->write)
		return 0;
	if (posix_memalign((void **)&buf, 4096, r->bs))
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		ssize_t got = pread(r->fd, buf, r->bs, (off_t)r->recent[i]);

		if (got != (ssize_t)r->bs ||
		    !bench_pattern_check(buf, r->bs, r->recent[i], &gen) ||
		    gen != r->gen)
			ctx->errors++;
	}
	free(buf);
	return 0;
}

/* ------------------------------------------------------------- the file */

static void default_path(char *out, size_t len, uint64_t size)
{
	const char *tmp = getenv("TMPDIR");
	char label[32];
	struct stat st;

	if (size % (1ull << 30) == 0)
		snprintf(label, sizeof(label), "%lluG",
			 (unsigned long long)(size >> 30));
	else if (size % (1ull << 20) == 0)
		snprintf(label, sizeof(label), "%lluM",
			 (unsigned long long)(size >> 20));
	else
		snprintf(label, sizeof(label), "%llu",
			 (unsigned long long)size);
	/* In the repository, next to the results; it stays for the next run
	 * (bench/data is ignored by git). */
	if (stat("bench", &st) == 0 && S_ISDIR(st.st_mode) &&
	    (mkdir("bench/data", 0755) == 0 || errno == EEXIST)) {
		snprintf(out, len, "bench/data/rand-%s.dat", label);
		return;
	}
	snprintf(out, len, "%s/ringbench-rand-%s.dat",
		 tmp && *tmp ? tmp : "/tmp", label);
}

/* Reads back a sample of blocks: the first, the last, and random ones. */
static bool sample_ok(int fd, uint64_t size, unsigned char *buf)
{
	uint64_t rng = bench_now_ns() | 1, blocks = size / 4096, gen;

	for (unsigned i = 0; i < SAMPLE + 2; i++) {
		uint64_t b = i == 0   ? 0
			     : i == 1 ? blocks - 1
				      : bench_rng_below(&rng, blocks);

		if (pread(fd, buf, 4096, (off_t)(b * 4096)) != 4096 ||
		    !bench_pattern_check(buf, 4096, b * 4096, &gen))
			return false;
	}
	return true;
}

static int lay_out(int fd, const char *path, uint64_t size, unsigned char *buf)
{
	uint64_t t0 = bench_now_ns();

	fprintf(stderr, "ringbench: laying out %s (%llu MiB), once\n", path,
		(unsigned long long)(size >> 20));
	if (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)size) < 0)
		return -errno;
	/* Blocks allocated up front, so that the layout is written in place
	 * and randwrite later overwrites allocated blocks, as fio does. */
	if (fallocate(fd, 0, 0, (off_t)size) < 0 && errno != EOPNOTSUPP)
		return -errno;
	for (uint64_t off = 0; off < size; off += LAYOUT_CHUNK) {
		size_t len = size - off < LAYOUT_CHUNK ? (size_t)(size - off)
						       : LAYOUT_CHUNK;

		bench_pattern_fill(buf, len, off, 0);
		if (pwrite(fd, buf, len, (off_t)off) != (ssize_t)len)
			return errno ? -errno : -EIO;
	}
	if (fsync(fd) < 0)
		return -errno;
	fprintf(stderr, "ringbench: laid out in %.1f s\n",
		(double)(bench_now_ns() - t0) / 1e9);
	return 0;
}

int bench_randfile_prepare(struct bench_randfile *f, const char *path,
			   uint64_t size, size_t bs, bool content, bool keep)
{
	unsigned char *buf = NULL;
	struct statx stx;
	struct stat st;
	int fd, ret = 0;

	memset(f, 0, sizeof(*f));
	f->size = size;
	if (path)
		snprintf(f->path, sizeof(f->path), "%s", path);
	else
		default_path(f->path, sizeof(f->path), size);
	fd = open(f->path, O_RDWR | (keep ? 0 : O_CREAT) | O_DIRECT | O_CLOEXEC,
		  0644);
	if (fd < 0) {
		ret = -errno;
		fprintf(stderr, "ringbench: %s: %s%s\n", f->path,
			strerror(errno),
			ret == -EINVAL ? " (no O_DIRECT on this file system)"
				       : "");
		return ret;
	}
	f->dio_align = 512;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
	    (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align)
		f->dio_align = stx.stx_dio_offset_align;
	if (bs % f->dio_align || size % bs || size % 4096 || size < 4096) {
		fprintf(stderr,
			"ringbench: %s: the block size (%zu) must be a "
			"multiple of the file system's O_DIRECT alignment "
			"(%u), and the file size (%llu) a multiple of the "
			"block size and of 4096\n",
			f->path, bs, f->dio_align, (unsigned long long)size);
		close(fd);
		return -EINVAL;
	}
	if (posix_memalign((void **)&buf, 4096, LAYOUT_CHUNK)) {
		close(fd);
		return -ENOMEM;
	}
	if (fstat(fd, &st) < 0) {
		ret = -errno;
	} else if (keep && (uint64_t)st.st_size != size) {
		fprintf(stderr,
			"ringbench: %s: %lld bytes, not the %llu of --rand-size "
			"(--no-layout)\n",
			f->path, (long long)st.st_size,
			(unsigned long long)size);
		ret = -EINVAL;
	} else if (keep) {
		/* As it is. */
	} else if ((uint64_t)st.st_size != size ||
		   (content && !sample_ok(fd, size, buf))) {
		if (st.st_size)
			fprintf(stderr,
				"ringbench: %s is not what ringbench wrote "
				"(another program wrote over it?)\n",
				f->path);
		ret = lay_out(fd, f->path, size, buf);
		if (ret == 0 && !sample_ok(fd, size, buf))
			ret = -EIO;
		if (ret < 0)
			fprintf(stderr, "ringbench: laying out %s: %s\n",
				f->path, strerror(-ret));
	}
	free(buf);
	close(fd);
	return ret;
}
