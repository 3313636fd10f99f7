# A JIT runtime: Debian's /usr/bin/node (V8 reserves its heap and commits it later) builds a
# million objects, a Map, sorts them and hashes their JSON.
description="node: objects, Map, sort, JSON, crypto"
packages=(nodejs)
program="node"
nobody=yes
prepare() {
  cat >compat.js <<'JS'
const crypto = require('crypto');
let s = 2463534242;  // xorshift32, seeded
function rnd() { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s; }
const N = 1000000;
const objs = [];
for (let i = 0; i < N; i++) objs.push({ id: i, key: 'k' + rnd().toString(16), v: rnd() % 100000, tag: ['a', 'b', 'c'][i % 3] });
const m = new Map();
for (const o of objs) m.set(o.key, (m.get(o.key) || 0) + o.v);
objs.sort((a, b) => a.v - b.v || (a.key < b.key ? -1 : a.key > b.key ? 1 : a.id - b.id));
const h = crypto.createHash('sha256');
for (let i = 0; i < N; i += 1000) h.update(JSON.stringify(objs.slice(i, i + 1000)));
console.log(m.size, h.digest('hex'));
JS
}
command=(/usr/bin/node "$IN/compat.js")
