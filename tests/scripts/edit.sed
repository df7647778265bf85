# Rewrites every record of the data file: swaps fields, rewrites words with
# back-references, transliterates, and joins pairs of lines via the hold space.
s/^\([0-9a-f]*\)\t\([-0-9]*\)\t\([0-9.]*\)\t\(.*\)$/\4 | \3 | \2 | \1/
s/\([a-z]\+\)\([0-9]\+\)/\2-\1/g
y/abcdefghij/ABCDEFGHIJ/
/OMEGA/ {
	s/OMEGA/omega omega/g
}
h
N
s/\n/ <> /
/^Alph/ {
	x
	s/$/ (held)/
	G
}
