/* SPDX-License-Identifier: MIT */
/*
 * test_switch_aarch64.c - the AArch64 context switch, standalone.
 *
 * No Criterion or liburing for arm64 here, so this is a plain program,
 * cross-built static and run under qemu-user by `make test-aarch64`. It
 * checks that x19-x29 and d8-d15 survive a switch while the other side
 * clobbers them, that values travel through many round trips, and that
 * two coroutines can ping-pong through a scheduler. Exit status 0 and
 * "N passed, 0 failed" when all is well.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coro_internal.h"

static int passed, failed;

#define CHECK(cond, ...)                                            \
	do {                                                        \
		if (cond) {                                         \
			passed++;                                   \
		} else {                                            \
			failed++;                                   \
			printf("FAIL %s:%d: ", __FILE__, __LINE__); \
			printf(__VA_ARGS__);                        \
			printf("\n");                               \
		}                                                   \
	} while (0)

static void *main_sp, *co_sp;

/*
 * regs_switch(save, to, out): loads a pattern into x19-x29 and d8-d15,
 * switches, and stores what those registers hold afterwards into out[0..18]
 * (then restores the caller's). clobber_switch(save, to) fills the same
 * registers with garbage and switches: the other side.
 */
__asm__("	.text\n"
	"	.p2align 4\n"
	"regs_switch:\n"
	"	sub sp, sp, #176\n"
	"	stp x19, x20, [sp, #0]\n stp x21, x22, [sp, #16]\n"
	"	stp x23, x24, [sp, #32]\n stp x25, x26, [sp, #48]\n"
	"	stp x27, x28, [sp, #64]\n stp x29, x30, [sp, #80]\n"
	"	stp d8, d9, [sp, #96]\n stp d10, d11, [sp, #112]\n"
	"	stp d12, d13, [sp, #128]\n stp d14, d15, [sp, #144]\n"
	"	str x2, [sp, #160]\n"
	"	mov x19, #0x1900\n mov x20, #0x2000\n mov x21, #0x2100\n"
	"	mov x22, #0x2200\n mov x23, #0x2300\n mov x24, #0x2400\n"
	"	mov x25, #0x2500\n mov x26, #0x2600\n mov x27, #0x2700\n"
	"	mov x28, #0x2800\n mov x29, #0x2900\n"
	"	mov x9, #8\n fmov d8, x9\n mov x9, #9\n fmov d9, x9\n"
	"	mov x9, #10\n fmov d10, x9\n mov x9, #11\n fmov d11, x9\n"
	"	mov x9, #12\n fmov d12, x9\n mov x9, #13\n fmov d13, x9\n"
	"	mov x9, #14\n fmov d14, x9\n mov x9, #15\n fmov d15, x9\n"
	"	mov x2, #0\n"
	"	bl rl__coro_switch\n"
	"	ldr x2, [sp, #160]\n"
	"	stp x19, x20, [x2, #0]\n stp x21, x22, [x2, #16]\n"
	"	stp x23, x24, [x2, #32]\n stp x25, x26, [x2, #48]\n"
	"	stp x27, x28, [x2, #64]\n str x29, [x2, #80]\n"
	"	str d8, [x2, #88]\n str d9, [x2, #96]\n str d10, [x2, #104]\n"
	"	str d11, [x2, #112]\n str d12, [x2, #120]\n str d13, [x2, #128]\n"
	"	str d14, [x2, #136]\n str d15, [x2, #144]\n"
	"	ldp x19, x20, [sp, #0]\n ldp x21, x22, [sp, #16]\n"
	"	ldp x23, x24, [sp, #32]\n ldp x25, x26, [sp, #48]\n"
	"	ldp x27, x28, [sp, #64]\n ldp x29, x30, [sp, #80]\n"
	"	ldp d8, d9, [sp, #96]\n ldp d10, d11, [sp, #112]\n"
	"	ldp d12, d13, [sp, #128]\n ldp d14, d15, [sp, #144]\n"
	"	add sp, sp, #176\n"
	"	ret\n"
	"	.p2align 4\n"
	"clobber_switch:\n"
	"	sub sp, sp, #160\n"
	"	stp x19, x20, [sp, #0]\n stp x21, x22, [sp, #16]\n"
	"	stp x23, x24, [sp, #32]\n stp x25, x26, [sp, #48]\n"
	"	stp x27, x28, [sp, #64]\n stp x29, x30, [sp, #80]\n"
	"	stp d8, d9, [sp, #96]\n stp d10, d11, [sp, #112]\n"
	"	stp d12, d13, [sp, #128]\n stp d14, d15, [sp, #144]\n"
	"	mov x9, #-1\n"
	"	mov x19, x9\n mov x20, x9\n mov x21, x9\n mov x22, x9\n"
	"	mov x23, x9\n mov x24, x9\n mov x25, x9\n mov x26, x9\n"
	"	mov x27, x9\n mov x28, x9\n mov x29, #0\n"
	"	fmov d8, x9\n fmov d9, x9\n fmov d10, x9\n fmov d11, x9\n"
	"	fmov d12, x9\n fmov d13, x9\n fmov d14, x9\n fmov d15, x9\n"
	"	mov x2, #0\n"
	"	bl rl__coro_switch\n"
	"	ldp x19, x20, [sp, #0]\n ldp x21, x22, [sp, #16]\n"
	"	ldp x23, x24, [sp, #32]\n ldp x25, x26, [sp, #48]\n"
	"	ldp x27, x28, [sp, #64]\n ldp x29, x30, [sp, #80]\n"
	"	ldp d8, d9, [sp, #96]\n ldp d10, d11, [sp, #112]\n"
	"	ldp d12, d13, [sp, #128]\n ldp d14, d15, [sp, #144]\n"
	"	add sp, sp, #160\n"
	"	ret\n");

void regs_switch(void **save, void *to, uint64_t out[19]);
void clobber_switch(void **save, void *to);

static void clobber_entry(void *arg)
{
	(void)arg;
	for (;;)
		clobber_switch(&co_sp, main_sp);
}

static void *stack_top(size_t size)
{
	char *p = aligned_alloc(16, size);

	if (!p) {
		printf("out of memory\n");
		exit(2);
	}
	return p + size;
}

static void test_registers(void)
{
	/* What regs_switch loads into x19-x29 before switching. */
	static const uint64_t want_x[11] = {
		0x1900, 0x2000, 0x2100, 0x2200, 0x2300, 0x2400,
		0x2500, 0x2600, 0x2700, 0x2800, 0x2900,
	};
	uint64_t got[19];
	int bad = 0;

	co_sp = rl__coro_ctx_init(stack_top(64 * 1024), clobber_entry, NULL);
	for (int round = 0; round < 1000; round++) {
		memset(got, 0, sizeof(got));
		regs_switch(&main_sp, co_sp, got);
		for (int i = 0; i < 11; i++)
			if (got[i] != want_x[i])
				bad++;
		for (int i = 0; i < 8; i++)
			if (got[11 + i] != (uint64_t)(8 + i))
				bad++;
	}
	CHECK(bad == 0, "%d callee-saved registers lost (x19-x29, d8-d15)",
	      bad);
}

static uint64_t trips;

static void echo_entry(void *arg)
{
	uintptr_t v = (uintptr_t)arg;

	for (;;) {
		trips++;
		v = (uintptr_t)rl__coro_switch(&co_sp, main_sp,
					       (void *)(v + 1));
	}
}

static void test_round_trips(void)
{
	uintptr_t bad = 0;

	trips = 0;
	co_sp = rl__coro_ctx_init(stack_top(64 * 1024), echo_entry, (void *)41);
	CHECK((uintptr_t)rl__coro_switch(&main_sp, co_sp, NULL) == 42,
	      "first entry did not get its argument");
	/* Odd trips go in the way the scheduler resumes (the same switch
	 * here, the control words ignored). */
	for (uintptr_t i = 0; i < 1000000; i++)
		if ((uintptr_t)(i & 1 ? rl__coro_switch_known(&main_sp, co_sp,
							      (void *)i, ~0ull)
				      : rl__coro_switch(&main_sp, co_sp,
							(void *)i)) != i + 1)
			bad++;
	CHECK(bad == 0, "%lu round trips carried a wrong value",
	      (unsigned long)bad);
	CHECK(trips == 1000001, "trips %lu", (unsigned long)trips);
}

/* Two coroutines take turns through a scheduler, each with its own
 * floating-point accumulation kept in callee-saved registers across the
 * switches (the compiler keeps a and b in d8-d15 or on the stack). */
static void *sp_a, *sp_b;
static char log_buf[64];
static int log_len;

static void ping(void *arg)
{
	double a = 0.5;

	(void)arg;
	for (int i = 0; i < 10; i++) {
		log_buf[log_len++] = 'a';
		a *= 2.0;
		rl__coro_switch(&sp_a, main_sp,
				(void *)(intptr_t)(a == (double)(1 << i)));
	}
	for (;;)
		rl__coro_switch(&sp_a, main_sp, (void *)2);
}

static void pong(void *arg)
{
	double b = 3.0;

	(void)arg;
	for (int i = 0; i < 10; i++) {
		log_buf[log_len++] = 'b';
		b += 0.25;
		rl__coro_switch(&sp_b, main_sp,
				(void *)(intptr_t)(b == 3.0 + 0.25 * (i + 1)));
	}
	for (;;)
		rl__coro_switch(&sp_b, main_sp, (void *)2);
}

static void test_ping_pong(void)
{
	int ok = 0;

	sp_a = rl__coro_ctx_init(stack_top(64 * 1024), ping, NULL);
	sp_b = rl__coro_ctx_init(stack_top(64 * 1024), pong, NULL);
	for (int i = 0; i < 10; i++) {
		ok += (intptr_t)rl__coro_switch(&main_sp, sp_a, NULL) == 1;
		ok += (intptr_t)rl__coro_switch(&main_sp, sp_b, NULL) == 1;
	}
	log_buf[log_len] = 0;
	CHECK(ok == 20, "%d of 20 turns kept their floating-point state", ok);
	CHECK(!strcmp(log_buf, "abababababababababab"), "order %s", log_buf);
}

int main(void)
{
	test_registers();
	test_round_trips();
	test_ping_pong();
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}
