#!/usr/bin/env bash
# plot.sh - draws ringbench's CSV as a grouped bar chart (PNG and SVG): one
# group per scenario, one bar per backend x style, the synchronous baseline
# as a dashed line per group.
#
#   scripts/plot.sh [RESULTS.csv] [OUTPUT-PREFIX]
# Defaults: bench/results/latest.csv -> bench/results/latest.{png,svg}
set -euo pipefail
cd "$(dirname "$0")/.."

csv=${1:-bench/results/latest.csv}
prefix=${2:-${csv%.csv}}
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
[ -f "$csv" ] || { echo "plot.sh: no results at $csv (run make bench)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Columns: scenario, then one median per backend-style that ran without
# error, in the order they appear; the baseline goes to its own file.
awk -F, -v dat="$tmp/data" -v base="$tmp/base" '
NR == 1 { next }
$14 != "" || $7 == "" { next }
$1 == "sync" { b[$3] = $7; next }
{
	key = $1 "-" $2
	if (!(key in col)) { col[key] = ++ncol; name[ncol] = key }
	if (!($3 in row)) { row[$3] = ++nrow; scen[nrow] = $3 }
	v[$3, key] = $7
}
END {
	printf "scenario" > dat
	for (c = 1; c <= ncol; c++) printf " %s", name[c] > dat
	printf "\n" > dat
	for (r = 1; r <= nrow; r++) {
		printf "%s", scen[r] > dat
		for (c = 1; c <= ncol; c++) {
			x = v[scen[r], name[c]]
			printf " %s", (x == "" ? "NaN" : x) > dat
		}
		printf "\n" > dat
		printf "%d %s\n", r - 1, (b[scen[r]] == "" ? "NaN" : b[scen[r]]) > base
	}
	print ncol > (dat ".ncol")
}' "$csv"

ncol=$(cat "$tmp/data.ncol")
[ "$ncol" -gt 0 ] || { echo "plot.sh: no cell without error in $csv" >&2; exit 1; }

for term in png svg; do
	if [ $term = png ]; then setterm="set terminal pngcairo size 1200,650 noenhanced font 'sans,10'"
	else setterm="set terminal svg size 1200,650 noenhanced font 'sans,10'"; fi
	# pngcairo may be missing from gnuplot-nox builds; fall back to png.
	if [ $term = png ] && ! gnuplot -e "set terminal pngcairo" 2>/dev/null; then
		setterm="set terminal png size 1200,650 noenhanced"
	fi
	gnuplot <<GP
$setterm
set output "$prefix.$term"
set title "ringbench: median ms per run (lower is better); dashed: synchronous baseline"
set style data histograms
set style histogram clustered gap 2
set style fill solid 0.85 border -1
set boxwidth 0.9
set key outside right top vertical
set ylabel "median ms"
set yrange [0:*]
set grid ytics
set xtics nomirror
bw = 1.0 / ($ncol + 2)
# One hue per backend (uring green, epoll blue, epoll-pool red), one shade
# per style, in the order ringbench runs the cells.
colours = "#1b5e20 #43a047 #a5d6a7 #0d47a1 #1e88e5 #90caf9 #b71c1c #e53935 #ef9a9a"
plot for [i=2:$ncol+1] "$tmp/data" using i:xtic(1) title columnheader(i) \
       lc rgb word(colours, ((i - 2) % 9) + 1), \
     "$tmp/base" using (\$1):2:(0.5 - bw/2) with xerrorbars lc rgb "black" lw 2 dt 2 pt 0 title "sync baseline"
GP
done
echo "plot.sh: wrote $prefix.png and $prefix.svg" >&2
