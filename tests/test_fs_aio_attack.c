/* SPDX-License-Identifier: MIT */
/*
 * test_fs_aio_attack.c - hostile tests of direct I/O, aimed at the epoll
 * backend's Linux AIO path (loop/epoll_aio.c) and run on every backend:
 * the system's AIO contexts used up before a loop's first direct read
 * and between two loops, more requests than the AIO context holds mixed
 * with buffered reads and timers, a stale O_DIRECT hint (fcntl() took the
 * flag away) over a partly cached file, truncation and hole punching
 * under reads in flight, misaligned requests against the kernel's own
 * answer, cancels racing completions, the loop closed with hundreds of
 * requests in the kernel, the fd replaced while its requests are in the
 * kernel, and io_submit() denied by seccomp after the context was made.
 *
 * Every test counts callbacks exactly, ends with the loop closed and no
 * fd left, and stops by itself. test_fs_direct.c has the plain cases.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <linux/audit.h>
#include <linux/falloc.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "direct_helpers.h"
#include "fs_helpers.h"
#include "helpers.h"

/* The contexts the loop's AIO path asks the kernel for (epoll_aio.c). */
#define LOOP_AIO_EVENTS 512

struct dreq {
	rl_req req;
	int calls;
	unsigned char *buf; /* scribbled over by the callback, see fill_cb */
	size_t len;
};

static void dreq_cb(rl_req *req)
{
	((struct dreq *)req)->calls++;
}

static bool is_zero(const unsigned char *buf, size_t len)
{
	for (size_t j = 0; j < len; j++)
		if (buf[j])
			return false;
	return true;
}

static uint64_t aio_count(rl_loop *loop)
{
	struct rl_stats st;

	rl_loop_stats(loop, &st);
	return st.aio;
}

/* Reads n blocks of name at once (block i from block i % nblocks), checks
 * every one; the loop's AIO count before and after in *aio. */
static void read_blocks(rl_loop *loop, int fd, const char *name, unsigned n,
			unsigned nblocks, uint64_t *aio)
{
	struct dreq *r = calloc(n, sizeof(*r));
	unsigned char *bufs = dbufs(n);
	uint64_t before = aio_count(loop);

	cr_assert_not_null(r);
	for (unsigned i = 0; i < n; i++)
		cr_assert_eq(rl_fs_read(loop, &r[i].req, fd, bufs + i * BS, BS,
					(int64_t)(i % nblocks) * BS, dreq_cb),
			     0);
	trun(loop);
	for (unsigned i = 0; i < n; i++) {
		cr_assert_eq(r[i].calls, 1, "read %u: %d callbacks", i,
			     r[i].calls);
		cr_assert_eq(r[i].req.result, BS, "read %u: %lld", i,
			     (long long)r[i].req.result);
		check_block(name, bufs + i * BS, (uint64_t)(i % nblocks) * BS);
	}
	*aio = aio_count(loop) - before;
	free(bufs);
	free(r);
}

/* ------------------------------------------------- AIO contexts used up */

static long read_proc_long(const char *path)
{
	char buf[64] = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? strtol(buf, NULL, 10) : -1;
}

/*
 * What a test takes of the system's AIO events (/proc/sys/fs/aio-max-nr),
 * in a few big contexts. More than this left over is a machine set up
 * for it (the contexts' rings would pin too much memory): skip.
 */
#define HOG_MAX_EVENTS (1L << 20)
#define HOG_MAX_CTX    64

struct aio_hog {
	aio_context_t ctx[HOG_MAX_CTX];
	unsigned n;
	bool locked;
};

/*
 * The tests of this file that take every event hold the AIO events' lock
 * exclusive (tests/helpers.c) from before their loops' first direct read
 * to the end: each must see the limit it made, its loops that should have
 * a context must not meet another's limit, and no other test process with
 * a loop (Criterion runs them in parallel) may meet this one's.
 */
static void hog_lock(struct aio_hog *h)
{
	memset(h, 0, sizeof(*h));
	tlock_aio_events(true);
	h->locked = true;
}

/* Takes every AIO event the system has left (other processes, a parallel
 * test among them, may take or give some meanwhile: it goes on until
 * io_setup(1) fails). Skips the test where that is not sane. */
static void hog_take(struct aio_hog *h)
{
	long max, nr, chunk;

	cr_assert(h->locked, "hog_lock() first");
	max = read_proc_long("/proc/sys/fs/aio-max-nr");
	nr = read_proc_long("/proc/sys/fs/aio-nr");
	if (max < 0 || nr < 0)
		cr_skip_test("no /proc/sys/fs/aio-max-nr: no AIO here");
	if (max - nr > HOG_MAX_EVENTS)
		cr_skip_test("aio-max-nr leaves %ld events: too many to take",
			     max - nr);
	chunk = max - nr > 65536 ? 65536 : max - nr;
	while (chunk > 0 && h->n < HOG_MAX_CTX) {
		aio_context_t ctx = 0;

		if (syscall(SYS_io_setup, (unsigned)chunk, &ctx) == 0) {
			h->ctx[h->n++] = ctx;
			continue;
		}
		if (errno == ENOSYS)
			cr_skip_test("no Linux AIO in this kernel");
		cr_assert(errno == EAGAIN, "io_setup(%ld): %s", chunk,
			  strerror(errno));
		chunk /= 2;
	}
	/* Not even one event is left for the loop. */
	{
		aio_context_t ctx = 0;

		cr_assert_eq(syscall(SYS_io_setup, 1u, &ctx), -1,
			     "an AIO event is left after %u contexts", h->n);
		cr_assert_eq(errno, EAGAIN);
	}
}

static void hog_release(struct aio_hog *h)
{
	while (h->n)
		cr_assert_eq(syscall(SYS_io_destroy, h->ctx[--h->n]), 0);
}

static void hog_unlock(struct aio_hog *h)
{
	tlock_aio_events(false);
	h->locked = false;
}

/*
 * Every AIO event of the system taken (by this test, with io_setup())
 * at the loop's first direct read: the loop cannot make its context
 * and does its direct reads and writes in the pool, with the right
 * bytes, and stays with the pool once events are free again (its
 * contract: the kernel refused once, the pool for good). The events are
 * the whole system's: they are held for one read only, so that other
 * processes' loops (other tests of the suite) are not left without.
 */
BACKEND_TEST(fs_aio_attack, aio_events_used_up_before_the_first_direct_read,
	     .timeout = 60)
{
	const char *path = blocks_file("hog", 32);
	struct aio_hog hog;
	unsigned char *buf = dbufs(1);
	uint64_t aio;
	rl_loop *loop;
	int fd;

	hog_lock(&hog);
	loop = tloop(tp);
	fd = dopen(loop, path, O_RDWR);
	hog_take(&hog);
	/* The window in which other processes' loops (other tests) find
	 * no AIO either is kept short: one direct read, which makes the
	 * loop ask for its context, and the events go back. */
	read_blocks(loop, fd, "hog", 1, 32, &aio);
	hog_release(&hog);
	/* Events free again: the loop does not try again. */
	read_blocks(loop, fd, "hog", 48, 32, &aio);
	memset(buf, 0x3c, BS);
	cr_assert_eq(do_write(loop, fd, buf, BS, 5 * BS), BS);
	cr_assert_eq(aio_count(loop), 0, "%llu requests went through AIO",
		     (unsigned long long)aio_count(loop));
	cr_assert_eq(pread(fd, buf, BS, 5 * BS), BS);
	for (size_t j = 0; j < BS; j++)
		cr_assert_eq(buf[j], 0x3c);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	hog_unlock(&hog);
	free(buf);
}

/*
 * The limit reached between two loops: the first has its context (made
 * at its first direct read) and keeps using it; the second, opened and
 * reading once every event is taken, goes to the pool. Both read right.
 */
BACKEND_TEST(fs_aio_attack, aio_events_used_up_between_two_loops, .timeout = 60)
{
	const char *path = blocks_file("two", 16);
	struct aio_hog hog;
	uint64_t aio_a, aio_b;
	rl_loop *a, *b;
	int fda, fdb;

	hog_lock(&hog);
	a = tloop(tp);
	fda = dopen(a, path, O_RDONLY);
	read_blocks(a, fda, "two", 8, 16, &aio_a);
	if (aio_expected(tp))
		cr_assert_eq(aio_a, 8);
	b = tloop(tp);
	fdb = dopen(b, path, O_RDONLY);
	hog_take(&hog);
	/* Loop b's first direct read finds no event left (a short window,
	 * as above); a's context was made before. */
	read_blocks(b, fdb, "two", 1, 16, &aio_b);
	read_blocks(a, fda, "two", 32, 16, &aio_a);
	hog_release(&hog);
	read_blocks(b, fdb, "two", 32, 16, &aio_b);
	cr_assert_eq(aio_count(b), 0, "the second loop used AIO");
	if (aio_expected(tp))
		cr_assert_eq(aio_a, 32, "the first loop's context: %llu",
			     (unsigned long long)aio_a);
	cr_assert_eq(do_close(b, fdb), 0);
	cr_assert_eq(rl_loop_close(b), 0);
	cr_assert_eq(do_close(a, fda), 0);
	tclose(a);
	hog_unlock(&hog);
}

/* ------------------------------------ more than the context, mixed in */

struct tick {
	rl_timer t;
	int calls;
};

static void tick_cb(rl_timer *t, int status)
{
	cr_assert_eq(status, 0);
	((struct tick *)t)->calls++;
}

/*
 * More direct requests in flight than the AIO context holds (512):
 * 900 reads and 100 writes of a direct file, 200 buffered reads of
 * another file and timers that fall due while they are out, all
 * submitted at once. Every callback comes once, every block is right,
 * every write is on the disk.
 */
BACKEND_TEST(fs_aio_attack,
	     beyond_the_aio_context_mixed_with_buffered_and_timers,
	     .timeout = 60)
{
	enum { NR = 900, NW = 100, NB = 200, NT = 40, NBLK = 128 };
	const char *dpath = blocks_file("mixd", NBLK + NW);
	const char *bpath = spath("mixb");
	struct dreq *r = calloc(NR + NW + NB, sizeof(*r));
	struct tick ticks[NT];
	unsigned char *bufs = dbufs(NR + NW), *bb, *back = dbufs(1);
	rl_loop *loop;
	uint64_t aio0;
	int fd, bfd;

	/* It counts what went through AIO (first: its fd is the test's). */
	tlock_aio_events(false);

	tfile("mixb", 64 * 1024);
	bb = malloc((size_t)NB * 100);
	cr_assert(r && bb);
	loop = tloop(tp);
	fd = dopen(loop, dpath, O_RDWR);
	bfd = open_fd(loop, bpath, O_RDONLY | O_CLOEXEC, 0);
	aio0 = aio_count(loop);
	memset(ticks, 0, sizeof(ticks));
	for (unsigned i = 0; i < NR + NW + NB; i++) {
		if (i < NT)
			cr_assert_eq(rl_timer_start(loop, &ticks[i].t, i % 4, 0,
						    tick_cb),
				     0);
		if (i < NR) {
			cr_assert_eq(rl_fs_read(loop, &r[i].req, fd,
						bufs + (size_t)i * BS, BS,
						(int64_t)(i % NBLK) * BS,
						dreq_cb),
				     0);
		} else if (i < NR + NW) {
			unsigned k = i - NR;
			unsigned char *w = bufs + (size_t)i * BS;

			for (size_t j = 0; j < BS; j++)
				w[j] = tbyte("mixw",
					     (size_t)(NBLK + k) * BS + j);
			cr_assert_eq(rl_fs_write(loop, &r[i].req, fd, w, BS,
						 (int64_t)(NBLK + k) * BS,
						 dreq_cb),
				     0);
		} else {
			unsigned k = i - NR - NW;

			cr_assert_eq(rl_fs_read(loop, &r[i].req, bfd,
						bb + (size_t)k * 100, 100,
						(int64_t)k * 300, dreq_cb),
				     0);
		}
	}
	trun(loop);
	for (unsigned i = 0; i < NT; i++)
		cr_assert_eq(ticks[i].calls, 1, "timer %u", i);
	for (unsigned i = 0; i < NR + NW + NB; i++) {
		cr_assert_eq(r[i].calls, 1, "req %u: %d callbacks", i,
			     r[i].calls);
		cr_assert_eq(r[i].req.result, i < NR + NW ? BS : 100,
			     "req %u: %lld", i, (long long)r[i].req.result);
		if (i < NR)
			check_block("mixd", bufs + (size_t)i * BS,
				    (uint64_t)(i % NBLK) * BS);
		if (i >= NR + NW) {
			unsigned k = i - NR - NW;

			for (size_t j = 0; j < 100; j++)
				cr_assert_eq(bb[k * 100 + j],
					     tbyte("mixb", k * 300 + j));
		}
	}
	for (unsigned k = 0; k < NW; k++) {
		cr_assert_eq(pread(fd, back, BS, (off_t)(NBLK + k) * BS), BS);
		check_block("mixw", back, (uint64_t)(NBLK + k) * BS);
	}
	if (aio_expected(tp))
		cr_assert_geq(aio_count(loop) - aio0, LOOP_AIO_EVENTS / 2,
			      "AIO took %llu",
			      (unsigned long long)(aio_count(loop) - aio0));
	cr_assert_eq(do_close(loop, bfd), 0);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(bufs);
	free(back);
	free(bb);
	free(r);
}

/* ------------------------------------------- a stale O_DIRECT hint */

/* Drops path's pages from the page cache, then brings back only blocks
 * [first, first + n), with no readahead around them. */
static void cache_only(const char *path, unsigned first, unsigned n)
{
	unsigned char buf[BS];
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_eq(fdatasync(fd), 0);
	cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM), 0);
	for (unsigned i = first; i < first + n; i++)
		cr_assert_eq(pread(fd, buf, BS, (off_t)i * BS), BS);
	close(fd);
}

/*
 * fcntl(F_SETFL) takes O_DIRECT away from an fd the loop opened with it:
 * the epoll backend's hint goes stale and its reads are buffered ones,
 * which with RWF_NOWAIT stop short where the page cache does. A read of a
 * regular file that is partly cached still returns all it asked for, as
 * pread() and io_uring do, not the cached part only (and not data from
 * elsewhere): a short count would tell the caller the file ends there.
 */
BACKEND_TEST(fs_aio_attack, stale_hint_partly_cached_file_reads_in_full)
{
	enum { NBLK = 64, LEN = 16 * BS };
	const char *path = blocks_file("stale", NBLK);
	unsigned char *buf = dbufs(LEN / BS);
	struct dreq r;
	rl_loop *loop = tloop(tp);
	int fd = dopen(loop, path, O_RDONLY), fl;

	fl = fcntl(fd, F_GETFL);
	cr_assert_geq(fl, 0);
	cr_assert_eq(fcntl(fd, F_SETFL, fl & ~O_DIRECT), 0);
	cr_assert_eq(fcntl(fd, F_GETFL) & O_DIRECT, 0);
	for (int round = 0; round < 4; round++) {
		int64_t off = (int64_t)round * LEN;

		/* The first four blocks of the range are cached. */
		cache_only(path, (unsigned)(off / BS), 4);
		memset(buf, 0xee, LEN);
		memset(&r, 0, sizeof(r));
		cr_assert_eq(
			rl_fs_read(loop, &r.req, fd, buf, LEN, off, dreq_cb),
			0);
		trun(loop);
		cr_assert_eq(r.calls, 1);
		cr_assert_eq(
			r.req.result, LEN,
			"backend %d flags %#x, round %d: %lld bytes of %d, "
			"mid-file",
			tp->backend, tp->flags, round, (long long)r.req.result,
			LEN);
		for (unsigned i = 0; i < LEN / BS; i++)
			check_block("stale", buf + i * BS,
				    (uint64_t)off + i * BS);
	}
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(buf);
}

/*
 * The same with readv, and with a dup2() of a buffered fd of the same
 * file over the loop's direct fd (the hint as stale as above): all of
 * the iovecs are filled.
 */
BACKEND_TEST(fs_aio_attack, stale_hint_by_dup2_readv_reads_in_full)
{
	enum { NBLK = 32 };
	const char *path = blocks_file("stalev", NBLK);
	unsigned char *buf = dbufs(12);
	struct iovec iov[3];
	struct dreq r = { 0 };
	rl_loop *loop = tloop(tp);
	int fd = dopen(loop, path, O_RDONLY), bfd;

	bfd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(bfd, 0);
	cr_assert_eq(dup3(bfd, fd, O_CLOEXEC), fd);
	close(bfd);
	cache_only(path, 8, 2);
	for (int i = 0; i < 3; i++)
		iov[i] = (struct iovec){ buf + i * 4 * BS, 4 * BS };
	cr_assert_eq(rl_fs_readv(loop, &r.req, fd, iov, 3, 8 * BS, dreq_cb), 0);
	trun(loop);
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(r.req.result, 12 * BS, "backend %d flags %#x: %lld of %d",
		     tp->backend, tp->flags, (long long)r.req.result, 12 * BS);
	for (unsigned i = 0; i < 12; i++)
		check_block("stalev", buf + i * BS, (uint64_t)(8 + i) * BS);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(buf);
}

/*
 * The case rl_fs_open() documents: an fd the loop opened O_DIRECT closed
 * with close(2), and its number reused by the loop's own buffered open of
 * a partly cached file. The old mark is only a hint: the read returns
 * all it asked for, as on every backend.
 */
BACKEND_TEST(fs_aio_attack, stale_hint_number_reused_by_a_buffered_open)
{
	enum { NBLK = 32, LEN = 16 * BS };
	const char *dpath = blocks_file("reused_d", 1);
	const char *bpath = spath("reused_b");
	unsigned char *buf = dbufs(LEN / BS);
	struct dreq r = { 0 };
	rl_loop *loop;
	int fd, bfd;

	blocks_file("reused_b", NBLK);
	loop = tloop(tp);
	fd = dopen(loop, dpath, O_RDONLY);
	close(fd);
	bfd = open_fd(loop, bpath, O_RDONLY | O_CLOEXEC, 0);
	if (bfd != fd) {
		cr_assert_eq(dup3(bfd, fd, O_CLOEXEC), fd);
		close(bfd);
	}
	cache_only(bpath, 2, 2);
	cr_assert_eq(rl_fs_read(loop, &r.req, fd, buf, LEN, 2 * BS, dreq_cb),
		     0);
	trun(loop);
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(r.req.result, LEN, "backend %d flags %#x: %lld of %d",
		     tp->backend, tp->flags, (long long)r.req.result, LEN);
	for (unsigned i = 0; i < LEN / BS; i++)
		check_block("reused_b", buf + i * BS, (uint64_t)(2 + i) * BS);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(buf);
}

/*
 * The same number reused by the loop's own open, without O_DIRECT: that
 * open names a new, buffered file, so it drops the old mark. A read of
 * its cached blocks then takes the epoll fast path (or the pool with
 * RL_NO_INLINE), never Linux AIO, which only O_DIRECT fds get.
 */
BACKEND_TEST(fs_aio_attack, buffered_open_of_a_reused_number_drops_the_hint)
{
	const char *dpath = blocks_file("dropped_d", 1);
	const char *bpath = spath("dropped_b");
	unsigned char *buf = dbufs(1);
	struct dreq r = { 0 };
	struct rl_stats st0, st1;
	rl_loop *loop;
	int fd, bfd;

	blocks_file("dropped_b", 4);
	cache_only(bpath, 0, 4);
	loop = tloop(tp);
	fd = dopen(loop, dpath, O_RDONLY);
	close(fd);
	/* The lowest free number: the one just closed (no other thread of
	 * this test opens anything). */
	bfd = open_fd(loop, bpath, O_RDONLY | O_CLOEXEC, 0);
	cr_assert_eq(bfd, fd);
	rl_loop_stats(loop, &st0);
	cr_assert_eq(rl_fs_read(loop, &r.req, fd, buf, BS, 2 * BS, dreq_cb), 0);
	trun(loop);
	rl_loop_stats(loop, &st1);
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(r.req.result, BS);
	check_block("dropped_b", buf, 2 * BS);
	if (tp->backend == RL_BACKEND_EPOLL) {
		cr_assert_eq(st1.aio, st0.aio, "%llu by AIO",
			     (unsigned long long)(st1.aio - st0.aio));
		if (tp->flags & RL_NO_INLINE)
			cr_assert_eq(st1.pool_jobs - st0.pool_jobs, 1);
		else
			cr_assert_eq(st1.inline_completions -
					     st0.inline_completions,
				     1);
	}
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(buf);
}

/*
 * A readv of 1024 iovecs of 6 KiB over a file of which only the first 8
 * KiB are cached, through a plain buffered fd and through a direct one
 * whose hint went stale (fcntl()): the cached bytes come without
 * blocking and stop inside the second iovec; the rest must still come,
 * all 6 MiB, into the right iovecs, as preadv() and io_uring give them (a
 * continuation that takes only some of the iovecs left would stop short
 * in the middle of the file).
 */
BACKEND_TEST(fs_aio_attack, readv_of_many_iovecs_over_a_partly_cached_file)
{
	enum { NV = 1024, SEG = 6144, LEN = NV * SEG, NBLK = LEN / BS + 8 };
	const char *path = blocks_file("manyv", NBLK);
	struct iovec *iov = calloc(NV, sizeof(*iov));
	unsigned char *buf = dbufs(LEN / BS);
	rl_loop *loop;
	int fds[2], fl;

	cr_assert_not_null(iov);
	loop = tloop(tp);
	fds[0] = open_fd(loop, path, O_RDONLY | O_CLOEXEC, 0);
	fds[1] = dopen(loop, path, O_RDONLY);
	fl = fcntl(fds[1], F_GETFL);
	cr_assert_eq(fcntl(fds[1], F_SETFL, fl & ~O_DIRECT), 0);
	/* Iovec k takes segment k of the file into segment NV - 1 - k. */
	for (unsigned k = 0; k < NV; k++)
		iov[k] =
			(struct iovec){ buf + (size_t)(NV - 1 - k) * SEG, SEG };
	for (int f = 0; f < 2; f++) {
		struct dreq r = { 0 };

		cache_only(path, 0, 2);
		memset(buf, 0xee, LEN);
		cr_assert_eq(
			rl_fs_readv(loop, &r.req, fds[f], iov, NV, 0, dreq_cb),
			0);
		trun(loop);
		cr_assert_eq(r.calls, 1);
		cr_assert_eq(r.req.result, LEN,
			     "fd %d, backend %d flags %#x: %lld of %d", f,
			     tp->backend, tp->flags, (long long)r.req.result,
			     LEN);
		for (unsigned k = 0; k < NV; k++)
			for (size_t j = 0; j < SEG; j += 251)
				cr_assert_eq(
					buf[(size_t)(NV - 1 - k) * SEG + j],
					tbyte("manyv", (size_t)k * SEG + j),
					"fd %d: segment %u byte %zu", f, k, j);
	}
	cr_assert_eq(do_close(loop, fds[1]), 0);
	cr_assert_eq(do_close(loop, fds[0]), 0);
	tclose(loop);
	free(buf);
	free(iov);
}

/* ------------------------------ truncation and holes under the reads */

/*
 * 256 direct reads in flight (in the kernel where the backend can) while
 * the file is cut to 100 blocks and 100 bytes and blocks 10-29 are
 * punched out. Each read reports once: a whole block, of the file's
 * pattern or (where punched or cut) of zeros; a block past the new end
 * nothing or a block read before the cut; block 100 its 100 bytes (or
 * the whole block read before the cut). Never the buffer's filler.
 */
BACKEND_TEST(fs_aio_attack, reads_racing_truncate_and_hole_punch, .timeout = 60)
{
	enum { N = 256 };
	struct dreq *r = calloc(N, sizeof(*r));
	unsigned char *bufs = dbufs(N);
	const char *path;
	rl_loop *loop;
	int fd;

	cr_assert_not_null(r);
	for (int round = 0; round < 3; round++) {
		path = blocks_file("cut", N);
		loop = tloop(tp);
		fd = dopen(loop, path, O_RDWR);
		memset(bufs, 0xee, (size_t)N * BS);
		memset(r, 0, N * sizeof(*r));
		for (unsigned i = 0; i < N; i++)
			cr_assert_eq(rl_fs_read(loop, &r[i].req, fd,
						bufs + (size_t)i * BS, BS,
						(int64_t)i * BS, dreq_cb),
				     0);
		/* Round 0 cuts before the reads reach the kernel, the
		 * others once they are there. */
		if (round)
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		cr_assert_eq(
			fallocate(fd,
				  FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				  10 * BS, 20 * BS),
			0);
		cr_assert_eq(ftruncate(fd, 100 * BS + 100), 0);
		trun(loop);
		for (unsigned i = 0; i < N; i++) {
			int64_t res = r[i].req.result;
			unsigned char *b = bufs + (size_t)i * BS;
			bool data = res == BS &&
				    is_block("cut", b, (uint64_t)i * BS);

			cr_assert_eq(r[i].calls, 1, "read %u: %d callbacks", i,
				     r[i].calls);
			if (i < 100) {
				cr_assert_eq(res, BS, "read %u: %lld", i,
					     (long long)res);
				cr_assert(data || (i >= 10 && i < 30 &&
						   is_zero(b, BS)),
					  "read %u: bytes of neither", i);
			} else if (i == 100) {
				cr_assert(res == 100 || res == BS,
					  "read 100: %lld", (long long)res);
				if (res == 100)
					for (size_t j = 0; j < 100; j++)
						cr_assert_eq(
							b[j],
							tbyte("cut",
							      100 * BS + j));
				else
					cr_assert(data || is_zero(b, BS));
			} else {
				cr_assert(res == 0 || res == BS,
					  "read %u: %lld", i, (long long)res);
				if (res == BS)
					cr_assert(data || is_zero(b, BS),
						  "read %u: bytes of neither",
						  i);
			}
		}
		cr_assert_eq(do_close(loop, fd), 0);
		tclose(loop);
	}
	free(bufs);
	free(r);
}

/*
 * Writes AIO sends back (RWF_NOWAIT would have to allocate): into blocks
 * punched out of a written file, at the end of a file whose size is not
 * a multiple of the block, and far past the end. Each reports its
 * length once and is on the disk afterwards; the untouched blocks keep
 * their bytes.
 */
BACKEND_TEST(fs_aio_attack, writes_into_punched_holes_and_past_the_end)
{
	enum { NBLK = 64, N = 40 };
	const char *path = blocks_file("punch", NBLK);
	struct dreq r[N];
	int64_t offs[N];
	unsigned char *bufs = dbufs(N), *back = dbufs(1);
	rl_loop *loop = tloop(tp);
	int fd = dopen(loop, path, O_RDWR);

	cr_assert_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			       8 * BS, 24 * BS),
		     0);
	/* Blocks 0-31 (8-31 holes now), then the end cut to 64 blocks
	 * and 100 bytes, a block there and beyond, and 1 GiB out. */
	cr_assert_eq(ftruncate(fd, NBLK * BS + 100), 0);
	for (unsigned i = 0; i < N; i++) {
		if (i < 32)
			offs[i] = (int64_t)i * BS;
		else if (i < 38)
			offs[i] = (int64_t)(NBLK + i - 32) * BS;
		else
			offs[i] = ((int64_t)1 << 30) + (int64_t)(i - 38) * BS;
		for (size_t j = 0; j < BS; j++)
			bufs[i * BS + j] = tbyte("punchw", (size_t)offs[i] + j);
	}
	memset(r, 0, sizeof(r));
	for (unsigned i = 0; i < N; i++)
		cr_assert_eq(rl_fs_write(loop, &r[i].req, fd, bufs + i * BS, BS,
					 offs[i], dreq_cb),
			     0);
	trun(loop);
	for (unsigned i = 0; i < N; i++) {
		cr_assert_eq(r[i].calls, 1);
		cr_assert_eq(r[i].req.result, BS, "write %u at %lld: %lld", i,
			     (long long)offs[i], (long long)r[i].req.result);
	}
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(lseek(fd, 0, SEEK_END), offs[N - 1] + BS);
	for (unsigned i = 0; i < N; i++) {
		cr_assert_eq(pread(fd, back, BS, (off_t)offs[i]), BS);
		check_block("punchw", back, (uint64_t)offs[i]);
	}
	for (unsigned i = 32; i < NBLK; i++) {
		cr_assert_eq(pread(fd, back, BS, (off_t)i * BS), BS);
		check_block("punch", back, (uint64_t)i * BS);
	}
	close(fd);
	free(bufs);
	free(back);
}

/* ------------------------------------------------------ misalignment */

struct rw_case {
	const char *what;
	size_t buf_off; /* from a BS-aligned buffer */
	int64_t off;
	size_t len;
	int niov;	 /* 0: read/write, else readv/writev of niov */
	size_t iov0_len; /* readv/writev: the first iovec's length */
};

/* The kernel's answer for c on fd: preadv()/pwritev() on the same fd. */
static int64_t kernel_answer(int fd, const struct rw_case *c,
			     unsigned char *buf, bool write)
{
	struct iovec iov[2];
	int n = 1;
	ssize_t r;

	if (c->niov == 2) {
		iov[0] = (struct iovec){ buf + c->buf_off, c->iov0_len };
		iov[1] = (struct iovec){ buf + c->buf_off + c->iov0_len,
					 c->len - c->iov0_len };
		n = 2;
	} else {
		iov[0] = (struct iovec){ buf + c->buf_off, c->len };
	}
	r = write ? pwritev(fd, iov, n, (off_t)c->off)
		  : preadv(fd, iov, n, (off_t)c->off);
	return r < 0 ? -errno : r;
}

static int64_t loop_answer(rl_loop *loop, int fd, const struct rw_case *c,
			   unsigned char *buf, bool write)
{
	struct iovec iov[2];
	struct one o;
	rl_req *req = one_req(&o);
	int ret;

	if (c->niov == 2) {
		iov[0] = (struct iovec){ buf + c->buf_off, c->iov0_len };
		iov[1] = (struct iovec){ buf + c->buf_off + c->iov0_len,
					 c->len - c->iov0_len };
		ret = write ? rl_fs_writev(loop, req, fd, iov, 2, c->off,
					   tseen_cb)
			    : rl_fs_readv(loop, req, fd, iov, 2, c->off,
					  tseen_cb);
	} else {
		ret = write ? rl_fs_write(loop, req, fd, buf + c->buf_off,
					  c->len, c->off, tseen_cb)
			    : rl_fs_read(loop, req, fd, buf + c->buf_off,
					 c->len, c->off, tseen_cb);
	}
	if (ret < 0)
		return ret; /* refused at submission: compared the same */
	return one_result(loop, &o);
}

/*
 * Misaligned and edge-case direct reads and writes (buffer, offset,
 * length, iovec lengths; at, across and past the end of a file of 5
 * blocks and 1 byte; huge offsets): the loop's result is what preadv()
 * and pwritev() say on the same fd, on every backend, and the bytes read
 * are the same. Alignment comes from the kernel (STATX_DIOALIGN), so the
 * cases that are legal on this disk are also tried.
 */
BACKEND_TEST(fs_aio_attack, misaligned_and_edge_requests_answer_as_the_kernel)
{
	const size_t size = 5 * BS + 1;
	const char *path = tfile("edge", size);
	struct statx stx;
	size_t ma, oa;
	unsigned char *lbuf = dbufs(8), *kbuf = dbufs(8);
	rl_loop *loop = tloop(tp);
	int fd = dopen(loop, path, O_RDWR);

	cr_assert_eq(statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx), 0);
	ma = (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_mem_align
		     ? stx.stx_dio_mem_align
		     : 512;
	oa = (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align
		     ? stx.stx_dio_offset_align
		     : 512;
	{
		const struct rw_case cases[] = {
			{ "aligned", 0, BS, BS, 0, 0 },
			{ "buffer +1", 1, BS, BS, 0, 0 },
			{ "buffer +mem_align", ma, BS, BS, 0, 0 },
			{ "offset +1", 0, BS + 1, BS, 0, 0 },
			{ "offset +offset_align", 0, BS + (int64_t)oa, BS, 0,
			  0 },
			{ "length 1", 0, 0, 1, 0, 0 },
			{ "length offset_align", 0, 0, oa, 0, 0 },
			{ "length BS+1", 0, 0, BS + 1, 0, 0 },
			{ "length 0", 0, BS, 0, 0, 0 },
			{ "length 0, offset +1", 0, BS + 1, 0, 0, 0 },
			{ "at the end", 0, 5 * BS, BS, 0, 0 },
			{ "across the end", 0, 4 * BS, 2 * BS, 0, 0 },
			{ "past the end", 0, 8 * BS, BS, 0, 0 },
			{ "huge offset", 0, (int64_t)1 << 50, BS, 0, 0 },
			{ "offset near the maximum", 0,
			  INT64_MAX & ~(int64_t)(BS - 1), BS, 0, 0 },
			{ "iov aligned", 0, 0, 2 * BS, 2, BS },
			{ "iov first length +1", 0, 0, 2 * BS, 2, BS + 1 },
			{ "iov first length offset_align", 0, 0, 2 * BS, 2,
			  oa },
			{ "iov across the end", 0, 4 * BS, 3 * BS, 2, BS },
			{ "iov buffer +1", 1, 0, 2 * BS, 2, BS },
		};

		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			const struct rw_case *c = &cases[i];
			int64_t want, got;

			memset(lbuf, 0xee, 8 * BS);
			memset(kbuf, 0xee, 8 * BS);
			want = kernel_answer(fd, c, kbuf, false);
			got = loop_answer(loop, fd, c, lbuf, false);
			cr_assert_eq(got, want, "read, %s: %lld, preadv %lld",
				     c->what, (long long)got, (long long)want);
			cr_assert(memcmp(lbuf, kbuf, 8 * BS) == 0,
				  "read, %s: other bytes", c->what);
		}
		/* Writes: the misaligned cases only (the aligned ones are
		 * the other tests'), of the same bytes by both. */
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			const struct rw_case *c = &cases[i];
			int64_t want, got;

			if (!c->len ||
			    (!strstr(c->what, "+1") &&
			     strcmp(c->what, "length 1") != 0 &&
			     strcmp(c->what, "offset near the maximum") != 0))
				continue;
			/* Some are legal here (the disk's DMA alignment
			 * may be finer than a sector): then both write. */
			want = kernel_answer(fd, c, kbuf, true);
			got = loop_answer(loop, fd, c, lbuf, true);
			cr_assert_eq(got, want, "write, %s: %lld, pwritev %lld",
				     c->what, (long long)got, (long long)want);
		}
	}
	/* No iovec at all, at an aligned and a misaligned offset. */
	for (int k = 0; k < 2; k++) {
		struct iovec none = { lbuf, 0 };
		int64_t off = k ? BS + 1 : BS;
		int64_t want = sys(preadv(fd, &none, 0, (off_t)off)), got;
		struct one o;

		cr_assert_eq(rl_fs_readv(loop, one_req(&o), fd, &none, 0, off,
					 tseen_cb),
			     0);
		got = one_result(loop, &o);
		cr_assert_eq(got, want, "readv of no iovec at %lld: %lld, %lld",
			     (long long)off, (long long)got, (long long)want);
		want = sys(pwritev(fd, &none, 0, (off_t)off));
		cr_assert_eq(rl_fs_writev(loop, one_req(&o), fd, &none, 0, off,
					  tseen_cb),
			     0);
		got = one_result(loop, &o);
		cr_assert_eq(got, want,
			     "writev of no iovec at %lld: %lld, %lld",
			     (long long)off, (long long)got, (long long)want);
	}
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(lbuf);
	free(kbuf);
}

/* ------------------------------------------------ cancel vs completion */

#define SCRIBBLE 0x5a

/* The callback scribbles over the request's buffer after checking it:
 * a kernel still writing to it afterwards (a read) would leave file
 * bytes there, one still reading it (a write) would put the scribble on
 * the disk. */
static const char *fill_name;

static void fill_cb(rl_req *req)
{
	struct dreq *d = (struct dreq *)req;

	d->calls++;
	if (req->op == RL_OP_READ && req->result == BS)
		cr_assert(is_block(fill_name, d->buf, (uint64_t)req->offset),
			  "a read that says BS holds its block");
	memset(d->buf, SCRIBBLE, d->len);
}

struct canceller {
	rl_timer t;
	rl_loop *loop;
	struct dreq *reqs;
	unsigned n;
};

static void cancel_all(rl_loop *loop, struct dreq *reqs, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		int ret = rl_cancel(loop, &reqs[i].req);

		cr_assert(ret == 0 || ret == -EALREADY || ret == -ENOENT,
			  "cancel %u: %d", i, ret);
	}
}

static void cancel_timer_cb(rl_timer *t, int status)
{
	struct canceller *c = (struct canceller *)t;

	cr_assert_eq(status, 0);
	cancel_all(c->loop, c->reqs, c->n);
}

/* The first request's callback cancels the others. */
static struct canceller *in_cb_canceller;

static void cancelling_cb(rl_req *req)
{
	fill_cb(req);
	cancel_all(in_cb_canceller->loop, in_cb_canceller->reqs + 1,
		   in_cb_canceller->n - 1);
}

/*
 * Cancels racing the completion of direct reads and writes, rounds of
 * a few requests: cancelled right after submission, after a pass of
 * the loop (in the kernel) and after spins of different lengths, from
 * a timer due at once or a moment later, from another request's
 * callback. Each callback comes once, with the whole length or
 * -ECANCELED; a read that says BS holds its block; no buffer is
 * touched after its callback; the file holds only what was written
 * whole.
 */
BACKEND_TEST(fs_aio_attack, cancel_racing_completion, .timeout = 60)
{
	enum { N = 16, ROUNDS = 240, NBLK = 64 };
	const char *path = blocks_file("race", NBLK);
	struct dreq r[N];
	struct canceller c;
	unsigned char *bufs = dbufs(N), *back = dbufs(1);
	rl_loop *loop = tloop(tp);
	int fd = dopen(loop, path, O_RDWR);
	unsigned done_full = 0, cancelled = 0;

	fill_name = "race";
	for (unsigned round = 0; round < ROUNDS; round++) {
		unsigned how = round % 7;

		memset(r, 0, sizeof(r));
		memset(&c, 0, sizeof(c));
		c.loop = loop;
		c.reqs = r;
		c.n = N;
		in_cb_canceller = &c;
		for (unsigned i = 0; i < N; i++) {
			unsigned blk = (round * 5 + i * 3) % NBLK;
			unsigned char *b = bufs + (size_t)i * BS;
			rl_req_cb cb =
				how == 6 && i == 0 ? cancelling_cb : fill_cb;

			r[i].buf = b;
			r[i].len = BS;
			if (i % 4 == 3) {
				/* Writes put the file's own bytes back. */
				for (size_t j = 0; j < BS; j++)
					b[j] = tbyte("race",
						     (size_t)blk * BS + j);
				cr_assert_eq(rl_fs_write(loop, &r[i].req, fd, b,
							 BS, (int64_t)blk * BS,
							 cb),
					     0);
			} else {
				memset(b, 0xee, BS);
				cr_assert_eq(rl_fs_read(loop, &r[i].req, fd, b,
							BS, (int64_t)blk * BS,
							cb),
					     0);
			}
		}
		switch (how) {
		case 0:
			cancel_all(loop, r, N);
			break;
		case 1:
		case 2:
		case 3:
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
			tspin_us(how == 1 ? 0 : how == 2 ? 1 : 100);
			cancel_all(loop, r, N);
			break;
		case 4:
		case 5:
			cr_assert_eq(rl_timer_start(loop, &c.t, how - 4, 0,
						    cancel_timer_cb),
				     0);
			break;
		default:
			break;
		}
		trun(loop);
		for (unsigned i = 0; i < N; i++) {
			int64_t res = r[i].req.result;

			cr_assert_eq(r[i].calls, 1,
				     "round %u req %u: %d callbacks", round, i,
				     r[i].calls);
			cr_assert(res == BS || res == -ECANCELED,
				  "round %u req %u: %lld", round, i,
				  (long long)res);
			if (res == BS)
				done_full++;
			else
				cancelled++;
		}
		if (how == 4 || how == 5)
			rl_timer_stop(loop, &c.t);
		/* Nothing wrote into a buffer after its callback. */
		for (size_t j = 0; j < (size_t)N * BS; j++)
			cr_assert_eq(bufs[j], SCRIBBLE,
				     "round %u: byte %zu of buffer %zu changed "
				     "after its callback",
				     round, j % BS, j / BS);
	}
	cr_assert_gt(cancelled, 0);
	cr_assert_gt(done_full, 0);
	/* The writes put back what was there: no scribble on the disk. */
	for (unsigned i = 0; i < NBLK; i++) {
		cr_assert_eq(pread(fd, back, BS, (off_t)i * BS), BS);
		check_block("race", back, (uint64_t)i * BS);
	}
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(bufs);
	free(back);
}

/* -------------------------------------- the loop closed under the I/O */

static int late_calls;
static bool closed;

static void close_cb(rl_req *req)
{
	fill_cb(req);
	if (closed)
		late_calls++;
}

/*
 * The loop closed with 700 direct reads and 300 direct writes submitted,
 * most of them in the kernel (more than the AIO context holds): the
 * close runs every callback once before it returns and none after; no
 * buffer changes after its callback, even once the kernel had time to
 * finish anything left behind; every write that says BS is on the disk,
 * and no fd is left.
 */
BACKEND_TEST(fs_aio_attack, loop_closed_with_hundreds_in_the_kernel,
	     .timeout = 60)
{
	enum { NR = 700, NW = 300, N = NR + NW, NBLK = 512 };
	const char *path = blocks_file("closed", NBLK);
	struct dreq *r = calloc(N, sizeof(*r));
	unsigned char *bufs = dbufs(N), *back = dbufs(1);
	int fds_before = tfd_count();
	rl_loop *loop = tloop(tp);
	int fd = dopen(loop, path, O_RDWR);
	unsigned written = 0;

	cr_assert_not_null(r);
	fill_name = "closed";
	closed = false;
	late_calls = 0;
	for (unsigned i = 0; i < N; i++) {
		unsigned blk = i % NBLK;
		unsigned char *b = bufs + (size_t)i * BS;

		r[i].buf = b;
		r[i].len = BS;
		if (i >= NR) {
			/* Each write its own block, with a new pattern. */
			blk = i - NR;
			for (size_t j = 0; j < BS; j++)
				b[j] = tbyte("closedw", (size_t)blk * BS + j);
			cr_assert_eq(rl_fs_write(loop, &r[i].req, fd, b, BS,
						 (int64_t)blk * BS, close_cb),
				     0);
		} else {
			cr_assert_eq(
				rl_fs_read(loop, &r[i].req, fd, b, BS,
					   (int64_t)(NW + blk % (NBLK - NW)) *
						   BS,
					   close_cb),
				0);
		}
		if (i == N / 2)
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	}
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(rl_loop_close(loop), 0);
	closed = true;
	for (unsigned i = 0; i < N; i++) {
		int64_t res = r[i].req.result;

		cr_assert_eq(r[i].calls, 1, "req %u: %d callbacks", i,
			     r[i].calls);
		cr_assert(res == BS || res == -ECANCELED, "req %u: %lld", i,
			  (long long)res);
		if (i >= NR && res == BS) {
			cr_assert_eq(pread(fd, back, BS, (off_t)(i - NR) * BS),
				     BS);
			check_block("closedw", back, (uint64_t)(i - NR) * BS);
			written++;
		}
	}
	/* Anything still in the kernel would land now. */
	usleep(50000);
	cr_assert_eq(late_calls, 0);
	for (size_t j = 0; j < (size_t)N * BS; j++)
		cr_assert_eq(bufs[j], SCRIBBLE,
			     "byte %zu of buffer %zu changed after the close",
			     j % BS, j / BS);
	close(fd);
	cr_assert_eq(tfd_count(), fds_before, "fds leaked");
	(void)written;
	free(bufs);
	free(back);
	free(r);
}

/* ------------------------------------- the fd changes under the I/O */

/*
 * dup2() puts another file on the fd number while 64 direct reads of it
 * are in flight (in the kernel where the backend can): each read
 * reports once, a whole block of one of the two files (which one is the
 * backend's business: the caller changed the fd under its requests), or
 * an error; never bytes of neither. The same with the fd closed: a
 * block of the file, or -EBADF.
 */
BACKEND_TEST(fs_aio_attack, fd_replaced_or_closed_under_the_reads)
{
	enum { N = 64 };
	const char *pa = blocks_file("fda", N);
	const char *pb = blocks_file("fdb", N);
	struct dreq r[N];
	unsigned char *bufs = dbufs(N);
	rl_loop *loop = tloop(tp);

	for (int variant = 0; variant < 2; variant++) {
		int fd = dopen(loop, pa, O_RDONLY), other;

		memset(r, 0, sizeof(r));
		memset(bufs, 0xee, (size_t)N * BS);
		for (unsigned i = 0; i < N; i++)
			cr_assert_eq(rl_fs_read(loop, &r[i].req, fd,
						bufs + (size_t)i * BS, BS,
						(int64_t)i * BS, dreq_cb),
				     0);
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		if (variant == 0) {
			other = open(pb, O_RDONLY | O_DIRECT | O_CLOEXEC);
			cr_assert_geq(other, 0);
			cr_assert_eq(dup3(other, fd, O_CLOEXEC), fd);
			close(other);
		} else {
			close(fd);
		}
		trun(loop);
		for (unsigned i = 0; i < N; i++) {
			int64_t res = r[i].req.result;
			unsigned char *b = bufs + (size_t)i * BS;

			cr_assert_eq(r[i].calls, 1, "read %u: %d callbacks", i,
				     r[i].calls);
			if (res == BS)
				cr_assert(
					is_block("fda", b, (uint64_t)i * BS) ||
						is_block("fdb", b,
							 (uint64_t)i * BS),
					"read %u: bytes of neither file", i);
			else
				cr_assert_eq(res, -EBADF, "read %u: %lld", i,
					     (long long)res);
		}
		if (variant == 0)
			cr_assert_eq(do_close(loop, fd), 0);
	}
	tclose(loop);
	free(bufs);
}

/* ------------------------------------- io_submit() denied by seccomp */

#ifdef TEST_AUDIT_ARCH
enum {
	CH_OK = 0,
	CH_NO_SECCOMP = 77,
	CH_NO_DIRECT = 78,
};

/* Reads (even i) and writes (odd i, the file's own bytes back) of n
 * blocks at once; the first step that failed, or 0. */
static int child_rw(rl_loop *loop, int fd, unsigned n, int step)
{
	struct dreq r[32];
	unsigned char *bufs = NULL;

	if (n > 32 || posix_memalign((void **)&bufs, BS, (size_t)n * BS))
		return step;
	memset(r, 0, sizeof(r));
	for (unsigned i = 0; i < n; i++) {
		unsigned char *b = bufs + (size_t)i * BS;
		int ret;

		if (i % 2) {
			for (size_t j = 0; j < BS; j++)
				b[j] = tbyte("deny", (size_t)i * BS + j);
			ret = rl_fs_write(loop, &r[i].req, fd, b, BS,
					  (int64_t)i * BS, dreq_cb);
		} else {
			memset(b, 0xee, BS);
			ret = rl_fs_read(loop, &r[i].req, fd, b, BS,
					 (int64_t)i * BS, dreq_cb);
		}
		if (ret)
			return step;
	}
	if (rl_run(loop, RL_RUN_DEFAULT) < 0)
		return step + 1;
	for (unsigned i = 0; i < n; i++) {
		if (r[i].calls != 1 || r[i].req.result != BS)
			return step + 2;
		if (!(i % 2) &&
		    !is_block("deny", bufs + (size_t)i * BS, (uint64_t)i * BS))
			return step + 3;
	}
	free(bufs);
	return 0;
}

static int child_denied(const struct tp *tp, const char *path, int err)
{
	struct rl_options opt;
	struct rl_stats st0, st1;
	struct tseen s = { 0 };
	rl_req req = { .data = &s };
	rl_loop *loop = NULL;
	int fd, ret;

	rl_options_init(&opt);
	opt.backend = tp->backend;
	opt.flags = tp->flags;
	if (rl_loop_open(&loop, &opt) < 0)
		return 1;
	if (rl_fs_open(loop, &req, path, O_RDWR | O_DIRECT | O_CLOEXEC, 0,
		       tseen_cb) ||
	    rl_run(loop, RL_RUN_DEFAULT) < 0 || s.calls != 1)
		return 2;
	if (s.result == -EINVAL)
		return CH_NO_DIRECT;
	if (s.result < 0)
		return 3;
	fd = (int)s.result;
	/* The context is made, and used. */
	if ((ret = child_rw(loop, fd, 8, 10)))
		return ret;
	rl_loop_stats(loop, &st0);
	ret = tdeny_syscalls(
		(const unsigned[]){ __NR_io_submit, __NR_io_getevents }, 2,
		err);
	if (ret == -ENOSYS || ret == -EINVAL)
		return CH_NO_SECCOMP;
	if (ret < 0)
		return 4;
	if ((ret = child_rw(loop, fd, 32, 20)))
		return ret;
	if ((ret = child_rw(loop, fd, 17, 30)))
		return ret;
	rl_loop_stats(loop, &st1);
	/* Nothing went through AIO once io_submit() was refused. */
	if (st1.aio != st0.aio)
		return 5;
	/* Nor does the loop keep asking: a burst of 32 costs fewer
	 * syscalls than one refused io_submit() per request would. */
	if ((ret = child_rw(loop, fd, 32, 40)))
		return ret;
	rl_loop_stats(loop, &st0);
	if (st0.syscalls - st1.syscalls >= 32)
		return 7;
	close(fd);
	return rl_loop_close(loop) ? 6 : CH_OK;
}

/*
 * A seccomp filter installed after the loop made its AIO context and
 * used it denies io_submit() and io_getevents() (EPERM, then ENOSYS):
 * the direct reads and writes that follow go to the pool, with the right
 * bytes, without a refused io_submit() per request for ever after, and
 * the loop closes cleanly. Run in a child (the filter cannot
 * be taken back).
 */
BACKEND_TEST(fs_aio_attack, io_submit_denied_after_the_context_was_made,
	     .timeout = 60)
{
	const int errs[] = { EPERM, ENOSYS };
	const char *path;

	blocks_file("deny", 32);
	path = spath("deny");
	for (unsigned k = 0; k < 2; k++) {
		int status;
		pid_t pid = fork();

		cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
		if (pid == 0)
			_exit(child_denied(tp, path, errs[k]));
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFEXITED(status), "child died: signal %d",
			  WIFSIGNALED(status) ? WTERMSIG(status) : 0);
		if (WEXITSTATUS(status) == CH_NO_SECCOMP)
			cr_skip_test("seccomp() is not available here");
		if (WEXITSTATUS(status) == CH_NO_DIRECT)
			cr_skip_test("%s: no O_DIRECT here", tdir());
		cr_assert_eq(WEXITSTATUS(status), 0,
			     "errno %d: child failed at step %d", errs[k],
			     WEXITSTATUS(status));
	}
}
#endif /* TEST_AUDIT_ARCH */

/* ------------------------------------------- more edges of the path */

/*
 * Blocks written through the page cache by another fd and not yet on
 * the disk (dirty pages; RWF_NOWAIT sends the direct read back, since the
 * kernel must write them out first): the loop's direct reads return the
 * new bytes, never the old ones on the disk, on every backend. Then the
 * reverse: direct writes through the loop, read back through the page
 * cache of another fd that had the old bytes cached.
 */
BACKEND_TEST(fs_aio_attack, direct_reads_see_dirty_page_cache_and_back)
{
	enum { NBLK = 32 };
	const char *path = blocks_file("dirty", NBLK);
	struct dreq r[NBLK];
	unsigned char *bufs = dbufs(NBLK), *blk = dbufs(1);
	rl_loop *loop = tloop(tp);
	int fd = dopen(loop, path, O_RDWR), bfd;

	bfd = open(path, O_RDWR | O_CLOEXEC);
	cr_assert_geq(bfd, 0);
	/* Odd blocks get new bytes, left dirty in the page cache. */
	for (unsigned i = 1; i < NBLK; i += 2) {
		for (size_t j = 0; j < BS; j++)
			blk[j] = tbyte("dirtyn", (size_t)i * BS + j);
		cr_assert_eq(pwrite(bfd, blk, BS, (off_t)i * BS), BS);
	}
	memset(r, 0, sizeof(r));
	for (unsigned i = 0; i < NBLK; i++)
		cr_assert_eq(rl_fs_read(loop, &r[i].req, fd, bufs + i * BS, BS,
					(int64_t)i * BS, dreq_cb),
			     0);
	trun(loop);
	for (unsigned i = 0; i < NBLK; i++) {
		cr_assert_eq(r[i].calls, 1);
		cr_assert_eq(r[i].req.result, BS, "read %u: %lld", i,
			     (long long)r[i].req.result);
		check_block(i % 2 ? "dirtyn" : "dirty", bufs + i * BS,
			    (uint64_t)i * BS);
	}
	/* Every block in the page cache, then even blocks rewritten
	 * directly: the buffered fd reads the new bytes. */
	for (unsigned i = 0; i < NBLK; i++)
		cr_assert_eq(pread(bfd, blk, BS, (off_t)i * BS), BS);
	memset(r, 0, sizeof(r));
	for (unsigned i = 0; i < NBLK; i += 2) {
		unsigned char *b = bufs + i * BS;

		for (size_t j = 0; j < BS; j++)
			b[j] = tbyte("dirtyd", (size_t)i * BS + j);
		cr_assert_eq(rl_fs_write(loop, &r[i].req, fd, b, BS,
					 (int64_t)i * BS, dreq_cb),
			     0);
	}
	trun(loop);
	for (unsigned i = 0; i < NBLK; i += 2) {
		cr_assert_eq(r[i].calls, 1);
		cr_assert_eq(r[i].req.result, BS);
		cr_assert_eq(pread(bfd, blk, BS, (off_t)i * BS), BS);
		check_block("dirtyd", blk, (uint64_t)i * BS);
	}
	close(bfd);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(bufs);
	free(blk);
}

/*
 * read_fixed and write_fixed of a direct fd from registered buffers, a
 * burst of each: the right blocks in the right places, on the disk; a
 * range outside the registered buffer refused at submission (-EFAULT)
 * on every backend.
 */
BACKEND_TEST(fs_aio_attack, fixed_buffers_on_a_direct_fd)
{
	enum { N = 32 };
	const char *path = blocks_file("fixed", 2 * N);
	struct dreq r[N];
	unsigned char *bufs = dbufs(N), *back = dbufs(1);
	struct iovec reg = { bufs, (size_t)N * BS };
	rl_loop *loop = tloop(tp);
	int fd = dopen(loop, path, O_RDWR);

	cr_assert_eq(rl_loop_register_buffers(loop, &reg, 1), 0);
	memset(r, 0, sizeof(r));
	for (unsigned i = 0; i < N; i++)
		cr_assert_eq(
			rl_fs_read_fixed(loop, &r[i].req, fd, bufs + i * BS, BS,
					 (int64_t)(N - 1 - i) * BS, 0, dreq_cb),
			0);
	trun(loop);
	for (unsigned i = 0; i < N; i++) {
		cr_assert_eq(r[i].calls, 1);
		cr_assert_eq(r[i].req.result, BS);
		check_block("fixed", bufs + i * BS, (uint64_t)(N - 1 - i) * BS);
	}
	/* Block i goes to block N + i: the file's second half becomes its
	 * first half reversed. */
	memset(r, 0, sizeof(r));
	for (unsigned i = 0; i < N; i++)
		cr_assert_eq(rl_fs_write_fixed(
				     loop, &r[i].req, fd, bufs + i * BS, BS,
				     (int64_t)(N + i) * BS, 0, dreq_cb),
			     0);
	trun(loop);
	for (unsigned i = 0; i < N; i++) {
		cr_assert_eq(r[i].calls, 1);
		cr_assert_eq(r[i].req.result, BS);
		cr_assert_eq(pread(fd, back, BS, (off_t)(N + i) * BS), BS);
		check_block("fixed", back, (uint64_t)(N - 1 - i) * BS);
	}
	memset(r, 0, sizeof(r));
	cr_assert_eq(rl_fs_read_fixed(loop, &r[0].req, fd, bufs + BS, N * BS, 0,
				      0, dreq_cb),
		     -EFAULT);
	cr_assert_eq(
		rl_fs_write_fixed(loop, &r[0].req, fd, back, BS, 0, 0, dreq_cb),
		-EFAULT);
	trun(loop);
	cr_assert_eq(r[0].calls, 0);
	cr_assert_eq(rl_loop_register_buffers(loop, NULL, 0), 0);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(bufs);
	free(back);
}

/*
 * Deadlines due at once or a moment later on bursts of direct reads
 * and writes (the timer cancels what is still out, in the loop or in
 * the kernel): each callback once, with BS or -ETIMEDOUT, never
 * -ECANCELED; a read that says BS holds its block.
 */
BACKEND_TEST(fs_aio_attack, deadlines_on_direct_io, .timeout = 60)
{
	enum { N = 64, ROUNDS = 20 };
	const char *path = blocks_file("dl", N);
	struct dreq r[N];
	rl_timer timers[N];
	unsigned char *bufs = dbufs(N);
	rl_loop *loop = tloop(tp);
	int fd = dopen(loop, path, O_RDWR);
	unsigned timed_out = 0;

	for (unsigned round = 0; round < ROUNDS; round++) {
		memset(r, 0, sizeof(r));
		memset(timers, 0, sizeof(timers));
		for (unsigned i = 0; i < N; i++) {
			unsigned char *b = bufs + i * BS;

			if (i % 3 == 2) {
				for (size_t j = 0; j < BS; j++)
					b[j] = tbyte("dl", (size_t)i * BS + j);
				cr_assert_eq(rl_fs_write(loop, &r[i].req, fd, b,
							 BS, (int64_t)i * BS,
							 dreq_cb),
					     0);
			} else {
				memset(b, 0xee, BS);
				cr_assert_eq(rl_fs_read(loop, &r[i].req, fd, b,
							BS, (int64_t)i * BS,
							dreq_cb),
					     0);
			}
			cr_assert_eq(rl_req_deadline(loop, &r[i].req,
						     &timers[i], round % 2),
				     0);
			if (round % 4 >= 2 && i == N / 2)
				cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		}
		trun(loop);
		for (unsigned i = 0; i < N; i++) {
			int64_t res = r[i].req.result;

			cr_assert_eq(r[i].calls, 1, "round %u req %u", round,
				     i);
			cr_assert(res == BS || res == -ETIMEDOUT,
				  "round %u req %u: %lld", round, i,
				  (long long)res);
			if (res == BS && i % 3 != 2)
				check_block("dl", bufs + i * BS,
					    (uint64_t)i * BS);
			timed_out += res == -ETIMEDOUT;
		}
	}
	(void)timed_out;
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(bufs);
}

/*
 * A direct read into a buffer whose second page is not mapped, and a
 * direct write from one whose second page is not mapped: the loop's
 * answer is preadv()'s and pwritev()'s on the same fd, on every backend
 * (the kernel decides between a short count and -EFAULT; the loop must
 * not turn one into the other, nor touch the page).
 */
BACKEND_TEST(fs_aio_attack, buffer_partly_unmapped)
{
	const char *path = blocks_file("fault", 8);
	unsigned char *map, *kbuf = dbufs(2);
	struct one o;
	int64_t want, got;
	rl_loop *loop = tloop(tp);
	int fd = dopen(loop, path, O_RDWR);

	map = mmap(NULL, 2 * BS, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(map, MAP_FAILED);
	cr_assert_eq(mprotect(map + BS, BS, PROT_NONE), 0);
	memset(map, 0xee, BS);
	want = sys(pread(fd, map, 2 * BS, 0));
	memset(map, 0xee, BS);
	cr_assert_eq(
		rl_fs_read(loop, one_req(&o), fd, map, 2 * BS, 0, tseen_cb), 0);
	got = one_result(loop, &o);
	cr_assert_eq(got, want, "read: %lld, pread %lld", (long long)got,
		     (long long)want);
	if (got > 0)
		check_block("fault", map, 0);
	/* A write of the file's own bytes (the first page), so that a
	 * partial write changes nothing. */
	memcpy(kbuf, map, BS);
	for (size_t j = 0; j < BS; j++)
		map[j] = tbyte("fault", j);
	want = sys(pwrite(fd, map, 2 * BS, 0));
	cr_assert_eq(
		rl_fs_write(loop, one_req(&o), fd, map, 2 * BS, 0, tseen_cb),
		0);
	got = one_result(loop, &o);
	/* The loop continues a short write: it ends where pwrite() would
	 * have stopped next, at the fault. */
	cr_assert(got == want || (want > 0 && got == -EFAULT),
		  "write: %lld, pwrite %lld", (long long)got, (long long)want);
	cr_assert_eq(pread(fd, kbuf, BS, 0), BS);
	check_block("fault", kbuf, 0);
	cr_assert_eq(munmap(map, 2 * BS), 0);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(kbuf);
}

/*
 * A full file system under direct writes (a small tmpfs, which takes
 * O_DIRECT since Linux 6.6): 24 writes of 3 blocks into room for about
 * 16 blocks, some cut short by the kernel. Each reports once, its whole
 * length or -ENOSPC; what reported its length is in the file.
 */
BACKEND_TEST(fs_aio_attack, direct_writes_fill_the_file_system)
{
	enum { N = 24, W = 3 * BS };
	const char *mnt = tmount_tmpfs("full", 16 * BS);
	char path[600];
	struct dreq r[N];
	unsigned char *bufs = dbufs(N * 3), *back = dbufs(3);
	rl_loop *loop;
	unsigned ok = 0;
	int fd;

	snprintf(path, sizeof(path), "%s/f", mnt);
	loop = tloop(tp);
	fd = dopen(loop, path, O_RDWR | O_CREAT | O_TRUNC);
	memset(r, 0, sizeof(r));
	for (unsigned i = 0; i < N; i++) {
		unsigned char *b = bufs + (size_t)i * W;

		for (size_t j = 0; j < W; j++)
			b[j] = tbyte("fullw", (size_t)i * W + j);
		cr_assert_eq(rl_fs_write(loop, &r[i].req, fd, b, W,
					 (int64_t)i * W, dreq_cb),
			     0);
	}
	trun(loop);
	for (unsigned i = 0; i < N; i++) {
		int64_t res = r[i].req.result;

		cr_assert_eq(r[i].calls, 1);
		cr_assert(res == W || res == -ENOSPC, "write %u: %lld", i,
			  (long long)res);
		if (res != W)
			continue;
		ok++;
		cr_assert_eq(pread(fd, back, W, (off_t)i * W), W);
		for (unsigned k = 0; k < 3; k++)
			check_block("fullw", back + k * BS,
				    (uint64_t)i * W + k * BS);
	}
	cr_assert_gt(ok, 0);
	cr_assert_lt(ok, N);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(bufs);
	free(back);
}

/*
 * readv and writev of a direct fd with IOV_MAX (1024) iovecs of the
 * smallest aligned length, in flight together with a second pair: all
 * bytes land where each iovec says. IOV_MAX + 1 iovecs are refused at
 * submission with -EINVAL on every backend.
 */
BACKEND_TEST(fs_aio_attack, iov_max_iovecs_on_a_direct_fd)
{
	enum { NV = 1024 };
	struct statx stx;
	size_t seg;
	const char *path;
	struct iovec *iov = calloc(NV + 1, sizeof(*iov));
	struct dreq r[2];
	unsigned char *buf, *back;
	rl_loop *loop;
	int fd;

	cr_assert_not_null(iov);
	path = blocks_file("iovmax", 256);
	loop = tloop(tp);
	fd = dopen(loop, path, O_RDWR);
	cr_assert_eq(statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx), 0);
	seg = (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align
		      ? stx.stx_dio_offset_align
		      : 512;
	if (seg < 512)
		seg = 512;
	buf = dbufs(NV * seg / BS + 1);
	back = dbufs(NV * seg / BS + 1);
	/* Iovec k takes the k-th segment of the file into segment
	 * NV - 1 - k of the buffer. */
	for (unsigned k = 0; k < NV; k++)
		iov[k] =
			(struct iovec){ buf + (size_t)(NV - 1 - k) * seg, seg };
	iov[NV] = iov[0];
	memset(r, 0, sizeof(r));
	cr_assert_eq(rl_fs_readv(loop, &r[0].req, fd, iov, NV + 1, 0, dreq_cb),
		     -EINVAL);
	cr_assert_eq(rl_fs_writev(loop, &r[0].req, fd, iov, NV + 1, 0, dreq_cb),
		     -EINVAL);
	cr_assert_eq(rl_fs_readv(loop, &r[0].req, fd, iov, NV, 0, dreq_cb), 0);
	trun(loop);
	cr_assert_eq(r[0].calls, 1);
	cr_assert_eq(r[0].req.result, (int64_t)(NV * seg));
	for (unsigned k = 0; k < NV; k++)
		for (size_t j = 0; j < seg; j += 97)
			cr_assert_eq(buf[(NV - 1 - k) * seg + j],
				     tbyte("iovmax", k * seg + j),
				     "segment %u byte %zu", k, j);
	/* Written back to the file's second half, in the same order:
	 * the file's first half lands there as it is. */
	cr_assert_eq(rl_fs_writev(loop, &r[1].req, fd, iov, NV,
				  (int64_t)(128 * BS), dreq_cb),
		     0);
	trun(loop);
	cr_assert_eq(r[1].calls, 1);
	cr_assert_eq(r[1].req.result, (int64_t)(NV * seg));
	cr_assert_eq(pread(fd, back, NV * seg, 128 * BS), (ssize_t)(NV * seg));
	for (size_t j = 0; j < NV * seg; j += 89)
		cr_assert_eq(back[j], tbyte("iovmax", j), "byte %zu", j);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(buf);
	free(back);
	free(iov);
}

/*
 * A file system whose files take O_DIRECT but not RWF_NOWAIT (tmpfs,
 * which takes O_DIRECT since Linux 6.6; NFS, FUSE and 9p are others):
 * io_submit() refuses every such iocb. Bursts of direct reads and
 * writes still give the right bytes, and after the first the loop stops
 * asking: a burst of 32 costs fewer syscalls than one refused
 * io_submit() per request would. Another file of the loop, on the disk,
 * keeps its AIO.
 */
BACKEND_TEST(fs_aio_attack, file_that_refuses_nowait_stops_costing_a_syscall)
{
	enum { N = 32 };
	const char *mnt = tmount_tmpfs("nowait", 1 << 20);
	const char *disk = blocks_file("nwdisk", N);
	char path[600];
	struct dreq r[N];
	unsigned char *bufs = dbufs(N);
	struct rl_stats st0, st1;
	uint64_t aio;
	rl_loop *loop;
	int fd, dfd;

	/* It counts what went through AIO (first: its fd is the test's). */
	tlock_aio_events(false);

	snprintf(path, sizeof(path), "%s/f", mnt);
	{
		int w = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

		cr_assert_geq(w, 0);
		for (unsigned i = 0; i < N; i++) {
			unsigned char blk[BS];

			for (size_t j = 0; j < BS; j++)
				blk[j] = tbyte("nowait", (size_t)i * BS + j);
			cr_assert_eq(pwrite(w, blk, BS, (off_t)i * BS), BS);
		}
		close(w);
	}
	loop = tloop(tp);
	fd = dopen(loop, path, O_RDWR);
	dfd = dopen(loop, disk, O_RDONLY);
	for (int burst = 0; burst < 3; burst++) {
		rl_loop_stats(loop, &st0);
		memset(r, 0, sizeof(r));
		for (unsigned i = 0; i < N; i++) {
			unsigned char *b = bufs + i * BS;

			if (i % 4 == 3) {
				for (size_t j = 0; j < BS; j++)
					b[j] = tbyte("nowait",
						     (size_t)i * BS + j);
				cr_assert_eq(rl_fs_write(loop, &r[i].req, fd, b,
							 BS, (int64_t)i * BS,
							 dreq_cb),
					     0);
			} else {
				memset(b, 0xee, BS);
				cr_assert_eq(rl_fs_read(loop, &r[i].req, fd, b,
							BS, (int64_t)i * BS,
							dreq_cb),
					     0);
			}
		}
		trun(loop);
		rl_loop_stats(loop, &st1);
		for (unsigned i = 0; i < N; i++) {
			cr_assert_eq(r[i].calls, 1);
			cr_assert_eq(r[i].req.result, BS,
				     "burst %d req %u: %lld", burst, i,
				     (long long)r[i].req.result);
			if (i % 4 != 3)
				check_block("nowait", bufs + i * BS,
					    (uint64_t)i * BS);
		}
		if (burst)
			cr_assert_lt(st1.syscalls - st0.syscalls, N,
				     "burst %d: %llu syscalls for %d requests",
				     burst,
				     (unsigned long long)(st1.syscalls -
							  st0.syscalls),
				     N);
	}
	read_blocks(loop, dfd, "nwdisk", N, N, &aio);
	if (aio_expected(tp))
		cr_assert_eq(aio, N, "the disk file's AIO: %llu",
			     (unsigned long long)aio);
	/* Both files in one burst, in turn, on a loop that has not seen
	 * the tmpfs file refused yet (the fd opened again): each request
	 * goes its file's way, the disk's through AIO. */
	cr_assert_eq(do_close(loop, fd), 0);
	fd = dopen(loop, path, O_RDWR);
	rl_loop_stats(loop, &st0);
	memset(r, 0, sizeof(r));
	for (unsigned i = 0; i < N; i++) {
		memset(bufs + i * BS, 0xee, BS);
		cr_assert_eq(rl_fs_read(loop, &r[i].req, i % 2 ? dfd : fd,
					bufs + i * BS, BS, (int64_t)i * BS,
					dreq_cb),
			     0);
	}
	trun(loop);
	rl_loop_stats(loop, &st1);
	for (unsigned i = 0; i < N; i++) {
		cr_assert_eq(r[i].calls, 1);
		cr_assert_eq(r[i].req.result, BS, "mixed req %u: %lld", i,
			     (long long)r[i].req.result);
		check_block(i % 2 ? "nwdisk" : "nowait", bufs + i * BS,
			    (uint64_t)i * BS);
	}
	if (aio_expected(tp))
		cr_assert_eq(st1.aio - st0.aio, N / 2, "mixed: %llu by AIO",
			     (unsigned long long)(st1.aio - st0.aio));
	cr_assert_eq(do_close(loop, dfd), 0);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(bufs);
}

/*
 * A stale O_DIRECT mark on a number that now names one end of a Unix
 * stream socket pair (the direct fd closed with close(2)): a write of
 * 1 MiB at offset 0 (more than the socket buffer holds, so RWF_NOWAIT
 * takes only a part) arrives whole and in order at the other end, read
 * slowly by a thread; then a read at offset 0 gets what the peer sent,
 * not more (a socket's short read is its answer). On io_uring the stale
 * mark means nothing, but the same write tries its rest at offset 0 +
 * what went, which a socket refuses (-ESPIPE): it must go at -1.
 */
BACKEND_TEST(fs_aio_attack, stale_hint_on_a_socket_write_and_read)
{
	const size_t len = 1 << 20;
	const char *path = blocks_file("sock", 1);
	unsigned char *data = pattern("sock", len);
	struct drain d = { .want = len, .name = "sock" };
	char got[64] = { 0 };
	pthread_t th;
	struct one o;
	int64_t res;
	rl_loop *loop;
	int fd, sv[2];

	tskip_uring_threads_under_valgrind(tp);
	loop = tloop(tp);
	fd = dopen(loop, path, O_RDONLY);
	close(fd);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	if (sv[0] != fd) {
		cr_assert_eq(dup3(sv[0], fd, O_CLOEXEC), fd);
		close(sv[0]);
	}
	d.fd = sv[1];
	cr_assert_eq(pthread_create(&th, NULL, drain_pipe, &d), 0);
	cr_assert_eq(rl_fs_write(loop, one_req(&o), fd, data, len, 0, tseen_cb),
		     0);
	res = one_result(loop, &o);
	cr_assert_eq(res, (int64_t)len, "backend %d flags %#x: %lld",
		     tp->backend, tp->flags, (long long)res);
	pthread_join(th, NULL);
	cr_assert_eq(d.got, len);
	cr_assert(d.ok, "the bytes came out of order or wrong");
	cr_assert_eq(write(sv[1], "hello", 5), 5);
	cr_assert_eq(do_read(loop, fd, got, sizeof(got), 0), 5);
	cr_assert_eq(memcmp(got, "hello", 5), 0);
	close(sv[1]);
	close(fd);
	tclose(loop);
	free(data);
}

/*
 * The process forks while 256 direct reads are in flight (in the kernel
 * where the backend can) and the child exits at once, as a program that
 * spawns a helper would: the child's copy of the address space (and of
 * the AIO ring's mapping) goes, the parent's requests all complete once,
 * with their blocks, and the loop goes on using AIO after.
 */
BACKEND_TEST(fs_aio_attack, fork_with_direct_reads_in_flight)
{
	enum { N = 256 };
	const char *path = blocks_file("fork", N);
	struct dreq *r = calloc(N, sizeof(*r));
	unsigned char *bufs = dbufs(N);
	uint64_t aio;
	rl_loop *loop;
	int fd, status;
	pid_t pid;

	/* It counts what went through AIO (first: its fd is the test's). */
	tlock_aio_events(false);
	loop = tloop(tp);
	fd = dopen(loop, path, O_RDONLY);

	cr_assert_not_null(r);
	for (unsigned i = 0; i < N; i++)
		cr_assert_eq(rl_fs_read(loop, &r[i].req, fd, bufs + i * BS, BS,
					(int64_t)i * BS, dreq_cb),
			     0);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(0);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	trun(loop);
	for (unsigned i = 0; i < N; i++) {
		cr_assert_eq(r[i].calls, 1, "read %u: %d callbacks", i,
			     r[i].calls);
		cr_assert_eq(r[i].req.result, BS, "read %u: %lld", i,
			     (long long)r[i].req.result);
		check_block("fork", bufs + i * BS, (uint64_t)i * BS);
	}
	read_blocks(loop, fd, "fork", 64, N, &aio);
	if (aio_expected(tp))
		cr_assert_eq(aio, 64, "AIO after the fork: %llu",
			     (unsigned long long)aio);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(bufs);
	free(r);
}

/* ------------------------------------------------ loops of a group */

#define GLOOPS 2
#define GN     128

struct gshare {
	const char *path;
	int fd[GLOOPS];
	struct dreq r[GLOOPS][GN];
	int submitted[GLOOPS][GN]; /* what each submitting call said */
	unsigned char *bufs[GLOOPS];
	struct rl_post post;
	rl_group *g;
};

static struct gshare *gsh;

/* On loop i's thread: opens the file through the loop (the hint). */
static void gopen_share(rl_loop *loop, unsigned i, void *arg)
{
	struct tseen s = { 0 };
	rl_req req = { .data = &s };

	(void)arg;
	gsh->fd[i] = -1000;
	if (rl_fs_open(loop, &req, gsh->path, O_RDWR | O_DIRECT | O_CLOEXEC, 0,
		       tseen_cb) == 0 &&
	    rl_run(loop, RL_RUN_DEFAULT) >= 0 && s.calls == 1)
		gsh->fd[i] = (int)s.result;
}

/* On loop i's thread: GN requests, each on a block of its own: reads of
 * the file's pattern (even k), writes of another (odd k). */
static void gsubmit(rl_loop *loop, unsigned i)
{
	for (unsigned k = 0; k < GN; k++) {
		unsigned blk = i * GN + k;
		unsigned char *b = gsh->bufs[i] + (size_t)k * BS;
		struct dreq *d = &gsh->r[i][k];

		memset(d, 0, sizeof(*d));
		if (k % 2) {
			for (size_t j = 0; j < BS; j++)
				b[j] = tbyte("groupw", (size_t)blk * BS + j);
			gsh->submitted[i][k] =
				rl_fs_write(loop, &d->req, gsh->fd[i], b, BS,
					    (int64_t)blk * BS, dreq_cb);
		} else {
			memset(b, 0xee, BS);
			gsh->submitted[i][k] =
				rl_fs_read(loop, &d->req, gsh->fd[i], b, BS,
					   (int64_t)blk * BS, dreq_cb);
		}
	}
}

static void gsubmit_share(rl_loop *loop, unsigned i, void *arg)
{
	(void)arg;
	gsubmit(loop, i);
}

static void gsubmit_post(struct rl_post *post)
{
	(void)post;
	gsubmit(rl_group_loop(gsh->g, 1), 1);
}

/* Every request of loop i: one callback (none when its submission was
 * refused, as the close may refuse it); what says BS is right. */
static void gcheck(unsigned i, bool may_cancel, int fd)
{
	unsigned char *back = dbufs(1);

	for (unsigned k = 0; k < GN; k++) {
		struct dreq *d = &gsh->r[i][k];
		unsigned blk = i * GN + k;
		int64_t res = d->req.result;

		if (gsh->submitted[i][k]) {
			cr_assert(may_cancel, "loop %u req %u refused: %d", i,
				  k, gsh->submitted[i][k]);
			cr_assert_eq(d->calls, 0);
			continue;
		}
		cr_assert_eq(d->calls, 1, "loop %u req %u: %d callbacks", i, k,
			     d->calls);
		cr_assert(res == BS || (may_cancel && res == -ECANCELED),
			  "loop %u req %u: %lld", i, k, (long long)res);
		if (res != BS)
			continue;
		if (k % 2) {
			cr_assert_eq(pread(fd, back, BS, (off_t)blk * BS), BS);
			check_block("groupw", back, (uint64_t)blk * BS);
		} else {
			check_block("group", gsh->bufs[i] + (size_t)k * BS,
				    (uint64_t)blk * BS);
		}
	}
	free(back);
}

/*
 * Direct reads and writes on the loops of a group, each loop with its
 * own AIO context: a round where every loop runs its share to the end,
 * then a round where loop 1 gets its requests by a message and loop 0
 * from the caller, both pushed into the kernel, and the group is closed
 * at once: every request reports once (the close may refuse the
 * message's ones, or cancel them), what says BS is right and on the disk.
 */
BACKEND_TEST(fs_aio_attack, group_closed_with_direct_io_in_flight,
	     .timeout = 60)
{
	struct gshare *sh = calloc(1, sizeof(*sh));
	int fds_before;
	rl_group *g;

	cr_assert_not_null(sh);
	gsh = sh;
	sh->path = spath("group");
	blocks_file("group", GLOOPS * GN);
	for (unsigned i = 0; i < GLOOPS; i++)
		sh->bufs[i] = dbufs(GN);
	fds_before = tfd_count();
	g = tgroup(tp, GLOOPS, 0, RL_MSG_WAKE_DEFAULT);
	sh->g = g;
	cr_assert_eq(rl_group_run(g, gopen_share, NULL), 0);
	for (unsigned i = 0; i < GLOOPS; i++)
		cr_assert_geq(sh->fd[i], 0, "loop %u: open %d", i, sh->fd[i]);
	cr_assert_eq(rl_group_run(g, gsubmit_share, NULL), 0);
	for (unsigned i = 0; i < GLOOPS; i++)
		gcheck(i, false, sh->fd[0]);
	/* The second round, closed under the requests. */
	cr_assert_eq(rl_post(rl_group_loop(g, 1), &sh->post, gsubmit_post), 0);
	gsubmit(rl_group_loop(g, 0), 0);
	cr_assert_geq(rl_run(rl_group_loop(g, 0), RL_RUN_NOWAIT), 0);
	cr_assert_eq(rl_group_close(g), 0);
	for (unsigned i = 0; i < GLOOPS; i++)
		gcheck(i, true, sh->fd[0]);
	for (unsigned i = 0; i < GLOOPS; i++) {
		close(sh->fd[i]);
		free(sh->bufs[i]);
	}
	cr_assert_eq(tfd_count(), fds_before, "fds leaked");
	free(sh);
}
