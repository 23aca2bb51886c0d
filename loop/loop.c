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
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

__thread rl_loop *rl__loop_current;

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

#define RL__STR(x)  #x
#define RL__XSTR(x) RL__STR(x)

const char *rl_version_string(void)
{
	return RL__XSTR(RL_VERSION_MAJOR) "." RL__XSTR(
		RL_VERSION_MINOR) "." RL__XSTR(RL_VERSION_PATCH);
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
 * profile, or kernel.io_uring_disabled=2 since 6.6), EACCES (some LSMs);
 * and ENOMEM when no ring fits in what the process may lock (kernels
 * before 5.12 charge rings to RLIMIT_MEMLOCK, 64 KiB by default in many
 * containers; the backend has tried smaller rings already). */
static bool uring_refused(int err)
{
	return err == -ENOSYS || err == -EPERM || err == -EACCES ||
	       err == -ENOMEM;
}

/* "io_uring_setup: ENOMEM (RLIMIT_MEMLOCK 64 KiB)" and the like. */
static void set_fallback_reason(rl_loop *loop, int err)
{
	const char *name = err == -ENOSYS   ? "ENOSYS"
			   : err == -EPERM  ? "EPERM"
			   : err == -EACCES ? "EACCES"
					    : "ENOMEM";
	struct rlimit rl;

	if (err == -ENOMEM && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 &&
	    rl.rlim_cur != RLIM_INFINITY)
		snprintf(loop->reason_buf, sizeof(loop->reason_buf),
			 "io_uring_setup: %s (RLIMIT_MEMLOCK %llu KiB)", name,
			 (unsigned long long)rl.rlim_cur / 1024);
	else
		snprintf(loop->reason_buf, sizeof(loop->reason_buf),
			 "io_uring_setup: %s", name);
	loop->backend_reason = loop->reason_buf;
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
	if (opt->pool_signal < -1 || opt->pool_signal >= NSIG ||
	    opt->pool_signal == SIGKILL || opt->pool_signal == SIGSTOP)
		return -EINVAL;
	if (opt->idle_spin_ns > RL_IDLE_SPIN_MAX_NS)
		return -EINVAL;

	loop = calloc(1, sizeof(*loop));
	if (!loop)
		return -ENOMEM;
	loop->opt = *opt;
	if (!loop->opt.read_file_max)
		loop->opt.read_file_max = RL_READ_FILE_MAX_DEFAULT;
	/* A group sets its own default (group.c). */
	loop->idle_spin_ns =
		opt->idle_spin_ns > 0 ? (uint64_t)opt->idle_spin_ns : 0;
	loop->now_ns = rl__clock_ns();
	rl__list_init(&loop->tasks);
	rl__list_init(&loop->cancelled);
	rl__list_init(&loop->close_hooks);
	rl__list_init(&loop->release_hooks);
	atomic_init(&loop->posts, NULL);
	atomic_init(&loop->posters, 0);
	atomic_init(&loop->dead, false);
	atomic_init(&loop->asleep, false);

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
			set_fallback_reason(loop, ret);
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

unsigned rl_loop_flags(const rl_loop *loop)
{
	return loop->opt.flags;
}

void rl_loop_stats(const rl_loop *loop, struct rl_stats *out)
{
	*out = loop->stats;
}

uint64_t rl_now_ms(const rl_loop *loop)
{
	/* The loop is never a const object: only its cached now changes,
	 * as it would have at the start of the iteration. */
	return rl__now((rl_loop *)(uintptr_t)loop) / 1000000u;
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

/*
 * Descriptions of the codes the layers above the loop own. The loop knows
 * none of them: each layer registers a function once, and rl_strerror()
 * asks them in turn. Slots are filled with a compare-and-swap and never
 * emptied, so readers need no lock.
 */
#define RL__DESCRIBERS 8

typedef const char *(*rl__describe_fn)(int err);
static _Atomic(rl__describe_fn) describers[RL__DESCRIBERS];

int rl_strerror_register(const char *(*describe)(int err))
{
	if (!describe)
		return -EINVAL;
	for (int i = 0; i < RL__DESCRIBERS; i++) {
		rl__describe_fn cur = NULL;

		if (atomic_compare_exchange_strong(&describers[i], &cur,
						   describe) ||
		    cur == describe)
			return 0;
	}
	return -ENOSPC;
}

const char *rl_strerror(int err)
{
	static __thread char unknown[40];
	int e = err < 0 ? -err : err;
	const char *s;

	/* The C library's text, without its locale or its "Unknown error"
	 * for codes it does not know (those may belong to a layer). */
	if (e < 4096 && (s = strerrordesc_np(e)))
		return s;
	for (int i = 0; i < RL__DESCRIBERS; i++) {
		rl__describe_fn fn = atomic_load(&describers[i]);

		if (!fn)
			break;
		if ((s = fn(err)))
			return s;
	}
	snprintf(unknown, sizeof(unknown), "unknown error %d", err);
	return unknown;
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
		/* What ran cannot be taken back. A close that ran: -ECANCELED
		 * would tell the caller the fd is still open (see
		 * rl_fs_close()). A read or receive that took bytes: from a
		 * pipe or a socket they are gone, so the caller must get
		 * them. */
		bool took = rl__op_is_read(req->op) || req->op == RL_OP_RECV ||
			    req->op == RL_OP_RECVMSG;
		bool ran = (req->op == RL_OP_CLOSE && result != -ECANCELED) ||
			   (took && result > 0);

		if (!ran)
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
		/* A lent buffer comes back once its callback has returned;
		 * the callback may have reused req by then. */
		void *loan =
			(rl__req(req)->state & RL__REQ_LOAN) ? req->buf : NULL;
		size_t loan_cap = rl__req(req)->cap;

		rl__req(req)->state = RL__REQ_IDLE;
		loop->active_reqs--;
		loop->stats.completions++;
		n++;
		req->cb(req);
		if (loan)
			rl__loan_back(loop, loan, loan_cap);
	}
	return n;
}

void rl_task_queue(rl_loop *loop, rl_task *task, void (*fn)(rl_task *task))
{
	task->fn = fn;
	rl__list_add_tail(&loop->tasks, &task->link);
}

static int run_tasks(rl_loop *loop)
{
	struct rl_link *link;
	rl_task *task;
	int n = 0;

	while ((link = rl__list_pop(&loop->tasks))) {
		task = RL__CONTAINER(link, rl_task, link);
		task->fn(task);
		n++;
	}
	return n;
}

int rl_post(rl_loop *loop, struct rl_post *post,
	    void (*cb)(struct rl_post *post))
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
	/* Only a sleeping loop is woken, once per sleep (msg.c). */
	rl__msg_wake(loop);
	atomic_fetch_sub_explicit(&loop->posters, 1, memory_order_release);
	return 0;
}

int rl__drain_posts(rl_loop *loop)
{
	struct rl_post *list, *rev = NULL, *next;
	int n = 0;

	if (!atomic_load_explicit(&loop->posts, memory_order_relaxed))
		return 0;
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
		n++;
	}
	return n;
}

bool rl__alive(const rl_loop *loop)
{
	return loop->active_reqs || loop->backend_busy || loop->refs ||
	       !rl__list_empty(&loop->tasks) || rl__timers_alive(loop) ||
	       atomic_load_explicit(&loop->posts, memory_order_relaxed);
}

static int run_batch(rl_loop *loop)
{
	int n = 0;

	if (rl__timers_alive(loop))
		n += rl__timers_run(loop);
	n += rl__net_run_items(loop);
	n += run_ready(loop);
	n += run_tasks(loop);
	return n;
}

/* Whether the loop has something to run without waiting. */
static bool has_work(rl_loop *loop)
{
	return !rl__fifo_empty(&loop->ready) || !rl__list_empty(&loop->tasks) ||
	       !rl__list_empty(&loop->cancelled) || rl__net_items_pending(loop);
}

/*
 * The poll before a sleep (rl_options.idle_spin_ns): looks at the posts
 * and asks the backend for completions without waiting, until something
 * arrives, the bound passes or the next timer (timeout ns away; -1: none)
 * is due. Returns > 0 when something arrived, 0 when it did not, or the
 * backend's error.
 *
 * No wake-up is lost to it. While it polls, "asleep" stays false, so a
 * poster only pushes (msg.c): the loop is awake and finds the post here or
 * in going_to_sleep(), which runs after the poll exactly as it does
 * without one. A post made during the last poll, after the poll's final
 * look, is therefore covered by the same argument as any post made just
 * before a sleep (see going_to_sleep()).
 */
static int idle_spin(rl_loop *loop, int64_t timeout)
{
	uint64_t limit = loop->idle_spin_ns, start = rl__clock_ns(), now;
	int ret;

	if (timeout > 0 && (uint64_t)timeout < limit)
		limit = (uint64_t)timeout;
	for (;;) {
		if (atomic_load_explicit(&loop->posts, memory_order_relaxed))
			return 1;
		ret = loop->backend->wait(loop, 0);
		if (ret < 0 && ret != -EINTR && ret != -ETIME)
			return ret;
		if (ret > 0 || has_work(loop))
			return 1;
		now = rl__clock_ns();
		if (now - start >= limit) {
			loop->now_ns = now;
			loop->now_stale = false;
			return 0;
		}
		rl__cpu_relax();
	}
}

/*
 * The loop says it sleeps before it looks at the posts one last time; a
 * poster pushes before it looks at the flag. Both pairs are sequentially
 * consistent, so at least one side sees the other: the loop finds the
 * post and does not sleep, or the poster finds the flag and wakes it
 * (msg.c). A busy loop is never woken: it sees the posts after its batch.
 */
static int64_t going_to_sleep(rl_loop *loop, int64_t timeout)
{
	if (timeout == 0)
		return 0;
	atomic_store_explicit(&loop->asleep, true, memory_order_seq_cst);
	if (atomic_load_explicit(&loop->posts, memory_order_seq_cst)) {
		atomic_store_explicit(&loop->asleep, false,
				      memory_order_relaxed);
		return 0;
	}
	return timeout;
}

int rl_run(rl_loop *loop, enum rl_run_mode mode)
{
	int n = rl__run(loop, mode);

	/* Not inside another rl_run() of the same loop (-EBUSY), which
	 * flushes on its own return. */
	if (n != -EBUSY && loop)
		rl__msg_flush(loop);
	/* Returning is, for the loop, like going to sleep: the caller may
	 * not run it again for a long time. Not after an error: on another
	 * thread than the ring's (-EEXIST) the backend must not enter. */
	if (n >= 0 && loop->backend->leave)
		loop->backend->leave(loop);
	return n;
}

int rl__run(rl_loop *loop, enum rl_run_mode mode)
{
	rl_loop *outer = rl__loop_current;
	int64_t timeout;
	int n = 0, ret;

	if (!loop || (unsigned)mode > RL_RUN_NOWAIT)
		return -EINVAL;
	if (loop->running)
		return -EBUSY;
	/* On another thread than the ring's, before any callback runs
	 * there (timers due, ready requests): the loop is not
	 * thread-safe. */
	if (loop->backend->check_run) {
		int err = loop->backend->check_run(loop);

		if (err < 0)
			return err;
	}
	loop->running = 1;
	loop->stop = false;
	rl__loop_current = loop;
	loop->now_ns = rl__clock_ns();
	loop->now_stale = false;
	n += run_batch(loop);

	while (!loop->stop && rl__alive(loop)) {
		/* ONCE whose first batch ran callbacks (timers due by the
		 * time it was called) has run its batch: it looks at the
		 * backend once more without sleeping, else it would wait
		 * for the next event, maybe a timer due in years. */
		if (mode == RL_RUN_NOWAIT || has_work(loop) ||
		    (mode == RL_RUN_ONCE && n > 0))
			timeout = 0;
		else
			timeout = rl__timers_next_ns(loop);
		if (timeout != 0 && loop->idle_spin_ns &&
		    rl__spin_allowed(&loop->idle_spin)) {
			ret = idle_spin(loop, timeout);
			if (ret < 0) {
				n = ret;
				break;
			}
			rl__spin_outcome(&loop->idle_spin, ret > 0);
			/* What arrived runs now; else the timer may be due. */
			timeout = ret > 0 ? 0 : rl__timers_next_ns(loop);
		}
		timeout = going_to_sleep(loop, timeout);
		ret = loop->backend->wait(loop, timeout);
		if (timeout != 0)
			atomic_store_explicit(&loop->asleep, false,
					      memory_order_relaxed);
		if (ret < 0 && ret != -EINTR && ret != -ETIME) {
			n = ret;
			break;
		}
		loop->now_stale = true;
		/* A post's callback is a callback rl_run() ran. */
		n += rl__drain_posts(loop);
		n += run_batch(loop);
		if (mode != RL_RUN_DEFAULT)
			break;
	}
	loop->running = 0;
	rl__loop_current = outer;
	return n;
}

void rl_loop_on_close(rl_loop *loop, rl_close_hook *hook,
		      int (*fn)(rl_close_hook *hook, rl_loop *loop))
{
	hook->fn = fn;
	rl__list_add_head(&loop->close_hooks, &hook->link);
}

void rl_loop_off_close(rl_loop *loop, rl_close_hook *hook)
{
	(void)loop;
	if (rl__list_linked(&hook->link))
		rl__list_del(&hook->link);
}

/* The layers above close first, while the loop still runs for them. A
 * hook that asks for it (RL_CLOSE_AGAIN) waits for its last call. */
static int run_close_hooks(rl_loop *loop)
{
	struct rl_link *link;
	rl_close_hook *hook;
	int ret;

	while ((link = rl__list_pop(&loop->close_hooks))) {
		hook = RL__CONTAINER(link, rl_close_hook, link);
		ret = hook->fn(hook, loop);
		if (ret < 0) {
			rl__list_add_head(&loop->close_hooks, &hook->link);
			return ret;
		}
		if (ret == RL_CLOSE_AGAIN)
			rl__list_add_tail(&loop->release_hooks, &hook->link);
	}
	return 0;
}

/* The last call of the hooks that closed with RL_CLOSE_AGAIN, oldest
 * closed first; nothing of theirs runs after it. */
static void run_release_hooks(rl_loop *loop)
{
	struct rl_link *link;
	rl_close_hook *hook;

	while ((link = rl__list_pop(&loop->release_hooks))) {
		hook = RL__CONTAINER(link, rl_close_hook, link);
		hook->fn(hook, loop);
	}
}

int rl_loop_close(rl_loop *loop)
{
	int ret;

	/* A loop of a group closes with its group (rl_group_close()). */
	if (loop && loop->member)
		return -EBUSY;
	ret = rl__loop_shutdown(loop);
	if (ret == 0)
		rl__loop_free(loop);
	return ret;
}

int rl__loop_shutdown(rl_loop *loop)
{
	int guard = 0, ret;

	if (!loop)
		return -EINVAL;
	if (loop->running)
		return -EBUSY;
	if (loop->backend->check_thread) {
		ret = loop->backend->check_thread(loop);
		if (ret < 0)
			return ret;
	}
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
		if (!loop->active_reqs && rl__list_empty(&loop->tasks) &&
		    rl__list_empty(&loop->cancelled)) {
			if (atomic_load_explicit(&loop->dead,
						 memory_order_relaxed))
				break;
			/* From here on rl_post() refuses; wait for the posts
			 * already past that check, which may still be
			 * touching the backend's eventfd. Then one more pass:
			 * the posts that came since the last drain run, and
			 * so does what their callbacks queue (a task, a
			 * promise's reactions), as for any other post. */
			atomic_store_explicit(&loop->dead, true,
					      memory_order_seq_cst);
			while (atomic_load_explicit(&loop->posters,
						    memory_order_acquire))
				sched_yield();
			continue;
		}
		if (rl__fifo_empty(&loop->ready))
			loop->backend->wait(loop, guard++ ? 10000000 : 0);
	}
	run_release_hooks(loop);
	return 0;
}

void rl__loop_free(rl_loop *loop)
{
	loop->backend->destroy(loop);
	rl__fs_free(loop);
	rl__loan_free(loop);
	rl__net_free(loop);
	rl__timers_free(loop);
	free(loop);
}
