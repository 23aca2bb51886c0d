/* SPDX-License-Identifier: MIT */
/*
 * test_epoll_attack.c - an adversarial pass on the epoll backend's
 * request machinery (loop/epoll.h tells how a request travels): the
 * pool's queue that the loop shares with its workers (run_inline()), the
 * read_file job's second pass (RL__EP_AGAIN), the fd budget (RL__EP_HELD,
 * fd_wait), write_file's hand-over of an open fd to the slow lane, and
 * the close path. Every test is a BACKEND_TEST: what aims at epoll's
 * internals must hold, with the same results, on io_uring too.
 *
 * Each test counts every callback, checks every byte, bounds its time
 * with alarm() and ends with the loop closed and no fd left (tclose()).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "epoll.h" /* RL__SLOW_MAX */
#include "helpers.h"

/* ------------------------------------------------------------ helpers */

/* Counts scaled down under Valgrind, which runs every test far slower. */
static inline unsigned scaled(unsigned n, unsigned under_valgrind)
{
	return getenv("RL_VALGRIND") ? under_valgrind : n;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
	}
}

/* Drops path's pages from the page cache (written back first). Returns
 * the share still resident: 1 on a tmpfs, whose pages are the file. */
static double evict(const char *path, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(fsync(fd), 0);
	cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
	/* tresident() looks at the first 64 pages at most. */
	return tresident(path, size < 65536 ? size : 65536);
}

/* The same, or the test skipped where the page cache keeps the file. */
static void evict_or_skip(const char *path, size_t size)
{
	if (evict(path, size) > 0)
		cr_skip_test("the page cache keeps %s (tmpfs?)", path);
}

/* Writes name (size bytes of its pattern), then evicts all of it but the
 * first 64 KiB, so that an RWF_NOWAIT read of it stops short. */
static const char *partly_cached(const char *name, size_t size)
{
	const char *path = tfile(name, size);
	char *buf = malloc(65536);
	int fd;

	cr_assert_not_null(buf);
	evict_or_skip(path, size);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	/* No read-ahead on this fd: only the pages read get cached. */
	posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	cr_assert_eq(pread(fd, buf, 65536, 0), 65536);
	free(buf);
	close(fd);
	return path;
}

/* A worker blocked in a stalled stat (see tstall in helpers.h) keeps the
 * jobs behind it queued, which makes "not started yet" deterministic. */
#define STALL_OR_SKIP(st)                                                      \
	do {                                                                   \
		if (!tstall_open(st, sizeof(struct statx)))                    \
			cr_skip_test("no userfaultfd here to stall a worker"); \
	} while (0)

/* Runs the loop, one pass at a time, until *count reaches want. */
static void run_until(rl_loop *loop, const int *count, int want)
{
	while (*count < want)
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
}

/* ------------------------------------------- the pool's queue, shared */

/*
 * A read at the file's position (offset -1) whose fast path stopped
 * after a cached prefix goes to the pool with that prefix counted
 * (res[1]), the position moved past it. With the only worker stalled it
 * stays on the pool's queue; the next burst of read_files is shared with
 * the workers (SHARE_MIN), and the loop takes jobs off that queue itself,
 * the waiting read first. Found: the loop ran its fast path again from
 * byte 0 of the buffer, reading the rest of the file (from the moved
 * position) into the buffer's start, and reported the rest's length as
 * the whole. Every backend: the whole file, in order, the position at
 * its end.
 */
BACKEND_TEST(epoll_attack, partial_fast_read_taken_back_by_the_loop)
{
	enum { SIZE = 1 << 20, N = 12, SMALL = 300 };
	struct tseen sb = { 0 }, sr = { 0 }, s[N];
	rl_req blocker = { .data = &sb }, rd = { .data = &sr }, r[N];
	const char *path, *small = tfile("small", SMALL);
	char *buf = malloc(SIZE), sbuf[N][SMALL + 1];
	struct rl_options opt;
	struct tstall stall;
	rl_loop *loop;
	int fd, done = 0;

	cr_assert_not_null(buf);
	STALL_OR_SKIP(&stall);
	path = partly_cached("partial", SIZE);
	rl_options_init(&opt);
	opt.pool_threads = 1;
	loop = tloop_opts(tp, &opt);
	alarm(60);
	cr_assert_eq(rl_fs_stat(loop, &blocker, small, stall.mem, tseen_cb), 0);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(rl_fs_read(loop, &rd, fd, buf, SIZE, -1, tseen_cb), 0);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	/* The read-ahead the miss started comes in meanwhile. */
	sleep_ms(50);
	for (int i = 0; i < N; i++) {
		s[i] = (struct tseen){ 0 };
		r[i] = (rl_req){ .data = &s[i] };
		cr_assert_eq(rl_fs_read_file(loop, &r[i], small, sbuf[i],
					     sizeof(sbuf[i]), 0, tseen_cb),
			     0);
	}
	/* The pass that shares the burst (and takes the waiting read). */
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(sb.calls, 0, "the stat is stalled");
	tstall_release(&stall);
	while (done < N) {
		done = 0;
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
		for (int i = 0; i < N; i++)
			done += s[i].calls;
	}
	run_until(loop, &sr.calls, 1);
	trun(loop);
	alarm(0);
	cr_assert_eq(sb.calls, 1);
	cr_assert_eq(sb.result, 0);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(s[i].calls, 1);
		cr_assert_eq(s[i].result, SMALL);
		tcheck("small", sbuf[i], SMALL);
	}
	cr_assert_eq(sr.calls, 1);
	cr_assert_eq(sr.result, SIZE, "%s",
		     sr.result < 0 ? rl_strerror((int)sr.result) : "short");
	tcheck("partial", buf, SIZE);
	cr_assert_eq(lseek(fd, 0, SEEK_CUR), SIZE);
	close(fd);
	free(buf);
	tclose(loop);
	tstall_close(&stall);
}
