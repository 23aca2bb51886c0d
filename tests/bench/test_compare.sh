#!/usr/bin/env bash
# test_compare.sh - scripts/compare.sh on two fixture runs: a cell twice as
# slow with tight runs is flagged, a small change within noisy runs is not,
# an identical pair flags nothing, and the markdown table is well formed.
. "$(dirname "$0")/lib.sh"

a=tests/bench/fixtures/run-a.json b=tests/bench/fixtures/run-b.json
out=$(scripts/compare.sh "$a" "$b")
row() { printf '%s\n' "$out" | grep -E "^$1 +$2 +$3 " || fail "no row $1 $2 $3"; }
row uring callback parallel | has ' slower$' || fail "the 2x slower cell is not flagged: $(row uring callback parallel)"
row uring callback parallel | has '+97.0%' || fail "the change is not +97.0%"
row epoll promise blocking | grep -Eq ' ~ \(noisy\)$' || fail "a change within the noise is flagged"
row sync baseline parallel | grep -Eq ' ~$' || fail "an unchanged cell is flagged"
row uring coro blocking | has 'error in a run' || fail "an error cell is not shown as such"
row sync-mt baseline parallel | has 'only in A' || fail "a cell only in A is not shown"
printf '%s\n' "$out" | has 'knob sqpoll: 0 -> 1' || fail "the knob that differs is not named"
printf '%s\n' "$out" | has 'commit: aaaa1111 -> bbbb2222' || fail "the commits are not named"

same=$(scripts/compare.sh "$a" "$a")
if printf '%s\n' "$same" | grep -Eq ' (faster|slower)( \(noisy\))?$'; then
	fail "an identical pair is flagged: $same"
fi
printf '%s\n' "$same" | has 'what differs' && fail "an identical pair differs"

md=$(scripts/compare.sh --markdown "$a" "$b")
printf '%s\n' "$md" | has '^| backend | style | scenario | A median ms | B median ms | change | p | verdict |$' ||
	fail "no markdown header"
rows=$(printf '%s\n' "$md" | grep -c '^| [a-z]' || true)
[ "$rows" -eq 6 ] || fail "markdown: $rows rows, want 6 (header and 5 cells)"

# Too few runs to tell: two runs a side can never reach p < 0.05.
"$rb" -n 200 --runs 2 --json --no-out --backend sync --scenario parallel --no-limits 2>/dev/null >"$scratch/x.json"
scripts/compare.sh "$scratch/x.json" "$scratch/x.json" | has 'too few runs' || fail "two runs are not 'too few'"
scripts/compare.sh "$a" >/dev/null 2>&1 && fail "one file accepted"
ok "flags the obvious change, not the noise nor an identical pair"
