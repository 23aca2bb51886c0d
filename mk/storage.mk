# mk/storage.mk - the storage bench targets (included by the Makefile).
#
#   make bench-storage   write, cold, randread and randwrite on every
#                        backend and style, with their limits
#                        (scripts/storage.sh; ARGS go to ringbench)
#   make bench-fio       randread and randwrite beside fio's io_uring,
#                        libaio and psync engines (scripts/fio.sh, which
#                        installs fio when it is missing; ARGS go to it)
#
# Neither is part of `make bench`, which stays the seed's read scenarios
# (under a minute); both install the build dependencies like it.

.PHONY: bench-storage bench-fio

bench-storage: bench-build
	scripts/storage.sh $(ARGS)

bench-fio: bench-build
	scripts/fio.sh $(ARGS)

# The Criterion suite also links the storage scenarios' pure helpers (the
# random I/O file's block content, the write and cold file sets) for
# tests/test_bench_storage.c.
$(BUILD)/tests/run: $(BUILD)/bench/rand.o $(BUILD)/bench/cold.o
