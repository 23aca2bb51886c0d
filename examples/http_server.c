/* SPDX-License-Identifier: MIT */
/*
 * http_server.c - an HTTP/1.1 server with the callback style that answers
 * every GET or HEAD with the same small response ("Hello world\n"), with
 * keep-alive and pipelining: enough for a load generator (make bench-net
 * drives it with wrk). Requests are parsed for real (http_parse.h): split
 * anywhere across reads, several in one read, bad ones answered with 400,
 * 414, 431, 501 or 505 before the connection closes.
 *
 *	cc -o http_server http_server.c $(pkg-config --cflags --libs ringloop)
 *	./http_server 8080 &		# port 0: any free port, printed
 *	curl -v http://127.0.0.1:8080/
 *
 * It prints "http_server: listening on ADDRESS" once it listens, and
 * serves until it is killed. RINGLOOP_BACKEND=epoll picks the fallback.
 * On io_uring the loop's default ring has SINGLE_ISSUER and
 * DEFER_TASKRUN: the kernel runs a socket's completion work when the loop
 * asks for completions, not as it comes (cheaper with many busy
 * connections). --shared-ring asks for the plain ring instead
 * (RL_SHARED_RING), to compare; the second line printed names the ring.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ringloop/ringloop.h>
#include <ringloop/callback.h>

#include "http_parse.h"

#define BODY "Hello world\n"
#define HEAD_200 \
	"HTTP/1.1 200 OK\r\nServer: ringloop\r\nContent-Type: text/plain\r\n"
#define LEN_200 "Content-Length: 12\r\n"

static const char ok_keep[] = HEAD_200 LEN_200 "\r\n" BODY;
static const char ok_keep_10[] =
	HEAD_200 LEN_200 "Connection: keep-alive\r\n\r\n" BODY;
static const char ok_close[] =
	HEAD_200 LEN_200 "Connection: close\r\n\r\n" BODY;
/* The same without their bodies, for HEAD. */
#define NO_BODY(s) (sizeof(s) - 1 - (sizeof(BODY) - 1))

/* Answers to pipelined requests go out in one write: BATCH copies of the
 * keep-alive response, side by side. */
#define BATCH 32
static char batch[BATCH * (sizeof(ok_keep) - 1)];

/* A client that stops reading makes us stop reading it past HIGH bytes
 * unsent, until they fall under LOW: the server's memory stays bounded. */
#define HIGH	  (256u << 10)
#define LOW	  (64u << 10)
#define IDLE_MS	  60000
#define LINGER_MS 5000

struct conn {
	rl_cb_conn *c;
	struct http_parser p;
	bool answered_close; /* the last answer closes: input is ignored */
	bool paused, ending, shut, eof, closed;
};

static void freed(int err, int64_t value, void *arg)
{
	(void)err;
	(void)value;
	free(arg);
}

static void close_conn(struct conn *k)
{
	if (!k->closed) {
		k->closed = true;
		rl_cb_net_close(k->c, freed, k);
	}
}

static void on_data(int err, const void *data, size_t len, void *arg);

static void written(int err, int64_t value, void *arg)
{
	struct conn *k = arg;

	(void)value;
	if (err < 0) {
		close_conn(k);
		return;
	}
	if (k->paused && !k->closed && rl_cb_net_write_queued(k->c) < LOW) {
		k->paused = false;
		rl_cb_net_read_start(k->c, on_data, k);
	}
}

static void send_bytes(struct conn *k, const char *buf, size_t len)
{
	if (rl_cb_net_write(k->c, buf, len, written, k) < 0)
		close_conn(k);
}

static void send_ok_batch(struct conn *k, unsigned n)
{
	while (n > 0) {
		unsigned m = n < BATCH ? n : BATCH;

		send_bytes(k, batch, m * (sizeof(ok_keep) - 1));
		n -= m;
	}
}

static void shut_done(int err, int64_t value, void *arg)
{
	struct conn *k = arg;

	(void)err;
	(void)value;
	k->shut = true;
	if (k->eof)
		close_conn(k);
}

/* Ends our side once the answers before it are out; the connection
 * closes when the peer has ended its side too (or after LINGER_MS), so
 * its last request's answer is never lost to a reset. */
static void end_conn(struct conn *k)
{
	if (k->ending)
		return;
	k->ending = true;
	rl_cb_net_set_timeout(k->c, LINGER_MS);
	if (rl_cb_net_end(k->c, shut_done, k) < 0)
		k->shut = true;
}

static const char *status_text(int status)
{
	switch (status) {
	case 414:
		return "414 URI Too Long";
	case 431:
		return "431 Request Header Fields Too Large";
	case 501:
		return "501 Not Implemented";
	case 505:
		return "505 HTTP Version Not Supported";
	default:
		return "400 Bad Request";
	}
}

static void answer_error(struct conn *k, int status)
{
	static char out[6][160];
	static const int codes[6] = { 400, 414, 431, 501, 505, 0 };
	int i = 0;

	while (codes[i] && codes[i] != status)
		i++;
	if (!codes[i])
		i = 0;
	if (!out[i][0])
		snprintf(out[i], sizeof(out[i]),
			 "HTTP/1.1 %s\r\nServer: ringloop\r\n"
			 "Content-Length: 0\r\nConnection: close\r\n\r\n",
			 status_text(codes[i]));
	send_bytes(k, out[i], strlen(out[i]));
}

static void on_data(int err, const void *data, size_t len, void *arg)
{
	struct conn *k = arg;
	const char *in = data;
	unsigned pending = 0;
	size_t used;

	if (err < 0) { /* reset, idle for too long, or the loop closing */
		close_conn(k);
		return;
	}
	if (len == 0) { /* the peer ended its side */
		k->eof = true;
		end_conn(k);
		if (k->shut)
			close_conn(k);
		return;
	}
	while (len > 0 && !k->answered_close) {
		enum http_event ev = http_feed(&k->p, in, len, &used);

		in += used;
		len -= used;
		if (ev == HTTP_MORE)
			break;
		if (ev == HTTP_ERROR) {
			send_ok_batch(k, pending);
			pending = 0;
			answer_error(k, k->p.error);
			k->answered_close = true;
			break;
		}
		if (k->p.keep_alive && k->p.minor >= 1 &&
		    strcmp(k->p.method, "HEAD") != 0) {
			pending++;
			continue;
		}
		send_ok_batch(k, pending);
		pending = 0;
		if (!k->p.keep_alive) {
			k->answered_close = true;
			send_bytes(k, ok_close,
				   strcmp(k->p.method, "HEAD")
					   ? sizeof(ok_close) - 1
					   : NO_BODY(ok_close));
		} else if (k->p.minor == 0) {
			send_bytes(k, ok_keep_10,
				   strcmp(k->p.method, "HEAD")
					   ? sizeof(ok_keep_10) - 1
					   : NO_BODY(ok_keep_10));
		} else {
			send_bytes(k, ok_keep, NO_BODY(ok_keep));
		}
	}
	send_ok_batch(k, pending);
	if (k->closed)
		return;
	if (k->answered_close)
		end_conn(k);
	else if (rl_cb_net_write_queued(k->c) > HIGH && !k->paused &&
		 rl_cb_net_read_stop(k->c) == 0)
		k->paused = true;
}

static void on_conn(int err, rl_cb_conn *c, void *arg)
{
	struct conn *k;

	(void)arg;
	if (err < 0) { /* out of fds for now: the server retries */
		fprintf(stderr, "http_server: accept: %s\n", rl_strerror(err));
		return;
	}
	k = calloc(1, sizeof(*k));
	if (!k) {
		rl_cb_net_close(c, NULL, NULL);
		return;
	}
	k->c = c;
	http_parser_init(&k->p);
	rl_cb_net_set_timeout(c, IDLE_MS);
	if (rl_cb_net_read_start(c, on_data, k) < 0)
		close_conn(k);
}

int main(int argc, char **argv)
{
	struct rl_options opt;
	struct rl_addr addr;
	rl_cb_server *srv;
	rl_cb_ctx *cbs;
	rl_loop *loop;
	char name[64];
	int err, a = 1;

	rl_options_init(&opt);
	if (argc > a && strcmp(argv[a], "--shared-ring") == 0) {
		opt.flags |= RL_SHARED_RING;
		a++;
	}
	for (int i = 0; i < BATCH; i++)
		memcpy(batch + i * (sizeof(ok_keep) - 1), ok_keep,
		       sizeof(ok_keep) - 1);
	if (rl_addr_ip(&addr, "127.0.0.1",
		       (uint16_t)(argc > a ? atoi(argv[a]) : 8080)) < 0)
		return 2;
	err = rl_loop_open(&loop, &opt);
	if (err == 0)
		err = rl_cb_ctx_open(loop, &cbs);
	if (err == 0)
		err = rl_cb_net_listen(cbs, &addr, 0, RL_LISTEN_NODELAY,
				       on_conn, NULL, &srv);
	if (err < 0) {
		fprintf(stderr, "http_server: %s\n", rl_strerror(err));
		return 1;
	}
	rl_net_local_addr(rl_cb_net_server_fd(srv), &addr);
	rl_addr_format(&addr, name, sizeof(name));
	printf("http_server: listening on %s (%s)\n", name,
	       rl_loop_backend(loop));
	printf("http_server: ring %s\n", rl_loop_ring(loop));
	fflush(stdout);
	err = rl_run(loop, RL_RUN_DEFAULT);
	rl_loop_close(loop);
	return err < 0;
}
