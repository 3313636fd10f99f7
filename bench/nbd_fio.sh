#!/usr/bin/env bash
# fio over NBD (ioengine=nbd, libnbd) against the uswap nbdkit plugin in each lock mode and
# nbdkit's own memory plugin (allocator=zstd: compressed, one global lock, 32 KiB pages;
# allocator=sparse: uncompressed, the ceiling of the NBD path), in alternating rounds: each
# round starts every server in turn (A B C D E, the order reversed every other round), prefills
# its device with 50%-compressible data, runs the four workloads and stops it. Prints the median
# IOPS per server and workload with the min-max spread over rounds, and the ratios the issue
# asks for.
#
#   bench/nbd_fio.sh [--build DIR] [--rounds N] [--runtime S] [--size SIZE] [--out DIR]
#                    [--servers "uswap:slot_bitlock nbdkit:zstd ..."] [--first-round K] [--append]
#                    [--report]
#
# A long sweep can be split into short runs (each under the machine's benchmark lock) that add
# rounds to one results file: `--out D --rounds 1 --first-round K --append` for K = 1, 2, ...
# (K's parity picks the server order, so the rounds still alternate), then `--out D --report`
# prints the table of every round in D/nbd_fio_results.tsv without running anything.
#
# Workloads: 4K randread, 4K randwrite, 4K randrw (50/50), 16K sequential write; each 2 jobs
# (2 connections), iodepth 4, buffer_compress_percentage=50, refill_buffers, time-based.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build
rounds=5
runtime=6
size=512M
out=""
servers="uswap:global_rwlock uswap:slot_cas uswap:slot_bitlock nbdkit:zstd nbdkit:sparse"
comp=lz4
first_round=1
append=0
report_only=0
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --runtime) runtime=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --servers) servers=$2; shift 2 ;;
    --comp) comp=$2; shift 2 ;;
    --first-round) first_round=$2; shift 2 ;;
    --append) append=1; shift ;;
    --report) report_only=1; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "nbd_fio.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [ "$report_only" = 1 ] && [ -z "$out" ]; then
  echo "nbd_fio.sh: --report needs --out DIR" >&2; exit 2
fi
plugin=$build/lib/nbdkit-uswap-plugin.so
[ "$report_only" = 1 ] || [ -f "$plugin" ] || { echo "nbd_fio.sh: $plugin missing: build first (make build)" >&2; exit 1; }
[ "$report_only" = 1 ] || fio --enghelp 2>/dev/null | grep -qw nbd || { echo "nbd_fio.sh: fio lacks ioengine=nbd" >&2; exit 1; }

work=$(mktemp -d /tmp/uswap-nbd-fio.XXXXXX)
nbdkit_pid=""
cleanup() {
  if [ -n "$nbdkit_pid" ]; then kill "$nbdkit_pid" 2>/dev/null || true; wait "$nbdkit_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
[ -n "$out" ] || out=$work
mkdir -p "$out"
results=$out/nbd_fio_results.tsv
[ "$append" = 1 ] || [ "$report_only" = 1 ] || : >"$results"

start_server() {  # kind:variant
  local kind=${1%%:*} variant=${1#*:}
  rm -f "$work/sock" "$work/pid"
  if [ "$kind" = uswap ]; then
    nbdkit --exit-with-parent -f -U "$work/sock" -P "$work/pid" "$plugin" \
      size="$size" comp="$comp" lock="$variant" 2>>"$work/nbdkit.log" &
  else
    nbdkit --exit-with-parent -f -U "$work/sock" -P "$work/pid" memory \
      size="$size" allocator="$variant" 2>>"$work/nbdkit.log" &
  fi
  nbdkit_pid=$!
  for _ in $(seq 500); do [ -s "$work/pid" ] && return 0; sleep 0.02; done
  echo "nbd_fio.sh: nbdkit ($1) did not start; see $work/nbdkit.log" >&2
  exit 1
}

stop_server() {
  kill "$nbdkit_pid"
  wait "$nbdkit_pid" 2>/dev/null || true
  nbdkit_pid=""
}

uri() { echo "nbd+unix:///?socket=$work/sock"; }

common=(--thread --buffer_compress_percentage=50 --refill_buffers
        --output-format=terse --terse-version=3 --group_reporting)

# Prints total IOPS (read + write) of one fio run: terse v3 fields 8 (read iops), 49 (write).
run_fio() {  # name rw bs numjobs iodepth [extra...]
  local name=$1 rw=$2 bs=$3 jobs=$4 depth=$5
  shift 5
  fio --name="$name" --ioengine=nbd --uri="$(uri)" --rw="$rw" --bs="$bs" --numjobs="$jobs" --iodepth="$depth" \
    "${common[@]}" "$@" | awk -F';' '$1 == 3 { print $8 + $49 }'
}

workloads="randread randwrite randrw seqwrite16k"
[ "$report_only" = 1 ] && rounds=0
for r in $(seq "$first_round" $((first_round + rounds - 1))); do
  order=$servers
  if [ $((r % 2)) -eq 0 ]; then order=$(echo "$servers" | tr ' ' '\n' | tac | tr '\n' ' '); fi
  for s in $order; do
    start_server "$s"
    # Prefill: every byte written once, so reads decompress real data rather than holes.
    run_fio prefill write 1M 1 4 --size="$size" >/dev/null
    for w in $workloads; do
      case $w in
        randread) iops=$(run_fio "$w" randread 4k 2 4 --time_based --runtime="$runtime") ;;
        randwrite) iops=$(run_fio "$w" randwrite 4k 2 4 --time_based --runtime="$runtime") ;;
        randrw) iops=$(run_fio "$w" randrw 4k 2 4 --time_based --runtime="$runtime") ;;
        seqwrite16k) iops=$(run_fio "$w" write 16k 2 4 --time_based --runtime="$runtime") ;;
      esac
      printf '%s\t%s\t%s\t%s\n' "$r" "$s" "$w" "$iops" >>"$results"
      printf 'round %s  %-20s %-12s %10.0f IOPS\n' "$r" "$s" "$w" "$iops" >&2
    done
    stop_server
  done
  echo "round $r done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done

# The table: median (min-max) IOPS per server and workload, then the ratios.
echo
echo "fio ioengine=nbd, 2 jobs x iodepth 4, 50%-compressible data, device $size, ${runtime}s per run,"
echo "$(cut -f1 "$results" | sort -u | wc -l) alternating rounds; median IOPS (min-max over rounds)"
echo
awk -F'\t' -v servers="$servers" -v workloads="$workloads" '
  { v[$2 "|" $3] = v[$2 "|" $3] " " $4 }
  function median(list,   a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    lo = a[1]; hi = a[n]
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    ns = split(servers, S, " "); nw = split(workloads, W, " ")
    printf "| %-20s |", "server"
    for (j = 1; j <= nw; j++) printf " %-22s |", W[j]
    printf "\n|%s|", "----------------------"
    for (j = 1; j <= nw; j++) printf "%s|", "------------------------"
    printf "\n"
    for (i = 1; i <= ns; i++) {
      printf "| %-20s |", S[i]
      for (j = 1; j <= nw; j++) {
        m = median(v[S[i] "|" W[j]]); med[S[i] "|" W[j]] = m
        printf " %7.0f (%6.0f-%6.0f) |", m, lo, hi
      }
      printf "\n"
    }
    b = "uswap:slot_bitlock"
    printf "\nratios of medians\n"
    for (i = 1; i <= ns; i++) {
      if (S[i] == b) continue
      printf "| %-40s |", b " / " S[i]
      for (j = 1; j <= nw; j++) {
        d = med[S[i] "|" W[j]]
        printf " %-11s %6.2fx |", W[j], (d > 0 ? med[b "|" W[j]] / d : 0)
      }
      printf "\n"
    }
    z = med["nbdkit:zstd|randrw"]; sp = med["nbdkit:sparse|randread"]
    if (z > 0 && sp > 0 && ((b "|randrw") in med)) {
      printf "\ntarget: %s 4K randrw >= 3x nbdkit zstd: %.2fx\n", b, med[b "|randrw"] / z
      printf "target: %s 4K randread >= 0.9x nbdkit sparse: %.2fx\n", b, med[b "|randread"] / sp
    }
  }' "$results"
echo
[ "$out" = "$work" ] || echo "raw results: $results"
