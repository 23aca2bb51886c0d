/* SPDX-License-Identifier: MIT */
/*
 * direct_helpers.h - what the O_DIRECT tests share (test_fs_direct.c,
 * test_fs_aio_attack.c): a file opened O_DIRECT through the loop, files
 * of pattern blocks already on the disk, aligned buffers, a block checked
 * against its pattern, and whether the epoll backend is expected to take
 * direct I/O through Linux AIO.
 */
#ifndef RL_TEST_DIRECT_HELPERS_H
#define RL_TEST_DIRECT_HELPERS_H

#include <linux/magic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/vfs.h>

#include "fs_helpers.h"
#include "helpers.h"

/* The block of every direct request: a multiple of every disk's logical
 * block, and of the page. */
#define BS 4096

/* Opens path through the loop (so that epoll knows it is O_DIRECT); skips
 * the test where the file system has no O_DIRECT. */
static inline int dopen(rl_loop *loop, const char *path, int flags)
{
	struct tseen s = { 0 };
	rl_req req = { .data = &s };

	cr_assert_eq(rl_fs_open(loop, &req, path, flags | O_DIRECT | O_CLOEXEC,
				0644, tseen_cb),
		     0);
	trun(loop);
	cr_assert_eq(s.calls, 1);
	if (s.result == -EINVAL) {
		tclose(loop);
		cr_skip_test("%s: no O_DIRECT on this file system", tdir());
	}
	cr_assert_geq(s.result, 0, "open: %s", rl_strerror((int)s.result));
	return (int)s.result;
}

/* A file of nblocks blocks of the pattern of name, written back to the
 * disk, so that a direct read of it needs neither a writeback nor an
 * allocation. */
static inline const char *blocks_file(const char *name, unsigned nblocks)
{
	const char *path = tfile(name, (size_t)nblocks * BS);
	int fd = open(path, O_RDWR | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_eq(fsync(fd), 0);
	close(fd);
	return path;
}

/* n blocks, aligned for O_DIRECT, filled with 0xee. */
static inline unsigned char *dbufs(size_t n)
{
	unsigned char *p = NULL;

	cr_assert_eq(posix_memalign((void **)&p, BS, n * BS), 0);
	memset(p, 0xee, n * BS);
	return p;
}

/* Whether buf holds the block of name's pattern at off. */
static inline bool is_block(const char *name, const unsigned char *buf,
			    uint64_t off)
{
	for (size_t j = 0; j < BS; j++)
		if (buf[j] != tbyte(name, off + j))
			return false;
	return true;
}

static inline void check_block(const char *name, const unsigned char *buf,
			       uint64_t off)
{
	for (size_t j = 0; j < BS; j++)
		cr_assert_eq(buf[j], tbyte(name, off + j),
			     "byte %zu of the block at %llu", j,
			     (unsigned long long)off);
}

/* Where the epoll backend can be expected to take direct I/O through AIO
 * without falling back: a disk file system whose direct I/O honours
 * RWF_NOWAIT, and AIO not turned off. */
static inline bool aio_expected(const struct tp *tp)
{
	struct statfs sf;

	if (tp->backend != RL_BACKEND_EPOLL || (tp->flags & RL_NO_AIO))
		return false;
	return statfs(tdir(), &sf) == 0 && sf.f_type == EXT4_SUPER_MAGIC;
}

#endif
