#!/usr/bin/env bash
# Runs every libFuzzer target of a fuzz build for a bounded time (make fuzz).
#   fuzz/run.sh BUILD_DIR SECONDS PARALLEL
# Each target first runs once over its committed corpus (fuzz/corpus/NAME/: the seeds and every
# crash input ever found), then fuzzes for SECONDS starting from a copy of it, so that a run
# never writes into the repository. PARALLEL targets run at a time. A crash, a sanitizer report
# or a failed model check fails the run; the input that caused it is left in
# BUILD_DIR/fuzz-findings/NAME/ and named in the output.
set -euo pipefail
build=${1:?build directory}
seconds=${2:-60}
parallel=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)
targets=()
for dir in "$here"/corpus/*/; do targets+=("$(basename "$dir")"); done

# -rss_limit_mb: the targets hold a few small devices; far more is a leak. -timeout: one input
# that takes 30 s is a hang. -max_len: inputs decode into at most 64 operations, and
# -len_control=0 lets a short run reach such lengths at once (the corpus starts it near them).
fuzz_one() {
  local name=$1
  local bin="$build/fuzz/fuzz_$name"
  local work="$build/fuzz-work/$name" findings="$build/fuzz-findings/$name"
  rm -rf "$work"
  mkdir -p "$work" "$findings"
  cp -r "$here/corpus/$name/." "$work/"
  local log="$build/fuzz-work/$name.log"
  if ! "$bin" -runs=0 "$here/corpus/$name" >"$log" 2>&1; then
    echo "fuzz $name: the committed corpus fails" >&2
    tail -40 "$log" >&2
    return 1
  fi
  if ! "$bin" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -max_len=4096 -len_control=0 \
       -print_final_stats=1 -artifact_prefix="$findings/" "$work" >>"$log" 2>&1; then
    echo "fuzz $name: FAILED (inputs in $findings/)" >&2
    tail -60 "$log" >&2
    return 1
  fi
  echo "fuzz $name: ok, $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') runs in ${seconds} s"
}

export -f fuzz_one
export build seconds here
status=0
printf '%s\n' "${targets[@]}" | xargs -P "$parallel" -I{} bash -c 'fuzz_one "$@"' _ {} || status=1
exit $status
