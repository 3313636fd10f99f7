# Multithreaded: zstd -T2 (two worker threads, each with its own tables) at level 12 with a
# 128 MiB long-distance window, reading a redirected file.
# slow: both workers probe 64 MiB hash tables at random, twice the limit together, so nearly
# every probe is a page fault (10M swap-ins for 24 MB of input): minutes under uswap where the
# plain run takes 3 s. Not in CTest; run it by hand (run.sh zstd_threads), with a long timeout.
slow=yes
case_timeout_factor=100
case_max_timeout=600
description="zstd -T2 -12 --long=27 --zstd=hlog=24 (threads)"
packages=(zstd bash)
program="zstd -T2"
prepare() { compat_gen text 9 3000000 >text.txt; }
command=(bash -c 'set -o pipefail; zstd -T2 -12 --long=27 --zstd=hlog=24 -c <"$IN/text.txt" | sha256sum')
