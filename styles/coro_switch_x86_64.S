/* SPDX-License-Identifier: MIT */
/*
 * coro_switch_x86_64.S - the coroutine context switch for x86-64 (SysV).
 *
 *	void *rl__coro_switch(void **save_sp, void *to_sp, void *val);
 *	void *rl__coro_switch_known(void **save_sp, void *to_sp, void *val,
 *				    uint64_t fpctl);
 *
 * The running context pushes what the SysV ABI makes callee-saved - rbx,
 * rbp, r12-r15, and the control bits of MXCSR and the x87 control word -
 * onto its own stack, parks its stack pointer in *save_sp, and the other
 * context pops the same frame off its stack. Frame at the saved sp:
 *
 *	0: MXCSR (4 bytes), x87 control word (2), padding (2)
 *	8: r15   16: r14   24: r13   32: r12   40: rbx   48: rbp
 *	56: the address to continue at (the return address of its call)
 *
 * rl__coro_switch reads the control words with STMXCSR and FNSTCW;
 * rl__coro_switch_known is told them (fpctl: MXCSR in the low 32 bits, the
 * x87 word in the next 16) and pushes that instead. Only the resumer uses
 * it, with words read once per loop epoch (coro.c explains why that is
 * exact for the control bits, and coro.h what it means for MXCSR's
 * exception flags); a coroutine's words are read at every suspend.
 *
 * Every context's frame has this layout, so a single set of CFI rules
 * ("CFA = rsp + k, register r saved at CFA - n") describes whichever stack
 * rsp points into, before and after the stack pointer moves: gdb and
 * libgcc unwind through a suspended switch at any instruction.
 *
 * The return. A plain `ret` here returns to a different place than the
 * `call` that entered (the other context's call site), so the return
 * stack predictor misses on every switch; popping the address and jumping
 * through a register lets the indirect branch predictor learn the pattern
 * instead. Measured on an AMD EPYC (Zen) VM, a switch there and back: ret
 * 25.7 ns, pop + jmp 11.3 ns (without the FP control state: 20.2 / 6.5).
 * Again on the Zen 5 VM below, best of 20 batches of 10^6, three runs:
 * ret 24.9 ns, pop + jmp 10.8-10.9 (with the resumer's words known: 23.5-23.7
 * and 9.2).
 *
 * The control words. Reading them is the costly part: on a Zen 5 (family
 * 26) VM at ~3.4 GHz, best of 20 batches of 10^6, three runs each, the
 * round trip took 6.9-7.8 ns with no floating-point state at all and
 * 10.9-12.2 ns with both words read and restored on both sides, and the
 * reads (STMXCSR, FNSTCW) were ~3.5 ns of those 4, whatever the order:
 * stored first into the red zone 11.2-12.0, VSTMXCSR 11.1-11.6, MOVs
 * instead of PUSH/POP 11.4-12.3; restores only, no reads, 10.2-11.1.
 * Comparing old and new words to skip LDMXCSR/FLDCW never paid: 14 ns on
 * the way out (the compare reads what STMXCSR just wrote, which is not
 * forwarded) and no gain on the way in (9.2-9.5 ns against 9.2-9.5). With
 * the resumer's words known, one read per round trip: 8.8-9.5 ns in the
 * harness, 8.9-9.0 ns in `ringbench --micro`. Leaving the resumer's
 * callee-saved registers to the compiler (an inline-asm resume that
 * clobbers them) measured 8.8-9.4 ns: not worth a second frame layout.
 *
 * In a loop with thousands of coroutines the switch is dominated by
 * something else: LDMXCSR waits for its load from the resumed stack and
 * holds everything after it, so a cold stack line costs the whole miss
 * (80% of the switch's perf samples with 10,000 coroutines started at
 * once). coro.c paces starts so that the stacks in use stay warm.
 *
 * rl__coro_trampoline is where a new context starts (see coro_ctx.c): r12
 * holds the entry function and r13 its argument. Its CFI marks the return
 * address undefined, the end of the coroutine's call chain for unwinders.
 */
	.text

/* Pushes the six callee-saved registers, with CFI. */
.macro	PUSH_REGS
	pushq	%rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %rbp, 0
	pushq	%rbx
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %rbx, 0
	pushq	%r12
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %r12, 0
	pushq	%r13
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %r13, 0
	pushq	%r14
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %r14, 0
	pushq	%r15
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %r15, 0
.endm

/* The switch proper, once the running context's frame is complete: park
 * rsp, take the other context's, pop its frame and continue it. */
.macro	SWITCH_AND_POP
	movq	%rsp, (%rdi)
	movq	%rsi, %rsp

	ldmxcsr	(%rsp)
	fldcw	4(%rsp)
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	popq	%r15
	.cfi_adjust_cfa_offset -8
	.cfi_restore %r15
	popq	%r14
	.cfi_adjust_cfa_offset -8
	.cfi_restore %r14
	popq	%r13
	.cfi_adjust_cfa_offset -8
	.cfi_restore %r13
	popq	%r12
	.cfi_adjust_cfa_offset -8
	.cfi_restore %r12
	popq	%rbx
	.cfi_adjust_cfa_offset -8
	.cfi_restore %rbx
	popq	%rbp
	.cfi_adjust_cfa_offset -8
	.cfi_restore %rbp
	movq	%rdx, %rax
	popq	%rcx
	.cfi_adjust_cfa_offset -8
	.cfi_register %rip, %rcx
	jmpq	*%rcx
.endm

	.globl	rl__coro_switch
	.hidden	rl__coro_switch
	.type	rl__coro_switch, @function
	.p2align 4
rl__coro_switch:
	.cfi_startproc
	PUSH_REGS
	subq	$8, %rsp
	.cfi_adjust_cfa_offset 8
	stmxcsr	(%rsp)
	fnstcw	4(%rsp)
	SWITCH_AND_POP
	.cfi_endproc
	.size	rl__coro_switch, .-rl__coro_switch

	.globl	rl__coro_switch_known
	.hidden	rl__coro_switch_known
	.type	rl__coro_switch_known, @function
	.p2align 4
rl__coro_switch_known:
	.cfi_startproc
	PUSH_REGS
	pushq	%rcx
	.cfi_adjust_cfa_offset 8
	SWITCH_AND_POP
	.cfi_endproc
	.size	rl__coro_switch_known, .-rl__coro_switch_known

	.globl	rl__coro_trampoline
	.hidden	rl__coro_trampoline
	.type	rl__coro_trampoline, @function
	.p2align 4
rl__coro_trampoline:
	.cfi_startproc
	.cfi_undefined %rip
	movq	%r13, %rdi
	callq	*%r12
	ud2
	.cfi_endproc
	.size	rl__coro_trampoline, .-rl__coro_trampoline

	.section .note.GNU-stack, "", @progbits
