/* SPDX-License-Identifier: MIT */
/*
 * coro_ctx.c - the first frame of a new coroutine stack.
 *
 * A new context is made to look like one that is suspended inside
 * rl__coro_switch(): the frame the switch pops (see the layout at the top
 * of coro_switch_<arch>.S) holds the entry function and its argument in
 * two callee-saved registers and, as the place to continue, the assembly
 * trampoline that calls entry(arg). The first switch to it therefore needs
 * no special case in the switch itself.
 */
#include <stdint.h>
#include <string.h>

#include "coro_internal.h"

void rl__coro_trampoline(void);

#if defined(__x86_64__)

void *rl__coro_ctx_init(void *stack_top, void (*entry)(void *), void *arg)
{
	/* After the switch pops its 64-byte frame, rsp must be 16-byte
	 * aligned so the trampoline's call enters entry() as the ABI wants
	 * (rsp + 8 aligned); 16 bytes above the frame stay zero. */
	uint64_t *sp =
		(uint64_t *)((uintptr_t)stack_top & ~(uintptr_t)15) - 2 - 8;

	memset(sp, 0, 10 * sizeof(*sp));
	/* The new context starts with the creator's rounding modes and
	 * exception masks, as a called function would. */
	sp[0] = rl__coro_fpctl();
	sp[3] = (uint64_t)(uintptr_t)arg;   /* r13 */
	sp[4] = (uint64_t)(uintptr_t)entry; /* r12 */
	sp[6] = 0; /* rbp: the end of the frame chain */
	sp[7] = (uint64_t)(uintptr_t)rl__coro_trampoline;
	return sp;
}

#elif defined(__aarch64__)

void *rl__coro_ctx_init(void *stack_top, void (*entry)(void *), void *arg)
{
	/* The 160-byte frame sits right below the 16-byte aligned top; after
	 * the switch pops it, sp is the top itself. */
	uint64_t *sp = (uint64_t *)((uintptr_t)stack_top & ~(uintptr_t)15) - 20;

	memset(sp, 0, 20 * sizeof(*sp));
	sp[0] = (uint64_t)(uintptr_t)entry; /* x19 */
	sp[1] = (uint64_t)(uintptr_t)arg;   /* x20 */
	sp[10] = 0; /* x29: the end of the frame chain */
	sp[11] = (uint64_t)(uintptr_t)rl__coro_trampoline; /* x30 */
	return sp;
}

#else
#error "ringloop coroutines: no context switch for this architecture"
#endif
