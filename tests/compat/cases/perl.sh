# perl: a hash of 500,000 records read from a file, sorted keys, MD5 over them, a word count.
# A hang detector, not a speed test: at half its peak every pass pages the working set, and a
# CI run took 270 s of the 300 s floor under uswap. 600 s leaves a slower host room.
case_min_timeout=600
case_max_timeout=600
description="perl: hash of 500k records, sort, Digest::MD5"
packages=(perl)
program="perl"
cost=55
prepare() { compat_gen lines 43 500000 >lines.txt; }
command=(perl -MDigest::MD5 -e 'my (%h, %n); while (<>) { my @f = split; $h{$f[0]} = [$., @f[1, 2]]; $n{$f[1]}++ }
my $c = Digest::MD5->new; $c->add("$_:@{$h{$_}}\n") for sort keys %h;
my @top = (sort { $n{$b} <=> $n{$a} or $a cmp $b } keys %n)[0 .. 4];
print scalar(keys %h), " ", $c->hexdigest, " @top\n"' "$IN/lines.txt")
