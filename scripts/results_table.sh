#!/usr/bin/env bash
# results_table.sh - turns ringbench's JSON lines into the README's tables.
#
#   scripts/results_table.sh [FILE]   FILE: bench/results/latest.json by
#       default: the machine (from the meta record), then one row per
#       backend x style, parallel and blocking side by side: median ms
#       with its stdev, the ratio to the paired sync runs, the ratio to the
#       row's limit (raw-uring for uring, sync-mt in parallel, sync in
#       blocking), CPU per read, p99 latency and syscalls per read.
#   scripts/results_table.sh --peers FILE   FILE: a peers-*.json from
#       scripts/peers.sh: one row per scenario x style, one column per
#       backend or runtime, median ms, and how the uring cell and the
#       slower epoll cell compare with the fastest peer.
#   scripts/results_table.sh --storage [FILE]   FILE: a run with storage
#       cells (bench/results/storage-latest.json by default): write (with
#       and without fsync) and cold, parallel and blocking side by side,
#       with their ratios, IOPS and the cold cache's resident share; then
#       randread and randwrite, one column per queue depth (IOPS, p50
#       latency, CPU per operation) and the ratio to the limit row.
set -euo pipefail
# field() and jget(): scripts/json.awk, in front of each awk program.
json_awk=$(cat "$(dirname "$0")/json.awk")
cd "$(dirname "$0")/.."

peers=0
if [ "${1:-}" = --peers ]; then peers=1; shift; fi
if [ "${1:-}" = --storage ]; then
	shift
	exec "$(dirname "$0")/storage_table.sh" "${1:-bench/results/storage-latest.json}"
fi
file=${1:-bench/results/latest.json}
[ -r "$file" ] || { echo "results_table.sh: cannot read $file" >&2; exit 1; }

awk -v peers="$peers" "$json_awk"'
function fmt(v, d) { return v == "" ? "-" : sprintf("%." d "f", v) }
function pm(v, sd) { return v == "" ? "-" : sprintf("%.1f ±%.0f%%", v, sd == "" || v == 0 ? 0 : 100 * sd / v) }
# "N× faster" when x >= 1 (x = peer / ours), "N× slower" otherwise: a loss
# is never written as a fraction of a win.
function word(x) {
	if (x == "" || x <= 0) return "-"
	return x >= 1 ? sprintf("%.1f× faster", x) : sprintf("%.1f× slower", 1 / x)
}
/^\{"meta":/ {
	m_cpu = field("cpu"); m_cpus = field("cpus"); m_kernel = field("kernel")
	m_lib = field("liburing"); m_cc = field("compiler"); m_commit = field("commit")
	m_sys = field("syscall_ns"); m_enter = field("enter_ns"); m_n = field("n")
	m_runs = field("runs"); m_warm = field("warmup"); m_date = field("date")
	next
}
# The seed read scenarios; with --peers, write and cold too ("write
# parallel"...). Random I/O cells have a qd and no mode: not here.
field("backend") != "" && field("error") == "" && field("median_ms") != "" && (field("mode") != "" ? peers : field("qd") == "") {
	b = field("backend"); s = field("style"); sc = field("scenario")
	if (field("mode") != "") sc = sc " " field("mode")
	ms[b, s, sc] = field("median_ms"); sd[b, s, sc] = field("stdev_ms")
	ratio[b, s, sc] = field("ratio"); lim[b, s, sc] = field("limit_ratio")
	limname[b, s, sc] = field("limit")
	cpu[b, s, sc] = field("cpu_us_per_op"); p99[b, s, sc] = field("lat_p99_us")
	sys[b, s, sc] = field("syscalls_per_op"); noisy[b, s, sc] = field("noisy")
	if (!((b, s) in seen)) { seen[b, s] = 1; order[++n] = b SUBSEP s }
}
function pair(a, c, d) { return fmt(a, d) " / " fmt(c, d) }
function cellms(b, s, sc) { return pm(ms[b, s, sc], sd[b, s, sc]) (noisy[b, s, sc] == "true" ? " (noisy)" : "") }
END {
	if (m_cpu != "")
		printf "Machine: %s, %s CPUs, Linux %s, liburing %s, %s, commit %s; a trivial syscall %.0f ns, io_uring_enter with nothing to do %s ns; N = %s, %s runs per cell after %s warm-up (%s).\n\n", \
			m_cpu, m_cpus, m_kernel, m_lib, m_cc, m_commit, m_sys, \
			m_enter == "" ? "-" : sprintf("%.0f", m_enter), m_n, m_runs, m_warm, m_date
	if (!peers) {
		print "| backend | style | parallel ms | ratio | × limit | blocking ms | ratio | × limit | CPU µs/read (par / blk) | p99 µs (par / blk) | syscalls/read (par / blk) |"
		print "|---|---|---|---|---|---|---|---|---|---|---|"
		for (i = 1; i <= n; i++) {
			split(order[i], k, SUBSEP); b = k[1]; s = k[2]
			P = "parallel"; B = "blocking"
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", b, s,
				cellms(b, s, P), fmt(ratio[b, s, P], 2),
				lim[b, s, P] == "" ? "-" : fmt(lim[b, s, P], 2) " " limname[b, s, P],
				cellms(b, s, B), fmt(ratio[b, s, B], 2),
				lim[b, s, B] == "" ? "-" : fmt(lim[b, s, B], 2) " " limname[b, s, B],
				pair(cpu[b, s, P], cpu[b, s, B], 2), pair(p99[b, s, P], p99[b, s, B], 0),
				pair(sys[b, s, P], sys[b, s, B], 2)
		}
		exit
	}
	split("uring epoll epoll-pool node node-uring bun", cols, " ")
	print "| scenario | style | uring | epoll | epoll-pool | node | node, UV_USE_IO_URING=1 | bun | uring vs fastest peer | slower epoll vs fastest peer |"
	print "|---|---|---|---|---|---|---|---|---|---|"
	nscs = split("parallel|blocking|write parallel|write blocking|cold parallel|cold blocking", scs, "|")
	split("callback promise coro", sts, " ")
	for (a = 1; a <= nscs; a++) for (c = 1; c <= 3; c++) {
		sc = scs[a]; s = sts[c]; row = "| " sc " | " s
		if (ms["uring", s, sc] == "" && ms["node", s, sc] == "" && ms["bun", s, sc] == "") continue
		best = ""
		for (j = 4; j <= 6; j++) {
			v = ms[cols[j], s, sc]
			if (v != "" && (best == "" || v + 0 < best + 0)) best = v
		}
		for (j = 1; j <= 6; j++) row = row " | " fmt(ms[cols[j], s, sc], 1)
		e1 = ms["epoll", s, sc]; e2 = ms["epoll-pool", s, sc]
		worst = e1 + 0 > e2 + 0 ? e1 : e2
		u = ms["uring", s, sc]
		row = row " | " word(best != "" && u != "" ? best / u : "") \
			  " | " word(best != "" && worst != "" ? best / worst : "") " |"
		print row
	}
}' "$file"
