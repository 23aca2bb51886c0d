#!/usr/bin/env bash
# bench_smoke.sh - checks that ringbench still does its job, in a few
# seconds: every cell of the matrix runs and reads the right bytes, a knob
# the kernel refuses turns into an "error" cell while the run goes on, and
# the bench's own tests pass (tests/bench/test_*.sh: the JSON contract and
# the meta record, the command line, compare.sh on fixtures). Run by
# `make test` (make test-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
rb=bench/ringbench
fail() { echo "bench_smoke: $*" >&2; exit 1; }
# Reads all of stdin, unlike grep -q (see tests/bench/lib.sh).
has() { grep "$@" >/dev/null; }

out=$("$rb" -n 300 --runs 2 --json --no-out 2>/dev/null)
cells=$(printf '%s\n' "$out" | grep -c '^{"backend"' || true)
[ "$cells" -eq 41 ] ||
	fail "expected 41 cells (sync x2, sync-mt, raw-uring x2, 4 backends x 3 styles x 2, 4 group rows x 3 styles), got $cells"
if printf '%s\n' "$out" | has '"error"'; then
	printf '%s\n' "$out" | grep '"error"' >&2
	fail "a default cell failed"
fi

# The knobs name the ring the cells ran on: the loop's default
# (SINGLE_ISSUER | DEFER_TASKRUN on this kernel), or with --shared-ring the
# plain one, for the loop's cells and raw-uring alike.
printf '%s\n' "$out" | grep '"backend":"uring"' | has '"ring":"defer-taskrun"' ||
	fail "the default cells do not say ring defer-taskrun"
out=$("$rb" -n 100 --runs 1 --json --no-out --shared-ring \
	--backend uring,raw-uring --style callback 2>/dev/null)
[ "$(printf '%s\n' "$out" | grep -c '"ring":"shared","iowq_max"')" -eq 4 ] ||
	fail "--shared-ring: expected 4 cells (raw-uring x2, uring x2) with ring shared"
if printf '%s\n' "$out" | has '"error"'; then
	printf '%s\n' "$out" | grep '"error"' >&2
	fail "a --shared-ring cell failed"
fi

# DEFER_TASKRUN without SINGLE_ISSUER: io_uring_setup says EINVAL. The
# uring cells and raw-uring must say so; the epoll cells must still run.
out=$("$rb" -n 100 --runs 1 --json --no-out --defer-taskrun \
	--backend uring,epoll --style callback 2>/dev/null)
printf '%s\n' "$out" | grep '"backend":"uring"' | has '"error"' ||
	fail "a refused knob did not give an error cell"
printf '%s\n' "$out" | grep '"backend":"raw-uring"' | has '"error"' ||
	fail "raw-uring ignored a refused knob"
printf '%s\n' "$out" | grep '"backend":"epoll"' | has '"median_ms"' ||
	fail "the run did not go on after an error cell"
# The group rows on more loops than CPUs: every read still right.
out=$("$rb" -n 300 --runs 1 --json --no-out --loops 3 \
	--backend uring-spread,epoll-spread,uring-tpc,epoll-tpc 2>/dev/null)
[ "$(printf '%s\n' "$out" | grep -c '"loops":3')" -eq 12 ] ||
	fail "--loops 3 did not give 12 cells on 3 loops"
if printf '%s\n' "$out" | has '"error"'; then
	printf '%s\n' "$out" | grep '"error"' >&2
	fail "a group cell failed"
fi
echo "bench_smoke: ok ($cells cells, refused knob reported, group rows)"

for t in tests/bench/test_*.sh; do
	bash "$t" || fail "$t failed"
done
