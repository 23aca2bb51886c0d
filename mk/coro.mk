# mk/coro.mk - the coroutine layer's extra targets (included by the Makefile).
#
#   make test-aarch64   the context switch for AArch64, cross-built static
#                       with aarch64-linux-gnu-gcc and run under qemu-user.
#                       A standalone program (no liburing or Criterion for
#                       arm64): callee-saved registers, d8-d15, many round
#                       trips and a ping-pong between two coroutines.

AARCH64_CC   ?= aarch64-linux-gnu-gcc
AARCH64_QEMU ?= $(firstword $(shell command -v qemu-aarch64 qemu-aarch64-static 2>/dev/null))
AARCH64_DIR  := build-aarch64
AARCH64_SRC  := tests/aarch64/test_switch_aarch64.c styles/coro_ctx.c \
                styles/coro_switch_aarch64.S

.PHONY: test-aarch64

$(AARCH64_DIR)/test_switch: $(AARCH64_SRC) styles/coro_internal.h include/ringloop/coro.h
	@mkdir -p $(dir $@)
	$(AARCH64_CC) -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -g -O2 \
	  -static -Iinclude -Iloop -Istyles -o $@ $(AARCH64_SRC)

test-aarch64: $(AARCH64_DIR)/test_switch
	@test -n "$(AARCH64_QEMU)" || { echo "test-aarch64: no qemu-aarch64 (scripts/install-deps.sh --extra)"; exit 1; }
	$(AARCH64_QEMU) $(AARCH64_DIR)/test_switch
