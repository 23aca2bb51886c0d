/* SPDX-License-Identifier: MIT */
/*
 * test_msg.c - cross-loop messages: rl_post() between the loops of a
 * group, woken through IORING_OP_MSG_RING or an eventfd, and from plain
 * threads: order per sender, none lost under a flood from every loop at
 * once, a busy loop not woken, a group closed with messages in flight.
 */
#include <pthread.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

#define LOOPS 3

/* ------------------------------------------------- order and no loss */

#define PER_PAIR 3000

struct flood;

struct fmsg {
	struct rl_post post;
	struct flood *f;
	unsigned from, to, seq;
};

struct flood {
	rl_group *g;
	unsigned n;
	struct fmsg *msgs; /* [from][to][seq] */
	/* Receiver-side, each touched by its receiving loop's thread only. */
	unsigned next_seq[LOOPS][LOOPS];
	atomic_uint got[LOOPS];
	unsigned disorder[LOOPS];
	pthread_t thread[LOOPS];
	unsigned wrong_thread[LOOPS];
};

static void fmsg_cb(struct rl_post *post)
{
	struct fmsg *m = (struct fmsg *)post;
	struct flood *f = m->f;

	if (!pthread_equal(pthread_self(), f->thread[m->to]))
		f->wrong_thread[m->to]++;
	if (m->seq != f->next_seq[m->to][m->from])
		f->disorder[m->to]++;
	f->next_seq[m->to][m->from] = m->seq + 1;
	atomic_fetch_add(&f->got[m->to], 1);
}

static void whoami_share(rl_loop *loop, unsigned i, void *arg)
{
	struct flood *f = arg;

	(void)loop;
	f->thread[i] = pthread_self();
}

static void flood_share(rl_loop *loop, unsigned i, void *arg)
{
	struct flood *f = arg;

	(void)loop;
	for (unsigned seq = 0; seq < PER_PAIR; seq++)
		for (unsigned to = 0; to < f->n; to++) {
			struct fmsg *m;

			if (to == i)
				continue;
			m = &f->msgs[(i * f->n + to) * PER_PAIR + seq];
			m->f = f;
			m->from = i;
			m->to = to;
			m->seq = seq;
			cr_assert_eq(rl_post(rl_group_loop(f->g, to), &m->post,
					     fmsg_cb),
				     0);
		}
}

/* Every loop sends PER_PAIR messages to every other at once; opt says
 * how the loops are made (loops, wake, ring sizes, spin). */
static void flood_opts(const struct tp *tp, struct rl_group_options *opt)
{
	struct flood *f = calloc(1, sizeof(*f));

	cr_assert_not_null(f);
	(void)tfd_count();
	f->n = LOOPS;
	opt->loops = LOOPS;
	f->g = tgroup_opts(tp, opt);
	f->msgs = calloc((size_t)LOOPS * LOOPS * PER_PAIR, sizeof(*f->msgs));
	cr_assert_not_null(f->msgs);
	cr_assert_eq(rl_group_run(f->g, whoami_share, f), 0);
	cr_assert_eq(rl_group_run(f->g, flood_share, f), 0);
	/* The shares are done when every message is sent; loop 0 runs until
	 * every loop has received its own. */
	for (unsigned i = 0; i < LOOPS; i++)
		while (atomic_load(&f->got[i]) < (LOOPS - 1) * PER_PAIR) {
			cr_assert_geq(
				rl_run(rl_group_loop(f->g, 0), RL_RUN_NOWAIT),
				0);
			usleep(100);
		}
	for (unsigned i = 0; i < LOOPS; i++) {
		cr_assert_eq(f->got[i], (LOOPS - 1) * PER_PAIR,
			     "loop %u got %u", i, f->got[i]);
		cr_assert_eq(f->disorder[i], 0);
		cr_assert_eq(f->wrong_thread[i], 0);
		for (unsigned from = 0; from < LOOPS; from++)
			if (from != i)
				cr_assert_eq(f->next_seq[i][from], PER_PAIR);
	}
	cr_assert_eq(rl_group_close(f->g), 0);
	free(f->msgs);
	free(f);
}

static void flood(const struct tp *tp, int wake)
{
	struct rl_group_options opt;

	rl_group_options_init(&opt);
	opt.msg_wake = wake;
	flood_opts(tp, &opt);
}

BACKEND_TEST(msg, flood_in_order_none_lost_ring)
{
	alarm(60); /* a lost message or completion hangs here */
	flood(tp, RL_MSG_WAKE_RING);
}

BACKEND_TEST(msg, flood_in_order_none_lost_eventfd)
{
	alarm(60); /* a lost message or completion hangs here */
	flood(tp, RL_MSG_WAKE_EVENTFD);
}

/*
 * The smallest rings a loop accepts (4 SQEs; 12 CQEs asked, 16 once the
 * kernel rounds them up, 8 of them kept for wake-ups and cancels) and
 * loops that never spin, so that every message to a sleeping loop is a
 * MSG_RING into a CQ with little room: every message still arrives, in
 * order, and every target wakes. (On Linux 6.18 a MSG_RING into a full CQ
 * does not fail: the kernel keeps the CQE on its overflow list, which the
 * target's reaping flushes. Kernels that fail it with -EOVERFLOW send the
 * wake-up through the eventfd, msg.c; the test below forces that way.)
 */
BACKEND_TEST(msg, flood_tiny_rings_none_lost)
{
	alarm(60); /* a lost message or completion hangs here */
	struct rl_group_options opt;

	rl_group_options_init(&opt);
	opt.msg_wake = RL_MSG_WAKE_RING;
	opt.loop.entries = 4;
	opt.loop.cq_entries = 12;
	opt.loop.idle_spin_ns = -1;
	flood_opts(tp, &opt);
}

/* ------------------------------------- the wake-up's other way, forced */

struct refuse {
	rl_group *g;
	rl_timer timer;
	rl_req stats[4];
	struct statx stx[4];
	struct tseen seen[4];
	struct rl_post to_target, back;
	pthread_t main;
	int target_ran, back_ran, target_thread_ok;
};

static void refuse_back_cb(struct rl_post *post)
{
	struct refuse *r = post->data;

	r->back_ran++;
	rl_unref(rl_group_loop(r->g, 0));
}

static void refuse_target_cb(struct rl_post *post)
{
	struct refuse *r = post->data;

	r->target_ran++;
	r->target_thread_ok = !pthread_equal(pthread_self(), r->main);
	cr_assert_eq(rl_post(rl_group_loop(r->g, 0), &r->back, refuse_back_cb),
		     0);
}

/* On loop 0, long after loop 1 went to sleep: four requests fill loop 0's
 * 4-entry SQ (they go to the kernel with its next wait: a loop that has
 * submitted nothing yet keeps its SQEs until then), so the wake-up of
 * loop 1 finds no SQE for a MSG_RING and must take the eventfd: the way a
 * MSG_RING the kernel refuses goes too (rl__msg_ring_failed()). */
static void refuse_timer_cb(rl_timer *t, int status)
{
	struct refuse *r = t->data;
	rl_loop *loop = rl_group_loop(r->g, 0);

	cr_assert_eq(status, 0);
	for (int i = 0; i < 4; i++) {
		r->stats[i].data = &r->seen[i];
		cr_assert_eq(rl_fs_stat(loop, &r->stats[i], "/", &r->stx[i],
					tseen_cb),
			     0);
	}
	cr_assert_eq(rl_post(rl_group_loop(r->g, 1), &r->to_target,
			     refuse_target_cb),
		     0);
}

BACKEND_TEST(msg, wake_up_with_the_senders_sq_full)
{
	alarm(60); /* a lost message or completion hangs here */
	struct rl_group_options opt;
	struct refuse r = { 0 };

	rl_group_options_init(&opt);
	opt.loops = 2;
	opt.msg_wake = RL_MSG_WAKE_RING;
	opt.loop.entries = 4;
	opt.loop.cq_entries = 12;
	opt.loop.idle_spin_ns = -1;
	r.g = tgroup_opts(tp, &opt);
	r.main = pthread_self();
	r.to_target.data = r.back.data = &r;
	r.timer.data = &r;
	rl_ref(rl_group_loop(r.g, 0));
	cr_assert_eq(rl_timer_start(rl_group_loop(r.g, 0), &r.timer, 50, 0,
				    refuse_timer_cb),
		     0);
	trun(rl_group_loop(r.g, 0));
	cr_assert_eq(r.target_ran, 1);
	cr_assert(r.target_thread_ok);
	cr_assert_eq(r.back_ran, 1);
	for (int i = 0; i < 4; i++) {
		cr_assert_eq(r.seen[i].calls, 1);
		cr_assert_eq(r.seen[i].result, 0, "stat: %s",
			     rl_strerror((int)r.seen[i].result));
	}
	cr_assert_eq(rl_group_close(r.g), 0);
}

/* ------------------------------------------------ sleeping and busy */

struct ping {
	struct rl_post post;
	rl_group *g;
	pthread_t main;
	int hops; /* messages left to bounce */
	int seen[2];
};

static void ping_cb(struct rl_post *post)
{
	struct ping *p = (struct ping *)post;
	int here = pthread_equal(pthread_self(), p->main) ? 0 : 1;

	p->seen[here]++;
	if (--p->hops > 0) {
		rl_post(rl_group_loop(p->g, here ? 0 : 1), &p->post, ping_cb);
		return;
	}
	rl_unref(rl_group_loop(p->g, 0));
}

/* A ball bounced between loop 0 and a worker that sleeps between two
 * messages: each one must wake the other. */
static void ping_pong(const struct tp *tp, int wake, int64_t spin_ns)
{
	struct rl_group_options opt;
	struct ping p = { .hops = 200 };

	rl_group_options_init(&opt);
	opt.loops = 2;
	opt.msg_wake = wake;
	opt.loop.idle_spin_ns = spin_ns;
	p.main = pthread_self();
	p.g = tgroup_opts(tp, &opt);
	rl_ref(rl_group_loop(p.g, 0));
	cr_assert_eq(rl_post(rl_group_loop(p.g, 1), &p.post, ping_cb), 0);
	trun(rl_group_loop(p.g, 0));
	cr_assert_eq(p.hops, 0);
	cr_assert_eq(p.seen[0], 100);
	cr_assert_eq(p.seen[1], 100);
	cr_assert_eq(rl_group_close(p.g), 0);
}

BACKEND_TEST(msg, sleeping_loop_is_woken_ring)
{
	alarm(60); /* a lost message or completion hangs here */
	ping_pong(tp, RL_MSG_WAKE_RING, -1);
}

BACKEND_TEST(msg, sleeping_loop_is_woken_eventfd)
{
	alarm(60); /* a lost message or completion hangs here */
	ping_pong(tp, RL_MSG_WAKE_EVENTFD, -1);
}

/* The same with the group's default spin before each sleep (a message
 * that comes while the target spins needs no wake-up), and with a spin so
 * short that the loops go back and forth between spinning and sleeping. */
BACKEND_TEST(msg, spinning_loops_bounce_ring)
{
	alarm(60); /* a lost message or completion hangs here */
	ping_pong(tp, RL_MSG_WAKE_RING, 0);
	ping_pong(tp, RL_MSG_WAKE_RING, 1000);
}

BACKEND_TEST(msg, spinning_loops_bounce_eventfd)
{
	alarm(60); /* a lost message or completion hangs here */
	ping_pong(tp, RL_MSG_WAKE_EVENTFD, 0);
	ping_pong(tp, RL_MSG_WAKE_EVENTFD, 1000);
}

struct busy {
	rl_loop *loop;
	struct rl_post posts[100];
	atomic_int posted;
	int ran;
};

static void busy_post_cb(struct rl_post *post)
{
	struct busy *b = post->data;

	b->ran++;
}

static void *poster(void *arg)
{
	struct busy *b = arg;

	for (int i = 0; i < 100; i++) {
		b->posts[i].data = b;
		cr_assert_eq(rl_post(b->loop, &b->posts[i], busy_post_cb), 0);
	}
	atomic_store(&b->posted, 1);
	return NULL;
}

struct busy_task {
	rl_task task; /* first: the task is the record */
	struct busy *b;
};

static void busy_task(rl_task *task)
{
	struct busy *b = ((struct busy_task *)(void *)task)->b;
	pthread_t t;

	/* The loop is busy (in a callback) for as long as the thread posts. */
	cr_assert_eq(pthread_create(&t, NULL, poster, b), 0);
	pthread_join(t, NULL);
	cr_assert(atomic_load(&b->posted));
}

/* A busy loop is never woken: a hundred posts while it runs a callback
 * cost no eventfd write, and all run after the callback. */
BACKEND_TEST(msg, busy_loop_is_not_woken)
{
	alarm(60); /* a lost message or completion hangs here */
	struct busy_task t;
	struct busy b = { 0 };
	struct rl_stats st;

	b.loop = tloop(tp);
	t.b = &b;
	rl_task_queue(b.loop, &t.task, busy_task);
	trun(b.loop);
	cr_assert_eq(b.ran, 100);
	rl_loop_stats(b.loop, &st);
	cr_assert_eq(st.wakeups, 0, "%llu wake-ups",
		     (unsigned long long)st.wakeups);
	tclose(b.loop);
}

/* ---------------------------------------------------- the idle spin */

struct late {
	rl_loop *loop;
	struct rl_post post;
	int ran;
};

static void late_cb(struct rl_post *post)
{
	struct late *l = post->data;

	l->ran++;
	rl_unref(l->loop);
}

static void *late_poster(void *arg)
{
	struct late *l = arg;

	usleep(20000);
	cr_assert_eq(rl_post(l->loop, &l->post, late_cb), 0);
	return NULL;
}

/* A loop that spins before it sleeps is awake: a post that comes while it
 * spins (the spin lasts up to a second, the post comes after 20 ms) costs
 * no wake-up, and runs. */
BACKEND_TEST(msg, spinning_loop_is_not_woken)
{
	alarm(60); /* a lost message or completion hangs here */
	struct rl_options opt;
	struct late l = { 0 };
	struct rl_stats st;
	pthread_t t;

	rl_options_init(&opt);
	opt.idle_spin_ns = RL_IDLE_SPIN_MAX_NS;
	l.loop = tloop_opts(tp, &opt);
	l.post.data = &l;
	rl_ref(l.loop);
	cr_assert_eq(pthread_create(&t, NULL, late_poster, &l), 0);
	trun(l.loop);
	pthread_join(t, NULL);
	cr_assert_eq(l.ran, 1);
	rl_loop_stats(l.loop, &st);
	cr_assert_eq(st.wakeups, 0, "%llu wake-ups",
		     (unsigned long long)st.wakeups);
	tclose(l.loop);
}

static void count_timer_cb(rl_timer *t, int status)
{
	cr_assert_eq(status, 0);
	(*(int *)t->data)++;
}

/* The spin ends when a timer is due: a 10 ms timer on a loop that would
 * spin for a second fires long before the second is over. */
BACKEND_TEST(msg, spin_ends_when_a_timer_is_due)
{
	alarm(60); /* a lost message or completion hangs here */
	struct rl_options opt;
	rl_timer timer;
	int fired = 0;
	rl_loop *loop;
	struct timespec a, b;

	rl_options_init(&opt);
	opt.idle_spin_ns = RL_IDLE_SPIN_MAX_NS;
	loop = tloop_opts(tp, &opt);
	rl_timer_init(&timer);
	timer.data = &fired;
	cr_assert_eq(rl_timer_start(loop, &timer, 10, 0, count_timer_cb), 0);
	clock_gettime(CLOCK_MONOTONIC, &a);
	trun(loop);
	clock_gettime(CLOCK_MONOTONIC, &b);
	cr_assert_eq(fired, 1);
	cr_assert_lt((b.tv_sec - a.tv_sec) * 1000 +
			     (b.tv_nsec - a.tv_nsec) / 1000000,
		     500);
	tclose(loop);
}

CORE_TEST(msg, idle_spin_beyond_the_maximum_is_refused)
{
	struct rl_options opt;
	rl_loop *loop = NULL;

	rl_options_init(&opt);
	opt.backend = tp->backend;
	opt.idle_spin_ns = RL_IDLE_SPIN_MAX_NS + 1;
	cr_assert_eq(rl_loop_open(&loop, &opt), -EINVAL);
	cr_assert_null(loop);
	opt.idle_spin_ns = -5; /* any negative: never spin */
	loop = tloop_opts(tp, &opt);
	tclose(loop);
}

/* --------------------------------------- closing with messages in flight */

#define STORM 2000

struct storm {
	rl_group *g;
	struct rl_post start[LOOPS];
	struct rl_post *msgs; /* [from][to][k] */
	atomic_uint accepted, refused, ran;
};

static void storm_msg_cb(struct rl_post *post)
{
	struct storm *s = post->data;

	atomic_fetch_add(&s->ran, 1);
}

/* On every worker: messages to every loop, while the group closes. */
static void storm_start_cb(struct rl_post *post)
{
	struct storm *s = post->data;
	unsigned from = (unsigned)(post - s->start);

	for (unsigned k = 0; k < STORM; k++)
		for (unsigned to = 0; to < LOOPS; to++) {
			struct rl_post *m =
				&s->msgs[(from * LOOPS + to) * STORM + k];

			m->data = s;
			if (rl_post(rl_group_loop(s->g, to), m, storm_msg_cb) ==
			    0)
				atomic_fetch_add(&s->accepted, 1);
			else
				atomic_fetch_add(&s->refused, 1);
		}
}

/* Every message accepted runs exactly once, on a loop that is closing or
 * not; the others were refused with -ESHUTDOWN; nothing leaks. */
BACKEND_TEST(msg, group_closes_with_messages_in_flight)
{
	alarm(60); /* a lost message or completion hangs here */
	struct storm *s = calloc(1, sizeof(*s));
	int before = tfd_count();

	cr_assert_not_null(s);
	s->g = tgroup(tp, LOOPS, 0, RL_MSG_WAKE_DEFAULT);
	s->msgs = calloc((size_t)LOOPS * LOOPS * STORM, sizeof(*s->msgs));
	cr_assert_not_null(s->msgs);
	for (unsigned i = 1; i < LOOPS; i++) {
		s->start[i].data = s;
		cr_assert_eq(rl_post(rl_group_loop(s->g, i), &s->start[i],
				     storm_start_cb),
			     0);
	}
	cr_assert_eq(rl_group_close(s->g), 0);
	cr_assert_eq(atomic_load(&s->ran), atomic_load(&s->accepted));
	cr_assert_eq(atomic_load(&s->accepted) + atomic_load(&s->refused),
		     (LOOPS - 1) * LOOPS * STORM);
	cr_assert_eq(tfd_count(), before);
	free(s->msgs);
	free(s);
}
