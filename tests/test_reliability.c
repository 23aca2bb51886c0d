/* SPDX-License-Identifier: MIT */
/*
 * test_reliability.c - exhaustion, faults and hostile input: the loop must
 * queue rather than fail, report a clear -errno, and never lose or repeat
 * a completion.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

struct tally {
	int calls;
	int bad;
	int64_t last;
};

static void tally_cb(rl_req *req)
{
	struct tally *t = req->data;

	t->calls++;
	t->last = req->result;
}

/* 10,000 reads at once with only 64 fds: every read must complete, with
 * the right content, by waiting for an fd or a slot, never with EMFILE. */
BACKEND_TEST(reliability, low_nofile_limit_queues)
{
	enum { N = 10000 };
	const char *path = tfile("nofile", 12);
	static rl_req reqs[N];
	static char bufs[N][16];
	struct rlimit rl = { 64, 64 };
	struct tally t = { 0 };
	rl_loop *loop;

	/* Valgrind keeps its own fds just under the limit and refuses to
	 * lower it. */
	if (getenv("RL_VALGRIND"))
		cr_skip_test("Valgrind does not let RLIMIT_NOFILE be lowered");
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	loop = tloop(tp);
	for (int i = 0; i < N; i++) {
		reqs[i] = (rl_req){ .data = &t };
		cr_assert_eq(rl_fs_read_file(loop, &reqs[i], path, bufs[i], 16,
					     0, tally_cb),
			     0);
	}
	trun(loop);
	cr_assert_eq(t.calls, N);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(reqs[i].result, 12, "read %d: %s", i,
			     rl_strerror((int)reqs[i].result));
		tcheck("nofile", bufs[i], 12);
	}
	tclose(loop);
}

/* As root, permissions do not apply: drop to nobody in a child. */
BACKEND_TEST(reliability, unreadable_file_is_eacces)
{
	const char *path = tfile("secret", 10);
	pid_t pid;
	int status;

	cr_assert_eq(chmod(path, 0600), 0);
	cr_assert_eq(chmod(tdir(), 0755), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct rl_options opt;
		rl_loop *loop;
		rl_req req = { 0 };
		char buf[16];
		struct tally t = { 0 };

		if (geteuid() == 0 && (setgid(65534) || setuid(65534)))
			_exit(10);
		rl_options_init(&opt);
		opt.backend = tp->backend;
		opt.flags = tp->flags;
		if (rl_loop_open(&loop, &opt))
			_exit(11);
		req.data = &t;
		if (rl_fs_read_file(loop, &req, path, buf, 16, 0, tally_cb))
			_exit(12);
		rl_run(loop, RL_RUN_DEFAULT);
		rl_loop_close(loop);
		_exit(t.calls == 1 && t.last == -EACCES ? 0 : 13);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status));
	cr_assert_eq(WEXITSTATUS(status), 0, "child exit %d",
		     WEXITSTATUS(status));
}

/* A writer replaces the file by rename, and truncates and regrows another,
 * while reads run: a renamed-over file reads as one whole version (each
 * read opens once), a resized one as a prefix of its pattern. */
struct mutator {
	const char *dir_a, *dir_b, *target, *resized;
	volatile int stop;
};

static void write_all(const char *path, char fill, size_t len)
{
	char buf[8192];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	memset(buf, fill, sizeof(buf));
	while (len) {
		size_t n = len < sizeof(buf) ? len : sizeof(buf);

		if (write(fd, buf, n) != (ssize_t)n)
			break;
		len -= n;
	}
	close(fd);
}

static void *mutate(void *arg)
{
	struct mutator *m = arg;

	for (int i = 0; !m->stop; i++) {
		write_all(i % 2 ? m->dir_a : m->dir_b, i % 2 ? 'a' : 'b',
			  i % 2 ? 3000 : 5000);
		rename(i % 2 ? m->dir_a : m->dir_b, m->target);
		if (truncate(m->resized, (i * 977) % 20000) < 0)
			break;
	}
	return NULL;
}

struct faults {
	rl_loop *loop;
	const char *target, *resized;
	int left;
	int bad;
	rl_req reqs[2];
};

static void fault_cb(rl_req *req)
{
	struct faults *f = req->data;
	const unsigned char *b = req->buf;
	bool renamed = req == &f->reqs[0];

	if (renamed) {
		char c = req->result == 3000 ? 'a' : 'b';

		if (req->result != 3000 && req->result != 5000)
			f->bad++;
		for (int64_t i = 0; i < req->result; i++)
			if (b[i] != c) {
				f->bad++;
				break;
			}
	} else {
		if (req->result < 0 || req->result > 20000)
			f->bad++;
		for (int64_t i = 0; i < req->result; i++)
			if (b[i] != tbyte("resized", (size_t)i) && b[i] != 0) {
				f->bad++;
				break;
			}
	}
	if (--f->left > 0)
		cr_assert_eq(rl_fs_read_file(f->loop, req,
					     renamed ? f->target : f->resized,
					     req->buf, req->len,
					     RL_READ_FILE_GROW, fault_cb),
			     0);
}

BACKEND_TEST(reliability, file_renamed_truncated_and_grown_mid_run)
{
	struct mutator m = { 0 };
	struct faults f = { 0 };
	pthread_t th;
	rl_loop *loop = tloop(tp);

	m.dir_a = strdup(tpath("va"));
	m.dir_b = strdup(tpath("vb"));
	m.target = strdup(tpath("target"));
	m.resized = tfile("resized", 20000);
	m.resized = strdup(m.resized);
	write_all(m.target, 'a', 3000);
	cr_assert_eq(pthread_create(&th, NULL, mutate, &m), 0);
	f.loop = loop;
	f.target = m.target;
	f.resized = m.resized;
	f.left = 4000;
	for (int i = 0; i < 2; i++) {
		f.reqs[i].data = &f;
		cr_assert_eq(rl_fs_read_file(loop, &f.reqs[i],
					     i ? m.resized : m.target, NULL, 0,
					     RL_READ_FILE_GROW, fault_cb),
			     0);
	}
	trun(loop);
	m.stop = 1;
	pthread_join(th, NULL);
	cr_assert_eq(f.bad, 0, "%d reads saw a torn or impossible file", f.bad);
	cr_assert_leq(f.left, 0);
	for (int i = 0; i < 2; i++)
		free(f.reqs[i].buf);
	free((void *)m.dir_a);
	free((void *)m.dir_b);
	free((void *)m.target);
	free((void *)m.resized);
	tclose(loop);
}

/* Signals hitting the loop thread while it waits (EINTR) must not end the
 * run early, lose a timer or report an error. */
static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

static void eintr_timer_cb(rl_timer *t, int status)
{
	int *fired = t->data;

	cr_assert_eq(status, 0);
	(*fired)++;
}

BACKEND_TEST(reliability, eintr_while_waiting)
{
	struct sigaction sa = { .sa_handler = on_alarm }; /* no SA_RESTART */
	struct itimerval it = { { 0, 1000 }, { 0, 1000 } };
	rl_timer t = { 0 };
	int fired = 0;
	rl_loop *loop = tloop(tp);

	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGALRM, &sa, NULL), 0);
	cr_assert_eq(setitimer(ITIMER_REAL, &it, NULL), 0);
	t.data = &fired;
	cr_assert_eq(rl_timer_start(loop, &t, 60, 0, eintr_timer_cb), 0);
	trun(loop);
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	cr_assert_eq(fired, 1);
	/* Valgrind delivers signals only between the syscalls it knows can
	 * block, and io_uring_enter is not one of them in 3.19. */
	if (!getenv("RL_VALGRIND"))
		cr_assert_gt(alarms, 0,
			     "no signal was delivered during the wait");
	tclose(loop);
}

/*
 * Soak: a long run of mixed requests (reads of present and missing files,
 * timers, cancels of random requests in flight) with a window of requests
 * in flight, checking every completion arrives exactly once. RL_SOAK_N sets
 * the count (1,000,000 by default; the sanitizer run uses fewer).
 */
enum { SOAK_WIN = 256 };

struct soak {
	rl_loop *loop;
	const char *path, *missing;
	long left, done, cancels, cancelled;
	unsigned seed;
	rl_req reqs[SOAK_WIN];
	rl_timer timers[SOAK_WIN];
	char bufs[SOAK_WIN][32];
	unsigned char owed[SOAK_WIN]; /* completions still due per slot */
	int bad;
};

static struct soak *S;

static void soak_start(int slot);

static void soak_req_cb(rl_req *req)
{
	int slot = (int)(req - S->reqs);

	if (S->owed[slot] != 1)
		S->bad++;
	S->owed[slot] = 0;
	S->done++;
	if (req->result == -ECANCELED)
		S->cancelled++;
	else if (req->result != 12 && req->result != -ENOENT)
		S->bad++;
	else if (req->result == 12 && memcmp(S->bufs[slot], "Hello, world", 12))
		S->bad++;
	soak_start(slot);
}

static void soak_timer_cb(rl_timer *t, int status)
{
	int slot = (int)(t - S->timers);

	if (S->owed[slot] != 1 || (status != 0 && status != -ECANCELED))
		S->bad++;
	S->owed[slot] = 0;
	S->done++;
	if (status == -ECANCELED)
		S->cancelled++;
	soak_start(slot);
}

static void soak_start(int slot)
{
	unsigned r = rand_r(&S->seed) % 100;
	int ret;

	if (S->left <= 0)
		return;
	S->left--;
	S->owed[slot] = 1;
	if (r < 70)
		ret = rl_fs_read_file(
			S->loop, &S->reqs[slot], r < 65 ? S->path : S->missing,
			S->bufs[slot], sizeof(S->bufs[slot]), 0, soak_req_cb);
	else
		ret = rl_timer_start(S->loop, &S->timers[slot], r % 2, 0,
				     soak_timer_cb);
	if (ret < 0)
		S->bad++;
	/* Now and then cancel some other slot's request or timer. */
	if (r % 7 == 0) {
		int victim = (int)(rand_r(&S->seed) % SOAK_WIN);

		S->cancels++;
		if (rl_cancel(S->loop, &S->reqs[victim]) == -ENOENT)
			rl_timer_cancel(S->loop, &S->timers[victim]);
	}
}

BACKEND_TEST(reliability, soak_mixed_requests_with_cancels, .timeout = 600)
{
	const char *env = getenv("RL_SOAK_N");
	long n = env ? atol(env) : 1000000;
	struct soak *s = calloc(1, sizeof(*s));
	rl_loop *loop = tloop(tp);

	/* The pool-only backend pays a thread hand-off per read: a tenth of
	 * the count keeps its soak in the same time budget. */
	if (tp->flags & RL_NO_INLINE)
		n /= 10;
	S = s;
	s->loop = loop;
	s->seed = 12345;
	s->left = n;
	s->path = tpath("soak");
	s->missing = tpath("soak-missing");
	{
		int fd = open(s->path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		cr_assert_eq(write(fd, "Hello, world", 12), 12);
		close(fd);
	}
	for (int i = 0; i < SOAK_WIN; i++) {
		s->reqs[i].data = s;
		soak_start(i);
	}
	trun(loop);
	cr_assert_eq(s->bad, 0, "%d wrong or repeated completions", s->bad);
	cr_assert_eq(s->done, n, "%ld of %ld completions", s->done, n);
	for (int i = 0; i < SOAK_WIN; i++)
		cr_assert_eq(s->owed[i], 0);
	cr_assert_gt(s->cancelled, 0, "the soak cancelled nothing");
	tclose(loop);
	free(s);
}

/*
 * Requests that would wait forever: a read_file of a FIFO nobody opens for
 * writing (it waits for the writer's data, polled, or in the kernel).
 * Cancelling it, or closing the loop, must end it instead of waiting for
 * good. alarm() turns a hang into a failure. (An open of a FIFO for
 * writing with no reader: test_special.c.)
 */
static const char *fifo_path(const char *name)
{
	const char *path = tpath(name);

	cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo: %s", strerror(errno));
	return path;
}

/* Long enough for a worker to be inside open(). */
static void let_workers_block(rl_loop *loop)
{
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	usleep(50 * 1000);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
}

BACKEND_TEST(reliability, close_with_fifo_opens_blocked)
{
	const char *f1 = fifo_path("nowriter1"), *f2 = fifo_path("nowriter2");
	struct tally t1 = { 0 }, t2 = { 0 };
	rl_req r1 = { .data = &t1 }, r2 = { .data = &t2 };
	char buf[16];
	rl_loop *loop = tloop(tp);

	alarm(20);
	cr_assert_eq(
		rl_fs_read_file(loop, &r1, f1, buf, sizeof(buf), 0, tally_cb),
		0);
	cr_assert_eq(
		rl_fs_open(loop, &r2, f2, O_RDONLY | O_CLOEXEC, 0, tally_cb),
		0);
	let_workers_block(loop);
	cr_assert_eq(t1.calls, 0, "nobody wrote: still waiting");
	/* An open for reading does not wait for a writer, on any backend
	 * (io_uring's never did, see uring_fs.c): the fd is ours. */
	cr_assert_eq(t2.calls, 1);
	cr_assert_geq(t2.last, 0, "%s", rl_strerror((int)t2.last));
	close((int)t2.last);
	tclose(loop);
	alarm(0);
	cr_assert_eq(t1.calls, 1);
	cr_assert_eq(t1.last, -ECANCELED);
}

BACKEND_TEST(reliability, cancel_fifo_open_blocked)
{
	const char *f = fifo_path("nowriter");
	struct tally t = { 0 };
	rl_req r = { .data = &t };
	char buf[16];
	rl_loop *loop = tloop(tp);

	alarm(20);
	cr_assert_eq(
		rl_fs_read_file(loop, &r, f, buf, sizeof(buf), 0, tally_cb), 0);
	let_workers_block(loop);
	cr_assert_eq(rl_cancel(loop, &r), 0);
	trun(loop);
	alarm(0);
	cr_assert_eq(t.calls, 1);
	cr_assert_eq(t.last, -ECANCELED);
	tclose(loop);
}

/*
 * Growing read_files of sparse files larger than the loop's cap (1 GiB by
 * default): -EFBIG, quickly, not an endless doubling of the capacity nor a
 * buffer of gigabytes first.
 */
BACKEND_TEST(reliability, read_file_past_the_cap_is_efbig)
{
	static const uint64_t sizes[] = { (1ull << 30) + 1, (2ull << 30) + 1,
					  (4ull << 30) + 1 };
	rl_loop *loop = tloop(tp);

	alarm(120);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char name[32];
		const char *path;
		struct tally t = { 0 };
		rl_req req = { .data = &t };
		int fd;

		snprintf(name, sizeof(name), "sparse%zu", i);
		path = tpath(name);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		cr_assert_geq(fd, 0);
		cr_assert_eq(ftruncate(fd, (off_t)sizes[i]), 0);
		close(fd);
		cr_assert_eq(rl_fs_read_file(loop, &req, path, NULL, 0,
					     RL_READ_FILE_GROW, tally_cb),
			     0);
		trun(loop);
		cr_assert_eq(t.calls, 1);
		cr_assert_eq(t.last, -EFBIG, "%llu bytes: %lld",
			     (unsigned long long)sizes[i], (long long)t.last);
		cr_assert_leq(req.len, (size_t)1 << 30, "grew to %zu bytes",
			      req.len);
		free(req.buf);
		unlink(path);
	}
	alarm(0);
	tclose(loop);
}

/*
 * Out of fds because the loop's own read_files hold them: every backend
 * waits for one of them to close rather than failing with EMFILE. The
 * program keeps all of the process's fds but one, so the loop's requests
 * (read_files on the loop thread and on workers at once) compete for that
 * one (the README's promise: requests wait for an fd). With none left at
 * all, nothing of the loop's can free one: they fail, and do not hang.
 */
/*
 * N parallel read_files of a small file with every fd but free_fds taken
 * (RLIMIT_NOFILE = LIMIT), from a loop with slots direct-descriptor slots
 * (0: the default) that sat idle for idle_us first; each read must give
 * want (12: the file, or an -errno).
 */
static void fd_burst(const struct tp *tp, int free_fds, int n, unsigned slots,
		     unsigned idle_us, int64_t want)
{
	enum { N = 5000, LIMIT = 24 };
	const char *path = tfile("fdpressure", 12);
	static rl_req reqs[N];
	static char bufs[N][16];
	struct rlimit rl = { LIMIT, LIMIT };
	struct rl_options opt;
	struct tally t = { 0 };
	int held[LIMIT], nheld = 0, fails = 0;
	rl_loop *loop;

	cr_assert_leq(n, N);
	if (getenv("RL_VALGRIND"))
		cr_skip_test("Valgrind does not let RLIMIT_NOFILE be lowered");
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	rl_options_init(&opt);
	opt.direct_slots = slots;
	loop = tloop_opts(tp, &opt);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	/* Take every fd but free_fds. */
	for (;;) {
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

		if (fd < 0)
			break;
		held[nheld++] = fd;
	}
	for (int i = 0; i < free_fds && nheld; i++)
		close(held[--nheld]);
	if (idle_us)
		usleep(idle_us);
	alarm(60);
	for (int i = 0; i < n; i++) {
		reqs[i] = (rl_req){ .data = &t };
		cr_assert_eq(rl_fs_read_file(loop, &reqs[i], path, bufs[i], 16,
					     0, tally_cb),
			     0);
	}
	trun(loop);
	alarm(0);
	cr_assert_eq(t.calls, n);
	for (int i = 0; i < n; i++)
		if (reqs[i].result != want) {
			fails++;
			t.last = reqs[i].result;
		}
	while (nheld)
		close(held[--nheld]);
	cr_assert_eq(fails, 0, "%d of %d reads: e.g. %s", fails, n,
		     rl_strerror((int)t.last));
	for (int i = 0; want == 12 && i < n; i++)
		tcheck("fdpressure", bufs[i], 12);
	tclose(loop);
}

static void fd_exhaustion(const struct tp *tp, int free_fds)
{
	fd_burst(tp, free_fds, 5000, 0, 0, free_fds ? 12 : -EMFILE);
}

BACKEND_TEST(reliability, fd_exhaustion_waits_on_every_backend)
{
	fd_exhaustion(tp, 1);
}

/* Direct descriptors need no fd: io_uring's chain reads the file all the
 * same; every other way fails with EMFILE. */
BACKEND_TEST(reliability, no_fd_at_all_fails_fast)
{
	bool direct =
		tp->backend == RL_BACKEND_URING && !(tp->flags & RL_NO_DIRECT);

	if (direct)
		cr_skip_test("direct descriptors take no fd");
	fd_exhaustion(tp, 0);
}

/*
 * The same with no fd at all on io_uring's direct descriptors, which need
 * none: a burst of read_files far beyond the 8 slots, submitted after the
 * loop sat idle longer than it waits for a stuck slot, is read whole. The
 * loop sends requests waiting for a slot to plain fds only when no slot
 * came free for a while; an idle loop's last timestamp must not count as
 * that while, or the burst goes to plain fds, here none, and fails with
 * -EMFILE (as it did when the slots' watchdog stamped the table's filling
 * with the loop time of the previous rl_run()).
 */
BACKEND_TEST(reliability, burst_after_idle_keeps_direct_descriptors)
{
	if (tp->backend != RL_BACKEND_URING || (tp->flags & RL_NO_DIRECT))
		cr_skip_test("no direct descriptors: without an fd every read "
			     "fails (no_fd_at_all_fails_fast)");
	/* 2,000 reads on 8 slots, after three times the slots' watchdog
	 * (SLOT_STUCK_NS) idle. */
	fd_burst(tp, 0, 2000, 8, 30000, 12);
}

/*
 * rl_options.read_file_max bounds a growing read_file on every backend
 * and every kind of file: a file of exactly the cap fits; one byte more,
 * an endless device, a FIFO that hands over more than the cap: -EFBIG,
 * with a buffer no larger than the cap.
 */
struct writer_arg {
	const char *path;
	size_t len;
};

static void *fifo_flood(void *arg)
{
	struct writer_arg *w = arg;
	static char chunk[8192];
	size_t left = w->len;
	int fd = open(w->path, O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	memset(chunk, 'x', sizeof(chunk));
	while (left) {
		size_t n = left < sizeof(chunk) ? left : sizeof(chunk);
		ssize_t r = write(fd, chunk, n);

		if (r <= 0)
			break; /* the reader gave up: EPIPE */
		left -= (size_t)r;
	}
	close(fd);
	return NULL;
}

BACKEND_TEST(reliability, read_file_max_is_the_cap)
{
	enum { MAX = 64 * 1024 };
	static const char *const fixed[] = { "/dev/zero", "/dev/urandom" };
	const char *exact = tfile("exact", MAX);
	const char *over = tfile("over", MAX + 1);
	const char *fifo = tpath("flood");
	struct writer_arg w = { fifo, 4 * MAX };
	struct rl_options opt;
	pthread_t th;
	rl_loop *loop;

	signal(SIGPIPE, SIG_IGN);
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	rl_options_init(&opt);
	opt.read_file_max = MAX;
	loop = tloop_opts(tp, &opt);
	alarm(60);
	for (int i = 0; i < 5; i++) {
		const char *path = i == 0   ? exact
				   : i == 1 ? over
				   : i == 4 ? fifo
					    : fixed[i - 2];
		struct tally t = { 0 };
		rl_req req = { .data = &t };

		if (i == 4)
			cr_assert_eq(pthread_create(&th, NULL, fifo_flood, &w),
				     0);
		cr_assert_eq(rl_fs_read_file(loop, &req, path, NULL, 0,
					     RL_READ_FILE_GROW, tally_cb),
			     0);
		TRUN_UNTIL(loop, t.calls); /* the FIFO's writer is a thread */
		if (i == 4)
			pthread_join(th, NULL);
		trun(loop);
		cr_assert_eq(t.calls, 1);
		if (i == 0) {
			cr_assert_eq(t.last, MAX, "%s: %lld", path,
				     (long long)t.last);
			tcheck("exact", req.buf, MAX);
		} else {
			cr_assert_eq(t.last, -EFBIG, "%s: %lld", path,
				     (long long)t.last);
		}
		cr_assert_leq(req.len, MAX, "%s: grew to %zu", path, req.len);
		free(req.buf);
	}
	alarm(0);
	tclose(loop);
}
