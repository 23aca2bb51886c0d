/* SPDX-License-Identifier: MIT */
/*
 * bench_cputime.c - does getrusage(RUSAGE_SELF) count io_uring's io-wq
 * workers and its SQPOLL thread? ringbench reports a cell's CPU time with
 * it; this program checks that it sees the kernel threads of a ring.
 *
 * Three runs of 3,000 batches of 64 reads of a cached file: plain (the
 * reads complete inline in io_uring_enter), IOSQE_ASYNC (each read goes
 * to an io-wq worker, iou-wrk-PID) and SQPOLL (a kernel thread,
 * iou-sqp-PID, submits). For each: the wall time, getrusage(RUSAGE_SELF),
 * CLOCK_PROCESS_CPUTIME_ID, the main thread's CLOCK_THREAD_CPUTIME_ID,
 * and every task of /proc/self/task with its run time from schedstat.
 *
 *   gcc -O2 -o /tmp/bench_cputime docs/experiments/bench_cputime.c -luring
 *   flock /tmp/ringloop-bench.lock /tmp/bench_cputime
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double rusage_ms(void)
{
	struct rusage r;

	getrusage(RUSAGE_SELF, &r);
	return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 +
	       (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3;
}

static double clock_ms(clockid_t c)
{
	struct timespec t;

	clock_gettime(c, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The run time of every task of the process (schedstat, ns), summed;
 * printed one per line when print is set. */
static double tasks_ms(int print)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	double sum = 0;

	while (d && (e = readdir(d))) {
		char p[300], comm[64] = "";
		unsigned long long ns = 0;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/self/task/%s/schedstat",
			 e->d_name);
		f = fopen(p, "r");
		if (f) {
			if (fscanf(f, "%llu", &ns) != 1)
				ns = 0;
			fclose(f);
		}
		snprintf(p, sizeof(p), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(p, "r");
		if (f) {
			if (!fgets(comm, sizeof(comm), f))
				comm[0] = 0;
			fclose(f);
			comm[strcspn(comm, "\n")] = 0;
		}
		if (print)
			printf("   task %s %-16s %.1f ms\n", e->d_name, comm,
			       ns / 1e6);
		sum += ns / 1e6;
	}
	if (d)
		closedir(d);
	return sum;
}

static void run(unsigned flags, int async, const char *label)
{
	static char buf[64][4096];
	struct io_uring_params p = { .flags = flags, .sq_thread_idle = 50 };
	struct io_uring ring;
	double ru0, pc0, th0, ts0, w0;
	int fd, ret = io_uring_queue_init_params(256, &ring, &p);

	if (ret < 0) {
		printf("%s: io_uring_setup: %s\n", label, strerror(-ret));
		return;
	}
	fd = open("/etc/services", O_RDONLY);
	ru0 = rusage_ms();
	pc0 = clock_ms(CLOCK_PROCESS_CPUTIME_ID);
	th0 = clock_ms(CLOCK_THREAD_CPUTIME_ID);
	ts0 = tasks_ms(0);
	w0 = clock_ms(CLOCK_MONOTONIC);
	for (int it = 0; it < 3000; it++) {
		struct io_uring_cqe *c;
		unsigned head, n = 0;

		for (int i = 0; i < 64; i++) {
			struct io_uring_sqe *s = io_uring_get_sqe(&ring);

			io_uring_prep_read(s, fd, buf[i], sizeof(buf[i]), 0);
			if (async)
				s->flags |= IOSQE_ASYNC;
		}
		io_uring_submit_and_wait(&ring, 64);
		io_uring_for_each_cqe(&ring, head, c) n++;
		io_uring_cq_advance(&ring, n);
		for (; n < 64; n++) {
			io_uring_wait_cqe(&ring, &c);
			io_uring_cqe_seen(&ring, c);
		}
	}
	if (flags & IORING_SETUP_SQPOLL)
		usleep(200000); /* the SQ thread spins, then sleeps */
	printf("%s: wall %.1f ms, getrusage %.1f, PROCESS_CPUTIME %.1f, "
	       "main thread %.1f; tasks:\n",
	       label, clock_ms(CLOCK_MONOTONIC) - w0, rusage_ms() - ru0,
	       clock_ms(CLOCK_PROCESS_CPUTIME_ID) - pc0,
	       clock_ms(CLOCK_THREAD_CPUTIME_ID) - th0);
	printf("   sum of the tasks' run time since the start: %.1f ms\n",
	       tasks_ms(1) - ts0);
	io_uring_queue_exit(&ring);
	close(fd);
}

int main(void)
{
	run(0, 0, "plain");
	run(0, 1, "IOSQE_ASYNC (io-wq)");
	run(IORING_SETUP_SQPOLL, 0, "SQPOLL");
	return 0;
}
