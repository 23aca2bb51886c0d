#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# examples.sh BIN LIB - the network examples against real sockets on
# loopback, on both backends, each program as tests/install/run.sh built
# it (BIN/NAME linked shared against LIB, BIN/NAME.static):
#
#   - echo_coro serves net_client: small messages, and messages bigger
#     than any socket buffer, every byte checked;
#   - http_server serves net_client --http (keep-alive), and raw requests
#     written by this script: split across writes, pipelined, HTTP/1.0,
#     HEAD, Connection: close, and bad input answered with 400, 414, 431,
#     501 and 505 before the server closes the connection.
#
# Servers listen on port 0 (any free port) and are stopped by the script.
set -euo pipefail

bin=$1
lib=$2
fail() {
	echo "test-install (network examples): $*" >&2
	exit 1
}
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT

out=$(mktemp -d "${TMPDIR:-/tmp}/ringloop-netex.XXXXXX")
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$out"' EXIT

# start NAME PROG: runs PROG 0 in the background, sets $port from the line
# it prints once it listens.
# Its output goes to $log, a file of its own: the background shell may
# create it after the first look, so a file of an earlier server would
# give that server's port.
start() {
	local name=$1 prog=$2 i
	log=$out/$name.$backend.$link.out
	LD_LIBRARY_PATH=$lib "$prog" 0 >"$log" 2>"$log.err" &
	pids+=($!)
	for i in $(seq 100); do
		port=$(sed -n 's/.* listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" 2>/dev/null)
		[ -n "$port" ] && return 0
		kill -0 "${pids[-1]}" 2>/dev/null || fail "$name exited: $(cat "$log.err")"
		sleep 0.05
	done
	fail "$name did not listen"
}

# raw PORT: sends stdin's chunks (separated by lines "--pause--", with a
# pause between them) to PORT, then reads until the server closes (or 5
# s), printing what came back.
raw() {
	exec 3<>"/dev/tcp/127.0.0.1/$1"
	local chunk=""
	while IFS= read -r line || [ -n "$line" ]; do
		if [ "$line" = "--pause--" ]; then
			printf '%b' "$chunk" >&3
			chunk=""
			sleep 0.05
		else
			chunk+=$line
		fi
	done
	printf '%b' "$chunk" >&3
	timeout 5 cat <&3 || true
	exec 3<&-
}

# status_of RESPONSE: the status codes of the responses in it, one a line.
statuses() { tr -d '\r' | sed -n 's/^HTTP\/1\.1 \([0-9]*\) .*/\1/p'; }

check_http() { # check_http PORT WHAT REQUEST EXPECTED-STATUSES
	local got
	got=$(printf '%s' "$3" | raw "$1" | statuses | tr '\n' ' ')
	[ "$got" = "$4" ] || fail "http_server on $backend ($link), $2: got statuses '$got', wanted '$4'"
}

long=$(head -c 9000 /dev/zero | tr '\0' a)
for backend in uring epoll; do
	export RINGLOOP_BACKEND=$backend
	for link in shared static; do
		sfx=
		[ $link = static ] && sfx=.static

		start echo_coro "$bin/echo_coro$sfx"
		for args in "1000 64" "20 300000"; do
			LD_LIBRARY_PATH=$lib "$bin/net_client$sfx" 127.0.0.1 "$port" $args \
				>"$out/client.out" 2>&1 ||
				fail "net_client $args against echo_coro on $backend ($link): $(cat "$out/client.out")"
			set -- $args
			[ "$(cat "$out/client.out")" = "net_client: $1 echoes of $2 bytes, every byte back" ] ||
				fail "net_client against echo_coro on $backend ($link) printed: $(cat "$out/client.out")"
		done
		kill "${pids[-1]}"
		wait "${pids[-1]}" 2>/dev/null || true

		start http_server "$bin/http_server$sfx"
		grep -q "($backend)" "$log" ||
			fail "http_server did not run on $backend: $(cat "$log")"
		LD_LIBRARY_PATH=$lib "$bin/net_client$sfx" --http 127.0.0.1 "$port" 500 \
			>"$out/client.out" 2>&1 ||
			fail "net_client --http on $backend ($link): $(cat "$out/client.out")"
		[ "$(cat "$out/client.out")" = "net_client: 500 responses 200" ] ||
			fail "net_client --http on $backend ($link) printed: $(cat "$out/client.out")"
		h='Host: x\r\n'
		check_http "$port" "split across writes" \
			"GE"$'\n'"--pause--"$'\n'"T / HT"$'\n'"--pause--"$'\n'"TP/1.1\r\nHo"$'\n'"--pause--"$'\n'"st: x\r"$'\n'"--pause--"$'\n'"\n\r\nGET / HTTP/1.1\r\n${h}Connection: close\r\n\r\n" \
			"200 200 "
		check_http "$port" "pipelined, then close" \
			"GET /a HTTP/1.1\r\n${h}\r\nGET /b HTTP/1.1\r\n${h}\r\nHEAD /c HTTP/1.1\r\n${h}\r\nPOST /d HTTP/1.1\r\n${h}Content-Length: 5\r\n\r\nhelloGET /e HTTP/1.1\r\n${h}Connection: close\r\n\r\nGET /never HTTP/1.1\r\n${h}\r\n" \
			"200 200 200 200 200 "
		check_http "$port" "HTTP/1.0 closes" "GET / HTTP/1.0\r\n\r\nGET / HTTP/1.0\r\n\r\n" "200 "
		check_http "$port" "HTTP/1.1 without Host" "GET / HTTP/1.1\r\n\r\n" "400 "
		check_http "$port" "no version" "GET /\r\n\r\n" "400 "
		check_http "$port" "a space before the colon" "GET / HTTP/1.1\r\nHost : x\r\n\r\n" "400 "
		check_http "$port" "an obsolete fold" "GET / HTTP/1.1\r\n${h}X: a\r\n b\r\n\r\n" "400 "
		check_http "$port" "two Content-Lengths" "POST / HTTP/1.1\r\n${h}Content-Length: 1\r\nContent-Length: 2\r\n\r\nab" "400 "
		check_http "$port" "a bad request after a good one" "GET / HTTP/1.1\r\n${h}\r\nG(T / HTTP/1.1\r\n\r\n" "200 400 "
		check_http "$port" "a long target" "GET /$long HTTP/1.1\r\n${h}\r\n" "414 "
		check_http "$port" "a long header" "GET / HTTP/1.1\r\n${h}X: $long\r\n\r\n" "431 "
		check_http "$port" "chunked" "POST / HTTP/1.1\r\n${h}Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" "501 "
		check_http "$port" "HTTP/2.0" "GET / HTTP/2.0\r\n\r\n" "505 "
		kill -0 "${pids[-1]}" || fail "http_server on $backend ($link) died"
		kill "${pids[-1]}"
		wait "${pids[-1]}" 2>/dev/null || true
	done
done
echo "network examples: ok (echo_coro, http_server, net_client on uring and epoll, shared and static)"
