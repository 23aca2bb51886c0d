/* SPDX-License-Identifier: MIT */
/*
 * test_ring.c - the edges of the submission and completion queues: a
 * wake-up when the SQ is exactly full, ring sizes too small for the
 * loop's requests or above the kernel's maximum, and cancels that find no
 * room. They run on every backend (the epoll backend ignores the ring
 * options, and must simply work).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"
#include "uring.h" /* RL__URING_POLL_ENTER_NS */

/* ------------------------------------------------ wake-ups with a full SQ */

struct full {
	rl_loop *loop;
	int n;
	int (*pipes)[2];
	rl_req *reqs;
	struct tseen *seen;
	struct rl_post post;
	atomic_int posted;
	int ran;
};

static void post_cb(struct rl_post *post)
{
	struct full *f = post->data;

	f->ran++;
	/* The reads are waiting for data that never comes: end them. */
	for (int i = 0; i < f->n; i++)
		rl_cancel(f->loop, &f->reqs[i]);
}

static void *poster(void *arg)
{
	struct full *f = arg;

	usleep(100 * 1000); /* the loop is asleep by now */
	f->post.data = f;
	cr_assert_eq(rl_post(f->loop, &f->post, post_cb), 0);
	atomic_store(&f->posted, 1);
	return NULL;
}

/*
 * n reads of empty pipes fill an SQ of n entries exactly; the loop then
 * sleeps, and a post from another thread must wake it all the same.
 */
static void post_with_full_sq(const struct tp *tp, unsigned entries, int n)
{
	struct full f = { 0 };
	struct rl_options opt;
	pthread_t th;
	rl_loop *loop;

	f.n = n;
	f.pipes = calloc((size_t)n, sizeof(*f.pipes));
	f.reqs = calloc((size_t)n, sizeof(*f.reqs));
	f.seen = calloc((size_t)n, sizeof(*f.seen));
	for (int i = 0; i < n; i++)
		cr_assert_eq(pipe2(f.pipes[i], O_CLOEXEC), 0);
	rl_options_init(&opt);
	opt.entries = entries;
	loop = tloop_opts(tp, &opt);
	f.loop = loop;
	alarm(20);
	for (int i = 0; i < n; i++) {
		char *buf = (char *)&f.seen[i].result; /* any 8 bytes */

		f.reqs[i].data = &f.seen[i];
		cr_assert_eq(rl_fs_read(loop, &f.reqs[i], f.pipes[i][0], buf, 1,
					-1, tseen_cb),
			     0);
	}
	rl_ref(loop); /* the post is the loop's only way out */
	cr_assert_eq(pthread_create(&th, NULL, poster, &f), 0);
	while (!f.ran)
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
	rl_unref(loop);
	trun(loop);
	pthread_join(th, NULL);
	alarm(0);
	cr_assert_eq(f.ran, 1);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(f.seen[i].calls, 1);
		cr_assert_eq(f.seen[i].result, -ECANCELED);
	}
	tclose(loop);
	for (int i = 0; i < n; i++) {
		close(f.pipes[i][0]);
		close(f.pipes[i][1]);
	}
	free(f.pipes);
	free(f.reqs);
	free(f.seen);
}

BACKEND_TEST(ring, post_wakes_a_loop_whose_sq_is_full)
{
	tskip_uring_threads_under_valgrind(tp);
	post_with_full_sq(tp, 0, 256); /* the default ring: 256 entries */
}

BACKEND_TEST(ring, post_wakes_a_loop_whose_small_sq_is_full)
{
	tskip_uring_threads_under_valgrind(tp);
	post_with_full_sq(tp, 4, 4);
}

/* ----------------------------------------------------------- ring sizes */

/*
 * A linked read_file takes 4 SQEs at once: a ring smaller than that could
 * never take one, and the request would wait forever. rl_loop_open()
 * refuses such a size; 4 works.
 */
BACKEND_TEST(ring, ring_too_small_is_refused)
{
	const char *path = tfile("tiny", 12);
	struct rl_options opt;
	rl_loop *loop = NULL;
	int ret;

	alarm(20);
	for (unsigned entries = 1; entries <= 4; entries++) {
		struct tseen s = { 0 };
		rl_req req = { .data = &s };
		char buf[16];

		rl_options_init(&opt);
		opt.backend = tp->backend;
		opt.flags = tp->flags;
		opt.entries = entries;
		ret = rl_loop_open(&loop, &opt);
		if (tp->backend == RL_BACKEND_URING && entries < 4) {
			cr_assert_eq(ret, -EINVAL, "entries %u: %s", entries,
				     rl_strerror(ret));
			cr_assert_null(loop);
			continue;
		}
		cr_assert_eq(ret, 0, "entries %u: %s", entries,
			     rl_strerror(ret));
		cr_assert_eq(rl_fs_read_file(loop, &req, path, buf, sizeof(buf),
					     0, tseen_cb),
			     0);
		trun(loop);
		cr_assert_eq(s.result, 12);
		cr_assert_eq(rl_loop_close(loop), 0);
	}
	alarm(0);
}

/* Sizes above what the kernel takes (32768 SQ entries, and a CQ of 16 x
 * entries above 65536) are clamped, not refused. */
BACKEND_TEST(ring, ring_too_large_is_clamped)
{
	static const unsigned sizes[] = { 4096, 8192, 32768, 65536, 1u << 20 };
	const char *path = tfile("large", 12);
	struct rl_options opt;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct tseen s = { 0 };
		rl_req req = { .data = &s };
		char buf[16];
		rl_loop *loop = NULL;
		int ret;

		rl_options_init(&opt);
		opt.backend = tp->backend;
		opt.flags = tp->flags;
		opt.entries = sizes[i];
		ret = rl_loop_open(&loop, &opt);
		cr_assert_eq(ret, 0, "entries %u: %s", sizes[i],
			     rl_strerror(ret));
		cr_assert_eq(rl_fs_read_file(loop, &req, path, buf, sizeof(buf),
					     0, tseen_cb),
			     0);
		trun(loop);
		cr_assert_eq(s.result, 12);
		cr_assert_eq(rl_loop_close(loop), 0);
	}
}

/* ------------------------------------------------------ cancels, no room */

/*
 * Cancels that find the SQ full of the very reads they cancel (a ring of
 * 4 entries, and SQPOLL, whose kernel thread takes SQEs when it gets to
 * them: a submit does not make room at once). None may be dropped: every
 * read ends with -ECANCELED.
 */
static void cancel_with_full_sq(const struct tp *tp, unsigned flags)
{
	enum { N = 4, ROUNDS = 50 };
	struct rl_options opt;
	int p[N][2];
	rl_loop *loop;
	int ret;

	for (int i = 0; i < N; i++)
		cr_assert_eq(pipe2(p[i], O_CLOEXEC), 0);
	rl_options_init(&opt);
	opt.entries = 4;
	opt.flags = flags;
	opt.backend = tp->backend;
	opt.flags |= tp->flags;
	ret = rl_loop_open(&loop, &opt);
	if (ret == -EPERM || ret == -EINVAL)
		cr_skip_test("this kernel refuses the ring: %s",
			     rl_strerror(ret));
	cr_assert_eq(ret, 0, "%s", rl_strerror(ret));
	alarm(30);
	for (int round = 0; round < ROUNDS; round++) {
		struct tseen s[N] = { { 0 } };
		rl_req reqs[N];
		char bufs[N][4];

		for (int i = 0; i < N; i++) {
			reqs[i] = (rl_req){ .data = &s[i] };
			cr_assert_eq(rl_fs_read(loop, &reqs[i], p[i][0],
						bufs[i], sizeof(bufs[i]), -1,
						tseen_cb),
				     0);
		}
		if (round % 2)
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		for (int i = 0; i < N; i++)
			cr_assert_eq(rl_cancel(loop, &reqs[i]), 0);
		trun(loop);
		for (int i = 0; i < N; i++) {
			cr_assert_eq(s[i].calls, 1);
			cr_assert_eq(s[i].result, -ECANCELED);
		}
	}
	alarm(0);
	cr_assert_eq(rl_loop_close(loop), 0);
	for (int i = 0; i < N; i++) {
		close(p[i][0]);
		close(p[i][1]);
	}
}

BACKEND_TEST(ring, cancels_with_a_full_sq)
{
	cancel_with_full_sq(tp, 0);
}

BACKEND_TEST(ring, cancels_with_a_full_sq_and_sqpoll)
{
	if (getenv("RL_VALGRIND"))
		cr_skip_test("Valgrind 3.19 does not run an SQPOLL ring");
	cancel_with_full_sq(tp, RL_SQPOLL);
}

/*
 * read_files of a FIFO nobody writes to, cancelled before the loop ran
 * (their chains and the cancels then reach the SQ thread together) or
 * after one pass, with and without RL_READ_FILE_REGULAR, on an SQPOLL
 * ring. The SQ thread runs a chain's open at once and issues the read
 * from its task work afterwards, so a cancel it takes in between finds
 * nothing; the read then waited for ever on the FIFO (every one of them
 * when cancelled before the loop ran) until the loop sent the cancels
 * again while they found nothing.
 */
BACKEND_TEST(ring, fifo_read_files_cancelled_under_sqpoll)
{
	enum { N = 64 };
	const char *fifo;
	struct rl_options opt;
	rl_loop *loop;
	int ret;

	if (getenv("RL_VALGRIND"))
		cr_skip_test("Valgrind 3.19 does not run an SQPOLL ring");
	fifo = tfifo("nowriter");
	rl_options_init(&opt);
	opt.backend = tp->backend;
	opt.flags = RL_SQPOLL | tp->flags;
	ret = rl_loop_open(&loop, &opt);
	if (ret == -EPERM || ret == -EINVAL)
		cr_skip_test("this kernel refuses the ring: %s",
			     rl_strerror(ret));
	cr_assert_eq(ret, 0, "%s", rl_strerror(ret));
	alarm(60);
	for (int round = 0; round < 4; round++) {
		struct tseen s[N] = { { 0 } };
		rl_req reqs[N];
		char bufs[N][16];

		for (int i = 0; i < N; i++) {
			reqs[i] = (rl_req){ .data = &s[i] };
			cr_assert_eq(
				rl_fs_read_file(loop, &reqs[i], fifo, bufs[i],
						sizeof(bufs[i]),
						round & 1 ? RL_READ_FILE_REGULAR
							  : 0,
						tseen_cb),
				0);
		}
		if (round & 2)
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		for (int i = 0; i < N; i++)
			cr_assert_eq(rl_cancel(loop, &reqs[i]), 0);
		trun(loop);
		for (int i = 0; i < N; i++) {
			cr_assert_eq(s[i].calls, 1, "round %d req %d", round,
				     i);
			cr_assert_eq(s[i].result, -ECANCELED,
				     "round %d req %d: %s", round, i,
				     rl_strerror((int)s[i].result));
		}
	}
	alarm(0);
	tclose(loop);
}

/* ------------------------------------------ polls that find nothing to do */

static void idle_timer_cb(rl_timer *timer, int status)
{
	(void)timer;
	(void)status;
}

/*
 * A loop polled without blocking (RL_RUN_NOWAIT) while nothing can
 * complete, a pipe read in flight and a timer far away: on io_uring it
 * enters the kernel only when the kernel says it has work for the ring
 * (IORING_SQ_TASKRUN) and otherwise at most once per
 * RL__URING_POLL_ENTER_NS, not once per poll. Then the pipe is written: the polls
 * pick the read's completion up, once, with its byte.
 */
BACKEND_TEST(ring, polls_enter_the_kernel_only_for_work)
{
	enum { POLLS = 1000 };
	struct rl_stats before, after;
	struct tseen s = { 0 };
	rl_timer timer;
	rl_req req = { .data = &s };
	char byte = 0;
	int p[2], polls = 0;
	uint64_t t0, elapsed;
	rl_loop *loop = tloop(tp);

	cr_assert_eq(pipe(p), 0);
	rl_timer_init(&timer);
	cr_assert_eq(rl_timer_start(loop, &timer, 600000, 0, idle_timer_cb), 0);
	cr_assert_eq(rl_fs_read(loop, &req, p[0], &byte, 1, -1, tseen_cb), 0);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	rl_loop_stats(loop, &before);
	t0 = tnow_ns();
	for (int i = 0; i < POLLS; i++)
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	elapsed = tnow_ns() - t0;
	rl_loop_stats(loop, &after);
	cr_assert_eq(s.calls, 0);
	if (tp->backend == RL_BACKEND_URING)
		cr_assert_leq(
			after.enters - before.enters,
			2 + elapsed / RL__URING_POLL_ENTER_NS,
			"%llu enters in %d polls over %llu ns",
			(unsigned long long)(after.enters - before.enters),
			POLLS, (unsigned long long)elapsed);
	cr_assert_eq(write(p[1], "x", 1), 1);
	while (s.calls == 0 && polls++ < 10000000)
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(s.calls, 1);
	cr_assert_eq(s.result, 1);
	cr_assert_eq(byte, 'x');
	cr_assert_eq(rl_timer_stop(loop, &timer), 0);
	close(p[0]);
	close(p[1]);
	trun(loop);
	tclose(loop);
}
