#!/usr/bin/env bash
# bench_smoke.sh - checks that ringbench still does its job, in a few
# seconds: every cell of the matrix runs and reads the right bytes, the
# JSON contract of DESIGN.md holds, and a knob the kernel refuses turns
# into an "error" cell while the run goes on. Run by `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
rb=bench/ringbench
fail() { echo "bench_smoke: $*" >&2; exit 1; }

out=$("$rb" -n 300 --runs 2 --json --no-out 2>/dev/null)
cells=$(printf '%s\n' "$out" | grep -c '"backend"')
[ "$cells" -eq 20 ] || fail "expected 20 cells (2 baseline + 3x3x2), got $cells"
for key in backend style scenario n runs median_ms min_ms max_ms bytes syscalls_per_op; do
	missing=$(printf '%s\n' "$out" | grep -vc "\"$key\":" || true)
	[ "$missing" -eq 0 ] || fail "$missing cells lack \"$key\""
done
if printf '%s\n' "$out" | grep -q '"error"'; then
	printf '%s\n' "$out" | grep '"error"' >&2
	fail "a default cell failed"
fi

# DEFER_TASKRUN without SINGLE_ISSUER: io_uring_setup says EINVAL. The
# uring cells must say so; the epoll cells must still run.
out=$("$rb" -n 100 --runs 1 --json --no-out --defer-taskrun \
	--backend uring,epoll --style callback 2>/dev/null)
printf '%s\n' "$out" | grep '"backend":"uring"' | grep -q '"error"' ||
	fail "a refused knob did not give an error cell"
printf '%s\n' "$out" | grep '"backend":"epoll"' | grep -q '"median_ms"' ||
	fail "the run did not go on after an error cell"
echo "bench_smoke: ok ($cells cells, refused knob reported)"
