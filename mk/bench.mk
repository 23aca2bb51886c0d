# mk/bench.mk - ringbench's additions to the build (included by the
# Makefile).
#
#   - build/bench/buildinfo.h: the commit and the liburing version the bench
#     was built from, for its meta record. Rewritten only when they change,
#     so a new commit rebuilds one object.
#   - the Criterion suite also links bench/stats.o, the pure statistics the
#     bench reports, for tests/test_bench_stats.c.

RB_BUILDINFO := $(BUILD)/bench/buildinfo.h

$(RB_BUILDINFO): FORCE
	@mkdir -p $(dir $@)
	@{ printf '#define RB_COMMIT "%s"\n' \
	     "$$(git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)"; \
	   printf '#define RB_LIBURING "%s"\n' \
	     "$$(pkg-config --modversion liburing 2>/dev/null || echo unknown)"; } > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

$(BUILD)/bench/machine.o: $(RB_BUILDINFO)
$(BUILD)/bench/machine.o: EXTRA_CFLAGS = -I$(BUILD)/bench

$(BUILD)/tests/run: $(BUILD)/bench/stats.o
