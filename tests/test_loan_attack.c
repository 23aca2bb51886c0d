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
#include <signal.h>
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

/*
 * Under Valgrind each process of a test is a start-up of the tool, which
 * costs more than most of these tests: a test that skips itself there on
 * every configuration runs once (and skips), and one that skips itself on
 * io_uring (helpers.h: tskip_uring_threads_under_valgrind(), tgroup())
 * runs on the epoll configurations only.
 */
static struct criterion_test_params tp_once_under_valgrind(void)
{
	struct criterion_test_params p = tp_backends();

	if (valgrind() && p.length > 1)
		p.length = 1;
	return p;
}

static struct criterion_test_params tp_epoll_under_valgrind(void)
{
	struct criterion_test_params p = tp_backends();
	const struct tp *first = p.params;

	if (valgrind() && p.length > 1 && first->backend == RL_BACKEND_URING) {
		p.params = (char *)p.params + p.size;
		p.length--;
	}
	return p;
}

/* Tests of the loan's bookkeeping, whose backends differ only in where
 * the buffer is taken: under Valgrind, uring and epoll (the pool
 * configuration adds nothing there but another start-up). */
static struct criterion_test_params tp_two_under_valgrind(void)
{
	struct criterion_test_params p = tp_backends();

	if (valgrind() && p.length > 2)
		p.length = 2;
	return p;
}

#define LOAN_TEST(params, name)                        \
	ParameterizedTestParameters(loan_attack, name) \
	{                                              \
		return params();                       \
	}                                              \
	ParameterizedTest(const struct tp *tp, loan_attack, name)

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
LOAN_TEST(tp_once_under_valgrind, loan_failing_in_the_queue_keeps_the_queue)
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
LOAN_TEST(tp_two_under_valgrind, read_file_max_bounds_the_lent_buffer)
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

/*
 * Hints at the edges of the size classes and of the files: every size
 * from 0 to 1 MiB + 1 read with every hint, twice (the second time from
 * kept buffers), and hints past what a request may ask refused at once.
 */
LOAN_TEST(tp_two_under_valgrind, class_edges_and_absurd_hints)
{
	static const size_t sizes[] = {
		0, 1, 255, 256, 257, (1 << 20) - 1, (1 << 20), (1 << 20) + 1
	};
	static const size_t hints[] = {
		0, 1, 255, 256, 257, (1 << 20) - 1, (1 << 20), (1 << 20) + 1
	};
	enum { S = sizeof(sizes) / sizeof(sizes[0]) };
	enum { H = sizeof(hints) / sizeof(hints[0]) };
	static const size_t absurd[] = { (size_t)INT_MAX + 1, SIZE_MAX,
					 SIZE_MAX / 2, SIZE_MAX - 4095 };
	struct lent *l = calloc(S * H, sizeof(*l));
	char *paths[S], *names[S];
	rl_loop *loop = tloop(tp);

	alarm(60);
	for (int s = 0; s < S; s++) {
		char name[32];

		snprintf(name, sizeof(name), "s%zu", sizes[s]);
		names[s] = strdup(name);
		paths[s] = strdup(tfile(name, sizes[s]));
	}
	for (size_t a = 0; a < sizeof(absurd) / sizeof(absurd[0]); a++)
		cr_assert_eq(lend(loop, &l[0], paths[0], absurd[a], NULL),
			     -EINVAL, "hint %zu", absurd[a]);
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	for (int round = 0; round < (valgrind() ? 1 : 2); round++) {
		for (int s = 0; s < S; s++)
			for (int h = 0; h < H; h++) {
				struct lent *x = &l[s * H + h];

				/* Under Valgrind the sizes are checked, and
				 * the bytes of the small files only. */
				x->name = valgrind() && sizes[s] > 4096
						  ? NULL
						  : names[s];
				x->size = sizes[s];
				x->calls = 0;
				cr_assert_eq(
					lend(loop, x, paths[s], hints[h], NULL),
					0);
			}
		trun(loop);
		for (int i = 0; i < S * H; i++) {
			cr_assert_eq(l[i].calls, 1, "size %zu hint %zu: %d",
				     sizes[i / H], hints[i % H], l[i].calls);
			cr_assert_eq(l[i].result, (int64_t)sizes[i / H]);
			/* At least the hint, in the smallest class. */
			cr_assert_geq(l[i].cap, hints[i % H]);
			cr_assert_geq(l[i].cap, 256);
		}
		cr_assert_eq(rl_fs_loans_out(loop), 0);
		cr_assert_leq(rl_fs_loans_kept(loop), (size_t)64 << 20);
	}
	tclose(loop);
	for (int s = 0; s < S; s++) {
		free(paths[s]);
		free(names[s]);
	}
	free(l);
	alarm(0);
}

/* /dev/zero up to caps at the 1 MiB edge: -EFBIG with a buffer of exactly
 * the cap, which comes back (kept when it is at most 1 MiB). */
LOAN_TEST(tp_two_under_valgrind, dev_zero_up_to_the_cap)
{
	static const size_t maxes[] = { (1 << 20) - 1, 1 << 20, (1 << 20) + 1 };
	struct rl_options opt;

	alarm(60);
	for (size_t m = 0; m < 3; m++) {
		struct lent l[3];
		rl_loop *loop;

		memset(l, 0, sizeof(l));
		rl_options_init(&opt);
		opt.read_file_max = maxes[m];
		loop = tloop_opts(tp, &opt);
		for (int round = 0; round < 2; round++) {
			for (int i = 0; i < 3; i++) {
				l[i].calls = 0;
				cr_assert_eq(lend(loop, &l[i], "/dev/zero",
						  i * 1000, NULL),
					     0);
			}
			trun(loop);
			for (int i = 0; i < 3; i++) {
				cr_assert_eq(l[i].calls, 1);
				cr_assert_eq(l[i].result, -EFBIG);
				cr_assert_eq(l[i].cap, maxes[m], "cap %zu",
					     l[i].cap);
			}
			cr_assert_eq(rl_fs_loans_out(loop), 0);
			cr_assert_leq(rl_fs_loans_kept(loop),
				      maxes[m] <= (1 << 20) ? 3 * maxes[m]
							    : 3 << 20);
		}
		tclose(loop);
	}
	alarm(0);
}

/* ------------------------------------------------- hostile callbacks */

/*
 * Each callback of a chain, its buffer still lent: rl_run() and
 * rl_loop_close() are refused (-EBUSY), then the request is reused for
 * the next step, in turn a lent read of another size class, a stat, a
 * read_file into a buffer the loop grows for the caller, a lent read of
 * /dev/zero that ends in -EFBIG, a cancelled lent read; and every fourth
 * callback starts a lent read on a request of its own as well.
 */
struct reuse {
	struct lent l;
	rl_loop *loop;
	const char *small, *big;
	struct statx stx;
	int step, left;
	int stats, owned, efbig, cancelled, reads;
	struct lent extra[64];
	int nextra;
};

static void reuse_cb(rl_req *req);

static void reuse_next(struct reuse *r)
{
	rl_req *req = &r->l.req;
	int kind = r->step++ % 5, ret;

	r->l.name = NULL;
	switch (kind) {
	case 0:
		r->l.name = (r->step / 5) % 2 ? "big" : "small";
		r->l.size = (r->step / 5) % 2 ? 100000 : 12;
		ret = lend(r->loop, &r->l,
			   (r->step / 5) % 2 ? r->big : r->small,
			   (size_t)r->step * 37, reuse_cb);
		break;
	case 1:
		rl_req_init(req);
		ret = rl_fs_stat(r->loop, req, r->small, &r->stx, reuse_cb);
		break;
	case 2:
		rl_req_init(req);
		ret = rl_fs_read_file(r->loop, req, r->big, NULL, 16,
				      RL_READ_FILE_GROW, reuse_cb);
		break;
	case 3:
		ret = lend(r->loop, &r->l, "/dev/zero", 0, reuse_cb);
		break;
	default:
		ret = lend(r->loop, &r->l, r->small, 0, reuse_cb);
		if (ret == 0)
			cr_assert_eq(rl_cancel(r->loop, req), 0);
		break;
	}
	cr_assert_eq(ret, 0, "step %d: %d", r->step, ret);
	req->data = r;
}

static void reuse_cb(rl_req *req)
{
	struct reuse *r = req->data;
	int kind = (r->step - 1) % 5;

	cr_assert_eq(rl_run(r->loop, RL_RUN_NOWAIT), -EBUSY);
	cr_assert_eq(rl_run(r->loop, RL_RUN_DEFAULT), -EBUSY);
	cr_assert_eq(rl_loop_close(r->loop), -EBUSY);
	switch (kind) {
	case 0:
		lent_check(&r->l, req);
		cr_assert_geq(req->result, 0);
		r->reads++;
		break;
	case 1:
		cr_assert_eq(req->result, 0);
		cr_assert_eq(r->stx.stx_size, 12);
		r->stats++;
		break;
	case 2:
		cr_assert_eq(req->result, 100000);
		tcheck("big", req->buf, 100000);
		/* Not lent: the caller's to free. */
		free(req->buf);
		r->owned++;
		break;
	case 3:
		cr_assert_eq(req->result, -EFBIG);
		r->efbig++;
		break;
	default:
		cr_assert(req->result == -ECANCELED || req->result == 12,
			  "%lld", (long long)req->result);
		if (req->result == 12)
			tcheck("small", req->buf, 12);
		r->cancelled++;
		break;
	}
	if (r->step % 4 == 0 && r->nextra < 64) {
		struct lent *x = &r->extra[r->nextra++];

		x->name = "big";
		x->size = 100000;
		cr_assert_eq(lend(r->loop, x, r->big, 1, NULL), 0);
	}
	if (--r->left > 0)
		reuse_next(r);
}

BACKEND_TEST(loan_attack, callbacks_reuse_their_request_every_way)
{
	struct reuse *r = calloc(1, sizeof(*r));
	struct rl_options opt;

	alarm(60);
	rl_options_init(&opt);
	opt.read_file_max = 256 << 10;
	r->loop = tloop_opts(tp, &opt);
	r->small = strdup(tfile("small", 12));
	r->big = strdup(tfile("big", 100000));
	r->left = valgrind() ? 100 : 250;
	int steps = r->left;
	reuse_next(r);
	trun(r->loop);
	cr_assert_eq(r->left, 0);
	cr_assert_eq(r->reads, steps / 5);
	cr_assert_eq(r->stats, steps / 5);
	cr_assert_eq(r->owned, steps / 5);
	cr_assert_eq(r->efbig, steps / 5);
	cr_assert_eq(r->cancelled, steps / 5);
	cr_assert_eq(r->nextra, steps / 4);
	for (int i = 0; i < r->nextra; i++)
		cr_assert_eq(r->extra[i].calls, 1);
	cr_assert_eq(rl_fs_loans_out(r->loop), 0);
	tclose(r->loop);
	free((void *)r->small);
	free((void *)r->big);
	free(r);
	alarm(0);
}

/*
 * rl_stop() from the first callback of a burst, then a wait so that the
 * rest completes in the kernel or the pool, then rl_loop_close() without
 * running the loop again: every callback runs once (from the close), with
 * its data or -ECANCELED, and no buffer is left (ASan, Valgrind).
 */
struct stopper {
	struct lent l;
	rl_loop *loop;
	int *stops;
};

static void stop_cb(rl_req *req)
{
	struct stopper *s = (struct stopper *)req;

	lent_check(&s->l, req);
	if ((*s->stops)++ == 0)
		rl_stop(s->loop);
}

BACKEND_TEST(loan_attack, stopped_with_lent_reads_done_then_closed)
{
	enum { N = 300 };
	struct stopper *s = calloc(N, sizeof(*s));
	struct rl_options opt;
	int stops = 0, done = 0, n = valgrind() ? 100 : N;
	char *small, *big;
	rl_loop *loop;

	alarm(60);
	rl_options_init(&opt);
	opt.direct_slots = 16;
	loop = tloop_opts(tp, &opt);
	small = strdup(tfile("small", 12));
	big = strdup(tfile("big", 70000));
	for (int i = 0; i < n; i++) {
		s[i].loop = loop;
		s[i].stops = &stops;
		s[i].l.name = i % 3 ? "small" : "big";
		s[i].l.size = i % 3 ? 12 : 70000;
		cr_assert_eq(
			lend(loop, &s[i].l, i % 3 ? small : big, 16, stop_cb),
			0);
	}
	cr_assert_geq(rl_run(loop, RL_RUN_DEFAULT), 0);
	cr_assert_geq(stops, 1);
	usleep(20000);
	tclose(loop);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(s[i].l.calls, 1, "read %d: %d calls", i,
			     s[i].l.calls);
		cr_assert(s[i].l.result >= 0 || s[i].l.result == -ECANCELED,
			  "read %d: %lld", i, (long long)s[i].l.result);
		done += s[i].l.result >= 0;
	}
	cr_assert_geq(done, 1);
	free(s);
	free(small);
	free(big);
	alarm(0);
}

/* ----------------------------------------------- cancels and deadlines */

/*
 * Each callback of a burst cancels the next three reads of the burst,
 * whatever they are doing: waiting for a slot, in the kernel or the pool,
 * done but not called back (-ENOENT), cancelled already (-EALREADY).
 * Every read calls back once, with its whole file or -ECANCELED. Many
 * rounds on one loop, so kept buffers go round.
 */
struct storm {
	struct lent l;
	struct storm *all;
	int i, n;
	int *refusals;
};

static void storm_cb(rl_req *req)
{
	struct storm *s = (struct storm *)req;

	lent_check(&s->l, req);
	cr_assert(req->result >= 0 || req->result == -ECANCELED, "%lld",
		  (long long)req->result);
	for (int k = 1; k <= 3 && s->i + k < s->n; k++) {
		int ret = rl_cancel(req->loop, &s->all[s->i + k].l.req);

		cr_assert(ret == 0 || ret == -ENOENT || ret == -EALREADY, "%d",
			  ret);
		if (ret)
			(*s->refusals)++;
	}
}

BACKEND_TEST(loan_attack, cancels_from_the_burst_own_callbacks)
{
	enum { N = 200, ROUNDS = 8 };
	struct storm *s = calloc(N, sizeof(*s));
	struct rl_options opt;
	int refusals = 0, cancelled = 0, rounds = valgrind() ? 3 : ROUNDS;
	char *small, *mid;
	rl_loop *loop;

	alarm(60);
	rl_options_init(&opt);
	opt.direct_slots = 8;
	loop = tloop_opts(tp, &opt);
	small = strdup(tfile("small", 12));
	mid = strdup(tfile("mid", 5000));
	for (int round = 0; round < rounds; round++) {
		for (int i = 0; i < N; i++) {
			s[i] = (struct storm){
				.all = s, .i = i, .n = N, .refusals = &refusals
			};
			s[i].l.name = i % 2 ? "mid" : "small";
			s[i].l.size = i % 2 ? 5000 : 12;
			cr_assert_eq(lend(loop, &s[i].l, i % 2 ? mid : small,
					  (size_t)round * 300, storm_cb),
				     0);
		}
		/* And some cancelled before the loop runs at all. */
		for (int i = round; i < N; i += 17)
			cr_assert_eq(rl_cancel(loop, &s[i].l.req), 0);
		trun(loop);
		for (int i = 0; i < N; i++) {
			cr_assert_eq(s[i].l.calls, 1, "round %d read %d: %d",
				     round, i, s[i].l.calls);
			cancelled += s[i].l.result == -ECANCELED;
		}
		cr_assert_eq(rl_fs_loans_out(loop), 0);
	}
	cr_assert_gt(cancelled, 0);
	tclose(loop);
	free(s);
	free(small);
	free(mid);
	alarm(0);
}

/*
 * Deadlines on lent reads: reads of a FIFO nobody writes to (they wait
 * for ever, holding a buffer on epoll and a slot on io_uring) end with
 * -ETIMEDOUT; reads of a regular file whose deadline is due at once or
 * almost end with their data or -ETIMEDOUT. Many rounds. On io_uring the deadlines
 * fire before the reads' chains were ever submitted: the cancels then
 * went to the kernel in the same enter, behind the chains, and found
 * nothing of a FIFO's read, which the open's completion had left in task
 * work, and that read waited for ever (uring_fs.c now submits the chain,
 * and its task work, before the cancel).
 */
struct timed {
	struct lent l;
	rl_timer timer;
	bool fifo;
};

static void timed_cb(rl_req *req)
{
	struct timed *t = (struct timed *)req;

	lent_check(&t->l, req);
	if (t->fifo)
		cr_assert_eq(req->result, -ETIMEDOUT, "fifo: %lld",
			     (long long)req->result);
	else
		cr_assert(req->result == 12 || req->result == -ETIMEDOUT,
			  "%lld", (long long)req->result);
}

BACKEND_TEST(loan_attack, deadlines_fire_on_lent_reads)
{
	enum { N = 24 };
	int rounds = valgrind() ? 4 : 12;
	struct timed *t = calloc(N, sizeof(*t));
	struct rl_options opt;
	char *small, *fifo;
	rl_loop *loop;
	rl_timer guard;
	int timed_out = 0;

	alarm(60);
	rl_options_init(&opt);
	opt.direct_slots = 8;
	loop = tloop_opts(tp, &opt);
	small = strdup(tfile("small", 12));
	fifo = strdup(tpath("fifo"));
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	/* A read that never ends fails the test instead of hanging it. */
	rl_timer_init(&guard);
	cr_assert_eq(rl_timer_start(loop, &guard, 10, 10, guard_cb), 0);
	for (int round = 0; round < rounds; round++) {
		for (int i = 0; i < N; i++) {
			memset(&t[i], 0, sizeof(t[i]));
			t[i].fifo = i % 4 == 0;
			if (!t[i].fifo) {
				t[i].l.name = "small";
				t[i].l.size = 12;
			}
			cr_assert_eq(lend(loop, &t[i].l,
					  t[i].fifo ? fifo : small, 64,
					  timed_cb),
				     0);
			cr_assert_eq(
				rl_req_deadline(loop, &t[i].l.req, &t[i].timer,
						t[i].fifo ? 2 + i % 3 : i % 2),
				0);
		}
		/* The deadlines count from the loop's now, taken when it
		 * last ran: after this pause they are all due at the first
		 * timers of the run, before the chains' SQEs have gone to
		 * the kernel, and the cancels go in the same enter. */
		usleep(5000);
		RUN_UNTIL(loop, ({
				  int c = 0;
				  for (int i = 0; i < N; i++)
					  c += t[i].l.calls;
				  c == N;
			  }),
			  20000);
		for (int i = 0; i < N; i++)
			cr_assert_eq(t[i].l.calls, 1,
				     "%s round %d read %d (%s): %d calls",
				     tp_name(tp), round, i,
				     t[i].fifo ? "fifo" : "file", t[i].l.calls);
		for (int i = 0; i < N; i++) {
			cr_assert_eq(t[i].l.calls, 1, "round %d read %d: %d",
				     round, i, t[i].l.calls);
			timed_out += t[i].l.result == -ETIMEDOUT;
		}
		cr_assert_eq(rl_fs_loans_out(loop), 0);
	}
	cr_assert_geq(timed_out, rounds * N / 4);
	cr_assert_eq(rl_timer_stop(loop, &guard), 0);
	tclose(loop);
	free(t);
	free(small);
	free(fifo);
	alarm(0);
}

/* --------------------------------------------- files that move under it */

/*
 * A thread replaces a file (rename) by a version of 5,000 bytes, then
 * appends to it up to 300,000, over and over, while bursts of lent reads
 * asking for 16 bytes read it: each read gets a prefix of the pattern of
 * 5,000 to 300,000 bytes (the file grew between its size and its reads,
 * or was replaced by a smaller one), in a buffer grown, or not, from a
 * kept one. The loop never waits for the thread. (Not ftruncate() of the
 * same file: a read racing a truncation may copy the zeroes the kernel
 * writes past the new end, which no loop can tell from data.)
 */
struct churn {
	const char *path, *tmp;
	atomic_bool stop;
	int passes;
};

static void *churn_main(void *arg)
{
	struct churn *c = arg;
	unsigned char *data = malloc(300000);

	if (!data)
		abort();
	for (size_t i = 0; i < 300000; i++)
		data[i] = tbyte("churn", i);
	while (!atomic_load(&c->stop)) {
		int fd = open(c->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
			      0644);

		if (fd < 0 || write(fd, data, 5000) != 5000 ||
		    rename(c->tmp, c->path) != 0)
			abort();
		for (size_t off = 5000; off < 300000; off += 7000) {
			size_t n = 300000 - off < 7000 ? 300000 - off : 7000;

			if (write(fd, data + off, n) != (ssize_t)n)
				abort();
		}
		close(fd);
		c->passes++;
	}
	free(data);
	return NULL;
}

static void churn_cb(rl_req *req)
{
	struct lent *l = (struct lent *)req;

	lent_check(l, req);
	cr_assert_geq(req->result, 5000);
	cr_assert_leq(req->result, 300000);
	tcheck("churn", req->buf, (size_t)req->result);
}

BACKEND_TEST(loan_attack, file_shrinking_and_growing_under_the_reads)
{
	enum { N = 32 };
	int rounds = valgrind() ? 3 : 40;
	struct lent l[N];
	struct churn c = { 0 };
	pthread_t th;
	rl_loop *loop = tloop(tp);
	char *path;

	alarm(60);
	path = strdup(tfile("churn", 300000));
	c.path = path;
	c.tmp = strdup(tpath("churn.tmp"));
	atomic_init(&c.stop, false);
	cr_assert_eq(pthread_create(&th, NULL, churn_main, &c), 0);
	for (int round = 0; round < rounds; round++) {
		memset(l, 0, sizeof(l));
		for (int i = 0; i < N; i++)
			cr_assert_eq(lend(loop, &l[i], path, 16, churn_cb), 0);
		trun(loop);
		for (int i = 0; i < N; i++)
			cr_assert_eq(l[i].calls, 1);
		cr_assert_eq(rl_fs_loans_out(loop), 0);
	}
	atomic_store(&c.stop, true);
	pthread_join(th, NULL);
	tclose(loop);
	free(path);
	free((void *)c.tmp);
	alarm(0);
}

/* procfs files that say size 0 and hand out a record at a time, several
 * at once, from hints of 1 byte: each grows its buffer from the smallest
 * class, and the buffers come back. */
static void proc_cb(rl_req *req)
{
	struct lent *l = (struct lent *)req;

	lent_check(l, req);
	cr_assert_gt(req->result, 0);
	/* Text to its end: no NUL inside what was read. */
	cr_assert_null(memchr(req->buf, 0, (size_t)req->result));
}

LOAN_TEST(tp_two_under_valgrind, procfs_bursts_from_one_byte_hints)
{
	static const char *const files[] = { "/proc/self/maps",
					     "/proc/self/status",
					     "/proc/self/smaps",
					     "/proc/self/mountinfo" };
	enum { N = 40 };
	struct lent l[N];
	rl_loop *loop = tloop(tp);

	alarm(60);
	for (int round = 0; round < (valgrind() ? 1 : 3); round++) {
		memset(l, 0, sizeof(l));
		for (int i = 0; i < N; i++)
			cr_assert_eq(
				lend(loop, &l[i], files[i % 4], 1, proc_cb), 0);
		trun(loop);
		for (int i = 0; i < N; i++)
			cr_assert_eq(l[i].calls, 1);
		cr_assert_eq(rl_fs_loans_out(loop), 0);
	}
	tclose(loop);
	alarm(0);
}

/* ---------------------------------------------------------------- FIFOs */

/*
 * FIFOs whose writer is a thread: one that opens and goes without a byte
 * (0 bytes), one that writes 600 bytes a byte at a time with pauses (the
 * buffer grows from 256 bytes while the bytes trickle in), and one that
 * floods past read_file_max (-EFBIG: the reader goes, the writer sees
 * EPIPE). The loop waits for the writers: not on io_uring under
 * Valgrind.
 */
struct fifo_job {
	const char *path;
	int mode; /* 0: nothing, 1: a byte at a time, 2: flood */
};

static void *fifo_writer(void *arg)
{
	struct fifo_job *j = arg;
	static const char chunk[4096];
	int fd = open(j->path, O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	if (j->mode == 1) {
		for (int i = 0; i < 600; i++) {
			unsigned char b = (unsigned char)(i * 13 + 1);

			if (write(fd, &b, 1) != 1)
				abort();
			if (i % 50 == 0)
				usleep(2000);
		}
	} else if (j->mode == 2) {
		for (int i = 0; i < 64; i++)
			if (write(fd, chunk, sizeof(chunk)) <= 0)
				break; /* the reader gave up: EPIPE */
	}
	close(fd);
	return NULL;
}

struct fifo_read {
	struct lent l;
	int mode;
};

static void fifo_cb(rl_req *req)
{
	struct fifo_read *f = (struct fifo_read *)req;
	const unsigned char *p = req->buf;

	lent_check(&f->l, req);
	switch (f->mode) {
	case 0:
		cr_assert_eq(req->result, 0);
		break;
	case 1:
		cr_assert_eq(req->result, 600);
		for (int i = 0; i < 600; i++)
			cr_assert_eq(p[i], (unsigned char)(i * 13 + 1),
				     "byte %d", i);
		break;
	default:
		cr_assert_eq(req->result, -EFBIG);
		cr_assert_leq(req->len, 64 << 10);
	}
}

LOAN_TEST(tp_epoll_under_valgrind, fifo_writers_gone_slow_and_flooding)
{
	struct fifo_job jobs[3];
	struct fifo_read f[3];
	struct rl_options opt;
	pthread_t th[3];
	char *paths[3];
	rl_loop *loop;

	tskip_uring_threads_under_valgrind(tp);
	signal(SIGPIPE, SIG_IGN);
	alarm(60);
	rl_options_init(&opt);
	opt.read_file_max = 64 << 10;
	loop = tloop_opts(tp, &opt);
	for (int round = 0; round < 3; round++) {
		memset(f, 0, sizeof(f));
		for (int i = 0; i < 3; i++) {
			char name[16];

			snprintf(name, sizeof(name), "fifo%d", i);
			paths[i] = strdup(tpath(name));
			if (round == 0)
				cr_assert_eq(mkfifo(paths[i], 0600), 0);
			f[i].mode = i;
			cr_assert_eq(lend(loop, &f[i].l, paths[i], 1, fifo_cb),
				     0);
			jobs[i] = (struct fifo_job){ paths[i], i };
			cr_assert_eq(pthread_create(&th[i], NULL, fifo_writer,
						    &jobs[i]),
				     0);
		}
		TRUN_UNTIL(loop, f[0].l.calls && f[1].l.calls && f[2].l.calls);
		for (int i = 0; i < 3; i++) {
			pthread_join(th[i], NULL);
			cr_assert_eq(f[i].l.calls, 1);
			free(paths[i]);
		}
		trun(loop);
		cr_assert_eq(rl_fs_loans_out(loop), 0);
	}
	tclose(loop);
	alarm(0);
}

/* ------------------------------------------------------- out of fds */

/*
 * RLIMIT_NOFILE a few fds above what is open: a burst of lent reads waits
 * for the loop's own fds (or, where nothing of the loop's holds one, fails
 * with -EMFILE); every read calls back once, with its data or -EMFILE,
 * and the buffers of those that waited come back. Valgrind does not let
 * the limit be lowered.
 */
LOAN_TEST(tp_once_under_valgrind,
	  out_of_fds_wait_holds_buffers_and_gives_them_back)
{
	enum { N = 400 };
	struct lent *l = calloc(N, sizeof(*l));
	struct rlimit old, lim;
	struct rl_options opt;
	char *small, *big;
	rl_loop *loop;
	int ok = 0;

	if (valgrind())
		cr_skip_test("Valgrind does not let RLIMIT_NOFILE be lowered");
	alarm(60);
	rl_options_init(&opt);
	opt.direct_slots = 16;
	loop = tloop_opts(tp, &opt);
	small = strdup(tfile("small", 12));
	big = strdup(tfile("big", 40000));
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	lim = old;
	/* The highest fd in use may be above the count: leave room. */
	lim.rlim_cur = (rlim_t)tfd_count() + 3;
	{
		int hi = open("/dev/null", O_RDONLY | O_CLOEXEC);

		cr_assert_geq(hi, 0);
		if ((rlim_t)hi + 3 > lim.rlim_cur)
			lim.rlim_cur = (rlim_t)hi + 3;
		close(hi);
	}
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
	for (int i = 0; i < N; i++) {
		l[i].name = i % 2 ? "big" : "small";
		l[i].size = i % 2 ? 40000 : 12;
		cr_assert_eq(lend(loop, &l[i], i % 2 ? big : small, 0, NULL),
			     0);
	}
	trun(loop);
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(l[i].calls, 1);
		cr_assert(l[i].result >= 0 || l[i].result == -EMFILE,
			  "read %d: %lld", i, (long long)l[i].result);
		ok += l[i].result >= 0;
	}
	cr_assert_gt(ok, 0);
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	tclose(loop);
	free(l);
	free(small);
	free(big);
	alarm(0);
}

/* --------------------------------------------------------------- groups */

/*
 * A spreading group closed in the middle of a burst of lent reads: the
 * home loop lent every buffer, the other loops fill (and grow: 100,000
 * bytes from a hint of 16) some of them; every callback runs once, on
 * the home loop, with its whole file or -ECANCELED, and nothing leaks.
 */
LOAN_TEST(tp_epoll_under_valgrind, group_closed_mid_burst)
{
	enum { N = 300 };
	struct lent *l = calloc(N, sizeof(*l));
	char *small = strdup(tfile("small", 12));
	char *big = strdup(tfile("big", 100000));
	int done = 0, n = valgrind() ? 90 : N;
	rl_group *g;
	rl_loop *home;

	alarm(60);
	g = tgroup(tp, 3, RL_GROUP_SPREAD, RL_MSG_WAKE_DEFAULT);
	home = rl_group_loop(g, 0);
	for (int round = 0; round < 2; round++) {
		memset(l, 0, N * sizeof(*l));
		for (int i = 0; i < n; i++) {
			l[i].name = i % 3 ? "small" : "big";
			l[i].size = i % 3 ? 12 : 100000;
			cr_assert_eq(lend(home, &l[i], i % 3 ? small : big, 16,
					  NULL),
				     0);
		}
		if (round == 0) {
			/* Run to the end once: every buffer back home. */
			trun(home);
			for (int i = 0; i < n; i++)
				cr_assert_eq(l[i].calls, 1);
			for (unsigned i = 0; i < 3; i++)
				cr_assert_eq(
					rl_fs_loans_out(rl_group_loop(g, i)),
					0);
			continue;
		}
		cr_assert_geq(rl_run(home, RL_RUN_NOWAIT), 0);
		cr_assert_eq(rl_group_close(g), 0);
	}
	for (int i = 0; i < n; i++) {
		cr_assert_eq(l[i].calls, 1, "read %d: %d calls", i, l[i].calls);
		cr_assert(l[i].result >= 0 || l[i].result == -ECANCELED,
			  "read %d: %lld", i, (long long)l[i].result);
		done += l[i].result >= 0;
	}
	(void)done;
	free(l);
	free(small);
	free(big);
	alarm(0);
}

/*
 * Spread lent reads whose callbacks submit their request again (three
 * generations), cancel their neighbours, and read /dev/zero up to the
 * cap on another loop: every callback once, and no loop of the group has
 * a buffer out at the end.
 */
struct spread_read {
	struct lent l;
	struct spread_read *all;
	int i, n, gen;
	const char *small, *big;
};

static void spread_cb(rl_req *req)
{
	struct spread_read *s = (struct spread_read *)req;
	int ret;

	lent_check(&s->l, req);
	if (s->i % 5 == 4)
		cr_assert(req->result == -EFBIG || req->result == -ECANCELED,
			  "%lld", (long long)req->result);
	else
		cr_assert(req->result >= 0 || req->result == -ECANCELED, "%lld",
			  (long long)req->result);
	if (s->i + 1 < s->n && s->i % 7 == 0) {
		ret = rl_cancel(req->loop, &s->all[s->i + 1].l.req);
		cr_assert(ret == 0 || ret == -ENOENT || ret == -EALREADY, "%d",
			  ret);
	}
	if (++s->gen < 3) {
		bool zero = s->i % 5 == 4;

		s->l.name = zero ? NULL : s->gen % 2 ? "big" : "small";
		s->l.size = s->gen % 2 ? 100000 : 12;
		cr_assert_eq(lend(req->loop, &s->l,
				  zero	       ? "/dev/zero"
				  : s->gen % 2 ? s->big
					       : s->small,
				  (size_t)s->gen, spread_cb),
			     0);
	}
}

LOAN_TEST(tp_epoll_under_valgrind, spread_reads_resubmit_cancel_and_grow)
{
	enum { N = 200 };
	struct spread_read *s = calloc(N, sizeof(*s));
	char *small = strdup(tfile("small", 12));
	char *big = strdup(tfile("big", 100000));
	struct rl_group_options opt;
	int n = valgrind() ? 60 : N;
	rl_group *g;
	rl_loop *home;

	alarm(60);
	rl_group_options_init(&opt);
	opt.loops = 2;
	opt.flags = RL_GROUP_SPREAD;
	opt.loop.read_file_max = 256 << 10;
	g = tgroup_opts(tp, &opt);
	home = rl_group_loop(g, 0);
	for (int i = 0; i < n; i++) {
		bool zero = i % 5 == 4;

		s[i].all = s;
		s[i].i = i;
		s[i].n = n;
		s[i].small = small;
		s[i].big = big;
		s[i].l.name = zero ? NULL : "small";
		s[i].l.size = 12;
		cr_assert_eq(lend(home, &s[i].l, zero ? "/dev/zero" : small, 0,
				  spread_cb),
			     0);
	}
	trun(home);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(s[i].gen, 3, "read %d: generation %d", i,
			     s[i].gen);
		cr_assert_eq(s[i].l.calls, 3);
	}
	for (unsigned i = 0; i < rl_group_size(g); i++)
		cr_assert_eq(rl_fs_loans_out(rl_group_loop(g, i)), 0, "loop %u",
			     i);
	cr_assert_eq(rl_group_close(g), 0);
	free(s);
	free(small);
	free(big);
	alarm(0);
}

/* ------------------------------------------------- the callback style */

struct cb_expect {
	const char *name;
	size_t size;
	int calls;
	int err;
};

struct cb_state {
	rl_cb_ctx *cbs;
	rl_loop *loop;
	const char *small, *big;
	struct cb_expect *exp;
	int nexp, max, started, done, trims;
};

static struct cb_state *g_cb;

static void cb_read_done(int err, const void *data, size_t len, void *arg);

static int cb_start(struct cb_state *st, int gen)
{
	struct cb_expect *e;

	if (st->nexp >= st->max)
		return 1;
	e = &st->exp[st->nexp++];
	e->name = (st->nexp + gen) % 3 ? "small" : "big";
	e->size = (st->nexp + gen) % 3 ? 12 : 100000;
	e->calls = gen; /* the generation, until its callback */
	st->started++;
	return rl_cb_fs_read_file(st->cbs, e->size == 12 ? st->small : st->big,
				  cb_read_done, e);
}

static void cb_read_done(int err, const void *data, size_t len, void *arg)
{
	struct cb_expect *e = arg;
	struct cb_state *st = g_cb;
	int gen = e->calls;

	e->calls = 1000; /* called */
	e->err = err;
	st->done++;
	cr_assert_eq(rl_cb_ctx_close(st->cbs), -EBUSY);
	if (err) {
		cr_assert_eq(err, -ECANCELED);
		cr_assert_null(data);
		return;
	}
	cr_assert_eq(len, e->size);
	tcheck(e->name, data, len);
	if (st->done % 7 == 0) {
		rl_cb_ctx_trim(st->cbs, 0);
		st->trims++;
	}
	/* More started than finished, for three generations. */
	if (gen < 3) {
		cr_assert_eq(cb_start(st, gen + 1), 0);
		cr_assert_eq(cb_start(st, gen + 1), 0);
	}
}

static void cb_setup(struct cb_state *st, rl_loop *loop, int max)
{
	memset(st, 0, sizeof(*st));
	st->loop = loop;
	st->max = max;
	st->exp = calloc((size_t)max, sizeof(*st->exp));
	st->small = strdup(tfile("small", 12));
	st->big = strdup(tfile("big", 100000));
	cr_assert_eq(rl_cb_ctx_open(loop, &st->cbs), 0);
	g_cb = st;
}

static void cb_teardown(struct cb_state *st)
{
	free(st->exp);
	free((void *)st->small);
	free((void *)st->big);
	g_cb = NULL;
}

/*
 * Bursts of the pooled read_file whose callbacks start two more each
 * (three generations: 100 + 200 + 400 + 800 reads), trim the pool every
 * seventh call, and try to close the context (-EBUSY): every read calls
 * back once with its whole file, and at the end nothing is in flight or
 * lent and the context closes.
 */
LOAN_TEST(tp_two_under_valgrind, callback_style_fanout_with_trims)
{
	enum { FIRST = 100 };
	int first = valgrind() ? 20 : FIRST, max = first * 15;
	struct cb_state st;
	rl_loop *loop = tloop(tp);

	alarm(60);
	cb_setup(&st, loop, max);
	for (int i = 0; i < first; i++)
		cr_assert_eq(cb_start(&st, 0), 0);
	trun(loop);
	cr_assert_eq(st.started, max);
	cr_assert_eq(st.done, max);
	for (int i = 0; i < max; i++) {
		cr_assert_eq(st.exp[i].calls, 1000, "read %d", i);
		cr_assert_eq(st.exp[i].err, 0);
	}
	cr_assert_gt(st.trims, 0);
	cr_assert_eq(rl_cb_ctx_in_flight(st.cbs), 0);
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	cr_assert_eq(rl_cb_ctx_close(st.cbs), 0);
	tclose(loop);
	cb_teardown(&st);
	alarm(0);
}

/*
 * The loop closed in the middle of a fanning-out burst of the pooled
 * read_file: the context closes with it; every read started calls back
 * once, with its whole file or -ECANCELED (the reads the callbacks try
 * to start during the close are refused at once, and never call back).
 */
LOAN_TEST(tp_two_under_valgrind, callback_style_loop_closed_mid_burst)
{
	enum { FIRST = 300, MAX = FIRST * 15 };
	struct cb_state st;
	rl_loop *loop = tloop(tp);
	int called = 0, first = valgrind() ? 60 : FIRST;

	alarm(60);
	cb_setup(&st, loop, MAX);
	for (int i = 0; i < first; i++)
		cr_assert_eq(cb_start(&st, 2), 0);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	/* Starts refused during the close are not errors of the test. */
	st.max = st.nexp;
	tclose(loop);
	for (int i = 0; i < st.nexp; i++) {
		cr_assert_eq(st.exp[i].calls, 1000, "read %d: not called", i);
		called++;
	}
	cr_assert_eq(called, st.done);
	cb_teardown(&st);
	alarm(0);
}

/* ------------------------------------------- requests freed in callbacks */

/*
 * Each lent read is a malloc()ed block (the request, its deadline's timer)
 * that its own callback frees, after starting the next read on a new
 * block: the loop takes the buffer back after the callback without
 * touching the request (ASan and Valgrind would see it). Half the reads
 * have a deadline, some due at once.
 */
struct owned_read {
	struct lent l;
	rl_timer timer;
	int *left, *done;
	const char *path;
};

static void owned_cb(rl_req *req);

static void owned_start(rl_loop *loop, const char *path, int *left, int *done)
{
	struct owned_read *o = calloc(1, sizeof(*o));

	o->left = left;
	o->done = done;
	o->path = path;
	o->l.name = "mid";
	o->l.size = 5000;
	(*left)--;
	cr_assert_eq(lend(loop, &o->l, path, (size_t)*left % 700, owned_cb), 0);
	if (*left % 2)
		cr_assert_eq(rl_req_deadline(loop, &o->l.req, &o->timer,
					     (uint64_t)(*left % 3)),
			     0);
}

static void owned_cb(rl_req *req)
{
	struct owned_read *o = (struct owned_read *)req;

	lent_check(&o->l, req);
	cr_assert(req->result == 5000 || req->result == -ETIMEDOUT, "%lld",
		  (long long)req->result);
	(*o->done)++;
	if (*o->left > 0)
		owned_start(req->loop, o->path, o->left, o->done);
	if (*o->left > 0 && *o->left % 5 == 0)
		owned_start(req->loop, o->path, o->left, o->done);
	free(o);
}

LOAN_TEST(tp_two_under_valgrind, callbacks_free_their_requests)
{
	int left = valgrind() ? 600 : 3000, done = 0, total = left;
	rl_loop *loop = tloop(tp);
	char *mid = strdup(tfile("mid", 5000));

	alarm(60);
	for (int i = 0; i < 16; i++)
		owned_start(loop, mid, &left, &done);
	trun(loop);
	cr_assert_eq(left, 0);
	cr_assert_eq(done, total);
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	tclose(loop);
	free(mid);
	alarm(0);
}

/*
 * Spreading turned off and on by the home loop's own callbacks in the
 * middle of a burst of lent reads of procfs files (which the loop that
 * reads them grows from 1 byte): reads taken at submission for another
 * loop and reads taken when they start on the home loop mix; every
 * callback once, every loop with no buffer out at the end.
 */
struct toggle {
	struct lent l;
	int *count;
	int gen;
};

static void toggle_cb(rl_req *req)
{
	struct toggle *t = (struct toggle *)req;

	lent_check(&t->l, req);
	cr_assert_gt(req->result, 0);
	cr_assert_null(memchr(req->buf, 0, (size_t)req->result));
	if (++*t->count % 16 == 0)
		cr_assert_eq(rl_loop_spread(req->loop, (*t->count / 16) % 2),
			     0);
	if (++t->gen < 4)
		cr_assert_eq(lend(req->loop, &t->l,
				  t->gen % 2 ? "/proc/self/maps"
					     : "/proc/self/status",
				  1, toggle_cb),
			     0);
}

LOAN_TEST(tp_epoll_under_valgrind, spread_toggled_from_callbacks)
{
	enum { N = 150 };
	struct toggle *t = calloc(N, sizeof(*t));
	int count = 0, n = valgrind() ? 40 : N;
	rl_group *g;
	rl_loop *home;

	alarm(60);
	g = tgroup(tp, 2, RL_GROUP_SPREAD, RL_MSG_WAKE_DEFAULT);
	home = rl_group_loop(g, 0);
	for (int i = 0; i < n; i++) {
		t[i].count = &count;
		cr_assert_eq(
			lend(home, &t[i].l, "/proc/self/status", 1, toggle_cb),
			0);
	}
	trun(home);
	cr_assert_eq(count, 4 * n);
	for (int i = 0; i < n; i++)
		cr_assert_eq(t[i].l.calls, 4);
	for (unsigned i = 0; i < 2; i++)
		cr_assert_eq(rl_fs_loans_out(rl_group_loop(g, i)), 0);
	cr_assert_eq(rl_group_close(g), 0);
	free(t);
	alarm(0);
}

/*
 * Every direct-descriptor slot held by a lent read of a FIFO nobody
 * writes to: the lent reads queued behind them run on plain fds once no
 * slot has come free for a while (uring.c's SLOT_STUCK_NS), taking their
 * buffers then; the FIFO reads end with their deadline. Every callback
 * once, with the data or -ETIMEDOUT, nothing out at the end.
 */
BACKEND_TEST(loan_attack, slots_held_by_fifo_reads_and_queued_loans)
{
	enum { SLOTS = 2, N = 60 };
	struct timed *t = calloc(SLOTS + N, sizeof(*t));
	struct rl_options opt;
	rl_timer guard;
	char *small, *fifo;
	rl_loop *loop;

	alarm(60);
	rl_options_init(&opt);
	opt.direct_slots = SLOTS;
	loop = tloop_opts(tp, &opt);
	small = strdup(tfile("small", 12));
	fifo = strdup(tpath("fifo"));
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	rl_timer_init(&guard);
	cr_assert_eq(rl_timer_start(loop, &guard, 10, 10, guard_cb), 0);
	for (int i = 0; i < SLOTS + N; i++) {
		t[i].fifo = i < SLOTS;
		if (!t[i].fifo) {
			t[i].l.name = "small";
			t[i].l.size = 12;
		}
		cr_assert_eq(lend(loop, &t[i].l, t[i].fifo ? fifo : small, 1,
				  timed_cb),
			     0);
		if (t[i].fifo)
			cr_assert_eq(rl_req_deadline(loop, &t[i].l.req,
						     &t[i].timer, 300),
				     0);
	}
	RUN_UNTIL(loop, ({
			  int c = 0;
			  for (int i = 0; i < SLOTS + N; i++)
				  c += t[i].l.calls;
			  c == SLOTS + N;
		  }),
		  20000);
	for (int i = 0; i < SLOTS + N; i++) {
		cr_assert_eq(t[i].l.calls, 1, "%s read %d: %d calls",
			     tp_name(tp), i, t[i].l.calls);
		cr_assert_eq(t[i].l.result, t[i].fifo ? -ETIMEDOUT : 12);
	}
	cr_assert_eq(rl_timer_stop(loop, &guard), 0);
	trun(loop);
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	tclose(loop);
	free(t);
	free(small);
	free(fifo);
	alarm(0);
}

/* The same, but the loop closes while lent reads wait for an fd (and in
 * the kernel, and done): each calls back once, with its data, -EMFILE or
 * -ECANCELED, and nothing leaks. */
LOAN_TEST(tp_once_under_valgrind, loop_closed_while_loans_wait_for_fds)
{
	enum { N = 400 };
	struct lent *l = calloc(N, sizeof(*l));
	struct rlimit old, lim;
	char *small;
	rl_loop *loop;
	int hi;

	if (valgrind())
		cr_skip_test("Valgrind does not let RLIMIT_NOFILE be lowered");
	alarm(60);
	loop = tloop(tp);
	small = strdup(tfile("small", 12));
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	hi = open("/dev/null", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(hi, 0);
	close(hi);
	lim = old;
	lim.rlim_cur = (rlim_t)hi + 2;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &lim), 0);
	for (int i = 0; i < N; i++) {
		l[i].name = "small";
		l[i].size = 12;
		cr_assert_eq(lend(loop, &l[i], small, 0, NULL), 0);
	}
	for (int i = 0; i < 3; i++)
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	tclose(loop);
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(l[i].calls, 1, "read %d: %d calls", i, l[i].calls);
		cr_assert(l[i].result == 12 || l[i].result == -EMFILE ||
				  l[i].result == -ECANCELED,
			  "read %d: %lld", i, (long long)l[i].result);
	}
	free(l);
	free(small);
	alarm(0);
}

/*
 * The 64 MiB bound: bursts of 80 lent reads of files just under 1 MiB
 * (whose buffers grow to 1 MiB, the largest class kept) leave at most 64
 * MiB kept, and a second burst takes those back instead of allocating
 * more; then a burst of small reads keeps its own small class.
 */
LOAN_TEST(tp_two_under_valgrind, keep_bound_under_bursts_of_big_files)
{
	enum { N = 80 };
	struct lent *l = calloc(N, sizeof(*l));
	char *big, *small;
	rl_loop *loop = tloop(tp);

	alarm(60);
	big = strdup(tfile("big", (1 << 20) - 1));
	small = strdup(tfile("small", 12));
	for (int round = 0; round < 2; round++) {
		memset(l, 0, N * sizeof(*l));
		for (int i = 0; i < N; i++) {
			/* Under Valgrind the size only: the bytes of 160
			 * MiB cost it minutes. */
			l[i].name = valgrind() ? NULL : "big";
			l[i].size = (1 << 20) - 1;
			cr_assert_eq(lend(loop, &l[i], big, 16, NULL), 0);
		}
		trun(loop);
		for (int i = 0; i < N; i++) {
			cr_assert_eq(l[i].calls, 1);
			cr_assert_eq(l[i].result, (1 << 20) - 1);
		}
		cr_assert_eq(rl_fs_loans_out(loop), 0);
		cr_assert_leq(rl_fs_loans_kept(loop), (size_t)64 << 20,
			      "kept %zu", rl_fs_loans_kept(loop));
		cr_assert_gt(rl_fs_loans_kept(loop), 0);
	}
	memset(l, 0, N * sizeof(*l));
	for (int i = 0; i < N; i++) {
		l[i].name = "small";
		l[i].size = 12;
		cr_assert_eq(lend(loop, &l[i], small, 1, NULL), 0);
	}
	trun(loop);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(l[i].calls, 1);
		cr_assert_lt(l[i].cap, 512, "a small file in %zu bytes",
			     l[i].cap);
	}
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	cr_assert_leq(rl_fs_loans_kept(loop), (size_t)64 << 20);
	tclose(loop);
	free(l);
	free(big);
	free(small);
	alarm(0);
}

/* The same at scale: 600 lent reads of a FIFO nobody writes to (more
 * than the SQ, so some chains go in before the deadlines fire and some
 * after), every deadline due before the run's first enter, three rounds:
 * each ends with -ETIMEDOUT. */
BACKEND_TEST(loan_attack, many_fifo_reads_timed_out_before_their_enter)
{
	int n = valgrind() ? 100 : 600;
	struct timed *t = calloc((size_t)n, sizeof(*t));
	rl_timer guard;
	char *fifo;
	rl_loop *loop = tloop(tp);

	alarm(60);
	fifo = strdup(tpath("fifo"));
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	rl_timer_init(&guard);
	cr_assert_eq(rl_timer_start(loop, &guard, 10, 10, guard_cb), 0);
	for (int round = 0; round < 3; round++) {
		int missing = 0;

		memset(t, 0, (size_t)n * sizeof(*t));
		for (int i = 0; i < n; i++) {
			t[i].fifo = true;
			cr_assert_eq(lend(loop, &t[i].l, fifo, 1, timed_cb), 0);
			cr_assert_eq(rl_req_deadline(loop, &t[i].l.req,
						     &t[i].timer, 1),
				     0);
		}
		usleep(5000);
		RUN_UNTIL(loop, ({
				  int c = 0;
				  for (int i = 0; i < n; i++)
					  c += t[i].l.calls;
				  c == n;
			  }),
			  15000);
		for (int i = 0; i < n; i++)
			missing += t[i].l.calls != 1;
		cr_assert_eq(missing, 0,
			     "%s round %d: %d of %d not called back",
			     tp_name(tp), round, missing, n);
		cr_assert_eq(rl_fs_loans_out(loop), 0);
	}
	cr_assert_eq(rl_timer_stop(loop, &guard), 0);
	tclose(loop);
	free(t);
	free(fifo);
	alarm(0);
}

/*
 * The buffer cannot grow mid-read (malloc fails under RLIMIT_AS): a lent
 * read of a sparse file of 768 MiB ends with -ENOMEM, the buffer it had
 * comes back, and the next lent read works. Not under the sanitizers or
 * Valgrind (RLIMIT_AS and their own mappings).
 */
LOAN_TEST(tp_once_under_valgrind, growth_failing_mid_read_gives_the_buffer_back)
{
	struct lent l[2];
	struct rlimit old, lim;
	char line[256], *sparse, *small;
	size_t vm_kb = 0;
	rl_loop *loop;
	FILE *f;
	int fd;

	if (SANITIZED || valgrind())
		cr_skip_test("RLIMIT_AS and the tool's own mappings");
	alarm(60);
	memset(l, 0, sizeof(l));
	loop = tloop(tp);
	sparse = strdup(tpath("sparse"));
	small = strdup(tfile("small", 12));
	fd = open(sparse, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(ftruncate(fd, (off_t)768 << 20), 0);
	close(fd);
	f = fopen("/proc/self/status", "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %zu kB", &vm_kb) == 1)
			break;
	fclose(f);
	cr_assert_eq(getrlimit(RLIMIT_AS, &old), 0);
	lim = old;
	lim.rlim_cur = (rlim_t)vm_kb * 1024 + (rlim_t)(256u << 20);
	cr_assert_eq(setrlimit(RLIMIT_AS, &lim), 0);
	cr_assert_eq(lend(loop, &l[0], sparse, 0, NULL), 0);
	trun(loop);
	cr_assert_eq(setrlimit(RLIMIT_AS, &old), 0);
	cr_assert_eq(l[0].calls, 1);
	cr_assert_eq(l[0].result, -ENOMEM, "%lld", (long long)l[0].result);
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	l[1].name = "small";
	l[1].size = 12;
	cr_assert_eq(lend(loop, &l[1], small, 0, NULL), 0);
	trun(loop);
	cr_assert_eq(l[1].calls, 1);
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	tclose(loop);
	free(sparse);
	free(small);
	alarm(0);
}
