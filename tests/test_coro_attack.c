/* SPDX-License-Identifier: MIT */
/*
 * test_coro_attack.c - attacks on the contracts of the coroutine style:
 * joins twice, in cycles and of coroutines not started yet, closes tried
 * from inside coroutines (also while the loop's close unwinds them), the
 * loop closed with thousands of coroutines blocked in pipe reads, sleeps,
 * joins, awaits and connection reads, spawning without end and without a
 * yield, recycled handles and stacks, every call while the scheduler
 * closes, and hostile arguments. Every test is bounded (alarm() where a
 * lost wake-up would hang) and ends with the loop closed.
 */
#include <errno.h>
#include <fcntl.h>
#include <fenv.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "coro_helpers.h"
#include "net_helpers.h"
#include "ringloop/promise.h"

/* Counts scale down under Valgrind, where each suite must stay well under
 * two minutes. */
static int scaled(int n, int valgrind_n)
{
	return getenv("RL_VALGRIND") ? valgrind_n : n;
}

#if defined(RL_SAN)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

/* What the bodies below reach: one loop and scheduler per test process. */
static rl_loop *g_loop;
static rl_coro_ctx *g_sched;

/* ------------------------------------------------------------- joining */

static int64_t ret_arg(void *arg)
{
	return (int64_t)(intptr_t)arg;
}

struct joins {
	int64_t r[10];
	int done;
};

static int64_t joins_body(void *arg)
{
	struct joins *j = arg;
	rl_coro *c1, *c2, *d;

	j->r[0] = rl_coro_join(rl_coro_self());
	j->r[1] = rl_coro_join(NULL);
	/* A coroutine not started yet: the join waits for its start too. */
	cr_assert_eq(rl_coro_spawn(g_sched, &c1, ret_arg, (void *)7, NULL), 0);
	cr_assert_eq(rl_coro_done(c1), 0);
	j->r[2] = rl_coro_join(c1);
	/* Its handle is gone: a second join is refused, not a hang. */
	j->r[3] = rl_coro_join(c1);
	/* Detached before it ran: no join. */
	cr_assert_eq(rl_coro_spawn(g_sched, &d, ret_arg, (void *)1, NULL), 0);
	j->r[4] = rl_coro_detach(d);
	j->r[5] = rl_coro_join(d);
	/* Done, then detached: freed at once; join and detach refused. */
	cr_assert_eq(rl_coro_spawn(g_sched, &c2, ret_arg, (void *)11, NULL), 0);
	for (int i = 0; i < 100 && !rl_coro_done(c2); i++)
		cr_assert_eq(rl_coro_yield(), 0);
	cr_assert(rl_coro_done(c2));
	j->r[6] = rl_coro_detach(c2);
	j->r[7] = rl_coro_join(c2);
	j->r[8] = rl_coro_detach(c2);
	j->done++;
	return 0;
}

CORE_TEST(coro_attack, join_and_detach_edge_cases)
{
	alarm(60);
	rl_loop *loop = tloop(tp);
	struct joins j;
	struct rl_coro_ctx_stats st;

	g_loop = loop;
	g_sched = tsched(loop);
	memset(&j, 0, sizeof(j));
	cr_assert_eq(rl_coro_join(NULL), -EPERM);
	cr_assert_eq(rl_coro_yield(), -EPERM);
	cr_assert_eq(rl_coro_sleep(1), -EPERM);
	cr_assert_eq(rl_coro_detach(NULL), -EINVAL);
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, NULL, NULL, NULL), -EINVAL);
	cr_assert_eq(rl_coro_spawn(NULL, NULL, ret_arg, NULL, NULL), -EINVAL);
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, joins_body, &j, NULL), 0);
	trun(loop);
	cr_assert_eq(j.done, 1);
	cr_assert_eq(j.r[0], -EDEADLK);
	cr_assert_eq(j.r[1], -EINVAL);
	cr_assert_eq(j.r[2], 7);
	cr_assert_eq(j.r[3], -EINVAL);
	cr_assert_eq(j.r[4], 0);
	cr_assert_eq(j.r[5], -EINVAL);
	cr_assert_eq(j.r[6], 0);
	cr_assert_eq(j.r[7], -EINVAL);
	cr_assert_eq(j.r[8], -EINVAL);
	rl_coro_ctx_stats(g_sched, &st);
	cr_assert_eq(st.spawned, 4);
	cr_assert_eq(st.finished, 4);
	cr_assert_eq(st.handles, 0, "%zu handles left", st.handles);
	tsched_close(g_sched);
	tclose(loop);
}

/* A joins B and B joins A: nothing can wake either (only joining itself
 * is -EDEADLK). The loop goes idle; its close must still unwind both,
 * each join returning -ECANCELED exactly once. */
static rl_coro *cyc[2];
static int64_t cyc_res[2];
static int cyc_returned;

static int64_t cyc_body(void *arg)
{
	int i = (int)(intptr_t)arg;

	cyc_res[i] = rl_coro_join(cyc[1 - i]);
	cyc_returned++;
	return 0;
}

CORE_TEST(coro_attack, join_cycle_is_unwound_by_the_close)
{
	alarm(60);
	int base = tfd_count();
	rl_loop *loop = tloop(tp);
	rl_coro_ctx *s = tsched(loop);

	for (int i = 0; i < 2; i++)
		cr_assert_eq(rl_coro_spawn(s, &cyc[i], cyc_body,
					   (void *)(intptr_t)i, NULL),
			     0);
	trun(loop);
	cr_assert_eq(cyc_returned, 0);
	cr_assert_eq(rl_coro_ctx_close(s), -EBUSY);
	cr_assert_eq(rl_loop_close(loop), 0);
	cr_assert_eq(cyc_returned, 2);
	cr_assert_eq(cyc_res[0], -ECANCELED);
	cr_assert_eq(cyc_res[1], -ECANCELED);
	cr_assert_eq(tfd_count(), base);
}

/* ----------------------------------------------- closing from inside */

struct inside {
	int64_t r[6];
	int done;
};

static int64_t close_inside_body(void *arg)
{
	struct inside *k = arg;

	k->r[0] = rl_loop_close(g_loop);
	k->r[1] = rl_coro_ctx_close(g_sched);
	k->r[2] = rl_run(g_loop, RL_RUN_NOWAIT);
	k->r[3] = rl_coro_sleep(1);
	/* Once more from a timer's resume rather than a microtask's. */
	k->r[4] = rl_loop_close(g_loop);
	k->r[5] = rl_coro_ctx_close(g_sched);
	k->done++;
	return 5;
}

BACKEND_TEST(coro_attack, close_from_inside_a_coroutine_is_refused)
{
	alarm(60);
	rl_loop *loop = tloop(tp);
	struct inside k;

	memset(&k, 0, sizeof(k));
	g_loop = loop;
	g_sched = tsched(loop);
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, close_inside_body, &k, NULL),
		     0);
	trun(loop);
	cr_assert_eq(k.done, 1);
	cr_assert_eq(k.r[0], -EBUSY);
	cr_assert_eq(k.r[1], -EBUSY);
	cr_assert_eq(k.r[2], -EBUSY);
	cr_assert_eq(k.r[3], 0);
	cr_assert_eq(k.r[4], -EBUSY);
	cr_assert_eq(k.r[5], -EBUSY);
	tsched_close(g_sched);
	tclose(loop);
}

/*
 * A start put off by the window runs when the loop's close unwinds the
 * scheduler. That coroutine tries to close the loop, run it and close the
 * scheduler: each must be refused (-EBUSY) as inside any coroutine, and
 * the outer close must then finish normally, never freeing the loop or
 * the stack under the coroutine that asked.
 */
static int pipe_fds[2];
static struct inside late;
static int late_started;

static int64_t blocked_reader(void *arg)
{
	char b;

	(void)arg;
	return rl_coro_fs_read(pipe_fds[0], &b, 1, -1);
}

static int64_t late_closer(void *arg)
{
	(void)arg;
	late_started++;
	late.r[0] = rl_loop_close(g_loop);
	late.r[1] = rl_run(g_loop, RL_RUN_NOWAIT);
	late.r[2] = rl_coro_ctx_close(g_sched);
	late.r[3] = rl_coro_sleep(1);
	late.done++;
	return 0;
}

BACKEND_TEST(coro_attack, put_off_start_cannot_close_the_loop_that_unwinds_it)
{
	alarm(60);
	int base = tfd_count();
	struct rl_coro_ctx_options o = { .start_window = 1 };
	rl_loop *loop;

	cr_assert_eq(pipe2(pipe_fds, O_CLOEXEC), 0);
	loop = tloop(tp);
	g_loop = loop;
	g_sched = tsched_opts(loop, &o);
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, blocked_reader, NULL, NULL),
		     0);
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, late_closer, NULL, NULL), 0);
	/* The reader starts and waits; the window (1) puts the second off,
	 * for about two milliseconds at least. */
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(late_started, 0);
	cr_assert_eq(rl_loop_close(loop), 0);
	cr_assert_eq(late_started, 1);
	cr_assert_eq(late.done, 1);
	cr_assert_eq(late.r[0], -EBUSY);
	cr_assert_eq(late.r[1], -EBUSY);
	cr_assert_eq(late.r[2], -EBUSY);
	/* -ECANCELED when it started in the close. A slow run (Valgrind)
	 * may see the stall timer start it in the close's first turn of
	 * the loop, before the cancels: its sleep then ends either way. */
	cr_assert(late.r[3] == -ECANCELED || late.r[3] == 0, "%lld",
		  (long long)late.r[3]);
	close(pipe_fds[0]);
	close(pipe_fds[1]);
	cr_assert_eq(tfd_count(), base);
}

/* ------------------------------------------ closing with many blocked */

enum { K_PIPE, K_SLEEP, K_JOIN, K_AWAIT, K_CONN, K_KINDS };

struct mass {
	int npipes;
	int (*pipes)[2];
	int *pairs; /* loop side of each socket pair; peers in pairs + n */
	rl_coro **sleepers;
	rl_promise **pending;
	int n[K_KINDS];
	int started[K_KINDS];
	int cancelled[K_KINDS];
	int other[K_KINDS];
	int64_t last_other[K_KINDS];
};

static struct mass M;

static void mass_result(int kind, int64_t r)
{
	if (r == -ECANCELED) {
		M.cancelled[kind]++;
	} else {
		M.other[kind]++;
		M.last_other[kind] = r;
	}
}

static int64_t mass_body(void *arg)
{
	intptr_t v = (intptr_t)arg;
	int kind = (int)(v % K_KINDS), i = (int)(v / K_KINDS);
	rl_coro_conn *c;
	char b[8];
	int ret;

	M.started[kind]++;
	switch (kind) {
	case K_PIPE:
		mass_result(kind, rl_coro_fs_read(M.pipes[i % M.npipes][0], b,
						  1, -1));
		break;
	case K_SLEEP:
		mass_result(kind, rl_coro_sleep(600000));
		break;
	case K_JOIN: {
		/* A joiner started only by the close may find its sleeper
		 * returned already (0, after its own -ECANCELED): as good. */
		int64_t r = rl_coro_join(M.sleepers[i]);

		mass_result(kind, r == 0 ? -ECANCELED : r);
		break;
	}
	case K_AWAIT:
		mass_result(kind,
			    rl_coro_await(rl_promise_ref(M.pending[i]), NULL));
		break;
	case K_CONN:
		/* A start put off until the close cannot open: the socket
		 * stays ours to close. */
		ret = rl_coro_conn_open(M.pairs[i], &c);
		if (ret < 0) {
			close(M.pairs[i]);
			mass_result(kind, ret);
			break;
		}
		mass_result(kind, rl_coro_conn_read(c, b, sizeof(b), 0));
		/* Every other one is left for the loop to close. */
		if (i % 2)
			cr_assert_eq(rl_coro_conn_close(c), 0);
		break;
	}
	return 0;
}

static void mass_close(const struct tp *tp, size_t window, bool promises_first)
{
	alarm(300);
	/* 25,000 coroutines alive at once: each stack is two mappings (the
	 * guard and the stack), and past about 32,000 stacks the kernel's
	 * vm.max_map_count (65,530 by default) refuses more: those
	 * coroutines end with -ENOMEM (coro.h), which is not this test. */
	int n = scaled(5000, 60), nconn = scaled(5000, 40);
	int base = tfd_count(), total;
	struct rl_coro_ctx_options o = { .start_window = window };
	rl_promise_ctx *pctx = NULL;
	rl_loop *loop;

	struct rlimit nofile;

	/* Two fds per connection: as many as the hard limit allows. */
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &nofile), 0);
	nofile.rlim_cur = nofile.rlim_max;
	setrlimit(RLIMIT_NOFILE, &nofile);
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &nofile), 0);
	if (nofile.rlim_cur != RLIM_INFINITY &&
	    (rlim_t)nconn > (nofile.rlim_cur - 256) / 2)
		nconn = (int)((nofile.rlim_cur - 256) / 2);
	memset(&M, 0, sizeof(M));
	M.npipes = 16;
	M.pipes = calloc((size_t)M.npipes, sizeof(*M.pipes));
	M.pairs = calloc(2 * (size_t)nconn, sizeof(int));
	M.sleepers = calloc((size_t)n, sizeof(*M.sleepers));
	M.pending = calloc((size_t)n, sizeof(*M.pending));
	for (int i = 0; i < M.npipes; i++)
		cr_assert_eq(pipe2(M.pipes[i], O_CLOEXEC), 0);
	for (int i = 0; i < nconn; i++) {
		int sv[2];

		cr_assert_eq(
			socketpair(AF_UNIX,
				   SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
				   0, sv),
			0);
		M.pairs[i] = sv[0];
		M.pairs[nconn + i] = sv[1];
	}
	loop = tloop(tp);
	if (promises_first)
		cr_assert_eq(rl_promise_ctx_open(loop, &pctx), 0);
	g_sched = tsched_opts(loop, &o);
	if (!promises_first)
		cr_assert_eq(rl_promise_ctx_open(loop, &pctx), 0);
	for (int i = 0; i < n; i++)
		M.pending[i] = rl_promise_new(pctx);
	M.n[K_PIPE] = M.n[K_SLEEP] = M.n[K_JOIN] = M.n[K_AWAIT] = n;
	M.n[K_CONN] = nconn;
	total = 0;
	for (int k = 0; k < K_KINDS; k++)
		total += M.n[k];
	/* Sleepers first: the joiners join them by index. */
	for (int i = 0; i < M.n[K_SLEEP]; i++)
		cr_assert_eq(
			rl_coro_spawn(g_sched, &M.sleepers[i], mass_body,
				      (void *)(intptr_t)(i * K_KINDS + K_SLEEP),
				      NULL),
			0);
	for (int kind = 0; kind < K_KINDS; kind++) {
		if (kind == K_SLEEP)
			continue;
		for (int i = 0; i < M.n[kind]; i++)
			cr_assert_eq(
				rl_coro_spawn(
					g_sched, NULL, mass_body,
					(void *)(intptr_t)(i * K_KINDS + kind),
					NULL),
				0);
	}
	if (window == SIZE_MAX) {
		int started;

		uint64_t t0 = tnow_ms();

		do {
			cr_assert_lt(tnow_ms() - t0, 60000, "starts lost");
			started = 0;
			for (int k = 0; k < K_KINDS; k++)
				started += M.started[k];
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		} while (started < total);
		/* A few more turns, so every request is in the kernel. */
		trun_for(loop, 20);
	} else {
		trun_for(loop, 5);
	}
	for (int k = 0; k < K_KINDS; k++)
		cr_assert_eq(M.cancelled[k] + M.other[k], 0,
			     "kind %d: a call returned before the close", k);
	cr_assert_eq(rl_loop_close(loop), 0);
	for (int k = 0; k < K_KINDS; k++) {
		cr_assert_eq(M.started[k], M.n[k], "kind %d", k);
		cr_assert_eq(
			M.cancelled[k], M.n[k],
			"kind %d: %d of %d cancelled, %d other (last %lld)", k,
			M.cancelled[k], M.n[k], M.other[k],
			(long long)M.last_other[k]);
	}
	for (int i = 0; i < M.npipes; i++) {
		close(M.pipes[i][0]);
		close(M.pipes[i][1]);
	}
	for (int i = 0; i < nconn; i++)
		close(M.pairs[nconn + i]);
	cr_assert_eq(tfd_count(), base);
	free(M.pipes);
	free(M.pairs);
	free(M.sleepers);
	free(M.pending);
}

BACKEND_TEST(coro_attack, loop_close_with_thousands_blocked, .timeout = 300)
{
	mass_close(tp, SIZE_MAX, false);
}

/* The same with the default window, most starts put off, and the promise
 * context's hook running after the scheduler's rather than before. */
BACKEND_TEST(coro_attack, loop_close_with_most_starts_put_off, .timeout = 300)
{
	mass_close(tp, 0, true);
}

/* ---------------------------------------- every call while closing */

struct closing_calls {
	int64_t r[40];
	int n;
	int done;
	int fd; /* a regular file */
	int sock, peer;
	rl_coro *finished;
	rl_promise *pending, *settled;
};

static struct closing_calls CC;

static int64_t closing_body(void *arg)
{
	rl_coro_conn *c;
	rl_coro *sp;
	char b[8] = { 0 };
	void *gb = NULL;
	size_t gcap = 0;
	struct statx stx;
	struct iovec iov = { b, sizeof(b) };
	struct rl_addr a;
	struct msghdr mh = { 0 };
	int64_t *r = CC.r;
	int n = 0;

	(void)arg;
	cr_assert_eq(rl_coro_conn_open(CC.sock, &c), 0);
	/* Waits until the loop's close cancels the sleep. */
	r[n++] = rl_coro_sleep(600000);
	/* From here on every suspending call fails at once. */
	r[n++] = rl_coro_sleep(0);
	r[n++] = rl_coro_yield();
	r[n++] = rl_coro_fs_read_file(tpath("x"), b, sizeof(b));
	r[n++] = rl_coro_fs_read_file_grow(tpath("x"), &gb, &gcap);
	r[n++] = rl_coro_fs_write_file(tpath("y"), b, 1, 0, 0644);
	r[n++] = rl_coro_fs_open(tpath("x"), O_RDONLY, 0);
	r[n++] = rl_coro_fs_close(CC.fd);
	r[n++] = rl_coro_fs_read(CC.fd, b, 1, 0);
	r[n++] = rl_coro_fs_readv(CC.fd, &iov, 1, 0);
	r[n++] = rl_coro_fs_write(CC.fd, b, 1, 0);
	r[n++] = rl_coro_fs_writev(CC.fd, &iov, 1, 0);
	r[n++] = rl_coro_fs_stat(tpath("x"), &stx);
	r[n++] = rl_coro_fs_fstat(CC.fd, &stx);
	r[n++] = rl_coro_fs_fsync(CC.fd, 0);
	r[n++] = rl_coro_fs_ftruncate(CC.fd, 0);
	r[n++] = rl_coro_fs_fallocate(CC.fd, 0, 0, 1);
	r[n++] = rl_coro_fs_unlink(tpath("x"));
	r[n++] = rl_coro_fs_mkdir(tpath("d"), 0755);
	r[n++] = rl_coro_fs_rmdir(tpath("d"));
	r[n++] = rl_coro_fs_rename(tpath("x"), tpath("z"), 0);
	r[n++] = rl_coro_net_accept(CC.sock, 0);
	taddr(&a, AF_INET);
	r[n++] = rl_coro_net_connect(&a, 0, 0);
	r[n++] = rl_coro_net_recv(CC.peer, b, 1, 0);
	r[n++] = rl_coro_net_send(CC.peer, b, 1, 0);
	r[n++] = rl_coro_net_shutdown(CC.peer, SHUT_WR);
	r[n++] = rl_coro_net_sendmsg(CC.peer, &mh, 0);
	r[n++] = rl_coro_net_recvmsg(CC.peer, &mh, 0);
	r[n++] = rl_coro_conn_read(c, b, 1, 0);
	r[n++] = rl_coro_conn_write(c, b, 1, 0);
	r[n++] = rl_coro_conn_shutdown(c);
	r[n++] = rl_coro_conn_open(CC.peer, &c);
	r[n++] = rl_coro_spawn(g_sched, &sp, ret_arg, NULL, NULL);
	r[n++] = rl_coro_await(CC.pending, NULL);
	CC.n = n;
	/* The exceptions: what needs no wait still works. */
	cr_assert_eq(rl_coro_join(CC.finished), 3);
	cr_assert_eq(rl_coro_await(CC.settled, NULL), 0);
	cr_assert_eq(rl_coro_conn_close(c), 0);
	cr_assert_null(gb);
	CC.done++;
	return 0;
}

BACKEND_TEST(coro_attack, every_call_fails_at_once_while_closing)
{
	alarm(60);
	int base = tfd_count();
	rl_promise_ctx *pctx;
	rl_loop *loop;

	memset(&CC, 0, sizeof(CC));
	tfile("x", 10);
	CC.fd = open(tpath("x"), O_RDWR | O_CLOEXEC);
	cr_assert_geq(CC.fd, 0);
	tpair(AF_INET, &CC.sock, &CC.peer);
	loop = tloop(tp);
	g_loop = loop;
	g_sched = tsched(loop);
	cr_assert_eq(rl_promise_ctx_open(loop, &pctx), 0);
	CC.pending = rl_promise_new(pctx);
	CC.settled = rl_promise_resolved(pctx, (struct rl_value){ .i = 1 });
	cr_assert_eq(
		rl_coro_spawn(g_sched, &CC.finished, ret_arg, (void *)3, NULL),
		0);
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, closing_body, NULL, NULL), 0);
	trun_for(loop, 10);
	cr_assert_eq(rl_loop_close(loop), 0);
	cr_assert_eq(CC.done, 1);
	cr_assert_eq(CC.n, 34);
	for (int i = 0; i < CC.n; i++)
		cr_assert_eq(CC.r[i], -ECANCELED, "call %d: %lld", i,
			     (long long)CC.r[i]);
	/* Nothing was done: the file is still there, no directory made. */
	cr_assert_eq(access(tpath("x"), F_OK), 0);
	cr_assert_neq(access(tpath("d"), F_OK), 0);
	cr_assert_eq(close(CC.fd), 0, "the close was not done either");
	close(CC.peer);
	cr_assert_eq(tfd_count(), base);
}

/* ----------------------------------------------------- spawning storms */

static int storm_ran, chain_ran, chain_depth;

static int64_t storm_child(void *arg)
{
	(void)arg;
	storm_ran++;
	return 0;
}

static int64_t storm_parent(void *arg)
{
	int n = (int)(intptr_t)arg;

	/* Never yields: every start waits for this one to return. */
	for (int i = 0; i < n; i++)
		cr_assert_eq(
			rl_coro_spawn(g_sched, NULL, storm_child, NULL, NULL),
			0);
	return 0;
}

static int64_t chain_link(void *arg)
{
	int left = (int)(intptr_t)arg;

	chain_ran++;
	if (left > 0)
		cr_assert_eq(rl_coro_spawn(g_sched, NULL, chain_link,
					   (void *)(intptr_t)(left - 1), NULL),
			     0);
	return 0;
}

/* A joiner of many: spawns n, joins them in reverse order, sums. */
static int64_t sum_joiner(void *arg)
{
	int n = (int)(intptr_t)arg;
	rl_coro **h = calloc((size_t)n, sizeof(*h));
	int64_t sum = 0;

	for (int i = 0; i < n; i++)
		cr_assert_eq(rl_coro_spawn(g_sched, &h[i], ret_arg,
					   (void *)(intptr_t)(i + 1), NULL),
			     0);
	for (int i = n - 1; i >= 0; i--)
		sum += rl_coro_join(h[i]);
	free(h);
	return sum;
}

static int64_t sum_result;

static int64_t sum_top(void *arg)
{
	rl_coro *j;

	cr_assert_eq(rl_coro_spawn(g_sched, &j, sum_joiner, arg, NULL), 0);
	sum_result = rl_coro_join(j);
	return 0;
}

BACKEND_TEST(coro_attack, spawn_storms_lose_nothing, .timeout = 300)
{
	alarm(300);
	int n = scaled(100000, 3000), depth = scaled(20000, 1000);
	int nj = scaled(5000, 300);
	rl_loop *loop = tloop(tp);
	struct rl_coro_ctx_stats st;

	g_sched = tsched(loop);
	chain_depth = depth;
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, storm_parent,
				   (void *)(intptr_t)n, NULL),
		     0);
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, chain_link,
				   (void *)(intptr_t)(depth - 1), NULL),
		     0);
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, sum_top, (void *)(intptr_t)nj,
				   NULL),
		     0);
	trun(loop);
	cr_assert_eq(storm_ran, n);
	cr_assert_eq(chain_ran, depth);
	cr_assert_eq(sum_result, (int64_t)nj * (nj + 1) / 2);
	rl_coro_ctx_stats(g_sched, &st);
	cr_assert_eq(st.spawned, (uint64_t)n + depth + nj + 3);
	cr_assert_eq(st.finished, st.spawned);
	cr_assert_eq(st.handles, 0);
	tsched_close(g_sched);
	tclose(loop);
}

/* ------------------------------------------- recycled handles, stacks */

static rl_coro *first_handle;
static int64_t self_seen_ok;

static int64_t dirty_and_die(void *arg)
{
	volatile char junk[8192];

	(void)arg;
	memset((char *)junk, 0xAA, sizeof(junk));
	fesetround(FE_TOWARDZERO);
	return 1;
}

static int64_t check_fresh(void *arg)
{
	rl_coro *me = rl_coro_self();

	(void)arg;
	if (rl_coro_done(me) == 0 && fegetround() == FE_TONEAREST &&
	    rl_coro_name(me) && !strcmp(rl_coro_name(me), "fresh") &&
	    rl_coro_loop() == g_loop)
		self_seen_ok = 1;
	return 42;
}

static int64_t fresh_joiner(void *arg)
{
	return rl_coro_join(arg);
}

BACKEND_TEST(coro_attack, recycled_handle_and_stack_carry_nothing_over)
{
	alarm(60);
	rl_loop *loop = tloop(tp);
	struct rl_coro_options on = { .name = "fresh" };
	rl_coro *h, *j;
	struct rl_coro_ctx_stats st;
	uint64_t id0;

	g_loop = loop;
	g_sched = tsched(loop);
	/* A detached coroutine dirties its stack and FP mode, and dies. */
	cr_assert_eq(rl_coro_spawn(g_sched, &first_handle, dirty_and_die, NULL,
				   NULL),
		     0);
	id0 = rl_coro_id(first_handle);
	cr_assert_eq(rl_coro_detach(first_handle), 0);
	trun(loop);
	cr_assert_eq(fegetround(), FE_TONEAREST, "the mode leaked out");
	/* The next one gets that handle and that stack back. */
	cr_assert_eq(rl_coro_spawn(g_sched, &h, check_fresh, NULL, &on), 0);
	cr_assert_eq(h, first_handle, "the handle is recycled (LIFO)");
	cr_assert_gt(rl_coro_id(h), id0);
	cr_assert_eq(rl_coro_done(h), 0);
	/* The recycled handle was detached once: it must not be now. */
	cr_assert_eq(rl_coro_spawn(g_sched, &j, fresh_joiner, h, NULL), 0);
	trun(loop);
	cr_assert_eq(self_seen_ok, 1);
	cr_assert(rl_coro_done(j));
	rl_coro_ctx_stats(g_sched, &st);
	cr_assert_eq(st.handles, 1); /* j's */
	cr_assert_eq(rl_coro_detach(j), 0);
	rl_coro_ctx_stats(g_sched, &st);
	cr_assert_eq(st.handles, 0);
	tsched_close(g_sched);
	tclose(loop);
}

/* ------------------------------------------------------ no more stacks */

static int enomem_seen, ran_seen;

static int64_t hold_stack(void *arg)
{
	(void)arg;
	ran_seen++;
	rl_coro_sleep(20);
	return 0;
}

static int64_t hold_joiner(void *arg)
{
	int n = (int)(intptr_t)arg;
	struct rl_coro_options big = { .stack_size = 64u << 20 };

	for (int i = 0; i < n; i++) {
		rl_coro *h;
		int ret = rl_coro_spawn(g_sched, &h, hold_stack, NULL, &big);

		if (ret == -ENOMEM) {
			enomem_seen++;
			continue;
		}
		cr_assert_eq(ret, 0);
		if (rl_coro_join(h) == -ENOMEM)
			enomem_seen++;
	}
	return 0;
}

static int64_t hold_parent(void *arg)
{
	int n = (int)(intptr_t)arg;
	struct rl_coro_options big = { .stack_size = 64u << 20 };
	rl_coro **h = calloc((size_t)n, sizeof(*h));
	int spawned = 0;

	for (int i = 0; i < n; i++) {
		int ret = rl_coro_spawn(g_sched, &h[i], hold_stack, NULL, &big);

		if (ret == -ENOMEM) {
			enomem_seen++;
			continue;
		}
		cr_assert_eq(ret, 0);
		spawned++;
	}
	for (int i = 0; i < n; i++) {
		int64_t v;

		if (!h[i])
			continue;
		v = rl_coro_join(h[i]);
		if (v == -ENOMEM)
			enomem_seen++;
		else
			cr_assert_eq(v, 0);
	}
	free(h);
	(void)spawned;
	return 0;
}

/*
 * Address space runs out (RLIMIT_AS): coroutines that cannot get a stack
 * end with -ENOMEM as their value (or spawn refuses), the others run; no
 * coroutine is lost, and a later spawn works again once stacks are back.
 * Not under the sanitizers or Valgrind, whose own mappings do not fit
 * under a small RLIMIT_AS.
 */
BACKEND_TEST(coro_attack, stacks_running_out_is_enomem_not_a_crash)
{
	if (SANITIZED || getenv("RL_VALGRIND"))
		cr_skip_test("RLIMIT_AS and the tool's own mappings");
	alarm(60);
	enum { N = 64 };
	rl_loop *loop = tloop(tp);
	struct rlimit old, lim;
	char line[256];
	size_t vm_kb = 0;
	FILE *f = fopen("/proc/self/status", "r");

	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %zu kB", &vm_kb) == 1)
			break;
	fclose(f);
	cr_assert_gt(vm_kb, 0);
	g_loop = loop;
	g_sched = tsched(loop);
	cr_assert_eq(getrlimit(RLIMIT_AS, &old), 0);
	/* Room for a few 64 MiB stacks, not for N of them. */
	lim = old;
	lim.rlim_cur = (rlim_t)vm_kb * 1024 + (rlim_t)(300u << 20);
	cr_assert_eq(setrlimit(RLIMIT_AS, &lim), 0);
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, hold_parent,
				   (void *)(intptr_t)N, NULL),
		     0);
	trun(loop);
	cr_assert_eq(setrlimit(RLIMIT_AS, &old), 0);
	cr_assert_gt(enomem_seen, 0, "the limit was not reached");
	cr_assert_gt(ran_seen, 0);
	cr_assert_eq(ran_seen + enomem_seen, N, "%d ran, %d ENOMEM", ran_seen,
		     enomem_seen);
	/* With the limit gone, stacks come again. */
	ran_seen = enomem_seen = 0;
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, hold_joiner, (void *)4, NULL),
		     0);
	trun(loop);
	cr_assert_eq(ran_seen, 4);
	cr_assert_eq(enomem_seen, 0);
	tsched_close(g_sched);
	tclose(loop);
}

/* -------------------------------------------------- hostile arguments */

struct hostile {
	int64_t r[40];
	int n;
	int done;
	int file, closed_fd, efd, sock, peer;
};

static struct hostile H;

static int64_t hostile_body(void *arg)
{
	char b[16];
	struct iovec iov = { b, sizeof(b) };
	struct statx stx;
	void *gb = NULL;
	size_t cap = 0;
	rl_coro_conn *c;
	int64_t *r = H.r;
	int n = 0;

	(void)arg;
	r[n++] = rl_coro_fs_read(-1, b, 1, 0);				/* 0 */
	r[n++] = rl_coro_fs_read(H.closed_fd, b, 1, 0);			/* 1 */
	r[n++] = rl_coro_fs_read(H.file, NULL, 10, 0);			/* 2 */
	r[n++] = rl_coro_fs_read(H.file, b, 0, 0);			/* 3 */
	r[n++] = rl_coro_fs_read(H.file, b, SIZE_MAX, 0);		/* 4 */
	r[n++] = rl_coro_fs_read(H.file, b, 1, -2);			/* 5 */
	r[n++] = rl_coro_fs_write(-1, b, 1, 0);				/* 6 */
	r[n++] = rl_coro_fs_readv(H.file, NULL, 1, 0);			/* 7 */
	r[n++] = rl_coro_fs_readv(H.file, &iov, UINT_MAX, 0);		/* 8 */
	r[n++] = rl_coro_fs_read_file(NULL, b, sizeof(b));		/* 9 */
	r[n++] = rl_coro_fs_read_file(tpath("f"), NULL, 10);		/* 10 */
	r[n++] = rl_coro_fs_read_file_grow(tpath("f"), NULL, &cap);	/* 11 */
	r[n++] = rl_coro_fs_read_file_grow(tpath("f"), &gb, NULL);	/* 12 */
	r[n++] = rl_coro_fs_open(NULL, O_RDONLY, 0);			/* 13 */
	r[n++] = rl_coro_fs_close(-1);					/* 14 */
	r[n++] = rl_coro_fs_stat(tpath("f"), NULL);			/* 15 */
	r[n++] = rl_coro_fs_fstat(-1, &stx);				/* 16 */
	r[n++] = rl_coro_fs_read(H.efd, b, 1, -1);			/* 17 */
	r[n++] = rl_coro_net_recv(-1, b, 1, 0);				/* 18 */
	r[n++] = rl_coro_net_recv(H.file, b, 1, 0);			/* 19 */
	r[n++] = rl_coro_net_recv(H.sock, b, 1, RL_TIMEOUT_MAX_MS + 1); /* 20 */
	r[n++] = rl_coro_net_send(-1, b, 1, 0);				/* 21 */
	r[n++] = rl_coro_net_accept(-1, 0);				/* 22 */
	r[n++] = rl_coro_net_accept(H.file, 0);				/* 23 */
	r[n++] = rl_coro_net_connect(NULL, 0, 0);			/* 24 */
	r[n++] = rl_coro_net_shutdown(-1, SHUT_WR);			/* 25 */
	r[n++] = rl_coro_net_shutdown(H.sock, 99);			/* 26 */
	r[n++] = rl_coro_sleep(UINT64_MAX);				/* 27 */
	r[n++] = rl_coro_net_send(H.sock, NULL, 5, 0);			/* 28 */
	r[n++] = rl_coro_net_recv(H.sock, b, 0, 0);			/* 29 */
	r[n++] = rl_coro_fs_read(H.file, b, sizeof(b), INT64_MAX);	/* 30 */
	/* A connection of a file: reading it is the stream's error. */
	cr_assert_eq(rl_coro_conn_open(dup(H.file), &c), 0);
	r[n++] = rl_coro_conn_read(c, b, 1, 0);			    /* 31 */
	r[n++] = rl_coro_conn_read(c, b, 1, 0);			    /* 32 */
	r[n++] = rl_coro_conn_write(c, b, 1, 0);		    /* 33 */
	r[n++] = rl_coro_conn_read(c, b, 1, RL_TIMEOUT_MAX_MS + 1); /* 34 */
	cr_assert_eq(rl_coro_conn_close(c), 0);
	H.n = n;
	free(gb);
	H.done++;
	return 0;
}

BACKEND_TEST(coro_attack, hostile_arguments_are_clear_errors)
{
	alarm(60);
	const char *path = tfile("f", 100);
	rl_loop *loop;

	memset(&H, 0, sizeof(H));
	loop = tloop(tp);
	H.file = open(path, O_RDWR | O_CLOEXEC);
	cr_assert_geq(H.file, 0);
	H.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	cr_assert_geq(H.efd, 0);
	tpair(AF_INET, &H.sock, &H.peer);
	/* Last, so that no fd opened since took its number. */
	H.closed_fd = dup(H.file);
	close(H.closed_fd);
	g_loop = loop;
	g_sched = tsched(loop);
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, hostile_body, NULL, NULL), 0);
	trun(loop);
	cr_assert_eq(H.done, 1);
	cr_assert_eq(H.n, 35);
	{
		static const int64_t want[35] = {
			[0] = -EBADF,	  [1] = -EBADF,	    [2] = -EFAULT,
			[3] = 0,	  [4] = -EINVAL,    [5] = -EINVAL,
			[6] = -EBADF,	  [7] = -EFAULT,    [8] = -EINVAL,
			[9] = -EFAULT,	  [10] = -EFAULT,   [11] = -EINVAL,
			[12] = -EINVAL,	  [13] = -EFAULT,   [14] = -EBADF,
			[15] = -EFAULT,	  [16] = -EBADF,    [17] = -EINVAL,
			[18] = -EBADF,	  [19] = -ENOTSOCK, [20] = -EINVAL,
			[21] = -EBADF,	  [22] = -EBADF,    [23] = -ENOTSOCK,
			[24] = -EFAULT,	  [25] = -EBADF,    [26] = -EINVAL,
			[27] = -EINVAL,	  [28] = -EFAULT,   [29] = -EINVAL,
			[30] = -EINVAL,	  [31] = -ENOTSOCK, [32] = -ENOTSOCK,
			[33] = -ENOTSOCK, [34] = -EINVAL,
		};

		for (int i = 0; i < H.n; i++)
			cr_expect_eq(H.r[i], want[i], "call %d: %lld (%s)", i,
				     (long long)H.r[i],
				     H.r[i] < 0 ? rl_strerror((int)H.r[i])
						: "");
	}
	tsched_close(g_sched);
	close(H.file);
	close(H.efd);
	close(H.sock);
	close(H.peer);
	tclose(loop);
}

/* ---------------------------- the scheduler closed during the unwinding */

/*
 * rl_coro_ctx_close() from a microtask that runs while the loop's close
 * unwinds the scheduler (its rl_run() until the last coroutine returns):
 * by then no coroutine is alive and none runs, but the close hook is
 * still working with the scheduler and comes back to it at the end of
 * the loop's close. The call must be refused (-EBUSY), never free the
 * scheduler under the hook.
 */
static rl_task sched_close_task;
static int sched_task_ran;
static int64_t sched_task_ret = 1, unwound_read;

static void close_sched_task(rl_task *task)
{
	(void)task;
	sched_task_ran++;
	sched_task_ret = rl_coro_ctx_close(g_sched);
}

static int64_t read_then_queue_close(void *arg)
{
	char b;

	(void)arg;
	unwound_read = rl_coro_fs_read(pipe_fds[0], &b, 1, -1);
	/* Runs once this coroutine has returned and none is alive. */
	rl_task_queue(g_loop, &sched_close_task, close_sched_task);
	return 0;
}

BACKEND_TEST(coro_attack, ctx_close_during_the_unwinding_is_refused)
{
	alarm(60);
	int base = tfd_count();
	rl_loop *loop;

	cr_assert_eq(pipe2(pipe_fds, O_CLOEXEC), 0);
	loop = tloop(tp);
	g_loop = loop;
	g_sched = tsched(loop);
	cr_assert_eq(
		rl_coro_spawn(g_sched, NULL, read_then_queue_close, NULL, NULL),
		0);
	trun_for(loop, 5);
	cr_assert_eq(rl_loop_close(loop), 0);
	cr_assert_eq(unwound_read, -ECANCELED);
	cr_assert_eq(sched_task_ran, 1);
	cr_assert_eq(sched_task_ret, -EBUSY);
	close(pipe_fds[0]);
	close(pipe_fds[1]);
	cr_assert_eq(tfd_count(), base);
}

/* ------------------------------------------- nested loops, shared pool */

/*
 * A coroutine of loop A runs loop B (a different loop may run inside a
 * callback), which resumes B's coroutines on top of A's coroutine's
 * stack. B's coroutine sees itself, not A's; joining across schedulers is
 * -EINVAL; closing B's scheduler or loop from inside A's coroutine is
 * refused (-EBUSY) rather than unwinding B's coroutines from there; after
 * B's coroutine suspends, A's continues as itself. Both schedulers share
 * one stack pool, which refuses to close while a stack is lent.
 */
static rl_loop *loop_b;
static rl_coro_ctx *sched_b;
static rl_coro *a_self, *b_self;
static int64_t nest_r[8];
static int nest_done;

static int64_t b_body(void *arg)
{
	(void)arg;
	b_self = rl_coro_self();
	nest_r[0] = rl_coro_loop() == loop_b;
	nest_r[1] = rl_coro_join(a_self);  /* another scheduler's */
	nest_r[2] = rl_coro_sleep(600000); /* until B closes */
	nest_done++;
	return 0;
}

static int64_t a_body(void *arg)
{
	(void)arg;
	a_self = rl_coro_self();
	cr_assert_eq(rl_coro_spawn(sched_b, NULL, b_body, NULL, NULL), 0);
	/* Loop B runs here, on this coroutine's stack, until idle with B's
	 * coroutine asleep (its timer keeps B alive: NOWAIT turns). */
	for (int i = 0; i < 20 && !b_self; i++)
		cr_assert_geq(rl_run(loop_b, RL_RUN_NOWAIT), 0);
	nest_r[3] = rl_coro_self() == a_self;
	nest_r[4] = rl_coro_loop() == g_loop;
	nest_r[5] = rl_coro_ctx_close(sched_b);
	nest_r[6] = rl_loop_close(loop_b);
	nest_r[7] = rl_coro_sleep(1);
	nest_done++;
	return 0;
}

BACKEND_TEST(coro_attack, coroutine_runs_another_loop_with_coroutines)
{
	alarm(60);
	rl_loop *loop = tloop(tp);
	struct rl_coro_ctx_options o = { 0 };
	rl_coro_pool *pool;

	cr_assert_eq(rl_coro_pool_open(&pool, 0), 0);
	o.pool = pool;
	g_loop = loop;
	cr_assert_eq(rl_loop_open(&loop_b,
				  &(struct rl_options){
					  .backend = tp->backend,
					  .flags = tp->flags,
				  }),
		     0);
	g_sched = tsched_opts(loop, &o);
	sched_b = tsched_opts(loop_b, &o);
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, a_body, NULL, NULL), 0);
	trun(loop);
	cr_assert_eq(nest_done, 1);
	cr_assert_eq(nest_r[0], 1);
	cr_assert_eq(nest_r[1], -EINVAL);
	cr_assert_eq(nest_r[3], 1);
	cr_assert_eq(nest_r[4], 1);
	cr_assert_eq(nest_r[5], -EBUSY);
	cr_assert_eq(nest_r[6], -EBUSY);
	cr_assert_eq(nest_r[7], 0);
	/* B's coroutine still holds a stack of the shared pool. */
	cr_assert_eq(rl_coro_pool_close(pool), -EBUSY);
	tsched_close(g_sched);
	cr_assert_eq(rl_loop_close(loop_b), 0);
	cr_assert_eq(nest_done, 2);
	cr_assert_eq(nest_r[2], -ECANCELED);
	cr_assert_eq(rl_coro_pool_close(pool), 0);
	tclose(loop);
}

/* -------------------------------------------------- connection attacks */

/*
 * A peer that resets while one coroutine's write waits for it, another
 * coroutine reads and a third shuts the connection down: the write fails
 * (-ECONNRESET or -EPIPE), the read says -ECONNRESET, and says it again;
 * a close from yet another coroutine then ends it all, the socket closed
 * once.
 */
struct cr {
	rl_coro_conn *c;
	int s, peer;
	int64_t w, r1, r2, shut, after_w;
	int writing, reading, returned;
	char *big;
};

static struct cr CR;

static int64_t cr_open(void *arg)
{
	(void)arg;
	cr_assert_eq(rl_coro_conn_open(CR.s, &CR.c), 0);
	return 0;
}

static int64_t cr_writer(void *arg)
{
	(void)arg;
	CR.writing = 1;
	CR.w = rl_coro_conn_write(CR.c, CR.big, 32 << 20, 0);
	CR.after_w = rl_coro_conn_write(CR.c, "x", 1, 0);
	CR.returned++;
	return 0;
}

static int64_t cr_reader(void *arg)
{
	char b[64];

	(void)arg;
	CR.reading = 1;
	CR.r1 = rl_coro_conn_read(CR.c, b, sizeof(b), 0);
	CR.r2 = rl_coro_conn_read(CR.c, b, sizeof(b), 0);
	CR.returned++;
	return 0;
}

static int64_t cr_closer(void *arg)
{
	(void)arg;
	/* The handle is invalid after this: no second close. */
	cr_assert_eq(rl_coro_conn_close(CR.c), 0);
	CR.returned++;
	return 0;
}

BACKEND_TEST(coro_attack, peer_reset_while_a_conn_write_waits)
{
	alarm(60);
	rl_loop *loop = tloop(tp);
	struct linger lg = { 1, 0 };

	memset(&CR, 0, sizeof(CR));
	CR.big = calloc(1, 32 << 20);
	g_loop = loop;
	g_sched = tsched(loop);
	tpair(AF_INET, &CR.s, &CR.peer);
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, cr_open, NULL, NULL), 0);
	trun(loop);
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, cr_writer, NULL, NULL), 0);
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, cr_reader, NULL, NULL), 0);
	trun_until(loop, CR.writing && CR.reading);
	trun_for(loop, 20);
	cr_assert_eq(CR.returned, 0);
	cr_assert_eq(
		setsockopt(CR.peer, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	close(CR.peer);
	trun_until(loop, CR.returned == 2);
	cr_assert(CR.w == -ECONNRESET || CR.w == -EPIPE, "%s",
		  rl_strerror((int)CR.w));
	cr_assert(CR.after_w == -ECONNRESET || CR.after_w == -EPIPE, "%s",
		  rl_strerror((int)CR.after_w));
	cr_assert_eq(CR.r1, -ECONNRESET, "%s", rl_strerror((int)CR.r1));
	cr_assert_eq(CR.r2, -ECONNRESET, "%s", rl_strerror((int)CR.r2));
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, cr_closer, NULL, NULL), 0);
	trun(loop);
	cr_assert_eq(CR.returned, 3);
	free(CR.big);
	tsched_close(g_sched);
	tclose(loop);
}

/* ------------------------------------------ the promise context closed */

/*
 * A coroutine awaits a pending promise, and the program closes the
 * promise context (nothing of it is in flight: no request, timer or
 * microtask). The await holds the promise: the context must not be freed
 * under it.
 */
static rl_promise_ctx *await_pctx;
static int64_t await_res = 1;
static int await_returned;

static int64_t await_pending(void *arg)
{
	await_res = rl_coro_await(arg, NULL);
	await_returned++;
	return 0;
}

BACKEND_TEST(coro_attack, promise_context_closed_under_an_await)
{
	alarm(60);
	rl_loop *loop = tloop(tp);
	rl_promise *p;
	int ret;

	g_loop = loop;
	g_sched = tsched(loop);
	cr_assert_eq(rl_promise_ctx_open(loop, &await_pctx), 0);
	p = rl_promise_new(await_pctx);
	cr_assert_eq(rl_coro_spawn(g_sched, NULL, await_pending,
				   rl_promise_ref(p), NULL),
		     0);
	trun(loop);
	cr_assert_eq(await_returned, 0);
	ret = rl_promise_ctx_close(await_pctx);
	cr_assert_eq(ret, -EBUSY, "%s", rl_strerror(ret));
	cr_assert_eq(rl_promise_resolve(p, (struct rl_value){ .i = 9 }), 0);
	rl_promise_unref(p);
	trun(loop);
	cr_assert_eq(await_returned, 1);
	cr_assert_eq(await_res, 0);
	cr_assert_eq(rl_promise_ctx_close(await_pctx), 0);
	tsched_close(g_sched);
	tclose(loop);
}

/*
 * A shared pool closed while an idle scheduler (no coroutine alive, every
 * stack back) still uses it: the scheduler's next start would take a
 * stack from freed memory. The close must be refused until the scheduler
 * is closed.
 */
static int pool_ran;

static int64_t pool_body(void *arg)
{
	(void)arg;
	pool_ran++;
	return 0;
}

BACKEND_TEST(coro_attack, shared_pool_close_waits_for_its_schedulers)
{
	alarm(60);
	rl_loop *loop = tloop(tp);
	struct rl_coro_ctx_options o = { 0 };
	rl_coro_pool *pool;
	rl_coro_ctx *s1, *s2;

	cr_assert_eq(rl_coro_pool_open(&pool, 0), 0);
	o.pool = pool;
	s1 = tsched_opts(loop, &o);
	s2 = tsched_opts(loop, &o);
	cr_assert_eq(rl_coro_spawn(s1, NULL, pool_body, NULL, NULL), 0);
	trun(loop);
	cr_assert_eq(rl_coro_pool_close(pool), -EBUSY);
	cr_assert_eq(rl_coro_spawn(s1, NULL, pool_body, NULL, NULL), 0);
	trun(loop);
	cr_assert_eq(pool_ran, 2);
	tsched_close(s1);
	cr_assert_eq(rl_coro_pool_close(pool), -EBUSY); /* s2's still */
	cr_assert_eq(rl_coro_spawn(s2, NULL, pool_body, NULL, NULL), 0);
	trun(loop);
	cr_assert_eq(pool_ran, 3);
	/* The loop's close closes s2 and lets go of the pool. */
	tclose(loop);
	cr_assert_eq(rl_coro_pool_close(pool), 0);
}
