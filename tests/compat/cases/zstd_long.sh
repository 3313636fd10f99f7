# A compressor: zstd -19 with a 32 MiB long-distance window, input from a
# pipe (size unknown, so the full window and tables are allocated), a 64 MiB hash table (hlog=24)
# so that its peak is large enough for the limit to bite; zstd installs its own SIGBUS/SIGSEGV
# handlers.
description="zstd -19 --long=25 --zstd=hlog=24 from a pipe"
packages=(zstd bash)
program="zstd -19 --long=25"
cost=20
prepare() { compat_gen text 8 3000000 | head -c 5000000 >text.txt; }
command=(bash -c 'set -o pipefail; cat "$IN/text.txt" | zstd -19 --long=25 --zstd=hlog=24 -c | sha256sum')
