#!/usr/bin/env bash
# fio.sh - ringbench's randread and randwrite beside fio's io_uring, libaio
# and psync engines, on the same file, with the same block size, queue
# depths and run time, in one run: `make bench-fio`.
#
#   scripts/fio.sh [--qd LIST] [--bs BYTES] [--time MS] [--runs R]
#                  [--rounds N] [--rw randread,randwrite]
#                  [--submit-batch S] [--rand-size BYTES]
#                  [--rand-file PATH] [--json FILE] [ringbench options...]
#
# For each scenario and queue depth, in turn: ringbench's cells at that
# depth (every backend and style, and its limits sync and raw-uring), then
# fio with each engine - io_uring and libaio with iodepth = qd, psync with
# qd threads - so that every row of a depth is measured within seconds of
# the others; --rounds N does that N times over (the table takes each
# row's median over the rounds: a shared VM's disk changes speed from one
# minute to the next). The uring cells run twice: as the loop does by
# default (one io_uring_enter per batch, at the loop's wait) and with
# ringbench --submit-batch S (4; 0: not) - fio submits each I/O at once,
# and on a device that works in step with its submissions that matters. fio runs for --runs x --time after a ramp of one --time, as
# ringbench measures --runs runs after one warm-up run; it draws offsets
# uniformly with repeats (norandommap), as ringbench does; ringbench's
# io_uring knobs become fio's where fio has them (--fixed-bufs: fixedbufs,
# --sqpoll: sqthread_poll, --iopoll: hipri, --force-async: force_async=1).
#
# fio is installed when missing (scripts/install-deps.sh --fio: the Debian
# package). Output: bench/results/fio-<stamp>.json (ringbench's meta record,
# then ringbench's cells and fio's rows in the same JSON contract: backend
# fio-io_uring, fio-libaio, fio-psync; qd, bs, iops, mb_s, cpu_us_per_op,
# lat_p50_us, lat_p99_us, lat_p999_us), bench/results/fio-latest.json, and
# the comparison on stdout (scripts/fio_table.sh).
#
# fio's output becomes ringbench's JSON in scripts/fio_json.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

qds="1,8,32,128" bs=4096 time_ms=1000 runs=3 rounds=1 rws="randread,randwrite"
sbatch=4
rand_size="" rand_file="" json="" extra=()
while [ $# -gt 0 ]; do
	case "$1" in
	--qd) qds="$2"; shift 2 ;;
	--bs) bs="$2"; shift 2 ;;
	--time) time_ms="$2"; shift 2 ;;
	--runs) runs="$2"; shift 2 ;;
	--rounds) rounds="$2"; shift 2 ;;
	--submit-batch) sbatch="$2"; shift 2 ;;
	--rw) rws="$2"; shift 2 ;;
	--rand-size) rand_size="$2"; shift 2 ;;
	--rand-file) rand_file="$2"; shift 2 ;;
	--json) json="$2"; shift 2 ;;
	-h|--help) sed -n '2,37p' "$0"; exit 0 ;;
	*) extra+=("$1"); shift ;;
	esac
done

if ! command -v fio >/dev/null; then
	scripts/install-deps.sh --fio
	command -v fio >/dev/null || { echo "fio.sh: fio is not installed" >&2; exit 1; }
fi
[ -x bench/ringbench ] || make --no-print-directory bench-build

# The ringbench options every invocation shares; fio's twins of its knobs.
rb=(bench/ringbench --json --no-out --bs "$bs" --time "$time_ms" --runs "$runs")
[ -n "$rand_size" ] && rb+=(--rand-size "$rand_size")
[ -n "$rand_file" ] && rb+=(--rand-file "$rand_file")
rb+=(${extra[@]+"${extra[@]}"})
uring_opts=()
for a in ${extra[@]+"${extra[@]}"}; do
	case "$a" in
	--fixed-bufs) uring_opts+=(--fixedbufs=1) ;;
	--sqpoll) uring_opts+=(--sqthread_poll=1) ;;
	--iopoll) uring_opts+=(--hipri=1) ;;
	--force-async) uring_opts+=(--force_async=1) ;;
	esac
done

mkdir -p bench/results
stamp=$(date +%Y%m%d-%H%M%S)
out=${json:-bench/results/fio-$stamp.json}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
: >"$out.tmp"

# The file: ringbench makes it (and lays it out again when fio's randwrite
# wrote over it); its path is in the header ringbench prints.
"${rb[@]}" --scenario randread --qd 1 --ops 1 --runs 1 --warmup 0 \
	--backend sync --no-limits >/dev/null 2>"$tmp/setup" ||
	{ cat "$tmp/setup" >&2; exit 1; }
file=$(sed -n 's/^randread: [0-9]*-byte blocks of \(.*\) (\([0-9]*\) MiB).*/\1/p' "$tmp/setup")
mib=$(sed -n 's/^randread: [0-9]*-byte blocks of .* (\([0-9]*\) MiB).*/\1/p' "$tmp/setup")
[ -n "$file" ] && [ -r "$file" ] || { echo "fio.sh: no rand file: $(cat "$tmp/setup")" >&2; exit 1; }
grep -q "laying out" "$tmp/setup" && cat "$tmp/setup" >&2
ramp="${time_ms}ms" run="$((time_ms * runs))ms"

run_fio() {
	local engine=$1 rw=$2 qd=$3 jobs=1 t0 t1
	local args=(--name=ringbench --filename="$file" --size="${mib}M" --rw="$rw"
		--bs="$bs" --direct=1 --ioengine="$engine" --time_based
		--runtime="$run" --ramp_time="$ramp" --norandommap --randrepeat=0
		--thread --lat_percentiles=1 --percentile_list=50:99:99.9
		--output-format=json)
	if [ "$engine" = psync ]; then
		jobs=$qd
		args+=(--iodepth=1 --numjobs="$qd" --group_reporting)
	else
		args+=(--iodepth="$qd")
		[ "$engine" = io_uring ] && args+=(${uring_opts[@]+"${uring_opts[@]}"})
	fi
	t0=$(date +%s%N)
	if ! fio "${args[@]}" >"$tmp/fio.json" 2>"$tmp/fio.err"; then
		printf '{"backend":"fio-%s","style":"fio","scenario":"%s","n":0,"runs":0,"warmup":0,"bytes":%s,"qd":%s,"bs":%s,"error":"fio failed: %s"}\n' \
			"$engine" "$rw" "$bs" "$qd" "$bs" "$(tr -d '"\\' <"$tmp/fio.err" | tr '\n' ' ' | cut -c1-200)"
		return
	fi
	t1=$(date +%s%N)
	scripts/fio_json.sh "$engine" "$rw" "$qd" "$bs" "$jobs" \
		$(((t1 - t0) / 1000000)) "$(fio --version)" <"$tmp/fio.json"
}

first=1
IFS=, read -r -a rwlist <<<"$rws"
IFS=, read -r -a qdlist <<<"$qds"
for rw in "${rwlist[@]}"; do
	for qd in "${qdlist[@]}"; do
	for ((round = 1; round <= rounds; round++)); do
		echo "fio.sh: $rw qd $qd (round $round of $rounds): ringbench" >&2
		"${rb[@]}" --scenario "$rw" --qd "$qd" >"$tmp/rb.json" 2>"$tmp/rb.err" ||
			{ cat "$tmp/rb.err" >&2; exit 1; }
		if [ $first = 1 ]; then
			grep '^{"meta"' "$tmp/rb.json" >>"$out.tmp" || true
			first=0
		fi
		grep '^{"backend"' "$tmp/rb.json" >>"$out.tmp" || true
		if [ "$sbatch" != 0 ]; then
			echo "fio.sh: $rw qd $qd: ringbench uring --submit-batch $sbatch" >&2
			"${rb[@]}" --scenario "$rw" --qd "$qd" --backend uring --no-limits \
				--submit-batch "$sbatch" 2>"$tmp/rb.err" | grep '^{"backend"' >>"$out.tmp" ||
				{ cat "$tmp/rb.err" >&2; exit 1; }
		fi
		for engine in io_uring libaio psync; do
			echo "fio.sh: $rw qd $qd: fio $engine" >&2
			run_fio "$engine" "$rw" "$qd" >>"$out.tmp"
		done
	done
	done
done
mv "$out.tmp" "$out"
if [ -z "$json" ]; then
	ln -sf "fio-$stamp.json" bench/results/fio-latest.json
fi
scripts/fio_table.sh "$out"
echo "fio.sh: all rows in $out" >&2
