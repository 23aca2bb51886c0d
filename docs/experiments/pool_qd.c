/* SPDX-License-Identifier: MIT */
/*
 * pool_qd.c - O_DIRECT 4 KiB random reads at a queue depth through the
 * epoll backend pool only (docs/experiments.md, "The epoll pool at depth").
 * Usage: pool_qd FILE QD THREADS SECONDS [LABEL]: IOPS, CPU per read, and
 * per read the loop syscalls, epoll waits, wake-ups and context switches.
 */
#define _GNU_SOURCE
#include <ringloop/ringloop.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>

static rl_loop *loop;
static int fd;
static unsigned qd;
static uint64_t blocks, done, end_ns;
static unsigned char *bufs;
static uint64_t now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000ull + t.tv_nsec;
}
static uint64_t rnd(void)
{
	static uint64_t x = 88172645463325252ull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}
static void cb(rl_req *req);
static void issue(rl_req *req)
{
	unsigned i = (unsigned)(uintptr_t)req->data;
	int r = rl_fs_read(loop, req, fd, bufs + (size_t)i * 4096, 4096,
			   (int64_t)(rnd() % blocks) * 4096, cb);
	if (r < 0) {
		fprintf(stderr, "read %d\n", r);
		exit(1);
	}
}
static void cb(rl_req *req)
{
	if (req->result != 4096) {
		fprintf(stderr, "res %lld\n", (long long)req->result);
		exit(1);
	}
	done++;
	if (now() < end_ns)
		issue(req);
}
int main(int argc, char **argv)
{
	qd = atoi(argv[2]);
	unsigned threads = atoi(argv[3]);
	double secs = atof(argv[4]);
	fd = open(argv[1], O_RDONLY | O_DIRECT);
	blocks = lseek(fd, 0, SEEK_END) / 4096;
	posix_memalign((void **)&bufs, 4096, (size_t)qd * 4096);
	struct rl_options o;
	rl_options_init(&o);
	o.backend = RL_BACKEND_EPOLL;
	o.flags = RL_NO_INLINE;
	o.pool_threads = threads;
	if (rl_loop_open(&loop, &o) < 0)
		return 1;
	rl_req *reqs = calloc(qd, sizeof(*reqs));
	struct rusage r0, r1;
	getrusage(RUSAGE_SELF, &r0);
	struct rl_stats s0, s1;
	rl_loop_stats(loop, &s0);
	uint64_t t0 = now();
	end_ns = t0 + (uint64_t)(secs * 1e9);
	for (unsigned i = 0; i < qd; i++) {
		reqs[i].data = (void *)(uintptr_t)i;
		issue(&reqs[i]);
	}
	rl_run(loop, RL_RUN_DEFAULT);
	double el = (now() - t0) / 1e9;
	getrusage(RUSAGE_SELF, &r1);
	rl_loop_stats(loop, &s1);
	double cpu = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) +
		     (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e6 +
		     (r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
		     (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
	double n = done;
	printf("%s iops %.0f cpu/op %.2f us | per op: syscalls %.2f waits %.2f wakeups %.2f | nvcsw %.2f nivcsw %.2f\n",
	       argv[5] ? argv[5] : "", n / el, cpu * 1e6 / n,
	       (s1.syscalls - s0.syscalls) / n, (s1.waits - s0.waits) / n,
	       (s1.wakeups - s0.wakeups) / n, (r1.ru_nvcsw - r0.ru_nvcsw) / n,
	       (r1.ru_nivcsw - r0.ru_nivcsw) / n);
	rl_loop_close(loop);
	return 0;
}
