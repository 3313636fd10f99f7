#!/usr/bin/env bash
# `uswap uffdbench` as a user runs it: a short run reads every page back right, bad options are
# refused clearly, and a run ended by SIGTERM or SIGINT (Ctrl-C) while its kernel side is set
# up leaves nothing behind: no zram device swapped on or configured, no cgroup. The kernel side
# needs root and an unused zram device; without them those parts are skipped (said so).
# Usage: uffdbench_test.sh path/to/uswap
set -u
uswap=$1
failures=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
out=$dir/out

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

expect nonzero 'need --size >= 4M' -- uffdbench --size 1M --no-kernel
expect nonzero 'need --size >= 4M and 256K <= --limit <= --size' -- uffdbench --size 8M --limit 16M --no-kernel
expect nonzero '--rounds must be positive' -- uffdbench --size 8M --rounds 0 --no-kernel
expect nonzero 'pattern' -- uffdbench --pattern zigzag --no-kernel
expect zero 'rand +median uswap [0-9.]+ MB/s' -- uffdbench --size 16M --rounds 1 --pattern rand --no-kernel --verify

kernel_side_possible() {
  [ "$(id -u)" -eq 0 ] && [ -e /sys/block/zram0 ] &&
    [ "$(cat /sys/block/zram0/disksize)" = 0 ] && ! grep -q zram /proc/swaps
}

# A run ended by `sig` once its kernel side is swapped on: it dies of the signal, and the swap,
# the zram device and the cgroup are gone.
interrupted_run_leaves_nothing() {
  local sig=$1 pid rc i
  "$uswap" uffdbench --size 512M --rounds 50 --pattern rand >"$dir/run.out" 2>&1 &
  pid=$!
  for ((i = 0; i < 200; ++i)); do
    grep -q zram /proc/swaps && break
    sleep 0.05
  done
  if ! grep -q zram /proc/swaps; then
    echo "FAIL: uffdbench never swapped on a zram device: $(tail -c 300 "$dir/run.out")"
    failures=$((failures + 1))
    kill -KILL "$pid" 2>/dev/null
    wait "$pid"
    return
  fi
  sleep 0.5  # into its rounds: the kernel side's child may be running in the cgroup
  kill "-$sig" "$pid"
  wait "$pid"
  rc=$?
  local want=$((128 + $(kill -l "$sig")))
  local left=""
  grep -q zram /proc/swaps && left+=" a zram swap ($(grep zram /proc/swaps | cut -d' ' -f1));"
  [ "$(cat /sys/block/zram0/disksize)" = 0 ] || left+=" zram0 configured;"
  for d in /sys/block/zram[1-9]*; do [ -e "$d" ] && left+=" ${d##*/} hot-added;"; done
  for d in /sys/fs/cgroup/memory/uswap-uffdbench-"$pid" /sys/fs/cgroup/uswap-uffdbench-"$pid" \
    /sys/fs/cgroup/unified/uswap-uffdbench-"$pid"; do
    [ -e "$d" ] && left+=" cgroup $d;"
  done
  if [ "$rc" -ne "$want" ] || [ -n "$left" ]; then
    echo "FAIL: uffdbench ended by SIG$sig: exit $rc (wanted $want), left behind:${left:- nothing}"
    failures=$((failures + 1))
    # Leave the machine as it was for what runs next.
    grep zram /proc/swaps | cut -d' ' -f1 | while read -r s; do swapoff "$s"; done
    echo 1 >/sys/block/zram0/reset 2>/dev/null
    for d in /sys/block/zram[1-9]*; do
      [ -e "$d" ] && echo "${d##*zram}" >/sys/class/zram-control/hot_remove 2>/dev/null
    done
  else
    echo "ok: uffdbench ended by SIG$sig (exit $rc) left no swap, zram device or cgroup"
  fi
}

if kernel_side_possible; then
  expect zero 'seq +median uswap [0-9.]+ MB/s, kernel [0-9.]+ MB/s' -- uffdbench --size 16M --rounds 1 --pattern seq --verify
  interrupted_run_leaves_nothing TERM
  interrupted_run_leaves_nothing INT
else
  echo "skipped: the kernel side (needs root and an unused /sys/block/zram0)"
fi

[ "$failures" -eq 0 ] || { echo "$failures failure(s)"; exit 1; }
echo "all uffdbench checks passed"
