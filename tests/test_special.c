/* SPDX-License-Identifier: MIT */
/*
 * test_special.c - files that are not regular files: FIFOs, pipes and
 * character devices. Every backend must treat them as a blocking open and
 * a blocking read would (waiting for a peer, keeping every byte it took
 * from a stream), must never block its workers for good on them, and must
 * give the same answers as the others. alarm() turns a hang into a
 * failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "epoll.h" /* RL__SLOW_MAX */
#include "helpers.h"

static void sleep_ms(int ms)
{
	usleep((useconds_t)ms * 1000);
}

/* ----------------------------------------------------------- writers */

/* A writer as a shell would be one: a blocking open (which waits for a
 * reader), writes with pauses between them, then close. EPIPE (a reader
 * that came and went) is counted, not fatal. */
struct writer {
	const char *path;
	int delay_ms; /* before the open */
	const char *parts[4];
	int pause_ms; /* between parts */
	atomic_int epipe;
	atomic_int opened;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	int fd;

	sleep_ms(w->delay_ms);
	fd = open(w->path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	atomic_store(&w->opened, 1);
	for (int i = 0; i < 4 && w->parts[i]; i++) {
		size_t len = strlen(w->parts[i]);

		if (i)
			sleep_ms(w->pause_ms);
		if (write(fd, w->parts[i], len) != (ssize_t)len)
			atomic_fetch_add(&w->epipe, 1);
	}
	close(fd);
	return NULL;
}

/* ------------------------------------------------ read_file of a FIFO */

/*
 * The writer writes "hello", pauses, then " world": the read_file must
 * return both, whatever the first read saw. A read_file that restarts
 * from a fresh open (as for a regular file that outgrew its buffer)
 * would lose what the stream already handed over.
 */
static void fifo_read_file_whole(const struct tp *tp, bool grow)
{
	const char *fifo = tfifo("hello");
	struct writer w = { .path = fifo,
			    .parts = { "hello", " world" },
			    .pause_ms = 100 };
	struct tseen s = { 0 };
	rl_req req = { .data = &s };
	char buf[64];
	pthread_t th;
	rl_loop *loop = tloop(tp);

	signal(SIGPIPE, SIG_IGN);
	alarm(20);
	cr_assert_eq(pthread_create(&th, NULL, writer_main, &w), 0);
	cr_assert_eq(rl_fs_read_file(loop, &req, fifo, grow ? NULL : buf,
				     grow ? 0 : sizeof(buf),
				     grow ? RL_READ_FILE_GROW : 0, tseen_cb),
		     0);
	TRUN_UNTIL(loop, s.calls);
	pthread_join(th, NULL);
	trun(loop);
	alarm(0);
	cr_assert_eq(s.calls, 1);
	cr_assert_eq(s.result, 11, "got %lld: %s", (long long)s.result,
		     s.result < 0 ? rl_strerror((int)s.result) : "");
	cr_assert_eq(memcmp(req.buf, "hello world", 11), 0, "got \"%.*s\"",
		     (int)s.result, (char *)req.buf);
	cr_assert_eq(atomic_load(&w.epipe), 0, "the writer lost its reader");
	if (grow)
		free(req.buf);
	tclose(loop);
}

BACKEND_TEST(special, fifo_read_file_keeps_every_byte)
{
	fifo_read_file_whole(tp, false);
}

BACKEND_TEST(special, fifo_read_file_grow_keeps_every_byte)
{
	fifo_read_file_whole(tp, true);
}

/*
 * A read_file's file is closed by the time the loop sleeps (here on a
 * timer, with no other file work) and by the time rl_run() returns: a
 * FIFO with its reader gone refuses a non-blocking open for writing
 * (ENXIO). io_uring leaves a finished read_file's file in its direct
 * descriptor slot for the next open to replace; it must not stay there
 * while the loop waits.
 */
struct closed_check {
	const char *fifo;
	int calls, timer_calls, open_errno;
	rl_timer timer;
};

static int fifo_writer_errno(const char *fifo)
{
	int fd = open(fifo, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return errno;
	close(fd);
	return 0;
}

static void closed_timer_cb(rl_timer *t, int status)
{
	struct closed_check *c = t->data;

	(void)status;
	c->timer_calls++;
	c->open_errno = fifo_writer_errno(c->fifo);
}

static void closed_read_cb(rl_req *req)
{
	struct closed_check *c = req->data;

	c->calls++;
	cr_assert_eq(req->result, 3, "got %lld", (long long)req->result);
	rl_timer_init(&c->timer);
	c->timer.data = c;
	cr_assert_eq(
		rl_timer_start(req->loop, &c->timer, 50, 0, closed_timer_cb),
		0);
}

BACKEND_TEST(special, read_file_closes_its_file_before_the_loop_sleeps)
{
	const char *fifo = tfifo("closed");
	struct writer w = { .path = fifo, .parts = { "abc" } };
	struct closed_check c = { .fifo = fifo, .open_errno = -1 };
	rl_req req = { .data = &c };
	char buf[16];
	pthread_t th;
	rl_loop *loop = tloop(tp);

	signal(SIGPIPE, SIG_IGN);
	alarm(20);
	cr_assert_eq(pthread_create(&th, NULL, writer_main, &w), 0);
	cr_assert_eq(rl_fs_read_file(loop, &req, fifo, buf, sizeof(buf), 0,
				     closed_read_cb),
		     0);
	/* The writer thread must run while the read waits (TRUN_UNTIL says
	 * why); once it is done, nothing but the loop has to act, and the
	 * loop sleeps on the timer as it would. */
	TRUN_UNTIL(loop, c.calls == 1);
	pthread_join(th, NULL);
	trun(loop);
	alarm(0);
	cr_assert_eq(c.calls, 1);
	cr_assert_eq(c.timer_calls, 1);
	cr_assert_eq(c.open_errno, ENXIO, "the FIFO still had a reader: %s",
		     strerror(c.open_errno));
	cr_assert_eq(fifo_writer_errno(fifo), ENXIO);
	tclose(loop);
}

/*
 * A writer already waiting in open(O_WRONLY) when the read_file starts:
 * the read_file's open lets it through, and from then on the reader must
 * stay there until the writer is done. A reader that opens, looks and
 * closes again leaves the writer with no reader: EPIPE (SIGPIPE), and
 * its data gone.
 */
BACKEND_TEST(special, writer_waiting_in_open_keeps_its_reader)
{
	enum { ROUNDS = 20 };
	rl_loop *loop = tloop(tp);

	signal(SIGPIPE, SIG_IGN);
	alarm(60);
	for (int i = 0; i < ROUNDS; i++) {
		char name[32];
		const char *fifo;
		struct writer w = { .parts = { "ab", "cd", "ef" },
				    .pause_ms = 2 };
		struct tseen s = { 0 };
		rl_req req = { .data = &s };
		char buf[64];
		pthread_t th;

		snprintf(name, sizeof(name), "waiting%d", i);
		fifo = tfifo(name);
		w.path = fifo;
		cr_assert_eq(pthread_create(&th, NULL, writer_main, &w), 0);
		sleep_ms(5); /* the writer is in open() by now, most likely */
		cr_assert_eq(rl_fs_read_file(loop, &req, fifo, buf, sizeof(buf),
					     0, tseen_cb),
			     0);
		TRUN_UNTIL(loop, s.calls);
		pthread_join(th, NULL);
		trun(loop);
		cr_assert_eq(atomic_load(&w.epipe), 0,
			     "round %d: the writer got EPIPE", i);
		cr_assert_eq(s.result, 6, "round %d: got %lld", i,
			     (long long)s.result);
		cr_assert_eq(memcmp(buf, "abcdef", 6), 0);
	}
	alarm(0);
	tclose(loop);
}

/* ------------------------------------------------------ opens of FIFOs */

/* A blocking open for writing waits for a reader (open(2) without
 * O_NONBLOCK); it does not fail with ENXIO. */
BACKEND_TEST(special, open_fifo_for_writing_waits_for_a_reader)
{
	const char *fifo = tfifo("wait-reader");
	struct tseen s = { 0 };
	rl_req req = { .data = &s };
	char buf[8];
	int rd;
	rl_loop *loop = tloop(tp);

	alarm(20);
	cr_assert_eq(
		rl_fs_open(loop, &req, fifo, O_WRONLY | O_CLOEXEC, 0, tseen_cb),
		0);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	sleep_ms(50);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(s.calls, 0, "no reader yet: got %lld (%s)",
		     (long long)s.result, rl_strerror((int)s.result));
	rd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	cr_assert_geq(rd, 0);
	trun(loop);
	alarm(0);
	cr_assert_eq(s.calls, 1);
	cr_assert_geq(s.result, 0, "%s", rl_strerror((int)s.result));
	cr_assert_eq(write((int)s.result, "xy", 2), 2);
	cr_assert_eq(read(rd, buf, sizeof(buf)), 2);
	close((int)s.result);
	close(rd);
	tclose(loop);
}

/* Cancelling an open that waits for a reader ends it, and closing the
 * loop ends another: no worker or kernel thread is left waiting. */
BACKEND_TEST(special, open_fifo_for_writing_cancelled)
{
	const char *f1 = tfifo("nobody1"), *f2 = tfifo("nobody2");
	struct tseen s1 = { 0 }, s2 = { 0 };
	rl_req r1 = { .data = &s1 }, r2 = { .data = &s2 };
	rl_loop *loop = tloop(tp);

	alarm(20);
	cr_assert_eq(
		rl_fs_open(loop, &r1, f1, O_WRONLY | O_CLOEXEC, 0, tseen_cb),
		0);
	cr_assert_eq(
		rl_fs_open(loop, &r2, f2, O_WRONLY | O_CLOEXEC, 0, tseen_cb),
		0);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	sleep_ms(50);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(s1.calls + s2.calls, 0);
	cr_assert_eq(rl_cancel(loop, &r1), 0);
	while (!s1.calls)
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
	cr_assert_eq(s1.result, -ECANCELED, "%lld (%s)", (long long)s1.result,
		     rl_strerror((int)s1.result));
	tclose(loop);
	alarm(0);
	cr_assert_eq(s2.calls, 1);
	cr_assert_eq(s2.result, -ECANCELED, "%lld (%s)", (long long)s2.result,
		     rl_strerror((int)s2.result));
}

/*
 * An open for reading may return before a writer came (io_uring's does),
 * but a read through the loop then waits for the writer's data, as the
 * read after a blocking open would: it is not an end of file.
 */
struct open_then_read {
	rl_loop *loop;
	struct tseen open, read;
	rl_req oreq, rreq;
	char buf[32];
};

static void opened_cb(rl_req *req)
{
	struct open_then_read *o = req->data;

	o->open.calls++;
	o->open.result = req->result;
	if (req->result >= 0)
		cr_assert_eq(rl_fs_read(o->loop, &o->rreq, (int)req->result,
					o->buf, sizeof(o->buf), -1, tseen_cb),
			     0);
}

BACKEND_TEST(special, read_after_open_of_fifo_waits_for_the_writer)
{
	const char *fifo = tfifo("late-writer");
	struct writer w = { .path = fifo,
			    .delay_ms = 100,
			    .parts = { "data" } };
	struct open_then_read o = { 0 };
	pthread_t th;
	rl_loop *loop = tloop(tp);

	alarm(20);
	o.loop = loop;
	o.oreq.data = &o;
	o.rreq.data = &o.read;
	cr_assert_eq(rl_fs_open(loop, &o.oreq, fifo, O_RDONLY | O_CLOEXEC, 0,
				opened_cb),
		     0);
	cr_assert_eq(pthread_create(&th, NULL, writer_main, &w), 0);
	TRUN_UNTIL(loop, o.read.calls);
	pthread_join(th, NULL);
	trun(loop);
	alarm(0);
	cr_assert_eq(o.open.calls, 1);
	cr_assert_geq(o.open.result, 0, "%s", rl_strerror((int)o.open.result));
	cr_assert_eq(o.read.calls, 1);
	cr_assert_eq(o.read.result, 4, "got %lld", (long long)o.read.result);
	cr_assert_eq(memcmp(o.buf, "data", 4), 0);
	close((int)o.open.result);
	tclose(loop);
}

/* -------------------------------------------- reads of pipes and streams */

/*
 * A read of an empty pipe; data arrives; then the read is cancelled. If
 * the read took the data, its callback says so (the byte count), since
 * the bytes have left the pipe; otherwise -ECANCELED, and the bytes are
 * still in the pipe. Either way not a byte is lost.
 */
/*
 * The second half of a cancel racing a stream read: after req (a read of
 * rfd into buf, with s as its data) is in the kernel or a worker, "abc"
 * arrives on wfd and the cancel follows a few ms later. Whatever won, no
 * byte is lost or delivered twice: a -ECANCELED read left the bytes in
 * rfd (what names it in the messages), a read that got them reports them.
 */
static void race_cancel(rl_loop *loop, rl_req *req, struct tseen *s, char *buf,
			int rfd, int wfd, int round, const char *what)
{
	char rest[16];
	ssize_t left;
	int ret;

	cr_assert_eq(write(wfd, "abc", 3), 3);
	/* Give the kernel (or a worker) time to do the read. */
	sleep_ms(round % 5);
	ret = rl_cancel(loop, req);
	cr_assert(ret == 0 || ret == -ENOENT, "cancel: %d", ret);
	trun(loop);
	cr_assert_eq(s->calls, 1);
	left = read(rfd, rest, sizeof(rest));
	if (s->result == -ECANCELED) {
		cr_assert_eq(left, 3,
			     "round %d: cancelled, and the bytes are gone "
			     "from the %s",
			     round, what);
	} else {
		cr_assert_eq(s->result, 3, "round %d: %lld", round,
			     (long long)s->result);
		cr_assert_eq(memcmp(buf, "abc", 3), 0);
		cr_assert_lt(left, 0, "%s: read twice", what);
	}
}

BACKEND_TEST(special, cancelled_stream_read_keeps_its_bytes)
{
	enum { ROUNDS = 50 };
	rl_loop *loop = tloop(tp);

	alarm(30);
	for (int i = 0; i < ROUNDS; i++) {
		struct tseen s = { 0 };
		rl_req req = { .data = &s };
		char buf[16];
		int p[2];

		cr_assert_eq(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
		cr_assert_eq(rl_fs_read(loop, &req, p[0], buf, sizeof(buf), -1,
					tseen_cb),
			     0);
		cr_assert_eq(rl_run(loop, RL_RUN_NOWAIT), 0);
		race_cancel(loop, &req, &s, buf, p[0], p[1], i, "pipe");
		close(p[0]);
		close(p[1]);
	}
	alarm(0);
	tclose(loop);
}

/* An offset means nothing to a pipe. Every backend answers the same:
 * it reads what comes next, as io_uring does. */
BACKEND_TEST(special, read_offset_on_a_pipe_is_ignored)
{
	struct tseen s = { 0 };
	rl_req req = { .data = &s };
	char buf[16];
	int p[2];
	rl_loop *loop;

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	loop = tloop(tp);
	cr_assert_eq(write(p[1], "abc", 3), 3);
	cr_assert_eq(
		rl_fs_read(loop, &req, p[0], buf, sizeof(buf), 100, tseen_cb),
		0);
	trun(loop);
	cr_assert_eq(s.result, 3, "got %lld (%s)", (long long)s.result,
		     rl_strerror((int)s.result));
	cr_assert_eq(memcmp(buf, "abc", 3), 0);
	tclose(loop);
	close(p[0]);
	close(p[1]);
}

/* ---------------------------------------------------- the pool's workers */

/*
 * Requests that wait for a peer forever (read_files of FIFOs nobody
 * writes to, more of them than the epoll backend has workers, and opens
 * for writing that wait for a reader) must not hold back the requests
 * behind them: a stat and reads of regular files complete meanwhile.
 */
struct starve {
	int left;
	bool timed_out;
};

static void starve_cb(rl_req *req)
{
	struct starve *st = req->data;

	cr_assert_geq(req->result, 0, "%s", rl_strerror((int)req->result));
	st->left--;
}

static void starve_timeout(rl_timer *t, int status)
{
	struct starve *st = t->data;

	if (status == 0)
		st->timed_out = true;
}

/* Runs loop until st's requests have all called back, for at most
 * UNSTARVED_MS, and fails saying what they were stuck behind if they did
 * not. */
enum { UNSTARVED_MS = 5000 };

static void run_unstarved(rl_loop *loop, struct starve *st, const char *behind)
{
	rl_timer timer;

	rl_timer_init(&timer);
	timer.data = st;
	cr_assert_eq(
		rl_timer_start(loop, &timer, UNSTARVED_MS, 0, starve_timeout),
		0);
	while (st->left > 0 && !st->timed_out)
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
	cr_assert(!st->timed_out, "%d requests still stuck behind %s", st->left,
		  behind);
	rl_timer_stop(loop, &timer);
}

/* Reads the 12-byte file name (tfile(), at path) QUICK_READS times at
 * once, runs loop until every read called back (run_unstarved()) and
 * checks their bytes. */
enum { QUICK_READS = 10 };

static void quick_reads_get_through(rl_loop *loop, const char *name,
				    const char *path, const char *behind)
{
	struct starve st = { QUICK_READS, false };
	rl_req quick[QUICK_READS];
	char qbuf[QUICK_READS][16];

	for (int i = 0; i < QUICK_READS; i++) {
		quick[i] = (rl_req){ .data = &st };
		cr_assert_eq(rl_fs_read_file(loop, &quick[i], path, qbuf[i],
					     sizeof(qbuf[i]), 0, starve_cb),
			     0);
	}
	run_unstarved(loop, &st, behind);
	for (int i = 0; i < QUICK_READS; i++) {
		cr_assert_eq(quick[i].result, 12);
		tcheck(name, qbuf[i], 12);
	}
}

/* reqs[0..n) (seen in fs) wait for a peer that never comes: none has
 * called back; each, cancelled, calls back once with -ECANCELED. */
static void cancel_waiting(rl_loop *loop, rl_req *reqs, struct tseen *fs, int n)
{
	for (int i = 0; i < n; i++) {
		cr_assert_eq(fs[i].calls, 0, "nobody is at the other end");
		cr_assert_eq(rl_cancel(loop, &reqs[i]), 0);
	}
	trun(loop);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(fs[i].calls, 1);
		cr_assert_eq(fs[i].result, -ECANCELED);
	}
}

/*
 * Many read_files of FIFOs nobody writes to, beside reads of a plain
 * file, all cancelled at once: every one calls back once, the FIFO reads
 * with -ECANCELED, and the loop does not hang. On io_uring a cancelled
 * read ends with -ECANCELED while its hard-linked probe is still to be
 * issued from the ring's task work; a cancel sent for the probe before
 * that work ran found nothing, and the probe then waited for ever on its
 * FIFO. It took about forty such reads at once to leave a probe behind on
 * 6.18 (the kernel runs task work in passes), so this test cancels a
 * hundred. The burst runs with the read_file flags given: a chain with
 * its probe, or without (RL_READ_FILE_REGULAR, the caller's word wrong).
 */
static void cancel_fifo_burst(rl_loop *loop, const char *plain,
			      const char *const *fifo, unsigned flags)
{
	enum { N = 200, FIFOS = 6, SIZE = 100 };
	struct tseen seen[N] = { { 0 } };
	rl_req reqs[N];
	int cancelled = 0;

	for (int i = 0; i < N; i++) {
		reqs[i] = (rl_req){ .data = &seen[i] };
		cr_assert_eq(
			rl_fs_read_file(loop, &reqs[i],
					i % 2 ? fifo[(i / 2) % FIFOS] : plain,
					NULL, 0, flags, tseen_cb),
			0);
	}
	/* Into the kernel (or the pool): the FIFO reads now wait. */
	for (int k = 0; k < 3; k++)
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	for (int i = 0; i < N; i++) {
		int ret = rl_cancel(loop, &reqs[i]);

		/* A plain read may have called back already. */
		cr_assert(ret == 0 || (ret == -ENOENT && i % 2 == 0),
			  "req %d: %s", i, rl_strerror(ret));
	}
	trun(loop);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(seen[i].calls, 1, "req %d: %d calls", i,
			     seen[i].calls);
		if (i % 2) {
			cr_assert_eq(seen[i].result, -ECANCELED, "req %d: %s",
				     i, rl_strerror((int)seen[i].result));
			cancelled++;
		} else if (seen[i].result != -ECANCELED) {
			cr_assert_eq(seen[i].result, SIZE, "req %d: %s", i,
				     rl_strerror((int)seen[i].result));
			tcheck("plain", reqs[i].buf, SIZE);
		}
		free(reqs[i].buf);
	}
	cr_assert_eq(cancelled, N / 2);
}

/* The burst, then again told that the files are regular. */
BACKEND_TEST(special, many_fifo_reads_cancelled_at_once)
{
	enum { FIFOS = 6 };
	const char *plain = tkeep_path(tfile("plain", 100));
	const char *fifo[FIFOS];
	rl_loop *loop = tloop(tp);

	alarm(60); /* the hang this test is about */
	for (int f = 0; f < FIFOS; f++) {
		char name[32];

		snprintf(name, sizeof(name), "nowriter%d", f);
		fifo[f] = tfifo(name);
	}
	cancel_fifo_burst(loop, plain, fifo, RL_READ_FILE_GROW);
	cancel_fifo_burst(loop, plain, fifo,
			  RL_READ_FILE_GROW | RL_READ_FILE_REGULAR);
	alarm(0);
	tclose(loop);
}

BACKEND_TEST(special, waiting_fifos_do_not_starve_the_pool)
{
	enum { FIFOS = 3, OPENS = 2, QUICK = 20 };
	const char *path = tkeep_path(tfile("quick", 12));
	struct tseen fs[FIFOS + OPENS] = { { 0 } };
	rl_req freqs[FIFOS + OPENS], quick[QUICK];
	char fbuf[FIFOS][16], qbuf[QUICK][16];
	struct statx stx[QUICK];
	struct starve st = { QUICK, false };
	struct rl_options opt;
	rl_loop *loop;

	rl_options_init(&opt);
	opt.pool_threads = 2;
	loop = tloop_opts(tp, &opt);
	alarm(30);
	for (int i = 0; i < FIFOS + OPENS; i++) {
		char name[32];

		snprintf(name, sizeof(name), "blocked%d", i);
		freqs[i] = (rl_req){ .data = &fs[i] };
		if (i < FIFOS)
			cr_assert_eq(rl_fs_read_file(loop, &freqs[i],
						     tfifo(name), fbuf[i],
						     sizeof(fbuf[i]), 0,
						     tseen_cb),
				     0);
		else
			cr_assert_eq(rl_fs_open(loop, &freqs[i], tfifo(name),
						O_WRONLY | O_CLOEXEC, 0,
						tseen_cb),
				     0);
	}
	/* Let them reach the workers (or the kernel) first. */
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	sleep_ms(50);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	for (int i = 0; i < QUICK; i++) {
		quick[i] = (rl_req){ .data = &st };
		if (i % 2)
			cr_assert_eq(rl_fs_stat(loop, &quick[i], path, &stx[i],
						starve_cb),
				     0);
		else
			cr_assert_eq(rl_fs_read_file(loop, &quick[i], path,
						     qbuf[i], sizeof(qbuf[i]),
						     0, starve_cb),
				     0);
	}
	run_unstarved(loop, &st, "the FIFOs");
	cancel_waiting(loop, freqs, fs, FIFOS + OPENS);
	alarm(0);
	tclose(loop);
}

/*
 * On io_uring a read_file or write_file holds a direct-descriptor slot
 * from its open to its close, and a read of a FIFO nobody writes to never
 * ends: with more such reads than slots, every slot is held for good.
 * Regular read_files and write_files queued behind them must still
 * complete (they run on plain fds once no slot has come free for a
 * while), and a FIFO read that waited for a slot must still get its
 * writer's bytes. On epoll there are no slots: the same must hold.
 */
BACKEND_TEST(special, waiting_fifos_do_not_starve_the_slots)
{
	enum { SLOTS = 4, FIFOS = 6, QUICK = 20 };
	const char *path = tkeep_path(tfile("sq", 12));
	struct tseen fs[FIFOS] = { { 0 } };
	rl_req freqs[FIFOS], quick[QUICK];
	char fbuf[FIFOS][16], qbuf[QUICK][16], wpath[QUICK][512];
	const char *fifo[FIFOS];
	struct starve st = { QUICK, false };
	struct rl_options opt;
	rl_loop *loop;
	int wfd;

	rl_options_init(&opt);
	opt.direct_slots = SLOTS;
	opt.pool_threads = 2;
	loop = tloop_opts(tp, &opt);
	alarm(30);
	for (int i = 0; i < FIFOS; i++) {
		char name[32];

		snprintf(name, sizeof(name), "slotfifo%d", i);
		fifo[i] = tfifo(name);
		freqs[i] = (rl_req){ .data = &fs[i] };
		cr_assert_eq(rl_fs_read_file(loop, &freqs[i], fifo[i], fbuf[i],
					     sizeof(fbuf[i]), 0, tseen_cb),
			     0);
	}
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	for (int i = 0; i < QUICK; i++) {
		quick[i] = (rl_req){ .data = &st };
		snprintf(wpath[i], sizeof(wpath[i]), "%s", tpath("slotw"));
		snprintf(wpath[i] + strlen(wpath[i]),
			 sizeof(wpath[i]) - strlen(wpath[i]), "%d", i);
		if (i % 2)
			cr_assert_eq(rl_fs_write_file(loop, &quick[i], wpath[i],
						      "Hello, world", 12, 0,
						      0644, starve_cb),
				     0);
		else
			cr_assert_eq(rl_fs_read_file(loop, &quick[i], path,
						     qbuf[i], sizeof(qbuf[i]),
						     0, starve_cb),
				     0);
	}
	run_unstarved(loop, &st, "the FIFOs");
	for (int i = 0; i < QUICK; i++) {
		char back[16];
		int fd;

		if (!(i % 2)) {
			cr_assert_eq(quick[i].result, 12);
			tcheck("sq", qbuf[i], 12);
			continue;
		}
		cr_assert_eq(quick[i].result, 12);
		fd = open(wpath[i], O_RDONLY | O_CLOEXEC);
		cr_assert_geq(fd, 0);
		cr_assert_eq(read(fd, back, sizeof(back)), 12);
		cr_assert_eq(memcmp(back, "Hello, world", 12), 0);
		close(fd);
		unlink(wpath[i]);
	}
	/* The last FIFO's read waited for a slot: its writer's bytes come. */
	wfd = open(fifo[FIFOS - 1], O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	cr_assert_geq(wfd, 0, "no reader on the FIFO: %s", strerror(errno));
	cr_assert_eq(write(wfd, "abc", 3), 3);
	close(wfd);
	while (fs[FIFOS - 1].calls == 0 && !st.timed_out)
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
	cr_assert_eq(fs[FIFOS - 1].calls, 1);
	cr_assert_eq(fs[FIFOS - 1].result, 3);
	cr_assert_eq(memcmp(fbuf[FIFOS - 1], "abc", 3), 0);
	cancel_waiting(loop, freqs, fs, FIFOS - 1);
	alarm(0);
	tclose(loop);
}

/* The same with write_files of FIFOs nobody reads, whose opens wait in
 * the kernel holding their slots: read_files of a regular file behind
 * them complete, and the write_files end cancelled, exactly once. */
BACKEND_TEST(special, waiting_fifo_writes_do_not_starve_the_slots)
{
	enum { SLOTS = 4, FIFOS = 6 };
	const char *path = tkeep_path(tfile("sqw", 12));
	struct tseen fs[FIFOS] = { { 0 } };
	rl_req freqs[FIFOS];
	struct rl_options opt;
	rl_loop *loop;

	rl_options_init(&opt);
	opt.direct_slots = SLOTS;
	opt.pool_threads = 2;
	loop = tloop_opts(tp, &opt);
	alarm(30);
	for (int i = 0; i < FIFOS; i++) {
		char name[32];

		snprintf(name, sizeof(name), "slotwfifo%d", i);
		freqs[i] = (rl_req){ .data = &fs[i] };
		cr_assert_eq(rl_fs_write_file(loop, &freqs[i], tfifo(name), "x",
					      1, 0, 0644, tseen_cb),
			     0);
	}
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	quick_reads_get_through(loop, "sqw", path, "the FIFO writes");
	cancel_waiting(loop, freqs, fs, FIFOS);
	alarm(0);
	tclose(loop);
}

/* Reads the non-blocking FIFO rfd until its writer is gone (0), checking
 * that what comes is want's next bytes (back is scratch of max bytes).
 * Returns how many came. */
static size_t read_to_end(int rfd, const char *want, char *back, size_t max)
{
	size_t got = 0;

	for (;;) {
		ssize_t n = read(rfd, back, max);

		cr_assert(n >= 0, "%s", strerror(errno));
		if (n == 0)
			return got;
		cr_assert_leq(got + (size_t)n, max);
		cr_assert_eq(memcmp(back, want + got, (size_t)n), 0);
		got += (size_t)n;
	}
}

/*
 * Starts n write_files of big (len bytes) into FIFOs named prefix<i>, each
 * with a reader that is there from the start and reads nothing (rfd[i],
 * non-blocking), and runs the loop until they have filled their pipes.
 */
static void start_full_fifo_writes(rl_loop *loop, const char *prefix, int n,
				   struct tseen *fs, rl_req *freqs, int *rfd,
				   const char *big, size_t len)
{
	for (int i = 0; i < n; i++) {
		char name[32];
		const char *fifo;

		snprintf(name, sizeof(name), "%s%d", prefix, i);
		fifo = tfifo(name);
		rfd[i] = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		cr_assert_geq(rfd[i], 0);
		freqs[i] = (rl_req){ .data = &fs[i] };
		cr_assert_eq(rl_fs_write_file(loop, &freqs[i], fifo, big, len,
					      0, 0644, tseen_cb),
			     0);
	}
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	sleep_ms(50);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
}

/*
 * A write_file to a FIFO whose reader is there but does not read fills
 * the pipe and then waits for room, maybe for good. On epoll it must not
 * wait on a regular worker (the reads behind it would wait too): the slow
 * lane takes it over, its fd still open (closing it would tell the reader
 * the data ended), and goes on from where it stopped. The reader then gets
 * every byte once, in order; a cancelled one ends early, nothing leaks.
 */
BACKEND_TEST(special, full_fifo_writes_do_not_starve_the_pool)
{
	enum { FIFOS = 3, BIG = 256 * 1024 };
	const char *path = tkeep_path(tfile("ffw", 12));
	struct tseen fs[FIFOS] = { { 0 } };
	rl_req freqs[FIFOS];
	struct rl_options opt;
	size_t got[FIFOS] = { 0 };
	int rfd[FIFOS];
	char *big, *back;
	rl_loop *loop;

	big = malloc(BIG);
	back = malloc(BIG);
	cr_assert(big && back);
	for (size_t i = 0; i < BIG; i++)
		big[i] = (char)(i * 7 + i / 251);
	rl_options_init(&opt);
	opt.pool_threads = 2;
	loop = tloop_opts(tp, &opt);
	alarm(30);
	start_full_fifo_writes(loop, "fullfifo", FIFOS, fs, freqs, rfd, big,
			       BIG);
	quick_reads_get_through(loop, "ffw", path, "the full FIFOs");
	for (int i = 0; i < FIFOS; i++)
		cr_assert_eq(fs[i].calls, 0, "the pipe is full");
	/* The first write is cancelled; the readers of the others drain. */
	cr_assert_eq(rl_cancel(loop, &freqs[0]), 0);
	while (fs[0].calls == 0 || fs[1].calls == 0 || fs[2].calls == 0 ||
	       got[1] < BIG || got[2] < BIG) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		for (int i = 1; i < FIFOS; i++) {
			ssize_t n;

			if (got[i] == BIG)
				continue;
			n = read(rfd[i], back, BIG - got[i]);

			if (n > 0) {
				cr_assert_eq(
					memcmp(back, big + got[i], (size_t)n),
					0, "bytes out of order");
				got[i] += (size_t)n;
			} else {
				cr_assert(n < 0 && errno == EAGAIN);
			}
		}
		if (fs[0].calls == 0 || fs[1].calls == 0 || fs[2].calls == 0)
			sleep_ms(1);
	}
	alarm(0);
	cr_assert_eq(fs[0].calls, 1);
	cr_assert_eq(fs[0].result, -ECANCELED);
	for (int i = 1; i < FIFOS; i++) {
		cr_assert_eq(fs[i].calls, 1);
		cr_assert_eq(fs[i].result, BIG);
		cr_assert_eq(got[i], BIG);
		/* Every byte came once: the writer is gone, EOF. */
		cr_assert_eq(read(rfd[i], back, 1), 0);
	}
	/* The cancelled write's reader saw a prefix, then the end. */
	cr_assert_lt(read_to_end(rfd[0], big, back, BIG), BIG);
	for (int i = 0; i < FIFOS; i++)
		close(rfd[i]);
	free(big);
	free(back);
	tclose(loop);
}

/*
 * The same full FIFOs, more of them than the epoll slow lane has workers
 * (RL__SLOW_MAX), then the loop closed while the write_files wait: on
 * epoll some in the slow lane's workers, the rest queued for one with
 * the fds their regular workers opened; on io_uring in the kernel. Each
 * calls back once, -ECANCELED, every fd of the loop's is closed (each
 * reader sees the end after a prefix of the data), nothing is left open.
 */
BACKEND_TEST(special, full_fifo_writes_at_loop_close)
{
	enum { FIFOS = RL__SLOW_MAX + 6, BIG = 256 * 1024 };
	struct tseen fs[FIFOS] = { { 0 } };
	rl_req freqs[FIFOS];
	struct rl_options opt;
	int rfd[FIFOS];
	char *big, *back;
	rl_loop *loop;

	big = malloc(BIG);
	back = malloc(BIG);
	cr_assert(big && back);
	for (size_t i = 0; i < BIG; i++)
		big[i] = (char)(i * 13 + i / 241);
	rl_options_init(&opt);
	opt.pool_threads = 2;
	loop = tloop_opts(tp, &opt);
	alarm(30);
	start_full_fifo_writes(loop, "closefifo", FIFOS, fs, freqs, rfd, big,
			       BIG);
	cr_assert_eq(rl_loop_close(loop), 0);
	alarm(0);
	for (int i = 0; i < FIFOS; i++) {
		cr_assert_eq(fs[i].calls, 1);
		cr_assert_eq(fs[i].result, -ECANCELED);
		cr_assert_lt(read_to_end(rfd[i], big, back, BIG), BIG);
		close(rfd[i]);
	}
	free(big);
	free(back);
	/* Only the fd check of tclose() is left, on a loop with nothing
	 * to do. */
	tclose(tloop(tp));
}

/* ------------------------------------------------------ character devices */

/* /dev/null is empty; /dev/zero never ends, so a growing read_file of it
 * stops at the loop's cap with -EFBIG, having allocated no more than the
 * cap, instead of spinning or allocating without end. */
BACKEND_TEST(special, char_devices)
{
	struct tseen s1 = { 0 }, s2 = { 0 }, s3 = { 0 };
	rl_req r1 = { .data = &s1 }, r2 = { .data = &s2 }, r3 = { .data = &s3 };
	char buf[16];
	rl_loop *loop = tloop(tp);

	alarm(120);
	cr_assert_eq(rl_fs_read_file(loop, &r1, "/dev/null", buf, sizeof(buf),
				     0, tseen_cb),
		     0);
	cr_assert_eq(rl_fs_read_file(loop, &r2, "/dev/zero", buf, sizeof(buf),
				     0, tseen_cb),
		     0);
	cr_assert_eq(rl_fs_read_file(loop, &r3, "/dev/zero", NULL, 0,
				     RL_READ_FILE_GROW, tseen_cb),
		     0);
	trun(loop);
	alarm(0);
	cr_assert_eq(s1.result, 0);
	cr_assert_eq(s2.result, -EFBIG);
	cr_assert_eq(s3.result, -EFBIG);
	cr_assert_leq(r3.len, (size_t)1 << 30, "grew to %zu bytes", r3.len);
	free(r3.buf);
	tclose(loop);
}

/*
 * Writes into pipes nobody reads (more of them than the epoll backend has
 * workers) wait for room for good: the stats and reads behind them must
 * complete meanwhile, and a cancel ends the writes.
 */
BACKEND_TEST(special, blocked_pipe_writes_do_not_starve_the_pool)
{
	enum { W = 3, QUICK = 10, SIZE = 1 << 20 };
	const char *path = tkeep_path(tfile("quick", 12));
	static char data[SIZE];
	struct tseen ws[W] = { { 0 } };
	rl_req wreqs[W], quick[QUICK];
	char qbuf[QUICK][16];
	struct statx stx[QUICK];
	struct starve st = { QUICK, false };
	struct rl_options opt;
	int p[W][2];
	rl_loop *loop;

	for (int i = 0; i < W; i++)
		cr_assert_eq(pipe2(p[i], O_CLOEXEC), 0);
	rl_options_init(&opt);
	opt.pool_threads = 2;
	loop = tloop_opts(tp, &opt);
	alarm(30);
	for (int i = 0; i < W; i++) {
		wreqs[i] = (rl_req){ .data = &ws[i] };
		cr_assert_eq(rl_fs_write(loop, &wreqs[i], p[i][1], data, SIZE,
					 -1, tseen_cb),
			     0);
	}
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	sleep_ms(50);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	for (int i = 0; i < QUICK; i++) {
		quick[i] = (rl_req){ .data = &st };
		if (i % 2)
			cr_assert_eq(rl_fs_stat(loop, &quick[i], path, &stx[i],
						starve_cb),
				     0);
		else
			cr_assert_eq(rl_fs_read_file(loop, &quick[i], path,
						     qbuf[i], sizeof(qbuf[i]),
						     0, starve_cb),
				     0);
	}
	run_unstarved(loop, &st, "the writes");
	for (int i = 0; i < W; i++) {
		cr_assert_eq(ws[i].calls, 0, "nobody reads the pipe");
		cr_assert_eq(rl_cancel(loop, &wreqs[i]), 0);
	}
	trun(loop);
	alarm(0);
	for (int i = 0; i < W; i++) {
		cr_assert_eq(ws[i].calls, 1);
		cr_assert_eq(ws[i].result, -ECANCELED, "%lld",
			     (long long)ws[i].result);
	}
	tclose(loop);
	for (int i = 0; i < W; i++) {
		close(p[i][0]);
		close(p[i][1]);
	}
}

/* The same for a receive on a socket: bytes it took are reported, never
 * lost to a late cancel. */
BACKEND_TEST(special, cancelled_socket_recv_keeps_its_bytes)
{
	enum { ROUNDS = 50 };
	rl_loop *loop = tloop(tp);

	alarm(30);
	for (int i = 0; i < ROUNDS; i++) {
		struct tseen s = { 0 };
		rl_req req = { .data = &s };
		char buf[16];
		int sv[2];

		cr_assert_eq(
			socketpair(AF_UNIX,
				   SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
				   0, sv),
			0);
		cr_assert_eq(rl_net_recv(loop, &req, sv[0], buf, sizeof(buf),
					 tseen_cb),
			     0);
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		race_cancel(loop, &req, &s, buf, sv[0], sv[1], i, "socket");
		close(sv[0]);
		close(sv[1]);
	}
	alarm(0);
	tclose(loop);
}
