/* SPDX-License-Identifier: MIT */
/* backend_epoll.c - placeholder until the epoll backend lands (issue 3). */
#include <errno.h>

#include "internal.h"

static int init(rl_loop *loop, const struct rl_options *opt)
{
	(void)loop;
	(void)opt;
	return -ENOSYS;
}

const struct rl__backend rl__backend_epoll = {
	.name = "epoll",
	.init = init,
};
