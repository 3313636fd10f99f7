#!/usr/bin/env bash
# A stand-in for `uswap run --limit L --json -- PROGRAM ARGS` that runs the program plainly (like
# `env PROGRAM ARGS`), to check the harness itself: run.sh --uswap fake-uswap.sh. It prints the
# JSON summary uswap run prints, with the figures of a plain run: vm_hwm_bytes = GNU time's %M,
# zram_mem_used_max = that as well (so the peak bound holds: nothing was limited), swap_outs 1.
# Faults to inject, read from fake-uswap.conf next to this script (the harness runs the program
# with a clean environment, so the settings cannot come from variables):
#   FAKE_EXIT_DELTA=N      add N to the exit status
#   FAKE_STDOUT_EXTRA=TEXT print TEXT on stdout after the program
#   FAKE_NO_JSON=1         print no JSON summary
#   FAKE_SWAP_OUTS=N       report N swap-outs
#   FAKE_ZRAM=N            report zram_mem_used_max N (bytes) instead of the peak
#   FAKE_NO_HWM=1          report no vm_hwm_bytes (the harness then uses its own %M)
#   FAKE_FILE_RSS=N        report file_rss_bytes N (file-backed pages at exit; default none)
#   FAKE_SLEEP=S           sleep S seconds before running the program (a slow or hung run)
set -u
here=$(cd "$(dirname "$0")" && pwd)
FAKE_EXIT_DELTA=0 FAKE_STDOUT_EXTRA="" FAKE_NO_JSON=0 FAKE_SWAP_OUTS=1 FAKE_ZRAM="" FAKE_NO_HWM=0 FAKE_SLEEP=0 FAKE_FILE_RSS=
# shellcheck disable=SC1091
[ ! -f "$here/fake-uswap.conf" ] || . "$here/fake-uswap.conf"
[ "${1:-}" = run ] || { echo "fake-uswap: only 'run' is implemented" >&2; exit 2; }
shift
limit=0 json=0
while [ $# -gt 0 ]; do
  case $1 in
  --limit) limit=$2; shift 2 ;;
  --json) json=1; shift ;;
  --) shift; break ;;
  *) echo "fake-uswap: unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$FAKE_SLEEP" = 0 ] || sleep "$FAKE_SLEEP"
t=$(mktemp)
/usr/bin/time -f %M -o "$t" "$@"
rc=$?
kb=$(tail -n 1 "$t")
rm -f "$t"
[ -z "$FAKE_STDOUT_EXTRA" ] || echo "$FAKE_STDOUT_EXTRA"
rc=$((rc + FAKE_EXIT_DELTA))
hwm=$((kb * 1024))
zram=${FAKE_ZRAM:-$hwm}
if [ "$json" -eq 1 ] && [ "$FAKE_NO_JSON" -ne 1 ]; then
  hwm_field=",\"vm_hwm_bytes\":$hwm"
  [ "$FAKE_NO_HWM" -ne 1 ] || hwm_field=""
  [ -z "$FAKE_FILE_RSS" ] || hwm_field="$hwm_field,\"file_rss_bytes\":$FAKE_FILE_RSS"
  printf '{"exit_status":%d,"processes":[{"pid":%d,"program":"%s","limit_bytes":%d,"peak_resident_bytes":%d,"zram_mem_used_max":%d,"swap_outs":%d,"swap_ins":0%s}]}\n' \
    "$rc" $$ "$(basename "$1")" "$limit" "$hwm" "$zram" "$FAKE_SWAP_OUTS" "$hwm_field" >&2
fi
exit "$rc"
