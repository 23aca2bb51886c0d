/* SPDX-License-Identifier: MIT */
/*
 * test_group_attack.c - trying to break the contracts of loop groups,
 * cross-loop messages, spread bursts and promises settled from elsewhere:
 * wake-ups a sender keeps too long, groups closed from the wrong place,
 * floods into tiny rings from loops and threads at once, spread bursts of
 * FIFOs, /proc files, missing and oversized files, cancels racing their
 * completion on another loop, remote settlements at the wrong moment,
 * groups made without fds, groups of 1 and of 16 loops.
 *
 * A test that would hang on a lost wake-up waits with a bound of its own
 * (twait_until) and fails; alarm() backs that up where a hang could only
 * come from inside the library (a close that never returns).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "helpers.h"
#include "ringloop/coro.h"
#include "ringloop/promise.h"

/* Polls cond every millisecond for up to ms milliseconds: whether it came
 * true. A lost wake-up then fails the test instead of hanging it. */
#define twait_until(cond, ms)                  \
	({                                     \
		int left_ = (ms);              \
		while (!(cond) && left_-- > 0) \
			usleep(1000);          \
		(bool)(cond);                  \
	})

static __attribute__((unused)) int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Threads of this process, from /proc/self/task. */
static __attribute__((unused)) int thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* A group whose loops never poll before they sleep, so that every message
 * to an idle loop needs a real wake-up. */
static rl_group *sleepy_group(const struct tp *tp, unsigned loops, int wake)
{
	struct rl_group_options opt;

	rl_group_options_init(&opt);
	opt.loops = loops;
	opt.msg_wake = wake;
	opt.loop.idle_spin_ns = -1;
	return tgroup_opts(tp, &opt);
}

/* ------------------------------- a wake-up the sender must not keep */

struct last {
	rl_group *g;
	rl_timer timer;
	struct rl_post post;
	atomic_int ran;
};

static void last_post_cb(struct rl_post *post)
{
	atomic_fetch_add(&((struct last *)post->data)->ran, 1);
}

/* Loop 0's last callback: loop 1 has slept for 50 ms by now. After it
 * loop 0 has nothing alive, and rl_run() returns. */
static void last_timer_cb(rl_timer *t, int status)
{
	struct last *l = t->data;

	l->post.data = l;
	if (status == 0 &&
	    rl_post(rl_group_loop(l->g, 1), &l->post, last_post_cb) < 0)
		atomic_store(&l->ran, -1000);
}

/*
 * A message sent from a loop's last batch, after which rl_run() returns
 * and the thread does something else than run the loop (here: waits for
 * the message's effect). On io_uring the wake-up of the sleeping target
 * is a MSG_RING SQE on the sender's ring; it must reach the kernel before
 * rl_run() returns, or the target sleeps on with the message for as long
 * as the sender's loop is not run again.
 */
static void message_from_last_batch(const struct tp *tp, int wake)
{
	struct last l = { 0 };
	rl_loop *loop0;

	l.g = sleepy_group(tp, 2, wake);
	loop0 = rl_group_loop(l.g, 0);
	l.timer.data = &l;
	cr_assert_eq(rl_timer_start(loop0, &l.timer, 50, 0, last_timer_cb), 0);
	trun(loop0);
	cr_assert(twait_until(atomic_load(&l.ran) != 0, 3000),
		  "the message to the sleeping loop did not run in 3 s");
	cr_assert_eq(atomic_load(&l.ran), 1);
	cr_assert_eq(rl_group_close(l.g), 0);
}

BACKEND_TEST(group_attack, message_from_the_last_batch_ring)
{
	alarm(60);
	message_from_last_batch(tp, RL_MSG_WAKE_RING);
}

BACKEND_TEST(group_attack, message_from_the_last_batch_eventfd)
{
	alarm(60);
	message_from_last_batch(tp, RL_MSG_WAKE_EVENTFD);
}

/* ------------------------------------ one group's loop, another group */

struct two {
	rl_group *a, *b;
	rl_timer timer;
	struct rl_post post;
	atomic_int ran;
	int close_ret;
};

static void two_post_cb(struct rl_post *post)
{
	atomic_fetch_add(&((struct two *)post->data)->ran, 1);
}

/* On group a's loop 0, long after group b's loop 1 went to sleep: a
 * message to it, then group b closes (this thread opened it, and b's loop
 * 0 is not running). The loops of another group may be gone by the time
 * this loop next enters the kernel: b's loop must be woken another way
 * than through this loop's ring. */
static void two_timer_cb(rl_timer *t, int status)
{
	struct two *x = t->data;

	cr_assert_eq(status, 0);
	x->post.data = x;
	cr_assert_eq(rl_post(rl_group_loop(x->b, 1), &x->post, two_post_cb), 0);
	x->close_ret = rl_group_close(x->b);
}

BACKEND_TEST(group_attack, another_group_closed_from_a_callback)
{
	alarm(20); /* b's close hangs when its sleeping loop is not woken */
	struct two x = { 0 };
	int before;

	(void)tfd_count();
	before = tfd_count();
	x.a = sleepy_group(tp, 2, RL_MSG_WAKE_RING);
	x.b = sleepy_group(tp, 2, RL_MSG_WAKE_RING);
	x.timer.data = &x;
	cr_assert_eq(rl_timer_start(rl_group_loop(x.a, 0), &x.timer, 50, 0,
				    two_timer_cb),
		     0);
	trun(rl_group_loop(x.a, 0));
	cr_assert_eq(x.close_ret, 0);
	cr_assert_eq(atomic_load(&x.ran), 1);
	/* Group a's loop enters the kernel again, with whatever it kept. */
	rl_ref(rl_group_loop(x.a, 0));
	for (int i = 0; i < 5; i++)
		cr_assert_geq(rl_run(rl_group_loop(x.a, 0), RL_RUN_NOWAIT), 0);
	rl_unref(rl_group_loop(x.a, 0));
	cr_assert_eq(rl_group_close(x.a), 0);
	cr_assert_eq(tfd_count(), before);
}

/* A message that counts itself in the atomic_int its data points to. */
static void count_cb(struct rl_post *post)
{
	atomic_fetch_add((atomic_int *)post->data, 1);
}

/* ---------------------------------- closing from the wrong places */

struct wrong {
	rl_group *g;
	struct rl_post post;
	atomic_int ret;
	atomic_int done;
};

/* On loop 1: the group closed from one of its own loops' callbacks. */
static void wrong_close_cb(struct rl_post *post)
{
	struct wrong *w = post->data;

	atomic_store(&w->ret, rl_group_close(w->g));
	atomic_store(&w->done, 1);
}

/* A group closed from a callback of one of its loops would join the
 * thread it runs on and free the loop under the callback: refused, and
 * the group stays whole. */
BACKEND_TEST(group_attack, close_from_a_member_callback_is_refused)
{
	alarm(30);
	struct wrong w = { 0 };
	int before = tfd_count();

	w.g = tgroup(tp, 3, 0, RL_MSG_WAKE_DEFAULT);
	w.post.data = &w;
	cr_assert_eq(rl_post(rl_group_loop(w.g, 1), &w.post, wrong_close_cb),
		     0);
	cr_assert(twait_until(atomic_load(&w.done), 5000));
	cr_assert_eq(atomic_load(&w.ret), -EBUSY, "%s",
		     rl_strerror(atomic_load(&w.ret)));
	/* Still whole: a message goes round, and the group closes. */
	atomic_store(&w.done, 0);
	w.post.data = &w.done;
	cr_assert_eq(rl_post(rl_group_loop(w.g, 2), &w.post, count_cb), 0);
	cr_assert(twait_until(atomic_load(&w.done), 5000));
	cr_assert_eq(rl_group_close(w.g), 0);
	cr_assert_eq(tfd_count(), before);
}

struct outsider {
	rl_group *g;
	int ret;
};

static void outsider_timer_cb(rl_timer *t, int status)
{
	int *calls = t->data;

	cr_assert_eq(status, -ECANCELED);
	(*calls)++;
}

static void *outsider_close(void *arg)
{
	struct outsider *o = arg;

	o->ret = rl_group_close(o->g);
	return NULL;
}

/*
 * rl_group_close() from a thread that is not the opener's, while messages
 * fly between the loops. Where loop 0 belongs to the opener's thread (an
 * io_uring ring with SINGLE_ISSUER: rl_loop_close() says -EEXIST on
 * another thread) the close is refused with that error and the group
 * stays whole, to be closed by its opener; elsewhere (a shared ring,
 * epoll) loop 0 may close on any thread that does not run it, and the
 * close goes through. Either way nothing is freed half-way.
 */
BACKEND_TEST(group_attack, close_from_a_non_member_thread)
{
	alarm(30);
	struct outsider o = { 0 };
	struct rl_post posts[200];
	rl_timer timer = { 0 };
	int timer_calls = 0;
	atomic_int ran = 0;
	pthread_t t;
	int before = tfd_count();

	o.g = tgroup(tp, 3, 0, RL_MSG_WAKE_DEFAULT);
	/* Loop 0 has run here: its ring, if single-issuer, is this
	 * thread's now. */
	posts[0].data = &ran;
	cr_assert_eq(rl_post(rl_group_loop(o.g, 0), &posts[0], count_cb), 0);
	trun(rl_group_loop(o.g, 0));
	cr_assert_eq(atomic_load(&ran), 1);
	atomic_store(&ran, 0);
	/* Something of loop 0's that its close must end: a timer. */
	timer.data = &timer_calls;
	cr_assert_eq(rl_timer_start(rl_group_loop(o.g, 0), &timer, 60000, 0,
				    outsider_timer_cb),
		     0);
	for (int i = 0; i < 200; i++) {
		posts[i].data = &ran;
		cr_assert_eq(rl_post(rl_group_loop(o.g, 1 + i % 2), &posts[i],
				     count_cb),
			     0);
	}
	cr_assert_eq(pthread_create(&t, NULL, outsider_close, &o), 0);
	pthread_join(t, NULL);
	if (tp->backend == RL_BACKEND_URING && !(tp->flags & RL_SHARED_RING)) {
		cr_assert_eq(o.ret, -EEXIST, "%s", rl_strerror(o.ret));
		cr_assert_eq(timer_calls, 0);
		cr_assert_eq(rl_group_close(o.g), 0);
	} else {
		cr_assert_eq(o.ret, 0, "%s", rl_strerror(o.ret));
	}
	cr_assert_eq(timer_calls, 1);
	cr_assert_eq(atomic_load(&ran), 200);
	cr_assert_eq(tfd_count(), before);
}
