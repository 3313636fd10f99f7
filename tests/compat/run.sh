#!/usr/bin/env bash
# The compatibility suite of `uswap run`: real programs from Debian packages,
# each run plain and then under `uswap run --limit L --json` with L = half its own plain peak RSS.
#
# Usage: run.sh --uswap PATH [--user nobody] [--results FILE] [--append] [--cases DIR]
#               [--uswap-arg ARG]... [--plain-only] [--keep] [--timeout-factor N] [--min-timeout S] [--list] [CASE...]
#   --uswap PATH      the uswap binary (libuswap-preload.so next to it). Any program with the
#                     interface of `uswap run --limit L --json -- PROGRAM ARGS` will do:
#                     fake-uswap.sh (beside this script) runs the program plainly, to check the
#                     harness itself (selftest.sh).
#   --uswap-arg ARG   pass ARG to uswap run before --limit (repeatable), e.g.
#                     --uswap-arg --fault-mode=handler-thread; @CASEDIR@ in ARG stands for the
#                     case's scratch directory (--uswap-arg --backing=@CASEDIR@/backing)
#   --user nobody     run both runs as that unprivileged user (su; the driver must be root), with
#                     the inputs in a /tmp directory the user owns and the uswap binary copied
#                     there when the user cannot read it where it is
#   --results FILE    one JSON line per case and user (default: $USWAP_COMPAT_RESULTS, or none);
#                     the file is truncated first unless --append
#   --cases DIR       the case files (default: cases/ beside this script)
#   --plain-only      only the plain runs: measure peak RSS and time, check exit status and output
#   --keep            keep the scratch directory (its path is printed)
#   --timeout-factor N, --min-timeout S: the uswap run may take N times as long as the plain
#                     run (default 20), at least S seconds (default 300: it is there to
#                     catch a stuck run, whose stacks it prints, not a slow one on a loaded
#                     machine; on a contended host page faults and TLB flushes cost several
#                     times what they do on a quiet one, and luajit at half its peak took
#                     54 s on one day and 218 s on another on the same VM), at most 480 s
#   CASE              case names (cases/NAME.sh); default: every case
# Exit status: 0 when every case passed, 1 when one failed, 2 on bad usage. Interrupt it with
# Ctrl-C, or a signal to its process group (kill -TERM -PGID): the case's runs and servers are
# stopped and the scratch directory removed.
#
# For each case the driver: checks its Debian packages are installed; prepares its input in a
# scratch directory (generated, seeded); runs it plain under GNU time (exit status, output hash,
# wall time, the largest single process's peak RSS, %M); then under uswap run with the limit at
# half that peak (at least 8 MiB), and checks: the same exit status, the same output (stdout,
# the files the case names, what its check step prints), every process's peak RSS at most
# limit + its zram_mem_used_max + 48 MiB (the process's vm_hwm_bytes where uswap reports it, plus
# its file-backed pages at exit, file_rss_bytes: VmHWM counts the program's mapped binary and
# files, which no anonymous-memory limit governs, 40 MiB of node's own text; GNU
# time's %M of the whole run against the largest zram_mem_used_max in any case, which also covers
# processes uswap did not report), and that some process swapped out (swap_outs > 0). A case
# whose plain peak is under 112 MiB fails as too small (the bound could not fail).
#
# A case file (cases/NAME.sh) is sourced by bash with IN set (the input directory) and defines:
#   description   one line
#   packages      array of Debian packages it needs; the first one's version goes in the results
#   program       the program the case is about (for the results table)
#   prepare()     writes the input into $IN (the current directory), deterministically
#   command       array: the program and its arguments; runs in an empty work directory, with a
#                 clean environment (PATH=/usr/sbin:/usr/bin:/sbin:/bin, LC_ALL=C, HOME and
#                 TMPDIR in the work directory, IN) plus the case's case_env array
#   outputs       optional array of files (relative to the work directory) hashed after the run
#   check()       optional: runs after the command in the work directory (plainly, as the
#                 driver's user); what it prints is compared too
#   cleanup()     optional: runs on every exit of the case, with the work directories as args
#   expect_exit   optional: the exit status of a correct plain run (default 0)
#   nobody=yes    optional: CTest also runs it as the unprivileged user (compat_NAME_nobody)
#   slow=yes      optional: not registered with CTest (minutes by design); run it by name
#   pool=yes      optional: CTest also runs it with --pool-limit 16M and a --backing file
#                 (compat_NAME_pool): the far tier under a real program, the same checks, and
#                 pages must have been written back
#   cost=SECONDS  optional: about how long the case runs; CTest starts the costly ones first
#   limit_share=N optional: the limit is 1/N of the plain peak instead of half (a case whose
#                 failure showed only under harder pressure)
#   case_timeout_factor, case_min_timeout, case_max_timeout   optional: this case's own
#                 --timeout-factor, --min-timeout and cap (default 480 s)
#   compat_gen KIND SEED COUNT   (for prepare) deterministic data from gen.py
set -u
here=$(cd "$(dirname "$0")" && pwd)
uswap="" run_user="" results=${USWAP_COMPAT_RESULTS:-} append=0 cases_dir=$here/cases
uswap_args=() plain_only=0 keep=0 timeout_factor=20 min_timeout=300 list=0 names=()
usage() { sed -n '2,/^[^#]/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
  --uswap) uswap=${2:?}; shift 2 ;;
  --user) run_user=${2:?}; shift 2 ;;
  --uswap-arg) uswap_args+=("${2:?}"); shift 2 ;;
  --results) results=${2:?}; shift 2 ;;
  --append) append=1; shift ;;
  --cases) cases_dir=${2:?}; shift 2 ;;
  --plain-only) plain_only=1; shift ;;
  --keep) keep=1; shift ;;
  --timeout-factor) timeout_factor=${2:?}; shift 2 ;;
  --min-timeout) min_timeout=${2:?}; shift 2 ;;
  --list) list=1; shift ;;
  -h | --help) usage ;;
  --) shift; names+=("$@"); break ;;
  -*) echo "run.sh: unknown option $1" >&2; usage ;;
  *) names+=("$1"); shift ;;
  esac
done
if [ ${#names[@]} -eq 0 ]; then
  for f in "$cases_dir"/*.sh; do names+=("$(basename "$f" .sh)"); done
fi
if [ $list -eq 1 ]; then printf '%s\n' "${names[@]}"; exit 0; fi
if [ -z "$uswap" ] && [ $plain_only -eq 0 ]; then echo "run.sh: --uswap PATH is required" >&2; usage; fi
if [ -n "$uswap" ]; then
  uswap=$(readlink -f "$uswap")
  [ -x "$uswap" ] || { echo "run.sh: $uswap is not an executable" >&2; exit 2; }
fi
for tool in /usr/bin/time jq timeout sha256sum; do
  command -v "$tool" >/dev/null || {
    echo "run.sh: $tool is missing: run scripts/install-deps (make test does)" >&2
    exit 1
  }
done
if [ -n "$run_user" ]; then
  [ "$(id -u)" -eq 0 ] || { echo "run.sh: --user $run_user needs root (su)" >&2; exit 2; }
  id "$run_user" >/dev/null 2>&1 || { echo "run.sh: no user $run_user" >&2; exit 2; }
fi
user_name=${run_user:-$(id -un)}
if [ -n "$results" ]; then
  mkdir -p "$(dirname "$results")"
  [ $append -eq 1 ] || : >"$results"
fi

MiB=$((1 << 20))
SLACK=$((48 * MiB))
clean_path=/usr/sbin:/usr/bin:/sbin:/bin
scratch=$(mktemp -d /tmp/uswap-compat.XXXXXX)
chmod 755 "$scratch"
finish() {
  if [ $keep -eq 1 ]; then echo "scratch kept: $scratch"; else rm -rf "$scratch"; fi
}
trap finish EXIT

# compat_gen KIND SEED COUNT: deterministic data (see gen.py), for the cases' prepare().
compat_gen() { /usr/bin/python3 "$here/gen.py" "$@"; }

mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
# excerpt FILE [N]: a file's first 3 and last N lines (default 5), indented, for a failure
# message (the first lines usually say what went wrong, the last ones where it ended).
excerpt() {
  [ -s "$1" ] || return 0
  local n=${2:-5} total
  total=$(wc -l <"$1")
  if [ "$total" -le $((n + 4)) ]; then
    cut -c1-200 "$1"
  else
    head -n 3 "$1" | cut -c1-200
    echo "... ($((total - 3 - n)) more lines)"
    tail -n "$n" "$1" | cut -c1-200
  fi | sed 's/^/      | /'
}

# as_user CMD: run a shell command line as the case's user.
as_user() {
  if [ -n "$run_user" ]; then
    su -s /bin/bash "$run_user" -c "$1"
  else
    bash -c "$1"
  fi
}

# run_one KIND TIMEOUT PREFIX...: run the case's command (after PREFIX) in $dir/KIND with a clean
# environment, under GNU time and timeout. Sets rc, wall, peak_kb; leaves $dir/KIND.out/
# {stdout,stderr,time}.
run_one() {
  local kind=$1 limit_s=$2
  shift 2
  local work=$dir/$kind meta=$dir/$kind.out script=$dir/$kind.exec.sh
  mkdir -p "$work/tmp" "$meta"
  [ -z "$run_user" ] || chown -R "$run_user:" "$work" "$meta"
  {
    # The pid of GNU time (this shell execs it), for stop_runs.
    printf 'echo $$ >%q\n' "$meta/pid"
    printf 'cd %q || exit 125\n' "$work"
    # (The driver starts this in the background, where bash ignores SIGINT and SIGQUIT: the
    # program gets them back at their defaults, as from a terminal.)
    printf 'exec env -i --default-signal=INT,QUIT PATH=%q HOME=%q TMPDIR=%q LC_ALL=C LANG=C IN=%q' \
      "$clean_path" "$work" "$work/tmp" "$IN"
    for a in ${case_env[@]+"${case_env[@]}"}; do printf ' %q' "$a"; done
    printf ' /usr/bin/time -f %q -o %q timeout -k 5 %q' '%M %e' "$meta/time" "$limit_s"
    for a in "$@" "${command[@]}"; do printf ' %q' "$a"; done
    printf ' </dev/null >%q 2>%q\n' "$meta/stdout" "$meta/stderr"
  } >"$script"
  chmod 644 "$script"
  # In the background, so that a signal to the driver is handled at once (see the end).
  as_user "bash $(printf %q "$script")" &
  local run_pid=$! watcher
  watch_run "$meta" "$limit_s" "$run_pid" &
  watcher=$!
  wait $run_pid
  rc=$?
  wait $watcher
  if [ -n "$run_user" ] && [ "$(stat -c %U "$meta/stdout" 2>/dev/null)" != "$run_user" ]; then
    reasons+=("the $kind run did not run as $run_user (its stdout belongs to $(stat -c %U "$meta/stdout" 2>&1))")
  fi
  local last
  last=$(tail -n 1 "$meta/time" 2>/dev/null)
  peak_kb=${last%% *}
  wall=${last##* }
  [[ $peak_kb =~ ^[0-9]+$ ]] || peak_kb=0
  [[ $wall =~ ^[0-9.]+$ ]] || wall=0
  timed_out=0
  if { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && awk -v w="$wall" -v t="$limit_s" 'BEGIN { exit !(w >= t - 1) }'; then
    timed_out=1
  fi
}

# watch_run META TIMEOUT PID: a run still going 4 s before its timeout is either slow or stuck,
# and after the kill nothing tells which: record, while it still runs, how much CPU each of its
# processes used over one second and every thread's stack (gdb; the kernel's where gdb is
# missing), in META/stacks. Ends as soon as the run does.
watch_run() {
  local meta=$1 pid=$3 deadline=$((SECONDS + $2 - 4))
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt "$deadline" ]; do sleep 0.5; done
  kill -0 "$pid" 2>/dev/null || return 0
  local top procs="" p t after
  top=$(cat "$meta/pid" 2>/dev/null) || return 0
  tree() { local c; for c in $(pgrep -P "$1"); do procs+=" $c"; tree "$c"; done; }
  tree "$top"
  ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
  declare -A before
  for p in $procs; do before[$p]=$(ticks "$p"); done
  sleep 1
  {
    for p in $procs; do
      after=$(ticks "$p")
      echo "=== pid $p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-100)): $((after - ${before[$p]:-0})) CPU ticks in the last second"
      if command -v gdb >/dev/null; then
        timeout 30 gdb -p "$p" -batch -nx -ex "thread apply all bt" 2>/dev/null |
          awk '/^Thread/ { if (line) print line; line = "  " $1 " " $2 ":" } /^#/ { f = ($3 == "in") ? $4 : $2; line = line " " f } END { if (line) print line }'
      else
        for t in /proc/"$p"/task/*; do
          echo "  thread ${t##*/} ($(cat "$t/comm" 2>/dev/null)): $(tr '\n' ' ' <"$t/stack" 2>/dev/null | cut -c1-300)"
        done
      fi
    done
  } >"$meta/stacks" 2>&1
}

# stop_runs: end what is left of the case's runs (the driver was interrupted): timeout, a child
# of GNU time, leads the process group of the whole command tree.
stop_runs() {
  local f pid c
  for f in "$dir"/plain.out/pid "$dir"/uswap.out/pid; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    grep -q /usr/bin/time "/proc/$pid/cmdline" 2>/dev/null || continue
    for c in $(pgrep -P "$pid"); do kill -KILL -- "-$c" 2>/dev/null; done
  done
}

# manifest KIND: what the run produced, one line per item: "stdout SHA BYTES", "file NAME SHA
# BYTES" (or "file NAME missing"), "check SHA BYTES" (+ "check-exit N" when it failed).
manifest() {
  local kind=$1 work=$dir/$1 meta=$dir/$1.out
  echo "stdout $(sha256sum <"$meta/stdout" | cut -c1-64) $(stat -c %s "$meta/stdout")"
  local f
  for f in ${outputs[@]+"${outputs[@]}"}; do
    if [ -f "$work/$f" ]; then
      echo "file $f $(sha256sum <"$work/$f" | cut -c1-64) $(stat -c %s "$work/$f")"
    else
      echo "file $f missing"
    fi
  done
  if declare -F check >/dev/null; then
    (cd "$work" && export PATH=$clean_path LC_ALL=C LANG=C IN && check) >"$meta/check" 2>"$meta/check.err"
    local crc=$?
    echo "check $(sha256sum <"$meta/check" | cut -c1-64) $(stat -c %s "$meta/check")"
    [ $crc -eq 0 ] || echo "check-exit $crc"
  fi
}

# first_difference A B: where two outputs part, for a failure message (a line for text, a byte
# offset for binary data).
first_difference() {
  local a=$1 b=$2 c n line
  if [ ! -s "$b" ]; then echo "uswap's is empty"; return; fi
  c=$(cmp "$a" "$b" 2>&1 | head -n 1)
  case $c in
  *"EOF on $b"*)
    echo "uswap's stops after byte $(sed -n 's/.*after byte \([0-9]*\).*/\1/p' <<<"$c") of plain's $(stat -c %s "$a")"
    return ;;
  *"EOF on $a"*)
    echo "uswap's goes on after plain's $(stat -c %s "$a") bytes"
    return ;;
  esac
  n=$(sed -n 's/.* differ: byte \([0-9]*\), line \([0-9]*\)$/\1/p' <<<"$c")
  line=$(sed -n 's/.* differ: byte \([0-9]*\), line \([0-9]*\)$/\2/p' <<<"$c")
  if [ -z "$n" ]; then echo "$c"; return; fi
  if LC_ALL=C grep -qI '' "$a" && LC_ALL=C grep -qI '' "$b"; then
    printf 'first difference at line %s: plain "%s", uswap "%s"' "$line" \
      "$(sed -n "${line}p" "$a" | cut -c1-80 | tr -cd '[:print:]')" \
      "$(sed -n "${line}p" "$b" | cut -c1-80 | tr -cd '[:print:]')"
  else
    echo "binary data, first difference at byte $n"
  fi
}

# run_case NAME: everything for one case; prints its human line, appends its results line and
# returns 0 when it passed. Runs in a subshell (the case's definitions and traps stay there).
run_case() {
  local name=$1 file=$cases_dir/$1.sh
  dir=$scratch/$name-$user_name
  IN=$dir/in
  mkdir -p "$IN"
  description="" packages=() program="" command=() outputs=() case_env=() expect_exit=0
  case_timeout_factor="" case_min_timeout="" case_max_timeout="" slow="" cost="" pool="" limit_share=2
  reasons=()
  local version="" limit=0 plain_rc="" plain_wall=0 plain_peak=0 u_rc="" u_wall=0 u_peak=0
  local json_line="" procs_json="[]" unrouted_json="[]" swap_outs_total=0 max_zram=0 max_hwm=0
  fail() { reasons+=("$*"); }

  if [ ! -f "$file" ]; then
    fail "no case file $file"
  else
    # shellcheck disable=SC1090
    source "$file"
    trap 'stop_runs; declare -F cleanup >/dev/null && cleanup "$dir/plain" "$dir/uswap" >/dev/null 2>&1' EXIT
    trap 'exit 130' TERM
    [ -n "$program" ] || program=${command[0]:-?}
    [ ${#command[@]} -gt 0 ] || fail "the case defines no command"
    local p missing=()
    for p in "${packages[@]}"; do
      [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
      fail "Debian package(s) not installed: ${missing[*]}: run scripts/install-deps (make test does; the suite's list is scripts/deps/compat.list)"
    fi
    [ ${#packages[@]} -eq 0 ] || version=$(dpkg-query -W -f='${Version}' "${packages[0]}" 2>/dev/null)
  fi

  if [ ${#reasons[@]} -eq 0 ]; then
    if ! (cd "$IN" && export LC_ALL=C LANG=C && prepare) >"$dir/prepare.log" 2>&1; then
      fail "prepare failed: $(tail -n 3 "$dir/prepare.log" | tr '\n' ' ')"
    fi
  fi
  if [ ${#reasons[@]} -eq 0 ] && [ -n "$run_user" ]; then
    chown -R "$run_user:" "$dir"
    chmod 755 "$dir"
  fi

  # The plain run.
  if [ ${#reasons[@]} -eq 0 ]; then
    run_one plain 300
    plain_rc=$rc plain_wall=$wall plain_peak=$((peak_kb * 1024))
    manifest plain >"$dir/plain.manifest"
    if [ $timed_out -eq 1 ]; then
      fail "the plain run timed out after 300 s"
    elif [ "$plain_rc" -ne "$expect_exit" ]; then
      fail "the plain run exited $plain_rc, the case expects $expect_exit (the case or its input is wrong, not uswap)"
      excerpt "$dir/plain.out/stderr" >"$dir/plain.tail"
    elif [ ! -s "$dir/plain.out/stdout" ] && [ ! -s "$dir/plain.out/check" ] && [ ${#outputs[@]} -eq 0 ]; then
      fail "the plain run printed nothing: nothing to compare"
    elif grep -q ' missing$' "$dir/plain.manifest"; then
      fail "the plain run did not write $(grep ' missing$' "$dir/plain.manifest" | cut -d' ' -f2 | tr '\n' ' ')"
    elif grep -q '^check-exit' "$dir/plain.manifest"; then
      fail "the check step failed after the plain run: $(tail -n 3 "$dir/plain.out/check.err" | tr '\n' ' ')"
    fi
    limit=$(( (plain_peak / limit_share) / 4096 * 4096 ))
    [ $limit -ge $((8 * MiB)) ] || limit=$((8 * MiB))
  fi

  # The run under uswap.
  if [ ${#reasons[@]} -eq 0 ] && [ $plain_only -eq 0 ]; then
    local bin=$uswap
    local shim
    shim=$(printf %q "$(dirname "$uswap")/libuswap-preload.so")
    if [ -n "$run_user" ] && ! su -s /bin/bash "$run_user" -c "test -x $(printf %q "$uswap") && { test ! -e $shim || test -r $shim; }" 2>/dev/null; then
      # uswap run finds the shim next to its own executable: copy both where the user can read.
      mkdir -p "$scratch/bin"
      cp "$uswap" "$scratch/bin/"
      [ ! -f "$(dirname "$uswap")/libuswap-preload.so" ] || cp "$(dirname "$uswap")/libuswap-preload.so" "$scratch/bin/"
      chmod -R a+rX "$scratch/bin"
      bin=$scratch/bin/$(basename "$uswap")
    fi
    local t
    t=$(awk -v w="$plain_wall" -v f="${case_timeout_factor:-$timeout_factor}" \
          -v m="${case_min_timeout:-$min_timeout}" -v cap="${case_max_timeout:-480}" \
          'BEGIN { t = int(w * f) + 1; if (t < m) t = m; if (t > cap) t = cap; print t }')
    # @CASEDIR@ in an argument: the case's scratch directory (a backing file there goes with it).
    local case_args=() a
    for a in ${uswap_args[@]+"${uswap_args[@]}"}; do case_args+=("${a//@CASEDIR@/$dir}"); done
    run_one uswap "$t" "$bin" run ${case_args[@]+"${case_args[@]}"} --limit "$limit" --json --
    u_rc=$rc u_wall=$wall u_peak=$((peak_kb * 1024))
    manifest uswap >"$dir/uswap.manifest"
    local err=$dir/uswap.out/stderr
    json_line=$(tail -n 1 "$err" 2>/dev/null)
    # uswap's summary is the last line of stderr: a JSON object with exit_status (today it starts
    # with {"exit_status"; any key order is accepted). The program's own stderr is the rest.
    local json_ok=0
    if [[ $json_line == '{'* ]] && jq -e 'type == "object" and has("exit_status")' >/dev/null 2>&1 <<<"$json_line"; then
      json_ok=1
      head -n -1 "$err" >"$dir/program.stderr"
    else
      cp "$err" "$dir/program.stderr"
    fi

    if [ $timed_out -eq 1 ]; then
      fail "timed out after ${t} s under uswap (plain: ${plain_wall} s)"
    fi
    if [ $timed_out -eq 0 ] && [ "$u_rc" -ne "$plain_rc" ]; then
      fail "exit status $u_rc under uswap vs $plain_rc plain"
    fi
    local line kind rest
    while read -r line; do
      kind=${line%% *}
      case $kind in
      stdout | check)
        if ! grep -qxF "$line" "$dir/plain.manifest"; then
          local pl
          pl=$(grep "^$kind " "$dir/plain.manifest")
          fail "$kind differs: plain sha256 $(echo "$pl" | cut -d' ' -f2 | cut -c1-12) ($(echo "$pl" | cut -d' ' -f3) bytes), uswap $(echo "$line" | cut -d' ' -f2 | cut -c1-12) ($(echo "$line" | cut -d' ' -f3) bytes); $(first_difference "$dir/plain.out/$kind" "$dir/uswap.out/$kind")"
        fi
        ;;
      file)
        rest=${line#file }
        if ! grep -qxF "$line" "$dir/plain.manifest"; then
          fail "output file ${rest%% *} differs: plain '$(grep "^file ${rest%% *} " "$dir/plain.manifest" | cut -d' ' -f3- | cut -c1-12)...', uswap '$(echo "${rest#* }" | cut -c1-12)...'"
        fi
        ;;
      check-exit) fail "the check step failed after the uswap run (${line#check-exit }): $(tail -n 2 "$dir/uswap.out/check.err" | tr '\n' ' ')" ;;
      esac
    done <"$dir/uswap.manifest"

    if [ $timed_out -eq 1 ]; then
      json_line=""  # killed: uswap run printed nothing
    elif [ $json_ok -eq 0 ]; then
      fail "no JSON summary from uswap run (the last line of stderr is '$(printf %s "$json_line" | cut -c1-120)')"
      json_line=""
    else
      procs_json=$(jq -c '.processes // []' <<<"$json_line")
      unrouted_json=$(jq -c '.unrouted_execs // []' <<<"$json_line")
      local jrc
      jrc=$(jq -r '.exit_status' <<<"$json_line")
      [ "$jrc" = "$u_rc" ] || fail "uswap's JSON says exit_status $jrc, the program's exit status was $u_rc"
      local n
      n=$(jq 'length' <<<"$procs_json")
      swap_outs_total=$(jq '[.[].swap_outs // 0] | add // 0' <<<"$procs_json")
      max_zram=$(jq '[.[].zram_mem_used_max // 0] | max // 0' <<<"$procs_json")
      max_hwm=$(jq '[.[].vm_hwm_bytes // 0] | max // 0' <<<"$procs_json")
      if [ "$n" -eq 0 ]; then
        fail "uswap reported no process (the shim did not load, or no process ended through its exit handlers)"
      elif [ "$swap_outs_total" -eq 0 ]; then
        fail "nothing was paged: swap_outs 0 in all $n processes ($(jq -r 'map("\(.program) pid \(.pid) peak_resident \(.peak_resident_bytes // 0)") | join(", ")' <<<"$procs_json"))"
      fi
      # With a backing tier, the run is about it: pages must have gone there.
      local a
      for a in ${uswap_args[@]+"${uswap_args[@]}"}; do
        if [[ $a == --backing=* || $a == --backing ]] &&
           [ "$(jq '.job.bd_writes // 0' <<<"$json_line")" -eq 0 ]; then
          fail "uswap ran with $a, but no page was written back: $(jq -c '.job' <<<"$json_line" | cut -c1-300)"
        fi
      done
      # Per process, where uswap reports the kernel's VmHWM.
      local over
      while read -r over; do
        [ -n "$over" ] && fail "$over"
      done < <(jq -r --argjson L "$limit" --argjson S "$SLACK" '
        def mib: (. / 1048576 * 10 | round) as $t | "\($t / 10 | floor).\($t % 10) MiB";
        .[] | select(.vm_hwm_bytes != null)
        | (.zram_mem_used_max // 0) as $z | (.file_rss_bytes // 0) as $f | ($L + $z + $f + $S) as $b
        | select(.vm_hwm_bytes > $b)
        | "pid \(.pid) (\(.program)): peak RSS (VmHWM) \(.vm_hwm_bytes | mib) exceeds limit \($L | mib) + zram_mem_used_max \($z | mib) + file-backed \($f | mib) + 48 MiB = \($b | mib) by \((.vm_hwm_bytes - $b) | mib)"' \
        <<<"$procs_json")
      # Write tracking pays for itself: a process's write-protect faults (a sweep's cost) never
      # outnumber its swap-ins ten to one, unless there are too few to matter (10k: ~10 ms).
      while read -r over; do
        [ -n "$over" ] && fail "$over"
      done < <(jq -r '.[] | (.wp_faults // 0) as $w | (.swap_ins // 0) as $i
        | select($w > 10000 and $w > 10 * $i)
        | "pid \(.pid) (\(.program)): \($w) write-protect faults for \($i) swap-ins: write tracking costs more than ten times what it saves"' \
        <<<"$procs_json")
    fi
    # The largest single process of the whole run (GNU time), against the largest pool.
    local bound=$((limit + max_zram + SLACK))
    # (Not when the largest process is one uswap reported a VmHWM for: judged above on its own.)
    if [ "$u_peak" -gt "$bound" ] && [ $timed_out -eq 0 ] &&
       { [ "$max_hwm" -eq 0 ] || [ "$u_peak" -gt $((max_hwm + 4 * MiB)) ]; }; then
      local who="a process uswap did not report a VmHWM for"
      [ "$max_hwm" -gt 0 ] || who="the largest process of the run (no vm_hwm_bytes in uswap's JSON)"
      fail "$who: peak RSS (GNU time %M) $(mib "$u_peak") exceeds limit $(mib $limit) + zram_mem_used_max $(mib "$max_zram") + 48 MiB = $(mib $bound) by $(mib $((u_peak - bound)))"
    fi
  fi

  # Below this plain peak, half of it + 48 MiB would hold without any limit: no test.
  if [ -n "$plain_rc" ] && [ "$plain_peak" -lt $((2 * SLACK + 16 * MiB)) ]; then
    fail "the case is too small: its plain peak $(mib "$plain_peak") is under $(mib $((2 * SLACK + 16 * MiB))), so the peak bound (half of it + 48 MiB) would hold with no limit at all; make it bigger"
  fi
  local result=ok
  [ ${#reasons[@]} -eq 0 ] || result=FAIL
  local line_mode="uswap"
  [ $plain_only -eq 0 ] || line_mode="plain-only"
  if [ -n "$results" ]; then
    local reasons_json
    reasons_json=$(printf '%s\n' ${reasons[@]+"${reasons[@]}"} | jq -R . | jq -cs 'map(select(. != ""))')
    jq -cn --arg case "$name" --arg program "$program" --arg package "${packages[0]:-}" \
      --arg version "$version" --arg user "$user_name" --arg mode "$line_mode" \
      --argjson uswap_args "$(printf '%s\n' ${uswap_args[@]+"${uswap_args[@]}"} | jq -R . | jq -cs 'map(select(. != ""))')" \
      --arg description "$description" --argjson limit "$limit" \
      --arg plain_rc "$plain_rc" --arg plain_wall "$plain_wall" --argjson plain_peak "$plain_peak" \
      --arg u_rc "$u_rc" --arg u_wall "$u_wall" --argjson u_peak "$u_peak" \
      --argjson max_hwm "$max_hwm" --argjson max_zram "$max_zram" \
      --argjson swap_outs "$swap_outs_total" \
      --slurpfile procs <(printf '%s' "$procs_json") \
      --slurpfile unrouted <(printf '%s' "$unrouted_json") \
      --arg result "$result" --argjson reasons "$reasons_json" --arg date "$(date -u +%FT%TZ)" '
      def num: if . == "" then null else tonumber end;
      # A job that ran thousands of processes (a shell loop of clients) has a processes list too
      # long for one argument: it comes in through a file.
      $procs[0] as $procs | $unrouted[0] as $unrouted |
      {case: $case, program: $program, package: $package, version: $version, user: $user,
       mode: $mode, uswap_args: $uswap_args, description: $description, limit_bytes: $limit,
       plain: {exit_status: ($plain_rc | num), wall_s: ($plain_wall | num), peak_rss_bytes: $plain_peak},
       uswap: (if $mode == "uswap" and $u_rc != "" then
                {exit_status: ($u_rc | num), wall_s: ($u_wall | num), peak_rss_bytes: $u_peak,
                 max_vm_hwm_bytes: (if $max_hwm > 0 then $max_hwm else null end),
                 max_zram_mem_used_max: $max_zram, swap_outs: $swap_outs,
                 processes: ($procs | map({pid, program, vm_hwm_bytes, peak_resident_bytes,
                   zram_mem_used_max, swap_outs, swap_ins, wp_faults, routed_peak_bytes,
                   unrouted_anon_peak_bytes})), unrouted_execs: $unrouted}
              else null end),
       result: $result, reasons: $reasons, date: $date}' >>"$results" ||
      { echo "FAIL $name: could not write its results line to $results"; return 1; }
  fi

  local head
  head=$(printf '%-4s %-16s %-8s %s %s' "$result" "$name" "$user_name" "$program" "${version:+($version)}")
  if [ -n "$plain_rc" ]; then
    head+=": plain $(mib "$plain_peak") in ${plain_wall} s"
    if [ $plain_only -eq 0 ] && [ -n "$u_rc" ]; then
      head+="; limit $(mib "$limit"): uswap ${u_wall} s, peak $(mib "$u_peak"), $swap_outs_total swap-outs"
    fi
  fi
  echo "$head"
  local r
  for r in ${reasons[@]+"${reasons[@]}"}; do echo "     - $r"; done
  if [ "$(jq length <<<"$unrouted_json")" -gt 0 ]; then
    echo "     uswap ran unrouted: $(jq -r 'map("\(.path // .program // "?") (pid \(.pid // "?"))") | join(", ")' <<<"$unrouted_json")"
  fi
  if [ "$result" = FAIL ]; then
    [ ! -s "$dir/plain.tail" ] || { echo "     plain stderr:"; cat "$dir/plain.tail"; }
    if [ -s "$dir/program.stderr" ]; then
      echo "     the program's stderr under uswap:"
      excerpt "$dir/program.stderr" 5
    fi
    [ -z "$json_line" ] || echo "     uswap JSON: $(printf %s "$json_line" | cut -c1-600)"
    if [ $timed_out -eq 1 ] && [ -s "$dir/uswap.out/stacks" ]; then
      echo "     4 s before the timeout (CPU used, then each thread's stack, innermost first):"
      cut -c1-3000 "$dir/uswap.out/stacks" | sed 's/^/     /'
    fi
  fi
  [ "$result" = ok ]
}

# Each case runs in a subshell in the background: a signal to the driver (Ctrl-C, TERM) stops
# the case at once (its EXIT trap ends its runs and servers), then the driver removes the scratch.
case_pid=""
on_signal() {
  trap '' INT TERM
  if [ -n "$case_pid" ]; then
    kill -TERM "$case_pid" 2>/dev/null
    wait "$case_pid"
  fi
  echo "compat: interrupted"
  exit 130
}
trap on_signal INT TERM
failed=0 passed=0
for name in "${names[@]}"; do
  (run_case "$name") &
  case_pid=$!
  if wait "$case_pid"; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  case_pid=""
done
echo "compat: $passed passed, $failed failed"
[ $failed -eq 0 ]
