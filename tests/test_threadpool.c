/* SPDX-License-Identifier: MIT */
/*
 * test_threadpool.c - how the epoll backend's pool hands jobs to its
 * workers and completions back to the loop: a batch handed to sleeping
 * workers runs on all of them at once (each idle worker is woken,
 * threadpool.c), and a flood of completions racing the loop's sleeps and
 * the workers' loses none. The pool's other
 * contracts (saturation, batched wake-ups of the loop, cancellation, the
 * interrupt, close with jobs in flight) are in test_fallback.c.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "helpers.h"

static rl_loop *pool_loop(unsigned threads)
{
	const struct tp tp = { RL_BACKEND_EPOLL, RL_NO_INLINE, "epoll-pool" };
	struct rl_options opt;

	rl_options_init(&opt);
	opt.pool_threads = threads;
	return tloop_opts(&tp, &opt);
}

/* Whether thread tid of this process is a pool worker inside syscall nr
 * (/proc says so for a thread blocked in it). */
static bool worker_in_syscall(const char *tid, long nr)
{
	char path[300], line[128];
	bool in = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%s/comm", tid);
	f = fopen(path, "r");
	if (!f)
		return false; /* it has just exited */
	in = fgets(line, sizeof(line), f) && !strcmp(line, "rl-worker\n");
	fclose(f);
	if (!in)
		return false;
	snprintf(path, sizeof(path), "/proc/self/task/%s/syscall", tid);
	f = fopen(path, "r");
	if (!f)
		return false;
	in = fgets(line, sizeof(line), f) && strtol(line, NULL, 10) == nr;
	fclose(f);
	return in;
}

/* How many pool workers are blocked in syscall nr right now. */
static unsigned workers_in_syscall(long nr)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	unsigned n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' && worker_in_syscall(e->d_name, nr))
			n++;
	closedir(d);
	return n;
}

/*
 * W stats whose struct statx is stalled memory (tstall in helpers.h) on a
 * pool of W sleeping workers: each blocks its worker until the stall is
 * released, so they can only all be inside statx() at once if every one
 * of the W workers was woken. A wake-up that reached fewer workers than
 * jobs would leave jobs queued behind blocked workers for good (the
 * alarm ends the test then).
 */
Test(pool, a_batch_wakes_every_idle_worker)
{
	enum { W = 8 };
	const char *path = tfile("batch", 30);
	struct tseen s = { 0 };
	rl_req reqs[W];
	struct tstall stall;
	rl_loop *loop;

	if (!tstall_open(&stall, sizeof(struct statx)))
		cr_skip_test("no userfaultfd here to stall a worker");
	loop = pool_loop(W);
	alarm(30);
	/* Let every worker reach its sleep first: the batch must be
	 * handed to sleepers, not to workers still starting. */
	while (workers_in_syscall(SYS_futex) < W)
		usleep(1000);
	for (int i = 0; i < W; i++) {
		reqs[i] = (rl_req){ .data = &s };
		cr_assert_eq(
			rl_fs_stat(loop, &reqs[i], path, stall.mem, tseen_cb),
			0);
	}
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0); /* one batch */
	while (workers_in_syscall(SYS_statx) < W)
		usleep(1000);
	cr_assert_eq(s.calls, 0);
	tstall_release(&stall);
	trun(loop);
	alarm(0);
	cr_assert_eq(s.calls, W);
	for (int i = 0; i < W; i++)
		cr_assert_eq(reqs[i].result, 0);
	cr_assert_eq(((struct statx *)stall.mem)->stx_size, 30);
	tclose(loop);
	tstall_close(&stall);
}

/*
 * Chains of reads, each started by the previous one's callback, as the
 * randread bench does: depth chains on a pool of threads workers, total
 * reads in all, with the loop going to sleep whenever nothing has
 * finished. Completions race the loop's sleeps all the time (held back
 * while jobs are queued when depth > threads, announced at once when not),
 * and a lost one would leave the loop asleep for good (the alarm).
 */
struct flood {
	rl_loop *loop;
	const char *path;
	unsigned left; /* reads not started yet */
	unsigned calls;
};

struct flood_req {
	rl_req req; /* first: the callback gets it */
	struct flood *f;
	char buf[16];
};

static void flood_start(struct flood_req *fr);

static void flood_done(rl_req *req)
{
	struct flood_req *fr = (struct flood_req *)req;

	fr->f->calls++;
	cr_assert_eq(req->result, 12);
	tcheck("flood", fr->buf, 12);
	if (fr->f->left)
		flood_start(fr);
}

static void flood_start(struct flood_req *fr)
{
	fr->f->left--;
	memset(fr->buf, 0, sizeof(fr->buf));
	fr->req = (rl_req){ 0 };
	cr_assert_eq(rl_fs_read_file(fr->f->loop, &fr->req, fr->f->path,
				     fr->buf, sizeof(fr->buf), 0, flood_done),
		     0);
}

static void flood(unsigned threads, unsigned depth, unsigned total)
{
	struct flood f = { .path = tfile("flood", 12), .left = total };
	struct flood_req *frs = calloc(depth, sizeof(*frs));
	struct rl_stats st;

	cr_assert_not_null(frs);
	f.loop = pool_loop(threads);
	alarm(120);
	for (unsigned i = 0; i < depth && f.left; i++) {
		frs[i].f = &f;
		flood_start(&frs[i]);
	}
	trun(f.loop);
	alarm(0);
	cr_assert_eq(f.left, 0);
	cr_assert_eq(f.calls, total);
	rl_loop_stats(f.loop, &st);
	cr_assert_eq(st.pool_jobs, total);
	tclose(f.loop);
	free(frs);
}

static unsigned flood_total(void)
{
	return getenv("RL_VALGRIND") ? 2000 : 20000;
}

/* Fewer chains than workers: nothing ever queued, every completion may
 * have to wake the loop. */
Test(pool, flood_of_completions_shallow)
{
	flood(4, 3, flood_total());
}

/* As many chains as workers, the randread bench's shape: each new job
 * goes to a worker that has gone to sleep or is about to. */
Test(pool, flood_of_completions_one_per_worker)
{
	flood(8, 8, flood_total());
}

/* Many more chains than workers: jobs queued all the time, completions
 * held back (threadpool.h), workers that finish taking the next job
 * without sleeping. */
Test(pool, flood_of_completions_deep)
{
	flood(4, 64, flood_total());
}
