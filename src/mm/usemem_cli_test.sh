#!/usr/bin/env bash
# `uswap usemem` end to end on small sizes: every page verified after going through swap on both
# devices, JSON output parses and agrees, too little swap fails with a clear ENOMEM and a non-zero
# exit, bad options are refused. Usage: usemem_cli_test.sh path/to/uswap
set -u
uswap=$1
failures=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT

check() {  # check <want: zero|nonzero> <regex> -- args...
  local want=$1 pattern=$2
  shift 3
  "$uswap" "$@" >"$out" 2>&1
  local rc=$?
  if { [ "$want" = zero ] && [ $rc -ne 0 ]; } || { [ "$want" = nonzero ] && [ $rc -eq 0 ]; } ||
     ! grep -Eq -- "$pattern" "$out"; then
    echo "FAIL: uswap $* (exit $rc, wanted $want, pattern '$pattern'):"
    sed 's/^/    /' "$out"
    failures=$((failures + 1))
  else
    echo "ok: uswap $*"
  fi
}

check zero 'verify: 0 mismatches in 4096 pages' -- usemem -t 4 --size 4M --ram 4M --verify -q
check zero 'bytes / [0-9]+ usecs = [0-9]+ KB/s' -- usemem -n 3 --size 2M --ram 2M --swap-dev ram -q
check zero 'mm_stat: +[0-9]+' -- usemem -t 2 --size 4M --ram 2M --random --verify -q
check zero 'every frame, swap slot and zram object freed' -- usemem -t 2 --size 4M --ram 2M -q
check zero 'swap-outs \(pswpout\) [1-9]' -- usemem -t 2 --size 4M --ram 2M -q
check nonzero 'ENOMEM' -- usemem -t 2 --size 8M --ram 2M --swap 4M -q
check nonzero "unknown swap lock mode 'bogus'" -- usemem --size 1M --swap-lock bogus
check nonzero 'zram or ram' -- usemem --size 1M --swap-dev disk
check zero 'ratio' -- usemem -t 2 --size 2M --ram 2M --swap-lock global,cluster --rounds 2 -q

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
