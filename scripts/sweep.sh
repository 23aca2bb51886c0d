#!/usr/bin/env bash
# sweep.sh - runs ringbench over the values of one knob and draws one chart
# per sweep: median ms per cell against the knob's value, for kernel
# experiments.
#
#   scripts/sweep.sh KNOB "V1 V2 ..." [ringbench options...]
# KNOB is a ringbench option taking a value: window, size, entries,
# cq-entries, pool-threads, files, iowq-max, coro-window, loops, n. Example:
#   scripts/sweep.sh window "1 4 16 64 256 1024" --style callback
# Output: bench/results/sweep-KNOB-<stamp>.{csv,png,svg}
set -euo pipefail
# field() and jget(): scripts/json.awk, in front of each awk program.
json_awk=$(cat "$(dirname "$0")/json.awk")
cd "$(dirname "$0")/.."

[ $# -ge 2 ] || { sed -n '2,12p' "$0"; exit 2; }
knob=$1 values=$2
shift 2
case "$knob" in
window|size|entries|cq-entries|pool-threads|files|iowq-max|coro-window|loops|n) ;;
*) echo "sweep.sh: cannot sweep '$knob'" >&2; exit 2 ;;
esac
[ -x bench/ringbench ] || make --no-print-directory bench-build
mkdir -p bench/results
out="bench/results/sweep-$knob-$(date +%Y%m%d-%H%M%S)"
echo "value,backend,style,scenario,median_ms,ratio,syscalls_per_op,cpu_us_per_op" >"$out.csv"

for v in $values; do
	if [ "$knob" = n ]; then flag="-n"; else flag="--$knob"; fi
	echo "sweep: --$knob $v" >&2
	bench/ringbench --json --no-out "$flag" "$v" "$@" 2>/dev/null |
	awk -v v="$v" "$json_awk"'
	# Cells only: not the meta record, not a cell that failed.
	field("backend") != "" && field("error") == "" && field("median_ms") != "" { printf "%s,%s,%s,%s,%s,%s,%s,%s\n", v, field("backend"),
		field("style"), field("scenario"), field("median_ms"), field("ratio"),
		field("syscalls_per_op"), field("cpu_us_per_op") }' >>"$out.csv"
done

command -v gnuplot >/dev/null || { echo "sweep: gnuplot missing; data in $out.csv" >&2; exit 0; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# One data file per series (backend-style-scenario), x = knob value.
awk -F, -v dir="$tmp" 'NR > 1 {
	f = dir "/" $2 "-" $3 "-" $4 ".dat"; print $1, $5 >> f; close(f) }' "$out.csv"
plots=""
for f in "$tmp"/*.dat; do
	[ -e "$f" ] || continue
	name=$(basename "$f" .dat)
	plots="$plots${plots:+, }\"$f\" using 1:2 with linespoints title \"$name\""
done
for term in png svg; do
	gnuplot <<GP
set terminal $([ $term = png ] && echo "png size 1100,650" || echo "svg size 1100,650") noenhanced
set output "$out.$term"
set title "ringbench sweep over --$knob (median ms, lower is better)"
set xlabel "--$knob"
set ylabel "median ms"
set logscale x 2
set key outside right
set grid
plot $plots
GP
done
echo "sweep: wrote $out.csv, $out.png, $out.svg" >&2
