/* SPDX-License-Identifier: MIT */
/*
 * machine.h - the machine a run was made on: the meta record.
 *
 * Two measured costs explain most of the difference between machines:
 * syscall_ns, a trivial syscall (getppid), and enter_ns, an io_uring_enter
 * with nothing to submit or wait for. Both are the best batch of several,
 * so a preemption does not count. clock_ns is the cost of the clock read
 * that times every operation's latency.
 */
#ifndef RINGBENCH_MACHINE_H
#define RINGBENCH_MACHINE_H

struct bench_machine {
	char kernel[128];
	char cpu[160];
	unsigned cpus; /* CPUs the process may run on */
	unsigned cpus_online;
	char liburing[32];
	char compiler[96];
	char commit[64];
	int io_uring_disabled; /* kernel.io_uring_disabled; -1: absent */
	char clocksource[32];
	double syscall_ns;
	double enter_ns;      /* < 0: io_uring refused */
	char enter_error[64]; /* why, then */
	double clock_ns;
	char date[32];
};

void bench_machine_probe(struct bench_machine *m);

#endif
