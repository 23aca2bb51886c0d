/* SPDX-License-Identifier: MIT */
/*
 * test_callback_fs.c - every file operation of the callback style, its
 * results and errors, the three forms of read_file, on every backend.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "ringloop/callback.h"

struct res {
	int calls;
	int err;
	int64_t value;
};

static void res_cb(int err, int64_t value, void *arg)
{
	struct res *r = arg;

	r->calls++;
	r->err = err;
	r->value = value;
}

struct data {
	int calls;
	int err;
	const void *data;
	size_t len;
	char copy[64];
};

static void data_cb(int err, const void *data, size_t len, void *arg)
{
	struct data *d = arg;

	d->calls++;
	d->err = err;
	d->data = data;
	d->len = len;
	if (data && len <= sizeof(d->copy))
		memcpy(d->copy, data, len);
}

static rl_loop *loop;

/* Runs the loop and checks the one callback came with err and value. */
static void expect(struct res *r, int err, int64_t value)
{
	trun(loop);
	cr_assert_eq(r->calls, 1, "%d callbacks", r->calls);
	cr_assert_eq(r->err, err, "err %d (%s), want %d", r->err,
		     rl_strerror(r->err), err);
	cr_assert_eq(r->value, value, "value %lld, want %lld",
		     (long long)r->value, (long long)value);
	memset(r, 0, sizeof(*r));
}

/* Submits call (which must be accepted), then expect()s. */
#define STEP(call, err, value)                        \
	do {                                          \
		cr_assert_eq((call), 0, "%s", #call); \
		expect(&r, (err), (value));           \
	} while (0)

BACKEND_TEST(callback_fs, every_operation)
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
	struct res r = { 0 };
	rl_cb_ctx *cbs;
	int fd;

	loop = tloop(tp);
	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	cr_assert_eq(rl_loop_register_buffers(loop, &reg, 1), 0);
	memcpy(fixed, "!!", 2);

	STEP(rl_cb_fs_mkdir(cbs, dir, 0755, res_cb, &r), 0, 0);
	STEP(rl_cb_fs_mkdir(cbs, dir, 0755, res_cb, &r), -EEXIST, 0);
	STEP(rl_cb_fs_write_file(cbs, a, "hello world", 11, 0, 0644, res_cb,
				 &r),
	     0, 11);
	STEP(rl_cb_fs_write_file(cbs, a, "x", 1, RL_WRITE_FILE_EXCL, 0644,
				 res_cb, &r),
	     -EEXIST, 0);
	cr_assert_eq(rl_cb_fs_open(cbs, a, O_RDWR | O_CLOEXEC, 0, res_cb, &r),
		     0);
	trun(loop);
	cr_assert_eq(r.calls, 1);
	cr_assert_eq(r.err, 0);
	fd = (int)r.value;
	cr_assert_geq(fd, 0);
	memset(&r, 0, sizeof(r));
	STEP(rl_cb_fs_write(cbs, fd, "HELLO", 5, 0, res_cb, &r), 0, 5);
	STEP(rl_cb_fs_writev(cbs, fd, wv, 2, 5, res_cb, &r), 0, 2);
	STEP(rl_cb_fs_write_fixed(cbs, fd, fixed, 2, 11, 0, res_cb, &r), 0, 2);
	STEP(rl_cb_fs_fsync(cbs, fd, 0, res_cb, &r), 0, 0);
	STEP(rl_cb_fs_fsync(cbs, fd, RL_FSYNC_DATASYNC, res_cb, &r), 0, 0);
	memset(buf, 0, sizeof(buf));
	STEP(rl_cb_fs_read(cbs, fd, buf, sizeof(buf), 0, res_cb, &r), 0, 13);
	cr_assert_str_eq(buf, "HELLO World!!");
	STEP(rl_cb_fs_readv(cbs, fd, rv, 2, 0, res_cb, &r), 0, 13);
	cr_assert_eq(memcmp(r1, "HELLO", 5), 0);
	cr_assert_eq(memcmp(r2, " World!!", 8), 0);
	STEP(rl_cb_fs_read_fixed(cbs, fd, fixed + 10, 5, 6, 0, res_cb, &r), 0,
	     5);
	cr_assert_eq(memcmp(fixed + 10, "World", 5), 0);
	STEP(rl_cb_fs_fstat(cbs, fd, &stx, res_cb, &r), 0, 0);
	cr_assert_eq(stx.stx_size, 13);
	STEP(rl_cb_fs_ftruncate(cbs, fd, 5, res_cb, &r), 0, 0);
	cr_assert_eq(rl_cb_fs_fallocate(cbs, fd, 0, 0, 4096, res_cb, &r), 0);
	trun(loop);
	cr_assert_eq(r.calls, 1);
	cr_assert(r.err == 0 || r.err == -EOPNOTSUPP);
	memset(&r, 0, sizeof(r));
	STEP(rl_cb_fs_stat(cbs, a, &stx, res_cb, &r), 0, 0);
	cr_assert_geq(stx.stx_size, 5);
	STEP(rl_cb_fs_close(cbs, fd, res_cb, &r), 0, 0);
	STEP(rl_cb_fs_close(cbs, fd, res_cb, &r), -EBADF, 0);
	STEP(rl_cb_fs_fsync(cbs, fd, 0, res_cb, &r), -EBADF, 0);
	STEP(rl_cb_fs_rename(cbs, a, b, 0, res_cb, &r), 0, 0);
	STEP(rl_cb_fs_rename(cbs, a, b, 0, res_cb, &r), -ENOENT, 0);
	STEP(rl_cb_fs_rmdir(cbs, dir, res_cb, &r), -ENOTEMPTY, 0);
	STEP(rl_cb_fs_unlink(cbs, b, res_cb, &r), 0, 0);
	STEP(rl_cb_fs_unlink(cbs, b, res_cb, &r), -ENOENT, 0);
	STEP(rl_cb_fs_stat(cbs, b, &stx, res_cb, &r), -ENOENT, 0);
	STEP(rl_cb_fs_open(cbs, b, O_RDONLY, 0, res_cb, &r), -ENOENT, 0);
	STEP(rl_cb_fs_rmdir(cbs, dir, res_cb, &r), 0, 0);
	cr_assert_eq(rl_cb_ctx_in_flight(cbs), 0);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
	free(dir);
	free(a);
	free(b);
}

BACKEND_TEST(callback_fs, read_file_three_forms)
{
	const char *path = tfile("forms", 3000);
	char small[100], exact[3000];
	struct data pooled = { 0 }, fits = { 0 }, too_small = { 0 };
	struct data grown = { 0 }, missing = { 0 };
	rl_cb_ctx *cbs;
	void *mine = malloc(10);

	loop = tloop(tp);
	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	cr_assert_eq(rl_cb_fs_read_file(cbs, path, data_cb, &pooled), 0);
	cr_assert_eq(rl_cb_fs_read_file_buf(cbs, path, exact, sizeof(exact),
					    data_cb, &fits),
		     0);
	cr_assert_eq(rl_cb_fs_read_file_buf(cbs, path, small, sizeof(small),
					    data_cb, &too_small),
		     0);
	cr_assert_eq(
		rl_cb_fs_read_file_grow(cbs, path, mine, 10, data_cb, &grown),
		0);
	cr_assert_eq(rl_cb_fs_read_file_grow(cbs, tpath("none"), NULL, 0,
					     data_cb, &missing),
		     0);
	cr_assert_eq(rl_cb_ctx_in_flight(cbs), 5);
	trun(loop);
	cr_assert_eq(pooled.calls, 1);
	cr_assert_eq(pooled.err, 0);
	cr_assert_eq(pooled.len, 3000);
	cr_assert_eq(fits.calls, 1);
	cr_assert_eq(fits.len, 3000);
	cr_assert_eq(fits.data, exact, "data is the caller's buffer");
	tcheck("forms", exact, 3000);
	cr_assert_eq(too_small.calls, 1);
	cr_assert_eq(too_small.err, -EFBIG);
	cr_assert_eq(too_small.data, small);
	cr_assert_eq(grown.calls, 1);
	cr_assert_eq(grown.err, 0);
	cr_assert_eq(grown.len, 3000);
	tcheck("forms", grown.data, 3000);
	free((void *)grown.data); /* the caller's again */
	cr_assert_eq(missing.calls, 1);
	cr_assert_eq(missing.err, -ENOENT);
	cr_assert_not_null(missing.data, "the buffer comes back on failure");
	free((void *)missing.data);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}

/* A pooled read's data: its bytes checked, the size of the buffer the
 * loop lent for it noted. */
struct lent {
	int calls;
	size_t len, cap;
	const char *name;
};

static void lent_cb(int err, const void *data, size_t len, void *arg)
{
	struct lent *l = arg;

	cr_assert_eq(err, 0, "%s", rl_strerror(err));
	l->calls++;
	l->len = len;
	l->cap = malloc_usable_size((void *)data);
	tcheck(l->name, data, len);
}

/*
 * The pooled read_file asks the loop for a buffer of its guess, which
 * grows to fit the largest file read. One large file must not make every
 * later read ask for that much (on epoll the buffer is taken at
 * submission, so 10,000 small reads in flight would hold 10,000 large
 * buffers): after a few hundred small files the guess has fallen back.
 */
BACKEND_TEST(callback_fs, pooled_guess_falls_back_after_a_large_file)
{
	struct lent big = { .name = "guess_big" };
	struct lent small = { .name = "guess_small" };
	const char *big_path = tfile(big.name, 300 << 10);
	const char *small_path = tfile(small.name, 100);
	rl_cb_ctx *cbs;

	loop = tloop(tp);
	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	cr_assert_eq(rl_cb_fs_read_file(cbs, big_path, lent_cb, &big), 0);
	trun(loop);
	cr_assert_eq(big.calls, 1);
	cr_assert_eq(big.len, 300 << 10);
	/* The next small one still gets a large buffer: the guess learned. */
	cr_assert_eq(rl_cb_fs_read_file(cbs, small_path, lent_cb, &small), 0);
	trun(loop);
	cr_assert_eq(small.calls, 1);
	cr_assert_geq(small.cap, 256 << 10, "lent %zu bytes", small.cap);
	for (int i = 0; i < 400; i++) {
		cr_assert_eq(
			rl_cb_fs_read_file(cbs, small_path, lent_cb, &small),
			0);
		trun(loop);
	}
	cr_assert_eq(small.calls, 401);
	cr_assert_eq(small.len, 100);
	cr_assert_lt(small.cap, 4096, "still lent %zu bytes for 100",
		     small.cap);
	/* And it grows again at once. */
	cr_assert_eq(rl_cb_fs_read_file(cbs, big_path, lent_cb, &big), 0);
	cr_assert_eq(rl_cb_fs_read_file(cbs, small_path, lent_cb, &small), 0);
	trun(loop);
	cr_assert_eq(big.calls, 2);
	cr_assert_eq(big.len, 300 << 10);
	cr_assert_eq(small.calls, 402);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}

BACKEND_TEST(callback_fs, sync_errors_never_call_back)
{
	struct res r = { 0 };
	struct data d = { 0 };
	struct statx stx;
	char buf[8];
	rl_cb_ctx *cbs;

	loop = tloop(tp);
	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	cr_assert_eq(rl_cb_fs_write(cbs, -1, buf, 8, 0, res_cb, &r), -EBADF);
	cr_assert_eq(rl_cb_fs_write(cbs, 0, buf, 8, 0, NULL, &r), -EINVAL);
	cr_assert_eq(rl_cb_fs_write(NULL, 0, buf, 8, 0, res_cb, &r), -EINVAL);
	cr_assert_eq(rl_cb_fs_read(cbs, 0, NULL, 8, 0, res_cb, &r), -EFAULT);
	cr_assert_eq(rl_cb_fs_open(cbs, NULL, O_RDONLY, 0, res_cb, &r),
		     -EFAULT);
	cr_assert_eq(rl_cb_fs_stat(cbs, "x", NULL, res_cb, &r), -EFAULT);
	cr_assert_eq(rl_cb_fs_fstat(cbs, -1, &stx, res_cb, &r), -EBADF);
	cr_assert_eq(rl_cb_fs_fsync(cbs, 0, 7, res_cb, &r), -EINVAL);
	cr_assert_eq(rl_cb_fs_fallocate(cbs, 0, 0, 0, 0, res_cb, &r), -EINVAL);
	cr_assert_eq(rl_cb_fs_mkdir(cbs, "", 0755, res_cb, &r), -ENOENT);
	cr_assert_eq(rl_cb_fs_rename(cbs, "a", NULL, 0, res_cb, &r), -EFAULT);
	cr_assert_eq(rl_cb_fs_write_fixed(cbs, 0, buf, 8, 0, 0, res_cb, &r),
		     -EFAULT);
	cr_assert_eq(
		rl_cb_fs_write_file(cbs, "x", buf, 1, 0x80, 0644, res_cb, &r),
		-EINVAL);
	cr_assert_eq(rl_cb_fs_read_file_buf(cbs, "x", NULL, 8, data_cb, &d),
		     -EFAULT);
	cr_assert_eq(rl_cb_fs_read_file_grow(cbs, NULL, NULL, 0, data_cb, &d),
		     -EFAULT);
	cr_assert_eq(rl_cb_ctx_in_flight(cbs), 0);
	trun(loop);
	cr_assert_eq(r.calls, 0);
	cr_assert_eq(d.calls, 0);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}

/* Entries are shared by every operation: one that last wrote must not
 * hand the caller's write buffer to a pooled read_file, and the pooled
 * buffer must survive the writes in between. */
static rl_cb_ctx *mix_cbs;
static int mix_left;
static const char *mix_path;
static char mix_data[2000];

static void mix_read(int err, const void *data, size_t len, void *arg);

static void mix_wrote(int err, int64_t value, void *arg)
{
	cr_assert_eq(err, 0);
	cr_assert_eq(value, sizeof(mix_data));
	cr_assert_eq(rl_cb_fs_read_file(mix_cbs, mix_path, mix_read, arg), 0);
}

static void mix_read(int err, const void *data, size_t len, void *arg)
{
	cr_assert_eq(err, 0);
	cr_assert_eq(len, sizeof(mix_data));
	cr_assert_eq(memcmp(data, mix_data, len), 0);
	if (--mix_left > 0)
		cr_assert_eq(rl_cb_fs_write_file(mix_cbs, mix_path, mix_data,
						 sizeof(mix_data), 0, 0644,
						 mix_wrote, arg),
			     0);
}

BACKEND_TEST(callback_fs, writes_and_pooled_reads_share_entries)
{
	rl_cb_ctx *cbs;

	loop = tloop(tp);
	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	mix_cbs = cbs;
	mix_path = tpath("mix");
	for (size_t i = 0; i < sizeof(mix_data); i++)
		mix_data[i] = (char)tbyte("mix", i);
	mix_left = 100;
	cr_assert_eq(rl_cb_fs_write_file(cbs, mix_path, mix_data,
					 sizeof(mix_data), 0, 0644, mix_wrote,
					 NULL),
		     0);
	trun(loop);
	cr_assert_eq(mix_left, 0);
	cr_assert_eq(rl_cb_ctx_in_flight(cbs), 0);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}

/* Closing the loop with writes in flight: every callback once, and what
 * said it succeeded is in its file. */
BACKEND_TEST(callback_fs, close_with_writes_in_flight)
{
	enum { N = 40 };
	static struct res rs[N];
	static char names[N][600];
	char data[4096];
	rl_cb_ctx *cbs;

	memset(rs, 0, sizeof(rs));
	memset(data, 'z', sizeof(data));
	loop = tloop(tp);
	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	for (int i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "%s/c%d", tdir(), i);
		cr_assert_eq(rl_cb_fs_write_file(
				     cbs, names[i], data, sizeof(data),
				     RL_WRITE_FILE_FSYNC, 0644, res_cb, &rs[i]),
			     0);
	}
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(rl_cb_ctx_close(cbs), -EBUSY);
	tclose(loop); /* closes the context too */
	for (int i = 0; i < N; i++) {
		struct stat st;

		cr_assert_eq(rs[i].calls, 1);
		if (rs[i].err == -ECANCELED)
			continue;
		cr_assert_eq(rs[i].err, 0);
		cr_assert_eq(rs[i].value, sizeof(data));
		cr_assert_eq(stat(names[i], &st), 0);
		cr_assert_eq(st.st_size, sizeof(data));
	}
	/* (The context went with the loop.) */
}
