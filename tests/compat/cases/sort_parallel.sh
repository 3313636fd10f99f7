# Multithreaded: GNU sort's merge sort on 2 threads, by a text column then a numeric one.
description="sort --parallel=2 -S 300M -t, -k2,2 -k3,3n (threads)"
packages=(coreutils)
program="sort --parallel=2"
prepare() { compat_gen csv 9 1500000 >records.csv; }
command=(sort --parallel=2 -S 300M -t, -k2,2 -k3,3n "$IN/records.csv")
