/* SPDX-License-Identifier: MIT */
/*
 * coro_switch_x86_64.S - the coroutine context switch for x86-64 (SysV).
 *
 *	void *rl__coro_switch(void **save_sp, void *to_sp, void *val);
 *	void *rl__coro_switch_known(void **save_sp, void *to_sp, void *val,
 *				    uint64_t fpctl);
 *
 * The running context pushes what the SysV ABI makes callee-saved - rbx,
 * rbp, r12-r15, and MXCSR and the x87 control word - onto its own stack,
 * parks its stack pointer in *save_sp, and the other context pops the
 * same frame off its stack. Frame at the saved sp:
 *
 *	0: MXCSR (4 bytes), x87 control word (2), padding (2)
 *	8: r15   16: r14   24: r13   32: r12   40: rbx   48: rbp
 *	56: the address to continue at (the return address of its call)
 *
 * rl__coro_switch reads the control words with STMXCSR and FNSTCW;
 * rl__coro_switch_known is told them (fpctl: MXCSR in the low 32 bits, the
 * x87 word in the next 16) and pushes that instead, for a caller that
 * knows them already. Reading them is the costliest part of a switch.
 *
 * Every context's frame has this layout, so a single set of CFI rules
 * ("CFA = rsp + k, register r saved at CFA - n") describes whichever stack
 * rsp points into, before and after the stack pointer moves: gdb and
 * libgcc unwind through a suspended switch at any instruction.
 *
 * The return. A plain `ret` here returns to a different place than the
 * `call` that entered (the other context's call site), so the return
 * stack predictor would miss on every switch; popping the address and
 * jumping through a register lets the indirect branch predictor learn the
 * pattern instead (docs/experiments.md has the measurements).
 *
 * Control-flow enforcement (CET), when the compiler targets it (__CET__,
 * e.g. gcc -fcf-protection): the entry points start with ENDBR64, and the
 * jump to the other context is a NOTRACK jump, because it lands after a
 * call (the other context's call of the switch), where no ENDBR64 is - as
 * the compiler's own jump tables do. The object's GNU property note then
 * marks it IBT-compatible, so that linking it keeps indirect branch
 * tracking for the program. It does NOT mark it SHSTK-compatible: with
 * shadow stacks enforced, each coroutine would need a shadow stack of its
 * own (map_shadow_stack, switched with RSTORSSP/SAVEPREVSSP) and the
 * pop + jmp return would have to drop the pending shadow-stack entry
 * (INCSSP). Without that, the first `ret` after a switch would not match
 * the shadow stack and fault. So a program built for shadow stacks loses
 * them when it links ringloop's coroutines (the linker ANDs the property
 * notes) rather than crashing.
 *
 * rl__coro_trampoline is where a new context starts (see coro_ctx.c): r12
 * holds the entry function and r13 its argument. Its CFI marks the return
 * address undefined, the end of the coroutine's call chain for unwinders.
 */

#if defined(__CET__) && (__CET__ & 1)
#define ENDBR	endbr64
#define NOTRACK	notrack
#else
#define ENDBR
#define NOTRACK
#endif

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
	NOTRACK jmpq	*%rcx
.endm

	.globl	rl__coro_switch
	.hidden	rl__coro_switch
	.type	rl__coro_switch, @function
	.p2align 4
rl__coro_switch:
	.cfi_startproc
	ENDBR
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
	ENDBR
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
	ENDBR
	.cfi_undefined %rip
	movq	%r13, %rdi
	callq	*%r12
	ud2
	.cfi_endproc
	.size	rl__coro_trampoline, .-rl__coro_trampoline

	.section .note.GNU-stack, "", @progbits

#if defined(__CET__) && (__CET__ & 1)
/* The GNU property note: GNU_PROPERTY_X86_FEATURE_1_AND with the IBT bit
 * only (see the top of this file for why not SHSTK). */
	.section .note.gnu.property, "a"
	.p2align 3
	.long	4		/* name size: "GNU" and its NUL */
	.long	16		/* descriptor size: one property, padded */
	.long	5		/* NT_GNU_PROPERTY_TYPE_0 */
	.asciz	"GNU"
	.long	0xc0000002	/* GNU_PROPERTY_X86_FEATURE_1_AND */
	.long	4		/* its data size */
	.long	1		/* GNU_PROPERTY_X86_FEATURE_1_IBT */
	.p2align 3
#endif
