#!/usr/bin/env bash
# storage_table.sh - the storage cells of a ringbench run as the README's
# tables (scripts/results_table.sh --storage calls it).
#
#   scripts/storage_table.sh [FILE]   (bench/results/storage-latest.json)
#
# write (with and without fsync) and cold: one row per backend x style,
# parallel and blocking side by side: median ms with its stdev, the ratio
# to the paired sync runs, the ratio to the limit row, operations per
# second, CPU per operation, p99 latency; cold adds the largest share of
# its pages found resident before a run. randread and randwrite: one row
# per backend x style (and pool size), one column per queue depth: IOPS,
# p50 latency and CPU per operation, and the ratio to the limit row
# (its IOPS over the cell's). bash and awk only.
set -euo pipefail
# field() and jget(): scripts/json.awk, in front of each awk program.
json_awk=$(cat "$(dirname "$0")/json.awk")
cd "$(dirname "$0")/.."
file=${1:-bench/results/storage-latest.json}
[ -r "$file" ] || { echo "storage_table.sh: cannot read $file" >&2; exit 1; }

awk "$json_awk"'
# The cell fields only: the knobs object repeats some names.
function fmt(v, d) { return v == "" ? "-" : sprintf("%." d "f", v) }
function pm(v, sd) { return v == "" ? "-" : sprintf("%.1f ±%.0f%%", v, sd == "" || v == 0 ? 0 : 100 * sd / v) }
/^\{"meta":/ {
	printf "Machine: %s, %s CPUs, Linux %s, liburing %s, %s, commit %s; %s.\n", field("cpu"), field("cpus"), field("kernel"), field("liburing"), field("compiler"), field("commit"), field("date")
	next
}
field("backend") != "" && field("qd") != "" {
	b = field("backend"); s = field("style"); sc = field("scenario"); m = field("mode")
	t = field("pool_threads"); if (t == "") t = field("threads")
	if (sc == "write" && field("fsync") == "true") sc = "write, fsync"
	if (m != "") {
		row = b SUBSEP s
		if (!((sc, row) in fseen)) { fseen[sc, row] = 1; frow[sc, ++nf[sc]] = row }
		if (!(sc in scseen)) { scseen[sc] = 1; fsc[++nfsc] = sc }
		k = sc SUBSEP row SUBSEP m
		err[k] = field("error"); ms[k] = field("median_ms"); sd[k] = field("stdev_ms")
		ratio[k] = field("ratio"); lim[k] = field("limit_ratio"); limn[k] = field("limit")
		iops[k] = field("iops"); cpu[k] = field("cpu_us_per_op"); p99[k] = field("lat_p99_us")
		res[k] = field("resident_before"); n[sc] = field("n"); bs[sc] = field("bs")
		next
	}
	# Random I/O: a row per backend x style x pool size.
	name = b " | " s (t != "" && b ~ /epoll/ ? " (" t " threads)" : "")
	if (!((sc, name) in rseen)) { rseen[sc, name] = 1; rrow[sc, ++nr[sc]] = name }
	if (!(sc in rscseen)) { rscseen[sc] = 1; rsc[++nrsc] = sc }
	q = field("qd")
	if (!((sc, q) in qseen)) { qseen[sc, q] = 1; qds[sc, ++nq[sc]] = q }
	k = sc SUBSEP name SUBSEP q
	rerr[k] = field("error"); riops[k] = field("iops"); rp50[k] = field("lat_p50_us")
	rcpu[k] = field("cpu_us_per_op"); rlim[k] = field("limit_ratio"); rlimn[k] = field("limit")
	rbs[sc] = field("bs")
}
function fcell(k) {
	if (err[k] != "") return "error"
	if (ms[k] == "") return "-"
	return pm(ms[k], sd[k])
}
END {
	for (i = 1; i <= nfsc; i++) {
		sc = fsc[i]
		printf "\n**%s**: %s files of %s bytes per run%s\n\n", sc, n[sc], bs[sc], sc == "cold" ? ", page cache dropped before every run" : ""
		printf "| backend | style | parallel ms | ratio | × limit | files/s | blocking ms | ratio | × limit | files/s | CPU µs/op (par / blk) | p99 µs (par / blk) |%s\n", sc == "cold" ? " resident before |" : ""
		printf "|---|---|---|---|---|---|---|---|---|---|---|---|%s\n", sc == "cold" ? "---|" : ""
		for (j = 1; j <= nf[sc]; j++) {
			row = frow[sc, j]; split(row, rs, SUBSEP)
			P = sc SUBSEP row SUBSEP "parallel"; B = sc SUBSEP row SUBSEP "blocking"
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s | %s / %s |", rs[1], rs[2], \
				fcell(P), fmt(ratio[P], 2), lim[P] == "" ? "-" : fmt(lim[P], 2) " " limn[P], fmt(iops[P], 0), \
				fcell(B), fmt(ratio[B], 2), lim[B] == "" ? "-" : fmt(lim[B], 2) " " limn[B], fmt(iops[B], 0), \
				fmt(cpu[P], 1), fmt(cpu[B], 1), fmt(p99[P], 0), fmt(p99[B], 0)
			if (sc == "cold") {
				r = res[P] != "" ? res[P] : res[B]
				if (res[B] != "" && res[B] + 0 > r + 0) r = res[B]
				printf " %s |", r == "" ? "-" : sprintf("%.2f%%", 100 * r)
			}
			printf "\n"
		}
	}
	for (i = 1; i <= nrsc; i++) {
		sc = rsc[i]
		printf "\n**%s**, %s-byte blocks, O_DIRECT: IOPS (p50 µs, CPU µs/op, × limit) per queue depth\n\n", sc, rbs[sc]
		printf "| backend | style |"
		for (j = 1; j <= nq[sc]; j++) printf " qd %s |", qds[sc, j]
		printf "\n|---|---|"
		for (j = 1; j <= nq[sc]; j++) printf "---|"
		printf "\n"
		for (r = 1; r <= nr[sc]; r++) {
			name = rrow[sc, r]; printf "| %s |", name
			for (j = 1; j <= nq[sc]; j++) {
				k = sc SUBSEP name SUBSEP qds[sc, j]
				if (!(k in riops)) { printf " - |"; continue }
				if (rerr[k] != "") { printf " error |"; continue }
				printf " %s (%s, %s, %s) |", fmt(riops[k], 0), fmt(rp50[k], 0), fmt(rcpu[k], 1), \
					rlim[k] == "" ? "-" : fmt(rlim[k], 2) "× " rlimn[k]
			}
			printf "\n"
		}
	}
}' "$file"
