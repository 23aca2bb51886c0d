/* SPDX-License-Identifier: MIT */
/*
 * test_msg.c - cross-loop messages: rl_post() between the loops of a
 * group, woken through IORING_OP_MSG_RING or an eventfd, and from plain
 * threads: order per sender, none lost under a flood from every loop at
 * once, a busy loop not woken, a group closed with messages in flight.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
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

static void flood(const struct tp *tp, int wake)
{
	struct flood *f = calloc(1, sizeof(*f));

	cr_assert_not_null(f);
	(void)tfd_count();
	f->n = LOOPS;
	f->g = tgroup(tp, LOOPS, 0, wake);
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
static void ping_pong(const struct tp *tp, int wake)
{
	struct ping p = { .hops = 200 };

	p.main = pthread_self();
	p.g = tgroup(tp, 2, 0, wake);
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
	ping_pong(tp, RL_MSG_WAKE_RING);
}

BACKEND_TEST(msg, sleeping_loop_is_woken_eventfd)
{
	alarm(60); /* a lost message or completion hangs here */
	ping_pong(tp, RL_MSG_WAKE_EVENTFD);
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
