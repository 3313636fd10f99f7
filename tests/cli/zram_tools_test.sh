#!/usr/bin/env bash
# The zram subcommands as a user runs them: uswap zram fills, checks, post-processes and reports a
# device; uswap iozone prints the seed-style table, its JSON, and refuses bad options clearly.
# Usage: zram_tools_test.sh path/to/uswap
set -u
uswap=$1
failures=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$dir/out

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

expect zero 'all match' -- zram --size 8M
expect zero 'mm_stat +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+' -- zram --size 8M
expect zero 'zram0 +lzo +8M' -- zram --size 8M
expect zero 'table\[index\]\.lock +[1-9]' -- zram --size 8M --lockstat
expect zero 'meta->tb_lock' -- zram --size 4M --lock global_rwlock --lockstat
expect zero 'recompressed [0-9]+ slots' -- zram --size 8M --comp lz4 --recomp zstd --recompress all
expect zero 'wrote back [1-9][0-9]* slots' -- zram --size 8M --backing-dev "$dir/backing" \
  --backing-size 16M --writeback idle
expect zero 'bd_stat +[1-9]' -- zram --size 8M --backing-dev "$dir/backing2" --backing-size 16M \
  --writeback huge
expect zero 'compaction freed [0-9]+ pages' -- zram --size 8M --discard-pct 70 --compact
expect zero 'writes refused at mem_limit' -- zram --size 16M --mem-limit 2M
expect nonzero 'unknown zram lock mode' -- zram --lock spin
expect nonzero 'comp_algorithm' -- zram --comp lzma

"$uswap" zram --size 4M --json >"$dir/z.json" 2>&1
if python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); assert j["mm_stat"]["orig_data_size"] > 0 and j["workload"]["verify_failures"] == 0' "$dir/z.json"; then
  echo "ok: uswap zram --json"
else
  echo "FAIL: uswap zram --json"; head -20 "$dir/z.json"; failures=$((failures + 1))
fi

expect zero 'Mixed workload .* [0-9.]+ \[' -- iozone -t 2 -r 16K -s 1M --rounds 2 --verify
expect zero 'seed CAS/base' -- iozone -t 2 -r 16K -s 512K --rounds 1
expect zero 'compiled-in copy' -- iozone -t 2 -r 16K -s 512K --rounds 1 --reference "$dir/none.csv"
expect zero 'Random read +[0-9.]+$' -- iozone -t 3 -r 4K -s 256K --rounds 1 --lock slot_cas --tests randread
expect zero 'mm_stat' -- iozone -t 2 -r 16K -s 512K --rounds 1 --lock slot_bitlock --stat
expect nonzero 'unknown zram lock mode' -- iozone --lock spin
expect nonzero 'multiple of 4K' -- iozone -r 1000 -s 1M
expect nonzero "unknown test 'bogus'" -- iozone -s 1M --tests read,bogus

"$uswap" iozone -t 2 -r 16K -s 512K --rounds 2 --json >"$dir/i.json" 2>/dev/null
if python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert len(j["tests"]) == 11, len(j["tests"])
for t in j["tests"]:
    assert set(t["modes"]) == {"global_rwlock", "slot_cas", "slot_bitlock"}, t
    for m in t["modes"].values():
        assert len(m["rounds"]) == 2 and m["median_kbs"] > 0 and m["cpu_seconds_median"] >= 0
    assert "slot_bitlock" in t["ratio_to_global_rwlock"] and t["seed_ratio"] > 1
' "$dir/i.json"; then
  echo "ok: uswap iozone --json"
else
  echo "FAIL: uswap iozone --json"; head -30 "$dir/i.json"; failures=$((failures + 1))
fi

if [ $failures -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all passed"
