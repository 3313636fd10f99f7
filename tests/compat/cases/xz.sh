# A compressor, multithreaded: xz -6 (LZMA2, 8 MiB dictionary, bt4 match finder) with two
# encoder threads, each compressing its own 6 MiB block of the 12 MB of text (one thread's -6
# stays under 100 MiB, too little for the limit to bite).
description="xz -6 -T2 --block-size=6MiB on 12 MB of generated text (threads)"
packages=(xz-utils)
program="xz -6 -T2"
cost=60
prepare() { compat_gen text 7 3000000 | head -c 12000000 >text.txt; }
command=(xz -6 -T2 --block-size=6MiB -c "$IN/text.txt")
