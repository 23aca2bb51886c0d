/* SPDX-License-Identifier: MIT */
/*
 * test_read_file_regular.c - read_file told that its file is regular
 * (RL_READ_FILE_REGULAR, or RL_REGULAR_FILES for a whole loop): every
 * size of file whole, in every kind of buffer, with no probe on io_uring's
 * chain; a file larger than the caller's buffer still refused; and, when
 * the caller's word is wrong (a FIFO, procfs, /dev/zero), a prefix of the
 * data at worst, never a hang, a crash or more bytes than there were.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ringloop/callback.h"
#include "helpers.h"

#define REG RL_READ_FILE_REGULAR

/* Whether tp's configuration reads a read_file with io_uring's linked
 * chain, the one place where the flag leaves something out. */
static bool chained(const struct tp *tp)
{
	return tp->backend == RL_BACKEND_URING &&
	       !(tp->flags & (RL_NO_LINK | RL_NO_DIRECT));
}

/* Every size around the edges a buffer has, in the caller's buffer of
 * exactly the file's size, of a byte more, grown from nothing and lent. */
BACKEND_TEST(regular, every_size_in_every_buffer)
{
	static const size_t sizes[] = { 0,    1,    12,	  255,	 256,	257,
					4095, 4096, 4097, 65536, 100000 };
	enum { NS = sizeof(sizes) / sizeof(sizes[0]), KINDS = 4 };
	struct tseen seen[NS][KINDS] = { { { 0 } } };
	rl_req reqs[NS][KINDS];
	void *bufs[NS][2];
	rl_loop *loop = tloop(tp);

	alarm(30);
	for (int i = 0; i < NS; i++) {
		char name[16];
		const char *path;

		snprintf(name, sizeof(name), "f%d", i);
		path = tkeep_path(tfile(name, sizes[i]));
		bufs[i][0] = malloc(sizes[i] ? sizes[i] : 1);
		bufs[i][1] = malloc(sizes[i] + 1);
		for (int k = 0; k < KINDS; k++)
			reqs[i][k] = (rl_req){ .data = &seen[i][k] };
		cr_assert_eq(rl_fs_read_file(loop, &reqs[i][0], path,
					     bufs[i][0], sizes[i], REG,
					     tseen_cb),
			     0);
		cr_assert_eq(rl_fs_read_file(loop, &reqs[i][1], path,
					     bufs[i][1], sizes[i] + 1, REG,
					     tseen_cb),
			     0);
		cr_assert_eq(rl_fs_read_file(loop, &reqs[i][2], path, NULL, 16,
					     RL_READ_FILE_GROW | REG, tseen_cb),
			     0);
		cr_assert_eq(rl_fs_read_file(loop, &reqs[i][3], path, NULL, 0,
					     RL_READ_FILE_GROW |
						     RL_READ_FILE_LOAN | REG,
					     tseen_cb),
			     0);
	}
	trun(loop);
	for (int i = 0; i < NS; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", i);
		for (int k = 0; k < KINDS; k++) {
			cr_assert_eq(seen[i][k].calls, 1, "size %zu kind %d",
				     sizes[i], k);
			cr_assert_eq(seen[i][k].result, (int64_t)sizes[i],
				     "size %zu kind %d: %lld", sizes[i], k,
				     (long long)seen[i][k].result);
			/* The lent buffer went back after its callback. */
			if (k < 3)
				tcheck(name, reqs[i][k].buf, sizes[i]);
		}
		free(reqs[i][2].buf);
		free(bufs[i][0]);
		free(bufs[i][1]);
	}
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	tclose(loop);
	alarm(0);
}

/* The caller's buffer a byte short: -EFBIG, as without the flag, and the
 * file's first bytes in it. A missing file: -ENOENT. */
BACKEND_TEST(regular, short_buffer_and_missing_file)
{
	const char *path = tkeep_path(tfile("big", 5000));
	struct tseen seen[3] = { { 0 } };
	rl_req reqs[3];
	char buf[4999], small[16];
	rl_loop *loop = tloop(tp);

	alarm(30);
	for (int i = 0; i < 3; i++)
		reqs[i] = (rl_req){ .data = &seen[i] };
	cr_assert_eq(rl_fs_read_file(loop, &reqs[0], path, buf, sizeof(buf),
				     REG, tseen_cb),
		     0);
	cr_assert_eq(rl_fs_read_file(loop, &reqs[1], tpath("missing"), small,
				     sizeof(small), REG, tseen_cb),
		     0);
	cr_assert_eq(rl_fs_read_file(loop, &reqs[2], path, small, sizeof(small),
				     REG, tseen_cb),
		     0);
	trun(loop);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(seen[i].calls, 1);
	cr_assert_eq(seen[0].result, -EFBIG);
	tcheck("big", buf, sizeof(buf));
	cr_assert_eq(seen[1].result, -ENOENT);
	cr_assert_eq(seen[2].result, -EFBIG);
	cr_assert_eq(rl_fs_read_file(loop, &reqs[0], path, buf, sizeof(buf),
				     1u << 3, tseen_cb),
		     -EINVAL);
	tclose(loop);
	alarm(0);
}

/* A burst far larger than a small ring, flagged and plain reads mixed,
 * some of missing files: the chains of two SQEs and of three share the
 * SQ, the CQ budget and the slots, and every read ends once, right. */
BACKEND_TEST(regular, burst_mixed_with_probed_reads)
{
	enum { N = 600, FILES = 7 };
	static const size_t sizes[FILES] = { 0, 1, 100, 4096, 5000, 70000, 3 };
	struct tseen seen[N] = { { 0 } };
	const char *paths[FILES];
	rl_req reqs[N];
	struct rl_options opt;
	rl_loop *loop;

	rl_options_init(&opt);
	opt.entries = 8;
	opt.direct_slots = 16;
	loop = tloop_opts(tp, &opt);
	alarm(60);
	for (int f = 0; f < FILES; f++) {
		char name[16];

		snprintf(name, sizeof(name), "b%d", f);
		paths[f] = tkeep_path(tfile(name, sizes[f]));
	}
	for (int i = 0; i < N; i++) {
		const char *path =
			i % 11 == 5 ? tpath("missing") : paths[i % FILES];

		reqs[i] = (rl_req){ .data = &seen[i] };
		cr_assert_eq(
			rl_fs_read_file(loop, &reqs[i], path, NULL, 0,
					RL_READ_FILE_GROW | (i % 3 ? REG : 0),
					tseen_cb),
			0, "req %d", i);
	}
	trun(loop);
	for (int i = 0; i < N; i++) {
		char name[16];

		cr_assert_eq(seen[i].calls, 1, "req %d", i);
		if (i % 11 == 5) {
			cr_assert_eq(seen[i].result, -ENOENT, "req %d", i);
		} else {
			snprintf(name, sizeof(name), "b%d", i % FILES);
			cr_assert_eq(seen[i].result, (int64_t)sizes[i % FILES],
				     "req %d: %lld", i,
				     (long long)seen[i].result);
			tcheck(name, reqs[i].buf, sizes[i % FILES]);
		}
		free(reqs[i].buf);
	}
	tclose(loop);
	alarm(0);
}

/* A procfs file that fits one record read: whole, flag or not. */
static void status_cb(rl_req *req)
{
	struct tseen *s = req->data;

	s->calls++;
	s->result = req->result;
	cr_assert_gt(req->result, 0, "%s", rl_strerror((int)req->result));
	cr_assert_eq(memcmp(req->buf, "Name:", 5), 0);
	cr_assert_not_null(memmem(req->buf, (size_t)req->result,
				  "nonvoluntary_ctxt_switches", 26));
}

/*
 * The caller's word wrong: procfs hands out a page at a time, so a file
 * of many pages read with the flag may end at its first page on io_uring
 * - the documented price - but what is there is the file's own start,
 * never more than the buffer, and the read ends. /proc/self/maps starts
 * with the same line for the whole life of the process.
 */
BACKEND_TEST(regular, procfs_whole_or_a_true_prefix)
{
	struct tseen st = { 0 }, maps = { 0 };
	rl_req sreq = { .data = &st }, mreq = { .data = &maps };
	char first[128] = { 0 };
	rl_loop *loop = tloop(tp);
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	alarm(30);
	cr_assert_geq(fd, 0);
	n = read(fd, first, sizeof(first));
	close(fd);
	cr_assert_gt(n, 0);
	cr_assert_eq(rl_fs_read_file(loop, &sreq, "/proc/self/status", NULL, 0,
				     RL_READ_FILE_GROW | REG, status_cb),
		     0);
	cr_assert_eq(rl_fs_read_file(loop, &mreq, "/proc/self/maps", NULL,
				     1 << 20, RL_READ_FILE_GROW | REG,
				     tseen_cb),
		     0);
	trun(loop);
	cr_assert_eq(st.calls, 1);
	cr_assert_eq(maps.calls, 1);
	cr_assert_geq(maps.result, n, "%s", rl_strerror((int)maps.result));
	cr_assert_leq((size_t)maps.result, mreq.len);
	cr_assert_eq(memcmp(mreq.buf, first, (size_t)n), 0);
	free(sreq.buf);
	free(mreq.buf);
	tclose(loop);
	alarm(0);
}

/*
 * A caller's buffer whose second page cannot be written: the kernel stops
 * the read there and says what it copied, not -EFAULT. A short read that
 * ends where a page of the buffer ends proves nothing, with the flag or
 * without, so the loop reads on and the next read says -EFAULT (before,
 * the flag took the page for the whole file, and the probe's byte was
 * stored into the unwritable page by the loop itself: a crash).
 */
BACKEND_TEST(regular, unwritable_page_of_the_buffer_is_efault)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	const char *paths[2] = { tkeep_path(tfile("pages2", 2 * page)),
				 tkeep_path(tfile("page1", page + 904)) };
	char *buf = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct tseen seen[4] = { { 0 } };
	rl_req reqs[4];
	rl_loop *loop = tloop(tp);

	alarm(30);
	cr_assert_neq(buf, MAP_FAILED);
	cr_assert_eq(mprotect(buf + page, page, PROT_NONE), 0);
	for (int i = 0; i < 4; i++) {
		reqs[i] = (rl_req){ .data = &seen[i] };
		cr_assert_eq(rl_fs_read_file(loop, &reqs[i], paths[i % 2], buf,
					     2 * page, i < 2 ? REG : 0,
					     tseen_cb),
			     0);
		trun(loop);
		cr_assert_eq(seen[i].calls, 1);
		cr_assert_eq(seen[i].result, -EFAULT, "%d: %s", i,
			     rl_strerror((int)seen[i].result));
	}
	munmap(buf, 2 * page);
	tclose(loop);
	alarm(0);
}

/* /dev/zero never ends: -EFBIG at the caller's buffer, and at the loop's
 * read_file_max when the buffer grows. */
BACKEND_TEST(regular, dev_zero_is_too_big)
{
	struct tseen seen[2] = { { 0 } };
	rl_req reqs[2] = { { .data = &seen[0] }, { .data = &seen[1] } };
	char buf[100];
	struct rl_options opt;
	rl_loop *loop;

	rl_options_init(&opt);
	opt.read_file_max = 1 << 16;
	loop = tloop_opts(tp, &opt);
	alarm(30);
	cr_assert_eq(rl_fs_read_file(loop, &reqs[0], "/dev/zero", buf,
				     sizeof(buf), REG, tseen_cb),
		     0);
	cr_assert_eq(rl_fs_read_file(loop, &reqs[1], "/dev/zero", NULL, 0,
				     RL_READ_FILE_GROW | REG, tseen_cb),
		     0);
	trun(loop);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(seen[i].calls, 1);
		cr_assert_eq(seen[i].result, -EFBIG, "%d: %s", i,
			     rl_strerror((int)seen[i].result));
	}
	cr_assert_eq(reqs[1].len, (size_t)1 << 16);
	free(reqs[1].buf);
	tclose(loop);
	alarm(0);
}

/* A writer that writes "abc", then, where the flag lets the read end at
 * its first short read, waits for the read's callback before "def" and
 * its close; elsewhere it writes both at once. */
struct writer {
	const char *path;
	bool wait_for_cb;
	atomic_int called;
};

static void *write_fifo(void *arg)
{
	struct writer *w = arg;
	int fd = open(w->path, O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	if (write(fd, "abc", 3) != 3)
		abort();
	while (w->wait_for_cb && !atomic_load(&w->called))
		usleep(1000);
	/* The reader may be gone (the flag's read ended): EPIPE. */
	(void)!write(fd, "def", 3);
	close(fd);
	return NULL;
}

static void fifo_cb(rl_req *req)
{
	struct writer *w = req->data;

	atomic_fetch_add(&w->called, 1);
}

/*
 * A FIFO read with the flag: the proof that io_uring's chain leaves the
 * probe out. Without it, the read of "abc" would be followed by a probe
 * that waits for more while the writer is still there, and this read
 * would never call back before the writer's close; with it, the short
 * read ends the file ("abc", 3) while the writer still holds the FIFO.
 * Every other configuration reads to the end: "abcdef".
 */
BACKEND_TEST(regular, fifo_ends_at_its_first_short_read_on_the_chain)
{
	struct writer w = { .wait_for_cb = chained(tp) };
	rl_req req = { .data = &w };
	char buf[64];
	pthread_t th;
	rl_loop *loop;

	tskip_uring_threads_under_valgrind(tp);
	signal(SIGPIPE, SIG_IGN);
	w.path = tfifo("fifo");
	loop = tloop(tp);
	alarm(30);
	cr_assert_eq(rl_fs_read_file(loop, &req, w.path, buf, sizeof(buf), REG,
				     fifo_cb),
		     0);
	cr_assert_eq(pthread_create(&th, NULL, write_fifo, &w), 0);
	trun(loop);
	pthread_join(th, NULL);
	cr_assert_eq(atomic_load(&w.called), 1);
	if (chained(tp)) {
		cr_assert_eq(req.result, 3, "%s", rl_strerror((int)req.result));
		cr_assert_eq(memcmp(buf, "abc", 3), 0);
	} else {
		cr_assert_eq(req.result, 6, "%s", rl_strerror((int)req.result));
		cr_assert_eq(memcmp(buf, "abcdef", 6), 0);
	}
	tclose(loop);
	alarm(0);
}

/* The loop's close with flagged FIFO reads waiting: -ECANCELED each. */
BACKEND_TEST(regular, fifo_reads_left_to_the_close)
{
	enum { N = 8 };
	struct tseen seen[N] = { { 0 } };
	rl_req reqs[N];
	char bufs[N][32];
	const char *path = tfifo("left");
	rl_loop *loop = tloop(tp);

	alarm(30);
	for (int i = 0; i < N; i++) {
		reqs[i] = (rl_req){ .data = &seen[i] };
		cr_assert_eq(rl_fs_read_file(loop, &reqs[i], path, bufs[i],
					     sizeof(bufs[i]), REG, tseen_cb),
			     0);
	}
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	tclose(loop);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(seen[i].calls, 1, "req %d", i);
		cr_assert_eq(seen[i].result, -ECANCELED, "req %d: %s", i,
			     rl_strerror((int)seen[i].result));
	}
	alarm(0);
}

/* RL_REGULAR_FILES: the callback style's read_files, which take no flag,
 * get it from the loop; the FIFO shows it on the chain as above. */
struct cb_seen {
	int calls;
	int err;
	size_t len;
	char data[64];
	struct writer *w;
};

static void cb_done(int err, const void *data, size_t len, void *arg)
{
	struct cb_seen *s = arg;

	s->calls++;
	s->err = err;
	s->len = len;
	if (!err && len <= sizeof(s->data))
		memcpy(s->data, data, len);
	if (s->w)
		atomic_fetch_add(&s->w->called, 1);
}

BACKEND_TEST(regular, loop_option_reaches_the_styles)
{
	struct writer w = { .wait_for_cb = chained(tp) };
	struct cb_seen file = { 0 }, fifo = { .w = &w };
	const char *path = tkeep_path(tfile("cbfile", 40));
	struct rl_options opt;
	rl_cb_ctx *cbs;
	pthread_t th;
	rl_loop *loop;

	tskip_uring_threads_under_valgrind(tp);
	signal(SIGPIPE, SIG_IGN);
	w.path = tfifo("cbfifo");
	rl_options_init(&opt);
	opt.flags = RL_REGULAR_FILES;
	loop = tloop_opts(tp, &opt);
	alarm(30);
	cr_assert_eq(rl_cb_ctx_open(loop, &cbs), 0);
	cr_assert_eq(rl_cb_fs_read_file(cbs, path, cb_done, &file), 0);
	cr_assert_eq(rl_cb_fs_read_file(cbs, w.path, cb_done, &fifo), 0);
	cr_assert_eq(pthread_create(&th, NULL, write_fifo, &w), 0);
	trun(loop);
	pthread_join(th, NULL);
	cr_assert_eq(file.calls, 1);
	cr_assert_eq(file.err, 0);
	cr_assert_eq(file.len, 40);
	tcheck("cbfile", file.data, 40);
	cr_assert_eq(fifo.calls, 1);
	cr_assert_eq(fifo.err, 0);
	cr_assert_eq(fifo.len, chained(tp) ? 3u : 6u);
	cr_assert_eq(memcmp(fifo.data, "abcdef", fifo.len), 0);
	cr_assert_eq(rl_cb_ctx_close(cbs), 0);
	tclose(loop);
	alarm(0);
}
