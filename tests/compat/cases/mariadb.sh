# A threaded database server: MariaDB 10.11 reserves its buffer pool's largest size
# (innodb_buffer_pool_size_max, 8 TiB by default: more than any arena) PROT_NONE and commits a
# 256 MiB pool at its start with mmap MAP_FIXED. mariadb-install-db, 400 000 rows loaded through
# the client, a checksum of all of them, a grouped count, an update of every seventh row, a self
# join, a clean shutdown. Run as nobody (setpriv when started as root), as the server's own
# user would be.
description="MariaDB 10.11: install-db, 400k rows into a 256 MiB buffer pool, checksum, update, join"
packages=(mariadb-server mariadb-client)
program="mariadbd"
nobody=yes
cost=20
prepare() {
  python3 - >rows.sql <<'PY'
import random
random.seed(1)
rows = []
for i in range(400000):
    rows.append("(%d,'%s',%d)" % (i, ("x%07d" % random.randrange(10**7)) * 12, random.randrange(1000)))
    if len(rows) == 2000:
        print("insert into a values " + ",".join(rows) + ";")
        rows = []
PY
  cat >mariadb.sh <<'SH'
set -eu
if [ "$(id -u)" = 0 ]; then
  exec setpriv --reuid=nobody --regid=nogroup --clear-groups bash "$0"
fi
sql_in=$(dirname "$0")/rows.sql
# A short directory: the server's Unix socket path must fit in 107 bytes.
dir=$(mktemp -d /tmp/uswap-mdb-XXXXXX)
export TMPDIR=$dir  # the harness's is root's when the script dropped to nobody
mariadb-install-db --no-defaults --datadir="$dir/data" --auth-root-authentication-method=normal \
  >"$dir/install.log" 2>&1 || { grep -i error "$dir/install.log" >&2; rm -rf "$dir"; exit 1; }
# In the background of this script, so that the harness's timeout and GNU time reach it.
mariadbd --no-defaults --datadir="$dir/data" --socket="$dir/s" --skip-networking \
  --innodb-buffer-pool-size=256M --pid-file="$dir/pid" >"$dir/server.log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 600); do
  [ -S "$dir/s" ] && mariadb-admin --socket="$dir/s" -uroot ping >/dev/null 2>&1 && break
  kill -0 $srv 2>/dev/null || { tail -n 5 "$dir/server.log" >&2; exit 1; }
  sleep 0.05
done
m() { mariadb --socket="$dir/s" -uroot "$@"; }
m -e "create database t; create table t.a (id int primary key, v varchar(200), n int, key(n)) engine=innodb"
m t <"$sql_in"
m t -e "select count(*), sum(n), md5(group_concat(v order by id separator '')) from a;
  select n, count(*) c from a group by n order by c desc, n limit 3;
  update a set n = n + 1 where id % 7 = 0; select sum(n) from a;
  select count(*) from a x join a y on x.id = y.id + 1 where x.n > y.n"
mariadb-admin --socket="$dir/s" -uroot shutdown
status=0
wait $srv || status=$?
trap 'rm -rf "$dir"' EXIT
if grep -E '\[ERROR\]' "$dir/server.log" >&2; then exit 1; fi
echo "mariadbd exit $status"
SH
}
command=(bash "$IN/mariadb.sh")
