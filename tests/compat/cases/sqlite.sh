# A database: sqlite3 with an in-memory database (its page cache is many small allocations): a
# table of a million rows, two indexes, queries through both.
description="sqlite3 :memory: table + 2 indexes + queries"
packages=(sqlite3)
program="sqlite3"
pool=yes
prepare() {
  cat >q.sql <<'SQL'
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v INTEGER, pad TEXT);
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 1200000)
INSERT INTO t SELECT i, printf('k%08x', (i * 2654435761) % 4294967291), (i * 40503) % 100003, printf('%.40c', 'x') FROM c;
CREATE INDEX t_k ON t(k);
CREATE INDEX t_v ON t(v, k);
SELECT count(*), sum(v), min(k), max(k) FROM t;
SELECT v, count(*), group_concat(id) FROM (SELECT v, id FROM t WHERE k BETWEEN 'k10000000' AND 'k10ffffff' ORDER BY id) GROUP BY v ORDER BY v LIMIT 5;
SELECT sum(length(k)) FROM t INDEXED BY t_v WHERE v BETWEEN 100 AND 5000;
SQL
}
command=(sqlite3 :memory: ".read $IN/q.sql")
