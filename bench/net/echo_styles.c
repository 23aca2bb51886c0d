/* SPDX-License-Identifier: MIT */
/*
 * echo_styles.c - the socket bench's echo written in each programming
 * style, as a program of that style would write it:
 *
 *   callback  Node-like connections (rl_cb_net_*): data callbacks from the
 *             loop's receive stream, each chunk written back from the held
 *             loop buffer, released when its write completes;
 *   promise   per connection a chain recv -> then send -> then recv ...
 *             (rl_promise_net_*, rl_then), into the connection's buffer;
 *   coro      a coroutine per connection looping rl_coro_net_recv and
 *             rl_coro_net_send on a buffer on its stack.
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
	struct p_server *s;
	int fd;
	char buf[];
};

static void p_recv(struct p_conn *c);

static void p_sent(struct rl_outcome *o, void *arg)
{
	struct p_conn *c = arg;

	if (o->reason < 0) {
		close(c->fd);
		free(c);
		return;
	}
	p_recv(c);
}

static void p_got(struct rl_outcome *o, void *arg)
{
	struct p_conn *c = arg;

	if (o->reason < 0 || o->value.i == 0) {
		close(c->fd);
		free(c);
		return;
	}
	rl_promise_unref(rl_then(rl_promise_net_send(c->s->ctx, c->fd, c->buf,
						     (size_t)o->value.i, 0),
				 p_sent, p_sent, c));
}

static void p_recv(struct p_conn *c)
{
	rl_promise_unref(rl_then(
		rl_promise_net_recv(c->s->ctx, c->fd, c->buf, c->s->buf_size),
		p_got, p_got, c));
}

static void p_accept(struct p_server *s);

static void p_accepted(struct rl_outcome *o, void *arg)
{
	struct p_server *s = arg;
	struct p_conn *c;

	if (o->reason < 0)
		return;
	c = malloc(sizeof(*c) + s->buf_size);
	if (!c) {
		close((int)o->value.i);
	} else {
		c->s = s;
		c->fd = (int)o->value.i;
		p_recv(c);
	}
	p_accept(s);
}

static void p_accept(struct p_server *s)
{
	rl_promise_unref(rl_then(rl_promise_net_accept(s->ctx, s->lfd),
				 p_accepted, p_accepted, s));
}

static int p_start(rl_loop *loop, int lfd, const struct echo_opts *o,
		   void **state)
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
	p_accept(s);
	*state = s;
	return 0;
}

/* ---------------------------------------------------------- coroutine */

struct co_server {
	rl_coro_ctx *sched;
	int lfd;
	unsigned buf_size;
};

static int64_t co_echo(void *arg)
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
		if (rl_coro_spawn(s->sched, NULL, co_echo, (void *)(intptr_t)fd,
				  NULL) < 0)
			close(fd);
	return 0;
}

static int co_start(rl_loop *loop, int lfd, const struct echo_opts *o,
		    void **state)
{
	struct co_server *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return -ENOMEM;
	s->lfd = lfd;
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
