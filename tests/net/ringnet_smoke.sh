#!/usr/bin/env bash
# ringnet_smoke.sh - checks that the echo bench still does its job, in a
# few seconds and without measuring anything: every cell runs (each echoed
# byte is checked by the generator, a wrong one makes an "error" cell), the
# JSON lines carry the fields docs/net.md lists, and a knob the kernel
# refuses becomes an error cell while the run goes on. Run by `make test`
# (make test-bench-net).
set -euo pipefail
cd "$(dirname "$0")/../.."
rn=bench/ringnet
fail() { echo "ringnet_smoke: $*" >&2; exit 1; }
# Reads all of stdin, unlike grep -q (see tests/bench/lib.sh): grep -q
# leaves at its first match, the printf feeding it dies of SIGPIPE, and
# pipefail turns the match into a failure ("no meta record first", once).
has() { grep "$@" >/dev/null; }

quick=(--duration 0.2 --warmup 0.05 --quiet 0 --tries 1 --json)
out=$("$rn" "${quick[@]}" --backend uring,uring-shared,uring-coop,epoll \
	--conns 1,8 --size 64,4096 2>/dev/null)
printf '%s\n' "${out%%$'\n'*}" | has '^{"meta":{"kernel"' || fail "no meta record first"
cells=$(printf '%s\n' "$out" | grep -c '"scenario":"echo"' || true)
[ "$cells" -eq 16 ] || fail "expected 16 cells, got $cells"
if printf '%s\n' "$out" | has '"error"'; then
	printf '%s\n' "$out" | grep '"error"' >&2
	fail "a cell failed"
fi
for key in backend variant style conns msg_size runs rps rps_runs lat_p50_us \
	lat_p99_us cpu_ms cpu_util cpu_us_per_req gen_cpu_util syscalls_per_op \
	others_cpu_util; do
	missing=$(printf '%s\n' "$out" | grep '"scenario"' | grep -vc "\"$key\":" || true)
	[ "$missing" -eq 0 ] || fail "$missing cells lack \"$key\""
done
printf '%s\n' "$out" | grep '"scenario"' | has '"rps":0[,}]' && fail "a cell served nothing"
# The knobs name the ring each server ran on.
for v in uring:defer-taskrun uring-shared:shared uring-coop:coop-taskrun epoll:none; do
	printf '%s\n' "$out" | grep "\"variant\":\"${v%%:*}\"" | has "ring=${v#*:}" ||
		fail "the ${v%%:*} cells do not say ring=${v#*:}"
done

# Every style's echo, on both backends, with many connections.
out=$("$rn" "${quick[@]}" --backend uring,epoll --style callback,promise,coro \
	--conns 1,64 --size 64,4096 2>/dev/null)
scells=$(printf '%s\n' "$out" | grep -c '"scenario":"echo"' || true)
[ "$scells" -eq 24 ] || fail "expected 24 style cells, got $scells"
if printf '%s\n' "$out" | has '"error"'; then
	printf '%s\n' "$out" | grep '"error"' >&2
	fail "a style cell failed"
fi
printf '%s\n' "$out" | grep '"scenario"' | has '"rps":0[,}]' && fail "a style cell served nothing"
for style in callback promise coro; do
	printf '%s\n' "$out" | has "\"style\":\"$style\"" || fail "no $style cell"
done
cells=$((cells + scells))

# DEFER_TASKRUN without SINGLE_ISSUER: io_uring_setup refuses it. The
# uring cell says so; the epoll cell still runs.
out=$("$rn" "${quick[@]}" --defer-taskrun --backend uring,epoll --conns 1 \
	--size 64 2>/dev/null)
printf '%s\n' "$out" | grep '"backend":"uring"' | has '"error"' ||
	fail "a refused knob did not give an error cell"
printf '%s\n' "$out" | grep '"backend":"epoll"' | has '"rps"' ||
	fail "the run did not go on after an error cell"
echo "ringnet_smoke: ok ($cells cells, refused knob reported)"
