# A sandbox: bubblewrap runs the multiprocessing job of python_fork in a pid namespace and a
# user namespace of its own (what Flatpak does), /proc remounted there. Its processes' pids name
# other processes outside, so they join uswap run's job as guests, named by the supervisor.
# Python is the namespace's pid 1 (--as-pid-1), so that bwrap waits for it and GNU time's peak
# is Python's (a reaper of bwrap's own in between passed on none of its children's usage).
description="bwrap --unshare-pid --unshare-user python3 multiprocessing (fork), /proc its own"
packages=(bubblewrap python3)
program="bwrap (python3 in a pid namespace)"
nobody=yes
case_env=(PYTHONHASHSEED=0)
prepare() {
  cat >mp.py <<'PY'
import hashlib, multiprocessing as mp, os
N = 1_500_000
data = [(i * 2654435761) % 1000003 for i in range(N)]
text = [f"row-{i:07d}-{data[i]:07d}" for i in range(N)]
def work(part):
    lo, hi = part * N // 4, (part + 1) * N // 4
    h = hashlib.sha256()
    for i in range(lo, hi):
        h.update(text[i].encode())
    return part, sum(data[lo:hi]), h.hexdigest()
if __name__ == "__main__":
    print("pid", os.getpid())  # 1 in its namespace
    mp.set_start_method("fork")
    with mp.Pool(2) as pool:
        for part, s, d in pool.map(work, range(4)):
            print(part, s, d)
PY
}
command=(/usr/bin/bwrap --ro-bind / / --dev /dev --proc /proc --bind "$IN" "$IN"
         --unshare-pid --unshare-user --as-pid-1 --die-with-parent /usr/bin/python3 "$IN/mp.py")
