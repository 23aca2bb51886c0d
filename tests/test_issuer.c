/* SPDX-License-Identifier: MIT */
/*
 * test_issuer.c - the io_uring loop's default ring (SINGLE_ISSUER |
 * DEFER_TASKRUN) and the thread it belongs to: the first that enters it,
 * whichever opened the loop. A loop opened on one thread runs on
 * another; another thread that tries to run or close it gets -EEXIST at
 * once, never a hang; a loop never run closes cleanly with requests
 * queued; RL_SHARED_RING gives the plain ring.
 *
 * Only the io_uring backend has rings, so these tests are not
 * BACKEND_TESTs: each names the ring it checks.
 */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <string.h>

#include "helpers.h"

#define RING_FLAGS (RL_SINGLE_ISSUER | RL_DEFER_TASKRUN)

static rl_loop *open_uring(unsigned flags)
{
	struct rl_options opt;
	rl_loop *loop = NULL;

	rl_options_init(&opt);
	opt.backend = RL_BACKEND_URING;
	opt.flags = flags;
	cr_assert_eq(rl_loop_open(&loop, &opt), 0);
	return loop;
}

/* Whether the kernel gave the loop the default ring: where it refuses
 * DEFER_TASKRUN (before 6.1) the loop says so and has the plain one. */
static bool has_default_ring(rl_loop *loop)
{
	if ((rl_loop_flags(loop) & RING_FLAGS) == RING_FLAGS)
		return true;
	cr_assert(strstr(rl_loop_backend_reason(loop), "plain ring"),
		  "neither the default ring nor a reason: %s",
		  rl_loop_backend_reason(loop));
	return false;
}

/* A thread that runs a loop it did not open: a read_file, then (on the
 * word of the test) the close. */
struct runner {
	rl_loop *loop;
	const char *path;
	char buf[64];
	rl_req req;
	struct tseen seen;
	int run_ret, run2_ret, close_ret;
	sem_t go_on; /* the test lets the runner go on to its second run */
	sem_t ran;   /* the runner's first run is over */
	bool wait_for_test;
};

static void *runner_main(void *arg)
{
	struct runner *r = arg;

	r->req.data = &r->seen;
	r->run_ret = rl_fs_read_file(r->loop, &r->req, r->path, r->buf,
				     sizeof(r->buf), 0, tseen_cb);
	if (r->run_ret == 0)
		r->run_ret = rl_run(r->loop, RL_RUN_DEFAULT);
	if (r->wait_for_test) {
		sem_post(&r->ran);
		sem_wait(&r->go_on);
		r->run2_ret = rl_run(r->loop, RL_RUN_DEFAULT);
	}
	r->close_ret = rl_loop_close(r->loop);
	return NULL;
}

static void run_on_another_thread(unsigned flags)
{
	struct runner r = { 0 };
	int base = tfd_count();
	pthread_t th;

	r.path = tfile("issuer", 12);
	r.loop = open_uring(flags);
	if (!(flags & (RL_SHARED_RING | RL_SINGLE_ISSUER)))
		has_default_ring(r.loop);
	cr_assert_eq(pthread_create(&th, NULL, runner_main, &r), 0);
	cr_assert_eq(pthread_join(th, NULL), 0);
	cr_assert_geq(r.run_ret, 0, "rl_run on the runner: %d", r.run_ret);
	cr_assert_eq(r.seen.calls, 1);
	cr_assert_eq(r.seen.result, 12);
	tcheck("issuer", r.buf, 12);
	cr_assert_eq(r.close_ret, 0);
	cr_assert_eq(tfd_count(), base, "fds leaked");
}

Test(issuer, opened_on_one_thread_run_on_another)
{
	run_on_another_thread(0);
}

/* The registered ring fd lives in the table of the thread that
 * registered it: it is registered by the thread that runs the loop. */
Test(issuer, registered_ring_fd_on_the_thread_that_runs)
{
	run_on_another_thread(RL_REGISTER_RING);
}

Test(issuer, asked_for_single_issuer_run_on_another_thread)
{
	run_on_another_thread(RL_SINGLE_ISSUER);
}

Test(issuer, shared_ring_run_on_another_thread)
{
	run_on_another_thread(RL_SHARED_RING);
}

/*
 * The loop runs on the runner thread, which then waits; the test's own
 * thread submits and runs it: rl_run() fails with -EEXIST at once, and
 * so does rl_loop_close(), which closes nothing. The runner then runs
 * the request the other thread queued and closes the loop.
 */
Test(issuer, another_thread_gets_eexist_not_a_hang)
{
	struct runner r = { .wait_for_test = true };
	struct tseen late = { 0 };
	rl_req req = { .data = &late };
	char buf[64];
	int base = tfd_count();
	pthread_t th;

	r.path = tfile("issuer", 12);
	r.loop = open_uring(0);
	if (!has_default_ring(r.loop)) {
		cr_assert_eq(rl_loop_close(r.loop), 0);
		cr_skip_test("the kernel refuses SINGLE_ISSUER rings");
	}
	sem_init(&r.go_on, 0, 0);
	sem_init(&r.ran, 0, 0);
	cr_assert_eq(pthread_create(&th, NULL, runner_main, &r), 0);
	sem_wait(&r.ran);
	cr_assert_geq(r.run_ret, 0);
	cr_assert_eq(r.seen.calls, 1);

	cr_assert_eq(rl_fs_read_file(r.loop, &req, r.path, buf, sizeof(buf), 0,
				     tseen_cb),
		     0);
	cr_assert_eq(rl_run(r.loop, RL_RUN_DEFAULT), -EEXIST);
	cr_assert_eq(rl_run(r.loop, RL_RUN_NOWAIT), -EEXIST);
	cr_assert_eq(rl_loop_close(r.loop), -EEXIST);
	cr_assert_eq(late.calls, 0);

	sem_post(&r.go_on);
	cr_assert_eq(pthread_join(th, NULL), 0);
	cr_assert_geq(r.run2_ret, 0, "the runner's second run: %d", r.run2_ret);
	cr_assert_eq(late.calls, 1);
	cr_assert_eq(late.result, 12);
	tcheck("issuer", buf, 12);
	cr_assert_eq(r.close_ret, 0);
	cr_assert_eq(tfd_count(), base, "fds leaked");
	sem_destroy(&r.go_on);
	sem_destroy(&r.ran);
}

/* A loop that never ran has a ring no thread has entered: it closes on
 * any thread, and the requests it queued call back once each. More
 * requests than the SQ holds make the submissions themselves enter: the
 * ring is then the submitting thread's, and another thread's close says
 * -EEXIST. */
struct never_run {
	rl_loop *loop;
	int close_ret;
};

static void *close_main(void *arg)
{
	struct never_run *n = arg;

	n->close_ret = rl_loop_close(n->loop);
	return NULL;
}

static void close_without_running(unsigned flags, unsigned n, bool elsewhere,
				  int elsewhere_ret)
{
	struct rl_options opt;
	struct never_run nr = { 0 };
	const char *path = tfile("queued", 100);
	rl_req *reqs = calloc(n, sizeof(*reqs));
	struct tseen *seen = calloc(n, sizeof(*seen));
	char(*bufs)[128] = calloc(n, sizeof(*bufs));
	int base = tfd_count();
	pthread_t th;

	rl_options_init(&opt);
	opt.backend = RL_BACKEND_URING;
	opt.flags = flags;
	opt.entries = 8;
	cr_assert_eq(rl_loop_open(&nr.loop, &opt), 0);
	for (unsigned i = 0; i < n; i++) {
		reqs[i].data = &seen[i];
		cr_assert_eq(rl_fs_read_file(nr.loop, &reqs[i], path, bufs[i],
					     sizeof(bufs[i]), 0, tseen_cb),
			     0);
	}
	if (elsewhere) {
		cr_assert_eq(pthread_create(&th, NULL, close_main, &nr), 0);
		cr_assert_eq(pthread_join(th, NULL), 0);
		cr_assert_eq(nr.close_ret, elsewhere_ret);
		for (unsigned i = 0; i < n && nr.close_ret; i++)
			cr_assert_eq(seen[i].calls, 0);
	}
	if (!elsewhere || nr.close_ret)
		nr.close_ret = rl_loop_close(nr.loop);
	cr_assert_eq(nr.close_ret, 0);
	for (unsigned i = 0; i < n; i++) {
		cr_assert_eq(seen[i].calls, 1, "request %u: %d calls", i,
			     seen[i].calls);
		cr_assert(seen[i].result == 100 || seen[i].result == -ECANCELED,
			  "request %u: %lld", i, (long long)seen[i].result);
	}
	cr_assert_eq(tfd_count(), base, "fds leaked");
	free(reqs);
	free(seen);
	free(bufs);
}

Test(issuer, never_run_closes_with_requests_queued)
{
	close_without_running(0, 2, false, 0);
	close_without_running(0, 40, false, 0);
	close_without_running(RL_SHARED_RING, 40, false, 0);
}

Test(issuer, never_run_closes_on_another_thread)
{
	struct rl_options opt;
	rl_loop *loop;

	close_without_running(0, 2, true, 0);
	rl_options_init(&opt);
	opt.backend = RL_BACKEND_URING;
	cr_assert_eq(rl_loop_open(&loop, &opt), 0);
	close_without_running(0, 40, true,
			      has_default_ring(loop) ? -EEXIST : 0);
	cr_assert_eq(rl_loop_close(loop), 0);
	close_without_running(RL_SHARED_RING, 40, true, 0);
}

/* The opt-out: a plain ring, which any thread may enter; and the flags
 * that contradict it. */
Test(issuer, shared_ring_is_the_plain_ring)
{
	struct rl_options opt;
	rl_loop *loop = open_uring(RL_SHARED_RING);

	cr_assert_eq(rl_loop_flags(loop) & RING_FLAGS, 0);
	cr_assert_neq(rl_loop_flags(loop) & RL_SHARED_RING, 0);
	cr_assert_eq(rl_loop_close(loop), 0);

	loop = open_uring(0);
	if (has_default_ring(loop))
		cr_assert_eq(rl_loop_flags(loop) & RING_FLAGS, RING_FLAGS);
	cr_assert_eq(rl_loop_close(loop), 0);

	/* A ring knob asked for is the ring asked for. */
	loop = open_uring(RL_COOP_TASKRUN);
	cr_assert_eq(rl_loop_flags(loop) & RING_FLAGS, 0);
	cr_assert_eq(rl_loop_close(loop), 0);

	rl_options_init(&opt);
	opt.backend = RL_BACKEND_URING;
	opt.flags = RL_SHARED_RING | RL_SINGLE_ISSUER;
	cr_assert_eq(rl_loop_open(&loop, &opt), -EINVAL);
	cr_assert_null(loop);
	opt.flags = RL_SHARED_RING | RL_DEFER_TASKRUN | RL_SINGLE_ISSUER;
	cr_assert_eq(rl_loop_open(&loop, &opt), -EINVAL);

	/* epoll has no ring: its flags are the options'. */
	opt.backend = RL_BACKEND_EPOLL;
	opt.flags = 0;
	cr_assert_eq(rl_loop_open(&loop, &opt), 0);
	cr_assert_eq(rl_loop_flags(loop), 0);
	cr_assert_eq(rl_loop_close(loop), 0);
}
