#!/usr/bin/env bash
# allreduce_bench end to end at two small sizes, 2 and 3 processes, over tcp
# and shm: the bench checks every algorithm's first sum itself (exit 3 on a
# wrong one). With OpenMPI installed (tools/install_deps.sh) its program is
# compiled and run sample by sample between ours: every OpenMPI cell and
# every <provider>/peer cell must hold a figure, not "-".
set -euo pipefail
bench=tools/bench/allreduce_bench
args=(--repeats=2 --min_bytes=4096 --max_bytes=16384 --comm=tcp,shm)
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/allreduce-smoke-XXXXXX")
trap 'rm -rf "$work"' EXIT
with_mpi=0
if command -v mpicc > /dev/null && command -v mpirun > /dev/null; then
  tools/bench/mpi_allreduce_bench.sh --compile_to="$work/mpi_allreduce_bench"
  args+=(--mpi_bench="$work/mpi_allreduce_bench")
  with_mpi=1
else
  echo "OpenMPI not installed: its columns are not checked"
fi
for n in 2 3; do
  "$bench" --nproc=$n "${args[@]}" > "$work/out.txt"
  cat "$work/out.txt"
  for size in "4 KiB" "16 KiB"; do
    row=$(grep -m1 "^$size " "$work/out.txt") ||
      { echo "FAIL: no row for $size with $n processes"; exit 1; }
    # size(2 words) + 3 per provider x 2 (4 from 3 processes: the sg
    # column) + Gloo 2 [+ OMPI 2] + ratios 2.
    fields=$(echo "$row" | awk '{print NF}')
    per_provider=$((n >= 3 ? 4 : 3))
    expected=$((2 + 2 * per_provider + 2 + 2 * with_mpi + 2))
    [ "$fields" = "$expected" ] ||
      { echo "FAIL: $n processes, $size: $fields fields, expected $expected: $row"; exit 1; }
    if [ $with_mpi = 1 ] && echo "$row" | grep -q -- " - \| -$"; then
      echo "FAIL: $n processes, $size: a cell without a figure: $row"; exit 1
    fi
  done
done
echo PASS
