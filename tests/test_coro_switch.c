/* SPDX-License-Identifier: MIT */
/*
 * test_coro_switch.c - the bare context switch: callee-saved registers and
 * the floating-point control state survive it, each side keeps its own,
 * and unwinders find the end of a coroutine's call chain.
 *
 * These drive rl__coro_switch() directly, without a loop.
 */
#include <execinfo.h>
#include <stdio.h>
#include <unwind.h>
#include <signal.h>
#include <ucontext.h>
#include <fenv.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "coro_internal.h"

static void *main_sp, *co_sp;

/* ------------------------------------------------------ register survival */

#if defined(__x86_64__)
/*
 * regs_switch(save, to, out): loads a known pattern into rbx, rbp and
 * r12-r15, switches with rl__coro_switch(save, to, 0), and on return
 * stores what those registers hold into out[0..5] (then restores the
 * caller's registers). clobber_switch(save, to) fills them with garbage
 * and switches: the other side of the test.
 */
__asm__(
	/* REGS_SWITCH name, target: regs_switch's body around a call of
	 * target. For rl__coro_switch_known, rcx (its fpctl) is the fourth
	 * argument of regs_switch_known as well. */
	"	.macro REGS_SWITCH name, target\n"
	"	.p2align 4\n"
	"\\name:\n"
	"	pushq %rbp\n pushq %rbx\n pushq %r12\n pushq %r13\n"
	"	pushq %r14\n pushq %r15\n pushq %rdx\n"
	"	movabsq $0x1111111111111111, %rbx\n"
	"	movabsq $0x2222222222222222, %rbp\n"
	"	movabsq $0x3333333333333333, %r12\n"
	"	movabsq $0x4444444444444444, %r13\n"
	"	movabsq $0x5555555555555555, %r14\n"
	"	movabsq $0x6666666666666666, %r15\n"
	"	xorl %edx, %edx\n"
	"	call \\target\n"
	"	popq %rdx\n"
	"	movq %rbx, 0(%rdx)\n movq %rbp, 8(%rdx)\n"
	"	movq %r12, 16(%rdx)\n movq %r13, 24(%rdx)\n"
	"	movq %r14, 32(%rdx)\n movq %r15, 40(%rdx)\n"
	"	popq %r15\n popq %r14\n popq %r13\n popq %r12\n"
	"	popq %rbx\n popq %rbp\n"
	"	ret\n"
	"	.endm\n"
	"	.text\n"
	"	REGS_SWITCH regs_switch, rl__coro_switch\n"
	"	REGS_SWITCH regs_switch_known, rl__coro_switch_known\n"
	"	.p2align 4\n"
	"clobber_switch:\n"
	"	pushq %rbp\n pushq %rbx\n pushq %r12\n pushq %r13\n"
	"	pushq %r14\n pushq %r15\n subq $8, %rsp\n"
	"	movq $-1, %rbx\n movq $-2, %rbp\n movq $-3, %r12\n"
	"	movq $-4, %r13\n movq $-5, %r14\n movq $-6, %r15\n"
	"	xorl %edx, %edx\n"
	"	call rl__coro_switch\n"
	"	addq $8, %rsp\n"
	"	popq %r15\n popq %r14\n popq %r13\n popq %r12\n"
	"	popq %rbx\n popq %rbp\n"
	"	ret\n");

void regs_switch(void **save, void *to, uint64_t out[6]);
void regs_switch_known(void **save, void *to, uint64_t out[6], uint64_t fpctl);
void clobber_switch(void **save, void *to);

static void clobber_entry(void *arg)
{
	(void)arg;
	for (;;)
		clobber_switch(&co_sp, main_sp);
}

static void *co_stack;

static void *new_context(void (*entry)(void *), void *arg)
{
	size_t size = 256 * 1024;

	co_stack = aligned_alloc(16, size);
	cr_assert_not_null(co_stack);
	return rl__coro_ctx_init((char *)co_stack + size, entry, arg);
}

Test(coro_switch, callee_saved_registers_survive)
{
	static const uint64_t want[6] = {
		0x1111111111111111ull, 0x2222222222222222ull,
		0x3333333333333333ull, 0x4444444444444444ull,
		0x5555555555555555ull, 0x6666666666666666ull,
	};
	uint64_t got[6];

	co_sp = new_context(clobber_entry, NULL);
	for (int round = 0; round < 1000; round++) {
		/* Odd rounds go in the way the scheduler resumes. */
		memset(got, 0, sizeof(got));
		if (round & 1)
			regs_switch_known(&main_sp, co_sp, got,
					  rl__coro_fpctl());
		else
			regs_switch(&main_sp, co_sp, got);
		for (int i = 0; i < 6; i++)
			cr_assert_eq(got[i], want[i], "round %d reg %d: %#llx",
				     round, i, (unsigned long long)got[i]);
	}
	free(co_stack);
}
#endif /* __x86_64__ */

/* ---------------------------------------------- the value and many trips */

static uint64_t trips;

static void count_entry(void *arg)
{
	uintptr_t v = (uintptr_t)arg;

	for (;;) {
		trips++;
		/* Echo back what we got, plus one. */
		v = (uintptr_t)rl__coro_switch(&co_sp, main_sp,
					       (void *)(v + 1));
	}
}

Test(coro_switch, a_million_round_trips_carry_values)
{
	size_t size = 64 * 1024;
	void *stack = aligned_alloc(16, size);

	trips = 0;
	co_sp = rl__coro_ctx_init((char *)stack + size, count_entry, (void *)7);
	cr_assert_eq((uintptr_t)rl__coro_switch(&main_sp, co_sp, NULL), 8);
	for (uintptr_t i = 0; i < 1000000; i++) {
		uintptr_t r =
			(uintptr_t)rl__coro_switch(&main_sp, co_sp, (void *)i);

		if (r != i + 1)
			cr_assert_fail("trip %lu returned %lu",
				       (unsigned long)i, (unsigned long)r);
	}
	cr_assert_eq(trips, 1000001);
	free(stack);
}

/* ------------------------------------------- floating-point control state */

static int co_round_seen, co_round_bad;

#if defined(__x86_64__)
static unsigned x87_rounding(void)
{
	uint16_t cw;

	__asm__ volatile("fnstcw %0" : "=m"(cw));
	return (cw >> 10) & 3;
}

static unsigned sse_rounding(void)
{
	uint32_t mx;

	__asm__ volatile("stmxcsr %0" : "=m"(mx));
	return (mx >> 13) & 3;
}
#endif

static void fp_entry(void *arg)
{
	(void)arg;
	/* The coroutine starts with its creator's mode (FE_UPWARD) and then
	 * picks its own. */
	co_round_seen = fegetround();
	fesetround(FE_TOWARDZERO);
	for (;;) {
		rl__coro_switch(&co_sp, main_sp, NULL);
		if (fegetround() != FE_TOWARDZERO)
			co_round_bad++;
#if defined(__x86_64__)
		/* Both units: x87 control word and MXCSR (RC 3 = to zero). */
		if (x87_rounding() != 3 || sse_rounding() != 3)
			co_round_bad++;
#endif
	}
}

Test(coro_switch, floating_point_control_state_is_per_context)
{
	size_t size = 64 * 1024;
	void *stack = aligned_alloc(16, size);
	int old = fegetround();
	volatile double a = 1.0, b = 3.0;
	/* volatile: the divisions may not move across fesetround() (clang
	 * does not honour FENV_ACCESS and would otherwise fold them). */
	volatile double up, zero;

	fesetround(FE_UPWARD);
	co_sp = rl__coro_ctx_init((char *)stack + size, fp_entry, NULL);
	co_round_bad = 0;
	for (int i = 0; i < 1000; i++) {
		rl__coro_switch(&main_sp, co_sp, NULL);
		cr_assert_eq(fegetround(), FE_UPWARD, "trip %d", i);
#if defined(__x86_64__)
		cr_assert_eq(x87_rounding(), 2); /* RC 2 = up */
		cr_assert_eq(sse_rounding(), 2);
#endif
	}
	cr_assert_eq(co_round_seen, FE_UPWARD);
	cr_assert_eq(co_round_bad, 0);
	/* The mode really rounds: 1/3 upward is above 1/3 toward zero.
	 * (Valgrind computes in round-to-nearest whatever the mode.) */
	up = a / b;
	fesetround(FE_TOWARDZERO);
	zero = a / b;
	if (!getenv("RL_VALGRIND"))
		cr_assert(up > zero);
	fesetround(old);
	free(stack);
}

/* The scheduler's way in: the resumer's control words are the ones it is
 * told, not read, and the coroutine still keeps its own. */
Test(coro_switch, switch_known_restores_the_words_it_was_given)
{
	size_t size = 64 * 1024;
	void *stack = aligned_alloc(16, size);
	int old = fegetround();
	uint64_t down, up;

	fesetround(FE_DOWNWARD);
	down = rl__coro_fpctl();
	fesetround(FE_UPWARD);
	up = rl__coro_fpctl();
	co_sp = rl__coro_ctx_init((char *)stack + size, fp_entry, NULL);
	co_round_bad = 0;
	for (int i = 0; i < 1000; i++) {
		rl__coro_switch_known(&main_sp, co_sp, NULL, up);
		cr_assert_eq(fegetround(), FE_UPWARD, "trip %d", i);
	}
	cr_assert_eq(co_round_seen, FE_UPWARD);
	cr_assert_eq(co_round_bad, 0);
#if defined(__x86_64__)
	/* Told "down" while running "up": the words come back as told. */
	cr_assert_neq(down, up);
	rl__coro_switch_known(&main_sp, co_sp, NULL, down);
	cr_assert_eq(fegetround(), FE_DOWNWARD);
	cr_assert_eq(x87_rounding(), 1); /* RC 1 = down */
	cr_assert_eq(sse_rounding(), 1);
	cr_assert_eq(co_round_bad, 0);
#else
	/* AArch64 switches no control state: the words are ignored. */
	cr_assert_eq(down, 0);
	cr_assert_eq(up, 0);
#endif
	fesetround(old);
	free(stack);
}

/* ------------------------------------------------------------- unwinding */

static int bt_frames;

static void __attribute__((noinline)) bt_leaf(void)
{
	void *frames[64];

	bt_frames = backtrace(frames, 64);
}

static void bt_entry(void *arg)
{
	(void)arg;
	bt_leaf();
	for (;;)
		rl__coro_switch(&co_sp, main_sp, NULL);
}

/* libgcc's unwinder follows the CFI of the coroutine's frames and stops
 * at the trampoline, whose return address is marked undefined: a short,
 * finite backtrace instead of a walk into garbage. */
Test(coro_switch, unwinder_stops_at_the_trampoline)
{
	size_t size = 64 * 1024;
	void *stack = aligned_alloc(16, size);

	bt_frames = -1;
	co_sp = rl__coro_ctx_init((char *)stack + size, bt_entry, NULL);
	rl__coro_switch(&main_sp, co_sp, NULL);
	cr_assert_geq(bt_frames, 3, "frames: %d",
		      bt_frames); /* leaf, entry, trampoline */
	cr_assert_leq(bt_frames, 6, "frames: %d", bt_frames);
	free(stack);
}

#if defined(__x86_64__)
/*
 * The CFI at every instruction. The switch runs with the trap flag set, so
 * SIGTRAP arrives after each of its instructions, and the handler unwinds
 * from there with libgcc, as gdb would. One frame above the switch it must
 * find the call that entered a switch on the stack rsp describes - this
 * side's before the stack pointer moves, the other side's after - with
 * that side's rbx, rbp and r12-r15 as they were at the call. A wrong or
 * missing CFI rule shows there, at the instruction it is wrong for.
 *
 * step_in(save, to, val, fpctl) loads side A's register pattern, sets the
 * trap flag and calls rl__coro_switch_known; step_out(save, to, val) does
 * the same with side B's pattern and rl__coro_switch. Both keep their
 * caller's registers and describe themselves with CFI.
 */
__asm__("	.macro STEP name, target, pattern\n"
	"	.p2align 4\n"
	"\\name:\n"
	"	.cfi_startproc\n"
	"	pushq %rbp\n .cfi_adjust_cfa_offset 8\n .cfi_rel_offset %rbp, 0\n"
	"	pushq %rbx\n .cfi_adjust_cfa_offset 8\n .cfi_rel_offset %rbx, 0\n"
	"	pushq %r12\n .cfi_adjust_cfa_offset 8\n .cfi_rel_offset %r12, 0\n"
	"	pushq %r13\n .cfi_adjust_cfa_offset 8\n .cfi_rel_offset %r13, 0\n"
	"	pushq %r14\n .cfi_adjust_cfa_offset 8\n .cfi_rel_offset %r14, 0\n"
	"	pushq %r15\n .cfi_adjust_cfa_offset 8\n .cfi_rel_offset %r15, 0\n"
	"	movabsq $\\pattern + 0, %rbx\n"
	"	movabsq $\\pattern + 1, %rbp\n"
	"	movabsq $\\pattern + 2, %r12\n"
	"	movabsq $\\pattern + 3, %r13\n"
	"	movabsq $\\pattern + 4, %r14\n"
	"	movabsq $\\pattern + 5, %r15\n"
	"	pushfq\n .cfi_adjust_cfa_offset 8\n"
	"	orq $0x100, (%rsp)\n"
	"	popfq\n .cfi_adjust_cfa_offset -8\n"
	"	call \\target\n"
	"\\name\\()_ret:\n"
	"	popq %r15\n .cfi_adjust_cfa_offset -8\n .cfi_restore %r15\n"
	"	popq %r14\n .cfi_adjust_cfa_offset -8\n .cfi_restore %r14\n"
	"	popq %r13\n .cfi_adjust_cfa_offset -8\n .cfi_restore %r13\n"
	"	popq %r12\n .cfi_adjust_cfa_offset -8\n .cfi_restore %r12\n"
	"	popq %rbx\n .cfi_adjust_cfa_offset -8\n .cfi_restore %rbx\n"
	"	popq %rbp\n .cfi_adjust_cfa_offset -8\n .cfi_restore %rbp\n"
	"	ret\n"
	"	.cfi_endproc\n"
	"	.endm\n"
	"	.text\n"
	"	STEP step_in, rl__coro_switch_known, 0xa0a0a0a0a0a0a0a0\n"
	"	STEP step_out, rl__coro_switch, 0xb0b0b0b0b0b0b0b0\n");

#define SIDE_A 0xa0a0a0a0a0a0a0a0ull
#define SIDE_B 0xb0b0b0b0b0b0b0b0ull

void *step_in(void **save, void *to, void *val, uint64_t fpctl);
void *step_out(void **save, void *to, void *val);
extern char step_in_ret[], step_out_ret[];
/* The .S puts both switches first, then the trampoline. */
extern char rl__coro_trampoline[];

#define EFLAGS_TF 0x100

/* DWARF numbers of rbx, rbp, r12-r15, in the order of the patterns. */
static const int dwarf_regs[6] = { 3, 6, 12, 13, 14, 15 };

static struct {
	bool check;	      /* off while the new context starts */
	const char *moves[2]; /* each switch's `mov %rsi, %rsp` */
	int steps, bad;
	char where[96];	    /* the first bad step */
	uintptr_t pcs[128]; /* distinct instructions seen */
	int npcs;
} step;

struct walk {
	uintptr_t pc;
	int state; /* 0: looking for pc, 1: at the frame above, 2: done */
	uintptr_t ip;
	uint64_t regs[6];
};

static _Unwind_Reason_Code walk_frame(struct _Unwind_Context *ctx, void *arg)
{
	struct walk *w = arg;

	if (w->state == 0) {
		if (_Unwind_GetIP(ctx) == w->pc)
			w->state = 1;
		return _URC_NO_REASON;
	}
	w->ip = _Unwind_GetIP(ctx);
	for (int i = 0; i < 6; i++)
		w->regs[i] = _Unwind_GetGR(ctx, dwarf_regs[i]);
	w->state = 2;
	return _URC_END_OF_STACK;
}

/* The `mov %rsi, %rsp` in fn: from the next instruction on, rsp is the
 * other side's. */
static const char *find_move(const char *fn)
{
	for (const char *p = fn; p < rl__coro_trampoline; p++)
		if ((unsigned char)p[0] == 0x48 &&
		    (unsigned char)p[1] == 0x89 && (unsigned char)p[2] == 0xf4)
			return p;
	return NULL;
}

static void on_step(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	char *pc = (char *)uc->uc_mcontext.gregs[REG_RIP];
	bool in_known = pc >= (char *)rl__coro_switch_known;
	const char *fn = in_known ? (char *)rl__coro_switch_known
				  : (char *)rl__coro_switch;
	/* switch_known is entered from side A, the switch from side B. */
	bool moved = pc > step.moves[in_known];
	bool side_a = in_known != moved;
	const char *want_ip = side_a ? step_in_ret : step_out_ret;
	uint64_t want = side_a ? SIDE_A : SIDE_B;
	struct walk w = { .pc = (uintptr_t)pc };
	int k;

	(void)sig;
	(void)si;
	if (pc < (char *)rl__coro_switch || pc >= rl__coro_trampoline) {
		/* Landed in the other context: stop stepping. */
		uc->uc_mcontext.gregs[REG_EFL] &= ~EFLAGS_TF;
		return;
	}
	if (!step.check)
		return;
	step.steps++;
	for (k = 0; k < step.npcs && step.pcs[k] != (uintptr_t)pc; k++)
		;
	if (k == step.npcs && step.npcs < 128)
		step.pcs[step.npcs++] = (uintptr_t)pc;
	_Unwind_Backtrace(walk_frame, &w);
	k = w.state == 2 && w.ip == (uintptr_t)want_ip ? -1 : 6;
	for (int i = 0; k < 0 && i < 6; i++)
		if (w.regs[i] != want + (uint64_t)i)
			k = i;
	if (k >= 0 && !step.bad++)
		snprintf(step.where, sizeof(step.where), "%s+%ld: %s",
			 in_known ? "rl__coro_switch_known" : "rl__coro_switch",
			 (long)(pc - fn),
			 k == 6 ? "wrong caller" : "wrong register value");
}

static void step_entry(void *arg)
{
	(void)arg;
	for (;;)
		step_out(&co_sp, main_sp, NULL);
}

Test(coro_switch, unwinder_follows_every_instruction)
{
	size_t size = 64 * 1024;
	void *stack = aligned_alloc(16, size);
	struct sigaction sa = { .sa_sigaction = on_step,
				.sa_flags = SA_SIGINFO },
			 old;
	uint64_t fpctl = rl__coro_fpctl();
	struct walk warm = { 0 };

	if (getenv("RL_VALGRIND"))
		cr_skip_test("Valgrind does not single-step (no trap flag)");
	/* Loads and initialises the unwinder outside the handler. */
	_Unwind_Backtrace(walk_frame, &warm);
	memset(&step, 0, sizeof(step));
	step.moves[0] = find_move((char *)rl__coro_switch);
	step.moves[1] = find_move((char *)rl__coro_switch_known);
	cr_assert(step.moves[0] && step.moves[1] > step.moves[0]);
	cr_assert_eq(sigaction(SIGTRAP, &sa, &old), 0);
	co_sp = rl__coro_ctx_init((char *)stack + size, step_entry, NULL);
	/* The first trip enters at the trampoline, not at a return label. */
	step_in(&main_sp, co_sp, NULL, fpctl);
	step.check = true;
	for (int i = 0; i < 10; i++)
		step_in(&main_sp, co_sp, NULL, fpctl);
	cr_assert_eq(sigaction(SIGTRAP, &old, NULL), 0);
	cr_assert_eq(step.bad, 0, "%d of %d steps unwound wrong, first at %s",
		     step.bad, step.steps, step.where);
	/* Every instruction of both switches, each round: 23 + 21 of them
	 * today; a trap flag that did not take would show 0. */
	cr_assert_eq(step.steps % 10, 0, "steps %d", step.steps);
	cr_assert_eq(step.npcs, step.steps / 10, "pcs %d", step.npcs);
	cr_assert_geq(step.npcs, 40, "pcs %d", step.npcs);
	free(stack);
}
#endif /* __x86_64__ */
