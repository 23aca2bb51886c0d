#!/usr/bin/env bash
# test_storage.sh - ringbench's storage scenarios, in a few seconds: a tiny
# run of write, cold, randread and randwrite on every backend and style
# holds the JSON contract (scenario, mode, qd, bs, iops, mb_s, latency and
# CPU fields, the limits, the cold cache really dropped), the cells check
# the bytes they read (a corrupted block is reported by every row), a knob
# the kernel refuses (IOPOLL without poll queues) is an error cell with
# its reason, the command line refuses what it cannot bench, and fio's
# JSON becomes rows of the same contract.
. "$(dirname "$0")/lib.sh"

rand="$scratch/rand.dat"
common=(--json --no-out --runs 2 --warmup 1 --rand-file "$rand" --rand-size 1M
	--time 20)

# ------------------------------------------------------------- a tiny run
n=40
out=$(timeout 120 "$rb" "${common[@]}" -n $n --cold-files $n --qd 1,4 \
	--scenario storage 2>"$scratch/err") || fail "ringbench exited $?: $(tail -5 "$scratch/err")"
printf '%s\n' "$out" | grep '^{"backend"' >"$scratch/cells"
grep '"error"' "$scratch/cells" && fail "a storage cell failed"
count() { grep -c "$1" "$scratch/cells" || true; }
# write and cold: sync (both modes), sync-mt, raw-uring (both), 3 backends
# x 3 styles x 2 modes. randread and randwrite at qd 1: sync, raw-uring,
# 9 cells; at qd 4 the same and the epoll-pool rows with 4 threads.
[ "$(count '"scenario":"write"')" -eq 23 ] || fail "write: $(count '"scenario":"write"') cells, want 23"
[ "$(count '"scenario":"cold"')" -eq 23 ] || fail "cold: $(count '"scenario":"cold"') cells, want 23"
for sc in randread randwrite; do
	[ "$(count "\"scenario\":\"$sc\".*\"qd\":1,")" -eq 11 ] || fail "$sc qd 1: want 11 cells"
	[ "$(count "\"scenario\":\"$sc\".*\"qd\":4,")" -eq 14 ] || fail "$sc qd 4: want 14 cells"
done
cpus=$(nproc)

while IFS= read -r c; do
	b=$(jfield "$c" backend) s=$(jfield "$c" style) sc=$(jfield "$c" scenario)
	m=$(jfield "$c" mode) qd=$(jfield "$c" qd)
	name="$b/$s/$sc${m:+/$m}/qd$qd"
	for k in backend style scenario n runs bytes qd bs iops mb_s median_ms cpu_ms cpu_us_per_op cpu_util lat_p50_us lat_p99_us lat_p999_us lat_max_us limit limit_ratio knobs; do
		case "$c" in *"\"$k\":"*) ;; *) fail "$name lacks \"$k\"" ;; esac
	done
	printf '%s\n' "$c" | awk -v name="$name" -v sc="$sc" '
	function f(k,   s) {
		s = $0; sub(/,"knobs":\{[^}]*\}/, "", s)
		if (!match(s, "\"" k "\":(\\[[^]]*\\]|[^,}]*)")) return ""
		return substr(s, RSTART + length(k) + 3, RLENGTH - length(k) - 3)
	}
	function x(k,   m) { m = f(k); return m == "" || m == "null" ? -1 : m + 0 }
	function bad(why) { print name ": " why > "/dev/stderr"; exit 1 }
	{
		iops = x("iops"); bs = x("bs")
		if (!(iops > 0)) bad("iops " f("iops"))
		if (sc ~ /^rand/ && bs != 4096) bad("bs " bs)
		if (sc !~ /^rand/ && bs != 12) bad("bs " bs " (the file size)")
		mb = x("mb_s"); want = iops * bs / 1e6
		if (mb < want * 0.99 - 0.01 || mb > want * 1.01 + 0.01) bad("mb_s " mb " is not iops x bs " want)
		p50 = x("lat_p50_us"); p99 = x("lat_p99_us"); p999 = x("lat_p999_us"); mx = x("lat_max_us")
		if (!(p50 > 0 && p50 <= p99 && p99 <= p999 && p999 <= mx)) bad("p50 <= p99 <= p99.9 <= max")
		if (!(x("cpu_us_per_op") > 0)) bad("cpu_us_per_op")
		if (!(x("limit_ratio") > 0)) bad("limit_ratio " f("limit_ratio"))
		if (sc ~ /^rand/ && f("ratio") != "null") bad("a random I/O cell has a paired ratio")
		if (sc !~ /^rand/ && !(x("ratio") > 0)) bad("ratio")
	}' || fail "$name: inconsistent: $c"
	# Which row bounds which: raw-uring for uring; sync at any depth of
	# random I/O; sync-mt (parallel) or sync (blocking) for write and cold.
	if [ "$b" = uring ]; then want=raw-uring
	elif [ "$sc" = randread ] || [ "$sc" = randwrite ] || [ "$m" = blocking ]; then want=sync
	elif [ "$b" = raw-uring ] || [ "$b" = sync ]; then want=$( [ "$m" = parallel ] && echo sync-mt || echo sync)
	else want=sync-mt; fi
	[ "$b" = raw-uring ] && [ "$sc" != "${sc#rand}" ] && want=sync
	[ "$(jfield "$c" limit)" = "$want" ] || fail "$name: limit $(jfield "$c" limit), want $want"
	case "$sc" in
	write)
		[ "$(jfield "$c" fsync)" = false ] || fail "$name: fsync $(jfield "$c" fsync)"
		[ -n "$m" ] || fail "$name: no mode" ;;
	cold)
		[ -n "$m" ] || fail "$name: no mode"
		r=$(jfield "$c" resident_before)
		awk -v r="$r" 'BEGIN { exit !(r != "" && r >= 0 && r <= 0.01) }' ||
			fail "$name: resident_before $r: the cache was not dropped" ;;
	*)
		[ -z "$m" ] || fail "$name: a random I/O cell with a mode"
		case "$b" in epoll|epoll-pool)
			t=$(printf '%s\n' "$c" | sed 's/,"knobs":{[^}]*}//' | awk -F'"pool_threads":' 'NF > 1 { split($2, a, /[,}]/); print a[1] }')
			[ -n "$t" ] || fail "$name: no pool_threads" ;;
		esac ;;
	esac
	# Blocking means one at a time.
	[ "$m" != blocking ] || [ "$qd" = 1 ] || fail "$name: blocking with qd $qd"
done <"$scratch/cells"
grep '"backend":"epoll-pool".*"scenario":"randread".*"qd":4,' "$scratch/cells" | has '"pool_threads":4,' ||
	fail "no epoll-pool row with as many threads as the queue depth"
grep '"backend":"sync".*"scenario":"randread".*"qd":4,' "$scratch/cells" | has '"threads":4,' ||
	fail "the sync limit of qd 4 does not run 4 threads"
grep '"backend":"sync-mt".*"scenario":"write"' "$scratch/cells" | has "\"qd\":$cpus," ||
	fail "sync-mt's qd is not its thread count"

# --fsync: the write cells say so, and still check their bytes.
out=$("$rb" "${common[@]}" -n 20 --scenario write --fsync --style callback --backend uring,epoll 2>/dev/null)
printf '%s\n' "$out" | grep '^{"backend"' | has '"error"' && fail "--fsync: a cell failed"
[ "$(printf '%s\n' "$out" | grep -c '"fsync":true')" -ge 4 ] || fail "--fsync: cells do not say fsync"

# ------------------------------------------------- every row checks bytes
# Block 1 of a 2-block file turned to garbage: every row that reads it
# must say so (the file is taken as it is with --no-layout).
small="$scratch/small.dat"
"$rb" "${common[@]}" --rand-file "$small" --rand-size 8K --scenario randread --qd 1 \
	--backend sync --no-limits >/dev/null 2>&1 || fail "laying out $small"
printf 'garbage!' | dd of="$small" bs=1 seek=5000 conv=notrunc status=none
out=$("$rb" "${common[@]}" --rand-file "$small" --rand-size 8K --no-layout --scenario randread \
	--qd 2 --time 30 --no-pool-qd 2>/dev/null)
rows=$(printf '%s\n' "$out" | grep -c '^{"backend"' || true)
[ "$rows" -eq 11 ] || fail "--no-layout: $rows rows"
if printf '%s\n' "$out" | grep '^{"backend"' | grep -v 'reads failed or returned wrong content'; then
	fail "a row read a corrupted block and did not say so"
fi
# Without --no-layout the file is found wrong and laid out again.
"$rb" "${common[@]}" --rand-file "$small" --rand-size 8K --scenario randread --qd 1 \
	--backend sync --no-limits >/dev/null 2>"$scratch/err" || fail "relayout failed"
grep -q "not what ringbench wrote" "$scratch/err" || fail "a corrupted file was not noticed: $(cat "$scratch/err")"

# --------------------------------------------------------- refused knobs
# IOPOLL: on a device without poll queues the kernel completes direct I/O
# on an IOPOLL ring with EOPNOTSUPP: the uring cells say so, the epoll
# ones run.
out=$("$rb" "${common[@]}" --iopoll --scenario randread --qd 1 --style callback,baseline \
	--backend uring,raw-uring,epoll 2>/dev/null)
dev=$(df --output=source "$scratch" | tail -1)
poll=$(cat "/sys/block/$(basename "$dev")/queue/io_poll" 2>/dev/null || echo unknown)
uring=$(printf '%s\n' "$out" | grep '"backend":"uring"')
if [ "$poll" = 0 ]; then
	printf '%s\n' "$uring" | has '"error":"IOPOLL refused by the kernel.*no poll queues' ||
		fail "IOPOLL without poll queues: $uring"
	printf '%s\n' "$out" | grep '"backend":"raw-uring"' | has '"error"' ||
		fail "raw-uring ignored IOPOLL"
else
	printf '%s\n' "$uring" | has '"iops"' || printf '%s\n' "$uring" | has '"error"' ||
		fail "IOPOLL: no uring cell"
fi
printf '%s\n' "$out" | grep '"backend":"epoll"' | has '"iops"' || fail "IOPOLL: the epoll cell did not run"
# The other storage knobs run (or say why they cannot).
for knob in --fixed-bufs --force-async "--iowq-max 2" --sqpoll; do
	# shellcheck disable=SC2086
	out=$("$rb" "${common[@]}" $knob --scenario randread,randwrite --qd 2 --style callback \
		--backend uring,epoll --no-limits --no-pool-qd 2>/dev/null)
	[ "$(printf '%s\n' "$out" | grep -c '"iops"')" -eq 4 ] || fail "$knob: $(printf '%s\n' "$out" | grep error)"
done
printf '%s\n' "$out" | has '"sqpoll":1' || fail "--sqpoll not in the knobs"

# ------------------------------------------------------- the command line
refuse() {
	local want=$1 st=0
	shift
	timeout 10 "$rb" "$@" >/dev/null 2>"$scratch/err" || st=$?
	[ "$st" -eq 2 ] || fail "ringbench $*: exit $st, want 2"
	grep -q -- "$want" "$scratch/err" || fail "ringbench $*: no '$want' in: $(cat "$scratch/err")"
}
refuse "out of range" --qd 0
refuse "out of range" --qd 1,2000
refuse "not a multiple of 512" --bs 1000
refuse "valid: parallel, blocking, all" --mode sometimes
refuse "not a multiple of --bs" --scenario randread --rand-size 10000 --bs 4096
refuse "more than" --scenario write -n 2000000

# --drop-cache: a file read back is in the cache; dropped, it is not.
head -c 65536 /dev/zero >"$scratch/drop"
sync -f "$scratch/drop"
cat "$scratch/drop" >/dev/null
share=$("$rb" --drop-cache "$scratch/drop") || fail "--drop-cache failed"
awk -v s="$share" 'BEGIN { exit !(s >= 0 && s <= 0.01) }' || fail "--drop-cache left $share resident"
"$rb" --drop-cache "$scratch" >/dev/null || fail "--drop-cache of a directory failed"

# ---------------------------------------------------------- fio's rows
for f in io_uring psync; do
	line=$(scripts/fio_json.sh "$f" randread 4 4096 "$([ $f = psync ] && echo 4 || echo 1)" 700 fio-3.33 \
		<tests/bench/fixtures/fio-$f-randread-qd4.json)
	[ "$(jfield "$line" backend)" = "fio-$f" ] || fail "fio_json: backend"
	for k in scenario qd bs iops mb_s cpu_us_per_op lat_p50_us lat_p99_us lat_p999_us median_ms; do
		v=$(jfield "$line" $k)
		[ -n "$v" ] && [ "$v" != null ] || fail "fio_json $f: no $k: $line"
	done
done
# psync's CPU is per job: 4 jobs, (1.17 + 9.33)% each, at the fixture's IOPS.
line=$(scripts/fio_json.sh psync randread 4 4096 4 700 fio-3.33 <tests/bench/fixtures/fio-psync-randread-qd4.json)
awk -v c="$(jfield "$line" cpu_util)" 'BEGIN { exit !(c > 0.41 && c < 0.43) }' || fail "fio_json: psync cpu_util $(jfield "$line" cpu_util)"
[ "$(jfield "$line" threads)" = 4 ] || fail "fio_json: psync threads"
# The table: ratios to fio io_uring within the same group.
{
	echo '{"backend":"uring","style":"callback","scenario":"randread","qd":4,"bs":4096,"iops":20000,"mb_s":81.92,"cpu_us_per_op":6.000,"lat_p50_us":120.000,"lat_p99_us":300,"lat_p999_us":400}'
	echo '{"backend":"fio-io_uring","style":"fio","scenario":"randread","qd":4,"bs":4096,"iops":25000,"mb_s":102.4,"cpu_us_per_op":5.000,"lat_p50_us":100.000,"lat_p99_us":300,"lat_p999_us":400}'
	echo '{"backend":"fio-psync","style":"fio","scenario":"randread","qd":4,"bs":4096,"iops":40000,"mb_s":163.84,"cpu_us_per_op":9.000,"lat_p50_us":90.000,"lat_p99_us":300,"lat_p999_us":400,"threads":4}'
} >"$scratch/fio.json"
scripts/fio_table.sh "$scratch/fio.json" | grep '^uring callback' | has '0\.80  *1\.20  *1\.20  *0\.50' ||
	fail "fio_table ratios: $(scripts/fio_table.sh "$scratch/fio.json")"
ok "storage scenarios, contract, byte checks, refused knobs, fio rows"
