/* SPDX-License-Identifier: MIT */
/*
 * coro_cancel.c - cancelling coroutines.
 *
 * One coroutine reads a pipe nobody writes to, another sleeps for a
 * minute. A third, the watchdog, gives them 50 ms and then stops the loop;
 * main() closes the loop, which closes the coroutine scheduler first: what
 * each coroutine waits for is cancelled, the call it is suspended in
 * returns -ECANCELED, and the coroutine returns normally, unwinding its
 * own stack. Nothing leaks and no thread stays blocked in the read.
 *
 *	cc -o coro_cancel coro_cancel.c $(pkg-config --cflags --libs ringloop)
 */
#include <stdio.h>
#include <unistd.h>

#include <ringloop/ringloop.h>
#include <ringloop/coro.h>

static int64_t reader(void *arg)
{
	int fd = *(int *)arg;
	char buf[64];
	int64_t n;

	printf("reader: waiting for a pipe nobody writes to\n");
	n = rl_coro_fs_read(fd, buf, sizeof(buf), -1);
	printf("reader: read returned %s\n",
	       n < 0 ? rl_strerror((int)n) : "data");
	return n;
}

static int64_t sleeper(void *arg)
{
	int err;

	(void)arg;
	printf("sleeper: sleeping for a minute\n");
	err = rl_coro_sleep(60 * 1000);
	printf("sleeper: sleep returned %s\n",
	       err < 0 ? rl_strerror(err) : "0");
	return err;
}

static int64_t watchdog(void *arg)
{
	(void)arg;
	rl_coro_sleep(50);
	printf("watchdog: 50 ms passed, stopping the loop\n");
	/* rl_run() returns after the current batch of callbacks. */
	rl_stop(rl_coro_loop());
	return 0;
}

int main(void)
{
	rl_coro_ctx *sched;
	rl_loop *loop;
	int fds[2];

	if (pipe(fds) < 0 || rl_loop_open(&loop, NULL) < 0)
		return 1;
	if (rl_coro_ctx_open(loop, &sched, NULL) < 0)
		return 1;
	/* Detached (no handle): nobody joins them. They start in spawn
	 * order once the loop runs. */
	rl_coro_spawn(sched, NULL, reader, &fds[0], NULL);
	rl_coro_spawn(sched, NULL, sleeper, NULL, NULL);
	rl_coro_spawn(sched, NULL, watchdog, NULL, NULL);

	rl_run(loop, RL_RUN_DEFAULT); /* returns when the watchdog stops it */

	/* Closes the scheduler first: every waiting coroutine gets
	 * -ECANCELED and returns; then the loop itself. */
	printf("main: closing the loop\n");
	if (rl_loop_close(loop) < 0)
		return 1;
	printf("main: closed\n");
	close(fds[0]);
	close(fds[1]);
	return 0;
}
