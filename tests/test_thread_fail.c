/* SPDX-License-Identifier: MIT */
/*
 * test_thread_fail.c - what the library does when the kernel refuses it a
 * thread: rl_loop_open() of an epoll loop (its pool starts its workers
 * there), the epoll slow lane (which starts a worker per job that may
 * block for good, as such jobs come), and loop groups (a thread per loop).
 * Every refusal must be a clear result (-EAGAIN, or the request's data
 * where no thread was needed), never a hang, a crash or a leak.
 *
 * The tests run as root, where RLIMIT_NPROC does not bind, so threads are
 * refused by a real seccomp filter in the test's own process (Criterion
 * runs each test in a process of its own, and the filter goes with it):
 * clone3 fails with ENOSYS, so glibc falls back to clone, and clone with
 * CLONE_THREAD fails with EAGAIN, as at the limit; fork() still works.
 * The filter binds the thread that installs it and the threads it starts
 * later, not those already running. Where some threads must start and a
 * later one not, a user-notification filter lets a supervisor thread
 * (started before the filter, so not bound by it) answer each clone.
 *
 * The io_uring backend starts no thread of its own (the kernel's io-wq
 * workers are not made by clone), so there every request gets its data;
 * the results each test expects say which backend does what. alarm()
 * turns a hang into a failure.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "helpers.h"
#include "ringloop/callback.h"
#include "ringloop/coro.h"

#ifdef TEST_AUDIT_ARCH

#ifndef SECCOMP_FILTER_FLAG_NEW_LISTENER
#define SECCOMP_FILTER_FLAG_NEW_LISTENER (1UL << 3)
#endif
#ifndef SECCOMP_RET_USER_NOTIF
#define SECCOMP_RET_USER_NOTIF 0x7fc00000U
#endif
#ifndef __NR_clone3
#define __NR_clone3 435 /* the same number on every architecture */
#endif
#ifndef CLONE_THREAD
#define CLONE_THREAD 0x00010000
#endif

static bool valgrind(void)
{
	return getenv("RL_VALGRIND") != NULL;
}

/*
 * The filter: clone3 fails with ENOSYS; clone with CLONE_THREAD in its
 * flags (the low word of its first argument, on both architectures) gets
 * thread_action; everything else is allowed. A call of another
 * architecture's numbering kills the process, as in helpers.c.
 */
static void thread_filter(struct sock_filter *f, unsigned short *len,
			  unsigned thread_action)
{
	unsigned k = 0;

	f[k++] = (struct sock_filter)BPF_STMT(
		BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
	f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
					      TEST_AUDIT_ARCH, 1, 0);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
					      SECCOMP_RET_KILL_PROCESS);
	f[k++] = (struct sock_filter)BPF_STMT(
		BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
	f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
					      __NR_clone3, 0, 1);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
					      SECCOMP_RET_ERRNO | ENOSYS);
	f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
					      __NR_clone, 0, 3);
	f[k++] = (struct sock_filter)BPF_STMT(
		BPF_LD | BPF_W | BPF_ABS,
		offsetof(struct seccomp_data, args[0]));
	f[k++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K,
					      CLONE_THREAD, 0, 1);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, thread_action);
	f[k++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
					      SECCOMP_RET_ALLOW);
	*len = (unsigned short)k;
}

/*
 * Refuses every new thread of the calling thread (and of the threads it
 * starts from now on) with EAGAIN, for good. Through prctl(), which
 * Valgrind 3.19 passes on (it does not know the seccomp() syscall).
 * 0 or -errno; asserts nothing, so any thread may call it.
 */
static int deny_threads_here(void)
{
	struct sock_filter f[16];
	struct sock_fprog prog;

	thread_filter(f, &prog.len, SECCOMP_RET_ERRNO | EAGAIN);
	prog.filter = f;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0)
		return -errno;
	return 0;
}

/* The same on the test's thread; skips the test where seccomp is not
 * there. */
static void deny_threads(void)
{
	int ret = deny_threads_here();

	if (ret == -EINVAL || ret == -ENOSYS)
		cr_skip_test("seccomp filters are not available here");
	cr_assert_eq(ret, 0, "PR_SET_SECCOMP: %s", strerror(-ret));
}

static void *nothing(void *arg)
{
	return arg;
}

/* Whether a new thread can start (the filter is in place when not). */
static bool thread_starts(void)
{
	pthread_t th;
	int ret = pthread_create(&th, NULL, nothing, NULL);

	if (ret == 0)
		pthread_join(th, NULL);
	else
		cr_assert_eq(ret, EAGAIN, "pthread_create: %s", strerror(ret));
	return ret == 0;
}

/*
 * A gate: the threads of the test's thread (and of the threads it starts)
 * asked for one at a time. The first main_left threads the test's own
 * thread asks for start, the next ones are refused (EAGAIN); the first
 * others_left that the other threads ask for start, the next ones are
 * refused. The supervisor answers each clone through the filter's
 * listener fd; it runs until the test process ends, and counts in the
 * process's threads and fds.
 */
struct gate {
	int pipe[2]; /* hands the listener fd to the supervisor */
	pid_t main_tid;
	atomic_int main_left;
	atomic_int others_left;
	atomic_int refused;
	pthread_t th;
};

static void *gate_main(void *arg)
{
	struct gate *g = arg;
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;
	int fd;

	if (read(g->pipe[0], &fd, sizeof(fd)) != sizeof(fd))
		return NULL;
	for (;;) {
		bool allow;

		memset(&req, 0, sizeof(req));
		if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) {
			if (errno == EINTR || errno == ENOENT)
				continue;
			return NULL;
		}
		if ((pid_t)req.pid == g->main_tid)
			allow = atomic_fetch_sub(&g->main_left, 1) > 0;
		else
			allow = atomic_fetch_sub(&g->others_left, 1) > 0;
		memset(&resp, 0, sizeof(resp));
		resp.id = req.id;
		if (allow) {
			resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		} else {
			resp.error = -EAGAIN;
			atomic_fetch_add(&g->refused, 1);
		}
		/* ENOENT: the caller was interrupted and will ask again. */
		(void)ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
	}
}

/* Starts the supervisor, then puts the filter on the calling thread.
 * Skips the test where that is not possible (Valgrind 3.19 does not know
 * seccomp(), which alone makes a listener). */
static void gate_open(struct gate *g, int main_left, int others_left)
{
	struct sock_filter f[16];
	struct sock_fprog prog;
	int fd;

	if (valgrind())
		cr_skip_test("Valgrind 3.19 has no seccomp(), so no listener");
	memset(g, 0, sizeof(*g));
	g->main_tid = (pid_t)syscall(SYS_gettid);
	atomic_init(&g->main_left, main_left);
	atomic_init(&g->others_left, others_left);
	cr_assert_eq(pipe2(g->pipe, O_CLOEXEC), 0);
	cr_assert_eq(pthread_create(&g->th, NULL, gate_main, g), 0);
	thread_filter(f, &prog.len, SECCOMP_RET_USER_NOTIF);
	prog.filter = f;
	cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	fd = (int)syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER,
			  SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	if (fd < 0)
		cr_skip_test("no seccomp listener here: %s", strerror(errno));
	cr_assert_eq(write(g->pipe[1], &fd, sizeof(fd)), sizeof(fd));
}

/* ----------------------------------------------------------- plumbing */

/* The process's threads but the kernel's io_uring workers (iou-wrk-*,
 * iou-sqp-*), which come and go as the kernel likes and are not made by
 * clone. */
static int threads_now(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	char path[300], comm[32];
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d))) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue; /* it ended meanwhile */
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = 0;
		fclose(f);
		if (strncmp(comm, "iou-", 4))
			n++;
	}
	closedir(d);
	return n;
}

static bool is_epoll(const struct tp *tp)
{
	return tp->backend == RL_BACKEND_EPOLL;
}

/* What a request ended with: its callback's calls and its result. */
static void expect(const struct tseen *s, int64_t want, const char *what)
{
	cr_assert_eq(s->calls, 1, "%s: %d callbacks", what, s->calls);
	cr_assert_eq(s->result, want, "%s: %lld (%s), want %lld", what,
		     (long long)s->result,
		     s->result < 0 ? rl_strerror((int)s->result) : "bytes",
		     (long long)want);
}

/* -------------------------------------------------------- rl_loop_open */

/*
 * No thread can start: an epoll loop cannot start its pool, and
 * rl_loop_open() says -EAGAIN, leaving no fd, no thread, *out NULL. An
 * io_uring loop needs no thread of its own: it opens and reads.
 */
BACKEND_TEST(thread_fail, open_when_no_thread_can_start)
{
	const char *path = tfile("open", 5000);
	struct rl_options opt;
	struct tseen s = { 0 };
	rl_req req = { .data = &s };
	rl_loop *loop = (rl_loop *)&opt;
	char buf[8192];
	int fds = tfd_count(), threads = threads_now(), ret;

	alarm(20);
	deny_threads();
	cr_assert(!thread_starts(), "the filter lets threads start");
	rl_options_init(&opt);
	opt.backend = tp->backend;
	opt.flags = tp->flags;
	ret = rl_loop_open(&loop, &opt);
	if (is_epoll(tp)) {
		cr_assert_eq(ret, -EAGAIN, "rl_loop_open: %s",
			     rl_strerror(ret));
		cr_assert_null(loop);
	} else {
		cr_assert_eq(ret, 0, "rl_loop_open: %s", rl_strerror(ret));
		cr_assert_eq(rl_fs_read_file(loop, &req, path, buf, sizeof(buf),
					     0, tseen_cb),
			     0);
		trun(loop);
		expect(&s, 5000, "read_file");
		tcheck("open", buf, 5000);
		cr_assert_eq(rl_loop_close(loop), 0);
	}
	cr_assert_eq(tfd_count(), fds, "fds left open");
	cr_assert_eq(threads_now(), threads, "threads left");
	alarm(0);
}

/*
 * The epoll pool gets 2 of the 4 workers it asks for: rl_loop_open()
 * says -EAGAIN, and the two that started are stopped and joined (the
 * process has its threads of before, and the supervisor's).
 */
BACKEND_TEST(thread_fail, open_when_only_some_workers_start)
{
	struct rl_options opt;
	struct gate g;
	rl_loop *loop = NULL;
	int fds, threads, ret;

	alarm(20);
	gate_open(&g, 2, 0);
	fds = tfd_count();
	threads = threads_now();
	rl_options_init(&opt);
	opt.backend = tp->backend;
	opt.flags = tp->flags;
	opt.pool_threads = 4;
	ret = rl_loop_open(&loop, &opt);
	if (is_epoll(tp)) {
		cr_assert_eq(ret, -EAGAIN, "rl_loop_open: %s",
			     rl_strerror(ret));
		cr_assert_null(loop);
		cr_assert_eq(atomic_load(&g.refused), 1);
	} else {
		cr_assert_eq(ret, 0, "rl_loop_open: %s", rl_strerror(ret));
		cr_assert_eq(rl_loop_close(loop), 0);
		cr_assert_eq(atomic_load(&g.refused), 0);
	}
	cr_assert_eq(tfd_count(), fds, "fds left open");
	cr_assert_eq(threads_now(), threads, "threads left");
	alarm(0);
}

/* --------------------------------------------------------- the slow lane */

enum { BIG = 1 << 20, NREG = 24 };

/* A stream the test reads as the loop writes it: a FIFO's or a pipe's
 * reading end, and what came out of it so far (checked against name's
 * pattern byte for byte). */
struct stream {
	const char *name;
	int fd;		/* -1 until the reader comes */
	size_t got;	/* bytes read */
	bool eof;	/* read() said 0 */
	struct tseen w; /* the writing request */
};

/* Reads what is there, without waiting. A FIFO's read gives 0 while it
 * has no writer, also before the writer came: the end is a 0 read after
 * the writing request's callback (which comes after its close). */
static void stream_drain(struct stream *st)
{
	static unsigned char buf[65536];
	bool done = st->w.calls > 0;
	ssize_t n;

	if (st->fd < 0 || st->eof)
		return;
	while ((n = read(st->fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] != tbyte(st->name, st->got + (size_t)i))
				cr_assert_fail(
					"%s: byte %zu is %u, want %u", st->name,
					st->got + (size_t)i, buf[i],
					tbyte(st->name, st->got + (size_t)i));
		st->got += (size_t)n;
	}
	if (n == 0)
		st->eof = done;
	else
		cr_assert_eq(errno, EAGAIN, "%s: %s", st->name,
			     strerror(errno));
}

/* Whether the writer's request and its stream are done with: a FIFO's
 * end seen, or, for a pipe (whose write end the test holds), the
 * writer's bytes, all of them or none. */
static bool stream_settled(struct stream *st, bool fifo)
{
	stream_drain(st);
	if (!st->w.calls)
		return false;
	if (fifo)
		return st->eof;
	return st->w.result < 0 || st->got == (size_t)st->w.result;
}

struct slow_case {
	const struct tp *tp;
	rl_loop *loop;
	const char *fifo_open;	/* rl_fs_open() for writing, no reader */
	struct tseen open;	/* ... its request */
	int open_reader;	/* its reader, when it comes */
	struct stream noreader; /* write_file, FIFO without a reader yet */
	struct stream full;	/* write_file, FIFO whose reader waits */
	struct stream pipe;	/* rl_fs_write to a pipe */
	int pipe_w;
	struct tseen devnull; /* read_file of /dev/null */
	struct tseen reg[NREG], stat[NREG];
	rl_timer readers, drain;
	bool settled;
};

static void drain_cb(rl_timer *t, int status)
{
	struct slow_case *c = t->data;

	if (status)
		return;
	/* Each stream drained on every tick, settled or not. */
	if (stream_settled(&c->noreader, true) +
			    stream_settled(&c->full, true) +
			    stream_settled(&c->pipe, false) ==
		    3 &&
	    c->open.calls) {
		c->settled = true;
		rl_timer_stop(c->loop, t);
	}
}

/* The readers come: on io_uring after a short pause (its requests wait
 * for them), on epoll only once every request of the slow lane has ended
 * by itself (a request that waited for its reader would wait for ever).
 * The pipe's write is not one of those on epoll either: the loop thread
 * polls the pipe for room, so it waits for its reader as on io_uring. */
static void readers_cb(rl_timer *t, int status)
{
	struct slow_case *c = t->data;

	if (status)
		return;
	if (is_epoll(c->tp) && !(c->open.calls && c->noreader.w.calls &&
				 c->full.w.calls && c->devnull.calls))
		return;
	rl_timer_stop(c->loop, t);
	c->open_reader = open(c->fifo_open, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	cr_assert_geq(c->open_reader, 0);
	c->noreader.fd = open(tkeep_path(tpath("noreader")),
			      O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	cr_assert_geq(c->noreader.fd, 0);
	cr_assert_eq(rl_timer_start(c->loop, &c->drain, 1, 1, drain_cb), 0);
}

static void open_cb(rl_req *req)
{
	tseen_cb(req);
	if (req->result >= 0)
		close((int)req->result);
}

static unsigned char *pattern(const char *name, size_t len)
{
	unsigned char *b = malloc(len);

	cr_assert_not_null(b);
	for (size_t i = 0; i < len; i++)
		b[i] = tbyte(name, i);
	return b;
}

/*
 * Submits one of each job the epoll slow lane takes (an open of a FIFO
 * for writing with no reader; write_files into a FIFO with no reader and
 * into one whose reader does not read yet; a read_file of /dev/null,
 * which epoll cannot poll), a write into a pipe, which it took before the
 * loop thread polled pipes for room, and NREG read_files and stats of a
 * regular file, which the regular pool does. Runs the loop until every
 * request has ended and the streams are drained. The expected results
 * are the caller's.
 */
static void slow_case_run(struct slow_case *c, unsigned char **bufs)
{
	const char *path = tkeep_path(tfile("regular", 40000));
	int p[2];
	static char dn[16];
	static unsigned char reg[NREG][40000];
	static struct statx stx[NREG];
	rl_req r_open = { .data = &c->open }, r_nr = { .data = &c->noreader.w },
	       r_full = { .data = &c->full.w }, r_pipe = { .data = &c->pipe.w },
	       r_dn = { .data = &c->devnull }, r_reg[NREG], r_stat[NREG];

	c->noreader.name = "noreader";
	c->full.name = "full";
	c->pipe.name = "pipe";
	c->noreader.fd = c->open_reader = -1;
	tfifo("noreader");
	c->fifo_open = tfifo("open");
	c->full.fd = open(tfifo("full"), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	cr_assert_geq(c->full.fd, 0);
	cr_assert_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	c->pipe.fd = p[0];
	c->pipe_w = p[1];
	bufs[0] = pattern("noreader", BIG);
	bufs[1] = pattern("full", BIG);
	bufs[2] = pattern("pipe", BIG);

	cr_assert_eq(rl_fs_open(c->loop, &r_open, c->fifo_open,
				O_WRONLY | O_CLOEXEC, 0, open_cb),
		     0);
	cr_assert_eq(rl_fs_write_file(c->loop, &r_nr,
				      tkeep_path(tpath("noreader")), bufs[0],
				      BIG, 0, 0600, tseen_cb),
		     0);
	cr_assert_eq(rl_fs_write_file(c->loop, &r_full,
				      tkeep_path(tpath("full")), bufs[1], BIG,
				      0, 0600, tseen_cb),
		     0);
	cr_assert_eq(rl_fs_write(c->loop, &r_pipe, c->pipe_w, bufs[2], BIG, -1,
				 tseen_cb),
		     0);
	cr_assert_eq(rl_fs_read_file(c->loop, &r_dn, "/dev/null", dn,
				     sizeof(dn), 0, tseen_cb),
		     0);
	for (int i = 0; i < NREG; i++) {
		memset(&r_reg[i], 0, sizeof(r_reg[i]));
		memset(&r_stat[i], 0, sizeof(r_stat[i]));
		r_reg[i].data = &c->reg[i];
		r_stat[i].data = &c->stat[i];
		cr_assert_eq(rl_fs_read_file(c->loop, &r_reg[i], path, reg[i],
					     sizeof(reg[i]), 0, tseen_cb),
			     0);
		cr_assert_eq(rl_fs_stat(c->loop, &r_stat[i], path, &stx[i],
					tseen_cb),
			     0);
	}
	c->readers.data = c->drain.data = c;
	cr_assert_eq(rl_timer_start(c->loop, &c->readers,
				    is_epoll(c->tp) ? 1 : 30,
				    is_epoll(c->tp) ? 1 : 0, readers_cb),
		     0);
	trun(c->loop);
	cr_assert(c->settled);
	for (int i = 0; i < NREG; i++) {
		expect(&c->reg[i], 40000, "regular read_file");
		tcheck("regular", reg[i], 40000);
		expect(&c->stat[i], 0, "stat");
		cr_assert_eq(stx[i].stx_size, 40000);
	}
}

static void slow_case_close(struct slow_case *c, unsigned char **bufs)
{
	close(c->open_reader);
	close(c->noreader.fd);
	close(c->full.fd);
	close(c->pipe.fd);
	close(c->pipe_w);
	tclose(c->loop);
	for (int i = 0; i < 3; i++)
		free(bufs[i]);
}

/*
 * The epoll slow lane cannot start a worker (the filter comes after
 * rl_loop_open(), so the regular pool has its workers): every job of
 * the lane ends at once with -EAGAIN, without a later submission to
 * unstick it, a write_file into a full FIFO after the prefix that fitted
 * (its fd closed: the reader sees the end), and the regular pool's reads
 * and stats complete. The write into a pipe needs no thread on either
 * backend: all of it comes out. io_uring gives every request its data.
 */
BACKEND_TEST(thread_fail, slow_lane_cannot_grow)
{
	struct slow_case c;
	unsigned char *bufs[3];
	int base, threads;

	memset(&c, 0, sizeof(c));
	c.tp = tp;
	signal(SIGPIPE, SIG_IGN);
	alarm(40);
	base = threads_now();
	c.loop = tloop(tp);
	threads = threads_now(); /* with the regular pool's workers */
	deny_threads();
	slow_case_run(&c, bufs);
	if (is_epoll(tp)) {
		expect(&c.open, -EAGAIN, "open of a FIFO with no reader");
		expect(&c.noreader.w, -EAGAIN, "write_file, no reader");
		cr_assert_eq(c.noreader.got, 0);
		/* The prefix a regular worker wrote before the hand-over
		 * (what the pipe holds), then the end. */
		expect(&c.full.w, -EAGAIN, "write_file, full FIFO");
		cr_assert_gt(c.full.got, 0);
		cr_assert_lt(c.full.got, BIG);
		expect(&c.devnull, -EAGAIN, "read_file of /dev/null");
	} else {
		cr_assert_eq(c.open.calls, 1);
		cr_assert_geq(c.open.result, 0, "open: %s",
			      rl_strerror((int)c.open.result));
		expect(&c.noreader.w, BIG, "write_file, no reader");
		cr_assert_eq(c.noreader.got, BIG);
		expect(&c.full.w, BIG, "write_file, full FIFO");
		cr_assert_eq(c.full.got, BIG);
		expect(&c.devnull, 0, "read_file of /dev/null");
	}
	expect(&c.pipe.w, BIG, "write into a pipe");
	cr_assert_eq(c.pipe.got, BIG);
	cr_assert_eq(threads_now(), threads, "a thread started");
	slow_case_close(&c, bufs);
	cr_assert_eq(threads_now(), base, "threads left");
	alarm(0);
}

/* ------------------------------------------------- pipe writes need no thread */

/* FILL_MAX: at most what a pipe holds before the writes (64 KiB unless
 * pipe-max-size says otherwise, and never past 1 MiB here). */
enum { NPIPE = 8, PBIG = 256 << 10, FILL_MAX = 1 << 20 };

/*
 * Writes into pipes nobody reads wait for room without a thread of their
 * own on either backend (epoll polls the pipe on the loop thread), so
 * they work with threads refused, and with no pool signal (-1) a cancel
 * still ends one at once: NPIPE writes of PBIG bytes into full pipes,
 * then every other one cancelled (-ECANCELED, once, with no reader in
 * sight), then the rest drained: all their bytes, in order, and len in
 * their callbacks. No thread started meanwhile. Each pipe is filled with
 * the start of the pattern and written the rest, so that stream_drain()
 * checks one pattern from byte 0.
 */
BACKEND_TEST(thread_fail, pipe_writes_wait_without_a_thread)
{
	struct rl_options opt = { .pool_signal = -1 };
	struct stream st[NPIPE];
	rl_req req[NPIPE];
	unsigned char *data = pattern("pipes", FILL_MAX + PBIG);
	size_t fill[NPIPE] = { 0 };
	int pw[NPIPE], base, threads, open_writes;
	rl_loop *loop;
	ssize_t n;

	signal(SIGPIPE, SIG_IGN);
	alarm(40);
	base = threads_now();
	loop = tloop_opts(tp, &opt);
	threads = threads_now();
	deny_threads();
	memset(st, 0, sizeof(st));
	for (int i = 0; i < NPIPE; i++) {
		int p[2];

		cr_assert_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
		while (fill[i] < FILL_MAX &&
		       (n = write(p[1], data + fill[i], FILL_MAX - fill[i])) >
			       0)
			fill[i] += (size_t)n;
		cr_assert(fill[i] > 0 && fill[i] < FILL_MAX, "fill %zu",
			  fill[i]);
		cr_assert_eq(fcntl(p[1], F_SETFL, 0), 0);
		st[i].name = "pipes";
		st[i].fd = p[0];
		pw[i] = p[1];
		memset(&req[i], 0, sizeof(req[i]));
		req[i].data = &st[i].w;
		cr_assert_eq(rl_fs_write(loop, &req[i], pw[i], data + fill[i],
					 PBIG, -1, tseen_cb),
			     0);
	}
	for (int t = 0; t < 50; t++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(1000);
	}
	for (int i = 0; i < NPIPE; i++)
		cr_assert_eq(st[i].w.calls, 0, "write %d ended: %lld", i,
			     (long long)st[i].w.result);
	for (int i = 0; i < NPIPE; i += 2)
		cr_assert_eq(rl_cancel(loop, &req[i]), 0);
	for (int t = 0; t < 2000; t++) {
		bool all = true;

		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		for (int i = 0; i < NPIPE; i += 2)
			all = all && st[i].w.calls;
		if (all)
			break;
		usleep(1000);
	}
	for (int i = 0; i < NPIPE; i += 2)
		expect(&st[i].w, -ECANCELED, "a cancelled pipe write");
	do {
		open_writes = 0;
		for (int i = 1; i < NPIPE; i += 2) {
			stream_drain(&st[i]);
			open_writes += !st[i].w.calls;
		}
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(200);
	} while (open_writes);
	for (int i = 1; i < NPIPE; i += 2) {
		stream_drain(&st[i]);
		expect(&st[i].w, PBIG, "a drained pipe write");
		cr_assert_eq(st[i].got, fill[i] + PBIG);
	}
	cr_assert_eq(threads_now(), threads, "a thread started");
	for (int i = 0; i < NPIPE; i++) {
		close(st[i].fd);
		close(pw[i]);
	}
	tclose(loop);
	cr_assert_eq(threads_now(), base, "threads left");
	free(data);
	alarm(0);
}

/* ------------------------------------------- the slow lane, its workers busy */

static const char *a_fifo;
static int a_reader = -1;

/* B ended: only now may A's reader come, so that A, whose worker blocks
 * in its open, cannot make room for B first. */
static void b_cb(rl_req *req)
{
	open_cb(req);
	a_reader = open(a_fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	cr_assert_geq(a_reader, 0);
}

static void b_reader_cb(rl_timer *t, int status)
{
	cr_assert_eq(status, 0);
	*(int *)t->data =
		open(tkeep_path(tpath("b")), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	cr_assert_geq(*(int *)t->data, 0);
}

/*
 * The slow lane has a worker, blocked in the open of FIFO A for writing
 * (no reader), when threads are refused; then an open of FIFO B, whose
 * reader comes after 30 ms, and A's reader only once B has ended. On
 * epoll B ends at once with -EAGAIN (before: it waited on the lane's
 * queue for A's worker, which waited for A's reader: for ever); A then
 * gets its fd. io_uring opens both.
 */
BACKEND_TEST(thread_fail, slow_lane_busy_and_cannot_grow)
{
	struct tseen a = { 0 }, b = { 0 };
	rl_req ra = { .data = &a }, rb = { .data = &b };
	rl_timer t = { 0 };
	int b_reader = -1, base, threads;
	rl_loop *loop;

	a_fifo = tfifo("a");
	tfifo("b");
	alarm(30);
	base = threads_now();
	loop = tloop(tp);
	threads = threads_now();
	cr_assert_eq(
		rl_fs_open(loop, &ra, a_fifo, O_WRONLY | O_CLOEXEC, 0, open_cb),
		0);
	/* On epoll, A goes to the slow lane, which starts its worker. */
	for (int i = 0; i < 2000 && is_epoll(tp) && threads_now() == threads;
	     i++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(1000);
	}
	if (is_epoll(tp))
		cr_assert_eq(threads_now(), threads + 1, "no slow worker");
	cr_assert_eq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(a.calls, 0);
	deny_threads();
	cr_assert_eq(rl_fs_open(loop, &rb, tkeep_path(tpath("b")),
				O_WRONLY | O_CLOEXEC, 0, b_cb),
		     0);
	/* On epoll, B must end by itself: its reader never comes. */
	t.data = &b_reader;
	if (!is_epoll(tp))
		cr_assert_eq(rl_timer_start(loop, &t, 30, 0, b_reader_cb), 0);
	trun(loop);
	cr_assert_eq(a.calls, 1);
	cr_assert_geq(a.result, 0, "A: %s", rl_strerror((int)a.result));
	if (is_epoll(tp))
		expect(&b, -EAGAIN, "B");
	else
		cr_assert(b.calls == 1 && b.result >= 0, "B: %d calls, %s",
			  b.calls, rl_strerror((int)b.result));
	cr_assert_eq(threads_now(), threads + is_epoll(tp), "a thread started");
	close(a_reader);
	if (b_reader >= 0)
		close(b_reader);
	tclose(loop);
	cr_assert_eq(threads_now(), base, "threads left");
	alarm(0);
}

/* ----------------------------------------------- a burst bigger than the pool */

enum { BURST_REG = 400, BURST_FIFO = 16, BURST_DEV = 16, WARM = 2 };

struct burst {
	const struct tp *tp;
	rl_loop *loop;
	const char *fifo[BURST_FIFO];
	int reader[BURST_FIFO];
	struct tseen sfifo[BURST_FIFO], sdev[BURST_DEV];
	int workers; /* the slow lane's, all idle when threads are refused */
	rl_timer readers;
};

static int burst_slow_ended(const struct burst *b)
{
	int n = 0;

	for (int i = 0; i < BURST_FIFO; i++)
		n += b->sfifo[i].calls;
	for (int i = 0; i < BURST_DEV; i++)
		n += b->sdev[i].calls;
	return n;
}

/* The FIFOs' readers come: on io_uring after 30 ms; on epoll once every
 * slow-lane job has ended but those its workers may be running (a FIFO's
 * open there waits for its reader): no job may wait in the lane's queue
 * for a worker. */
static void burst_readers_cb(rl_timer *t, int status)
{
	struct burst *b = t->data;

	if (status)
		return;
	if (is_epoll(b->tp) &&
	    burst_slow_ended(b) < BURST_FIFO + BURST_DEV - b->workers)
		return;
	rl_timer_stop(b->loop, t);
	for (int i = 0; i < BURST_FIFO; i++) {
		b->reader[i] =
			open(b->fifo[i], O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		cr_assert_geq(b->reader[i], 0);
	}
}

/*
 * An epoll pool of 2 workers, and a slow lane with WARM idle workers at
 * most (read_files of /dev/null started them), when threads are
 * refused; then, at once, 400 read_files and 400 stats of regular files,
 * opens of 16 FIFOs for writing (their readers come later) and 16
 * read_files of /dev/null. The regular jobs all complete, correct; of the
 * 32 slow-lane jobs on epoll the lane's idle workers take some, the
 * others end with -EAGAIN, and no thread starts; io_uring gives every
 * request its data.
 */
BACKEND_TEST(thread_fail, burst_bigger_than_the_pool)
{
	static unsigned char reg[BURST_REG][3000];
	static struct statx stx[BURST_REG];
	static char dn[BURST_DEV + WARM][8];
	static struct tseen sreg[BURST_REG], sstat[BURST_REG], swarm[WARM];
	static rl_req rreg[BURST_REG], rstat[BURST_REG], rfifo[BURST_FIFO],
		rdev[BURST_DEV], rwarm[WARM];
	const char *paths[4];
	struct rl_options opt;
	struct burst b;
	int base, threads, fds = 0, eagain = 0;

	memset(&b, 0, sizeof(b));
	b.tp = tp;
	for (int i = 0; i < 4; i++) {
		char name[16];

		snprintf(name, sizeof(name), "reg%d", i);
		paths[i] = tkeep_path(tfile(name, 1000 + 500 * (size_t)i));
	}
	for (int i = 0; i < BURST_FIFO; i++) {
		char name[16];

		snprintf(name, sizeof(name), "fifo%d", i);
		b.fifo[i] = tfifo(name);
		b.reader[i] = -1;
	}
	alarm(40);
	base = threads_now();
	rl_options_init(&opt);
	opt.pool_threads = 2;
	b.loop = tloop_opts(tp, &opt);
	threads = threads_now();
	/* The slow lane's warm-up (epoll: /dev/null cannot be polled). */
	for (int i = 0; i < WARM; i++) {
		rwarm[i].data = &swarm[i];
		cr_assert_eq(rl_fs_read_file(b.loop, &rwarm[i], "/dev/null",
					     dn[BURST_DEV + i], 8, 0, tseen_cb),
			     0);
	}
	trun(b.loop);
	for (int i = 0; i < WARM; i++)
		expect(&swarm[i], 0, "warm-up read_file of /dev/null");
	b.workers = threads_now() - threads;
	cr_assert_leq(b.workers, is_epoll(tp) ? WARM : 0);
	threads += b.workers;

	deny_threads();
	for (int i = 0; i < BURST_REG; i++) {
		rreg[i].data = &sreg[i];
		rstat[i].data = &sstat[i];
		cr_assert_eq(rl_fs_read_file(b.loop, &rreg[i], paths[i % 4],
					     reg[i], sizeof(reg[i]), 0,
					     tseen_cb),
			     0);
		cr_assert_eq(rl_fs_stat(b.loop, &rstat[i], paths[i % 4],
					&stx[i], tseen_cb),
			     0);
	}
	for (int i = 0; i < BURST_FIFO; i++) {
		rfifo[i].data = &b.sfifo[i];
		cr_assert_eq(rl_fs_open(b.loop, &rfifo[i], b.fifo[i],
					O_WRONLY | O_CLOEXEC, 0, open_cb),
			     0);
	}
	for (int i = 0; i < BURST_DEV; i++) {
		rdev[i].data = &b.sdev[i];
		cr_assert_eq(rl_fs_read_file(b.loop, &rdev[i], "/dev/null",
					     dn[i], 8, 0, tseen_cb),
			     0);
	}
	b.readers.data = &b;
	cr_assert_eq(rl_timer_start(b.loop, &b.readers, is_epoll(tp) ? 1 : 30,
				    is_epoll(tp) ? 1 : 0, burst_readers_cb),
		     0);
	trun(b.loop);
	for (int i = 0; i < BURST_REG; i++) {
		char name[16];

		snprintf(name, sizeof(name), "reg%d", i % 4);
		expect(&sreg[i], 1000 + 500 * (i % 4), "read_file");
		tcheck(name, reg[i], (size_t)(1000 + 500 * (i % 4)));
		expect(&sstat[i], 0, "stat");
		cr_assert_eq(stx[i].stx_size, (uint64_t)(1000 + 500 * (i % 4)));
	}
	for (int i = 0; i < BURST_FIFO + BURST_DEV; i++) {
		struct tseen *s =
			i < BURST_FIFO ? &b.sfifo[i] : &b.sdev[i - BURST_FIFO];

		cr_assert_eq(s->calls, 1);
		if (s->result == -EAGAIN)
			eagain++;
		else if (s->result >= 0)
			fds++;
		else
			cr_assert_fail("slow job %d: %s", i,
				       rl_strerror((int)s->result));
	}
	/* A worker busy in an open takes nothing else meanwhile; one that
	 * read /dev/null may have taken another: at least one job each got
	 * no worker on epoll. */
	if (is_epoll(tp))
		cr_assert_geq(eagain, 1);
	else
		cr_assert_eq(eagain, 0);
	cr_assert_eq(threads_now(), threads, "a thread started");
	for (int i = 0; i < BURST_FIFO; i++)
		close(b.reader[i]);
	tclose(b.loop);
	cr_assert_eq(threads_now(), base, "threads left");
	alarm(0);
}

/* --------------------------------------------------------------- groups */

static void group_opts(const struct tp *tp, struct rl_group_options *opt,
		       unsigned loops)
{
	rl_group_options_init(opt);
	opt->loops = loops;
	opt->loop.backend = tp->backend;
	opt->loop.flags = tp->flags;
	opt->loop.pool_threads = 1;
}

/*
 * No thread at all: an epoll group's loop 0 cannot start its pool, an
 * io_uring group's 2nd thread cannot start. rl_group_open() says
 * -EAGAIN, *out NULL, and loop 0 is closed: no fd, no thread left.
 */
BACKEND_TEST(thread_fail, group_open_when_no_thread_can_start)
{
	struct rl_group_options opt;
	rl_group *g = (rl_group *)&opt;
	int fds = tfd_count(), threads = threads_now(), ret;

	alarm(20);
	deny_threads();
	group_opts(tp, &opt, 3);
	ret = rl_group_open(&g, &opt);
	cr_assert_eq(ret, -EAGAIN, "rl_group_open: %s", rl_strerror(ret));
	cr_assert_null(g);
	cr_assert_eq(tfd_count(), fds, "fds left open");
	cr_assert_eq(threads_now(), threads, "threads left");
	alarm(0);
}

/*
 * The 3rd loop's thread of a group of 4 cannot start, after the 2nd
 * started and opened its loop (on epoll with its pool's worker, which
 * the 2nd thread starts itself): rl_group_open() says -EAGAIN, and the
 * 2nd thread and its worker are stopped and joined, loop 0 closed.
 */
BACKEND_TEST(thread_fail, group_third_thread_refused)
{
	struct rl_group_options opt;
	struct gate g;
	rl_group *grp = NULL;
	int fds, threads, ret;

	alarm(20);
	/* Loop 0's pool worker (epoll), then the 2nd loop's thread. */
	gate_open(&g, is_epoll(tp) ? 2 : 1, 1000);
	fds = tfd_count();
	threads = threads_now();
	group_opts(tp, &opt, 4);
	ret = rl_group_open(&grp, &opt);
	cr_assert_eq(ret, -EAGAIN, "rl_group_open: %s", rl_strerror(ret));
	cr_assert_null(grp);
	cr_assert_eq(atomic_load(&g.refused), 1);
	cr_assert_eq(tfd_count(), fds, "fds left open");
	cr_assert_eq(threads_now(), threads, "threads left");
	alarm(0);
}

/*
 * Every group thread starts, but of the threads they start themselves
 * only the first others_left do: epoll loops that cannot start their
 * pools fail to open, so rl_group_open() says -EAGAIN and every thread
 * is joined, the loops that did open (with their workers) closed on
 * their own threads; io_uring loops need none, and the group opens,
 * reads and closes.
 */
static void group_member_pools(const struct tp *tp, int others_left)
{
	const char *path = tkeep_path(tfile("member", 3000));
	struct rl_group_options opt;
	struct gate g;
	struct tseen s = { 0 };
	rl_req req = { .data = &s };
	char buf[4096];
	rl_group *grp = NULL;
	int fds, threads, ret;

	alarm(20);
	gate_open(&g, 1000, others_left);
	fds = tfd_count();
	threads = threads_now();
	group_opts(tp, &opt, 3);
	opt.flags = RL_GROUP_SPREAD;
	ret = rl_group_open(&grp, &opt);
	if (is_epoll(tp)) {
		cr_assert_eq(ret, -EAGAIN, "rl_group_open: %s",
			     rl_strerror(ret));
		cr_assert_null(grp);
		cr_assert_eq(atomic_load(&g.refused), 2 - others_left);
	} else {
		cr_assert_eq(ret, 0, "rl_group_open: %s", rl_strerror(ret));
		for (int i = 0; i < 3; i++) {
			memset(&s, 0, sizeof(s));
			cr_assert_eq(rl_fs_read_file(rl_group_loop(grp, 0),
						     &req, path, buf,
						     sizeof(buf), 0, tseen_cb),
				     0);
			trun(rl_group_loop(grp, 0));
			expect(&s, 3000, "read_file");
			tcheck("member", buf, 3000);
		}
		cr_assert_eq(rl_group_close(grp), 0);
		cr_assert_eq(atomic_load(&g.refused), 0);
	}
	cr_assert_eq(tfd_count(), fds, "fds left open");
	cr_assert_eq(threads_now(), threads, "threads left");
	alarm(0);
}

BACKEND_TEST(thread_fail, group_loops_cannot_start_their_pools)
{
	group_member_pools(tp, 0);
}

/* One of the two other loops opens, with its worker, the other not. */
BACKEND_TEST(thread_fail, group_one_loop_cannot_start_its_pool)
{
	group_member_pools(tp, 1);
}

/* ----------------------------------------- a spread burst, threads refused */

enum { SPREAD_LOOPS = 3, SPREAD_REG = 90, SPREAD_DEV = 9 };

struct spread {
	atomic_int denied; /* loops whose thread has the filter */
	atomic_int failed; /* -errno of a filter that did not go in */
	const char *paths[3];
	struct tseen sreg[SPREAD_REG], sdev[SPREAD_DEV];
	rl_req rreg[SPREAD_REG], rdev[SPREAD_DEV];
	unsigned char reg[SPREAD_REG][5000];
	char dn[SPREAD_DEV][8];
};

/* On every loop's thread: the filter; on loop 0, once every loop has it,
 * the burst, spread over the group. */
static void spread_share(rl_loop *loop, unsigned i, void *arg)
{
	struct spread *sp = arg;
	int ret = deny_threads_here();
	uint64_t until = tnow_ms() + 10000;

	if (ret < 0)
		atomic_store(&sp->failed, ret);
	atomic_fetch_add(&sp->denied, 1);
	if (i != 0)
		return;
	while (atomic_load(&sp->denied) < SPREAD_LOOPS && tnow_ms() < until)
		usleep(1000);
	if (atomic_load(&sp->denied) < SPREAD_LOOPS || atomic_load(&sp->failed))
		return; /* the test fails on it */
	for (int k = 0; k < SPREAD_REG; k++) {
		sp->rreg[k].data = &sp->sreg[k];
		if (rl_fs_read_file(loop, &sp->rreg[k], sp->paths[k % 3],
				    sp->reg[k], sizeof(sp->reg[k]), 0,
				    tseen_cb))
			sp->sreg[k].calls = -1000;
	}
	for (int k = 0; k < SPREAD_DEV; k++) {
		sp->rdev[k].data = &sp->sdev[k];
		if (rl_fs_read_file(loop, &sp->rdev[k], "/dev/null", sp->dn[k],
				    sizeof(sp->dn[k]), 0, tseen_cb))
			sp->sdev[k].calls = -1000;
	}
}

/*
 * A group of 3 spreading loops, whose threads (loop 0's included) all
 * refuse new threads from the moment the burst starts: 90 read_files of
 * regular files and 9 of /dev/null, spread over the group. Every
 * request completes on loop 0, once: the regular ones with their bytes,
 * /dev/null with 0 on io_uring and, on epoll, where it needs the slow
 * lane of whichever loop read it, with -EAGAIN. Then the group closes,
 * leaving nothing.
 */
BACKEND_TEST(thread_fail, spread_burst_on_a_group)
{
	struct spread *sp = calloc(1, sizeof(*sp));
	struct rl_group_options opt;
	rl_group *g;
	int fds, threads;

	cr_assert_not_null(sp);
	for (int i = 0; i < 3; i++) {
		char name[16];

		snprintf(name, sizeof(name), "spread%d", i);
		sp->paths[i] = tkeep_path(tfile(name, 2000 + 1000 * (size_t)i));
	}
	alarm(40);
	fds = tfd_count();
	threads = threads_now();
	group_opts(tp, &opt, SPREAD_LOOPS);
	opt.flags = RL_GROUP_SPREAD;
	g = tgroup_opts(tp, &opt);
	cr_assert_eq(rl_group_run(g, spread_share, sp), 0);
	if (atomic_load(&sp->failed) == -EINVAL ||
	    atomic_load(&sp->failed) == -ENOSYS) {
		cr_assert_eq(rl_group_close(g), 0);
		cr_skip_test("seccomp filters are not available here");
	}
	cr_assert_eq(atomic_load(&sp->failed), 0);
	cr_assert_eq(atomic_load(&sp->denied), SPREAD_LOOPS);
	for (int k = 0; k < SPREAD_REG; k++) {
		char name[16];

		snprintf(name, sizeof(name), "spread%d", k % 3);
		expect(&sp->sreg[k], 2000 + 1000 * (k % 3), "read_file");
		tcheck(name, sp->reg[k], (size_t)(2000 + 1000 * (k % 3)));
	}
	for (int k = 0; k < SPREAD_DEV; k++)
		expect(&sp->sdev[k], is_epoll(tp) ? -EAGAIN : 0,
		       "read_file of /dev/null");
	cr_assert_eq(rl_group_close(g), 0);
	cr_assert_eq(tfd_count(), fds, "fds left open");
	cr_assert_eq(threads_now(), threads, "threads left");
	free(sp);
	alarm(0);
}

/* ------------------------------------------------------------ the styles */

struct styles {
	int pipe_w;
	int64_t co_dev, co_write, co_reg; /* the coroutine's results */
	int cb_calls, cb_err;
	size_t cb_len;
	char dn[8], reg[3000];
};

static int64_t styles_coro(void *arg)
{
	struct styles *st = arg;

	st->co_dev = rl_coro_fs_read_file("/dev/null", st->dn, sizeof(st->dn));
	st->co_write = rl_coro_fs_write(st->pipe_w, "hello", 5, -1);
	st->co_reg =
		rl_coro_fs_read_file(tpath("styles"), st->reg, sizeof(st->reg));
	return 0;
}

static void styles_cb(int err, const void *data, size_t len, void *arg)
{
	struct styles *st = arg;

	(void)data;
	st->cb_calls++;
	st->cb_err = err;
	st->cb_len = len;
}

/*
 * The styles carry the refusal as any error: with threads refused after
 * rl_loop_open(), a coroutine's read_file of /dev/null (which needs the
 * epoll slow lane) returns -EAGAIN on epoll, its result on io_uring; its
 * write into a pipe (polled by the loop thread on epoll) and its
 * read_file of a regular file their results on both; a callback-style
 * read_file of /dev/null says -EAGAIN (epoll) or 0 bytes.
 */
BACKEND_TEST(thread_fail, styles_see_the_refusal)
{
	struct styles st = { 0 };
	rl_coro_ctx *ctx;
	rl_cb_ctx *cbs;
	rl_loop *loop;
	char got[8];
	int p[2];

	tfile("styles", 2000);
	alarm(20);
	loop = tloop(tp);
	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	st.pipe_w = p[1];
	cr_assert_eq(rl_coro_ctx_open(loop, &ctx, NULL), 0);
	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	deny_threads();
	cr_assert_eq(rl_coro_spawn(ctx, NULL, styles_coro, &st, NULL), 0);
	cr_assert_eq(rl_cb_fs_read_file_buf(cbs, "/dev/null", st.dn,
					    sizeof(st.dn), styles_cb, &st),
		     0);
	trun(loop);
	cr_assert_eq(st.co_reg, 2000);
	tcheck("styles", st.reg, 2000);
	cr_assert_eq(st.cb_calls, 1);
	if (is_epoll(tp)) {
		cr_assert_eq(st.co_dev, -EAGAIN);
		cr_assert_eq(st.cb_err, -EAGAIN);
	} else {
		cr_assert_eq(st.co_dev, 0);
		cr_assert(st.cb_err == 0 && st.cb_len == 0);
	}
	cr_assert_eq(st.co_write, 5);
	cr_assert_eq(read(p[0], got, sizeof(got)), 5);
	cr_assert_eq(memcmp(got, "hello", 5), 0);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	cr_assert_eq(rl_coro_ctx_close(ctx), 0);
	close(p[0]);
	close(p[1]);
	tclose(loop);
	alarm(0);
}

#endif /* TEST_AUDIT_ARCH */
