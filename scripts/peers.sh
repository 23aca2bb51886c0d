#!/usr/bin/env bash
# peers.sh - runs ringbench's scenarios in JavaScript on node (libuv's thread
# pool, and again with UV_USE_IO_URING=1) and on bun, with the same N and
# the same 12-byte file, and prints them beside ringbench's cells.
#
#   scripts/peers.sh [-n N] [--runs R] [--install-bun]
#
# bun is used when it is on PATH, in bench/peers/node_modules, or installed
# with --install-bun (npm package @oven/bun-linux-x64 or -aarch64).
set -euo pipefail
cd "$(dirname "$0")/.."

n=10000 runs=5 install_bun=0
while [ $# -gt 0 ]; do
	case "$1" in
	-n) n="$2"; shift 2 ;;
	--runs) runs="$2"; shift 2 ;;
	--install-bun) install_bun=1; shift ;;
	*) echo "peers.sh: unknown option $1" >&2; exit 2 ;;
	esac
done

command -v node >/dev/null || { echo "peers.sh: node not found (apt-get install nodejs)" >&2; exit 1; }
[ -x bench/ringbench ] || make --no-print-directory bench-build

arch=$(uname -m); [ "$arch" = x86_64 ] && arch=x64 || arch=aarch64
bun=$(command -v bun || true)
local_bun="bench/peers/node_modules/@oven/bun-linux-$arch/bin/bun"
if [ -z "$bun" ] && [ ! -x "$local_bun" ] && [ "$install_bun" = 1 ]; then
	npm install --silent --no-save --prefix bench/peers "@oven/bun-linux-$arch" >&2
fi
[ -z "$bun" ] && [ -x "$local_bun" ] && bun="$local_bun"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'Hello, world' >"$tmp/text.txt"
mkdir -p bench/results
out="bench/results/peers-$(date +%Y%m%d-%H%M%S).jsonl"

echo "peers: ringbench (-n $n, --runs $runs)" >&2
bench/ringbench --json --no-out -n "$n" --runs "$runs" --file "$tmp/text.txt" >"$out" 2>/dev/null
echo "peers: node $(node --version)" >&2
node bench/peers/readfile.js "$tmp/text.txt" "$n" "$runs" node >>"$out"
echo "peers: node with UV_USE_IO_URING=1" >&2
UV_USE_IO_URING=1 node bench/peers/readfile.js "$tmp/text.txt" "$n" "$runs" node-uring >>"$out"
if [ -n "$bun" ]; then
	echo "peers: bun $("$bun" --version)" >&2
	"$bun" bench/peers/readfile.js "$tmp/text.txt" "$n" "$runs" bun >>"$out"
else
	echo "peers: bun not found; scripts/peers.sh --install-bun fetches it from npm" >&2
fi
node bench/peers/compare.js "$out"
echo "peers: all rows in $out" >&2
