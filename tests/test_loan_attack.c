/* SPDX-License-Identifier: MIT */
/*
 * test_loan_attack.c - attacks on the read_file buffers the loop lends
 * (RL_READ_FILE_GROW | RL_READ_FILE_LOAN, buf NULL): callbacks that reuse,
 * resubmit or cancel, cancels racing completions, deadlines, files that
 * grow, shrink or never end, hints at and past the size classes' edges,
 * the loop out of memory and out of fds, spreading groups closed mid-burst
 * and the callback style's pooled read_file. Every test counts every
 * callback, checks every byte it was handed, and ends with no buffer out
 * (rl_fs_loans_out() == 0 while the loop is open; ASan and Valgrind check
 * the rest).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"
#include "ringloop/callback.h"

#define LOAN (RL_READ_FILE_GROW | RL_READ_FILE_LOAN)

#if defined(RL_SAN)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static bool valgrind(void)
{
	return getenv("RL_VALGRIND") != NULL;
}

/* One lent read and what its callback saw. */
struct lent {
	rl_req req;
	const char *name; /* tfile() name to check against, or NULL */
	size_t size;	  /* its size */
	int calls;
	int64_t result;
	size_t cap; /* req->len in the callback */
};

/* Checks what a lent read's callback sees while the buffer is lent. */
static void lent_check(struct lent *l, rl_req *req)
{
	l->calls++;
	l->result = req->result;
	l->cap = req->len;
	if (req->result < 0)
		return;
	cr_assert_not_null(req->buf);
	cr_assert_geq(req->len, (size_t)req->result);
	if (l->name) {
		cr_assert_eq(req->result, (int64_t)l->size, "%s: %lld of %zu",
			     l->name, (long long)req->result, l->size);
		tcheck(l->name, req->buf, l->size);
	}
}

static void lent_cb(rl_req *req)
{
	lent_check((struct lent *)req, req);
}

static int lend(rl_loop *loop, struct lent *l, const char *path, size_t hint,
		rl_req_cb cb)
{
	void *data = l->req.data;

	rl_req_init(&l->req);
	l->req.data = data;
	return rl_fs_read_file(loop, &l->req, path, NULL, hint, LOAN,
			       cb ? cb : lent_cb);
}

/* Runs loop until cond holds or ms pass; each pass waits at most for the
 * guard timer the caller started, so a lost request fails the test's
 * assertions instead of hanging it. */
#define RUN_UNTIL(loop, cond, ms)                                      \
	do {                                                           \
		uint64_t end_ = tnow_ms() + (ms);                      \
		while (!(cond) && tnow_ms() < end_)                    \
			cr_assert_geq(rl_run((loop), RL_RUN_ONCE), 0); \
	} while (0)

static void guard_cb(rl_timer *t, int status)
{
	(void)t;
	(void)status;
}

/* ------------------------------------------------ out of memory in push */

/*
 * A lent read that waited for a slot and cannot get its buffer when its
 * turn comes (malloc fails: RLIMIT_AS) ends with -ENOMEM, and the reads
 * queued behind it still run. push() completes such a read where it
 * stands, at the head of the queue push_queue() walks: before the fix,
 * rl__complete() put it on the ready queue through the same link word, and
 * push_queue()'s pop then took everything behind it off the queue for good
 * (their callbacks never ran, and the loop never went idle).
 *
 * On epoll (and on a ring without direct descriptors, where nothing waits
 * for a slot) the loan is taken at submission or at once: the submission
 * or the callback says -ENOMEM. Not under the sanitizers or Valgrind,
 * whose own mappings do not fit under a small RLIMIT_AS.
 */
BACKEND_TEST(loan_attack, loan_failing_in_the_queue_keeps_the_queue)
{
	enum { SMALL_FIRST = 2, BIG = 6, SMALL_AFTER = 6 };
	enum { N = SMALL_FIRST + BIG + SMALL_AFTER };
	/* Far more than the address space left below, far less than
	 * RL__MAX_IO, so only the limit refuses it. */
	const size_t big_hint = (size_t)1 << 30;
	struct lent l[N];
	int refused[N];
	struct rl_options opt;
	struct rlimit old, lim;
	rl_timer guard;
	char line[256], *small;
	size_t vm_kb = 0;
	rl_loop *loop;
	FILE *f;

	if (SANITIZED || valgrind())
		cr_skip_test("RLIMIT_AS and the tool's own mappings");
	alarm(60);
	memset(l, 0, sizeof(l));
	rl_options_init(&opt);
	opt.direct_slots = SMALL_FIRST;
	loop = tloop_opts(tp, &opt);
	small = strdup(tfile("small", 12));
	rl_timer_init(&guard);
	cr_assert_eq(rl_timer_start(loop, &guard, 5, 5, guard_cb), 0);
	f = fopen("/proc/self/status", "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %zu kB", &vm_kb) == 1)
			break;
	fclose(f);
	cr_assert_gt(vm_kb, 0);
	cr_assert_eq(getrlimit(RLIMIT_AS, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)vm_kb * 1024 + (rlim_t)(256u << 20);
	cr_assert_eq(setrlimit(RLIMIT_AS, &lim), 0);
	for (int i = 0; i < N; i++) {
		bool big = i >= SMALL_FIRST && i < SMALL_FIRST + BIG;

		if (!big) {
			l[i].name = "small";
			l[i].size = 12;
		}
		refused[i] =
			lend(loop, &l[i], small, big ? big_hint : 16, NULL);
	}
	RUN_UNTIL(loop, ({
			  bool all = true;
			  for (int i = 0; i < N; i++)
				  if (!refused[i] && l[i].calls == 0)
					  all = false;
			  all;
		  }),
		  5000);
	cr_assert_eq(setrlimit(RLIMIT_AS, &old), 0);
	for (int i = 0; i < N; i++) {
		bool big = i >= SMALL_FIRST && i < SMALL_FIRST + BIG;

		if (refused[i]) {
			cr_assert(big && refused[i] == -ENOMEM,
				  "read %d refused: %d", i, refused[i]);
			cr_assert_eq(l[i].calls, 0);
			continue;
		}
		cr_assert_eq(l[i].calls, 1, "read %d (%s): %d calls", i,
			     big ? "big" : "small", l[i].calls);
		cr_assert_eq(l[i].result, big ? -ENOMEM : 12, "read %d: %lld",
			     i, (long long)l[i].result);
	}
	cr_assert_eq(rl_timer_stop(loop, &guard), 0);
	trun(loop);
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	tclose(loop);
	free(small);
	alarm(0);
}

/* ------------------------------------------- hints and read_file_max */

/*
 * rl_options.read_file_max bounds a lent buffer as it bounds a grown one
 * (reliability::read_file_max_is_the_cap): a file of exactly the cap is
 * read, one byte more is -EFBIG, and the buffer the callback sees is never
 * larger than the cap, whatever the hint and whatever size class the loan
 * rounds it up to. Caps below the smallest class (256 bytes), between two
 * classes and at one.
 */
BACKEND_TEST(loan_attack, read_file_max_bounds_the_lent_buffer)
{
	static const size_t maxes[] = { 100, 300, 4096, 5000 };
	struct rl_options opt;
	char name[32];

	alarm(60);
	for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++) {
		const size_t max = maxes[m];
		const size_t hints[] = {
			0, 1, 16, max - 1, max, max + 1, (size_t)1 << 20
		};
		enum { H = sizeof(hints) / sizeof(hints[0]) };
		struct lent l[2 * H];
		char *fit, *over;
		rl_loop *loop;

		memset(l, 0, sizeof(l));
		rl_options_init(&opt);
		opt.read_file_max = max;
		loop = tloop_opts(tp, &opt);
		snprintf(name, sizeof(name), "fit%zu", max);
		fit = strdup(tfile(name, max));
		char *fit_name = strdup(name);
		snprintf(name, sizeof(name), "over%zu", max);
		over = strdup(tfile(name, max + 1));
		/* Twice: the second round gets kept buffers. */
		for (int round = 0; round < 2; round++) {
			for (int i = 0; i < H; i++) {
				l[2 * i].name = fit_name;
				l[2 * i].size = max;
				l[2 * i].calls = 0;
				cr_assert_eq(lend(loop, &l[2 * i], fit,
						  hints[i], NULL),
					     0);
				l[2 * i + 1].calls = 0;
				cr_assert_eq(lend(loop, &l[2 * i + 1], over,
						  hints[i], NULL),
					     0);
			}
			trun(loop);
			for (int i = 0; i < 2 * H; i++) {
				cr_assert_eq(l[i].calls, 1);
				cr_assert_eq(l[i].result,
					     i % 2 ? -EFBIG : (int64_t)max,
					     "max %zu, hint %zu, %s: %lld", max,
					     hints[i / 2],
					     i % 2 ? "over" : "fit",
					     (long long)l[i].result);
				cr_assert_leq(l[i].cap, max,
					      "max %zu, hint %zu: a buffer of "
					      "%zu bytes",
					      max, hints[i / 2], l[i].cap);
			}
			cr_assert_eq(rl_fs_loans_out(loop), 0);
		}
		tclose(loop);
		free(fit);
		free(over);
		free(fit_name);
	}
	alarm(0);
}
