/* SPDX-License-Identifier: MIT */
/*
 * echo_styles.c - the socket bench's echo written in each programming
 * style, as a program of that style would write it:
 *
 *   callback  Node-like connections (rl_cb_net_*): data callbacks from the
 *             loop's receive stream, each chunk written back from the held
 *             loop buffer, released when its write completes;
 *   promise   per connection (rl_promise_conn_*) a chain read -> then
 *             write -> then read ..., into the connection's buffer: reads
 *             come from the connection's receive stream;
 *   coro      a coroutine per connection looping rl_coro_conn_read and
 *             rl_coro_conn_write on a buffer on its stack;
 *   promise-recv, coro-recv  the same with one receive request per read
 *             (rl_promise_net_recv, rl_coro_net_recv) and the fd-level
 *             send: what the styles did before they had connections,
 *             kept to measure what the stream saves.
 *
 * The listening socket comes from the driver, so every style accepts with
 * its fd-level accept call, one connection at a time; connections are all
 * made before the measured window, so accepting is not measured.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ringloop/callback.h"
#include "ringloop/coro.h"
#include "ringloop/promise.h"
#include "ringnet.h"

/* ------------------------------------------------------------ callback */

struct cb_server {
	rl_cb_ctx *cbs;
	int lfd;
};

/* A connection: its writes complete in order, so the loop buffers they
 * send from wait in a FIFO, each released when its write completes. */
struct cb_conn {
	rl_cb_conn *c;
	void **held;
	unsigned head, n, cap;
	bool closing;
};

static void cb_closed(int err, int64_t value, void *arg)
{
	struct cb_conn *k = arg;

	(void)err;
	(void)value;
	free(k->held);
	free(k);
}

static void cb_close(struct cb_conn *k)
{
	if (!k->closing) {
		k->closing = true;
		rl_cb_net_close(k->c, cb_closed, k);
	}
}

static void cb_written(int err, int64_t value, void *arg)
{
	struct cb_conn *k = arg;

	(void)value;
	rl_cb_net_release(k->c, k->held[k->head]);
	k->head = (k->head + 1) % k->cap;
	k->n--;
	if (err < 0)
		cb_close(k);
}

/* Room for one more held buffer (grows only while a connection has more
 * writes in flight than ever before). */
static int cb_room(struct cb_conn *k)
{
	void **h;

	if (k->n < k->cap)
		return 0;
	h = malloc(sizeof(*h) * (k->cap ? k->cap * 2 : 4));
	if (!h)
		return -ENOMEM;
	for (unsigned i = 0; i < k->n; i++)
		h[i] = k->held[(k->head + i) % k->cap];
	free(k->held);
	k->held = h;
	k->head = 0;
	k->cap = k->cap ? k->cap * 2 : 4;
	return 0;
}

static void cb_data(int err, const void *data, size_t len, void *arg)
{
	struct cb_conn *k = arg;
	void *buf;

	(void)data;
	if (err < 0 || len == 0 || cb_room(k) < 0) {
		cb_close(k);
		return;
	}
	buf = rl_cb_net_hold(k->c);
	k->held[(k->head + k->n) % k->cap] = buf;
	k->n++;
	if (rl_cb_net_write(k->c, buf, len, cb_written, k) < 0) {
		k->n--;
		rl_cb_net_release(k->c, buf);
		cb_close(k);
	}
}

static void cb_accepted(int err, int64_t fd, void *arg)
{
	struct cb_server *s = arg;
	struct cb_conn *k;
	rl_cb_conn *c;

	if (err < 0) {
		if (err != -ECANCELED)
			fprintf(stderr, "echo (callback): accept: %s\n",
				rl_strerror(err));
		return;
	}
	k = calloc(1, sizeof(*k));
	if (!k || rl_cb_net_wrap(s->cbs, (int)fd, &c) < 0) {
		free(k);
		close((int)fd);
	} else {
		k->c = c;
		if (rl_cb_net_read_start(c, cb_data, k) < 0)
			cb_close(k);
	}
	rl_cb_net_accept(s->cbs, s->lfd, cb_accepted, s);
}

static int cb_start(rl_loop *loop, int lfd, const struct echo_opts *o,
		    void **state)
{
	struct cb_server *s = calloc(1, sizeof(*s));
	int ret;

	(void)o;
	if (!s)
		return -ENOMEM;
	s->lfd = lfd;
	ret = rl_cb_ctx_open(loop, &s->cbs);
	if (ret == 0)
		ret = rl_cb_net_accept(s->cbs, lfd, cb_accepted, s);
	if (ret < 0) {
		free(s);
		return ret;
	}
	*state = s;
	return 0;
}

/* ------------------------------------------------------------- promise */

struct p_server {
	rl_promise_ctx *ctx;
	int lfd;
	unsigned buf_size;
};

struct p_conn {
	rl_promise_conn *c;
	unsigned buf_size;
	char buf[];
};

static void p_read(struct p_conn *k);

static void p_end(struct p_conn *k)
{
	rl_promise_conn_close(k->c);
	free(k);
}

static void p_sent(struct rl_outcome *o, void *arg)
{
	struct p_conn *k = arg;

	if (o->reason < 0) {
		p_end(k);
		return;
	}
	p_read(k);
}

static void p_got(struct rl_outcome *o, void *arg)
{
	struct p_conn *k = arg;

	if (o->reason < 0 || o->value.i == 0) {
		p_end(k);
		return;
	}
	rl_promise_unref(
		rl_then(rl_promise_conn_write(k->c, k->buf, (size_t)o->value.i),
			p_sent, p_sent, k));
}

static void p_read(struct p_conn *k)
{
	rl_promise_unref(
		rl_then(rl_promise_conn_read(k->c, k->buf, k->buf_size, 0),
			p_got, p_got, k));
}

static void p_accept(struct p_server *s);

static void p_accepted(struct rl_outcome *o, void *arg)
{
	struct p_server *s = arg;
	struct p_conn *k;

	if (o->reason < 0)
		return;
	k = malloc(sizeof(*k) + s->buf_size);
	if (!k || rl_promise_conn_open(s->ctx, (int)o->value.i, &k->c) < 0) {
		free(k);
		close((int)o->value.i);
	} else {
		k->buf_size = s->buf_size;
		p_read(k);
	}
	p_accept(s);
}

static void p_accept(struct p_server *s)
{
	rl_promise_unref(rl_then(rl_promise_net_accept(s->ctx, s->lfd),
				 p_accepted, p_accepted, s));
}

static int p_start_with(rl_loop *loop, int lfd, const struct echo_opts *o,
			void **state, void (*accept)(struct p_server *s))
{
	struct p_server *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return -ENOMEM;
	s->lfd = lfd;
	s->buf_size = o->buf_size;
	ret = rl_promise_ctx_open(loop, &s->ctx);
	if (ret < 0) {
		free(s);
		return ret;
	}
	accept(s);
	*state = s;
	return 0;
}

static int p_start(rl_loop *loop, int lfd, const struct echo_opts *o,
		   void **state)
{
	return p_start_with(loop, lfd, o, state, p_accept);
}

/* -------------------------------------------------------- promise-recv */

struct pr_conn {
	struct p_server *s;
	int fd;
	char buf[];
};

static void pr_recv(struct pr_conn *c);

static void pr_sent(struct rl_outcome *o, void *arg)
{
	struct pr_conn *c = arg;

	if (o->reason < 0) {
		close(c->fd);
		free(c);
		return;
	}
	pr_recv(c);
}

static void pr_got(struct rl_outcome *o, void *arg)
{
	struct pr_conn *c = arg;

	if (o->reason < 0 || o->value.i == 0) {
		close(c->fd);
		free(c);
		return;
	}
	rl_promise_unref(rl_then(rl_promise_net_send(c->s->ctx, c->fd, c->buf,
						     (size_t)o->value.i, 0),
				 pr_sent, pr_sent, c));
}

static void pr_recv(struct pr_conn *c)
{
	rl_promise_unref(rl_then(
		rl_promise_net_recv(c->s->ctx, c->fd, c->buf, c->s->buf_size),
		pr_got, pr_got, c));
}

static void pr_accept(struct p_server *s);

static void pr_accepted(struct rl_outcome *o, void *arg)
{
	struct p_server *s = arg;
	struct pr_conn *c;

	if (o->reason < 0)
		return;
	c = malloc(sizeof(*c) + s->buf_size);
	if (!c) {
		close((int)o->value.i);
	} else {
		c->s = s;
		c->fd = (int)o->value.i;
		pr_recv(c);
	}
	pr_accept(s);
}

static void pr_accept(struct p_server *s)
{
	rl_promise_unref(rl_then(rl_promise_net_accept(s->ctx, s->lfd),
				 pr_accepted, pr_accepted, s));
}

static int pr_start(rl_loop *loop, int lfd, const struct echo_opts *o,
		    void **state)
{
	return p_start_with(loop, lfd, o, state, pr_accept);
}

/* ---------------------------------------------------------- coroutine */

struct co_server {
	rl_coro_ctx *sched;
	int lfd;
	unsigned buf_size;
	rl_coro_fn echo;
};

static int64_t co_echo(void *arg)
{
	int fd = (int)(intptr_t)arg;
	rl_coro_conn *c;
	char buf[4096];
	int64_t n;

	if (rl_coro_conn_open(fd, &c) < 0) {
		close(fd);
		return 0;
	}
	while ((n = rl_coro_conn_read(c, buf, sizeof(buf), 0)) > 0)
		if (rl_coro_conn_write(c, buf, (size_t)n, 0) < 0)
			break;
	rl_coro_conn_close(c);
	return 0;
}

static int64_t co_echo_recv(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[4096];
	int64_t n;

	while ((n = rl_coro_net_recv(fd, buf, sizeof(buf), 0)) > 0)
		if (rl_coro_net_send(fd, buf, (size_t)n, 0) < 0)
			break;
	close(fd);
	return 0;
}

static int64_t co_accept(void *arg)
{
	struct co_server *s = arg;
	int fd;

	while ((fd = rl_coro_net_accept(s->lfd, 0)) >= 0)
		if (rl_coro_spawn(s->sched, NULL, s->echo, (void *)(intptr_t)fd,
				  NULL) < 0)
			close(fd);
	return 0;
}

static int co_start_with(rl_loop *loop, int lfd, const struct echo_opts *o,
			 void **state, rl_coro_fn echo)
{
	struct co_server *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return -ENOMEM;
	s->lfd = lfd;
	s->echo = echo;
	s->buf_size = o->buf_size;
	ret = rl_coro_ctx_open(loop, &s->sched, NULL);
	if (ret == 0)
		ret = rl_coro_spawn(s->sched, NULL, co_accept, s, NULL);
	if (ret < 0) {
		free(s);
		return ret;
	}
	*state = s;
	return 0;
}

static int co_start(rl_loop *loop, int lfd, const struct echo_opts *o,
		    void **state)
{
	return co_start_with(loop, lfd, o, state, co_echo);
}

static int co_recv_start(rl_loop *loop, int lfd, const struct echo_opts *o,
			 void **state)
{
	return co_start_with(loop, lfd, o, state, co_echo_recv);
}

/* The contexts close with the loop; only the server records are ours. */
static void style_free(void *state)
{
	free(state);
}

const struct echo_style echo_style_callback = {
	.name = "callback",
	.start = cb_start,
	.free = style_free,
};

const struct echo_style echo_style_promise = {
	.name = "promise",
	.start = p_start,
	.free = style_free,
};

const struct echo_style echo_style_coro = {
	.name = "coro",
	.start = co_start,
	.free = style_free,
};

const struct echo_style echo_style_promise_recv = {
	.name = "promise-recv",
	.start = pr_start,
	.free = style_free,
};

const struct echo_style echo_style_coro_recv = {
	.name = "coro-recv",
	.start = co_recv_start,
	.free = style_free,
};
