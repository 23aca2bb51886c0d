/* SPDX-License-Identifier: MIT */
/*
 * echo_server.c - the server process of the socket bench, and the echo
 * written with the loop's own API (style "loop").
 *
 * Each connection has one stream receive. An item is sent straight back
 * from the buffer the loop provided (held until the send completes), or
 * from a copy with --copy. Sends on a socket keep their order in the loop,
 * so an item may be sent while the previous one is still in flight.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ringnet.h"

/* ------------------------------------------------------ the loop style */

struct conn;

struct tx {
	rl_req req;
	struct conn *c;
	void *held;	 /* a held provided buffer, or NULL */
	char *copy;	 /* --copy: this send's own buffer */
	struct tx *next; /* the connection's free list */
};

struct conn {
	struct server *s;
	int fd;
	rl_req rx;
	struct tx *free;
	int busy; /* sends in flight */
	bool rx_over;
};

struct server {
	rl_loop *loop;
	const struct echo_opts *o;
	rl_req acc;
};

static void conn_maybe_free(struct conn *c)
{
	struct tx *t;

	if (!c->rx_over || c->busy)
		return;
	while ((t = c->free)) {
		c->free = t->next;
		free(t->copy);
		free(t);
	}
	close(c->fd);
	free(c);
}

static void on_sent(rl_req *req)
{
	struct tx *t = req->data;
	struct conn *c = t->c;

	if (t->held)
		rl_net_buf_release(req->loop, t->held);
	t->held = NULL;
	t->next = c->free;
	c->free = t;
	c->busy--;
	conn_maybe_free(c);
}

static struct tx *tx_get(struct conn *c)
{
	struct tx *t = c->free;

	if (t) {
		c->free = t->next;
		return t;
	}
	/* A connection's first sends: the free list then serves the rest. */
	t = calloc(1, sizeof(*t));
	if (t && c->s->o->copy && !(t->copy = malloc(c->s->o->buf_size))) {
		free(t);
		t = NULL;
	}
	if (t) {
		t->c = c;
		t->req.data = t;
	}
	return t;
}

static void on_data(rl_req *req)
{
	struct conn *c = req->data;
	struct tx *t;
	const void *p;

	if (!rl_req_more(req)) {
		c->rx_over = true;
		conn_maybe_free(c);
		return;
	}
	t = tx_get(c);
	if (!t) {
		rl_cancel(req->loop, req);
		return;
	}
	if (t->copy) {
		memcpy(t->copy, req->buf, req->len);
		p = t->copy;
	} else {
		p = t->held = rl_net_buf_hold(req);
	}
	if (rl_net_send(req->loop, &t->req, c->fd, p, req->len, 0, on_sent) <
	    0) {
		if (t->held)
			rl_net_buf_release(req->loop, t->held);
		t->held = NULL;
		t->next = c->free;
		c->free = t;
		rl_cancel(req->loop, req);
		return;
	}
	c->busy++;
}

static void on_accept(rl_req *req)
{
	struct server *s = req->data;
	struct conn *c;

	if (!rl_req_more(req)) {
		if (req->result != -ECANCELED)
			fprintf(stderr, "echo: accept: %s\n",
				rl_strerror((int)req->result));
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close((int)req->result);
		return;
	}
	c->s = s;
	c->fd = (int)req->result;
	c->rx.data = c;
	if (rl_net_recv_stream(req->loop, &c->rx, c->fd, on_data) < 0) {
		close(c->fd);
		free(c);
	}
}

static int loop_start(rl_loop *loop, int lfd, const struct echo_opts *o,
		      void **state)
{
	struct server *s = calloc(1, sizeof(*s));
	int ret;

	if (!s)
		return -ENOMEM;
	s->loop = loop;
	s->o = o;
	s->acc.data = s;
	ret = rl_net_accept(loop, &s->acc, lfd, on_accept);
	if (ret < 0) {
		free(s);
		return ret;
	}
	*state = s;
	return 0;
}

static void loop_free(void *state)
{
	free(state);
}

const struct echo_style echo_style_loop = {
	.name = "loop",
	.start = loop_start,
	.free = loop_free,
};

/* ------------------------------------------------------ server process */

struct control {
	rl_req req;
	rl_loop *loop;
	int ctl, reply;
	char cmd;
};

static void mark(struct control *k, int err)
{
	struct echo_mark m;

	memset(&m, 0, sizeof(m));
	getrusage(RUSAGE_SELF, &m.ru);
	if (k->loop)
		rl_loop_stats(k->loop, &m.st);
	m.err = err;
	if (write(k->reply, &m, sizeof(m)) != sizeof(m))
		_exit(3);
}

static void on_control(rl_req *req)
{
	struct control *k = req->data;

	if (req->result == 1 && k->cmd == 'm') {
		mark(k, 0);
		if (rl_fs_read(k->loop, &k->req, k->ctl, &k->cmd, 1, -1,
			       on_control) == 0)
			return;
	}
	/* 'q', the driver gone, or an error: stop. */
	rl_stop(k->loop);
}

static void pin(int cpu)
{
	cpu_set_t set;

	if (cpu < 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		perror("echo: sched_setaffinity");
}

int echo_server_main(const struct echo_style *style, const struct echo_opts *o,
		     int lfd, int ctl, int reply, int cpu)
{
	struct rl_options opt;
	struct control k;
	void *state = NULL;
	int ret;

	pin(cpu);
	memset(&k, 0, sizeof(k));
	k.ctl = ctl;
	k.reply = reply;
	k.req.data = &k;
	rl_options_init(&opt);
	opt.backend = o->backend;
	opt.flags = o->flags;
	opt.entries = o->entries;
	opt.net_bufs = o->bufs;
	opt.net_buf_size = o->buf_size;
	ret = rl_loop_open(&k.loop, &opt);
	if (ret == 0) {
		ret = style->start(k.loop, lfd, o, &state);
		if (ret < 0)
			rl_loop_close(k.loop);
	}
	if (ret < 0) {
		k.loop = NULL;
		mark(&k, ret); /* the driver reads an error instead */
		return 1;
	}
	mark(&k, 0); /* ready */
	if (rl_fs_read(k.loop, &k.req, ctl, &k.cmd, 1, -1, on_control) < 0)
		return 1;
	rl_run(k.loop, RL_RUN_DEFAULT);
	rl_loop_close(k.loop);
	style->free(state);
	close(lfd);
	return 0;
}
