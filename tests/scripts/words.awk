# Word statistics over the data file: associative arrays, split, gsub,
# sprintf, and sorted traversal.
BEGIN { FS = "\t" }
{
	n = split($4, w, " ")
	for (i = 1; i <= n; i++) {
		word = w[i]
		count[word]++
		len[length(word)]++
		base = word
		gsub(/[0-9]+$/, "", base)
		stem[tolower(base)] += $2
	}
	key[substr($1, 1, 3)] = key[substr($1, 1, 3)] sprintf("%s,", substr($1, 4, 2))
	if (length(key[substr($1, 1, 3)]) > 300)
		key[substr($1, 1, 3)] = substr(key[substr($1, 1, 3)], 150)
	total += $3
}
END {
	PROCINFO["sorted_in"] = "@ind_str_asc"
	for (s in stem)
		printf "stem %s %d\n", s, stem[s]
	for (l in len)
		printf "len %s %d\n", l, len[l]
	distinct = 0
	for (word in count)
		distinct++
	printf "distinct %d total %.3f\n", distinct, total
	for (k in key)
		if (k ~ /^0/)
			printf "key %s %s\n", k, key[k]
}
