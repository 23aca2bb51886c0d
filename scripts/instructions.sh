#!/usr/bin/env bash
# instructions.sh - the user-space instructions each ringbench cell runs
# per operation, counted by callgrind: a figure that does not move with
# the machine's load, unlike every time ringbench reports, so two commits
# can be compared on a noisy VM. It says nothing of the kernel's work, of
# cache misses or of how fast the instructions run (docs/experiments.md,
# "The loop's own work per read, counted": 200 instructions fewer per
# read did not show in the times); use it to see where the loop's own
# code grew or shrank, beside the timed bench, not instead of it.
#
#   scripts/instructions.sh [-n N] [--scenario LIST] [--backend LIST]
#                           [--style LIST] [ringbench options...]
#
# Each cell runs twice under callgrind, one run of N and one of 2N reads
# (--runs 1 --warmup 0 --no-pair --no-limits --no-latency), and the
# difference over N is its count per read: what every invocation does
# once (the machine probe, setting up, the warm-up of the caches) cancels
# out. Defaults: -n 2000, --scenario parallel,blocking, --backend
# raw-uring,uring,epoll, --style baseline,callback,promise,coro. A cell's
# own limit rows are not added; name them (raw-uring, sync) to see them.
# randread and randwrite run for a fixed time, so they are refused.
# Needs valgrind (Debian's package; make test-valgrind installs it).
set -euo pipefail
cd "$(dirname "$0")/.."
rb=bench/ringbench

n=2000 scenarios=parallel,blocking backends=raw-uring,uring,epoll
styles=baseline,callback,promise,coro
extra=()
while [ $# -gt 0 ]; do
	case "$1" in
	-n | --scenario | --backend | --style)
		[ $# -ge 2 ] || { echo "instructions.sh: $1 wants a value" >&2; exit 2; }
		case "$1" in
		-n) n="$2" ;;
		--scenario) scenarios="$2" ;;
		--backend) backends="$2" ;;
		--style) styles="$2" ;;
		esac
		shift 2 ;;
	-h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0"; exit 0 ;;
	*) extra+=("$1"); shift ;;
	esac
done
case "$n" in '' | *[!0-9]*) echo "instructions.sh: -n wants a number" >&2; exit 2 ;; esac
[ "$n" -gt 0 ] || { echo "instructions.sh: -n wants a number above 0" >&2; exit 2; }
# A random I/O cell runs for a fixed time, not N operations: N and 2N
# would not differ by N of them.
case ",$scenarios," in *,randread,* | *,randwrite,* | *,storage,* | *,all,*)
	echo "instructions.sh: randread and randwrite run for a fixed time, not -n operations" >&2
	exit 2 ;;
esac
command -v valgrind >/dev/null 2>&1 ||
	{ echo "instructions.sh: valgrind is missing (apt-get install valgrind)" >&2; exit 2; }
[ -x "$rb" ] || { echo "instructions.sh: build $rb first (make)" >&2; exit 2; }

# count N BACKEND STYLE SCENARIO: the instructions of one invocation, or
# nothing when the cell failed or does not exist.
count() {
	local out
	out=$(valgrind --tool=callgrind --callgrind-out-file=/dev/null \
		"$rb" -n "$1" --runs 1 --warmup 0 --no-pair --no-limits \
		--no-latency --no-out --json --backend "$2" --style "$3" \
		--scenario "$4" ${extra[@]+"${extra[@]}"} 2>&1) || return 0
	# grep >/dev/null, not grep -q, which may leave printf writing into
	# a closed pipe (tests/bench/lib.sh says more).
	printf '%s\n' "$out" | grep '^{"backend".*"median_ms"' >/dev/null || return 0
	printf '%s\n' "$out" | grep '^{"backend".*"error"' >/dev/null && return 0
	printf '%s\n' "$out" | sed -n 's/.*Collected : \([0-9]*\).*/\1/p' | tail -1
}

printf '%-10s %-9s %-9s %14s\n' backend style scenario instr/op
IFS=, read -r -a scs <<<"$scenarios"
IFS=, read -r -a bks <<<"$backends"
IFS=, read -r -a sts <<<"$styles"
for sc in "${scs[@]}"; do
	for b in "${bks[@]}"; do
		for s in "${sts[@]}"; do
			# raw-uring and sync are baseline only; the loops have no
			# baseline style.
			case "$b:$s" in
			raw-uring:baseline | sync:baseline | sync-mt:baseline) ;;
			raw-uring:* | sync:* | sync-mt:* | *:baseline) continue ;;
			esac
			one=$(count "$n" "$b" "$s" "$sc")
			two=$(count $((2 * n)) "$b" "$s" "$sc")
			if [ -z "$one" ] || [ -z "$two" ]; then
				printf '%-10s %-9s %-9s %14s\n' "$b" "$s" "$sc" "failed"
				continue
			fi
			awk -v a="$one" -v b="$two" -v n="$n" -v B="$b" -v S="$s" -v C="$sc" \
				'BEGIN { printf "%-10s %-9s %-9s %14.1f\n", B, S, C, (b - a) / n }'
		done
	done
done
