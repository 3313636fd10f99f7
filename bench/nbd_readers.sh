#!/bin/bash
# Threads faulting at once on a remote backing tier: two uswap binaries side by side (A B A B
# ...), each running the same program under `uswap run --limit 16M --pool-limit 4M --backing`
# an nbdkit memory export behind nbdkit's delay filter (1 ms per read, its granularity).
#
# The program: THREADS threads touching random pages of one 64 MiB buffer of incompressible
# bytes, 3000 touches each; most touches read a page back from the export. Its output (a
# checksum) must be the same in every run.
#
# Usage: bench/nbd_readers.sh USWAP_A USWAP_B [THREADS=4] [ROUNDS=5]
# Prints a line per run (binary, round, seconds, pages read from the export, swap-ins) and the
# medians with their ratio B / A. Needs nbdkit, jq and a C compiler.
set -u
a=$1 b=$2 threads=${3:-4} rounds=${4:-5}
tmp=$(mktemp -d)
trap 'kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT
cat >"$tmp/mt.c" <<'C'
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
static uint8_t *buf;
static size_t pages;
static int touches;
static void *run(void *arg) {
  uint64_t x = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1, sum = 0;
  for (int i = 0; i < touches; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    sum = sum * 31 + buf[(x % pages) * 4096 + (x >> 40) % 4096];
  }
  return (void *)(uintptr_t)sum;
}
int main(int argc, char **argv) {
  if (argc != 4) return 2;
  const size_t mib = strtoul(argv[1], 0, 10);
  const int threads = atoi(argv[2]);
  touches = atoi(argv[3]);
  pages = mib << 8;
  buf = malloc(mib << 20);
  if (!buf || threads < 1 || threads > 16) return 2;
  uint64_t x = 88172645463325252ull;
  for (size_t i = 0; i < (mib << 20) / 8; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    ((uint64_t *)buf)[i] = x;
  }
  pthread_t t[16];
  uint64_t total = 0;
  for (int i = 0; i < threads; ++i) pthread_create(&t[i], 0, run, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < threads; ++i) {
    void *r;
    pthread_join(t[i], &r);
    total += (uintptr_t)r;
  }
  printf("%zu %d %d %llx\n", mib, threads, touches, (unsigned long long)total);
  return 0;
}
C
cc -O2 -pthread -o "$tmp/mt" "$tmp/mt.c" || exit 2
nbdkit -f --exit-with-parent -U "$tmp/nbd.sock" -P "$tmp/nbd.pid" --filter=delay memory 1G \
  delay-read=1ms >"$tmp/nbdkit.log" 2>&1 &
server=$!
for _ in $(seq 200); do [ -s "$tmp/nbd.pid" ] && break; sleep 0.05; done
[ -s "$tmp/nbd.pid" ] || { echo "nbdkit did not start: $(cat "$tmp/nbdkit.log")" >&2; exit 2; }
uri="nbd+unix:///?socket=$tmp/nbd.sock"
want=$("$tmp/mt" 64 "$threads" 3000)
echo "$(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg); $threads threads; A $("$a" --version); B $("$b" --version)"
declare -A times
for r in $(seq 1 "$rounds"); do
  for side in A B; do
    [ $side = A ] && bin=$a || bin=$b
    s=$(date +%s.%N)
    out=$("$bin" run --limit 16M --pool-limit 4M --backing "$uri" --json -- "$tmp/mt" 64 "$threads" 3000 \
      2>"$tmp/err")
    e=$(date +%s.%N)
    [ "$out" = "$want" ] || { echo "$side round $r: wrong output '$out', want '$want'" >&2; exit 1; }
    t=$(echo "$e - $s" | bc)
    times[$side]="${times[$side]:-} $t"
    echo "$side $r ${t}s $(tail -n 1 "$tmp/err" | jq -c '{bd_reads: .job.bd_reads, swap_ins: .job.swap_ins}')"
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
ma=$(median <<<"${times[A]}") mb=$(median <<<"${times[B]}")
echo "median A ${ma}s, B ${mb}s, B / A $(echo "scale=2; $mb / $ma" | bc)"
