#!/usr/bin/env bash
# bench_net.sh - the HTTP bench of issue 17 (make bench-net): the HTTP
# example (examples/http_server.c, the callback style) on io_uring and on
# epoll, beside nginx with one worker, node's http module and Bun.serve,
# all serving the same 12-byte response with keep-alive, driven by wrk at
# 1, 64 and 256 connections. ringloop-uring has the loop's default ring
# (SINGLE_ISSUER | DEFER_TASKRUN); ringloop-uring-shared is the same server
# with --shared-ring (RL_SHARED_RING, the plain ring), to compare.
#
#   scripts/bench_net.sh [--duration S] [--runs R] [--conns LIST] [--quiet S]
#
# wrk (-t1) runs on CPU 0 and every server on CPU 1 (taskset). All the
# servers run for the whole bench and the cells take turns (for each run,
# for each connection count, each server), so slow drifts of the machine
# spread over all of them; each cell's figure is the median of its runs.
# Each cell starts with a 1 s wrk run that is not counted.
#
# nginx: the Debian package's binary, with a configuration written here:
# one worker, access log off, `return 200` of the body, keepalive_requests
# raised so that nginx does not close a connection every 1000 requests
# (wrk would count the reconnects). bun is fetched from the npm registry
# as scripts/peers.sh does. A peer that is missing is left out, said so.
#
# Output: bench/results/net-http-<stamp>.json (a meta record, then one
# JSON line per cell: scenario "http", server, style, conns, rps,
# lat_p99_us, runs, others_cpu_util, and for ringloop's servers the io_uring
# ring the server reported it runs on, ring),
# bench/results/net-http-latest.json, and a table with each server's
# requests/s and p99, and ringloop-uring's and ringloop-uring-shared's
# ratios to each, on stdout.
# Measuring: run it under /tmp/ringloop-bench.lock (make bench-net does).
set -euo pipefail
cd "$(dirname "$0")/.."

duration=4 runs=3 conns="1 64 256" quiet=30 others=0 base=${NET_PORT:-18080}
while [ $# -gt 0 ]; do
	case "$1" in
	--duration) duration="$2"; shift 2 ;;
	--runs) runs="$2"; shift 2 ;;
	--conns) conns="${2//,/ }"; shift 2 ;;
	--quiet) quiet="$2"; shift 2 ;;
	*) echo "bench_net.sh: unknown option $1" >&2; exit 2 ;;
	esac
done

scripts/install-deps.sh --net
make --no-print-directory -s lib examples >/dev/null
bin=build/examples

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ringloop-net.XXXXXX")
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# bun, as scripts/peers.sh finds or fetches it.
case "$(uname -m)" in
x86_64)
	pkg=@oven/bun-linux-x64
	grep -qw avx2 /proc/cpuinfo || pkg=@oven/bun-linux-x64-baseline ;;
aarch64) pkg=@oven/bun-linux-aarch64 ;;
*) pkg= ;;
esac
bun=$(command -v bun || true)
local_bun="bench/peers/node_modules/$pkg/bin/bun"
if [ -z "$bun" ] && [ -n "$pkg" ] && [ ! -x "$local_bun" ] && command -v npm >/dev/null; then
	echo "bench-net: bun not found; fetching $pkg from the npm registry" >&2
	npm install --silent --no-save --no-audit --no-fund --prefix bench/peers "$pkg" >&2 ||
		echo "bench-net: npm install $pkg failed; going on without bun" >&2
fi
[ -z "$bun" ] && [ -x "$local_bun" ] && bun="$local_bun"

servers=() ports=() styles=() spids=()
# start NAME STYLE PORT COMMAND...: on CPU 1, waits until PORT answers.
start() {
	local name=$1 style=$2 port=$3 i
	shift 3
	taskset -c 1 "$@" >"$tmp/$name.out" 2>&1 &
	pids+=($!)
	for i in $(seq 100); do
		if curl -s -o /dev/null "http://127.0.0.1:$port/"; then
			servers+=("$name") ports+=("$port") styles+=("$style")
			spids+=("$!")
			return 0
		fi
		sleep 0.1
	done
	echo "bench-net: $name did not start: $(cat "$tmp/$name.out")" >&2
}

RINGLOOP_BACKEND=uring start ringloop-uring callback $base $bin/http_server $base
RINGLOOP_BACKEND=uring start ringloop-uring-shared callback $((base + 5)) $bin/http_server --shared-ring $((base + 5))
RINGLOOP_BACKEND=epoll start ringloop-epoll callback $((base + 1)) $bin/http_server $((base + 1))
grep -q "(uring)" "$tmp/ringloop-uring.out" || { echo "bench-net: the uring server is not on io_uring: $(cat "$tmp/ringloop-uring.out")" >&2; exit 1; }
if command -v nginx >/dev/null; then
	mkdir -p "$tmp/nginx"
	cat >"$tmp/nginx.conf" <<NGINX
worker_processes 1;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log;
events { worker_connections 4096; }
http {
	access_log off;
	keepalive_requests 100000000;
	client_body_temp_path $tmp/nginx;
	proxy_temp_path $tmp/nginx;
	fastcgi_temp_path $tmp/nginx;
	uwsgi_temp_path $tmp/nginx;
	scgi_temp_path $tmp/nginx;
	server {
		listen 127.0.0.1:$((base + 2));
		location / {
			default_type text/plain;
			return 200 "Hello world\n";
		}
	}
}
NGINX
	start nginx native $((base + 2)) nginx -p "$tmp/nginx" -c "$tmp/nginx.conf"
else
	echo "bench-net: nginx not found; left out" >&2
fi
if command -v node >/dev/null; then
	start node native $((base + 3)) node bench/peers/http.js $((base + 3))
else
	echo "bench-net: node not found; left out" >&2
fi
if [ -n "$bun" ]; then
	start bun native $((base + 4)) "$bun" bench/peers/http.js $((base + 4))
else
	echo "bench-net: bun not found; left out" >&2
fi

# wrk's latency with its unit, in microseconds.
to_us() {
	awk -v v="$1" 'BEGIN {
		n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
		if (u == "ns") n /= 1000; else if (u == "ms") n *= 1000; else if (u == "s") n *= 1000000
		printf "%.1f", n }'
}

stamp=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p bench/results
out=bench/results/net-http-$stamp.json
cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
printf '{"meta":true,"bench":"net-http","time":"%s","cpu":"%s","ncpu":%s,"kernel":"%s","commit":"%s","wrk":"%s","nginx":"%s","node":"%s","bun":"%s","duration_s":%s,"runs":%s,"wrk_cpu":0,"server_cpu":1}\n' \
	"$stamp" "$cpu" "$(nproc)" "$(uname -r)" "$(git rev-parse --short HEAD 2>/dev/null || echo none)" \
	"$(wrk -v 2>&1 | head -1 | awk '{print $2}')" "$(nginx -v 2>&1 | sed 's/.*\///')" \
	"$(node --version 2>/dev/null || true)" "$([ -n "$bun" ] && "$bun" --version)" \
	"$duration" "$runs" >"$out"

# CPU ticks (user + system) of a server: the process, its threads, and
# its children (nginx's worker).
hz=$(getconf CLK_TCK)
server_ticks() {
	local p t=0 v
	for p in "$1" $(pgrep -P "$1" 2>/dev/null); do
		v=$(awk '{ print $14 + $15 }' "/proc/$p/stat" 2>/dev/null) || continue
		t=$((t + ${v:-0}))
	done
	echo "$t"
}
TIMEFORMAT='%U %S'

# The machine is shared, and other people's builds and tests do not take
# the bench lock: before each cell, wait (up to $quiet s) for a second in
# which both CPUs were at least 95% idle, and report the share of the CPUs
# that was busy in the second before the cell started.
busy_second() {
	local a b
	a=($(head -1 /proc/stat))
	sleep 1
	b=($(head -1 /proc/stat))
	awk -v a="${a[*]}" -v b="${b[*]}" 'BEGIN {
		n = split(a, x, " "); split(b, y, " "); t = 0
		for (i = 2; i <= n; i++) t += y[i] - x[i]
		idle = (y[5] - x[5]) + (y[6] - x[6])
		printf "%.2f", (t > 0 ? 1 - idle / t : 0) }'
}
wait_quiet() {
	local i
	for ((i = 0; i < quiet; i++)); do
		others=$(busy_second)
		awk -v o="$others" 'BEGIN { exit !(o <= 0.05) }' && return 0
	done
	echo "bench-net: no quiet second in $quiet s (busy $others); measuring anyway" >&2
}

for ((r = 1; r <= runs; r++)); do
	for c in $conns; do
		for i in "${!servers[@]}"; do
			url="http://127.0.0.1:${ports[$i]}/"
			taskset -c 0 wrk -t1 -c"$c" -d1s "$url" >/dev/null 2>&1 || true
			wait_quiet
			s0=$(server_ticks "${spids[$i]}")
			{ time taskset -c 0 wrk -t1 -c"$c" -d"${duration}s" --latency "$url" >"$tmp/wrk.out" 2>&1 || true; } 2>"$tmp/wrk.time"
			s1=$(server_ticks "${spids[$i]}")
			rps=$(awk '/^Requests\/sec:/ {print $2}' "$tmp/wrk.out")
			nreq=$(awk '/requests in/ {print $1}' "$tmp/wrk.out")
			# The server's CPU per request (all its processes and
			# threads), and the share of its CPU wrk used: a wrk near
			# 100% means the cell measures wrk more than the server.
			srv_us=$(awk -v t=$((s1 - s0)) -v hz="$hz" -v n="${nreq:-0}" 'BEGIN { printf "%.2f", (n > 0 ? t * 1e6 / hz / n : 0) }')
			wrk_util=$(awk -v d="$duration" '{ printf "%.2f", ($1 + $2) / d }' "$tmp/wrk.time")
			p99=$(awk '$1 == "99%" {print $2}' "$tmp/wrk.out")
			errs=$(awk '/Non-2xx|Socket errors/ {print}' "$tmp/wrk.out" | tr '\n' ' ')
			[ -n "$errs" ] && echo "bench-net: ${servers[$i]} at $c conns: $errs" >&2
			echo "${servers[$i]} ${styles[$i]} $c ${rps:-0} $(to_us "${p99:-0us}") $others $srv_us $wrk_util" >>"$tmp/runs"
			echo "bench-net: run $r/$runs ${servers[$i]} $c conns: ${rps:-?} req/s, p99 ${p99:-?}, server CPU ${srv_us} us/req, wrk busy ${wrk_util} (others busy $others before)" >&2
		done
	done
done

# The io_uring ring each of ringloop's servers said it runs on.
rings=""
for name in "${servers[@]}"; do
	ring=$(sed -n 's/^http_server: ring //p' "$tmp/$name.out" 2>/dev/null | head -1)
	[ -n "$ring" ] && rings+="$name=$ring "
done

# The median of each cell's runs (its p99 from the same run).
sort -k1,1 -k3,3n -k4,4g "$tmp/runs" | awk -v servers="${servers[*]}" -v rings="$rings" '
	BEGIN { nr = split(rings, rv, " "); for (i = 1; i <= nr; i++) { split(rv[i], kv, "="); ring[kv[1]] = kv[2] } }
	{ key = $1 " " $3; n[key]++; rps[key, n[key]] = $4; p99[key, n[key]] = $5; oth[key, n[key]] = $6; style[key] = $2
	  scpu[key, n[key]] = $7; wutil[key, n[key]] = $8
	  if (!(key in seen)) { seen[key] = 1; order[++k] = key } }
	END {
		ns = split(servers, sv, " ")
		for (x = 1; x <= ns; x++)
		for (j = 1; j <= k; j++) {
			key = order[j]; split(key, f, " "); m = int((n[key] + 1) / 2)
			if (f[1] != sv[x]) continue
			lo = rps[key, 1]; hi = rps[key, n[key]]
			printf "{\"scenario\":\"http\",\"server\":\"%s\",\"style\":\"%s\",\"conns\":%d,\"rps\":%.0f,\"rps_min\":%.0f,\"rps_max\":%.0f,\"lat_p99_us\":%.1f,\"server_cpu_us_per_req\":%.2f,\"wrk_cpu_util\":%.2f,\"generator_bound\":%s,\"runs\":%d,\"others_cpu_util\":%.2f",
				f[1], style[key], f[2], rps[key, m], lo, hi, p99[key, m], scpu[key, m], wutil[key, m],
				(wutil[key, m] >= 0.9 ? "true" : "false"), n[key], oth[key, m]
			if (f[1] in ring) printf ",\"ring\":\"%s\"", ring[f[1]]
			printf "}\n"
		}
	}' >>"$out"
ln -sf "${out##*/}" bench/results/net-http-latest.json

# The table: requests/s and p99 per server and connection count, and
# ringloop-uring's ratio to each.
echo "HTTP, wrk -t1 on CPU 0, servers on CPU 1, ${duration} s, median of $runs ($cpu)"
awk -F'"' '
	/"scenario":"http"/ {
		for (i = 1; i < NF; i++) {
			if ($i == "server") s = $(i + 2)
		}
		match($0, /"conns":[0-9]+/); c = substr($0, RSTART + 8, RLENGTH - 8) + 0
		match($0, /"rps":[0-9.]+/); r = substr($0, RSTART + 6, RLENGTH - 6) + 0
		match($0, /"lat_p99_us":[0-9.]+/); p = substr($0, RSTART + 13, RLENGTH - 13) + 0
		if (!(s in has)) { has[s] = 1; srv[++ns] = s }
		if (!(c in hasc)) { hasc[c] = 1; cs[++nc] = c }
		R[s, c] = r; P[s, c] = p
		match($0, /"server_cpu_us_per_req":[0-9.]+/); U[s, c] = substr($0, RSTART + 24, RLENGTH - 24) + 0
		match($0, /"wrk_cpu_util":[0-9.]+/); W[s, c] = substr($0, RSTART + 15, RLENGTH - 15) + 0
		match($0, /"rps_min":[0-9.]+/); LO[s, c] = substr($0, RSTART + 10, RLENGTH - 10) + 0
		match($0, /"rps_max":[0-9.]+/); HI[s, c] = substr($0, RSTART + 10, RLENGTH - 10) + 0
	}
	END {
		printf "%-20s", "server"
		for (j = 1; j <= nc; j++) printf " %14s %10s", cs[j] " conns req/s", "p99 us"
		printf "   uring/server, uring-shared/server req/s\n"
		for (i = 1; i <= ns; i++) {
			s = srv[i]; printf "%-20s", s
			for (j = 1; j <= nc; j++) printf " %14.0f %10.0f", R[s, cs[j]], P[s, cs[j]]
			for (j = 1; j <= nc; j++)
				printf " %5.2fx", R[s, cs[j]] ? R["ringloop-uring", cs[j]] / R[s, cs[j]] : 0
			printf "  "
			for (j = 1; j <= nc; j++)
				printf " %5.2fx", R[s, cs[j]] ? R["ringloop-uring-shared", cs[j]] / R[s, cs[j]] : 0
			printf "\n"
		}
		printf "\nserver CPU us per request (wrk busy share of its CPU; runs min-max req/s)\n"
		printf "%-20s", "server"
		for (j = 1; j <= nc; j++) printf " %30s", cs[j] " conns"
		printf "\n"
		bound = 0
		for (i = 1; i <= ns; i++) {
			s = srv[i]; printf "%-20s", s
			for (j = 1; j <= nc; j++) {
				printf " %6.2f (%3.0f%%; %6.0f-%6.0f)", U[s, cs[j]], 100 * W[s, cs[j]], LO[s, cs[j]], HI[s, cs[j]]
				if (W[s, cs[j]] >= 0.9) bound++
			}
			printf "\n"
		}
		if (bound)
			printf "%d cells had wrk at 90%% of its CPU or more (generator_bound in the JSON): there, requests/s measure wrk as much as the server; compare the servers by their CPU per request.\n", bound
	}' "$out"
echo "results: $out"
