/* SPDX-License-Identifier: MIT */
/* test_fs.c - file requests: results, errors and callback counts. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

BACKEND_TEST(fs, read_file_small)
{
	const char *path = tfile("small", 12);
	struct tseen s = { 0 };
	char buf[4096];
	rl_req req = { .data = &s };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_fs_read_file(loop, &req, path, buf, sizeof(buf), 0,
				     tseen_cb),
		     0);
	cr_assert_eq(s.calls, 0, "callback ran inside the submitting call");
	trun(loop);
	cr_assert_eq(s.calls, 1);
	cr_assert_eq(s.result, 12);
	tcheck("small", buf, 12);
	tclose(loop);
}

BACKEND_TEST(fs, read_file_empty)
{
	const char *path = tfile("empty", 0);
	struct tseen s = { 0 };
	char buf[16];
	rl_req req = { .data = &s };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_fs_read_file(loop, &req, path, buf, sizeof(buf), 0,
				     tseen_cb),
		     0);
	trun(loop);
	cr_assert_eq(s.calls, 1);
	cr_assert_eq(s.result, 0);
	tclose(loop);
}

BACKEND_TEST(fs, read_file_exact_fit_and_too_big)
{
	const char *exact = tfile("exact", 64);
	const char *big = tfile("big", 65);
	struct tseen s1 = { 0 }, s2 = { 0 };
	char b1[64], b2[64];
	rl_req r1 = { .data = &s1 }, r2 = { .data = &s2 };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_fs_read_file(loop, &r1, exact, b1, 64, 0, tseen_cb), 0);
	cr_assert_eq(rl_fs_read_file(loop, &r2, big, b2, 64, 0, tseen_cb), 0);
	trun(loop);
	cr_assert_eq(s1.calls, 1);
	cr_assert_eq(s1.result, 64);
	tcheck("exact", b1, 64);
	cr_assert_eq(s2.calls, 1);
	cr_assert_eq(s2.result, -EFBIG);
	tclose(loop);
}

BACKEND_TEST(fs, read_file_grows_for_large_file)
{
	size_t size = 5u << 20; /* several MB, far past the first guess */
	const char *path = tfile("large", size);
	struct tseen s = { 0 };
	rl_req req = { .data = &s };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_fs_read_file(loop, &req, path, NULL, 0,
				     RL_READ_FILE_GROW, tseen_cb),
		     0);
	trun(loop);
	cr_assert_eq(s.calls, 1);
	cr_assert_eq(s.result, (int64_t)size, "result %lld",
		     (long long)s.result);
	cr_assert_geq(req.len, size);
	tcheck("large", req.buf, size);
	free(req.buf);
	tclose(loop);
}

BACKEND_TEST(fs, read_file_grow_exact_power_of_two)
{
	const char *path = tfile("pow2", 8192);
	struct tseen s = { 0 };
	rl_req req = { .data = &s };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_fs_read_file(loop, &req, path, NULL, 4096,
				     RL_READ_FILE_GROW, tseen_cb),
		     0);
	trun(loop);
	cr_assert_eq(s.calls, 1);
	cr_assert_eq(s.result, 8192);
	tcheck("pow2", req.buf, 8192);
	free(req.buf);
	tclose(loop);
}

/*
 * read_file_max bounds what the loop allocates. A hint past it gets a
 * buffer of the cap, so a file past the cap fails with -EFBIG (with the
 * hint's buffer it would have fit and been read); a file at the cap is
 * read. A buffer the caller passes is never shrunk: a file that fits it is
 * read whole, past the cap or not.
 */
BACKEND_TEST(fs, read_file_grow_hint_past_the_cap)
{
	size_t max = 64 << 10;
	const char *at_cap = tfile("at_cap", max - 1);
	const char *past = tfile("past_cap", max + 100);
	struct tseen s1 = { 0 }, s2 = { 0 }, s3 = { 0 };
	rl_req r1 = { .data = &s1 }, r2 = { .data = &s2 }, r3 = { .data = &s3 };
	struct rl_options opt = { 0 };
	void *mine = malloc(1 << 20);
	rl_loop *loop;

	cr_assert_not_null(mine);
	opt.read_file_max = max;
	loop = tloop_opts(tp, &opt);
	cr_assert_eq(rl_fs_read_file(loop, &r1, past, NULL, 1 << 20,
				     RL_READ_FILE_GROW, tseen_cb),
		     0);
	cr_assert_eq(rl_fs_read_file(loop, &r2, at_cap, NULL, 1 << 20,
				     RL_READ_FILE_GROW, tseen_cb),
		     0);
	cr_assert_eq(rl_fs_read_file(loop, &r3, past, mine, 1 << 20,
				     RL_READ_FILE_GROW, tseen_cb),
		     0);
	trun(loop);
	cr_assert_eq(s1.calls, 1);
	cr_assert_eq(s1.result, -EFBIG, "result %lld", (long long)s1.result);
	cr_assert_leq(r1.len, max, "the loop allocated %zu bytes", r1.len);
	cr_assert_eq(s2.calls, 1);
	cr_assert_eq(s2.result, (int64_t)(max - 1));
	cr_assert_leq(r2.len, max);
	tcheck("at_cap", r2.buf, max - 1);
	cr_assert_eq(s3.calls, 1);
	cr_assert_eq(s3.result, (int64_t)(max + 100));
	cr_assert_eq(r3.buf, mine, "the caller's buffer was replaced");
	tcheck("past_cap", r3.buf, max + 100);
	free(r1.buf);
	free(r2.buf);
	free(r3.buf);
	tclose(loop);
}

/* The same hint past the cap for a file of exactly the cap (read whole,
 * in a buffer of the cap), an endless device (-EFBIG, no more than the
 * cap allocated) and a procfs file that says size 0 (read whole). */
BACKEND_TEST(fs, read_file_grow_hint_past_the_cap_special)
{
	size_t max = 64 << 10;
	const char *exact = tfile("exact_cap", max);
	const char *paths[] = { exact, "/dev/zero", "/proc/self/status" };
	struct tseen s[3] = { { 0 } };
	rl_req r[3];
	struct rl_options opt = { 0 };
	rl_loop *loop;

	opt.read_file_max = max;
	loop = tloop_opts(tp, &opt);
	for (int i = 0; i < 3; i++) {
		r[i] = (rl_req){ .data = &s[i] };
		cr_assert_eq(rl_fs_read_file(loop, &r[i], paths[i], NULL,
					     16 << 20, RL_READ_FILE_GROW,
					     tseen_cb),
			     0);
	}
	trun(loop);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(s[i].calls, 1);
		cr_assert_leq(r[i].len, max, "%s: the loop allocated %zu bytes",
			      paths[i], r[i].len);
	}
	cr_assert_eq(s[0].result, (int64_t)max, "%s",
		     rl_strerror((int)s[0].result));
	tcheck("exact_cap", r[0].buf, max);
	cr_assert_eq(s[1].result, -EFBIG);
	cr_assert_gt(s[2].result, 0);
	cr_assert(memmem(r[2].buf, (size_t)s[2].result, "Name:", 5) != NULL);
	for (int i = 0; i < 3; i++)
		free(r[i].buf);
	tclose(loop);
}

BACKEND_TEST(fs, read_file_missing_and_directory)
{
	struct tseen s1 = { 0 }, s2 = { 0 };
	char buf[64];
	rl_req r1 = { .data = &s1 }, r2 = { .data = &s2 };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_fs_read_file(loop, &r1, tpath("nope"), buf, sizeof(buf),
				     0, tseen_cb),
		     0);
	cr_assert_eq(rl_fs_read_file(loop, &r2, tdir(), buf, sizeof(buf), 0,
				     tseen_cb),
		     0);
	trun(loop);
	cr_assert_eq(s1.calls, 1);
	cr_assert_eq(s1.result, -ENOENT);
	cr_assert_eq(s2.calls, 1);
	cr_assert_eq(s2.result, -EISDIR);
	tclose(loop);
}

BACKEND_TEST(fs, bad_arguments_fail_synchronously)
{
	char buf[8];
	char longpath[PATH_MAX + 8];
	rl_req req = { 0 };
	struct statx stx;
	rl_loop *loop = tloop(tp);

	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[sizeof(longpath) - 1] = 0;
	cr_assert_eq(rl_fs_read_file(loop, &req, NULL, buf, 8, 0, tseen_cb),
		     -EFAULT);
	cr_assert_eq(rl_fs_read_file(loop, &req, "", buf, 8, 0, tseen_cb),
		     -ENOENT);
	cr_assert_eq(rl_fs_read_file(loop, &req, longpath, buf, 8, 0, tseen_cb),
		     -ENAMETOOLONG);
	cr_assert_eq(rl_fs_read_file(loop, &req, "x", NULL, 8, 0, tseen_cb),
		     -EFAULT);
	cr_assert_eq(rl_fs_read_file(loop, &req, "x", buf, 8, 0x80, tseen_cb),
		     -EINVAL);
	cr_assert_eq(rl_fs_read_file(loop, &req, "x", buf, 8, 0, NULL),
		     -EINVAL);
	cr_assert_eq(rl_fs_read(loop, &req, -1, buf, 8, 0, tseen_cb), -EBADF);
	cr_assert_eq(rl_fs_read(loop, &req, 0, NULL, 8, 0, tseen_cb), -EFAULT);
	cr_assert_eq(rl_fs_read(loop, &req, 0, buf, 8, -2, tseen_cb), -EINVAL);
	cr_assert_eq(
		rl_fs_read(loop, &req, 0, buf, (size_t)1 << 40, 0, tseen_cb),
		-EINVAL);
	cr_assert_eq(rl_fs_close(loop, &req, -5, tseen_cb), -EBADF);
	cr_assert_eq(rl_fs_stat(loop, &req, "x", NULL, tseen_cb), -EFAULT);
	cr_assert_eq(rl_fs_stat(loop, &req, NULL, &stx, tseen_cb), -EFAULT);
	cr_assert_eq(rl_fs_open(loop, &req, NULL, O_RDONLY, 0, tseen_cb),
		     -EFAULT);
	cr_assert_eq(rl_cancel(loop, &req), -EINVAL, "never submitted");
	cr_assert_eq(rl_run(loop, RL_RUN_DEFAULT), 0, "no callback may run");
	tclose(loop);
}

BACKEND_TEST(fs, resubmit_in_flight_is_ebusy)
{
	const char *path = tfile("busy", 10);
	struct tseen s = { 0 };
	char buf[64];
	rl_req req = { .data = &s };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_fs_read_file(loop, &req, path, buf, 64, 0, tseen_cb),
		     0);
	cr_assert_eq(rl_fs_read_file(loop, &req, path, buf, 64, 0, tseen_cb),
		     -EBUSY);
	trun(loop);
	cr_assert_eq(s.calls, 1);
	cr_assert_eq(s.result, 10);
	tclose(loop);
}

/* open -> read at an offset -> read at the position -> stat -> close,
 * each started from the previous callback. */
struct seq {
	rl_loop *loop;
	rl_req req;
	int step;
	int fd;
	char buf[64];
	struct statx stx;
	const char *path;
	int64_t results[6];
};

static void seq_cb(rl_req *req)
{
	struct seq *q = req->data;
	int ret = 0;

	q->results[q->step++] = req->result;
	switch (q->step) {
	case 1:
		cr_assert_geq(req->result, 0, "open: %s",
			      rl_strerror((int)req->result));
		q->fd = (int)req->result;
		ret = rl_fs_read(q->loop, &q->req, q->fd, q->buf, 10, 5,
				 seq_cb);
		break;
	case 2:
		ret = rl_fs_read(q->loop, &q->req, q->fd, q->buf + 10, 20, -1,
				 seq_cb);
		break;
	case 3:
		ret = rl_fs_stat(q->loop, &q->req, q->path, &q->stx, seq_cb);
		break;
	case 4:
		ret = rl_fs_close(q->loop, &q->req, q->fd, seq_cb);
		break;
	case 5:
		ret = rl_fs_close(q->loop, &q->req, q->fd, seq_cb);
		break;
	}
	cr_assert_eq(ret, 0);
}

BACKEND_TEST(fs, open_read_stat_close)
{
	struct seq q = { 0 };
	rl_loop *loop = tloop(tp);

	q.loop = loop;
	q.req.data = &q;
	q.path = tfile("seq", 100);
	cr_assert_eq(rl_fs_open(loop, &q.req, q.path, O_RDONLY | O_CLOEXEC, 0,
				seq_cb),
		     0);
	trun(loop);
	cr_assert_eq(q.step, 6);
	cr_assert_eq(q.results[1], 10);
	cr_assert_eq(q.buf[0], (char)tbyte("seq", 5));
	cr_assert_eq(q.buf[9], (char)tbyte("seq", 14));
	/* The positional read did not move the fd's offset: the read at the
	 * current position starts at 0. */
	cr_assert_eq(q.results[2], 20);
	tcheck("seq", q.buf + 10, 20);
	cr_assert_eq(q.results[3], 0);
	cr_assert_eq(q.stx.stx_size, 100);
	cr_assert_eq(q.results[4], 0);
	cr_assert_eq(q.results[5], -EBADF, "second close of the same fd");
	tclose(loop);
}

BACKEND_TEST(fs, errors_from_the_kernel)
{
	struct tseen s[4] = { 0 };
	rl_req r[4];
	char buf[8];
	struct statx stx;
	rl_loop *loop = tloop(tp);

	for (int i = 0; i < 4; i++)
		r[i] = (rl_req){ .data = &s[i] };
	cr_assert_eq(rl_fs_open(loop, &r[0], tpath("missing"), O_RDONLY, 0,
				tseen_cb),
		     0);
	cr_assert_eq(rl_fs_read(loop, &r[1], 1000, buf, 8, 0, tseen_cb), 0);
	cr_assert_eq(rl_fs_stat(loop, &r[2], tpath("missing"), &stx, tseen_cb),
		     0);
	cr_assert_eq(rl_fs_close(loop, &r[3], 1001, tseen_cb), 0);
	trun(loop);
	for (int i = 0; i < 4; i++)
		cr_assert_eq(s[i].calls, 1);
	cr_assert_eq(s[0].result, -ENOENT);
	cr_assert_eq(s[1].result, -EBADF);
	cr_assert_eq(s[2].result, -ENOENT);
	cr_assert_eq(s[3].result, -EBADF);
	tclose(loop);
}

/* More reads at once than the SQ, the CQ budget and the slot table hold:
 * every one must complete, correctly, nothing dropped. */
BACKEND_TEST(fs, many_parallel_reads_queue_not_fail)
{
	enum { N = 5000 };
	const char *path = tfile("many", 12);
	struct rl_options opt;
	static rl_req reqs[N];
	static char bufs[N][32];
	struct tseen s = { 0 };
	struct rl_stats st;
	rl_loop *loop;

	rl_options_init(&opt);
	opt.entries = 16;
	opt.cq_entries = 64;
	opt.direct_slots = 8;
	opt.pool_threads = 2;
	loop = tloop_opts(tp, &opt);
	for (int i = 0; i < N; i++) {
		reqs[i] = (rl_req){ .data = &s };
		cr_assert_eq(rl_fs_read_file(loop, &reqs[i], path, bufs[i], 32,
					     0, tseen_cb),
			     0);
	}
	trun(loop);
	cr_assert_eq(s.calls, N);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(reqs[i].result, 12);
		tcheck("many", bufs[i], 12);
	}
	rl_loop_stats(loop, &st);
	cr_assert_eq(st.submissions, N);
	cr_assert_eq(st.completions, N);
	if (tp->backend == RL_BACKEND_URING)
		cr_assert_gt(st.queued, 0,
			     "nothing waited: the test did not "
			     "fill the SQ, CQ budget or slots");
	tclose(loop);
}

/* procfs reports size 0 and hands out about a page per read: a short read
 * is not the end of such a file. /proc/zoneinfo is a few pages long; its
 * counters move, so the check is its length against a read(2) loop's. */
static size_t sync_read_len(const char *path)
{
	char buf[4096];
	size_t total = 0;
	ssize_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	while ((r = read(fd, buf, sizeof(buf))) > 0)
		total += (size_t)r;
	close(fd);
	return total;
}

BACKEND_TEST(fs, read_file_procfs_past_the_first_page)
{
	const char *proc = "/proc/zoneinfo";
	size_t want = sync_read_len(proc);
	struct tseen s1 = { 0 }, s2 = { 0 };
	static char big[1 << 16];
	rl_req r1 = { .data = &s1 }, r2 = { .data = &s2 };
	rl_loop *loop = tloop(tp);

	cr_assert_gt(want, 4096, "the test needs a procfs file over a page");
	cr_assert_eq(rl_fs_read_file(loop, &r1, proc, NULL, 0,
				     RL_READ_FILE_GROW, tseen_cb),
		     0);
	cr_assert_eq(
		rl_fs_read_file(loop, &r2, proc, big, sizeof(big), 0, tseen_cb),
		0);
	trun(loop);
	cr_assert_eq(s1.calls, 1);
	cr_assert_eq(s2.calls, 1);
	for (int i = 0; i < 2; i++) {
		int64_t got = i ? s2.result : s1.result;
		const char *b = i ? big : r1.buf;

		cr_assert_gt(got, (int64_t)(want * 9 / 10),
			     "read %lld of about %zu bytes", (long long)got,
			     want);
		cr_assert_lt(got, (int64_t)(want * 11 / 10));
		cr_assert_eq(b[got - 1], '\n', "cut in the middle of a line");
		cr_assert_eq(strncmp(b, "Node ", 5), 0);
	}
	free(r1.buf);
	tclose(loop);
}

/* A close cancelled before it ran leaves the fd open (-ECANCELED); one
 * that ran, even if cancelled too late, reports its real result and the
 * fd is gone. Either way the result tells the truth about the fd. (The
 * fuzzer found a harness that trusted otherwise.) */
static void check_close_truth(const struct tseen *s, int fd)
{
	cr_assert_eq(s->calls, 1);
	if (s->result == -ECANCELED) {
		cr_assert_geq(fcntl(fd, F_GETFD), 0, "cancelled, yet closed");
		close(fd);
	} else {
		cr_assert_eq(s->result, 0);
		cr_assert_eq(fcntl(fd, F_GETFD), -1, "closed, yet open");
	}
}

BACKEND_TEST(fs, close_cancelled_by_loop_close_keeps_the_fd)
{
	const char *path = tfile("closing", 12);
	struct tseen s = { 0 };
	rl_req req = { .data = &s };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	rl_loop *loop;

	cr_assert_geq(fd, 0);
	loop = tloop(tp);
	cr_assert_eq(rl_fs_close(loop, &req, fd, tseen_cb), 0);
	cr_assert_eq(rl_loop_close(loop), 0);
	check_close_truth(&s, fd);
}

BACKEND_TEST(fs, cancelled_close_tells_the_truth)
{
	const char *path = tfile("closing", 12);
	int fds[2] = { open(path, O_RDONLY | O_CLOEXEC),
		       open(path, O_RDONLY | O_CLOEXEC) };
	struct tseen s[2] = { { 0 }, { 0 } };
	rl_req reqs[2] = { { .data = &s[0] }, { .data = &s[1] } };
	rl_loop *loop;

	cr_assert_geq(fds[0], 0);
	cr_assert_geq(fds[1], 0);
	loop = tloop(tp);
	/* One cancelled at once, one after a turn of the loop. */
	cr_assert_eq(rl_fs_close(loop, &reqs[0], fds[0], tseen_cb), 0);
	cr_assert_eq(rl_cancel(loop, &reqs[0]), 0);
	cr_assert_eq(rl_fs_close(loop, &reqs[1], fds[1], tseen_cb), 0);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	if (s[1].calls == 0)
		cr_assert_eq(rl_cancel(loop, &reqs[1]), 0);
	trun(loop);
	check_close_truth(&s[0], fds[0]);
	check_close_truth(&s[1], fds[1]);
	cr_assert_eq(rl_loop_close(loop), 0);
}
