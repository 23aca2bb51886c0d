/* SPDX-License-Identifier: MIT */
/*
 * test_fallback.c - backend selection when io_uring is refused (a real
 * seccomp filter, as Docker's default profile installs), the environment
 * override, and what is particular to the epoll backend: the thread pool
 * (saturation, batched wake-ups, close with jobs running, cancel of a
 * queued job), the inline fast path and its counters, and reads that must
 * not block a worker (pipes).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/io_uring.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

static rl_loop *epoll_loop(unsigned flags, unsigned threads)
{
	const struct tp tp = { RL_BACKEND_EPOLL, flags, "epoll" };
	struct rl_options opt;

	rl_options_init(&opt);
	opt.pool_threads = threads;
	return tloop_opts(&tp, &opt);
}

/* ------------------------------------------------------ backend choice */

#ifdef TEST_AUDIT_ARCH
/* What the child checks, in order; its exit status is the first step
 * that failed (0: all passed). */
enum {
	STEP_OK = 0,
	STEP_NO_SECCOMP = 77, /* seccomp() missing: valgrind 3.19, old kernel */
	STEP_FILTER = 1,
	STEP_SETUP_NOT_REFUSED,
	STEP_AUTO_OPEN,
	STEP_AUTO_NOT_EPOLL,
	STEP_AUTO_REASON,
	STEP_READ_SUBMIT,
	STEP_READ_RUN,
	STEP_READ_RESULT,
	STEP_READ_CONTENT,
	STEP_CLOSE,
	STEP_URING_NOT_EPERM,
	STEP_URING_LOOP_SET,
};

static const char *step_names[] = {
	"ok",
	"installing the seccomp filter",
	"io_uring_setup was not refused by the filter",
	"rl_loop_open(AUTO) failed",
	"AUTO did not pick epoll",
	"backend reason does not mention EPERM",
	"rl_fs_read_file failed",
	"rl_run failed",
	"wrong read_file result",
	"wrong read_file content",
	"rl_loop_close failed",
	"RL_BACKEND_URING did not fail with -EPERM",
	"RL_BACKEND_URING failed but set *out",
};

static int child_under_filter(const char *path, size_t size)
{
	struct io_uring_params p;
	struct rl_options opt;
	struct tseen s = { 0 };
	rl_req req = { .data = &s };
	rl_loop *loop = NULL;
	char buf[256];
	long r;

	unsetenv("RINGLOOP_BACKEND");
	r = tdeny_syscalls((const unsigned[]){ __NR_io_uring_setup }, 1, EPERM);
	if (r == -ENOSYS)
		return STEP_NO_SECCOMP;
	if (r < 0)
		return STEP_FILTER;
	memset(&p, 0, sizeof(p));
	r = syscall(__NR_io_uring_setup, 4, &p);
	if (r >= 0 || errno != EPERM)
		return STEP_SETUP_NOT_REFUSED;

	rl_options_init(&opt);
	opt.backend = RL_BACKEND_AUTO;
	if (rl_loop_open(&loop, &opt) < 0)
		return STEP_AUTO_OPEN;
	if (strcmp(rl_loop_backend(loop), "epoll"))
		return STEP_AUTO_NOT_EPOLL;
	if (!strstr(rl_loop_backend_reason(loop), "EPERM"))
		return STEP_AUTO_REASON;
	if (rl_fs_read_file(loop, &req, path, buf, sizeof(buf), 0, tseen_cb))
		return STEP_READ_SUBMIT;
	if (rl_run(loop, RL_RUN_DEFAULT) < 0)
		return STEP_READ_RUN;
	if (s.calls != 1 || s.result != (int64_t)size)
		return STEP_READ_RESULT;
	for (size_t i = 0; i < size; i++)
		if ((unsigned char)buf[i] != tbyte("seccomp", i))
			return STEP_READ_CONTENT;
	if (rl_loop_close(loop))
		return STEP_CLOSE;

	/* Asking for io_uring by name is an error, not a silent switch. */
	loop = (rl_loop *)&opt;
	opt.backend = RL_BACKEND_URING;
	if (rl_loop_open(&loop, &opt) != -EPERM)
		return STEP_URING_NOT_EPERM;
	if (loop)
		return STEP_URING_LOOP_SET;
	return STEP_OK;
}

Test(fallback, seccomp_refused_io_uring_falls_back_to_epoll)
{
	const char *path = tfile("seccomp", 100);
	int status;
	pid_t pid;

	pid = fork();
	cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
	if (pid == 0)
		_exit(child_under_filter(path, 100));
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "child died: signal %d",
		  WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	if (WEXITSTATUS(status) == STEP_NO_SECCOMP)
		cr_skip_test("seccomp() is not available here (valgrind?)");
	cr_assert_eq(WEXITSTATUS(status), STEP_OK, "child failed at: %s",
		     (size_t)WEXITSTATUS(status) <
				     sizeof(step_names) / sizeof(step_names[0])
			     ? step_names[WEXITSTATUS(status)]
			     : "?");
}

/*
 * Linux AIO refused (io_setup fails with ENOSYS, as on a kernel built
 * without it): the epoll backend's direct reads go to the pool and give
 * the same bytes. Exit status: 0, 77 without seccomp, else the step.
 */
static int child_without_aio(const char *path)
{
	struct rl_options opt;
	struct rl_stats st;
	struct tseen s = { 0 };
	rl_req req = { .data = &s };
	rl_loop *loop = NULL;
	unsigned char *buf = NULL;
	long r;
	int fd;

	r = tdeny_syscalls((const unsigned[]){ __NR_io_setup }, 1, ENOSYS);
	if (r == -ENOSYS)
		return STEP_NO_SECCOMP;
	if (r < 0)
		return 1;
	rl_options_init(&opt);
	opt.backend = RL_BACKEND_EPOLL;
	if (rl_loop_open(&loop, &opt) < 0)
		return 2;
	if (rl_fs_open(loop, &req, path, O_RDONLY | O_DIRECT | O_CLOEXEC, 0,
		       tseen_cb) ||
	    rl_run(loop, RL_RUN_DEFAULT) < 0 || s.calls != 1)
		return 3;
	if (s.result == -EINVAL)
		return STEP_NO_SECCOMP + 1; /* no O_DIRECT here */
	if (s.result < 0)
		return 4;
	fd = (int)s.result;
	if (posix_memalign((void **)&buf, 4096, 4096))
		return 5;
	for (int i = 0; i < 8; i++) {
		memset(&s, 0, sizeof(s));
		memset(buf, 0, 4096);
		if (rl_fs_read(loop, &req, fd, buf, 4096, (int64_t)i * 4096,
			       tseen_cb) ||
		    rl_run(loop, RL_RUN_DEFAULT) < 0)
			return 6;
		if (s.calls != 1 || s.result != 4096)
			return 7;
		for (size_t j = 0; j < 4096; j++)
			if (buf[j] != tbyte("noaio", (size_t)i * 4096 + j))
				return 8;
	}
	rl_loop_stats(loop, &st);
	if (st.aio != 0 || st.pool_jobs < 8)
		return 9;
	close(fd);
	free(buf);
	return rl_loop_close(loop) ? 10 : 0;
}

Test(fallback, seccomp_refused_aio_leaves_direct_io_to_the_pool)
{
	const char *path = tfile("noaio", 8 * 4096);
	int status;
	pid_t pid;

	pid = fork();
	cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
	if (pid == 0)
		_exit(child_without_aio(path));
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status), "child died: signal %d",
		  WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	if (WEXITSTATUS(status) == STEP_NO_SECCOMP)
		cr_skip_test("seccomp() is not available here (valgrind?)");
	if (WEXITSTATUS(status) == STEP_NO_SECCOMP + 1)
		cr_skip_test("%s: no O_DIRECT on this file system", tdir());
	cr_assert_eq(WEXITSTATUS(status), 0, "child failed at step %d",
		     WEXITSTATUS(status));
}
#endif /* TEST_AUDIT_ARCH */

Test(fallback, environment_picks_epoll)
{
	struct rl_options opt;
	rl_loop *loop = NULL;

	rl_options_init(&opt);
	cr_assert_eq(setenv("RINGLOOP_BACKEND", "epoll", 1), 0);
	cr_assert_eq(rl_loop_open(&loop, &opt), 0);
	unsetenv("RINGLOOP_BACKEND");
	cr_assert_str_eq(rl_loop_backend(loop), "epoll");
	cr_assert_str_eq(rl_loop_backend_reason(loop), "asked for epoll");
	cr_assert_eq(rl_loop_close(loop), 0);
}

/* ------------------------------------------------------------ the pool */

/* Many more requests than workers (one): all complete, in full. Runs on
 * every backend; pool_threads means nothing to io_uring. */
BACKEND_TEST(pool, saturated_single_worker)
{
	enum { N = 2000, SIZE = 65536 };
	const char *path = tfile("saturated", SIZE);
	struct rl_options opt;
	static rl_req reqs[N];
	static char bufs[N][64];
	struct tseen s = { 0 };
	struct rl_stats st;
	rl_loop *loop;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	rl_options_init(&opt);
	opt.pool_threads = 1;
	loop = tloop_opts(tp, &opt);
	for (int i = 0; i < N; i++) {
		reqs[i] = (rl_req){ .data = &s };
		if (i % 2)
			cr_assert_eq(rl_fs_read(loop, &reqs[i], fd, bufs[i], 64,
						(int64_t)i * 31, tseen_cb),
				     0);
		else
			cr_assert_eq(rl_fs_read_file(loop, &reqs[i], path, NULL,
						     0, RL_READ_FILE_GROW,
						     tseen_cb),
				     0);
	}
	trun(loop);
	cr_assert_eq(s.calls, N);
	for (int i = 0; i < N; i++) {
		if (i % 2) {
			cr_assert_eq(reqs[i].result, 64);
			for (int j = 0; j < 64; j++)
				cr_assert_eq(
					(unsigned char)bufs[i][j],
					tbyte("saturated", (size_t)i * 31 + j));
		} else {
			cr_assert_eq(reqs[i].result, SIZE);
			tcheck("saturated", reqs[i].buf, SIZE);
			free(reqs[i].buf);
		}
	}
	rl_loop_stats(loop, &st);
	if (tp->backend == RL_BACKEND_EPOLL && (tp->flags & RL_NO_INLINE))
		cr_assert_eq(st.pool_jobs, N);
	tclose(loop);
	close(fd);
}

/* Completions that arrive while the loop is awake cost no wake-up at all;
 * while it sleeps, one per sleep at most. */
Test(pool, completions_are_batched)
{
	enum { N = 2000 };
	const char *path = tfile("batch", 12);
	static rl_req reqs[N];
	static char bufs[N][32];
	struct tseen s = { 0 };
	struct rl_stats st;
	rl_loop *loop = epoll_loop(RL_NO_INLINE, 2);

	/* Never letting the loop sleep: the workers never need to wake it. */
	for (int i = 0; i < N; i++) {
		reqs[i] = (rl_req){ .data = &s };
		cr_assert_eq(rl_fs_read_file(loop, &reqs[i], path, bufs[i], 32,
					     0, tseen_cb),
			     0);
	}
	while (s.calls < N) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(1000);
	}
	rl_loop_stats(loop, &st);
	cr_assert_eq(st.pool_jobs, N);
	cr_assert_eq(st.inline_completions, 0);
	cr_assert_eq(st.waits, 0, "RL_RUN_NOWAIT never needs epoll_wait");
	cr_assert_eq(st.wakeups, 0, "workers woke a loop that was awake");

	/* Letting it sleep: at most one eventfd read per epoll_wait. */
	s.calls = 0;
	for (int i = 0; i < N; i++)
		cr_assert_eq(rl_fs_read_file(loop, &reqs[i], path, bufs[i], 32,
					     0, tseen_cb),
			     0);
	trun(loop);
	cr_assert_eq(s.calls, N);
	for (int i = 0; i < N; i++)
		cr_assert_eq(reqs[i].result, 12);
	rl_loop_stats(loop, &st);
	cr_assert_eq(st.pool_jobs, 2 * N);
	cr_assert_leq(st.wakeups, st.waits);
	cr_assert_lt(st.wakeups, N, "one wake-up per job: not batched");
	tclose(loop);
}

/* A worker blocked in a stalled stat (see tstall in helpers.h) keeps the
 * jobs behind it queued, which makes "not started yet" deterministic. */
#define STALL_OR_SKIP(st)                                                      \
	do {                                                                   \
		if (!tstall_open(st, sizeof(struct statx)))                    \
			cr_skip_test("no userfaultfd here to stall a worker"); \
	} while (0)

static void pool_cancel_queued(unsigned flags)
{
	enum { N = 5 };
	const char *path = tfile("queued", 20);
	struct tseen sb = { 0 }, s[N] = { { 0 } };
	rl_req blocker = { .data = &sb }, reqs[N];
	struct statx stx[N];
	struct tstall stall;
	rl_loop *loop;

	STALL_OR_SKIP(&stall);
	loop = epoll_loop(flags, 1);
	cr_assert_eq(rl_fs_stat(loop, &blocker, path, stall.mem, tseen_cb), 0);
	/* stat always goes to the pool, fast path or not: these queue up
	 * behind the blocked worker. */
	for (int i = 0; i < N; i++) {
		reqs[i] = (rl_req){ .data = &s[i] };
		cr_assert_eq(
			rl_fs_stat(loop, &reqs[i], path, &stx[i], tseen_cb), 0);
	}
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0); /* hand them over */
	cr_assert_eq(sb.calls, 0);
	cr_assert_eq(rl_cancel(loop, &reqs[2]), 0);
	cr_assert_eq(rl_cancel(loop, &reqs[2]), -EALREADY);
	cr_assert_eq(s[2].calls, 0, "cancel must not run the callback");
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(s[2].calls, 1);
	cr_assert_eq(s[2].result, -ECANCELED);

	tstall_release(&stall);
	trun(loop);
	cr_assert_eq(sb.calls, 1);
	cr_assert_eq(sb.result, 0);
	cr_assert_eq(((struct statx *)stall.mem)->stx_size, 20);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(s[i].calls, 1);
		if (i != 2) {
			cr_assert_eq(s[i].result, 0);
			cr_assert_eq(stx[i].stx_size, 20);
		}
	}
	tclose(loop);
	tstall_close(&stall);
}

Test(pool, cancel_queued_job)
{
	pool_cancel_queued(RL_NO_INLINE);
}

Test(pool, cancel_queued_job_inline)
{
	pool_cancel_queued(0);
}

/* Workers hold back the wake-up for a completion while jobs are queued;
 * with the jobs behind it stuck for good, the loop must still get it. Both
 * workers end up blocked in stalled stats, with stats queued behind them,
 * and the three quick reads between must call back all the same. */
static void held_back_completion(unsigned flags)
{
	enum { QUICK = 3, QUEUED = 3 };
	const char *path = tfile("quick", 12);
	struct tseen s1 = { 0 }, s2 = { 0 }, sq = { 0 }, ss = { 0 };
	rl_req b1 = { .data = &s1 }, b2 = { .data = &s2 };
	rl_req quick[QUICK], stats[QUEUED];
	struct statx stx[QUEUED];
	char qbuf[QUICK][16];
	struct tstall stall;
	rl_loop *loop;

	STALL_OR_SKIP(&stall);
	loop = epoll_loop(flags, 2);
	alarm(30); /* a held-back completion never delivered hangs here */
	cr_assert_eq(rl_fs_stat(loop, &b1, path, stall.mem, tseen_cb), 0);
	for (int i = 0; i < QUICK; i++) {
		quick[i] = (rl_req){ .data = &sq };
		cr_assert_eq(rl_fs_read_file(loop, &quick[i], path, qbuf[i],
					     sizeof(qbuf[i]), 0, tseen_cb),
			     0);
	}
	cr_assert_eq(rl_fs_stat(loop, &b2, path, stall.mem, tseen_cb), 0);
	for (int i = 0; i < QUEUED; i++) {
		stats[i] = (rl_req){ .data = &ss };
		cr_assert_eq(
			rl_fs_stat(loop, &stats[i], path, &stx[i], tseen_cb),
			0);
	}
	while (sq.calls < QUICK)
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
	for (int i = 0; i < QUICK; i++) {
		cr_assert_eq(quick[i].result, 12);
		tcheck("quick", qbuf[i], 12);
	}
	cr_assert_eq(s1.calls + s2.calls, 0);

	tstall_release(&stall);
	trun(loop);
	alarm(0);
	cr_assert_eq(s1.calls, 1);
	cr_assert_eq(s1.result, 0);
	cr_assert_eq(s2.calls, 1);
	cr_assert_eq(s2.result, 0);
	cr_assert_eq(sq.calls, QUICK);
	cr_assert_eq(ss.calls, QUEUED);
	for (int i = 0; i < QUEUED; i++) {
		cr_assert_eq(stats[i].result, 0);
		cr_assert_eq(stx[i].stx_size, 12);
	}
	tclose(loop);
	tstall_close(&stall);
}

Test(pool, held_back_completion_arrives)
{
	held_back_completion(RL_NO_INLINE);
}

Test(pool, held_back_completion_arrives_inline)
{
	held_back_completion(0);
}

static int close_calls[64];

static void close_cb(rl_req *req)
{
	int i = (int)(intptr_t)req->data;

	close_calls[i]++;
	/* An open that did complete hands its fd over; close it. */
	if (req->op == RL_OP_OPEN && req->result >= 0)
		close((int)req->result);
}

/* Close with one job running (blocked in a stalled stat, which a signal
 * cannot end: the kernel waits for the stall uninterruptibly) and many
 * queued: queued ones end with -ECANCELED at once, the running one ends
 * when the stall does, every callback runs once, no fd and no thread is
 * left behind. (The interrupt of a job blocked in an interruptible wait:
 * special::open_fifo_for_writing_cancelled.) */
static void *release_later(void *arg)
{
	usleep(100 * 1000);
	tstall_release(arg);
	return NULL;
}

static void close_in_flight(unsigned flags)
{
	enum { N = 60 };
	const char *path = tfile("closing-file", 50);
	rl_req blocker = { .data = (void *)(intptr_t)N }, reqs[N];
	static char bufs[N][64];
	struct statx stx[N];
	struct tstall stall;
	int threads = tthread_count(), fds;
	pthread_t th;
	rl_loop *loop;

	memset(close_calls, 0, sizeof(close_calls));
	STALL_OR_SKIP(&stall);
	fds = tfd_count();
	loop = epoll_loop(flags, 1);
	cr_assert_gt(tthread_count(), threads, "the pool has its worker");
	cr_assert_eq(rl_fs_stat(loop, &blocker, path, stall.mem, close_cb), 0);
	for (int i = 0; i < N; i++) {
		reqs[i] = (rl_req){ .data = (void *)(intptr_t)i };
		switch (i % 3) {
		case 0:
			cr_assert_eq(rl_fs_read_file(loop, &reqs[i], path,
						     bufs[i], 64, 0, close_cb),
				     0);
			break;
		case 1:
			cr_assert_eq(rl_fs_open(loop, &reqs[i], path,
						O_RDONLY | O_CLOEXEC, 0,
						close_cb),
				     0);
			break;
		case 2:
			cr_assert_eq(rl_fs_stat(loop, &reqs[i], path, &stx[i],
						close_cb),
				     0);
			break;
		}
	}
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0); /* hand them over */
	usleep(20 * 1000); /* the worker is in the stalled statx by now */
	alarm(30);
	cr_assert_eq(pthread_create(&th, NULL, release_later, &stall), 0);
	cr_assert_eq(rl_loop_close(loop), 0);
	pthread_join(th, NULL);
	alarm(0);
	cr_assert_eq(tthread_count(), threads, "a worker outlived the loop");
	cr_assert_eq(tfd_count(), fds, "fds leaked");
	cr_assert_eq(close_calls[N], 1);
	cr_assert(blocker.result == 0 || blocker.result == -ECANCELED, "%lld",
		  (long long)blocker.result);
	tstall_close(&stall);
	for (int i = 0; i < N; i++) {
		int64_t want = i % 3 == 0 ? 50 : 0;

		cr_assert_eq(close_calls[i], 1, "request %d: %d callbacks", i,
			     close_calls[i]);
		if (i % 3 == 1)
			cr_assert(reqs[i].result == -ECANCELED ||
				  reqs[i].result >= 0);
		else
			cr_assert(reqs[i].result == -ECANCELED ||
					  reqs[i].result == want,
				  "request %d: %lld", i,
				  (long long)reqs[i].result);
		if (flags & RL_NO_INLINE)
			cr_assert_eq(reqs[i].result, -ECANCELED,
				     "queued behind the blocked worker");
	}
}

Test(pool, close_with_jobs_in_flight)
{
	close_in_flight(RL_NO_INLINE);
}

Test(pool, close_with_jobs_in_flight_inline)
{
	close_in_flight(0);
}

/* ------------------------------------------------------- the fast path */

/* N reads of a cached file, submitted per_tick at a time, each group run
 * by one RL_RUN_NOWAIT pass before the next is submitted. */
static void fast_path_counters(unsigned flags, int per_tick)
{
	enum { N = 200 };
	const char *path = tfile("fast", 12);
	static rl_req reqs[N];
	static char bufs[N][64];
	char warm[64];
	struct tseen s = { 0 };
	struct rl_stats st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	rl_loop *loop;

	/* The file was just written, so it is cached; one read makes sure
	 * the dentry and the page are both there. */
	cr_assert_geq(fd, 0);
	cr_assert_eq(read(fd, warm, sizeof(warm)), 12);
	close(fd);
	loop = epoll_loop(flags, 0);
	for (int i = 0; i < N; i++) {
		reqs[i] = (rl_req){ .data = &s };
		cr_assert_eq(rl_fs_read_file(loop, &reqs[i], path, bufs[i], 64,
					     0, tseen_cb),
			     0);
		if (i == 0)
			cr_assert_eq(s.calls, 0,
				     "inline work still calls back later");
		if ((i + 1) % per_tick == 0)
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	}
	trun(loop);
	cr_assert_eq(s.calls, N);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(reqs[i].result, 12);
		tcheck("fast", bufs[i], 12);
	}
	rl_loop_stats(loop, &st);
	if (flags & RL_NO_INLINE) {
		cr_assert_eq(st.inline_completions, 0);
		cr_assert_eq(st.pool_jobs, N);
	} else if (!thave_resolve_cached()) {
		/* No openat2 (kernel < 5.6, or valgrind 3.19, which does not
		 * know the syscall): the loop notices and uses the pool. */
		cr_assert_eq(st.pool_jobs, N);
	} else if (per_tick < 8) {
		/* Below the backend's SHARE_MIN, a tick's requests all run on
		 * the loop thread. */
		cr_assert_eq(st.inline_completions, N);
		cr_assert_eq(st.pool_jobs, 0);
	} else {
		/* A burst is shared: who ran how many depends on the
		 * scheduler, but each ran exactly once, on one side. */
		cr_assert_eq(st.inline_completions + st.pool_jobs, N);
	}
	tclose(loop);
}

Test(fastpath, counters_inline)
{
	fast_path_counters(0, 4);
}

Test(fastpath, counters_burst_shared)
{
	fast_path_counters(0, 200);
}

Test(fastpath, counters_pool_only)
{
	fast_path_counters(RL_NO_INLINE, 200);
}

/* Writes a file, then evicts it from the page cache except for its first
 * 64 KiB, so that an RWF_NOWAIT read of it stops short. Returns whether
 * the eviction worked (it needs a file system with a page cache of its own,
 * not tmpfs). */
static bool partly_cached(const char *name, size_t size)
{
	const char *path = tfile(name, size);
	char *buf = malloc(65536);
	bool ok;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_not_null(buf);
	fsync(fd);
	ok = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0;
	/* No read-ahead on this fd: only the pages read get cached. */
	posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	cr_assert_eq(pread(fd, buf, 65536, 0), 65536);
	free(buf);
	close(fd);
	return ok;
}

/* A short RWF_NOWAIT read (a partial cache hit) is not the end of the
 * file: read_file and read both go on and return everything. */
BACKEND_TEST(fastpath, partial_cache_hit_is_not_eof)
{
	enum { SIZE = 1 << 20 };
	struct tseen s1 = { 0 }, s2 = { 0 };
	rl_req r1 = { .data = &s1 }, r2 = { .data = &s2 };
	char *buf = malloc(SIZE);
	const char *path;
	rl_loop *loop = tloop(tp);
	int fd;

	partly_cached("partial", SIZE);
	path = tpath("partial");
	cr_assert_eq(rl_fs_read_file(loop, &r1, path, NULL, 0,
				     RL_READ_FILE_GROW, tseen_cb),
		     0);
	trun(loop);
	cr_assert_eq(s1.result, SIZE);
	tcheck("partial", r1.buf, SIZE);
	free(r1.buf);

	partly_cached("partial2", SIZE);
	fd = open(tpath("partial2"), O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(rl_fs_read(loop, &r2, fd, buf, SIZE, -1, tseen_cb), 0);
	trun(loop);
	cr_assert_eq(s2.result, SIZE);
	tcheck("partial2", buf, SIZE);
	cr_assert_eq(lseek(fd, 0, SEEK_CUR), SIZE, "the position moved");
	close(fd);
	free(buf);
	tclose(loop);
}

/* Drops name's pages from the page cache (written back first). Returns
 * the share of them still resident: 1 on a tmpfs, whose pages are the
 * file. */
static double evicted(const char *name, size_t size)
{
	int fd = open(tpath(name), O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	cr_assert_eq(fsync(fd), 0);
	cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
	return tresident(tpath(name), size);
}

/*
 * A burst of read_files of files not in the page cache, more than the
 * pool's workers. On epoll a worker with other jobs waiting first reads
 * without waiting for the disk: a miss starts the file's readahead and
 * the job goes back to the end of the queue for a second, blocking pass.
 * Every byte must arrive, each callback exactly once; a cancel finds the
 * job wherever it is (queued, between its passes, running) and ends it
 * with -ECANCELED; a loop closed with the burst in flight leaves nothing
 * open.
 */
BACKEND_TEST(fastpath, cold_read_file_burst)
{
	enum { N = 48, SIZE = 40000 };
	struct tseen s[N];
	rl_req r[N];
	char name[N][16], path[N][512];
	struct rl_options opt;
	rl_loop *loop;

	/* A request keeps its path until it completes: each its own. */
	for (int i = 0; i < N; i++) {
		snprintf(name[i], sizeof(name[i]), "cold%d", i);
		snprintf(path[i], sizeof(path[i]), "%s", tfile(name[i], SIZE));
	}
	rl_options_init(&opt);
	opt.pool_threads = 2;
	loop = tloop_opts(tp, &opt);
	alarm(60);
	for (int round = 0; round < 3; round++) {
		for (int i = 0; i < N; i++)
			if (evicted(name[i], SIZE) > 0)
				cr_skip_test("the page cache keeps %s (tmpfs?)",
					     path[i]);
		for (int i = 0; i < N; i++) {
			s[i] = (struct tseen){ 0 };
			r[i] = (rl_req){ .data = &s[i] };
			cr_assert_eq(rl_fs_read_file(loop, &r[i], path[i], NULL,
						     0, RL_READ_FILE_GROW,
						     tseen_cb),
				     0);
		}
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		/* Round 1 cancels every fourth read, round 2 closes the
		 * loop with the burst in flight. */
		for (int i = 0; round == 1 && i < N; i += 4) {
			int ret = rl_cancel(loop, &r[i]);

			cr_assert(ret == 0 || ret == -ENOENT, "%d", ret);
		}
		if (round == 2) {
			cr_assert_eq(rl_loop_close(loop), 0);
			loop = NULL;
		} else {
			trun(loop);
		}
		for (int i = 0; i < N; i++) {
			cr_assert_eq(s[i].calls, 1, "read %d", i);
			if (s[i].result == -ECANCELED) {
				cr_assert(round > 0, "read %d cancelled", i);
			} else {
				cr_assert_eq(s[i].result, SIZE, "read %d: %s",
					     i, rl_strerror((int)s[i].result));
				tcheck(name[i], r[i].buf, SIZE);
			}
			free(r[i].buf);
		}
	}
	alarm(0);
	/* The loop was closed above: only the fd check of tclose() is
	 * left, through a loop that has nothing to do. */
	tclose(tloop(tp));
}

/*
 * A burst of read_files of a procfs file, more than the pool's workers:
 * procfs refuses RWF_NOWAIT (-EOPNOTSUPP), so on epoll every job with
 * others queued goes round the queue once before its blocking pass.
 * Each gets the whole file, each callback runs once; a cancel of every
 * third finds them wherever they are.
 */
BACKEND_TEST(fastpath, procfs_read_file_burst)
{
	enum { N = 40 };
	const char *path = "/proc/version";
	struct tseen s[N];
	rl_req r[N];
	char want[4096];
	struct rl_options opt;
	ssize_t len;
	rl_loop *loop;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0);
	len = read(fd, want, sizeof(want));
	close(fd);
	cr_assert_gt(len, 0);
	rl_options_init(&opt);
	opt.pool_threads = 2;
	loop = tloop_opts(tp, &opt);
	alarm(60);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < N; i++) {
			s[i] = (struct tseen){ 0 };
			r[i] = (rl_req){ .data = &s[i] };
			cr_assert_eq(rl_fs_read_file(loop, &r[i], path, NULL, 0,
						     RL_READ_FILE_GROW,
						     tseen_cb),
				     0);
		}
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		for (int i = 0; round == 1 && i < N; i += 3) {
			int ret = rl_cancel(loop, &r[i]);

			cr_assert(ret == 0 || ret == -ENOENT, "%d", ret);
		}
		trun(loop);
		for (int i = 0; i < N; i++) {
			cr_assert_eq(s[i].calls, 1, "read %d", i);
			if (s[i].result == -ECANCELED) {
				cr_assert_eq(round, 1, "read %d cancelled", i);
			} else {
				cr_assert_eq(s[i].result, len, "read %d: %s", i,
					     rl_strerror((int)s[i].result));
				cr_assert_eq(
					memcmp(r[i].buf, want, (size_t)len), 0);
			}
			free(r[i].buf);
		}
	}
	alarm(0);
	tclose(loop);
}

/* A caller's buffer smaller than the file: -EFBIG, whichever path read
 * it; with RL_READ_FILE_GROW the buffer grows instead. */
BACKEND_TEST(fastpath, too_big_and_grow)
{
	const char *path = tfile("toobig", 10000);
	struct tseen s1 = { 0 }, s2 = { 0 };
	char small[4096];
	rl_req r1 = { .data = &s1 }, r2 = { .data = &s2 };
	rl_loop *loop = tloop(tp);
	void *grow = malloc(100);

	cr_assert_eq(rl_fs_read_file(loop, &r1, path, small, sizeof(small), 0,
				     tseen_cb),
		     0);
	cr_assert_eq(rl_fs_read_file(loop, &r2, path, grow, 100,
				     RL_READ_FILE_GROW, tseen_cb),
		     0);
	trun(loop);
	cr_assert_eq(s1.result, -EFBIG);
	cr_assert_eq(s2.result, 10000);
	cr_assert_geq(r2.len, 10000);
	tcheck("toobig", r2.buf, 10000);
	free(r2.buf);
	tclose(loop);
}

/* procfs: st_size is 0 and RWF_NOWAIT is refused; the content still
 * arrives whole. (Not /proc/self/...: valgrind fakes some of those for
 * open() but not for io_uring, which reads the real ones.) */
#define PROC_FILE "/proc/sys/kernel/osrelease"

BACKEND_TEST(fastpath, procfs_file)
{
	char want[4096];
	struct tseen s = { 0 };
	rl_req req = { .data = &s };
	rl_loop *loop = tloop(tp);
	int fd = open(PROC_FILE, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	cr_assert_geq(fd, 0);
	n = read(fd, want, sizeof(want));
	close(fd);
	cr_assert_gt(n, 0);
	cr_assert_eq(rl_fs_read_file(loop, &req, PROC_FILE, NULL, 0,
				     RL_READ_FILE_GROW, tseen_cb),
		     0);
	trun(loop);
	cr_assert_eq(s.result, n);
	cr_assert_eq(memcmp(req.buf, want, (size_t)n), 0);
	free(req.buf);
	tclose(loop);
}

/* An fd from rl_fs_open() has exactly the flags asked for, even when the
 * fast path opened it (it adds O_NONBLOCK for the attempt). */
BACKEND_TEST(fastpath, open_keeps_the_callers_flags)
{
	const char *path = tfile("flags", 5);
	struct tseen s1 = { 0 }, s2 = { 0 };
	rl_req r1 = { .data = &s1 }, r2 = { .data = &s2 };
	rl_loop *loop = tloop(tp);
	int fl;

	cr_assert_eq(
		rl_fs_open(loop, &r1, path, O_RDONLY | O_CLOEXEC, 0, tseen_cb),
		0);
	cr_assert_eq(rl_fs_open(loop, &r2, path,
				O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0, tseen_cb),
		     0);
	trun(loop);
	cr_assert_geq(s1.result, 0);
	cr_assert_geq(s2.result, 0);
	fl = fcntl((int)s1.result, F_GETFL);
	cr_assert_eq(fl & O_NONBLOCK, 0);
	cr_assert_eq(fl & O_ACCMODE, O_RDONLY);
	cr_assert_eq(fcntl((int)s1.result, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
	fl = fcntl((int)s2.result, F_GETFL);
	cr_assert_eq(fl & O_NONBLOCK, O_NONBLOCK);
	close((int)s1.result);
	close((int)s2.result);
	/* O_PATH: opened as asked (no O_NONBLOCK try, no F_SETFL, which an
	 * O_PATH fd refuses). */
	s1 = (struct tseen){ 0 };
	cr_assert_eq(
		rl_fs_open(loop, &r1, path, O_PATH | O_CLOEXEC, 0, tseen_cb),
		0);
	trun(loop);
	cr_assert_geq(s1.result, 0, "%s", rl_strerror((int)s1.result));
	cr_assert_eq(fcntl((int)s1.result, F_GETFL) & O_PATH, O_PATH);
	close((int)s1.result);
	tclose(loop);
}

/* ---------------------------------------------------- reads that wait */

/* Data that arrives later, on two reads waiting on the same pipe. */
BACKEND_TEST(pipe, reads_wait_for_data)
{
	int p[2];
	struct tseen s1 = { 0 }, s2 = { 0 };
	char b1[16], b2[16];
	rl_req r1 = { .data = &s1 }, r2 = { .data = &s2 };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	cr_assert_eq(rl_fs_read(loop, &r1, p[0], b1, sizeof(b1), -1, tseen_cb),
		     0);
	cr_assert_eq(rl_fs_read(loop, &r2, p[0], b2, sizeof(b2), -1, tseen_cb),
		     0);
	cr_assert_eq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(s1.calls + s2.calls, 0);
	cr_assert_eq(write(p[1], "hello", 5), 5);
	while (s1.calls + s2.calls < 1)
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
	cr_assert_eq(write(p[1], "world!", 6), 6);
	trun(loop);
	cr_assert_eq(s1.calls, 1);
	cr_assert_eq(s2.calls, 1);
	cr_assert_eq(s1.result + s2.result, 11);
	cr_assert(s1.result == 5 || s1.result == 6);
	close(p[0]);
	close(p[1]);
	tclose(loop);
}

/* A pipe with data is read at once; end of file is 0. */
BACKEND_TEST(pipe, ready_data_and_eof)
{
	int p[2];
	struct tseen s1 = { 0 }, s2 = { 0 };
	char b1[16], b2[16];
	rl_req r1 = { .data = &s1 }, r2 = { .data = &s2 };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	cr_assert_eq(write(p[1], "abc", 3), 3);
	cr_assert_eq(rl_fs_read(loop, &r1, p[0], b1, sizeof(b1), -1, tseen_cb),
		     0);
	trun(loop);
	cr_assert_eq(s1.result, 3);
	cr_assert_eq(memcmp(b1, "abc", 3), 0);
	close(p[1]);
	cr_assert_eq(rl_fs_read(loop, &r2, p[0], b2, sizeof(b2), -1, tseen_cb),
		     0);
	trun(loop);
	cr_assert_eq(s2.result, 0);
	close(p[0]);
	tclose(loop);
}

/* Closing the loop ends a read that waits forever. */
BACKEND_TEST(pipe, close_ends_waiting_read)
{
	int p[2];
	struct tseen s = { 0 };
	char buf[16];
	rl_req req = { .data = &s };
	rl_loop *loop;

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	loop = tloop(tp); /* after the pipe: tclose() counts fds */
	cr_assert_eq(
		rl_fs_read(loop, &req, p[0], buf, sizeof(buf), -1, tseen_cb),
		0);
	cr_assert_eq(rl_run(loop, RL_RUN_NOWAIT), 0);
	tclose(loop);
	cr_assert_eq(s.calls, 1);
	cr_assert_eq(s.result, -ECANCELED);
	close(p[0]);
	close(p[1]);
}

/* An O_NONBLOCK descriptor with nothing to read waits for data all the
 * same: io_uring polls such a file rather than answering -EAGAIN, and the
 * epoll backend does as io_uring does. */
BACKEND_TEST(pipe, nonblocking_fd_waits_too)
{
	int p[2];
	struct tseen s = { 0 };
	char buf[16];
	rl_req req = { .data = &s };
	rl_loop *loop = tloop(tp);

	cr_assert_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	cr_assert_eq(
		rl_fs_read(loop, &req, p[0], buf, sizeof(buf), -1, tseen_cb),
		0);
	cr_assert_eq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(s.calls, 0);
	cr_assert_eq(write(p[1], "xyz", 3), 3);
	trun(loop);
	cr_assert_eq(s.calls, 1);
	cr_assert_eq(s.result, 3, "got %lld", (long long)s.result);
	close(p[0]);
	close(p[1]);
	tclose(loop);
}

/* ---------------------------------------------------- ENOMEM at setup */

/*
 * Under a low RLIMIT_MEMLOCK (64 KiB, as many containers still set),
 * kernels before 5.12 refuse the default ring with ENOMEM: AUTO must then
 * fall back to epoll and say why. Kernels since 5.12 charge rings to the
 * memory cgroup instead, where the limit changes nothing: the child finds
 * out first, and the test says so when it skips.
 */
enum {
	MEMLOCK_OK = 0,
	MEMLOCK_NOT_CHARGED = 77,
	MEMLOCK_SETRLIMIT = 1,
	MEMLOCK_AUTO_OPEN,
	MEMLOCK_AUTO_NOT_EPOLL,
	MEMLOCK_AUTO_REASON,
	MEMLOCK_READ,
	MEMLOCK_URING_SMALLER,
};

static int child_under_memlock(const char *path)
{
	struct rlimit rl = { 64 * 1024, 64 * 1024 };
	struct io_uring_params p;
	struct tseen s = { 0 };
	rl_req req = { .data = &s };
	struct rl_options opt;
	rl_loop *loop;
	char buf[64];
	long fd;

	unsetenv("RINGLOOP_BACKEND");
	if (setrlimit(RLIMIT_MEMLOCK, &rl) < 0)
		return MEMLOCK_SETRLIMIT;
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_CQSIZE;
	p.cq_entries = 16 * 256;
	fd = syscall(__NR_io_uring_setup, 256, &p);
	if (fd >= 0) {
		close((int)fd);
		return MEMLOCK_NOT_CHARGED;
	}
	rl_options_init(&opt);
	if (rl_loop_open(&loop, &opt) < 0)
		return MEMLOCK_AUTO_OPEN;
	if (strcmp(rl_loop_backend(loop), "epoll"))
		return MEMLOCK_AUTO_NOT_EPOLL;
	if (!strstr(rl_loop_backend_reason(loop), "ENOMEM") ||
	    !strstr(rl_loop_backend_reason(loop), "RLIMIT_MEMLOCK"))
		return MEMLOCK_AUTO_REASON;
	if (rl_fs_read_file(loop, &req, path, buf, sizeof(buf), 0, tseen_cb) ||
	    rl_run(loop, RL_RUN_DEFAULT) < 0 || s.result != 12)
		return MEMLOCK_READ;
	rl_loop_close(loop);
	/* Asking for io_uring by name: a smaller ring, or ENOMEM. */
	opt.backend = RL_BACKEND_URING;
	fd = rl_loop_open(&loop, &opt);
	if (fd == 0)
		rl_loop_close(loop);
	else if (fd != -ENOMEM)
		return MEMLOCK_URING_SMALLER;
	return MEMLOCK_OK;
}

Test(fallback, memlock_enomem_falls_back_to_epoll)
{
	const char *path = tfile("memlock", 12);
	int status;
	pid_t pid;

	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(child_under_memlock(path));
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status));
	if (WEXITSTATUS(status) == MEMLOCK_NOT_CHARGED)
		cr_skip_test(
			"io_uring_setup works under RLIMIT_MEMLOCK = 64 KiB "
			"here: this kernel (5.12 or later) charges rings "
			"to the memory cgroup, not to RLIMIT_MEMLOCK");
	cr_assert_eq(WEXITSTATUS(status), MEMLOCK_OK, "child failed at step %d",
		     WEXITSTATUS(status));
}

/* ----------------------------------------------------- the pool signal */

/*
 * rl_options.pool_signal: the interrupt of blocked workers is the signal
 * asked for (its handler installed, the default one left alone), or none
 * at all. Each case runs in a child, since signal dispositions are the
 * process's. With a signal, a blocked open (a FIFO for writing, no
 * reader) is cancelled at once; with none, it cannot be interrupted and
 * ends when a reader comes.
 */
enum {
	SIG_STEP_OK = 0,
	SIG_STEP_OPEN = 1,
	SIG_STEP_HANDLER,
	SIG_STEP_DEFAULT_TOUCHED,
	SIG_STEP_SUBMIT,
	SIG_STEP_EARLY,
	SIG_STEP_CANCEL,
	SIG_STEP_RESULT,
	SIG_STEP_READER,
	SIG_STEP_CLOSE,
	SIG_STEP_BAD_SIGNAL,
};

static bool handler_is_default(int signo)
{
	struct sigaction sa;

	return sigaction(signo, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL;
}

static int child_pool_signal(int option, const char *fifo)
{
	struct rl_options opt;
	struct tseen s = { 0 };
	rl_req req = { .data = &s };
	rl_loop *loop;
	int rd;

	rl_options_init(&opt);
	opt.backend = RL_BACKEND_EPOLL;
	opt.pool_signal = 9999;
	if (rl_loop_open(&loop, &opt) != -EINVAL)
		return SIG_STEP_BAD_SIGNAL;
	opt.pool_signal = option;
	if (rl_loop_open(&loop, &opt))
		return SIG_STEP_OPEN;
	if (option > 0 && handler_is_default(option))
		return SIG_STEP_HANDLER;
	if (!handler_is_default(SIGRTMIN + 6))
		return SIG_STEP_DEFAULT_TOUCHED;
	if (rl_fs_open(loop, &req, fifo, O_WRONLY | O_CLOEXEC, 0, tseen_cb))
		return SIG_STEP_SUBMIT;
	rl_run(loop, RL_RUN_NOWAIT);
	usleep(50 * 1000);
	rl_run(loop, RL_RUN_NOWAIT);
	if (s.calls)
		return SIG_STEP_EARLY;
	if (option > 0) {
		if (rl_cancel(loop, &req))
			return SIG_STEP_CANCEL;
		rl_run(loop, RL_RUN_DEFAULT);
		if (s.calls != 1 || s.result != -ECANCELED)
			return SIG_STEP_RESULT;
	} else {
		rd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (rd < 0)
			return SIG_STEP_READER;
		rl_run(loop, RL_RUN_DEFAULT);
		if (s.calls != 1 || s.result < 0)
			return SIG_STEP_RESULT;
		close((int)s.result);
		close(rd);
	}
	if (rl_loop_close(loop))
		return SIG_STEP_CLOSE;
	return SIG_STEP_OK;
}

Test(pool, signal_option)
{
	const int options[] = { SIGUSR2, SIGRTMIN + 3, -1 };

	for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
		char name[32];
		const char *fifo;
		int status;
		pid_t pid;

		snprintf(name, sizeof(name), "sigfifo%zu", i);
		fifo = tfifo(name);
		alarm(30);
		pid = fork();
		cr_assert_geq(pid, 0);
		if (pid == 0)
			_exit(child_pool_signal(options[i], fifo));
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		alarm(0);
		cr_assert(WIFEXITED(status), "signal %d: child died of %d",
			  options[i], WTERMSIG(status));
		cr_assert_eq(WEXITSTATUS(status), SIG_STEP_OK,
			     "signal %d: child failed at step %d", options[i],
			     WEXITSTATUS(status));
	}
}
