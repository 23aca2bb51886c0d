/* SPDX-License-Identifier: MIT */
/*
 * coro_stack.c - coroutine stacks: mapping, the pool that recycles them,
 * and the SIGSEGV handler that names a coroutine overflowing its stack.
 *
 * A stack is one anonymous mapping with a PROT_NONE guard at its low end.
 * Creating one costs an mmap and an mprotect, so stacks are never unmapped
 * while their pool lives: a finished coroutine's stack goes on the pool's
 * free list (LIFO, so the next coroutine gets pages that are still warm)
 * and the next spawn of that size takes it from there.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coro_internal.h"

/* cppcheck 2.10 cannot evaluate __has_include (it reports a division by
 * zero in the #if); it analyses the build without Valgrind's client
 * requests instead. */
#if defined(__has_include) && !defined(__CPPCHECK__)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define RL__VALGRIND 1
#endif
#endif

#if defined(RL__ASAN)
#include <sanitizer/asan_interface.h>
#endif

/*
 * One free list per stack size asked for; programs use one or two. The
 * list is an array of pointers, not a chain through the stacks: taking a
 * stack or giving it back then touches no page of the stack itself. With
 * 10,000 coroutines alive, every touch of a cold stack page is a cache
 * and TLB miss (a costly two-level walk in a VM), so the stack's memory is
 * first touched when the coroutine starts, not when it is spawned.
 */
struct rl__coro_class {
	struct rl_link link; /* the pool's classes */
	size_t size;
	struct rl__coro_stack **free;
	size_t nfree, cap;
};

struct rl_coro_pool {
	size_t guard;
	size_t users;		/* open schedulers sharing the pool */
	struct rl_link classes; /* struct rl__coro_class */
	struct rl_coro_pool_stats stats;
};

/* Every mapped stack of the process, for the signal handler. Writers hold
 * the mutex; the handler reads without it (it cannot take a lock), which
 * is safe because a stack leaves the list before it is unmapped and the
 * fields it reads are set before the stack joins. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rl__coro_stack *volatile registry;

/* Stack colours: COLOURS offsets, COLOUR_STRIDE cache lines apart. */
#define COLOURS	      16
#define COLOUR_STRIDE 3

static size_t page_size(void)
{
	static size_t ps;

	if (!ps)
		ps = (size_t)sysconf(_SC_PAGESIZE);
	return ps;
}

static size_t round_page(size_t n)
{
	size_t ps = page_size();

	return (n + ps - 1) & ~(ps - 1);
}

int rl_coro_pool_open(rl_coro_pool **out, size_t guard_size)
{
	rl_coro_pool *pool;

	if (!out)
		return -EINVAL;
	*out = NULL;
	pool = calloc(1, sizeof(*pool));
	if (!pool)
		return -ENOMEM;
	rl__list_init(&pool->classes);
	pool->guard = round_page(guard_size ? guard_size : 1);
	*out = pool;
	return 0;
}

void rl_coro_pool_stats(const rl_coro_pool *pool,
			struct rl_coro_pool_stats *out)
{
	*out = pool->stats;
}

static void registry_add(struct rl__coro_stack *st)
{
	pthread_mutex_lock(&registry_lock);
	st->gprev = NULL;
	st->gnext = registry;
	if (registry)
		registry->gprev = st;
	registry = st;
	pthread_mutex_unlock(&registry_lock);
}

static void registry_del(struct rl__coro_stack *st)
{
	pthread_mutex_lock(&registry_lock);
	if (st->gprev)
		st->gprev->gnext = st->gnext;
	else
		registry = st->gnext;
	if (st->gnext)
		st->gnext->gprev = st->gprev;
	pthread_mutex_unlock(&registry_lock);
}

static struct rl__coro_stack *stack_map(rl_coro_pool *pool, size_t size)
{
	/* Room above the usable size for the colour offset below. */
	size_t len = pool->guard +
		     round_page(size + (COLOURS - 1) * 64 * COLOUR_STRIDE);
	struct rl__coro_stack *st;
	char *map;

	/* The header lives apart from the stack, with the other headers:
	 * a stack mapped and not yet run costs no memory at all (ten
	 * thousand coroutines spawned at once reserve ten thousand stacks,
	 * most of which a paced burst never touches; see coro.c). */
	st = malloc(sizeof(*st));
	if (!st)
		return NULL;
	map = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1,
		   0);
	if (map == MAP_FAILED) {
		free(st);
		return NULL;
	}
	if (mprotect(map, pool->guard, PROT_NONE) < 0) {
		munmap(map, len);
		free(st);
		return NULL;
	}
	st->map = map;
	st->map_len = len;
	st->guard = pool->guard;
	st->lo = map + pool->guard;
	/*
	 * Cache colouring: every mapping ends on a page boundary, so without
	 * an offset the hot top frames of all stacks share the same page
	 * offset and compete for the same cache sets. Successive stacks
	 * start a varying number of cache lines lower, in the room left for
	 * it above the usable size.
	 */
	st->hi = map + len - (pool->stats.maps % COLOURS) * 64 * COLOUR_STRIDE;
	st->size = size;
	st->owner_id = 0;
	st->owner_name = NULL;
#if defined(RL__VALGRIND)
	st->vg_id = VALGRIND_STACK_REGISTER(st->lo, st->hi);
#endif
	registry_add(st);
	pool->stats.maps++;
	pool->stats.mapped++;
	return st;
}

static void stack_unmap(rl_coro_pool *pool, struct rl__coro_stack *st)
{
	registry_del(st);
#if defined(RL__VALGRIND)
	VALGRIND_STACK_DEREGISTER(st->vg_id);
#endif
#if defined(RL__ASAN)
	/* Frames of a coroutine that ended by switching away stay poisoned
	 * in ASan's shadow; the memory may be mapped again for anything. */
	ASAN_UNPOISON_MEMORY_REGION(st->lo, (size_t)(st->hi - st->lo));
#endif
	pool->stats.mapped--;
	munmap(st->map, st->map_len);
	free(st);
}

static struct rl__coro_class *class_of(rl_coro_pool *pool, size_t size)
{
	struct rl_link *link;
	struct rl__coro_class *c;

	rl__list_for_each(link, &pool->classes)
	{
		c = RL__CONTAINER(link, struct rl__coro_class, link);
		if (c->size == size)
			return c;
	}
	return NULL;
}

/*
 * A stack is had when its coroutine starts, not when it is spawned: a
 * spawn costs no mapping, so a program may spawn a million coroutines
 * (vm.max_map_count allows some 32,000 stacks of two mappings each) as
 * long as start pacing (coro.c) keeps the number started bounded. The
 * start takes the top of the LIFO list, the stack a coroutine gave back
 * last, whose pages are still in the caches and the TLB; only when the
 * list is empty is a new one mapped. Ten thousand coroutines spawned at
 * once whose starts are spread out run on a few hundred warm stacks.
 */
struct rl__coro_stack *rl__coro_stack_get(rl_coro_pool *pool, size_t size)
{
	struct rl__coro_class *c = class_of(pool, size);
	struct rl__coro_stack *st;

	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return NULL;
		c->size = size;
		rl__list_add_head(&pool->classes, &c->link);
	}
	if (c->nfree) {
		pool->stats.reuses++;
		pool->stats.idle--;
		return c->free[--c->nfree];
	}
	/* Room for every stack of the pool on the list: put never has to
	 * allocate. */
	if (!c->free || c->cap < pool->stats.mapped + 1) {
		size_t cap = c->cap ? c->cap * 2 : 64;
		struct rl__coro_stack **a;

		while (cap < pool->stats.mapped + 1)
			cap *= 2;
		a = realloc(c->free, cap * sizeof(*a));
		if (!a)
			return NULL;
		c->free = a;
		c->cap = cap;
	}
	st = stack_map(pool, size);
	return st;
}

void rl__coro_stack_put(rl_coro_pool *pool, struct rl__coro_stack *st)
{
	struct rl__coro_class *c = class_of(pool, st->size);

#if defined(RL__ASAN)
	/* The coroutine never returned through its frames: clear their
	 * redzones before another coroutine uses the same memory. */
	ASAN_UNPOISON_MEMORY_REGION(st->lo, (size_t)(st->hi - st->lo));
#endif
	/* c exists (st came from it) and has room (see get). */
	c->free[c->nfree++] = st;
	pool->stats.idle++;
}

void rl__coro_pool_use(rl_coro_pool *pool, bool use)
{
	if (use)
		pool->users++;
	else
		pool->users--;
}

int rl_coro_pool_close(rl_coro_pool *pool)
{
	struct rl__coro_class *c;
	struct rl_link *link;

	if (!pool)
		return -EINVAL;
	/* A scheduler that shares the pool takes its next stack from it:
	 * freeing the pool under an idle scheduler is a use after free at
	 * its next start. */
	if (pool->users || pool->stats.mapped != pool->stats.idle)
		return -EBUSY;
	while ((link = rl__list_pop(&pool->classes))) {
		c = RL__CONTAINER(link, struct rl__coro_class, link);
		while (c->nfree)
			stack_unmap(pool, c->free[--c->nfree]);
		free(c->free);
		free(c);
	}
	free(pool);
	return 0;
}

/* ------------------------------------------------------ overflow handler */

static struct sigaction old_segv;
static pthread_once_t segv_once = PTHREAD_ONCE_INIT;
static int segv_err;

/* Async-signal-safe formatting: no stdio in a signal handler. */
static size_t put_str(char *buf, size_t at, size_t cap, const char *s)
{
	while (s && *s && at < cap)
		buf[at++] = *s++;
	return at;
}

static size_t put_num(char *buf, size_t at, size_t cap, uint64_t v, int base)
{
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = "0123456789abcdef"[v % (unsigned)base];
		v /= (unsigned)base;
	} while (v);
	if (base == 16)
		at = put_str(buf, at, cap, "0x");
	while (n && at < cap)
		buf[at++] = tmp[--n];
	return at;
}

static void segv_handler(int sig, siginfo_t *si, void *uctx)
{
	char *addr = si->si_addr;
	struct rl__coro_stack *st;
	char msg[256];
	size_t n = 0;
	int saved = errno;

	(void)uctx;
	for (st = registry; st; st = st->gnext)
		if (addr >= st->map && addr < st->map + st->guard)
			break;
	if (!st) {
		/* Not ours: hand the fault to whoever handled SIGSEGV before
		 * (a sanitizer, or the default action). Returning re-runs the
		 * faulting instruction, which now meets that handler. */
		sigaction(SIGSEGV, &old_segv, NULL);
		errno = saved;
		return;
	}
	n = put_str(msg, n, sizeof(msg), "ringloop: coroutine ");
	n = put_num(msg, n, sizeof(msg), st->owner_id, 10);
	if (st->owner_name) {
		n = put_str(msg, n, sizeof(msg), " (");
		n = put_str(msg, n, sizeof(msg), st->owner_name);
		n = put_str(msg, n, sizeof(msg), ")");
	}
	n = put_str(msg, n, sizeof(msg), ": stack overflow, ");
	n = put_num(msg, n, sizeof(msg), (uint64_t)(st->hi - st->lo), 10);
	n = put_str(msg, n, sizeof(msg), "-byte stack, guard page hit at ");
	n = put_num(msg, n, sizeof(msg), (uint64_t)(uintptr_t)addr, 16);
	n = put_str(msg, n, sizeof(msg), "\n");
	if (write(STDERR_FILENO, msg, n) < 0) {
		/* Nothing left to tell it with. */
	}
	/* Die of the fault itself, as the program would have without us. */
	signal(sig, SIG_DFL);
	errno = saved;
}

static void segv_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = segv_handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, &old_segv) < 0)
		segv_err = -errno;
}

/* The alternate signal stack this thread got from us, and how many
 * schedulers on this thread share it. */
static __thread void *altstack_mem;
static __thread size_t altstack_len;
static __thread unsigned altstack_users;

int rl__coro_guard_init(void)
{
	stack_t ss, old;

	pthread_once(&segv_once, segv_install);
	if (segv_err)
		return segv_err;
	if (altstack_users) {
		altstack_users++;
		return 1;
	}
	/* An overflow leaves no stack to run a handler on: it needs an
	 * alternate one. Keep the program's (or a sanitizer's) if set. */
	if (sigaltstack(NULL, &old) < 0)
		return -errno;
	if (!(old.ss_flags & SS_DISABLE))
		return 0;
	altstack_len = round_page(SIGSTKSZ > 65536 ? SIGSTKSZ : 65536);
	altstack_mem = mmap(NULL, altstack_len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (altstack_mem == MAP_FAILED) {
		altstack_mem = NULL;
		return -ENOMEM;
	}
	memset(&ss, 0, sizeof(ss));
	ss.ss_sp = altstack_mem;
	ss.ss_size = altstack_len;
	if (sigaltstack(&ss, NULL) < 0) {
		int err = -errno;

		munmap(altstack_mem, altstack_len);
		altstack_mem = NULL;
		return err;
	}
	altstack_users = 1;
	return 1;
}

void rl__coro_altstack_put(void)
{
	stack_t ss;

	if (!altstack_users || --altstack_users)
		return;
	memset(&ss, 0, sizeof(ss));
	ss.ss_flags = SS_DISABLE;
	sigaltstack(&ss, NULL);
	munmap(altstack_mem, altstack_len);
	altstack_mem = NULL;
}
