/* SPDX-License-Identifier: MIT */
/*
 * callback_net.c - sockets in the callback style: servers and connections
 * (Node-like), and the loop's socket requests with a callback each.
 *
 * Every request goes through the context's pool of entries (callback.c),
 * so the context counts it in flight and a context that closes finds it.
 * A connection has at most one receive stream in flight (its data
 * callbacks), any number of writes (the loop keeps their order on the
 * socket, so they go straight to it, linked oldest first through the
 * entries' free-list link, which is unused while an entry is in flight),
 * and one shutdown. A server has one accept stream.
 *
 * Pausing. rl_cb_net_read_stop() cancels the stream; the loop still
 * delivers what it had received (ringloop.h: a cancelled stream's
 * items), and those items wait in the connection, in their loop buffers
 * (held), until the next read_start, which delivers them first from a
 * microtask and then starts a new stream. So a paused connection holds at
 * most what was in flight when it paused, and the kernel keeps the rest.
 *
 * Freeing. Neither a connection nor a server is freed inside a call the
 * program makes: closing one cancels what it has in flight, and the last
 * of those callbacks (or a microtask, when nothing was in flight) closes
 * the socket, calls the program back and frees it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "callback_internal.h"
#include "conn_rx.h"

/* A timeout "turned off" while a stream is in flight: the loop's deadline
 * cannot be withdrawn, only moved, so it goes this far. */
#define FAR_MS ((uint64_t)1 << 40)

/* Data received before a pause, waiting for the next read_start. */
struct pending {
	char *buf; /* a held loop buffer */
	size_t len;
};

struct rl_cb_conn {
	rl_cb_ctx *cbs;
	int fd;
	struct rl__cb_entry *rx;     /* the receive stream, while in flight */
	struct rl__cb_entry *writes; /* writes in flight, oldest first */
	struct rl__cb_entry *wtail;
	unsigned nwrites;
	size_t queued; /* their bytes */
	bool shut_in_flight;
	rl_cb_data_fn on_data;
	void *data_arg;
	rl_cb_fn end_done, close_done;
	void *end_arg, *close_arg;
	rl_timer idle;
	uint64_t idle_ms;

	/* Paused data: a FIFO of npend entries from phead, then maybe the
	 * end (pend_final, with its result). */
	struct pending *pend;
	unsigned phead, npend, pcap;
	bool pend_final;
	int pend_res;

	/* The data callback running now, for rl_cb_net_hold(). */
	void *cur;
	bool cur_pending; /* its buffer is a pending one, held by us */
	bool cur_kept;	  /* ... which the program kept */

	bool reading;	   /* the program wants data callbacks */
	bool stopping;	   /* read_stop cancelled the stream */
	bool over;	   /* the stream ended (end or error): no new one */
	bool told_end;	   /* the end or error was delivered */
	bool ending;	   /* rl_cb_net_end() was called */
	bool shut_waiting; /* ... and waits for the writes before it */
	bool end_owed;	   /* a close dropped that wait: end_done is due */
	bool closing;
	bool task_queued;
	rl_task task;
	struct rl_link link; /* the context's connections */
};

struct rl_cb_server {
	rl_cb_ctx *cbs;
	int fd;
	struct rl__cb_entry *acc; /* the accept stream, while in flight */
	rl_cb_conn_fn on_conn;
	void *arg;
	rl_cb_fn close_done;
	void *close_arg;
	rl_timer retry;
	bool retrying;
	bool closing;
	bool task_queued;
	rl_task task;
	struct rl_link link; /* the context's servers */
};

/* ------------------------------------------------------------ helpers */

/* An entry for one of our own requests, data pointing at its owner. */
static struct rl__cb_entry *entry(rl_cb_ctx *cbs, void *owner, int *ret)
{
	struct rl__cb_entry *e = rl__cb_take(cbs, true, NULL, ret);

	if (e)
		e->req.data = owner;
	return e;
}

/* The end of one of our own requests: out of flight, back to the pool. */
static void entry_done(struct rl__cb_entry *e)
{
	e->cbs->in_flight--;
	rl__cb_entry_put(e->cbs, e);
}

static bool accept_retryable(int err)
{
	return err == -EMFILE || err == -ENFILE || err == -ENOMEM ||
	       err == -ENOBUFS;
}

/* -------------------------------------------------------- connections */

static void conn_task(rl_task *task);
static void conn_maybe_free(rl_cb_conn *c);

static rl_cb_conn *conn_new(rl_cb_ctx *cbs, int fd)
{
	rl_cb_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->cbs = cbs;
	c->fd = fd;
	rl_timer_init(&c->idle);
	rl__list_add_head(&cbs->conns, &c->link);
	return c;
}

static void conn_unlink(rl_cb_conn *c)
{
	rl__list_del(&c->link);
}

static void conn_kick(rl_cb_conn *c)
{
	if (c->task_queued)
		return;
	c->task_queued = true;
	rl_task_queue(c->cbs->loop, &c->task, conn_task);
}

static void pend_release_all(rl_cb_conn *c)
{
	for (unsigned i = 0; i < c->npend; i++)
		rl_net_buf_release(c->cbs->loop,
				   c->pend[(c->phead + i) % c->pcap].buf);
	c->npend = 0;
	c->phead = 0;
}

static bool pend_push(rl_cb_conn *c, char *buf, size_t len)
{
	if (c->npend == c->pcap) {
		unsigned cap = c->pcap ? 2 * c->pcap : 8;
		struct pending *p = malloc(cap * sizeof(*p));

		if (!p)
			return false;
		for (unsigned i = 0; i < c->npend; i++)
			p[i] = c->pend[(c->phead + i) % c->pcap];
		free(c->pend);
		c->pend = p;
		c->pcap = cap;
		c->phead = 0;
	}
	c->pend[(c->phead + c->npend) % c->pcap] = (struct pending){ buf, len };
	c->npend++;
	return true;
}

/* The end of reading, told once: err 0 for the peer's end, or < 0. */
static void tell_end(rl_cb_conn *c, int err)
{
	c->told_end = true;
	c->reading = false;
	c->on_data(err, NULL, 0, c->data_arg);
}

static void rx_cb(rl_req *req);

/* Starts the receive stream. */
static int arm(rl_cb_conn *c)
{
	rl_cb_ctx *cbs = c->cbs;
	struct rl__cb_entry *e;
	int ret;

	e = entry(cbs, c, &ret);
	if (!e)
		return ret;
	ret = rl__cb_submitted(
		cbs, e, rl_net_recv_stream(cbs->loop, &e->req, c->fd, rx_cb));
	if (ret < 0)
		return ret;
	c->rx = e;
	if (c->idle_ms)
		rl_req_deadline(cbs->loop, &e->req, &c->idle, c->idle_ms);
	return 0;
}

static void rx_item(rl_cb_conn *c, rl_req *req)
{
	char *held;

	if (c->closing)
		return; /* the buffer goes back by itself */
	if (c->reading && !c->npend) {
		if (c->idle_ms && !c->stopping)
			rl_req_deadline(req->loop, req, &c->idle, c->idle_ms);
		c->cur = req->buf;
		c->cur_pending = false;
		c->on_data(0, req->buf, req->len, c->data_arg);
		c->cur = NULL;
		return;
	}
	/* Paused, or older data waits: keep this behind it. */
	held = rl_net_buf_hold(req);
	if (!pend_push(c, held, req->len)) {
		/* No memory to keep it: the connection cannot go on
		 * without losing data, so reading fails. */
		rl_net_buf_release(req->loop, held);
		if (!c->stopping && rl_cancel(req->loop, req) == 0)
			c->stopping = true;
		c->over = true;
		c->pend_final = true;
		c->pend_res = -ENOMEM;
		return;
	}
	if (c->reading)
		conn_kick(c);
}

static void rx_cb_run(rl_req *req)
{
	struct rl__cb_entry *e = (struct rl__cb_entry *)req;
	rl_cb_conn *c = req->data;
	int res = (int)req->result;
	bool stopped = c->stopping;

	if (rl_req_more(req)) {
		rx_item(c, req);
		return;
	}
	c->rx = NULL;
	c->stopping = false;
	entry_done(e);
	if (c->closing) {
		conn_maybe_free(c);
		return;
	}
	if (res == -ECANCELED && stopped && !c->over) {
		/* Our pause (or our -ENOMEM above, which set over). */
		if (c->reading)
			conn_kick(c); /* resumed meanwhile: a new stream */
		return;
	}
	c->over = true;
	if (c->pend_final)
		return; /* an earlier failure is the one to tell */
	/* A reset a write took ends the stream with 0 (conn_rx.h). */
	if (res == 0)
		res = rl__conn_end(c->fd, c->ending);
	if (c->reading && !c->npend) {
		tell_end(c, res);
		return;
	}
	c->pend_final = true;
	c->pend_res = res;
	if (c->reading)
		conn_kick(c);
}

/* Delivers paused data to a resumed reader, then its end, or starts a new
 * stream; finishes a close. */
static void conn_task_run(rl_task *task)
{
	rl_cb_conn *c = RL__CONTAINER(task, rl_cb_conn, task);
	int ret;

	c->task_queued = false;
	while (c->reading && c->npend && !c->closing) {
		struct pending p = c->pend[c->phead];

		c->phead = (c->phead + 1) % c->pcap;
		c->npend--;
		c->cur = p.buf;
		c->cur_pending = true;
		c->cur_kept = false;
		c->on_data(0, p.buf, p.len, c->data_arg);
		c->cur = NULL;
		if (!c->cur_kept)
			rl_net_buf_release(c->cbs->loop, p.buf);
	}
	if (c->closing) {
		conn_maybe_free(c);
		return;
	}
	if (!c->reading || c->npend)
		return;
	if (c->pend_final) {
		c->pend_final = false;
		tell_end(c, c->pend_res);
	} else if (!c->rx && !c->over) {
		ret = arm(c);
		if (ret < 0) {
			c->over = true;
			tell_end(c, ret);
		}
	}
}

/* Frees a closing connection once nothing of it is in flight. */
static void conn_maybe_free(rl_cb_conn *c)
{
	rl_cb_fn done = c->close_done;
	rl_cb_fn end_done = c->end_owed ? c->end_done : NULL;
	void *arg = c->close_arg, *end_arg = c->end_arg;

	if (!c->closing || c->rx || c->nwrites || c->shut_in_flight ||
	    c->task_queued)
		return;
	close(c->fd);
	/* An end that waited for writes the close cancelled never ran its
	 * shutdown: its done still comes, once, before the close's. The
	 * handle is valid inside both (callback.h: invalid after the
	 * close's), so they run before the free; every call on a closing
	 * connection returns at once, so none of them can come back here. */
	if (end_done)
		end_done(-ECANCELED, 0, end_arg);
	if (done)
		done(0, 0, arg);
	conn_unlink(c);
	free(c->pend);
	free(c);
}

int rl_cb_net_wrap(rl_cb_ctx *cbs, int fd, rl_cb_conn **out)
{
	rl_cb_conn *c;

	if (!cbs || fd < 0 || !out)
		return -EINVAL;
	c = conn_new(cbs, fd);
	if (!c)
		return -ENOMEM;
	*out = c;
	return 0;
}

/* NULL answers as in the other styles (rl_coro_conn_fd()), not a crash. */
int rl_cb_net_fd(const rl_cb_conn *conn)
{
	return conn ? conn->fd : -EINVAL;
}

int rl_cb_net_read_start(rl_cb_conn *c, rl_cb_data_fn on_data, void *arg)
{
	int ret;

	if (!c || !on_data)
		return -EINVAL;
	if (c->closing)
		return -ECANCELED;
	if (c->told_end)
		return -EPIPE;
	c->on_data = on_data;
	c->data_arg = arg;
	if (c->reading)
		return 0;
	c->reading = true;
	if (c->npend || c->pend_final) {
		conn_kick(c);
		return 0;
	}
	/* A stream still in flight is stopping: its final callback sees
	 * that reading resumed and starts the next one. */
	if (c->rx || c->over)
		return 0;
	ret = arm(c);
	if (ret < 0)
		c->reading = false;
	return ret;
}

int rl_cb_net_read_stop(rl_cb_conn *c)
{
	if (!c)
		return -EINVAL;
	if (!c->reading)
		return -ENOENT;
	c->reading = false;
	if (c->rx && !c->stopping && rl_cancel(c->cbs->loop, &c->rx->req) == 0)
		c->stopping = true;
	return 0;
}

void *rl_cb_net_hold(rl_cb_conn *c)
{
	if (!c || !c->cur)
		return NULL;
	if (c->cur_pending) {
		c->cur_kept = true;
		return c->cur;
	}
	return rl_net_buf_hold(&c->rx->req);
}

int rl_cb_net_release(rl_cb_conn *c, void *data)
{
	if (!c)
		return -EINVAL;
	return rl_net_buf_release(c->cbs->loop, data);
}

int rl_cb_net_set_timeout(rl_cb_conn *c, uint64_t ms)
{
	if (!c || ms > RL_TIMEOUT_MAX_MS)
		return -EINVAL;
	c->idle_ms = ms;
	if (c->rx && !c->stopping)
		rl_req_deadline(c->cbs->loop, &c->rx->req, &c->idle,
				ms ? ms : FAR_MS);
	return 0;
}

/* ------------------------------------------------------------ writing */

static void shut_cb(rl_req *req);
static void write_cb(rl_req *req);
static void connect_cb(rl_req *req);

static int start_shutdown(rl_cb_conn *c)
{
	rl_cb_ctx *cbs = c->cbs;
	struct rl__cb_entry *e;
	int ret;

	e = entry(cbs, c, &ret);
	if (!e)
		return ret;
	ret = rl__cb_submitted(
		cbs, e,
		rl_net_shutdown(cbs->loop, &e->req, c->fd, SHUT_WR, shut_cb));
	if (ret == 0)
		c->shut_in_flight = true;
	return ret;
}

static void shut_cb_run(rl_req *req)
{
	rl_cb_conn *c = req->data;
	int res = (int)req->result;

	entry_done((struct rl__cb_entry *)req);
	c->shut_in_flight = false;
	if (c->end_done)
		c->end_done(res < 0 ? res : 0, 0, c->end_arg);
	conn_maybe_free(c);
}

static void write_cb_run(rl_req *req)
{
	struct rl__cb_entry *e = (struct rl__cb_entry *)req, **pp;
	rl_cb_conn *c = req->data;
	rl_cb_fn done = e->done.res;
	void *arg = e->arg;
	int64_t res = req->result;
	int ret;

	/* Sends complete in order, so e is the oldest, unless cancelled. */
	for (pp = &c->writes; *pp != e; pp = &(*pp)->next_free)
		;
	*pp = e->next_free;
	if (c->wtail == e) {
		c->wtail = NULL;
		for (struct rl__cb_entry *w = c->writes; w; w = w->next_free)
			c->wtail = w;
	}
	c->nwrites--;
	c->queued -= req->len;
	entry_done(e);
	if (done)
		done(res < 0 ? (int)res : 0, res < 0 ? 0 : res, arg);
	if (c->shut_waiting && !c->nwrites && !c->closing) {
		c->shut_waiting = false;
		ret = start_shutdown(c);
		if (ret < 0 && c->end_done)
			c->end_done(ret, 0, c->end_arg);
	}
	conn_maybe_free(c);
}

int rl_cb_net_write(rl_cb_conn *c, const void *buf, size_t len, rl_cb_fn done,
		    void *arg)
{
	rl_cb_ctx *cbs;
	struct rl__cb_entry *e;
	int ret;

	if (!c)
		return -EINVAL;
	if (c->closing)
		return -ECANCELED;
	if (c->ending)
		return -EPIPE;
	cbs = c->cbs;
	e = entry(cbs, c, &ret);
	if (!e)
		return ret;
	e->done.res = done;
	e->arg = arg;
	ret = rl__cb_submitted(
		cbs, e,
		rl_net_send(cbs->loop, &e->req, c->fd, buf, len, 0, write_cb));
	if (ret < 0)
		return ret;
	e->next_free = NULL;
	if (c->wtail)
		c->wtail->next_free = e;
	else
		c->writes = e;
	c->wtail = e;
	c->nwrites++;
	c->queued += len;
	return 0;
}

size_t rl_cb_net_write_queued(const rl_cb_conn *c)
{
	return c ? c->queued : 0;
}

int rl_cb_net_end(rl_cb_conn *c, rl_cb_fn done, void *arg)
{
	int ret;

	if (!c)
		return -EINVAL;
	if (c->closing)
		return -ECANCELED;
	if (c->ending)
		return -EALREADY;
	c->end_done = done;
	c->end_arg = arg;
	if (c->nwrites) {
		c->shut_waiting = true;
	} else {
		ret = start_shutdown(c);
		if (ret < 0)
			return ret;
	}
	c->ending = true;
	return 0;
}

int rl_cb_net_close(rl_cb_conn *c, rl_cb_fn done, void *arg)
{
	rl_loop *loop;

	if (!c)
		return -EINVAL;
	if (c->closing)
		return -EALREADY;
	loop = c->cbs->loop;
	c->closing = true;
	c->close_done = done;
	c->close_arg = arg;
	c->reading = false;
	c->end_owed = c->shut_waiting;
	c->shut_waiting = false;
	if (c->rx)
		rl_cancel(loop, &c->rx->req);
	for (struct rl__cb_entry *w = c->writes; w; w = w->next_free)
		rl_cancel(loop, &w->req);
	pend_release_all(c);
	c->pend_final = false;
	/* Never freed inside the call: by the last callback in flight, or
	 * by a microtask. */
	conn_kick(c);
	return 0;
}

/* ------------------------------------------------------------ servers */

static void server_task(rl_task *task);
static void acc_cb(rl_req *req);

static void server_unlink(rl_cb_server *srv)
{
	rl__list_del(&srv->link);
}

static void server_maybe_free(rl_cb_server *srv)
{
	rl_cb_fn done = srv->close_done;
	void *arg = srv->close_arg;

	if (!srv->closing || srv->acc || srv->retrying || srv->task_queued)
		return;
	close(srv->fd);
	/* callback.h: done runs, then the server is freed. */
	if (done)
		done(0, 0, arg);
	server_unlink(srv);
	free(srv);
}

static int server_arm(rl_cb_server *srv)
{
	rl_cb_ctx *cbs = srv->cbs;
	struct rl__cb_entry *e;
	int ret;

	e = entry(cbs, srv, &ret);
	if (!e)
		return ret;
	ret = rl__cb_submitted(
		cbs, e, rl_net_accept(cbs->loop, &e->req, srv->fd, acc_cb));
	if (ret == 0)
		srv->acc = e;
	return ret;
}

static void retry_cb(rl_timer *timer, int status);

/* Accepting failed with err: try again later, or give up. */
static void server_failed(rl_cb_server *srv, int err)
{
	if (accept_retryable(err) &&
	    rl_timer_start(srv->cbs->loop, &srv->retry, RL_CB_NET_RETRY_MS, 0,
			   retry_cb) == 0)
		srv->retrying = true;
	srv->on_conn(err, NULL, srv->arg);
}

static void retry_cb_run(rl_timer *timer, int status)
{
	rl_cb_server *srv = timer->data;
	int ret;

	srv->retrying = false;
	if (status < 0 || srv->closing) {
		server_maybe_free(srv);
		return;
	}
	ret = server_arm(srv);
	if (ret < 0)
		server_failed(srv, ret);
}

static void acc_cb_run(rl_req *req)
{
	rl_cb_server *srv = req->data;
	rl_cb_conn *c;
	int res = (int)req->result;

	if (rl_req_more(req)) {
		if (srv->closing) {
			close(res); /* accepted before the close took hold */
			return;
		}
		c = conn_new(srv->cbs, res);
		if (!c) {
			close(res);
			srv->on_conn(-ENOMEM, NULL, srv->arg);
			return;
		}
		srv->on_conn(0, c, srv->arg);
		return;
	}
	srv->acc = NULL;
	entry_done((struct rl__cb_entry *)req);
	if (srv->closing) {
		server_maybe_free(srv);
		return;
	}
	server_failed(srv, res);
}

static void server_task_run(rl_task *task)
{
	rl_cb_server *srv = RL__CONTAINER(task, rl_cb_server, task);

	srv->task_queued = false;
	server_maybe_free(srv);
}

int rl_cb_net_listen(rl_cb_ctx *cbs, const struct rl_addr *addr, int backlog,
		     unsigned flags, rl_cb_conn_fn on_conn, void *arg,
		     rl_cb_server **out)
{
	rl_cb_server *srv;
	int fd, ret;

	if (!cbs || !on_conn || !out)
		return -EINVAL;
	fd = rl_net_listen(addr, backlog, flags);
	if (fd < 0)
		return fd;
	srv = calloc(1, sizeof(*srv));
	if (!srv) {
		close(fd);
		return -ENOMEM;
	}
	srv->cbs = cbs;
	srv->fd = fd;
	srv->on_conn = on_conn;
	srv->arg = arg;
	rl_timer_init(&srv->retry);
	srv->retry.data = srv;
	ret = server_arm(srv);
	if (ret < 0) {
		close(fd);
		free(srv);
		return ret;
	}
	rl__list_add_head(&cbs->servers, &srv->link);
	*out = srv;
	return 0;
}

int rl_cb_net_server_fd(const rl_cb_server *srv)
{
	return srv ? srv->fd : -EINVAL;
}

int rl_cb_net_server_close(rl_cb_server *srv, rl_cb_fn done, void *arg)
{
	if (!srv)
		return -EINVAL;
	if (srv->closing)
		return -EALREADY;
	srv->closing = true;
	srv->close_done = done;
	srv->close_arg = arg;
	if (srv->acc)
		rl_cancel(srv->cbs->loop, &srv->acc->req);
	if (srv->retrying && rl_timer_stop(srv->cbs->loop, &srv->retry) == 0)
		srv->retrying = false;
	srv->task_queued = true;
	rl_task_queue(srv->cbs->loop, &srv->task, server_task);
	return 0;
}

/* ------------------------------------------------------------ connect */

static void connect_cb_run(rl_req *req)
{
	struct rl__cb_entry *e = (struct rl__cb_entry *)req;
	rl_cb_ctx *cbs = e->cbs;
	rl_cb_conn_fn done = e->done.conn;
	void *arg = e->arg;
	int res = (int)req->result;
	rl_cb_conn *c;

	entry_done(e);
	if (res < 0) {
		done(res, NULL, arg);
		return;
	}
	c = conn_new(cbs, res);
	if (!c) {
		close(res);
		done(-ENOMEM, NULL, arg);
		return;
	}
	done(0, c, arg);
}

int rl_cb_net_connect(rl_cb_ctx *cbs, const struct rl_addr *addr,
		      unsigned flags, uint64_t timeout_ms, rl_cb_conn_fn done,
		      void *arg)
{
	struct rl__cb_entry *e;
	int ret;

	e = rl__cb_take(cbs, done != NULL, arg, &ret);
	if (!e)
		return ret;
	e->done.conn = done;
	return rl__cb_submitted(cbs, e,
				rl_net_connect(cbs->loop, &e->req, addr, flags,
					       timeout_ms, connect_cb));
}

/* ------------------------------------------------ fd-level requests */

/* The shape of the requests below, as in callback_fs.c. */
#define CB_NET_SUBMIT(call)                                         \
	do {                                                        \
		int ret_;                                           \
		struct rl__cb_entry *e =                            \
			rl__cb_take(cbs, done != NULL, arg, &ret_); \
                                                                    \
		if (!e)                                             \
			return ret_;                                \
		e->done.res = done;                                 \
		ret_ = (call);                                      \
		return rl__cb_submitted(cbs, e, ret_);              \
	} while (0)

int rl_cb_net_accept(rl_cb_ctx *cbs, int lfd, rl_cb_fn done, void *arg)
{
	CB_NET_SUBMIT(
		rl_net_accept_one(cbs->loop, &e->req, lfd, rl__cb_res_done));
}

int rl_cb_net_recv(rl_cb_ctx *cbs, int fd, void *buf, size_t len, rl_cb_fn done,
		   void *arg)
{
	CB_NET_SUBMIT(
		rl_net_recv(cbs->loop, &e->req, fd, buf, len, rl__cb_res_done));
}

int rl_cb_net_send(rl_cb_ctx *cbs, int fd, const void *buf, size_t len,
		   unsigned flags, rl_cb_fn done, void *arg)
{
	CB_NET_SUBMIT(rl_net_send(cbs->loop, &e->req, fd, buf, len, flags,
				  rl__cb_res_done));
}

int rl_cb_net_shutdown(rl_cb_ctx *cbs, int fd, int how, rl_cb_fn done,
		       void *arg)
{
	CB_NET_SUBMIT(
		rl_net_shutdown(cbs->loop, &e->req, fd, how, rl__cb_res_done));
}

int rl_cb_net_sendmsg(rl_cb_ctx *cbs, int fd, const struct msghdr *msg,
		      rl_cb_fn done, void *arg)
{
	CB_NET_SUBMIT(
		rl_net_sendmsg(cbs->loop, &e->req, fd, msg, rl__cb_res_done));
}

int rl_cb_net_recvmsg(rl_cb_ctx *cbs, int fd, struct msghdr *msg, rl_cb_fn done,
		      void *arg)
{
	CB_NET_SUBMIT(
		rl_net_recvmsg(cbs->loop, &e->req, fd, msg, rl__cb_res_done));
}

/* ------------------------------------------------ entries from the loop */

/*
 * The loop calls these; each runs its _run function with the context
 * marked busy, so that a program calling rl_cb_ctx_close() from one of its
 * callbacks is refused (-EBUSY) instead of freeing the context under the
 * code that runs after its callback.
 */
#define RUN_BUSY(cbs, call)               \
	do {                              \
		rl_cb_ctx *busy_ = (cbs); \
		busy_->dispatching++;     \
		call;                     \
		busy_->dispatching--;     \
	} while (0)

static rl_cb_ctx *req_ctx(rl_req *req)
{
	return ((struct rl__cb_entry *)req)->cbs;
}

static void rx_cb(rl_req *req)
{
	RUN_BUSY(req_ctx(req), rx_cb_run(req));
}

static void shut_cb(rl_req *req)
{
	RUN_BUSY(req_ctx(req), shut_cb_run(req));
}

static void write_cb(rl_req *req)
{
	RUN_BUSY(req_ctx(req), write_cb_run(req));
}

static void acc_cb(rl_req *req)
{
	RUN_BUSY(req_ctx(req), acc_cb_run(req));
}

static void connect_cb(rl_req *req)
{
	RUN_BUSY(req_ctx(req), connect_cb_run(req));
}

static void conn_task(rl_task *task)
{
	RUN_BUSY(RL__CONTAINER(task, rl_cb_conn, task)->cbs,
		 conn_task_run(task));
}

static void server_task(rl_task *task)
{
	RUN_BUSY(RL__CONTAINER(task, rl_cb_server, task)->cbs,
		 server_task_run(task));
}

static void retry_cb(rl_timer *timer, int status)
{
	RUN_BUSY(((rl_cb_server *)timer->data)->cbs,
		 retry_cb_run(timer, status));
}

/* ------------------------------------------------------------ closing */

bool rl__cb_net_busy(const rl_cb_ctx *cbs)
{
	const struct rl_link *link;

	rl__list_for_each(link, &cbs->conns)
	{
		if (RL__CONTAINER(link, rl_cb_conn, link)->task_queued)
			return true;
	}
	rl__list_for_each(link, &cbs->servers)
	{
		const rl_cb_server *srv =
			RL__CONTAINER(link, rl_cb_server, link);

		if (srv->task_queued || srv->retrying)
			return true;
	}
	return false;
}

void rl__cb_net_free(rl_cb_ctx *cbs)
{
	struct rl_link *link;
	rl_cb_conn *c;
	rl_cb_server *srv;

	while ((link = rl__list_pop(&cbs->conns))) {
		c = RL__CONTAINER(link, rl_cb_conn, link);
		close(c->fd);
		free(c->pend);
		free(c);
	}
	while ((link = rl__list_pop(&cbs->servers))) {
		srv = RL__CONTAINER(link, rl_cb_server, link);
		close(srv->fd);
		free(srv);
	}
}
