/* SPDX-License-Identifier: MIT */
/*
 * coro_net.c - the loop's socket requests as suspending calls, on the
 * coroutine's one request (coro_io.c says why it lives in the handle).
 *
 * A timeout is the loop's deadline on that request, with its timer on the
 * coroutine's stack: the coroutine stays suspended until the request's
 * callback, which stops the timer, so the timer outlives its use. A
 * timeout past RL_TIMEOUT_MAX_MS is -EINVAL before the request starts
 * (the deadline would refuse it once the request ran without one).
 */
#include <errno.h>

#include "coro_internal.h"

/* Submits with call, binds the deadline, waits. The deadline cannot
 * fail: the request is in flight, the timer idle, the timeout checked. */
#define CORO_NET(T, timeout_ms, call)                                        \
	do {                                                                 \
		int err_;                                                    \
		rl_coro *co = rl__coro_enter(&err_);                         \
		rl_loop *loop;                                               \
		rl_timer deadline;                                           \
		rl_req *req;                                                 \
                                                                             \
		if (!co)                                                     \
			return err_;                                         \
		if ((timeout_ms) > RL_TIMEOUT_MAX_MS)                        \
			return -EINVAL;                                      \
		loop = co->sched->loop;                                      \
		req = rl__coro_req(co);                                      \
		err_ = (call);                                               \
		if (err_ == 0 && (timeout_ms)) {                             \
			rl_timer_init(&deadline);                            \
			rl_req_deadline(loop, req, &deadline, (timeout_ms)); \
		}                                                            \
		return (T)rl__coro_wait_req(co, req, err_);                  \
	} while (0)

int rl_coro_net_accept(int lfd, uint64_t timeout_ms)
{
	CORO_NET(int, timeout_ms,
		 rl_net_accept_one(loop, req, lfd, rl__coro_req_done));
}

int rl_coro_net_connect(const struct rl_addr *addr, unsigned flags,
			uint64_t timeout_ms)
{
	/* The loop's connect has a timeout of its own. */
	CORO_NET(int, 0,
		 rl_net_connect(loop, req, addr, flags, timeout_ms,
				rl__coro_req_done));
}

int64_t rl_coro_net_recv(int fd, void *buf, size_t len, uint64_t timeout_ms)
{
	CORO_NET(int64_t, timeout_ms,
		 rl_net_recv(loop, req, fd, buf, len, rl__coro_req_done));
}

int64_t rl_coro_net_send(int fd, const void *buf, size_t len,
			 uint64_t timeout_ms)
{
	CORO_NET(int64_t, timeout_ms,
		 rl_net_send(loop, req, fd, buf, len, 0, rl__coro_req_done));
}

int rl_coro_net_shutdown(int fd, int how)
{
	CORO_NET(int, 0,
		 rl_net_shutdown(loop, req, fd, how, rl__coro_req_done));
}

int64_t rl_coro_net_sendmsg(int fd, const struct msghdr *msg,
			    uint64_t timeout_ms)
{
	CORO_NET(int64_t, timeout_ms,
		 rl_net_sendmsg(loop, req, fd, msg, rl__coro_req_done));
}

int64_t rl_coro_net_recvmsg(int fd, struct msghdr *msg, uint64_t timeout_ms)
{
	CORO_NET(int64_t, timeout_ms,
		 rl_net_recvmsg(loop, req, fd, msg, rl__coro_req_done));
}
