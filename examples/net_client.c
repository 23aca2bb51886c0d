/* SPDX-License-Identifier: MIT */
/*
 * net_client.c - a client with the coroutine style: connects (with a
 * timeout), then either sends COUNT messages of SIZE bytes and checks that
 * each comes back whole (an echo server: echo_coro), or, with --http,
 * sends COUNT GET requests one after the other on one keep-alive
 * connection and reads each response (status line, headers, a body of
 * Content-Length bytes) (http_server).
 *
 *	cc -o net_client net_client.c $(pkg-config --cflags --libs ringloop)
 *	./net_client 127.0.0.1 7000 100 4096
 *	./net_client --http 127.0.0.1 8080 100
 */
#define _GNU_SOURCE /* strcasestr */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ringloop/ringloop.h>
#include <ringloop/coro.h>

#define TIMEOUT_MS 5000

struct job {
	struct rl_addr addr;
	bool http;
	long count;
	size_t size;
	int status;
};

/* Receives exactly len bytes, or fails. */
static int recv_all(int fd, char *buf, size_t len)
{
	while (len > 0) {
		int64_t n = rl_coro_net_recv(fd, buf, len, TIMEOUT_MS);

		if (n <= 0)
			return n < 0 ? (int)n : -ECONNRESET;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int echo_round(int fd, char *out, char *in, size_t size, long i)
{
	int err;

	for (size_t k = 0; k < size; k++)
		out[k] = (char)('a' + (i + (long)k) % 26);
	if (rl_coro_net_send(fd, out, size, TIMEOUT_MS) < 0)
		return -EIO;
	err = recv_all(fd, in, size);
	if (err < 0)
		return err;
	return memcmp(in, out, size) ? -EBADMSG : 0;
}

/* Reads one response: the head up to its empty line (into buf, with what
 * came after it kept in *have), then Content-Length bytes of body. */
static int http_round(int fd, char *buf, size_t cap, size_t *have)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	char *end;
	size_t head, body = 0;
	const char *cl;

	if (rl_coro_net_send(fd, req, sizeof(req) - 1, TIMEOUT_MS) < 0)
		return -EIO;
	for (;;) {
		int64_t n;

		buf[*have] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (end)
			break;
		if (*have + 1 >= cap)
			return -EMSGSIZE;
		n = rl_coro_net_recv(fd, buf + *have, cap - 1 - *have,
				     TIMEOUT_MS);
		if (n <= 0)
			return n < 0 ? (int)n : -ECONNRESET;
		*have += (size_t)n;
	}
	head = (size_t)(end + 4 - buf);
	if (strncmp(buf, "HTTP/1.1 200 ", 13) != 0)
		return -EBADMSG;
	cl = strcasestr(buf, "\r\ncontent-length:");
	if (cl && cl < end)
		body = strtoul(cl + 17, NULL, 10);
	while (*have < head + body) {
		int64_t n;

		if (head + body >= cap)
			return -EMSGSIZE;
		n = rl_coro_net_recv(fd, buf + *have, cap - 1 - *have,
				     TIMEOUT_MS);
		if (n <= 0)
			return n < 0 ? (int)n : -ECONNRESET;
		*have += (size_t)n;
	}
	*have -= head + body;
	memmove(buf, buf + head + body, *have);
	return 0;
}

static int64_t run(void *arg)
{
	struct job *job = arg;
	size_t cap = job->http ? 8192 : job->size;
	char *out = malloc(cap), *in = malloc(cap + 1);
	size_t have = 0;
	int fd, err = 0;
	long i;

	fd = rl_coro_net_connect(&job->addr, RL_CONNECT_NODELAY, TIMEOUT_MS);
	if (fd < 0) {
		fprintf(stderr, "net_client: connect: %s\n", rl_strerror(fd));
		job->status = 1;
		goto out;
	}
	for (i = 0; i < job->count && err == 0; i++)
		err = job->http ? http_round(fd, in, cap + 1, &have)
				: echo_round(fd, out, in, job->size, i);
	if (err < 0) {
		fprintf(stderr, "net_client: round %ld: %s\n", i,
			rl_strerror(err));
		job->status = 1;
	} else if (job->http) {
		printf("net_client: %ld responses 200\n", job->count);
	} else {
		printf("net_client: %ld echoes of %zu bytes, every byte back\n",
		       job->count, job->size);
	}
	rl_coro_net_shutdown(fd, SHUT_WR);
	close(fd);
out:
	free(out);
	free(in);
	return 0;
}

int main(int argc, char **argv)
{
	struct job job = { .count = 10, .size = 64 };
	rl_coro_ctx *sched;
	rl_loop *loop;
	int a = 1, err;

	if (argc > 1 && strcmp(argv[1], "--http") == 0) {
		job.http = true;
		a++;
	}
	if (argc - a < 2) {
		fprintf(stderr,
			"usage: net_client [--http] IP PORT [COUNT [SIZE]]\n");
		return 2;
	}
	if (rl_addr_ip(&job.addr, argv[a], (uint16_t)atoi(argv[a + 1])) < 0)
		return 2;
	if (argc - a > 2)
		job.count = atol(argv[a + 2]);
	if (argc - a > 3)
		job.size = strtoul(argv[a + 3], NULL, 10);
	if (job.size == 0)
		return 2;
	err = rl_loop_open(&loop, NULL);
	if (err == 0)
		err = rl_coro_ctx_open(loop, &sched, NULL);
	if (err == 0)
		err = rl_coro_spawn(sched, NULL, run, &job, NULL);
	if (err < 0) {
		fprintf(stderr, "net_client: %s\n", rl_strerror(err));
		return 1;
	}
	rl_run(loop, RL_RUN_DEFAULT);
	rl_loop_close(loop);
	return job.status;
}
