#!/usr/bin/env bash
# fio_table.sh - the comparison of a scripts/fio.sh run: for every scenario
# and queue depth, fio's engines and ringbench's rows side by side, with
# each ringbench row's ratios to fio in the same run.
#
#   scripts/fio_table.sh [--markdown] [FILE]   (bench/results/fio-latest.json)
#
# Ratios: IOPS, CPU per operation and p50 latency over fio io_uring's
# (IOPS above 1 is better, CPU and latency below 1), and IOPS over fio
# psync's (the same number of threads as the depth). A row measured in
# several rounds (fio.sh --rounds) shows the median of each figure over
# its rounds, and the ratios are taken between those medians; "rounds"
# says how many there were. bash and awk only.
set -euo pipefail
# field() and jget(): scripts/json.awk, in front of each awk program.
json_awk=$(cat "$(dirname "$0")/json.awk")
cd "$(dirname "$0")/.."

markdown=0
if [ "${1:-}" = --markdown ]; then markdown=1; shift; fi
file=${1:-bench/results/fio-latest.json}
[ -r "$file" ] || { echo "fio_table.sh: cannot read $file" >&2; exit 1; }

awk -v md="$markdown" "$json_awk"'
# The cell fields only: the knobs object repeats some names.
function f(v, d) { return v == "" ? "-" : sprintf("%." d "f", v) }
function ratio(a, b) { return a == "" || b == "" || b + 0 == 0 ? "-" : sprintf("%.2f", a / b) }
/^\{"meta":/ {
	printf "machine: %s, %s CPUs, Linux %s, liburing %s; %s\n", field("cpu"), field("cpus"), field("kernel"), field("liburing"), field("date")
	next
}
field("backend") != "" {
	sc = field("scenario"); qd = field("qd")
	if (sc != "randread" && sc != "randwrite") next
	k = sc SUBSEP qd
	if (!(k in seen)) { seen[k] = 1; groups[++ng] = k }
	b = field("backend"); s = field("style"); t = field("pool_threads")
	if (t == "") t = field("threads")
	name = b (s != "baseline" && s != "fio" ? " " s : "") (t != "" && t + 0 > 1 ? " (" t " threads)" : "")
	# A knob that changes the loop: submit_batch (fio.sh runs the uring
	# cells with and without it).
	if (b == "uring" && match($0, /"submit_batch":[1-9][0-9]*/))
		name = name " [submit-batch " substr($0, RSTART + 15, RLENGTH - 15) "]"
	if (!((k, name) in idx)) { idx[k, name] = ++nr[k]; row[k, nr[k]] = name }
	i = idx[k, name]
	if (field("error") != "") { err[k, i] = field("error"); next }
	m = ++nm[k, i]
	v_iops[k, i, m] = field("iops"); v_mbs[k, i, m] = field("mb_s"); v_cpu[k, i, m] = field("cpu_us_per_op")
	v_p50[k, i, m] = field("lat_p50_us"); v_p99[k, i, m] = field("lat_p99_us"); v_p999[k, i, m] = field("lat_p999_us")
	if (b == "fio-io_uring") fu[k] = i
	if (b == "fio-psync") fp[k] = i
}
# The median of the m values a[k, i, 1..m].
function med(a, k, i, m,   j, l, t, x) {
	if (!m) return ""
	for (j = 1; j <= m; j++) x[j] = a[k, i, j] + 0
	for (j = 2; j <= m; j++) for (l = j; l > 1 && x[l - 1] > x[l]; l--) { t = x[l]; x[l] = x[l - 1]; x[l - 1] = t }
	return m % 2 ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2
}
END {
	for (g = 1; g <= ng; g++) {
		k = groups[g]
		for (i = 1; i <= nr[k]; i++) {
			m = nm[k, i]
			iops[k, i] = med(v_iops, k, i, m); mbs[k, i] = med(v_mbs, k, i, m); cpu[k, i] = med(v_cpu, k, i, m)
			p50[k, i] = med(v_p50, k, i, m); p99[k, i] = med(v_p99, k, i, m); p999[k, i] = med(v_p999, k, i, m)
			if (m && err[k, i] != "") err[k, i] = ""
		}
		if (k in fu) { fu_iops[k] = iops[k, fu[k]]; fu_cpu[k] = cpu[k, fu[k]]; fu_p50[k] = p50[k, fu[k]] }
		if (k in fp) fp_iops[k] = iops[k, fp[k]]
		split(k, a, SUBSEP)
		rounds = 0
		for (i = 1; i <= nr[k]; i++) if (nm[k, i] > rounds) rounds = nm[k, i]
		if (md) {
			printf "\n**%s, queue depth %s**%s\n\n", a[1], a[2], (rounds > 1 ? " (median of " rounds " rounds)" : "")
			print "| row | IOPS | MB/s | p50 µs | p99 µs | p99.9 µs | CPU µs/op | IOPS / fio io_uring | CPU / fio io_uring | p50 / fio io_uring | IOPS / fio psync |"
			print "|---|---|---|---|---|---|---|---|---|---|---|"
		} else {
			printf "\n%s, queue depth %s%s\n", a[1], a[2], (rounds > 1 ? " (median of " rounds " rounds)" : "")
			printf "%-34s %8s %7s %8s %8s %9s %9s   %-21s %s\n", "row", "IOPS", "MB/s", "p50_us", "p99_us", "p99.9_us", "cpu_us/op", "vs fio io_uring:", "vs fio psync:"
			printf "%-34s %8s %7s %8s %8s %9s %9s   %6s %6s %7s %6s\n", "", "", "", "", "", "", "", "IOPS", "CPU", "p50", "IOPS"
		}
		for (i = 1; i <= nr[k]; i++) {
			if (err[k, i] != "") {
				if (md) printf "| %s | error: %s |||||||||\n", row[k, i], err[k, i]
				else printf "%-34s error: %s\n", row[k, i], err[k, i]
				continue
			}
			fio = row[k, i] ~ /^fio-/
			r1 = fio && row[k, i] ~ /io_uring/ ? "1.00" : ratio(iops[k, i], fu_iops[k])
			r2 = ratio(cpu[k, i], fu_cpu[k]); r3 = ratio(p50[k, i], fu_p50[k])
			r4 = ratio(iops[k, i], fp_iops[k])
			if (md)
				printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", row[k, i], f(iops[k, i], 0), f(mbs[k, i], 1), \
					f(p50[k, i], 1), f(p99[k, i], 1), f(p999[k, i], 1), f(cpu[k, i], 2), r1, r2, r3, r4
			else
				printf "%-34s %8s %7s %8s %8s %9s %9s   %6s %6s %7s %6s\n", row[k, i], f(iops[k, i], 0), f(mbs[k, i], 1), \
					f(p50[k, i], 1), f(p99[k, i], 1), f(p999[k, i], 1), f(cpu[k, i], 2), r1, r2, r3, r4
		}
	}
}' "$file"
