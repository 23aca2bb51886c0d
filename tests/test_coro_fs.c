/* SPDX-License-Identifier: MIT */
/*
 * test_coro_fs.c - every file operation of the coroutine style, results
 * and errors, both forms of read_file, on every backend. The coroutines
 * only record what they got; the checks run on the test's own stack.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coro_helpers.h"

/* What one step returned, and what it should have. */
struct step {
	const char *what;
	int64_t got;
	int64_t want;
	bool either_eopnotsupp; /* fallocate may not exist here */
};

struct script {
	char dir[600], a[600], b[600];
	char fixed[64];
	struct step steps[64];
	int n;
	char buf[64], r1[5], r2[8];
	struct statx stx, stx2;
	int64_t size_after;
};

static void rec(struct script *s, const char *what, int64_t got, int64_t want)
{
	if (s->n < 64)
		s->steps[s->n++] = (struct step){ what, got, want, false };
}

#define DO(call, want) rec(s, #call, (call), (want))

static int64_t every_op(void *arg)
{
	struct script *s = arg;
	char w1[] = " ", w2[] = "W";
	struct iovec wv[2] = { { w1, 1 }, { w2, 1 } };
	struct iovec rv[2] = { { s->r1, 5 }, { s->r2, 8 } };
	int fd;

	DO(rl_coro_fs_mkdir(s->dir, 0755), 0);
	DO(rl_coro_fs_mkdir(s->dir, 0755), -EEXIST);
	DO(rl_coro_fs_write_file(s->a, "hello world", 11, 0, 0644), 11);
	DO(rl_coro_fs_write_file(s->a, "x", 1, RL_WRITE_FILE_EXCL, 0644),
	   -EEXIST);
	fd = rl_coro_fs_open(s->a, O_RDWR | O_CLOEXEC, 0);
	rec(s, "open", fd >= 0, 1);
	DO(rl_coro_fs_write(fd, "HELLO", 5, 0), 5);
	DO(rl_coro_fs_writev(fd, wv, 2, 5), 2);
	DO(rl_coro_fs_write_fixed(fd, s->fixed, 2, 11, 0), 2);
	DO(rl_coro_fs_fsync(fd, 0), 0);
	DO(rl_coro_fs_fsync(fd, RL_FSYNC_DATASYNC), 0);
	DO(rl_coro_fs_read(fd, s->buf, sizeof(s->buf), 0), 13);
	DO(rl_coro_fs_readv(fd, rv, 2, 0), 13);
	DO(rl_coro_fs_read_fixed(fd, s->fixed + 10, 5, 6, 0), 5);
	DO(rl_coro_fs_fstat(fd, &s->stx), 0);
	DO(rl_coro_fs_ftruncate(fd, 5), 0);
	DO(rl_coro_fs_fallocate(fd, 0, 0, 4096), 0);
	s->steps[s->n - 1].either_eopnotsupp = true;
	DO(rl_coro_fs_stat(s->a, &s->stx2), 0);
	DO(rl_coro_fs_close(fd), 0);
	DO(rl_coro_fs_close(fd), -EBADF);
	DO(rl_coro_fs_write(fd, "x", 1, 0), -EBADF);
	DO(rl_coro_fs_rename(s->a, s->b, 0), 0);
	DO(rl_coro_fs_rename(s->a, s->b, 0), -ENOENT);
	DO(rl_coro_fs_rmdir(s->dir), -ENOTEMPTY);
	DO(rl_coro_fs_unlink(s->b), 0);
	DO(rl_coro_fs_unlink(s->b), -ENOENT);
	DO(rl_coro_fs_open(s->b, O_RDONLY, 0), -ENOENT);
	DO(rl_coro_fs_rmdir(s->dir), 0);
	/* Refused at submission: the error at once. */
	DO(rl_coro_fs_write(-1, "x", 1, 0), -EBADF);
	DO(rl_coro_fs_fsync(0, 9), -EINVAL);
	DO(rl_coro_fs_read_fixed(0, s->buf, 1, 0, 3), -EFAULT);
	DO(rl_coro_fs_fallocate(0, 0, -1, 1), -EINVAL);
	return 0;
}

BACKEND_TEST(coro_fs, every_operation)
{
	static struct script sc;
	struct iovec reg = { sc.fixed, sizeof(sc.fixed) };
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);

	memset(&sc, 0, sizeof(sc));
	snprintf(sc.dir, sizeof(sc.dir), "%s", tpath("d"));
	snprintf(sc.a, sizeof(sc.a), "%s", tpath("d/a"));
	snprintf(sc.b, sizeof(sc.b), "%s", tpath("d/b"));
	memcpy(sc.fixed, "!!", 2);
	cr_assert_eq(rl_loop_register_buffers(loop, &reg, 1), 0);
	cr_assert_eq(rl_coro_spawn(s, NULL, every_op, &sc, NULL), 0);
	trun(loop);
	cr_assert_eq(sc.n, 31, "%d steps ran", sc.n);
	for (int i = 0; i < sc.n; i++) {
		struct step *st = &sc.steps[i];

		if (st->either_eopnotsupp && st->got == -EOPNOTSUPP)
			continue;
		cr_assert_eq(st->got, st->want, "%s: %lld (%s), want %lld",
			     st->what, (long long)st->got,
			     rl_strerror((int)st->got), (long long)st->want);
	}
	cr_assert_str_eq(sc.buf, "HELLO World!!");
	cr_assert_eq(memcmp(sc.r1, "HELLO", 5), 0);
	cr_assert_eq(memcmp(sc.r2, " World!!", 8), 0);
	cr_assert_eq(memcmp(sc.fixed + 10, "World", 5), 0);
	cr_assert_eq(sc.stx.stx_size, 13);
	cr_assert_geq(sc.stx2.stx_size, 5);
	tsched_close(s);
	tclose(loop);
}

struct forms {
	const char *path, *missing;
	char exact[3000], small[100];
	int64_t r_exact, r_small, r_grow, r_missing;
	void *grown, *lost;
	size_t cap, lost_cap;
};

static int64_t read_forms(void *arg)
{
	struct forms *f = arg;

	f->r_exact = rl_coro_fs_read_file(f->path, f->exact, sizeof(f->exact));
	f->r_small = rl_coro_fs_read_file(f->path, f->small, sizeof(f->small));
	f->r_grow = rl_coro_fs_read_file_grow(f->path, &f->grown, &f->cap);
	f->r_missing =
		rl_coro_fs_read_file_grow(f->missing, &f->lost, &f->lost_cap);
	return 0;
}

BACKEND_TEST(coro_fs, read_file_both_forms)
{
	static struct forms f;
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);

	memset(&f, 0, sizeof(f));
	f.path = tfile("forms", 3000);
	f.missing = tpath("none");
	f.grown = malloc(8);
	f.cap = 8;
	cr_assert_eq(rl_coro_spawn(s, NULL, read_forms, &f, NULL), 0);
	trun(loop);
	cr_assert_eq(f.r_exact, 3000);
	tcheck("forms", f.exact, 3000);
	cr_assert_eq(f.r_small, -EFBIG);
	cr_assert_eq(f.r_grow, 3000);
	cr_assert_geq(f.cap, 3000);
	tcheck("forms", f.grown, 3000);
	cr_assert_eq(f.r_missing, -ENOENT);
	free(f.grown);
	free(f.lost); /* made by the loop, the caller's even on failure */
	tsched_close(s);
	tclose(loop);
}

/* Every new suspending call made outside a coroutine is -EPERM. */
Test(coro_fs, outside_a_coroutine_is_eperm)
{
	char buf[8] = { 0 };
	struct iovec iov = { buf, 8 };
	struct statx stx;

	cr_assert_eq(rl_coro_fs_write(1, buf, 1, -1), -EPERM);
	cr_assert_eq(rl_coro_fs_writev(1, &iov, 1, -1), -EPERM);
	cr_assert_eq(rl_coro_fs_write_fixed(1, buf, 1, -1, 0), -EPERM);
	cr_assert_eq(rl_coro_fs_readv(0, &iov, 1, -1), -EPERM);
	cr_assert_eq(rl_coro_fs_read_fixed(0, buf, 1, -1, 0), -EPERM);
	cr_assert_eq(rl_coro_fs_write_file("/nonexistent/x", buf, 1, 0, 0644),
		     -EPERM);
	cr_assert_eq(rl_coro_fs_fstat(0, &stx), -EPERM);
	cr_assert_eq(rl_coro_fs_fsync(0, 0), -EPERM);
	cr_assert_eq(rl_coro_fs_ftruncate(0, 0), -EPERM);
	cr_assert_eq(rl_coro_fs_fallocate(0, 0, 0, 1), -EPERM);
	cr_assert_eq(rl_coro_fs_unlink("/nonexistent"), -EPERM);
	cr_assert_eq(rl_coro_fs_rmdir("/nonexistent"), -EPERM);
	cr_assert_eq(rl_coro_fs_mkdir("/nonexistent/x", 0755), -EPERM);
	cr_assert_eq(rl_coro_fs_rename("/nonexistent", "/nonexistent2", 0),
		     -EPERM);
}

/* A writer per file, many at once, and the loop closed under them: each
 * coroutine learns its write's outcome (-ECANCELED or all of it), and
 * what it was told succeeded is there. */
struct writer {
	char path[600];
	int64_t res;
	bool ran;
};

static int64_t write_one(void *arg)
{
	struct writer *w = arg;
	static const char data[8192] = { 'q' };

	w->ran = true;
	w->res = rl_coro_fs_write_file(w->path, data, sizeof(data),
				       RL_WRITE_FILE_FSYNC, 0644);
	return w->res;
}

BACKEND_TEST(coro_fs, close_with_writes_in_flight)
{
	enum { N = 50 };
	static struct writer ws[N];
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);

	memset(ws, 0, sizeof(ws));
	for (int i = 0; i < N; i++) {
		snprintf(ws[i].path, sizeof(ws[i].path), "%s/w%d", tdir(), i);
		cr_assert_eq(rl_coro_spawn(s, NULL, write_one, &ws[i], NULL),
			     0);
	}
	for (int i = 0; i < 3; i++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(2000);
	}
	tclose(loop); /* closes the scheduler first */
	for (int i = 0; i < N; i++) {
		struct stat st;

		cr_assert(ws[i].ran);
		if (ws[i].res == -ECANCELED)
			continue;
		cr_assert_eq(ws[i].res, 8192, "%d: %s", i,
			     rl_strerror((int)ws[i].res));
		cr_assert_eq(stat(ws[i].path, &st), 0);
		cr_assert_eq(st.st_size, 8192);
	}
}
