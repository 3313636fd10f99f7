#!/usr/bin/env bash
# Checks the compatibility harness itself (run.sh), with fake-uswap.sh standing in for uswap
# (it runs the program plainly, like `env PROGRAM`, and prints uswap run's JSON summary): a case
# that works passes, and each kind of failure is caught and named: a wrong exit status, different
# stdout, a different output file and check step, no JSON, nothing paged, a process above the
# peak bound (with and without vm_hwm_bytes), a time-out, a plain run that exits other than the
# case expects, a missing Debian package. Also one real case (sort_parallel) through the fake,
# the results file, and (as root) a run as nobody.
# Usage: selftest.sh    (no uswap needed; about a minute)
set -u
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/uswap-compat-selftest.XXXXXX)
chmod 755 "$tmp"
trap '[ -n "${SELFTEST_KEEP:-}" ] || rm -rf "$tmp"' EXIT
passed=0 failed=0
mkdir -p "$tmp/bin" "$tmp/cases"
cp "$here/fake-uswap.sh" "$tmp/bin/uswap"
chmod 755 "$tmp/bin/uswap"
conf=$tmp/bin/fake-uswap.conf

# A case that works: 200 MiB filled deterministically, hashed (peak about 210 MiB).
cat >"$tmp/cases/st_ok.sh" <<'EOF'
description="selftest: python3 fills 200 MiB and hashes it"
packages=(python3)
program="python3"
prepare() { echo 200 >size; }
command=(/usr/bin/python3 -c 'import hashlib, sys
n = int(open(sys.argv[1]).read()) << 20
b = bytearray(n)
for i in range(0, n, 4096): b[i] = i * 7 >> 12 & 255
print(hashlib.sha256(b).hexdigest())' "$IN/size")
EOF
# Plain runs that differ from run to run: a file and the check step's output.
cat >"$tmp/cases/st_nondet.sh" <<'EOF'
description="selftest: an output file and a check step that differ every run"
packages=(coreutils)
prepare() { :; }
command=(bash -c 'echo same; date +%s%N >stamp')
outputs=(stamp)
check() { cat stamp; }
EOF
# A case whose plain run does not exit as the case says.
cat >"$tmp/cases/st_badexit.sh" <<'EOF'
description="selftest: expects exit status 3, the program exits 0"
packages=(coreutils)
prepare() { :; }
command=(echo hello)
expect_exit=3
EOF
cat >"$tmp/cases/st_nopkg.sh" <<'EOF'
description="selftest: needs a package that does not exist"
packages=(uswap-compat-no-such-package)
prepare() { :; }
command=(echo hello)
EOF
cat >"$tmp/cases/st_noop.sh" <<'EOF'
description="selftest: prints nothing"
packages=(coreutils)
prepare() { :; }
command=(true)
EOF
cp "$here/cases/sort_parallel.sh" "$tmp/cases/"

# check NAME WANT_RC PATTERN CONF -- DRIVER ARGS: run the driver with that fake configuration;
# its exit status must be WANT_RC and its output must match PATTERN (extended regex).
check() {
  local name=$1 want=$2 pattern=$3 settings=$4
  shift 5
  printf '%s\n' "$settings" >"$conf"
  bash "$here/run.sh" --uswap "$tmp/bin/uswap" --cases "$tmp/cases" "$@" >"$tmp/out" 2>&1
  local rc=$?
  if [ $rc -eq "$want" ] && grep -Eq -- "$pattern" "$tmp/out"; then
    echo "ok: $name"
    passed=$((passed + 1))
  else
    echo "FAIL: $name (exit $rc, wanted $want; pattern '$pattern'):"
    sed 's/^/    /' "$tmp/out" | tail -30
    failed=$((failed + 1))
  fi
}

check "a working case passes" 0 '^ok +st_ok .*limit 10[0-9]\.[0-9] MiB.*1 swap-outs' "" -- \
  --results "$tmp/results.jsonl" st_ok
if jq -e 'select(.case == "st_ok" and .result == "ok" and .plain.peak_rss_bytes > 200 * 1048576
            and .limit_bytes == (.plain.peak_rss_bytes / 2 / 4096 | floor) * 4096
            and .uswap.swap_outs == 1 and .version != "" and .reasons == [])' \
  "$tmp/results.jsonl" >/dev/null; then
  echo "ok: the results line"; passed=$((passed + 1))
else
  echo "FAIL: the results line: $(cat "$tmp/results.jsonl")"; failed=$((failed + 1))
fi
check "a real case through the env wrapper" 0 '^ok +sort_parallel' "" -- sort_parallel
check "exit status" 1 'exit status 1 under uswap vs 0 plain' "FAKE_EXIT_DELTA=1" -- st_ok
check "stdout" 1 'stdout differs: plain sha256 [0-9a-f]+ \(65 bytes\), uswap [0-9a-f]+ \(71 bytes\); uswap.s goes on after' \
  "FAKE_STDOUT_EXTRA=extra" -- st_ok
check "output file and check step" 1 'output file stamp differs.*' "" -- st_nondet
check "a case too small for the bound" 1 'the case is too small: its plain peak [0-9.]+ MiB is under 112.0 MiB' "" -- st_nondet
check "check step" 1 'check differs: .*first difference at line 1' "" -- st_nondet
check "no JSON" 1 'no JSON summary from uswap run' "FAKE_NO_JSON=1" -- st_ok
check "nothing paged" 1 'nothing was paged: swap_outs 0 in all 1 processes' "FAKE_SWAP_OUTS=0" -- st_ok
check "peak bound, VmHWM" 1 'pid [0-9]+ \(python3\): peak RSS \(VmHWM\) .* exceeds limit .* \+ zram_mem_used_max 0.0 MiB \+ file-backed .* \+ 48 MiB = .* by ' \
  "FAKE_ZRAM=0" -- st_ok
# File-backed pages (a program's own binary) are not the limit's: they widen the bound.
check "peak bound, file-backed pages" 0 '^ok +st_ok' "FAKE_ZRAM=0
FAKE_FILE_RSS=$((200 << 20))" -- st_ok
check "peak bound, GNU time" 1 'no vm_hwm_bytes in uswap.s JSON\): peak RSS \(GNU time %M\) .* exceeds limit .* by ' \
  "FAKE_ZRAM=0
FAKE_NO_HWM=1" -- st_ok
check "time-out" 1 'timed out after 3 s under uswap' "FAKE_SLEEP=10" -- --min-timeout 3 --timeout-factor 1 st_ok
check "wrong expected exit status" 1 'the plain run exited 0, the case expects 3' "" -- st_badexit
check "missing package" 1 'not installed: uswap-compat-no-such-package: run scripts/install-deps' "" -- st_nopkg
check "nothing to compare" 1 'the plain run printed nothing' "" -- st_noop
check "an unknown case" 1 'no case file' "" -- st_none
check "one failure fails the run" 1 'compat: 1 passed, 1 failed' "" -- st_ok st_badexit
if [ "$(id -u)" -eq 0 ] && id nobody >/dev/null 2>&1; then
  check "as nobody" 0 '^ok +st_ok +nobody' "" -- --user nobody st_ok
fi
echo "compat harness: $passed passed, $failed failed"
[ $failed -eq 0 ]
