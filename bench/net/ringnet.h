/* SPDX-License-Identifier: MIT */
/*
 * ringnet.h - the socket bench: an echo server on the loop (one process,
 * pinned to one CPU) and a load generator (another process, pinned to the
 * other CPU) over loopback TCP.
 *
 * The server runs in a child process so that its CPU time is its own
 * (getrusage) and so that the two never share a CPU. The driver talks to
 * it through two pipes: a byte 'm' asks for a mark (its rusage and loop
 * counters, written back as struct echo_mark), 'q' asks it to quit.
 *
 * A server is a style: how the echo is written on the loop. This part
 * has the loop's own API ("loop"); the callback, promise and coroutine
 * styles add theirs to echo_styles[] in ringnet.c.
 */
#ifndef RINGNET_H
#define RINGNET_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>

#include "ringloop/ringloop.h"

struct echo_opts {
	int backend;	   /* enum rl_backend_kind */
	unsigned flags;	   /* enum rl_flags */
	unsigned entries;  /* io_uring SQ entries, 0 = default */
	unsigned bufs;	   /* provided buffers */
	unsigned buf_size; /* their size */
	bool copy;	   /* echo from a copy, not from the held buffer */
};

struct echo_style {
	const char *name;
	/* Starts serving the listening socket lfd on loop; *state is the
	 * style's. Returns 0 or -errno. */
	int (*start)(rl_loop *loop, int lfd, const struct echo_opts *o,
		     void **state);
	/* After rl_loop_close() (which ended every stream): frees state. */
	void (*free)(void *state);
};

extern const struct echo_style echo_style_loop;
/* echo_styles.c */
extern const struct echo_style echo_style_callback;
extern const struct echo_style echo_style_promise;
extern const struct echo_style echo_style_coro;
extern const struct echo_style echo_style_promise_recv;
extern const struct echo_style echo_style_coro_recv;

/* What a mark reports. */
struct echo_mark {
	struct rusage ru;
	struct rl_stats st;
	int err; /* the server failed to start: -errno */
};

/* The server process: serves lfd with style until 'q' on ctl. */
int echo_server_main(const struct echo_style *style, const struct echo_opts *o,
		     int lfd, int ctl, int reply, int cpu);

/* The load generator. */
struct gen_opts {
	const struct rl_addr *addr;
	int conns;
	unsigned msg_size;
	double warmup_s, duration_s;
	int ctl, reply; /* the server's pipes, for marks */
	int cpus[2];	/* the server's and the generator's CPUs */
	const char *cc; /* the generator's TCP congestion control, or NULL */
};

struct gen_result {
	uint64_t requests; /* echoes completed in the window */
	double wall_s;	   /* the window's length */
	double lat_p50_us, lat_p99_us, lat_p999_us, lat_max_us, lat_mean_us;
	int conns_served;	 /* connections with an echo in the window */
	double oldest_wait_us;	 /* the oldest message still unanswered at
				  * the window's end */
	double cpu_s;		 /* the generator's CPU time in the window */
	double busy_s;		 /* busy time of the two CPUs in the window,
				* everyone's (/proc/stat) */
	struct echo_mark m0, m1; /* the server at the window's ends */
	char error[160];	 /* empty when all went well */
};

int gen_run(const struct gen_opts *o, struct gen_result *r);

#endif
