/* SPDX-License-Identifier: MIT */
/*
 * test_read_file_loan.c - read_file into a buffer the loop lends
 * (RL_READ_FILE_LOAN): the data in the callback on every kind of file,
 * the buffer back after every callback (also on failures, cancels and
 * the loop's close), reused by the next loan, and, on io_uring, only as
 * many buffers out as reads under way.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers.h"

#define LOAN (RL_READ_FILE_GROW | RL_READ_FILE_LOAN)

/* One lent read: what its callback saw, checked there, while the buffer
 * is still lent. */
struct lent {
	rl_req req;
	const char *name; /* tfile() name to check against, or NULL */
	size_t size;	  /* its size */
	int calls;
	int64_t result;
	const void *buf; /* the buffer the callback saw */
	size_t out;	 /* rl_fs_loans_out() in the callback */
};

static void lent_cb(rl_req *req)
{
	struct lent *l = (struct lent *)req;

	l->calls++;
	l->result = req->result;
	l->buf = req->buf;
	l->out = rl_fs_loans_out(req->loop);
	if (req->result >= 0 && l->name) {
		cr_assert_eq(req->result, (int64_t)l->size, "%s: %lld", l->name,
			     (long long)req->result);
		cr_assert_geq(req->len, (size_t)req->result);
		tcheck(l->name, req->buf, l->size);
	}
}

static int lend(rl_loop *loop, struct lent *l, const char *path, size_t hint)
{
	rl_req_init(&l->req);
	return rl_fs_read_file(loop, &l->req, path, NULL, hint, LOAN, lent_cb);
}

BACKEND_TEST(loan, every_size_of_file)
{
	static const size_t sizes[] = { 0, 1, 12, 4095, 4096, 4097, 100000 };
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	struct lent l[N] = { 0 };
	char *paths[N];
	rl_loop *loop = tloop(tp);

	alarm(30);
	for (int i = 0; i < N; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", i);
		tfile(name, sizes[i]);
		l[i].name = strdup(name);
		l[i].size = sizes[i];
		paths[i] = strdup(tpath(name));
		/* Hints below, at and above the sizes. */
		cr_assert_eq(lend(loop, &l[i], paths[i], i % 3 ? 16 : 0), 0);
	}
	cr_assert_eq(l[0].calls, 0, "a callback ran inside its submission");
	trun(loop);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(l[i].calls, 1);
		cr_assert_eq(l[i].result, (int64_t)sizes[i]);
		cr_assert_not_null(l[i].buf);
		free((void *)l[i].name);
		free(paths[i]);
	}
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	cr_assert_gt(rl_fs_loans_kept(loop), 0);
	tclose(loop);
	alarm(0);
}

/* procfs says size 0 and hands out a record at a time: the lent buffer
 * grows as the caller's would. */
static void proc_cb(rl_req *req)
{
	struct lent *l = (struct lent *)req;

	l->calls++;
	l->result = req->result;
	cr_assert_gt(req->result, 0);
	cr_assert_eq(memcmp(req->buf, "Name:", 5), 0);
	/* Its last line: the whole file is there. */
	cr_assert_not_null(memmem(req->buf, (size_t)req->result,
				  "nonvoluntary_ctxt_switches", 26));
}

BACKEND_TEST(loan, procfs_grows)
{
	struct lent l = { 0 };
	rl_loop *loop = tloop(tp);

	alarm(30);
	rl_req_init(&l.req);
	cr_assert_eq(rl_fs_read_file(loop, &l.req, "/proc/self/status", NULL,
				     16, LOAN, proc_cb),
		     0);
	trun(loop);
	cr_assert_eq(l.calls, 1);
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	tclose(loop);
	alarm(0);
}

BACKEND_TEST(loan, refused_without_grow_or_with_a_buffer)
{
	struct lent l = { 0 };
	char buf[64];
	rl_loop *loop = tloop(tp);
	const char *path = tfile("small", 12);

	rl_req_init(&l.req);
	cr_assert_eq(rl_fs_read_file(loop, &l.req, path, NULL, 64,
				     RL_READ_FILE_LOAN, lent_cb),
		     -EINVAL);
	cr_assert_eq(rl_fs_read_file(loop, &l.req, path, buf, sizeof(buf), LOAN,
				     lent_cb),
		     -EINVAL);
	cr_assert_eq(rl_fs_read_file(loop, &l.req, path, NULL, 64,
				     LOAN | (1u << 7), lent_cb),
		     -EINVAL);
	trun(loop);
	cr_assert_eq(l.calls, 0);
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	/* The request is still free to use. */
	l.name = "small";
	l.size = 12;
	cr_assert_eq(lend(loop, &l, path, 0), 0);
	trun(loop);
	cr_assert_eq(l.calls, 1);
	tclose(loop);
}

/* Each callback submits the same request again: the buffer it read comes
 * back after the callback, and the next read gets one back from the
 * loop's stack, so a chain of reads uses at most two buffers. */
struct chain {
	struct lent l;
	const char *path;
	int left;
	const void *seen[4];
	int nseen;
};

static void chain_cb(rl_req *req)
{
	struct chain *c = (struct chain *)req;
	const void *buf = req->buf;
	int i;

	lent_cb(req);
	cr_assert_eq(c->l.result, 12);
	for (i = 0; i < c->nseen && c->seen[i] != buf; i++)
		;
	if (i == c->nseen) {
		cr_assert_lt(c->nseen, 2,
			     "a third buffer for a chain of reads");
		c->seen[c->nseen++] = buf;
	}
	if (--c->left > 0) {
		rl_loop *loop = req->loop;

		rl_req_init(req);
		cr_assert_eq(rl_fs_read_file(loop, req, c->path, NULL, 0, LOAN,
					     chain_cb),
			     0);
	}
}

BACKEND_TEST(loan, buffers_come_back_for_the_next)
{
	struct chain c = { .left = 200 };
	rl_loop *loop = tloop(tp);

	alarm(30);
	c.path = tfile("small", 12);
	c.l.name = "small";
	c.l.size = 12;
	rl_req_init(&c.l.req);
	cr_assert_eq(rl_fs_read_file(loop, &c.l.req, c.path, NULL, 0, LOAN,
				     chain_cb),
		     0);
	trun(loop);
	cr_assert_eq(c.l.calls, 200, "%d calls, %d left", c.l.calls, c.left);
	cr_assert_eq(c.left, 0);
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	cr_assert_gt(rl_fs_loans_kept(loop), 0);
	tclose(loop);
	alarm(0);
}

/* A burst larger than the slots: on io_uring with direct descriptors the
 * requests waiting for a slot hold no buffer, so right after the burst's
 * submission only the chains that went to the kernel hold one. (Later,
 * a loop that saw no slot come free for a while runs the waiting reads
 * on plain fds, uring.c's SLOT_STUCK_NS, which a slow machine or Valgrind
 * can reach; those take their buffers then.) Elsewhere the buffer is
 * taken at submission: every request of the burst holds one, and the
 * test checks the data and counts. */
#define BURST 600
#define SLOTS 32

BACKEND_TEST(loan, burst_holds_buffers_only_for_reads_under_way)
{
	struct lent *l = calloc(BURST, sizeof(*l));
	struct rl_options opt;
	size_t max_out = 0, out_at_submit;
	char *small;
	rl_loop *loop;
	bool slotted;

	alarm(60);
	rl_options_init(&opt);
	opt.direct_slots = SLOTS;
	loop = tloop_opts(tp, &opt);
	slotted = !strcmp(rl_loop_backend(loop), "uring") &&
		  !(tp->flags & RL_NO_DIRECT);
	small = strdup(tfile("small", 12));
	for (int i = 0; i < BURST; i++) {
		l[i].name = "small";
		l[i].size = 12;
		cr_assert_eq(lend(loop, &l[i], small, 0), 0);
	}
	out_at_submit = rl_fs_loans_out(loop);
	trun(loop);
	for (int i = 0; i < BURST; i++) {
		cr_assert_eq(l[i].calls, 1, "read %d: %d calls", i, l[i].calls);
		if (l[i].out > max_out)
			max_out = l[i].out;
	}
	if (slotted)
		cr_assert_leq(out_at_submit, SLOTS, "%zu buffers out at submit",
			      out_at_submit);
	else
		cr_assert_eq(out_at_submit, BURST);
	cr_assert_leq(max_out, BURST);
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	tclose(loop);
	free(l);
	free(small);
	alarm(0);
}

/* Failures and cancels: the callback runs once with the error, and a
 * buffer the read had taken comes back all the same. */
BACKEND_TEST(loan, failures_and_cancels_give_the_buffer_back)
{
	enum { EACH = 40 };
	struct lent *l = calloc(5 * EACH, sizeof(*l));
	struct rl_options opt;
	char *missing, *dir, *small;
	rl_loop *loop;
	int n = 0;

	alarm(60);
	rl_options_init(&opt);
	opt.read_file_max = 64 << 10;
	opt.direct_slots = 8;
	loop = tloop_opts(tp, &opt);
	/* tpath()'s buffers are reused: the requests keep their own. */
	small = strdup(tfile("small", 12));
	missing = strdup(tpath("missing"));
	dir = strdup(tdir());
	for (int i = 0; i < EACH; i++) {
		cr_assert_eq(lend(loop, &l[n++], missing, 0), 0);
		cr_assert_eq(lend(loop, &l[n++], dir, 0), 0);
		cr_assert_eq(lend(loop, &l[n++], "/dev/zero", 0), 0);
		l[n].name = "small";
		l[n].size = 12;
		cr_assert_eq(lend(loop, &l[n++], small, 0), 0);
		/* Cancelled at once: waiting for a slot, or in the kernel. */
		cr_assert_eq(lend(loop, &l[n], small, 0), 0);
		cr_assert_eq(rl_cancel(loop, &l[n].req), 0);
		n++;
	}
	trun(loop);
	for (int i = 0; i < n; i++) {
		cr_assert_eq(l[i].calls, 1, "read %d: %d calls", i, l[i].calls);
		switch (i % 5) {
		case 0:
			cr_assert_eq(l[i].result, -ENOENT);
			break;
		case 1:
			cr_assert_eq(l[i].result, -EISDIR);
			break;
		case 2:
			cr_assert_eq(l[i].result, -EFBIG);
			break;
		case 3:
			cr_assert_eq(l[i].result, 12);
			break;
		default:
			cr_assert(
				l[i].result == -ECANCELED || l[i].result == 12,
				"cancelled read: %lld", (long long)l[i].result);
		}
	}
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	/* The 64 KiB buffers of /dev/zero's -EFBIG are kept (the largest
	 * size lent lately); nothing larger than 1 MiB ever is. */
	cr_assert_leq(rl_fs_loans_kept(loop), (size_t)64 << 20);
	tclose(loop);
	free(l);
	free(small);
	free(missing);
	free(dir);
	alarm(0);
}

BACKEND_TEST(loan, big_buffers_are_not_kept)
{
	struct lent l = { .name = "big", .size = 3 << 20 };
	struct lent s = { .name = "small", .size = 12 };
	rl_loop *loop = tloop(tp);

	alarm(60);
	tfile("big", 3 << 20);
	tfile("small", 12);
	cr_assert_eq(lend(loop, &s, tpath("small"), 0), 0);
	trun(loop);
	cr_assert_gt(rl_fs_loans_kept(loop), 0);
	cr_assert_eq(lend(loop, &l, tpath("big"), 0), 0);
	trun(loop);
	cr_assert_eq(l.calls, 1);
	cr_assert_eq(l.result, 3 << 20);
	cr_assert_leq(rl_fs_loans_kept(loop), (size_t)1 << 20, "kept %zu",
		      rl_fs_loans_kept(loop));
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	tclose(loop);
	alarm(0);
}

/* Big and small files in turns, each read asking for 16 bytes: the small
 * reads get buffers of the smallest class, never a big one, and the big
 * buffers each big read grew do not pile up (a class keeps no more than
 * were ever out at once: here two). */
struct mixed {
	struct lent l;
	const char *big, *small;
	int left;
	size_t small_cap_max;
	const void *small_bufs[4];
	int nsmall;
};

static void mixed_cb(rl_req *req)
{
	struct mixed *m = (struct mixed *)req;
	bool was_big = m->l.size != 12;
	rl_loop *loop = req->loop;
	int i;

	lent_cb(req);
	if (!was_big) {
		if (req->len > m->small_cap_max)
			m->small_cap_max = req->len;
		for (i = 0; i < m->nsmall && m->small_bufs[i] != req->buf; i++)
			;
		if (i == m->nsmall) {
			cr_assert_lt(m->nsmall, 2,
				     "a new buffer for a small file");
			m->small_bufs[m->nsmall++] = req->buf;
		}
	}
	if (--m->left == 0)
		return;
	m->l.name = was_big ? "small" : "big";
	m->l.size = was_big ? 12 : 100000;
	rl_req_init(req);
	cr_assert_eq(rl_fs_read_file(loop, req, was_big ? m->small : m->big,
				     NULL, 16, LOAN, mixed_cb),
		     0);
}

BACKEND_TEST(loan, mixed_sizes_keep_their_classes)
{
	struct mixed m = { .left = 60 };
	rl_loop *loop = tloop(tp);

	alarm(60);
	m.big = strdup(tfile("big", 100000));
	m.small = strdup(tfile("small", 12));
	m.l.name = "small";
	m.l.size = 12;
	rl_req_init(&m.l.req);
	cr_assert_eq(rl_fs_read_file(loop, &m.l.req, m.small, NULL, 16, LOAN,
				     mixed_cb),
		     0);
	trun(loop);
	cr_assert_eq(m.l.calls, 60);
	cr_assert_lt(m.small_cap_max, 512, "a small file read into %zu bytes",
		     m.small_cap_max);
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	cr_assert_leq(rl_fs_loans_kept(loop), (size_t)2 << 20);
	tclose(loop);
	free((void *)m.big);
	free((void *)m.small);
	alarm(0);
}

/* A FIFO hands out its bytes in pieces, as its writer writes them. */
static void *fifo_writer(void *arg)
{
	const char *path = arg;
	unsigned char data[9000];
	int fd = open(path, O_WRONLY);

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 7);
	if (fd < 0)
		return NULL;
	if (write(fd, data, 1000) != 1000 ||
	    write(fd, data + 1000, 8000) != 8000)
		abort();
	close(fd);
	return NULL;
}

static void fifo_cb(rl_req *req)
{
	struct lent *l = (struct lent *)req;
	const unsigned char *p = req->buf;

	l->calls++;
	l->result = req->result;
	cr_assert_eq(req->result, 9000);
	for (size_t i = 0; i < 9000; i++)
		cr_assert_eq(p[i], (unsigned char)(i * 7), "byte %zu", i);
}

BACKEND_TEST(loan, fifo_in_pieces)
{
	struct lent l = { 0 };
	const char *path = tpath("fifo");
	pthread_t th;
	rl_loop *loop;

	/* The loop waits for the writer thread (helpers.h). */
	tskip_uring_threads_under_valgrind(tp);
	loop = tloop(tp);
	alarm(30);
	cr_assert_eq(mkfifo(path, 0600), 0);
	rl_req_init(&l.req);
	cr_assert_eq(
		rl_fs_read_file(loop, &l.req, path, NULL, 64, LOAN, fifo_cb),
		0);
	cr_assert_eq(pthread_create(&th, NULL, fifo_writer, (void *)path), 0);
	trun(loop);
	pthread_join(th, NULL);
	cr_assert_eq(l.calls, 1);
	cr_assert_eq(rl_fs_loans_out(loop), 0);
	tclose(loop);
	alarm(0);
}

/* The loop closes with lent reads everywhere: waiting, in the kernel,
 * done but not called back. Each callback runs once, and nothing leaks
 * (ASan and Valgrind check that). */
static void count_cb(rl_req *req)
{
	struct lent *l = (struct lent *)req;

	l->calls++;
	l->result = req->result;
	if (req->result >= 0)
		cr_assert_eq(req->result, 12);
}

BACKEND_TEST(loan, loop_closed_with_loans_everywhere)
{
	struct lent *l = calloc(BURST, sizeof(*l));
	struct rl_options opt;
	char *small;
	rl_loop *loop;

	alarm(60);
	rl_options_init(&opt);
	opt.direct_slots = SLOTS;
	loop = tloop_opts(tp, &opt);
	small = strdup(tfile("small", 12));
	for (int i = 0; i < BURST; i++) {
		rl_req_init(&l[i].req);
		cr_assert_eq(rl_fs_read_file(loop, &l[i].req, small, NULL, 0,
					     LOAN, count_cb),
			     0);
	}
	/* One pass: some done, some in the kernel, most still waiting. */
	cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
	tclose(loop);
	for (int i = 0; i < BURST; i++) {
		cr_assert_eq(l[i].calls, 1, "read %d: %d calls", i, l[i].calls);
		cr_assert(l[i].result == 12 || l[i].result == -ECANCELED,
			  "read %d: %lld", i, (long long)l[i].result);
	}
	free(l);
	free(small);
	alarm(0);
}

/* A group that spreads its loop's read_files: the buffer is lent by the
 * home loop, filled by another, and comes back home after the callback,
 * which runs on the home loop's thread. */
BACKEND_TEST(loan, spread_over_a_group)
{
	struct lent *l = calloc(BURST, sizeof(*l));
	char *small = strdup(tfile("small", 12));
	rl_group *g;
	rl_loop *home;

	alarm(60);
	g = tgroup(tp, 2, RL_GROUP_SPREAD, RL_MSG_WAKE_DEFAULT);
	home = rl_group_loop(g, 0);
	for (int i = 0; i < BURST; i++) {
		l[i].name = "small";
		l[i].size = 12;
		cr_assert_eq(lend(home, &l[i], small, 0), 0);
	}
	trun(home);
	for (int i = 0; i < BURST; i++)
		cr_assert_eq(l[i].calls, 1);
	cr_assert_eq(rl_fs_loans_out(home), 0);
	cr_assert_eq(rl_fs_loans_out(rl_group_loop(g, 1)), 0);
	cr_assert_eq(rl_group_close(g), 0);
	free(l);
	free(small);
	alarm(0);
}
