#!/usr/bin/env bash
# compare.sh - two ringbench runs side by side: for every cell, both
# medians, the change in %, and whether the change is beyond the noise.
#
#   scripts/compare.sh [--markdown] [--alpha A] A.json B.json
#
# A and B are ringbench JSON lines (bench/results/*.json, ringbench
# --json, or a peers-*.jsonl): two kernels, two knob settings, two commits.
# Cells are matched on backend, style and scenario (and mode, loops, qd,
# bs, fsync, pool_threads, conns, msg_size when a run has them); knobs and
# machine fields that differ between the runs are listed above the table.
#
# Significance: a two-sided Mann-Whitney U test on the raw run times
# (runs_ms) of the two cells, as benchstat does: exact for small samples
# without ties, the normal approximation with a tie correction otherwise.
# A change is called faster/slower when p < alpha (0.05); "~" means the
# runs cannot tell the two apart. With fewer than 4 runs a side no change
# can reach p < 0.05 ("too few runs").
#
# Written in bash and POSIX awk (mawk on Debian works): no python or node
# needed on the machine a run is compared on.
set -euo pipefail
# field() and jget(): scripts/json.awk, in front of each awk program.
json_awk=$(cat "$(dirname "$0")/json.awk")

markdown=0 alpha=0.05
while [ $# -gt 0 ]; do
	case "$1" in
	--markdown) markdown=1; shift ;;
	--alpha) alpha="$2"; shift 2 ;;
	-h|--help) sed -n '2,21p' "$0"; exit 0 ;;
	--) shift; break ;;
	-*) echo "compare.sh: unknown option $1" >&2; exit 2 ;;
	*) break ;;
	esac
done
[ $# -eq 2 ] || { echo "usage: compare.sh [--markdown] [--alpha A] A.json B.json" >&2; exit 2; }
for f in "$1" "$2"; do
	[ -r "$f" ] || { echo "compare.sh: cannot read $f" >&2; exit 2; }
done

awk -v markdown="$markdown" -v alpha="$alpha" -v nameA="$1" -v nameB="$2" "$json_awk"'
# jget (scripts/json.awk) reads the fields of a record; the knobs object and
# runs_ms are read here.
function knobs(s) {
	if (!match(s, "\"knobs\":\\{[^}]*\\}"))
		return ""
	return substr(s, RSTART + 9, RLENGTH - 10)
}
function runs_of(s,   m) {
	if (!match(s, "\"runs_ms\":\\[[^]]*\\]"))
		return ""
	m = substr(s, RSTART + 11, RLENGTH - 12)
	gsub(/,/, " ", m)
	return m
}
function cellkey(s,   k, i, d) {
	k = jget(s, "backend") "|" jget(s, "style") "|" jget(s, "scenario")
	# (pool_threads is also a knob; the one of an epoll random I/O cell
	# comes first in the line.)
	split("mode loops qd bs fsync pool_threads conns msg_size", d, " ")
	for (i = 1; i <= 8; i++)
		if (jget(s, d[i]) != "")
			k = k "|" d[i] "=" jget(s, d[i])
	return k
}
function abs(x) { return x < 0 ? -x : x }
# Standard normal upper tail, Abramowitz and Stegun 7.1.26 (error < 1.5e-7).
function upper_tail(z,   t, y, sgn) {
	sgn = z < 0; z = abs(z) / sqrt(2)
	t = 1 / (1 + 0.3275911 * z)
	y = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + \
	    t * (-1.453152027 + t * 1.061405429)))) * exp(-z * z)
	return sgn ? 1 - y / 2 : y / 2
}
# Number of arrangements of n1 + n2 values giving each U: cnt[u].
function u_counts(n1, n2,   i, j, u, f, g) {
	# f[j, u]: counts for (i, j) while i grows; recurrence
	# N(i, j, u) = N(i - 1, j, u - j) + N(i, j - 1, u).
	for (j = 0; j <= n2; j++) f[j, 0] = 1
	for (i = 1; i <= n1; i++) {
		split("", g)
		for (j = 0; j <= n2; j++)
			for (u = 0; u <= i * j; u++)
				g[j, u] = (u >= j && (u - j) <= (i - 1) * j ? f[j, u - j] : 0) + \
					  (j > 0 && u <= i * (j - 1) ? g[j - 1, u] : 0)
		split("", f)
		for (j = 0; j <= n2; j++)
			for (u = 0; u <= i * j; u++) f[j, u] = g[j, u]
	}
	split("", cnt)
	for (u = 0; u <= n1 * n2; u++) cnt[u] = f[n2, u]
}
# Two-sided Mann-Whitney U p-value of samples a[1..n1], b[1..n2].
function mwu(a, n1, b, n2,   v, g, n, i, j, k, t, r, r1, u, ties, mu, sd, z, total, lo, hi, cc, p) {
	n = 0
	for (i = 1; i <= n1; i++) { v[++n] = a[i] + 0; g[n] = 1 }
	for (i = 1; i <= n2; i++) { v[++n] = b[i] + 0; g[n] = 2 }
	for (i = 2; i <= n; i++) {	# insertion sort, carrying the group
		t = v[i]; k = g[i]
		for (j = i - 1; j >= 1 && v[j] > t; j--) { v[j + 1] = v[j]; g[j + 1] = g[j] }
		v[j + 1] = t; g[j + 1] = k
	}
	r1 = 0; ties = 0
	for (i = 1; i <= n; i = j) {
		for (j = i + 1; j <= n && v[j] == v[i]; j++) ;
		t = j - i; r = (i + j - 1) / 2	# mid-rank of a run of t ties
		if (t > 1) ties += t * t * t - t
		for (k = i; k < j; k++) if (g[k] == 1) r1 += r
	}
	u = r1 - n1 * (n1 + 1) / 2
	if (!ties && n1 * n2 <= 625) {
		u_counts(n1, n2)
		total = 0; lo = 0; hi = 0
		for (k = 0; k <= n1 * n2; k++) {
			total += cnt[k]
			if (k <= u) lo += cnt[k]
			if (k >= u) hi += cnt[k]
		}
		p = 2 * (lo < hi ? lo : hi) / total
		return p > 1 ? 1 : p
	}
	mu = n1 * n2 / 2
	sd = sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
	if (sd == 0) return 1
	cc = u > mu ? -0.5 : (u < mu ? 0.5 : 0)
	z = (u - mu + cc) / sd
	p = 2 * upper_tail(abs(z))
	return p > 1 ? 1 : p
}
# The smallest two-sided p the exact test can give: 2 / C(n1 + n2, n1).
function min_p(n1, n2,   c, i) {
	c = 1
	for (i = 1; i <= n1; i++) c = c * (n2 + i) / i
	return 2 / c
}
FNR == 1 { file++ }
/^\{"meta":/ {
	split("kernel cpu cpus liburing compiler commit io_uring_disabled syscall_ns enter_ns", mk, " ")
	for (i = 1; i <= 9; i++) meta[file, mk[i]] = jget($0, mk[i])
	next
}
/^\{/ && jget($0, "backend") != "" {
	k = cellkey($0)
	if (!((k, 1) in present) && !((k, 2) in present)) order[++nk] = k
	present[k, file] = 1
	med[k, file] = jget($0, "median_ms")
	if (med[k, file] != "") med[k, file] += 0
	err[k, file] = jget($0, "error")
	sdv[k, file] = jget($0, "stdev_ms")
	noisy[k, file] = jget($0, "noisy")
	rr[k, file] = runs_of($0)
	kn = knobs($0)
	if (kn != "") knob[file] = kn
}
function fmt_ms(x) { return x == "" ? "-" : sprintf("%.2f", x) }
function row(c1, c2, c3, c4, c5, c6, c7, c8) {
	if (markdown)
		printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", c1, c2, c3, c4, c5, c6, c7, c8
	else
		printf "%-10s %-8s %-9s %11s %11s %8s %7s  %s\n", c1, c2, c3, c4, c5, c6, c7, c8
}
END {
	if (file != 2) { print "compare.sh: need two files" > "/dev/stderr"; exit 2 }
	for (f = 1; f <= 2; f++) {
		name = f == 1 ? nameA : nameB
		if (meta[f, "kernel"] != "")
			printf "%s: %s: Linux %s, %s, %s CPUs, commit %s, syscall %s ns, io_uring_enter %s ns\n", \
				f == 1 ? "A" : "B", name, meta[f, "kernel"], meta[f, "cpu"], \
				meta[f, "cpus"], meta[f, "commit"], meta[f, "syscall_ns"], \
				meta[f, "enter_ns"] == "" ? "-" : meta[f, "enter_ns"]
		else
			printf "%s: %s (no meta record)\n", f == 1 ? "A" : "B", name
	}
	diff = ""
	for (i = 1; i <= 9; i++)
		if (meta[1, mk[i]] != meta[2, mk[i]] && mk[i] != "syscall_ns" && mk[i] != "enter_ns")
			diff = diff sprintf("  %s: %s -> %s\n", mk[i], meta[1, mk[i]], meta[2, mk[i]])
	gsub(/"/, "", knob[1]); gsub(/"/, "", knob[2])
	na = split(knob[1], ka, ","); nb = split(knob[2], kb, ",")
	for (i = 1; i <= na; i++) { split(ka[i], kv, ":"); kva[kv[1]] = kv[2] }
	for (i = 1; i <= nb; i++) {
		split(kb[i], kv, ":")
		if ((kv[1] in kva) && kva[kv[1]] != kv[2])
			diff = diff sprintf("  knob %s: %s -> %s\n", kv[1], kva[kv[1]], kv[2])
	}
	if (diff != "") printf "what differs:\n%s", diff
	printf "change = B / A - 1 (negative: B is faster); p: Mann-Whitney U on the runs, alpha %s\n\n", alpha
	if (markdown) {
		print "| backend | style | scenario | A median ms | B median ms | change | p | verdict |"
		print "|---|---|---|---|---|---|---|---|"
	} else
		row("backend", "style", "scenario", "A median_ms", "B median_ms", "change", "p", "verdict")
	for (i = 1; i <= nk; i++) {
		k = order[i]
		split(k, kp, "|")
		scen = kp[3]
		for (j = 4; j in kp; j++) scen = scen " " kp[j]
		if (!((k, 1) in present) || !((k, 2) in present)) {
			row(kp[1], kp[2], scen, fmt_ms(med[k, 1]), fmt_ms(med[k, 2]), "-", "-", \
			    ((k, 1) in present) ? "only in A" : "only in B")
			continue
		}
		if (err[k, 1] != "" || err[k, 2] != "") {
			row(kp[1], kp[2], scen, err[k, 1] != "" ? "error" : fmt_ms(med[k, 1]), \
			    err[k, 2] != "" ? "error" : fmt_ms(med[k, 2]), "-", "-", "error in a run")
			continue
		}
		n1 = split(rr[k, 1], ra, " "); n2 = split(rr[k, 2], rb, " ")
		change = med[k, 1] > 0 ? sprintf("%+.1f%%", 100 * (med[k, 2] / med[k, 1] - 1)) : "-"
		if (n1 < 1 || n2 < 1) {
			row(kp[1], kp[2], scen, fmt_ms(med[k, 1]), fmt_ms(med[k, 2]), change, "-", "no runs_ms")
			continue
		}
		p = mwu(ra, n1, rb, n2)
		if (min_p(n1, n2) >= alpha) verdict = "too few runs"
		else if (p >= alpha) verdict = "~"
		else verdict = med[k, 2] < med[k, 1] ? "faster" : "slower"
		if (noisy[k, 1] == "true" || noisy[k, 2] == "true") verdict = verdict " (noisy)"
		row(kp[1], kp[2], scen, fmt_ms(med[k, 1]), fmt_ms(med[k, 2]), change, \
		    p < 0.001 ? "<0.001" : sprintf("%.3f", p), verdict)
	}
}' "$1" "$2"
