/* SPDX-License-Identifier: MIT */
/*
 * test_fs_attack.c - attacks on the contracts of the file requests
 * (ringloop.h, "writing to files"): fds that are not files, zero and huge
 * lengths, a file size limit, full file systems under many writers at
 * once, cancels racing completions, fds closed under requests in flight,
 * write_file blocked on a FIFO, no fd left at all, paths too long or
 * empty, and NULL where the header forbids it. Each test says what the
 * contract promises and checks that, on every backend configuration;
 * test_fs_write.c has the ordinary cases.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "coro_helpers.h"
#include "fs_helpers.h"
#include "helpers.h"
#include "promise_helpers.h"
#include "ringloop/callback.h"

/* --------------------------------------------------- fds that are not files */

/*
 * fsync, fdatasync, ftruncate, fallocate and fstat have no side effect on
 * these fds, so the loop must answer exactly what the syscall answers
 * ("everything else is the kernel's to say, on either backend").
 */
static void same_as_the_kernel(rl_loop *loop, int fd, const char *what)
{
	struct statx stx, sys_stx;
	int64_t want, got;

	want = sys(fsync(fd));
	got = do_fsync(loop, fd, 0);
	cr_assert_eq(got, want, "%s: fsync %lld, the kernel %lld", what,
		     (long long)got, (long long)want);
	want = sys(fdatasync(fd));
	got = do_fsync(loop, fd, RL_FSYNC_DATASYNC);
	cr_assert_eq(got, want, "%s: fdatasync %lld, the kernel %lld", what,
		     (long long)got, (long long)want);
	want = sys(ftruncate(fd, 0));
	got = do_ftruncate(loop, fd, 0);
	cr_assert_eq(got, want, "%s: ftruncate %lld, the kernel %lld", what,
		     (long long)got, (long long)want);
	want = sys(fallocate(fd, 0, 0, 4096));
	got = do_fallocate(loop, fd, 0, 0, 4096);
	cr_assert_eq(got, want, "%s: fallocate %lld, the kernel %lld", what,
		     (long long)got, (long long)want);
	want = sys(statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &sys_stx));
	got = do_fstat(loop, fd, &stx);
	cr_assert_eq(got, want, "%s: fstat %lld, the kernel %lld", what,
		     (long long)got, (long long)want);
	if (got == 0)
		cr_assert_eq(stx.stx_mode, sys_stx.stx_mode, "%s", what);
}

BACKEND_TEST(fs_attack, devices_answer_as_the_kernel)
{
	char buf[16];
	rl_loop *loop = tloop(tp);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int full = open("/dev/full", O_RDWR | O_CLOEXEC);

	cr_assert_geq(null, 0);
	cr_assert_geq(full, 0);
	same_as_the_kernel(loop, null, "/dev/null");
	same_as_the_kernel(loop, full, "/dev/full");
	/* Writes of nothing, at the position and at an offset. */
	cr_assert_eq(do_write(loop, null, "hello", 5, -1), 5);
	cr_assert_eq(do_write(loop, null, "hello", 5, 100), 5);
	cr_assert_eq(do_write(loop, null, "hello", 0, -1), 0);
	cr_assert_eq(do_read(loop, null, buf, sizeof(buf), -1), 0);
	/* /dev/full: every write is -ENOSPC. One of 0 bytes is what
	 * pwritev2(2) of nothing says (0: the kernel stops before the
	 * device), not write(2) (-ENOSPC): the loop writes through iovecs on
	 * epoll and io_uring's loop over .write also stops at once. Either
	 * is the kernel's answer; the loop's is the same on every backend. */
	cr_assert_eq(do_write(loop, full, "hello", 5, -1), -ENOSPC);
	cr_assert_eq(do_write(loop, full, "hello", 5, 7), -ENOSPC);
	{
		struct iovec none = { (void *)"hello", 0 };
		int64_t want = sys(pwritev2(full, &none, 1, -1, 0));
		int64_t got = do_write(loop, full, "hello", 0, -1);

		cr_assert_eq(got, want, "got %lld want %lld", (long long)got,
			     (long long)want);
	}
	memset(buf, 'x', sizeof(buf));
	cr_assert_eq(do_read(loop, full, buf, sizeof(buf), -1), sizeof(buf));
	for (size_t i = 0; i < sizeof(buf); i++)
		cr_assert_eq(buf[i], 0);
	close(null);
	close(full);
	tclose(loop);
}

/* write_file onto devices: /dev/full fails with -ENOSPC at the write (an
 * fsync asked for is never reached); /dev/null takes the data, but refuses
 * an fsync (-EINVAL, as fsync(2) of it says). */
BACKEND_TEST(fs_attack, write_file_onto_devices)
{
	rl_loop *loop = tloop(tp);
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int64_t fsync_null;

	cr_assert_geq(null, 0);
	fsync_null = sys(fsync(null));
	close(null);
	cr_assert_eq(do_write_file(loop, "/dev/full", "data", 4, 0), -ENOSPC);
	cr_assert_eq(do_write_file(loop, "/dev/full", "data", 4,
				   RL_WRITE_FILE_FSYNC),
		     -ENOSPC);
	cr_assert_eq(do_write_file(loop, "/dev/null", "data", 4, 0), 4);
	/* io_uring's chain (open, write, fsync, close) said 4 here: the
	 * kernel does not fail a link on a failed fsync, and the fsync's
	 * CQE was skipped (uring_fs_write.c). */
	cr_assert_eq(do_write_file(loop, "/dev/null", "data", 4,
				   RL_WRITE_FILE_FSYNC),
		     fsync_null < 0 ? fsync_null : 4);
	cr_assert_eq(
		do_write_file(loop, "/dev/null", "", 0, RL_WRITE_FILE_DATASYNC),
		fsync_null < 0 ? fsync_null : 0);
	tclose(loop);
}

BACKEND_TEST(fs_attack, directory_fd)
{
	char buf[8];
	rl_loop *loop = tloop(tp);
	int dfd = open(tdir(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	cr_assert_geq(dfd, 0);
	same_as_the_kernel(loop, dfd, "a directory");
	cr_assert_eq(do_write(loop, dfd, "x", 1, -1), -EBADF);
	cr_assert_eq(do_write(loop, dfd, "x", 1, 0), -EBADF);
	cr_assert_eq(do_read(loop, dfd, buf, sizeof(buf), -1), -EISDIR);
	cr_assert_eq(do_read(loop, dfd, buf, sizeof(buf), 0), -EISDIR);
	/* write_file and read_file of a directory. */
	cr_assert_eq(do_write_file(loop, tdir(), "x", 1, 0), -EISDIR);
	{
		struct one o;

		cr_assert_eq(rl_fs_read_file(loop, one_req(&o), tdir(), buf,
					     sizeof(buf), 0, tseen_cb),
			     0);
		cr_assert_eq(one_result(loop, &o), -EISDIR);
	}
	close(dfd);
	tclose(loop);
}

/* An eventfd takes exactly 8-byte values: a shorter or longer write is
 * -EINVAL, as write(2) says. It has no position: an offset is ignored,
 * as on a pipe. */
BACKEND_TEST(fs_attack, eventfd_fd)
{
	uint64_t two[2] = { 3, 4 }, v = 0;
	rl_loop *loop = tloop(tp);
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	cr_assert_geq(efd, 0);
	same_as_the_kernel(loop, efd, "an eventfd");
	cr_assert_eq(do_write(loop, efd, two, 4, -1), -EINVAL);
	cr_assert_eq(do_write(loop, efd, two, 8, -1), 8);
	cr_assert_eq(do_write(loop, efd, two, 8, 64), 8);
	cr_assert_eq(do_write(loop, efd, two, 16, -1),
		     sys(write(efd, two, 16)));
	cr_assert_eq(do_read(loop, efd, &v, 8, -1), 8);
	cr_assert_eq(v, 3 + 3);
	cr_assert_eq(do_read(loop, efd, &v, 4, -1), -EINVAL);
	close(efd);
	tclose(loop);
}

/* A socket: writes and reads go through; a write to one whose peer is
 * gone is -EPIPE (SIGPIPE ignored: ringloop.h). */
BACKEND_TEST(fs_attack, socket_fd)
{
	char buf[16] = { 0 };
	int sv[2];
	rl_loop *loop = tloop(tp);

	signal(SIGPIPE, SIG_IGN);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	same_as_the_kernel(loop, sv[0], "a socket");
	cr_assert_eq(do_write(loop, sv[0], "hello", 5, -1), 5);
	cr_assert_eq(do_read(loop, sv[1], buf, 5, -1), 5);
	cr_assert_eq(memcmp(buf, "hello", 5), 0);
	close(sv[1]);
	cr_assert_eq(do_write(loop, sv[0], "x", 1, -1), -EPIPE);
	cr_assert_eq(do_read(loop, sv[0], buf, 10, -1), 0);
	close(sv[0]);
	tclose(loop);
}

/*
 * An offset given for a socket, which has no position: rl_fs_read() says
 * it is ignored on every fd without one ("a pipe, a FIFO, a socket"), and
 * writes do the same on a pipe. io_uring refused it for sockets with
 * -ESPIPE while epoll ignored it: the same call gave different results.
 */
BACKEND_TEST(fs_attack, socket_offsets_are_ignored)
{
	char buf[16] = { 0 };
	struct iovec iov = { buf, 10 };
	int sv[2];
	rl_loop *loop = tloop(tp);

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	cr_assert_eq(do_write(loop, sv[0], "hello", 5, 1000), 5);
	cr_assert_eq(
		do_writev(loop, sv[0], &(struct iovec){ "world", 5 }, 1, 3), 5);
	cr_assert_eq(do_read(loop, sv[1], buf, 10, 77), 10);
	cr_assert_eq(memcmp(buf, "helloworld", 10), 0);
	cr_assert_eq(do_write(loop, sv[0], "0123456789", 10, 0), 10);
	{
		struct one o;

		cr_assert_eq(rl_fs_readv(loop, one_req(&o), sv[1], &iov, 1, 5,
					 tseen_cb),
			     0);
		cr_assert_eq(one_result(loop, &o), 10);
	}
	cr_assert_eq(memcmp(buf, "0123456789", 10), 0);
	close(sv[0]);
	close(sv[1]);
	tclose(loop);
}

/* An fd that is not open: -EBADF in the callback, from every request. */
BACKEND_TEST(fs_attack, closed_fd)
{
	char buf[8];
	struct iovec iov = { buf, sizeof(buf) };
	struct statx stx;
	struct one o;
	rl_loop *loop = tloop(tp);
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(do_write(loop, fd, "x", 1, -1), -EBADF);
	cr_assert_eq(do_write(loop, fd, "x", 1, 5), -EBADF);
	cr_assert_eq(do_write(loop, fd, "x", 0, -1), -EBADF);
	cr_assert_eq(do_writev(loop, fd, &iov, 1, -1), -EBADF);
	cr_assert_eq(do_read(loop, fd, buf, sizeof(buf), -1), -EBADF);
	cr_assert_eq(do_fsync(loop, fd, 0), -EBADF);
	cr_assert_eq(do_fsync(loop, fd, RL_FSYNC_DATASYNC), -EBADF);
	cr_assert_eq(do_ftruncate(loop, fd, 0), -EBADF);
	cr_assert_eq(do_fallocate(loop, fd, 0, 0, 10), -EBADF);
	cr_assert_eq(do_fstat(loop, fd, &stx), -EBADF);
	cr_assert_eq(rl_fs_close(loop, one_req(&o), fd, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), -EBADF);
	tclose(loop);
}

/* ------------------------------------------------------ zero-byte writes */

/*
 * A write of nothing succeeds with 0 wherever write(2) of nothing does: a
 * regular file (the file unchanged), a full pipe (no wait for room), a
 * pipe without a reader (write(2) says 0 before it looks for one), an
 * empty writev; write_file of nothing makes an empty file, truncating one
 * that was there.
 */
BACKEND_TEST(fs_attack, zero_byte_writes)
{
	static char fill[1 << 16];
	const char *path = spath("zero");
	struct one o;
	int pfd[2];
	int fd;
	rl_loop *loop = tloop(tp);

	signal(SIGPIPE, SIG_IGN);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "abc", 3), 3);
	cr_assert_eq(do_write(loop, fd, "zzz", 0, -1), 0);
	cr_assert_eq(do_write(loop, fd, "zzz", 0, 1), 0);
	cr_assert_eq(do_write(loop, fd, NULL, 0, 0), 0);
	cr_assert_eq(do_writev(loop, fd, NULL, 0, -1), 0);
	cr_assert_eq(lseek(fd, 0, SEEK_CUR), 3, "the position moved");
	cr_assert_eq(file_size(path), 3);
	close(fd);

	/* A full pipe: no wait. */
	cr_assert_eq(pipe2(pfd, O_CLOEXEC | O_NONBLOCK), 0);
	while (write(pfd[1], fill, sizeof(fill)) > 0)
		;
	cr_assert_eq(
		rl_fs_write(loop, one_req(&o), pfd[1], "x", 0, -1, tseen_cb),
		0);
	for (int i = 0; i < 2000 && !o.s.calls; i++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(1000);
	}
	cr_assert_eq(o.s.calls, 1, "a write of nothing waited for room");
	cr_assert_eq(o.s.result, 0);
	/* No reader. */
	close(pfd[0]);
	cr_assert_eq(do_write(loop, pfd[1], "x", 0, -1),
		     sys(write(pfd[1], "x", 0)));
	close(pfd[1]);

	/* write_file of nothing, over a file with data. */
	cr_assert_eq(do_write_file(loop, path, NULL, 0, 0), 0);
	cr_assert_eq(file_size(path), 0);
	cr_assert_eq(do_write_file(loop, path, "", 0, RL_WRITE_FILE_FSYNC), 0);
	cr_assert_eq(do_write_file(loop, path, "", 0, RL_WRITE_FILE_APPEND), 0);
	cr_assert_eq(file_size(path), 0);
	tclose(loop);
}

/* ------------------------------------------------------------ huge lengths */

/*
 * Lengths beyond what one request holds (INT_MAX: io_uring's result is an
 * int) fail in the submitting call, never reaching the kernel; a write of
 * INT_MAX bytes - more than the kernel takes in one call (MAX_RW_COUNT,
 * 2 GiB - 4 KiB) - is continued by the loop until all is written. The
 * source is 2 GiB of address space nobody writes (MAP_NORESERVE), which
 * /dev/null never reads: nothing is allocated.
 */
BACKEND_TEST(fs_attack, huge_lengths)
{
	size_t big = (size_t)INT_MAX;
	struct iovec iov[1024];
	struct one o;
	rl_loop *loop = tloop(tp);
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	char *mem = mmap(NULL, big + 1, PROT_READ,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	cr_assert_neq(mem, MAP_FAILED);
	cr_assert_geq(null, 0);
	one_req(&o);
	cr_assert_eq(rl_fs_write(loop, &o.req, null, mem, big + 1, 0, tseen_cb),
		     -EINVAL);
	cr_assert_eq(
		rl_fs_write(loop, &o.req, null, mem, SSIZE_MAX, 0, tseen_cb),
		-EINVAL);
	cr_assert_eq(
		rl_fs_write(loop, &o.req, null, mem, SIZE_MAX, 0, tseen_cb),
		-EINVAL);
	cr_assert_eq(rl_fs_read(loop, &o.req, null, mem, big + 1, 0, tseen_cb),
		     -EINVAL);
	cr_assert_eq(rl_fs_write_file(loop, &o.req, "x", mem, big + 1, 0, 0644,
				      tseen_cb),
		     -EINVAL);
	/* iovecs whose total wraps around, or passes INT_MAX. */
	iov[0] = (struct iovec){ mem, SIZE_MAX };
	iov[1] = (struct iovec){ mem, 2 };
	cr_assert_eq(rl_fs_writev(loop, &o.req, null, iov, 2, 0, tseen_cb),
		     -EINVAL);
	for (int i = 0; i < 1024; i++)
		iov[i] = (struct iovec){ mem, (size_t)2 << 20 };
	cr_assert_eq(rl_fs_writev(loop, &o.req, null, iov, 1024, 0, tseen_cb),
		     -EINVAL);
	cr_assert_eq(rl_run(loop, RL_RUN_NOWAIT), 0, "no callback may run");

	cr_assert_eq(do_write(loop, null, mem, big, -1), (int64_t)big);
	cr_assert_eq(do_write(loop, null, mem, big, 0), (int64_t)big);
	/* 1023 iovecs of 2 MiB: just under INT_MAX, in one writev. */
	cr_assert_eq(do_writev(loop, null, iov, 1023, -1), (int64_t)1023 << 21);
	munmap(mem, big + 1);
	close(null);
	tclose(loop);
}

/* Offsets: -1 is the file position; anything below fails in the call;
 * one whose end passes what a file can be is the kernel's to refuse. */
BACKEND_TEST(fs_attack, extreme_offsets)
{
	const char *path = spath("offsets");
	struct one o;
	rl_loop *loop = tloop(tp);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int64_t want;

	cr_assert_geq(fd, 0);
	cr_assert_eq(rl_fs_write(loop, one_req(&o), fd, "x", 1, -2, tseen_cb),
		     -EINVAL);
	cr_assert_eq(rl_fs_write(loop, &o.req, fd, "x", 1, INT64_MIN, tseen_cb),
		     -EINVAL);
	want = sys(pwrite(fd, "abc", 3, INT64_MAX - 1));
	cr_assert_lt(want, 0);
	cr_assert_eq(do_write(loop, fd, "abc", 3, INT64_MAX - 1), want);
	cr_assert_eq(do_write(loop, fd, "abc", 3, INT64_MAX), want);
	want = sys(ftruncate(fd, -1));
	cr_assert_eq(do_ftruncate(loop, fd, -1), want);
	want = sys(fallocate(fd, 0, INT64_MAX - 10, 100));
	cr_assert_eq(do_fallocate(loop, fd, 0, INT64_MAX - 10, 100), want);
	cr_assert_eq(file_size(path), 0, "nothing was written");
	close(fd);
	tclose(loop);
}

/* --------------------------------------------------------- RLIMIT_FSIZE */

/*
 * A file size limit: the kernel writes up to it (a short count), then
 * says EFBIG and raises SIGXFSZ, which a program that sets the limit
 * ignores (its default action ends the process, whichever thread - an
 * io-wq worker included - made the write). A write across the limit then
 * fails with -EFBIG and leaves the file at the limit, its bytes right; at
 * the file position, the position ends after them, as with write(2).
 */
#define FSIZE_LIMIT (64 << 10)

static void limit_fsize(void)
{
	struct rlimit rl;

	signal(SIGXFSZ, SIG_IGN);
	cr_assert_eq(getrlimit(RLIMIT_FSIZE, &rl), 0);
	rl.rlim_cur = FSIZE_LIMIT;
	cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
}

static void check_prefix(const char *path, const unsigned char *want,
			 size_t len)
{
	size_t got;
	unsigned char *back = slurp(path, &got);

	cr_assert_eq(got, len, "%s: %zu bytes, want %zu", path, got, len);
	cr_assert(memcmp(back, want, len) == 0, "%s: wrong bytes", path);
	free(back);
}

BACKEND_TEST(fs_attack, efbig_at_the_file_size_limit)
{
	size_t len = 100 << 10;
	unsigned char *data = pattern("fsize", len);
	const char *path = spath("fsize"), *wf = spath("fsize-wf");
	struct iovec iov[3] = {
		{ data, 1000 },
		{ data + 1000, 60000 },
		{ data + 61000, len - 61000 },
	};
	rl_loop *loop;
	int fd;

	limit_fsize();
	loop = tloop(tp);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(do_write(loop, fd, data, len, 0), -EFBIG);
	check_prefix(path, data, FSIZE_LIMIT);
	/* Beyond the limit: nothing written. */
	cr_assert_eq(do_write(loop, fd, data, 10, FSIZE_LIMIT), -EFBIG);
	cr_assert_eq(file_size(path), FSIZE_LIMIT);
	/* At the file position. */
	cr_assert_eq(ftruncate(fd, 0), 0);
	cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
	cr_assert_eq(do_write(loop, fd, data, 1000, -1), 1000);
	cr_assert_eq(do_write(loop, fd, data + 1000, len - 1000, -1), -EFBIG);
	check_prefix(path, data, FSIZE_LIMIT);
	cr_assert_eq(lseek(fd, 0, SEEK_CUR), FSIZE_LIMIT,
		     "the position is not after the bytes written");
	/* writev, at an offset and at the position. */
	cr_assert_eq(ftruncate(fd, 0), 0);
	cr_assert_eq(do_writev(loop, fd, iov, 3, 0), -EFBIG);
	check_prefix(path, data, FSIZE_LIMIT);
	cr_assert_eq(ftruncate(fd, 0), 0);
	cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
	cr_assert_eq(do_writev(loop, fd, iov, 3, -1), -EFBIG);
	check_prefix(path, data, FSIZE_LIMIT);
	cr_assert_eq(lseek(fd, 0, SEEK_CUR), FSIZE_LIMIT);
	/* The size-changing requests. */
	cr_assert_eq(do_ftruncate(loop, fd, FSIZE_LIMIT + 1), -EFBIG);
	cr_assert_eq(do_fallocate(loop, fd, 0, 0, FSIZE_LIMIT + 4096), -EFBIG);
	cr_assert_eq(file_size(path), FSIZE_LIMIT);
	close(fd);
	/* write_file: the part that fits is there, the result is -EFBIG. */
	cr_assert_eq(do_write_file(loop, wf, data, len, 0), -EFBIG);
	check_prefix(wf, data, FSIZE_LIMIT);
	cr_assert_eq(do_write_file(loop, wf, data, len, RL_WRITE_FILE_FSYNC),
		     -EFBIG);
	check_prefix(wf, data, FSIZE_LIMIT);
	cr_assert_eq(
		do_write_file(loop, wf, data, FSIZE_LIMIT, RL_WRITE_FILE_FSYNC),
		FSIZE_LIMIT);
	check_prefix(wf, data, FSIZE_LIMIT);
	cr_assert_eq(do_write_file(loop, wf, data, 1, RL_WRITE_FILE_APPEND),
		     -EFBIG);
	check_prefix(wf, data, FSIZE_LIMIT);
	free(data);
	tclose(loop);
}

/* -------------------------------------------------------- full file system */

/*
 * Many write_files at once into a file system too small for all of them,
 * with and without fsync, appending or not: each says len or -ENOSPC, and
 * every one that said len has exactly its bytes in its file.
 */
BACKEND_TEST(fs_attack, write_files_racing_for_the_last_blocks)
{
	enum { N = 48, LEN = 24 << 10 };
	const char *mnt = tmount_tmpfs("race", 512 << 10);
	static rl_req reqs[N];
	static char paths[N][640];
	struct tseen s = { 0 };
	unsigned char *data = pattern("race", LEN);
	int ok = 0, full = 0;
	rl_loop *loop = tloop(tp);

	for (int i = 0; i < N; i++) {
		unsigned flags = (unsigned[]){ 0, RL_WRITE_FILE_FSYNC,
					       RL_WRITE_FILE_APPEND,
					       RL_WRITE_FILE_DATASYNC }[i % 4];

		snprintf(paths[i], sizeof(paths[i]), "%s/f%d", mnt, i);
		reqs[i] = (rl_req){ .data = &s };
		cr_assert_eq(rl_fs_write_file(loop, &reqs[i], paths[i], data,
					      LEN - (size_t)i * 7, flags, 0644,
					      tseen_cb),
			     0);
	}
	trun(loop);
	cr_assert_eq(s.calls, N);
	for (int i = 0; i < N; i++) {
		size_t len = LEN - (size_t)i * 7;

		if (reqs[i].result == -ENOSPC) {
			full++;
			continue;
		}
		cr_assert_eq(reqs[i].result, (int64_t)len, "write_file %d: %s",
			     i, rl_strerror((int)reqs[i].result));
		check_prefix(paths[i], data, len);
		ok++;
	}
	cr_assert_gt(ok, 0);
	cr_assert_gt(full, 0, "the file system never filled up");
	free(data);
	tclose(loop);
	tumount();
}

/* writev and write_fixed filling a file system at the file position: the
 * bytes written are the data's start, in order, and the position ends
 * after them. */
BACKEND_TEST(fs_attack, enospc_writev_and_fixed_at_the_position)
{
	const char *mnt = tmount_tmpfs("vfull", 128 << 10);
	size_t len = 512 << 10;
	unsigned char *data = pattern("vfull", len);
	struct iovec iov[4] = {
		{ data, 3 },
		{ data + 3, 0 },
		{ data + 3, 100000 },
		{ data + 100003, len - 100003 },
	};
	struct iovec reg = { data, len };
	char path[640];
	struct one o;
	struct stat st;
	size_t got;
	unsigned char *back;
	rl_loop *loop = tloop(tp);
	int fd;

	snprintf(path, sizeof(path), "%s/f", mnt);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(do_writev(loop, fd, iov, 4, -1), -ENOSPC);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_gt(st.st_size, 100003);
	cr_assert_eq(lseek(fd, 0, SEEK_CUR), st.st_size);
	back = slurp(path, &got);
	cr_assert(memcmp(back, data, got) == 0, "writev: wrong bytes");
	free(back);

	cr_assert_eq(ftruncate(fd, 0), 0);
	cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
	cr_assert_eq(rl_loop_register_buffers(loop, &reg, 1), 0);
	cr_assert_eq(rl_fs_write_fixed(loop, one_req(&o), fd, data, len, -1, 0,
				       tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -ENOSPC);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_gt(st.st_size, 0);
	cr_assert_eq(lseek(fd, 0, SEEK_CUR), st.st_size);
	back = slurp(path, &got);
	cr_assert(memcmp(back, data, got) == 0, "write_fixed: wrong bytes");
	free(back);
	cr_assert_eq(rl_loop_register_buffers(loop, NULL, 0), 0);
	close(fd);
	free(data);
	tclose(loop);
	tumount();
}

/* ------------------------------------------------ cancel racing completion */

/*
 * Writes cancelled at every moment of their life (before the loop ran,
 * after one turn, after several): each callback runs once, with len or
 * -ECANCELED, and one that says len has its bytes in the file. A
 * cancelled write may have written (ringloop.h), but never anything but
 * its own data at its own place.
 */
BACKEND_TEST(fs_attack, cancel_racing_writes)
{
	enum { N = 96, BS = 8192 };
	const char *path = spath("cancelrace");
	static rl_req w[N];
	static struct tseen ws[N];
	unsigned char *data = pattern("cancelrace", N * BS);
	unsigned char *back;
	size_t got;
	int done = 0, cancelled = 0;
	rl_loop *loop = tloop(tp);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	cr_assert_geq(fd, 0);
	for (int i = 0; i < N; i++) {
		w[i] = (rl_req){ .data = &ws[i] };
		cr_assert_eq(rl_fs_write(loop, &w[i], fd, data + (size_t)i * BS,
					 BS, (int64_t)i * BS, tseen_cb),
			     0);
	}
	for (int round = 0; round < 4; round++) {
		for (int i = round; i < N; i += 4) {
			int r = rl_cancel(loop, &w[i]);

			cr_assert(r == 0 || r == -ENOENT, "cancel %d: %s", i,
				  rl_strerror(r));
			cr_assert(r == 0 || ws[i].calls == 1,
				  "not in flight but no callback");
		}
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	}
	trun(loop);
	back = slurp(path, &got);
	for (int i = 0; i < N; i++) {
		const unsigned char *at = back + (size_t)i * BS;

		cr_assert_eq(ws[i].calls, 1, "write %d: %d callbacks", i,
			     ws[i].calls);
		if (ws[i].result == -ECANCELED) {
			cancelled++;
			/* Nothing, or its own bytes. */
			for (size_t k = 0; (size_t)i * BS + k < got && k < BS;
			     k++)
				cr_assert(at[k] == 0 ||
						  at[k] == data[(size_t)i * BS +
								k],
					  "write %d: foreign byte", i);
			continue;
		}
		cr_assert_eq(ws[i].result, BS, "write %d: %s", i,
			     rl_strerror((int)ws[i].result));
		cr_assert_geq(got, (size_t)(i + 1) * BS);
		cr_assert(memcmp(at, data + (size_t)i * BS, BS) == 0,
			  "write %d said done; its bytes are not there", i);
		done++;
	}
	cr_log_info("%d done, %d cancelled", done, cancelled);
	free(back);
	free(data);
	close(fd);
	tclose(loop);
}

/*
 * A write to a pipe cut in the middle: the pipe takes 64 KiB of 256 KiB
 * and nobody reads. Cancelled, it says -ECANCELED, and what it wrote is
 * the start of its data, in order (the reader gets exactly a prefix).
 */
BACKEND_TEST(fs_attack, cancelled_pipe_write_leaves_a_prefix)
{
	size_t len = 256 << 10;
	unsigned char *data = pattern("pipecut", len);
	unsigned char *back = malloc(len);
	struct one o;
	ssize_t r;
	size_t got = 0;
	int pfd[2];
	rl_loop *loop = tloop(tp);

	cr_assert_not_null(back);
	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	cr_assert_eq(
		rl_fs_write(loop, one_req(&o), pfd[1], data, len, -1, tseen_cb),
		0);
	for (int i = 0; i < 30; i++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(1000);
	}
	cr_assert_eq(o.s.calls, 0);
	cr_assert_eq(rl_cancel(loop, &o.req), 0);
	cr_assert_eq(one_result(loop, &o), -ECANCELED);
	cr_assert_eq(fcntl(pfd[0], F_SETFL, O_NONBLOCK), 0);
	while ((r = read(pfd[0], back + got, len - got)) > 0)
		got += (size_t)r;
	cr_assert_gt(got, 0, "nothing went into the pipe");
	cr_assert_lt(got, len);
	cr_assert(memcmp(back, data, got) == 0, "not a prefix of the data");
	close(pfd[0]);
	close(pfd[1]);
	free(back);
	free(data);
	tclose(loop);
}

/* -------------------------------------------- fds closed under requests */

struct closer {
	rl_timer timer;
	int fd;
};

static void close_fd_cb(rl_timer *t, int status)
{
	struct closer *c = t->data;

	if (status == 0)
		close(c->fd);
}

/* Starts a write too big for a new pipe (pfd), and a timer that closes
 * the pipe's end side (0: the reader, 1: the write's own fd) after ms
 * while the write waits for room. */
static void write_then_close(rl_loop *loop, struct one *o, int pfd[2],
			     struct closer *c, int side, uint64_t ms)
{
	static char big[256 << 10];

	signal(SIGPIPE, SIG_IGN);
	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	cr_assert_eq(rl_fs_write(loop, one_req(o), pfd[1], big, sizeof(big), -1,
				 tseen_cb),
		     0);
	c->fd = pfd[side];
	c->timer.data = c;
	cr_assert_eq(rl_timer_start(loop, &c->timer, ms, 0, close_fd_cb), 0);
}

/*
 * The reader of a pipe goes away while a write waits for room in it: the
 * write fails with -EPIPE (as write(2) would), once, and the loop goes on.
 */
BACKEND_TEST(fs_attack, reader_closes_under_a_waiting_write)
{
	struct closer c = { 0 };
	struct one o;
	int pfd[2];
	rl_loop *loop = tloop(tp);

	write_then_close(loop, &o, pfd, &c, 0, 30);
	cr_assert_eq(one_result(loop, &o), -EPIPE);
	close(pfd[1]);
	tclose(loop);
}

/*
 * The fd a write waits on is closed by a timer's callback: whatever the
 * backend makes of that (io_uring keeps the file; epoll's worker finds the
 * fd gone), the request still ends - with a cancel - exactly once, and
 * the loop closes cleanly.
 */
BACKEND_TEST(fs_attack, fd_closed_under_a_waiting_write)
{
	struct closer c = { 0 };
	struct one o;
	int pfd[2];
	rl_loop *loop = tloop(tp);

	write_then_close(loop, &o, pfd, &c, 1, 20);
	while (c.timer.state != 0 && !o.s.calls)
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
	for (int i = 0; i < 20; i++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(1000);
	}
	if (!o.s.calls)
		cr_assert_eq(rl_cancel(loop, &o.req), 0);
	trun(loop);
	cr_assert_eq(o.s.calls, 1);
	cr_assert(o.s.result == -ECANCELED || o.s.result == -EBADF, "%s",
		  rl_strerror((int)o.s.result));
	close(pfd[0]);
	tclose(loop);
}

/* Requests on a regular file whose fd the first callback closes: each of
 * the others ends once, with its result or -EBADF, and a write that says
 * it wrote did. */
struct closing {
	int fd;
	int calls;
	bool closed;
};

static void close_in_cb(rl_req *req)
{
	struct closing *c = req->data;

	c->calls++;
	if (!c->closed) {
		c->closed = true;
		close(c->fd);
	}
}

BACKEND_TEST(fs_attack, fd_closed_from_a_callback)
{
	enum { N = 32, BS = 4096 };
	const char *path = spath("closedcb");
	static rl_req w[N];
	unsigned char *data = pattern("closedcb", N * BS);
	struct closing c = { 0 };
	size_t got;
	unsigned char *back;
	rl_loop *loop = tloop(tp);

	c.fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert_geq(c.fd, 0);
	for (int i = 0; i < N; i++) {
		w[i] = (rl_req){ .data = &c };
		if (i % 8 == 7)
			cr_assert_eq(
				rl_fs_fsync(loop, &w[i], c.fd, 0, close_in_cb),
				0);
		else
			cr_assert_eq(rl_fs_write(loop, &w[i], c.fd,
						 data + (size_t)i * BS, BS,
						 (int64_t)i * BS, close_in_cb),
				     0);
	}
	trun(loop);
	cr_assert_eq(c.calls, N);
	back = slurp(path, &got);
	for (int i = 0; i < N; i++) {
		if (w[i].result == -EBADF)
			continue;
		cr_assert_eq(w[i].result, i % 8 == 7 ? 0 : BS, "%d: %s", i,
			     rl_strerror((int)w[i].result));
		if (i % 8 != 7)
			cr_assert(got >= (size_t)(i + 1) * BS &&
					  memcmp(back + (size_t)i * BS,
						 data + (size_t)i * BS,
						 BS) == 0,
				  "write %d said done", i);
	}
	free(back);
	free(data);
	tclose(loop);
}

/* ------------------------------------------------ write_file onto a FIFO */

/*
 * write_file of a FIFO nobody reads: its open waits for a reader, as
 * open(2) does (rl_fs_open()), so the request waits - but never beyond
 * what the caller decides: a cancel ends it with -ECANCELED, a deadline
 * with -ETIMEDOUT, rl_loop_close() with -ECANCELED, each exactly once,
 * with no fd or slot left behind (tclose()).
 */
static void fifo_nobody_reads(const struct tp *tp, int how)
{
	const char *path = spath("fifo-noreader");
	struct rl_timer deadline;
	struct one o;
	rl_loop *loop = tloop(tp);

	cr_assert_eq(mkfifo(path, 0644), 0);
	cr_assert_eq(rl_fs_write_file(loop, one_req(&o), path, "data", 4,
				      RL_WRITE_FILE_FSYNC, 0644, tseen_cb),
		     0);
	for (int i = 0; i < 30; i++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(1000);
	}
	cr_assert_eq(o.s.calls, 0,
		     "write_file of a FIFO without a reader "
		     "finished: %s",
		     rl_strerror((int)o.s.result));
	switch (how) {
	case 0:
		cr_assert_eq(rl_cancel(loop, &o.req), 0);
		cr_assert_eq(one_result(loop, &o), -ECANCELED);
		break;
	case 1:
		rl_timer_init(&deadline);
		cr_assert_eq(rl_req_deadline(loop, &o.req, &deadline, 20), 0);
		cr_assert_eq(one_result(loop, &o), -ETIMEDOUT);
		break;
	default:
		cr_assert_eq(rl_loop_close(loop), 0);
		cr_assert_eq(o.s.calls, 1);
		cr_assert_eq(o.s.result, -ECANCELED, "%d/%#x: got %lld",
			     tp->backend, tp->flags, (long long)o.s.result);
		return;
	}
	tclose(loop);
}

BACKEND_TEST(fs_attack, write_file_fifo_without_reader_cancelled, .timeout = 60)
{
	fifo_nobody_reads(tp, 0);
}

BACKEND_TEST(fs_attack, write_file_fifo_without_reader_deadline, .timeout = 60)
{
	fifo_nobody_reads(tp, 1);
}

/* On io_uring this said -EINTR: the close's cancel interrupts the open
 * waiting in an io-wq worker, and only single-SQE requests turned that
 * into -ECANCELED. */
BACKEND_TEST(fs_attack, write_file_fifo_without_reader_loop_closed,
	     .timeout = 60)
{
	fifo_nobody_reads(tp, 2);
}

/*
 * Every request that waits in an io-wq worker (RL_FORCE_ASYNC), when the
 * loop closes: a write to a full pipe, write_file and an open for writing
 * of a FIFO without a reader. Each says -ECANCELED, once.
 */
BACKEND_TEST(fs_attack, loop_closed_on_waits_in_workers, .timeout = 60)
{
	static char big[256 << 10];
	const char *fifo = spath("fifo-workers");
	struct rl_options opt;
	struct one w, wf, op;
	int pfd[2];
	rl_loop *loop;

	rl_options_init(&opt);
	opt.flags = RL_FORCE_ASYNC;
	loop = tloop_opts(tp, &opt);
	cr_assert_eq(mkfifo(fifo, 0644), 0);
	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	cr_assert_eq(rl_fs_write(loop, one_req(&w), pfd[1], big, sizeof(big),
				 -1, tseen_cb),
		     0);
	cr_assert_eq(rl_fs_write_file(loop, one_req(&wf), fifo, "x", 1, 0, 0644,
				      tseen_cb),
		     0);
	cr_assert_eq(rl_fs_open(loop, one_req(&op), fifo, O_WRONLY | O_CLOEXEC,
				0, tseen_cb),
		     0);
	for (int i = 0; i < 30; i++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(1000);
	}
	cr_assert_eq(w.s.calls + wf.s.calls + op.s.calls, 0);
	cr_assert_eq(rl_loop_close(loop), 0);
	cr_assert_eq(w.s.calls, 1);
	cr_assert_eq(wf.s.calls, 1);
	cr_assert_eq(op.s.calls, 1);
	cr_assert_eq(w.s.result, -ECANCELED, "write: %s",
		     rl_strerror((int)w.s.result));
	cr_assert_eq(wf.s.result, -ECANCELED, "write_file: %s",
		     rl_strerror((int)wf.s.result));
	cr_assert_eq(op.s.result, -ECANCELED, "open: %s",
		     rl_strerror((int)op.s.result));
	close(pfd[0]);
	close(pfd[1]);
}

/* The reader of a FIFO opens it and goes away at once: write_file then
 * meets a FIFO without a reader in the middle of its write: -EPIPE. */
static void *open_and_leave(void *arg)
{
	int fd = open(arg, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		usleep(20000);
		close(fd);
	}
	return NULL;
}

BACKEND_TEST(fs_attack, write_file_fifo_reader_leaves, .timeout = 60)
{
	size_t len = 1 << 20;
	unsigned char *data;
	const char *path = spath("fifo-leaves");
	pthread_t th;
	rl_loop *loop;

	tskip_uring_threads_under_valgrind(tp);
	signal(SIGPIPE, SIG_IGN);
	data = pattern("leaves", len);
	loop = tloop(tp);
	cr_assert_eq(mkfifo(path, 0644), 0);
	cr_assert_eq(pthread_create(&th, NULL, open_and_leave, (void *)path),
		     0);
	cr_assert_eq(do_write_file(loop, path, data, len, 0), -EPIPE);
	pthread_join(th, NULL);
	free(data);
	tclose(loop);
}

/* ------------------------------------------------------- no fd left at all */

/*
 * RLIMIT_NOFILE at the fds already open: write_file and read_file cannot
 * open a plain fd. io_uring's direct descriptors need none; every other
 * way fails with -EMFILE at once (no fd of the loop's own will ever come
 * back to wait for). Nothing hangs, nothing is half-reported.
 */
BACKEND_TEST(fs_attack, write_file_with_no_fd_left, .timeout = 60)
{
	const char *path = spath("nofd");
	struct rlimit rl, old;
	char buf[16];
	struct one o;
	int64_t r;
	rl_loop *loop;
	bool direct =
		tp->backend == RL_BACKEND_URING && !(tp->flags & RL_NO_DIRECT);

	if (getenv("RL_VALGRIND"))
		cr_skip_test("Valgrind does not let RLIMIT_NOFILE be lowered");
	loop = tloop(tp);
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	/* The highest fd open, plus one: no fd is free below it? Use dup
	 * until EMFILE instead, to fill every hole too. */
	rl.rlim_cur = (rlim_t)tfd_count() + 8;
	rl.rlim_max = old.rlim_max;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	{
		int held[64], n = 0, fd;

		while (n < 64 && (fd = dup(0)) >= 0)
			held[n++] = fd;
		cr_assert_eq(errno, EMFILE);
		r = do_write_file(loop, path, "hello", 5, RL_WRITE_FILE_FSYNC);
		cr_assert(r == 5 || (!direct && r == -EMFILE), "%s",
			  rl_strerror((int)r));
		if (r == 5) {
			cr_assert_eq(rl_fs_read_file(loop, one_req(&o), path,
						     buf, sizeof(buf), 0,
						     tseen_cb),
				     0);
			cr_assert_eq(one_result(loop, &o), 5);
			cr_assert_eq(memcmp(buf, "hello", 5), 0);
		} else {
			cr_assert_eq(rl_fs_read_file(loop, one_req(&o), path,
						     buf, sizeof(buf), 0,
						     tseen_cb),
				     0);
			cr_assert_eq(one_result(loop, &o), -EMFILE);
		}
		cr_assert_eq(rl_fs_open(loop, one_req(&o), path,
					O_RDONLY | O_CLOEXEC, 0, tseen_cb),
			     0);
		cr_assert_eq(one_result(loop, &o), -EMFILE);
		while (n)
			close(held[--n]);
	}
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	if (r != 5)
		cr_assert_eq(do_write_file(loop, path, "hello", 5, 0), 5);
	tclose(loop);
}

/* ------------------------------------------------------------ paths */

BACKEND_TEST(fs_attack, paths_too_long_and_empty)
{
	char *longp = malloc(PATH_MAX + 2);
	char *deep = malloc(PATH_MAX);
	char name[NAME_MAX + 2];
	struct statx stx;
	struct one o;
	char buf[8];
	size_t n;
	rl_loop *loop = tloop(tp);

	cr_assert_not_null(longp);
	cr_assert_not_null(deep);
	one_req(&o);
	memset(longp, 'a', PATH_MAX + 1);
	longp[PATH_MAX + 1] = 0;
	cr_assert_eq(rl_fs_write_file(loop, &o.req, longp, "x", 1, 0, 0644,
				      tseen_cb),
		     -ENAMETOOLONG);
	cr_assert_eq(rl_fs_read_file(loop, &o.req, longp, buf, 8, 0, tseen_cb),
		     -ENAMETOOLONG);
	cr_assert_eq(rl_fs_open(loop, &o.req, longp, O_RDONLY, 0, tseen_cb),
		     -ENAMETOOLONG);
	cr_assert_eq(rl_fs_stat(loop, &o.req, longp, &stx, tseen_cb),
		     -ENAMETOOLONG);
	cr_assert_eq(rl_fs_unlink(loop, &o.req, longp, tseen_cb),
		     -ENAMETOOLONG);
	cr_assert_eq(rl_fs_mkdir(loop, &o.req, longp, 0755, tseen_cb),
		     -ENAMETOOLONG);
	cr_assert_eq(rl_fs_rmdir(loop, &o.req, longp, tseen_cb), -ENAMETOOLONG);
	cr_assert_eq(rl_fs_rename(loop, &o.req, "a", longp, 0, tseen_cb),
		     -ENAMETOOLONG);
	cr_assert_eq(rl_fs_rename(loop, &o.req, longp, "a", 0, tseen_cb),
		     -ENAMETOOLONG);
	/* Empty. */
	cr_assert_eq(
		rl_fs_write_file(loop, &o.req, "", "x", 1, 0, 0644, tseen_cb),
		-ENOENT);
	cr_assert_eq(rl_fs_read_file(loop, &o.req, "", buf, 8, 0, tseen_cb),
		     -ENOENT);
	cr_assert_eq(rl_fs_open(loop, &o.req, "", O_RDONLY, 0, tseen_cb),
		     -ENOENT);
	cr_assert_eq(rl_fs_stat(loop, &o.req, "", &stx, tseen_cb), -ENOENT);
	cr_assert_eq(rl_fs_unlink(loop, &o.req, "", tseen_cb), -ENOENT);
	cr_assert_eq(rl_fs_mkdir(loop, &o.req, "", 0755, tseen_cb), -ENOENT);
	cr_assert_eq(rl_fs_rename(loop, &o.req, "a", "", 0, tseen_cb), -ENOENT);
	cr_assert_eq(rl_run(loop, RL_RUN_NOWAIT), 0, "no callback may run");

	/* PATH_MAX - 1 characters, the longest path there is: "./" repeated
	 * before a name. It works. */
	n = strlen(tdir()) + strlen("/f");
	memset(deep, 0, PATH_MAX);
	strcpy(deep, tdir());
	while (strlen(deep) + 2 + 2 <= PATH_MAX - 1)
		strcat(deep, "/.");
	while (strlen(deep) + 2 < PATH_MAX - 1)
		strcat(deep, "/");
	strcat(deep, "/f");
	(void)n;
	cr_assert_eq(strlen(deep), PATH_MAX - 1);
	cr_assert_eq(do_write_file(loop, deep, "deep", 4, 0), 4);
	cr_assert_eq(rl_fs_read_file(loop, one_req(&o), deep, buf, sizeof(buf),
				     0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 4);
	cr_assert_eq(rl_fs_unlink(loop, one_req(&o), deep, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), 0);
	/* A name longer than NAME_MAX: the kernel's -ENAMETOOLONG. */
	memset(name, 'n', NAME_MAX + 1);
	name[NAME_MAX + 1] = 0;
	cr_assert_eq(do_write_file(loop, spath(name), "x", 1, 0),
		     -ENAMETOOLONG);
	free(longp);
	free(deep);
	tclose(loop);
}

/* NULL where the header forbids it: -EINVAL (loop, request, callback) or
 * -EFAULT (a buffer, a path, a struct), from the call, never a crash. */
BACKEND_TEST(fs_attack, null_arguments)
{
	char buf[8];
	struct iovec iov = { buf, 8 };
	struct statx stx;
	rl_req req = { 0 };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_fs_write(NULL, &req, 0, buf, 8, 0, tseen_cb), -EINVAL);
	cr_assert_eq(rl_fs_write(loop, NULL, 0, buf, 8, 0, tseen_cb), -EINVAL);
	cr_assert_eq(rl_fs_writev(loop, NULL, 0, &iov, 1, 0, tseen_cb),
		     -EINVAL);
	cr_assert_eq(rl_fs_writev(loop, &req, 0, &iov, 1, 0, NULL), -EINVAL);
	cr_assert_eq(rl_fs_readv(loop, &req, 0, NULL, 1, 0, tseen_cb), -EFAULT);
	cr_assert_eq(rl_fs_read(loop, &req, 0, NULL, 8, 0, tseen_cb), -EFAULT);
	cr_assert_eq(rl_fs_write_fixed(loop, &req, 0, NULL, 8, 0, 0, tseen_cb),
		     -EFAULT);
	cr_assert_eq(rl_fs_fsync(NULL, &req, 0, 0, tseen_cb), -EINVAL);
	cr_assert_eq(rl_fs_fsync(loop, NULL, 0, 0, tseen_cb), -EINVAL);
	cr_assert_eq(rl_fs_ftruncate(loop, &req, 0, 0, NULL), -EINVAL);
	cr_assert_eq(rl_fs_fallocate(loop, NULL, 0, 0, 0, 1, tseen_cb),
		     -EINVAL);
	cr_assert_eq(rl_fs_fstat(loop, &req, 0, NULL, tseen_cb), -EFAULT);
	cr_assert_eq(rl_fs_fstat(NULL, &req, 0, &stx, tseen_cb), -EINVAL);
	cr_assert_eq(rl_fs_stat(loop, &req, "x", NULL, tseen_cb), -EFAULT);
	cr_assert_eq(rl_fs_stat(loop, &req, NULL, &stx, tseen_cb), -EFAULT);
	cr_assert_eq(rl_fs_open(loop, &req, NULL, O_RDONLY, 0, tseen_cb),
		     -EFAULT);
	cr_assert_eq(rl_fs_read_file(loop, &req, NULL, buf, 8, 0, tseen_cb),
		     -EFAULT);
	cr_assert_eq(rl_fs_read_file(loop, &req, "x", NULL, 8, 0, tseen_cb),
		     -EFAULT);
	cr_assert_eq(rl_fs_read_file(NULL, &req, "x", buf, 8, 0, tseen_cb),
		     -EINVAL);
	cr_assert_eq(
		rl_fs_write_file(loop, NULL, "x", buf, 1, 0, 0644, tseen_cb),
		-EINVAL);
	cr_assert_eq(rl_fs_write_file(loop, &req, "x", buf, 1, 0, 0644, NULL),
		     -EINVAL);
	cr_assert_eq(rl_fs_rename(loop, &req, NULL, "b", 0, tseen_cb), -EFAULT);
	cr_assert_eq(rl_fs_rmdir(loop, &req, NULL, tseen_cb), -EFAULT);
	cr_assert_eq(rl_fs_close(loop, NULL, 0, tseen_cb), -EINVAL);
	cr_assert_eq(rl_loop_register_buffers(NULL, &iov, 1), -EINVAL);
	cr_assert_eq(rl_loop_register_buffers(loop, NULL, 1), -EFAULT);
	cr_assert_eq(rl_cancel(loop, NULL), -EINVAL);
	cr_assert_eq(rl_cancel(NULL, &req), -EINVAL);
	/*
	 * A request never submitted: ringloop.h says -ENOENT ("not in
	 * flight (done, or never submitted)"), but a zeroed request has no
	 * loop, and rl_cancel() answers -EINVAL for a request of another
	 * loop before it looks at the state - which test_fs.c asserts
	 * ("never submitted"). A contract question left open (see the
	 * report of this file's branch); both are safe.
	 */
	{
		int r = rl_cancel(loop, &req);

		cr_assert(r == -ENOENT || r == -EINVAL, "%s", rl_strerror(r));
	}
	cr_assert_eq(rl_run(loop, RL_RUN_NOWAIT), 0, "no callback may run");
	tclose(loop);
}

/* ------------------------------------------------------------ the styles */

/*
 * The same attacks through each style: an fsync that fails inside
 * write_file is the error (not success), a length past INT_MAX fails the
 * call (no callback, a rejected promise, the coroutine's return), and a
 * write_file blocked on a FIFO without a reader ends with -ECANCELED,
 * once, when the loop closes under it.
 */
static int64_t null_fsync_result(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	int64_t r;

	cr_assert_geq(fd, 0);
	r = sys(fsync(fd));
	close(fd);
	return r < 0 ? r : 4;
}

BACKEND_TEST(fs_attack, callback_style, .timeout = 60)
{
	const char *fifo = spath("cb-fifo");
	int64_t want = null_fsync_result();
	struct cb_res a = { 0 }, b = { 0 }, c = { 0 };
	rl_loop *loop = tloop(tp);
	rl_cb_ctx *cbs;

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	cr_assert_eq(rl_cb_fs_write_file(cbs, "/dev/null", "data", 4,
					 RL_WRITE_FILE_FSYNC, 0644, cb_res_fn,
					 &a),
		     0);
	cr_assert_eq(rl_cb_fs_write(cbs, 1, "x", (size_t)INT_MAX + 1, 0,
				    cb_res_fn, &b),
		     -EINVAL);
	trun(loop);
	cr_assert_eq(a.calls, 1);
	cr_assert_eq(a.err < 0 ? a.err : a.value, want, "%d %lld", a.err,
		     (long long)a.value);
	cr_assert_eq(b.calls, 0);
	cr_assert_eq(mkfifo(fifo, 0644), 0);
	cr_assert_eq(
		rl_cb_fs_write_file(cbs, fifo, "x", 1, 0, 0644, cb_res_fn, &c),
		0);
	for (int i = 0; i < 20; i++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(1000);
	}
	cr_assert_eq(c.calls, 0);
	tclose(loop); /* closes the context too */
	cr_assert_eq(c.calls, 1);
	cr_assert_eq(c.err, -ECANCELED, "%s", rl_strerror(c.err));
}

BACKEND_TEST(fs_attack, promise_style, .timeout = 60)
{
	const char *fifo = spath("promise-fifo");
	int64_t want = null_fsync_result();
	struct tsettled a, b, c;
	rl_loop *loop = tloop(tp);
	rl_promise_ctx *ctx = topen(loop);

	twatch(rl_promise_fs_write_file(ctx, "/dev/null", "data", 4,
					RL_WRITE_FILE_FSYNC, 0644),
	       &a);
	twatch(rl_promise_fs_write(ctx, 1, "x", (size_t)INT_MAX + 1, 0), &b);
	trun(loop);
	cr_assert_eq(a.calls, 1);
	cr_assert_eq(a.err < 0 ? a.err : a.v.i, want, "%d %lld", a.err,
		     (long long)a.v.i);
	cr_assert_eq(b.calls, 1);
	cr_assert_eq(b.err, -EINVAL);
	cr_assert_eq(mkfifo(fifo, 0644), 0);
	twatch(rl_promise_fs_write_file(ctx, fifo, "x", 1, 0, 0644), &c);
	for (int i = 0; i < 20; i++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(1000);
	}
	cr_assert_eq(c.calls, 0);
	tclose(loop); /* closes the context too */
	cr_assert_eq(c.calls, 1);
	cr_assert_eq(c.err, -ECANCELED, "%s", rl_strerror(c.err));
}

struct coro_args {
	const char *fifo;
	int64_t fsync_res, huge_res, fifo_res;
	int stage;
};

static int64_t coro_attacks(void *arg)
{
	struct coro_args *a = arg;

	a->fsync_res = rl_coro_fs_write_file("/dev/null", "data", 4,
					     RL_WRITE_FILE_FSYNC, 0644);
	a->huge_res = rl_coro_fs_write(1, "x", (size_t)INT_MAX + 1, 0);
	a->stage = 1;
	a->fifo_res = rl_coro_fs_write_file(a->fifo, "x", 1, 0, 0644);
	a->stage = 2;
	return 0;
}

BACKEND_TEST(fs_attack, coro_style, .timeout = 60)
{
	struct coro_args a = { .fifo = spath("coro-fifo") };
	int64_t want = null_fsync_result();
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);

	cr_assert_eq(mkfifo(a.fifo, 0644), 0);
	cr_assert_eq(rl_coro_spawn(s, NULL, coro_attacks, &a, NULL), 0);
	for (int i = 0; i < 2000 && a.stage < 1; i++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(1000);
	}
	cr_assert_eq(a.stage, 1);
	cr_assert_eq(a.fsync_res, want, "%s", rl_strerror((int)a.fsync_res));
	cr_assert_eq(a.huge_res, -EINVAL);
	for (int i = 0; i < 20; i++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(1000);
	}
	cr_assert_eq(a.stage, 1, "write_file of a FIFO without a reader ended");
	tclose(loop); /* closes the scheduler first */
	cr_assert_eq(a.stage, 2);
	cr_assert_eq(a.fifo_res, -ECANCELED, "%s",
		     rl_strerror((int)a.fifo_res));
}

/* ----------------------------------------- renamed and unlinked under reads */

/*
 * read_files of one path while another thread replaces the file at that
 * path (rename() of a prepared file over it) and unlinks it: each read
 * gives one whole file - all of the first version or all of the second,
 * never a mix nor a size of one with bytes of the other - or -ENOENT.
 */
struct swapper {
	const char *path, *a, *b, *tmp;
	size_t alen, blen;
	volatile int stop;
};

static void put_file(const char *path, const char *name, size_t len)
{
	unsigned char *d = pattern(name, len);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, d, len), (ssize_t)len);
	close(fd);
	free(d);
}

static void *swap_files(void *arg)
{
	struct swapper *w = arg;

	for (unsigned i = 0; !w->stop; i++) {
		const char *src = i & 1 ? w->b : w->a;

		/* A hard link keeps the source for the next round. */
		if (link(src, w->tmp) == 0)
			(void)!rename(w->tmp, w->path);
		if (i % 7 == 3)
			unlink(w->path);
		usleep(50);
	}
	return NULL;
}

struct reader {
	rl_loop *loop;
	struct swapper *w;
	rl_req req;
	int left, whole_a, whole_b, gone, bad;
};

static void reread(rl_req *req)
{
	struct reader *r = req->data;
	int64_t n = req->result;

	if (n == -ENOENT)
		r->gone++;
	else if (n == (int64_t)r->w->alen) {
		bool ok = true;

		for (size_t i = 0; ok && i < r->w->alen; i++)
			ok = ((unsigned char *)req->buf)[i] == tbyte("va", i);
		ok ? r->whole_a++ : r->bad++;
	} else if (n == (int64_t)r->w->blen) {
		bool ok = true;

		for (size_t i = 0; ok && i < r->w->blen; i++)
			ok = ((unsigned char *)req->buf)[i] == tbyte("vb", i);
		ok ? r->whole_b++ : r->bad++;
	} else {
		r->bad++;
	}
	if (--r->left > 0)
		cr_assert_eq(rl_fs_read_file(r->loop, req, r->w->path, req->buf,
					     req->len, RL_READ_FILE_GROW,
					     reread),
			     0);
}

BACKEND_TEST(fs_attack, read_file_while_renamed_and_unlinked, .timeout = 120)
{
	struct swapper w = {
		.path = spath("swapped"),
		.a = spath("va"),
		.b = spath("vb"),
		.tmp = spath("swap-tmp"),
		.alen = 300000,
		.blen = 70000,
	};
	struct reader r[4];
	pthread_t th;
	int a = 0, b = 0, gone = 0;
	rl_loop *loop;

	tskip_uring_threads_under_valgrind(tp);
	put_file(w.a, "va", w.alen);
	put_file(w.b, "vb", w.blen);
	put_file(w.path, "va", w.alen);
	loop = tloop(tp);
	cr_assert_eq(pthread_create(&th, NULL, swap_files, &w), 0);
	for (int i = 0; i < 4; i++) {
		r[i] = (struct reader){ .loop = loop, .w = &w, .left = 400 };
		r[i].req.data = &r[i];
		cr_assert_eq(rl_fs_read_file(loop, &r[i].req, w.path, NULL, 0,
					     RL_READ_FILE_GROW, reread),
			     0);
	}
	trun(loop);
	w.stop = 1;
	pthread_join(th, NULL);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(r[i].bad, 0, "%d reads saw a torn file", r[i].bad);
		a += r[i].whole_a;
		b += r[i].whole_b;
		gone += r[i].gone;
		free(r[i].req.buf);
	}
	cr_log_info("a %d b %d gone %d", a, b, gone);
	tclose(loop);
}

/* ------------------------------ the loop closed on every kind of request */

/*
 * fsync, ftruncate, fallocate, rename, unlink, mkdir, rmdir and writes in
 * flight when the loop closes: each callback runs once, and each that
 * reports success did what it says (the file has the size, the directory
 * exists, the name moved...).
 */
BACKEND_TEST(fs_attack, loop_closed_on_every_kind_of_request)
{
	enum { N = 24 };
	static rl_req reqs[N * 8];
	static struct tseen seen[N * 8];
	static char names[N][4][640];
	unsigned char *data = pattern("every", 65536);
	int fds[N];
	int k = 0, ok = 0;
	int fds_before = tfd_count();
	rl_loop *loop = tloop(tp);

	for (int i = 0; i < N; i++) {
		snprintf(names[i][0], 640, "%s/file%d", tdir(), i);
		snprintf(names[i][1], 640, "%s/moved%d", tdir(), i);
		snprintf(names[i][2], 640, "%s/dir%d", tdir(), i);
		snprintf(names[i][3], 640, "%s/gone%d", tdir(), i);
		fds[i] = open(names[i][0],
			      O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		cr_assert_geq(fds[i], 0);
		put_file(names[i][3], "gone", 10);
	}
	for (int i = 0; i < N; i++) {
		rl_req *q = &reqs[k];

		for (int j = 0; j < 7; j++) {
			reqs[k + j] = (rl_req){ .data = &seen[k + j] };
			seen[k + j] = (struct tseen){ 0 };
		}
		cr_assert_eq(rl_fs_write(loop, &q[0], fds[i], data, 65536, 0,
					 tseen_cb),
			     0);
		cr_assert_eq(rl_fs_fsync(loop, &q[1], fds[i], 0, tseen_cb), 0);
		cr_assert_eq(
			rl_fs_ftruncate(loop, &q[2], fds[i], 100000, tseen_cb),
			0);
		cr_assert_eq(rl_fs_fallocate(loop, &q[3], fds[i],
					     FALLOC_FL_KEEP_SIZE, 0, 1 << 20,
					     tseen_cb),
			     0);
		cr_assert_eq(
			rl_fs_mkdir(loop, &q[4], names[i][2], 0755, tseen_cb),
			0);
		cr_assert_eq(rl_fs_unlink(loop, &q[5], names[i][3], tseen_cb),
			     0);
		cr_assert_eq(rl_fs_rename(loop, &q[6], names[i][0], names[i][1],
					  0, tseen_cb),
			     0);
		k += 7;
	}
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(rl_loop_close(loop), 0);
	for (int i = 0; i < N; i++) {
		struct tseen *s = &seen[i * 7];
		struct stat st;

		for (int j = 0; j < 7; j++) {
			cr_assert_eq(s[j].calls, 1, "%d/%d: %d callbacks", i, j,
				     s[j].calls);
			cr_assert(s[j].result >= 0 || s[j].result == -ECANCELED,
				  "%d/%d: %s", i, j,
				  rl_strerror((int)s[j].result));
			ok += s[j].result >= 0;
		}
		cr_assert_eq(fstat(fds[i], &st), 0);
		if (s[0].result >= 0)
			cr_assert_eq(s[0].result, 65536);
		/* A write at 0 cannot shrink what ftruncate made. */
		if (s[2].result == 0)
			cr_assert_geq(st.st_size, 100000);
		if (s[4].result == 0)
			cr_assert_eq(stat(names[i][2], &st), 0,
				     "mkdir said done");
		if (s[5].result == 0)
			cr_assert_neq(stat(names[i][3], &st), 0,
				      "unlink said done");
		if (s[6].result == 0)
			cr_assert_eq(stat(names[i][1], &st), 0,
				     "rename said done");
		close(fds[i]);
	}
	cr_assert_eq(tfd_count(), fds_before, "fds leaked");
	cr_log_info("%d of %d done before the close", ok, N * 7);
	free(data);
}

/* ----------------------------------------------------- O_DIRECT at -1 */

/*
 * A misaligned O_DIRECT write at the file position fails with -EINVAL
 * and leaves the position where it was; an aligned one at the position
 * moves it. writev of misaligned iovecs fails the same way.
 */
BACKEND_TEST(fs_attack, o_direct_at_the_position)
{
	const char *path = spath("direct-pos");
	unsigned char *buf = NULL;
	struct iovec iov[2];
	struct one o;
	rl_loop *loop = tloop(tp);
	int fd;

	cr_assert_eq(rl_fs_open(loop, one_req(&o), path,
				O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0644,
				tseen_cb),
		     0);
	fd = (int)one_result(loop, &o);
	if (fd == -EINVAL)
		cr_skip_test("%s: no O_DIRECT on this file system", tdir());
	cr_assert_geq(fd, 0, "%s", rl_strerror(fd));
	cr_assert_eq(posix_memalign((void **)&buf, 4096, 4 * 4096), 0);
	memset(buf, 'd', 4 * 4096);
	cr_assert_eq(do_write(loop, fd, buf, 4096, -1), 4096);
	cr_assert_eq(lseek(fd, 0, SEEK_CUR), 4096);
	cr_assert_eq(do_write(loop, fd, buf + 1, 4096, -1), -EINVAL);
	cr_assert_eq(do_write(loop, fd, buf, 4095, -1), -EINVAL);
	cr_assert_eq(lseek(fd, 0, SEEK_CUR), 4096, "a failed write moved it");
	iov[0] = (struct iovec){ buf, 4096 };
	iov[1] = (struct iovec){ buf + 4096 + 7, 4096 };
	cr_assert_eq(do_writev(loop, fd, iov, 2, -1), -EINVAL);
	cr_assert_eq(lseek(fd, 0, SEEK_CUR), 4096);
	iov[1] = (struct iovec){ buf + 4096, 4096 };
	cr_assert_eq(do_writev(loop, fd, iov, 2, -1), 8192);
	cr_assert_eq(lseek(fd, 0, SEEK_CUR), 3 * 4096);
	cr_assert_eq(file_size(path), 3 * 4096);
	close(fd);
	free(buf);
	tclose(loop);
}

/* ----------------------------------------------- IOV_MAX iovecs to a pipe */

/*
 * writev of IOV_MAX iovecs of odd sizes, empty ones among them, to a pipe
 * read slowly: the loop continues every short write from the right iovec
 * and byte, to the last one.
 */
BACKEND_TEST(fs_attack, writev_of_iov_max_iovecs_to_a_slow_pipe, .timeout = 60)
{
	static struct iovec iov[1024];
	size_t total = 0, sizes = 0;
	unsigned char *data;
	struct drain r = { 0 };
	pthread_t th;
	int pfd[2];
	rl_loop *loop;

	tskip_uring_threads_under_valgrind(tp);
	for (int i = 0; i < 1024; i++)
		sizes += i % 5 == 0 ? 0 : (size_t)(i * 37) % 2000 + 1;
	data = pattern("iovmax", sizes);
	for (int i = 0; i < 1024; i++) {
		size_t n = i % 5 == 0 ? 0 : (size_t)(i * 37) % 2000 + 1;

		iov[i] = (struct iovec){ data + total, n };
		total += n;
	}
	loop = tloop(tp);
	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	r.fd = pfd[0];
	r.want = total;
	r.name = "iovmax";
	cr_assert_eq(pthread_create(&th, NULL, drain_pipe, &r), 0);
	cr_assert_eq(do_writev(loop, pfd[1], iov, 1024, -1), (int64_t)total);
	pthread_join(th, NULL);
	cr_assert_eq(r.got, total);
	cr_assert(r.ok, "the bytes came out wrong");
	close(pfd[0]);
	close(pfd[1]);
	free(data);
	tclose(loop);
}

/* ------------------------------------------------ more hostile fds and files */

/* An O_PATH fd opens nothing: every request but fstat is -EBADF, as the
 * kernel says. */
BACKEND_TEST(fs_attack, o_path_fd)
{
	const char *path = tfile("opath", 100);
	struct statx stx;
	char buf[8];
	rl_loop *loop = tloop(tp);
	int fd = open(path, O_PATH | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	same_as_the_kernel(loop, fd, "an O_PATH fd");
	cr_assert_eq(do_write(loop, fd, "x", 1, 0), -EBADF);
	cr_assert_eq(do_read(loop, fd, buf, sizeof(buf), 0), -EBADF);
	cr_assert_eq(do_fstat(loop, fd, &stx), 0);
	cr_assert_eq(stx.stx_size, 100);
	close(fd);
	tclose(loop);
}

/*
 * read_file of files that are not regular: a Unix socket's path (-ENXIO,
 * as open(2) says), /proc/self/mem (its read at 0 fails: -EIO), endless
 * /dev/zero into a fixed buffer (-EFBIG), /dev/null (empty).
 */
BACKEND_TEST(fs_attack, read_file_of_hostile_files, .timeout = 60)
{
	const char *sock = spath("sock");
	struct sockaddr_un {
		sa_family_t sun_family;
		char sun_path[108];
	} sa = { .sun_family = AF_UNIX };
	char buf[64];
	struct one o;
	int64_t want;
	rl_loop *loop = tloop(tp);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int fd;

	cr_assert_geq(s, 0);
	cr_assert_lt(strlen(sock), sizeof(sa.sun_path));
	strcpy(sa.sun_path, sock);
	cr_assert_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(rl_fs_read_file(loop, one_req(&o), sock, buf, sizeof(buf),
				     0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -ENXIO);
	close(s);

	fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	want = sys(pread(fd, buf, sizeof(buf), 0));
	close(fd);
	cr_assert_lt(want, 0);
	cr_assert_eq(rl_fs_read_file(loop, one_req(&o), "/proc/self/mem", buf,
				     sizeof(buf), 0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), want);

	cr_assert_eq(rl_fs_read_file(loop, one_req(&o), "/dev/zero", buf,
				     sizeof(buf), 0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EFBIG);
	cr_assert_eq(rl_fs_read_file(loop, one_req(&o), "/dev/null", buf,
				     sizeof(buf), 0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 0);
	tclose(loop);
}

/* write_file with RL_WRITE_FILE_EXCL onto a FIFO that exists: -EEXIST at
 * once, never a wait for a reader. */
BACKEND_TEST(fs_attack, write_file_excl_onto_a_fifo, .timeout = 60)
{
	const char *fifo = spath("excl-fifo");
	rl_loop *loop = tloop(tp);

	cr_assert_eq(mkfifo(fifo, 0644), 0);
	cr_assert_eq(do_write_file(loop, fifo, "x", 1, RL_WRITE_FILE_EXCL),
		     -EEXIST);
	cr_assert_eq(do_write_file(loop, fifo, "x", 1,
				   RL_WRITE_FILE_EXCL | RL_WRITE_FILE_APPEND),
		     -EEXIST);
	tclose(loop);
}

/* Registered buffers: a write of nothing at the very end of one works, a
 * range one byte past it fails in the call, and the set cannot change
 * while a request is in flight. */
BACKEND_TEST(fs_attack, fixed_buffer_edges)
{
	static char block[8192 + 64], big[256 << 10];
	char *mem = block + 32;
	size_t memlen = 8192;
	struct iovec reg = { mem, 8192 };
	const char *path = spath("fixed-edges");
	struct one o, w;
	int pfd[2];
	rl_loop *loop = tloop(tp);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	cr_assert_geq(fd, 0);
	memset(mem, 'm', memlen);
	cr_assert_eq(rl_loop_register_buffers(loop, &reg, 1), 0);
	cr_assert_eq(rl_fs_write_fixed(loop, one_req(&o), fd, mem + memlen, 0,
				       0, 0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 0);
	cr_assert_eq(rl_fs_write_fixed(loop, one_req(&o), fd, mem + 1, memlen,
				       0, 0, tseen_cb),
		     -EFAULT);
	cr_assert_eq(
		rl_fs_write_fixed(loop, &o.req, fd, mem - 1, 2, 0, 0, tseen_cb),
		-EFAULT);
	cr_assert_eq(
		rl_fs_write_fixed(loop, &o.req, fd, mem, 1, 0, 1, tseen_cb),
		-EFAULT);
	cr_assert_eq(rl_fs_write_fixed(loop, one_req(&o), fd, mem, memlen, 0, 0,
				       tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), (int64_t)memlen);
	/* A write that waits (a full pipe) holds the set. */
	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	cr_assert_eq(rl_fs_write(loop, one_req(&w), pfd[1], big, sizeof(big),
				 -1, tseen_cb),
		     0);
	cr_assert_eq(rl_loop_register_buffers(loop, NULL, 0), -EBUSY);
	cr_assert_eq(rl_cancel(loop, &w.req), 0);
	cr_assert_eq(one_result(loop, &w), -ECANCELED);
	cr_assert_eq(rl_loop_register_buffers(loop, NULL, 0), 0);
	close(pfd[0]);
	close(pfd[1]);
	close(fd);
	tclose(loop);
}

/* ------------------------------------------- anonymous-inode fds on the pool */

/*
 * An eventfd (like a timerfd or a signalfd) is an anonymous inode: fstat
 * gives no file type, yet a read of one with a zero counter waits for
 * good, as does a write that would overflow it. Such waits must not take
 * the pool's regular workers: with every one of them blocked, a stat of
 * a plain file would never complete. Here the reads and the write wait,
 * a stat still completes, and cancelling ends the waits.
 */
BACKEND_TEST(fs_attack, blocking_eventfd_does_not_starve_the_pool,
	     .timeout = 60)
{
	const char *path = tfile("evstat", 10);
	struct rl_options opt;
	struct one r[3], w, st;
	struct statx stx;
	uint64_t v[3], max = UINT64_MAX - 1;
	rl_loop *loop;
	int rfd = eventfd(0, EFD_CLOEXEC);
	int wfd = eventfd(0, EFD_CLOEXEC);

	cr_assert_geq(rfd, 0);
	cr_assert_geq(wfd, 0);
	cr_assert_eq(write(wfd, &max, 8), 8);
	rl_options_init(&opt);
	opt.pool_threads = 2;
	loop = tloop_opts(tp, &opt);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rl_fs_read(loop, one_req(&r[i]), rfd, &v[i], 8, -1,
					tseen_cb),
			     0);
	v[0] = 1;
	cr_assert_eq(
		rl_fs_write(loop, one_req(&w), wfd, &v[0], 8, -1, tseen_cb), 0);
	cr_assert_eq(rl_fs_stat(loop, one_req(&st), path, &stx, tseen_cb), 0);
	for (int i = 0; i < 2000 && !st.s.calls; i++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(1000);
	}
	cr_assert_eq(st.s.calls, 1,
		     "a stat waited behind blocked eventfd "
		     "reads and writes");
	cr_assert_eq(st.s.result, 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(r[i].s.calls, 0);
	cr_assert_eq(w.s.calls, 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(rl_cancel(loop, &r[i].req), 0);
	cr_assert_eq(rl_cancel(loop, &w.req), 0);
	trun(loop);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(r[i].s.calls, 1);
		cr_assert_eq(r[i].s.result, -ECANCELED);
	}
	cr_assert_eq(w.s.calls, 1);
	cr_assert_eq(w.s.result, -ECANCELED);
	tclose(loop); /* (the eventfds count in its baseline) */
	close(rfd);
	close(wfd);
}

/*
 * A cancel that lands while a worker is about to block. On epoll a
 * write to a full eventfd waits in the slow lane's write(), and
 * rl_cancel() ends that wait with the pool's signal; a signal that
 * comes before the syscall is lost, and the write then waited for
 * good (blocking_eventfd_does_not_starve_the_pool hung so, rarely, on
 * a loaded machine). The cancel here comes when the job has just been
 * handed to the slow lane, after a delay that sweeps the worker's way
 * into the syscall; every write must end, cancelled, within a bound.
 * On io_uring the write is polled in the kernel and the cancel
 * removes the poll.
 */
BACKEND_TEST(fs_attack, cancel_just_before_a_worker_blocks, .timeout = 60)
{
	uint64_t max = UINT64_MAX - 1, one = 1;
	int efd = eventfd(0, EFD_CLOEXEC);
	unsigned rounds = getenv("RL_VALGRIND") ? 20 : 1000;
	rl_loop *loop = tloop(tp);
	struct rl_stats st;

	cr_assert_geq(efd, 0);
	cr_assert_eq(write(efd, &max, 8), 8);
	for (unsigned i = 0; i < rounds; i++) {
		struct one w;
		uint64_t jobs;
		int k;

		rl_loop_stats(loop, &st);
		jobs = st.pool_jobs;
		cr_assert_eq(rl_fs_write(loop, one_req(&w), efd, &one, 8, -1,
					 tseen_cb),
			     0);
		/* Until the write is in the slow lane. On epoll the loop
		 * thread finds the fd a stream and hands the write over in
		 * its first run; with the fast path off (epoll-pool) a
		 * regular worker finds out first, and the loop then hands
		 * it over (at most a few ms). io_uring runs no job. */
		if (tp->backend == RL_BACKEND_EPOLL)
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		for (k = 0; tp->backend == RL_BACKEND_EPOLL &&
			    (tp->flags & RL_NO_INLINE) && k < 2000 &&
			    st.pool_jobs == jobs;
		     k++) {
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
			rl_loop_stats(loop, &st);
			if (st.pool_jobs == jobs)
				usleep(50);
		}
		tspin_us(i % 40);
		cr_assert_eq(w.s.calls, 0);
		cr_assert_eq(rl_cancel(loop, &w.req), 0);
		for (k = 0; k < 5000 && !w.s.calls; k++) {
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
			if (!w.s.calls)
				usleep(1000);
		}
		cr_assert_eq(w.s.calls, 1,
			     "backend %d flags %#x round %u: a cancelled write "
			     "never ended",
			     (int)tp->backend, tp->flags, i);
		cr_assert_eq(w.s.result, -ECANCELED);
	}
	tclose(loop);
	close(efd);
}

/*
 * Other anonymous inodes: a timerfd's read waits for its expiry (polled,
 * like an eventfd's); an inotify fd and an epoll fd answer the other
 * requests as the kernel does.
 *
 * A read or write of an epoll fd is where the backends part (a finding
 * left open, see this branch's report): read(2) and write(2) say -EINVAL,
 * and so does the epoll backend, but io_uring (6.18) arms a poll on the
 * epoll fd and waits - until an event comes, or a cancel. The test
 * accepts that wait, which is safe: the cancel ends it with -ECANCELED,
 * once.
 */
BACKEND_TEST(fs_attack, other_anonymous_inodes, .timeout = 60)
{
	struct itimerspec its = { .it_value = { 0, 30 * 1000 * 1000 } };
	uint64_t ticks = 0;
	char buf[64];
	int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	int efd = epoll_create1(EPOLL_CLOEXEC);
	int ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
	int64_t want;
	rl_loop *loop = tloop(tp);

	cr_assert_geq(tfd, 0);
	cr_assert_geq(efd, 0);
	cr_assert_geq(ifd, 0);
	cr_assert_eq(timerfd_settime(tfd, 0, &its, NULL), 0);
	cr_assert_eq(do_read(loop, tfd, &ticks, 8, -1), 8);
	cr_assert_geq(ticks, 1);
	same_as_the_kernel(loop, efd, "an epoll fd");
	same_as_the_kernel(loop, ifd, "an inotify fd");
	want = sys(write(ifd, buf, 8));
	cr_assert_eq(do_write(loop, ifd, buf, 8, -1), want);
	want = sys(read(efd, buf, sizeof(buf)));
	for (int w = 0; w < 2; w++) {
		struct one o;

		if (w)
			cr_assert_eq(rl_fs_write(loop, one_req(&o), efd, buf, 8,
						 -1, tseen_cb),
				     0);
		else
			cr_assert_eq(rl_fs_read(loop, one_req(&o), efd, buf,
						sizeof(buf), -1, tseen_cb),
				     0);
		for (int i = 0; i < 50 && !o.s.calls; i++) {
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
			usleep(1000);
		}
		if (tp->backend == RL_BACKEND_EPOLL) {
			cr_assert_eq(o.s.calls, 1);
			cr_assert_eq(o.s.result, want);
			continue;
		}
		if (!o.s.calls)
			cr_assert_eq(rl_cancel(loop, &o.req), 0);
		trun(loop);
		cr_assert_eq(o.s.calls, 1);
		cr_assert(o.s.result == want || o.s.result == -ECANCELED, "%s",
			  rl_strerror((int)o.s.result));
	}
	tclose(loop); /* (the fds count in its baseline) */
	close(tfd);
	close(efd);
	close(ifd);
}
