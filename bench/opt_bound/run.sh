#!/usr/bin/env bash
# Lower bound on the swap-ins any pager (even Belady's OPT) needs for `xz -8 -c -T1` on a 12 MB
# text file with its anonymous memory limited to 90/75/60/50% of its peak; see README.md.
#
# Usage: run.sh [--window W]... [--peak-kib K | --measure-peak] [--workdir DIR] [--keep-trace]
#   --window W      tracer window in pages (repeatable: one traced run each; default 2048)
#   --peak-kib K    peak RssAnon the fractions refer to (default 130048 KiB, measured earlier)
#   --measure-peak  measure it instead: RssAnon of an untraced run at its exit
#   --workdir DIR   input, traces and results (default /tmp/optb)
#   --keep-trace    keep the trace files (about 4 bytes a record; deleted by default)
# Results: DIR/result-wW.txt and DIR/result-wW.json per window; the tracer's log in
# DIR/trace-wW.log.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$here/build
work=/tmp/optb
windows=()
peak_kib=130048
measure_peak=0
keep_trace=0
fractions=(90% 75% 60% 50%)

while (($#)); do
  case $1 in
    --window) windows+=("$2"); shift 2 ;;
    --peak-kib) peak_kib=$2; shift 2 ;;
    --measure-peak) measure_peak=1; shift ;;
    --workdir) work=$2; shift 2 ;;
    --keep-trace) keep_trace=1; shift ;;
    *) sed -n '2,/^set -e/p' "$0" | sed '$d' >&2; exit 2 ;;
  esac
done
((${#windows[@]})) || windows=(2048)

mkdir -p "$build" "$work"
cc -O2 -Wall -Wextra -fPIC -shared -o "$build/trace_preload.so" "$here/trace_preload.c" -ldl
g++ -std=c++20 -O2 -Wall -Wextra -o "$build/opt_sim" "$here/opt_sim.cc"
"$build/opt_sim" --selftest

input=$work/text.txt
if [[ ! -s $input ]]; then
  # gen.py dies of the closed pipe once head has its 12 MB; only the size matters.
  (cd "$root" && python3 tests/compat/gen.py text 7 3000000 2>/dev/null |
    head -c 12000000 > "$input") || true
fi
[[ $(stat -c %s "$input") == 12000000 ]] || { echo "bad input $input" >&2; exit 1; }

cd "$work"
plain_md5=$(xz -8 -c -T1 text.txt | md5sum | cut -d' ' -f1)
echo "plain xz output md5 $plain_md5"

if ((measure_peak)); then
  # The tracer tracking nothing reads RssAnon at exit: xz never frees its big blocks (the traced
  # log shows "frees 0"), so that is its peak; polling /proc while it runs can miss the end.
  peak_kib=$(OPT_TRACK_MIN=$((1 << 60)) LD_PRELOAD=$build/trace_preload.so \
    xz -8 -c -T1 text.txt 2>&1 >/dev/null | awk '/at exit RssAnon:/ {print $(NF - 1)}')
  [[ -n $peak_kib ]] || { echo "could not measure the peak" >&2; exit 1; }
  echo "measured peak RssAnon $peak_kib KiB (at exit)"
fi

for w in "${windows[@]}"; do
  trace=$work/trace-w$w.bin
  log=$work/trace-w$w.log
  echo "traced run, window $w pages ($((w * 4 / 1024)) MiB); progress every 4 Mi records"
  start=$(date +%s.%N)
  traced_md5=$(OPT_TRACE_FILE=$trace OPT_WINDOW_PAGES=$w OPT_TRACE_VERBOSE=1 \
    LD_PRELOAD=$build/trace_preload.so xz -8 -c -T1 text.txt 2> >(tee "$log" >&2) |
    md5sum | cut -d' ' -f1)
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  echo "traced run took $secs s"
  if [[ $traced_md5 != "$plain_md5" ]]; then
    echo "traced output differs from the plain run ($traced_md5): not a trace of the same run" >&2
    exit 1
  fi
  "$build/opt_sim" --peak-kib "$peak_kib" --json-file "$work/result-w$w.json" "$trace" \
    "${fractions[@]}" | tee "$work/result-w$w.txt"
  ((keep_trace)) || rm -f "$trace"
done
