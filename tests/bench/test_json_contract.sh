#!/usr/bin/env bash
# test_json_contract.sh - ringbench --json keeps the contract of DESIGN.md:
# a meta record first, with every field and sane values, then one object
# per cell with every field, numbers that agree with each other, the limit
# each row is compared with, and knob values as they ran (no sentinel).
. "$(dirname "$0")/lib.sh"

n=300 runs=3
out=$("$rb" -n $n --runs $runs --json --no-out --coro-window 0 2>"$scratch/err") ||
	fail "ringbench exited $?: $(cat "$scratch/err")"

# The meta record: first line, every field, plausible values.
# (Not printf | head -1: head leaves after one line, the printf dies of
# SIGPIPE, and pipefail fails the assignment; see has in lib.sh.)
meta=${out%%$'\n'*}
case "$meta" in '{"meta":{'*) ;; *) fail "first line is not the meta record: $meta" ;; esac
for k in kernel cpu cpus liburing compiler commit io_uring_disabled syscall_ns enter_ns; do
	case "$meta" in *"\"$k\":"*) ;; *) fail "meta lacks \"$k\"" ;; esac
done
[ "$(jfield "$meta" kernel)" = "$(uname -r)" ] || fail "meta kernel is not uname -r"
[ -n "$(jfield "$meta" cpu)" ] || fail "meta cpu is empty"
[ "$(jfield "$meta" cpus)" -ge 1 ] || fail "meta cpus < 1"
[ "$(jfield "$meta" liburing)" != unknown ] || fail "meta liburing unknown"
case "$(jfield "$meta" compiler)" in gcc\ *|clang\ *) ;; *) fail "meta compiler: $(jfield "$meta" compiler)" ;; esac
[ -n "$(jfield "$meta" commit)" ] || fail "meta commit is empty"
disabled=$(jfield "$meta" io_uring_disabled)
if [ -r /proc/sys/kernel/io_uring_disabled ]; then
	[ "$disabled" = "$(cat /proc/sys/kernel/io_uring_disabled)" ] || fail "meta io_uring_disabled $disabled"
else
	[ "$disabled" = null ] || fail "io_uring_disabled absent but meta says $disabled"
fi
awk -v s="$(jfield "$meta" syscall_ns)" 'BEGIN { exit !(s > 1 && s < 100000) }' ||
	fail "syscall_ns $(jfield "$meta" syscall_ns)"
enter=$(jfield "$meta" enter_ns)
[ "$enter" = null ] || awk -v s="$enter" 'BEGIN { exit !(s > 1 && s < 100000) }' || fail "enter_ns $enter"

# Every cell: every field, and the numbers agree with each other.
cells=$(printf '%s\n' "$out" | grep -c '^{"backend"' || true)
[ "$cells" -eq 41 ] || fail "expected 41 cells (sync x2, sync-mt, raw-uring x2, 4 backends x 3 styles x 2, 4 group rows x 3 styles), got $cells"
fields="backend style scenario n runs warmup bytes median_ms min_ms max_ms stdev_ms runs_ms baseline_ms ratio limit limit_ratio ops_per_s syscalls_per_op cpu_ms cpu_util lat_p50_us lat_p99_us lat_p999_us lat_max_us noisy knobs"
printf '%s\n' "$out" | grep '^{"backend"' >"$scratch/cells"
while IFS= read -r c; do
	name="$(jfield "$c" backend)/$(jfield "$c" style)/$(jfield "$c" scenario)"
	[ -z "$(jfield "$c" error)" ] || fail "$name failed: $(jfield "$c" error)"
	for k in $fields; do
		case "$c" in *"\"$k\":"*) ;; *) fail "$name lacks \"$k\"" ;; esac
	done
	printf '%s\n' "$c" | awk -v n=$n -v runs=$runs -v name="$name" '
	function f(k,   m) {
		if (!match($0, "\"" k "\":(\\[[^]]*\\]|[^,}]*)")) return ""
		return substr($0, RSTART + length(k) + 3, RLENGTH - length(k) - 3)
	}
	# A number; null or absent is -1, which every check below rejects.
	function x(k,   m) { m = f(k); return m == "" || m == "null" ? -1 : m + 0 }
	function bad(why) { print name ": " why > "/dev/stderr"; exit 1 }
	{
		if (x("n") != n || x("runs") != runs || x("bytes") != 12) bad("n, runs or bytes")
		med = x("median_ms"); lo = x("min_ms"); hi = x("max_ms")
		if (!(lo > 0 && lo <= med && med <= hi)) bad("min <= median <= max")
		r = f("runs_ms"); gsub(/[][]/, "", r); k = split(r, v, ",")
		if (k != runs) bad("runs_ms has " k " values")
		for (i = 1; i <= k; i++) if (v[i] + 0 < lo - 0.001 || v[i] + 0 > hi + 0.001) bad("a run outside min..max")
		if (x("stdev_ms") < 0) bad("stdev")
		if (!(x("baseline_ms") > 0 && x("ratio") > 0)) bad("baseline or ratio")
		if (!(x("limit_ratio") > 0)) bad("limit_ratio " f("limit_ratio"))
		if (!(x("cpu_ms") > 0 && x("cpu_util") > 0 && x("cpu_util") < 64)) bad("cpu")
		p50 = x("lat_p50_us"); p99 = x("lat_p99_us"); p999 = x("lat_p999_us"); mx = x("lat_max_us")
		if (!(p50 > 0 && p50 <= p99 && p99 <= p999 && p999 <= mx)) bad("p50 <= p99 <= p99.9 <= max")
		if (mx > hi * 1000 + 1) bad("a read took longer than its run")
		if (f("noisy") != "true" && f("noisy") != "false") bad("noisy")
		if (!(x("syscalls_per_op") >= 0)) bad("syscalls_per_op")
	}' || fail "$name: inconsistent numbers: $c"
	# The limit each row is compared with.
	b=$(jfield "$c" backend) sc=$(jfield "$c" scenario)
	if [ "$b" = uring ] || [ "$b" = uring-regular ]; then want=raw-uring
	elif [ "$sc" = parallel ]; then want=sync-mt
	else want=sync; fi
	[ "$(jfield "$c" limit)" = "$want" ] || fail "$name: limit $(jfield "$c" limit), want $want"
	# Knobs as they ran: --coro-window 0 (never wait) ran as all n.
	printf '%s\n' "$c" | has "\"coro_window\":$n[,}]" || fail "$name: coro_window is not $n"
	printf '%s\n' "$c" | has "\"window\":$n," || fail "$name: window is not $n"
	printf '%s\n' "$c" | has '"iowq_max":null' || fail "$name: iowq_max not null"
	if printf '%s\n' "$c" | grep -Eq '[0-9]{10,}'; then fail "$name: a sentinel-sized number: $c"; fi
done <"$scratch/cells"

# The limit rows themselves.
for row in sync/parallel sync/blocking sync-mt/parallel raw-uring/parallel raw-uring/blocking; do
	grep -q "\"backend\":\"${row%/*}\",\"style\":\"baseline\",\"scenario\":\"${row#*/}\"" "$scratch/cells" ||
		fail "no $row row"
done
cpus=$(jfield "$meta" cpus)
grep '"backend":"sync-mt"' "$scratch/cells" | has "\"threads\":$cpus," || fail "sync-mt does not run one thread per CPU"
grep '"backend":"raw-uring".*"blocking"' "$scratch/cells" | has '"inflight":1,' || fail "raw-uring blocking is not one in flight"
grep '"backend":"raw-uring".*"parallel"' "$scratch/cells" | has '"inflight":256,' || fail "raw-uring parallel window is not 256"

# --no-latency: the latency fields are there, and null.
c=$("$rb" -n 50 --runs 1 --json --no-out --no-latency --backend uring --style callback --scenario blocking --no-limits 2>/dev/null | grep '^{"backend"')
[ "$(jfield "$c" lat_p99_us)" = null ] || fail "--no-latency still reports p99"
ok "meta record and $cells cells"
