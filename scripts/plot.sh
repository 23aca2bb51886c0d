#!/usr/bin/env bash
# plot.sh - draws ringbench's JSON as charts (PNG and SVG), readable when
# printed in grey: each style has its own fill pattern, each latency
# percentile its own marker, and the x axis names the backend.
#
#   scripts/plot.sh [RESULTS.json] [PREFIX]
#       PREFIX.{png,svg}: median ms per cell, whiskers from the fastest to
#       the slowest run, one panel per scenario, the limits (sync, sync-mt,
#       raw-uring) beside the loop cells; PREFIX-latency.{png,svg}: p50,
#       p99, p99.9 and max latency per cell, log scale.
#       Defaults: bench/results/latest.json -> bench/results/latest.
#   scripts/plot.sh --peers PEERS.json [PREFIX]
#       PREFIX.{png,svg}: ringbench beside node and bun (scripts/peers.sh),
#       median ms with min-max whiskers, log scale.
# Every chart's caption gives the machine, N, runs and the syscall cost,
# from the run's meta record.
set -euo pipefail
# field() and jget(): scripts/json.awk, in front of each awk program.
json_awk=$(cat "$(dirname "$0")/json.awk")
cd "$(dirname "$0")/.."

peers=0
if [ "${1:-}" = --peers ]; then peers=1; shift; fi
json=${1:-bench/results/latest.json}
prefix=${2:-${json%.json}}
prefix=${prefix%.jsonl}
command -v gnuplot >/dev/null || { echo "plot.sh: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
[ -f "$json" ] || { echo "plot.sh: no results at $json (run make bench)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One awk pass writes the data files and a gnuplot include with the
# caption, the x tics and the list of series.
awk -v dir="$tmp" -v peers="$peers" "$json_awk"'
function q(s) { gsub(/"/, "", s); return "\"" s "\"" }
function short(s) { return s == "callback" ? "cb" : s == "promise" ? "pr" : s == "coro" ? "co" : "" }
# The plot command for bar series: one data file each (only those that
# have data: gnuplot warns about a missing file and crashes on one of
# NaNs), bars, min-max whiskers, and the median written above.
function bars(n, file, fill, colour, title,   i, cmd) {
	cmd = ""
	for (i = 1; i <= n; i++)
		cmd = cmd (cmd == "" ? "plot " : ", \\\n     ") \
		      sprintf("\"%s\" using 1:2 with boxes fs %s lc rgb \"%s\" title \"%s\"", file[i], fill[i], colour[i], title[i])
	for (i = 1; i <= n; i++)
		cmd = cmd sprintf(", \\\n     \"%s\" using 1:3:(0):($4 - $3) with vectors heads size screen 0.006,90 lc rgb \"black\" notitle", file[i])
	if (labels_on)
		for (i = 1; i <= n; i++)
			cmd = cmd sprintf(", \\\n     \"%s\" using 1:4:(sprintf(\"%%.1f\", $2)) with labels offset 0, 0.7 font \",8\" notitle", file[i])
	return cmd "\n"
}
/^\{"meta":/ {
	cap = sprintf("%s, %s CPUs, Linux %s, liburing %s, %s\\nN = %s reads per run, %s runs per cell after %s warm-up; a trivial syscall %.0f ns, io_uring_enter with nothing to do %s ns; %s", \
		field("cpu"), field("cpus"), field("kernel"), field("liburing"), field("compiler"), \
		field("n"), field("runs"), field("warmup"), field("syscall_ns"), \
		field("enter_ns") == "" ? "-" : sprintf("%.0f", field("enter_ns")), field("date"))
	next
}
# The seed read scenarios only: storage cells (they have a qd) go to
# scripts/storage_table.sh.
field("backend") != "" && field("median_ms") != "" && field("error") == "" && field("qd") == "" {
	b = field("backend"); s = field("style"); sc = field("scenario")
	if (!(sc in scseen)) { scseen[sc] = 1; scen[++nsc] = sc }
	key = sc SUBSEP b SUBSEP s
	med[key] = field("median_ms"); lo[key] = field("min_ms"); hi[key] = field("max_ms")
	if (lo[key] == "") lo[key] = med[key]
	if (hi[key] == "") hi[key] = med[key]
	p50[key] = field("lat_p50_us"); p99[key] = field("lat_p99_us")
	p999[key] = field("lat_p999_us"); pmax[key] = field("lat_max_us")
	have[key] = 1
	if (!(b in bseen)) { bseen[b] = 1; braw[++nb] = b }
}
END {
	inc = dir "/setup.gp"
	printf "caption = %s\n", q(cap) > inc
	if (peers) {
		split("uring epoll epoll-pool node node-uring bun", series, " "); ns = 6
		# uring solid; epoll, epoll-pool, node, node-uring hatched; bun light.
		split("solid 0.85|pattern 4|pattern 5|pattern 2|pattern 1|solid 0.2", fills, "|")
		split("#1b5e20 #0d47a1 #b71c1c #6d4c41 #ef6c00 #5e35b1", colours, " ")
		split("parallel blocking", scs, " "); split("callback promise coro", sts, " ")
		x = 0; tics = ""
		for (a = 1; a <= 2; a++) for (c = 1; c <= 3; c++) {
			start = x
			for (j = 1; j <= ns; j++) {
				key = scs[a] SUBSEP series[j] SUBSEP sts[c]
				if (!(key in have)) continue
				f = dir "/peers-" series[j] ".dat"
				printf "%g %s %s %s\n", x, med[key], lo[key], hi[key] >> f
				used[j] = 1
				x++
			}
			if (x > start) tics = tics (tics == "" ? "" : ", ") sprintf("\"%s\\n%s\" %g", scs[a], sts[c], (start + x - 1) / 2)
			x += 1
		}
		printf "set xtics (%s)\nxmax = %g\n", tics, x - 1 >> inc
		n = 0
		for (j = 1; j <= ns; j++)
			if (j in used) {
				n++; file[n] = dir "/peers-" series[j] ".dat"
				fill[n] = fills[j]; colour[n] = colours[j]; title[n] = series[j]
			}
		labels_on = 0
		printf "%s", bars(n, file, fill, colour, title) > (dir "/plot-peers.gp")
		exit
	}
	# The x axis, per scenario: the limits first, then each backend with
	# its styles side by side.
	split("sync sync-mt raw-uring uring epoll epoll-pool", border, " ")
	split("baseline callback promise coro", sts, " ")
	# Each scenario gets an axis file (a tic per cell naming its style:
	# cb, pr, co; the backend under each group) and its plot commands.
	split("solid 0.75|pattern 4|pattern 5|pattern 2", fills, "|")
	split("#424242 #1565c0 #2e7d32 #c62828", colours, " ")
	labels_on = 1
	for (i = 1; i <= nsc; i++) {
		sc = scen[i]; x = 0; tics = ""; labels = ""; nl = 0; split("", used)
		for (g = 1; g <= 6; g++) {
			b = border[g]; start = x
			for (c = 1; c <= 4; c++) {
				key = sc SUBSEP b SUBSEP sts[c]
				if (!(key in have)) continue
				printf "%g %s %s %s\n", x, med[key], lo[key], hi[key] >> (dir "/" sc "-" sts[c] ".dat")
				used[c] = 1
				if (p50[key] != "")
					printf "%g %s %s %s %s\n", x, p50[key], p99[key], p999[key], pmax[key] >> (dir "/" sc "-lat.dat")
				tics = tics (tics == "" ? "" : ", ") sprintf("\"%s\" %g", short(sts[c]), x)
				x++
			}
			if (x > start)
				labels = labels sprintf("set label %d \"%s\" at first %g, graph -0.075 center\n", 10 + nl++, b, (start + x - 1) / 2)
			x += 1
		}
		ax = dir "/axis-" sc ".gp"
		printf "unset label\nset xtics (%s)\n%sset xrange [-0.8:%g]\n", tics, labels, x - 0.2 > ax
		n = 0
		for (c = 1; c <= 4; c++)
			if (c in used) {
				n++; file[n] = dir "/" sc "-" sts[c] ".dat"
				fill[n] = fills[c]; colour[n] = colours[c]; title[n] = sts[c]
			}
		printf "%s", bars(n, file, fill, colour, title) > (dir "/plot-" sc ".gp")
	}
	printf "scenarios = \"" >> inc
	for (i = 1; i <= nsc; i++) printf "%s ", scen[i] >> inc
	printf "\"\n" >> inc
}' "$json"

[ -s "$tmp/setup.gp" ] || { echo "plot.sh: nothing to plot in $json" >&2; exit 1; }
if [ "$peers" = 0 ] && ! ls "$tmp"/*-*.dat >/dev/null 2>&1; then
	echo "plot.sh: no cell without error in $json" >&2; exit 1
fi

terminal() { # $1: png or svg, $2: width, $3: height
	if [ "$1" = svg ]; then
		echo "set terminal svg size $2,$3 noenhanced font 'sans,11' background rgb 'white'"
	elif gnuplot -e "set terminal pngcairo" 2>/dev/null; then
		echo "set terminal pngcairo size $2,$3 noenhanced font 'sans,10'"
	else
		echo "set terminal png size $2,$3 noenhanced"
	fi
}

# Fill per style: the same pattern family in colour and in grey.
common='
set style fill solid 1.0 border lc rgb "black"
set grid ytics lc rgb "#cccccc"
set key top left horizontal
set xtics nomirror scale 0
set ytics nomirror
set border 3
'

if [ "$peers" = 1 ]; then
	for term in png svg; do
		gnuplot <<GP
$(terminal $term 1300 700)
set output "$prefix.$term"
load "$tmp/setup.gp"
$common
set title "ringbench and the JavaScript peers: median ms per run (lower is better), whiskers: fastest to slowest run, log scale"
set label 1 caption at screen 0.5, 0.045 center font ",9"
set bmargin 7
set key inside top left horizontal
set offsets 0, 0, graph 0.14, 0
set logscale y
set ylabel "ms per run of N reads"
set xrange [-1:xmax + 1]
set boxwidth 0.85
load "$tmp/plot-peers.gp"
GP
	done
	echo "plot.sh: wrote $prefix.png and $prefix.svg" >&2
	exit 0
fi

# --no-latency runs have no latency chart.
latency=0
ls "$tmp"/*-lat.dat >/dev/null 2>&1 && latency=1
for term in png svg; do
	gnuplot <<GP
$(terminal $term 1400 650)
set output "$prefix.$term"
load "$tmp/setup.gp"
$common
set multiplot layout 1, words(scenarios) title "ringbench: median ms per run (lower is better); whiskers: fastest to slowest run" font ",12"
set bmargin 7
set key inside top left horizontal
set offsets 0, 0, graph 0.14, 0
set boxwidth 0.8
set yrange [0:*]
set ylabel "ms per run of N reads"
do for [s in scenarios] {
	load "$tmp/axis-".s.".gp"
	if (s eq word(scenarios, 1)) { set label 1 caption at screen 0.5, 0.045 center font ",9" }
	set title s
	load "$tmp/plot-".s.".gp"
}
unset multiplot
GP
	[ "$latency" = 1 ] || continue
	gnuplot <<GP
$(terminal $term 1400 650)
set output "$prefix-latency.$term"
load "$tmp/setup.gp"
$common
set multiplot layout 1, words(scenarios) title "ringbench: latency of each read, submit to callback (µs, log scale; lower is better); cb callback, pr promise, co coro" font ",12"
set bmargin 7
set key inside top left horizontal
set offsets 0, 0, graph 0.14, 0
set logscale y
set ylabel "µs"
do for [s in scenarios] {
	load "$tmp/axis-".s.".gp"
	if (s eq word(scenarios, 1)) { set label 1 caption at screen 0.5, 0.045 center font ",9" }
	set title s
	plot "$tmp/".s."-lat.dat" using 1:2:(0):(\$5 - \$2) with vectors nohead lc rgb "#9e9e9e" notitle, \
	     "" using 1:2 with points pt 7 ps 1.2 lc rgb "black" title "p50", \
	     "" using 1:3 with points pt 9 ps 1.3 lc rgb "#1565c0" title "p99", \
	     "" using 1:4 with points pt 5 ps 1.0 lc rgb "#c62828" title "p99.9", \
	     "" using 1:5 with points pt 2 ps 1.3 lc rgb "#424242" title "max"
}
unset multiplot
GP
done
if [ "$latency" = 1 ]; then
	echo "plot.sh: wrote $prefix.{png,svg} and $prefix-latency.{png,svg}" >&2
else
	echo "plot.sh: wrote $prefix.{png,svg} (no latency in this run)" >&2
fi
