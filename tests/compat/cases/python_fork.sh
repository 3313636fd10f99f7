# A program that forks and reads inherited memory: Debian's python3 builds 1.5 million ints and
# strings, then a multiprocessing pool (fork start method) hashes and sums slices of them.
description="python3 multiprocessing (fork) reading a big inherited list"
packages=(python3)
program="python3 (multiprocessing, fork)"
pool=yes
nobody=yes
case_env=(PYTHONHASHSEED=0)
prepare() {
  cat >mp.py <<'PY'
import hashlib, multiprocessing as mp
N = 1_500_000
# Built before the fork: the children read it through the memory they inherit.
data = [(i * 2654435761) % 1000003 for i in range(N)]
text = [f"row-{i:07d}-{data[i]:07d}" for i in range(N)]
def work(part):
    lo, hi = part * N // 4, (part + 1) * N // 4
    h = hashlib.sha256()
    for i in range(lo, hi):
        h.update(text[i].encode())
    return part, sum(data[lo:hi]), h.hexdigest()
if __name__ == "__main__":
    mp.set_start_method("fork")
    with mp.Pool(2) as pool:
        for part, s, d in pool.map(work, range(4)):
            print(part, s, d)
PY
}
command=(/usr/bin/python3 "$IN/mp.py")
