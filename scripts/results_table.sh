#!/usr/bin/env bash
# results_table.sh - turns ringbench's JSON lines into the README's tables.
#
#   scripts/results_table.sh [FILE]   FILE: bench/results/latest.json by
#       default: one row per backend x style, parallel and blocking side
#       by side, with the ratio to the sync baseline and syscalls/op.
#   scripts/results_table.sh --peers FILE   FILE: a peers-*.jsonl from
#       scripts/peers.sh: one row per scenario x style, one column per
#       backend or runtime, median ms.
set -euo pipefail
cd "$(dirname "$0")/.."

peers=0
if [ "${1:-}" = --peers ]; then peers=1; shift; fi
file=${1:-bench/results/latest.json}
[ -r "$file" ] || { echo "results_table.sh: cannot read $file" >&2; exit 1; }

awk -v peers="$peers" '
function field(k,   m) {
	if (match($0, "\"" k "\":\"?[^,\"}]*")) {
		m = substr($0, RSTART, RLENGTH); sub(/^[^:]*:"?/, "", m); return m
	}
	return ""
}
function fmt(v) { return v == "" ? "-" : sprintf("%.1f", v) }
field("error") == "" && field("median_ms") != "" {
	b = field("backend"); s = field("style"); sc = field("scenario")
	ms[b, s, sc] = field("median_ms"); ratio[b, s, sc] = field("ratio")
	sys[b, s, sc] = field("syscalls_per_op")
	if (!((b, s) in seen)) { seen[b, s] = 1; order[++n] = b SUBSEP s }
}
END {
	if (!peers) {
		print "| backend | style | parallel ms | ratio | blocking ms | ratio | syscalls/op (par / blk) |"
		print "|---|---|---|---|---|---|---|"
		for (i = 1; i <= n; i++) {
			split(order[i], k, SUBSEP); b = k[1]; s = k[2]
			printf "| %s | %s | %s | %.2f | %s | %.2f | %.2f / %.2f |\n", b, s,
				fmt(ms[b, s, "parallel"]), ratio[b, s, "parallel"],
				fmt(ms[b, s, "blocking"]), ratio[b, s, "blocking"],
				sys[b, s, "parallel"], sys[b, s, "blocking"]
		}
		exit
	}
	split("uring epoll epoll-pool node node-uring bun", cols, " ")
	print "| scenario | style | uring | epoll | epoll-pool | node | node, UV_USE_IO_URING=1 | bun | uring / epoll vs fastest peer |"
	print "|---|---|---|---|---|---|---|---|---|"
	split("parallel blocking", scs, " "); split("callback promise coro", sts, " ")
	for (a = 1; a <= 2; a++) for (c = 1; c <= 3; c++) {
		sc = scs[a]; s = sts[c]; row = "| " sc " | " s
		best = ""
		for (j = 4; j <= 6; j++) {
			v = ms[cols[j], s, sc]
			if (v != "" && (best == "" || v + 0 < best + 0)) best = v
		}
		for (j = 1; j <= 6; j++) row = row " | " fmt(ms[cols[j], s, sc])
		worst = ms["epoll", s, sc] + 0 > ms["epoll-pool", s, sc] + 0 ? ms["epoll", s, sc] : ms["epoll-pool", s, sc]
		row = row sprintf(" | %.1fx / %.1fx |", best / ms["uring", s, sc], best / worst)
		print row
	}
}' "$file"
