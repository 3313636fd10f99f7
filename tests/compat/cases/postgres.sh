# A multi-process database: PostgreSQL 15's postmaster forks a backend per connection (fork
# without exec), they share a buffer pool (shared memory, never routed) and signal each other.
# initdb, pgbench's table of a million accounts, an in-memory sort of all of it in one backend
# (work_mem 512MB), four pgbench clients, a clean shutdown. PostgreSQL refuses to run as root:
# as root the script drops to nobody with setpriv (the job's processes may change user).
description="PostgreSQL 15: initdb, pgbench -i -s 10, a 1M-row sort in a backend, 4 clients, shutdown"
packages=(postgresql-15)
program="postgres"
nobody=yes
cost=25
prepare() {
  cat >pg.sh <<'SH'
set -eu
if [ "$(id -u)" = 0 ]; then
  exec setpriv --reuid=nobody --regid=nogroup --clear-groups bash "$0"
fi
bin=/usr/lib/postgresql/15/bin
# A short directory: the server's Unix socket path must fit in 107 bytes.
dir=$(mktemp -d /tmp/uswap-pg-XXXXXX)
$bin/initdb -D "$dir/data" -A trust -U pg --no-sync >"$dir/initdb.log" 2>&1 ||
  { tail -n 5 "$dir/initdb.log" >&2; rm -rf "$dir"; exit 1; }
# The postmaster in the background of this script, not daemonized by pg_ctl: the harness's
# timeout and GNU time (the peak RSS of every process waited for) reach it and its backends.
$bin/postgres -D "$dir/data" -k "$dir" -c listen_addresses='' -c shared_buffers=16MB \
  -c work_mem=512MB -c fsync=off -c max_parallel_workers_per_gather=0 >"$dir/server.log" 2>&1 &
srv=$!
trap 'kill -QUIT $srv 2>/dev/null; wait $srv 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 600); do
  $bin/pg_isready -q -h "$dir" -U pg && break
  kill -0 $srv 2>/dev/null || { tail -n 5 "$dir/server.log" >&2; exit 1; }
  sleep 0.05
done
sql() { $bin/psql -X -h "$dir" -U pg -At postgres -c "$1"; }
$bin/pgbench -h "$dir" -U pg -i -s 10 -q postgres >/dev/null 2>&1
sql "select md5(string_agg(aid::text || ':' || abalance || filler, ',' order by filler desc, aid desc)) from pgbench_accounts"
sql "select count(distinct md5(aid::text)), sum(length(repeat(aid::text, 8))) from pgbench_accounts"
$bin/pgbench -h "$dir" -U pg -n -c 4 -t 250 --random-seed=42 postgres 2>&1 | grep -E '^number of transactions actually processed'
sql "select count(*), sum(abalance) = (select sum(delta) from pgbench_history) from pgbench_accounts, (select 1) s where abalance <> 0"
# A fast shutdown (SIGINT): the postmaster ends its backends, checkpoints and exits 0.
kill -INT $srv
status=0
wait $srv || status=$?
trap 'rm -rf "$dir"' EXIT
if grep -E 'PANIC|server process .* was terminated' "$dir/server.log" >&2; then exit 1; fi
echo "postmaster exit $status"
SH
}
command=(bash "$IN/pg.sh")
