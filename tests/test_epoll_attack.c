/* SPDX-License-Identifier: MIT */
/*
 * test_epoll_attack.c - an adversarial pass on the epoll backend's
 * request machinery (loop/epoll.h tells how a request travels): the
 * pool's queue that the loop shares with its workers (run_inline()), the
 * read_file job's second pass (RL__EP_AGAIN), the fd budget (RL__EP_HELD,
 * fd_wait), write_file's hand-over of an open fd to the slow lane, and
 * the close path. Every test is a BACKEND_TEST: what aims at epoll's
 * internals must hold, with the same results, on io_uring too.
 *
 * Each test counts every callback, checks every byte, bounds its time
 * with alarm() and ends with the loop closed and no fd left (tclose()).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "epoll.h" /* RL__SLOW_MAX */
#include "helpers.h"

/* ------------------------------------------------------------ helpers */

/* How many bytes wait in a pipe. */
static int ioctl_fionread(int fd, int *n)
{
	return ioctl(fd, FIONREAD, n);
}

/* Counts scaled down under Valgrind, which runs every test far slower. */
static inline unsigned scaled(unsigned n, unsigned under_valgrind)
{
	return getenv("RL_VALGRIND") ? under_valgrind : n;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
	}
}

/* Drops path's pages from the page cache (written back first). Returns
 * the share still resident: 1 on a tmpfs, whose pages are the file. */
static double evict(const char *path, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(fsync(fd), 0);
	cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(fd);
	/* tresident() looks at the first 64 pages at most. */
	return tresident(path, size < 65536 ? size : 65536);
}

/* The same, or the test skipped where the page cache keeps the file. */
static void evict_or_skip(const char *path, size_t size)
{
	if (evict(path, size) > 0)
		cr_skip_test("the page cache keeps %s (tmpfs?)", path);
}

/* Writes name (size bytes of its pattern), then evicts all of it but the
 * first 64 KiB, so that an RWF_NOWAIT read of it stops short. */
static const char *partly_cached(const char *name, size_t size)
{
	const char *path = tfile(name, size);
	char *buf = malloc(65536);
	int fd;

	cr_assert_not_null(buf);
	evict_or_skip(path, size);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	/* No read-ahead on this fd: only the pages read get cached. */
	posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	cr_assert_eq(pread(fd, buf, 65536, 0), 65536);
	free(buf);
	close(fd);
	return path;
}

/* A worker blocked in a stalled stat (see tstall in helpers.h) keeps the
 * jobs behind it queued, which makes "not started yet" deterministic. */
#define STALL_OR_SKIP(st)                                                      \
	do {                                                                   \
		if (!tstall_open(st, sizeof(struct statx)))                    \
			cr_skip_test("no userfaultfd here to stall a worker"); \
	} while (0)

/*
 * A BACKEND_TEST that cannot run under Valgrind (RL_VALGRIND): it needs
 * userfaultfd or a lower RLIMIT_NOFILE, which Valgrind 3.19 does not
 * give. There it has no configuration at all, rather than a process per
 * configuration that only skips (each costs a Valgrind start-up).
 */
static struct criterion_test_params tp_backends_not_under_valgrind(void)
{
	struct criterion_test_params p = tp_backends();

	if (getenv("RL_VALGRIND"))
		p.length = 0;
	return p;
}

#define NATIVE_BACKEND_TEST(suite, name, ...)            \
	ParameterizedTestParameters(suite, name)         \
	{                                                \
		return tp_backends_not_under_valgrind(); \
	}                                                \
	ParameterizedTest(const struct tp *tp, suite, name, ##__VA_ARGS__)

/* Runs the loop, one pass at a time, until *count reaches want. */
static void run_until(rl_loop *loop, const int *count, int want)
{
	while (*count < want)
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
}

/* ------------------------------------------- the pool's queue, shared */

/*
 * A read at the file's position (offset -1) whose fast path stopped
 * after a cached prefix goes to the pool with that prefix counted
 * (res[1]), the position moved past it. With the only worker stalled it
 * stays on the pool's queue; the next burst of read_files is shared with
 * the workers (SHARE_MIN), and the loop takes jobs off that queue itself,
 * the waiting read first. Found: the loop ran its fast path again from
 * byte 0 of the buffer, reading the rest of the file (from the moved
 * position) into the buffer's start, and reported the rest's length as
 * the whole. Every backend: the whole file, in order, the position at
 * its end.
 */
NATIVE_BACKEND_TEST(epoll_attack, partial_fast_read_taken_back_by_the_loop)
{
	enum { SIZE = 1 << 20, N = 12, SMALL = 300 };
	struct tseen sb = { 0 }, sr = { 0 }, s[N];
	rl_req blocker = { .data = &sb }, rd = { .data = &sr }, r[N];
	const char *path, *small = tfile("small", SMALL);
	char *buf = malloc(SIZE), sbuf[N][SMALL + 1];
	struct rl_options opt;
	struct tstall stall;
	rl_loop *loop;
	int fd, done = 0;

	cr_assert_not_null(buf);
	STALL_OR_SKIP(&stall);
	path = partly_cached("partial", SIZE);
	rl_options_init(&opt);
	opt.pool_threads = 1;
	loop = tloop_opts(tp, &opt);
	alarm(60);
	cr_assert_eq(rl_fs_stat(loop, &blocker, small, stall.mem, tseen_cb), 0);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(rl_fs_read(loop, &rd, fd, buf, SIZE, -1, tseen_cb), 0);
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	/* The read-ahead the miss started comes in meanwhile. */
	sleep_ms(50);
	for (int i = 0; i < N; i++) {
		s[i] = (struct tseen){ 0 };
		r[i] = (rl_req){ .data = &s[i] };
		cr_assert_eq(rl_fs_read_file(loop, &r[i], small, sbuf[i],
					     sizeof(sbuf[i]), 0, tseen_cb),
			     0);
	}
	/* The pass that shares the burst (and takes the waiting read). */
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	cr_assert_eq(sb.calls, 0, "the stat is stalled");
	tstall_release(&stall);
	while (done < N) {
		done = 0;
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
		for (int i = 0; i < N; i++)
			done += s[i].calls;
	}
	run_until(loop, &sr.calls, 1);
	trun(loop);
	alarm(0);
	cr_assert_eq(sb.calls, 1);
	cr_assert_eq(sb.result, 0);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(s[i].calls, 1);
		cr_assert_eq(s[i].result, SMALL);
		tcheck("small", sbuf[i], SMALL);
	}
	cr_assert_eq(sr.calls, 1);
	cr_assert_eq(sr.result, SIZE, "%s",
		     sr.result < 0 ? rl_strerror((int)sr.result) : "short");
	tcheck("partial", buf, SIZE);
	cr_assert_eq(lseek(fd, 0, SEEK_CUR), SIZE);
	close(fd);
	free(buf);
	tclose(loop);
	tstall_close(&stall);
}

/* -------------------------------------------- cold bursts, two passes */

/* A burst of read_files of files each its own, with the paths kept for
 * the requests' lifetime (tpath() recycles its buffers). */
struct burst {
	int n;
	size_t size;
	char (*name)[32];
	char (*path)[512];
	struct tseen *s;
	rl_req *r;
};

static void burst_init(struct burst *b, const char *prefix, int n, size_t size)
{
	b->n = n;
	b->size = size;
	b->name = calloc((size_t)n, sizeof(*b->name));
	b->path = calloc((size_t)n, sizeof(*b->path));
	b->s = calloc((size_t)n, sizeof(*b->s));
	b->r = calloc((size_t)n, sizeof(*b->r));
	cr_assert(b->name && b->path && b->s && b->r);
	for (int i = 0; i < n; i++) {
		snprintf(b->name[i], sizeof(b->name[i]), "%s%d", prefix, i);
		snprintf(b->path[i], sizeof(b->path[i]), "%s",
			 tpath(b->name[i]));
	}
}

/* (Re)writes every file and drops it from the page cache. */
static void burst_cold(struct burst *b)
{
	for (int i = 0; i < b->n; i++) {
		unlink(b->path[i]); /* a FIFO a test left there */
		tfile(b->name[i], b->size);
	}
	for (int i = 0; i < b->n; i++)
		evict_or_skip(b->path[i], b->size);
}

/* Submits every read_file (growing buffers the loop allocates). */
static void burst_submit(rl_loop *loop, struct burst *b)
{
	for (int i = 0; i < b->n; i++) {
		b->s[i] = (struct tseen){ 0 };
		b->r[i] = (rl_req){ .data = &b->s[i] };
		cr_assert_eq(rl_fs_read_file(loop, &b->r[i], b->path[i], NULL,
					     0, RL_READ_FILE_GROW, tseen_cb),
			     0);
	}
}

static int burst_calls(const struct burst *b)
{
	int n = 0;

	for (int i = 0; i < b->n; i++)
		n += b->s[i].calls;
	return n;
}

static void burst_run(rl_loop *loop, const struct burst *b)
{
	while (burst_calls(b) < b->n)
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
}

/* Each called back once, with the whole file or (ok_cancel) -ECANCELED;
 * the buffers freed. Returns how many were cancelled. */
static int burst_check(struct burst *b, bool ok_cancel)
{
	int cancelled = 0;

	for (int i = 0; i < b->n; i++) {
		cr_assert_eq(b->s[i].calls, 1, "read %d called back %d times",
			     i, b->s[i].calls);
		if (ok_cancel && b->s[i].result == -ECANCELED) {
			cancelled++;
		} else {
			cr_assert_eq(b->s[i].result, (int64_t)b->size,
				     "read %d: %s", i,
				     b->s[i].result < 0
					     ? rl_strerror((int)b->s[i].result)
					     : "short");
			tcheck(b->name[i], b->r[i].buf, b->size);
		}
		free(b->r[i].buf);
		b->r[i].buf = NULL;
	}
	return cancelled;
}

static void burst_free(struct burst *b)
{
	free(b->name);
	free(b->path);
	free(b->s);
	free(b->r);
}

/*
 * A FIFO feeder: a thread that, for each path it is given, opens the
 * FIFO for writing without waiting (which succeeds only once a reader
 * has it open), writes msg and closes, once per path, until told to
 * stop. A read_file that opened the FIFO then gets msg and its end.
 */
#define FEED_MSG "fifo-feeder-message"
#define FEED_MAX 64

struct feeder {
	const char *path[FEED_MAX];
	int n;
	atomic_bool stop;
	bool fed[FEED_MAX];
	pthread_t th;
};

static void *feeder_main(void *arg)
{
	struct feeder *f = arg;
	sigset_t pipe;

	/* A reader that left makes the write fail with EPIPE, which must
	 * not kill the test. */
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, NULL);
	while (!atomic_load(&f->stop)) {
		for (int i = 0; i < f->n; i++) {
			int fd;

			if (f->fed[i])
				continue;
			fd = open(f->path[i],
				  O_WRONLY | O_NONBLOCK | O_CLOEXEC);
			if (fd < 0)
				continue;
			if (write(fd, FEED_MSG, strlen(FEED_MSG)) < 0) {
			}
			close(fd);
			f->fed[i] = true;
		}
		usleep(500);
	}
	return NULL;
}

static void feeder_start(struct feeder *f)
{
	atomic_store(&f->stop, false);
	cr_assert_eq(pthread_create(&f->th, NULL, feeder_main, f), 0);
}

static void feeder_stop(struct feeder *f)
{
	atomic_store(&f->stop, true);
	pthread_join(f->th, NULL);
}

/* The read_file's result is FEED_MSG. */
static bool got_feed(const rl_req *r, const struct tseen *s)
{
	return s->result == (int64_t)strlen(FEED_MSG) &&
	       memcmp(r->buf, FEED_MSG, strlen(FEED_MSG)) == 0;
}

/* The first len bytes of buf are name's pattern. */
static bool is_pattern(const char *name, const void *buf, size_t len)
{
	const unsigned char *b = buf;

	for (size_t i = 0; i < len; i++)
		if (b[i] != tbyte(name, i))
			return false;
	return true;
}

/*
 * A cold burst on one worker: on epoll each job's first pass misses the
 * page cache and goes round the queue; meanwhile the files change under
 * it (truncated, unlinked, renamed over, grown, replaced by a FIFO), at a
 * moment that moves from round to round. Whatever pass sees whatever
 * file, each request calls back once with one consistent answer: the
 * file as it was (whole), as it became (whole, or a prefix of the
 * pattern for a file truncated or grown during the read), -ENOENT, or
 * the FIFO's message.
 */
BACKEND_TEST(epoll_attack, cold_burst_files_changed_between_passes)
{
	enum { N = 36, SIZE = 40000, SMALLER = 30000, GROW = 5000, KINDS = 6 };
	unsigned rounds = scaled(6, 2);
	unsigned char extra[GROW];
	struct rl_options opt;
	struct feeder feed;
	struct burst b;
	rl_loop *loop;

	/* The feeder is a thread of the test's own. */
	tskip_uring_threads_under_valgrind(tp);
	burst_init(&b, "chg", N, SIZE);
	rl_options_init(&opt);
	opt.pool_threads = 1;
	loop = tloop_opts(tp, &opt);
	alarm(100);
	for (unsigned round = 0; round < rounds; round++) {
		burst_cold(&b);
		burst_submit(loop, &b);
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		tspin_us(round * 300);
		memset(&feed, 0, sizeof(feed));
		for (int i = 0; i < N; i++) {
			const char *p = b.path[i];
			char newname[32];
			int fd;

			switch (i % KINDS) {
			case 1:
				cr_assert_eq(truncate(p, SIZE / 3), 0);
				break;
			case 2:
				cr_assert_eq(unlink(p), 0);
				break;
			case 3:
				snprintf(newname, sizeof(newname), "new%d", i);
				cr_assert_eq(rename(tfile(newname, SMALLER), p),
					     0);
				break;
			case 4:
				for (size_t k = 0; k < GROW; k++)
					extra[k] = tbyte(b.name[i], SIZE + k);
				fd = open(p, O_WRONLY | O_APPEND | O_CLOEXEC);
				cr_assert_geq(fd, 0);
				cr_assert_eq(write(fd, extra, GROW), GROW);
				close(fd);
				break;
			case 5:
				cr_assert_eq(unlink(p), 0);
				cr_assert_eq(mkfifo(p, 0600), 0);
				feed.path[feed.n++] = p;
				break;
			}
		}
		feeder_start(&feed);
		burst_run(loop, &b);
		feeder_stop(&feed);
		for (int i = 0; i < N; i++) {
			int64_t res = b.s[i].result;
			const void *buf = b.r[i].buf;
			char newname[32];

			cr_assert_eq(b.s[i].calls, 1);
			if (res == SIZE && is_pattern(b.name[i], buf, SIZE))
				goto next; /* as it was */
			switch (i % KINDS) {
			case 1:
				cr_assert(res >= SIZE / 3 && res <= SIZE,
					  "truncated %d: %" PRId64, i, res);
				/* A read racing a truncate may see the old
				 * size and then pages the truncate zeroed or
				 * dropped (the kernel's race, on every
				 * backend: seen with a blocking read in a
				 * worker): zeros past the new end. */
				tcheck(b.name[i], buf, SIZE / 3);
				for (int64_t k = SIZE / 3; k < res; k++) {
					unsigned char c =
						((const unsigned char *)buf)[k];

					cr_assert(c == 0 ||
							  c == tbyte(b.name[i],
								     (size_t)k),
						  "truncated %d (%d/%u): byte "
						  "%" PRId64 " of %" PRId64
						  " is %u",
						  i, tp->backend, tp->flags, k,
						  res, c);
				}
				break;
			case 2:
				cr_assert_eq(res, -ENOENT, "unlinked %d", i);
				break;
			case 3:
				snprintf(newname, sizeof(newname), "new%d", i);
				cr_assert_eq(res, SMALLER, "renamed %d", i);
				tcheck(newname, buf, SMALLER);
				break;
			case 4:
				cr_assert(res > SIZE && res <= SIZE + GROW,
					  "grown %d: %" PRId64, i, res);
				tcheck(b.name[i], buf, (size_t)res);
				break;
			case 5:
				cr_assert(res == -ENOENT ||
						  got_feed(&b.r[i], &b.s[i]),
					  "fifo %d: %" PRId64, i, res);
				break;
			default:
				cr_assert_fail("unchanged %d: %" PRId64, i,
					       res);
			}
		next:
			free(b.r[i].buf);
		}
	}
	alarm(0);
	burst_free(&b);
	tclose(loop);
}

struct canceller {
	rl_loop *loop;
	struct burst *b;
	int stride;
	bool *hit; /* rl_cancel() said 0 for it */
	int *calls;
};

static struct canceller the_canceller;

/* Counts, then cancels the request stride places further on. */
static void cancel_next_cb(rl_req *req)
{
	struct canceller *c = &the_canceller;
	struct tseen *s = req->data;
	int i = (int)(s - c->b->s), j = (i + c->stride) % c->b->n;
	int ret;

	s->calls++;
	s->result = req->result;
	ret = rl_cancel(c->loop, &c->b->r[j]);
	cr_assert(ret == 0 || ret == -ENOENT || ret == -EALREADY,
		  "cancel %d: %d", j, ret);
	if (ret == 0)
		c->hit[j] = true;
}

/*
 * Cancels from the callbacks of the same cold burst: each callback
 * cancels a request further on, which may be queued, between its two
 * passes, running, finished and not yet reaped, or done. Many rounds, a
 * different stride each. A request rl_cancel() accepted ends with
 * -ECANCELED (a read_file's data is not kept once cancelled), one it
 * never accepted with the whole file; each calls back exactly once.
 */
BACKEND_TEST(epoll_attack, cancels_from_callbacks_of_a_cold_burst)
{
	enum { N = 32, SIZE = 24000 };
	unsigned rounds = scaled(16, 3);
	bool hit[N];
	struct rl_options opt;
	struct burst b;
	rl_loop *loop;

	burst_init(&b, "cb", N, SIZE);
	rl_options_init(&opt);
	opt.pool_threads = 2;
	loop = tloop_opts(tp, &opt);
	alarm(100);
	for (unsigned round = 0; round < rounds; round++) {
		the_canceller =
			(struct canceller){ .loop = loop,
					    .b = &b,
					    .stride = 1 + (int)round % 7,
					    .hit = hit };
		memset(hit, 0, sizeof(hit));
		burst_cold(&b);
		for (int i = 0; i < N; i++) {
			b.s[i] = (struct tseen){ 0 };
			b.r[i] = (rl_req){ .data = &b.s[i] };
			cr_assert_eq(rl_fs_read_file(loop, &b.r[i], b.path[i],
						     NULL, 0, RL_READ_FILE_GROW,
						     cancel_next_cb),
				     0);
		}
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		/* And one from outside, at a moment that moves. */
		tspin_us(round * 150);
		if (rl_cancel(loop, &b.r[round % N]) == 0)
			hit[round % N] = true;
		burst_run(loop, &b);
		trun(loop);
		for (int i = 0; i < N; i++) {
			cr_assert_eq(b.s[i].calls, 1, "read %d", i);
			if (hit[i]) {
				cr_assert_eq(b.s[i].result, -ECANCELED,
					     "read %d: %" PRId64, i,
					     b.s[i].result);
			} else {
				cr_assert_eq(b.s[i].result, SIZE,
					     "read %d: %" PRId64, i,
					     b.s[i].result);
				tcheck(b.name[i], b.r[i].buf, SIZE);
			}
			free(b.r[i].buf);
		}
	}
	alarm(0);
	burst_free(&b);
	tclose(loop);
}

/*
 * The loop closed while a cold burst bounces between its passes, at a
 * moment that moves from round to round, on pools of 1 to 3 workers:
 * each request calls back once, with the whole file or -ECANCELED;
 * every worker is joined and no fd is left.
 */
BACKEND_TEST(epoll_attack, loop_closed_while_jobs_bounce)
{
	enum { N = 40, SIZE = 20000 };
	unsigned rounds = scaled(12, 3);
	int threads = tthread_count();
	struct rl_options opt;
	struct burst b;
	rl_loop *loop;

	burst_init(&b, "bounce", N, SIZE);
	alarm(100);
	for (unsigned round = 0; round < rounds; round++) {
		burst_cold(&b);
		rl_options_init(&opt);
		opt.pool_threads = 1 + round % 3;
		loop = tloop_opts(tp, &opt);
		burst_submit(loop, &b);
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		tspin_us((round * 397) % 3000);
		if (round % 2)
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		cr_assert_eq(rl_loop_close(loop), 0);
		burst_check(&b, true);
		/* The pool's workers are joined by the close; io_uring's
		 * io-wq workers (the cold opens on the uring
		 * configurations) leave after the ring, on their own. */
		cr_assert(twait_until(tthread_count() == threads, 5000),
			  "workers left: %d threads, %d before",
			  tthread_count(), threads);
	}
	alarm(0);
	burst_free(&b);
	/* The loops were closed above: only the fd check of tclose() is
	 * left, through a loop that has nothing to do. */
	tclose(tloop(tp));
}

/*
 * One burst of everything a read_file meets, on one worker: cold files
 * (a first pass that misses), procfs (refuses RWF_NOWAIT), /dev/zero
 * into a fixed buffer (-EFBIG), /dev/null (empty), FIFOs a feeder writes
 * to, interleaved. Each gets its own answer, once.
 */
BACKEND_TEST(epoll_attack, mixed_burst_on_one_worker)
{
	enum { N = 40, SIZE = 30000, KINDS = 5, FIFOS = N / KINDS };
	unsigned rounds = scaled(4, 1);
	char ver[4096], zbuf[N][16];
	const char *fifo[FIFOS];
	struct tseen s[N];
	rl_req r[N];
	struct rl_options opt;
	struct feeder feed;
	struct burst b;
	ssize_t vlen;
	rl_loop *loop;
	int fd;

	/* The feeder is a thread of the test's own. */
	tskip_uring_threads_under_valgrind(tp);
	fd = open("/proc/version", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	vlen = read(fd, ver, sizeof(ver));
	close(fd);
	cr_assert_gt(vlen, 0);
	burst_init(&b, "mixed", N, SIZE);
	/* Every fifth file becomes a FIFO at the same path. */
	for (int i = 0; i < FIFOS; i++)
		fifo[i] = b.path[i * KINDS + 4];
	rl_options_init(&opt);
	opt.pool_threads = 1;
	loop = tloop_opts(tp, &opt);
	alarm(100);
	for (unsigned round = 0; round < rounds; round++) {
		burst_cold(&b);
		memset(&feed, 0, sizeof(feed));
		for (int i = 0; i < FIFOS; i++) {
			cr_assert_eq(unlink(fifo[i]), 0);
			cr_assert_eq(mkfifo(fifo[i], 0600), 0);
			feed.path[feed.n++] = fifo[i];
		}
		for (int i = 0; i < N; i++) {
			const char *path = b.path[i];
			void *buf = NULL;
			size_t len = 0;
			unsigned flags = RL_READ_FILE_GROW;

			if (i % KINDS == 1)
				path = "/proc/version";
			if (i % KINDS == 2 || i % KINDS == 3) {
				path = i % KINDS == 2 ? "/dev/zero"
						      : "/dev/null";
				buf = zbuf[i];
				len = sizeof(zbuf[i]);
				flags = 0;
			}
			s[i] = (struct tseen){ 0 };
			r[i] = (rl_req){ .data = &s[i] };
			cr_assert_eq(rl_fs_read_file(loop, &r[i], path, buf,
						     len, flags, tseen_cb),
				     0);
		}
		feeder_start(&feed);
		for (int done = 0; done < N;) {
			cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
			done = 0;
			for (int i = 0; i < N; i++)
				done += s[i].calls;
		}
		feeder_stop(&feed);
		for (int i = 0; i < N; i++) {
			cr_assert_eq(s[i].calls, 1);
			switch (i % KINDS) {
			case 0:
				cr_assert_eq(s[i].result, SIZE, "%" PRId64,
					     s[i].result);
				tcheck(b.name[i], r[i].buf, SIZE);
				free(r[i].buf);
				break;
			case 1:
				cr_assert_eq(s[i].result, vlen);
				cr_assert_eq(
					memcmp(r[i].buf, ver, (size_t)vlen), 0);
				free(r[i].buf);
				break;
			case 2:
				cr_assert_eq(s[i].result, -EFBIG);
				break;
			case 3:
				cr_assert_eq(s[i].result, 0);
				break;
			case 4:
				cr_assert(got_feed(&r[i], &s[i]),
					  "fifo %d: %" PRId64, i, s[i].result);
				free(r[i].buf);
				break;
			}
		}
	}
	alarm(0);
	burst_free(&b);
	tclose(loop);
}

/*
 * "Never poll" (rl_options.idle_spin_ns < 0): on epoll neither the loop
 * polls for its pool's completions nor a worker for its next job, so
 * every completion must wake a sleeping loop and every job a sleeping
 * worker (the default polls could hide a lost wake-up). Stats one at a
 * time (each a pool job with the loop asleep), then cold and cached
 * bursts on one and on two workers: every request calls back once, with
 * the right answer, within the alarm.
 */
BACKEND_TEST(epoll_attack, no_polling_anywhere)
{
	enum { N = 64, SIZE = 12000, STATS = 300 };
	unsigned rounds = scaled(4, 2);
	const char *small;
	struct rl_options opt;
	struct burst b;
	rl_loop *loop;

	tfile("nopoll-small", 100);
	small = tkeep_path(tpath("nopoll-small"));
	burst_init(&b, "nopoll", N, SIZE);
	alarm(100);
	for (unsigned round = 0; round < rounds; round++) {
		rl_options_init(&opt);
		opt.idle_spin_ns = -1;
		opt.pool_threads = 1 + round % 2;
		loop = tloop_opts(tp, &opt);
		for (int i = 0; i < STATS; i++) {
			struct tseen s = { 0 };
			rl_req r = { .data = &s };
			struct statx stx;

			cr_assert_eq(
				rl_fs_stat(loop, &r, small, &stx, tseen_cb), 0);
			run_until(loop, &s.calls, 1);
			cr_assert_eq(s.result, 0);
			cr_assert_eq(stx.stx_size, 100);
		}
		if (round % 2)
			burst_cold(&b);
		else
			for (int i = 0; i < N; i++)
				tfile(b.name[i], SIZE);
		burst_submit(loop, &b);
		burst_run(loop, &b);
		cr_assert_eq(burst_check(&b, false), 0);
		cr_assert_eq(rl_loop_close(loop), 0);
	}
	alarm(0);
	burst_free(&b);
	tclose(tloop(tp));
}

/*
 * Every file cold, on a pool of one worker, then of many: the second
 * pass must not livelock (a job that misses again is not sent round
 * once more), and every request completes with the whole file.
 */
BACKEND_TEST(epoll_attack, all_cold_on_one_worker_and_on_many)
{
	/* Valgrind runs one thread at a time: fewer of them there. */
	const unsigned threads[] = { 1, scaled(64, 8) };
	unsigned n = scaled(192, 24);
	struct rl_options opt;
	struct burst b;
	rl_loop *loop;

	burst_init(&b, "all", (int)n, 12000);
	alarm(100);
	for (unsigned t = 0; t < 2; t++) {
		burst_cold(&b);
		rl_options_init(&opt);
		opt.pool_threads = threads[t];
		loop = tloop_opts(tp, &opt);
		burst_submit(loop, &b);
		burst_run(loop, &b);
		burst_check(&b, false);
		tclose(loop);
	}
	alarm(0);
	burst_free(&b);
}

/* -------------------------------------------- write_file's hand-over */

/* The byte at off of every write_file's data here. */
static unsigned char wbyte(size_t off)
{
	return (unsigned char)(off * 7 + off / 251 + 3);
}

static unsigned char *wdata(size_t len)
{
	unsigned char *d = malloc(len);

	cr_assert_not_null(d);
	for (size_t i = 0; i < len; i++)
		d[i] = wbyte(i);
	return d;
}

/* A FIFO's reader, opened by the test before the write_file (so that the
 * write_file's open finds it), without waiting; what it read so far. */
struct reader {
	char path[512];
	int fd;
	size_t got;
	bool final; /* the write_file called back: a 0 read is the end */
	bool eof;
};

static void reader_open(struct reader *rd, const char *name)
{
	snprintf(rd->path, sizeof(rd->path), "%s", tpath(name));
	unlink(rd->path);
	cr_assert_eq(mkfifo(rd->path, 0600), 0, "mkfifo: %s", strerror(errno));
	rd->fd = open(rd->path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	cr_assert_geq(rd->fd, 0);
	rd->got = 0;
	rd->final = false;
	rd->eof = false;
}

/* Reads at most max bytes of what is there now, checking each; returns
 * how many. A FIFO reads 0 before its writer came as after it left: 0 is
 * the end only once the write_file has called back (final). */
static size_t reader_take(struct reader *rd, size_t max)
{
	unsigned char buf[8192];
	size_t took = 0;

	while (took < max && !rd->eof) {
		size_t want =
			max - took < sizeof(buf) ? max - took : sizeof(buf);
		ssize_t r = read(rd->fd, buf, want);

		if (r < 0) {
			cr_assert_eq(errno, EAGAIN, "read: %s",
				     strerror(errno));
			break;
		}
		if (r == 0) {
			rd->eof = rd->final;
			break;
		}
		for (ssize_t i = 0; i < r; i++)
			cr_assert_eq(buf[i], wbyte(rd->got + (size_t)i),
				     "byte %zu", rd->got + (size_t)i);
		rd->got += (size_t)r;
		took += (size_t)r;
	}
	return took;
}

/* The write_file called back: reads to the end, which must come (its
 * fd closed) within 20 s. */
static void reader_finish(struct reader *rd, size_t max)
{
	uint64_t end = tnow_ms() + 20000;

	rd->final = true;
	while (!rd->eof) {
		reader_take(rd, max);
		cr_assert_lt(tnow_ms(), end, "no end: a writer is left open");
	}
}

static void reader_close(struct reader *rd)
{
	if (rd->fd >= 0)
		close(rd->fd);
	rd->fd = -1;
}

/* Runs the loop without sleeping (the test's own thread feeds the
 * FIFOs) until *calls reaches want, taking from the readers meanwhile at
 * most step bytes each per pass. */
static void run_draining(rl_loop *loop, const int *calls, int want,
			 struct reader *rds, int n, size_t step)
{
	uint64_t end = tnow_ms() + 60000;

	while (*calls < want) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		for (int i = 0; i < n; i++)
			reader_take(&rds[i], step);
		cr_assert_lt(tnow_ms(), end, "stuck: %d of %d", *calls, want);
	}
}

/* On io_uring the kernel raises SIGPIPE for a write to a pipe without a
 * reader, as write(2) does (ringloop.h says a program writing to pipes
 * ignores it); epoll's workers keep it to themselves, so there the test
 * keeps the default action, which would kill it. */
static void sigpipe_as_documented(const struct tp *tp)
{
	if (tp->backend == RL_BACKEND_URING)
		signal(SIGPIPE, SIG_IGN);
}

struct counted {
	int calls;
};

static struct counted wf_count;
static struct tseen wf_seen[RL__SLOW_MAX + 16];

static void wf_cb(rl_req *req)
{
	struct tseen *s = req->data;

	s->calls++;
	s->result = req->result;
	wf_count.calls++;
}

/*
 * Readers that leave after a prefix: each write_file filled its FIFO
 * (on epoll: handed to the slow lane with its fd open), its reader takes
 * a prefix of a different length, checks it, and closes. Each
 * write_file fails with -EPIPE, once; on epoll the process survives with
 * SIGPIPE at its default action.
 */
BACKEND_TEST(epoll_attack, reader_leaves_after_the_hand_over)
{
	enum { FIFOS = 4, BIG = 1 << 20 };
	unsigned rounds = scaled(4, 2);
	unsigned char *data = wdata(BIG);
	struct reader rds[FIFOS];
	rl_req reqs[FIFOS];
	rl_loop *loop;

	sigpipe_as_documented(tp);
	loop = tloop(tp);
	alarm(50);
	for (unsigned round = 0; round < rounds; round++) {
		wf_count.calls = 0;
		for (int i = 0; i < FIFOS; i++) {
			char name[32];

			snprintf(name, sizeof(name), "leave%d", i);
			reader_open(&rds[i], name);
			wf_seen[i] = (struct tseen){ 0 };
			reqs[i] = (rl_req){ .data = &wf_seen[i] };
			cr_assert_eq(rl_fs_write_file(loop, &reqs[i],
						      rds[i].path, data, BIG, 0,
						      0644, wf_cb),
				     0);
		}
		/* Until every FIFO is full (its writer waits for room). */
		for (int i = 0; i < FIFOS; i++) {
			uint64_t end = tnow_ms() + 20000;
			int room = 0;

			do {
				cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
				cr_assert_eq(ioctl_fionread(rds[i].fd, &room),
					     0);
				cr_assert_lt(tnow_ms(), end);
			} while (room < 65536);
		}
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		for (int i = 0; i < FIFOS; i++) {
			size_t prefix = 1000 + (size_t)(i + round) * 7777;

			cr_assert_eq(reader_take(&rds[i], prefix), prefix);
			reader_close(&rds[i]);
		}
		run_draining(loop, &wf_count.calls, FIFOS, rds, 0, 0);
		for (int i = 0; i < FIFOS; i++) {
			cr_assert_eq(wf_seen[i].calls, 1);
			cr_assert_eq(wf_seen[i].result, -EPIPE, "%" PRId64,
				     wf_seen[i].result);
		}
	}
	alarm(0);
	free(data);
	tclose(loop);
}

/*
 * Slow readers: the first bytes one at a time, one per pass of the
 * loop, then small reads; the write_files (each more than a FIFO holds)
 * go on from where the regular worker stopped and every byte arrives
 * once, in order, then the end.
 */
BACKEND_TEST(epoll_attack, readers_read_byte_by_byte)
{
	enum { FIFOS = 3, BIG = 200 * 1024 };
	/* Each slow byte costs a pass of the loop: fewer under Valgrind. */
	size_t slow = scaled(3000, 300);
	unsigned char *data = wdata(BIG);
	struct reader rds[FIFOS];
	rl_req reqs[FIFOS];
	uint64_t end;
	rl_loop *loop;

	loop = tloop(tp);
	alarm(50);
	wf_count.calls = 0;
	for (int i = 0; i < FIFOS; i++) {
		char name[32];

		snprintf(name, sizeof(name), "slow%d", i);
		reader_open(&rds[i], name);
		wf_seen[i] = (struct tseen){ 0 };
		reqs[i] = (rl_req){ .data = &wf_seen[i] };
		cr_assert_eq(rl_fs_write_file(loop, &reqs[i], rds[i].path, data,
					      BIG - (size_t)i * 333, 0, 0644,
					      wf_cb),
			     0);
	}
	end = tnow_ms() + 40000;
	while (rds[0].got < slow || rds[1].got < slow || rds[2].got < slow) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		for (int i = 0; i < FIFOS; i++)
			if (rds[i].got < slow)
				reader_take(&rds[i], 1);
		cr_assert_lt(tnow_ms(), end, "%d/%u: %zu %zu %zu, %d %d %d",
			     tp->backend, tp->flags, rds[0].got, rds[1].got,
			     rds[2].got, wf_seen[0].calls, wf_seen[1].calls,
			     wf_seen[2].calls);
	}
	run_draining(loop, &wf_count.calls, FIFOS, rds, FIFOS, 512);
	for (int i = 0; i < FIFOS; i++) {
		size_t len = BIG - (size_t)i * 333;

		cr_assert_eq(wf_seen[i].calls, 1);
		cr_assert_eq(wf_seen[i].result, (int64_t)len);
		reader_finish(&rds[i], BIG);
		cr_assert_eq(rds[i].got, len);
		reader_close(&rds[i]);
	}
	alarm(0);
	free(data);
	tclose(loop);
}

/*
 * A cancel that lands at a moment moving round by round through the
 * hand-over: the regular worker's open and first writes, its handing the
 * open fd back, the slow lane's queue, the slow lane's wait for room.
 * The write_file ends with -ECANCELED, once; its reader then sees a
 * prefix of the data and the end (the write_file's fd was closed, never
 * left open nor lost).
 */
BACKEND_TEST(epoll_attack, cancel_at_the_hand_over)
{
	enum { BIG = 256 * 1024 };
	unsigned rounds = scaled(80, 8);
	unsigned char *data = wdata(BIG);
	struct reader rd;
	rl_req req;
	rl_loop *loop;

	loop = tloop(tp);
	alarm(50);
	for (unsigned round = 0; round < rounds; round++) {
		int ret;

		wf_count.calls = 0;
		reader_open(&rd, "handover");
		wf_seen[0] = (struct tseen){ 0 };
		req = (rl_req){ .data = &wf_seen[0] };
		cr_assert_eq(rl_fs_write_file(loop, &req, rd.path, data, BIG, 0,
					      0644, wf_cb),
			     0);
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		tspin_us((round * 53) % 1500);
		if (round % 3 == 1)
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		ret = rl_cancel(loop, &req);
		cr_assert_eq(ret, 0, "cancel: %d", ret);
		run_draining(loop, &wf_count.calls, 1, NULL, 0, 0);
		cr_assert_eq(wf_seen[0].calls, 1);
		cr_assert_eq(wf_seen[0].result, -ECANCELED);
		reader_finish(&rd, BIG);
		cr_assert_lt(rd.got, BIG);
		reader_close(&rd);
	}
	alarm(0);
	free(data);
	tclose(loop);
}

/*
 * More write_files than the slow lane has workers (RL__SLOW_MAX), each
 * more than its FIFO holds: on epoll the last ones wait in the slow
 * lane's queue with their fds open. Round 0 drains every reader: each
 * write_file gives its length, each reader every byte and the end.
 * Round 1 drains part of them, then closes the loop: each calls back
 * once, with its length (its reader then has every byte) or -ECANCELED
 * (a prefix); every reader sees the end, no fd is left.
 */
BACKEND_TEST(epoll_attack, more_hand_overs_than_slow_workers)
{
	enum { FIFOS = RL__SLOW_MAX + 8, BIG = 100 * 1024 };
	unsigned char *data = wdata(BIG);
	struct reader rds[FIFOS];
	rl_req reqs[FIFOS];
	rl_loop *loop;

	alarm(80);
	/* Under Valgrind, whose 72 slow workers take turns, the drain only
	 * (special/full_fifo_writes_at_loop_close closes on them). */
	for (int round = 0; round < (int)scaled(2, 1); round++) {
		loop = tloop(tp);
		wf_count.calls = 0;
		for (int i = 0; i < FIFOS; i++) {
			char name[32];

			snprintf(name, sizeof(name), "many%d", i);
			reader_open(&rds[i], name);
			wf_seen[i] = (struct tseen){ 0 };
			reqs[i] = (rl_req){ .data = &wf_seen[i] };
			cr_assert_eq(rl_fs_write_file(loop, &reqs[i],
						      rds[i].path, data, BIG, 0,
						      0644, wf_cb),
				     0);
		}
		for (int k = 0; k < 20; k++) {
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
			usleep(1000);
		}
		if (round == 0) {
			run_draining(loop, &wf_count.calls, FIFOS, rds, FIFOS,
				     16384);
		} else {
			/* Every other reader takes some, a few all. */
			for (int k = 0; k < 30; k++) {
				cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
				for (int i = 0; i < FIFOS; i += 2)
					reader_take(&rds[i],
						    i % 8 ? 4096 : BIG);
			}
			cr_assert_eq(rl_loop_close(loop), 0);
		}
		for (int i = 0; i < FIFOS; i++) {
			cr_assert_eq(wf_seen[i].calls, 1, "write_file %d", i);
			cr_assert(wf_seen[i].result == BIG ||
					  (round == 1 &&
					   wf_seen[i].result == -ECANCELED),
				  "write_file %d: %" PRId64, i,
				  wf_seen[i].result);
			reader_finish(&rds[i], BIG);
			if (wf_seen[i].result == BIG)
				cr_assert_eq(rds[i].got, BIG, "reader %d", i);
			else
				cr_assert_lt(rds[i].got, BIG, "reader %d", i);
			reader_close(&rds[i]);
		}
		if (round == 0)
			tclose(loop);
	}
	alarm(0);
	free(data);
	tclose(tloop(tp));
}

/* ---------------------------------------------------------- the fd budget */

/* The highest fd open in this process. */
static int highest_fd(void)
{
	int hi = -1;

	for (int fd = 0; fd < 4096; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			hi = fd;
	return hi;
}

/* Fills every free fd below the highest open one with /dev/null, so
 * that a limit of highest_fd() + 1 + k leaves exactly k free; returns
 * how many it opened, into held (closed with unfill_holes()). */
static int fill_holes(int *held, int max)
{
	int hi = highest_fd(), n = 0;

	for (;;) {
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

		cr_assert_geq(fd, 0);
		if (fd > hi) {
			close(fd);
			return n;
		}
		cr_assert_lt(n, max);
		held[n++] = fd;
	}
}

static void unfill_holes(const int *held, int n)
{
	for (int i = 0; i < n; i++)
		close(held[i]);
}

/* A FIFO at path holding FEED_MSG, with a writer (returned) and no
 * reader: a read_file of it gets the message, then its end once the test
 * closes the writer, which it does when the message was taken (see
 * fifo_taken()). The test needs no fd of its own to feed it later (a
 * feeder that had to open it could find none left). */
static int fifo_with_message(const char *path)
{
	int tmp, wfd;

	unlink(path);
	cr_assert_eq(mkfifo(path, 0600), 0);
	tmp = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	cr_assert_geq(tmp, 0);
	wfd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	cr_assert_geq(wfd, 0);
	cr_assert_eq(write(wfd, FEED_MSG, strlen(FEED_MSG)),
		     (ssize_t)strlen(FEED_MSG));
	close(tmp);
	return wfd;
}

/* Whether a reader took the message out of the FIFO written by wfd. */
static bool fifo_taken(int wfd)
{
	int left = -1;

	return ioctl_fionread(wfd, &left) == 0 && left == 0;
}

/*
 * RLIMIT_NOFILE barely above what the test holds, and everything that
 * takes an fd at once: a cold burst (each read_file holds one for a
 * moment, on both passes), FIFO read_files that keep theirs until their
 * writer goes, write_files into full FIFOs that
 * keep theirs in the slow lane until the test drains the readers. Each
 * request calls back once, with its data or -EMFILE; nothing hangs, no
 * fd is left.
 */
NATIVE_BACKEND_TEST(epoll_attack, fd_budget_cold_streams_and_hand_overs)
{
	enum { N = 24, SIZE = 30000, FIFOS = 4, WRITES = 4, BIG = 200 * 1024 };
	static const int slack[] = { 2, 5, 9 };
	unsigned char *data = wdata(BIG);
	struct reader rds[WRITES];
	struct tseen fs[FIFOS], ws[WRITES];
	rl_req fr[FIFOS], wr[WRITES];
	struct rlimit old, rl;
	struct rl_options opt;
	int wfd[FIFOS], holes[64], nholes;
	struct burst b, fifos;
	rl_loop *loop;

	if (getenv("RL_VALGRIND"))
		cr_skip_test("Valgrind does not let RLIMIT_NOFILE be lowered");
	burst_init(&b, "budget", N, SIZE);
	burst_init(&fifos, "budgetfifo", FIFOS, 0);
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	rl_options_init(&opt);
	opt.pool_threads = 2;
	loop = tloop_opts(tp, &opt);
	alarm(100);
	for (unsigned round = 0; round < 3; round++) {
		int calls;

		burst_cold(&b);
		for (int i = 0; i < FIFOS; i++)
			wfd[i] = fifo_with_message(fifos.path[i]);
		for (int i = 0; i < WRITES; i++) {
			char name[32];

			snprintf(name, sizeof(name), "budgetw%d", i);
			reader_open(&rds[i], name);
		}
		nholes = fill_holes(holes, 64);
		rl = old;
		rl.rlim_cur = (rlim_t)(highest_fd() + 1 + slack[round]);
		cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);

		burst_submit(loop, &b);
		for (int i = 0; i < FIFOS; i++) {
			fs[i] = (struct tseen){ 0 };
			fr[i] = (rl_req){ .data = &fs[i] };
			cr_assert_eq(rl_fs_read_file(
					     loop, &fr[i], fifos.path[i], NULL,
					     0, RL_READ_FILE_GROW, tseen_cb),
				     0);
		}
		for (int i = 0; i < WRITES; i++) {
			ws[i] = (struct tseen){ 0 };
			wr[i] = (rl_req){ .data = &ws[i] };
			cr_assert_eq(rl_fs_write_file(loop, &wr[i], rds[i].path,
						      data, BIG, 0, 0644,
						      tseen_cb),
				     0);
		}
		for (uint64_t end = tnow_ms() + 60000;;) {
			calls = burst_calls(&b);
			for (int i = 0; i < FIFOS; i++)
				calls += fs[i].calls;
			for (int i = 0; i < WRITES; i++)
				calls += ws[i].calls;
			if (calls == N + FIFOS + WRITES)
				break;
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
			for (int i = 0; i < WRITES; i++)
				reader_take(&rds[i], 16384);
			for (int i = 0; i < FIFOS; i++) {
				if (wfd[i] >= 0 && fifo_taken(wfd[i])) {
					close(wfd[i]);
					wfd[i] = -1;
				}
			}
			if (tnow_ms() >= end) {
				int fc = 0, wc = 0, fed = 0;

				for (int i = 0; i < FIFOS; i++)
					fc += fs[i].calls, fed += wfd[i] < 0;
				for (int i = 0; i < WRITES; i++)
					wc += ws[i].calls;
				setrlimit(RLIMIT_NOFILE, &old);
				cr_assert_fail("%d/%u round %u: stuck at %d "
					       "calls: cold %d, fifo %d (fed "
					       "%d), writes %d, fds %d",
					       tp->backend, tp->flags, round,
					       calls, burst_calls(&b), fc, fed,
					       wc, tfd_count());
			}
			usleep(200);
		}
		cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
		unfill_holes(holes, nholes);
		for (int i = 0; i < FIFOS; i++)
			if (wfd[i] >= 0)
				close(wfd[i]);
		for (int i = 0; i < N; i++) {
			cr_assert_eq(b.s[i].calls, 1);
			if (b.s[i].result == -EMFILE)
				continue;
			cr_assert_eq(b.s[i].result, SIZE, "read %d: %" PRId64,
				     i, b.s[i].result);
			tcheck(b.name[i], b.r[i].buf, SIZE);
			free(b.r[i].buf);
		}
		for (int i = 0; i < FIFOS; i++) {
			cr_assert_eq(fs[i].calls, 1);
			cr_assert(fs[i].result == -EMFILE ||
					  got_feed(&fr[i], &fs[i]),
				  "fifo %d: %" PRId64, i, fs[i].result);
			free(fr[i].buf);
		}
		for (int i = 0; i < WRITES; i++) {
			cr_assert_eq(ws[i].calls, 1);
			cr_assert(ws[i].result == BIG ||
					  ws[i].result == -EMFILE,
				  "write_file %d: %" PRId64, i, ws[i].result);
			reader_finish(&rds[i], BIG);
			cr_assert_eq(rds[i].got,
				     ws[i].result == BIG ? (size_t)BIG : 0);
			reader_close(&rds[i]);
		}
	}
	alarm(0);
	free(data);
	burst_free(&b);
	burst_free(&fifos);
	tclose(loop);
}

/*
 * Every fd the limit leaves held by the loop's own read_files: FIFOS FIFO
 * reads, each with a writer that stays (and its message taken), until
 * fifo_hold_end() lets the writers go and the reads end.
 */
enum { HOLD_FIFOS = 3, HOLD_LEN = 5000 };

struct fifo_hold {
	struct burst fifos;
	int wfd[HOLD_FIFOS];
	struct tseen fs[HOLD_FIFOS];
	rl_req fr[HOLD_FIFOS];
	struct rlimit old;
	int holes[64], nholes;
	uint64_t end; /* the tests' bound, in tnow_ms() */
};

static void fifo_hold_start(struct fifo_hold *h, rl_loop *loop,
			    const char *prefix)
{
	struct rlimit rl;

	burst_init(&h->fifos, prefix, HOLD_FIFOS, 0);
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &h->old), 0);
	for (int i = 0; i < HOLD_FIFOS; i++)
		h->wfd[i] = fifo_with_message(h->fifos.path[i]);
	h->nholes = fill_holes(h->holes, 64);
	rl = h->old;
	rl.rlim_cur = (rlim_t)(highest_fd() + 1 + HOLD_FIFOS);
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	for (int i = 0; i < HOLD_FIFOS; i++) {
		h->fs[i] = (struct tseen){ 0 };
		h->fr[i] = (rl_req){ .data = &h->fs[i] };
		cr_assert_eq(rl_fs_read_file(loop, &h->fr[i], h->fifos.path[i],
					     NULL, 0, RL_READ_FILE_GROW,
					     tseen_cb),
			     0);
	}
	/* Until each read_file has its FIFO open (and took the message). */
	h->end = tnow_ms() + 20000;
	for (int i = 0; i < HOLD_FIFOS; i++) {
		while (!fifo_taken(h->wfd[i])) {
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
			cr_assert_lt(tnow_ms(), h->end, "%s: fifo %d: %d %s",
				     rl_loop_backend(loop), i, h->fs[i].calls,
				     rl_strerror((int)h->fs[i].result));
		}
	}
}

/* The writers go: each FIFO read ends with its message. */
static void fifo_hold_end(struct fifo_hold *h, rl_loop *loop)
{
	for (int i = 0; i < HOLD_FIFOS; i++)
		close(h->wfd[i]);
	while (h->fs[0].calls + h->fs[1].calls + h->fs[2].calls < HOLD_FIFOS) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		cr_assert_lt(tnow_ms(), h->end);
	}
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &h->old), 0);
	unfill_holes(h->holes, h->nholes);
	for (int i = 0; i < HOLD_FIFOS; i++) {
		cr_assert_eq(h->fs[i].calls, 1);
		cr_assert(got_feed(&h->fr[i], &h->fs[i]), "fifo %d: %" PRId64,
			  i, h->fs[i].result);
		free(h->fr[i].buf);
	}
	burst_free(&h->fifos);
}

/*
 * Every fd the limit leaves is held by the loop's own read_files (FIFOs
 * whose writers stay until the test lets them go); then a write_file and
 * a read_file of regular files. Neither may fail with -EMFILE: each
 * waits for one of the loop's own fds to come back (the io_uring
 * backend's write_file does, as its read_file does), and completes once
 * the FIFOs end.
 */
NATIVE_BACKEND_TEST(epoll_attack, write_file_waits_for_the_loops_own_fds)
{
	unsigned char *data = wdata(HOLD_LEN);
	struct tseen sw = { 0 }, sr = { 0 };
	rl_req w = { .data = &sw }, r = { .data = &sr };
	char rpath[512], wpath[512], back[HOLD_LEN + 1];
	struct fifo_hold h;
	rl_loop *loop;
	int fd;

	if (getenv("RL_VALGRIND"))
		cr_skip_test("Valgrind does not let RLIMIT_NOFILE be lowered");
	snprintf(rpath, sizeof(rpath), "%s", tfile("budgetread", HOLD_LEN));
	snprintf(wpath, sizeof(wpath), "%s", tpath("budgetwrite"));
	loop = tloop(tp);
	alarm(50);
	fifo_hold_start(&h, loop, "ownfifo");
	cr_assert_eq(rl_fs_write_file(loop, &w, wpath, data, HOLD_LEN, 0, 0644,
				      tseen_cb),
		     0);
	cr_assert_eq(rl_fs_read_file(loop, &r, rpath, back, sizeof(back), 0,
				     tseen_cb),
		     0);
	for (int k = 0; k < 50; k++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(1000);
	}
	/* On io_uring with direct descriptors they needed no fd. */
	cr_assert(sw.calls == 0 || sw.result == HOLD_LEN, "write_file: %s",
		  rl_strerror((int)sw.result));
	cr_assert(sr.calls == 0 || sr.result == HOLD_LEN, "read_file: %s",
		  rl_strerror((int)sr.result));
	fifo_hold_end(&h, loop);
	while (sw.calls + sr.calls < 2) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		cr_assert_lt(tnow_ms(), h.end);
	}
	alarm(0);
	cr_assert_eq(sw.calls, 1);
	cr_assert_eq(sw.result, HOLD_LEN, "write_file: %s",
		     rl_strerror((int)sw.result));
	cr_assert_eq(sr.calls, 1);
	cr_assert_eq(sr.result, HOLD_LEN, "read_file: %s",
		     rl_strerror((int)sr.result));
	tcheck("budgetread", back, HOLD_LEN);
	fd = open(wpath, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(read(fd, back, sizeof(back)), HOLD_LEN);
	close(fd);
	cr_assert_eq(memcmp(back, data, HOLD_LEN), 0);
	free(data);
	tclose(loop);
}

/*
 * The same, but the FIFOs' writers stay: no fd of the loop's own comes
 * back. The write_file and the read_file that wait for one fail with
 * -EMFILE once none has come back for RL__FD_STUCK_NS (a second),
 * instead of waiting with the FIFOs for ever; where they need no fd
 * (io_uring with direct descriptors) they succeed. The FIFO reads go on,
 * and end with their writers.
 */
NATIVE_BACKEND_TEST(epoll_attack, fd_waiters_fail_when_no_fd_comes_back)
{
	unsigned char *data = wdata(HOLD_LEN);
	struct tseen sw = { 0 }, sr = { 0 };
	rl_req w = { .data = &sw }, r = { .data = &sr };
	char rpath[512], wpath[512], back[HOLD_LEN + 1];
	struct fifo_hold h;
	rl_loop *loop;

	if (getenv("RL_VALGRIND"))
		cr_skip_test("Valgrind does not let RLIMIT_NOFILE be lowered");
	snprintf(rpath, sizeof(rpath), "%s", tfile("stuckread", HOLD_LEN));
	snprintf(wpath, sizeof(wpath), "%s", tpath("stuckwrite"));
	loop = tloop(tp);
	alarm(50);
	fifo_hold_start(&h, loop, "stuckfifo");
	cr_assert_eq(rl_fs_write_file(loop, &w, wpath, data, HOLD_LEN, 0, 0644,
				      tseen_cb),
		     0);
	cr_assert_eq(rl_fs_read_file(loop, &r, rpath, back, sizeof(back), 0,
				     tseen_cb),
		     0);
	/* The FIFO reads keep the loop alive: ONCE at a time, until both
	 * have called back (a hang is the alarm's, or this bound's). */
	while (sw.calls + sr.calls < 2) {
		cr_assert_geq(rl_run(loop, RL_RUN_ONCE), 0);
		cr_assert_lt(tnow_ms(), h.end,
			     "write_file %d, read_file %d calls", sw.calls,
			     sr.calls);
	}
	cr_assert(sw.result == -EMFILE || sw.result == HOLD_LEN,
		  "write_file: %s", rl_strerror((int)sw.result));
	cr_assert(sr.result == -EMFILE || sr.result == HOLD_LEN,
		  "read_file: %s", rl_strerror((int)sr.result));
	if (tp->backend != RL_BACKEND_URING || (tp->flags & RL_NO_DIRECT)) {
		cr_assert_eq(sw.result, -EMFILE);
		cr_assert_eq(sr.result, -EMFILE);
	}
	for (int i = 0; i < HOLD_FIFOS; i++)
		cr_assert_eq(h.fs[i].calls, 0, "fifo %d ended early", i);
	fifo_hold_end(&h, loop);
	alarm(0);
	free(data);
	tclose(loop);
}

/*
 * No fd free at all, and the loop's only write_file waits for a FIFO's
 * reader that never comes (on epoll in the slow lane's blocking open,
 * which holds no fd yet). A read_file that meets EMFILE then must not
 * wait for that write_file to give an fd back: it calls back at once,
 * with -EMFILE (or the file, where io_uring's direct descriptors need no
 * fd). The write_file ends when cancelled.
 */
NATIVE_BACKEND_TEST(epoll_attack, read_file_does_not_wait_for_a_readerless_fifo)
{
	enum { LEN = 3000 };
	unsigned char *data = wdata(LEN);
	struct tseen sw = { 0 }, sr = { 0 };
	rl_req w = { .data = &sw }, r = { .data = &sr };
	char rpath[512], fifo[512], back[LEN + 1];
	struct rlimit old, rl;
	int holes[64], nholes;
	uint64_t end;
	rl_loop *loop;

	if (getenv("RL_VALGRIND"))
		cr_skip_test("Valgrind does not let RLIMIT_NOFILE be lowered");
	snprintf(rpath, sizeof(rpath), "%s", tfile("noreader", LEN));
	snprintf(fifo, sizeof(fifo), "%s", tpath("noreaderfifo"));
	cr_assert_eq(mkfifo(fifo, 0600), 0);
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	loop = tloop(tp);
	alarm(50);
	cr_assert_eq(
		rl_fs_write_file(loop, &w, fifo, data, LEN, 0, 0644, tseen_cb),
		0);
	for (int k = 0; k < 20; k++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(1000);
	}
	cr_assert_eq(sw.calls, 0, "no reader: the write_file waits");
	nholes = fill_holes(holes, 64);
	rl = old;
	rl.rlim_cur = (rlim_t)(highest_fd() + 1);
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
	cr_assert_eq(rl_fs_read_file(loop, &r, rpath, back, sizeof(back), 0,
				     tseen_cb),
		     0);
	end = tnow_ms() + 5000;
	while (!sr.calls && tnow_ms() < end) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(500);
	}
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	unfill_holes(holes, nholes);
	cr_assert_eq(sr.calls, 1, "the read_file waits for the write_file");
	cr_assert(sr.result == -EMFILE || sr.result == LEN, "read_file: %s",
		  rl_strerror((int)sr.result));
	if (sr.result == LEN)
		tcheck("noreader", back, LEN);
	cr_assert_eq(sw.calls, 0);
	cr_assert_eq(rl_cancel(loop, &w), 0);
	end = tnow_ms() + 20000;
	while (!sw.calls) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		cr_assert_lt(tnow_ms(), end);
		usleep(500);
	}
	alarm(0);
	cr_assert_eq(sw.calls, 1);
	cr_assert_eq(sw.result, -ECANCELED);
	free(data);
	tclose(loop);
}

/* ------------------------------------------------- the pool's jobs, cancelled */

/*
 * Cancels of requests whose work is done but whose result the loop has
 * not taken yet (on epoll: on the pool's done list; on io_uring: a
 * completion not reaped). What ran cannot be taken back, as rl__complete()
 * says: a close reports 0, a read its bytes; an open's fd is closed by
 * the loop (tclose() counts them); the others report -ECANCELED. Each
 * calls back once.
 */
BACKEND_TEST(epoll_attack, cancel_done_but_not_reaped_every_op)
{
	enum { OPS = 9, LEN = 4000 };
	unsigned rounds = scaled(6, 2);
	const char *file;
	char buf[LEN], name[32], newdir[600], gone[600], created[600];
	char wpath[600];
	struct statx stx;
	struct tseen s[OPS];
	bool took[OPS];
	rl_req r[OPS];
	struct rl_options opt;
	rl_loop *loop;
	int fd, cfd, wfd;

	rl_options_init(&opt);
	opt.pool_threads = 2;
	loop = tloop_opts(tp, &opt);
	alarm(50);
	for (unsigned round = 0; round < rounds; round++) {
		snprintf(name, sizeof(name), "done%u", round);
		file = tfile(name, LEN);
		fd = open(file, O_RDWR | O_CLOEXEC);
		cr_assert_geq(fd, 0);
		cfd = open(file, O_RDONLY | O_CLOEXEC);
		cr_assert_geq(cfd, 0);
		snprintf(wpath, sizeof(wpath), "%s.w", file);
		wfd = open(wpath, O_CREAT | O_RDWR | O_CLOEXEC, 0644);
		cr_assert_geq(wfd, 0);
		snprintf(newdir, sizeof(newdir), "%s.d", file);
		snprintf(gone, sizeof(gone), "%s.gone", file);
		snprintf(created, sizeof(created), "%s.new", file);
		close(open(gone, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
		for (int i = 0; i < OPS; i++) {
			s[i] = (struct tseen){ 0 };
			r[i] = (rl_req){ .data = &s[i] };
		}
		cr_assert_eq(rl_fs_stat(loop, &r[0], file, &stx, tseen_cb), 0);
		cr_assert_eq(rl_fs_read(loop, &r[1], fd, buf, LEN, 0, tseen_cb),
			     0);
		cr_assert_eq(rl_fs_read_file(loop, &r[2], file, NULL, 0,
					     RL_READ_FILE_GROW, tseen_cb),
			     0);
		/* Into a file of its own: a shared burst may run it before
		 * the read_file. */
		cr_assert_eq(
			rl_fs_write(loop, &r[3], wfd, "xyz", 3, 0, tseen_cb),
			0);
		cr_assert_eq(rl_fs_open(loop, &r[4], created,
					O_CREAT | O_RDWR | O_CLOEXEC, 0644,
					tseen_cb),
			     0);
		cr_assert_eq(rl_fs_close(loop, &r[5], cfd, tseen_cb), 0);
		cr_assert_eq(rl_fs_unlink(loop, &r[6], gone, tseen_cb), 0);
		cr_assert_eq(rl_fs_mkdir(loop, &r[7], newdir, 0755, tseen_cb),
			     0);
		cr_assert_eq(rl_fs_fsync(loop, &r[8], fd, 0, tseen_cb), 0);
		/* Handed over (or done on the loop thread) and finished,
		 * but not reaped: no pass of the loop meanwhile. */
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		sleep_ms(100);
		for (int i = 0; i < OPS; i++) {
			int ret = rl_cancel(loop, &r[i]);

			/* Finished on the loop thread: called back in that
			 * pass already. */
			cr_assert(ret == 0 || (ret == -ENOENT && s[i].calls),
				  "cancel %d: %d", i, ret);
			took[i] = ret == 0;
		}
		trun(loop);
		for (int i = 0; i < OPS; i++) {
			/* What each says, cancelled (rl__complete()'s rule)
			 * or not: a close and a read that ran keep theirs. */
			static const int64_t want[OPS][2] = {
				{ 0, -ECANCELED },   { LEN, LEN },
				{ LEN, -ECANCELED }, { 3, -ECANCELED },
				{ 0, -ECANCELED },   { 0, 0 },
				{ 0, -ECANCELED },   { 0, -ECANCELED },
				{ 0, -ECANCELED },
			};
			int64_t res = s[i].result;

			cr_assert_eq(s[i].calls, 1, "op %d", i);
			if (i == 4 && !took[i]) {
				cr_assert_geq(res, 0, "open: %" PRId64, res);
				close((int)res);
				continue;
			}
			cr_assert_eq(res, want[i][took[i]],
				     "op %d (cancelled %d): %" PRId64, i,
				     took[i], res);
		}
		tcheck(name, buf, LEN);
		if (!took[2])
			tcheck(name, r[2].buf, LEN);
		free(r[2].buf);
		/* Every cancelled one that ran did its work all the same. */
		cr_assert_eq(access(created, F_OK), 0);
		cr_assert_neq(access(gone, F_OK), 0);
		cr_assert_eq(rmdir(newdir), 0);
		cr_assert_eq(unlink(created), 0);
		close(wfd);
		close(fd);
	}
	alarm(0);
	tclose(loop);
}

/*
 * The interrupt signal meeting a worker between jobs: one worker runs a
 * long line of short jobs (stats, read_files, write_files of regular
 * files), and the loop cancels every third while they run, so that the
 * signal for a job often lands after it finished: in the worker's wait
 * for the next job, or in the next job's syscalls. A job rl_cancel()
 * accepted ends with -ECANCELED (or its real result, for what cannot be
 * taken back, none of these three); none of the others may fail (no EINTR leaks out of a job
 * that was not asked to give up), each calls back once.
 */
BACKEND_TEST(epoll_attack, interrupts_between_jobs)
{
	enum { N = 60, LEN = 3000 };
	unsigned rounds = scaled(20, 3);
	const char *file = tfile("between", LEN);
	char path[512], out[N][600];
	struct statx stx[N];
	unsigned char *data = wdata(LEN);
	struct tseen s[N];
	bool hit[N];
	rl_req r[N];
	struct rl_options opt;
	rl_loop *loop;

	snprintf(path, sizeof(path), "%s", file);
	for (int i = 0; i < N; i++)
		snprintf(out[i], sizeof(out[i]), "%s.out%d", path, i);
	rl_options_init(&opt);
	opt.pool_threads = 1;
	loop = tloop_opts(tp, &opt);
	alarm(80);
	for (unsigned round = 0; round < rounds; round++) {
		memset(hit, 0, sizeof(hit));
		for (int i = 0; i < N; i++) {
			s[i] = (struct tseen){ 0 };
			r[i] = (rl_req){ .data = &s[i] };
			switch (i % 3) {
			case 0:
				cr_assert_eq(rl_fs_stat(loop, &r[i], path,
							&stx[i], tseen_cb),
					     0);
				break;
			case 1:
				cr_assert_eq(rl_fs_read_file(loop, &r[i], path,
							     NULL, 0,
							     RL_READ_FILE_GROW,
							     tseen_cb),
					     0);
				break;
			default:
				cr_assert_eq(rl_fs_write_file(
						     loop, &r[i], out[i], data,
						     LEN, 0, 0644, tseen_cb),
					     0);
			}
		}
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		for (int i = (int)round % 3; i < N; i += 3) {
			tspin_us(20 + (unsigned)(i * 7 + (int)round) % 60);
			if (rl_cancel(loop, &r[i]) == 0)
				hit[i] = true;
		}
		trun(loop);
		for (int i = 0; i < N; i++) {
			int64_t res = s[i].result;

			cr_assert_eq(s[i].calls, 1, "job %d", i);
			/* None of the three keeps a result once cancelled
			 * (rl__complete()). */
			if (hit[i]) {
				cr_assert_eq(res, -ECANCELED,
					     "job %d: %" PRId64, i, res);
				if (i % 3 == 1)
					free(r[i].buf);
				continue;
			}
			switch (i % 3) {
			case 0:
				cr_assert_eq(res, 0, "stat %d: %s", i,
					     rl_strerror((int)res));
				cr_assert_eq(stx[i].stx_size, LEN);
				break;
			case 1:
				cr_assert_eq(res, LEN, "read_file %d: %s", i,
					     rl_strerror((int)res));
				tcheck("between", r[i].buf, LEN);
				free(r[i].buf);
				break;
			default:
				cr_assert_eq(res, LEN, "write_file %d: %s", i,
					     rl_strerror((int)res));
			}
		}
	}
	alarm(0);
	free(data);
	tclose(loop);
}

/*
 * Waves: every pass of the loop submits a burst of cached read_files
 * (shared with the workers: the loop takes jobs off the pool's queue)
 * while the cold read_files of the waves before still go round that
 * queue between their two passes, so the loop's takes race the workers'
 * requeues. Every request calls back once with its whole file.
 */
BACKEND_TEST(epoll_attack, loop_takes_race_worker_requeues)
{
	enum { WAVES = 6, COLD = 12, HOT = 12, SIZE = 16000 };
	unsigned rounds = scaled(3, 1);
	struct burst cold[WAVES], hot[WAVES];
	struct rl_options opt;
	rl_loop *loop;

	for (int w = 0; w < WAVES; w++) {
		char prefix[16];

		snprintf(prefix, sizeof(prefix), "wc%d_", w);
		burst_init(&cold[w], prefix, COLD, SIZE);
		snprintf(prefix, sizeof(prefix), "wh%d_", w);
		burst_init(&hot[w], prefix, HOT, SIZE / 2 + 77);
		/* Just written: in the page cache. */
		for (int i = 0; i < HOT; i++)
			tfile(hot[w].name[i], hot[w].size);
	}
	rl_options_init(&opt);
	opt.pool_threads = 2;
	loop = tloop_opts(tp, &opt);
	alarm(80);
	for (unsigned round = 0; round < rounds; round++) {
		for (int w = 0; w < WAVES; w++)
			burst_cold(&cold[w]);
		for (int w = 0; w < WAVES; w++) {
			burst_submit(loop, &cold[w]);
			burst_submit(loop, &hot[w]);
			cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
			tspin_us(100 + 50 * (unsigned)w);
		}
		for (int w = 0; w < WAVES; w++) {
			burst_run(loop, &cold[w]);
			burst_run(loop, &hot[w]);
		}
		for (int w = 0; w < WAVES; w++) {
			burst_check(&cold[w], false);
			burst_check(&hot[w], false);
		}
	}
	alarm(0);
	for (int w = 0; w < WAVES; w++) {
		burst_free(&cold[w]);
		burst_free(&hot[w]);
	}
	tclose(loop);
}
