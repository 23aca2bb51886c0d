/* SPDX-License-Identifier: MIT */
/*
 * test_fs_direct.c - O_DIRECT reads and writes in bursts, on every
 * backend: on epoll they go through Linux AIO (loop/epoll_aio.c), or
 * through the pool in the epoll-pool configuration (RL_NO_AIO). Every
 * block lands in the right buffer, writes that AIO cannot do without
 * blocking (into holes, past the end) are done by the pool, more requests
 * than AIO takes at once still all complete, and cancels and closes with
 * direct I/O in flight keep the contract: every callback exactly once,
 * nothing reported written that is not on the disk.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "direct_helpers.h"
#include "fs_helpers.h"
#include "helpers.h"

struct dreq {
	rl_req req;
	int calls;
};

static void dreq_cb(rl_req *req)
{
	((struct dreq *)req)->calls++;
}

/* Odd i: writes block i from bufs with the pattern of wname; even i:
 * reads block i into bufs. */
static void submit_rw(rl_loop *loop, struct dreq *r, int fd,
		      unsigned char *bufs, unsigned i, const char *wname)
{
	unsigned char *buf = bufs + (size_t)i * BS;
	int64_t off = (int64_t)i * BS;

	if (i % 2) {
		for (size_t j = 0; j < BS; j++)
			buf[j] = tbyte(wname, (size_t)off + j);
		cr_assert_eq(
			rl_fs_write(loop, &r->req, fd, buf, BS, off, dreq_cb),
			0);
	} else {
		cr_assert_eq(
			rl_fs_read(loop, &r->req, fd, buf, BS, off, dreq_cb),
			0);
	}
}

/* The blocks in a shuffled order, every one once. */
static void shuffled(unsigned *order, unsigned n)
{
	unsigned seed = 12345;

	for (unsigned i = 0; i < n; i++)
		order[i] = i;
	for (unsigned i = n - 1; i > 0; i--) {
		unsigned j, t;

		seed = seed * 1103515245u + 12345u;
		j = (seed >> 8) % (i + 1);
		t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
}

static void read_burst(const struct tp *tp, unsigned n, unsigned nblocks)
{
	const char *path = blocks_file("burst", nblocks);
	struct dreq *reqs = calloc(n, sizeof(*reqs));
	unsigned *order = calloc(n > nblocks ? n : nblocks, sizeof(*order));
	unsigned char *bufs = dbufs(n);
	struct rl_stats before, after;
	rl_loop *loop;
	int fd;

	/* It counts what went through AIO (first: its fd is the test's). */
	tlock_aio_events(false);
	loop = tloop(tp);
	fd = dopen(loop, path, O_RDONLY);

	cr_assert(reqs && order);
	shuffled(order, nblocks);
	rl_loop_stats(loop, &before);
	for (unsigned i = 0; i < n; i++)
		cr_assert_eq(rl_fs_read(loop, &reqs[i].req, fd, bufs + i * BS,
					BS, (int64_t)order[i % nblocks] * BS,
					dreq_cb),
			     0);
	trun(loop);
	rl_loop_stats(loop, &after);
	for (unsigned i = 0; i < n; i++) {
		cr_assert_eq(reqs[i].calls, 1, "read %u: %d callbacks", i,
			     reqs[i].calls);
		cr_assert_eq(reqs[i].req.result, BS, "read %u: %lld", i,
			     (long long)reqs[i].req.result);
		check_block("burst", bufs + i * BS,
			    (uint64_t)order[i % nblocks] * BS);
	}
	if (tp->backend == RL_BACKEND_EPOLL) {
		uint64_t jobs = after.pool_jobs - before.pool_jobs;

		/* No fast path for direct reads: the pool does them all,
		 * or AIO does, the pool only those that AIO could not take
		 * without blocking or that came when its events were all
		 * taken. */
		cr_assert_eq(after.inline_completions,
			     before.inline_completions);
		if (tp->flags & RL_NO_AIO) {
			cr_assert_eq(jobs, n, "%llu pool jobs",
				     (unsigned long long)jobs);
			cr_assert_eq(after.aio, 0);
		} else if (aio_expected(tp) && n <= 256) {
			/* Each went to the kernel through AIO once; the
			 * device may have sent some back (a full queue),
			 * which the pool did. */
			cr_assert_eq(
				after.aio - before.aio, n, "%llu by AIO",
				(unsigned long long)(after.aio - before.aio));
		} else if (aio_expected(tp)) {
			/* The first 512 went through AIO, the rest (and
			 * any the device sent back) through the pool. */
			cr_assert_leq(after.aio - before.aio, 512);
			cr_assert_geq(after.aio - before.aio + jobs, n);
		}
	} else {
		cr_assert_eq(after.aio, 0);
	}
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(bufs);
	free(order);
	free(reqs);
}

/* 256 reads at once, each to its own buffer, in a shuffled order. */
BACKEND_TEST(fs_direct, burst_of_reads_each_to_its_buffer)
{
	read_burst(tp, 256, 256);
}

/* More direct reads in flight than AIO takes at once (512 events): the
 * rest go to the pool, and every one still completes once, in full. */
BACKEND_TEST(fs_direct, more_reads_than_aio_takes_at_once)
{
	read_burst(tp, 1500, 64);
}

/*
 * Writes AIO cannot do without blocking: into the holes of a sparse
 * file (the file system allocates) and past its end (the size grows).
 * RWF_NOWAIT sends them to the pool. Overwrites of allocated blocks go
 * through AIO. All report their length; the file holds every block.
 */
BACKEND_TEST(fs_direct, writes_into_holes_past_the_end_and_over_data)
{
	enum { N = 48 };
	const char *path = tpath("sparse");
	struct dreq reqs[N];
	unsigned char *bufs = dbufs(N), *back = dbufs(1);
	rl_loop *loop = tloop(tp);
	int fd = dopen(loop, path, O_RDWR | O_CREAT | O_TRUNC), rfd;

	/* 32 blocks of holes; blocks 32..47 past the end. */
	cr_assert_eq(ftruncate(fd, 32 * BS), 0);
	memset(reqs, 0, sizeof(reqs));
	for (unsigned i = 0; i < N; i++) {
		for (size_t j = 0; j < BS; j++)
			bufs[i * BS + j] = tbyte("sparse", (size_t)i * BS + j);
		cr_assert_eq(rl_fs_write(loop, &reqs[i].req, fd, bufs + i * BS,
					 BS, (int64_t)i * BS, dreq_cb),
			     0);
	}
	trun(loop);
	for (unsigned i = 0; i < N; i++) {
		cr_assert_eq(reqs[i].calls, 1);
		cr_assert_eq(reqs[i].req.result, BS, "write %u: %lld", i,
			     (long long)reqs[i].req.result);
	}
	/* Overwrites of what is there now, with the pattern of "over". */
	memset(reqs, 0, sizeof(reqs));
	for (unsigned i = 0; i < N; i++) {
		for (size_t j = 0; j < BS; j++)
			bufs[i * BS + j] = tbyte("over", (size_t)i * BS + j);
		cr_assert_eq(rl_fs_write(loop, &reqs[i].req, fd, bufs + i * BS,
					 BS, (int64_t)i * BS, dreq_cb),
			     0);
	}
	trun(loop);
	for (unsigned i = 0; i < N; i++) {
		cr_assert_eq(reqs[i].calls, 1);
		cr_assert_eq(reqs[i].req.result, BS);
	}
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	rfd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(rfd, 0);
	cr_assert_eq(lseek(rfd, 0, SEEK_END), (off_t)N * BS);
	for (unsigned i = 0; i < N; i++) {
		cr_assert_eq(pread(rfd, back, BS, (off_t)i * BS), BS);
		check_block("over", back, (uint64_t)i * BS);
	}
	close(rfd);
	free(bufs);
	free(back);
}

/* readv and writev of two aligned blocks each, at offsets. */
BACKEND_TEST(fs_direct, readv_and_writev)
{
	enum { N = 16 };
	const char *path = blocks_file("vec", 2 * N);
	struct dreq reqs[N];
	struct iovec iov[N][2];
	unsigned char *bufs = dbufs(2 * N);
	rl_loop *loop = tloop(tp);
	int fd = dopen(loop, path, O_RDWR);

	memset(reqs, 0, sizeof(reqs));
	for (unsigned i = 0; i < N; i++) {
		/* The second block first: each iovec lands where it says. */
		iov[i][0] = (struct iovec){ bufs + (2 * i + 1) * BS, BS };
		iov[i][1] = (struct iovec){ bufs + 2 * i * BS, BS };
		cr_assert_eq(rl_fs_readv(loop, &reqs[i].req, fd, iov[i], 2,
					 (int64_t)2 * i * BS, dreq_cb),
			     0);
	}
	trun(loop);
	for (unsigned i = 0; i < N; i++) {
		cr_assert_eq(reqs[i].calls, 1);
		cr_assert_eq(reqs[i].req.result, 2 * BS);
		check_block("vec", bufs + (2 * i + 1) * BS,
			    (uint64_t)2 * i * BS);
		check_block("vec", bufs + 2 * i * BS,
			    (uint64_t)(2 * i + 1) * BS);
	}
	/* Write them back swapped: block 2i gets what was at 2i+1. */
	memset(reqs, 0, sizeof(reqs));
	for (unsigned i = 0; i < N; i++) {
		iov[i][0] = (struct iovec){ bufs + 2 * i * BS, BS };
		iov[i][1] = (struct iovec){ bufs + (2 * i + 1) * BS, BS };
		cr_assert_eq(rl_fs_writev(loop, &reqs[i].req, fd, iov[i], 2,
					  (int64_t)2 * i * BS, dreq_cb),
			     0);
	}
	trun(loop);
	for (unsigned i = 0; i < N; i++) {
		cr_assert_eq(reqs[i].calls, 1);
		cr_assert_eq(reqs[i].req.result, 2 * BS);
	}
	memset(bufs, 0, 2 * N * BS);
	cr_assert_eq(pread(fd, bufs, 2 * BS, 2 * BS), 2 * BS);
	check_block("vec", bufs, 3 * BS);
	check_block("vec", bufs + BS, 2 * BS);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(bufs);
}

/* Reads at and across the end of a file whose size is not a multiple of
 * the block: the results are pread()'s on the same fd. */
BACKEND_TEST(fs_direct, reads_at_and_across_the_end)
{
	const size_t size = 3 * BS + 100;
	const char *path = tfile("tail", size);
	const int64_t offs[] = { 2 * BS, 3 * BS, 4 * BS, 64 * BS };
	struct dreq reqs[4];
	unsigned char *bufs = dbufs(2 * 4), *ref = dbufs(2);
	rl_loop *loop = tloop(tp);
	int fd = dopen(loop, path, O_RDONLY);

	memset(reqs, 0, sizeof(reqs));
	for (unsigned i = 0; i < 4; i++)
		cr_assert_eq(rl_fs_read(loop, &reqs[i].req, fd,
					bufs + 2 * i * BS, 2 * BS, offs[i],
					dreq_cb),
			     0);
	trun(loop);
	for (unsigned i = 0; i < 4; i++) {
		ssize_t want = pread(fd, ref, 2 * BS, (off_t)offs[i]);

		cr_assert_eq(reqs[i].calls, 1);
		cr_assert_eq(reqs[i].req.result, want < 0 ? -errno : want,
			     "read at %lld: %lld, pread %zd",
			     (long long)offs[i], (long long)reqs[i].req.result,
			     want);
		if (want > 0)
			cr_assert_eq(
				memcmp(bufs + 2 * i * BS, ref, (size_t)want),
				0);
	}
	cr_assert_eq(reqs[0].req.result, BS + 100);
	cr_assert_eq(reqs[2].req.result, 0);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(bufs);
	free(ref);
}

/*
 * Cancels of direct reads and writes: at once (still in the loop), and
 * after a pass of the loop (in the kernel, where AIO cannot take them
 * back). Each callback comes once; a read that says BS holds its block,
 * a write that says BS is on the disk, anything else is -ECANCELED.
 */
BACKEND_TEST(fs_direct, cancel_before_and_after_submission)
{
	enum { N = 64 };
	const char *path = blocks_file("cancel", N);
	struct dreq reqs[N];
	unsigned char *bufs = dbufs(N), *back = dbufs(1);
	rl_loop *loop = tloop(tp);
	int fd = dopen(loop, path, O_RDWR);

	for (int pass = 0; pass < 2; pass++) {
		memset(reqs, 0, sizeof(reqs));
		for (unsigned i = 0; i < N; i++)
			submit_rw(loop, &reqs[i], fd, bufs, i, "cancel");
		if (pass)
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		for (unsigned i = 0; i < N; i++) {
			int r = rl_cancel(loop, &reqs[i].req);

			cr_assert(r == 0 || r == -EALREADY || r == -ENOENT,
				  "cancel %u: %d", i, r);
		}
		trun(loop);
		for (unsigned i = 0; i < N; i++) {
			int64_t res = reqs[i].req.result;

			cr_assert_eq(reqs[i].calls, 1, "req %u: %d callbacks",
				     i, reqs[i].calls);
			cr_assert(res == BS || res == -ECANCELED,
				  "req %u: %lld", i, (long long)res);
			if (res == BS && !(i % 2))
				check_block("cancel", bufs + i * BS,
					    (uint64_t)i * BS);
		}
		if (!pass && tp->backend == RL_BACKEND_EPOLL)
			for (unsigned i = 0; i < N; i++)
				cr_assert_eq(reqs[i].req.result, -ECANCELED,
					     "a queued request is taken back");
	}
	/* The file holds the same pattern whatever was written. */
	for (unsigned i = 0; i < N; i++) {
		cr_assert_eq(pread(fd, back, BS, (off_t)i * BS), BS);
		check_block("cancel", back, (uint64_t)i * BS);
	}
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(bufs);
	free(back);
}

/*
 * The loop closed with direct reads and writes in flight (in the loop
 * and in the kernel): every callback runs once, before the close
 * returns; every write that reported its length is on the disk.
 */
BACKEND_TEST(fs_direct, close_with_direct_io_in_flight)
{
	enum { N = 128 };
	const char *path = blocks_file("closing", N);
	struct dreq reqs[N];
	unsigned char *bufs = dbufs(N), *back = dbufs(1);
	int fds_before = tfd_count();
	rl_loop *loop = tloop(tp);
	int fd = dopen(loop, path, O_RDWR);

	memset(reqs, 0, sizeof(reqs));
	for (unsigned i = 0; i < N; i++) {
		submit_rw(loop, &reqs[i], fd, bufs, i, "fresh");
		/* Half of them reach the kernel before the close. */
		if (i == N / 2)
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	}
	/* Not tclose(): the fd stays open for the check below (closing it
	 * under requests in flight is undefined). */
	cr_assert_eq(rl_loop_close(loop), 0);
	for (unsigned i = 0; i < N; i++) {
		int64_t res = reqs[i].req.result;

		cr_assert_eq(reqs[i].calls, 1, "req %u: %d callbacks", i,
			     reqs[i].calls);
		cr_assert(res == BS || res == -ECANCELED, "req %u: %lld", i,
			  (long long)res);
		if (res != BS)
			continue;
		if (i % 2) {
			cr_assert_eq(pread(fd, back, BS, (off_t)i * BS), BS);
			check_block("fresh", back, (uint64_t)i * BS);
		} else {
			check_block("closing", bufs + i * BS, (uint64_t)i * BS);
		}
	}
	close(fd);
	cr_assert_eq(tfd_count(), fds_before, "fds leaked");
	free(bufs);
	free(back);
}

/*
 * The backend's note that an fd is O_DIRECT outlives a close(2) that
 * bypassed the loop (rl_fs_open() says so). The number then names a
 * pipe: a read of it at offset 0 still waits for the data and gets it,
 * on every backend, rather than failing or blocking the loop thread.
 */
BACKEND_TEST(fs_direct, stale_direct_fd_reused_by_a_pipe)
{
	const char *path = blocks_file("stale", 1);
	struct dreq r = { 0 };
	char buf[64] = { 0 };
	rl_loop *loop = tloop(tp);
	int fd = dopen(loop, path, O_RDONLY), p[2];

	close(fd);
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	if (p[0] != fd) {
		cr_assert_eq(dup3(p[0], fd, O_CLOEXEC), fd);
		close(p[0]);
	}
	cr_assert_eq(rl_fs_read(loop, &r.req, fd, buf, sizeof(buf), 0, dreq_cb),
		     0);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(r.calls, 0, "nothing written yet: %lld",
		     (long long)r.req.result);
	cr_assert_eq(write(p[1], "hello", 5), 5);
	trun(loop);
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(r.req.result, 5);
	cr_assert_eq(memcmp(buf, "hello", 5), 0);
	close(p[1]);
	close(fd);
	tclose(loop);
}

/*
 * Special files opened with O_DIRECT: /dev/zero, procfs and a FIFO refuse
 * it on Linux 6.18 (so none of them ever gets the epoll backend's direct
 * mark through an open; a stale mark is stale_direct_fd_reused_by_a_pipe
 * above). The loop's open says what open(2) says (with O_NONBLOCK, so
 * that the FIFO's answer does not wait for a writer), on every backend.
 */
BACKEND_TEST(fs_direct, special_files_opened_direct)
{
	const char *fifo = tpath("fifo");
	const char *paths[] = { "/dev/zero", "/proc/self/status", fifo };
	struct dreq r;
	rl_loop *loop = tloop(tp);
	int fd;

	cr_assert_eq(mkfifo(fifo, 0600), 0);
	for (unsigned i = 0; i < 3; i++) {
		memset(&r, 0, sizeof(r));
		cr_assert_eq(rl_fs_open(loop, &r.req, paths[i],
					O_RDONLY | O_DIRECT | O_CLOEXEC, 0,
					dreq_cb),
			     0);
		trun(loop);
		cr_assert_eq(r.calls, 1);
		fd = open(paths[i],
			  O_RDONLY | O_DIRECT | O_NONBLOCK | O_CLOEXEC);
		if (fd >= 0) {
			close(fd);
			cr_assert_geq(r.req.result, 0, "%s", paths[i]);
			cr_assert_eq(do_close(loop, (int)r.req.result), 0);
		} else {
			cr_assert_eq(r.req.result, -errno, "%s: %lld", paths[i],
				     (long long)r.req.result);
		}
	}
	tclose(loop);
}

/* The same stale mark on an eventfd (an anonymous inode, no file type):
 * a read at offset 0 waits for the counter, on every backend, and a
 * write at an offset adds to it. */
BACKEND_TEST(fs_direct, stale_direct_fd_reused_by_an_eventfd)
{
	const char *path = blocks_file("stale", 1);
	struct dreq r = { 0 };
	uint64_t one = 1, got = 0, add = 41;
	rl_loop *loop = tloop(tp);
	int fd = dopen(loop, path, O_RDONLY), e;

	close(fd);
	e = eventfd(0, EFD_CLOEXEC);
	cr_assert_geq(e, 0);
	if (e != fd) {
		cr_assert_eq(dup3(e, fd, O_CLOEXEC), fd);
		close(e);
	}
	cr_assert_eq(
		rl_fs_read(loop, &r.req, fd, &got, sizeof(got), 0, dreq_cb), 0);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(r.calls, 0, "counter at zero: %lld",
		     (long long)r.req.result);
	cr_assert_eq(write(fd, &one, sizeof(one)), sizeof(one));
	trun(loop);
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(r.req.result, sizeof(got));
	cr_assert_eq(got, 1);
	cr_assert_eq(do_write(loop, fd, &add, sizeof(add), 0), sizeof(add));
	cr_assert_eq(read(fd, &got, sizeof(got)), sizeof(got));
	cr_assert_eq(got, 41);
	close(fd);
	tclose(loop);
}
