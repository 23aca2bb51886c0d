/* SPDX-License-Identifier: MIT */
/*
 * coro_switch_x86_64.S - the coroutine context switch for x86-64 (SysV).
 *
 *	void *rl__coro_switch(void **save_sp, void *to_sp, void *val);
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
 * STMXCSR alone costs ~4.2 ns here and is the bulk of what remains;
 * comparing the saved and the new control words to skip LDMXCSR/FLDCW was
 * slower (14 ns: the compare reads what STMXCSR just wrote, which cannot
 * be forwarded), and LDMXCSR/FLDCW themselves cost ~0.3 and 0.6 ns.
 * Re-measured on a Zen 5 (family 26) VM, best of 20 batches of 10^6,
 * three runs each: this layout 10.9-12.2 ns; STMXCSR/FNSTCW first into
 * the red zone, before the pushes, 11.2-12.0; VSTMXCSR/VLDMXCSR 11.1-11.6;
 * the control words above the registers 10.9-11.9; MOVs instead of
 * PUSH/POP 11.4-12.3; for reference, MXCSR alone 10.2-10.8 and no
 * floating-point state at all 6.9-7.8. The state costs ~4 ns of the round
 * trip whatever the order; the 10 ns target is not met with it kept.
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

	.globl	rl__coro_switch
	.hidden	rl__coro_switch
	.type	rl__coro_switch, @function
	.p2align 4
rl__coro_switch:
	.cfi_startproc
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
	subq	$8, %rsp
	.cfi_adjust_cfa_offset 8
	stmxcsr	(%rsp)
	fnstcw	4(%rsp)

	/* The switch proper: from here on rsp is the other context's. */
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
	.cfi_endproc
	.size	rl__coro_switch, .-rl__coro_switch

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
