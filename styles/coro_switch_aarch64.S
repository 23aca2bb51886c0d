/* SPDX-License-Identifier: MIT */
/*
 * coro_switch_aarch64.S - the coroutine context switch for AArch64 (AAPCS64).
 *
 *	void *rl__coro_switch(void **save_sp, void *to_sp, void *val);
 *
 * The running context stores what AAPCS64 makes callee-saved - x19-x28,
 * the frame pointer x29, the link register x30 (where to continue) and the
 * low halves d8-d15 of v8-v15 - in a 160-byte frame on its own stack,
 * parks sp in *save_sp, and loads the other context's frame from to_sp:
 *
 *	  0: x19 x20    16: x21 x22    32: x23 x24    48: x25 x26
 *	 64: x27 x28    80: x29 x30    96: d8 d9     112: d10 d11
 *	128: d12 d13   144: d14 d15
 *
 * Both stacks hold the same layout, so one set of CFI rules (CFA = sp +
 * 160 while the frame is on the stack) describes whichever stack sp
 * points into. The return is an ordinary `ret` through x30.
 *
 * rl__coro_trampoline starts a new context (see coro_ctx.c): x19 holds the
 * entry function and x20 its argument; x30 is marked undefined there, the
 * end of the call chain for unwinders.
 */
	.text

	.globl	rl__coro_switch
	.hidden	rl__coro_switch
	.type	rl__coro_switch, %function
	.p2align 4
rl__coro_switch:
	.cfi_startproc
	sub	sp, sp, #160
	.cfi_def_cfa_offset 160
	stp	x19, x20, [sp, #0]
	.cfi_offset x19, -160
	.cfi_offset x20, -152
	stp	x21, x22, [sp, #16]
	.cfi_offset x21, -144
	.cfi_offset x22, -136
	stp	x23, x24, [sp, #32]
	.cfi_offset x23, -128
	.cfi_offset x24, -120
	stp	x25, x26, [sp, #48]
	.cfi_offset x25, -112
	.cfi_offset x26, -104
	stp	x27, x28, [sp, #64]
	.cfi_offset x27, -96
	.cfi_offset x28, -88
	stp	x29, x30, [sp, #80]
	.cfi_offset x29, -80
	.cfi_offset x30, -72
	stp	d8, d9, [sp, #96]
	.cfi_offset d8, -64
	.cfi_offset d9, -56
	stp	d10, d11, [sp, #112]
	.cfi_offset d10, -48
	.cfi_offset d11, -40
	stp	d12, d13, [sp, #128]
	.cfi_offset d12, -32
	.cfi_offset d13, -24
	stp	d14, d15, [sp, #144]
	.cfi_offset d14, -16
	.cfi_offset d15, -8

	/* The switch proper: from here on sp is the other context's. */
	mov	x9, sp
	str	x9, [x0]
	mov	sp, x1

	ldp	x19, x20, [sp, #0]
	ldp	x21, x22, [sp, #16]
	ldp	x23, x24, [sp, #32]
	ldp	x25, x26, [sp, #48]
	ldp	x27, x28, [sp, #64]
	ldp	x29, x30, [sp, #80]
	ldp	d8, d9, [sp, #96]
	ldp	d10, d11, [sp, #112]
	ldp	d12, d13, [sp, #128]
	ldp	d14, d15, [sp, #144]
	add	sp, sp, #160
	.cfi_def_cfa_offset 0
	.cfi_restore x19
	.cfi_restore x20
	.cfi_restore x21
	.cfi_restore x22
	.cfi_restore x23
	.cfi_restore x24
	.cfi_restore x25
	.cfi_restore x26
	.cfi_restore x27
	.cfi_restore x28
	.cfi_restore x29
	.cfi_restore x30
	.cfi_restore d8
	.cfi_restore d9
	.cfi_restore d10
	.cfi_restore d11
	.cfi_restore d12
	.cfi_restore d13
	.cfi_restore d14
	.cfi_restore d15
	mov	x0, x2
	ret
	.cfi_endproc
	.size	rl__coro_switch, .-rl__coro_switch

	/* No floating-point control state is switched here (FPCR is not in
	 * the frame), so the variant that is told the running context's
	 * control words is the switch itself, and ignores them. */
	.globl	rl__coro_switch_known
	.hidden	rl__coro_switch_known
	.type	rl__coro_switch_known, %function
	.set	rl__coro_switch_known, rl__coro_switch

	.globl	rl__coro_trampoline
	.hidden	rl__coro_trampoline
	.type	rl__coro_trampoline, %function
	.p2align 4
rl__coro_trampoline:
	.cfi_startproc
	.cfi_undefined x30
	mov	x0, x20
	blr	x19
	brk	#0
	.cfi_endproc
	.size	rl__coro_trampoline, .-rl__coro_trampoline

	.section .note.GNU-stack, "", %progbits
