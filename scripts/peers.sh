#!/usr/bin/env bash
# peers.sh - runs ringbench's scenarios in JavaScript on node (libuv's thread
# pool, and again with UV_USE_IO_URING=1) and on bun, with the same N and
# the same 12-byte file, and prints them beside ringbench's cells: the
# seed's reads of a cached file (bench/peers/readfile.js), then the write
# and cold scenarios (bench/peers/storage.js: fs.promises with a
# FileHandle, and fs callbacks), on the same N files, whose page cache
# ringbench --drop-cache drops before every run.
#
#   scripts/peers.sh [-n N] [--runs R] [--fsync] [--no-storage]
#                                            (make bench-peers)
#
# bun is used when it is on PATH or in bench/peers/node_modules; when it is
# in neither, it is fetched from the npm registry (@oven/bun-linux-x64, or
# the -baseline build on a CPU without AVX2, or -aarch64) into
# bench/peers/node_modules. node is needed (apt-get install nodejs npm).
#
# Output: bench/results/peers-<stamp>.json (ringbench's meta record, then
# ringbench's cells, then node's and bun's, in the same JSON contract),
# bench/results/peers-latest.json pointing to it, the comparison on stdout,
# and the chart bench/results/peers-<stamp>.{png,svg} when gnuplot is there.
set -euo pipefail
cd "$(dirname "$0")/.."

n=10000 runs=5 fsync="" storage=1
while [ $# -gt 0 ]; do
	case "$1" in
	-n) n="$2"; shift 2 ;;
	--runs) runs="$2"; shift 2 ;;
	--fsync) fsync=--fsync; shift ;;
	--no-storage) storage=0; shift ;;
	--install-bun) shift ;; # the default now; kept for old command lines
	*) echo "peers.sh: unknown option $1" >&2; exit 2 ;;
	esac
done

# node is the one peer that must be there: Debian's nodejs and npm when it
# is missing (scripts/install-deps.sh --node).
if ! command -v node >/dev/null; then
	scripts/install-deps.sh --node
	command -v node >/dev/null || { echo "peers.sh: node not found (apt-get install nodejs npm)" >&2; exit 1; }
fi
[ -x bench/ringbench ] || make --no-print-directory bench-build

case "$(uname -m)" in
x86_64)
	pkg=@oven/bun-linux-x64
	grep -qw avx2 /proc/cpuinfo || pkg=@oven/bun-linux-x64-baseline ;;
aarch64) pkg=@oven/bun-linux-aarch64 ;;
*) pkg= ;;
esac
bun=$(command -v bun || true)
local_bun="bench/peers/node_modules/$pkg/bin/bun"
if [ -z "$bun" ] && [ -n "$pkg" ] && [ ! -x "$local_bun" ]; then
	if command -v npm >/dev/null; then
		echo "peers: bun not found; fetching $pkg from the npm registry" >&2
		npm install --silent --no-save --no-audit --no-fund \
			--prefix bench/peers "$pkg" >&2 ||
			echo "peers: npm install $pkg failed; going on without bun" >&2
	else
		echo "peers: bun not found and no npm to fetch it (apt-get install npm); going on without bun" >&2
	fi
fi
[ -z "$bun" ] && [ -x "$local_bun" ] && bun="$local_bun"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf 'Hello, world' >"$tmp/text.txt"
mkdir -p bench/results
stamp=$(date +%Y%m%d-%H%M%S)
out="bench/results/peers-$stamp.json"

echo "peers: ringbench (-n $n, --runs $runs)" >&2
bench/ringbench --json --no-out -n "$n" --runs "$runs" --file "$tmp/text.txt" >"$out.tmp" 2>/dev/null
echo "peers: node $(node --version)" >&2
node bench/peers/readfile.js "$tmp/text.txt" "$n" "$runs" node >>"$out.tmp"
echo "peers: node with UV_USE_IO_URING=1" >&2
UV_USE_IO_URING=1 node bench/peers/readfile.js "$tmp/text.txt" "$n" "$runs" node-uring >>"$out.tmp"
if [ -n "$bun" ]; then
	echo "peers: bun $("$bun" --version)" >&2
	"$bun" bench/peers/readfile.js "$tmp/text.txt" "$n" "$runs" bun >>"$out.tmp"
fi
if [ "$storage" = 1 ]; then
	# The files of write and cold live where ringbench keeps its own, under
	# bench/data in a directory marked chattr +T, not in /tmp, and the
	# emptied directories stay ten minutes: on ext4 without a journal a
	# block group full of recently freed inodes makes every new file slow
	# (bench/cold.h). Older ones go now.
	mkdir -p bench/data
	find bench/data -maxdepth 1 -name 'peers-*' -mmin +10 -exec rm -rf {} + 2>/dev/null || true
	sdir=$(mktemp -d bench/data/peers-XXXXXX)
	trap 'rm -rf "$tmp"; find "$sdir" -type f -delete' EXIT
	chattr +T "$sdir" 2>/dev/null || true
	mkdir "$sdir/cold" "$sdir/w"
	chattr +T "$sdir/w" 2>/dev/null || true
	# The cold files, on the disk (dirty pages cannot be dropped).
	for ((i = 0; i < n; i++)); do printf 'Hello, world' >"$sdir/cold/cold-$i"; done
	sync -f "$sdir/cold"
	echo "peers: ringbench write and cold (-n $n, --runs $runs${fsync:+, $fsync})" >&2
	bench/ringbench --json --no-out -n "$n" --runs "$runs" --cold-files "$n" \
		--scenario write,cold $fsync 2>/dev/null | grep '^{"backend"' >>"$out.tmp"
	st=(bench/peers/storage.js)
	for sc in write cold; do
		d="$sdir/cold"; [ "$sc" = write ] && d="$sdir/w"
		echo "peers: node $sc" >&2
		node "${st[@]}" "$sc" "$d" "$n" "$runs" node $fsync >>"$out.tmp"
		echo "peers: node $sc with UV_USE_IO_URING=1" >&2
		UV_USE_IO_URING=1 node "${st[@]}" "$sc" "$d" "$n" "$runs" node-uring $fsync >>"$out.tmp"
		if [ -n "$bun" ]; then
			echo "peers: bun $sc" >&2
			"$bun" "${st[@]}" "$sc" "$d" "$n" "$runs" bun $fsync >>"$out.tmp"
		fi
	done
fi
mv "$out.tmp" "$out"
ln -sf "peers-$stamp.json" bench/results/peers-latest.json
node bench/peers/compare.js "$out"
if command -v gnuplot >/dev/null; then
	scripts/plot.sh --peers "$out" "bench/results/peers-$stamp" || true
fi
echo "peers: all rows in $out" >&2
