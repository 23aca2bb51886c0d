#!/bin/bash
# stress.sh - the hostile cases of issue 12 on this machine and kernel:
# every case on every backend configuration, a pass/fail table at the end.
#
#   scripts/stress.sh [CASE...]      (or: make stress)
#
# It builds the library (make lib) and tests/stress/hostile.c against it,
# then runs each case in a process of its own under a timeout (a hang is
# reported as HANG, not waited for). Everything stays in $TMPDIR (or /tmp)
# and on local files; nothing needs root, but a few cases say SKIP when
# the machine does not allow them (lowering RLIMIT_MEMLOCK changes nothing
# on kernels that charge io_uring rings to the memory cgroup, 5.12 on).
# The whole run takes a minute or two; STRESS_TIMEOUT (seconds, default
# 120) bounds each case.
set -u
cd "$(dirname "$0")/.."

CC=${CC:-cc}
TIMEOUT=${STRESS_TIMEOUT:-120}
BUILD=build
BIN=$BUILD/stress/hostile
BACKENDS="uring uring-nolink uring-nodirect epoll epoll-pool"

make --no-print-directory lib >/dev/null || { echo "stress: make lib failed" >&2; exit 1; }
mkdir -p "$BUILD/stress"
LIBS=$(pkg-config --libs liburing 2>/dev/null || echo -luring)
$CC -std=gnu11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Iinclude \
	-o "$BIN" tests/stress/hostile.c "$BUILD/libringloop.a" $LIBS -lpthread \
	|| { echo "stress: cannot build $BIN" >&2; exit 1; }

if [ $# -gt 0 ]; then CASES="$*"; else CASES=$("$BIN" --list); fi

echo "ringloop stress: $(uname -sr), $(nproc) CPUs; each case <= ${TIMEOUT}s"
printf '\n%-22s' case
for b in $BACKENDS; do printf ' %-15s' "$b"; done
printf '\n'
fails=0
notes=""
for c in $CASES; do
	printf '%-22s' "$c"
	for b in $BACKENDS; do
		out=$(timeout -k 5 "$TIMEOUT" "$BIN" "$c" "$b" 2>&1)
		rc=$?
		case $rc in
		0) r=PASS ;;
		77) r=SKIP ;;
		124 | 137) r=HANG; out="no answer within ${TIMEOUT}s" ;;
		*) r=FAIL ;;
		esac
		[ $rc -gt 128 ] && [ $rc -ne 137 ] && r=CRASH && out="signal $((rc - 128)) $out"
		printf ' %-15s' "$r"
		if [ "$r" != PASS ]; then
			[ "$r" != SKIP ] && fails=$((fails + 1))
			notes="$notes$c/$b: $r: $(echo "$out" | head -3 | tr '\n' ' ')\n"
		fi
	done
	printf '\n'
done
if [ -n "$notes" ]; then
	printf '\n'
	printf "$notes"
fi
printf '\n%s\n' "$([ $fails -eq 0 ] && echo 'all passed' || echo "$fails failed")"
[ $fails -eq 0 ]
