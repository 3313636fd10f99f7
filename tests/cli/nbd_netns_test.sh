#!/usr/bin/env bash
# zram writeback to an NBD server across a network: nbdkit memory inside a network namespace this
# test creates, reached from here over a veth pair by TCP, with no added delay and with 200 us of
# delay each way (tc netem, or the server's own delay where the kernel has no netem); then the
# server killed, which a new device names. Only the
# test's own namespace and addresses are used. Exits 77 (ctest: skipped) where a namespace cannot
# be made (not root, no CAP_NET_ADMIN, no iproute2).
# Usage: nbd_netns_test.sh path/to/uswap
set -u
uswap=$1
failures=0
ns=uswap-nbd-$$
host=vu$$a peer=vu$$b  # interface names stay under 15 characters
dir=$(mktemp -d)
nbdkit_pid=

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
cleanup() {
  [ -n "$nbdkit_pid" ] && kill -9 "$nbdkit_pid" 2>/dev/null
  ip link del "$host" 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT

if ! command -v ip >/dev/null || ! ip netns add "$ns" 2>/dev/null; then
  echo "SKIP: cannot create a network namespace here (needs root or CAP_NET_ADMIN, and iproute2)"
  exit 77
fi
ip link add "$host" type veth peer name "$peer" &&
  ip link set "$peer" netns "$ns" &&
  ip addr add 10.213.77.1/30 dev "$host" && ip link set "$host" up &&
  ip netns exec "$ns" ip addr add 10.213.77.2/30 dev "$peer" &&
  ip netns exec "$ns" ip link set "$peer" up && ip netns exec "$ns" ip link set lo up ||
  { echo "SKIP: cannot set up a veth pair into the namespace"; exit 77; }

# start_server [FILTER ARGS...]: nbdkit memory in the namespace, listening on the peer address.
start_server() {
  [ -n "$nbdkit_pid" ] && kill -9 "$nbdkit_pid" 2>/dev/null && wait "$nbdkit_pid" 2>/dev/null
  rm -f "$dir/pid"
  local filters=() params=()
  [ $# -gt 0 ] && filters=(--filter=delay) && params=("$@")
  ip netns exec "$ns" nbdkit -f --exit-with-parent -i 10.213.77.2 -p 10809 -P "$dir/pid" \
    ${filters[@]+"${filters[@]}"} memory 256M ${params[@]+"${params[@]}"} >"$dir/nbdkit.log" 2>&1 &
  nbdkit_pid=$!
  for _ in $(seq 500); do [ -s "$dir/pid" ] && return; sleep 0.01; done
  fail "nbdkit did not start in the namespace: $(cat "$dir/nbdkit.log")"
}
uri=nbd://10.213.77.2:10809/

# A device of 32 MiB written back over TCP and read back where it now lives.
writeback_over_tcp() {
  local what=$1 start rc ms
  start=$(date +%s%N)
  "$uswap" zram --size 32M --huge-pct 30 --backing-dev "$uri" --writeback idle >"$dir/out" 2>&1
  rc=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  if [ $rc -eq 0 ] && grep -q -E "wrote back [1-9][0-9]* slots" "$dir/out" &&
    grep -q "every page read back the same after post-processing" "$dir/out"; then
    echo "ok: $what: $(grep -o -E 'wrote back [0-9]+ slots' "$dir/out") over TCP and read back, $ms ms"
  else
    fail "$what: exit $rc: $(cat "$dir/out")"
  fi
}

start_server
writeback_over_tcp "no added delay"
# 200 us each way on the veth pair; a kernel without netem (CONFIG_NET_SCH_NETEM) gets the
# server's own delay instead (nbdkit's delay filter, at its 1 ms granularity).
if tc qdisc add dev "$host" root netem delay 200us 2>/dev/null &&
  ip netns exec "$ns" tc qdisc add dev "$peer" root netem delay 200us 2>/dev/null; then
  writeback_over_tcp "netem 200us each way"
else
  echo "note: no netem qdisc in this kernel: delaying in the server instead"
  start_server delay-read=1ms delay-write=1ms
  writeback_over_tcp "server delay 1ms per request"
fi

# The server killed: a new connection cannot be made, the device says so by name.
kill -9 "$nbdkit_pid"
wait "$nbdkit_pid" 2>/dev/null
nbdkit_pid=
"$uswap" zram --size 8M --backing-dev "$uri" --writeback idle >"$dir/out" 2>&1
rc=$?
[ $rc -ne 0 ] && grep -q "10.213.77.2" "$dir/out" || fail "an unreachable server was not a clear error (exit $rc): $(cat "$dir/out")"

if [ $failures -ne 0 ]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all checks passed"
