#!/usr/bin/env bash
# `uswap bench seeds` and `uswap demo`, end to end at small sizes: bad options fail with a message
# naming the option; each seed's table prints the seed's published figures beside measured ones;
# the JSON holds, for every row the seed published, its figures and uswap's (a median and one
# value per round for every form); --plot writes PNG files; the demo verifies every page and
# prints real figures. Usage: bench_seeds_test.sh path/to/uswap
set -u
uswap=$1
failures=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$dir/out

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# check_json <description> <jq filter that must be true> <file>
check_json() {
  if jq -e "$2" "$3" >/dev/null 2>&1; then
    echo "ok: $1"
  else
    echo "FAIL: $1"
    head -c 3000 "$3" | sed 's/^/    /'
    failures=$((failures + 1))
  fi
}

expect nonzero "--only: unknown seed '005' \(valid: 000, 001, 002\)" -- bench seeds --only 005
expect nonzero '--threads: 0 is outside 1..64' -- bench seeds --threads 0
expect nonzero 'not expected.*--bogus|--bogus' -- bench seeds --bogus
expect nonzero 'seeds' -- bench

# Seed 002: every test of the seed's table, at the seed's 4 children, tiny files.
expect zero '\| iozone \| Mixed workload \| 4 \| KB/s \| 4\.057M \| 5\.843M \| \+44\.0% \| [0-9.]+[kM]? \(' \
  -- bench seeds --quick --only 002 --rounds 2 --iozone-size 256K --json "$dir/s2.json"
check_json "seed 002 JSON: 11 rows, each with the seed's figures and every form measured in 2 rounds" \
  '.seeds | length == 1 and .[0].id == "002" and (.[0].rows | length == 11) and
   all(.[0].rows[]; .seed.baseline > 0 and .seed.patched > 0 and .threads == 4 and
       .measured.baseline.form == "global_rwlock" and .measured.patched.form == "slot_cas" and
       (.measured.forms | length == 3) and
       all(.measured.forms[]; .median > 0 and (.rounds | length == 2) and .min <= .median and .median <= .max))' \
  "$dir/s2.json"
check_json "seed 002 JSON: change is patched / baseline - 1 of the medians" \
  'all(.seeds[0].rows[]; ((.measured.change_pct - (.measured.patched.median / .measured.baseline.median - 1) * 100) | fabs) < 1e-6)' \
  "$dir/s2.json"

# Seed 000: usemem at the seed's 16 tasks on a small machine, and swapbench; a thread sweep
# with charts.
expect zero '\| usemem -n \(swap-w-seq\) \| swap-out throughput \| 16 \| GB/s \| 1\.610 \| 2\.110 \| \+30\.7% \|' \
  -- bench seeds --quick --only 000 --rounds 2 --usemem-ram 8M --swapbench-duration 0.05 \
     --json "$dir/s0.json"
check_json "seed 000 JSON: the seed's row measured in every form, and swapbench rows" \
  '.seeds[0].id == "000" and
   any(.seeds[0].rows[]; .row == "swap-out throughput" and .seed.baseline == 1.61 and
       .seed.patched == 2.11 and .measured.baseline.median > 0 and .measured.patched.median > 0) and
   any(.seeds[0].rows[]; .experiment == "swapbench" and .seed == null and
       ([.measured.forms[].form] == ["global", "cluster", "percpu"])) and
   all(.seeds[0].rows[]; all(.measured.forms[]; (.rounds | length == 2) and .median > 0))' \
  "$dir/s0.json"
# Without the shared reference file, the compiled-in copy of the seed's figures is used.
expect zero '\| swap-out throughput \| 16 \| GB/s \| 1\.610 \| 2\.110 \| \+30\.7% \|' \
  -- bench seeds --quick --only 000 --rounds 1 --usemem-ram 8M --swapbench-duration 0.05 \
     --reference "$dir/none.csv"
grep -q "compiled-in copy of seed 000's posted table" "$out" && echo "ok: compiled-in seed 000 figures" \
  || { echo "FAIL: no compiled-in copy named"; failures=$((failures + 1)); }
expect zero 'chart: .*seed000_usemem\.png' \
  -- bench seeds --quick --only 000 --rounds 1 --threads 1,2 --usemem-ram 8M \
     --swapbench-duration 0.05 --plot "$dir/img"
if [ "$(head -c 4 "$dir/img/seed000_usemem.png" | od -An -tx1 | tr -d ' ')" = 89504e47 ]; then
  echo "ok: --plot wrote a PNG"
else
  echo "FAIL: --plot: $dir/img/seed000_usemem.png is not a PNG"; failures=$((failures + 1))
fi

# Seed 001: pft and aim9 are part of every build, so every row is measured in both forms and
# carries the seed's own figures beside them.
"$uswap" bench seeds --quick --only 001 --rounds 1 --json "$dir/s1.json" >"$out" 2>&1
rc=$?
if [ $rc -eq 0 ] && jq -e '.seeds[0].id == "001" and .seeds[0].available == true and
     (.seeds[0].rows | length > 0) and
     any(.seeds[0].rows[]; .row == "fork_test" and .seed.baseline > 0 and .seed.patched > 0) and
     all(.seeds[0].rows[]; .measured.baseline.median > 0 and .measured.patched.median > 0)' \
     "$dir/s1.json" >/dev/null; then
  echo "ok: bench seeds --only 001"
else
  echo "FAIL: bench seeds --only 001 (exit $rc)"; sed 's/^/    /' "$out"; failures=$((failures + 1))
fi

# The demo, scaled down: usemem through zram with every page verified, then the summary.
expect zero 'verify: [1-9][0-9]* pages read back, 0 mismatches' \
  -- demo --ram 16M --size 16M --tasks 2 --no-seeds
grep -Eq 'zram: .* compressed \(ratio [0-9]+\.[0-9]+\)' "$out" && grep -Eq 'swap: [1-9][0-9]* swap-outs, [1-9][0-9]* swap-ins' "$out" \
  && [ "$(grep -c ' acquisitions, ' "$out")" -eq 3 ] && echo "ok: demo summary" \
  || { echo "FAIL: demo summary"; sed 's/^/    /' "$out"; failures=$((failures + 1)); }
expect zero '\| iozone \| Read \| 4 \|' -- demo --ram 16M --size 12M --tasks 2 --rounds 1
expect nonzero "must be more than --ram" -- demo --size 0
expect nonzero "must be more than --ram" -- demo --ram 64M --size 8M --tasks 2

if [ $failures -ne 0 ]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all bench seeds / demo checks passed"
