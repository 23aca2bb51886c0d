/* SPDX-License-Identifier: MIT */
/*
 * coro_internal.h - what the coroutine files share: the context switch,
 * stacks and their pool, the coroutine and scheduler structs, and the
 * sanitizer hooks.
 */
#ifndef RL_CORO_INTERNAL_H
#define RL_CORO_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ringloop/coro.h"
#include "list.h"

/* ------------------------------------------------------------ sanitizers */

/* AddressSanitizer: gcc says __SANITIZE_ADDRESS__, clang __has_feature. */
#if defined(__SANITIZE_ADDRESS__)
#define RL__ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RL__ASAN 1
#endif
#endif

/* ------------------------------------------------------------ the switch */

/*
 * Saves the callee-saved state of the running context on its own stack,
 * stores that stack pointer in *save_sp, continues the context whose stack
 * pointer is to_sp, and makes the rl__coro_switch() call that context is
 * suspended in return val. Written in assembly: coro_switch_<arch>.S.
 */
void *rl__coro_switch(void **save_sp, void *to_sp, void *val);

/*
 * rl__coro_switch() for a running context whose floating-point control
 * words are known to be fpctl, as rl__coro_fpctl() returns them: it stores
 * fpctl in the frame instead of reading the control registers, which is
 * the costliest part of a switch on x86-64. Nothing in the library calls
 * it today: the scheduler cannot know the words (coro.c says why), and
 * ringbench --micro measures the switch the scheduler uses. It stays, with
 * its tests (test_coro_switch.c), for a caller that does know them. On AArch64 it is rl__coro_switch itself and fpctl is
 * ignored.
 */
void *rl__coro_switch_known(void **save_sp, void *to_sp, void *val,
			    uint64_t fpctl);

/* The running context's floating-point control words, in the layout of
 * the switch frame: MXCSR in the low 32 bits, the x87 control word in the
 * next 16. 0 where the switch keeps none (AArch64). */
static inline uint64_t rl__coro_fpctl(void)
{
#if defined(__x86_64__)
	uint32_t mxcsr;
	uint16_t fpucw;

	__asm__ volatile("stmxcsr %0" : "=m"(mxcsr));
	__asm__ volatile("fnstcw %0" : "=m"(fpucw));
	return mxcsr | (uint64_t)fpucw << 32;
#else
	return 0;
#endif
}

/*
 * Lays out a first frame at the top of a fresh stack (stack_top, 16-byte
 * aligned) so that the first switch to the returned stack pointer calls
 * entry(arg) on that stack. entry must never return: it ends by switching
 * away for good. The frame inherits the caller's floating-point control
 * state. In coro_ctx.c, next to the layouts of the .S files.
 */
void *rl__coro_ctx_init(void *stack_top, void (*entry)(void *), void *arg);

/* ---------------------------------------------------------------- stacks */

/*
 * One mapping: [guard | usable stack | colour room], described by this
 * header, which is malloc'ed apart so that a stack nobody ran on yet has
 * no page in memory. Every stack of the process is on a global list, so
 * the SIGSEGV handler can tell an overflow into a guard page from any
 * other fault.
 */
struct rl__coro_stack {
	struct rl__coro_stack *gnext; /* the global list */
	struct rl__coro_stack *gprev;
	char *map; /* mmap base: the guard starts here */
	size_t map_len;
	size_t guard;	/* guard bytes at map */
	char *lo, *hi;	/* usable stack [lo, hi) */
	size_t size;	/* the size class: hi - lo as asked */
	unsigned vg_id; /* Valgrind's stack id */
	/* Who runs on it, for the overflow message; written by the loop
	 * thread, read by the signal handler. */
	volatile uint64_t owner_id;
	const char *volatile owner_name;
};

/* A stack of size bytes: the most recently freed one, or a new mapping;
 * NULL when none can be had. put gives it back. */
struct rl__coro_stack *rl__coro_stack_get(rl_coro_pool *pool, size_t size);
void rl__coro_stack_put(rl_coro_pool *pool, struct rl__coro_stack *st);

/* A scheduler starts (use true) or stops sharing pool: the pool refuses
 * to close while one does. */
void rl__coro_pool_use(rl_coro_pool *pool, bool use);

/* Installs the process-wide SIGSEGV handler once, and an alternate signal
 * stack on this thread when it has none. Returns 1 when it installed an
 * alternate stack the caller must release with rl__coro_altstack_put(),
 * 0 when none was needed, or -errno. */
int rl__coro_guard_init(void);
void rl__coro_altstack_put(void);

/* ------------------------------------------------------------ coroutines */

enum {
	RL__CORO_NEW = 0, /* spawned, start microtask queued */
	RL__CORO_RUNNING,
	RL__CORO_SUSPENDED,
	RL__CORO_DONE,
};

/* What a suspended coroutine waits for (co->wait). */
enum {
	RL__WAIT_NONE = 0,
	RL__WAIT_REQ,	/* wait_obj: its rl_req */
	RL__WAIT_TIMER, /* wait_obj: its rl_timer */
	RL__WAIT_JOIN,	/* wait_obj: the rl_coro joined */
	RL__WAIT_TASK,	/* a wake-up microtask is queued */
	RL__WAIT_YIELD, /* yield: its microtask is queued */
	RL__WAIT_AWAIT, /* a wait only its owner can withdraw, with
			 * co->wait_cancel: a promise subscription, a
			 * connection read */
};

struct rl_coro {
	void *sp;	 /* its stack pointer while suspended */
	void *caller_sp; /* the resumer's, while it runs */
	rl_coro_ctx *sched;
	struct rl__coro_stack *stack;
	rl_coro_fn fn;
	void *arg;
	int64_t value;	  /* fn's result once done */
	int64_t wake_val; /* what a microtask wake-up resumes with */
	uint8_t state;	  /* RL__CORO_* */
	uint8_t wait;	  /* RL__WAIT_* */
	bool detached;
	bool joined; /* someone waits in join */
	void *wait_obj;
	/* How to withdraw a wait the scheduler does not know (an await):
	 * called on closing with the coroutine suspended. */
	void (*wait_cancel)(rl_coro *co);
	rl_coro *joiner;
	struct rl_link alive_link; /* the scheduler's alive list */
	struct rl_link start_link; /* the scheduler's list of starts due */
	rl_coro *next_free;	   /* the scheduler's recycled handles */
	size_t stack_size;	   /* asked at spawn, taken at start */
	rl_task task;		   /* start, yield and wake-ups */
	uint64_t id;
	const char *name;
#if defined(RL__ASAN)
	void *asan_fake;	   /* ASan's fake stack while switched out */
	const void *caller_bottom; /* the resumer's stack, for ASan */
	size_t caller_size;
#endif
	/*
	 * The request a suspending file call waits for. It lives here, in
	 * the handles' slab, rather than on the coroutine's stack: the loop
	 * walks its pending and ready queues through the requests, and with
	 * ten thousand coroutines alive a stack page is cold every time (a
	 * TLB miss per hop of a dependent chain), while the slab is dense.
	 * Last, so handle_get() need not clear it.
	 */
	rl_req req;
};

struct rl__coro_slab;

struct rl_coro_ctx {
	rl_loop *loop;
	rl_coro_pool *pool;
	rl_close_hook close_hook; /* rl_loop_close() closes us first */
	bool own_pool;
	bool closing;
	bool closed;  /* unwound by the loop's close, freed at its end */
	int altstack; /* 1: we installed this thread's sigaltstack */
	size_t stack_size;
	struct rl_link alive;	/* rl_coro: spawned, not finished */
	struct rl_link starts;	/* rl_coro: to start, in spawn order */
	size_t io_waiting;	/* coroutines suspended on a request */
	size_t start_window;	/* see rl_coro_ctx_options */
	uint64_t started;	/* coroutines started so far */
	uint64_t progress_then; /* starts + finishes at the last look */
	rl_timer stall_timer;	/* armed while starts are put off */
	rl_task close_starts;	/* closing: starts the put-off ones */
	bool stall_armed;
	unsigned stalled_looks; /* looks in a row that saw no progress */
	rl_coro *free;		/* recycled handles */
	struct rl__coro_slab *slabs;
	struct rl_coro_ctx_stats stats;
};

/* The running coroutine of this thread. initial-exec: one instruction to
 * reach it, also when the library is linked into a shared object. */
extern __thread rl_coro *rl__coro_current
	__attribute__((tls_model("initial-exec")));

/* Switches into co (from the loop thread's stack, or from a coroutine that
 * resumes another) and returns when co suspends or returns; val is what
 * co's suspending call returns. */
void rl__coro_resume(rl_coro *co, int64_t val);

/* Suspends the running coroutine co until rl__coro_resume(co, v); returns
 * v. co->wait and co->wait_obj say what it waits for. */
int64_t rl__coro_suspend(rl_coro *co);

/* Resumes co with val from a microtask (constant stack depth). */
void rl__coro_wake_later(rl_coro *co, int64_t val);

/* From a request's callback: resumes co with val, then starts what start
 * pacing put off, as far as the window allows (see coro.c). */
void rl__coro_io_done(rl_coro *co, int64_t val);

/* The steps of a suspending request call (coro_io.c), for the calls of
 * other files (coro_net.c): the coroutine's request, ready for a
 * submission whose callback is rl__coro_req_done; then the wait for it
 * (ret: what the submission said), which returns the request's result. */
rl_req *rl__coro_req(rl_coro *co);
void rl__coro_req_done(rl_req *req);
int64_t rl__coro_wait_req(rl_coro *co, rl_req *req, int ret);

/* The start of every suspending call: the running coroutine, or NULL with
 * *err set (-EPERM outside a coroutine, -ECANCELED while closing). */
static inline rl_coro *rl__coro_enter(int *err)
{
	rl_coro *co = rl__coro_current;

	if (__builtin_expect(!co, 0)) {
		*err = -EPERM;
		return NULL;
	}
	if (__builtin_expect(co->sched->closing, 0)) {
		*err = -ECANCELED;
		return NULL;
	}
	return co;
}

#endif /* RL_CORO_INTERNAL_H */
