/* SPDX-License-Identifier: MIT */
/*
 * machine.c - the meta record (see machine.h).
 */
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "machine.h"

/* RB_COMMIT and RB_LIBURING, written at build time by mk/bench.mk. */
#if __has_include("buildinfo.h")
#include "buildinfo.h"
#endif
#ifndef RB_COMMIT
#define RB_COMMIT "unknown"
#endif
#ifndef RB_LIBURING
#define RB_LIBURING "unknown"
#endif

#define BATCHES	  7
#define PER_BATCH 5000

static void read_line(const char *path, char *out, size_t len)
{
	FILE *f = fopen(path, "r");

	out[0] = 0;
	if (!f)
		return;
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = 0;
	fclose(f);
}

/* "model name" says "AMD EPYC" on some VMs: the family and model numbers
 * tell the generation (25/17: Zen 4). */
static void cpu_model(char *out, size_t len)
{
	char line[256], name[128] = "", family[16] = "", model[16] = "";
	FILE *f = fopen("/proc/cpuinfo", "r");

	snprintf(out, len, "unknown");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && line[0] != '\n') {
		char *v = strchr(line, ':');

		if (!v)
			continue;
		v += 1 + (v[1] == ' ');
		v[strcspn(v, "\n")] = 0;
		if (!strncmp(line, "model name", 10))
			snprintf(name, sizeof(name), "%s", v);
		else if (!strncmp(line, "cpu family", 10))
			snprintf(family, sizeof(family), "%s", v);
		else if (!strncmp(line, "model\t", 6))
			snprintf(model, sizeof(model), "%s", v);
	}
	fclose(f);
	if (name[0] && family[0])
		snprintf(out, len, "%s (family %s, model %s)", name, family,
			 model);
	else if (name[0])
		snprintf(out, len, "%s", name);
}

static double best_ns_per_call(long nr, long a0)
{
	double best = -1;

	for (int b = 0; b < BATCHES; b++) {
		uint64_t t0 = bench_now_ns();
		double per;

		for (int i = 0; i < PER_BATCH; i++)
			syscall(nr, a0, 0, 0, 0, NULL, 0);
		per = (double)(bench_now_ns() - t0) / PER_BATCH;
		if (best < 0 || per < best)
			best = per;
	}
	return best;
}

static double clock_cost_ns(void)
{
	double best = -1;

	for (int b = 0; b < BATCHES; b++) {
		uint64_t t0 = bench_now_ns();
		double per;

		for (int i = 0; i < 20 * PER_BATCH; i++)
			bench_now_ns();
		per = (double)(bench_now_ns() - t0) / (20 * PER_BATCH);
		if (best < 0 || per < best)
			best = per;
	}
	return best;
}

static void measure_enter(struct bench_machine *m)
{
	struct io_uring ring;
	int ret = io_uring_queue_init(2, &ring, 0);

	if (ret < 0) {
		m->enter_ns = -1;
		snprintf(m->enter_error, sizeof(m->enter_error),
			 "io_uring_setup: %s", strerror(-ret));
		return;
	}
	/* to_submit 0, min_complete 0, no flags: in and out again. */
	m->enter_ns = best_ns_per_call(__NR_io_uring_enter, ring.ring_fd);
	io_uring_queue_exit(&ring);
}

void bench_machine_probe(struct bench_machine *m)
{
	struct utsname u;
	char buf[32];
	time_t t = time(NULL);

	memset(m, 0, sizeof(*m));
	if (uname(&u) == 0)
		snprintf(m->kernel, sizeof(m->kernel), "%s", u.release);
	cpu_model(m->cpu, sizeof(m->cpu));
	m->cpus = bench_sync_mt_threads();
	m->cpus_online = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
#if defined(IO_URING_VERSION_MAJOR) && defined(IO_URING_VERSION_MINOR)
	snprintf(m->liburing, sizeof(m->liburing), "%d.%d",
		 IO_URING_VERSION_MAJOR, IO_URING_VERSION_MINOR);
#else
	snprintf(m->liburing, sizeof(m->liburing), "%s", RB_LIBURING);
#endif
#if defined(__clang__)
	snprintf(m->compiler, sizeof(m->compiler), "clang %s",
		 __clang_version__);
#elif defined(__GNUC__)
	snprintf(m->compiler, sizeof(m->compiler), "gcc %s", __VERSION__);
#else
	snprintf(m->compiler, sizeof(m->compiler), "unknown");
#endif
	snprintf(m->commit, sizeof(m->commit), "%s", RB_COMMIT);
	read_line("/proc/sys/kernel/io_uring_disabled", buf, sizeof(buf));
	m->io_uring_disabled = buf[0] ? atoi(buf) : -1;
	read_line("/sys/devices/system/clocksource/clocksource0/"
		  "current_clocksource",
		  m->clocksource, sizeof(m->clocksource));
	strftime(m->date, sizeof(m->date), "%Y-%m-%dT%H:%M:%S%z",
		 localtime(&t));

	m->syscall_ns = best_ns_per_call(SYS_getppid, 0);
	measure_enter(m);
	m->clock_ns = clock_cost_ns();
}
