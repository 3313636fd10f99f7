# Debian's python3 (not pyenv's): a dict of 300,000 lists, sorted, serialised to JSON, hashed.
description="python3: dict, sort, json, hashlib"
packages=(python3)
program="python3"
case_env=(PYTHONHASHSEED=0)
prepare() {
  cat >pd.py <<'PY'
import hashlib, json, random
rng = random.Random(11)
d = {}
for i in range(300_000):
    d[f"k{rng.getrandbits(40):010x}"] = [i, rng.random(), str(i) * 3]
items = sorted(d.items(), key=lambda kv: (kv[1][1], kv[0]))
s = json.dumps(items[:1000]) + str(len(items)) + str(sum(v[0] for _, v in items[::7]))
print(len(d), hashlib.sha256(json.dumps(items).encode()).hexdigest(), hashlib.md5(s.encode()).hexdigest())
PY
}
command=(/usr/bin/python3 "$IN/pd.py")
