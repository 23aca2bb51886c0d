/* SPDX-License-Identifier: MIT */
/*
 * iowq_wake.c - what a create costs through io-wq, one at a time, by
 * where the submitting thread and the io-wq worker may run.
 *
 * io_uring never tries an open with O_CREAT or O_TRUNC inline: it goes
 * to an io-wq worker, so write_file's chain, issued one at a time, costs
 * a wake-up of the worker and then one of the submitter. This program
 * makes N files one after the other (open O_CREAT|O_TRUNC, then write and
 * close linked) in one of these ways:
 *
 *   sync      open(2), write(2), close(2)
 *   free      io_uring, nobody pinned (the loop's default)
 *   pinned    io_uring, the thread pinned to the CPU it runs on (its
 *             io-wq worker, created later, inherits that)
 *   apart     pinned as above, io-wq registered to another CPU
 *   follow    io_uring, the thread not pinned, io-wq registered to the
 *             CPU the thread is on before each file (again when it moved)
 *
 *   cc -O2 -o build/iowq_wake docs/experiments/iowq_wake.c -luring
 *   mkdir /dev/shm/iw && build/iowq_wake pinned 5000 /dev/shm/iw
 *
 * Prints wall and CPU time (this process's threads, io-wq included) per
 * file. Give each run an empty directory.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <liburing.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

enum mode { SYNC, FREE, PINNED, APART, FOLLOW };
static const char *const names[] = { "sync", "free", "pinned", "apart",
				     "follow" };

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static double cpu_us(void)
{
	struct rusage r;

	getrusage(RUSAGE_SELF, &r);
	return (double)(r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e6 +
	       (double)(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

static int iowq_on(struct io_uring *ring, int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return io_uring_register_iowq_aff(ring, sizeof(set), &set);
}

static int wait_n(struct io_uring *ring, int n, int *first)
{
	struct io_uring_cqe *cqe;

	for (int i = 0; i < n; i++) {
		int ret = io_uring_wait_cqe(ring, &cqe);

		if (ret < 0)
			return ret;
		if (i == 0)
			*first = cqe->res;
		else if (cqe->res < 0)
			return cqe->res;
		io_uring_cqe_seen(ring, cqe);
	}
	return 0;
}

/* One file: the open alone (its fd is needed), then write -> close. */
static int make_uring(struct io_uring *ring, const char *path)
{
	static const char data[] = "Hello, world";
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	int fd = -1, ret;

	io_uring_prep_openat(sqe, AT_FDCWD, path,
			     O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	io_uring_submit(ring);
	ret = wait_n(ring, 1, &fd);
	if (ret < 0 || fd < 0)
		return ret < 0 ? ret : fd;
	sqe = io_uring_get_sqe(ring);
	io_uring_prep_write(sqe, fd, data, 12, 0);
	sqe->flags |= IOSQE_IO_LINK;
	sqe = io_uring_get_sqe(ring);
	io_uring_prep_close(sqe, fd);
	io_uring_submit(ring);
	return wait_n(ring, 2, &ret) < 0 ? -1 : (ret == 12 ? 0 : -1);
}

static int make_sync(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, "Hello, world", 12);
	close(fd);
	return n == 12 ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct io_uring_params p = { 0 };
	struct io_uring ring;
	enum mode mode = SYNC;
	int n, cpu, ncpu, on = -1, moves = 0;
	char path[512];
	double t0, c0;

	if (argc != 4) {
		fprintf(stderr,
			"usage: %s sync|free|pinned|apart|follow N DIR\n",
			argv[0]);
		return 2;
	}
	for (int i = 0; i < 5; i++)
		if (!strcmp(argv[1], names[i]))
			mode = (enum mode)i;
	n = atoi(argv[2]);
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
	if (io_uring_queue_init_params(64, &ring, &p) < 0) {
		fprintf(stderr, "io_uring_queue_init_params failed\n");
		return 1;
	}
	cpu = sched_getcpu();
	if (mode == PINNED || mode == APART) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	if (mode == APART) {
		ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
		if (ncpu < 2 || iowq_on(&ring, (cpu + 1) % ncpu) < 0) {
			fprintf(stderr, "apart needs two CPUs\n");
			return 1;
		}
	}
	t0 = now_us();
	c0 = cpu_us();
	for (int i = 0; i < n; i++) {
		int ret;

		snprintf(path, sizeof(path), "%s/f%d", argv[3], i);
		if (mode == FOLLOW && (cpu = sched_getcpu()) != on) {
			iowq_on(&ring, cpu);
			on = cpu;
			moves++;
		}
		ret = mode == SYNC ? make_sync(path) : make_uring(&ring, path);
		if (ret < 0) {
			fprintf(stderr, "%s: %s\n", path, strerror(-ret));
			return 1;
		}
	}
	printf("%-6s %.2f us/file wall, %.2f us/file CPU", names[mode],
	       (now_us() - t0) / n, (cpu_us() - c0) / n);
	if (mode == FOLLOW)
		printf(", io-wq moved %d times", moves);
	printf("\n");
	io_uring_queue_exit(&ring);
	return 0;
}
