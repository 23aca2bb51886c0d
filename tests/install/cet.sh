#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# cet.sh - the x86-64 context switch and control-flow enforcement (CET).
#
# Built with -fcf-protection=full, the switch (styles/coro_switch_x86_64.S)
# must carry a GNU property note saying IBT - and only IBT: it does not
# switch shadow stacks, so it must not claim SHSTK (the .S explains) - with
# ENDBR64 at each entry point and NOTRACK on its indirect jump. Built
# without, it must have neither note nor ENDBR64. The whole library built
# with -fcf-protection=full then links with every object of its own
# carrying IBT, and the only missing property the linker reports is the
# switch's SHSTK. A coroutine program built that way runs.
#
# Run by `make test-install` (part of `make test`) on x86-64.
set -euo pipefail
cd "$(dirname "$0")/../.."

CC=${CC:-cc}
MAKE=${MAKE:-make}
fail() {
	echo "test-cet: $*" >&2
	exit 1
}
if [ "$(uname -m)" != x86_64 ]; then
	echo "test-cet: skipped (not x86-64)"
	exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ringloop-cet.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
src=styles/coro_switch_x86_64.S
entries="rl__coro_switch rl__coro_switch_known rl__coro_trampoline"

# features OBJECT: the x86 feature property of an ELF file, e.g. "IBT".
features() {
	readelf -n "$1" | sed -n 's/^ *Properties: x86 feature: //p'
}
# first_insn OBJECT SYMBOL: the first instruction of a symbol.
first_insn() {
	objdump -d --no-show-raw-insn "$1" |
		awk -v s="<$2>:" '$2 == s { getline; $1 = ""; print; exit }' | sed 's/^ *//'
}

$CC -fcf-protection=full -c "$src" -o "$tmp/cet.o"
[ "$(features "$tmp/cet.o")" = IBT ] ||
	fail "with -fcf-protection=full the switch's property is '$(features "$tmp/cet.o")', not IBT alone"
for sym in $entries; do
	[ "$(first_insn "$tmp/cet.o" "$sym")" = endbr64 ] || fail "$sym does not start with endbr64"
done
untracked=$(objdump -d "$tmp/cet.o" | grep -E 'jmp +\*' | grep -vc notrack || true)
[ "$untracked" -eq 0 ] || fail "$untracked indirect jumps without notrack"

$CC -fcf-protection=none -c "$src" -o "$tmp/plain.o"
[ -z "$(features "$tmp/plain.o")" ] || fail "without CET the switch still has a property note"
if objdump -d "$tmp/plain.o" | grep -qE 'endbr64|notrack'; then
	fail "without CET the switch still has endbr64 or notrack"
fi

# The whole library with CET. -nostartfiles keeps the C library's start
# files (not built for CET on every distribution) out of the property the
# link computes, so it shows what ringloop's own objects allow.
$MAKE --no-print-directory -s BUILD=build-cet CFLAGS=-fcf-protection=full lib >/dev/null
# The objects of today's sources (build-cet may hold those of files since
# removed).
objs=$(for f in loop/*.c styles/*.c styles/*_x86_64.S; do echo "build-cet/${f%.*}.o"; done)
# shellcheck disable=SC2086
$CC -shared -nostartfiles -Wl,-z,cet-report=warning -o "$tmp/libcet.so" \
	$objs -luring -lpthread 2>"$tmp/ld.log" ||
	fail "linking the library's CET objects failed:"$'\n'"$(cat "$tmp/ld.log")"
[ "$(features "$tmp/libcet.so")" = IBT ] ||
	fail "the library's objects allow '$(features "$tmp/libcet.so")', not IBT"
report=$(grep -o '[^ ]*: warning: missing .*' "$tmp/ld.log" || true)
[ "$report" = "build-cet/styles/coro_switch_x86_64.o: warning: missing SHSTK property" ] ||
	fail "the linker reports other missing properties:"$'\n'"$report"

$CC -fcf-protection=full -Wall -Wextra -Werror -Iinclude -o "$tmp/cat_coro" \
	examples/cat_coro.c build-cet/libringloop.a -luring -lpthread ||
	fail "a coroutine program does not build with CET"
printf 'Hello, world\n' >"$tmp/hello"
[ "$("$tmp/cat_coro" "$tmp/hello")" = "Hello, world" ] || fail "a coroutine program built with CET failed"

echo "test-cet: ok (the switch is marked IBT, not SHSTK; endbr64 at $(echo $entries | wc -w) entries, notrack jumps)"
