/* SPDX-License-Identifier: MIT */
/*
 * group.c - a group of loops, each on its own thread: opening them on
 * their threads, the workers' run loop, thread-per-core shares, and the
 * close of them all at once.
 *
 * A worker runs its loop one batch at a time (RL_RUN_ONCE) under a
 * reference of the group, so it sleeps in its backend's wait whenever it
 * has nothing to do and any message wakes it (msg.c). Before it sleeps it
 * polls for a while (rl_options.idle_spin_ns, RL_GROUP_IDLE_SPIN_NS unless
 * set), so that a message that follows soon finds it awake. Between batches it
 * looks at whether the share it was given is done (nothing alive beside
 * the group's reference) and tells loop 0 with a message.
 *
 * Closing goes in two steps so that no loop is freed while another may
 * still post to it: loop 0 shuts down first, while the workers still run
 * (the work it spread over them comes back), then the workers all at once
 * (each finishes what it has, posts to a loop that is shut down fail with
 * -ESHUTDOWN), and only when every thread has ended are the loops freed.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "group.h"

void rl_group_options_init(struct rl_group_options *opt)
{
	memset(opt, 0, sizeof(*opt));
}

/* The n-th CPU of the process's affinity, or -1. */
static int nth_cpu(unsigned n)
{
	cpu_set_t set;
	unsigned seen = 0;

	if (sched_getaffinity(0, sizeof(set), &set) < 0)
		return -1;
	n %= (unsigned)CPU_COUNT(&set);
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
		if (CPU_ISSET(cpu, &set) && seen++ == n)
			return cpu;
	return -1;
}

static unsigned cpu_count(void)
{
	cpu_set_t set;
	long n = 0;

	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		n = CPU_COUNT(&set);
	if (n <= 0)
		n = sysconf(_SC_NPROCESSORS_ONLN);
	return n <= 0 ? 1 : n > RL__GROUP_MAX ? RL__GROUP_MAX : (unsigned)n;
}

static int join_loop(struct rl__member *m, rl_loop *loop)
{
	m->loop = loop;
	loop->member = m;
	loop->msg_wake = (uint8_t)m->group->opt.msg_wake;
	loop->spread = m->group->opt.flags & RL_GROUP_SPREAD;
	/* One loop per core: each loop's bursts keep to its share. */
	loop->burst_cpus = cpu_count() / m->group->n;
	if (!loop->burst_cpus)
		loop->burst_cpus = 1;
	/* Messages between loops are the point of a group: its loops poll
	 * a little before they sleep unless told otherwise (ringloop.h). */
	if (!m->group->opt.loop.idle_spin_ns)
		loop->idle_spin_ns = RL_GROUP_IDLE_SPIN_NS;
	return rl__spread_init(m);
}

/* A share is done when its loop has nothing alive but the group's
 * reference: what rl_run() would return on. */
static bool share_done(rl_loop *loop)
{
	bool alive;

	rl_unref(loop);
	alive = rl__alive(loop);
	rl_ref(loop);
	return !alive;
}

static void quit_cb(struct rl_post *post)
{
	RL__CONTAINER(post, struct rl__member, quit_post)->quit = true;
}

/* The share runs after the batch this message came in, outside rl_run(),
 * so that it may run the loop itself. */
static void share_cb(struct rl_post *post)
{
	RL__CONTAINER(post, struct rl__member, share_post)->share_pending =
		true;
}

static void run_share(struct rl__member *m)
{
	rl_group *g = m->group;

	m->share_pending = false;
	m->share_active = true;
	/* Without the group's reference, an rl_run() of the share returns
	 * when its work is done, as on any loop. */
	rl_unref(m->loop);
	g->share_fn(m->loop, m->index, g->share_arg);
	rl_ref(m->loop);
}

/* On loop 0: one more share is done. */
static void done_cb(struct rl_post *post)
{
	struct rl__member *m =
		RL__CONTAINER(post, struct rl__member, done_post);
	rl_group *g = m->group;

	if (--g->shares_left == 0)
		rl_unref(g->m[0].loop);
}

/* A loop's shutdown, again while a layer above refuses (-EBUSY: it has
 * work to finish first, which the loop runs meanwhile). Any other error
 * (-EEXIST: the loop's ring belongs to another thread) comes before
 * anything is closed. */
static int shutdown_loop(rl_loop *loop)
{
	int ret;

	while ((ret = rl__loop_shutdown(loop)) == -EBUSY)
		rl_run(loop, RL_RUN_ONCE);
	return ret;
}

static void *worker_main(void *arg)
{
	struct rl__member *m = arg;
	rl_group *g = m->group;
	rl_loop *loop = NULL;
	int cpu, ret, go;

	if (g->opt.flags & RL_GROUP_PIN) {
		cpu_set_t set;

		cpu = nth_cpu(m->index);
		CPU_ZERO(&set);
		if (cpu >= 0) {
			CPU_SET(cpu, &set);
			pthread_setaffinity_np(pthread_self(), sizeof(set),
					       &set);
		}
	}
	ret = rl_loop_open(&loop, &g->opt.loop);
	if (ret == 0) {
		ret = join_loop(m, loop);
		rl_ref(loop);
	}
	pthread_mutex_lock(&g->lock);
	m->open_err = ret;
	g->reported++;
	pthread_cond_broadcast(&g->cond);
	while (!g->go)
		pthread_cond_wait(&g->cond, &g->lock);
	go = g->go;
	pthread_mutex_unlock(&g->lock);
	if (ret < 0 && !loop)
		return NULL;

	if (ret < 0)
		go = -1;
	while (go > 0 && !m->quit) {
		/* Without rl_run()'s flush: the next batch enters the backend
		 * at once, and the wake-ups go with it. */
		ret = rl__run(loop, RL_RUN_ONCE);
		if (ret < 0 && ret != -EINTR)
			break;
		if (m->share_pending) {
			/* The share may keep the thread for long. */
			rl__msg_flush(loop);
			run_share(m);
		}
		if (m->share_active && share_done(loop)) {
			m->share_active = false;
			rl_post(g->m[0].loop, &m->done_post, done_cb);
		}
	}
	rl_unref(loop);
	(void)shutdown_loop(loop);
	return NULL;
}

static void free_group(rl_group *g)
{
	for (unsigned i = 0; i < g->n; i++) {
		if (g->m[i].loop) {
			g->m[i].loop->member = NULL;
			rl__loop_free(g->m[i].loop);
		}
		rl__spread_free(&g->m[i]);
	}
	pthread_mutex_destroy(&g->lock);
	pthread_cond_destroy(&g->cond);
	free(g->m);
	free(g);
}

/* Lets the workers go (1) or shut down (-1), and for -1 ends it all. */
static int start(rl_group *g, int go, unsigned threads, int err)
{
	pthread_mutex_lock(&g->lock);
	while (g->reported < threads)
		pthread_cond_wait(&g->cond, &g->lock);
	for (unsigned i = 1; i <= threads; i++)
		if (g->m[i].open_err < 0 && go > 0) {
			go = -1;
			err = g->m[i].open_err;
		}
	g->go = go;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
	if (go > 0)
		return 0;
	for (unsigned i = 1; i <= threads; i++)
		pthread_join(g->m[i].thread, NULL);
	if (g->m[0].loop)
		(void)shutdown_loop(g->m[0].loop);
	free_group(g);
	return err;
}

int rl_group_open(rl_group **out, const struct rl_group_options *opt)
{
	struct rl_group_options defaults;
	rl_loop *loop0 = NULL;
	unsigned i, n;
	rl_group *g;
	int ret;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!opt) {
		rl_group_options_init(&defaults);
		opt = &defaults;
	}
	if (opt->loops > RL__GROUP_MAX ||
	    opt->flags & ~(unsigned)(RL_GROUP_SPREAD | RL_GROUP_PIN) ||
	    opt->msg_wake < RL_MSG_WAKE_DEFAULT ||
	    opt->msg_wake > RL_MSG_WAKE_EVENTFD)
		return -EINVAL;
	n = opt->loops ? opt->loops : cpu_count();
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->m = calloc(n, sizeof(*g->m));
	if (!g->m) {
		free(g);
		return -ENOMEM;
	}
	g->n = n;
	g->opt = *opt;
	atomic_init(&g->closing, false);
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->cond, NULL);
	for (i = 0; i < n; i++) {
		g->m[i].group = g;
		g->m[i].index = i;
	}
	ret = rl_loop_open(&loop0, &opt->loop);
	if (ret < 0) {
		free_group(g);
		return ret;
	}
	ret = join_loop(&g->m[0], loop0);
	for (i = 1; i < n && ret == 0; i++) {
		ret = -pthread_create(&g->m[i].thread, NULL, worker_main,
				      &g->m[i]);
		if (ret < 0)
			return start(g, -1, i - 1, ret);
		g->m[i].has_thread = true;
	}
	if (ret < 0)
		return start(g, -1, i - 1, ret);
	ret = start(g, 1, n - 1, 0);
	if (ret == 0)
		*out = g;
	return ret;
}

int rl_group_close(rl_group *g)
{
	unsigned i;
	int ret;

	if (!g)
		return -EINVAL;
	if (g->m[0].loop->running)
		return -EBUSY;
	/* On a worker's thread (a callback of its loop, a share), the close
	 * would join that very thread and free its loop under the caller. */
	for (i = 1; i < g->n; i++)
		if (pthread_equal(pthread_self(), g->m[i].thread))
			return -EBUSY;
	atomic_store(&g->closing, true);
	/* Loop 0 may refuse to close on this thread (its ring is the
	 * opener's): then nothing is closed, and the group stays whole. */
	ret = shutdown_loop(g->m[0].loop);
	if (ret < 0) {
		atomic_store(&g->closing, false);
		return ret;
	}
	for (i = 1; i < g->n; i++)
		rl_post(g->m[i].loop, &g->m[i].quit_post, quit_cb);
	for (i = 1; i < g->n; i++)
		pthread_join(g->m[i].thread, NULL);
	free_group(g);
	return 0;
}

unsigned rl_group_size(const rl_group *g)
{
	return g->n;
}

rl_loop *rl_group_loop(const rl_group *g, unsigned i)
{
	return i < g->n ? g->m[i].loop : NULL;
}

int rl_loop_group_index(const rl_loop *loop)
{
	return loop && loop->member ? (int)loop->member->index : -1;
}

int rl_loop_spread(rl_loop *loop, int on)
{
	if (!loop || !loop->member)
		return -EINVAL;
	loop->spread = on != 0;
	return 0;
}

int rl_group_run(rl_group *g, void (*fn)(rl_loop *loop, unsigned i, void *arg),
		 void *arg)
{
	rl_loop *loop0;
	int ret;

	if (!g || !fn)
		return -EINVAL;
	loop0 = g->m[0].loop;
	if (loop0->running || g->shares_left)
		return -EBUSY;
	g->share_fn = fn;
	g->share_arg = arg;
	g->shares_left = g->n - 1;
	if (g->shares_left)
		rl_ref(loop0);
	for (unsigned i = 1; i < g->n; i++)
		rl_post(g->m[i].loop, &g->m[i].share_post, share_cb);
	fn(loop0, 0, arg);
	ret = rl_run(loop0, RL_RUN_DEFAULT);
	return ret < 0 ? ret : 0;
}
