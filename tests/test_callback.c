/* SPDX-License-Identifier: MIT */
/* test_callback.c - the Node-like callback style and its request pool. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "ringloop/callback.h"
#include "helpers.h"

struct got {
	int calls;
	int err;
	size_t len;
	char data[64];
};

static void done(int err, const void *data, size_t len, void *arg)
{
	struct got *g = arg;

	g->calls++;
	g->err = err;
	g->len = len;
	if (data && len <= sizeof(g->data))
		memcpy(g->data, data, len);
}

BACKEND_TEST(callback, read_file_ok_and_missing)
{
	const char *path = tfile("cbfile", 12);
	struct got ok = { 0 }, missing = { 0 };
	rl_cb_ctx *cbs;
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	cr_assert_eq(rl_cb_fs_read_file(cbs, path, done, &ok), 0);
	cr_assert_eq(rl_cb_fs_read_file(cbs, tpath("missing"), done, &missing),
		     0);
	cr_assert_eq(ok.calls, 0);
	cr_assert_eq(rl_cb_ctx_in_flight(cbs), 2);
	trun(loop);
	cr_assert_eq(ok.calls, 1);
	cr_assert_eq(ok.err, 0);
	cr_assert_eq(ok.len, 12);
	tcheck("cbfile", ok.data, 12);
	cr_assert_eq(missing.calls, 1);
	cr_assert_eq(missing.err, -ENOENT);
	cr_assert_eq(rl_cb_ctx_in_flight(cbs), 0);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}

BACKEND_TEST(callback, sync_errors_never_call_back)
{
	struct got g = { 0 };
	rl_cb_ctx *cbs;
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	cr_assert_eq(rl_cb_fs_read_file(cbs, NULL, done, &g), -EFAULT);
	cr_assert_eq(rl_cb_fs_read_file(cbs, "", done, &g), -ENOENT);
	cr_assert_eq(rl_cb_fs_read_file(cbs, "x", NULL, &g), -EINVAL);
	cr_assert_eq(rl_cb_ctx_in_flight(cbs), 0);
	trun(loop);
	cr_assert_eq(g.calls, 0);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}

/* The pool stops growing once it holds as many requests as were ever in
 * flight at once: steady state allocates nothing. */
static int chain_left;
static rl_cb_ctx *chain_cbs;
static const char *chain_path;

static void chain_done(int err, const void *data, size_t len, void *arg)
{
	(void)data;
	cr_assert_eq(err, 0);
	cr_assert_eq(len, 3000);
	if (--chain_left > 0)
		cr_assert_eq(rl_cb_fs_read_file(chain_cbs, chain_path,
						chain_done, arg),
			     0);
}

BACKEND_TEST(callback, pool_reuses_requests)
{
	rl_cb_ctx *cbs;
	size_t pooled;
	rl_loop *loop = tloop(tp);

	chain_path = tfile("chain", 3000); /* bigger than the first guess */
	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	chain_cbs = cbs;
	chain_left = 50;
	cr_assert_eq(rl_cb_fs_read_file(cbs, chain_path, chain_done, NULL), 0);
	trun(loop);
	cr_assert_eq(chain_left, 0);
	pooled = rl_cb_ctx_pooled(cbs);
	chain_left = 500;
	cr_assert_eq(rl_cb_fs_read_file(cbs, chain_path, chain_done, NULL), 0);
	trun(loop);
	cr_assert_eq(chain_left, 0);
	cr_assert_eq(rl_cb_ctx_pooled(cbs), pooled,
		     "pool grew in steady state");
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}

BACKEND_TEST(callback, close_loop_with_reads_in_flight)
{
	const char *path = tfile("cbclose", 100);
	struct got g[50] = { 0 };
	rl_cb_ctx *cbs;
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	for (int i = 0; i < 50; i++)
		cr_assert_eq(rl_cb_fs_read_file(cbs, path, done, &g[i]), 0);
	cr_assert_eq(rl_cb_ctx_close(cbs), -EBUSY);
	tclose(loop); /* closes the context too */
	for (int i = 0; i < 50; i++) {
		cr_assert_eq(g[i].calls, 1);
		cr_assert(g[i].err == -ECANCELED ||
			  (g[i].err == 0 && g[i].len == 100));
	}
}

/* A burst grows the pool; trim gives the memory back but never an entry
 * in use, and the pool still works afterwards. */
BACKEND_TEST(callback, pool_grows_under_load_and_trims_back)
{
	const char *path = tfile("burst", 12);
	static struct got g[1000];
	struct got one = { 0 };
	rl_cb_ctx *cbs;
	rl_loop *loop = tloop(tp);

	memset(g, 0, sizeof(g));
	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(rl_cb_fs_read_file(cbs, path, done, &g[i]), 0);
	cr_assert_geq(rl_cb_ctx_pooled(cbs), 1000);
	cr_assert_eq(rl_cb_ctx_trim(cbs, 0), 0, "every entry is in use");
	trun(loop);
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(g[i].calls, 1);
	cr_assert_eq(rl_cb_fs_read_file(cbs, path, done, &one), 0);
	cr_assert_gt(rl_cb_ctx_trim(cbs, 0), 0);
	cr_assert_leq(rl_cb_ctx_pooled(cbs), 64, "one chunk in use remains");
	trun(loop);
	cr_assert_eq(one.calls, 1);
	cr_assert_eq(one.len, 12);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}

/*
 * Closing the context from inside its own callback: the callback's entry
 * goes back to the pool after the callback returns, so the close must
 * refuse (-EBUSY) rather than free the pool under it. The loop's close
 * then closes the context (no rl_cb_ctx_close() after it: the handle is
 * gone with the loop).
 */
struct self_close {
	rl_cb_ctx *cbs;
	int calls;
	int close_ret;
};

static void close_inside(int err, const void *data, size_t len, void *arg)
{
	struct self_close *sc = arg;

	(void)data;
	(void)len;
	cr_assert_eq(err, 0);
	sc->calls++;
	sc->close_ret = rl_cb_ctx_close(sc->cbs);
}

BACKEND_TEST(callback, close_from_own_callback_is_ebusy)
{
	const char *path = tfile("selfclose", 12);
	struct self_close sc = { 0 };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_cb_ctx_open(loop, &sc.cbs), 0);
	cr_assert_eq(rl_cb_fs_read_file(sc.cbs, path, close_inside, &sc), 0);
	trun(loop);
	cr_assert_eq(sc.calls, 1);
	cr_assert_eq(sc.close_ret, -EBUSY);
	tclose(loop); /* closes the context too; ASan checks nothing leaks */
}

/* Reads in flight and no rl_cb_ctx_close() at all: the loop's close
 * cancels them, runs their callbacks and frees the context. */
BACKEND_TEST(callback, loop_close_closes_the_context)
{
	const char *path = tfile("ctxclose", 100);
	struct got g[20] = { 0 };
	rl_cb_ctx *cbs;
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	for (int i = 0; i < 20; i++)
		cr_assert_eq(rl_cb_fs_read_file(cbs, path, done, &g[i]), 0);
	tclose(loop);
	for (int i = 0; i < 20; i++) {
		cr_assert_eq(g[i].calls, 1);
		cr_assert(g[i].err == -ECANCELED ||
			  (g[i].err == 0 && g[i].len == 100));
	}
}

/* A read that grew its buffer far (a big file, or a device read to the
 * loop's cap before -EFBIG) gives the memory back when its callback
 * returns: the loop keeps no lent buffer larger than 1 MiB. */
BACKEND_TEST(callback, huge_buffers_are_not_kept)
{
	const char *big = tfile("big", 3 << 20);
	struct got g1 = { 0 }, g2 = { 0 }, g3 = { 0 };
	struct rl_options opt;
	rl_cb_ctx *cbs;
	rl_loop *loop;

	rl_options_init(&opt);
	opt.read_file_max = 8 << 20;
	loop = tloop_opts(tp, &opt);
	alarm(60);
	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	cr_assert_eq(rl_cb_fs_read_file(cbs, "/dev/zero", done, &g1), 0);
	trun(loop);
	cr_assert_eq(g1.calls, 1);
	cr_assert_eq(g1.err, -EFBIG);
	cr_assert_leq(rl_fs_loans_kept(loop), (size_t)1 << 20,
		      "the loop keeps %zu bytes", rl_fs_loans_kept(loop));
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	cr_assert_eq(rl_cb_fs_read_file(cbs, big, done, &g2), 0);
	trun(loop);
	cr_assert_eq(g2.err, 0);
	cr_assert_eq(g2.len, (size_t)3 << 20);
	cr_assert_leq(rl_fs_loans_kept(loop), (size_t)1 << 20,
		      "the loop keeps %zu bytes", rl_fs_loans_kept(loop));
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	/* The pool still works. */
	cr_assert_eq(rl_cb_fs_read_file(cbs, tfile("small", 12), done, &g3), 0);
	trun(loop);
	cr_assert_eq(g3.len, 12);
	alarm(0);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
}
