/* SPDX-License-Identifier: MIT */
/*
 * promise_net.c - the loop's socket requests as promises: each one is a
 * request record of promise_fs.c, submitted with the socket call, and
 * settled from its callback with the value promise.h lists.
 */
#include <errno.h>

#include "promise_internal.h"

/* The shape of every request below. */
#define NET_PROMISE(call)                                     \
	do {                                                  \
		rl_promise *refused_;                         \
		rl_req *req = rl__op_req_new(ctx, &refused_); \
                                                              \
		if (!req)                                     \
			return refused_;                      \
		return rl__op_req_submitted(req, (call));     \
	} while (0)

rl_promise *rl_promise_net_accept(rl_promise_ctx *ctx, int lfd)
{
	NET_PROMISE(rl_net_accept_one(ctx->loop, req, lfd, rl__op_req_cb));
}

rl_promise *rl_promise_net_connect(rl_promise_ctx *ctx,
				   const struct rl_addr *addr, unsigned flags,
				   uint64_t timeout_ms)
{
	NET_PROMISE(rl_net_connect(ctx->loop, req, addr, flags, timeout_ms,
				   rl__op_req_cb));
}

rl_promise *rl_promise_net_recv(rl_promise_ctx *ctx, int fd, void *buf,
				size_t len)
{
	NET_PROMISE(rl_net_recv(ctx->loop, req, fd, buf, len, rl__op_req_cb));
}

rl_promise *rl_promise_net_send(rl_promise_ctx *ctx, int fd, const void *buf,
				size_t len, unsigned flags)
{
	NET_PROMISE(rl_net_send(ctx->loop, req, fd, buf, len, flags,
				rl__op_req_cb));
}

rl_promise *rl_promise_net_shutdown(rl_promise_ctx *ctx, int fd, int how)
{
	NET_PROMISE(rl_net_shutdown(ctx->loop, req, fd, how, rl__op_req_cb));
}

rl_promise *rl_promise_net_sendmsg(rl_promise_ctx *ctx, int fd,
				   const struct msghdr *msg)
{
	NET_PROMISE(rl_net_sendmsg(ctx->loop, req, fd, msg, rl__op_req_cb));
}

rl_promise *rl_promise_net_recvmsg(rl_promise_ctx *ctx, int fd,
				   struct msghdr *msg)
{
	NET_PROMISE(rl_net_recvmsg(ctx->loop, req, fd, msg, rl__op_req_cb));
}
