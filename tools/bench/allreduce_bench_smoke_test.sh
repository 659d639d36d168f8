#!/usr/bin/env bash
# allreduce_bench end to end at two small sizes, 2 and 3 processes, over tcp
# and shm: the bench checks every algorithm's first sum itself (exit 3 on a
# wrong one). With OpenMPI installed (tools/install_deps.sh) its program is
# compiled and run sample by sample between ours: every OpenMPI cell and
# every <provider>/peer cell must hold a figure, not "-"; each OpenMPI cell
# names the variant that won (ip: in place, oop: out of place), and the
# per-variant table holds both variants' figures. --mpi_variant narrows the
# peer to one variant (there with --iterations, which OpenMPI's program must
# take too); the standalone script prints both columns. Bad --mpi_variant /
# --mpi_btl / --iterations values exit 2.
set -euo pipefail
bench=tools/bench/allreduce_bench
args=(--repeats=2 --min_bytes=4096 --max_bytes=16384 --comm=tcp,shm)
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/allreduce-smoke-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Bad flag values: exit 2 before any process starts.
for bad in --mpi_variant=sideways "--mpi_bench=/nonexistent --mpi_btl=ib"; do
  status=0
  # shellcheck disable=SC2086
  "$bench" --nproc=2 $bad > "$work/bad.txt" 2>&1 || status=$?
  [ $status = 2 ] || { cat "$work/bad.txt"; fail "$bad: exit $status, expected 2"; }
  grep -q -- "--mpi_" "$work/bad.txt" || { cat "$work/bad.txt"; fail "$bad: error names no flag"; }
done
status=0
"$bench" --nproc=2 --iterations=-1 > "$work/bad.txt" 2>&1 || status=$?
[ $status = 2 ] && grep -q -- "--iterations" "$work/bad.txt" ||
  { cat "$work/bad.txt"; fail "--iterations=-1: exit $status, or no flag named"; }

# The rows of the table headed by the line matching $1 in file $2, up to
# the next line that is not a size row.
table_rows() {
  awk -v head="$1" 'index($0, head) {on = 1; getline; next}
                    on && /^[0-9]+ [KM]iB / {print; next} on {exit}' "$2"
}

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
    row=$(grep -m1 "^$size " "$work/out.txt") || fail "no row for $size with $n processes"
    # size(2 words) + 3 per provider x 2 (4 from 3 processes: the sg
    # column) + Gloo 2 [+ OMPI (figure, winner) x 2 transports] + ratios 2.
    fields=$(echo "$row" | awk '{print NF}')
    per_provider=$((n >= 3 ? 4 : 3))
    expected=$((2 + 2 * per_provider + 2 + 4 * with_mpi + 2))
    [ "$fields" = "$expected" ] ||
      fail "$n processes, $size: $fields fields, expected $expected: $row"
    [ $with_mpi = 1 ] || continue
    if echo "$row" | grep -q -- " - \| -$"; then
      fail "$n processes, $size: a cell without a figure: $row"
    fi
    # The winners: the words after each OpenMPI figure (fields before the
    # two ratios, every second from the first OpenMPI figure).
    first=$((2 + 2 * per_provider + 2 + 1))
    for at in $((first + 1)) $((first + 3)); do
      won=$(echo "$row" | awk -v at=$at '{print $at}')
      [ "$won" = ip ] || [ "$won" = oop ] ||
        fail "$n processes, $size: OpenMPI winner '$won' is not ip or oop: $row"
    done
    # Both variants over both transports, each a figure.
    variants=$(table_rows "OpenMPI MPI_Allreduce per variant" "$work/out.txt" | grep "^$size ") ||
      fail "$n processes, $size: no per-variant row"
    echo "$variants" | awk '{exit !(NF == 6 && $3 > 0 && $4 > 0 && $5 > 0 && $6 > 0)}' ||
      fail "$n processes, $size: per-variant row without 4 figures: $variants"
  done
done

# --calibration: the plan column takes the algorithm the calibration's tcp
# curves predict fastest (as oflite compile --calibration), whatever the
# size rule says; a calibration that favours the exchange gets "exch" at
# both sizes, one that favours the ring "ring"; an unreadable one exits 2
# naming the flag.
calibration() {  # $1: ring's us, $2: exchange's us, at both sizes
  cat <<CAL
version: 1
transport {
  name: "tcp"
  latency_us: 10
  gbyte_per_s: 1
  collective { algorithm: COLLECTIVE_RING_ALL_REDUCE ranks: 2
    point { bytes: 4096 us: $1 } point { bytes: 16384 us: $1 } }
  collective { algorithm: COLLECTIVE_EXCHANGE_ALL_REDUCE ranks: 2
    point { bytes: 4096 us: $2 } point { bytes: 16384 us: $2 } }
}
CAL
}
calibration 1 1000 > "$work/ring.pbtxt"
calibration 1000 1 > "$work/exch.pbtxt"
for want in ring exch; do
  "$bench" --nproc=2 --repeats=1 --min_bytes=4096 --max_bytes=16384 --comm=tcp --gloo=0 \
    --calibration="$work/$want.pbtxt" > "$work/cal.txt"
  cat "$work/cal.txt"
  grep -q "^The plan's algorithm (the calibration's fastest prediction)$" "$work/cal.txt" ||
    fail "--calibration: no algorithm table naming the calibration"
  chosen=$(table_rows "The plan's algorithm" "$work/cal.txt" | awk '{print $3}' | sort -u)
  [ "$chosen" = "$want" ] || fail "--calibration favouring $want: the plan took '$chosen'"
done
echo "version: 1 transport {" > "$work/broken.pbtxt"
status=0
"$bench" --nproc=2 --calibration="$work/broken.pbtxt" > "$work/bad.txt" 2>&1 || status=$?
[ $status = 2 ] && grep -q -- "--calibration" "$work/bad.txt" ||
  { cat "$work/bad.txt"; fail "a broken calibration: exit $status, or no flag named"; }

if [ $with_mpi = 1 ]; then
  # One variant only: every winner is it, one per-variant column.
  "$bench" --nproc=2 --repeats=1 --min_bytes=4096 --max_bytes=4096 --comm=tcp --gloo=0 \
    --iterations=3 --mpi_bench="$work/mpi_allreduce_bench" --mpi_btl=tcp \
    --mpi_variant=out_of_place \
    > "$work/one.txt"
  cat "$work/one.txt"
  row=$(grep -m1 "^4 KiB " "$work/one.txt") || fail "--mpi_variant=out_of_place: no row"
  # size 2 + tcp 3 + OMPI tcp (figure, winner) 2 + ratio 1.
  echo "$row" | awk '{exit !(NF == 8 && $6 > 0 && $7 == "oop")}' ||
    fail "--mpi_variant=out_of_place: expected an oop figure: $row"
  grep -q "^size  *tcp oop$" "$work/one.txt" ||
    fail "--mpi_variant=out_of_place: per-variant table not only 'tcp oop'"

  # The standalone script: both variants' columns and the winner's name.
  tools/bench/mpi_allreduce_bench.sh --nproc=2 --btl=vader --repeats=1 --min_bytes=4096 \
    --max_bytes=4096 --p2p=0 > "$work/script.txt"
  cat "$work/script.txt"
  grep -q "^size  *in-place  *out-of-place  *best$" "$work/script.txt" ||
    fail "mpi_allreduce_bench.sh: no in-place/out-of-place header"
  grep -q "^4 KiB  *[0-9][0-9]*  *[0-9][0-9]*  *\(in-place\|out-of-place\)$" "$work/script.txt" ||
    fail "mpi_allreduce_bench.sh: no 4 KiB row with both figures and a winner"
fi
echo PASS
