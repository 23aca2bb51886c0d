/* SPDX-License-Identifier: MIT */
/*
 * pipe_write.c - 256 MiB through a pipe with rl_fs_write() on the epoll
 * backend, one write of CHUNK bytes at a time, a thread reading the other
 * end (docs/experiments.md, "Pipe writes on the epoll loop thread").
 * Usage: pipe_write [CHUNK]: wall time, MB/s and the process's CPU time.
 */
#define _GNU_SOURCE
#include <ringloop/ringloop.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>

static int pfd[2];
static size_t total = (size_t)256 << 20, chunk = 1 << 20, sent;
static char *buf;
static rl_loop *loop;

static void *reader(void *arg)
{
	static char rb[1 << 16];
	size_t got = 0;
	ssize_t n;

	(void)arg;
	while (got < total && (n = read(pfd[0], rb, sizeof(rb))) > 0)
		got += (size_t)n;
	return NULL;
}

static void written(rl_req *req)
{
	if (req->result != (int64_t)chunk) {
		fprintf(stderr, "write: %s\n", rl_strerror((int)req->result));
		exit(1);
	}
	sent += chunk;
	if (sent < total)
		rl_fs_write(loop, req, pfd[1], buf, chunk, -1, written);
}

static double ms(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) * 1e3 +
	       (double)(b->tv_nsec - a->tv_nsec) / 1e6;
}

int main(int argc, char **argv)
{
	struct rl_options o = { .backend = RL_BACKEND_EPOLL };
	struct timespec a, b;
	struct rusage ru;
	rl_req req = { 0 };
	pthread_t t;
	double wall;

	if (argc > 1)
		chunk = strtoul(argv[1], NULL, 0);
	if (!chunk || total % chunk)
		return 2;
	buf = calloc(1, chunk);
	signal(SIGPIPE, SIG_IGN);
	if (!buf || pipe(pfd) < 0 || rl_loop_open(&loop, &o) < 0)
		return 2;
	pthread_create(&t, NULL, reader, NULL);
	clock_gettime(CLOCK_MONOTONIC, &a);
	rl_fs_write(loop, &req, pfd[1], buf, chunk, -1, written);
	rl_run(loop, RL_RUN_DEFAULT);
	clock_gettime(CLOCK_MONOTONIC, &b);
	pthread_join(t, NULL);
	getrusage(RUSAGE_SELF, &ru);
	wall = ms(&a, &b);
	printf("chunk %zu: %.1f ms, %.0f MB/s, cpu %.1f ms\n", chunk, wall,
	       (double)total / 1e3 / wall,
	       (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
		       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) /
			       1e3);
	rl_loop_close(loop);
	return 0;
}
