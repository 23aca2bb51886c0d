/* SPDX-License-Identifier: MIT */
/*
 * test_fs_write.c - the write side of file requests, and the requests
 * beyond open/read/close/stat: results, errors from the kernel and from
 * the submitting call, short writes continued (a pipe, a file system
 * filling up), full and read-only file systems, O_DIRECT, registered
 * buffers, cancelling and closing with writes in flight.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs_helpers.h"
#include "helpers.h"

#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN 0x00002000U
#endif

/* ------------------------------------------------------------ write */

BACKEND_TEST(fs_write, write_at_position_and_offset)
{
	const char *path = spath("w");
	char buf[32] = { 0 };
	struct statx stx;
	rl_loop *loop = tloop(tp);
	int fd = open_fd(loop, path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
			 0644);

	cr_assert_eq(do_write(loop, fd, "hello ", 6, -1), 6);
	cr_assert_eq(do_write(loop, fd, "world", 5, -1), 5);
	cr_assert_eq(do_write(loop, fd, "H", 1, 0), 1);
	/* A positional write leaves the position where it was. */
	cr_assert_eq(lseek(fd, 0, SEEK_CUR), 11);
	cr_assert_eq(do_write(loop, fd, "", 0, -1), 0);
	cr_assert_eq(do_fstat(loop, fd, &stx), 0);
	cr_assert_eq(stx.stx_size, 11);
	cr_assert(S_ISREG(stx.stx_mode));
	cr_assert_eq(pread(fd, buf, sizeof(buf), 0), 11);
	cr_assert_str_eq(buf, "Hello world");
	/* A write far past the end leaves a hole. */
	cr_assert_eq(do_write(loop, fd, "!", 1, 100000), 1);
	cr_assert_eq(do_fstat(loop, fd, &stx), 0);
	cr_assert_eq(stx.stx_size, 100001);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
}

/*
 * Where a write runs. On epoll the loop thread finds the fd's type: a
 * write to a pipe, a socket or /dev/null with room is written there, with
 * no pool job, and a write to a file goes to one worker. Before, every
 * write went to a worker first, which only found out the type and sent a
 * stream's write back. With the fast path off (epoll-pool) that is still
 * the way: one job each. io_uring has no pool. Every byte arrives.
 */
BACKEND_TEST(fs_write, stream_writes_run_on_the_loop_thread)
{
	bool epoll = tp->backend == RL_BACKEND_EPOLL;
	bool fast = epoll && !(tp->flags & RL_NO_INLINE);
	const char *path = spath("where");
	rl_loop *loop = tloop(tp);
	struct iovec iov[2] = { { "ab", 2 }, { "cdef", 4 } };
	char got[16] = { 0 };
	struct rl_stats st;
	uint64_t jobs, inl;
	int fds[4], p[2], sv[2];

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fds[0] = p[1];
	fds[1] = sv[0];
	fds[2] = open("/dev/null", O_WRONLY | O_CLOEXEC);
	fds[3] = open_fd(loop, path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
			 0644);
	cr_assert_geq(fds[2], 0);
	for (int i = 0; i < 4; i++) {
		bool file = i == 3;

		rl_loop_stats(loop, &st);
		jobs = st.pool_jobs;
		inl = st.inline_completions;
		cr_assert_eq(do_write(loop, fds[i], "hello", 5, -1), 5);
		cr_assert_eq(do_writev(loop, fds[i], iov, 2, -1), 6);
		rl_loop_stats(loop, &st);
		cr_assert_eq(st.pool_jobs - jobs,
			     !epoll	       ? 0
			     : (fast && !file) ? 0
					       : 2,
			     "fd %d: %llu pool jobs", i,
			     (unsigned long long)(st.pool_jobs - jobs));
		if (fast && !file)
			cr_assert_eq(st.inline_completions - inl, 2);
	}
	cr_assert_eq(read(p[0], got, sizeof(got)), 11);
	cr_assert_str_eq(got, "helloabcdef");
	memset(got, 0, sizeof(got));
	cr_assert_eq(read(sv[1], got, sizeof(got)), 11);
	cr_assert_str_eq(got, "helloabcdef");
	memset(got, 0, sizeof(got));
	cr_assert_eq(pread(fds[3], got, sizeof(got), 0), 11);
	cr_assert_str_eq(got, "helloabcdef");
	cr_assert_eq(do_close(loop, fds[3]), 0);
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
	close(fds[2]);
	tclose(loop);
}

BACKEND_TEST(fs_write, large_write_and_read_back)
{
	size_t len = 3u << 20;
	unsigned char *data = pattern("big", len);
	const char *path = spath("big");
	rl_loop *loop = tloop(tp);
	int fd = open_fd(loop, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			 0644);

	cr_assert_eq(do_write(loop, fd, data, len, 0), (int64_t)len);
	cr_assert_eq(do_close(loop, fd), 0);
	check_content(path, data, len);
	free(data);
	tclose(loop);
}

BACKEND_TEST(fs_write, append_ignores_the_offset)
{
	const char *path = tfile("app", 10);
	unsigned char *want = pattern("app", 13);
	rl_loop *loop = tloop(tp);
	int fd = open_fd(loop, path, O_WRONLY | O_APPEND | O_CLOEXEC, 0);

	memcpy(want + 10, "xyz", 3);
	cr_assert_eq(do_write(loop, fd, "xy", 2, 0), 2);
	cr_assert_eq(do_write(loop, fd, "z", 1, -1), 1);
	cr_assert_eq(do_close(loop, fd), 0);
	check_content(path, want, 13);
	free(want);
	tclose(loop);
}

/* ------------------------------------------------------- readv, writev */

BACKEND_TEST(fs_write, writev_and_readv)
{
	const char *path = spath("vec");
	char a[] = "abc", b[] = "defgh", c[] = "ij";
	struct iovec out[4] = {
		{ a, 3 },
		{ NULL, 0 },
		{ b, 5 },
		{ c, 2 },
	};
	char r1[4] = { 0 }, r2[16] = { 0 };
	struct iovec in[2] = { { r1, 4 }, { r2, sizeof(r2) } };
	struct one o;
	rl_loop *loop = tloop(tp);
	int fd = open_fd(loop, path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
			 0644);

	cr_assert_eq(rl_fs_writev(loop, one_req(&o), fd, out, 4, 0, tseen_cb),
		     0);
	cr_assert_eq(o.req.len, 10, "len is the total");
	cr_assert_eq(one_result(loop, &o), 10);
	cr_assert_eq(rl_fs_readv(loop, one_req(&o), fd, in, 2, 1, tseen_cb), 0);
	cr_assert_eq(o.req.len, 4 + sizeof(r2));
	cr_assert_eq(one_result(loop, &o), 9, "a short read at the end");
	cr_assert_eq(memcmp(r1, "bcde", 4), 0);
	cr_assert_str_eq(r2, "fghij");
	/* At the file position, which the writes at offsets did not move. */
	cr_assert_eq(lseek(fd, 10, SEEK_SET), 10);
	cr_assert_eq(rl_fs_writev(loop, one_req(&o), fd, out, 1, -1, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 3);
	cr_assert_eq(rl_fs_readv(loop, one_req(&o), fd, in, 0, 0, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), 0, "no iovecs, nothing read");
	cr_assert_eq(rl_fs_readv(loop, one_req(&o), 999, in, 2, 0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EBADF);
	cr_assert_eq(rl_fs_writev(loop, one_req(&o), 999, out, 4, 0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EBADF);
	cr_assert_eq(do_close(loop, fd), 0);
	check_content(path, "abcdefghijabc", 13);
	tclose(loop);
}

/* ------------------------------------------- fsync, ftruncate, fallocate */

BACKEND_TEST(fs_write, fsync_and_fdatasync)
{
	const char *path = tfile("sync", 100);
	int pfd[2];
	struct one o;
	rl_loop *loop = tloop(tp);
	int fd = open_fd(loop, path, O_RDWR | O_CLOEXEC, 0);

	cr_assert_eq(rl_fs_fsync(loop, one_req(&o), fd, 0, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), 0);
	cr_assert_eq(
		rl_fs_fsync(loop, one_req(&o), fd, RL_FSYNC_DATASYNC, tseen_cb),
		0);
	cr_assert_eq(one_result(loop, &o), 0);
	cr_assert_eq(rl_fs_fsync(loop, one_req(&o), 999, 0, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), -EBADF);
	/* A pipe cannot be synced: the kernel says so on every backend. */
	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	cr_assert_eq(rl_fs_fsync(loop, one_req(&o), pfd[1], 0, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), -EINVAL);
	close(pfd[0]);
	close(pfd[1]);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
}

BACKEND_TEST(fs_write, ftruncate_grows_and_shrinks)
{
	const char *path = tfile("trunc", 1000);
	struct statx stx;
	struct one o;
	rl_loop *loop = tloop(tp);
	int fd = open_fd(loop, path, O_RDWR | O_CLOEXEC, 0);
	int rdonly = open_fd(loop, path, O_RDONLY | O_CLOEXEC, 0);

	cr_assert_eq(rl_fs_ftruncate(loop, one_req(&o), fd, 10, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), 0);
	cr_assert_eq(do_fstat(loop, fd, &stx), 0);
	cr_assert_eq(stx.stx_size, 10);
	cr_assert_eq(rl_fs_ftruncate(loop, one_req(&o), fd, 5000, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), 0);
	cr_assert_eq(do_fstat(loop, fd, &stx), 0);
	cr_assert_eq(stx.stx_size, 5000);
	cr_assert_eq(rl_fs_ftruncate(loop, one_req(&o), fd, -1, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), -EINVAL);
	/* Not open for writing: the kernel's answer, the same everywhere. */
	cr_assert_eq(rl_fs_ftruncate(loop, one_req(&o), rdonly, 0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EINVAL);
	cr_assert_eq(rl_fs_ftruncate(loop, one_req(&o), 999, 0, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), -EBADF);
	cr_assert_eq(do_close(loop, fd), 0);
	cr_assert_eq(do_close(loop, rdonly), 0);
	tclose(loop);
}

BACKEND_TEST(fs_write, fallocate_extends_keeps_size_and_punches)
{
	const char *path = tfile("falloc", 8192);
	struct statx stx;
	char buf[4096], zero[4096] = { 0 };
	struct one o;
	rl_loop *loop = tloop(tp);
	int fd = open_fd(loop, path, O_RDWR | O_CLOEXEC, 0);

	cr_assert_eq(
		rl_fs_fallocate(loop, one_req(&o), fd, 0, 0, 65536, tseen_cb),
		0);
	if (one_result(loop, &o) == -EOPNOTSUPP)
		cr_skip_test("%s: no fallocate on this file system", tdir());
	cr_assert_eq(o.s.result, 0);
	cr_assert_eq(do_fstat(loop, fd, &stx), 0);
	cr_assert_eq(stx.stx_size, 65536);
	cr_assert_eq(rl_fs_fallocate(loop, one_req(&o), fd, FALLOC_FL_KEEP_SIZE,
				     65536, 65536, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 0);
	cr_assert_eq(do_fstat(loop, fd, &stx), 0);
	cr_assert_eq(stx.stx_size, 65536, "KEEP_SIZE kept it");
	cr_assert_geq(stx.stx_blocks * 512, 131072, "the blocks are there");
	cr_assert_eq(rl_fs_fallocate(loop, one_req(&o), fd,
				     FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				     0, 4096, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 0);
	cr_assert_eq(pread(fd, buf, sizeof(buf), 0), 4096);
	cr_assert_eq(memcmp(buf, zero, sizeof(buf)), 0, "the hole reads 0");
	/* An unknown mode: the kernel's -EOPNOTSUPP, on every backend. */
	cr_assert_eq(rl_fs_fallocate(loop, one_req(&o), fd, 0x4000000, 0, 1,
				     tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EOPNOTSUPP);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
}

/* ------------------------------------------------ unlink, mkdir, rename */

BACKEND_TEST(fs_write, mkdir_rmdir_unlink)
{
	const char *dir = spath("d");
	const char *inner = spath("d/f");
	const char *file = spath("plain");
	struct stat st;
	struct one o;
	mode_t mask = umask(022);
	rl_loop *loop = tloop(tp);

	umask(mask);
	tfile("plain", 3);
	cr_assert_eq(rl_fs_mkdir(loop, one_req(&o), dir, 0750, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), 0);
	cr_assert_eq(stat(dir, &st), 0);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(st.st_mode & 0777, 0750 & ~mask);
	cr_assert_eq(rl_fs_mkdir(loop, one_req(&o), dir, 0750, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), -EEXIST);
	cr_assert_eq(rl_fs_mkdir(loop, one_req(&o), tpath("no/such"), 0750,
				 tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -ENOENT);
	tfile("d/f", 1);
	cr_assert_eq(rl_fs_rmdir(loop, one_req(&o), dir, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), -ENOTEMPTY);
	cr_assert_eq(rl_fs_unlink(loop, one_req(&o), dir, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), -EISDIR);
	cr_assert_eq(rl_fs_rmdir(loop, one_req(&o), file, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), -ENOTDIR);
	cr_assert_eq(rl_fs_unlink(loop, one_req(&o), inner, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), 0);
	cr_assert_eq(access(inner, F_OK), -1);
	cr_assert_eq(rl_fs_unlink(loop, one_req(&o), inner, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), -ENOENT);
	cr_assert_eq(rl_fs_rmdir(loop, one_req(&o), dir, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), 0);
	cr_assert_eq(access(dir, F_OK), -1);
	tclose(loop);
}

BACKEND_TEST(fs_write, rename_replace_noreplace_exchange)
{
	const char *a = tfile("ra", 10);
	const char *b = tfile("rb", 20);
	const char *c = spath("rc");
	struct stat st;
	struct one o;
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_fs_rename(loop, one_req(&o), a, c, 0, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), 0);
	cr_assert_eq(access(a, F_OK), -1);
	cr_assert_eq(stat(c, &st), 0);
	cr_assert_eq(st.st_size, 10);
	cr_assert_eq(rl_fs_rename(loop, one_req(&o), a, c, 0, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), -ENOENT);
	cr_assert_eq(rl_fs_rename(loop, one_req(&o), c, b, RENAME_NOREPLACE,
				  tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EEXIST);
	cr_assert_eq(rl_fs_rename(loop, one_req(&o), c, b, RENAME_EXCHANGE,
				  tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 0);
	cr_assert_eq(stat(b, &st), 0);
	cr_assert_eq(st.st_size, 10, "exchanged");
	cr_assert_eq(stat(c, &st), 0);
	cr_assert_eq(st.st_size, 20);
	cr_assert_eq(rl_fs_rename(loop, one_req(&o), c, b, 0, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), 0);
	cr_assert_eq(stat(b, &st), 0);
	cr_assert_eq(st.st_size, 20, "replaced");
	cr_assert_eq(access(c, F_OK), -1);
	tclose(loop);
}

/* The fd keeps the file it opened; the path names the new one. */
BACKEND_TEST(fs_write, rename_over_an_open_file)
{
	const char *path = tfile("victim", 100);
	const char *tmp = spath("victim.tmp");
	unsigned char *fresh = pattern("fresh", 50);
	char buf[200];
	struct one o;
	rl_loop *loop = tloop(tp);
	int fd = open_fd(loop, path, O_RDONLY | O_CLOEXEC, 0);

	cr_assert_eq(rl_fs_write_file(loop, one_req(&o), tmp, fresh, 50, 0,
				      0644, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 50);
	cr_assert_eq(rl_fs_rename(loop, one_req(&o), tmp, path, 0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 0);
	cr_assert_eq(rl_fs_read(loop, one_req(&o), fd, buf, sizeof(buf), 0,
				tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 100, "the old file, through the fd");
	tcheck("victim", buf, 100);
	cr_assert_eq(rl_fs_read_file(loop, one_req(&o), path, buf, sizeof(buf),
				     0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 50, "the new file, by its name");
	cr_assert_eq(memcmp(buf, fresh, 50), 0);
	cr_assert_eq(do_close(loop, fd), 0);
	free(fresh);
	tclose(loop);
}

/* ------------------------------------------------------------- fstat */

BACKEND_TEST(fs_write, fstat_of_fds)
{
	const char *path = tfile("fst", 1234);
	struct statx stx, ref;
	int pfd[2];
	rl_loop *loop = tloop(tp);
	int fd = open_fd(loop, path, O_RDONLY | O_CLOEXEC, 0);

	memset(&stx, 0xff, sizeof(stx));
	cr_assert_eq(do_fstat(loop, fd, &stx), 0);
	cr_assert_eq(statx(AT_FDCWD, path, 0, STATX_BASIC_STATS, &ref), 0);
	cr_assert_eq(stx.stx_size, 1234);
	cr_assert_eq(stx.stx_ino, ref.stx_ino);
	cr_assert_eq(stx.stx_mode, ref.stx_mode);
	cr_assert_eq(stx.stx_mask & STATX_BASIC_STATS, STATX_BASIC_STATS);
	if (stx.stx_mask & STATX_DIOALIGN)
		cr_assert_gt(stx.stx_dio_offset_align, 0,
			     "ext4 and tmpfs both do O_DIRECT");
	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	cr_assert_eq(do_fstat(loop, pfd[0], &stx), 0);
	cr_assert(S_ISFIFO(stx.stx_mode));
	close(pfd[0]);
	close(pfd[1]);
	cr_assert_eq(do_fstat(loop, 999, &stx), -EBADF);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
}

/* ------------------------------------------------------------ open */

/* O_CREAT and O_TRUNC never take the epoll fast path (RESOLVE_CACHED
 * refuses them): every flag does on every backend what open(2) does. */
BACKEND_TEST(fs_write, open_creates_truncates_and_excludes)
{
	const char *fresh = spath("new");
	const char *old = tfile("old", 100);
	struct one o;
	struct stat st;
	mode_t mask = umask(022);
	rl_loop *loop = tloop(tp);
	int fd;

	umask(mask);
	fd = open_fd(loop, fresh, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		     0640);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0640 & ~mask);
	cr_assert_eq(do_close(loop, fd), 0);
	cr_assert_eq(rl_fs_open(loop, one_req(&o), fresh,
				O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600,
				tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EEXIST);
	fd = open_fd(loop, old, O_WRONLY | O_TRUNC | O_CLOEXEC, 0);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq(st.st_size, 0, "truncated");
	cr_assert_eq(do_close(loop, fd), 0);
	cr_assert_eq(rl_fs_open(loop, one_req(&o), tdir(), O_WRONLY | O_CLOEXEC,
				0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EISDIR);
	cr_assert_eq(rl_fs_open(loop, one_req(&o), tpath("no/such"),
				O_WRONLY | O_CREAT | O_CLOEXEC, 0644, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -ENOENT);
	tclose(loop);
}

/* ---------------------------------------------------------- write_file */

BACKEND_TEST(fs_write, write_file_new_file)
{
	const char *path = spath("wf");
	unsigned char *data = pattern("wf", 5000);
	struct stat st;
	struct one o;
	mode_t mask = umask(022);
	rl_loop *loop = tloop(tp);

	umask(mask);
	cr_assert_eq(rl_fs_write_file(loop, one_req(&o), path, data, 5000, 0,
				      0640, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 5000);
	check_content(path, data, 5000);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0640 & ~mask);
	free(data);
	tclose(loop);
}

/* Over a longer file: truncated, then exactly the new content. */
BACKEND_TEST(fs_write, write_file_over_an_existing_file)
{
	const char *path = tfile("wfold", 100000);
	unsigned char *data = pattern("wfnew", 777);
	struct one o;
	rl_loop *loop = tloop(tp);

	for (unsigned flags = 0; flags <= RL_WRITE_FILE_DATASYNC; flags++) {
		tfile("wfold", 100000);
		cr_assert_eq(rl_fs_write_file(loop, one_req(&o), path, data,
					      777, flags, 0644, tseen_cb),
			     0);
		cr_assert_eq(one_result(loop, &o), 777, "flags %u", flags);
		check_content(path, data, 777);
	}
	/* Empty: the file is truncated to nothing. */
	cr_assert_eq(rl_fs_write_file(loop, one_req(&o), path, NULL, 0, 0, 0644,
				      tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 0);
	check_content(path, "", 0);
	free(data);
	tclose(loop);
}

BACKEND_TEST(fs_write, write_file_append_and_excl)
{
	const char *path = tfile("wfa", 10);
	unsigned char *want = pattern("wfa", 14);
	struct one o;
	rl_loop *loop = tloop(tp);

	memcpy(want + 10, "tail", 4);
	cr_assert_eq(
		rl_fs_write_file(loop, one_req(&o), path, "tail", 4,
				 RL_WRITE_FILE_APPEND | RL_WRITE_FILE_FSYNC,
				 0644, tseen_cb),
		0);
	cr_assert_eq(one_result(loop, &o), 4);
	check_content(path, want, 14);
	cr_assert_eq(rl_fs_write_file(loop, one_req(&o), path, "x", 1,
				      RL_WRITE_FILE_EXCL, 0644, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EEXIST);
	check_content(path, want, 14);
	cr_assert_eq(rl_fs_write_file(loop, one_req(&o), tpath("wfx"), "x", 1,
				      RL_WRITE_FILE_EXCL, 0644, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 1);
	check_content(tpath("wfx"), "x", 1);
	free(want);
	tclose(loop);
}

BACKEND_TEST(fs_write, write_file_errors)
{
	struct one o;
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_fs_write_file(loop, one_req(&o), tpath("no/such"), "x",
				      1, 0, 0644, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -ENOENT);
	cr_assert_eq(rl_fs_write_file(loop, one_req(&o), tdir(), "x", 1, 0,
				      0644, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EISDIR);
	tclose(loop);
}

BACKEND_TEST(fs_write, write_file_large)
{
	size_t len = (5u << 20) + 123;
	unsigned char *data = pattern("wfl", len);
	const char *path = spath("wfl");
	struct one o;
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_fs_write_file(loop, one_req(&o), path, data, len,
				      RL_WRITE_FILE_DATASYNC, 0644, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), (int64_t)len);
	check_content(path, data, len);
	free(data);
	tclose(loop);
}

/* More write_files at once than the SQ, the CQ budget and the slot table
 * hold: each completes, with its own content, nothing dropped. */
BACKEND_TEST(fs_write, many_parallel_write_files_queue_not_fail)
{
	enum { N = 600 };
	static rl_req reqs[N];
	static char names[N][16];
	struct tseen s = { 0 };
	struct rl_options opt;
	struct rl_stats st;
	rl_loop *loop;

	rl_options_init(&opt);
	opt.entries = 16;
	opt.cq_entries = 64;
	opt.direct_slots = 8;
	opt.pool_threads = 2;
	loop = tloop_opts(tp, &opt);
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "many%d", i);
		reqs[i] = (rl_req){ .data = &s };
		cr_assert_eq(rl_fs_write_file(loop, &reqs[i], spath(names[i]),
					      names[i], strlen(names[i]), 0,
					      0644, tseen_cb),
			     0);
	}
	trun(loop);
	cr_assert_eq(s.calls, N);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(reqs[i].result, (int64_t)strlen(names[i]));
		check_content(tpath(names[i]), names[i], strlen(names[i]));
	}
	rl_loop_stats(loop, &st);
	cr_assert_eq(st.completions, N);
	if (tp->backend == RL_BACKEND_URING)
		cr_assert_gt(st.queued, 0, "nothing waited for room");
	tclose(loop);
}

/* ---------------------------------------------------------------- pipes */

/* A pipe takes 64 KiB at a time: io_uring answers a larger write with a
 * short count, which the loop must continue until every byte is in. */
static void pipe_write(const struct tp *tp, int pipe_flags, bool vec)
{
	size_t len = 1u << 20;
	unsigned char *data = pattern("pipe", len);
	struct iovec iov[3] = {
		{ data, 1000 },
		{ data + 1000, 300000 },
		{ data + 301000, len - 301000 },
	};
	struct drain d = { .want = len, .name = "pipe" };
	pthread_t th;
	int pfd[2];
	struct one o;
	rl_loop *loop = tloop(tp);

	cr_assert_eq(pipe2(pfd, O_CLOEXEC | pipe_flags), 0);
	d.fd = pfd[0];
	if (pipe_flags & O_NONBLOCK)
		cr_assert_eq(fcntl(pfd[0], F_SETFL, 0), 0, "reader blocks");
	cr_assert_eq(pthread_create(&th, NULL, drain_pipe, &d), 0);
	if (vec)
		cr_assert_eq(rl_fs_writev(loop, one_req(&o), pfd[1], iov, 3, -1,
					  tseen_cb),
			     0);
	else
		cr_assert_eq(rl_fs_write(loop, one_req(&o), pfd[1], data, len,
					 -1, tseen_cb),
			     0);
	cr_assert_eq(one_result(loop, &o), (int64_t)len);
	pthread_join(th, NULL);
	cr_assert_eq(d.got, len);
	cr_assert(d.ok, "the bytes came out of order or wrong");
	close(pfd[0]);
	close(pfd[1]);
	free(data);
	tclose(loop);
}

BACKEND_TEST(fs_write, short_writes_to_a_pipe_are_completed)
{
	tskip_uring_threads_under_valgrind(tp);
	pipe_write(tp, 0, false);
}

BACKEND_TEST(fs_write, short_writes_to_a_nonblocking_pipe_are_completed)
{
	tskip_uring_threads_under_valgrind(tp);
	pipe_write(tp, O_NONBLOCK, false);
}

BACKEND_TEST(fs_write, short_writev_to_a_pipe_is_completed)
{
	tskip_uring_threads_under_valgrind(tp);
	pipe_write(tp, 0, true);
}

/* A full pipe nobody reads: the write waits, and cancelling ends it. */
BACKEND_TEST(fs_write, cancel_a_write_to_a_full_pipe)
{
	static char big[256 << 10];
	int pfd[2];
	struct one o;
	rl_loop *loop = tloop(tp);

	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	cr_assert_eq(rl_fs_write(loop, one_req(&o), pfd[1], big, sizeof(big),
				 -1, tseen_cb),
		     0);
	for (int i = 0; i < 20; i++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(1000);
	}
	cr_assert_eq(o.s.calls, 0, "a write to a full pipe finished");
	cr_assert_eq(rl_cancel(loop, &o.req), 0);
	cr_assert_eq(one_result(loop, &o), -ECANCELED);
	close(pfd[0]);
	close(pfd[1]);
	tclose(loop);
}

BACKEND_TEST(fs_write, write_to_a_broken_pipe)
{
	int pfd[2];
	rl_loop *loop = tloop(tp);

	/* io_uring raises SIGPIPE as write(2) does (ringloop.h). */
	signal(SIGPIPE, SIG_IGN);
	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	close(pfd[0]);
	cr_assert_eq(do_write(loop, pfd[1], "x", 1, -1), -EPIPE);
	close(pfd[1]);
	tclose(loop);
}

/* A FIFO's reader opens it and drains it slowly, checking every byte. */
struct fifo_reader {
	const char *path;
	size_t want;
	size_t got;
	bool ok;
};

static void *read_fifo(void *arg)
{
	struct fifo_reader *f = arg;
	struct drain d = { .want = f->want, .name = "fifo" };

	d.fd = open(f->path, O_RDONLY | O_CLOEXEC);
	if (d.fd < 0)
		return NULL;
	drain_pipe(&d);
	close(d.fd);
	f->got = d.got;
	f->ok = d.ok;
	return NULL;
}

/*
 * write_file into a FIFO: the open waits for the reader, and the write
 * comes back short (a pipe's worth) - in the io_uring chain that stops the
 * links before the fsync and close, and the loop must write the rest into
 * the same open file, then close it.
 */
BACKEND_TEST(fs_write, write_file_into_a_fifo_is_completed)
{
	size_t len = 1u << 20;
	const char *path = spath("fifo");
	struct fifo_reader f = { .path = path, .want = len };
	unsigned char *data;
	pthread_t th;
	struct one o;
	rl_loop *loop;

	tskip_uring_threads_under_valgrind(tp);
	data = pattern("fifo", len);
	loop = tloop(tp);

	cr_assert_eq(mkfifo(path, 0644), 0);
	cr_assert_eq(pthread_create(&th, NULL, read_fifo, &f), 0);
	cr_assert_eq(rl_fs_write_file(loop, one_req(&o), path, data, len, 0,
				      0644, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), (int64_t)len);
	pthread_join(th, NULL);
	cr_assert_eq(f.got, len);
	cr_assert(f.ok, "the bytes came out of order or wrong");
	free(data);
	tclose(loop);
}

/* 2,000 write_files at once with 64 fds: each waits for an fd (or a
 * slot) rather than failing with EMFILE. */
BACKEND_TEST(fs_write, write_files_with_a_low_nofile_limit_queue)
{
	enum { N = 2000 };
	static rl_req reqs[N];
	static char names[N][16];
	struct rlimit rl = { 64, 64 };
	struct tseen s = { 0 };
	rl_loop *loop;

	if (getenv("RL_VALGRIND"))
		cr_skip_test("Valgrind does not let RLIMIT_NOFILE be lowered");
	for (int i = 0; i < N; i++)
		snprintf(names[i], sizeof(names[i]), "nf%d", i);
	/* The paths first: spath() keeps a malloc'ed copy of each. */
	for (int i = 0; i < N; i++)
		reqs[i] = (rl_req){ .data = &s, .path = spath(names[i]) };
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	loop = tloop(tp);
	for (int i = 0; i < N; i++)
		cr_assert_eq(rl_fs_write_file(loop, &reqs[i], reqs[i].path,
					      names[i], strlen(names[i]), 0,
					      0644, tseen_cb),
			     0);
	trun(loop);
	cr_assert_eq(s.calls, N);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(reqs[i].result, (int64_t)strlen(names[i]),
			     "write_file %d: %s", i,
			     rl_strerror((int)reqs[i].result));
		check_content(reqs[i].path, names[i], strlen(names[i]));
	}
	tclose(loop);
}

/* RL_FORCE_ASYNC (IOSQE_ASYNC on every SQE; epoll ignores it): the same
 * results, chains included. */
BACKEND_TEST(fs_write, force_async_gives_the_same_results)
{
	const char *path = spath("async");
	unsigned char *data = pattern("async", 100000);
	char buf[16];
	struct rl_options opt;
	struct one o;
	rl_loop *loop;
	int fd;

	rl_options_init(&opt);
	opt.flags = RL_FORCE_ASYNC;
	opt.iowq_max = 2;
	loop = tloop_opts(tp, &opt);
	cr_assert_eq(rl_fs_write_file(loop, one_req(&o), path, data, 100000,
				      RL_WRITE_FILE_FSYNC, 0644, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 100000);
	check_content(path, data, 100000);
	fd = open_fd(loop, path, O_RDWR | O_CLOEXEC, 0);
	cr_assert_eq(do_write(loop, fd, "abc", 3, 5), 3);
	cr_assert_eq(rl_fs_read(loop, one_req(&o), fd, buf, 10, 0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 10);
	cr_assert_eq(memcmp(buf + 5, "abc", 3), 0);
	cr_assert_eq(do_close(loop, fd), 0);
	cr_assert_eq(rl_fs_read_file(loop, one_req(&o), path, buf, sizeof(buf),
				     0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EFBIG);
	cr_assert_eq(rl_fs_unlink(loop, one_req(&o), path, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), 0);
	free(data);
	tclose(loop);
}

/* ------------------------------------------------- full and read-only */

/* A file system filling up: the kernel writes what fits (a short count),
 * then says -ENOSPC, which is the write's result. */
BACKEND_TEST(fs_write, enospc_after_a_partial_write)
{
	const char *mnt = tmount_tmpfs("full", 256 << 10);
	char path[600], path2[600];
	size_t len = 1u << 20;
	unsigned char *data = pattern("nospc", len);
	struct stat st;
	struct one o;
	rl_loop *loop = tloop(tp);
	int fd;

	snprintf(path, sizeof(path), "%s/f", mnt);
	snprintf(path2, sizeof(path2), "%s/g", mnt);
	/* On io_uring the chain's write comes back short, which stops the
	 * links; the rest is written into the same file: -ENOSPC. */
	cr_assert_eq(rl_fs_write_file(loop, one_req(&o), path2, data, len, 0,
				      0644, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -ENOSPC,
		     "backend %d flags %#x: %lld", tp->backend, tp->flags,
		     (long long)o.s.result);
	cr_assert_eq(stat(path2, &st), 0);
	cr_assert_gt(st.st_size, 0, "part of it was written");
	cr_assert_lt(st.st_size, (off_t)len);
	cr_assert_eq(unlink(path2), 0);
	fd = open_fd(loop, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		     0644);
	cr_assert_eq(do_write(loop, fd, data, len, 0), -ENOSPC);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_gt(st.st_size, 0, "part of it was written");
	cr_assert_lt(st.st_size, (off_t)len);
	/* At the file position: the position ends after the bytes written,
	 * as with write(2), and no byte was written over another. */
	cr_assert_eq(ftruncate(fd, 0), 0);
	cr_assert_eq(lseek(fd, 0, SEEK_SET), 0);
	cr_assert_eq(do_write(loop, fd, "head", 4, -1), 4);
	cr_assert_eq(do_write(loop, fd, data, len, -1), -ENOSPC);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_gt(st.st_size, 4);
	cr_assert_eq(lseek(fd, 0, SEEK_CUR), st.st_size);
	{
		size_t got;
		unsigned char *back = slurp(path, &got);

		cr_assert_eq(memcmp(back, "head", 4), 0);
		cr_assert(memcmp(back + 4, data, got - 4) == 0,
			  "the rest went over the start");
		free(back);
	}
	/* Full: the first write fails at once. */
	cr_assert_eq(rl_fs_write_file(loop, one_req(&o), path2, data, 4096,
				      RL_WRITE_FILE_FSYNC, 0644, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -ENOSPC);
	/* Room again: the same write goes through. */
	cr_assert_eq(ftruncate(fd, 0), 0);
	cr_assert_eq(unlink(path2), 0);
	cr_assert_eq(do_write(loop, fd, data, 100000, 0), 100000);
	cr_assert_eq(do_close(loop, fd), 0);
	check_content(path, data, 100000);
	free(data);
	tclose(loop);
	tumount();
}

BACKEND_TEST(fs_write, erofs_everywhere)
{
	const char *mnt = tmount_tmpfs("ro", 1 << 20);
	char file[600], other[600], dir[600];
	struct one o;
	int fd, rofd;
	rl_loop *loop;

	snprintf(file, sizeof(file), "%s/file", mnt);
	snprintf(other, sizeof(other), "%s/other", mnt);
	snprintf(dir, sizeof(dir), "%s/dir", mnt);
	fd = open(file, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, "data", 4), 4);
	close(fd);
	cr_assert_eq(mkdir(dir, 0755), 0);
	tmount_readonly(mnt);
	loop = tloop(tp);
	cr_assert_eq(rl_fs_open(loop, one_req(&o), file, O_WRONLY | O_CLOEXEC,
				0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EROFS);
	cr_assert_eq(rl_fs_open(loop, one_req(&o), other,
				O_WRONLY | O_CREAT | O_CLOEXEC, 0644, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EROFS);
	cr_assert_eq(rl_fs_write_file(loop, one_req(&o), other, "x", 1, 0, 0644,
				      tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EROFS);
	cr_assert_eq(rl_fs_write_file(loop, one_req(&o), file, "x", 1, 0, 0644,
				      tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EROFS);
	cr_assert_eq(rl_fs_unlink(loop, one_req(&o), file, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), -EROFS);
	cr_assert_eq(rl_fs_mkdir(loop, one_req(&o), other, 0755, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), -EROFS);
	cr_assert_eq(rl_fs_rmdir(loop, one_req(&o), dir, tseen_cb), 0);
	cr_assert_eq(one_result(loop, &o), -EROFS);
	cr_assert_eq(rl_fs_rename(loop, one_req(&o), file, other, 0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EROFS);
	/* Reading still works, and a write on a read-only fd is -EBADF. */
	rofd = open_fd(loop, file, O_RDONLY | O_CLOEXEC, 0);
	cr_assert_eq(do_write(loop, rofd, "x", 1, 0), -EBADF);
	cr_assert_eq(do_close(loop, rofd), 0);
	check_content(file, "data", 4);
	tclose(loop);
	tumount();
}

/* ------------------------------------------------------------ O_DIRECT */

BACKEND_TEST(fs_write, o_direct_aligned_and_misaligned)
{
	const char *path = spath("direct");
	struct statx stx;
	struct rl_stats before, after;
	size_t align;
	unsigned char *buf = NULL, *back = NULL;
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
	cr_assert_eq(do_fstat(loop, fd, &stx), 0);
	align = 4096;
	if ((stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align)
		align = stx.stx_dio_offset_align > stx.stx_dio_mem_align
				? stx.stx_dio_offset_align
				: stx.stx_dio_mem_align;
	cr_assert_eq(posix_memalign((void **)&buf, 4096, 3 * 4096), 0);
	cr_assert_eq(posix_memalign((void **)&back, 4096, 2 * 4096), 0);
	for (size_t i = 0; i < 3 * 4096; i++)
		buf[i] = tbyte("direct", i);
	cr_assert_eq(do_write(loop, fd, buf, 2 * 4096, 0), 2 * 4096);
	/* Misaligned buffer, offset, length: -EINVAL from the kernel. */
	if (align > 1) {
		cr_assert_eq(do_write(loop, fd, buf + 1, 4096, 0), -EINVAL);
		cr_assert_eq(do_write(loop, fd, buf, 4096, 1), -EINVAL);
		cr_assert_eq(do_write(loop, fd, buf, 4096 + 1, 0), -EINVAL);
		cr_assert_eq(rl_fs_read(loop, one_req(&o), fd, back + 1, 4096,
					0, tseen_cb),
			     0);
		cr_assert_eq(one_result(loop, &o), -EINVAL);
	}
	rl_loop_stats(loop, &before);
	cr_assert_eq(
		rl_fs_read(loop, one_req(&o), fd, back, 2 * 4096, 0, tseen_cb),
		0);
	cr_assert_eq(one_result(loop, &o), 2 * 4096);
	rl_loop_stats(loop, &after);
	tcheck("direct", back, 2 * 4096);
	/* The epoll fast path leaves direct reads to the pool: they wait for
	 * the device, which the loop thread must not. */
	if (tp->backend == RL_BACKEND_EPOLL)
		cr_assert_eq(after.inline_completions,
			     before.inline_completions);
	cr_assert_eq(do_close(loop, fd), 0);
	free(buf);
	free(back);
	tclose(loop);
}

static void count_fired(rl_timer *timer, int status)
{
	if (status == 0)
		++*(int *)timer->data;
}

/*
 * RL_IOPOLL: on io_uring the ring polls for direct I/O. The kernel
 * refuses any request it cannot poll (an open: -EINVAL), and a device
 * without poll queues completes direct I/O with -EOPNOTSUPP (this
 * project's virtio disk: /sys/block/vda/queue/io_poll is 0). Where it
 * works, a direct write reads back. Timers still fire on a polling loop.
 * On epoll the flag changes nothing.
 */
BACKEND_TEST(fs_write, iopoll_direct_io_or_the_kernels_answer)
{
	const char *path = spath("iopoll");
	struct rl_options opt;
	unsigned char *buf;
	rl_timer timer;
	struct one o;
	int64_t r;
	rl_loop *loop;
	int fd, fired = 0;

	rl_options_init(&opt);
	opt.flags = RL_IOPOLL;
	loop = tloop_opts(tp, &opt);
	fd = open(path, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0644);
	if (fd < 0 && errno == EINVAL) {
		tclose(loop);
		cr_skip_test("%s: no O_DIRECT on this file system", tdir());
	}
	cr_assert_geq(fd, 0, "%s", strerror(errno));
	cr_assert_eq(posix_memalign((void **)&buf, 4096, 2 * 4096), 0);
	for (size_t i = 0; i < 4096; i++)
		buf[i] = tbyte("iopoll", i);
	cr_assert_eq(rl_fs_open(loop, one_req(&o), path, O_RDONLY, 0, tseen_cb),
		     0);
	r = one_result(loop, &o);
	if (tp->backend == RL_BACKEND_URING)
		cr_assert_eq(r, -EINVAL, "an open on an IOPOLL ring: %lld",
			     (long long)r);
	else
		cr_assert_eq(do_close(loop, (int)r), 0);
	/* (ext4 may complete a direct write that extends the file without
	 * polling; the read of it then goes to the device.) */
	r = do_write(loop, fd, buf, 4096, 0);
	if (r == 4096) {
		cr_assert_eq(rl_fs_read(loop, one_req(&o), fd, buf + 4096, 4096,
					0, tseen_cb),
			     0);
		r = one_result(loop, &o);
	}
	if (tp->backend == RL_BACKEND_URING && r == -EOPNOTSUPP) {
		cr_log_info("IOPOLL: the device of %s has no poll queues",
			    tdir());
	} else {
		cr_assert_eq(r, 4096, "%s", rl_strerror((int)r));
		tcheck("iopoll", buf + 4096, 4096);
	}
	rl_timer_init(&timer);
	timer.data = &fired;
	cr_assert_eq(rl_timer_start(loop, &timer, 1, 0, count_fired), 0);
	trun(loop);
	cr_assert_eq(fired, 1);
	close(fd);
	free(buf);
	tclose(loop);
}

/* submit_batch: on io_uring, requests go to the kernel as soon as that
 * many SQEs wait, not at the next rl_run(); on epoll it changes nothing. */
BACKEND_TEST(fs_write, submit_batch_submits_before_the_wait)
{
	const char *path = tfile("sbatch", 100);
	struct rl_options opt;
	struct rl_stats s0, s1, s2;
	char a[100], b[100];
	struct one o1, o2;
	rl_loop *loop;
	int fd;

	rl_options_init(&opt);
	opt.submit_batch = 2;
	loop = tloop_opts(tp, &opt);
	fd = open_fd(loop, path, O_RDONLY | O_CLOEXEC, 0);
	rl_loop_stats(loop, &s0);
	cr_assert_eq(rl_fs_read(loop, one_req(&o1), fd, a, 100, 0, tseen_cb),
		     0);
	rl_loop_stats(loop, &s1);
	cr_assert_eq(s1.enters, s0.enters, "one SQE waits");
	cr_assert_eq(rl_fs_read(loop, one_req(&o2), fd, b, 50, 50, tseen_cb),
		     0);
	rl_loop_stats(loop, &s2);
	if (tp->backend == RL_BACKEND_URING)
		cr_assert_eq(s2.enters, s0.enters + 1, "two: submitted");
	else
		cr_assert_eq(s2.enters, 0);
	cr_assert_eq(one_result(loop, &o1), 100);
	cr_assert_eq(o2.s.calls, 1);
	cr_assert_eq(o2.s.result, 50);
	tcheck("sbatch", a, 100);
	cr_assert_eq(memcmp(a + 50, b, 50), 0);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
}

static void no_op_timer(rl_timer *t, int status)
{
	(void)t;
	(void)status;
}

/* Runs one turn of the loop that sleeps, bounded by a timer. A timer
 * counts from the loop's now, taken when it last ran, which may be long
 * past on a slow machine (Valgrind): one due already would run in the
 * turn's first batch, and RL_RUN_ONCE would then not sleep at all. So
 * the timer is due TURN_MS after the real now; it repeats, so that the
 * wait stays bounded even if it fired early anyway. */
enum { TURN_MS = 20 };

static void run_once_bounded(rl_loop *loop)
{
	uint64_t now = tnow_ms(), then = rl_now_ms(loop);
	uint64_t stale = now > then ? now - then : 0;
	rl_timer t;

	rl_timer_init(&t);
	cr_assert_eq(
		rl_timer_start(loop, &t, stale + TURN_MS, TURN_MS, no_op_timer),
		0);
	cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
	rl_timer_stop(loop, &t);
}

/* The default submit_batch (0) adapts on io_uring: once batches of reads
 * have gone to the kernel and stayed there (reads of empty pipes), reads
 * are submitted four at a time as they are made; once batches complete
 * inline again (reads of a cached file), they wait for the loop's next
 * wait. On epoll nothing enters a ring. */
BACKEND_TEST(fs_write, adaptive_submission_follows_what_completes_inline)
{
	enum { NP = 20, LATER = 16 };
	const char *path = tfile("adapt", 100);
	bool uring = tp->backend == RL_BACKEND_URING;
	struct one o[NP], f[8];
	int p[NP][2], fd;
	char buf[NP][4], a[8][100];
	struct rl_stats s0, s1;
	rl_loop *loop = tloop(tp);

	for (int i = 0; i < NP; i++)
		cr_assert_eq(pipe2(p[i], O_CLOEXEC), 0);
	/* Two batches of 8 reads that go to the kernel and wait there. */
	for (int round = 0; round < 2; round++) {
		for (int i = round * 8; i < round * 8 + 8; i++)
			cr_assert_eq(rl_fs_read(loop, one_req(&o[i]), p[i][0],
						buf[i], 4, 0, tseen_cb),
				     0);
		run_once_bounded(loop);
	}
	/* Now three more reads wait in the SQ; the fourth sends them. */
	rl_loop_stats(loop, &s0);
	for (int i = LATER; i < LATER + 3; i++)
		cr_assert_eq(rl_fs_read(loop, one_req(&o[i]), p[i][0], buf[i],
					4, 0, tseen_cb),
			     0);
	rl_loop_stats(loop, &s1);
	cr_assert_eq(s1.enters, s0.enters, "three reads wait");
	cr_assert_eq(rl_fs_read(loop, one_req(&o[LATER + 3]), p[LATER + 3][0],
				buf[LATER + 3], 4, 0, tseen_cb),
		     0);
	rl_loop_stats(loop, &s1);
	cr_assert_eq(s1.enters, s0.enters + (uring ? 1 : 0),
		     "the fourth read sends the batch");
	for (int i = 0; i < NP; i++) {
		cr_assert_eq(o[i].s.calls, 0);
		cr_assert_eq(write(p[i][1], "pipe", 4), 4);
	}
	trun(loop);
	for (int i = 0; i < NP; i++) {
		cr_assert_eq(o[i].s.calls, 1);
		cr_assert_eq(o[i].s.result, 4);
		cr_assert_eq(memcmp(buf[i], "pipe", 4), 0);
		close(p[i][0]);
		close(p[i][1]);
	}

	/* Reads of a cached file complete inline: after two batches of
	 * them, four reads wait for the loop again. */
	fd = open_fd(loop, path, O_RDONLY | O_CLOEXEC, 0);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < 8; i++)
			cr_assert_eq(rl_fs_read(loop, one_req(&f[i]), fd, a[i],
						100, 0, tseen_cb),
				     0);
		trun(loop);
		for (int i = 0; i < 8; i++)
			cr_assert_eq(f[i].s.result, 100);
	}
	rl_loop_stats(loop, &s0);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(rl_fs_read(loop, one_req(&f[i]), fd, a[i], 100, 0,
					tseen_cb),
			     0);
	rl_loop_stats(loop, &s1);
	cr_assert_eq(s1.enters, s0.enters, "cached reads wait for the loop");
	trun(loop);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(f[i].s.calls, 1);
		cr_assert_eq(f[i].s.result, 100);
		tcheck("adapt", a[i], 100);
	}
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
}

/* --------------------------------------------------- registered buffers */

BACKEND_TEST(fs_write, fixed_buffers_round_trip)
{
	const char *path = spath("fixed");
	static unsigned char a[8192], b[8192];
	struct iovec bufs[2] = { { a, sizeof(a) }, { b, sizeof(b) } };
	struct one o;
	rl_loop *loop = tloop(tp);
	int fd = open_fd(loop, path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
			 0644);

	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = tbyte("fixed", i);
	cr_assert_eq(rl_loop_register_buffers(loop, bufs, 2), 0);
	cr_assert_eq(rl_fs_write_fixed(loop, one_req(&o), fd, a, 6000, 0, 0,
				       tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 6000);
	cr_assert_eq(rl_fs_read_fixed(loop, one_req(&o), fd, b + 100, 8000, 0,
				      1, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 6000, "short at the end of file");
	tcheck("fixed", b + 100, 6000);
	cr_assert_eq(rl_fs_read_fixed(loop, one_req(&o), fd, b, 10, 5990, 1,
				      tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 10);
	/* The range must lie inside the buffer named by index. */
	cr_assert_eq(
		rl_fs_read_fixed(loop, one_req(&o), fd, a, 10, 0, 1, tseen_cb),
		-EFAULT);
	cr_assert_eq(rl_fs_read_fixed(loop, one_req(&o), fd, b + 8000, 193, 0,
				      1, tseen_cb),
		     -EFAULT);
	cr_assert_eq(
		rl_fs_write_fixed(loop, one_req(&o), fd, a, 10, 0, 2, tseen_cb),
		-EFAULT);
	/* A kernel error comes as usual. */
	cr_assert_eq(rl_fs_write_fixed(loop, one_req(&o), 999, a, 10, 0, 0,
				       tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EBADF);
	/* None registered any more: every index is out of range. */
	cr_assert_eq(rl_loop_register_buffers(loop, NULL, 0), 0);
	cr_assert_eq(
		rl_fs_read_fixed(loop, one_req(&o), fd, a, 10, 0, 0, tseen_cb),
		-EFAULT);
	cr_assert_eq(do_close(loop, fd), 0);
	check_content(path, a, 6000);
	tclose(loop);
}

BACKEND_TEST(fs_write, register_buffers_checks)
{
	static char a[4096];
	struct iovec ok = { a, sizeof(a) }, empty = { a, 0 },
		     null = { NULL, 1 };
	struct iovec huge = { a, ((size_t)1 << 30) + 1 };
	const char *path = tfile("regbusy", 10);
	char buf[16];
	struct one o;
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_loop_register_buffers(NULL, &ok, 1), -EINVAL);
	cr_assert_eq(rl_loop_register_buffers(loop, NULL, 1), -EFAULT);
	cr_assert_eq(rl_loop_register_buffers(loop, &empty, 1), -EINVAL);
	cr_assert_eq(rl_loop_register_buffers(loop, &null, 1), -EINVAL);
	cr_assert_eq(rl_loop_register_buffers(loop, &huge, 1), -EINVAL);
	cr_assert_eq(rl_loop_register_buffers(loop, &ok, 16385), -EINVAL);
	cr_assert_eq(rl_loop_register_buffers(loop, &ok, 1), 0);
	cr_assert_eq(rl_loop_register_buffers(loop, &ok, 1), 0, "replaced");
	cr_assert_eq(rl_fs_read_file(loop, one_req(&o), path, buf, sizeof(buf),
				     0, tseen_cb),
		     0);
	cr_assert_eq(rl_loop_register_buffers(loop, &ok, 1), -EBUSY);
	cr_assert_eq(one_result(loop, &o), 10);
	tclose(loop);
}

/* Direct I/O from registered buffers: what randread/randwrite do. */
BACKEND_TEST(fs_write, o_direct_with_fixed_buffers)
{
	const char *path = spath("dfixed");
	unsigned char *mem;
	struct iovec reg;
	struct one o;
	rl_loop *loop = tloop(tp);
	int fd;

	cr_assert_eq(posix_memalign((void **)&mem, 4096, 4 * 4096), 0);
	for (size_t i = 0; i < 2 * 4096; i++)
		mem[i] = tbyte("dfixed", i);
	reg = (struct iovec){ mem, 4 * 4096 };
	cr_assert_eq(rl_loop_register_buffers(loop, &reg, 1), 0);
	cr_assert_eq(rl_fs_open(loop, one_req(&o), path,
				O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0644,
				tseen_cb),
		     0);
	fd = (int)one_result(loop, &o);
	if (fd == -EINVAL)
		cr_skip_test("%s: no O_DIRECT on this file system", tdir());
	cr_assert_geq(fd, 0);
	cr_assert_eq(rl_fs_write_fixed(loop, one_req(&o), fd, mem, 2 * 4096,
				       4096, 0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 2 * 4096);
	cr_assert_eq(rl_fs_read_fixed(loop, one_req(&o), fd, mem + 2 * 4096,
				      2 * 4096, 4096, 0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), 2 * 4096);
	tcheck("dfixed", mem + 2 * 4096, 2 * 4096);
	/* (At 4096, where there is data: a hole reads as zeroes, with no
	 * I/O and no alignment check.) */
	cr_assert_eq(rl_fs_read_fixed(loop, one_req(&o), fd, mem + 1, 4096,
				      4096, 0, tseen_cb),
		     0);
	cr_assert_eq(one_result(loop, &o), -EINVAL, "misaligned: %lld",
		     (long long)o.s.result);
	cr_assert_eq(do_close(loop, fd), 0);
	tclose(loop);
	free(mem);
}

/* ------------------------------------------------- synchronous errors */

BACKEND_TEST(fs_write, bad_arguments_fail_synchronously)
{
	char buf[8];
	struct iovec iov[2] = { { buf, 4 }, { buf, 4 } };
	struct iovec huge[2] = { { buf, INT_MAX }, { buf, 1 } };
	struct statx stx;
	rl_req req = { 0 };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_fs_write(loop, &req, -1, buf, 8, 0, tseen_cb), -EBADF);
	cr_assert_eq(rl_fs_write(loop, &req, 0, NULL, 8, 0, tseen_cb), -EFAULT);
	cr_assert_eq(rl_fs_write(loop, &req, 0, buf, 8, -2, tseen_cb), -EINVAL);
	cr_assert_eq(
		rl_fs_write(loop, &req, 0, buf, (size_t)1 << 40, 0, tseen_cb),
		-EINVAL);
	cr_assert_eq(rl_fs_write(loop, &req, 0, buf, 8, 0, NULL), -EINVAL);
	cr_assert_eq(rl_fs_writev(loop, &req, -1, iov, 2, 0, tseen_cb), -EBADF);
	cr_assert_eq(rl_fs_writev(loop, &req, 0, NULL, 2, 0, tseen_cb),
		     -EFAULT);
	cr_assert_eq(rl_fs_writev(loop, &req, 0, iov, 1025, 0, tseen_cb),
		     -EINVAL);
	cr_assert_eq(rl_fs_writev(loop, &req, 0, huge, 2, 0, tseen_cb),
		     -EINVAL);
	cr_assert_eq(rl_fs_readv(loop, &req, 0, iov, 2, -5, tseen_cb), -EINVAL);
	cr_assert_eq(rl_fs_fsync(loop, &req, -1, 0, tseen_cb), -EBADF);
	cr_assert_eq(rl_fs_fsync(loop, &req, 0, 2, tseen_cb), -EINVAL);
	cr_assert_eq(rl_fs_ftruncate(loop, &req, -1, 0, tseen_cb), -EBADF);
	cr_assert_eq(rl_fs_fallocate(loop, &req, 0, 0, -1, 10, tseen_cb),
		     -EINVAL);
	cr_assert_eq(rl_fs_fallocate(loop, &req, 0, 0, 0, 0, tseen_cb),
		     -EINVAL);
	cr_assert_eq(rl_fs_fstat(loop, &req, 0, NULL, tseen_cb), -EFAULT);
	cr_assert_eq(rl_fs_fstat(loop, &req, -1, &stx, tseen_cb), -EBADF);
	cr_assert_eq(rl_fs_unlink(loop, &req, NULL, tseen_cb), -EFAULT);
	cr_assert_eq(rl_fs_rmdir(loop, &req, "", tseen_cb), -ENOENT);
	cr_assert_eq(rl_fs_mkdir(loop, &req, NULL, 0755, tseen_cb), -EFAULT);
	cr_assert_eq(rl_fs_rename(loop, &req, "a", NULL, 0, tseen_cb), -EFAULT);
	cr_assert_eq(rl_fs_rename(loop, &req, "", "b", 0, tseen_cb), -ENOENT);
	cr_assert_eq(
		rl_fs_write_file(loop, &req, "x", NULL, 1, 0, 0644, tseen_cb),
		-EFAULT);
	cr_assert_eq(rl_fs_write_file(loop, &req, "x", buf, 1, 0x100, 0644,
				      tseen_cb),
		     -EINVAL);
	cr_assert_eq(
		rl_fs_write_file(loop, &req, NULL, buf, 1, 0, 0644, tseen_cb),
		-EFAULT);
	cr_assert_eq(rl_fs_read_fixed(loop, &req, 0, buf, 8, 0, 0, tseen_cb),
		     -EFAULT, "no buffers registered");
	cr_assert_eq(rl_run(loop, RL_RUN_DEFAULT), 0, "no callback may run");
	cr_assert_eq(req.op, RL_OP_NONE, "a failed call leaves req alone");
	tclose(loop);
}

/* ---------------------------------------------- cancelling and closing */

BACKEND_TEST(fs_write, cancel_write_file)
{
	unsigned char *data = pattern("cwf", 1 << 20);
	const char *path = spath("cwf");
	struct one o;
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_fs_write_file(loop, one_req(&o), path, data, 1 << 20,
				      RL_WRITE_FILE_FSYNC, 0644, tseen_cb),
		     0);
	cr_assert_eq(rl_cancel(loop, &o.req), 0);
	cr_assert_eq(one_result(loop, &o), -ECANCELED);
	free(data);
	tclose(loop); /* no fd or slot left behind */
}

/*
 * The loop closes with writes of every kind in flight: each callback runs
 * exactly once, and every write that said it succeeded is in its file
 * after the close, byte for byte.
 */
BACKEND_TEST(fs_write, close_with_writes_in_flight_loses_nothing_reported)
{
	enum { NW = 200, NF = 60, BS = 4096 };
	const char *path = spath("inflight");
	static rl_req w[NW], f[NF];
	static struct tseen ws[NW], fs[NF];
	static char names[NF][24];
	static char full[256 << 10];
	unsigned char *data = pattern("inflight", NW * BS);
	struct one pw;
	int pfd[2];
	int fd, ok = 0;
	int fds_before = tfd_count();
	rl_loop *loop = tloop(tp);
	unsigned char *got;
	size_t len;

	fd = open_fd(loop, path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert_eq(pipe2(pfd, O_CLOEXEC), 0);
	/* One that can never finish: a full pipe nobody reads. */
	cr_assert_eq(rl_fs_write(loop, one_req(&pw), pfd[1], full, sizeof(full),
				 -1, tseen_cb),
		     0);
	for (int i = 0; i < NW; i++) {
		memset(&ws[i], 0, sizeof(ws[i]));
		w[i] = (rl_req){ .data = &ws[i] };
		cr_assert_eq(rl_fs_write(loop, &w[i], fd, data + (size_t)i * BS,
					 BS, (int64_t)i * BS, tseen_cb),
			     0);
	}
	for (int i = 0; i < NF; i++) {
		snprintf(names[i], sizeof(names[i]), "inflight-%d", i);
		memset(&fs[i], 0, sizeof(fs[i]));
		f[i] = (rl_req){ .data = &fs[i] };
		cr_assert_eq(rl_fs_write_file(loop, &f[i], spath(names[i]),
					      data, BS * (size_t)(i + 1),
					      i % 3 ? 0 : RL_WRITE_FILE_FSYNC,
					      0644, tseen_cb),
			     0);
	}
	/* Some finish, some are on their way (the fsyncs take a while). */
	for (int i = 0; i < 3; i++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(2000);
	}
	cr_assert_eq(rl_loop_close(loop), 0);
	close(fd);
	close(pfd[0]);
	close(pfd[1]);
	cr_assert_eq(tfd_count(), fds_before, "fds leaked");

	cr_assert_eq(pw.s.calls, 1);
	cr_assert_eq(pw.s.result, -ECANCELED);
	got = slurp(path, &len);
	for (int i = 0; i < NW; i++) {
		cr_assert_eq(ws[i].calls, 1, "write %d: %d callbacks", i,
			     ws[i].calls);
		if (ws[i].result == -ECANCELED)
			continue;
		cr_assert_eq(ws[i].result, BS, "write %d: %s", i,
			     rl_strerror((int)ws[i].result));
		cr_assert_geq(len, (size_t)(i + 1) * BS);
		cr_assert(memcmp(got + (size_t)i * BS, data + (size_t)i * BS,
				 BS) == 0,
			  "write %d said done, but its bytes are not there", i);
		ok++;
	}
	free(got);
	for (int i = 0; i < NF; i++) {
		cr_assert_eq(fs[i].calls, 1, "write_file %d: %d callbacks", i,
			     fs[i].calls);
		if (fs[i].result == -ECANCELED)
			continue;
		cr_assert_eq(fs[i].result, BS * (i + 1), "write_file %d: %s", i,
			     rl_strerror((int)fs[i].result));
		check_content(tpath(names[i]), data, BS * (size_t)(i + 1));
		ok++;
	}
	cr_log_info("%s: %d of %d writes done before the close", tp_name(tp),
		    ok, NW + NF);
	free(data);
}
