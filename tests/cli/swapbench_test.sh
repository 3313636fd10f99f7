#!/usr/bin/env bash
# `uswap swapbench`: bad options fail with a message naming the option, and a short run prints
# every mode, the seed's figure and the lock table, as text and as JSON.
# Usage: swapbench_test.sh path/to/uswap
set -u
uswap=$1
failures=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

small=(--rounds 1 --duration 0.05 --size 64M --resident 256)
expect nonzero '--threads: 0 is outside 1..1024' -- swapbench --threads 0
expect nonzero "--modes: unknown swap lock mode 'spin' \(valid: global, cluster, percpu, percpu-atomic, each optionally with -notag\)" -- swapbench --modes global,spin
expect nonzero "--modes: unknown swap lock mode 'spin-notag'" -- swapbench --modes spin-notag
expect nonzero "--modes: unknown swap lock mode '-notag'" -- swapbench --modes -notag
expect nonzero "--slot-cache: unknown slot cache policy 'maybe' \(valid: by-mode, on, alloc, off\)" -- swapbench --slot-cache maybe
expect nonzero '--size: 1.00 MiB is too small for 16 threads' -- swapbench --size 1M
expect nonzero '--size.*(unknown suffix|invalid|size)' -- swapbench --size 12Q
expect nonzero '--duration: 0.000 s is outside' -- swapbench --duration 0
expect nonzero '--rounds: 0 is outside' -- swapbench --rounds 0
expect nonzero '--work: 2.00 MiB is more than 1 MiB' -- swapbench --work 2M
expect nonzero '--areas: 33 is outside 1..32' -- swapbench --areas 33
expect nonzero 'not expected.*--bogus|--bogus' -- swapbench --bogus
expect zero 'seed 000: cluster/global = 2.11/1.61 GB/s = 1.31x \(\+30.7%\)' -- swapbench -t 2 "${small[@]}"
expect zero 'percpu-atomic: cluster_lock' -- swapbench -t 3 "${small[@]}" --work 4K --mappings 2 --areas 2 --modes global,percpu,percpu-atomic
# -notag: the kernel's choice of a new cluster, measured beside uswap's freer tag.
expect zero 'percpu-notag: cluster_lock' -- swapbench -t 2 "${small[@]}" --modes percpu,percpu-notag,percpu-atomic-notag
expect zero '"freer_tag": false' -- swapbench -t 2 "${small[@]}" --modes cluster-notag --json --no-lockstat
expect zero '"ratio_to_baseline"' -- swapbench -t 2 "${small[@]}" --json
expect zero '"change_pct": 30.7' -- swapbench -t 2 "${small[@]}" --json --no-lockstat
expect zero '"median_ops_per_cpu_sec"' -- swapbench -t 2 "${small[@]}" --json --no-lockstat
expect zero 'global +on ' -- swapbench -t 2 "${small[@]}" --slot-cache on --no-lockstat
# by-mode: each mode with its kernel's cache (percpu: 6.14's allocation side only).
expect zero 'percpu +alloc ' -- swapbench -t 2 "${small[@]}" --no-lockstat
expect zero 'cluster +alloc ' -- swapbench -t 2 "${small[@]}" --slot-cache alloc --no-lockstat
expect zero '"slot_cache": "alloc"' -- swapbench -t 2 "${small[@]}" --slot-cache alloc --json --no-lockstat

if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all swapbench checks passed"
