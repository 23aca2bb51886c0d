#!/usr/bin/env bash
# storage.sh - the storage scenarios on every backend and style, beside
# their limits: `make bench-storage`.
#
#   scripts/storage.sh [--quick] [ringbench options...]
#
# Three ringbench runs, one after the other:
#   1. write and cold, 10,000 small files per run, 5 runs per cell for
#      write (on this VM's ext4 an unlucky run is several times slower:
#      docs/bench.md), 3 for cold;
#   2. randread and randwrite at queue depths 1, 8, 32 and 128 on the
#      1 GiB file (made once, under bench/data), runs of 300 ms, 3 per cell;
#   3. write with fsync (--fsync), 1,000 files per run: a flush of the
#      disk's cache for every file is far slower than a buffered write.
# Options after the script's own go to every run (e.g. --style callback).
# --quick: 1,000 files, queue depths 1 and 32, 200 ms runs.
#
# Output: bench/results/storage-<stamp>.json (the meta record of the first
# run, then every cell), bench/results/storage-latest.json, the text report
# of each run on stderr, and the storage table (scripts/results_table.sh
# --storage) on stdout. It takes about eight minutes (two with --quick).
set -euo pipefail
cd "$(dirname "$0")/.."

n=10000 nsync=1000 qd=1,8,32,128 time_ms=300
if [ "${1:-}" = --quick ]; then
	n=1000 nsync=200 qd=1,32 time_ms=200
	shift
fi
[ -x bench/ringbench ] || make --no-print-directory bench-build
mkdir -p bench/results
stamp=$(date +%Y%m%d-%H%M%S)
out=bench/results/storage-$stamp.json

bench/ringbench --json --no-out --scenario write -n "$n" --runs 5 "$@" >"$out.tmp"
bench/ringbench --json --no-out --scenario cold -n "$n" --cold-files "$n" \
	--runs 3 "$@" | grep '^{"backend"' >>"$out.tmp"
bench/ringbench --json --no-out --scenario randread,randwrite --qd "$qd" \
	--time "$time_ms" --runs 3 "$@" | grep '^{"backend"' >>"$out.tmp"
bench/ringbench --json --no-out --scenario write --fsync -n "$nsync" \
	--runs 5 "$@" | grep '^{"backend"' >>"$out.tmp"
mv "$out.tmp" "$out"
ln -sf "storage-$stamp.json" bench/results/storage-latest.json
scripts/results_table.sh --storage "$out"
echo "storage: all cells in $out" >&2
