#!/usr/bin/env bash
# test_plot.sh - scripts/plot.sh draws a run and a peers run (when gnuplot
# is installed), including runs where whole styles or series are missing.
. "$(dirname "$0")/lib.sh"

command -v gnuplot >/dev/null || { ok "skipped: no gnuplot"; exit 0; }
scripts/plot.sh tests/bench/fixtures/run-a.json "$scratch/a" 2>"$scratch/err" ||
	fail "plot.sh failed: $(cat "$scratch/err")"
for f in a.png a.svg a-latency.png a-latency.svg; do
	[ -s "$scratch/$f" ] || fail "no $f"
done
grep -q 'warning' "$scratch/err" && fail "gnuplot warned: $(cat "$scratch/err")"
grep -q 'commit' "$scratch/a.svg" || grep -q 'AMD EPYC' "$scratch/a.svg" || fail "no caption in the chart"
# A peers file with ringbench's cells and no node or bun rows at all.
scripts/plot.sh --peers tests/bench/fixtures/run-b.json "$scratch/p" 2>"$scratch/err" ||
	fail "plot.sh --peers failed: $(cat "$scratch/err")"
[ -s "$scratch/p.png" ] && [ -s "$scratch/p.svg" ] || fail "no peers chart"
ok "charts drawn"
