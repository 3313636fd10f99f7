# A cache server with threads and a slab allocator of its own: memcached (four worker threads,
# 1 MiB slab pages it mallocs as items arrive) on a Unix socket, fed 60 000 items of 1.3 to 3.2
# KiB by a client, then read back in a random order and checked value by value. The server
# runs under the limit; the client is a plain python3 beside it in the job.
description="memcached -t 4 on a Unix socket: 60 000 sets, 30 000 random gets checked"
packages=(memcached python3)
program="memcached"
nobody=yes
prepare() {
  cat >mc.py <<'PY'
import hashlib, random, socket, sys, time
path = sys.argv[1]
for _ in range(400):
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(path); break
    except OSError:
        time.sleep(0.05)
else:
    sys.exit("memcached never listened on " + path)
f = s.makefile("rwb")
def cmd(line, data=None):
    f.write(line + b"\r\n" + (data + b"\r\n" if data is not None else b"")); f.flush()
def value(i):
    return hashlib.sha256(str(i).encode()).digest() * (40 + i % 60)
N = 60000
for i in range(N):
    v = value(i)
    cmd(b"set k%d 0 0 %d" % (i, len(v)), v)
    r = f.readline()
    if r != b"STORED\r\n": sys.exit("set k%d: %r" % (i, r))
rnd = random.Random(7); bad = missing = 0
for _ in range(30000):
    i = rnd.randrange(N)
    cmd(b"get k%d" % i)
    hdr = f.readline()
    if not hdr.startswith(b"VALUE"): missing += 1; continue
    n = int(hdr.split()[3]); v = f.read(n + 2)[:-2]
    if f.readline() != b"END\r\n": sys.exit("get k%d: no END" % i)
    bad += v != value(i)
cmd(b"stats"); st = {}
while True:
    l = f.readline()
    if l in (b"END\r\n", b""): break
    p = l.split(); st[p[1].decode()] = p[2].decode()
print("bad", bad, "missing", missing, "items", st.get("curr_items"), "evictions", st.get("evictions"))
cmd(b"shutdown")
PY
  cat >mc.sh <<'SH'
# The server in the foreground of this script (the harness's timeout reaches it). memcached
# refuses to run as root without -u, and binds its socket after it switched: as the user this
# runs as, in this work directory.
set -u
memcached -s "$PWD/mc.sock" -m 512 -t 4 -A -u "$(id -un)" &
srv=$!
trap 'kill $srv 2>/dev/null; wait $srv 2>/dev/null' EXIT
python3 "$IN/mc.py" "$PWD/mc.sock"
wait $srv
echo "server exit $?"
trap - EXIT
SH
}
command=(bash "$IN/mc.sh")
