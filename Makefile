# ringloop - build, test, bench, install.
#
#   make              the libraries (static and shared) and bench/ringbench
#   make install      PREFIX=/usr/local DESTDIR= LIBDIR= INCLUDEDIR=
#   make uninstall    the same variables
#   make bench        install missing deps, build with -O2, run the matrix
#   make test         install missing deps, the Criterion suite, again
#                     under ASan + UBSan, then the install and bench checks
#   make SAN=address,undefined ...   any target with sanitizers
#   make CC=clang ... any target with clang
#   make WERROR=0 ... warnings are not errors (the default outside a git
#                     checkout, i.e. for users building a release)
#
# Only `make bench` and `make test` (and the targets that say so) run
# scripts/install-deps.sh, which may call apt-get; `make`, `make install`
# and builds of programs against the library never do.

CC       ?= gcc
CXX      ?= g++
SAN      ?=
ARCH     ?= $(shell uname -m)
ARGS     ?=

PREFIX     ?= /usr/local
LIBDIR     ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
DESTDIR    ?=

# The version lives in include/ringloop/ringloop.h. The soname carries
# the numbers whose change may break the ABI: the major number, and before
# 1.0 the minor one too (0.x minors may change the ABI, as the README
# says), so a program built against 0.2 never loads a 0.3.
VERSION_OF = $(shell sed -n 's/^\#define RL_VERSION_$(1) \([0-9]*\).*/\1/p' include/ringloop/ringloop.h)
VMAJOR   := $(call VERSION_OF,MAJOR)
VMINOR   := $(call VERSION_OF,MINOR)
VPATCH   := $(call VERSION_OF,PATCH)
VERSION  := $(VMAJOR).$(VMINOR).$(VPATCH)
SONAME   := libringloop.so.$(VMAJOR)$(if $(filter 0,$(VMAJOR)),.$(VMINOR))
SOFILE   := libringloop.so.$(VERSION)

ifeq ($(SAN),)
BUILD    := build
else
BUILD    := build-san
endif

# Developers and CI build from a git checkout, with warnings as errors; a
# user building a release tarball does not get a build broken by a newer
# compiler's new warning.
WERROR   ?= $(if $(wildcard .git),1,0)

CFLAGS_BASE := -std=gnu11 -D_GNU_SOURCE -Wall -Wextra $(if $(filter 1,$(WERROR)),-Werror) \
               -g -O2 -fno-omit-frame-pointer -Iinclude -Iloop -Istyles
SANFLAGS    := $(if $(SAN),-fsanitize=$(SAN) -fno-sanitize-recover=all -DRL_SAN=1)
ALL_CFLAGS  := $(CFLAGS_BASE) $(SANFLAGS) $(CFLAGS)
ALL_LDFLAGS := $(SANFLAGS) $(LDFLAGS)
# Library objects serve the static and the shared library alike: position
# independent, and hidden unless a public header says otherwise.
LIB_CFLAGS  := -fPIC -fvisibility=hidden
DEPFLAGS     = -MMD -MP -MF $(@:.o=.d)

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
PUB_HDRS := $(wildcard include/ringloop/*.h)

.PHONY: all deps lib bench bench-build bench-plot bench-peers test test-bench test-build \
        test-run test-san test-valgrind fuzz format format-check tidy clean compdb \
        install uninstall FORCE

all: lib bench/ringbench

deps:
	@pkg-config --exists liburing criterion 2>/dev/null || scripts/install-deps.sh

# A changed compiler or changed flags rebuild everything: the objects
# depend on a file holding the command line, rewritten only when it
# changes.
FLAGS_FILE := $(BUILD)/.flags
$(FLAGS_FILE): FORCE
	@mkdir -p $(dir $@)
	@echo '$(CC) $(ALL_CFLAGS) $(LIB_CFLAGS) $(ALL_LDFLAGS) $(LIBS)' | cmp -s - $@ || \
	  echo '$(CC) $(ALL_CFLAGS) $(LIB_CFLAGS) $(ALL_LDFLAGS) $(LIBS)' > $@

lib: $(BUILD)/libringloop.a $(BUILD)/$(SOFILE)

$(BUILD)/libringloop.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/$(SOFILE): $(LIB_OBJ) ringloop.map
	$(CC) $(ALL_LDFLAGS) -shared -Wl,-soname,$(SONAME) \
	  -Wl,--version-script=ringloop.map -Wl,-z,noexecstack -o $@ $(LIB_OBJ) $(LIBS)
	ln -sf $(SOFILE) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $(BUILD)/libringloop.so

$(BUILD)/loop/%.o $(BUILD)/styles/%.o: EXTRA_CFLAGS = $(LIB_CFLAGS)

$(BUILD)/%.o: %.c $(FLAGS_FILE)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(EXTRA_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(BUILD)/%.o: %.S $(FLAGS_FILE)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(EXTRA_CFLAGS) $(DEPFLAGS) -c $< -o $@

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# ---------------------------------------------------------------- install
# Directories under PREFIX are written relative to ${prefix}, so that
# `pkg-config --define-prefix` can relocate an installed tree. Made at
# every install: PREFIX, LIBDIR and INCLUDEDIR are not in the flags file.
PC_LIBDIR     = $(patsubst $(PREFIX)/%,$${prefix}/%,$(LIBDIR))
PC_INCLUDEDIR = $(patsubst $(PREFIX)/%,$${prefix}/%,$(INCLUDEDIR))
$(BUILD)/ringloop.pc: ringloop.pc.in include/ringloop/ringloop.h FORCE
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(PC_LIBDIR)|' \
	    -e 's|@INCLUDEDIR@|$(PC_INCLUDEDIR)|' -e 's|@VERSION@|$(VERSION)|' $< > $@

install: lib $(BUILD)/ringloop.pc
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/ringloop $(DESTDIR)$(PKGCONFIGDIR)
	install -m 644 $(BUILD)/libringloop.a $(DESTDIR)$(LIBDIR)/
	install -m 755 $(BUILD)/$(SOFILE) $(DESTDIR)$(LIBDIR)/
	ln -sf $(SOFILE) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libringloop.so
	install -m 644 $(PUB_HDRS) $(DESTDIR)$(INCLUDEDIR)/ringloop/
	install -m 644 $(BUILD)/ringloop.pc $(DESTDIR)$(PKGCONFIGDIR)/

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libringloop.a $(DESTDIR)$(LIBDIR)/$(SOFILE) \
	  $(DESTDIR)$(LIBDIR)/$(SONAME) $(DESTDIR)$(LIBDIR)/libringloop.so \
	  $(DESTDIR)$(PKGCONFIGDIR)/ringloop.pc
	rm -f $(addprefix $(DESTDIR)$(INCLUDEDIR)/ringloop/,$(notdir $(PUB_HDRS)))
	-rmdir $(DESTDIR)$(INCLUDEDIR)/ringloop 2>/dev/null

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
	@$(MAKE) --no-print-directory test-install
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
# still errors. Two test processes at a time (each under its own Valgrind,
# which runs one thread at a time) use both CPUs of the CI machine; under
# RL_VALGRIND the behaviour tests run on three backend configurations of
# five (tests/helpers.c says which and why).
VALGRIND_JOBS ?= 2
test-valgrind: test-build
	RL_VALGRIND=1 RL_SOAK_N=$${RL_SOAK_N:-20000} valgrind --error-exitcode=99 \
	  --leak-check=full --errors-for-leak-kinds=definite --undef-value-errors=no \
	  --trace-children=yes --quiet $(BUILD)/tests/run -j$(VALGRIND_JOBS) $(TEST_ARGS)

# ---------------------------------------------------------------- tools
FORMAT_SRC = $(shell git ls-files '*.c' '*.h' 2>/dev/null)

compdb:
	$(MAKE) clean && bear -- $(MAKE) bench-build test-build

format:
	clang-format -i $(FORMAT_SRC)

format-check:
	clang-format --dry-run --Werror $(FORMAT_SRC)

tidy:
	clang-tidy $(LIB_SRC) -- $(CFLAGS_BASE)
	cppcheck --quiet --enable=warning,performance,portability --std=c11 \
	  --suppress=missingIncludeSystem -Iinclude -Iloop -Istyles $(LIB_SRC)

clean:
	rm -rf build build-san build-* bench/ringbench

# Per-area additions (e.g. mk/coro.mk for test-aarch64) live in mk/.
-include $(wildcard mk/*.mk)

# ---------------------------------------------------------------- fuzzing
# libFuzzer (clang) over random sequences of loop operations, for a bounded
# time. Crashes land in build-fuzz/ as crash-*; each one becomes a
# regression test in the test file of its area.
FUZZ_SECONDS ?= 60
fuzz: deps
	@mkdir -p build-fuzz/corpus
	clang $(CFLAGS_BASE) -fsanitize=fuzzer,address,undefined \
	  -o build-fuzz/fuzz_loop tests/fuzz/fuzz_loop.c $(wildcard loop/*.c) $(LIBS)
	cd build-fuzz && ./fuzz_loop -max_total_time=$(FUZZ_SECONDS) -timeout=10 \
	  -rss_limit_mb=4096 corpus
