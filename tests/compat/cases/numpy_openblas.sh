# A numerical library with threads of its own: Debian's numpy on OpenBLAS (its pthread build,
# a thread per core with buffers it maps itself) multiplies two 1500x1500 matrices, solves a
# linear system on the product and sorts 20 million doubles.
description="python3-numpy on OpenBLAS threads: matmul, solve, sort of 20M doubles"
packages=(python3-numpy libopenblas0-pthread)
program="python3 + numpy (OpenBLAS)"
nobody=yes
case_env=(OPENBLAS_NUM_THREADS=2)
prepare() {
  cat >np.py <<'PY'
import hashlib
import numpy as np
rng = np.random.default_rng(7)
a = rng.standard_normal((1500, 1500))
b = rng.standard_normal((1500, 1500))
c = a @ b
d = np.linalg.solve(a, c[:, :200])
s = np.sort(rng.standard_normal(20_000_000))
print(hashlib.sha256(np.round(c, 6).tobytes()).hexdigest()[:16],
      round(float(np.abs(d - b[:, :200]).max()), 6), round(float(s[10_000_000]), 9))
PY
}
command=(/usr/bin/python3 "$IN/np.py")
