#!/usr/bin/env bash
# `uswap pft`, `uswap aim9 fork|exec` and `uswap rmap-bench` end to end on small sizes: both rmap
# lock modes run and are compared, seed 001's figures are printed beside, JSON parses and its
# counts are what was asked, bad options are refused. Usage: rmap_test.sh path/to/uswap
set -u
uswap=$1
failures=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

expect zero 'rwsem/spin: fault/wsec [-+][0-9.]+%.*seed 001, 2 threads' -- pft -t 1,2 --pages 512 --reps 2 --rounds 1
expect zero 'anon_vma->rwsem' -- pft --anon -t 2 --pages 256 --rounds 1 --rmap-lock rwsem
expect zero 'i_mmap_lock' -- pft -t 2 --pages 256 --rounds 1 --rmap-lock spin
expect zero 'seed 001 sample 3: 4760.48 -> 4925.07' -- aim9 fork --seconds 0.2 --rounds 1
expect zero 'Program Loads/second' -- aim9 exec --seconds 0.2 --rounds 1 -t 3
expect zero 'rwsem/spin: [0-9.]+x' -- rmap-bench --seconds 0.3 --rounds 1 --anon-pages 512 --file-pages 512 --ram-pages 512 --forks 4 -t 3
expect nonzero "unknown rmap lock mode 'bogus'" -- pft --rmap-lock bogus --pages 16
expect nonzero "bad thread count '0'" -- pft -t 0 --pages 16
expect nonzero 'at least 64 pages' -- rmap-bench --ram-pages 8 --rounds 1
expect nonzero 'subcommand' -- aim9

"$uswap" pft --anon -t 2 --pages 300 --reps 2 --rounds 1 --rmap-lock all --json >"$out" 2>&1
if python3 - "$out" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
r = j["results"][0]
assert r["threads"] == 2, r
for run in r["runs"]:
    assert run["faults"] == 2 * 300 * 2 and run["errors"] == 0, run
assert {x["rmap_lock"] for x in r["runs"]} == {"spin", "rwsem"}, r
assert "fault_per_wsec" in r["rwsem_over_spin"] and "seed_001" in r, r
PY
then echo "ok: pft --json"; else echo "FAIL: pft --json"; cat "$out"; failures=$((failures + 1)); fi

"$uswap" aim9 exec --seconds 0.2 --rounds 2 --rmap-lock spin,rwsem --json >"$out" 2>&1
if python3 - "$out" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert len(j["runs"]) == 4, j["runs"]
assert all(r["operations"] > 0 and r["errors"] == 0 and r["teardown_clean"] for r in j["runs"]), j["runs"]
assert len(j["seed_001"]) == 3 and j["rwsem_over_spin"] > 0, j
PY
then echo "ok: aim9 --json"; else echo "FAIL: aim9 --json"; cat "$out"; failures=$((failures + 1)); fi

[ $failures -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
