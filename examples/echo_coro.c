/* SPDX-License-Identifier: MIT */
/*
 * echo_coro.c - a TCP echo server with the coroutine style: one coroutine
 * per connection, written as if its reads and writes blocked. Each call
 * suspends only its coroutine; the loop serves every other connection in
 * the meantime, on io_uring or epoll. A connection (rl_coro_conn_*) reads
 * from the loop's receive stream, so a read costs no submission while
 * data flows.
 *
 *	cc -o echo_coro echo_coro.c $(pkg-config --cflags --libs ringloop)
 *	./echo_coro 7000 &		# port 0: any free port, printed
 *	examples/net_client 127.0.0.1 7000
 *
 * It prints "echo_coro: listening on ADDRESS" once it listens, and serves
 * until it is killed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <ringloop/ringloop.h>
#include <ringloop/coro.h>

static rl_coro_ctx *sched;

/* The showcase: a connection's whole life. */
static int64_t echo(void *arg)
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
	rl_coro_conn_close(c); /* closes fd */
	return 0;
}

static int64_t accept_all(void *arg)
{
	int lfd = (int)(intptr_t)arg, fd;

	while ((fd = rl_coro_net_accept(lfd, 0)) >= 0)
		if (rl_coro_spawn(sched, NULL, echo, (void *)(intptr_t)fd,
				  NULL))
			close(fd);
	fprintf(stderr, "echo_coro: accept: %s\n", rl_strerror(fd));
	return fd;
}

int main(int argc, char **argv)
{
	struct rl_addr addr;
	char name[64];
	rl_loop *loop;
	int lfd, err;

	if (rl_addr_ip(&addr, "127.0.0.1",
		       (uint16_t)(argc > 1 ? atoi(argv[1]) : 7000)) < 0)
		return 2;
	lfd = rl_net_listen(&addr, 0, RL_LISTEN_NODELAY);
	if (lfd < 0) {
		fprintf(stderr, "echo_coro: listen: %s\n", rl_strerror(lfd));
		return 1;
	}
	rl_net_local_addr(lfd, &addr);
	rl_addr_format(&addr, name, sizeof(name));
	err = rl_loop_open(&loop, NULL);
	if (err == 0)
		err = rl_coro_ctx_open(loop, &sched, NULL);
	if (err == 0)
		err = rl_coro_spawn(sched, NULL, accept_all,
				    (void *)(intptr_t)lfd, NULL);
	if (err < 0) {
		fprintf(stderr, "echo_coro: %s\n", rl_strerror(err));
		return 1;
	}
	printf("echo_coro: listening on %s\n", name);
	fflush(stdout);
	err = rl_run(loop, RL_RUN_DEFAULT);
	rl_loop_close(loop);
	close(lfd);
	return err < 0;
}
