/* SPDX-License-Identifier: MIT */
/*
 * test_promise_fs.c - every file operation of the promise style: values,
 * rejections, both forms of read_file, on every backend.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "promise_helpers.h"
#include "ringloop/promise.h"

static rl_loop *loop;

/* Runs the loop until p settles, checks its outcome, drops it. */
static struct rl_value settle(rl_promise *p, int err)
{
	struct rl_settlement s;

	cr_assert_not_null(p);
	trun(loop);
	cr_assert_neq(rl_promise_result(p, &s), RL_PROMISE_PENDING);
	cr_assert_eq(s.err, err, "err %d (%s), want %d", s.err,
		     rl_strerror(s.err), err);
	rl_promise_unref(p);
	return s.value;
}

/* Fulfilled with value.i == want. */
#define OK(p, want)                                                          \
	do {                                                                 \
		struct rl_value v_ = settle((p), 0);                         \
                                                                             \
		cr_assert_eq(v_.i, (want), "%s: %lld", #p, (long long)v_.i); \
	} while (0)

BACKEND_TEST(promise_fs, every_operation)
{
	char *dir = strdup(tpath("d"));
	char *a = strdup(tpath("d/a"));
	char *b = strdup(tpath("d/b"));
	static char fixed[64];
	struct iovec reg = { fixed, sizeof(fixed) };
	char w1[] = " ", w2[] = "W", r1[5], r2[8], buf[64];
	struct iovec wv[2] = { { w1, 1 }, { w2, 1 } };
	struct iovec rv[2] = { { r1, 5 }, { r2, 8 } };
	struct statx stx;
	struct rl_value v;
	rl_promise_ctx *ctx;
	int fd;

	loop = tloop(tp);
	ctx = topen(loop);
	cr_assert_eq(rl_loop_register_buffers(loop, &reg, 1), 0);
	memcpy(fixed, "!!", 2);

	OK(rl_promise_fs_mkdir(ctx, dir, 0755), 0);
	settle(rl_promise_fs_mkdir(ctx, dir, 0755), -EEXIST);
	OK(rl_promise_fs_write_file(ctx, a, "hello world", 11, 0, 0644), 11);
	settle(rl_promise_fs_write_file(ctx, a, "x", 1, RL_WRITE_FILE_EXCL,
					0644),
	       -EEXIST);
	v = settle(rl_promise_fs_open(ctx, a, O_RDWR | O_CLOEXEC, 0), 0);
	fd = (int)v.i;
	cr_assert_geq(fd, 0);
	OK(rl_promise_fs_write(ctx, fd, "HELLO", 5, 0), 5);
	OK(rl_promise_fs_writev(ctx, fd, wv, 2, 5), 2);
	OK(rl_promise_fs_write_fixed(ctx, fd, fixed, 2, 11, 0), 2);
	OK(rl_promise_fs_fsync(ctx, fd, 0), 0);
	OK(rl_promise_fs_fsync(ctx, fd, RL_FSYNC_DATASYNC), 0);
	memset(buf, 0, sizeof(buf));
	v = settle(rl_promise_fs_read(ctx, fd, buf, sizeof(buf), 0), 0);
	cr_assert_eq(v.i, 13);
	cr_assert_eq(v.p, buf);
	cr_assert_str_eq(buf, "HELLO World!!");
	OK(rl_promise_fs_readv(ctx, fd, rv, 2, 0), 13);
	cr_assert_eq(memcmp(r1, "HELLO", 5), 0);
	cr_assert_eq(memcmp(r2, " World!!", 8), 0);
	v = settle(rl_promise_fs_read_fixed(ctx, fd, fixed + 10, 5, 6, 0), 0);
	cr_assert_eq(v.i, 5);
	cr_assert_eq(v.p, fixed + 10);
	cr_assert_eq(memcmp(fixed + 10, "World", 5), 0);
	v = settle(rl_promise_fs_fstat(ctx, fd, &stx), 0);
	cr_assert_eq(v.p, &stx);
	cr_assert_eq(stx.stx_size, 13);
	OK(rl_promise_fs_ftruncate(ctx, fd, 5), 0);
	{
		rl_promise *p = rl_promise_fs_fallocate(ctx, fd, 0, 0, 4096);
		struct rl_settlement s;

		trun(loop);
		cr_assert_neq(rl_promise_result(p, &s), RL_PROMISE_PENDING);
		cr_assert(s.err == 0 || s.err == -EOPNOTSUPP);
		rl_promise_unref(p);
	}
	v = settle(rl_promise_fs_stat(ctx, a, &stx), 0);
	cr_assert_eq(v.p, &stx);
	cr_assert_geq(stx.stx_size, 5);
	OK(rl_promise_fs_close(ctx, fd), 0);
	settle(rl_promise_fs_close(ctx, fd), -EBADF);
	settle(rl_promise_fs_write(ctx, fd, "x", 1, 0), -EBADF);
	OK(rl_promise_fs_rename(ctx, a, b, 0), 0);
	settle(rl_promise_fs_rename(ctx, a, b, 0), -ENOENT);
	settle(rl_promise_fs_rmdir(ctx, dir), -ENOTEMPTY);
	OK(rl_promise_fs_unlink(ctx, b), 0);
	settle(rl_promise_fs_unlink(ctx, b), -ENOENT);
	settle(rl_promise_fs_open(ctx, b, O_RDONLY, 0), -ENOENT);
	OK(rl_promise_fs_rmdir(ctx, dir), 0);
	/* Refused at submission: rejected at once, nothing in flight. */
	settle(rl_promise_fs_write(ctx, -1, "x", 1, 0), -EBADF);
	settle(rl_promise_fs_fsync(ctx, 0, 9), -EINVAL);
	settle(rl_promise_fs_read_fixed(ctx, 0, buf, 1, 0, 3), -EFAULT);
	tend(loop, ctx);
	free(dir);
	free(a);
	free(b);
}

BACKEND_TEST(promise_fs, read_file_both_forms)
{
	const char *path = tfile("forms", 3000);
	char exact[3000], small[100];
	void *mine = malloc(16);
	struct rl_value v;
	rl_promise_ctx *ctx;

	loop = tloop(tp);
	ctx = topen(loop);
	v = settle(rl_promise_fs_read_file(ctx, path, exact, sizeof(exact)), 0);
	cr_assert_eq(v.i, 3000);
	cr_assert_eq(v.p, exact);
	tcheck("forms", exact, 3000);
	settle(rl_promise_fs_read_file(ctx, path, small, sizeof(small)),
	       -EFBIG);
	v = settle(rl_promise_fs_read_file_grow(ctx, path, mine, 16), 0);
	cr_assert_eq(v.i, 3000);
	tcheck("forms", v.p, 3000);
	free(v.p);
	v = settle(rl_promise_fs_read_file_grow(ctx, tpath("none"), NULL, 0),
		   -ENOENT);
	cr_assert_not_null(v.p, "the buffer comes back rejected too");
	free(v.p);
	v = settle(rl_promise_fs_read_file_grow(ctx, NULL, NULL, 0), -EFAULT);
	cr_assert_null(v.p, "refused at submission: no buffer");
	tend(loop, ctx);
}

/* A burst of write_files under all(): the values in input order, and
 * every file written. */
BACKEND_TEST(promise_fs, all_of_many_write_files)
{
	enum { N = 300 };
	static char names[N][600];
	static char bodies[N][16];
	rl_promise *ps[N];
	struct rl_value v;
	rl_promise_ctx *ctx;

	loop = tloop(tp);
	ctx = topen(loop);
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "%s/p%d", tdir(), i);
		snprintf(bodies[i], sizeof(bodies[i]), "body %d", i);
		ps[i] = rl_promise_fs_write_file(ctx, names[i], bodies[i],
						 strlen(bodies[i]), 0, 0644);
	}
	v = settle(rl_all(ctx, ps, N), 0);
	cr_assert_eq(v.i, N);
	for (int i = 0; i < N; i++) {
		char got[16] = { 0 };
		int fd = open(names[i], O_RDONLY | O_CLOEXEC);
		const struct rl_value *vals = v.p;

		cr_assert_geq(fd, 0);
		cr_assert_eq(read(fd, got, sizeof(got)),
			     (ssize_t)strlen(bodies[i]));
		close(fd);
		cr_assert_str_eq(got, bodies[i]);
		cr_assert_eq(vals[i].i, (int64_t)strlen(bodies[i]));
	}
	tend(loop, ctx);
}
