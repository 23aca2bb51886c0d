# mk/net.mk - the socket bench (included by the Makefile).
#
#   make bench/ringnet   the echo bench: an echo server on the loop in one
#                        process, a load generator in another, each pinned
#                        to its own CPU (bench/net/)
#   make bench-echo      runs it: ARGS="--json --runs 3 ..." (see
#                        bench/ringnet --help); measuring, so it takes
#                        /tmp/ringloop-bench.lock
#   make test-bench-net  its smoke check (part of make test)

NET_SRC := $(wildcard bench/net/*.c)
NET_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(NET_SRC))

.PHONY: bench-echo clean-net test-bench-net

all: bench/ringnet

bench/ringnet: $(NET_OBJ) $(BUILD)/libringloop.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(NET_OBJ): EXTRA_CFLAGS = -Ibench/net

bench-echo: deps
	@$(MAKE) --no-print-directory bench/ringnet
	flock /tmp/ringloop-bench.lock bench/ringnet $(ARGS)

# The echo bench's smoke check joins make test's bench checks.
test-bench: test-bench-net
test-bench-net: deps
	@$(MAKE) --no-print-directory bench/ringnet
	tests/net/ringnet_smoke.sh

clean: clean-net
clean-net:
	rm -f bench/ringnet

# The HTTP bench: the HTTP example on both backends beside nginx, node and
# bun, driven by wrk (scripts/bench_net.sh; ARGS="--runs 3 --duration 4").
.PHONY: bench-net
bench-net: deps
	flock /tmp/ringloop-bench.lock scripts/bench_net.sh $(ARGS)
