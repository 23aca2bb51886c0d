#!/usr/bin/env bash
# test_cli.sh - ringbench refuses what it cannot bench, with a message and
# exit status 2, and benches what it can: out-of-range numbers are not
# wrapped, unknown names list the valid ones, a FIFO is refused without
# blocking, a procfs file (size 0) is read to its end, every cell - the
# limits included - checks the bytes it read, a knob the kernel refuses is
# an error cell, and an empty run never replaces bench/results/latest.*.
. "$(dirname "$0")/lib.sh"

# refuse ARGS... : exit status 2 and a message naming the problem.
refuse() {
	local want=$1 st=0
	shift
	timeout 10 "$rb" "$@" >"$scratch/out" 2>"$scratch/err" || st=$?
	[ "$st" -eq 2 ] || fail "ringbench $*: exit $st, want 2"
	grep -q -- "$want" "$scratch/err" || fail "ringbench $*: no '$want' in: $(cat "$scratch/err")"
}
refuse "out of range" -n 4294967297
refuse "out of range" -n 0
refuse "not a number" -n -1
refuse "not a number" --runs 3x
refuse "out of range" --runs 102
refuse "out of range" --entries 99999
refuse "more than 1 GiB" --size 2G
refuse "valid: sync, sync-mt, raw-uring, uring, uring-regular, epoll, epoll-pool, uring-spread, epoll-spread, uring-tpc, epoll-tpc, all" --backend urin
refuse "valid: baseline, callback, promise, coro, all" --style callback,bogus
refuse "valid: parallel, blocking, write, cold, randread, randwrite, storage, all" --scenario ''
refuse "nothing to run" --backend sync-mt --scenario blocking
mkfifo "$scratch/fifo"
refuse "a FIFO" --file "$scratch/fifo"
refuse "a directory" --file /
refuse "No such file" --file "$scratch/missing"

# A procfs file says size 0: every cell, the limits included, reads it to
# its end and gets the same bytes ringbench read at the start.
size=$(wc -c </proc/version)
out=$("$rb" -n 100 --runs 1 --json --no-out --file /proc/version 2>/dev/null)
cells=$(printf '%s\n' "$out" | grep -c '^{"backend"' || true)
[ "$cells" -eq 35 ] || fail "/proc/version: $cells cells"
printf '%s\n' "$out" | grep '"error"' && fail "/proc/version: a cell failed"
printf '%s\n' "$out" | grep '^{"backend"' | grep -vq "\"bytes\":$size," && fail "/proc/version: bytes is not $size"

# A file whose content changes under the bench (/proc/uptime, every
# 10 ms): every cell must see wrong bytes and say so - sync-mt and
# raw-uring too, which proves they check what they read.
out=$("$rb" -n 100 --runs 1 --warmup 0 --json --no-out --file /proc/uptime 2>/dev/null)
for row in sync sync-mt raw-uring uring epoll epoll-pool uring-spread epoll-tpc; do
	printf '%s\n' "$out" | grep "\"backend\":\"$row\"" >"$scratch/rows" || fail "no $row rows"
	if grep -v 'wrong content' "$scratch/rows"; then
		fail "$row read changing content and did not report it"
	fi
done

# A CQ 16 times the SQ would pass the kernel's limit past 2048 entries:
# the bench asks for a CQ it accepts, and the cells run.
out=$(timeout 60 "$rb" -n 200 --runs 1 --json --no-out --entries 8192 --backend uring --style callback 2>/dev/null)
printf '%s\n' "$out" | grep '"backend":"uring"' | has '"cq_entries":32768,' || fail "--entries 8192: CQ not capped at 32768"
printf '%s\n' "$out" | grep '"backend":"uring"' | has '"error"' && fail "--entries 8192: a uring cell failed"
# A ring too small for a read_file chain is refused by the loop: an error
# cell, and the run goes on.
out=$(timeout 60 "$rb" -n 100 --runs 1 --json --no-out --entries 2 --backend uring,epoll --style callback --no-limits 2>/dev/null) ||
	fail "--entries 2: ringbench did not finish"
printf '%s\n' "$out" | grep '"backend":"uring"' | has '"error"' || fail "--entries 2: no error cell"
printf '%s\n' "$out" | grep '"backend":"epoll"' | has '"median_ms"' || fail "--entries 2: the run did not go on"

# latest.* point to the newest run that measured something; a run with no
# cell measured leaves them alone.
res="$scratch/results"
"$rb" -n 50 --runs 1 --out "$res" --backend sync --scenario parallel --no-limits >/dev/null 2>&1
first=$(readlink "$res/latest.json")
[ -s "$res/$first" ] || fail "no latest.json after a run"
head -1 "$res/$first" | has '^{"meta":' || fail "the result file does not start with the meta record"
"$rb" -n 50 --runs 1 --out "$res" --file /proc/uptime --backend sync --scenario parallel --no-limits >/dev/null 2>&1
[ "$(readlink "$res/latest.json")" = "$first" ] || fail "a run where every cell failed replaced latest.json"
[ "$(readlink "$res/latest.csv")" = "${first%.json}.csv" ] || fail "latest.csv moved"
st=0; "$rb" --out "$res" --backend sync-mt --scenario blocking >/dev/null 2>&1 || st=$?
[ "$st" -eq 2 ] && [ "$(readlink "$res/latest.json")" = "$first" ] || fail "an empty selection touched latest.json"
# --no-pair: no sync run before the cells' runs, so their baseline is
# their own median (ratio 1), and x limit compares the medians.
out=$(timeout 60 "$rb" -n 200 --runs 2 --json --no-out --no-pair --backend raw-uring,uring --style baseline,callback --scenario blocking 2>/dev/null)
raw=$(printf '%s\n' "$out" | grep '"backend":"raw-uring"')
cell=$(printf '%s\n' "$out" | grep '"backend":"uring"')
[ "$(jfield "$cell" pair)" = 0 ] || fail "--no-pair: the cell's knobs do not say pair 0"
[ "$(jfield "$cell" ratio)" = 1.000 ] || fail "--no-pair: ratio $(jfield "$cell" ratio), want 1.000"
awk -v c="$(jfield "$cell" median_ms)" -v r="$(jfield "$raw" median_ms)" -v l="$(jfield "$cell" limit_ratio)" \
	'BEGIN { d = c / r - l; exit !(d < 0.002 && d > -0.002) }' ||
	fail "--no-pair: limit_ratio $(jfield "$cell" limit_ratio) is not $(jfield "$cell" median_ms) / $(jfield "$raw" median_ms)"
# scripts/instructions.sh (callgrind, per operation): a bad -n is refused;
# with valgrind there, a cell gets a count, and raw-uring's is below the
# loop's (the loop runs the same chain and more).
for args in "-n x" "-n" "--scenario randread" "--scenario blocking,storage"; do
	st=0
	# shellcheck disable=SC2086 # the words are the arguments
	scripts/instructions.sh $args >/dev/null 2>"$scratch/err" || st=$?
	[ "$st" -eq 2 ] && [ -s "$scratch/err" ] || fail "instructions.sh $args: exit $st, want 2 and a message"
done
if command -v valgrind >/dev/null 2>&1; then
	out=$(scripts/instructions.sh -n 200 --scenario blocking --backend raw-uring,uring --style baseline,callback)
	raw=$(printf '%s\n' "$out" | awk '$1 == "raw-uring" { print $4 }')
	loop=$(printf '%s\n' "$out" | awk '$1 == "uring" { print $4 }')
	awk -v r="$raw" -v l="$loop" 'BEGIN { exit !(r + 0 > 0 && l + 0 > r + 0) }' ||
		fail "instructions.sh: raw-uring '$raw', uring '$loop' instructions per read"
fi
ok "validation, procfs, byte checks, ring sizes, latest.*, --no-pair, instructions.sh"
