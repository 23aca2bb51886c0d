/* SPDX-License-Identifier: MIT */
/*
 * coro.c - the coroutine scheduler: spawn, resume and suspend, join,
 * yield, and closing.
 *
 * Switching is asymmetric: a coroutine is always resumed by someone (the
 * loop thread, from a request's or timer's callback or from a microtask)
 * and suspends back to exactly that resumer. Because callbacks run inside
 * rl_run() on the loop's own stack, a completion can switch straight into
 * the waiting coroutine: no queue between the callback and the coroutine.
 * Wake-ups that do not come from the loop (start, yield, join, a closing
 * scheduler) go through the coroutine's own rl_task, so the stack depth
 * stays constant however many coroutines wake one another.
 *
 * A finished coroutine cannot free the stack it runs on: it switches back
 * to its resumer for the last time, and the resumer, back on its own
 * stack, returns the stack to the pool (coro_finished()).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coro_internal.h"

#if defined(RL__ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

__thread rl_coro *rl__coro_current __attribute__((tls_model("initial-exec")));

/* Handles come from slabs, recycled through a free list: a steady state of
 * spawning does not call malloc. */
#define SLAB_HANDLES 64

struct rl__coro_slab {
	struct rl__coro_slab *next;
	rl_coro co[SLAB_HANDLES];
};

/* Process-wide numbering, for messages; loops on several threads spawn
 * at the same time. */
static _Atomic uint64_t next_id;

/* --------------------------------------------------------------- handles */

static rl_coro *handle_get(rl_coro_ctx *s)
{
	rl_coro *co = s->free;

	if (!co) {
		struct rl__coro_slab *slab = malloc(sizeof(*slab));

		if (!slab)
			return NULL;
		slab->next = s->slabs;
		s->slabs = slab;
		for (int i = SLAB_HANDLES - 1; i >= 0; i--) {
			/* Once per handle: the loop leaves the request
			 * reusable after each callback. */
			rl_req_init(&slab->co[i].req);
			slab->co[i].next_free = s->free;
			s->free = &slab->co[i];
		}
		co = s->free;
	}
	s->free = co->next_free;
	/* Everything but the request, which each call sets up itself. */
	memset(co, 0, offsetof(rl_coro, req));
	s->stats.handles++;
	return co;
}

static void handle_put(rl_coro *co)
{
	rl_coro_ctx *s = co->sched;

	co->sched = NULL; /* a stale handle then fails loudly in join */
	co->next_free = s->free;
	s->free = co;
	s->stats.handles--;
}

static void alive_add(rl_coro_ctx *s, rl_coro *co)
{
	rl__list_add_head(&s->alive, &co->alive_link);
	s->stats.alive++;
}

static void alive_del(rl_coro_ctx *s, rl_coro *co)
{
	rl__list_del(&co->alive_link);
	s->stats.alive--;
	/* Closing (unwind_all()) waits for the last coroutine, not for the
	 * loop to go idle: a reference someone else holds on the loop (a
	 * remote promise handle out on another loop) would keep that
	 * rl_run() going for ever. */
	if (s->closing && rl__list_empty(&s->alive))
		rl_stop(s->loop);
}

/* --------------------------------------------------------- the switching */

#if defined(RL__ASAN)
/* ASan must know which stack is current, or it takes the coroutine's
 * frames for a stack overflow or reports false positives. */
#define ASAN_START(fake, bottom, size) \
	__sanitizer_start_switch_fiber(fake, bottom, size)
#define ASAN_FINISH(fake, bottom, size) \
	__sanitizer_finish_switch_fiber(fake, bottom, size)
#else
#define ASAN_START(fake, bottom, size)	((void)0)
#define ASAN_FINISH(fake, bottom, size) ((void)0)
#endif

static void coro_finished(rl_coro *co);

/*
 * Both switches read the running side's floating-point control words
 * (rl__coro_switch, not rl__coro_switch_known): whatever resumes a
 * coroutine - a callback, a microtask, rl_coro_ctx_close() - gets back
 * exactly the MXCSR, flags included, and x87 control word it had, even if
 * the code that ran since changed them. Knowing them in advance would
 * save one read per round trip, but only the loop could say when they may
 * have changed (docs/experiments.md).
 */
void rl__coro_resume(rl_coro *co, int64_t val)
{
	rl_coro *prev = rl__coro_current;
#if defined(RL__ASAN)
	void *fake = NULL;
#endif

	co->state = RL__CORO_RUNNING;
	co->wait = RL__WAIT_NONE;
	co->wait_obj = NULL;
	rl__coro_current = co;
	ASAN_START(&fake, co->stack->lo,
		   (size_t)(co->stack->hi - co->stack->lo));
	rl__coro_switch(&co->caller_sp, co->sp, (void *)(intptr_t)val);
	ASAN_FINISH(fake, NULL, NULL);
	rl__coro_current = prev;
	if (co->state == RL__CORO_DONE)
		coro_finished(co);
}

int64_t rl__coro_suspend(rl_coro *co)
{
	void *val;

	co->state = RL__CORO_SUSPENDED;
	ASAN_START(&co->asan_fake, co->caller_bottom, co->caller_size);
	val = rl__coro_switch(&co->sp, co->caller_sp, NULL);
	ASAN_FINISH(co->asan_fake, &co->caller_bottom, &co->caller_size);
	return (int64_t)(intptr_t)val;
}

/* The first C frame on a coroutine's stack (called by the trampoline). */
static void coro_main(void *arg)
{
	rl_coro *co = arg;

	ASAN_FINISH(NULL, &co->caller_bottom, &co->caller_size);
	co->value = co->fn(co->arg);
	co->state = RL__CORO_DONE;
	/* NULL: this fiber is gone, ASan may forget its fake frames. */
	ASAN_START(NULL, co->caller_bottom, co->caller_size);
	rl__coro_switch(&co->sp, co->caller_sp, NULL);
	abort(); /* nobody resumes a finished coroutine */
}

static void wake_task(rl_task *task)
{
	rl_coro *co = RL__CONTAINER(task, rl_coro, task);

	rl__coro_resume(co, co->wake_val);
}

/* The stack is taken (mapped, or the most recently freed one), and its
 * memory first touched, when the coroutine starts, not in spawn: a
 * million spawns cost no mapping (see coro_stack.c). A coroutine that
 * cannot get one never runs: it ends at once with -ENOMEM, which a join
 * returns. */
static void start_now(rl_coro *co)
{
	struct rl__coro_stack *st;

	st = rl__coro_stack_get(co->sched->pool, co->stack_size);
	if (!st) {
		co->value = -ENOMEM;
		co->state = RL__CORO_DONE;
		coro_finished(co);
		return;
	}
	co->stack = st;
	st->owner_id = co->id;
	st->owner_name = co->name;
	co->sp = rl__coro_ctx_init(st->hi, coro_main, co);
	rl__coro_resume(co, 0);
}

/*
 * Start pacing. A program that spawns ten thousand coroutines which each
 * read a file at once would otherwise start them all in one drain of the
 * microtask queue: each touches a stack page and queues a request, and by
 * the time its data arrives and it resumes, that page has long left the
 * caches and the TLB (cold visits at the start, at the kernel's copy into
 * a buffer on the stack and at the resume; docs/experiments.md has what
 * that cost). So a start waits while start_window coroutines of the
 * scheduler wait for requests; each completion lets the next one start,
 * on the stack the finished coroutine gave back, still warm. Requests
 * keep flowing: the window is wider than a ring's worth of small reads.
 */
static bool start_put_off(const rl_coro_ctx *s)
{
	return s->io_waiting >= s->start_window && !s->closing;
}

static void start_first(rl_coro_ctx *s)
{
	struct rl_link *link = rl__list_pop(&s->starts);

	s->started++;
	start_now(RL__CONTAINER(link, rl_coro, start_link));
}

static void arm_stall_timer(rl_coro_ctx *s);

static void start_more(rl_coro_ctx *s)
{
	while (!rl__list_empty(&s->starts) && !start_put_off(s))
		start_first(s);
	if (rl__list_empty(&s->starts)) {
		if (s->stall_armed) {
			rl_timer_stop(s->loop, &s->stall_timer);
			s->stall_armed = false;
		}
	} else if (!s->stall_armed) {
		arm_stall_timer(s);
	}
}

/*
 * The window must never hold a start back for good. The coroutines of a
 * server live as long as their connections and wait on I/O nearly all the
 * time: with a window's worth of them idle, no request completes, and
 * with a window's worth busy, each completion is followed by the next
 * wait before the starts are looked at; either way the next connection's
 * coroutine would never start. So while starts are put off a timer looks
 * every RL__CORO_STALL_MS at whether any coroutine started or finished;
 * after two looks in a row that saw none it starts a window's worth
 * regardless. Two looks, so that at least one whole loop iteration (its
 * completions reaped) lies between them: a burst of short coroutines
 * finishes some in every iteration and never trips it, however slow the
 * iteration (the sanitizers, Valgrind).
 */
#define RL__CORO_STALL_MS 1

static uint64_t progress(const rl_coro_ctx *s)
{
	return s->started + s->stats.finished;
}

static void stall_check(rl_timer *t, int status)
{
	rl_coro_ctx *s = t->data;

	s->stall_armed = false;
	if (status < 0 || rl__list_empty(&s->starts))
		return;
	if (progress(s) != s->progress_then) {
		s->stalled_looks = 0;
	} else if (++s->stalled_looks >= 2) {
		s->stalled_looks = 0;
		for (size_t n = s->start_window;
		     n > 0 && !rl__list_empty(&s->starts); n--) {
			s->stats.unpaced++;
			start_first(s);
		}
	}
	if (!rl__list_empty(&s->starts) && !s->stall_armed)
		arm_stall_timer(s);
}

static void arm_stall_timer(rl_coro_ctx *s)
{
	s->stall_timer.data = s;
	s->progress_then = progress(s);
	if (rl_timer_start(s->loop, &s->stall_timer, RL__CORO_STALL_MS, 0,
			   stall_check) == 0)
		s->stall_armed = true;
}

static void start_task(rl_task *task)
{
	rl_coro *co = RL__CONTAINER(task, rl_coro, task);
	rl_coro_ctx *s = co->sched;

	rl__list_add_tail(&s->starts, &co->start_link);
	start_more(s);
}

/*
 * A request's callback, on the loop's stack, switches straight back into
 * the coroutine that waited for it; when that coroutine has suspended
 * again or finished, a put-off start may go ahead.
 */
void rl__coro_io_done(rl_coro *co, int64_t val)
{
	rl_coro_ctx *s = co->sched; /* co may be freed by the resume */

	rl__coro_resume(co, val);
	if (!rl__list_empty(&s->starts))
		start_more(s);
}

void rl__coro_wake_later(rl_coro *co, int64_t val)
{
	co->wake_val = val;
	co->wait = RL__WAIT_TASK;
	rl_task_queue(co->sched->loop, &co->task, wake_task);
}

/* Back on the resumer's stack after co returned from its function. */
static void coro_finished(rl_coro *co)
{
	rl_coro_ctx *s = co->sched;
	rl_coro *joiner = co->joiner;

	alive_del(s, co);
	if (co->stack)
		rl__coro_stack_put(s->pool, co->stack);
	co->stack = NULL;
	s->stats.finished++;
	if (joiner) {
		rl__coro_wake_later(joiner, co->value);
		joiner->wait_obj = NULL;
		handle_put(co);
	} else if (co->detached) {
		handle_put(co);
	}
}

/* ------------------------------------------------------------- scheduler */

static void sched_free(rl_coro_ctx *s)
{
	struct rl__coro_slab *slab;

	while ((slab = s->slabs)) {
		s->slabs = slab->next;
		free(slab);
	}
	if (s->own_pool)
		rl_coro_pool_close(s->pool);
	else
		rl__coro_pool_use(s->pool, false);
	if (s->altstack == 1)
		rl__coro_altstack_put();
	free(s);
}

static int unwind_all(rl_coro_ctx *s);

/* rl_loop_close() of our loop, before the loop cancels anything: every
 * coroutine is cancelled and unwound while the loop still works; the
 * memory goes at the last call, when no callback can reach it. */
static int close_with_loop(rl_close_hook *hook, rl_loop *loop)
{
	rl_coro_ctx *s = RL__CONTAINER(hook, rl_coro_ctx, close_hook);

	(void)loop;
	if (s->closed) {
		sched_free(s);
		return 0;
	}
	if (unwind_all(s) < 0)
		return -EBUSY;
	s->closed = true;
	return RL_CLOSE_AGAIN;
}

int rl_coro_ctx_open(rl_loop *loop, rl_coro_ctx **out,
		     const struct rl_coro_ctx_options *opt)
{
	rl_coro_ctx *s;
	int ret;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!loop)
		return -EINVAL;
	if (opt && opt->stack_size && opt->stack_size < RL_CORO_STACK_MIN)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->loop = loop;
	rl__list_init(&s->alive);
	rl__list_init(&s->starts);
	s->stack_size = opt && opt->stack_size ? opt->stack_size
					       : RL_CORO_STACK_DEFAULT;
	s->start_window = opt && opt->start_window ? opt->start_window
						   : RL_CORO_START_WINDOW;
	if (opt && opt->pool) {
		s->pool = opt->pool;
	} else {
		ret = rl_coro_pool_open(&s->pool, 0);
		if (ret < 0) {
			free(s);
			return ret;
		}
		s->own_pool = true;
	}
	ret = rl__coro_guard_init();
	if (ret < 0) {
		if (s->own_pool)
			rl_coro_pool_close(s->pool);
		free(s);
		return ret;
	}
	s->altstack = ret;
	if (!s->own_pool)
		rl__coro_pool_use(s->pool, true);
	rl_loop_on_close(loop, &s->close_hook, close_with_loop);
	*out = s;
	return 0;
}

rl_loop *rl_coro_ctx_loop(const rl_coro_ctx *sched)
{
	return sched->loop;
}

void rl_coro_ctx_stats(const rl_coro_ctx *sched, struct rl_coro_ctx_stats *out)
{
	*out = sched->stats;
}

/* Makes whatever co waits for finish now, with -ECANCELED where it can. */
static void cancel_wait(rl_coro_ctx *s, rl_coro *co)
{
	rl_coro *target;

	switch (co->wait) {
	case RL__WAIT_REQ:
		/* The callback still runs, so the kernel is done with the
		 * buffers on co's stack before co continues. */
		rl_cancel(s->loop, co->wait_obj);
		break;
	case RL__WAIT_TIMER:
		rl_timer_cancel(s->loop, co->wait_obj);
		break;
	case RL__WAIT_JOIN:
		target = co->wait_obj;
		target->joiner = NULL;
		target->joined = false;
		rl__coro_wake_later(co, -ECANCELED);
		break;
	case RL__WAIT_YIELD:
		/* Its task is queued: it resumes with -ECANCELED instead. */
		co->wake_val = -ECANCELED;
		break;
	case RL__WAIT_AWAIT:
		co->wait_cancel(co);
		break;
	default:
		/* Not started yet: it will start and see every call fail. */
		break;
	}
}

static void close_starts_task(rl_task *task)
{
	start_more(RL__CONTAINER(task, rl_coro_ctx, close_starts));
}

/* Cancels what every coroutine waits for and runs the loop until all have
 * returned. -EBUSY when some stay suspended regardless (an await of a
 * promise nothing can settle, whose withdrawal failed), or when called
 * from inside the loop, where it could not wait. */
static int unwind_all(rl_coro_ctx *s)
{
	struct rl_link *link;
	int ret;

	if (rl__coro_current)
		return -EBUSY;
	if (rl__list_empty(&s->alive)) {
		s->closing = true;
		return 0;
	}
	/* Inside rl_run() (a callback) we could not wait for the
	 * coroutines; find out before changing anything. */
	ret = rl_run(s->loop, RL_RUN_NOWAIT);
	if (ret == -EBUSY)
		return -EBUSY;
	if (!s->closing) {
		s->closing = true;
		rl__list_for_each(link, &s->alive) cancel_wait(
			s, RL__CONTAINER(link, rl_coro, alive_link));
		/* Put-off starts run now; every call they make fails with
		 * -ECANCELED. From a microtask, as every start, not from
		 * here: the loop's close calls us outside rl_run(), and a
		 * coroutine running there could close the loop under
		 * itself (rl_loop_close() refuses only inside rl_run()). */
		if (!rl__list_empty(&s->starts))
			rl_task_queue(s->loop, &s->close_starts,
				      close_starts_task);
	}
	/* Until the last coroutine returns (alive_del() stops the loop then)
	 * or the loop goes idle with some still waiting. */
	while (!rl__list_empty(&s->alive)) {
		ret = rl_run(s->loop, RL_RUN_DEFAULT);
		if (ret <= 0)
			break; /* idle: only awaits of lost promises */
	}
	return rl__list_empty(&s->alive) ? 0 : -EBUSY;
}

int rl_coro_ctx_close(rl_coro_ctx *s)
{
	if (!s)
		return -EINVAL;
	/* Once the loop's close has begun, its hook works with s (and
	 * comes back to it at the end of that close) even when no coroutine
	 * is left: a close from a callback or microtask run meanwhile would
	 * free s under it. The loop frees s then. */
	if (rl__coro_current || !rl__list_empty(&s->alive) || s->closing)
		return -EBUSY;
	rl_loop_off_close(s->loop, &s->close_hook);
	if (s->stall_armed)
		rl_timer_stop(s->loop, &s->stall_timer);
	sched_free(s);
	return 0;
}

/* ------------------------------------------------------------- coroutines */

int rl_coro_spawn(rl_coro_ctx *s, rl_coro **out, rl_coro_fn fn, void *arg,
		  const struct rl_coro_options *opt)
{
	size_t size = opt && opt->stack_size ? opt->stack_size
		      : s		     ? s->stack_size
					     : 0;
	static size_t ps;
	rl_coro *co;

	if (out)
		*out = NULL;
	if (!s || !fn || size < RL_CORO_STACK_MIN || size > ((size_t)1 << 40))
		return -EINVAL;
	if (s->closing)
		return -ECANCELED;
	if (!ps)
		ps = (size_t)sysconf(_SC_PAGESIZE);
	size = (size + ps - 1) & ~(ps - 1);
	co = handle_get(s);
	if (!co)
		return -ENOMEM;
	co->stack_size = size;
	co->sched = s;
	co->fn = fn;
	co->arg = arg;
	co->id = atomic_fetch_add_explicit(&next_id, 1, memory_order_relaxed) +
		 1;
	co->name = opt ? opt->name : NULL;
	co->detached = !out;
	co->state = RL__CORO_NEW;
	alive_add(s, co);
	s->stats.spawned++;
	rl_task_queue(s->loop, &co->task, start_task);
	if (out)
		*out = co;
	return 0;
}

int rl_coro_detach(rl_coro *co)
{
	if (!co || !co->sched || co->detached || co->joined)
		return -EINVAL;
	if (co->state == RL__CORO_DONE)
		handle_put(co);
	else
		co->detached = true;
	return 0;
}

rl_coro *rl_coro_self(void)
{
	return rl__coro_current;
}

rl_loop *rl_coro_loop(void)
{
	return rl__coro_current ? rl__coro_current->sched->loop : NULL;
}

uint64_t rl_coro_id(const rl_coro *co)
{
	return co->id;
}

const char *rl_coro_name(const rl_coro *co)
{
	return co->name;
}

int rl_coro_done(const rl_coro *co)
{
	return co->state == RL__CORO_DONE;
}

int64_t rl_coro_join(rl_coro *co)
{
	rl_coro *self = rl__coro_current;
	int64_t v;

	if (!self)
		return -EPERM;
	if (co == self)
		return -EDEADLK;
	if (!co || co->sched != self->sched || co->detached || co->joined)
		return -EINVAL;
	if (co->state == RL__CORO_DONE) {
		v = co->value;
		handle_put(co);
		return v;
	}
	if (self->sched->closing)
		return -ECANCELED;
	co->joined = true;
	co->joiner = self;
	self->wait = RL__WAIT_JOIN;
	self->wait_obj = co;
	return rl__coro_suspend(self);
}

int rl_coro_yield(void)
{
	int err;
	rl_coro *co = rl__coro_enter(&err);

	if (!co)
		return err;
	rl__coro_wake_later(co, 0);
	co->wait = RL__WAIT_YIELD;
	return (int)rl__coro_suspend(co);
}
