#!/usr/bin/env bash
# `uswap usemem` end to end on small sizes: every page verified after going through swap on both
# devices, JSON output parses and agrees, too little swap fails with a clear ENOMEM and a non-zero
# exit, bad options are refused. Usage: usemem_test.sh path/to/uswap
set -u
uswap=$1
failures=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

expect zero 'verify: 0 mismatches in 4096 pages' -- usemem -t 4 --size 4M --ram 4M --verify -q
expect zero 'bytes / [0-9]+ usecs = [0-9]+ KB/s' -- usemem -n 3 --size 2M --ram 2M --swap-dev ram -q
expect zero 'mm_stat: +[0-9]+' -- usemem -t 2 --size 4M --ram 2M --random --verify -q
expect zero 'every frame, swap slot and zram object freed' -- usemem -t 2 --size 4M --ram 2M -q
expect zero 'swap-outs \(pswpout\) [1-9]' -- usemem -t 2 --size 4M --ram 2M -q
expect nonzero 'ENOMEM' -- usemem -t 2 --size 8M --ram 2M --swap 4M -q
expect nonzero "unknown swap lock mode 'bogus'" -- usemem --size 1M --swap-lock bogus
expect nonzero "unknown swap device 'disk' \(valid: zram, ram\)" -- usemem --size 1M --swap-dev disk
expect zero 'ratio' -- usemem -t 2 --size 2M --ram 2M --swap-lock global,cluster --rounds 2 -q

# JSON: parses, and the verified page count and the task count are what was asked.
"$uswap" usemem -t 2 --size 2M --ram 2M --verify --json -q >"$out" 2>&1
if python3 - "$out" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
r = j["run"]
assert j["config"]["tasks"] == 2, j["config"]
assert r["mismatches"] == 0 and r["errors"] == 0 and r["teardown_clean"], r
assert sum(t["pages_verified"] for t in r["tasks"]) == 1024, r["tasks"]
assert r["vmstat"]["pswpout"] > 0 and "orig_data_size" in r["mm_stat"], r
PY
then echo "ok: usemem --json"; else echo "FAIL: usemem --json"; cat "$out"; failures=$((failures + 1)); fi

[ $failures -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
