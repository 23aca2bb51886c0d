/* SPDX-License-Identifier: MIT */
/*
 * hostile.c - the hostile cases of issue 12, one at a time, as a small
 * program against the installed-style public headers, for
 * scripts/stress.sh (make stress): a kernel experimenter runs them on
 * their own machine and kernel and gets a pass/fail table.
 *
 *   hostile CASE BACKEND     BACKEND: uring, uring-nolink, uring-nodirect,
 *                            epoll, epoll-pool
 *   hostile --list           the cases, one per line
 *
 * Exit status: 0 pass, 1 fail (a message on stderr says what), 77 the
 * case does not apply here (the message says why). A hang is the
 * script's to catch (timeout). Everything happens in a scratch directory
 * under $TMPDIR (or /tmp), on loopback and local files only.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ringloop/callback.h"
#include "ringloop/coro.h"
#include "ringloop/promise.h"
#include "ringloop/ringloop.h"

#define SKIP 77

static char dir[256];
static struct rl_options base;

static int fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

static int skip(const char *why)
{
	fprintf(stderr, "%s\n", why);
	return SKIP;
}

static const char *path_of(const char *name)
{
	static char paths[8][512];
	static int n;
	char *p = paths[n++ % 8];

	snprintf(p, sizeof(paths[0]), "%s/%s", dir, name);
	return p;
}

static const char *make_file(const char *name, const char *content)
{
	const char *path = path_of(name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0 || write(fd, content, strlen(content)) < 0)
		exit(fail("cannot write %s: %s", path, strerror(errno)));
	close(fd);
	return path;
}

static const char *make_fifo(const char *name)
{
	const char *path = path_of(name);

	unlink(path);
	if (mkfifo(path, 0600) < 0)
		exit(fail("mkfifo %s: %s", path, strerror(errno)));
	return path;
}

static rl_loop *open_loop(const struct rl_options *opt)
{
	rl_loop *loop;
	int ret = rl_loop_open(&loop, opt ? opt : &base);

	if (ret < 0)
		exit(fail("rl_loop_open: %s", rl_strerror(ret)));
	return loop;
}

struct seen {
	int calls;
	int64_t result;
};

static void seen_cb(rl_req *req)
{
	struct seen *s = req->data;

	s->calls++;
	s->result = req->result;
}

static void ms_sleep(int ms)
{
	usleep((useconds_t)ms * 1000);
}

/* ------------------------------------------- 1. read_file past the cap */

static int case_read_file_cap(void)
{
	static const char *const devs[] = { "/dev/zero", "/dev/urandom" };
	const char *sparse = path_of("sparse");
	rl_loop *loop = open_loop(NULL);
	int fd = open(sparse, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0 || ftruncate(fd, (1ll << 30) + 1) < 0)
		return fail("sparse file: %s", strerror(errno));
	close(fd);
	for (int i = 0; i < 3; i++) {
		const char *path = i ? devs[i - 1] : sparse;
		struct seen s = { 0 };
		rl_req req = { .data = &s };

		rl_fs_read_file(loop, &req, path, NULL, 0, RL_READ_FILE_GROW,
				seen_cb);
		rl_run(loop, RL_RUN_DEFAULT);
		free(req.buf);
		if (s.result != -EFBIG || req.len > RL_READ_FILE_MAX_DEFAULT)
			return fail("%s: %lld, buffer %zu bytes", path,
				    (long long)s.result, req.len);
	}
	rl_loop_close(loop);
	return 0;
}

/* ------------------------------------- 2. a post when the SQ is full */

struct post_arg {
	rl_loop *loop;
	struct rl_post post;
	rl_req *reqs;
	int n, ran;
};

static void post_cb(struct rl_post *post)
{
	struct post_arg *a = post->data;

	a->ran++;
	for (int i = 0; i < a->n; i++)
		rl_cancel(a->loop, &a->reqs[i]);
}

static void *poster(void *arg)
{
	struct post_arg *a = arg;

	ms_sleep(100);
	a->post.data = a;
	rl_post(a->loop, &a->post, post_cb);
	return NULL;
}

static int case_full_sq_post(void)
{
	enum { N = 256 };
	static int pipes[N][2];
	static rl_req reqs[N];
	static struct seen seen[N];
	static char bufs[N];
	struct post_arg a = { .n = N, .reqs = reqs };
	pthread_t th;

	a.loop = open_loop(NULL);
	for (int i = 0; i < N; i++) {
		if (pipe2(pipes[i], O_CLOEXEC) < 0)
			return fail("pipe: %s", strerror(errno));
		reqs[i].data = &seen[i];
		rl_fs_read(a.loop, &reqs[i], pipes[i][0], &bufs[i], 1, -1,
			   seen_cb);
	}
	pthread_create(&th, NULL, poster, &a);
	while (!a.ran)
		rl_run(a.loop, RL_RUN_ONCE);
	rl_run(a.loop, RL_RUN_DEFAULT);
	pthread_join(th, NULL);
	for (int i = 0; i < N; i++) {
		if (seen[i].result != -ECANCELED)
			return fail("read %d: %lld", i,
				    (long long)seen[i].result);
		close(pipes[i][0]);
		close(pipes[i][1]);
	}
	rl_loop_close(a.loop);
	return 0;
}

/* ------------------------------------------------ 3. ring sizes */

static int case_ring_sizes(void)
{
	static const unsigned sizes[] = { 1, 2, 4, 8192, 65536 };
	const char *path = make_file("ring", "Hello, world");

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct rl_options opt = base;
		struct seen s = { 0 };
		rl_req req = { .data = &s };
		char buf[32];
		rl_loop *loop;
		int ret;

		opt.entries = sizes[i];
		ret = rl_loop_open(&loop, &opt);
		if (ret == -EINVAL && sizes[i] < 4 &&
		    opt.backend == RL_BACKEND_URING)
			continue;
		if (ret < 0)
			return fail("entries %u: %s", sizes[i],
				    rl_strerror(ret));
		rl_fs_read_file(loop, &req, path, buf, sizeof(buf), 0, seen_cb);
		rl_run(loop, RL_RUN_DEFAULT);
		rl_loop_close(loop);
		if (s.result != 12)
			return fail("entries %u: read_file %lld", sizes[i],
				    (long long)s.result);
	}
	return 0;
}

/* ----------------------------- 4. FIFOs nobody serves, the rest goes on */

struct left {
	int n;
};

static void left_cb(rl_req *req)
{
	((struct left *)req->data)->n--;
}

static int case_pool_starvation(void)
{
	enum { FIFOS = 3, OPENS = 2, QUICK = 20 };
	const char *path = make_file("quick", "Hello, world");
	struct rl_options opt = base;
	rl_req freqs[FIFOS + OPENS], quick[QUICK];
	struct seen fs[FIFOS + OPENS];
	char fbuf[FIFOS][16], qbuf[QUICK][16], name[32];
	struct statx stx[QUICK];
	struct left left = { QUICK };
	uint64_t deadline;
	rl_loop *loop;

	opt.pool_threads = 2;
	loop = open_loop(&opt);
	for (int i = 0; i < FIFOS + OPENS; i++) {
		snprintf(name, sizeof(name), "blocked%d", i);
		freqs[i] = (rl_req){ .data = &fs[i] };
		fs[i] = (struct seen){ 0 };
		if (i < FIFOS)
			rl_fs_read_file(loop, &freqs[i],
					strdup(make_fifo(name)), fbuf[i],
					sizeof(fbuf[i]), 0, seen_cb);
		else
			rl_fs_open(loop, &freqs[i], strdup(make_fifo(name)),
				   O_WRONLY | O_CLOEXEC, 0, seen_cb);
	}
	rl_run(loop, RL_RUN_NOWAIT);
	ms_sleep(50);
	rl_run(loop, RL_RUN_NOWAIT);
	for (int i = 0; i < QUICK; i++) {
		quick[i] = (rl_req){ .data = &left };
		if (i % 2)
			rl_fs_stat(loop, &quick[i], path, &stx[i], left_cb);
		else
			rl_fs_read_file(loop, &quick[i], path, qbuf[i],
					sizeof(qbuf[i]), 0, left_cb);
	}
	deadline = rl_now_ms(loop) + 5000;
	while (left.n > 0 && rl_now_ms(loop) < deadline)
		rl_run(loop, RL_RUN_NOWAIT), ms_sleep(1);
	if (left.n > 0)
		return fail("%d stats and reads still stuck behind the FIFOs",
			    left.n);
	for (int i = 0; i < FIFOS + OPENS; i++)
		rl_cancel(loop, &freqs[i]);
	rl_run(loop, RL_RUN_DEFAULT);
	for (int i = 0; i < FIFOS + OPENS; i++)
		if (fs[i].result != -ECANCELED)
			return fail("FIFO request %d: %lld", i,
				    (long long)fs[i].result);
	rl_loop_close(loop);
	return 0;
}

/* ------------------------------------------- 5, 6. FIFO writers */

struct writer {
	const char *path;
	const char *parts[3];
	int pause_ms;
	atomic_int epipe;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	int fd = open(w->path, O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	for (int i = 0; i < 3 && w->parts[i]; i++) {
		if (i)
			ms_sleep(w->pause_ms);
		if (write(fd, w->parts[i], strlen(w->parts[i])) < 0)
			atomic_fetch_add(&w->epipe, 1);
	}
	close(fd);
	return NULL;
}

static int case_fifo_stream(void)
{
	rl_loop *loop = open_loop(NULL);

	for (int grow = 0; grow < 2; grow++) {
		struct writer w = { .path = make_fifo("stream"),
				    .parts = { "hello", " world" },
				    .pause_ms = 100 };
		struct seen s = { 0 };
		rl_req req = { .data = &s };
		char buf[64];
		pthread_t th;

		pthread_create(&th, NULL, writer_main, &w);
		rl_fs_read_file(loop, &req, w.path, grow ? NULL : buf,
				grow ? 0 : sizeof(buf),
				grow ? RL_READ_FILE_GROW : 0, seen_cb);
		rl_run(loop, RL_RUN_DEFAULT);
		pthread_join(th, NULL);
		if (s.result != 11 || memcmp(req.buf, "hello world", 11))
			return fail("%s: got %lld \"%.*s\"",
				    grow ? "grow" : "buffer",
				    (long long)s.result,
				    s.result > 0 ? (int)s.result : 0,
				    (char *)req.buf);
		if (grow)
			free(req.buf);
	}
	rl_loop_close(loop);
	return 0;
}

static int case_fifo_writer_in_open(void)
{
	rl_loop *loop = open_loop(NULL);
	struct seen s = { 0 };
	rl_req req = { .data = &s };
	char buf[16];
	int rd;

	for (int i = 0; i < 20; i++) {
		struct writer w = { .path = make_fifo("waiting"),
				    .parts = { "ab", "cd", "ef" },
				    .pause_ms = 2 };
		pthread_t th;

		s = (struct seen){ 0 };
		pthread_create(&th, NULL, writer_main, &w);
		ms_sleep(5);
		rl_fs_read_file(loop, &req, w.path, buf, sizeof(buf), 0,
				seen_cb);
		rl_run(loop, RL_RUN_DEFAULT);
		pthread_join(th, NULL);
		if (atomic_load(&w.epipe) || s.result != 6)
			return fail("round %d: %lld bytes, writer EPIPE %d", i,
				    (long long)s.result, atomic_load(&w.epipe));
	}
	/* A blocking open for writing waits for a reader. */
	s = (struct seen){ 0 };
	rl_fs_open(loop, &req, make_fifo("wr"), O_WRONLY | O_CLOEXEC, 0,
		   seen_cb);
	rl_run(loop, RL_RUN_NOWAIT);
	ms_sleep(50);
	rl_run(loop, RL_RUN_NOWAIT);
	if (s.calls)
		return fail("open for writing, no reader: %lld",
			    (long long)s.result);
	rd = open(path_of("wr"), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	rl_run(loop, RL_RUN_DEFAULT);
	if (s.result < 0)
		return fail("open for writing: %s", rl_strerror((int)s.result));
	close((int)s.result);
	close(rd);
	rl_loop_close(loop);
	return 0;
}

/* --------------------------------- 7, 8. reads of pipes: cancel, offset */

static int case_pipe_reads(void)
{
	rl_loop *loop = open_loop(NULL);
	char buf[16], rest[16];

	for (int i = 0; i < 50; i++) {
		struct seen s = { 0 };
		rl_req req = { .data = &s };
		ssize_t left;
		int p[2];

		if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
			return fail("pipe: %s", strerror(errno));
		rl_fs_read(loop, &req, p[0], buf, sizeof(buf), -1, seen_cb);
		rl_run(loop, RL_RUN_NOWAIT);
		if (write(p[1], "abc", 3) != 3)
			return fail("write: %s", strerror(errno));
		ms_sleep(i % 5);
		rl_cancel(loop, &req);
		rl_run(loop, RL_RUN_DEFAULT);
		left = read(p[0], rest, sizeof(rest));
		if (!(s.result == 3 && left < 0) &&
		    !(s.result == -ECANCELED && left == 3))
			return fail("cancel round %d: read %lld, %zd left in "
				    "the pipe",
				    i, (long long)s.result, left);
		/* An offset means nothing to a pipe: every backend reads. */
		s = (struct seen){ 0 };
		if (write(p[1], "xyz", 3) != 3)
			return fail("write: %s", strerror(errno));
		rl_fs_read(loop, &req, p[0], buf, sizeof(buf), 100, seen_cb);
		rl_run(loop, RL_RUN_DEFAULT);
		if (s.result != 3)
			return fail("read at an offset of a pipe: %lld (%s)",
				    (long long)s.result,
				    rl_strerror((int)s.result));
		close(p[0]);
		close(p[1]);
	}
	rl_loop_close(loop);
	return 0;
}

/* ---------------------------------------------- 9. out of fds */

static int case_fd_pressure(void)
{
	enum { N = 5000, LIMIT = 24 };
	const char *path = make_file("fds", "Hello, world");
	static rl_req reqs[N];
	static char bufs[N][16];
	struct rlimit rl = { LIMIT, LIMIT };
	int held[LIMIT], n = 0, bad = 0;
	struct left left = { N };
	rl_loop *loop;

	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		return skip("cannot lower RLIMIT_NOFILE here");
	loop = open_loop(NULL);
	while (n < LIMIT && (held[n] = open("/dev/null", O_RDONLY)) >= 0)
		n++;
	if (n)
		close(held[--n]); /* one fd left for the loop's reads */
	for (int i = 0; i < N; i++) {
		reqs[i].data = &left;
		rl_fs_read_file(loop, &reqs[i], path, bufs[i], 16, 0, left_cb);
	}
	rl_run(loop, RL_RUN_DEFAULT);
	while (n)
		close(held[--n]);
	for (int i = 0; i < N; i++)
		bad += reqs[i].result != 12;
	rl_loop_close(loop);
	if (bad)
		return fail("%d of %d reads failed (e.g. %s)", bad, N,
			    rl_strerror((int)reqs[N - 1].result));
	return 0;
}

/* ------------------------------------------- 10. RLIMIT_MEMLOCK */

static int case_memlock(void)
{
	struct rlimit rl = { 64 * 1024, 64 * 1024 };
	struct io_uring_params p;
	struct rl_options opt;
	rl_loop *loop;
	long fd;

	if (base.backend != RL_BACKEND_URING || base.flags)
		return skip("the AUTO fallback: run once (uring)");
	if (setrlimit(RLIMIT_MEMLOCK, &rl) < 0)
		return skip("cannot lower RLIMIT_MEMLOCK here");
	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_CQSIZE;
	p.cq_entries = 4096;
	fd = syscall(__NR_io_uring_setup, 256, &p);
	if (fd >= 0) {
		close((int)fd);
		return skip(
			"io_uring_setup works under RLIMIT_MEMLOCK = 64 KiB "
			"(the kernel charges rings to the memory cgroup)");
	}
	rl_options_init(&opt);
	if (rl_loop_open(&loop, &opt) < 0)
		return fail("AUTO under RLIMIT_MEMLOCK 64 KiB: no loop");
	if (strcmp(rl_loop_backend(loop), "epoll") ||
	    !strstr(rl_loop_backend_reason(loop), "ENOMEM"))
		return fail("AUTO: %s (%s)", rl_loop_backend(loop),
			    rl_loop_backend_reason(loop));
	rl_loop_close(loop);
	return 0;
}

/* -------------------- 11. closing a context from its own callback */

struct cb_close {
	rl_cb_ctx *cbs;
	int ret;
};

static void cb_close_done(int err, const void *data, size_t len, void *arg)
{
	struct cb_close *c = arg;

	(void)err;
	(void)data;
	(void)len;
	c->ret = rl_cb_ctx_close(c->cbs);
}

static rl_promise_ctx *pctx;

static void promise_close_in_reaction(struct rl_outcome *o, void *arg)
{
	(void)o;
	*(int *)arg = rl_promise_ctx_close(pctx);
}

static int case_ctx_close_inside(void)
{
	const char *path = make_file("ctx", "Hello, world");
	struct cb_close c = { 0 };
	char buf[32];
	int pret = 0;
	rl_loop *loop = open_loop(NULL);

	rl_cb_ctx_open(loop, &c.cbs);
	rl_cb_fs_read_file(c.cbs, path, cb_close_done, &c);
	rl_promise_ctx_open(loop, &pctx);
	rl_promise_unref(
		rl_then(rl_promise_fs_read_file(pctx, path, buf, sizeof(buf)),
			promise_close_in_reaction, NULL, &pret));
	rl_run(loop, RL_RUN_DEFAULT);
	if (c.ret != -EBUSY)
		return fail("rl_cb_ctx_close from its own callback: %d", c.ret);
	if (pret != -EBUSY)
		return fail("rl_promise_ctx_close from a reaction: %d", pret);
	/* The loop's close frees both. */
	if (rl_loop_close(loop))
		return fail("rl_loop_close failed");
	return 0;
}

/* ------------------------------------- 12. a million coroutines */

static int64_t co_read(void *arg)
{
	char buf[16];

	return rl_coro_fs_read_file(arg, buf, sizeof(buf)) == 12 ? 0 : -1;
}

static int case_million_coroutines(void)
{
	const char *path = make_file("co", "Hello, world");
	unsigned n = base.flags & RL_NO_INLINE ? 100000 : 1000000;
	rl_loop *loop = open_loop(NULL);
	struct rl_coro_ctx_stats st;
	rl_coro_ctx *s;
	int ret;

	if (rl_coro_ctx_open(loop, &s, NULL))
		return fail("rl_coro_ctx_open");
	for (unsigned i = 0; i < n; i++)
		if ((ret = rl_coro_spawn(s, NULL, co_read, (void *)path, NULL)))
			return fail("spawn %u: %s", i, rl_strerror(ret));
	rl_run(loop, RL_RUN_DEFAULT);
	rl_coro_ctx_stats(s, &st);
	if (st.finished != n)
		return fail("%llu of %u finished",
			    (unsigned long long)st.finished, n);
	rl_loop_close(loop);
	return 0;
}

/* ---------------------------------------------- 14. rl_strerror */

static int case_strerror(void)
{
	rl_loop *loop = open_loop(NULL);
	rl_promise_ctx *ctx;

	rl_promise_ctx_open(loop, &ctx);
	if (strstr(rl_strerror(RL_EAGGREGATE), "nknown"))
		return fail("RL_EAGGREGATE: %s", rl_strerror(RL_EAGGREGATE));
	if (strcmp(rl_strerror(-EBUSY), strerror(EBUSY)))
		return fail("-EBUSY: %s", rl_strerror(-EBUSY));
	rl_loop_close(loop);
	return 0;
}

/* ------------------------------------------------------------ main */

static const struct {
	const char *name;
	int (*fn)(void);
} cases[] = {
	{ "read-file-cap", case_read_file_cap },
	{ "full-sq-post", case_full_sq_post },
	{ "ring-sizes", case_ring_sizes },
	{ "pool-starvation", case_pool_starvation },
	{ "fifo-stream", case_fifo_stream },
	{ "fifo-writer-in-open", case_fifo_writer_in_open },
	{ "pipe-reads", case_pipe_reads },
	{ "fd-pressure", case_fd_pressure },
	{ "memlock", case_memlock },
	{ "ctx-close-inside", case_ctx_close_inside },
	{ "million-coroutines", case_million_coroutines },
	{ "strerror", case_strerror },
};

static void cleanup(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd)) {
		/* nothing more to do */
	}
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int backend;
		unsigned flags;
	} backends[] = {
		{ "uring", RL_BACKEND_URING, 0 },
		{ "uring-nolink", RL_BACKEND_URING, RL_NO_LINK },
		{ "uring-nodirect", RL_BACKEND_URING, RL_NO_DIRECT },
		{ "epoll", RL_BACKEND_EPOLL, 0 },
		{ "epoll-pool", RL_BACKEND_EPOLL, RL_NO_INLINE },
	};
	const char *tmp = getenv("TMPDIR");
	size_t i, b;

	if (argc == 2 && !strcmp(argv[1], "--list")) {
		for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
			printf("%s\n", cases[i].name);
		return 0;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: hostile CASE BACKEND | --list\n");
		return 2;
	}
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!strcmp(argv[1], cases[i].name))
			break;
	for (b = 0; b < sizeof(backends) / sizeof(backends[0]); b++)
		if (!strcmp(argv[2], backends[b].name))
			break;
	if (i == sizeof(cases) / sizeof(cases[0]) ||
	    b == sizeof(backends) / sizeof(backends[0])) {
		fprintf(stderr, "unknown case or backend\n");
		return 2;
	}
	rl_options_init(&base);
	base.backend = backends[b].backend;
	base.flags = backends[b].flags;
	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "%s/ringloop-stress-XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		return fail("mkdtemp: %s", strerror(errno));
	atexit(cleanup);
	return cases[i].fn();
}
