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
 * Skips the test where seccomp is not there.
 */
static void deny_threads(void)
{
	struct sock_filter f[16];
	struct sock_fprog prog;

	thread_filter(f, &prog.len, SECCOMP_RET_ERRNO | EAGAIN);
	prog.filter = f;
	cr_assert_eq(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0) {
		cr_assert(errno == EINVAL || errno == ENOSYS,
			  "PR_SET_SECCOMP: %s", strerror(errno));
		cr_skip_test("seccomp filters are not available here");
	}
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
 * thread asks for start, the next ones are refused (EAGAIN); those other
 * threads ask for start when others_ok, else are refused. The supervisor
 * answers each clone through the filter's listener fd; it runs until the
 * test process ends, and counts in the process's threads and fds.
 */
struct gate {
	int pipe[2]; /* hands the listener fd to the supervisor */
	pid_t main_tid;
	atomic_int main_left;
	bool others_ok;
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
			allow = g->others_ok;
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
static void gate_open(struct gate *g, int main_left, bool others_ok)
{
	struct sock_filter f[16];
	struct sock_fprog prog;
	int fd;

	if (valgrind())
		cr_skip_test("Valgrind 3.19 has no seccomp(), so no listener");
	memset(g, 0, sizeof(*g));
	g->main_tid = (pid_t)syscall(SYS_gettid);
	atomic_init(&g->main_left, main_left);
	g->others_ok = others_ok;
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

/* A path that stays valid for the whole test (tpath() recycles four). */
static const char *keep_path(const char *path)
{
	static char kept[32][512];
	static int n;

	cr_assert_lt(n, 32);
	snprintf(kept[n], sizeof(kept[n]), "%s", path);
	return kept[n++];
}

static const char *make_fifo(const char *name)
{
	const char *path = keep_path(tpath(name));

	cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo: %s", strerror(errno));
	return path;
}

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
BACKEND_TEST(thread_fail, open_when_no_thread_can_start, .timeout = 30)
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
		cr_assert_eq(rl_fs_read_file(loop, &req, path, buf,
					     sizeof(buf), 0, tseen_cb),
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
BACKEND_TEST(thread_fail, open_when_only_some_workers_start, .timeout = 30)
{
	struct rl_options opt;
	struct gate g;
	rl_loop *loop = NULL;
	int fds, threads, ret;

	alarm(20);
	gate_open(&g, 2, false);
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
	int fd;	       /* -1 until the reader comes */
	size_t got;    /* bytes read */
	bool eof;      /* read() said 0 */
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
	const char *fifo_open;	 /* rl_fs_open() for writing, no reader */
	struct tseen open;	 /* ... its request */
	int open_reader;	 /* its reader, when it comes */
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
	    3 && c->open.calls) {
		c->settled = true;
		rl_timer_stop(c->loop, t);
	}
}

/* The readers come, late: by then epoll has refused what it could not
 * start a worker for, and io_uring waits for them. */
static void readers_cb(rl_timer *t, int status)
{
	struct slow_case *c = t->data;

	cr_assert_eq(status, 0);
	c->open_reader = open(c->fifo_open, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	cr_assert_geq(c->open_reader, 0);
	c->noreader.fd = open(keep_path(tpath("noreader")),
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
 * into one whose reader does not read yet; a write into a pipe; a
 * read_file of /dev/null, which epoll cannot poll) and NREG read_files
 * and stats of a regular file, which the regular pool does. Runs the
 * loop until every request has ended and the streams are drained. The
 * expected results are the caller's.
 */
static void slow_case_run(struct slow_case *c, unsigned char **bufs)
{
	const char *path = keep_path(tfile("regular", 40000));
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
	make_fifo("noreader");
	c->fifo_open = make_fifo("open");
	c->full.fd = open(make_fifo("full"), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
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
	cr_assert_eq(rl_fs_write_file(c->loop, &r_nr, keep_path(tpath("noreader")),
				      bufs[0], BIG, 0, 0600, tseen_cb),
		     0);
	cr_assert_eq(rl_fs_write_file(c->loop, &r_full, keep_path(tpath("full")),
				      bufs[1], BIG, 0, 0600, tseen_cb),
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
	cr_assert_eq(rl_timer_start(c->loop, &c->readers, 30, 0, readers_cb),
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
 * and stats complete. io_uring gives every request its data.
 */
BACKEND_TEST(thread_fail, slow_lane_cannot_grow, .timeout = 60)
{
	struct slow_case c;
	unsigned char *bufs[3];
	int threads;

	memset(&c, 0, sizeof(c));
	c.tp = tp;
	signal(SIGPIPE, SIG_IGN);
	alarm(40);
	c.loop = tloop(tp);
	threads = threads_now();
	deny_threads();
	slow_case_run(&c, bufs);
	if (is_epoll(tp)) {
		expect(&c.open, -EAGAIN, "open of a FIFO with no reader");
		expect(&c.noreader.w, -EAGAIN, "write_file, no reader");
		cr_assert_eq(c.noreader.got, 0);
		/* The prefix a regular worker wrote before the hand-over
		 * (the pipe's size), then the end; all of it only when the
		 * reader drained it before the pipe was full. */
		cr_assert_eq(c.full.w.calls, 1);
		if (c.full.w.result != BIG) {
			expect(&c.full.w, -EAGAIN, "write_file, full FIFO");
			cr_assert_lt(c.full.got, BIG);
		}
		expect(&c.pipe.w, -EAGAIN, "write into a pipe");
		cr_assert_eq(c.pipe.got, 0);
		expect(&c.devnull, -EAGAIN, "read_file of /dev/null");
	} else {
		cr_assert_eq(c.open.calls, 1);
		cr_assert_geq(c.open.result, 0, "open: %s",
			      rl_strerror((int)c.open.result));
		expect(&c.noreader.w, BIG, "write_file, no reader");
		cr_assert_eq(c.noreader.got, BIG);
		expect(&c.full.w, BIG, "write_file, full FIFO");
		cr_assert_eq(c.full.got, BIG);
		expect(&c.pipe.w, BIG, "write into a pipe");
		cr_assert_eq(c.pipe.got, BIG);
		expect(&c.devnull, 0, "read_file of /dev/null");
	}
	cr_assert_eq(threads_now(), threads, "a thread started");
	slow_case_close(&c, bufs);
	alarm(0);
}

#endif /* TEST_AUDIT_ARCH */
