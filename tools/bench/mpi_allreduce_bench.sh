#!/usr/bin/env bash
# OpenMPI's figures, the peer of CommNet in allreduce_bench and
# comm_p2p_bench (docs/benchmarks.md): over its shared-memory BTL (vader,
# the peer of the shm provider) and over its TCP BTL on loopback (the peer
# of the tcp provider). Compiles mpi_allreduce_bench.c with mpicc into a
# temporary directory and runs it with 2, 3 and 4 processes on this host.
# Needs openmpi-bin and libopenmpi-dev (tools/install_deps.sh).
#
#   tools/bench/mpi_allreduce_bench.sh [--nproc=N] [--btl=vader,tcp]
#       [--repeats=5] [--min_bytes=4096] [--max_bytes=67108864]
#       [--variant=both|in_place|out_of_place] [--p2p=0]
#       MPI_Allreduce in place (MPI_IN_PLACE) and out of place (separate
#       send and receive buffers), their samples interleaved, a column each
#       and the better named per row; --variant=... times only one.
#   tools/bench/mpi_allreduce_bench.sh --compile_to=PATH
#       only compiles the MPI program to PATH, for allreduce_bench
#       --mpi_bench=PATH, which runs it sample by sample between its own
#       (interleaved; tools/bench/mpi_peer.h).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v mpicc > /dev/null && command -v mpirun > /dev/null ||
  { echo "mpi_allreduce_bench: mpicc/mpirun missing: install openmpi-bin libopenmpi-dev" >&2; exit 2; }
nprocs=(2 3 4)
btls=(vader tcp)
args=()
for arg in "$@"; do
  case $arg in
    --nproc=*) nprocs=("${arg#--nproc=}") ;;
    --btl=*) IFS=, read -r -a btls <<< "${arg#--btl=}" ;;
    --compile_to=*) compile_to=${arg#--compile_to=} ;;
    *) args+=("$arg") ;;
  esac
done
if [ -n "${compile_to:-}" ]; then
  exec mpicc -O2 -o "$compile_to" "$here/mpi_allreduce_bench.c"
fi
work=$(mktemp -d /tmp/oflite-mpi-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT
mpicc -O2 -o "$work/mpi_allreduce_bench" "$here/mpi_allreduce_bench.c"
for n in "${nprocs[@]}"; do
  for btl in "${btls[@]}"; do
    case $btl in
      vader) mca=(--mca btl self,vader) ;;
      # Loopback only, as CommNet's tcp runs; no shared memory.
      tcp) mca=(--mca btl self,tcp --mca btl_tcp_if_include lo) ;;
      *) echo "mpi_allreduce_bench: unknown --btl '$btl' (vader or tcp)" >&2; exit 2 ;;
    esac
    echo "== OpenMPI over the $btl BTL, $n processes =="
    # --oversubscribe: 3 and 4 ranks on a machine with fewer cores, as the
    # CommNet runs do; vader's single-copy mechanism is left to OpenMPI (CMA
    # where the kernel allows it, like CommNet's shm provider).
    mpirun --allow-run-as-root --oversubscribe -np "$n" "${mca[@]}" \
      "$work/mpi_allreduce_bench" "${args[@]}"
  done
done
