#!/usr/bin/env bash
# Runs ON the GPU machine, from the staged folder (gpu_stage/, made by
# tools/gpu/build_gpu.sh), inside ONE device call of at most ~560 s:
#   1. the CUDA device tests and every CUDA kernel against its CPU kernel,
#   2. the MLP and LeNet-5 training jobs on cuda:0 against the CPU (the
#      compiled plans through the actor runtime, the single-stream executor
#      against the reference executor) and the runtime's GPU tests,
#   3. the training benchmark next to PyTorch eager and CUDA-graph replay,
# then prints a summary table last (the device tool returns the tail).
#
#   bash gpu_stage/run_gpu_check.sh [--quick] [--budget SECONDS]
#
# Time: one global budget (default 540 s, or $GPU_CHECK_BUDGET) covers every
# step; each step runs under `timeout` with min(its own cap, what is left
# minus the reserve kept for the summary), and a step that no longer fits is
# reported NOT_RUN. The summary is always printed.
# Logs: everything is written to $OUT/gpu_check.log as it happens (so a hang
# still leaves the log), the summary to $OUT/gpu_check_summary.txt
# ($OUT unset: ./gpu_check_out/).
# Verdicts per step: PASS (rc 0, at least one test passed, every skipped
# test skipped for a reason this machine explains, e.g. "needs 2 CUDA
# devices" on a one-GPU machine), FAIL(rc=N), TIMEOUT, SKIPPED (everything
# skipped, or a test skipped for an unexplained reason: on a GPU machine
# that hides a check), NOT_RUN (no time left).
# Exit status: 0 when every step PASSed; 1 when a step failed, timed out or
# skipped; 2 on a set-up problem (missing libraries, no GPU); 4 when nothing
# failed but a step did not fit in the budget.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

budget="${GPU_CHECK_BUDGET:-540}"
quick=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) quick=1 ;;
    --budget) budget="$2"; shift ;;
    *) echo "run_gpu_check: unknown argument '$1'"; exit 2 ;;
  esac
  shift
done
readonly reserve=15  # seconds kept for the summary
start_time=$SECONDS

out="${OUT:-$here/gpu_check_out}"
mkdir -p "$out"
log="$out/gpu_check.log"
summary_file="$out/gpu_check_summary.txt"
: > "$log"
# Everything from here on goes to the terminal and to the log.
exec > >(tee -a "$log") 2>&1

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
export PYTHONUNBUFFERED=1

echo "== machine"
gpus="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | grep -c . || true)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -4
echo "gpus $gpus  commit $(cat COMMIT 2>/dev/null || echo unknown)  budget ${budget}s"
if [[ "${gpus:-0}" -lt 1 ]]; then
  echo "run_gpu_check: no GPU visible (nvidia-smi); nothing here can run"
  exit 2
fi
missing="$(for f in bin/*; do ldd "$f" | grep 'not found'; done | sort -u)"
if [[ -n "$missing" ]]; then
  echo "run_gpu_check: unresolved libraries (LD_LIBRARY_PATH=$LD_LIBRARY_PATH):"
  echo "$missing"
  exit 2
fi

steps=()
declare -A verdict detail
check_lines="$(mktemp)"  # gpu_check verdict lines, repeated in the summary

# Seconds a step may still take: its cap, or less when the budget is short.
time_for() {
  local cap="$1" left=$((budget - (SECONDS - start_time) - reserve))
  ((left < cap)) && cap=$left
  echo "$cap"
}

# Skipped gtest tests of a log, one "name<TAB>reason" line each.
skipped_tests() {
  awk '
    /^\[ RUN      \]/ { reason = ""; want = 0 }
    / Skipped$/       { want = 1; next }
    want && NF        { reason = $0; want = 0 }
    /^\[  SKIPPED \] [^ ]+ \([0-9]+ ms\)/ { print $4 "\t" reason }
  ' "$1"
}

# Whether a skip reason is explained by this machine (too few GPUs).
skip_is_explained() {
  local reason="$1"
  if [[ "$reason" =~ needs\ ([0-9]+)\ CUDA\ devices ]]; then
    ((BASH_REMATCH[1] > gpus)) && return 0
  fi
  return 1
}

# run_step NAME CAP_SECONDS MIN_SECONDS COMMAND...
run_step() {
  local name="$1" cap="$2" min="$3"
  shift 3
  steps+=("$name")
  local limit
  limit="$(time_for "$cap")"
  if ((limit < min)); then
    verdict[$name]="NOT_RUN"
    detail[$name]="budget: ${limit}s left, needs ${min}s"
    echo "== $name: NOT RUN (${limit}s left of the budget)"
    return
  fi
  echo "== $name (limit ${limit}s): $*"
  local begin=$SECONDS step_log
  step_log="$(mktemp)"
  timeout --kill-after=5 "$limit" "$@" 2>&1 | tee "$step_log"
  local rc=${PIPESTATUS[0]}
  local passed skipped_total unexplained=0 explained=0 reasons=""
  passed="$(grep -c '^\[       OK \]' "$step_log" || true)"
  while IFS=$'\t' read -r test reason; do
    [[ -z "$test" ]] && continue
    if skip_is_explained "$reason"; then
      explained=$((explained + 1))
    else
      unexplained=$((unexplained + 1))
      ((unexplained <= 3)) && reasons+=" $test ($reason);"
      ((unexplained == 4)) && reasons+=" ...;"
    fi
  done < <(skipped_tests "$step_log")
  skipped_total=$((explained + unexplained))
  grep -E '^gpu_check ' "$step_log" >> "$check_lines" || true
  local v
  if [[ $rc -eq 124 || $rc -eq 137 ]]; then
    v="TIMEOUT(${limit}s)"
  elif [[ $rc -eq 77 ]] || grep -q 'SKIPPED: no CUDA device' "$step_log"; then
    v="SKIPPED"
    reasons=" the program found no CUDA device;"
  elif [[ $rc -ne 0 ]]; then
    v="FAIL(rc=$rc)"
  elif ((unexplained > 0)); then
    v="SKIPPED"
  elif ((skipped_total > 0 && passed == 0)); then
    v="SKIPPED"
  else
    v="PASS"
  fi
  verdict[$name]="$v"
  detail[$name]="$((SECONDS - begin))s"
  if grep -q '^\[==========\]' "$step_log"; then
    detail[$name]+=", $passed passed, $skipped_total skipped ($explained explained)"
  fi
  [[ -n "$reasons" ]] && detail[$name]+=";$reasons"
  rm -f "$step_log"
}

iters=200 warmup=30
((quick)) && iters=50 && warmup=10

run_step device_tests 40 5 bin/cuda_device_test
run_step runtime_pieces 40 5 bin/cuda_runtime_pieces_test
run_step kernel_coverage 30 5 bin/kernel_coverage_test
run_step kernels_vs_cpu 120 20 bin/cuda_kernels_test
run_step reduce_exact 30 5 bin/reduce_launch_test
run_step runtime_on_gpu 90 20 bin/cuda_runtime_test
run_step plans_vs_cpu 120 30 bin/gpu_check --iters 20
# The benchmark gets what is left (it trims its own configurations to fit).
bench_limit="$(time_for 300)"
run_step train_gpu 300 60 bin/train_gpu --iters "$iters" --warmup "$warmup" \
  --budget_s "$((bench_limit > 10 ? bench_limit - 10 : 1))" --python "$python" \
  --torch_script tools/bench/train_gpu_torch.py

{
  echo
  echo "================ GPU check summary ================"
  for name in "${steps[@]}"; do
    printf '%-16s %-18s %s\n' "$name" "${verdict[$name]}" "${detail[$name]}"
  done
  cat "$check_lines"
  echo "--- step time (ms), FP32, median per step (see docs/gpu.md, \"Benchmark\") ---"
  grep -E '^(model|mlp|mlp4k|lenet5) ' "$log" || echo "(no benchmark table)"
  # Where each row's time goes (train_gpu's per-op timing of the executor).
  grep -E '^kernel_profile ' "$log" || true
  echo "elapsed $((SECONDS - start_time))s of ${budget}s; full log: $log"
} | tee "$summary_file"
rm -f "$check_lines"

status=0
for name in "${steps[@]}"; do
  case "${verdict[$name]}" in
    PASS) ;;
    NOT_RUN) [[ $status -eq 0 ]] && status=4 ;;
    *) status=1 ;;
  esac
done
echo "run_gpu_check: exit $status"
exit $status
