#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# run.sh - ringloop as a user gets it: `make install` into a temporary
# DESTDIR with PREFIX=/usr, then, against that tree only:
#
#   - the installed files: the libraries and their links, the public
#     headers and nothing else, ringloop.pc; `make uninstall` removes them;
#   - the shared library: its soname, its links, and its dynamic symbols:
#     only rl_ names, exactly the functions the public headers declare,
#     each one listed in docs/api.md;
#   - the public headers: each compiles alone as C11 (-pedantic) and C++;
#   - every program in examples/, the README's example (extracted from
#     the README, and identical to its file in examples/) and the C++ test
#     tests/install/all_headers.cpp, built with nothing but
#     `pkg-config --cflags --libs ringloop`, linked shared and static, and
#     run, their output checked (the network examples by
#     tests/net/examples.sh, on loopback).
#
# Run by `make test-install` (part of `make test`), from the top of the
# tree. CC, CXX and MAKE come from make.
set -euo pipefail
cd "$(dirname "$0")/../.."

CC=${CC:-cc}
CXX=${CXX:-c++}
MAKE=${MAKE:-make}
fail() {
	echo "test-install: $*" >&2
	exit 1
}

for tool in "$CC" "$CXX" pkg-config nm readelf perl; do
	command -v "$tool" >/dev/null || fail "$tool not found (the C++ test needs a C++ compiler: g++)"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ringloop-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
bin=$tmp/bin
mkdir -p "$bin"

ver() { sed -n "s/^#define RL_VERSION_$1 \([0-9]*\).*/\1/p" include/ringloop/ringloop.h; }
major=$(ver MAJOR)
minor=$(ver MINOR)
version=$major.$minor.$(ver PATCH)
# Before 1.0 a minor release may break the ABI: the soname has both.
if [ "$major" = 0 ]; then soname=libringloop.so.0.$minor; else soname=libringloop.so.$major; fi
sofile=libringloop.so.$version

# ------------------------------------------------------------ install
# Installing builds nothing but the library, and never the dependencies.
if $MAKE -n install DESTDIR="$root" PREFIX=/usr | grep -q install-deps; then
	fail "make install would run scripts/install-deps.sh"
fi
$MAKE --no-print-directory -s install DESTDIR="$root" PREFIX=/usr >/dev/null
lib=$root/usr/lib

expected=$( (
	for h in include/ringloop/*.h; do echo "usr/include/ringloop/${h##*/}"; done
	echo "usr/lib/libringloop.a"
	echo "usr/lib/libringloop.so -> $soname"
	echo "usr/lib/$soname -> $sofile"
	echo "usr/lib/$sofile"
	echo "usr/lib/pkgconfig/ringloop.pc"
) | sort)
actual=$(cd "$root" && find . -type f -printf '%P\n' -o -type l -printf '%P -> %l\n' | sort)
[ "$expected" = "$actual" ] ||
	fail "installed files differ:"$'\n'"$(diff <(echo "$expected") <(echo "$actual"))"
for h in include/ringloop/*.h; do
	cmp -s "$h" "$root/usr/include/ringloop/${h##*/}" || fail "$h installed changed"
done

# ------------------------------------------------------ shared library
so=$lib/$sofile
readelf -d "$so" | grep -q "(SONAME).*\[$soname\]" ||
	fail "$sofile has no soname $soname"
[ "$(readlink "$lib/$soname")" = "$sofile" ] || fail "$soname does not link to $sofile"
[ "$(readlink "$lib/libringloop.so")" = "$soname" ] ||
	fail "libringloop.so does not link to $soname"
if readelf -d "$so" | grep -q TEXTREL; then fail "$sofile has text relocations"; fi
readelf -lW "$so" | grep GNU_STACK | grep -q ' RW ' || fail "$sofile asks for an executable stack"

exported=$(nm -D --defined-only "$so" | awk '{ print $3 }' | sort)
others=$(echo "$exported" | grep -v '^rl_' || true)
[ -z "$others" ] || fail "the shared library exports names other than rl_*:"$'\n'"$others"
# The functions the headers declare, from the headers without comments.
declared=$(perl -0777 -pe 's{/\*.*?\*/}{}gs; s{//[^\n]*}{}g' include/ringloop/*.h |
	grep -oE '\brl_[a-z0-9_]+ *\(' | sed 's/ *($//' | sort -u)
[ "$declared" = "$exported" ] ||
	fail "exported symbols (>) and the headers' functions (<) differ:"$'\n'"$(diff <(echo "$declared") <(echo "$exported") | grep '^[<>]')"
for f in $exported; do
	grep -q "\b$f(" docs/api.md || fail "docs/api.md does not list $f()"
done

# ---------------------------------------------------------- pkg-config
# The tree is installed for /usr, but staged in $root: the sysroot tells
# pkg-config where /usr is for now (-I$root/usr/include, -L$root/usr/lib).
export PKG_CONFIG_PATH=$lib/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$root
[ "$(pkg-config --modversion ringloop)" = "$version" ] ||
	fail "ringloop.pc says version $(pkg-config --modversion ringloop), the header $version"
pc_flags=$(pkg-config --cflags --libs ringloop)
# The .pc file is relocatable too: --define-prefix finds the same tree.
[ "$(PKG_CONFIG_SYSROOT_DIR= pkg-config --define-prefix --cflags --libs ringloop)" = "$pc_flags" ] ||
	fail "pkg-config --define-prefix gives other flags than the sysroot"
pkg-config --static --libs ringloop | grep -q -- -luring ||
	fail "pkg-config --static does not bring liburing"

# -------------------------------------------------------- the headers
for h in include/ringloop/*.h; do
	name=ringloop/${h##*/}
	echo "#include <$name>" | $CC -std=c11 -pedantic -Wall -Wextra -Werror \
		$(pkg-config --cflags ringloop) -x c -fsyntax-only - ||
		fail "<$name> does not compile alone as C11"
	echo "#include <$name>" | $CXX -std=c++11 -pedantic -Wall -Wextra -Werror \
		$(pkg-config --cflags ringloop) -x c++ -fsyntax-only - ||
		fail "<$name> does not compile alone as C++"
done

# ------------------------------------------------ the README's example
# The fenced block after the marker line must be examples/cat_callback.c,
# word for word; the extracted copy is what gets built.
marker='<!-- example: examples/cat_callback.c -->'
grep -qF "$marker" README.md || fail "README.md lost its example marker"
awk -v m="$marker" '
	$0 == m { on = 1; next }
	on == 1 && /^```c$/ { on = 2; next }
	on == 2 && /^```$/ { exit }
	on == 2 { print }' README.md >"$tmp/readme_example.c"
diff -u examples/cat_callback.c "$tmp/readme_example.c" >&2 ||
	fail "the README's example differs from examples/cat_callback.c"

# ------------------------------------------ build, link and run each one
build() { # build NAME SOURCE LANG-COMPILER
	local name=$1 src=$2 cc=$3 std
	case $src in *.cpp) std=-std=c++17 ;; *) std= ;; esac
	# Shared: the program needs libringloop.so.MAJOR at run time.
	$cc $std -Wall -Wextra -Werror -o "$bin/$name" "$src" \
		$(pkg-config --cflags --libs ringloop) || fail "$src does not build (shared)"
	readelf -d "$bin/$name" | grep -q "(NEEDED).*\[$soname\]" ||
		fail "$name is not linked to $soname"
	# Static: the whole program, libringloop.a and its private
	# dependencies (liburing, the thread library) included.
	$cc $std -Wall -Wextra -Werror -static -o "$bin/$name.static" "$src" \
		$(pkg-config --static --cflags --libs ringloop) ||
		fail "$src does not build (static)"
	if readelf -d "$bin/$name.static" 2>/dev/null | grep -q NEEDED; then
		fail "$name.static is not static"
	fi
}
# run NAME EXPECTED-FILE [ARGS...]: both links, stdout compared. Programs
# whose lines come from independent events (a timer and a thread) are
# compared as sorted lines, SORTED=1.
run() {
	local name=$1 want=$2 link out
	shift 2
	for link in shared static; do
		if [ $link = shared ]; then
			out=$(LD_LIBRARY_PATH=$lib "$bin/$name" "$@" 2>"$tmp/stderr") ||
				fail "$name ($link) failed: $(cat "$tmp/stderr")"
		else
			out=$("$bin/$name.static" "$@" 2>"$tmp/stderr") ||
				fail "$name ($link) failed: $(cat "$tmp/stderr")"
		fi
		if [ "${SORTED:-0}" = 1 ]; then
			out=$(echo "$out" | sort)
			want=$(echo "$want" | sort)
		fi
		[ "$out" = "$want" ] ||
			fail "$name ($link) printed:"$'\n'"$out"$'\n'"instead of:"$'\n'"$want"
	done
}

for src in examples/*.c; do
	name=${src##*/}
	build "${name%.c}" "$src" "$CC"
done
build readme_example "$tmp/readme_example.c" "$CC"
build all_headers tests/install/all_headers.cpp "$CXX"

# Inputs for the cats: a small text file, and a 200 KiB binary one that
# takes several reads and outgrows every first buffer.
printf 'Hello, world\n' >"$tmp/hello"
head -c 204800 /dev/urandom >"$tmp/big"
cat "$tmp/hello" "$tmp/big" "$tmp/hello" >"$tmp/cat.want"
for cat in cat_callback cat_promise cat_coro readme_example; do
	for link in shared static; do
		prog=$bin/$cat
		[ $link = static ] && prog=$bin/$cat.static
		LD_LIBRARY_PATH=$lib "$prog" "$tmp/hello" "$tmp/big" "$tmp/hello" \
			>"$tmp/cat.out" 2>"$tmp/stderr" ||
			fail "$cat ($link) failed: $(cat "$tmp/stderr")"
		cmp -s "$tmp/cat.want" "$tmp/cat.out" || fail "$cat ($link) printed other bytes"
		# A missing file: an error message naming it, exit status 1,
		# and the other files still printed.
		if LD_LIBRARY_PATH=$lib "$prog" "$tmp/hello" "$tmp/missing" "$tmp/hello" \
			>"$tmp/cat.out" 2>"$tmp/stderr"; then
			fail "$cat ($link) succeeded on a missing file"
		fi
		grep -q "$tmp/missing" "$tmp/stderr" || fail "$cat ($link) did not name the missing file"
		[ "$(cat "$tmp/cat.out")" = "$(printf 'Hello, world\nHello, world')" ] ||
			fail "$cat ($link) did not print the other files"
	done
done

SORTED=1 run timer_post "post: the worker says 10! = 3628800
timer: tick 1
timer: tick 2
timer: tick 3
timer: stopped after 3 ticks"

SORTED=1 run coro_cancel "reader: waiting for a pipe nobody writes to
sleeper: sleeping for a minute
watchdog: 50 ms passed, stopping the loop
main: closing the loop
reader: read returned Operation canceled
sleeper: sleep returned Operation canceled
main: closed"

printf 'hello\n' >"$tmp/hello6"
run all_headers "all_headers: ok" "$tmp/hello6"

# Every backend the examples may run on: epoll too (AUTO picks io_uring
# where the kernel allows it).
for backend in uring epoll; do
	RINGLOOP_BACKEND=$backend LD_LIBRARY_PATH=$lib "$bin/cat_coro" "$tmp/hello" >"$tmp/cat.out" 2>&1 ||
		{ [ $backend = uring ] && continue; fail "cat_coro on $backend failed"; }
	[ "$(cat "$tmp/cat.out")" = "Hello, world" ] || fail "cat_coro on $backend printed other bytes"
	RINGLOOP_BACKEND=$backend SORTED=1 run coro_cancel "$(cat <<'EOF'
reader: waiting for a pipe nobody writes to
sleeper: sleeping for a minute
watchdog: 50 ms passed, stopping the loop
main: closing the loop
reader: read returned Operation canceled
sleeper: sleep returned Operation canceled
main: closed
EOF
)"
done

# The network examples, against each other and raw requests on loopback.
tests/net/examples.sh "$bin" "$lib"

# ---------------------------------------------------------- uninstall
$MAKE --no-print-directory -s uninstall DESTDIR="$root" PREFIX=/usr >/dev/null
left=$(cd "$root" && find . \( -type f -o -type l \) -printf '%P\n')
[ -z "$left" ] || fail "make uninstall left:"$'\n'"$left"

echo "test-install: ok ($(echo "$exported" | wc -l) rl_ symbols, $(ls examples/*.c | wc -l) examples, C and C++, shared and static)"
