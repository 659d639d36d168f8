#!/usr/bin/env bash
# Runs ON the GPU machine, from the staged folder (gpu_stage/, made by
# tools/gpu/build_gpu.sh), in one call of a few minutes:
#   1. the CUDA device tests and every CUDA kernel against its CPU kernel,
#   2. the MLP and LeNet-5 training jobs on cuda:0 against the CPU, 20 iterations:
#      the compiled plans through the actor runtime (CUDA zones, stream
#      contexts, copy actors) against the CPU plans, and the single-stream
#      executor against the reference executor; plus the runtime's GPU tests,
#   3. the training benchmark next to PyTorch eager and CUDA-graph replay,
# and prints a short table last. Exit status 0 only if 1 and 2 passed.
#
#   bash gpu_stage/run_gpu_check.sh [--quick]     (--quick: fewer bench steps)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"
if [[ ! -d bin && -f bin.tar.xz ]]; then
  tar -xJf bin.tar.xz || { echo "run_gpu_check: cannot unpack bin.tar.xz"; exit 2; }
fi

venv_site=/opt/torch/.venv/lib/python3.12/site-packages
libs=("$venv_site/nvidia/cudnn/lib")
for d in "$venv_site"/nvidia/*/lib "$venv_site"/nvidia/cu13/lib /usr/local/cuda/lib64 \
         /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d "$d" ]] && libs+=("$d")
done
LD_LIBRARY_PATH="$(IFS=:; echo "${libs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
python=/opt/torch/.venv/bin/python
[[ -x "$python" ]] || python=python3

iters=200
[[ "${1:-}" == "--quick" ]] && iters=50

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2
echo "commit $(cat COMMIT 2>/dev/null || echo unknown)"
missing="$(for f in bin/*; do ldd "$f" | grep 'not found'; done | sort -u)"
if [[ -n "$missing" ]]; then
  echo "run_gpu_check: unresolved libraries (LD_LIBRARY_PATH=$LD_LIBRARY_PATH):"
  echo "$missing"
  exit 2
fi

declare -A result
check_lines="$(mktemp)"  # the gpu_check verdict lines, repeated in the summary
run_step() {  # name, timeout seconds, command...
  local name="$1" limit="$2"
  shift 2
  echo "== $name"
  local start=$SECONDS log
  log="$(mktemp)"
  timeout "$limit" "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local verdict=PASS
  # A skipped test is not a pass: without a GPU everything reports SKIPPED.
  grep -q '\[  SKIPPED \]\|SKIPPED: no CUDA device' "$log" && verdict=SKIPPED
  [[ $rc -ne 0 && $rc -ne 77 ]] && verdict="FAIL(rc=$rc)"
  [[ $rc -eq 124 ]] && verdict="TIMEOUT(${limit}s)"
  grep -E '^gpu_check ' "$log" >> "$check_lines" || true
  rm -f "$log"
  result[$name]="$verdict $((SECONDS - start))s"
}

run_step device_tests 60 bin/cuda_device_test
run_step runtime_pieces 60 bin/cuda_runtime_pieces_test
run_step kernel_coverage 60 bin/kernel_coverage_test
run_step kernels_vs_cpu 180 bin/cuda_kernels_test
run_step runtime_on_gpu 120 bin/cuda_runtime_test
run_step plans_vs_cpu 240 bin/gpu_check --iters 20
echo "== train_gpu"
bench_out="$(timeout 300 bin/train_gpu --iters "$iters" --warmup 30 --python "$python" \
             --torch_script tools/bench/train_gpu_torch.py 2>&1)"
bench_rc=$?
echo "$bench_out"

echo
echo "================ GPU check summary ================"
for name in device_tests runtime_pieces kernel_coverage kernels_vs_cpu runtime_on_gpu plans_vs_cpu; do
  printf '%-16s %s\n' "$name" "${result[$name]}"
done
cat "$check_lines"
rm -f "$check_lines"
echo "--- step time (ms), FP32: oflite = executor, median of CUDA-event intervals; runtime = compiled plan through the actor runtime, wall clock per step incl. CPU loading + H2D ---"
echo "$bench_out" | grep -E '^(model|mlp|lenet5) ' || echo "train_gpu failed (rc=$bench_rc)"
for name in device_tests runtime_pieces kernel_coverage kernels_vs_cpu runtime_on_gpu plans_vs_cpu; do
  [[ "${result[$name]}" == PASS* ]] || exit 1
done
exit 0
