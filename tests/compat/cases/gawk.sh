# gawk: associative arrays of word and word-pair counts over 3 million words, sorted output.
description="gawk: word and pair counts, PROCINFO sorted_in"
packages=(gawk)
program="gawk"
cost=35
prepare() { compat_gen text 10 3000000 >text.txt; }
command=(gawk '{ for (i = 1; i <= NF; i++) { n[$i]++; if (length($i) > 5) pair[$i, $(i % NF + 1)]++ } }
END { PROCINFO["sorted_in"] = "@val_num_desc"; c = 0; for (w in n) if (c++ < 10) print w, n[w]
      np = 0; for (p in pair) np++; print length(n), np }' "$IN/text.txt")
