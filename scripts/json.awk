# json.awk - reading ringbench's JSON records in awk: one object per line,
# flat but for the "knobs" object, numbers, strings without escaped
# quotes, null. POSIX awk (mawk works). The scripts put it in front of
# their own program: awk "$(cat scripts/json.awk)"'...program...'.

# jget(s, key): the value of key in the record text s, "" when absent or
# null; strings without their quotes.
function jget(s, key,   m) {
	if (!match(s, "\"" key "\":(\"[^\"]*\"|[^,}]*)"))
		return ""
	m = substr(s, RSTART + length(key) + 3, RLENGTH - length(key) - 3)
	if (m == "null")
		return ""
	gsub(/^"|"$/, "", m)
	return m
}

# field(key): jget on the current record outside its "knobs" object: a
# cell's own fields (pool_threads, threads) and its knobs share names.
function field(key,   s) {
	s = $0
	sub(/,"knobs":\{[^}]*\}/, "", s)
	return jget(s, key)
}
