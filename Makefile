# ringloop - build, test, bench.
#
#   make bench        build bench/ringbench (-O2) and run the whole matrix
#   make test         the Criterion suite, again under ASan + UBSan, then a
#                     ringbench smoke check (scripts/bench_smoke.sh)
#   make SAN=address,undefined ...   any target with sanitizers
#   make CC=clang ... any target with clang
#
# Both bench and test first install missing dependencies
# (scripts/install-deps.sh: liburing-dev, libcriterion-dev, pkg-config).

CC       ?= gcc
SAN      ?=
ARCH     ?= $(shell uname -m)
CROSS    ?=
ARGS     ?=

ifeq ($(SAN),)
BUILD    := build
else
BUILD    := build-san
endif

CFLAGS_BASE := -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -g -O2 \
               -fno-omit-frame-pointer -Iloop -Istyles
SANFLAGS    := $(if $(SAN),-fsanitize=$(SAN) -fno-sanitize-recover=all -DRL_SAN=1)
ALL_CFLAGS  := $(CFLAGS_BASE) $(SANFLAGS) $(CFLAGS)
ALL_LDFLAGS := $(SANFLAGS) $(LDFLAGS)

PKGS_LIB   := liburing
LIBS       := $(shell pkg-config --libs $(PKGS_LIB) 2>/dev/null || echo -luring) -lpthread -lm
TEST_LIBS  := $(shell pkg-config --libs criterion 2>/dev/null || echo -lcriterion)

LIB_SRC  := $(wildcard loop/*.c) $(wildcard styles/*.c)
ASM_SRC  := $(wildcard styles/*_$(ARCH).S)
LIB_OBJ  := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRC)) $(patsubst %.S,$(BUILD)/%.o,$(ASM_SRC))
BENCH_SRC:= $(wildcard bench/*.c)
BENCH_OBJ:= $(patsubst %.c,$(BUILD)/%.o,$(BENCH_SRC))
TEST_SRC := $(wildcard tests/*.c)
TEST_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(TEST_SRC))
HDRS     := $(wildcard loop/*.h styles/*.h bench/*.h tests/*.h)

.PHONY: all deps lib bench bench-build bench-plot bench-peers test test-bench test-build \
        test-run test-san test-valgrind fuzz format tidy clean compdb

all: bench-build

deps:
	@pkg-config --exists liburing criterion 2>/dev/null || scripts/install-deps.sh

lib: $(BUILD)/libringloop.a

$(BUILD)/libringloop.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(BUILD)/%.o: %.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -c $< -o $@

# ---------------------------------------------------------------- bench
bench-build: deps
	@$(MAKE) --no-print-directory bench/ringbench

bench/ringbench: $(BENCH_OBJ) $(BUILD)/libringloop.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

bench: bench-build
	bench/ringbench $(ARGS)
	@command -v gnuplot >/dev/null 2>&1 && scripts/plot.sh || true

bench-plot:
	scripts/plot.sh

bench-peers: bench-build
	scripts/peers.sh $(ARGS)

# ---------------------------------------------------------------- tests
test-build: deps
	@$(MAKE) --no-print-directory $(BUILD)/tests/run

$(BUILD)/tests/run: $(TEST_OBJ) $(BUILD)/libringloop.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(TEST_LIBS) $(LIBS)

# The plain suite, then the same suite under AddressSanitizer (with leak
# checks) and UndefinedBehaviorSanitizer.
test: test-build
	$(BUILD)/tests/run $(TEST_ARGS)
	@$(MAKE) --no-print-directory SAN=address,undefined test-san
	@$(MAKE) --no-print-directory test-bench

# ringbench itself: every cell runs and checks its bytes, the JSON
# contract holds, a refused knob becomes an error cell (a few seconds).
test-bench: bench-build
	scripts/bench_smoke.sh

test-san: test-build
	RL_SOAK_N=$${RL_SOAK_N:-100000} ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	$(BUILD)/tests/run $(TEST_ARGS)

test-run: test-build
	$(BUILD)/tests/run $(TEST_ARGS)

# Valgrind follows Criterion's test processes (it re-executes itself). Undefined-value
# checks are off: the kernel fills io_uring buffers behind Valgrind's back,
# so their bytes look uninitialised to it; invalid accesses and leaks are
# still errors.
test-valgrind: test-build
	RL_VALGRIND=1 RL_SOAK_N=$${RL_SOAK_N:-20000} valgrind --error-exitcode=99 \
	  --leak-check=full --errors-for-leak-kinds=definite --undef-value-errors=no \
	  --trace-children=yes --quiet $(BUILD)/tests/run -j1 $(TEST_ARGS)

# ---------------------------------------------------------------- tools
compdb:
	$(MAKE) clean && bear -- $(MAKE) bench-build test-build

format:
	clang-format -i $(wildcard loop/*.[ch] styles/*.[ch] bench/*.[ch] tests/*.[ch])

tidy:
	clang-tidy $(LIB_SRC) -- $(CFLAGS_BASE)
	cppcheck --quiet --enable=warning,performance,portability --std=c11 \
	  --suppress=missingIncludeSystem -Iloop -Istyles $(LIB_SRC)

clean:
	rm -rf build build-san build-* bench/ringbench

# Per-area additions (e.g. mk/coro.mk for test-aarch64) live in mk/.
-include $(wildcard mk/*.mk)

# ---------------------------------------------------------------- fuzzing
# libFuzzer (clang) over random sequences of loop operations, for a bounded
# time. Crashes land in build-fuzz/ as crash-*; turn each into a regression
# test in tests/test_fuzz_regressions.c.
FUZZ_SECONDS ?= 60
fuzz: deps
	@mkdir -p build-fuzz/corpus
	clang $(CFLAGS_BASE) -fsanitize=fuzzer,address,undefined \
	  -o build-fuzz/fuzz_loop tests/fuzz/fuzz_loop.c $(wildcard loop/*.c) $(LIBS)
	cd build-fuzz && ./fuzz_loop -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
	  -rss_limit_mb=4096 corpus
