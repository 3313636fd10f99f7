# An MPI job: Debian's Open MPI starts two python3 ranks (mpi4py, numpy) that trade 64 MB arrays
# four times, touching a heap of their own in between. Open MPI's shared-memory transport (vader)
# moves messages this large with process_vm_readv from the other rank's memory (CMA), which the
# kernel cannot fault in when that rank's pages are another pager's: the copying rank asks the
# other to bring them in. mpirun's stderr goes with stdout, so a failed copy ("Read -1,
# expected ..., errno = ...", after which Open MPI falls back to copying through shared memory)
# is a difference in the output.
description="mpirun -np 2 python3 (mpi4py): 64 MB numpy arrays sent back and forth (CMA)"
packages=(python3-mpi4py openmpi-bin python3-numpy)
program="Open MPI + mpi4py"
nobody=yes
cost=30
# As root mpirun wants to be told twice; the ranks are two, on however many cores.
case_env=(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1)
prepare() {
  cat >ranks.py <<'PY'
import hashlib
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
n = 8_000_000  # 64 MB of float64 per array
rng = np.random.default_rng(1234 + rank)
mine = rng.random(n)
other = np.empty(n)
scratch = rng.random(n // 2)
digest = hashlib.sha256()
for rnd in range(4):
    mine *= 1.0001
    scratch += 1.0  # the rest of the heap, touched between messages
    if rank == 0:
        comm.Send(mine, dest=1, tag=rnd)
        comm.Recv(other, source=1, tag=rnd)
    else:
        comm.Recv(other, source=0, tag=rnd)
        comm.Send(mine, dest=0, tag=rnd)
    digest.update(other.tobytes())
lines = comm.gather(f"{rank} {digest.hexdigest()[:32]} {float(scratch.sum()):.3f}", root=0)
if rank == 0:
    print("\n".join(lines), flush=True)
PY
}
command=(bash -c 'exec mpirun -np 2 /usr/bin/python3 "$IN/ranks.py" 2>&1')
