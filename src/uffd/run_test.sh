#!/usr/bin/env bash
# Tests of `uswap run` and its preload shim. Usage:
#   run_test.sh sort    USWAP SORT_PROGRAM MODE ACCESS [N LIMIT]
#                       the sort of N values (default 32Mi: a 512 MiB working set, two arrays of
#                       8-byte values) under --limit LIMIT (default 64M)
#   run_test.sh shim    USWAP SHIM_TEST_PROGRAM          the shim's promises, checked inside C
#   run_test.sh ownmalloc USWAP OWN_MALLOC_PROGRAM   a program that defines malloc itself
#   run_test.sh cli     USWAP STATIC_PROGRAM             errors, refusals and the summary
#   run_test.sh programs USWAP                           programs that do what few do: scrubbed
#                       environments, MAP_FIXED by the arena, jemalloc, sandboxes, raw clones,
#                       plugins, a setuid program, a full arena
#   run_test.sh job     USWAP JOB_PROGRAM MODE           processes sharing one --limit
#   run_test.sh nbd     USWAP SORT_PROGRAM               --backing an NBD export (nbdkit memory):
#                       the sort's output, pages on every tier; the server restarted, stopped
#                       (SIGSTOP) and killed mid-run
#   run_test.sh faultinject USWAP FAULT_INJECT_PROGRAM   refused allocations reach the program
#                       as ENOMEM (USWAP_FAIL_INJECT, uswap/base/fault_inject.h), never a crash
# MODE: sigbus | handler-thread; ACCESS: auto | user-mode-only.
set -u
what=$1
uswap=$2
failures=0
tmp=$(mktemp -d)

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# start_nbdkit SIZE: nbdkit memory SIZE on $tmp/nbd.sock (pid in $nbdkit_pid), killed with this
# script; its URI in $nbd_uri. start_nbdkit PLUGIN ARGS...: another plugin there.
nbdkit_pid=
start_nbdkit() {
  [ -n "$nbdkit_pid" ] && kill -9 "$nbdkit_pid" 2>/dev/null && wait "$nbdkit_pid" 2>/dev/null
  rm -f "$tmp/nbd.pid" "$tmp/nbd.sock"
  local plugin=(memory "$1")
  [ $# -gt 1 ] && plugin=("$@")
  nbdkit -f --exit-with-parent -U "$tmp/nbd.sock" -P "$tmp/nbd.pid" "${plugin[@]}" >"$tmp/nbdkit.log" 2>&1 &
  nbdkit_pid=$!
  for _ in $(seq 500); do [ -s "$tmp/nbd.pid" ] && break; sleep 0.01; done
  [ -s "$tmp/nbd.pid" ] || fail "nbdkit did not start: $(cat "$tmp/nbdkit.log")"
  nbd_uri="nbd+unix:///?socket=$tmp/nbd.sock"
}
trap 'rm -rf "$tmp"; [ -n "$nbdkit_pid" ] && kill -9 "$nbdkit_pid" 2>/dev/null' EXIT

# wait_for_writeback STATS_DIR: waits (up to 60 s) until the job writing STATS_DIR has written
# more than 1000 pages back (bd_stat's third field); fails (1) if job $upid ended first.
wait_for_writeback() {
  for _ in $(seq 600); do
    [ "$(awk '{print $3}' "$1/bd_stat" 2>/dev/null || echo 0)" -gt 1000 ] 2>/dev/null && break
    sleep 0.1
  done
  kill -0 "$upid" 2>/dev/null
}

# daemon_case JOB_PROGRAM: the program exits at once and leaves a daemon that goes on with the
# job (job_test_program.c, daemon). uswap run returns with it and says the job goes on; a
# watcher of its own keeps --stats-dir up to date and returns a killed member's share until the
# last member ends.
daemon_case() {
  local prog=$1 sd=$tmp/stats limit=$((32 << 20)) pass=$((256 * 4096)) watcher
  JOB_TEST_RESULT=$tmp/result timeout 60 "$uswap" run --limit 32M --stats-dir "$sd" --json -- \
    "$prog" daemon >"$tmp/paged.out" 2>"$tmp/paged.err"
  rc=$?
  [ $rc -eq 0 ] || fail "uswap run exited $rc (124: it waited for the daemon): $(tail -c 600 "$tmp/paged.err")"
  json=$(tail -n 1 "$tmp/paged.err")
  watcher=$(jq '.job_running.watcher_pid // 0' <<<"$json")
  [ "$(jq '.job_running.pids | length' <<<"$json")" -ge 1 ] && [ "$watcher" -gt 0 ] ||
    fail "uswap run did not say the job goes on: $(head -c 600 "$tmp/paged.err")"
  for _ in $(seq 600); do [ -s "$tmp/result" ] && break; sleep 0.1; done
  [ "$(cat "$tmp/result" 2>/dev/null)" = ok ] ||
    fail "the daemon: $(cat "$tmp/result" 2>/dev/null || echo "no result in 60 s"); $(cat "$tmp/paged.err")"
  for _ in $(seq 100); do kill -0 "$watcher" 2>/dev/null || break; sleep 0.1; done
  ! kill -0 "$watcher" 2>/dev/null || fail "the watcher $watcher outlived the job"
  echo "stats: $(tr '\n' ' ' <"$sd/memory.stat")"
  local peak outs
  peak=$(cat "$sd/memory.peak") outs=$(awk '$1 == "pswpout" {print $2}' "$sd/memory.stat")
  # The image the daemon exec'd held 0.9 of the limit in the job (the job's peak), and the
  # share of the member killed before it came back: nothing had to be swapped out.
  [ "$peak" -ge $((limit * 85 / 100)) ] ||
    fail "the job's peak $peak: the daemon's exec'd image did not join it"
  [ "$peak" -le $((limit + pass)) ] || fail "the job's peak $peak passed the limit by more than a pass"
  [ "$outs" = 0 ] || fail "$outs pages were swapped out: the killed member's share did not come back"
  [ "$(cat "$sd/memory.current")" = 0 ] || fail "memory.current at the end: $(cat "$sd/memory.current")"
  ! grep -q "limited on its own" "$tmp/paged.err" "$tmp/paged.out" ||
    fail "a daemon's image did not join: $(grep -h "limited on its own" "$tmp/paged.err" "$tmp/paged.out")"
}

# hoglocked_case PROGRAM: the job's signal reaches a member whose main thread is inside glibc's
# malloc_stats (main_arena locked) a good part of the time. Serving the request there, reclaim's
# first allocation (its zspages refused for a while by fault injection, each refusal building
# its error message; tcache off, so that every malloc takes its arena's lock) waited for its own
# thread for ever: one run in six hung. Ten runs, each watched for a hang; in all of them
# together signals must have landed in the C library and been put off, and others served.
hoglocked_case() {
  local prog=$1 run deferred=0 served=0 hog json limit=$((32 << 20))
  for run in 1 2 3 4 5 6 7 8 9 10; do
    GLIBC_TUNABLES=glibc.malloc.tcache_count=0 USWAP_FAIL_INJECT=futex_waitv:1+,zs_malloc_page:1-200 \
      "$uswap" run --limit 32M --json -- "$prog" hoglocked >"$tmp/paged.out" 2>"$tmp/paged.err" &
    wait_job $! 60
    [ $rc -eq 0 ] || { fail "run $run exited $rc: $(tail -c 1500 "$tmp/paged.out" "$tmp/paged.err")"; return; }
    json=$(tail -n 1 "$tmp/paged.err")
    [ "$(jq .job.peak_resident_bytes <<<"$json")" -le $((limit + limit / 32)) ] ||
      fail "run $run: the job's peak passed the limit by more than a pass: $(jq -c .job <<<"$json")"
    [ "$(jq .job.overcharges <<<"$json")" = 0 ] || fail "run $run: overcharges: $(jq -c .job <<<"$json")"
    hog=$(jq -c '[.processes[] | select(.event == "exit")] | max_by(.pid)' <<<"$json")
    deferred=$((deferred + $(jq .job_signals_deferred <<<"$hog")))
    served=$((served + $(jq '.job_signals - .job_signals_deferred' <<<"$hog")))
  done
  echo "hoglocked: the hog's signals put off in the C library $deferred, served $served"
  [ $deferred -gt 0 ] || fail "no signal found the hog inside the C library: the case tested nothing"
  [ $served -gt 0 ] || fail "no signal was served: put off each time, the hog never gave room by one"
}

# wait_job PID SECONDS: waits for the background job PID and sets $rc to its status. Past
# SECONDS it is a hang: every thread's stack of the job's processes (gdb, else the kernel's
# view) goes to the output and they are killed, so that the test fails with its evidence rather
# than at ctest's timeout.
wait_job() {
  local pid=$1 deadline=$((SECONDS + $2))
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    fail "the job did not end within $2 s: its stacks follow"
    local procs=$pid p t
    for p in $(pgrep -P "$pid"); do procs="$procs $p $(pgrep -P "$p" | tr '\n' ' ')"; done
    for p in $procs; do
      echo "=== pid $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
      if command -v gdb >/dev/null; then
        timeout 60 gdb -p "$p" -batch -nx -ex "thread apply all bt" 2>&1 | grep -E '^(Thread|#)'
      else
        for t in /proc/"$p"/task/*; do
          echo "--- thread ${t##*/}: $(cat "$t/comm") syscall $(cut -d' ' -f1 "$t/syscall" 2>/dev/null)"
          cat "$t/stack" 2>/dev/null
        done
      fi
    done
    for p in $procs; do kill -9 "$p" 2>/dev/null; done
  fi
  wait "$pid"
  rc=$?
}

# json_field FILE NAME: the first numeric value of "NAME": in FILE.
# in_three_modes NAME WHAT COUNT NONE: builds src/uffd/NAME.c and runs it under `uswap run
# --limit 8M --json` in both fault modes and with a kswapd thread. Each run must exit 0 with the
# plain run's output, and the function COUNT (reading $tmp/e, the run's stderr) must print a
# number above 0: the proof that what the program tests happened; NONE says what it means if not.
in_three_modes() {
  local name=$1 what=$2 count=$3 none=$4 args want n
  cc -O2 -pthread -o "$tmp/$name" "$(dirname "${BASH_SOURCE[0]}")/$name.c" ||
    { fail "cannot build $name"; return; }
  want=$("$tmp/$name" 2>/dev/null)
  for args in "--fault-mode sigbus" "--fault-mode handler-thread" "--background-reclaim"; do
    # shellcheck disable=SC2086
    timeout -k 5 180 "$uswap" run --limit 8M $args --json -- "$tmp/$name" >"$tmp/o" 2>"$tmp/e" ||
      fail "($args) $what: status $?: $(tail -c 600 "$tmp/e")"
    [ "$(cat "$tmp/o")" = "$want" ] || fail "($args) $name printed $(cat "$tmp/o"), plain $want"
    n=$("$count")
    [ "${n:-0}" -gt 0 ] || fail "($args) $none: $(head -c 300 "$tmp/e")"
  done
}
swap_outs_of_run() { tail -n 1 "$tmp/e" | jq '[.processes[].swap_outs] | add'; }

json_field() {
  grep -o "\"$2\":[0-9]*" "$1" | head -1 | cut -d: -f2
}

case $what in
sort)
  prog=$3 mode=$4 access=$5 n=${6:-33554432} limit_arg=${7:-64M}
  "$prog" "$n" >"$tmp/plain.out" 2>"$tmp/plain.err" || fail "the program alone failed: $(cat "$tmp/plain.err")"
  "$uswap" run --limit "$limit_arg" --fault-mode "$mode" --access "$access" --json -- "$prog" "$n" \
    >"$tmp/paged.out" 2>"$tmp/paged.err"
  rc=$?
  [ $rc -eq 0 ] || fail "uswap run exited $rc: $(cat "$tmp/paged.err")"
  if cmp -s "$tmp/plain.out" "$tmp/paged.out"; then
    echo "ok: same output: $(cat "$tmp/paged.out")"
  else
    fail "output differs: plain '$(cat "$tmp/plain.out")' paged '$(cat "$tmp/paged.out")'"
  fi
  peak=$(json_field "$tmp/paged.err" peak_resident_bytes)
  limit=$(json_field "$tmp/paged.err" limit_bytes)
  outs=$(json_field "$tmp/paged.err" swap_outs)
  ins=$(json_field "$tmp/paged.err" swap_ins)
  over=$(json_field "$tmp/paged.err" overcharges)
  echo "stats: $(cat "$tmp/paged.err")"
  [ -n "$peak" ] && [ -n "$limit" ] || fail "no statistics from the shim"
  want_limit=$(numfmt --from=iec "$limit_arg")
  [ "${limit:-0}" -eq "$want_limit" ] || fail "limit $limit, wanted $want_limit"
  [ "${peak:-1}" -le "${limit:-0}" ] || fail "peak resident $peak above the limit $limit"
  # The working set is 16 bytes per value; at least all of it beyond the limit was swapped out
  # once (the generation pass alone writes it), and read back at least half as often.
  beyond=$(((16 * n - want_limit) / 4096))
  [ "${outs:-0}" -ge "$beyond" ] || fail "only ${outs:-0} swap-outs, the working set exceeds the limit by $beyond pages"
  [ "${ins:-0}" -ge $((beyond / 2)) ] || fail "only ${ins:-0} swap-ins"
  [ "${over:-1}" -eq 0 ] || fail "$over overcharges"
  ;;
shim)
  prog=$3
  "$prog" >"$tmp/plain.out" 2>&1 || fail "the test program alone failed: $(cat "$tmp/plain.out")"
  "$uswap" run --limit 8M --json -- "$prog" >"$tmp/paged.out" 2>"$tmp/paged.err"
  rc=$?
  [ $rc -eq 0 ] || fail "under uswap run it exited $rc: $(cat "$tmp/paged.out" "$tmp/paged.err")"
  outs=$(json_field "$tmp/paged.err" swap_outs)
  [ "${outs:-0}" -gt 0 ] || fail "no swap-outs: the shim did not route the memory ($(cat "$tmp/paged.err"))"
  "$uswap" run --limit 8M --access user-mode-only -- "$prog" >"$tmp/user.out" 2>"$tmp/user.err" ||
    fail "with UFFD_USER_MODE_ONLY it failed: $(cat "$tmp/user.out" "$tmp/user.err")"
  grep -q "UFFD_USER_MODE_ONLY" "$tmp/user.err" || fail "the summary does not name the user-mode-only descriptor"
  grep -q "seccomp" "$tmp/user.err" || fail "without kernel-mode faults the summary does not say seccomp"
  "$uswap" run --limit 8M --fault-mode sigbus -- "$prog" >"$tmp/sigbus.out" 2>"$tmp/sigbus.err" ||
    fail "in sigbus mode it failed: $(cat "$tmp/sigbus.out" "$tmp/sigbus.err")"
  # A program that lowers RLIMIT_DATA to what it means to use (Chromium's sandbox does): the
  # pager's reservations are not its data, so its allocations, and the pager's own pool, still
  # fit; it reads back the limit it set.
  lowered='import resource, zlib
resource.setrlimit(resource.RLIMIT_DATA, (1 << 30, resource.getrlimit(resource.RLIMIT_DATA)[1]))
b = [bytearray(i % 251 for i in range(1 << 20)) for _ in range(48)]
print(resource.getrlimit(resource.RLIMIT_DATA)[0], sum(zlib.crc32(x) for x in b))'
  want=$(python3 -c "$lowered")
  "$uswap" run --limit 8M --json -- python3 -c "$lowered" >"$tmp/rl.out" 2>"$tmp/rl.err" ||
    fail "with RLIMIT_DATA lowered: $(tail -c 600 "$tmp/rl.err")"
  [ "$(cat "$tmp/rl.out")" = "$want" ] || fail "with RLIMIT_DATA lowered it printed $(cat "$tmp/rl.out"), plain $want"
  [ "$(json_field "$tmp/rl.err" swap_outs)" -gt 0 ] || fail "with RLIMIT_DATA lowered nothing was paged"
  [ "$(json_field "$tmp/rl.err" overcharges)" = 0 ] ||
    fail "with RLIMIT_DATA lowered the limit did not hold: $(json_field "$tmp/rl.err" overcharges) overcharges"
  # mlockall(MCL_CURRENT | MCL_FUTURE), then 64 MiB written through a private mapping: paged as
  # before, and nothing the pager reserved is faulted in (plain, the process peaks near 80 MiB;
  # MCL_CURRENT without MCL_ONFAULT had it at 1.8 GiB of the pager's tables).
  if [ "$(id -u)" -eq 0 ]; then
    locked='import ctypes, mmap, zlib
libc = ctypes.CDLL(None, use_errno=True)
assert libc.mlockall(3) == 0, ctypes.get_errno()
m = mmap.mmap(-1, 64 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for i in range(0, len(m), 4096): m[i] = i % 251
print(sum(m[i] for i in range(0, len(m), 4096)), zlib.crc32(m))'
    want=$(python3 -c "$locked") || fail "mlockall alone failed"
    "$uswap" run --limit 8M --json -- python3 -c "$locked" >"$tmp/ml.out" 2>"$tmp/ml.err" ||
      fail "after mlockall: $(tail -c 600 "$tmp/ml.err")"
    [ "$(cat "$tmp/ml.out")" = "$want" ] || fail "after mlockall it printed $(cat "$tmp/ml.out"), plain $want"
    [ "$(tail -n 1 "$tmp/ml.err" | jq '[.processes[].swap_outs] | add')" -gt 0 ] ||
      fail "after mlockall nothing was paged"
    hwm=$(tail -n 1 "$tmp/ml.err" | jq '[.processes[].vm_hwm_bytes] | max')
    [ "${hwm:-0}" -lt $((256 << 20)) ] || fail "after mlockall the process peaked at $((hwm >> 20)) MiB"
  fi
  ;;
ownmalloc)
  # A program whose executable defines the malloc family (as rustc, with jemalloc linked in):
  # every allocation of the process, the loader's per-thread DTVs included, is its allocator's,
  # in paged memory, and that allocator maps its chunks with its lock held. The pager must
  # neither call it (from that mmap, or to register a thread's exit) nor read what it holds
  # while resolving a fault: either hangs, or aborts the program ("malloc re-entered").
  prog=$3
  "$prog" 8 48 6 >"$tmp/plain.out" 2>&1 || fail "the test program alone failed: $(cat "$tmp/plain.out")"
  for mode in sigbus handler-thread; do
    timeout -k 10 300 "$uswap" run --limit 16M --fault-mode $mode --json -- "$prog" 8 48 6 \
      >"$tmp/$mode.out" 2>"$tmp/$mode.err"
    rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
      fail "($mode) no end in 300 s: $(tail -c 600 "$tmp/$mode.out" "$tmp/$mode.err")"
      continue
    fi
    [ $rc -eq 0 ] || fail "($mode) exit status $rc: $(tail -c 800 "$tmp/$mode.out" "$tmp/$mode.err")"
    cmp -s "$tmp/plain.out" "$tmp/$mode.out" ||
      fail "($mode) output differs from the plain run's: $(head -c 600 "$tmp/$mode.out")"
    ins=$(json_field "$tmp/$mode.err" swap_ins)
    [ "${ins:-0}" -gt 1000 ] ||
      fail "($mode) ${ins:-no} swap-ins: the program's own allocator's memory was not paged"
    echo "$mode: ok, ${ins} swap-ins"
  done
  ;;
cli)
  "$uswap" run --limit 8M >"$tmp/o" 2>&1 && fail "run without a program succeeded"
  "$uswap" run --limit 8M --fault-mode fast -- true >"$tmp/o" 2>&1
  [ $? -eq 2 ] && grep -q "sigbus, handler-thread" "$tmp/o" || fail "bad --fault-mode: $(cat "$tmp/o")"
  "$uswap" run --limit 8M --comp gzip -- true >"$tmp/o" 2>&1
  [ $? -eq 2 ] || fail "bad --comp accepted"
  "$uswap" run --limit 8M --reclaim-cluster 3 -- true >"$tmp/o" 2>&1
  [ $? -eq 2 ] && grep -q "reclaim-cluster" "$tmp/o" || fail "bad --reclaim-cluster: $(cat "$tmp/o")"
  # Sizes the pager cannot take are refused before anything runs, not run unrouted.
  for bad in "--max-size 1K" "--max-size 16T" "--max-size 9T" "--swap 100T"; do
    # shellcheck disable=SC2086
    "$uswap" run --limit 8M $bad -- true >"$tmp/o" 2>&1
    [ $? -eq 2 ] && grep -q -- "${bad%% *} must" "$tmp/o" || fail "$bad: $(cat "$tmp/o")"
  done
  # The default arena takes a program's large reservations: node with 64 WebAssembly memories
  # (V8 reserves 10 GiB of address space for each).
  "$uswap" run --limit 32M -- node -e 'const m = []; for (let i = 0; i < 64; i++) {
      m.push(new WebAssembly.Memory({initial: 16})); new Uint8Array(m[i].buffer).fill(i + 1); }
    console.log(m.reduce((s, x) => s + new Uint8Array(x.buffer)[4095], 0))' >"$tmp/o" 2>"$tmp/e" &&
    [ "$(cat "$tmp/o")" = 2080 ] || fail "64 WebAssembly memories: $(cat "$tmp/o") $(tail -c 600 "$tmp/e")"
  # Page by page and in the largest windows, a program paged through 4x its limit reads back.
  scatter='import random, zlib; r = random.Random(1); b = bytearray(32 << 20)
for _ in range(200000): b[r.randrange(len(b))] += 1
print(sum(b), zlib.crc32(b))'
  want=$(python3 -c "$scatter")
  for rc in 1 64; do
    "$uswap" run --limit 8M --reclaim-cluster $rc --json -- python3 -c "$scatter" >"$tmp/o" 2>"$tmp/e" ||
      fail "--reclaim-cluster $rc: $(tail -c 600 "$tmp/e")"
    [ "$(cat "$tmp/o")" = "$want" ] || fail "--reclaim-cluster $rc printed $(cat "$tmp/o"), plain $want"
    [ "$(json_field "$tmp/e" swap_outs)" -gt 0 ] || fail "--reclaim-cluster $rc: nothing was paged"
  done
  # Under an address-space limit (ulimit -v: soft limits are what a program obeys) the arena is
  # sized to leave the program's other mappings an eighth of it, and the program pages as under no
  # limit; a JVM reserving a 6 GiB heap (a quarter of this machine's RAM, its default) still starts.
  # Where not even the least arena fits, the program is refused (126), or with --allow-unrouted
  # run and named unrouted; a --max-size the limit cannot hold is an error (2).
  (
    failures=0
    ulimit -S -v $((20 << 20))  # KiB: 20 GiB
    "$uswap" run --limit 8M --json -- python3 -c "$scatter" >"$tmp/o" 2>"$tmp/e" ||
      fail "under ulimit -v 20G: $(tail -c 600 "$tmp/e")"
    [ "$(cat "$tmp/o")" = "$want" ] || fail "under ulimit -v 20G: printed $(cat "$tmp/o"), plain $want"
    [ "$(json_field "$tmp/e" swap_outs)" -gt 0 ] && grep -q "arena, all its routed memory, is 16.00 GiB" "$tmp/e" ||
      fail "under ulimit -v 20G the program was not paged in a 16 GiB arena: $(tail -c 600 "$tmp/e")"
    if command -v java >/dev/null; then
      echo 'public class H { public static void main(String[] a) { java.util.HashMap<Integer, String> m = new java.util.HashMap<>();
        for (int i = 0; i < 400000; i++) m.put(i, "v" + i); System.out.println(m.get(399999)); } }' >"$tmp/H.java"
      "$uswap" run --limit 16M -- java -Xmx6g "$tmp/H.java" >"$tmp/o" 2>"$tmp/e"
      [ "$(cat "$tmp/o")" = v399999 ] || fail "java -Xmx6g under ulimit -v 20G: $(tail -c 600 "$tmp/e")"
    fi
    "$uswap" run --limit 8M --max-size 32G -- true >"$tmp/o" 2>&1
    [ $? -eq 2 ] && grep -q "more than ulimit -v" "$tmp/o" || fail "--max-size 32G under ulimit -v 20G: $(cat "$tmp/o")"
    ulimit -S -v $((5 << 20))
    "$uswap" run --limit 8M -- true >"$tmp/o" 2>&1
    [ $? -eq 126 ] && grep -q "leaves no room for the pager" "$tmp/o" ||
      fail "ulimit -v 5G was not refused: $(cat "$tmp/o")"
    "$uswap" run --limit 8M --allow-unrouted -- python3 -c 'print(6)' >"$tmp/o" 2>"$tmp/e"
    [ $? -eq 0 ] && [ "$(cat "$tmp/o")" = 6 ] && grep -q "running the program unrouted" "$tmp/e" ||
      fail "ulimit -v 5G with --allow-unrouted: $(cat "$tmp/o") $(cat "$tmp/e")"
    [ "$failures" -eq 0 ]
  ) || fail "(the ulimit -v checks above)"
  # A program that crashes leaves a core with its memory, not the arena's terabytes: the pager's
  # large tables are left out of cores, and the part of the arena mimalloc manages is small enough
  # to walk (the core of this Python program was 1.1 TB, sparse, and took 35 s to write).
  if [ "$(cat /proc/sys/kernel/core_pattern)" = core ]; then
    mkdir "$tmp/core" && chmod 777 "$tmp/core"
    (
      cd "$tmp/core" && ulimit -c unlimited &&
        "$uswap" run --limit 64M -- python3 -c 'import ctypes
a = ["uswap-core-marker-%d" % i for i in range(200000)]
ctypes.string_at(0)' >/dev/null 2>&1
      echo $? >"$tmp/core/rc"
    )
    size=$(stat -c %s "$tmp/core/core" 2>/dev/null || echo 0)
    [ "$(cat "$tmp/core/rc")" = 139 ] && [ "$size" -gt 0 ] && [ "$size" -lt $((8 << 30)) ] &&
      grep -a -q "uswap-core-marker-199999" "$tmp/core/core" ||
      fail "the core of a crash: exit $(cat "$tmp/core/rc"), $size bytes"
    rm -rf "$tmp/core"
  fi
  # A process whose pager cannot be made runs unrouted, and the summary names it.
  USWAP_FAIL_INJECT=pager_arena:1 "$uswap" run --limit 8M -- sh -c 'echo 7' >"$tmp/o" 2>"$tmp/e"
  [ $? -eq 0 ] && [ "$(cat "$tmp/o")" = 7 ] && grep -q "^uswap run: unrouted: .*sh.* without a pager" "$tmp/e" ||
    fail "a process without a pager was not named: $(cat "$tmp/o") $(cat "$tmp/e")"
  # Background reclaim: with it the pager's thread evicts too (pgsteal_kswapd); without it (the
  # default) every eviction is a fault's own, and the output is the same.
  for br in on off; do
    flag=; [ $br = on ] && flag=--background-reclaim
    "$uswap" run --limit 8M $flag --json -- python3 -c "$scatter" >"$tmp/o" 2>"$tmp/e" ||
      fail "background reclaim $br: $(tail -c 600 "$tmp/e")"
    [ "$(cat "$tmp/o")" = "$want" ] || fail "background reclaim $br printed $(cat "$tmp/o"), plain $want"
    ks=$(tail -n 1 "$tmp/e" | jq '[.processes[].pgsteal_kswapd] | add')
    direct=$(tail -n 1 "$tmp/e" | jq '[.processes[].pgsteal_direct] | add')
    if [ $br = on ]; then
      [ "${ks:-0}" -gt 0 ] || fail "background reclaim evicted nothing: $(tail -c 600 "$tmp/e")"
    else
      [ "${ks:-1}" -eq 0 ] && [ "${direct:-0}" -gt 0 ] ||
        fail "without --background-reclaim: kswapd $ks pages: $(tail -c 600 "$tmp/e")"
    fi
  done
  # bash defines getenv and setenv over its shell variables: before its main, its setenv made a
  # table of one variable and its getenv found no other, so bash read no job and neither did its
  # subshells (1 of 6 images joined). The shim reads and writes the C library's environment.
  "$uswap" run --limit 16M --json -- bash --norc -c '(sleep 0.1; true); (true; true); x=$(echo hi); echo $x' >"$tmp/o" 2>"$tmp/e"
  images=$(tail -n 1 "$tmp/e" | jq '[.processes[] | select(.event == "exit")] | length')
  [ "$(cat "$tmp/o")" = hi ] && [ "$(tail -n 1 "$tmp/e" | jq .job.processes)" -ge 5 ] &&
    [ "${images:-0}" -ge 5 ] ||
    fail "bash and its subshells under uswap run: $(cat "$tmp/o"), $(tail -n 1 "$tmp/e" | jq -c '.job.processes, [.processes[] | {program, event}]')"
  # unshare(CLONE_NEWUSER) needs a single-threaded process: the shim ends the pager's thread
  # first, so a program that makes a user namespace (unshare -U, bwrap) works under uswap run.
  if unshare -U -r true 2>/dev/null; then
    "$uswap" run --limit 8M --background-reclaim -- unshare -U -r sh -c 'echo uid $(id -u)' >"$tmp/o" 2>"$tmp/e"
    [ "$(cat "$tmp/o")" = "uid 0" ] || fail "unshare -U under uswap run: $(cat "$tmp/o") $(tail -c 600 "$tmp/e")"
    # A new pid namespace (a container, a sandbox): its processes join the job as guests,
    # named by the supervisor (job_test_program pidns checks the limit), and the summary names
    # them by their pids outside. A process that cannot be named (no socket to the supervisor)
    # is limited on its own, said once for the tree rather than by every process.
    if unshare -Upf -r true 2>/dev/null; then
      "$uswap" run --limit 8M --json -- unshare -Upf -r sh -c 'true; ls / >/dev/null; echo in' >"$tmp/o" 2>"$tmp/e"
      [ "$(cat "$tmp/o")" = in ] && ! grep -q "cannot join the job" "$tmp/e" &&
        [ "$(tail -n 1 "$tmp/e" | jq .job.processes)" -ge 3 ] &&
        [ "$(tail -n 1 "$tmp/e" | jq '[.processes[] | select(.program == "ls") | .pid] | min')" -gt 2 ] ||
        fail "a pid namespace under uswap run (ls, pid 2 in it, named by its pid outside): $(cat "$tmp/o"), $(head -c 600 "$tmp/e")"
      "$uswap" run --limit 8M -- env -u USWAP_JOB_SOCK_FD unshare -Upf -r sh -c 'true; ls / >/dev/null; echo in' >"$tmp/o" 2>"$tmp/e"
      [ "$(cat "$tmp/o")" = in ] && [ "$(grep -c "cannot join the job" "$tmp/e")" = 1 ] ||
        fail "a pid namespace without the job's socket: $(cat "$tmp/o"), $(grep -c "cannot join the job" "$tmp/e") lines"
    fi
  fi
  "$uswap" run --limit 8M -- /nonexistent/program >"$tmp/o" 2>&1
  [ $? -eq 127 ] && grep -q "cannot run" "$tmp/o" || fail "missing program: $(cat "$tmp/o")"
  "$uswap" run --limit 8M -- sh -c 'exit 7' >"$tmp/o" 2>&1
  [ $? -eq 7 ] || fail "the program's exit status was not passed on"
  # A program killed by a signal: uswap run ends by the same signal, after its report (which
  # says 128 + 11), so a parent sees what it would of the program (exit 139 before, which Python
  # reads as 139, not -11).
  got=$(python3 -c 'import subprocess, sys
print(subprocess.run(sys.argv[1:], stderr=subprocess.DEVNULL).returncode)' \
    "$uswap" run --limit 8M -- sh -c 'kill -SEGV $$')
  [ "$got" = -11 ] || fail "a program killed by SIGSEGV: uswap run's status seen by a parent $got, not -11"
  "$uswap" run --limit 8M --json -- sh -c 'kill -TERM $$' >"$tmp/o" 2>"$tmp/e"
  [ $? -eq 143 ] && [ "$(tail -n 1 "$tmp/e" | jq .exit_status)" = 143 ] ||
    fail "a program killed by SIGTERM: $(tail -c 300 "$tmp/e")"
  # --stats-dir: the job's files exist while it runs, in cgroup v2's and zram's formats.
  "$uswap" run --limit 8M --stats-dir "$tmp/sd" -- sh -c "sleep 0.7; cat $tmp/sd/memory.max $tmp/sd/memory.stat $tmp/sd/mm_stat" >"$tmp/o" 2>&1
  [ "$(head -n 1 "$tmp/o")" = 8388608 ] || fail "memory.max while the job ran: $(cat "$tmp/o")"
  for want in "^anon [0-9]" "^swap [0-9]" "^pgfault [0-9]" "^pgmajfault [0-9]" "^workingset_refault_anon [0-9]"; do
    grep -q "$want" "$tmp/o" || fail "memory.stat lacks '$want': $(cat "$tmp/o")"
  done
  [ "$(sed -n 's/^ *\([0-9]\+ \+\)\{8\}[0-9]\+$/ok/p' "$tmp/o")" = ok ] || fail "mm_stat is not 9 numbers: $(cat "$tmp/o")"
  # A --stats-dir it cannot write to is an error before the program starts (it was accepted and
  # left empty); one that goes away while the job runs is said once, the job going on, and
  # written again once it is back.
  "$uswap" run --limit 8M --stats-dir /etc/passwd -- touch "$tmp/ran" >"$tmp/o" 2>&1
  [ $? -eq 1 ] && grep -q "stats-dir /etc/passwd: cannot write memory.current: Not a directory" "$tmp/o" &&
    [ ! -e "$tmp/ran" ] || fail "--stats-dir on a file: $(cat "$tmp/o")"
  "$uswap" run --limit 8M --stats-dir "$tmp/sd3" -- sh -c "rm -r $tmp/sd3; sleep 0.5; mkdir $tmp/sd3; sleep 0.5; exit 3" >"$tmp/o" 2>&1
  [ $? -eq 3 ] && [ "$(grep -c "stats-dir $tmp/sd3: cannot write" "$tmp/o")" = 1 ] &&
    [ "$(cat "$tmp/sd3/memory.max" 2>/dev/null)" = 8388608 ] ||
    fail "--stats-dir removed while the job ran: $(cat "$tmp/o"; ls "$tmp/sd3")"
  "$uswap" run --limit 8M --limit-per-process --stats-dir "$tmp/sd2" -- true >"$tmp/o" 2>&1
  [ $? -eq 2 ] && grep -q "limit-per-process" "$tmp/o" || fail "--stats-dir with --limit-per-process: $(cat "$tmp/o")"
  # A job that cannot be held at --limit + --pool-limit (no backing file, or a full one) is
  # stopped, named, rather than left to crawl over its limit.
  "$uswap" run --limit 8M --pool-limit 2M --backing "$tmp/small" --backing-size 16M --json -- python3 -c 'import os; x = os.urandom(64 << 20); print(len(x))' >"$tmp/o" 2>&1
  rc=$?
  [ $rc -eq 137 ] && grep -q "the backing file could take no more" "$tmp/o" ||
    fail "a job whose backing file filled up was not stopped with a message (exit $rc): $(tail -c 600 "$tmp/o")"
  "$uswap" run --limit 8M --pool-limit 2M --json -- python3 -c 'import os; x = os.urandom(64 << 20); print(len(x))' >"$tmp/o" 2>&1
  rc=$?
  [ $rc -eq 137 ] && grep -q "stopping the job: its compressed pools reached --pool-limit 2.0 MiB" "$tmp/o" &&
    [ "$(tail -n 1 "$tmp/o" | jq -r '.job.stopped | test("--pool-limit")')" = true ] ||
    fail "a job past --limit + --pool-limit was not stopped with a message (exit $rc): $(tail -c 600 "$tmp/o")"
  [ "$(tail -n 1 "$tmp/o" | jq .job.peak_footprint_bytes)" -le $(((8 + 2 + 1) << 20)) ] ||
    fail "the stopped job's footprint passed its limits: $(tail -n 1 "$tmp/o")"
  "$uswap" run --limit 8M --backing "$tmp/b" -- true >"$tmp/o" 2>&1
  [ $? -eq 2 ] && grep -q "needs --pool-limit" "$tmp/o" || fail "--backing without --pool-limit: $(cat "$tmp/o")"
  # A backing file is one job's: a second job over it is refused while the first runs.
  "$uswap" run --limit 8M --pool-limit 2M --backing "$tmp/shared" --backing-size 16M -- sleep 3 >"$tmp/o1" 2>&1 &
  first=$!
  for _ in $(seq 50); do [ -s "$tmp/shared" ] && break; sleep 0.1; done
  "$uswap" run --limit 8M --pool-limit 2M --backing "$tmp/shared" --backing-size 16M -- true >"$tmp/o" 2>&1
  rc=$?
  [ $rc -ne 0 ] && grep -q "in use by another uswap run" "$tmp/o" || fail "a second job over one backing file was not refused (exit $rc): $(cat "$tmp/o")"
  wait $first || fail "the job that held the backing file failed: $(cat "$tmp/o1")"
  "$uswap" run --limit 8M --pool-limit 2M --backing "$tmp/shared" --backing-size 16M -- true >"$tmp/o" 2>&1 ||
    fail "the backing file stayed taken after its job ended: $(cat "$tmp/o")"
  # --limit-per-process: no job in the summary or the JSON.
  "$uswap" run --limit 8M --limit-per-process --json -- true >"$tmp/o" 2>&1
  [ "$(tail -n 1 "$tmp/o" | jq 'has("job")')" = false ] || fail "--limit-per-process still made a job: $(cat "$tmp/o")"
  "$uswap" run --limit 8M --json -- true >"$tmp/o" 2>&1
  [ "$(tail -n 1 "$tmp/o" | jq .job.limit_bytes)" = 8388608 ] || fail "no job in the JSON: $(cat "$tmp/o")"
  # A program that pages: the human summary names every figure.
  "$uswap" run --limit 1M -- dd if=/dev/urandom of=/dev/null bs=4M count=4 status=none >"$tmp/o" 2>&1
  for want in "peak resident" "swap-outs" "swap-ins" "ratio" "ms in faults" "unrouted"; do
    grep -q "$want" "$tmp/o" || fail "the summary lacks '$want': $(cat "$tmp/o")"
  done
  # A program the shim cannot reach is refused (126) and named, or run with --allow-unrouted.
  static=$3
  "$static" >/dev/null 2>&1
  static_rc=$?
  "$uswap" run --limit 8M -- "$static" >"$tmp/o" 2>&1
  [ $? -eq 126 ] && grep -q "statically linked" "$tmp/o" || fail "a static program was not refused: $(cat "$tmp/o")"
  "$uswap" run --limit 8M --allow-unrouted -- "$static" >"$tmp/o" 2>&1
  [ $? -eq $static_rc ] && grep -q "unrouted" "$tmp/o" || fail "--allow-unrouted did not run it, or said nothing: $(cat "$tmp/o")"
  # ...and one a routed program execs is named in the summary.
  "$uswap" run --limit 8M -- sh -c "\"$static\"" >"$tmp/o" 2>&1
  [ $? -eq $static_rc ] && grep -q "unrouted: $static" "$tmp/o" || fail "an exec of a static program was not named: $(cat "$tmp/o")"
  # It inherits the job's filter and its parent's raw fork filter, and must never be trapped:
  # its system calls, its fork() and a raw clone fork from its own code run as without uswap.
  "$uswap" run --limit 8M -- sh -c "\"$static\" run" >"$tmp/o" 2>&1 &&
    grep -q "static child ok" "$tmp/o" || fail "a static descendant did not run as it does alone: $(cat "$tmp/o")"
  # Under a debugger (a minimal one: continues every stop, passing the signal on) the program
  # reads back what it wrote, the debugger sees the pager's faults as SIGBUS, and the summary
  # says that it ran traced and what the debugger saw.
  cat >"$tmp/tracer.py" <<'PY'
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
pid = os.fork()
if pid == 0:
    libc.ptrace(0, 0, None, None)  # PTRACE_TRACEME
    os.execvp(sys.argv[1], sys.argv[1:])
seen = {}
while True:
    _, st = os.waitpid(pid, 0)
    if os.WIFEXITED(st) or os.WIFSIGNALED(st):
        break
    sig = os.WSTOPSIG(st)
    seen[sig] = seen.get(sig, 0) + 1
    libc.ptrace(7, pid, None, ctypes.c_void_p(0 if sig == signal.SIGTRAP else sig))  # PTRACE_CONT
print("tracer saw SIGBUS %d times" % seen.get(signal.SIGBUS, 0), file=sys.stderr)
sys.exit(os.waitstatus_to_exitcode(st))
PY
  want=$(python3 -c "$scatter")
  "$uswap" run --limit 8M -- python3 "$tmp/tracer.py" python3 -c "$scatter" >"$tmp/o" 2>"$tmp/e" ||
    fail "under a tracer: $(tail -c 600 "$tmp/e")"
  [ "$(cat "$tmp/o")" = "$want" ] || fail "under a tracer printed $(cat "$tmp/o"), plain $want"
  n=$(sed -n 's/^tracer saw SIGBUS \([0-9]*\) times$/\1/p' "$tmp/e")
  [ "${n:-0}" -gt 0 ] || fail "the tracer saw no fault: $(tail -c 600 "$tmp/e")"
  grep -q "traced: python3 (pid [0-9]*) ran under python3 (pid [0-9]*), which saw the pager's SIGBUS" "$tmp/e" ||
    fail "the summary did not name the traced program: $(tail -c 600 "$tmp/e")"
  # A Go program is known by its sections (a dynamic one here, with a .go.buildinfo section
  # after 120 others, so that its name lies past the first 2 KiB of the names table), also
  # behind a script's #! line.
  {
    for i in $(seq 120); do
      echo "__attribute__((used, section(\".zz_a_long_section_name_to_pad_$i\"))) static int pad$i = $i;"
    done
    echo '__attribute__((used, section(".go.buildinfo"))) static char buildinfo[16] = "go";'
    echo 'int main(void) { return 0; }'
  } >"$tmp/fakego.c"
  cc -o "$tmp/fakego" "$tmp/fakego.c" || fail "cannot build a program with a Go section"
  printf '#!%s\n' "$tmp/fakego" >"$tmp/go.sh" && chmod +x "$tmp/go.sh"
  for p in "$tmp/fakego" "$tmp/go.sh"; do
    "$uswap" run --limit 8M -- "$p" >"$tmp/o" 2>&1
    [ $? -eq 126 ] && grep -q "is a Go program" "$tmp/o" || fail "$p was not refused as Go: $(cat "$tmp/o")"
  done
  # A Go program built with cgo is dynamic and loads the shim, which must stay out of its way
  # (its runtime blocks SIGBUS and SIGSYS with its own system calls): run directly or by a
  # routed shell, it runs unrouted as said, its 48 MiB heap never paged (the previous shim routed
  # its malloc and paged it). The fake exports the symbols cgo's runtime does.
  cat >"$tmp/fakecgo.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
__attribute__((used, section(".go.buildinfo"))) static char buildinfo[16] = "go";
void crosscall2(void) {}
void _cgo_topofstack(void) {}
int main(void) {
  size_t n = 48u << 20, sum = 0;
  unsigned char *p = malloc(n);
  for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)(i >> 12);
  for (size_t i = 0; i < n; i += 4096) sum += p[i];
  printf("cgo %zu\n", sum);
  return 0;
}
C
  cc -O2 -rdynamic -o "$tmp/fakecgo" "$tmp/fakecgo.c" || fail "cannot build a program like cgo's"
  want=$("$tmp/fakecgo")
  for how in direct shell; do
    if [ $how = direct ]; then
      "$uswap" run --limit 8M --allow-unrouted --json -- "$tmp/fakecgo" >"$tmp/o" 2>"$tmp/e"
    else
      "$uswap" run --limit 8M --json -- sh -c "\"$tmp/fakecgo\"" >"$tmp/o" 2>"$tmp/e"
    fi
    [ $? -eq 0 ] && [ "$(cat "$tmp/o")" = "$want" ] ||
      fail "($how) the cgo-like program printed $(cat "$tmp/o"), plain $want: $(tail -c 600 "$tmp/e")"
    outs=$(tail -n 1 "$tmp/e" | jq '.job.swap_outs')
    [ "$outs" = 0 ] || fail "($how) the cgo-like program was paged ($outs swap-outs): $(tail -c 600 "$tmp/e")"
  done
  [ "$(tail -n 1 "$tmp/e" | jq -r '.unrouted_execs[0].reason')" = \
    "a Go program (raw system calls and its own memory manager)" ] ||
    fail "the summary did not name the cgo-like program unrouted: $(tail -c 600 "$tmp/e")"
  ;;
programs)
  # The job follows a program started with an environment scrubbed of it (env -i, LD_PRELOAD
  # and USWAP_LIMIT unset): it is paged like the others (it ran unlimited, silently, before).
  printf '#include <stdio.h>\n#include <stdlib.h>\nint main(void) { size_t n = 48u << 20, s = 0; unsigned char *p = malloc(n); for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)(i >> 12); for (size_t i = 0; i < n; i += 4096) s += p[i]; printf("sum %%zu\\n", s); return 0; }\n' >"$tmp/alloc48.c"
  cc -O2 -o "$tmp/alloc48" "$tmp/alloc48.c" || fail "cannot build alloc48"
  want=$("$tmp/alloc48")
  for scrub in "-i" "-u LD_PRELOAD -u USWAP_LIMIT" "-i LD_PRELOAD=libm.so.6"; do
    # shellcheck disable=SC2086
    "$uswap" run --limit 8M --json -- env $scrub "$tmp/alloc48" >"$tmp/o" 2>"$tmp/e"
    [ $? -eq 0 ] && [ "$(cat "$tmp/o")" = "$want" ] ||
      fail "(env $scrub) printed $(cat "$tmp/o"), plain $want: $(tail -c 400 "$tmp/e")"
    [ "$(tail -n 1 "$tmp/e" | jq '[.processes[] | select(.program == "alloc48") | .swap_outs] | add // 0')" -gt 0 ] ||
      fail "(env $scrub) the program left out of the job was not paged: $(tail -c 600 "$tmp/e")"
  done
  # A MAP_FIXED reservation, munmap or mprotect over the pager's pages just below the arena
  # (clisp reserved up to 32 TiB, the arena's old place, so) took the seccomp trampoline away,
  # and the next trapped call killed the process (139). Refused now, EINVAL, named; the program
  # goes on and its memory is paged.
  cat >"$tmp/fixedbelow.c" <<'C'
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
int main(void) {
  const char *sc = getenv("USWAP_SECCOMP");
  unsigned long long lo = 0, hi = 0, tr = 0;
  if (!sc || sscanf(sc, "%llx:%llx:%llx", &lo, &hi, &tr) != 3) { puts("no arena"); return 0; }
  char *below = (char *)(lo - (1u << 20));
  void *p = mmap(below, 1u << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
  int ok = p == MAP_FAILED && errno == EINVAL;
  ok &= munmap(below, 1u << 20) != 0 && errno == EINVAL;
  ok &= mprotect((char *)lo - 4096, 4096, PROT_READ) != 0 && errno == EINVAL;
  /* Below those pages the program's own, as ever. */
  ok &= mmap(below, 512u << 10, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) == below;
  size_t n = 32u << 20, s = 0;
  unsigned char *m = malloc(n);
  for (size_t i = 0; i < n; ++i) m[i] = (unsigned char)(i >> 12);
  for (size_t i = 0; i < n; i += 4096) s += m[i];
  printf("%s %zu\n", ok ? "refused" : "NOT REFUSED", s);
  return 0;
}
C
  cc -O2 -o "$tmp/fixedbelow" "$tmp/fixedbelow.c" || fail "cannot build fixedbelow"
  "$uswap" run --limit 8M --json -- "$tmp/fixedbelow" >"$tmp/o" 2>"$tmp/e"
  rc=$?
  [ $rc -eq 0 ] && grep -q "^refused " "$tmp/o" && grep -q "over the pager's pages below its arena" "$tmp/e" ||
    fail "MAP_FIXED over the pages below the arena: status $rc, printed $(cat "$tmp/o"): $(tail -c 600 "$tmp/e")"
  # A program linked with jemalloc (bind9's named and dig): a block a library's constructor
  # allocated before the shim's (glibc's) and realloc'd in main was sized by jemalloc's
  # malloc_usable_size, which crashed (139).
  printf '#include <stdlib.h>\n#include <string.h>\nchar *early_buf;\n__attribute__((constructor)) static void early_init(void) { early_buf = malloc(100); strcpy(early_buf, "from a constructor"); }\n' >"$tmp/early.c"
  printf '#include <stdio.h>\n#include <stdlib.h>\nextern char *early_buf;\nint main(void) { char *p = realloc(early_buf, 4096); printf("realloc: %%s\\n", p); free(p); return 0; }\n' >"$tmp/je.c"
  if cc -shared -fPIC -o "$tmp/libearly.so" "$tmp/early.c" &&
    cc -o "$tmp/je" "$tmp/je.c" -L"$tmp" -learly -Wl,-rpath,"$tmp" -ljemalloc; then
    "$uswap" run --limit 8M -- "$tmp/je" >"$tmp/o" 2>"$tmp/e"
    rc=$?
    [ $rc -eq 0 ] && [ "$(cat "$tmp/o")" = "realloc: from a constructor" ] ||
      fail "a program linked with jemalloc: status $rc, printed $(cat "$tmp/o"): $(tail -c 400 "$tmp/e")"
  else
    fail "cannot build a program linked with jemalloc (libjemalloc-dev, scripts/deps/uffd.list)"
  fi
  # jemalloc's own interface mixed with malloc's, blocks paged out in between: the shim took
  # mallocx's blocks (jemalloc's, mapped before the shim's constructor) for glibc's and crashed
  # (139, "free(): invalid pointer").
  cc -O2 -o "$tmp/jemix" "$(dirname "${BASH_SOURCE[0]}")/jemalloc_mix_test_program.c" -ljemalloc ||
    fail "cannot build the jemalloc mixing program"
  want=$("$tmp/jemix")
  "$uswap" run --limit 8M --json -- "$tmp/jemix" >"$tmp/o" 2>"$tmp/e"
  rc=$?
  [ $rc -eq 0 ] && [ "$(cat "$tmp/o")" = "$want" ] ||
    fail "jemalloc's interface mixed with malloc's: status $rc, printed $(cat "$tmp/o"), plain $want: $(tail -c 400 "$tmp/e")"
  [ "$(tail -n 1 "$tmp/e" | jq '[.processes[].swap_outs] | add')" -gt 10000 ] ||
    fail "the jemalloc mixing program's blocks were not paged: $(tail -c 400 "$tmp/e")"
  # Children killed before they adopted the share their parent reserved (strace's probes): the
  # supervisor reaps each as soon as it is gone, since the parent names it. Before, such shares
  # stayed charged for 2 s and uswap run said "the job goes on: 198 of its processes still
  # run", leaving a watcher behind. The job must show the race: fewer members than forks.
  cc -O2 -o "$tmp/killkids" "$(dirname "${BASH_SOURCE[0]}")/killed_children_test_program.c" ||
    fail "cannot build the killed children program"
  "$uswap" run --limit 8M --json -- "$tmp/killkids" >"$tmp/o" 2>"$tmp/e"
  rc=$?
  [ $rc -eq 0 ] && [ "$(cat "$tmp/o")" = "killed 200" ] && ! grep -q "the job goes on" "$tmp/e" ||
    fail "children killed at once: status $rc, printed $(cat "$tmp/o"): $(tail -c 600 "$tmp/e")"
  joined=$(tail -n 1 "$tmp/e" | jq '.job.processes')
  [ "$joined" -lt 150 ] ||
    fail "children killed at once: $joined of 201 processes joined, the race (a kill before adoption) was not shown"
  # Threads that keep 6 MiB each on their stacks (glibc's mappings: unrouted, not limited) and
  # end: the summary names the memory. It was sampled only at the shim's calls and missed the
  # stacks (0.7 MiB reported for 96 MiB, by a helper's program).
  cat >"$tmp/stacks.c" <<'C'
#include <pthread.h>
#include <stdio.h>
#include <string.h>
enum { threads = 8, bytes = 6 << 20 };
static unsigned long sums[threads];
static pthread_barrier_t all_full;
static void *run(void *arg) {
  long id = (long)arg;
  volatile unsigned char buf[bytes];
  for (size_t i = 0; i < bytes; i += 512) buf[i] = (unsigned char)(i / 512 + id);
  pthread_barrier_wait(&all_full);  /* every stack full at once, as a pool's */
  for (size_t i = 0; i < bytes; i += 512) sums[id] += buf[i];
  return NULL;
}
int main(void) {
  pthread_t t[threads];
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setstacksize(&at, bytes + (1 << 20));
  pthread_barrier_init(&all_full, NULL, threads);
  for (long i = 0; i < threads; ++i) pthread_create(&t[i], &at, run, (void *)i);
  unsigned long s = 0;
  for (int i = 0; i < threads; ++i) pthread_join(t[i], NULL), s += sums[i];
  printf("sum %lu\n", s);
  return 0;
}
C
  cc -O2 -pthread -o "$tmp/stacks" "$tmp/stacks.c" || fail "cannot build the thread stacks program"
  "$uswap" run --limit 8M -- "$tmp/stacks" >"$tmp/o" 2>"$tmp/e"
  seen=$(sed -n 's/.*not limited: stacks (pid [0-9]*) had \([0-9]*\)\.[0-9] MiB .*(thread stacks.*/\1/p' "$tmp/e")
  [ "$(cat "$tmp/o")" = "$("$tmp/stacks")" ] && [ "${seen:-0}" -gt 40 ] ||
    fail "threads with 48 MiB on their stacks: $(cat "$tmp/o"), named ${seen:-no} MiB: $(tail -c 500 "$tmp/e")"
  # A clone that shares memory and has a thread pointer of its own (Chromium's chroot helper),
  # whose child calls _exit: the shim's _exit is not pager code's to run there (SIGSEGV before).
  cc -O2 -o "$tmp/clonevm" "$(dirname "${BASH_SOURCE[0]}")/clone_vm_test_program.c" ||
    fail "cannot build the CLONE_VM program"
  want=$("$tmp/clonevm")
  "$uswap" run --limit 8M -- "$tmp/clonevm" >"$tmp/o" 2>"$tmp/e"
  rc=$?
  [ $rc -eq 0 ] && [ "$(cat "$tmp/o")" = "$want" ] ||
    fail "CLONE_VM children with their own TLS: status $rc, printed $(cat "$tmp/o"), plain $want"
  # A process that chroots where there is no /proc, then forks (dovecot's imap-login and
  # anvil chroot): both stay in the job and both leave their statistics. Before, the child left
  # the job (its /proc/self/ns/pid unreadable) and neither wrote a line (the statistics file
  # opened by its path).
  if [ "$(id -u)" = 0 ]; then
    mkdir -p "$tmp/empty"
    cc -O2 -o "$tmp/chrooted" "$(dirname "${BASH_SOURCE[0]}")/chroot_test_program.c" ||
      fail "cannot build the chroot program"
    want=$("$tmp/chrooted" "$tmp/empty")
    "$uswap" run --limit 8M --json -- "$tmp/chrooted" "$tmp/empty" >"$tmp/o" 2>"$tmp/e"
    rc=$?
    [ $rc -eq 0 ] && [ "$(cat "$tmp/o")" = "$want" ] ||
      fail "a chrooted program: status $rc, printed $(cat "$tmp/o"), plain $want: $(tail -c 400 "$tmp/e")"
    [ "$(tail -n 1 "$tmp/e" | jq '.job.processes')" = 2 ] &&
      [ "$(tail -n 1 "$tmp/e" | jq '[.processes[] | select(.event == "exit" and .program == "chrooted" and .swap_outs > 0)] | length')" = 2 ] &&
      [ "$(tail -n 1 "$tmp/e" | jq '.job.peak_resident_bytes')" -le $((8 << 20)) ] ||
      fail "a chrooted program and its child: not both in the job with their statistics: $(tail -c 800 "$tmp/e")"
  fi
  # Chromium's probe for seccomp-bpf: a filter install with a null program must fail with
  # EFAULT, through prctl and through syscall(SYS_seccomp). The shim's sandbox wrappers turned
  # every failure into EPERM ("Lacking support for seccomp-bpf sandbox").
  cat >"$tmp/probe.c" <<'C'
#define _GNU_SOURCE
#include <errno.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>
int main(void) {
  errno = 0;
  const int p = prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, NULL);
  const int pe = errno;
  errno = 0;
  const long s = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, NULL);
  printf("prctl %d %s; seccomp %ld %s\n", p, strerror(pe), s, strerror(errno));
  return 0;
}
C
  cc -O2 -o "$tmp/probe" "$tmp/probe.c" || fail "cannot build the seccomp probe"
  want=$("$tmp/probe")
  "$uswap" run --limit 8M -- "$tmp/probe" >"$tmp/o" 2>"$tmp/e"
  [ "$(cat "$tmp/o")" = "$want" ] && [ "$want" = "prctl -1 Bad address; seccomp -1 Bad address" ] ||
    fail "the seccomp-bpf probe: printed $(cat "$tmp/o"), plain $want"
  # A program that sandboxes itself as OpenSSH's pre-authentication child does: a filter that
  # kills the thread on any ioctl or rt_sigreturn, installed with prctl or seccomp(2), after its
  # heap was paged out. The pager's own calls (its userfaultfd ioctls, its handlers' returns)
  # pass; the program's policy still holds for the program (getppid refused); the job sets
  # RLIMIT_FSIZE to 0 first, as OpenSSH does, and nothing the shim writes may raise SIGXFSZ.
  # Killed by SIGSYS (159) before. The filter also kills on process_madvise, process_vm_* and
  # mmap with MAP_FIXED_NOREPLACE, as Chromium's renderer policy does: once the program
  # sandboxed itself the pager evicts with madvise, the shim's readv (its iovec array on the
  # stack, decoded) copies directly, and a hint near the program's code goes to the kernel as
  # the program gave it (Chromium's renderers died of each before).
  cat >"$tmp/sandboxed.c" <<'C'
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
int main(int argc, char **argv) {
  size_t n = 32u << 20, s = 0;
  unsigned char *p = malloc(n);
  for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)(i >> 12);
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_THREAD),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_rt_sigreturn, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_THREAD),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_madvise, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_THREAD),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_THREAD),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_THREAD),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[3])),
      BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, MAP_FIXED_NOREPLACE, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_THREAD),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  int fds[2];
  if (pipe(fds) != 0 || write(fds[1], "through a sandbox", 17) != 17) return 4;
  struct iovec *iov = malloc(2 * sizeof *iov);
  struct sock_fprog prog = {sizeof f / sizeof f[0], f};
  struct rlimit zero = {0, 0};
  fflush(stdout);
  if (setrlimit(RLIMIT_FSIZE, &zero) != 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return 2;
  int r = argc > 1 ? (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)
                   : prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
  if (r != 0) return 3;
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < n; i += 4096) s += p[i];
  iov[0] = (struct iovec){p + 4096 * 3 - 7, 7};
  iov[1] = (struct iovec){p + (n / 2), 10};
  /* A JIT's code area: a hint within a rel32 jump of the program's text, which the shim gives
     the kernel to place (V8's code range in Chromium's renderers). */
  void *hint = (void *)(((uintptr_t)&main + (64u << 20)) & ~(uintptr_t)0xfffff);
  void *code = mmap(hint, 1u << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (code == MAP_FAILED) return 6;
  struct iovec on_stack[2] = {iov[0], iov[1]};  /* the shim's readv decodes it: read from here */
  if (readv(fds[0], on_stack, 2) != 17 || memcmp(p + 4096 * 3 - 7, "through", 7) != 0 ||
      memcmp(p + n / 2, " a sandbox", 10) != 0)
    return 5;
  errno = 0;
  const long pp = syscall(SYS_getppid);
  printf("sum %zu, getppid %s\n", s, pp == -1 && errno == EPERM ? "refused" : "allowed");
  return 0;
}
C
  cc -O2 -o "$tmp/sandboxed" "$tmp/sandboxed.c" || fail "cannot build the sandboxed program"
  want=$("$tmp/sandboxed" | cat)
  for how in prctl seccomp; do
    arg=; [ $how = seccomp ] && arg=x
    # Through a pipe, both streams: past RLIMIT_FSIZE 0 a file takes no more bytes.
    # shellcheck disable=SC2086
    "$uswap" run --limit 8M -- "$tmp/sandboxed" $arg 2>&1 | cat >"$tmp/o"
    rc=${PIPESTATUS[0]}
    [ $rc -eq 0 ] && [ "$(grep "^sum " "$tmp/o")" = "$want" ] && grep -q "getppid refused" "$tmp/o" &&
      grep -q "installs a seccomp sandbox: it lets the pager's own calls through" "$tmp/o" ||
      fail "($how) a sandboxed program: status $rc, plain $want: $(tail -c 600 "$tmp/o")"
    grep -q "[1-9][0-9]* swap-outs" "$tmp/o" || fail "($how) nothing was paged: $(tail -c 400 "$tmp/o")"
  done
  # A sandbox that traps calls to a handler of the program's (Firefox's content processes): the
  # pager's own calls it refuses (a job's open of /proc, kill, the samples) fail with EPERM and
  # never reach the program's handler, which read paged-out memory inside the pager with its
  # locks held: the process hung or crashed (137 or 139) every time before. The shim says which
  # call it lost, so the path was taken.
  cc -O2 -pthread -o "$tmp/trapsb" "$(dirname "${BASH_SOURCE[0]}")/trapping_sandbox_test_program.c" ||
    fail "cannot build the trapping sandbox program"
  want=$("$tmp/trapsb" 2>/dev/null)
  timeout -s KILL 300 "$uswap" run --limit 8M -- "$tmp/trapsb" >"$tmp/o" 2>"$tmp/e"
  st=$?
  [ $st = 0 ] && [ "$(cat "$tmp/o")" = "$want" ] ||
    fail "a sandbox that traps to its own handler: status $st, printed $(cat "$tmp/o"), plain $want: $(tail -c 600 "$tmp/e")"
  grep -q "the handler saw 256 openat (256 the program's own), 0 other" "$tmp/e" ||
    fail "the program's sandbox handler saw the pager's calls: $(grep trapping_sandbox "$tmp/e")"
  grep -q "refused the pager's .*the pager goes on without it" "$tmp/e" ||
    fail "no call of the pager's met the program's sandbox: $(tail -c 600 "$tmp/e")"
  # An executable with its own operator new and delete, exported, but not the sized delete, the
  # array forms or the nothrow new (Firefox's over mozjemalloc): the shim's, which libstdc++'s
  # would have been, must call the program's. Before, its blocks reached mimalloc's free and the
  # program died (136, 2 of 2).
  c++ -O2 -rdynamic -o "$tmp/ownops" "$(dirname "${BASH_SOURCE[0]}")/own_operators_test_program.cc" ||
    fail "cannot build the own operators program"
  want=$("$tmp/ownops")
  "$uswap" run --limit 32M --json -- "$tmp/ownops" >"$tmp/o" 2>"$tmp/e"
  st=$?
  [ $st = 0 ] && [ "$(cat "$tmp/o")" = "$want" ] ||
    fail "a program with its own operator new: status $st, printed $(cat "$tmp/o"), plain $want: $(tail -c 600 "$tmp/e")"
  [ "$(tail -n 1 "$tmp/e" | jq '[.processes[].swap_outs] | add')" -gt 5000 ] ||
    fail "the own operators program's allocator was not paged: $(tail -c 600 "$tmp/e")"
  # A Free Pascal program's runtime installs its SIGBUS handler with its own rt_sigaction(2),
  # past the shim's sigaction: the pager's next fault went to it ("Runtime error 216", exit 216,
  # with the previous shim). Named unrouted, and the shim stays out of it, directly or from a
  # routed shell. The fake has FPC's section and does the same.
  cat >"$tmp/fakefpc.c" <<'C'
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
__attribute__((used, section(".fpcdata"))) static char fpcdata[16] = "FPC 3.2.2";
static void rtl_sigbus(int sig) { (void)sig; (void)!write(1, "Runtime error 216\n", 18); _exit(216); }
extern void restore_rt(void) __asm__("restore_rt");
__asm__("restore_rt: mov $15, %eax\n syscall\n");
int main(void) {
  struct { void *h; unsigned long flags; void (*restorer)(void); unsigned long mask; } k = {
      (void *)rtl_sigbus, 0x04000000ul /* SA_RESTORER */, restore_rt, 0};
  if (syscall(SYS_rt_sigaction, SIGBUS, &k, NULL, 8) != 0) return 1;
  size_t n = 48u << 20, sum = 0;
  unsigned char *p = malloc(n);
  for (size_t i = 0; i < n; ++i) p[i] = (unsigned char)(i >> 12);
  for (size_t i = 0; i < n; i += 4096) sum += p[i];
  printf("fpc %zu\n", sum);
  return 0;
}
C
  cc -O2 -o "$tmp/fakefpc" "$tmp/fakefpc.c" || fail "cannot build a program like Free Pascal's"
  want=$("$tmp/fakefpc")
  "$uswap" run --limit 8M -- "$tmp/fakefpc" >"$tmp/o" 2>&1
  [ $? -eq 126 ] && grep -q "a Free Pascal program" "$tmp/o" ||
    fail "the FPC-like program was not refused: $(cat "$tmp/o")"
  for how in direct shell; do
    if [ $how = direct ]; then
      "$uswap" run --limit 8M --allow-unrouted --json -- "$tmp/fakefpc" >"$tmp/o" 2>"$tmp/e"
    else
      "$uswap" run --limit 8M --json -- sh -c "\"$tmp/fakefpc\"" >"$tmp/o" 2>"$tmp/e"
    fi
    rc=$?
    [ $rc -eq 0 ] && [ "$(cat "$tmp/o")" = "$want" ] ||
      fail "($how) the FPC-like program: status $rc, printed $(cat "$tmp/o"), plain $want: $(tail -c 600 "$tmp/e")"
  done
  [ "$(tail -n 1 "$tmp/e" | jq -r '.unrouted_execs[0].reason')" = \
    "a Free Pascal program (raw system calls: its own heap and signal handlers)" ] ||
    fail "the summary did not name the FPC-like program unrouted: $(tail -c 600 "$tmp/e")"
  # A program built with AddressSanitizer: its runtime aborts unless it is the first library
  # loaded, and maps its heap by raw system calls. Refused, run unrouted when asked, and run
  # unrouted (the shim left out of its LD_PRELOAD) when a routed program execs it.
  printf '#include <stdio.h>\n#include <stdlib.h>\nint main(void) { char *p = malloc(64); p[63] = 7; printf("asan ok %%d\\n", p[63]); free(p); return 0; }\n' >"$tmp/asan.c"
  cc -fsanitize=address -o "$tmp/asan" "$tmp/asan.c" || fail "cannot build an AddressSanitizer program"
  sed 's/asan ok/plain ok/' "$tmp/asan.c" >"$tmp/plain.c" && cc -o "$tmp/asan.plain" "$tmp/plain.c" ||
    fail "cannot build a plain program"
  "$uswap" run --limit 8M -- "$tmp/asan" >"$tmp/o" 2>&1
  [ $? -eq 126 ] && grep -q "AddressSanitizer" "$tmp/o" || fail "an ASan program was not refused: $(cat "$tmp/o")"
  "$uswap" run --limit 8M --allow-unrouted -- "$tmp/asan" >"$tmp/o" 2>"$tmp/e" &&
    grep -q "^asan ok 7$" "$tmp/o" || fail "--allow-unrouted did not run the ASan program: $(cat "$tmp/o" "$tmp/e")"
  "$uswap" run --limit 8M -- sh -c "\"$tmp/asan\"" >"$tmp/o" 2>"$tmp/e" &&
    grep -q "^asan ok 7$" "$tmp/o" && grep -q "unrouted: $tmp/asan (pid [0-9]*) is built with AddressSanitizer" "$tmp/e" ||
    fail "an ASan program a routed shell runs did not run unrouted: $(cat "$tmp/o" "$tmp/e")"
  # Valgrind: its launcher is routed, its tool is static (unrouted, named), and the client it
  # runs on its own CPU, with the shim still in LD_PRELOAD, stays unrouted instead of hanging.
  timeout 120 "$uswap" run --limit 8M -- valgrind -q "$tmp/asan.plain" >"$tmp/o" 2>"$tmp/e" ||
    fail "a program under valgrind failed: $(tail -c 600 "$tmp/e")"
  grep -q "^plain ok 7$" "$tmp/o" && grep -q "unrouted: $tmp/asan.plain (pid [0-9]*) is run on valgrind" "$tmp/e" ||
    fail "a program under valgrind was not run unrouted: $(cat "$tmp/o" "$tmp/e")"
  # Reservations at an mmap hint: a program that takes any address (V8, HotSpot's heaps) stays
  # routed and pages; one that unmaps every placement but its hint (ZGC) gets its hint from the
  # kernel after 256 rejections, and is named.
  cc -O2 -o "$tmp/hinted" "$(dirname "${BASH_SOURCE[0]}")/hinted_reservation_test_program.c" ||
    fail "cannot build the hinted reservation program"
  want=$("$tmp/hinted" any)
  "$uswap" run --limit 8M --json -- "$tmp/hinted" any >"$tmp/o" 2>"$tmp/e" ||
    fail "hinted reservation, any address: $(tail -c 600 "$tmp/e")"
  [ "$(cat "$tmp/o")" = "$want" ] || fail "hinted reservation printed $(cat "$tmp/o"), plain $want"
  [ "$(tail -n 1 "$tmp/e" | jq '[.processes[].swap_outs] | add')" -gt 0 ] ||
    fail "a hinted reservation was not paged: $(tail -c 600 "$tmp/e")"
  [ "$(tail -n 1 "$tmp/e" | jq '.hints_honored | length')" = 0 ] ||
    fail "a program that takes any address had its hints honored: $(tail -c 600 "$tmp/e")"
  # Memory mapped and changed through the C library's syscall() (SBCL's heap) is routed and
  # pages; the previous shim left it to the kernel, unlimited.
  cc -O2 -o "$tmp/rawsys" "$(dirname "${BASH_SOURCE[0]}")/raw_syscall_test_program.c" ||
    fail "cannot build the raw syscall program"
  want=$("$tmp/rawsys")
  "$uswap" run --limit 8M --json -- "$tmp/rawsys" >"$tmp/o" 2>"$tmp/e" ||
    fail "memory through syscall(): $(tail -c 600 "$tmp/e")"
  [ "$(cat "$tmp/o")" = "$want" ] || fail "memory through syscall() printed $(cat "$tmp/o"), plain $want"
  [ "$(tail -n 1 "$tmp/e" | jq '[.processes[].swap_outs] | add')" -gt 10000 ] ||
    fail "memory mapped through syscall() was not paged: $(tail -c 600 "$tmp/e")"
  # A library between the shim and the C library that hooks mmap, munmap and mremap and makes
  # them with syscall(), as tcmalloc does (SWI-Prolog): the shim passes the file mappings on to
  # it and must take the hook's syscall() to the kernel. The previous shim recursed until the
  # stack overflowed (SIGSEGV).
  here=$(dirname "${BASH_SOURCE[0]}")
  cc -O2 -shared -fPIC -o "$tmp/libhooked.so" "$here/hooked_mmap_test_lib.c" &&
    cc -O2 -o "$tmp/hooked" "$here/hooked_mmap_test_program.c" -L"$tmp" -lhooked -Wl,-rpath,"$tmp" ||
    fail "cannot build the hooked mmap program"
  want=$("$tmp/hooked" 2>/dev/null)
  "$uswap" run --limit 8M --json -- "$tmp/hooked" >"$tmp/o" 2>"$tmp/e" ||
    fail "memory calls hooked by a library: $(tail -c 600 "$tmp/e")"
  [ "$(cat "$tmp/o")" = "$want" ] || fail "the hooked mmap program printed $(cat "$tmp/o"), plain $want"
  hooked=$(sed -n 's/^hooked_mmap: \([0-9]*\) calls reached the hooks/\1/p' "$tmp/e")
  [ "${hooked:-0}" -gt 0 ] || fail "no call reached the library's hooks: $(head -c 300 "$tmp/e")"
  [ "$(tail -n 1 "$tmp/e" | jq '[.processes[].swap_outs] | add')" -gt 5000 ] ||
    fail "the hooked mmap program's heap was not paged: $(tail -c 600 "$tmp/e")"
  # A library constructor that maps at a hint in the arena's range and passes that memory to the
  # kernel before the shim's constructor (Chromium's PartitionAlloc: a random hint below 64 TiB,
  # then prctl(PR_SET_VMA_ANON_NAME)). The shim drops such a hint. Before, the kernel kept it: a
  # first image ran without a pager (the arena's range was taken), and one exec'd under an
  # ancestor's seccomp filter died of SIGSYS at that prctl (a Chromium zygote, every other run).
  cc -O2 -shared -fPIC -o "$tmp/libearly.so" "$here/early_hint_test_lib.c" &&
    cc -O2 -o "$tmp/early" "$here/early_hint_test_program.c" -L"$tmp" -learly -Wl,-rpath,"$tmp" ||
    fail "cannot build the early hint program"
  want=$("$tmp/early" 2>/dev/null)
  for how in first exec; do
    cmd=("$tmp/early")
    [ $how = exec ] && cmd=(sh -c "exec '$tmp/early'")
    "$uswap" run --limit 8M --access user-mode-only -- "${cmd[@]}" >"$tmp/o" 2>"$tmp/e"
    st=$?
    [ $st = 0 ] || fail "a hint mapped before the shim ($how image): status $st: $(tail -c 600 "$tmp/e")"
    [ "$(cat "$tmp/o")" = "$want" ] ||
      fail "the early hint program ($how image) printed $(cat "$tmp/o"), plain $want"
    grep -q "^early_hint: mapped outside the hinted range" "$tmp/e" ||
      fail "a hint in the arena's range was kept before the shim ($how image): $(head -c 600 "$tmp/e")"
    ! grep -q "without a pager" "$tmp/e" ||
      fail "the early hint program ($how image) ran without a pager: $(head -c 600 "$tmp/e")"
  done
  # Threads on stacks the program mapped (SBCL's): glibc's descriptor at the top of a stack in
  # the arena, signals delivered while the pages below the stack pointer are evicted (the
  # program counts how often that was the case: it must have happened), joins that return, a
  # second stack mapped where the first was. In both fault modes and with a kswapd thread.
  signals_found() { sed -n 's/^given_stack: \([0-9]*\) signals found.*/\1/p' "$tmp/e"; }
  in_three_modes given_stack_test_program "threads on program-given stacks" signals_found \
    "no signal found the page below a thread's stack pointer evicted"
  # A stop-the-world collector's handshake (SBCL, Boehm GC): a mutator's handler waits while the
  # collector walks the heap; signals that land inside its mmap or munmap (the program counts
  # them: it must have happened) wait until the pager's locks are released, or the walk's faults
  # would wait for them forever (the previous shim hung every time).
  stops_found() { sed -n 's/^stop_the_world: \([0-9]*\) stops found.*/\1/p' "$tmp/e"; }
  blocked_found() { sed -n 's/^blocked_signal: \([0-9]*\) signals found.*/\1/p' "$tmp/e"; }
  in_three_modes stop_the_world_test_program "a stop-the-world handshake" stops_found \
    "no stop landed inside a mapping call"
  # A thread blocked in read(2) into its heap, signalled as a stop-the-world collector signals
  # (sigqueue, with and without SA_RESTART): its handlers run on its own stack and find its own
  # stack pointer in their context, the restarted read returns the data written later, the other
  # fails with EINTR, each handler gets the value sent. With seccomp the read traps and waits in
  # the pager, on the pager's stack, where the program's signals must not run (the JSON counts
  # the ones kept for the program's context: it must have happened there).
  in_three_modes blocked_signal_test_program "signals to a thread blocked in read" \
    blocked_found "no signal found the reader blocked in read"
  deferred=$(tail -n 1 "$tmp/e" |
    jq '[.processes[] | select(.kernel_access == "seccomp") | .program_signals_deferred] | add')
  [ "${deferred:-0}" != null ] && [ "${deferred:-0}" -gt 0 ] ||
    fail "no program signal was kept for the program's context in the seccomp run (${deferred})"
  # The same for a thread on a stack the program mapped (SBCL's) that maps and unmaps memory:
  # the shim makes those calls on its pager stack with the signals held, and a signal that came
  # meanwhile was delivered as the mask came back, still there (every one of them, before the
  # shim kept them: SBCL's collector found no stack pointer for the thread). Each handler must
  # find the thread's own stack pointer; the JSON counts the signals kept, in every mode.
  landed_in_call() { sed -n 's/^pager_stack_signal: \([0-9]*\) signals landed inside.*/\1/p' "$tmp/e"; }
  in_three_modes pager_stack_signal_test_program "signals to a thread mapping from its own stack" \
    landed_in_call "no signal landed inside a mapping call"
  kept=$(tail -n 1 "$tmp/e" | jq '[.processes[].program_signals_deferred] | add')
  [ "${kept:-0}" != null ] && [ "${kept:-0}" -gt 0 ] ||
    fail "no signal that landed on the pager stack was kept for the program's context (${kept})"
  # A thread that starts threads with clone(2) itself, its tid words on the heap: with seccomp
  # the clone traps and the pager makes it. It made it with the program's mask, and a signal
  # that came meanwhile ran the program's handler on the shim's signal stack (off the thread's
  # stack); each child must still start with its parent's mask. Signals must have landed inside
  # the trapped clone (the program counts them); without seccomp nothing traps.
  cc -O2 -pthread -o "$tmp/clone_signal" "$(dirname "${BASH_SOURCE[0]}")/clone_signal_test_program.c" ||
    fail "cannot build the clone signal program"
  want=$("$tmp/clone_signal" 2>/dev/null)
  for args in "--fault-mode sigbus" "--background-reclaim" "--fault-mode handler-thread"; do
    # shellcheck disable=SC2086
    timeout -k 5 180 "$uswap" run --limit 8M $args --json -- "$tmp/clone_signal" >"$tmp/o" 2>"$tmp/e" ||
      fail "($args) signals to a thread in clone: status $?: $(tail -c 600 "$tmp/e")"
    [ "$(cat "$tmp/o")" = "$want" ] || fail "($args) clone_signal printed $(cat "$tmp/o"), plain $want"
    n=$(sed -n 's/^clone_signal: \([0-9]*\) signals landed inside clone.*/\1/p' "$tmp/e")
    if [ "$(tail -n 1 "$tmp/e" | jq -r '.processes[0].kernel_access')" = seccomp ]; then
      [ "${n:-0}" -gt 0 ] || fail "($args) no signal landed inside a trapped clone: $(head -c 300 "$tmp/e")"
    fi
  done
  # Boehm GC's collector, the same handshake by a real library: the list the blocked reader
  # holds must survive every collection (the previous shim ran the handler on the pager's stack,
  # the collector scanned from there and freed the list: a segmentation fault).
  if [ -e /usr/include/gc/gc.h ]; then
    cc -O2 -pthread -o "$tmp/boehm" "$(dirname "${BASH_SOURCE[0]}")/boehm_gc_test_program.c" -lgc ||
      fail "cannot build the Boehm GC program"
    want=$("$tmp/boehm")
    for args in "--limit 1G" "--limit 8M"; do
      # shellcheck disable=SC2086
      timeout -k 5 180 "$uswap" run $args --json -- "$tmp/boehm" >"$tmp/o" 2>"$tmp/e" ||
        fail "($args) Boehm GC with a thread blocked in read: status $?: $(tail -c 600 "$tmp/e")"
      [ "$(cat "$tmp/o")" = "$want" ] || fail "($args) the Boehm GC program printed $(cat "$tmp/o"), plain $want"
    done
  else
    fail "libgc-dev is missing (scripts/install-deps installs it)"
  fi
  # A coroutine on a stack in the arena (makecontext on memory it mapped) maps, drops, protects,
  # grows and unmaps buffers while its heap streams past the limit (the program counts the times
  # its stack was paged: it must have happened), and forks children that check the heap. The
  # pager runs those calls on the thread's pager stack: none of its own system calls naming its
  # locals (a UFFDIO argument, a signal mask) traps, where the previous shim trapped about 12 per
  # round and pinned inside the pager; and the fork's reclaim, which evicted the stack page it
  # ran on and then waited for its own LRU lock, no longer hangs.
  stack_evicted() { sed -n 's/^arena_stack: .* evicted \([0-9]*\) times/\1/p' "$tmp/e"; }
  in_three_modes arena_stack_test_program "a coroutine on a stack in the arena" stack_evicted \
    "the coroutine's stack was never found paged out"
  traps=$(tail -n 1 "$tmp/e" |
    jq '[.processes[] | select(.kernel_access == "seccomp") | .trapped_syscalls] | add')
  [ "$traps" = 0 ] ||
    fail "calls into the pager from a stack in the arena trapped ${traps} times (null: no seccomp run)"
  # A daemon's start closes every descriptor from 3 up (close_range, closefrom, a loop over
  # /proc/self/fd, syscall(SYS_close_range)) and forks a child that uses what it opened next,
  # with its heap paged out meanwhile: the pager's userfaultfd must survive (the previous shim
  # lost it, and 6192 pages of 8192 read back as zeros), and the child must find its own
  # descriptors (varnishd's failed to listen). The program counts the descriptors it did not
  # open: the pager's, the proof that there was something to keep.
  not_opened() { sed -n 's/^close_all: \([0-9]*\) descriptors open .*/\1/p' "$tmp/e"; }
  in_three_modes close_all_test_program "a program that closes every descriptor" not_opened \
    "the program found no descriptor of the pager's"
  # The same with an NBD backing device taking what a 1 MiB pool cannot hold. libnbd keeps the
  # number its socket() returned, so the closes took the connection and the program's own
  # socket got its number (the child read its heap back wrong, exit 1): the shim moves libnbd's
  # sockets out of the way as they are made and keeps them open across the program's closes.
  # The heap does not compress, so most of it is read back from the export however far the
  # pool's writeback got when the program reads it.
  if start_nbdkit $((256 << 20)); then
    want=$("$tmp/close_all_test_program" 2>/dev/null)
    timeout -k 5 180 "$uswap" run --limit 8M --pool-limit 1M --backing "$nbd_uri" --json -- \
      "$tmp/close_all_test_program" >"$tmp/o" 2>"$tmp/e" ||
      fail "(NBD backing) a program that closes every descriptor: status $?: $(tail -c 600 "$tmp/e")"
    [ "$(cat "$tmp/o")" = "$want" ] || fail "(NBD backing) close_all printed $(cat "$tmp/o"), plain $want"
    [ "$(tail -n 1 "$tmp/e" | jq .job.bd_reads)" -gt 0 ] ||
      fail "(NBD backing) close_all read nothing back from the export: $(tail -n 1 "$tmp/e" | jq -c .job)"
  fi
  # Copies between two members with process_vm_readv/writev (MPI's single-copy transfers)
  # while the memory copied is paged out: the kernel's copy cannot fault in another pager's
  # page (before: EFAULT at the first page, and Open MPI's vader fell back with "Read -1"), so
  # the copying member asks the other to make the range resident. Both copy at once, into
  # memory outside the arena and into their own paged heap, reading and writing. Where the
  # filter pins system calls (not kernel-faults mode) the job must have asked.
  cc -O2 -o "$tmp/process_vm" "$(dirname "${BASH_SOURCE[0]}")/process_vm_test_program.c" ||
    fail "cannot build process_vm_test_program"
  want=$("$tmp/process_vm") || fail "the process_vm program alone failed: $want"
  asked_of_run() { tail -n 1 "$tmp/e" | jq '[.processes[] | select(.kernel_access == "seccomp") | .member_faults_asked] | add // -1'; }
  for args in "--fault-mode sigbus" "--fault-mode handler-thread" "--background-reclaim"; do
    # shellcheck disable=SC2086
    timeout -k 5 180 "$uswap" run --limit 8M $args --json -- "$tmp/process_vm" >"$tmp/o" 2>"$tmp/e" ||
      fail "($args) copies between members: status $?: $(tail -c 600 "$tmp/e")"
    [ "$(cat "$tmp/o")" = "$want" ] || fail "($args) process_vm printed $(cat "$tmp/o"), plain $want"
    n=$(asked_of_run)
    [ "$n" -ne 0 ] || fail "($args) no member asked another for its pages: $(tail -n 1 "$tmp/e" | jq -c .processes)"
  done
  if [ "$(id -u)" -eq 0 ]; then
    # As nobody the descriptor takes user-mode faults only: every mode needs the job's help.
    d=$(mktemp -d) && cp "$uswap" "$(dirname "$uswap")/libuswap-preload.so" "$tmp/process_vm" "$d/" &&
      chmod -R a+rx "$d"
    su -s /bin/bash nobody -c "$d/uswap run --limit 8M --fault-mode handler-thread --json -- $d/process_vm" \
      >"$tmp/o" 2>"$tmp/e" || fail "(nobody) copies between members: status $?: $(tail -c 600 "$tmp/e")"
    [ "$(cat "$tmp/o")" = "$want" ] && [ "$(asked_of_run)" -gt 0 ] ||
      fail "(nobody) process_vm printed $(cat "$tmp/o"), asked $(asked_of_run)"
    rm -rf "$d"
  fi
  # A program's first locale calls allocate with glibc's setlocale lock held for writing; run
  # by a shell under a job this small, the pager starts its reclaim thread from those mallocs,
  # and the shim's thread start took that lock for reading (duplocale), which corrupted it: the
  # next writer waited for ever (binutils' ar hung so, in zlib's configure).
  cc -O2 -o "$tmp/locale" "$(dirname "${BASH_SOURCE[0]}")/locale_test_program.c" ||
    fail "cannot build locale_test_program"
  want=$(LANG=C.UTF-8 "$tmp/locale") || fail "the locale program alone failed: $want"
  LANG=C.UTF-8 timeout -k 5 60 "$uswap" run --limit 4M -- sh -c "\"$tmp/locale\"" >"$tmp/o" 2>"$tmp/e"
  rc=$?
  [ $rc -eq 0 ] && [ "$(cat "$tmp/o")" = "$want" ] ||
    fail "the locale program under a 4M job: status $rc (124: hung), printed $(cat "$tmp/o"), plain $want"
  # Signals sent to the process reach the program's sigwait thread, never a pager's thread
  # (MariaDB's shutdown waits for its signal thread): in both fault modes, with a kswapd thread.
  in_three_modes sigwait_test_program "a process-directed signal missed the sigwait thread" \
    swap_outs_of_run "the sigwait program was not paged"
  # A vfork child that resets its handlers before exec (gdb starting its inferior) leaves its
  # parent's handlers in place: the parent still sees SIGCHLD (gdb waited for ever without it).
  in_three_modes vfork_signal_test_program "a vfork child's SIG_DFL took its parent's handler" \
    swap_outs_of_run "the vfork program was not paged"
  # setpriv --reuid --regid (as PostgreSQL's case starts its server): it raises its capabilities
  # again with capset after setresuid, then calls setresgid, which glibc makes every thread do;
  # the pager's threads must share the caller's capabilities by then, or glibc aborts.
  if [ "$(id -u)" -eq 0 ]; then
    for args in "--fault-mode handler-thread" "--background-reclaim"; do
      # shellcheck disable=SC2086
      out=$("$uswap" run --limit 8M $args -- setpriv --reuid=nobody --regid=nogroup --clear-groups \
        sh -c 'echo $(id -u):$(id -g)' 2>"$tmp/e")
      rc=$?
      [ $rc -eq 0 ] && [ "$out" = "65534:65534" ] ||
        fail "($args) setpriv to nobody: status $rc, printed '$out': $(tail -c 400 "$tmp/e")"
    done
    # A process whose real and effective users differ (squid's master keeps euid 0 with the
    # proxy user's uid) starts every program in secure-execution mode, without LD_PRELOAD: its
    # exec is named unrouted, never silently unlimited.
    out=$("$uswap" run --limit 8M -- setpriv --ruid=nobody sh -c 'echo $(id -ru)' 2>"$tmp/e")
    [ "$out" = 65534 ] && grep -q "unrouted: [^ ]*/sh (pid [0-9]*) .*secure execution" "$tmp/e" ||
      fail "an exec in secure-execution mode was not named: '$out' $(tail -c 600 "$tmp/e")"
  fi
  # A reservation larger than the arena (MariaDB's 8 TiB buffer pool) is placed across its end:
  # the start committed is routed and pages, the end is the kernel's; calls over the whole of
  # it are split, and its unmap leaves the room for the same again.
  want=$("$tmp/hinted" huge)
  "$uswap" run --limit 8M --json -- "$tmp/hinted" huge >"$tmp/o" 2>"$tmp/e" ||
    fail "a reservation larger than the arena: $(tail -c 600 "$tmp/e")"
  [ "$(cat "$tmp/o")" = "$want" ] || fail "the huge reservation printed $(cat "$tmp/o"), plain $want"
  [ "$(tail -n 1 "$tmp/e" | jq '[.processes[].swap_outs] | add')" -gt 0 ] ||
    fail "the start of a reservation larger than the arena was not paged: $(tail -c 600 "$tmp/e")"
  "$uswap" run --limit 8M -- "$tmp/hinted" strict >"$tmp/o" 2>"$tmp/e" ||
    fail "hinted reservation, strict: $(cat "$tmp/o") $(tail -c 600 "$tmp/e")"
  grep -q "^strict: reserved at the hint after 257 attempts$" "$tmp/o" &&
    grep -q "unrouted: hinted (pid [0-9]*) rejected 256 reservations placed elsewhere than its mmap hint" "$tmp/e" ||
    fail "a program that needs its hints did not get them: $(cat "$tmp/o" "$tmp/e")"
  grep -q "shared memory at peak 16.0 MiB (not limited)" "$tmp/e" &&
    grep -q "job: .*; shared memory, not limited, at least 16.0 MiB at peak" "$tmp/e" ||
    fail "the memfd heap was not reported as shared memory: $(cat "$tmp/e")"
  # Memory mapped by the program's own syscall instruction (a runtime without the C library's
  # wrappers, past any interposer) cannot be limited: the summary says so, naming the process.
  printf '#define _GNU_SOURCE\n#include <string.h>\n#include <sys/mman.h>\n#include <sys/syscall.h>\nint main(void) { long r; register long r10 __asm__("r10") = MAP_PRIVATE | MAP_ANONYMOUS; register long r8 __asm__("r8") = -1; register long r9 __asm__("r9") = 0;\n__asm__ volatile("syscall" : "=a"(r) : "a"((long)SYS_mmap), "D"(0L), "S"(64L << 20), "d"((long)(PROT_READ | PROT_WRITE)), "r"(r10), "r"(r8), "r"(r9) : "rcx", "r11", "memory");\nchar *p = (char *)r; memset(p, 7, 64ul << 20); return p[12345] == 7 ? 0 : 1; }\n' >"$tmp/rawmmap.c"
  cc -O2 -o "$tmp/rawmmap" "$tmp/rawmmap.c" || fail "cannot build the raw mmap program"
  "$uswap" run --limit 16M -- "$tmp/rawmmap" >"$tmp/o" 2>"$tmp/e" ||
    fail "the raw mmap program failed: $(tail -c 600 "$tmp/e")"
  grep -q "^uswap run: not limited: rawmmap (pid [0-9]*) had 6[45].[0-9] MiB of unrouted anonymous memory" "$tmp/e" ||
    fail "memory mapped past the shim was not named: $(cat "$tmp/e")"
  # Nor can an executable's static data (.bss: a Fortran program's SAVE and COMMON arrays,
  # STREAM's static arrays), which the kernel maps at exec: named as such.
  printf '#include <string.h>\nstatic char big[64 << 20];\nint main(void) { memset(big, 7, sizeof big); return big[12345] == 7 ? 0 : 1; }\n' >"$tmp/bss.c"
  cc -O2 -o "$tmp/bss" "$tmp/bss.c" || fail "cannot build the .bss program"
  "$uswap" run --limit 16M -- "$tmp/bss" >"$tmp/o" 2>"$tmp/e" ||
    fail "the .bss program failed: $(tail -c 600 "$tmp/e")"
  grep -q "^uswap run: not limited: bss (pid [0-9]*) had 6[45].[0-9] MiB of unrouted anonymous memory at peak, most of it its executable's static data (64.0 MiB of .bss)" "$tmp/e" ||
    fail "an executable's static data was not named: $(cat "$tmp/e")"
  # The converse: a program that pages 4 GiB through a 64 MiB limit grows the pager's tables by
  # about 1% of that; they are the pager's, not memory past the shim (60 MiB were counted so).
  "$uswap" run --limit 64M -- python3 -c 'b = bytearray(4 << 30)
for i in range(0, len(b), 4096): b[i] = (i >> 12) % 251 + 1
print(sum(b[i] for i in range(0, len(b), 4096 * 97)))' >"$tmp/o" 2>"$tmp/e"
  [ "$(cat "$tmp/o")" = 1361976 ] && ! grep -q "not limited" "$tmp/e" &&
    grep -Eq "^uswap run: job: .*; [1-9][0-9]* swap-outs" "$tmp/e" ||
    fail "4 GiB paged through 64 MiB: $(cat "$tmp/o") $(tail -c 900 "$tmp/e")"
  # A JIT's code area (LuaJIT): a hint within reach of the program's code is the kernel's to
  # place; in the arena, out of reach, the program would unmap it and never compile.
  "$uswap" run --limit 8M -- "$tmp/hinted" near >"$tmp/o" 2>"$tmp/e" &&
    grep -q "^near: code placed within reach ran and returned 42$" "$tmp/o" ||
    fail "a mapping asked for near the program's code was not placed there: $(cat "$tmp/o" "$tmp/e")"
  # A plugin loaded with RTLD_DEEPBIND (PHP's extensions) binds to the C library first: its
  # free of the program's blocks, its mmap, fork and sigaction must still be the shim's. Found by
  # a bare name through the program's DT_RUNPATH, with and without DEEPBIND.
  src="$(dirname "${BASH_SOURCE[0]}")/deepbind_test_program.c"
  mkdir -p "$tmp/db/lib" && cc -O2 -DPLUGIN -shared -fPIC -o "$tmp/db/lib/libdeepbind_plugin.so" "$src" &&
    cp "$tmp/db/lib/libdeepbind_plugin.so" "$tmp/db/lib/libplain_plugin.so" &&
    cc -O2 -o "$tmp/db/prog" "$src" -Wl,--enable-new-dtags,-rpath,'$ORIGIN/lib' ||
    fail "cannot build the RTLD_DEEPBIND program"
  for mode in deepbind plain; do
    want=$("$tmp/db/prog" $mode lib${mode}_plugin.so) || fail "the $mode plugin program fails plainly"
    "$uswap" run --limit 8M --json -- "$tmp/db/prog" $mode lib${mode}_plugin.so >"$tmp/o" 2>"$tmp/e" ||
      fail "a $mode plugin: $(cat "$tmp/o") $(tail -c 600 "$tmp/e")"
    [ "$(cat "$tmp/o")" = "$want" ] || fail "a $mode plugin printed $(cat "$tmp/o"), plain $want"
    # The plugin's 64 MiB mapping under an 8 MiB limit: paged only if the plugin's mmap is the shim's.
    [ "$(tail -n 1 "$tmp/e" | jq '[.processes[].swap_outs] | add')" -gt 8192 ] ||
      fail "the $mode plugin's mapping was not paged: $(tail -c 600 "$tmp/e")"
  done
  # A setuid program run by an unprivileged user (the loader ignores LD_PRELOAD there).
  if [ "$(id -u)" -eq 0 ] && [ -u /usr/bin/su ]; then
    d=$(mktemp -d) && cp "$uswap" "$(dirname "$uswap")/libuswap-preload.so" "$d/" && chmod -R a+rx "$d"
    su -s /bin/bash nobody -c "$d/uswap run --limit 8M -- /usr/bin/su -c true" >"$tmp/o" 2>&1
    [ $? -eq 126 ] && grep -q "setuid" "$tmp/o" || fail "a setuid program was not refused for nobody: $(cat "$tmp/o")"
    rm -rf "$d"
  fi
  # A full arena is a clear error naming --max-size; the program gets ENOMEM (Python: MemoryError).
  "$uswap" run --limit 8M --max-size 4G -- python3 -c 'x = bytearray(5 << 30)' >"$tmp/o" 2>&1
  [ $? -ne 0 ] && grep -q -- "--max-size" "$tmp/o" && grep -q MemoryError "$tmp/o" ||
    fail "a full arena was not a clear error: $(cat "$tmp/o")"
  # A limit below what the program needs to progress thrashes (maps above the limit), never hangs.
  timeout 120 "$uswap" run --limit 256K -- sort -S 16M /dev/null >"$tmp/o" 2>&1
  [ $? -eq 0 ] || fail "sort under a 256K limit did not finish: $(cat "$tmp/o")"
  ;;
faultinject)
  prog=$3
  # The arena runs out (a 4 GiB arena, a quarter of it mimalloc's managed heap): malloc returns
  # NULL with ENOMEM, so does a new anonymous mmap, and the program frees and goes on.
  "$uswap" run --limit 8M --max-size 4G -- "$prog" until-null 16384 mmap >"$tmp/o" 2>&1
  [ $? -eq 0 ] || fail "a full arena: $(tail -c 800 "$tmp/o")"
  echo "full arena: $(grep 'blocks before NULL' "$tmp/o")"
  # Every arena mapping after the first (mimalloc's managed heap, 1 GiB of the 4 GiB arena)
  # refused: NULL once that heap is used up.
  USWAP_FAIL_INJECT=pager_map:2+ "$uswap" run --limit 8M --max-size 4G -- "$prog" until-null 4096 >"$tmp/o" 2>&1
  [ $? -eq 0 ] || fail "pager_map:2+: $(tail -c 800 "$tmp/o")"
  echo "pager_map:2+: $(grep 'blocks before NULL' "$tmp/o")"
  # The very first mapping refused too: mimalloc gets no managed heap, every allocation that
  # needs memory from the pager fails, the program still runs to its checks.
  USWAP_FAIL_INJECT=pager_map:1+ "$uswap" run --limit 8M -- "$prog" until-null 4096 >"$tmp/o" 2>&1
  [ $? -eq 0 ] || fail "pager_map:1+: $(tail -c 800 "$tmp/o")"
  # The pager's record nodes refused (hits 1-6 are its tables and first free extent at
  # creation): from the first mapping on, every arena mapping fails with ENOMEM; or only three
  # times, after which the program gets memory again up to the full arena.
  USWAP_FAIL_INJECT=pager_meta:7+ "$uswap" run --limit 8M --max-size 4G -- "$prog" until-null 4096 >"$tmp/o" 2>&1
  [ $? -eq 0 ] || fail "pager_meta:7+: $(tail -c 800 "$tmp/o")"
  USWAP_FAIL_INJECT=pager_meta:7-9 "$uswap" run --limit 8M --max-size 4G -- "$prog" until-null 16384 >"$tmp/o" 2>&1
  [ $? -eq 0 ] || fail "pager_meta:7-9: $(tail -c 800 "$tmp/o")"
  echo "pager_meta:7-9: $(grep 'blocks before NULL' "$tmp/o")"
  # The pager's own tables refused: no pager, the program runs unrouted and says so, and the
  # job's summary names it.
  USWAP_FAIL_INJECT=pager_meta:1 "$uswap" run --limit 8M -- "$prog" touch >"$tmp/o" 2>&1
  [ $? -eq 0 ] && grep -q "^uswap run: unrouted: .* without a pager (ENOMEM" "$tmp/o" ||
    fail "pager_meta:1: $(tail -c 800 "$tmp/o")"
  # Zspages 3 to 3000 refused while the program pages (inside the SIGBUS handler and the
  # handler threads): those evictions fail and their pages stay resident, nothing is lost.
  # (Refusing every zspage from then on works too, but each fault over the limit then retries
  # a reclaim pass 16 times before it maps above the limit: slow.)
  for mode in sigbus handler-thread; do
    USWAP_FAIL_INJECT=zs_malloc_page:3-3000 "$uswap" run --limit 8M --fault-mode $mode --json -- "$prog" touch >"$tmp/o" 2>"$tmp/e"
    [ $? -eq 0 ] || fail "zs_malloc_page:3-3000 ($mode): $(tail -c 800 "$tmp/o" "$tmp/e")"
    [ "$(json_field "$tmp/e" swap_out_failures)" -gt 0 ] 2>/dev/null ||
      fail "zs_malloc_page:3-3000 ($mode): no eviction was refused: $(tail -c 800 "$tmp/e")"
  done
  # A bad specification is named and ignored.
  USWAP_FAIL_INJECT=nowhere:1 "$uswap" run --limit 8M -- "$prog" touch >"$tmp/o" 2>&1
  [ $? -eq 0 ] && grep -q "USWAP_FAIL_INJECT ignored" "$tmp/o" || fail "a bad USWAP_FAIL_INJECT: $(cat "$tmp/o")"
  ;;
job)
  # One limit for the tree: every process's pages read back (the program checks), the job's
  # charge never passed the limit by more than one reclaim pass, nothing was mapped above it.
  prog=$3 mode=$4 limit_arg=32M pool_args=() inject=
  # forkwb's backing file is small enough that the blocks its parent frees are handed out again
  # while the child still reads them (a child whose blocks were not held for it reads the new
  # data: a checksum mismatch, SIGBUS).
  # poolnbd and forkwbnbd: the same with the backing device an NBD export of the same size (and
  # its header block).
  case $mode in
  pool) pool_args=(--pool-limit 8M --backing "$tmp/backing" --backing-size 512M) ;;
  # reuid: the image that became nobody writes back into root's backing file (mode 0600).
  reuid)
    if [ "$(id -u)" -ne 0 ]; then
      echo "reuid: needs root to change its user: not run"
      exit 0
    fi
    pool_args=(--pool-limit 8M --backing "$tmp/backing" --backing-size 512M) ;;
  daemon) daemon_case "$prog"; exit $((failures > 0)) ;;
  hoglocked) hoglocked_case "$prog"; exit $((failures > 0)) ;;
  forkwb) pool_args=(--pool-limit 8M --backing "$tmp/backing" --backing-size 192M) ;;
  poolnbd) start_nbdkit $(((512 << 20) + 4096)) && pool_args=(--pool-limit 8M --backing "$nbd_uri") ;;
  forkwbnbd) start_nbdkit $(((192 << 20) + 4096)) && pool_args=(--pool-limit 8M --backing "$nbd_uri") ;;
  # hogsignal: hog, with every member's futex_waitv failing as on a kernel without it: no
  # reclaim thread listens, and the idle member must be asked with the job's signal.
  hogsignal) inject=futex_waitv:1+ ;;
  esac
  mode=${mode%nbd}
  signal_path=0
  [ "$mode" = hogsignal ] && signal_path=1 && mode=hog
  "$prog" "$mode" >"$tmp/plain.out" 2>&1 || fail "the program alone failed: $(cat "$tmp/plain.out")"
  USWAP_FAIL_INJECT=$inject "$uswap" run --limit "$limit_arg" ${pool_args[@]+"${pool_args[@]}"} --json -- "$prog" "$mode" >"$tmp/paged.out" 2>"$tmp/paged.err"
  rc=$?
  [ $rc -eq 0 ] || fail "under uswap run it exited $rc: $(cat "$tmp/paged.out" "$tmp/paged.err")"
  json=$(tail -n 1 "$tmp/paged.err")
  echo "job: $(jq -c .job <<<"$json")"
  limit=$(numfmt --from=iec "$limit_arg")
  pass=$((limit / 4096 / 32 * 4096))  # a reclaim pass: 1/32 of the limit (32 to 256 pages)
  [ $pass -lt $((32 * 4096)) ] && pass=$((32 * 4096))
  peak=$(jq .job.peak_resident_bytes <<<"$json")
  [ "${peak:-0}" -gt 0 ] || fail "no job statistics: $json"
  [ "${peak:-0}" -le $((limit + pass)) ] || fail "the job's peak $peak passed the limit $limit by more than a pass ($pass)"
  [ "$(jq .job.overcharges <<<"$json")" = 0 ] || fail "overcharges: $(jq -c .job <<<"$json")"
  [ "$(jq -r '.job.stopped // ""' <<<"$json")" = "" ] || fail "the job was stopped: $(jq -r .job.stopped <<<"$json")"
  outs=$(jq .job.swap_outs <<<"$json")
  case $mode in
  forktree)
    [ "$outs" -gt 0 ] || fail "nothing was paged"
    [ "$(jq .job.processes <<<"$json")" -ge 5 ] || fail "fewer than 5 processes joined" ;;
  forkshare)
    # Two readers of 0.7 of the limit, 0.1 written by each: 0.9 in all once the frames the
    # three share are charged once. Charged once per process (or evicted at each fork to make
    # room for a child's copy), the job paged.
    [ "$(jq .job.processes <<<"$json")" -ge 3 ] || fail "fewer than 3 processes joined"
    [ "$outs" -eq 0 ] || fail "the job paged $outs pages out: the frames its processes share were charged more than once"
    # Nor are they memory the pager does not hold: a reader's RssAnon counts the frames it
    # shares with its parent (0.7 of the limit), which were reported as unrouted (and the job
    # as not limited).
    unrouted=$(jq '[.processes[] | select(.event == "exit") | .unrouted_anon_peak_bytes] | max' <<<"$json")
    [ "${unrouted:-0}" -lt $((limit / 4)) ] ||
      fail "a process sharing its parent's frames had $unrouted bytes of unrouted memory: $(jq -c '[.processes[] | {pid, unrouted_anon_peak_bytes}]' <<<"$json")" ;;
  forkcow)
    # The parent rewrote the 0.9 of the limit its child inherited: the child's frames are its
    # own now, 1.8 of the limit in the tree, so the job had to page (the program checked the
    # tree's Pss_Anon). Left uncharged, nothing would have been paged.
    [ "$outs" -gt 0 ] || fail "nothing was paged: the child's frames it alone maps were never charged" ;;
  hog)
    [ "$outs" -gt 0 ] || fail "nothing was paged"
    # The hog (the child, the higher pid) faults nothing after filling its memory: it swaps out
    # only by serving the other's requests for room while it sits in read(2).
    [ "$(jq .job.reclaim_requests <<<"$json")" -gt 0 ] || fail "nobody asked the hog for room"
    hog=$(jq -c '[.processes[] | select(.event == "exit")] | max_by(.pid)' <<<"$json")
    [ "$(jq .swap_outs <<<"$hog")" -gt 0 ] || fail "the idle hog kept all its pages: the other process evicted its own"
    [ "$(jq .job_requests_served <<<"$hog")" -gt 0 ] || fail "the hog served no request: $hog"
    # The hog made no call after filling its memory that would start its thread for requests
    # (a malloc, a poll): the job's signal served them, read(2) restarting after it. Where no
    # thread can listen (hogsignal) the same holds whatever the program calls.
    [ $signal_path = 0 ] || [ "$(jq .job_signals <<<"$hog")" -gt 0 ] || fail "no signal reached the hog: $hog" ;;
  hogsleep)
    # The hog slept through both requests whole (the program checked nanosleep's and
    # sem_timedwait's results), and gave room all the same: its thread for requests, started
    # as it went to sleep (the shim's nanosleep), served them.
    [ "$(jq .job.reclaim_requests <<<"$json")" -ge 2 ] ||
      fail "the sleeping hog was asked for room fewer than twice: $(jq -c .job <<<"$json")"
    hog=$(jq -c '[.processes[] | select(.event == "exit")] | max_by(.pid)' <<<"$json")
    [ "$(jq .job_requests_served <<<"$hog")" -ge 1 ] && [ "$(jq .swap_outs <<<"$hog")" -gt 0 ] ||
      fail "the sleeping hog gave no room: $hog" ;;
  eventloop)
    # The hog, idle in epoll_wait and then in poll (no timeouts), gave room both times (the
    # program checked that neither call failed): its thread for requests, started as it entered
    # epoll_wait, served them. No signal may reach a thread in those calls; one may while the
    # thread starts (the hog then runs), so at least one request was the thread's.
    [ "$(jq .job.reclaim_requests <<<"$json")" -gt 0 ] || fail "nobody asked the hog for room"
    hog=$(jq -c '[.processes[] | select(.event == "exit")] | max_by(.pid)' <<<"$json")
    [ "$(jq .job_requests_served <<<"$hog")" -ge 2 ] || fail "the hog served fewer than 2 requests: $hog"
    [ "$(jq .swap_outs <<<"$hog")" -gt 0 ] || fail "the idle hog kept all its pages: $hog"
    [ "$(jq '.job_requests_served - .job_signals' <<<"$hog")" -ge 1 ] ||
      fail "the hog's thread served no request: $hog" ;;
  pool | forkwb | reuid)
    if [ "$mode" = reuid ]; then
      # The image that became nobody joined the job through the descriptors it inherited.
      ! grep -q "limited on its own" "$tmp/paged.err" ||
        fail "the nobody image did not join the job: $(grep "limited on its own" "$tmp/paged.err")"
      [ "$(jq .job.processes <<<"$json")" -ge 3 ] ||
        fail "fewer than 3 process images joined: $(jq -c .job <<<"$json")"
    fi
    # The pools stayed at --pool-limit: resident + pools within the limits (+ a pass of
    # compressed pages in flight), the rest went to the backing file and came back intact (the
    # program checks every page; in forkwb a child reads what its parent freed and overwrote).
    foot=$(jq .job.peak_footprint_bytes <<<"$json")
    pool_limit=$((8 << 20))
    [ "${foot:-0}" -le $((limit + pool_limit + pass)) ] || fail "the job's footprint $foot passed limit + pool limit ($((limit + pool_limit)))"
    [ "$(jq .job.bd_writes <<<"$json")" -gt 0 ] || fail "nothing was written back"
    [ "$(jq .job.bd_reads <<<"$json")" -gt 0 ] || fail "nothing was read back from the backing file"
    # Nor did the pager's own memory grow with the device: the anonymous memory past each
    # process's routed pages, its pool and the pager's tables stayed small (writeback's laps once
    # walked the whole swap table, sized to the arena, and made all 196 MiB of it resident). Not
    # for a forked child, whose RssAnon holds the frames it still shares with its parent.
    worst=$(jq '(.processes | map(.pid)) as $pids |
                [.processes[] | select(.ppid as $pp | any($pids[]; . == $pp) | not) |
                 .unrouted_anon_peak_bytes] | max' <<<"$json")
    [ "${worst:-0}" -le $((16 << 20)) ] ||
      fail "a process had $worst bytes of anonymous memory past its pages and pool: $(jq -c '[.processes[] | {program, unrouted_anon_peak_bytes, anon_peak_bytes}]' <<<"$json")"
    if [ "$mode" = forkwb ]; then
      # More pages were written than the file has blocks: freed blocks were handed out again
      # while the child still held the ones it inherited.
      [ $(($(jq .job.bd_writes <<<"$json") * 4096)) -gt "$(jq .job.backing_bytes <<<"$json")" ] ||
        fail "the backing file was never reused, so the child's blocks were not put to the test: $(jq -c .job <<<"$json")"
    fi ;;
  pipewrite)
    # The reader asked for room while the writer sat in its write(2) (the program checked that
    # the write was whole and every byte arrived).
    [ "$(jq .job.reclaim_requests <<<"$json")" -gt 0 ] ||
      fail "nobody asked the blocked writer for room" ;;
  killed)
    # The dead child held 0.7 of the limit and its parent then needed 0.9: the child's share
    # came back before the parent had to evict anything (the parent waits for room meanwhile).
    [ "$(jq .job.processes_reaped <<<"$json")" -ge 1 ] || fail "the killed member was not reaped"
    [ "$outs" -eq 0 ] || fail "the parent had to page ($outs swap-outs): the dead child's share did not come back" ;;
  pidns)
    if grep -q "not run" "$tmp/paged.out"; then
      echo "pidns: $(grep "not run" "$tmp/paged.out")"
    else
      # The processes in the pid namespace joined as guests (they were limited each alone,
      # outside the job's sums, and the tree held 1.7 of the limit); the one killed there was
      # reaped by its pid outside, named by its announcement.
      ! grep -q "cannot join the job" "$tmp/paged.err" ||
        fail "a process in the pid namespace did not join: $(grep "cannot join" "$tmp/paged.err")"
      [ "$(jq .job.processes <<<"$json")" -ge 5 ] || fail "fewer than 5 process images joined: $(jq -c .job <<<"$json")"
      [ "$(jq .job.processes_reaped <<<"$json")" -ge 1 ] || fail "the killed guest was not reaped"
      [ "$outs" -gt 0 ] || fail "nothing was paged: the guests' memory was not the job's"
    fi ;;
  esac
  ;;
nbd)
  # The sort's 128 MiB under --limit 32M and --pool-limit 16M: what the pools cannot hold goes
  # to nbdkit memory and comes back; the output is the plain run's.
  prog=$3 n=8388608
  "$prog" "$n" >"$tmp/plain.out" 2>&1 || fail "the program alone failed: $(cat "$tmp/plain.out")"
  start_nbdkit 1G
  "$uswap" run --limit 32M --pool-limit 16M --backing "$nbd_uri" --json -- "$prog" "$n" \
    >"$tmp/paged.out" 2>"$tmp/paged.err" &
  wait_job $! 300
  [ $rc -eq 0 ] || fail "uswap run exited $rc: $(tail -c 800 "$tmp/paged.err")"
  cmp -s "$tmp/plain.out" "$tmp/paged.out" || fail "output differs: $(cat "$tmp/paged.out")"
  json=$(tail -n 1 "$tmp/paged.err")
  echo "job: $(jq -c .job <<<"$json")"
  [ "$(jq -r .job.backing <<<"$json")" = "$nbd_uri" ] || fail "the summary does not name the backing tier: $(jq -c .job <<<"$json")"
  [ "$(jq .job.swap_outs <<<"$json")" -gt 0 ] || fail "nothing was paged"
  [ "$(jq .job.bd_writes <<<"$json")" -gt 0 ] || fail "nothing reached the NBD server"
  [ "$(jq .job.bd_reads <<<"$json")" -gt 0 ] || fail "nothing came back from the NBD server"
  # A batch of victims stops storing at the device's first refusal (the pool at its limit): the
  # rest of it is not compressed only to be refused too, so never more refusals than batches.
  jq -e '[.processes[] | select(.store_refusals > .eviction_batches)] | length == 0' <<<"$json" >/dev/null ||
    fail "more stores refused than eviction batches: $(jq -c '[.processes[] | {store_refusals, eviction_batches, swap_out_failures}]' <<<"$json")"
  # The limits and a little: four sorting threads sometimes find every page pinned and
  # map above the limit (overcharges, counted in the JSON) rather than fail a fault.
  [ "$(jq .job.peak_footprint_bytes <<<"$json")" -le $(((32 + 16 + 4) << 20)) ] || fail "footprint past the limits: $(jq -c .job <<<"$json")"
  # A server that comes back: nbdkit's file plugin over a file (storage that outlives the
  # process), killed mid-run and started again over the same file 2 s later. Reads of its pages
  # and the pools' writeback wait for it (--backing-timeout) and go on: the plain run's output.
  truncate -s 1G "$tmp/export.img"
  start_nbdkit file "$tmp/export.img"
  "$uswap" run --limit 32M --pool-limit 16M --backing "$nbd_uri" --stats-dir "$tmp/sdr" --json \
    -- "$prog" "$n" >"$tmp/paged.out" 2>"$tmp/paged.err" &
  upid=$!
  wait_for_writeback "$tmp/sdr" || fail "the job ended before the server could be restarted: $(tail -c 600 "$tmp/paged.err")"
  kill -9 "$nbdkit_pid"
  sleep 2
  start_nbdkit file "$tmp/export.img"
  wait_job $upid 300
  json=$(tail -n 1 "$tmp/paged.err")
  echo "server restarted: exit $rc: $(jq -c '.job | {bd_writes, bd_reads, failed_reads}' <<<"$json" 2>/dev/null)"
  [ $rc -eq 0 ] || fail "the job did not survive a server back within --backing-timeout: exit $rc: $(tail -c 800 "$tmp/paged.err")"
  cmp -s "$tmp/plain.out" "$tmp/paged.out" || fail "output differs after the server came back"
  [ "$(jq .job.failed_reads <<<"$json")" = 0 ] || fail "pages were lost: $(jq -c .job <<<"$json")"
  [ "$(jq .job.bd_reads <<<"$json")" -gt 0 ] || fail "nothing came back from the NBD server"
  # A server that stops answering with its socket open (SIGSTOP: a wedged or overloaded host, a
  # partitioned network): every exchange with it, the handshakes of new connections included,
  # is bounded by --backing-timeout, so the job ends, named, instead of waiting for it forever.
  start_nbdkit 1G
  "$uswap" run --limit 32M --pool-limit 16M --backing "$nbd_uri" --backing-timeout 3 \
    --stats-dir "$tmp/sdw" --json \
    -- "$prog" $((2 * n)) >"$tmp/paged.out" 2>"$tmp/paged.err" &
  upid=$!
  wait_for_writeback "$tmp/sdw" || fail "the job ended before the server could be stopped: $(tail -c 600 "$tmp/paged.err")"
  kill -STOP "$nbdkit_pid"
  wait_job $upid 120
  kill -CONT "$nbdkit_pid"
  echo "server stopped: exit $rc: $(grep 'uswap run:' "$tmp/paged.err" | grep -E 'could not|stopp' | head -3)"
  [ $rc -ne 0 ] || fail "the program finished although its server never answered: $(cat "$tmp/paged.out")"
  grep -q -E "could not be read back from --backing|could not be reached" "$tmp/paged.err" ||
    fail "no message names the silent server: $(tail -c 800 "$tmp/paged.err")"
  # The server killed for good while the job runs: after --backing-timeout the job ends, named,
  # never with other bytes.
  start_nbdkit 1G
  "$uswap" run --limit 32M --pool-limit 16M --backing "$nbd_uri" --backing-timeout 3 \
    --stats-dir "$tmp/sd" --json \
    -- "$prog" $((2 * n)) >"$tmp/paged.out" 2>"$tmp/paged.err" &
  upid=$!
  wait_for_writeback "$tmp/sd" || fail "the job ended before the server could be killed: $(tail -c 600 "$tmp/paged.err")"
  kill -9 "$nbdkit_pid"
  wait_job $upid 300
  echo "after the kill: exit $rc: $(grep 'uswap run:' "$tmp/paged.err" | grep -E 'could not|stopp' | head -3)"
  [ $rc -ne 0 ] || fail "the program finished as if nothing was lost: $(cat "$tmp/paged.out")"
  grep -q -E "could not be read back from --backing|could not be reached" "$tmp/paged.err" ||
    fail "no message names the lost server: $(tail -c 800 "$tmp/paged.err")"
  ;;
*)
  echo "usage: $0 sort|shim|ownmalloc|cli|programs|job|nbd|faultinject ..."
  exit 2
  ;;
esac
if [ $failures -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all checks passed"
