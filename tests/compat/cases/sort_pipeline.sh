# GNU sort with a 200 MiB buffer over a 65 MiB file, piped to md5sum
# (sort reads with fread_unlocked: libc-internal reads into routed memory).
description="sort -S 200M FILE | md5sum (bash pipeline)"
packages=(coreutils bash)
program="sort | md5sum"
nobody=yes
prepare() { compat_gen lines 42 1500000 >lines.txt; }
command=(bash -c 'set -o pipefail; sort -S 200M "$IN/lines.txt" | md5sum')
