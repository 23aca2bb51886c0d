#!/usr/bin/env bash
# fio_json.sh - one fio run's JSON output (on stdin) as one line of
# ringbench's JSON contract (on stdout), for scripts/fio.sh.
#
#   fio --output-format=json ... | scripts/fio_json.sh ENGINE RW QD BS JOBS WALL_MS VERSION
#
# backend "fio-ENGINE", style "fio", scenario RW (randread, randwrite), qd,
# bs, iops, mb_s (10^6 bytes/s), median_ms (fio's runtime), cpu_us_per_op,
# cpu_util, lat_p50_us, lat_p99_us, lat_p999_us, lat_max_us, threads (JOBS,
# when more than one), fio (its version), wall_ms (the whole fio run, ramp
# and setup included); a run fio reports as failed becomes an "error" line.
#
# The latency is fio's "lat" (submission to completion, as ringbench times
# an operation from the call to its callback), from lat_percentiles. The
# CPU is usr_cpu + sys_cpu, which fio computes per job (and, with
# group_reporting, as the mean over the jobs): it is multiplied by JOBS.
#
# fio's JSON is read line by line (fio prints one key per line), flattened
# to dotted paths (jobs.0.read.lat_ns.percentile.50.000000): bash and awk
# only, no JSON tool needed.
set -euo pipefail
[ $# -eq 7 ] || { echo "usage: fio_json.sh ENGINE RW QD BS JOBS WALL_MS VERSION" >&2; exit 2; }

awk -v engine="$1" -v rw="$2" -v qd="$3" -v bs="$4" -v jobs="$5" -v wall="$6" -v ver="$7" '
function join(a, b) { return a == "" ? b : a "." b }
{
	line = $0
	gsub(/^[ \t]+|[ \t,]+$/, "", line)
	if (line ~ /^"[^"]*" : [{[]$/) {
		key = substr(line, 2, index(substr(line, 2), "\"") - 1)
		path[depth + 1] = join(path[depth], key)
		arr[depth + 1] = line ~ /\[$/; n[depth + 1] = 0
		depth++
	} else if (line == "{" || line == "[") {
		k = depth && arr[depth] ? n[depth]++ : ""
		path[depth + 1] = k == "" ? path[depth] : join(path[depth], k)
		arr[depth + 1] = line == "["; n[depth + 1] = 0
		depth++
	} else if (line ~ /^[]}]$/) {
		depth--
	} else if (line ~ /^"[^"]*" : /) {
		key = substr(line, 2, index(substr(line, 2), "\"") - 1)
		val = substr(line, index(line, " : ") + 3)
		gsub(/^"|"$/, "", val)
		v[join(path[depth], key)] = val
	}
}
function num(x, d) { return x == "" ? "null" : sprintf("%." d "f", x) }
END {
	dir = rw == "randread" ? "read" : "write"
	p = "jobs.0." dir "."
	iops = v[p "iops"]; ios = v[p "total_ios"]; rt = v[p "runtime"]
	err = v["jobs.0.error"]
	printf "{\"backend\":\"fio-%s\",\"style\":\"fio\",\"scenario\":\"%s\"", engine, rw
	printf ",\"n\":%d,\"runs\":1,\"warmup\":1,\"bytes\":%d,\"qd\":%d,\"bs\":%d", ios, bs, qd, bs
	if (iops == "" || iops + 0 <= 0 || err + 0 != 0) {
		printf ",\"error\":\"fio %s: no result (error %s)\"}\n", engine, err == "" ? "?" : err
		exit
	}
	cpu = (v["jobs.0.usr_cpu"] + v["jobs.0.sys_cpu"]) / 100 * jobs
	pct = p "lat_ns.percentile."
	printf ",\"median_ms\":%.3f,\"min_ms\":%.3f,\"max_ms\":%.3f,\"stdev_ms\":0", rt, rt, rt
	printf ",\"runs_ms\":[%.3f],\"baseline_ms\":null,\"ratio\":null,\"limit\":null,\"limit_ratio\":null", rt
	printf ",\"ops_per_s\":%.0f,\"syscalls_per_op\":null", iops
	printf ",\"cpu_ms\":%.3f,\"cpu_us_per_op\":%.3f,\"cpu_util\":%.3f", cpu * rt, cpu * 1e6 / iops, cpu
	printf ",\"lat_p50_us\":%s,\"lat_p99_us\":%s,\"lat_p999_us\":%s,\"lat_max_us\":%s", \
		num(v[pct "50.000000"] / 1e3, 3), num(v[pct "99.000000"] / 1e3, 3), \
		num(v[pct "99.900000"] / 1e3, 3), num(v[p "lat_ns.max"] / 1e3, 3)
	printf ",\"noisy\":false,\"iops\":%.0f,\"mb_s\":%.2f", iops, v[p "bw_bytes"] / 1e6
	if (jobs > 1) printf ",\"threads\":%d", jobs
	printf ",\"fio\":\"%s\",\"wall_ms\":%d}\n", ver, wall
}'
