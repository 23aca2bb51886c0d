# lib.sh - what the bench's test scripts share (sourced, not run).
# Each test script runs from the repository root, uses bench/ringbench,
# and exits non-zero with a message at the first failed check.
set -euo pipefail
cd "$(dirname "$0")/../.."
rb=bench/ringbench
me=$(basename "$0" .sh)
fail() { echo "$me: FAIL: $*" >&2; exit 1; }
ok() { echo "$me: ok ($*)"; }
# has PATTERN: whether stdin holds a line matching PATTERN. Unlike grep -q,
# it reads all of its input: grep -q exits at the first match, the writer
# upstream then dies of SIGPIPE, and pipefail turns the match into a
# failure (it did, now and then, for long JSON lines).
has() { grep "$@" >/dev/null; }

# jfield LINE KEY: the value of KEY in a one-line JSON object, "" when
# absent, "null" when null; strings without their quotes.
jfield() {
	printf '%s\n' "$1" | awk -v k="$2" '{
		if (!match($0, "\"" k "\":(\"[^\"]*\"|\\[[^]]*\\]|[^,}]*)")) exit
		m = substr($0, RSTART + length(k) + 3, RLENGTH - length(k) - 3)
		gsub(/^"|"$/, "", m); print m }'
}

# A scratch directory removed at exit.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
