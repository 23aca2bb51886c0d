/* SPDX-License-Identifier: MIT */
/*
 * timer_post.c - the loop layer's timers and its cross-thread post.
 *
 * A repeating timer ticks every 10 ms and stops itself after three ticks;
 * meanwhile a worker thread computes something and hands the result to
 * the loop thread with rl_post(), the one call any thread may make. The
 * loop holds a reference (rl_ref) while the worker runs: a post alone
 * does not keep an idle loop running.
 *
 *	cc -o timer_post timer_post.c $(pkg-config --cflags --libs ringloop)
 *
 * (add -pthread with a C library older than glibc 2.34)
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include <ringloop/ringloop.h>

struct ticker {
	rl_timer timer; /* first: the callback gets &timer */
	rl_loop *loop;
	int ticks;
};

static void tick(rl_timer *timer, int status)
{
	struct ticker *t = (struct ticker *)timer;

	if (status == -ECANCELED) {
		/* The last call of a cancelled timer. */
		printf("timer: stopped after %d ticks\n", t->ticks);
		return;
	}
	printf("timer: tick %d\n", ++t->ticks);
	if (t->ticks == 3)
		rl_timer_cancel(t->loop, timer); /* from its own callback */
}

struct job {
	struct rl_post post; /* first: the callback gets &post */
	rl_loop *loop;
	unsigned long n, result;
};

/* On the loop thread, after the worker posted. */
static void job_done(struct rl_post *post)
{
	struct job *job = (struct job *)post;

	printf("post: the worker says %lu! = %lu\n", job->n, job->result);
	rl_unref(job->loop); /* the loop may go idle now */
}

/* On the worker thread: nothing of the loop but rl_post(). */
static void *worker(void *arg)
{
	struct job *job = arg;
	int err;

	job->result = 1;
	for (unsigned long i = 2; i <= job->n; i++)
		job->result *= i;
	err = rl_post(job->loop, &job->post, job_done);
	if (err < 0)
		fprintf(stderr, "post: %s\n", rl_strerror(err));
	return NULL;
}

int main(void)
{
	struct ticker t = { .ticks = 0 };
	struct job job = { .n = 10 };
	pthread_t thread;
	rl_loop *loop;
	int err;

	if (rl_loop_open(&loop, NULL) < 0)
		return 1;
	t.loop = job.loop = loop;

	rl_timer_init(&t.timer); /* or zero it */
	err = rl_timer_start(loop, &t.timer, 10, 10, tick);
	if (err < 0) {
		fprintf(stderr, "timer: %s\n", rl_strerror(err));
		return 1;
	}

	rl_ref(loop); /* job_done() drops it */
	if (pthread_create(&thread, NULL, worker, &job) != 0) {
		fprintf(stderr, "pthread_create failed\n");
		return 1;
	}

	rl_run(loop, RL_RUN_DEFAULT); /* until the timer and the job are done */
	pthread_join(thread, NULL);
	rl_loop_close(loop);
	return 0;
}
