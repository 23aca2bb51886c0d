/* SPDX-License-Identifier: MIT */
/*
 * test_net_stress.c - sockets under pressure, on every backend
 * configuration: a buffer ring of two tiny buffers, bursts of connections,
 * 10,000 idle connections, running out of fds on accept, cancels racing
 * stream items, and closing the loop with everything open.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "net_helpers.h"

static bool under_valgrind(void)
{
	return getenv("RL_VALGRIND") != NULL;
}

/* ------------------------------------------------------------ dry ring */

/* A sink that holds every third buffer for a while: the two buffers of
 * the ring are out most of the time. */
struct tslow {
	struct tsink sink;
	void *held[2];
	int nheld;
	rl_timer t;
};

static void slow_release(rl_timer *t, int status)
{
	struct tslow *s = t->data;

	(void)status;
	for (int i = 0; i < s->nheld; i++)
		cr_assert_eq(rl_net_buf_release(s->sink.req.loop, s->held[i]),
			     0);
	s->nheld = 0;
}

static void slow_cb(rl_req *req)
{
	struct tslow *s = (struct tslow *)(void *)req->data;

	tsink_cb(req);
	if (rl_req_more(req) && s->sink.items % 3 == 0 && s->nheld < 2 &&
	    s->t.state == 0) {
		s->held[s->nheld++] = rl_net_buf_hold(req);
		s->t.data = s;
		rl_timer_start(req->loop, &s->t, 1, 0, slow_release);
	}
}

BACKEND_TEST(net_stress, dry_ring_every_byte_in_order)
{
	enum { LEN = 120000, STREAMS = 2 };
	struct rl_options opt;
	struct rl_stats st;
	rl_loop *loop;
	static struct tslow slow[STREAMS];
	struct tsink *sink;
	static rl_req snd[STREAMS];
	static struct tseen sent[STREAMS];
	char *data = malloc(LEN);
	int s[STREAMS], peer[STREAMS];

	rl_options_init(&opt);
	opt.net_bufs = 2;
	opt.net_buf_size = 16;
	loop = tloop_opts(tp, &opt);
	tpat_fill(data, 0, LEN);
	for (int i = 0; i < STREAMS; i++) {
		tpair(i ? AF_UNIX : AF_INET, &s[i], &peer[i]);
		fcntl(peer[i], F_SETFL, O_NONBLOCK);
		memset(&slow[i], 0, sizeof(slow[i]));
		sink = &slow[i].sink;
		sink->req.data = &slow[i];
		sink->check = true;
		cr_assert_eq(
			rl_net_recv_stream(loop, &sink->req, s[i], slow_cb), 0);
		rl_req_init(&snd[i]);
		snd[i].data = &sent[i];
		cr_assert_eq(rl_net_send(loop, &snd[i], peer[i], data, LEN, 0,
					 tseen_cb),
			     0);
	}
	for (int i = 0; i < STREAMS; i++) {
		trun_until(loop, slow[i].sink.bytes == LEN);
		shutdown(peer[i], SHUT_WR);
		trun_until(loop, slow[i].sink.finals == 1);
		cr_assert_eq(slow[i].sink.final, 0);
		cr_assert_geq(slow[i].sink.items, LEN / 16);
		cr_assert_eq(slow[i].sink.items_after_final, 0);
	}
	trun(loop);
	for (int i = 0; i < STREAMS; i++) {
		cr_assert_eq(sent[i].calls, 1);
		cr_assert_eq(sent[i].result, LEN);
		close(s[i]);
		close(peer[i]);
	}
	rl_loop_stats(loop, &st);
	cr_assert_gt(st.net_dry, 0, "the ring never ran dry");
	free(data);
	tclose(loop);
}

/* ------------------------------------------------------------- bursts */

enum { BURST = 600 };
static int burst_fds[BURST];
static int burst_n, burst_finals;

static void burst_cb(rl_req *req)
{
	if (rl_req_more(req)) {
		cr_assert_lt(burst_n, BURST);
		burst_fds[burst_n++] = (int)req->result;
	} else {
		burst_finals++;
	}
}

BACKEND_TEST(net_stress, accept_burst)
{
	enum { N = BURST };
	rl_loop *loop = tloop(tp);
	struct rl_addr a;
	static int cfd[N];
	static rl_req acc;
	int lfd;

	lfd = tlisten(&a, AF_INET, N);
	/* All connected (and waiting in the backlog) before the stream
	 * starts: the first batch has hundreds of items for one request. */
	for (int i = 0; i < N; i++)
		cfd[i] = tconnect(&a);
	rl_req_init(&acc);
	cr_assert_eq(rl_net_accept(loop, &acc, lfd, burst_cb), 0);
	trun_until(loop, burst_n == N);
	trun_for(loop, 10);
	cr_assert_eq(burst_n, N);
	cr_assert_eq(burst_finals, 0);
	cr_assert_eq(rl_cancel(loop, &acc), 0);
	trun(loop);
	cr_assert_eq(burst_finals, 1);
	cr_assert_eq(acc.result, -ECANCELED);
	for (int i = 0; i < N; i++) {
		close(cfd[i]);
		close(burst_fds[i]);
	}
	close(lfd);
	tclose(loop);
}

/* ------------------------------------------------ 10,000 idle connections */

static int raise_nofile(rlim_t want)
{
	struct rlimit rl;

	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_cur >= want)
		return 0;
	if (rl.rlim_max < want)
		return -1;
	rl.rlim_cur = want;
	return setrlimit(RLIMIT_NOFILE, &rl);
}

/* The clients live in a child process (10,000 fds on each side would
 * not fit one process's usual hard limit): it connects them all, sends a
 * byte on every 1000th, then waits for its pipe to close. */
static pid_t idle_clients(const struct rl_addr *a, int n, int *ctl)
{
	int p[2];
	pid_t pid;
	char c;

	cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		int *fds = malloc((size_t)n * sizeof(*fds));

		close(p[1]);
		for (int i = 0; i < n; i++) {
			fds[i] = socket(a->sa.sa_family,
					SOCK_STREAM | SOCK_CLOEXEC, 0);
			if (fds[i] < 0 || connect(fds[i], &a->sa, a->len) < 0)
				_exit(10);
		}
		for (int i = 0; i < n; i += 1000)
			if (write(fds[i], "!", 1) != 1)
				_exit(11);
		while (read(p[0], &c, 1) > 0)
			;
		for (int i = 0; i < n; i++)
			close(fds[i]);
		free(fds);
		_exit(0);
	}
	close(p[0]);
	*ctl = p[1];
	return pid;
}

struct tidle {
	rl_loop *loop;
	rl_req acc;
	rl_req *streams;
	int *fds;
	int n, max, acc_finals;
	int items, finals, cancelled;
	int64_t acc_final;
};

static struct tidle idle;

static void idle_stream_cb(rl_req *req)
{
	if (rl_req_more(req)) {
		cr_assert_eq(req->result, 1);
		cr_assert_eq(*(char *)req->buf, '!');
		idle.items++;
		return;
	}
	idle.finals++;
	if (req->result == -ECANCELED)
		idle.cancelled++;
}

static void idle_acc_cb(rl_req *req)
{
	int i;

	if (!rl_req_more(req)) {
		idle.acc_finals++;
		idle.acc_final = req->result;
		return;
	}
	cr_assert_lt(idle.n, idle.max);
	i = idle.n++;
	idle.fds[i] = (int)req->result;
	rl_req_init(&idle.streams[i]);
	cr_assert_eq(rl_net_recv_stream(idle.loop, &idle.streams[i],
					idle.fds[i], idle_stream_cb),
		     0);
}

BACKEND_TEST(net_stress, ten_thousand_idle_connections, .timeout = 120)
{
	int n = under_valgrind() ? 500 : 10000;
	struct rl_addr a;
	int lfd, ctl, status, base;
	pid_t pid;

	if (raise_nofile((rlim_t)n + 256) < 0)
		cr_skip_test("RLIMIT_NOFILE's hard limit is below %d", n + 256);
	base = tfd_count();
	memset(&idle, 0, sizeof(idle));
	idle.loop = tloop(tp);
	idle.max = n;
	idle.streams = calloc((size_t)n, sizeof(*idle.streams));
	idle.fds = calloc((size_t)n, sizeof(*idle.fds));
	lfd = tlisten(&a, AF_INET, 4096);
	cr_assert_eq(rl_net_accept(idle.loop, &idle.acc, lfd, idle_acc_cb), 0);
	pid = idle_clients(&a, n, &ctl);
	trun_until(idle.loop, idle.n == n && idle.items == (n + 999) / 1000);
	/* Idle: nothing happens. */
	trun_for(idle.loop, 100);
	cr_assert_eq(idle.items, (n + 999) / 1000);
	cr_assert_eq(idle.finals, 0);
	/* Closing the loop ends every stream, once, and the accept. */
	cr_assert_eq(rl_loop_close(idle.loop), 0);
	cr_assert_eq(idle.finals, n);
	cr_assert_eq(idle.cancelled, n);
	cr_assert_eq(idle.acc_finals, 1);
	cr_assert_eq(idle.acc_final, -ECANCELED);
	for (int i = 0; i < n; i++)
		close(idle.fds[i]);
	close(lfd);
	close(ctl);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "client process: status %d", status);
	cr_assert_eq(tfd_count(), base, "fds leaked: %d open, %d at start",
		     tfd_count(), base);
	free(idle.streams);
	free(idle.fds);
}

/* --------------------------------------------------------- EMFILE */

BACKEND_TEST(net_stress, emfile_on_accept_then_recovers)
{
	enum { N = 6, ROOM = 3 };
	rl_loop *loop = tloop(tp);
	struct rl_addr a;
	struct rlimit old, low;
	struct tacc acc;
	int lfd, cfd[N], probe[ROOM];

	if (under_valgrind())
		cr_skip_test("Valgrind refuses to lower RLIMIT_NOFILE");
	lfd = tlisten(&a, AF_INET, 16);
	for (int i = 0; i < N; i++)
		cfd[i] = tconnect(&a);
	/* Exactly ROOM free fd numbers below the limit. */
	for (int i = 0; i < ROOM; i++)
		probe[i] = dup(0);
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
	low = old;
	low.rlim_cur = (rlim_t)probe[ROOM - 1] + 1;
	for (int i = 0; i < ROOM; i++)
		close(probe[i]);
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);

	tacc_start(loop, &acc, lfd);
	trun_until(loop, acc.finals == 1);
	cr_assert_eq(acc.final, -EMFILE, "%s", rl_strerror((int)acc.final));
	cr_assert_eq(acc.n, ROOM);
	/* fds free again: a new accept takes the connections that waited. */
	tacc_close_all(&acc);
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
	tacc_start(loop, &acc, lfd);
	trun_until(loop, acc.n == N - ROOM);
	trun_for(loop, 10);
	cr_assert_eq(acc.n, N - ROOM);
	cr_assert_eq(rl_cancel(loop, &acc.req), 0);
	trun_until(loop, acc.finals == 1);
	cr_assert_eq(acc.final, -ECANCELED);
	tacc_close_all(&acc);
	for (int i = 0; i < N; i++)
		close(cfd[i]);
	close(lfd);
	tclose(loop);
}

/* ------------------------------------------------- cancel racing items */

struct trace {
	rl_req req;
	size_t bytes;
	int items, finals;
	bool cancelled;
	int64_t final;
};

static void race_cb(rl_req *req)
{
	struct trace *r = req->data;

	if (rl_req_more(req)) {
		cr_assert_eq(r->finals, 0);
		r->items++;
		r->bytes += req->len;
		return;
	}
	r->finals++;
	r->final = req->result;
}

BACKEND_TEST(net_stress, stream_cancel_races_items_and_end)
{
	rl_loop *loop = tloop(tp);
	struct trace r;
	char chunk[100] = { 0 };
	int s, peer, ret, ended = 0, cut = 0;

	for (int i = 0; i < 200; i++) {
		tpair(AF_UNIX, &s, &peer);
		for (int k = 0; k < 5; k++)
			cr_assert_eq(write(peer, chunk, sizeof(chunk)), 100);
		if (i % 2)
			close(peer); /* the end of stream races the cancel */
		memset(&r, 0, sizeof(r));
		r.req.data = &r;
		cr_assert_eq(rl_net_recv_stream(loop, &r.req, s, race_cb), 0);
		for (int k = 0; k < i % 5; k++)
			rl_run(loop, RL_RUN_NOWAIT);
		ret = rl_cancel(loop, &r.req);
		if (ret == 0)
			r.cancelled = true;
		trun_until(loop, r.finals == 1);
		trun(loop);
		cr_assert_eq(r.finals, 1);
		if (ret == 0) {
			char rest[600];
			ssize_t got;

			/* Items received before the kernel stopped the stream
			 * still came; the rest is in the socket: not a byte
			 * lost or doubled. */
			cr_assert_eq(r.final, -ECANCELED);
			while ((got = recv(s, rest, sizeof(rest),
					   MSG_DONTWAIT)) > 0)
				r.bytes += (size_t)got;
			cr_assert_eq(r.bytes, 500);
			cut++;
		} else {
			/* The end was known: everything comes as it was. */
			cr_assert_eq(ret, -ENOENT);
			cr_assert_eq(r.final, 0);
			cr_assert_eq(r.bytes, 500);
			ended++;
		}
		close(s);
		if (!(i % 2))
			close(peer);
	}
	cr_assert_eq(cut + ended, 200);
	tclose(loop);
}

/* ------------------------------------- closing with everything open */

struct tall {
	int calls[16];
	int64_t res[16];
};
static struct tall all;

static void all_cb(rl_req *req)
{
	int i = (int)(intptr_t)req->data;

	if (rl_req_more(req))
		return;
	all.calls[i]++;
	all.res[i] = req->result;
}

BACKEND_TEST(net_stress, close_loop_with_everything_open)
{
	enum { BIG = 64 << 20 };
	struct rl_options opt;
	rl_loop *loop;
	static rl_req r[16];
	struct rl_addr a, full;
	rl_timer dl;
	char *big = calloc(1, BIG), buf[8];
	int lfd, flfd, filler, s1, p1, s2, p2, s3, p3, s4, p4, i = 0;
	const int nreq = 9;
	int base = tfd_count();

	rl_options_init(&opt);
	opt.net_bufs = 2;
	opt.net_buf_size = 16;
	loop = tloop_opts(tp, &opt);
	memset(&all, 0, sizeof(all));
	for (int k = 0; k < 16; k++) {
		rl_req_init(&r[k]);
		r[k].data = (void *)(intptr_t)k;
	}
	lfd = tlisten(&a, AF_INET6, 8);
	flfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	taddr(&full, AF_INET);
	cr_assert_eq(bind(flfd, &full.sa, full.len), 0);
	cr_assert_eq(listen(flfd, 0), 0);
	rl_net_local_addr(flfd, &full);
	filler = tconnect(&full);
	tpair(AF_INET, &s1, &p1);
	tpair(AF_UNIX, &s2, &p2);
	tpair(AF_INET, &s3, &p3);
	tpair(AF_UNIX, &s4, &p4);

	/* 0: an idle accept; 1: a connect that cannot finish; 2: the same
	 * with a timeout; 3: a stream on a quiet socket; 4: a stream whose
	 * buffers ran out (data waiting, ring of 2 x 16 full); 5: a receive;
	 * 6: a send the peer never reads; 7: a send queued behind it; 8: a
	 * receive with a deadline. */
	cr_assert_eq(rl_net_accept(loop, &r[i++], lfd, all_cb), 0);
	cr_assert_eq(rl_net_connect(loop, &r[i++], &full, 0, 0, all_cb), 0);
	cr_assert_eq(rl_net_connect(loop, &r[i++], &full, 0, 60000, all_cb), 0);
	cr_assert_eq(rl_net_recv_stream(loop, &r[i++], s1, all_cb), 0);
	cr_assert_eq(write(p2, big, 4096), 4096);
	cr_assert_eq(rl_net_recv_stream(loop, &r[i++], s2, all_cb), 0);
	cr_assert_eq(rl_net_recv(loop, &r[i++], s3, buf, sizeof(buf), all_cb),
		     0);
	cr_assert_eq(rl_net_send(loop, &r[i++], s4, big, BIG, 0, all_cb), 0);
	cr_assert_eq(rl_net_send(loop, &r[i++], s4, "x", 1, 0, all_cb), 0);
	cr_assert_eq(rl_net_recv(loop, &r[i++], s1, buf, sizeof(buf), all_cb),
		     0);
	cr_assert_eq(i, nreq);
	rl_timer_init(&dl);
	cr_assert_eq(rl_req_deadline(loop, &r[8], &dl, 60000), 0);
	trun_for(loop, 50);
	for (int k = 0; k < nreq; k++)
		cr_assert_eq(all.calls[k], 0, "request %d finished early: %s",
			     k, rl_strerror((int)all.res[k]));

	cr_assert_eq(rl_loop_close(loop), 0);
	for (int k = 0; k < nreq; k++) {
		cr_assert_eq(all.calls[k], 1, "request %d: %d callbacks", k,
			     all.calls[k]);
		cr_assert_eq(all.res[k], -ECANCELED, "request %d: %s", k,
			     rl_strerror((int)all.res[k]));
	}
	close(lfd);
	close(flfd);
	close(filler);
	close(s1), close(p1), close(s2), close(p2);
	close(s3), close(p3), close(s4), close(p4);
	free(big);
	/* The loop closed the sockets of both connects itself. */
	cr_assert_eq(tfd_count(), base, "fds leaked: %d open, %d at start",
		     tfd_count(), base);
}

/* One buffer, two streams waiting for it. The buffer comes back and
 * wakes the stream that waited longest, which is cancelled before it
 * takes it: the other stream must get it. */
struct tone {
	rl_req req;
	size_t bytes;
	void *held;
	int finals;
	bool hold;
};

static void one_cb(rl_req *req)
{
	struct tone *o = req->data;

	if (!rl_req_more(req)) {
		o->finals++;
		return;
	}
	o->bytes += req->len;
	if (o->hold && !o->held)
		o->held = rl_net_buf_hold(req);
}

BACKEND_TEST(net_stress, woken_stream_cancelled_passes_the_buffer_on)
{
	struct rl_options opt;
	struct rl_stats st;
	rl_loop *loop;
	struct tone a, b;
	char m[8] = "abcdefgh";
	int sa, pa, sb, pb;

	rl_options_init(&opt);
	opt.net_bufs = 1;
	opt.net_buf_size = 8;
	loop = tloop_opts(tp, &opt);
	tpair(AF_UNIX, &sa, &pa);
	tpair(AF_UNIX, &sb, &pb);
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	a.req.data = &a;
	b.req.data = &b;
	a.hold = true;
	cr_assert_eq(rl_net_recv_stream(loop, &a.req, sa, one_cb), 0);
	cr_assert_eq(rl_net_recv_stream(loop, &b.req, sb, one_cb), 0);
	/* a takes the only buffer and keeps it; then a, then b, find none. */
	cr_assert_eq(write(pa, m, 8), 8);
	trun_until(loop, a.held != NULL);
	cr_assert_eq(write(pa, m, 8), 8);
	trun_until(loop, (rl_loop_stats(loop, &st), st.net_dry >= 1));
	cr_assert_eq(write(pb, m, 8), 8);
	trun_until(loop, (rl_loop_stats(loop, &st), st.net_dry >= 2));
	cr_assert_eq(b.bytes, 0);
	/* The buffer comes back and wakes a; a is cancelled at once. */
	cr_assert_eq(rl_net_buf_release(loop, a.held), 0);
	cr_assert_eq(rl_cancel(loop, &a.req), 0);
	trun_until(loop, a.finals == 1 && b.bytes == 8);
	cr_assert_eq(a.req.result, -ECANCELED);
	close(pb);
	trun_until(loop, b.finals == 1);
	cr_assert_eq(b.req.result, 0);
	close(sa), close(pa), close(sb);
	tclose(loop);
}
