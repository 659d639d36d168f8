#!/usr/bin/env bash
# epoch_bench: the README main job's epoch (//examples:mlp_fashion_mnist:
# 784-256-256-10 MLP, Fashion-MNIST, batch 64, SGD lr 0.1, then the test
# split) next to the same epoch in PyTorch (tools/bench/mlp_epoch_torch.py),
# data loading included, both processes pinned to the same cores (taskset)
# and given that many computing threads (oflite: --cpu-threads N; PyTorch:
# set_num_threads(N), one interop thread). Samples alternate oflite, PyTorch.
# Prints per sample and the medians: whole-process wall time and user+sys
# CPU time (/usr/bin/time: includes start-up, compiling the plan or
# importing torch, loading, training, testing), the training time each side
# reports, and the test accuracy.
#
#   bazel build //examples:mlp_fashion_mnist
#   tools/bench/epoch_bench.sh [--cores 1] [--samples 5] [--python /usr/bin/python3]
set -u
cores=1; samples=5; python=/usr/bin/python3
usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --help|-h) usage; exit 0 ;;
    --cores) cores="$2"; shift 2 ;;
    --samples) samples="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    *) echo "epoch_bench: unknown flag '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$cores" =~ ^[1-9][0-9]*$ && "$samples" =~ ^[1-9][0-9]*$ ]] ||
  { echo "epoch_bench: --cores and --samples must be positive integers" >&2; exit 2; }
root="$(cd "$(dirname "$0")/../.." && pwd)"
example="$root/bazel-bin/examples/mlp_fashion_mnist"
peer="$root/tools/bench/mlp_epoch_torch.py"
[[ -x "$example" ]] || { echo "epoch_bench: build it first: bazel build //examples:mlp_fashion_mnist" >&2; exit 2; }
for tool in taskset /usr/bin/time "$python"; do
  command -v "$tool" > /dev/null || { echo "epoch_bench: $tool not found" >&2; exit 2; }
done
available=$(nproc)
(( cores <= available )) || { echo "epoch_bench: --cores $cores but only $available available" >&2; exit 2; }
pin="0-$((cores - 1))"
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

echo "epoch_bench: $samples samples per side, cores $pin, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %6s %8s %8s %8s %9s\n' side sample wall_s cpu_s train_s accuracy
for ((s = 1; s <= samples; ++s)); do
  rm -rf "$tmp/out"
  if ! taskset -c "$pin" /usr/bin/time -f 'TIME %e %U %S' -o "$tmp/time" \
      "$example" --out-dir "$tmp/out" -- --cpu-threads "$cores" --log-every 1000 > "$tmp/log" 2>&1; then
    echo "epoch_bench: oflite failed:"; tail -5 "$tmp/log"; exit 1
  fi
  read -r _ wall user sys < <(grep '^TIME' "$tmp/time")
  train=$(sed -n 's/^trained iterations .* in \([0-9.]*\)s.*/\1/p' "$tmp/log")
  accuracy=$(sed -n 's/^test .*accuracy \([0-9.]*\).*/\1/p' "$tmp/log")
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}')
  printf '%-8s %6d %8s %8s %8s %9s\n' oflite "$s" "$wall" "$cpu" "$train" "$accuracy"
  echo "$wall $cpu $train $accuracy" >> "$tmp/ours"
  if taskset -c "$pin" /usr/bin/time -f 'TIME %e %U %S' -o "$tmp/time" \
      "$python" "$peer" --threads "$cores" > "$tmp/log" 2>&1; then
    read -r _ wall user sys < <(grep '^TIME' "$tmp/time")
    read -r _ _ _ train _ _ _ accuracy < <(tail -1 "$tmp/log")
    cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}')
    printf '%-8s %6d %8s %8s %8s %9s\n' pytorch "$s" "$wall" "$cpu" "$train" "$accuracy"
    echo "$wall $cpu $train $accuracy" >> "$tmp/peer"
  else
    echo "pytorch peer failed (skipped):"; tail -3 "$tmp/log"
  fi
done
echo "medians (load average now $(cut -d' ' -f1-3 /proc/loadavg)):"
for side in ours peer; do
  label=oflite; [[ $side == peer ]] && label=pytorch
  [[ -s "$tmp/$side" ]] || continue
  printf '%-8s %6s %8s %8s %8s %9s\n' "$label" median \
    "$(cut -d' ' -f1 "$tmp/$side" | median)" "$(cut -d' ' -f2 "$tmp/$side" | median)" \
    "$(cut -d' ' -f3 "$tmp/$side" | median)" "$(cut -d' ' -f4 "$tmp/$side" | median)"
done
