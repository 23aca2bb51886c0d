/* SPDX-License-Identifier: MIT */
/*
 * loop.c - lifecycle, backend choice, run modes, the ready queue, tasks,
 * cross-thread posts and counters.
 *
 * One iteration of rl_run(): run due timers, run the ready callbacks, drain
 * the task queue, then ask the backend to wait (no longer than the next
 * timer) and collect what finished into the ready queue. Callbacks only run
 * from here, so none ever runs inside the call that submitted its request.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sched.h>
#include <unistd.h>

#include "internal.h"


uint64_t rl__clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

unsigned rl_version(void)
{
	return RL_VERSION_HEX;
}

#define RL__STR(x) #x
#define RL__XSTR(x) RL__STR(x)

const char *rl_version_string(void)
{
	return RL__XSTR(RL_VERSION_MAJOR) "." RL__XSTR(RL_VERSION_MINOR) "."
		RL__XSTR(RL_VERSION_PATCH);
}

void rl_req_init(rl_req *req)
{
	memset(req, 0, sizeof(*req));
}

int rl_req_more(const rl_req *req)
{
	return (rl__req_c(req)->state & RL__REQ_MORE) != 0;
}

void rl_timer_init(rl_timer *timer)
{
	memset(timer, 0, sizeof(*timer));
}

void rl_options_init(struct rl_options *opt)
{
	memset(opt, 0, sizeof(*opt));
}

static int backend_from_env(int asked)
{
	const char *env = getenv("RINGLOOP_BACKEND");

	if (asked != RL_BACKEND_AUTO || !env || !*env)
		return asked;
	if (!strcmp(env, "uring") || !strcmp(env, "io_uring"))
		return RL_BACKEND_URING;
	if (!strcmp(env, "epoll"))
		return RL_BACKEND_EPOLL;
	return RL_BACKEND_AUTO;
}

/* io_uring_setup answers these when io_uring is absent or forbidden:
 * ENOSYS (kernel without it), EPERM (seccomp, as in Docker's default
 * profile, or kernel.io_uring_disabled=2 since 6.6), EACCES (some LSMs). */
static bool uring_refused(int err)
{
	return err == -ENOSYS || err == -EPERM || err == -EACCES;
}

int rl_loop_open(rl_loop **out, const struct rl_options *opt)
{
	struct rl_options defaults;
	rl_loop *loop;
	int kind, ret;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!opt) {
		rl_options_init(&defaults);
		opt = &defaults;
	}
	kind = backend_from_env(opt->backend);
	if (kind < RL_BACKEND_AUTO || kind > RL_BACKEND_EPOLL)
		return -EINVAL;
	ret = rl__net_options_check(opt);
	if (ret < 0)
		return ret;

	loop = calloc(1, sizeof(*loop));
	if (!loop)
		return -ENOMEM;
	loop->opt = *opt;
	loop->now_ns = rl__clock_ns();
	atomic_init(&loop->posts, NULL);
	atomic_init(&loop->posters, 0);
	atomic_init(&loop->dead, false);

	if (kind == RL_BACKEND_EPOLL) {
		loop->backend = &rl__backend_epoll;
		loop->backend_reason = "asked for epoll";
		ret = loop->backend->init(loop, opt);
	} else {
		loop->backend = &rl__backend_uring;
		loop->backend_reason = kind == RL_BACKEND_URING
					       ? "asked for uring"
					       : "io_uring available";
		ret = loop->backend->init(loop, opt);
		if (ret < 0 && kind == RL_BACKEND_AUTO && uring_refused(ret)) {
			loop->backend = &rl__backend_epoll;
			loop->backend_reason =
				ret == -ENOSYS ? "io_uring_setup: ENOSYS"
				: ret == -EPERM ? "io_uring_setup: EPERM"
						: "io_uring_setup: EACCES";
			ret = loop->backend->init(loop, opt);
		}
	}
	if (ret < 0) {
		free(loop);
		return ret;
	}
	*out = loop;
	return 0;
}

const char *rl_loop_backend(const rl_loop *loop)
{
	return loop->backend->name;
}

const char *rl_loop_backend_reason(const rl_loop *loop)
{
	return loop->backend_reason;
}

void rl_loop_stats(const rl_loop *loop, struct rl_stats *out)
{
	*out = loop->stats;
}

uint64_t rl_now_ms(const rl_loop *loop)
{
	return loop->now_ns / 1000000u;
}

void rl_ref(rl_loop *loop)
{
	loop->refs++;
}

void rl_unref(rl_loop *loop)
{
	if (loop->refs)
		loop->refs--;
}

void rl_stop(rl_loop *loop)
{
	loop->stop = true;
}

const char *rl_strerror(int err)
{
	switch (err) {
	case -EFBIG:
		return "file larger than the buffer given to read_file";
	case -ECANCELED:
		return "request cancelled";
	case -EBUSY:
		return "request already in flight, or loop running";
	case -EINVAL:
		return "invalid argument (for O_DIRECT I/O: a buffer, offset or "
		       "length not aligned as the file system needs) or "
		       "unsupported option combination";
	default:
		return strerror(err < 0 ? -err : err);
	}
}

void rl__complete(rl_loop *loop, rl_req *req, int64_t result)
{
	if (rl__req(req)->deadline)
		rl__deadline_done(loop, req);
	/* Sockets the loop made or took for a request that will not report
	 * them (net.c), before the result becomes -ECANCELED. */
	if (rl__op_is_net(req->op))
		rl__net_complete(loop, req, result);
	if (rl__req(req)->state & RL__REQ_CANCEL) {
		/* A cancelled open that the kernel finished anyway still made
		 * an fd nobody will ever see: close it here. */
		if (req->op == RL_OP_OPEN && result >= 0) {
			close((int)result);
			loop->stats.syscalls++;
		}
		/* A close that ran cannot be taken back: -ECANCELED would
		 * tell the caller the fd is still open (see rl_fs_close()). */
		if (req->op != RL_OP_CLOSE || result == -ECANCELED)
			result = -ECANCELED;
		if (result == -ECANCELED &&
		    (rl__req(req)->state & RL__REQ_TIMEDOUT))
			result = -ETIMEDOUT;
	}
	req->result = result;
	rl__req(req)->state |= RL__REQ_DONE;
	rl__fifo_push(&loop->ready, req);
}

/* Runs the callbacks that were ready when it started; callbacks that finish
 * further requests (never synchronously, but a cancelled queued request can)
 * land in the next batch. */
static int run_ready(rl_loop *loop)
{
	struct rl__fifo batch = loop->ready;
	rl_req *req;
	int n = 0;

	loop->ready.head = loop->ready.tail = NULL;
	while ((req = rl__fifo_pop(&batch))) {
		rl__req(req)->state = RL__REQ_IDLE;
		loop->active_reqs--;
		loop->stats.completions++;
		n++;
		req->cb(req);
	}
	return n;
}

void rl_task_queue(rl_loop *loop, rl_task *task, void (*fn)(rl_task *task))
{
	task->fn = fn;
	task->next = NULL;
	if (loop->task_tail)
		loop->task_tail->next = task;
	else
		loop->task_head = task;
	loop->task_tail = task;
}

static int run_tasks(rl_loop *loop)
{
	rl_task *task;
	int n = 0;

	while ((task = loop->task_head)) {
		loop->task_head = task->next;
		if (!loop->task_head)
			loop->task_tail = NULL;
		task->next = NULL;
		task->fn(task);
		n++;
	}
	return n;
}

int rl_post(rl_loop *loop, struct rl_post *post, void (*cb)(struct rl_post *post))
{
	struct rl_post *head;

	if (!loop || !post || !cb)
		return -EINVAL;
	post->cb = cb;
	/* Announce this post before looking at "dead", so rl_loop_close()
	 * either sees it in progress and waits, or this call sees dead. */
	atomic_fetch_add_explicit(&loop->posters, 1, memory_order_seq_cst);
	if (atomic_load_explicit(&loop->dead, memory_order_seq_cst)) {
		atomic_fetch_sub_explicit(&loop->posters, 1,
					  memory_order_release);
		return -ESHUTDOWN;
	}
	head = atomic_load_explicit(&loop->posts, memory_order_relaxed);
	do {
		post->next = head;
	} while (!atomic_compare_exchange_weak_explicit(
		&loop->posts, &head, post, memory_order_release,
		memory_order_relaxed));
	/* Only the post that made the stack non-empty wakes the loop: one
	 * eventfd write per batch of posts, not per post. */
	if (!head)
		loop->backend->wake(loop);
	atomic_fetch_sub_explicit(&loop->posters, 1, memory_order_release);
	return 0;
}

void rl__drain_posts(rl_loop *loop)
{
	struct rl_post *list, *rev = NULL, *next;

	if (!atomic_load_explicit(&loop->posts, memory_order_relaxed))
		return;
	list = atomic_exchange_explicit(&loop->posts, NULL,
					memory_order_acquire);
	/* The stack is LIFO; reverse it so posts run in the order made. */
	while (list) {
		next = list->next;
		list->next = rev;
		rev = list;
		list = next;
	}
	while (rev) {
		next = rev->next;
		rev->next = NULL;
		rev->cb(rev);
		rev = next;
	}
}

bool rl__alive(const rl_loop *loop)
{
	return loop->active_reqs || loop->refs || loop->task_head ||
	       rl__timers_alive(loop) ||
	       atomic_load_explicit(&loop->posts, memory_order_relaxed);
}

static int run_batch(rl_loop *loop)
{
	int n = 0;

	n += rl__timers_run(loop);
	n += rl__net_run_items(loop);
	n += run_ready(loop);
	n += run_tasks(loop);
	return n;
}

int rl_run(rl_loop *loop, enum rl_run_mode mode)
{
	int64_t timeout;
	int n = 0, ret;

	if (!loop || (unsigned)mode > RL_RUN_NOWAIT)
		return -EINVAL;
	if (loop->running)
		return -EBUSY;
	loop->running = 1;
	loop->stop = false;
	loop->now_ns = rl__clock_ns();
	n += run_batch(loop);

	while (!loop->stop && rl__alive(loop)) {
		if (mode == RL_RUN_NOWAIT || !rl__fifo_empty(&loop->ready) ||
		    loop->task_head || loop->cancelled_head ||
		    rl__net_items_pending(loop))
			timeout = 0;
		else
			timeout = rl__timers_next_ns(loop);
		ret = loop->backend->wait(loop, timeout);
		if (ret < 0 && ret != -EINTR && ret != -ETIME) {
			n = ret;
			break;
		}
		loop->now_ns = rl__clock_ns();
		rl__drain_posts(loop);
		n += run_batch(loop);
		if (mode != RL_RUN_DEFAULT)
			break;
	}
	loop->running = 0;
	return n;
}

void rl_loop_on_close(rl_loop *loop, rl_close_hook *hook,
		      int (*fn)(rl_close_hook *hook, rl_loop *loop))
{
	hook->fn = fn;
	hook->next = loop->close_hooks;
	loop->close_hooks = hook;
}

void rl_loop_off_close(rl_loop *loop, rl_close_hook *hook)
{
	rl_close_hook **pp;

	for (pp = &loop->close_hooks; *pp; pp = &(*pp)->next)
		if (*pp == hook) {
			*pp = hook->next;
			return;
		}
}

/* The layers above close first, while the loop still runs for them. */
static int run_close_hooks(rl_loop *loop)
{
	rl_close_hook *hook;
	int ret;

	while ((hook = loop->close_hooks)) {
		loop->close_hooks = hook->next;
		ret = hook->fn(hook, loop);
		if (ret < 0) {
			hook->next = loop->close_hooks;
			loop->close_hooks = hook;
			return ret;
		}
	}
	return 0;
}

int rl_loop_close(rl_loop *loop)
{
	int guard = 0, ret;

	if (!loop)
		return -EINVAL;
	if (loop->running)
		return -EBUSY;
	ret = run_close_hooks(loop);
	if (ret < 0)
		return ret;
	loop->closing = true;
	loop->running = 1;
	rl__timers_cancel_all(loop);
	/* Cancel what is in flight, then run the loop until every callback
	 * (and every callback's follow-up, which fails fast while closing)
	 * has run and the backend has nothing left. */
	for (;;) {
		loop->backend->cancel(loop, NULL);
		rl__drain_posts(loop);
		run_batch(loop);
		if (!loop->active_reqs && !loop->task_head &&
		    !loop->cancelled_head)
			break;
		if (rl__fifo_empty(&loop->ready))
			loop->backend->wait(loop, guard++ ? 10000000 : 0);
	}
	/* From here on rl_post() refuses; wait for the posts already past
	 * that check, which may still be touching the backend's eventfd, and
	 * run what they pushed. */
	atomic_store_explicit(&loop->dead, true, memory_order_seq_cst);
	while (atomic_load_explicit(&loop->posters, memory_order_acquire))
		sched_yield();
	rl__drain_posts(loop);
	loop->backend->destroy(loop);
	rl__fs_free(loop);
	rl__net_free(loop);
	rl__timers_free(loop);
	free(loop);
	return 0;
}
