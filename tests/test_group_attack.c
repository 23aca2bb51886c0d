/* SPDX-License-Identifier: MIT */
/*
 * test_group_attack.c - trying to break the contracts of loop groups,
 * cross-loop messages, spread bursts and promises settled from elsewhere:
 * wake-ups a sender keeps too long, groups closed from the wrong place,
 * floods into tiny rings from loops and threads at once, spread bursts of
 * FIFOs, /proc files, missing and oversized files, cancels racing their
 * completion on another loop, remote settlements at the wrong moment,
 * groups made without fds, groups of 1 and of 16 loops.
 *
 * A test that would hang on a lost wake-up waits with a bound of its own
 * (twait_until) and fails; alarm() backs that up where a hang could only
 * come from inside the library (a close that never returns).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "helpers.h"
#include "ringloop/coro.h"
#include "ringloop/promise.h"

/* A group whose loops never poll before they sleep, so that every message
 * to an idle loop needs a real wake-up. */
static rl_group *sleepy_group(const struct tp *tp, unsigned loops, int wake)
{
	struct rl_group_options opt;

	rl_group_options_init(&opt);
	opt.loops = loops;
	opt.msg_wake = wake;
	opt.loop.idle_spin_ns = -1;
	return tgroup_opts(tp, &opt);
}

/* ------------------------------- a wake-up the sender must not keep */

struct last {
	rl_group *g;
	rl_timer timer;
	struct rl_post post;
	atomic_int ran;
};

static void last_post_cb(struct rl_post *post)
{
	atomic_fetch_add(&((struct last *)post->data)->ran, 1);
}

/* Loop 0's last callback, a timer long enough for loop 1 to be asleep
 * by then. After it loop 0 has nothing alive, and rl_run() returns. */
static void last_timer_cb(rl_timer *t, int status)
{
	struct last *l = t->data;

	l->post.data = l;
	if (status == 0 &&
	    rl_post(rl_group_loop(l->g, 1), &l->post, last_post_cb) < 0)
		atomic_store(&l->ran, -1000);
}

/*
 * A message sent from a loop's last batch, after which rl_run() returns
 * and the thread does something else than run the loop (here: waits for
 * the message's effect). On io_uring the wake-up of the sleeping target
 * is a MSG_RING SQE on the sender's ring; it must reach the kernel before
 * rl_run() returns, or the target sleeps on with the message for as long
 * as the sender's loop is not run again.
 */
static void message_from_last_batch(const struct tp *tp, int wake)
{
	struct last l = { 0 };
	rl_loop *loop0;

	l.g = sleepy_group(tp, 2, wake);
	loop0 = rl_group_loop(l.g, 0);
	l.timer.data = &l;
	cr_assert_eq(rl_timer_start(loop0, &l.timer, 50, 0, last_timer_cb), 0);
	trun(loop0);
	cr_assert(twait_until(atomic_load(&l.ran) != 0, 3000),
		  "the message to the sleeping loop did not run in 3 s");
	cr_assert_eq(atomic_load(&l.ran), 1);
	cr_assert_eq(rl_group_close(l.g), 0);
}

BACKEND_TEST(group_attack, message_from_the_last_batch_ring)
{
	alarm(60);
	message_from_last_batch(tp, RL_MSG_WAKE_RING);
}

BACKEND_TEST(group_attack, message_from_the_last_batch_eventfd)
{
	alarm(60);
	message_from_last_batch(tp, RL_MSG_WAKE_EVENTFD);
}

/* ------------------------------------ one group's loop, another group */

struct two {
	rl_group *a, *b;
	rl_timer timer;
	struct rl_post post;
	atomic_int ran;
	int close_ret;
};

static void two_post_cb(struct rl_post *post)
{
	atomic_fetch_add(&((struct two *)post->data)->ran, 1);
}

/* On group a's loop 0, long after group b's loop 1 went to sleep: a
 * message to it, then group b closes (this thread opened it, and b's loop
 * 0 is not running). The loops of another group may be gone by the time
 * this loop next enters the kernel: b's loop must be woken another way
 * than through this loop's ring. */
static void two_timer_cb(rl_timer *t, int status)
{
	struct two *x = t->data;

	cr_assert_eq(status, 0);
	x->post.data = x;
	cr_assert_eq(rl_post(rl_group_loop(x->b, 1), &x->post, two_post_cb), 0);
	x->close_ret = rl_group_close(x->b);
}

BACKEND_TEST(group_attack, another_group_closed_from_a_callback)
{
	alarm(20); /* b's close hangs when its sleeping loop is not woken */
	struct two x = { 0 };
	int before;

	(void)tfd_count();
	before = tfd_count();
	x.a = sleepy_group(tp, 2, RL_MSG_WAKE_RING);
	x.b = sleepy_group(tp, 2, RL_MSG_WAKE_RING);
	x.timer.data = &x;
	cr_assert_eq(rl_timer_start(rl_group_loop(x.a, 0), &x.timer, 50, 0,
				    two_timer_cb),
		     0);
	trun(rl_group_loop(x.a, 0));
	cr_assert_eq(x.close_ret, 0);
	cr_assert_eq(atomic_load(&x.ran), 1);
	/* Group a's loop enters the kernel again, with whatever it kept. */
	rl_ref(rl_group_loop(x.a, 0));
	for (int i = 0; i < 5; i++)
		cr_assert_geq(rl_run(rl_group_loop(x.a, 0), RL_RUN_NOWAIT), 0);
	rl_unref(rl_group_loop(x.a, 0));
	cr_assert_eq(rl_group_close(x.a), 0);
	cr_assert_eq(tfd_count(), before);
}

/* A message that counts itself in the atomic_int its data points to. */
static void count_cb(struct rl_post *post)
{
	atomic_fetch_add((atomic_int *)post->data, 1);
}

/* ---------------------------------- closing from the wrong places */

struct wrong {
	rl_group *g;
	struct rl_post post;
	atomic_int ret;
	atomic_int done;
};

/* On loop 1: the group closed from one of its own loops' callbacks. */
static void wrong_close_cb(struct rl_post *post)
{
	struct wrong *w = post->data;

	atomic_store(&w->ret, rl_group_close(w->g));
	atomic_store(&w->done, 1);
}

/* A group closed from a callback of one of its loops would join the
 * thread it runs on and free the loop under the callback: refused, and
 * the group stays whole. */
BACKEND_TEST(group_attack, close_from_a_member_callback_is_refused)
{
	alarm(30);
	struct wrong w = { 0 };
	int before = tfd_count();

	w.g = tgroup(tp, 3, 0, RL_MSG_WAKE_DEFAULT);
	w.post.data = &w;
	cr_assert_eq(rl_post(rl_group_loop(w.g, 1), &w.post, wrong_close_cb),
		     0);
	cr_assert(twait_until(atomic_load(&w.done), 5000));
	cr_assert_eq(atomic_load(&w.ret), -EBUSY, "%s",
		     rl_strerror(atomic_load(&w.ret)));
	/* Still whole: a message goes round, and the group closes. */
	atomic_store(&w.done, 0);
	w.post.data = &w.done;
	cr_assert_eq(rl_post(rl_group_loop(w.g, 2), &w.post, count_cb), 0);
	cr_assert(twait_until(atomic_load(&w.done), 5000));
	/* From a callback of loop 0, on the opener's thread: loop 0 runs. */
	atomic_store(&w.done, 0);
	w.post.data = &w;
	cr_assert_eq(rl_post(rl_group_loop(w.g, 0), &w.post, wrong_close_cb),
		     0);
	trun(rl_group_loop(w.g, 0));
	cr_assert_eq(atomic_load(&w.done), 1);
	cr_assert_eq(atomic_load(&w.ret), -EBUSY);
	cr_assert_eq(rl_group_close(w.g), 0);
	cr_assert_eq(tfd_count(), before);
}

struct outsider {
	rl_group *g;
	int ret;
};

static void outsider_timer_cb(rl_timer *t, int status)
{
	int *calls = t->data;

	cr_assert_eq(status, -ECANCELED);
	(*calls)++;
}

static void *outsider_close(void *arg)
{
	struct outsider *o = arg;

	o->ret = rl_group_close(o->g);
	return NULL;
}

/*
 * rl_group_close() from a thread that is not the opener's, while messages
 * fly between the loops. Where loop 0 belongs to the opener's thread (an
 * io_uring ring with SINGLE_ISSUER: rl_loop_close() says -EEXIST on
 * another thread) the close is refused with that error and the group
 * stays whole, to be closed by its opener; elsewhere (a shared ring,
 * epoll) loop 0 may close on any thread that does not run it, and the
 * close goes through. Either way nothing is freed half-way.
 */
BACKEND_TEST(group_attack, close_from_a_non_member_thread)
{
	alarm(30);
	struct outsider o = { 0 };
	struct rl_post posts[200];
	rl_timer timer = { 0 };
	int timer_calls = 0;
	atomic_int ran = 0;
	pthread_t t;
	int before = tfd_count();

	o.g = tgroup(tp, 3, 0, RL_MSG_WAKE_DEFAULT);
	/* Loop 0 has run here: its ring, if single-issuer, is this
	 * thread's now. */
	posts[0].data = &ran;
	cr_assert_eq(rl_post(rl_group_loop(o.g, 0), &posts[0], count_cb), 0);
	trun(rl_group_loop(o.g, 0));
	cr_assert_eq(atomic_load(&ran), 1);
	atomic_store(&ran, 0);
	/* Something of loop 0's that its close must end: a timer. */
	timer.data = &timer_calls;
	cr_assert_eq(rl_timer_start(rl_group_loop(o.g, 0), &timer, 60000, 0,
				    outsider_timer_cb),
		     0);
	for (int i = 0; i < 200; i++) {
		posts[i].data = &ran;
		cr_assert_eq(rl_post(rl_group_loop(o.g, 1 + i % 2), &posts[i],
				     count_cb),
			     0);
	}
	cr_assert_eq(pthread_create(&t, NULL, outsider_close, &o), 0);
	pthread_join(t, NULL);
	if (tp->backend == RL_BACKEND_URING && !(tp->flags & RL_SHARED_RING)) {
		cr_assert_eq(o.ret, -EEXIST, "%s", rl_strerror(o.ret));
		cr_assert_eq(timer_calls, 0);
		cr_assert_eq(rl_group_close(o.g), 0);
	} else {
		cr_assert_eq(o.ret, 0, "%s", rl_strerror(o.ret));
	}
	cr_assert_eq(timer_calls, 1);
	cr_assert_eq(atomic_load(&ran), 200);
	cr_assert_eq(tfd_count(), before);
}

/* ------------------------- floods from loops and threads into tiny rings */

#define FL_LOOPS   4
#define FL_THREADS 2
#define FL_PER	   1500

struct fl;

struct flmsg {
	struct rl_post post;
	struct fl *f;
	unsigned from, to, seq;
	atomic_int ran;
};

struct fl {
	rl_group *g;
	struct flmsg
		*msgs; /* [sender][to][seq]; senders: loops, then threads */
	unsigned next_seq[FL_LOOPS][FL_LOOPS + FL_THREADS];
	unsigned disorder[FL_LOOPS];
	atomic_uint got[FL_LOOPS];
	atomic_int refused;
};

static struct flmsg *flmsg_at(struct fl *f, unsigned from, unsigned to,
			      unsigned seq)
{
	return &f->msgs[((size_t)from * FL_LOOPS + to) * FL_PER + seq];
}

static void flmsg_cb(struct rl_post *post)
{
	struct flmsg *m = (struct flmsg *)post;
	struct fl *f = m->f;

	if (m->seq != f->next_seq[m->to][m->from])
		f->disorder[m->to]++;
	f->next_seq[m->to][m->from] = m->seq + 1;
	atomic_fetch_add(&m->ran, 1);
	atomic_fetch_add(&f->got[m->to], 1);
}

static void fl_send(struct fl *f, unsigned from)
{
	for (unsigned seq = 0; seq < FL_PER; seq++)
		for (unsigned to = 0; to < FL_LOOPS; to++) {
			struct flmsg *m = flmsg_at(f, from, to, seq);

			m->f = f;
			m->from = from;
			m->to = to;
			m->seq = seq;
			if (rl_post(rl_group_loop(f->g, to), &m->post,
				    flmsg_cb) < 0)
				atomic_fetch_add(&f->refused, 1);
		}
}

static void fl_share(rl_loop *loop, unsigned i, void *arg)
{
	(void)loop;
	fl_send(arg, i);
}

struct fl_thread {
	struct fl *f;
	unsigned from;
};

static void *fl_thread_main(void *arg)
{
	struct fl_thread *t = arg;

	fl_send(t->f, t->from);
	return NULL;
}

/*
 * Every loop and two plain threads send to every loop (itself included)
 * at once, into the smallest rings a loop takes and loops that never poll:
 * every message runs exactly once, in its sender's order, and every loop
 * wakes. The threads' messages take the eventfd, the loops' the ring.
 */
static void flood_everyone(const struct tp *tp, int wake)
{
	struct rl_group_options opt;
	struct fl *f = calloc(1, sizeof(*f));
	struct fl_thread th[FL_THREADS];
	pthread_t t[FL_THREADS];
	const unsigned senders = FL_LOOPS + FL_THREADS;
	unsigned i;

	cr_assert_not_null(f);
	f->msgs = calloc((size_t)senders * FL_LOOPS * FL_PER, sizeof(*f->msgs));
	cr_assert_not_null(f->msgs);
	rl_group_options_init(&opt);
	opt.loops = FL_LOOPS;
	opt.msg_wake = wake;
	opt.loop.entries = 4;
	opt.loop.cq_entries = 12;
	opt.loop.idle_spin_ns = -1;
	f->g = tgroup_opts(tp, &opt);
	for (i = 0; i < FL_THREADS; i++) {
		th[i] = (struct fl_thread){ f, FL_LOOPS + i };
		cr_assert_eq(
			pthread_create(&t[i], NULL, fl_thread_main, &th[i]), 0);
	}
	cr_assert_eq(rl_group_run(f->g, fl_share, f), 0);
	for (i = 0; i < FL_THREADS; i++)
		pthread_join(t[i], NULL);
	/* Loop 0 runs; the workers on their own, each bound to end. */
	rl_ref(rl_group_loop(f->g, 0));
	for (uint64_t end = tnow_ms() + 20000; tnow_ms() < end;) {
		unsigned all = 0;

		for (i = 0; i < FL_LOOPS; i++)
			all += atomic_load(&f->got[i]);
		if (all == FL_LOOPS * senders * FL_PER)
			break;
		cr_assert_geq(rl_run(rl_group_loop(f->g, 0), RL_RUN_NOWAIT), 0);
		usleep(200);
	}
	rl_unref(rl_group_loop(f->g, 0));
	cr_assert_eq(atomic_load(&f->refused), 0);
	for (i = 0; i < FL_LOOPS; i++) {
		cr_assert_eq(atomic_load(&f->got[i]), senders * FL_PER,
			     "loop %u got %u of %u", i, atomic_load(&f->got[i]),
			     senders * FL_PER);
		cr_assert_eq(f->disorder[i], 0);
	}
	for (size_t k = 0; k < (size_t)senders * FL_LOOPS * FL_PER; k++)
		cr_assert_eq(atomic_load(&f->msgs[k].ran), 1);
	cr_assert_eq(rl_group_close(f->g), 0);
	free(f->msgs);
	free(f);
}

BACKEND_TEST(group_attack, flood_loops_and_threads_tiny_rings_ring)
{
	alarm(90);
	flood_everyone(tp, RL_MSG_WAKE_RING);
}

BACKEND_TEST(group_attack, flood_loops_and_threads_tiny_rings_eventfd)
{
	alarm(90);
	flood_everyone(tp, RL_MSG_WAKE_EVENTFD);
}

/* ------------------------ a sleeping loop and many senders at once */

#define SND_THREADS 3
#define SND_ROUNDS  300

struct snd {
	rl_group *g;
	pthread_barrier_t go;
	struct rl_post posts[SND_THREADS + 1][SND_ROUNDS];
	atomic_int ran[SND_ROUNDS];
	atomic_int round; /* the round the senders may send */
	atomic_bool stop;
	struct rl_post from_loop;
};

static void snd_cb(struct rl_post *post)
{
	struct snd *s = post->data;
	unsigned r = (unsigned)(post - s->posts[0]) % SND_ROUNDS;

	atomic_fetch_add(&s->ran[r], 1);
}

struct snd_thread {
	struct snd *s;
	unsigned i;
};

static void *snd_main(void *arg)
{
	struct snd_thread *t = arg;
	struct snd *s = t->s;

	for (int r = 0; r < SND_ROUNDS; r++) {
		pthread_barrier_wait(&s->go);
		if (atomic_load(&s->stop))
			break;
		s->posts[t->i][r].data = s;
		rl_post(rl_group_loop(s->g, 1), &s->posts[t->i][r], snd_cb);
	}
	return NULL;
}

/* On loop 2: its part of the round, through its ring (or eventfd). */
static void snd_loop_cb(struct rl_post *post)
{
	struct snd *s = post->data;
	int r = atomic_load(&s->round);

	s->posts[SND_THREADS][r].data = s;
	rl_post(rl_group_loop(s->g, 1), &s->posts[SND_THREADS][r], snd_cb);
}

/*
 * Round after round, loop 1 sleeps (it never polls) and three threads and
 * loop 2 send it a message each at the same moment: one of them takes
 * the wake-up, the others only push. Each round every message must run;
 * a lost wake-up fails the round after a bounded wait instead of hanging.
 */
static void senders_at_once(const struct tp *tp, int wake)
{
	struct snd *s = calloc(1, sizeof(*s));
	struct snd_thread th[SND_THREADS];
	pthread_t t[SND_THREADS];
	int failed = -1;

	cr_assert_not_null(s);
	s->g = sleepy_group(tp, 3, wake);
	pthread_barrier_init(&s->go, NULL, SND_THREADS + 1);
	for (unsigned i = 0; i < SND_THREADS; i++) {
		th[i] = (struct snd_thread){ s, i };
		cr_assert_eq(pthread_create(&t[i], NULL, snd_main, &th[i]), 0);
	}
	for (int r = 0; r < SND_ROUNDS && failed < 0; r++) {
		/* Loop 1 goes back to sleep between rounds. */
		usleep(r % 3 ? 200 : 2000);
		atomic_store(&s->round, r);
		s->from_loop.data = s;
		pthread_barrier_wait(&s->go);
		rl_post(rl_group_loop(s->g, 2), &s->from_loop, snd_loop_cb);
		if (!twait_until(atomic_load(&s->ran[r]) == SND_THREADS + 1,
				 5000))
			failed = r;
		/* from_loop is reused next round: it has run by now. */
	}
	/* The senders wait at the next round's barrier: one last one lets
	 * them see stop. */
	if (failed >= 0 && failed + 1 < SND_ROUNDS) {
		atomic_store(&s->stop, true);
		pthread_barrier_wait(&s->go);
	}
	for (unsigned i = 0; i < SND_THREADS; i++)
		pthread_join(t[i], NULL);
	cr_assert_eq(failed, -1, "round %d: %d of %d messages ran in 5 s",
		     failed, failed >= 0 ? atomic_load(&s->ran[failed]) : 0,
		     SND_THREADS + 1);
	cr_assert_eq(rl_group_close(s->g), 0);
	for (int r = 0; r < SND_ROUNDS; r++)
		cr_assert_eq(atomic_load(&s->ran[r]), SND_THREADS + 1);
	pthread_barrier_destroy(&s->go);
	free(s);
}

BACKEND_TEST(group_attack, sleeping_loop_many_senders_ring)
{
	alarm(120);
	senders_at_once(tp, RL_MSG_WAKE_RING);
}

BACKEND_TEST(group_attack, sleeping_loop_many_senders_eventfd)
{
	alarm(120);
	senders_at_once(tp, RL_MSG_WAKE_EVENTFD);
}

/* --------------------------------------- spread bursts of odd files */

#define ODD_FIFOS 3
#define ODD_KINDS 12
#define ODD_EACH  40
#define ODD_MAX	  65536 /* read_file_max of every loop */

struct odd_req {
	rl_req req;
	int kind;
	int calls;
	bool on_home;
};

static pthread_t odd_home;

static void odd_cb(rl_req *req)
{
	struct odd_req *o = (struct odd_req *)req;

	o->calls++;
	o->on_home = pthread_equal(pthread_self(), odd_home);
}

struct odd_kind {
	const char *path;
	size_t buf; /* the caller's buffer; 0: RL_READ_FILE_GROW */
	int each;   /* requests of this kind in a burst */
};

static struct odd_kind odd_kinds[ODD_KINDS];
static char odd_fifo[ODD_FIFOS][512];

static void *fifo_writer(void *arg)
{
	const char *path = arg;
	char data[3000];
	int fd = open(path, O_WRONLY);

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)('a' + i % 26);
	if (fd < 0)
		return NULL;
	/* In two writes, so that the reader sees the stream in pieces. */
	if (write(fd, data, 1000) != 1000 ||
	    write(fd, data + 1000, 2000) != 2000)
		abort();
	close(fd);
	return NULL;
}

static void odd_setup(void)
{
	static char big_path[512], small_path[512], dir_path[512];
	int k = 0;

	snprintf(big_path, sizeof(big_path), "%s", tfile("big", 70000));
	snprintf(small_path, sizeof(small_path), "%s", tfile("small", 5000));
	snprintf(dir_path, sizeof(dir_path), "%s", tdir());
	odd_kinds[k++] = (struct odd_kind){ small_path, 0, ODD_EACH };
	odd_kinds[k++] = (struct odd_kind){ small_path, 4096, ODD_EACH };
	odd_kinds[k++] = (struct odd_kind){ small_path, 5000, ODD_EACH };
	odd_kinds[k++] = (struct odd_kind){ big_path, 0, ODD_EACH };
	odd_kinds[k++] = (struct odd_kind){ tpath("missing"), 0, ODD_EACH };
	odd_kinds[k++] = (struct odd_kind){ dir_path, 0, ODD_EACH };
	odd_kinds[k++] = (struct odd_kind){ "/proc/version", 0, ODD_EACH };
	odd_kinds[k++] =
		(struct odd_kind){ "/proc/sys/kernel/ostype", 16, ODD_EACH };
	odd_kinds[k++] = (struct odd_kind){ "/proc/version", 8, ODD_EACH };
	for (int i = 0; i < ODD_FIFOS; i++) {
		char name[16];

		snprintf(name, sizeof(name), "fifo%d", i);
		snprintf(odd_fifo[i], sizeof(odd_fifo[i]), "%s", tpath(name));
		cr_assert_eq(mkfifo(odd_fifo[i], 0600), 0);
		odd_kinds[k++] = (struct odd_kind){ odd_fifo[i], 0, 1 };
	}
	cr_assert_eq(k, ODD_KINDS);
}

/* One burst of every kind on loop; runs it to idle (FIFO writers
 * meanwhile) and returns the requests. */
static struct odd_req *odd_burst(rl_loop *loop, int *n)
{
	int total = 0, i = 0;
	struct odd_req *o;
	pthread_t w[ODD_FIFOS];

	for (int k = 0; k < ODD_KINDS; k++)
		total += odd_kinds[k].each;
	o = calloc((size_t)total, sizeof(*o));
	cr_assert_not_null(o);
	odd_home = pthread_self();
	/* Interleaved, so that every kind goes to every loop. */
	for (int round = 0; i < total; round++)
		for (int k = 0; k < ODD_KINDS; k++) {
			size_t len = odd_kinds[k].buf;

			if (round >= odd_kinds[k].each)
				continue;
			o[i].kind = k;
			cr_assert_eq(rl_fs_read_file(
					     loop, &o[i].req, odd_kinds[k].path,
					     len ? malloc(len) : NULL, len,
					     len ? 0 : RL_READ_FILE_GROW,
					     odd_cb),
				     0);
			i++;
		}
	for (int f = 0; f < ODD_FIFOS; f++)
		cr_assert_eq(
			pthread_create(&w[f], NULL, fifo_writer, odd_fifo[f]),
			0);
	trun(loop);
	for (int f = 0; f < ODD_FIFOS; f++)
		pthread_join(w[f], NULL);
	*n = total;
	return o;
}

/*
 * A spread burst of regular files that fit, do not fit the caller's
 * buffer or pass read_file_max, a missing file, a directory, /proc files
 * (size 0 in stat, bytes on read) and FIFOs fed by writers: every request
 * calls back once, on the loop that submitted it, with the result and the
 * bytes a lone loop of the same configuration gives for the same burst.
 */
BACKEND_TEST(group_attack, spread_burst_of_odd_files)
{
	/* The lone loop waits for the FIFOs' writer threads. */
	tskip_uring_threads_under_valgrind(tp);
	alarm(60);
	struct rl_group_options opt;
	struct rl_options lone_opt;
	struct odd_req *got, *want;
	int n, n2, before;
	rl_loop *lone;
	rl_group *g;

	odd_setup();
	before = tfd_count();
	rl_options_init(&lone_opt);
	lone_opt.read_file_max = ODD_MAX;
	lone = tloop_opts(tp, &lone_opt);
	want = odd_burst(lone, &n);
	tclose(lone);

	rl_group_options_init(&opt);
	opt.loops = 3;
	opt.flags = RL_GROUP_SPREAD;
	opt.loop.read_file_max = ODD_MAX;
	g = tgroup_opts(tp, &opt);
	got = odd_burst(rl_group_loop(g, 0), &n2);
	cr_assert_eq(n, n2);
	for (int i = 0; i < n; i++) {
		struct odd_req *a = &got[i], *b = &want[i];

		cr_assert_eq(a->calls, 1, "%s: %d calls",
			     odd_kinds[a->kind].path, a->calls);
		cr_assert(a->on_home);
		cr_assert_eq(a->req.result, b->req.result,
			     "%s (%zu): %s, alone %s", odd_kinds[a->kind].path,
			     odd_kinds[a->kind].buf,
			     rl_strerror((int)a->req.result),
			     rl_strerror((int)b->req.result));
		if (a->req.result > 0)
			cr_assert_eq(memcmp(a->req.buf, b->req.buf,
					    (size_t)a->req.result),
				     0, "%s", odd_kinds[a->kind].path);
		free(a->req.buf);
		free(b->req.buf);
	}
	/* The lone loop saw each kind's result: the oddities were there. */
	cr_assert_eq(want[4].req.result, -ENOENT);
	cr_assert_eq(want[1].req.result, -EFBIG);
	cr_assert_eq(want[3].req.result, -EFBIG);
	cr_assert_gt(want[6].req.result, 0);
	cr_assert_eq(rl_group_close(g), 0);
	cr_assert_eq(tfd_count(), before);
	free(got);
	free(want);
}

/* ------------------------------ cancels racing completions elsewhere */

#define CR_N 3000

struct cr {
	rl_loop *loop;
	struct cr_req {
		rl_req req;
		int file;
		int calls;
		int cancel_ret; /* 1: never cancelled */
	} r[CR_N];
	rl_timer timer;
	unsigned sweep, done;
};

static const size_t cr_sizes[] = { 12, 4096, 9000, 0 };
static const char *cr_names[] = { "c0", "c1", "c2", "c3" };
static char cr_paths[4][512];

static void cr_cancel(struct cr *c, unsigned i)
{
	int ret = rl_cancel(c->loop, &c->r[i].req);

	cr_assert(ret == 0 || ret == -EALREADY || ret == -ENOENT, "%d", ret);
	/* -ENOENT also for a result known and its callback queued. */
	if (ret == 0)
		c->r[i].cancel_ret = 0;
}

static void cr_cb(rl_req *req)
{
	struct cr_req *r = (struct cr_req *)req;
	struct cr *c = req->data;

	r->calls++;
	c->done++;
	/* Cancel another one, which may be anywhere: not sent yet, on its
	 * way, running on another loop, or its result on the way back. */
	cr_cancel(c, (unsigned)(r - c->r) * 7919u % CR_N);
}

static void cr_timer_cb(rl_timer *t, int status)
{
	struct cr *c = t->data;

	if (status < 0)
		return;
	for (int k = 0; k < 50; k++)
		cr_cancel(c, c->sweep++ * 104729u % CR_N);
	if (c->done == CR_N)
		rl_timer_stop(c->loop, t);
}

BACKEND_TEST(group_attack, spread_cancels_race_completions)
{
	alarm(60);
	struct cr *c = calloc(1, sizeof(*c));
	int cancelled = 0, completed = 0;
	rl_group *g;

	cr_assert_not_null(c);
	for (int f = 0; f < 4; f++)
		snprintf(cr_paths[f], sizeof(cr_paths[f]), "%s",
			 tfile(cr_names[f], cr_sizes[f]));
	g = tgroup(tp, 3, RL_GROUP_SPREAD, RL_MSG_WAKE_DEFAULT);
	c->loop = rl_group_loop(g, 0);
	for (int i = 0; i < CR_N; i++) {
		c->r[i].file = i % 4;
		c->r[i].cancel_ret = 1;
		c->r[i].req.data = c;
		cr_assert_eq(rl_fs_read_file(c->loop, &c->r[i].req,
					     cr_paths[i % 4], NULL, 0,
					     RL_READ_FILE_GROW, cr_cb),
			     0);
	}
	c->timer.data = c;
	cr_assert_eq(rl_timer_start(c->loop, &c->timer, 1, 1, cr_timer_cb), 0);
	trun(c->loop);
	for (int i = 0; i < CR_N; i++) {
		struct cr_req *r = &c->r[i];

		cr_assert_eq(r->calls, 1, "req %d: %d calls", i, r->calls);
		if (r->cancel_ret == 0) {
			/* A cancel that was taken always wins. */
			cr_assert_eq(r->req.result, -ECANCELED, "req %d: %lld",
				     i, (long long)r->req.result);
			cancelled++;
		} else {
			cr_assert_eq(r->req.result, (int64_t)cr_sizes[r->file],
				     "req %d: %lld", i,
				     (long long)r->req.result);
			tcheck(cr_names[r->file], r->req.buf,
			       cr_sizes[r->file]);
			completed++;
		}
		free(r->req.buf);
	}
	cr_assert_gt(cancelled, 0);
	cr_assert_gt(completed, 0);
	cr_assert_eq(rl_group_close(g), 0);
	free(c);
}

/* ------------------------------------- promises settled from elsewhere */

struct rsettle {
	rl_promise_remote *r;
	int64_t value;
	int ret;
	pthread_barrier_t *go;
};

static void *rsettle_main(void *arg)
{
	struct rsettle *s = arg;

	if (s->go)
		pthread_barrier_wait(s->go);
	s->ret = rl_promise_remote_resolve(s->r,
					   (struct rl_value){ .i = s->value });
	return NULL;
}

struct rwatch {
	int calls;
	int err;
	int64_t value;
	pthread_t thread;
};

static void rwatch_cb(struct rl_outcome *out, void *arg)
{
	struct rwatch *w = arg;

	w->calls++;
	w->err = out->reason;
	w->value = out->value.i;
	w->thread = pthread_self();
}

/*
 * A context closed while a handle of one of its promises is out would
 * free the promise the handle settles later: the close is refused until
 * the handle is used (or dropped), as it is while requests are in flight.
 */
BACKEND_TEST(group_attack, promise_ctx_close_waits_for_its_handles)
{
	alarm(30);
	struct rsettle s = { 0 };
	struct rwatch w = { 0 };
	rl_promise_ctx *ctx;
	rl_promise *p;
	pthread_t t;
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_promise_ctx_open(loop, &ctx), 0);
	p = rl_promise_new(ctx);
	s.r = rl_promise_remote_new(p);
	s.value = 42;
	cr_assert_not_null(s.r);
	rl_promise_unref(rl_then(p, rwatch_cb, NULL, &w)); /* p's ref moved */
	cr_assert_eq(rl_promise_ctx_close(ctx), -EBUSY);
	/* Settled from a thread that is no loop's: the reaction runs here. */
	cr_assert_eq(pthread_create(&t, NULL, rsettle_main, &s), 0);
	/* Not waiting in the kernel: under Valgrind no other thread runs
	 * then (helpers.h). The handle keeps the loop alive meanwhile. */
	TRUN_UNTIL(loop, w.calls == 1);
	trun(loop);
	pthread_join(t, NULL);
	cr_assert_eq(s.ret, 0);
	cr_assert_eq(w.calls, 1);
	cr_assert_eq(w.value, 42);
	cr_assert(pthread_equal(w.thread, pthread_self()));
	cr_assert_eq(rl_promise_ctx_live(ctx), 0);
	/* A dropped handle lets the context go too. */
	p = rl_promise_new(ctx);
	s.r = rl_promise_remote_new(p);
	rl_promise_unref(p);
	cr_assert_eq(rl_promise_ctx_close(ctx), -EBUSY);
	rl_promise_remote_drop(s.r);
	cr_assert_eq(rl_promise_ctx_close(ctx), 0);
	tclose(loop);
}

/* Two handles of one promise settled at the same moment from two threads
 * that are no loop's: one settlement wins, the other is ignored, the
 * reaction runs once on the promise's loop, and both calls say 0. */
BACKEND_TEST(group_attack, promise_settled_twice_at_once)
{
	alarm(30);
	struct rsettle s[2] = { 0 };
	struct rwatch w = { 0 };
	pthread_barrier_t go;
	rl_promise_ctx *ctx;
	rl_promise *p;
	pthread_t t[2];
	rl_loop *loop = tloop(tp);

	cr_assert_eq(rl_promise_ctx_open(loop, &ctx), 0);
	pthread_barrier_init(&go, NULL, 2);
	for (int round = 0; round < 50; round++) {
		memset(&w, 0, sizeof(w));
		p = rl_promise_new(ctx);
		for (int i = 0; i < 2; i++) {
			s[i] = (struct rsettle){ rl_promise_remote_new(p),
						 100 + i, -1, &go };
			cr_assert_not_null(s[i].r);
		}
		rl_promise_unref(rl_then(p, rwatch_cb, NULL, &w));
		for (int i = 0; i < 2; i++)
			cr_assert_eq(pthread_create(&t[i], NULL, rsettle_main,
						    &s[i]),
				     0);
		/* Both settlements in: the handles' promise is gone. */
		TRUN_UNTIL(loop, w.calls == 1 && rl_promise_ctx_live(ctx) == 0);
		trun(loop);
		for (int i = 0; i < 2; i++) {
			pthread_join(t[i], NULL);
			cr_assert_eq(s[i].ret, 0);
		}
		cr_assert_eq(w.calls, 1);
		cr_assert(w.value == 100 || w.value == 101);
		cr_assert_eq(rl_promise_ctx_live(ctx), 0);
	}
	pthread_barrier_destroy(&go);
	cr_assert_eq(rl_promise_ctx_close(ctx), 0);
	tclose(loop);
}

/* ------------------------- settlements and awaits across a closing group */

#define AW_N 30

struct aw {
	rl_group *g;
	rl_promise_ctx *ctx;
	struct aw_one {
		struct aw *a;
		struct rl_post post;
		rl_timer timer;
		rl_promise_remote *r;
		int settle_ret; /* 1: not settled yet */
		int await_ret;	/* 1: the coroutine has not returned */
		int64_t value;
	} one[AW_N];
	int quick_done;
};

/* On loop 1: settles coroutine i's promise when its timer ends, by
 * firing (the quick ones) or by the group's close (-ECANCELED): then loop
 * 0 has closed, and the settlement is refused. */
static void aw_timer_cb(rl_timer *t, int status)
{
	struct aw_one *o = t->data;

	(void)status;
	o->settle_ret = rl_promise_remote_resolve(
		o->r, (struct rl_value){ .i = 7000 + (o - o->a->one) });
}

static void aw_post_cb(struct rl_post *post)
{
	struct aw_one *o = post->data;
	unsigned i = (unsigned)(o - o->a->one);

	o->timer.data = o;
	cr_assert_eq(rl_timer_start(rl_group_loop(o->a->g, 1), &o->timer,
				    i % 3 == 0 ? 1 : 60000, 0, aw_timer_cb),
		     0);
}

static int64_t aw_coro(void *arg)
{
	struct aw_one *o = arg;
	struct aw *a = o->a;
	rl_promise *p = rl_promise_new(a->ctx);
	struct rl_value v = { 0 };

	o->r = rl_promise_remote_new(p);
	o->post.data = o;
	cr_assert_eq(rl_post(rl_group_loop(a->g, 1), &o->post, aw_post_cb), 0);
	o->await_ret = rl_coro_await(p, &v);
	o->value = v.i;
	if (o->await_ret == 0)
		a->quick_done++;
	return 0;
}

/*
 * Coroutines of loop 0 await promises that loop 1 settles: a third of
 * them soon, the others only when the group closes under them. Each
 * coroutine returns once, with its value or -ECANCELED; the late
 * settlements are refused (-ESHUTDOWN) and their handles freed; nothing
 * leaks (ASan) and the close returns.
 */
BACKEND_TEST(group_attack, coroutines_await_while_the_settling_group_closes)
{
	alarm(60);
	struct aw *a = calloc(1, sizeof(*a));
	rl_coro_ctx *sched;
	rl_loop *loop0;
	int quick = 0;

	cr_assert_not_null(a);
	a->g = tgroup(tp, 2, 0, RL_MSG_WAKE_DEFAULT);
	loop0 = rl_group_loop(a->g, 0);
	cr_assert_eq(rl_promise_ctx_open(loop0, &a->ctx), 0);
	cr_assert_eq(rl_coro_ctx_open(loop0, &sched, NULL), 0);
	for (int i = 0; i < AW_N; i++) {
		a->one[i].a = a;
		a->one[i].settle_ret = 1;
		a->one[i].await_ret = 1;
		quick += i % 3 == 0;
		cr_assert_eq(
			rl_coro_spawn(sched, NULL, aw_coro, &a->one[i], NULL),
			0);
	}
	for (uint64_t end = tnow_ms() + 10000;
	     a->quick_done < quick && tnow_ms() < end;)
		cr_assert_geq(rl_run(loop0, RL_RUN_ONCE), 0);
	cr_assert_eq(a->quick_done, quick);
	cr_assert_eq(rl_group_close(a->g), 0);
	for (int i = 0; i < AW_N; i++) {
		struct aw_one *o = &a->one[i];

		if (i % 3 == 0) {
			cr_assert_eq(o->await_ret, 0);
			cr_assert_eq(o->value, 7000 + i);
			cr_assert_eq(o->settle_ret, 0);
		} else {
			cr_assert_eq(o->await_ret, -ECANCELED,
				     "coroutine %d: %d", i, o->await_ret);
			cr_assert_eq(o->settle_ret, -ESHUTDOWN, "handle %d: %d",
				     i, o->settle_ret);
		}
	}
	free(a);
}

/* ------------------------------------------------ sizes of a group */

static void size_share(rl_loop *loop, unsigned i, void *arg)
{
	atomic_int *ran = arg;

	cr_assert_eq(rl_loop_group_index(loop), (int)i);
	atomic_fetch_add(&ran[i], 1);
}

struct selfmsg {
	rl_loop *loop;
	struct rl_post post;
	int hops;
};

static void selfmsg_cb(struct rl_post *post)
{
	struct selfmsg *m = post->data;

	if (--m->hops > 0)
		cr_assert_eq(rl_post(m->loop, &m->post, selfmsg_cb), 0);
	else
		rl_unref(m->loop);
}

/* A group of one loop: no thread of its own, a spread burst that stays
 * home, messages to itself from its callbacks, shares, a close. */
BACKEND_TEST(group_attack, group_of_one)
{
	alarm(30);
	static struct sreq1 {
		rl_req req;
		char buf[64];
	} r[100];
	const char *path = tfile("one", 12);
	struct tseen seen = { 0 };
	struct selfmsg m = { 0 };
	atomic_int ran[1] = { 0 };
	int threads = tthread_count(), before = tfd_count();
	rl_group *g = tgroup(tp, 1, RL_GROUP_SPREAD, RL_MSG_WAKE_DEFAULT);
	rl_loop *loop = rl_group_loop(g, 0);

	cr_assert_eq(rl_group_size(g), 1);
	cr_assert_null(rl_group_loop(g, 1));
	for (int i = 0; i < 100; i++) {
		r[i].req.data = &seen;
		cr_assert_eq(rl_fs_read_file(loop, &r[i].req, path, r[i].buf,
					     sizeof(r[i].buf), 0, tseen_cb),
			     0);
	}
	m.loop = loop;
	m.hops = 100;
	m.post.data = &m;
	rl_ref(loop);
	cr_assert_eq(rl_post(loop, &m.post, selfmsg_cb), 0);
	trun(loop);
	cr_assert_eq(seen.calls, 100);
	for (int i = 0; i < 100; i++) {
		cr_assert_eq(r[i].req.result, 12);
		tcheck("one", r[i].buf, 12);
	}
	cr_assert_eq(m.hops, 0);
	cr_assert_eq(rl_group_run(g, size_share, ran), 0);
	cr_assert_eq(atomic_load(&ran[0]), 1);
	cr_assert_eq(rl_loop_close(loop), -EBUSY);
	cr_assert_eq(rl_group_close(g), 0);
	cr_assert_eq(tfd_count(), before);
	cr_assert(twait_until(tthread_count() == threads, 5000), "%d threads",
		  tthread_count());
}

#define BIG_LOOPS 16
#define BIG_PER	  60

struct big {
	rl_group *g;
	struct rl_post msgs[BIG_LOOPS][BIG_LOOPS][BIG_PER];
	atomic_int got[BIG_LOOPS];
	atomic_int refused;
};

static void big_cb(struct rl_post *post)
{
	struct big *b = post->data;
	unsigned to =
		(unsigned)((post - &b->msgs[0][0][0]) / BIG_PER) % BIG_LOOPS;

	atomic_fetch_add(&b->got[to], 1);
}

static void big_share(rl_loop *loop, unsigned i, void *arg)
{
	struct big *b = arg;

	(void)loop;
	for (unsigned k = 0; k < BIG_PER; k++)
		for (unsigned to = 0; to < BIG_LOOPS; to++) {
			b->msgs[i][to][k].data = b;
			if (rl_post(rl_group_loop(b->g, to), &b->msgs[i][to][k],
				    big_cb) < 0)
				atomic_fetch_add(&b->refused, 1);
		}
}

/* More loops than CPUs (16 on this machine's 2), pinned round the CPUs,
 * never polling: every loop messages every loop, a spread burst goes over
 * all of them, and the group closes with nothing left behind. */
BACKEND_TEST(group_attack, more_loops_than_cpus)
{
	alarm(90);
	struct big *b = calloc(1, sizeof(*b));
	struct rl_group_options opt;
	static rl_req reqs[BIG_LOOPS * 20];
	static char bufs[BIG_LOOPS * 20][32];
	const char *path = tfile("big16", 12);
	struct tseen seen = { 0 };
	int threads = tthread_count(), before = tfd_count();
	rl_loop *loop0;

	cr_assert_not_null(b);
	rl_group_options_init(&opt);
	opt.loops = BIG_LOOPS;
	opt.flags = RL_GROUP_PIN | RL_GROUP_SPREAD;
	opt.loop.idle_spin_ns = -1;
	b->g = tgroup_opts(tp, &opt);
	loop0 = rl_group_loop(b->g, 0);
	cr_assert_geq(tthread_count(), threads + BIG_LOOPS - 1);
	cr_assert_eq(rl_group_run(b->g, big_share, b), 0);
	rl_ref(loop0);
	for (uint64_t end = tnow_ms() + 30000; tnow_ms() < end;) {
		int all = 0;

		for (int i = 0; i < BIG_LOOPS; i++)
			all += atomic_load(&b->got[i]);
		if (all == BIG_LOOPS * BIG_LOOPS * BIG_PER)
			break;
		cr_assert_geq(rl_run(loop0, RL_RUN_NOWAIT), 0);
		usleep(500);
	}
	rl_unref(loop0);
	cr_assert_eq(atomic_load(&b->refused), 0);
	for (int i = 0; i < BIG_LOOPS; i++)
		cr_assert_eq(atomic_load(&b->got[i]), BIG_LOOPS * BIG_PER,
			     "loop %d got %d", i, atomic_load(&b->got[i]));
	for (int i = 0; i < BIG_LOOPS * 20; i++) {
		reqs[i] = (rl_req){ .data = &seen };
		cr_assert_eq(rl_fs_read_file(loop0, &reqs[i], path, bufs[i],
					     sizeof(bufs[i]), 0, tseen_cb),
			     0);
	}
	trun(loop0);
	cr_assert_eq(seen.calls, BIG_LOOPS * 20);
	for (int i = 0; i < BIG_LOOPS * 20; i++) {
		cr_assert_eq(reqs[i].result, 12);
		tcheck("big16", bufs[i], 12);
	}
	cr_assert_eq(rl_group_close(b->g), 0);
	cr_assert_eq(tfd_count(), before);
	/* The kernel's io-wq workers of the rings go on their own. */
	cr_assert(twait_until(tthread_count() == threads, 5000), "%d threads",
		  tthread_count());
	free(b);
}

/* ------------------------------------- groups made without resources */

/*
 * Groups opened with only a few fds left (RLIMIT_NOFILE just above what
 * is open): each either opens whole or fails with a clear -errno
 * (-EMFILE), leaving no fd, no thread and no half-made group behind;
 * once the limit is back, a group opens. A tiny RLIMIT_MEMLOCK (kernels
 * before 5.12 charge rings to it) gives the same: a group, or a clean
 * error.
 */
BACKEND_TEST(group_attack, groups_made_without_fds_or_memlock)
{
	alarm(60);
	struct rl_group_options opt;
	struct rlimit nofile, memlock, low;
	int threads, before, opened = 0, failed = 0;
	rl_group *g;

	/* The scratch directory's fd and the helpers' first. */
	(void)tfd_count();
	before = tfd_count();
	threads = tthread_count();
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &nofile), 0);
	cr_assert_eq(getrlimit(RLIMIT_MEMLOCK, &memlock), 0);
	rl_group_options_init(&opt);
	opt.loops = 6;
	opt.flags = RL_GROUP_SPREAD;
	opt.loop.backend = tp->backend;
	opt.loop.flags = tp->flags;
	tskip_uring_threads_under_valgrind(tp);
	for (int spare = 0; spare <= 24; spare++) {
		int ret;

		low = nofile;
		low.rlim_cur = (rlim_t)(before + spare);
		/* tfd_count() opens a directory: room for it. */
		low.rlim_cur += 1;
		cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
		g = NULL;
		ret = rl_group_open(&g, &opt);
		cr_assert_eq(setrlimit(RLIMIT_NOFILE, &nofile), 0);
		if (ret == 0) {
			cr_assert_not_null(g);
			opened++;
			cr_assert_eq(rl_group_close(g), 0);
		} else {
			cr_assert_null(g);
			cr_assert(ret == -EMFILE || ret == -ENFILE ||
					  ret == -ENOMEM,
				  "spare %d: %s", spare, rl_strerror(ret));
			failed++;
		}
		cr_assert_eq(tfd_count(), before, "spare %d: fds left", spare);
		cr_assert(twait_until(tthread_count() == threads, 5000),
			  "spare %d: %d threads, %d before", spare,
			  tthread_count(), threads);
	}
	cr_assert_gt(failed, 0);
	cr_assert_gt(opened, 0);

	low = memlock;
	low.rlim_cur = 0;
	cr_assert_eq(setrlimit(RLIMIT_MEMLOCK, &low), 0);
	{
		int ret = rl_group_open(&g, &opt);

		cr_assert_eq(setrlimit(RLIMIT_MEMLOCK, &memlock), 0);
		if (ret == 0)
			cr_assert_eq(rl_group_close(g), 0);
		else
			cr_assert(ret == -ENOMEM || ret == -EPERM, "%s",
				  rl_strerror(ret));
	}
	cr_assert_eq(tfd_count(), before);
}

/* --------------------------- messages that land as their loop closes */

#define LAND_SLOTS 4096

struct land;

struct land_slot {
	struct rl_post post; /* first: the post is the slot */
	rl_task task;
	struct land *l;
	atomic_int state; /* 0 free, 1 posted, 2 its task queued */
};

struct land {
	rl_group *g;
	struct land_slot slot[LAND_SLOTS];
	struct rl_post start;
	atomic_long accepted, ran, tasks;
	atomic_int gave_up, refused;
};

static void land_task(rl_task *task)
{
	struct land_slot *s =
		(struct land_slot *)(void *)((char *)task -
					     offsetof(struct land_slot, task));

	atomic_fetch_add(&s->l->tasks, 1);
	atomic_store(&s->state, 0);
}

/* On loop 1, maybe while it closes: a message queues a task, as a
 * promise settled from elsewhere queues its reactions. */
static void land_cb(struct rl_post *post)
{
	struct land_slot *s = (struct land_slot *)post;

	atomic_fetch_add(&s->l->ran, 1);
	atomic_store(&s->state, 2);
	rl_task_queue(rl_group_loop(s->l->g, 1), &s->task, land_task);
}

/* On loop 2: messages to loop 1, as fast as they go, until it refuses. */
static void land_start(struct rl_post *post)
{
	struct land *l = post->data;
	int64_t stuck_since = 0;

	for (unsigned i = 0;; i = (i + 1) % LAND_SLOTS) {
		struct land_slot *s = &l->slot[i];

		if (atomic_load(&s->state) != 0) {
			/* Every slot waits for a task: give up after 2 s
			 * (20 s under Valgrind, whose scheduler can leave
			 * loop 1 without a turn for seconds while this one
			 * spins). */
			if (!stuck_since)
				stuck_since = tnow_ms();
			else if (tnow_ms() - stuck_since >
				 (getenv("RL_VALGRIND") ? 20000 : 2000)) {
				atomic_store(&l->gave_up, 1);
				return;
			}
			continue;
		}
		stuck_since = 0;
		s->l = l;
		atomic_store(&s->state, 1);
		int ret = rl_post(rl_group_loop(l->g, 1), &s->post, land_cb);

		if (ret < 0) {
			atomic_store(&s->state, 0);
			atomic_store(&l->refused, ret);
			return;
		}
		atomic_fetch_add(&l->accepted, 1);
	}
}

/*
 * A loop closes while another floods it with messages whose callbacks
 * queue tasks. Every message accepted runs once, and so does every task
 * it queued, however late in the close the message landed (between the
 * close's last pass over its posts and the moment it refuses new ones,
 * the drain that follows must still run what those posts queue).
 */
BACKEND_TEST(group_attack, tasks_of_messages_landing_as_the_loop_closes)
{
	alarm(120);
	struct land *l = calloc(1, sizeof(*l));
	/* Valgrind runs one thread at a time, tens of times slower: fewer
	 * messages before the close, fewer rounds. */
	const bool slow = getenv("RL_VALGRIND") != NULL;
	const long enough = slow ? 50 : 1000;

	cr_assert_not_null(l);
	for (int round = 0; round < (slow ? 5 : 30); round++) {
		memset(l, 0, sizeof(*l));
		l->g = tgroup(tp, 3, 0, RL_MSG_WAKE_EVENTFD);
		l->start.data = l;
		cr_assert_eq(
			rl_post(rl_group_loop(l->g, 2), &l->start, land_start),
			0);
		cr_assert(twait_until(atomic_load(&l->ran) > enough, 5000),
			  "round %d: %ld messages ran", round,
			  atomic_load(&l->ran));
		cr_assert_eq(rl_group_close(l->g), 0);
		cr_assert_eq(atomic_load(&l->gave_up), 0, "round %d", round);
		cr_assert_eq(atomic_load(&l->refused), -ESHUTDOWN);
		cr_assert_eq(atomic_load(&l->ran), atomic_load(&l->accepted));
		cr_assert_eq(atomic_load(&l->tasks), atomic_load(&l->ran),
			     "round %d: %ld messages ran, %ld of their tasks",
			     round, atomic_load(&l->ran),
			     atomic_load(&l->tasks));
	}
	free(l);
}

/* A spread burst with FIFOs nobody writes to (their opens block on
 * whichever loop they went to) and cached files, and the group closes
 * under it: every request calls back once, the FIFOs with -ECANCELED,
 * and the close returns. */
BACKEND_TEST(group_attack, close_with_blocked_fifos_spread)
{
	alarm(60);
	enum { N = 60 };
	static struct odd_req r[N];
	char fifo[N / 10][512];
	const char *path = tfile("plain", 100);
	int before;
	rl_group *g;
	rl_loop *loop;

	for (int f = 0; f < N / 10; f++) {
		char name[16];

		snprintf(name, sizeof(name), "lonely%d", f);
		snprintf(fifo[f], sizeof(fifo[f]), "%s", tpath(name));
		cr_assert_eq(mkfifo(fifo[f], 0600), 0);
	}
	before = tfd_count();
	g = tgroup(tp, 3, RL_GROUP_SPREAD, RL_MSG_WAKE_DEFAULT);
	loop = rl_group_loop(g, 0);
	odd_home = pthread_self();
	for (int i = 0; i < N; i++) {
		r[i] = (struct odd_req){ .kind = i % 2 };
		cr_assert_eq(rl_fs_read_file(loop, &r[i].req,
					     i % 2 ? fifo[i / 10] : path, NULL,
					     0, RL_READ_FILE_GROW, odd_cb),
			     0);
	}
	/* Long enough for the FIFOs' opens to block where they went. */
	for (int k = 0; k < 20; k++) {
		cr_assert_geq(rl_run(loop, RL_RUN_NOWAIT), 0);
		usleep(1000);
	}
	cr_assert_eq(rl_group_close(g), 0);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(r[i].calls, 1, "req %d: %d calls", i, r[i].calls);
		if (i % 2)
			cr_assert_eq(r[i].req.result, -ECANCELED, "req %d: %s",
				     i, rl_strerror((int)r[i].req.result));
		else
			cr_assert(r[i].req.result == 100 ||
					  r[i].req.result == -ECANCELED,
				  "req %d: %s", i,
				  rl_strerror((int)r[i].req.result));
		free(r[i].req.buf);
	}
	cr_assert_eq(tfd_count(), before);
}
