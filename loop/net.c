/* SPDX-License-Identifier: MIT */
/*
 * net.c - sockets: addresses, the synchronous helpers (listen, options),
 * argument checks and hand-off of socket requests to the backend, and the
 * delivery of stream items (net.h says how streams travel).
 *
 * As in fs.c, every check that can fail does so here, before the request
 * is accepted, so a bad argument is a -errno from the submitting call and
 * the callback never runs; what only the kernel can tell (a closed fd, a
 * refused connection) arrives in the callback, the same on both backends.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "net.h"

#define DEFAULT_BUFS	 256
#define DEFAULT_BUF_SIZE 4096
#define MAX_BUFS	 32768 /* io_uring's limit for a buffer ring */
#define FIRST_ITEMS	 64

/* ------------------------------------------------------------ addresses */

int rl_addr_ip(struct rl_addr *addr, const char *ip, uint16_t port)
{
	struct sockaddr_in *in;
	struct sockaddr_in6 *in6;
	char tmp[INET6_ADDRSTRLEN];
	size_t n;

	if (!addr || !ip)
		return -EINVAL;
	memset(addr, 0, sizeof(*addr));
	in = (struct sockaddr_in *)(void *)&addr->ss;
	if (inet_pton(AF_INET, ip, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		addr->len = sizeof(*in);
		return 0;
	}
	/* "[::1]" as in URLs, or "::1". */
	n = strlen(ip);
	if (n >= 2 && ip[0] == '[' && ip[n - 1] == ']' && n - 2 < sizeof(tmp)) {
		memcpy(tmp, ip + 1, n - 2);
		tmp[n - 2] = '\0';
		ip = tmp;
	}
	in6 = (struct sockaddr_in6 *)(void *)&addr->ss;
	if (inet_pton(AF_INET6, ip, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		addr->len = sizeof(*in6);
		return 0;
	}
	memset(addr, 0, sizeof(*addr));
	return -EINVAL;
}

int rl_addr_unix(struct rl_addr *addr, const char *path)
{
	struct sockaddr_un *un;
	size_t n;

	if (!addr || !path || !*path)
		return -EINVAL;
	memset(addr, 0, sizeof(*addr));
	un = (struct sockaddr_un *)(void *)&addr->ss;
	un->sun_family = AF_UNIX;
	n = strlen(path);
	if (path[0] == '@') {
		/* Abstract: a leading NUL, and the length says where the name
		 * ends (no terminating NUL). */
		if (n > sizeof(un->sun_path))
			return -ENAMETOOLONG;
		memcpy(un->sun_path + 1, path + 1, n - 1);
		addr->len =
			(socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
		return 0;
	}
	if (n >= sizeof(un->sun_path))
		return -ENAMETOOLONG;
	memcpy(un->sun_path, path, n + 1);
	addr->len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
	return 0;
}

int rl_addr_port(const struct rl_addr *addr)
{
	if (!addr)
		return -EINVAL;
	switch (addr->sa.sa_family) {
	case AF_INET:
		return ntohs(
			((const struct sockaddr_in *)(const void *)&addr->ss)
				->sin_port);
	case AF_INET6:
		return ntohs(
			((const struct sockaddr_in6 *)(const void *)&addr->ss)
				->sin6_port);
	}
	return -EAFNOSUPPORT;
}

int rl_addr_format(const struct rl_addr *addr, char *buf, size_t size)
{
	const struct sockaddr_un *un;
	char ip[INET6_ADDRSTRLEN];
	size_t off;
	int n;

	if (!addr || (!buf && size))
		return -EINVAL;
	switch (addr->sa.sa_family) {
	case AF_INET:
		inet_ntop(AF_INET,
			  &((const struct sockaddr_in *)(const void *)&addr->ss)
				   ->sin_addr,
			  ip, sizeof(ip));
		n = snprintf(buf, size, "%s:%d", ip, rl_addr_port(addr));
		break;
	case AF_INET6:
		inet_ntop(
			AF_INET6,
			&((const struct sockaddr_in6 *)(const void *)&addr->ss)
				 ->sin6_addr,
			ip, sizeof(ip));
		n = snprintf(buf, size, "[%s]:%d", ip, rl_addr_port(addr));
		break;
	case AF_UNIX:
		un = (const struct sockaddr_un *)(const void *)&addr->ss;
		off = offsetof(struct sockaddr_un, sun_path);
		if (addr->len <= off)
			n = snprintf(buf, size, "(unnamed)");
		else if (un->sun_path[0] == '\0')
			n = snprintf(buf, size, "@%.*s",
				     (int)(addr->len - off - 1),
				     un->sun_path + 1);
		else
			n = snprintf(buf, size, "%.*s", (int)(addr->len - off),
				     un->sun_path);
		break;
	default:
		return -EAFNOSUPPORT;
	}
	return n;
}

static int sock_name(int fd, struct rl_addr *addr,
		     int (*get)(int, struct sockaddr *, socklen_t *))
{
	if (!addr)
		return -EINVAL;
	memset(addr, 0, sizeof(*addr));
	addr->len = sizeof(addr->ss);
	if (get(fd, &addr->sa, &addr->len) < 0)
		return -errno;
	return 0;
}

int rl_net_local_addr(int fd, struct rl_addr *addr)
{
	return sock_name(fd, addr, getsockname);
}

int rl_net_peer_addr(int fd, struct rl_addr *addr)
{
	return sock_name(fd, addr, getpeername);
}

static int set_int_opt(int fd, int level, int name, int value)
{
	return setsockopt(fd, level, name, &value, sizeof(value)) < 0 ? -errno
								      : 0;
}

int rl_net_nodelay(int fd, int on)
{
	return set_int_opt(fd, IPPROTO_TCP, TCP_NODELAY, on ? 1 : 0);
}

static bool family_ok(const struct rl_addr *addr)
{
	int f = addr->sa.sa_family;

	return f == AF_INET || f == AF_INET6 || f == AF_UNIX;
}

static bool addr_len_ok(const struct rl_addr *addr)
{
	return addr->len > sizeof(sa_family_t) && addr->len <= sizeof(addr->ss);
}

int rl_net_listen(const struct rl_addr *addr, int backlog, unsigned flags)
{
	int family, fd, ret = 0;

	if (!addr)
		return -EFAULT;
	if (!family_ok(addr))
		return -EAFNOSUPPORT;
	if (!addr_len_ok(addr) ||
	    (flags & ~(unsigned)(RL_LISTEN_REUSEPORT | RL_LISTEN_V6ONLY |
				 RL_LISTEN_NODELAY)))
		return -EINVAL;
	family = addr->sa.sa_family;
	if ((flags & RL_LISTEN_V6ONLY) && family != AF_INET6)
		return -EINVAL;
	fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (family != AF_UNIX)
		ret = set_int_opt(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	if (!ret && (flags & RL_LISTEN_REUSEPORT))
		ret = set_int_opt(fd, SOL_SOCKET, SO_REUSEPORT, 1);
	if (!ret && (flags & RL_LISTEN_V6ONLY))
		ret = set_int_opt(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
	if (!ret && (flags & RL_LISTEN_NODELAY) && family != AF_UNIX)
		ret = rl_net_nodelay(fd, 1);
	if (!ret && bind(fd, &addr->sa, addr->len) < 0)
		ret = -errno;
	if (!ret && listen(fd, backlog > 0 ? backlog : SOMAXCONN) < 0)
		ret = -errno;
	if (ret < 0) {
		close(fd);
		return ret;
	}
	return fd;
}

/* ------------------------------------------------------------- requests */

static int check_req(rl_loop *loop, rl_req *req, rl_req_cb cb)
{
	if (!loop || !req || !cb)
		return -EINVAL;
	if (loop->closing)
		return -ECANCELED;
	if (rl__req(req)->state & RL__REQ_ACTIVE)
		return -EBUSY;
	return 0;
}

static void prep(rl_loop *loop, rl_req *req, uint8_t op, int fd, rl_req_cb cb)
{
	void *data = req->data;

	memset(req, 0, sizeof(*req));
	req->data = data;
	req->loop = loop;
	req->op = op;
	req->cb = cb;
	req->fd = fd;
	req->offset = -1;
}

static int submit(rl_loop *loop, rl_req *req)
{
	rl__req(req)->state |= RL__REQ_ACTIVE;
	loop->active_reqs++;
	loop->stats.submissions++;
	loop->backend->submit(loop, req);
	return 0;
}

int rl_net_accept(rl_loop *loop, rl_req *req, int fd, rl_req_cb cb)
{
	int ret = check_req(loop, req, cb);

	if (ret < 0)
		return ret;
	if (fd < 0)
		return -EBADF;
	ret = rl__net_get(loop);
	if (ret < 0)
		return ret;
	prep(loop, req, RL_OP_ACCEPT, fd, cb);
	rl__req(req)->state |= RL__REQ_STREAM;
	return submit(loop, req);
}

int rl_net_accept_one(rl_loop *loop, rl_req *req, int fd, rl_req_cb cb)
{
	int ret = check_req(loop, req, cb);

	if (ret < 0)
		return ret;
	if (fd < 0)
		return -EBADF;
	prep(loop, req, RL_OP_ACCEPT_ONE, fd, cb);
	return submit(loop, req);
}

int rl_net_connect(rl_loop *loop, rl_req *req, const struct rl_addr *addr,
		   unsigned flags, uint64_t timeout_ms, rl_req_cb cb)
{
	int ret = check_req(loop, req, cb);
	int fd;

	if (ret < 0)
		return ret;
	if (!addr)
		return -EFAULT;
	if (!family_ok(addr))
		return -EAFNOSUPPORT;
	if (!addr_len_ok(addr) || (flags & ~(unsigned)RL_CONNECT_NODELAY) ||
	    timeout_ms > RL_TIMEOUT_MAX_MS)
		return -EINVAL;
	/* Making a socket never blocks; only the connect waits. */
	fd = socket(addr->sa.sa_family,
		    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if ((flags & RL_CONNECT_NODELAY) && addr->sa.sa_family != AF_UNIX) {
		ret = rl_net_nodelay(fd, 1);
		if (ret < 0) {
			close(fd);
			return ret;
		}
	}
	prep(loop, req, RL_OP_CONNECT, fd, cb);
	req->flags = (int)flags;
	req->ptr = (void *)(uintptr_t)addr;
	req->count = addr->len;
	req->offset = (int64_t)timeout_ms;
	return submit(loop, req);
}

int rl_net_recv(rl_loop *loop, rl_req *req, int fd, void *buf, size_t len,
		rl_req_cb cb)
{
	int ret = check_req(loop, req, cb);

	if (ret < 0)
		return ret;
	if (fd < 0)
		return -EBADF;
	if (!buf)
		return -EFAULT;
	/* 0 bytes would read as the end of the stream. */
	if (!len)
		return -EINVAL;
	prep(loop, req, RL_OP_RECV, fd, cb);
	req->buf = buf;
	/* "Up to len": a receive never returns more than the kernel takes
	 * in one call anyway. */
	req->len = len > RL__NET_MAX_IO ? RL__NET_MAX_IO : len;
	return submit(loop, req);
}

int rl_net_recv_stream(rl_loop *loop, rl_req *req, int fd, rl_req_cb cb)
{
	int ret = check_req(loop, req, cb);

	if (ret < 0)
		return ret;
	if (fd < 0)
		return -EBADF;
	ret = rl__net_get(loop);
	if (ret < 0)
		return ret;
	ret = rl__net_bufs(loop);
	if (ret < 0)
		return ret;
	prep(loop, req, RL_OP_RECV_STREAM, fd, cb);
	rl__req(req)->state |= RL__REQ_STREAM;
	return submit(loop, req);
}

int rl_net_send(rl_loop *loop, rl_req *req, int fd, const void *buf, size_t len,
		unsigned flags, rl_req_cb cb)
{
	int ret = check_req(loop, req, cb);

	if (ret < 0)
		return ret;
	if (fd < 0)
		return -EBADF;
	if (!buf && len)
		return -EFAULT;
	if (flags & ~(unsigned)RL_SEND_MORE)
		return -EINVAL;
	prep(loop, req, RL_OP_SEND, fd, cb);
	req->buf = (void *)(uintptr_t)buf;
	req->len = len;
	req->flags = (int)flags;
	return submit(loop, req);
}

int rl_net_shutdown(rl_loop *loop, rl_req *req, int fd, int how, rl_req_cb cb)
{
	int ret = check_req(loop, req, cb);

	if (ret < 0)
		return ret;
	if (fd < 0)
		return -EBADF;
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return -EINVAL;
	prep(loop, req, RL_OP_SHUTDOWN, fd, cb);
	req->flags = how;
	return submit(loop, req);
}

int rl_net_udp(const struct rl_addr *addr, unsigned flags)
{
	int fd, ret = 0;

	if (!addr)
		return -EFAULT;
	if (!family_ok(addr))
		return -EAFNOSUPPORT;
	if (!addr_len_ok(addr) ||
	    (flags & ~(unsigned)(RL_LISTEN_REUSEPORT | RL_LISTEN_V6ONLY)))
		return -EINVAL;
	if ((flags & RL_LISTEN_V6ONLY) && addr->sa.sa_family != AF_INET6)
		return -EINVAL;
	fd = socket(addr->sa.sa_family,
		    SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (flags & RL_LISTEN_REUSEPORT)
		ret = set_int_opt(fd, SOL_SOCKET, SO_REUSEPORT, 1);
	if (!ret && (flags & RL_LISTEN_V6ONLY))
		ret = set_int_opt(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
	if (!ret && bind(fd, &addr->sa, addr->len) < 0)
		ret = -errno;
	if (ret < 0) {
		close(fd);
		return ret;
	}
	return fd;
}

static int submit_msg(rl_loop *loop, rl_req *req, uint8_t op, int fd,
		      const struct msghdr *msg, rl_req_cb cb)
{
	int ret = check_req(loop, req, cb);

	if (ret < 0)
		return ret;
	if (fd < 0)
		return -EBADF;
	if (!msg || (!msg->msg_iov && msg->msg_iovlen))
		return -EFAULT;
	if (msg->msg_iovlen > IOV_MAX)
		return -EMSGSIZE;
	prep(loop, req, op, fd, cb);
	req->ptr = (void *)(uintptr_t)msg;
	return submit(loop, req);
}

int rl_net_sendmsg(rl_loop *loop, rl_req *req, int fd, const struct msghdr *msg,
		   rl_req_cb cb)
{
	return submit_msg(loop, req, RL_OP_SENDMSG, fd, msg, cb);
}

int rl_net_recvmsg(rl_loop *loop, rl_req *req, int fd, struct msghdr *msg,
		   rl_req_cb cb)
{
	return submit_msg(loop, req, RL_OP_RECVMSG, fd, msg, cb);
}

int rl__net_msg_flags(const rl_req *req)
{
	return MSG_NOSIGNAL | ((req->flags & RL_SEND_MORE) ? MSG_MORE : 0);
}

/* ------------------------------------------------------- state, buffers */

int rl__net_options_check(const struct rl_options *opt)
{
	unsigned n = opt->net_bufs;

	if (n && (n > MAX_BUFS || (n & (n - 1))))
		return -EINVAL;
	if (opt->net_buf_size > RL__NET_MAX_IO)
		return -EINVAL;
	return 0;
}

int rl__net_get(rl_loop *loop)
{
	struct rl__net *n;

	if (loop->net)
		return 0;
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->items = malloc(FIRST_ITEMS * sizeof(*n->items));
	if (!n->items) {
		free(n);
		return -ENOMEM;
	}
	n->icap = FIRST_ITEMS;
	n->cur = RL__NET_NO_BUF;
	loop->net = n;
	return 0;
}

/* Grows the item ring to at least need entries, keeping its order. */
static int grow_items(struct rl__net *n, uint32_t need)
{
	struct rl__net_item *items;
	uint32_t cap = n->icap;

	while (cap < need)
		cap *= 2;
	if (cap == n->icap)
		return 0;
	items = malloc((size_t)cap * sizeof(*items));
	if (!items)
		return -ENOMEM;
	for (uint32_t i = 0; i < n->icount; i++)
		items[i] = n->items[(n->ihead + i) & (n->icap - 1)];
	free(n->items);
	n->items = items;
	n->ihead = 0;
	n->icap = cap;
	return 0;
}

static void free_bufs(struct rl__net *n)
{
	if (n->slab)
		munmap(n->slab, n->slab_len);
	free(n->bstate);
	free(n->freeb);
	free(n->back);
	n->slab = NULL;
	n->bstate = NULL;
	n->freeb = n->back = NULL;
	n->nbufs = n->nfree = n->nback = 0;
}

int rl__net_bufs(rl_loop *loop)
{
	struct rl__net *n = loop->net;
	uint32_t nbufs = loop->opt.net_bufs ? loop->opt.net_bufs : DEFAULT_BUFS;
	uint32_t size = loop->opt.net_buf_size ? loop->opt.net_buf_size
					       : DEFAULT_BUF_SIZE;
	int ret;

	if (n->slab)
		return 0;
	/* mmap: page aligned, and pages the streams never touch cost no
	 * memory. */
	n->slab_len = (size_t)nbufs * size;
	n->slab = mmap(NULL, n->slab_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	loop->stats.syscalls++;
	if (n->slab == MAP_FAILED) {
		n->slab = NULL;
		return -ENOMEM;
	}
	n->nbufs = nbufs;
	n->bufsize = size;
	n->bstate = calloc(nbufs, 1);
	n->freeb = malloc(nbufs * sizeof(*n->freeb));
	n->back = malloc(nbufs * sizeof(*n->back));
	/* Room for an item per buffer, made now, so that queueing a
	 * received chunk never needs memory (net.h). */
	if (!n->bstate || !n->freeb || !n->back ||
	    grow_items(n, nbufs + n->naccepts) < 0) {
		free_bufs(n);
		return -ENOMEM;
	}
	/* Popped in order 0, 1, 2...: the free list is a stack. */
	for (uint32_t i = 0; i < nbufs; i++)
		n->freeb[i] = (uint16_t)(nbufs - 1 - i);
	n->nfree = nbufs;
	if (loop->backend->net_setup) {
		ret = loop->backend->net_setup(loop);
		if (ret < 0) {
			free_bufs(n);
			return ret;
		}
	}
	return 0;
}

void rl__net_free(rl_loop *loop)
{
	struct rl__net *n = loop->net;

	if (!n)
		return;
	free_bufs(n);
	free(n->items);
	free(n);
	loop->net = NULL;
}

void rl__net_buf_back(rl_loop *loop, uint32_t id)
{
	uint16_t id16 = (uint16_t)id;

	loop->net->bstate[id] = RL__BUF_FREE;
	loop->backend->net_bufs_back(loop, &id16, 1);
}

void *rl_net_buf_hold(rl_req *req)
{
	struct rl__net *n;

	if (!req || !req->loop || !(n = req->loop->net) ||
	    n->cur == RL__NET_NO_BUF || n->cur_req != req)
		return NULL;
	n->bstate[n->cur] = RL__BUF_HELD;
	return req->buf;
}

int rl_net_buf_release(rl_loop *loop, void *buf)
{
	struct rl__net *n;
	size_t off;
	uint32_t id;

	if (!loop || !(n = loop->net) || !n->slab || !buf)
		return -EINVAL;
	if ((char *)buf < n->slab || (char *)buf >= n->slab + n->slab_len)
		return -EINVAL;
	off = (size_t)((char *)buf - n->slab);
	if (off % n->bufsize)
		return -EINVAL;
	id = (uint32_t)(off / n->bufsize);
	if (n->bstate[id] != RL__BUF_HELD)
		return -EINVAL;
	rl__net_buf_back(loop, id);
	return 0;
}

/* --------------------------------------------------------------- items */

/* An item nobody will see: its buffer goes back, its connection closes. */
static void drop_item(rl_loop *loop, struct rl__net *n,
		      const struct rl__net_item *it)
{
	if (it->buf != RL__NET_NO_BUF) {
		n->bstate[it->buf] = RL__BUF_FREE;
		n->back[n->nback++] = (uint16_t)it->buf;
	}
	if (it->req->op == RL_OP_ACCEPT && it->res >= 0) {
		close(it->res);
		loop->stats.syscalls++;
	}
}

static void flush_back(rl_loop *loop, struct rl__net *n)
{
	if (n->nback) {
		loop->backend->net_bufs_back(loop, n->back, n->nback);
		n->nback = 0;
	}
}

int rl__net_push(rl_loop *loop, rl_req *req, int32_t res, int32_t buf)
{
	struct rl__net *n = loop->net;
	struct rl__net_item *it;

	/* A receive item's room was made with the buffers: icount <=
	 * nbufs + naccepts <= icap. */
	if (buf == RL__NET_NO_BUF) {
		if (grow_items(n, n->nbufs + n->naccepts + 1) < 0) {
			struct rl__net_item lost = { req, res, buf };

			drop_item(loop, n, &lost);
			return -ENOMEM;
		}
		n->naccepts++;
	}
	it = &n->items[(n->ihead + n->icount) & (n->icap - 1)];
	it->req = req;
	it->res = res;
	it->buf = buf;
	n->icount++;
	return 0;
}

bool rl__net_items_pending(const rl_loop *loop)
{
	return loop->net && loop->net->icount;
}

/*
 * Delivers the items queued when it starts (a callback cannot add items:
 * only the backends' wait() and cancel do). Items of a cancelled stream
 * are still delivered, before its final callback: they hold data the
 * kernel has taken off the socket (or connections it has accepted), and
 * dropping them would lose bytes of a connection that may well go on, as
 * when a reader pauses. Only while the loop closes are items dropped
 * (buffers recycled, connections closed). Buffers whose callbacks
 * returned go back to the backend together, at the end.
 */
int rl__net_run_items(rl_loop *loop)
{
	struct rl__net *n = loop->net;
	struct rl__net_item it;
	int64_t final;
	bool known;
	uint32_t todo;
	int ran = 0;

	if (!n || !n->icount)
		return 0;
	for (todo = n->icount; todo; todo--) {
		it = n->items[n->ihead];
		n->ihead = (n->ihead + 1) & (n->icap - 1);
		n->icount--;
		if (it.buf == RL__NET_NO_BUF)
			n->naccepts--;
		if (loop->closing) {
			drop_item(loop, n, &it);
			continue;
		}
		/* The stream's final result may be known already (its
		 * callback queued behind these items): keep it. */
		known = rl__req(it.req)->state & RL__REQ_DONE;
		final = it.req->result;
		it.req->result = it.res;
		if (it.buf != RL__NET_NO_BUF) {
			it.req->buf = rl__net_buf(n, (uint32_t)it.buf);
			it.req->len = (size_t)it.res;
		}
		n->cur = it.buf;
		n->cur_req = it.req;
		rl__req(it.req)->state |= RL__REQ_MORE;
		loop->stats.completions++;
		it.req->cb(it.req);
		rl__req(it.req)->state &= ~(uint32_t)RL__REQ_MORE;
		if (it.buf != RL__NET_NO_BUF) {
			if (n->bstate[it.buf] == RL__BUF_OUT) {
				n->bstate[it.buf] = RL__BUF_FREE;
				n->back[n->nback++] = (uint16_t)it.buf;
			}
			it.req->buf = NULL;
			it.req->len = 0;
		}
		if (known)
			it.req->result = final;
		n->cur = RL__NET_NO_BUF;
		n->cur_req = NULL;
		ran++;
	}
	flush_back(loop, n);
	return ran;
}

/*
 * The socket side of rl__complete(), with the result the backend found:
 * a connect that did not succeed (failed, timed out, or was cancelled,
 * even after it connected) closes the socket the loop made for it.
 *
 * A receive that got data, or an accept_one that got a connection, before
 * its cancel (or deadline) reached it reports that result, not
 * -ECANCELED: the bytes are off the socket and the connection off the
 * backlog, so -ECANCELED would lose them (a timed-out receive racing its
 * data dropped the data). It finished first, as rl_cancel() says.
 */
void rl__net_complete(rl_loop *loop, rl_req *req, int64_t result)
{
	bool cancelled = rl__req(req)->state & RL__REQ_CANCEL;

	if (req->op == RL_OP_CONNECT && (result < 0 || cancelled) &&
	    req->fd >= 0) {
		close(req->fd);
		loop->stats.syscalls++;
		req->fd = -1;
	} else if (cancelled && result >= 0 &&
		   (req->op == RL_OP_RECV || req->op == RL_OP_RECVMSG ||
		    req->op == RL_OP_ACCEPT_ONE)) {
		rl__req(req)->state &=
			~(uint32_t)(RL__REQ_CANCEL | RL__REQ_TIMEDOUT);
	}
}
