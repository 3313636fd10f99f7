# A database that forks and reads inherited memory: redis-server holds a million keys (DEBUG
# POPULATE), BGSAVE forks a child that writes them all to dump.rdb from the memory it inherited.
# Checked by the server's own digest of the dataset, the save's status, and a plain redis-server
# reloading the dump and digesting what it read (so a child that saved wrong data fails).
description="redis-server: DEBUG POPULATE 1M keys, BGSAVE (fork), dump reloaded and digested"
packages=(redis-server redis-tools)
program="redis-server (BGSAVE)"
pool=yes
cost=45
prepare() {
  cat >redis.sh <<'SH'
# Runs in the work directory: the server in the foreground of this script (not daemonized, so
# the harness's timeout reaches it), a Unix socket only.
set -u
dir=$PWD
redis-server --port 0 --unixsocket "$dir/redis.sock" --dir "$dir" --dbfilename dump.rdb \
  --save '' --appendonly no --enable-debug-command yes --daemonize no \
  --logfile "$dir/redis.log" --pidfile "$dir/redis.pid" &
srv=$!
trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null' EXIT
cli() { redis-cli -s "$dir/redis.sock" "$@"; }
# died: the server is gone; say how it ended (and what its log says) and stop.
died() {
  wait $srv
  echo "redis-server ended with status $? $1" >&2
  tail -n 5 "$dir/redis.log" >&2 2>/dev/null
  trap - EXIT
  exit 1
}
for _ in $(seq 200); do
  [ "$(cli ping 2>/dev/null)" = PONG ] && break
  kill -0 $srv 2>/dev/null || died "before it accepted connections"
  sleep 0.05
done
cli debug populate 1000000 key 100 >/dev/null
cli dbsize
cli debug digest
cli bgsave
for _ in $(seq 2400); do
  info=$(cli info persistence 2>&1) || died "during BGSAVE ($info)"
  case $info in *rdb_bgsave_in_progress:0*) break ;; esac
  sleep 0.05
done
echo "$info" | grep -o 'rdb_last_bgsave_status:[a-z]*'
cli shutdown nosave >/dev/null 2>&1
wait $srv
echo "server exit $?"
trap - EXIT
SH
}
command=(bash "$IN/redis.sh")
# Reload the dump in a plain server and digest it; redis-check-rdb counts what it read.
check() {
  [ -f dump.rdb ] || { echo "no dump.rdb"; return 0; }
  redis-check-rdb dump.rdb | grep -E 'keys read|RDB looks OK|Checksum'  | sed 's/^\[[^]]*\] //'
  mkdir -p reload
  redis-server --port 0 --unixsocket "$PWD/reload/redis.sock" --dir "$PWD" --dbfilename dump.rdb \
    --save '' --appendonly no --enable-debug-command yes --daemonize no \
    --logfile "$PWD/reload/redis.log" --pidfile "$PWD/reload/redis.pid" &
  local srv=$! i
  for i in $(seq 400); do
    [ "$(redis-cli -s "$PWD/reload/redis.sock" ping 2>/dev/null)" = PONG ] && break
    sleep 0.05
  done
  echo "reloaded: $(redis-cli -s "$PWD/reload/redis.sock" dbsize) keys, digest $(redis-cli -s "$PWD/reload/redis.sock" debug digest)"
  redis-cli -s "$PWD/reload/redis.sock" shutdown nosave >/dev/null 2>&1
  wait $srv
}
# Any server still running (a failed or timed-out run): stop it.
cleanup() {
  local d f
  for d in "$@"; do
    for f in "$d/redis.pid" "$d/reload/redis.pid"; do
      # Only if that pid still is a redis-server (not a pid reused since).
      [ -f "$f" ] && grep -q redis-server "/proc/$(cat "$f")/cmdline" 2>/dev/null &&
        kill -9 "$(cat "$f")" 2>/dev/null
    done
  done
  return 0
}
