#!/usr/bin/env bash
# run_gpu_check.sh's verdicts and time budget, on a staged folder of fake
# binaries (shell scripts printing what the real ones print) and a fake
# nvidia-smi: no GPU needed. Checks that
#   - a test skipped because it needs 2 GPUs on a 1-GPU machine does not
#     hide the passes of its step, and the run exits 0 when all else passed,
#   - a step whose tests all skip ("no CUDA device") is SKIPPED and exit 1,
#   - a failing step is FAIL, and a hanging one is stopped within the global
#     budget, the summary is still printed and the full log is under $OUT,
#   - a step that no longer fits the budget is NOT_RUN (exit 4).
set -euo pipefail
script="$(cd "$(dirname "$0")" && pwd)/run_gpu_check.sh"
[[ -f "$script" ]] || script="$TEST_SRCDIR/$TEST_WORKSPACE/tools/gpu/run_gpu_check.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fail() { echo "FAIL: $*"; exit 1; }

gtest_pass() {  # a gtest binary: N passing tests
  cat <<'EOF'
#!/usr/bin/env bash
echo "[==========] Running 2 tests from 1 test suite."
echo "[ RUN      ] Suite.A"
echo "[       OK ] Suite.A (1 ms)"
echo "[ RUN      ] Suite.B"
echo "[       OK ] Suite.B (1 ms)"
echo "[==========] 2 tests from 1 test suite ran. (2 ms total)"
echo "[  PASSED  ] 2 tests."
EOF
}

gtest_skip() {  # one pass, one skip with reason $1
  cat <<EOF
#!/usr/bin/env bash
echo "[==========] Running 2 tests from 1 test suite."
echo "[ RUN      ] Suite.One"
echo "[       OK ] Suite.One (5 ms)"
echo "[ RUN      ] Suite.Two"
echo "x_test.cc:62: Skipped"
echo "$1"
echo ""
echo "[  SKIPPED ] Suite.Two (0 ms)"
echo "[==========] 2 tests from 1 test suite ran. (5 ms total)"
echo "[  PASSED  ] 1 test."
echo "[  SKIPPED ] 1 test, listed below:"
echo "[  SKIPPED ] Suite.Two"
EOF
}

stage() {  # stage DIR: every binary passes
  local dir="$1"
  mkdir -p "$dir/bin" "$dir/tools/bench" "$dir/fakebin"
  cp "$script" "$dir/run_gpu_check.sh"
  for b in cuda_device_test cuda_runtime_pieces_test kernel_coverage_test cuda_kernels_test \
           reduce_launch_test; do
    gtest_pass > "$dir/bin/$b"
  done
  gtest_skip "needs 2 CUDA devices" > "$dir/bin/cuda_runtime_test"
  printf '#!/usr/bin/env bash\necho "gpu_check plan_mlp PASS"\n' > "$dir/bin/gpu_check"
  printf '#!/usr/bin/env bash\necho "model batch x"\necho "mlp 64 0.1"\necho "kernel_profile mlp 64: device ops 0.1 ms/step"\n' > "$dir/bin/train_gpu"
  printf '#!/usr/bin/env bash\necho "NVIDIA H200, 1, 141 GiB"\n' > "$dir/fakebin/nvidia-smi"
  chmod +x "$dir"/bin/* "$dir/fakebin/nvidia-smi"
}

run() {  # run DIR [args]: sets rc, output in DIR/out.txt
  local dir="$1"
  shift
  set +e
  PATH="$dir/fakebin:$PATH" OUT="$dir/OUT" bash "$dir/run_gpu_check.sh" "$@" > "$dir/out.txt" 2>&1
  rc=$?
  set -e
}

# 1. An explained skip does not hide passes: exit 0.
stage "$work/ok"
run "$work/ok"
[[ $rc -eq 0 ]] || { cat "$work/ok/out.txt"; fail "explained skip: exit $rc, want 0"; }
grep -qE '^runtime_on_gpu +PASS .*1 passed, 1 skipped \(1 explained\)' "$work/ok/out.txt" ||
  { cat "$work/ok/out.txt"; fail "runtime_on_gpu not PASS with its skip counted"; }
[[ -s "$work/ok/OUT/gpu_check.log" && -s "$work/ok/OUT/gpu_check_summary.txt" ]] ||
  fail "no log or summary under \$OUT"
grep -q 'gpu_check plan_mlp PASS' "$work/ok/OUT/gpu_check_summary.txt" || fail "summary lacks gpu_check lines"
grep -q '^kernel_profile mlp 64: device ops' "$work/ok/OUT/gpu_check_summary.txt" ||
  fail "summary lacks the benchmark's kernel_profile lines"

# 2. Everything skipped for want of a device: SKIPPED, exit 1.
stage "$work/skip"
gtest_skip "no CUDA device on this machine" > "$work/skip/bin/cuda_kernels_test"
run "$work/skip"
[[ $rc -eq 1 ]] || fail "unexplained skip: exit $rc, want 1"
grep -qE '^kernels_vs_cpu +SKIPPED' "$work/skip/out.txt" || { cat "$work/skip/out.txt"; fail "not SKIPPED"; }

# 3. A failure and a hang: FAIL, TIMEOUT within the budget, summary printed.
stage "$work/bad"
printf '#!/usr/bin/env bash\necho broken\nexit 3\n' > "$work/bad/bin/cuda_device_test"
printf '#!/usr/bin/env bash\necho "gpu_check plan_mlp hanging"\nsleep 600\n' > "$work/bad/bin/gpu_check"
begin=$SECONDS
run "$work/bad" --budget 55
elapsed=$((SECONDS - begin))
[[ $rc -eq 1 ]] || { cat "$work/bad/out.txt"; fail "failure: exit $rc, want 1"; }
((elapsed < 55)) || fail "the run took ${elapsed}s, beyond its 55 s budget"
grep -qE '^device_tests +FAIL\(rc=3\)' "$work/bad/out.txt" || fail "device_tests not FAIL(rc=3)"
grep -qE '^plans_vs_cpu +TIMEOUT' "$work/bad/out.txt" || { cat "$work/bad/out.txt"; fail "no TIMEOUT"; }
grep -qE '^train_gpu +NOT_RUN' "$work/bad/out.txt" || fail "train_gpu should not fit"
grep -q 'GPU check summary' "$work/bad/OUT/gpu_check.log" || fail "summary missing from the log"
grep -q 'hanging' "$work/bad/OUT/gpu_check.log" || fail "the hung step's output is not in the log"

# 4. Nothing failed but the benchmark did not fit: exit 4.
stage "$work/short"
run "$work/short" --budget 70
[[ $rc -eq 4 ]] || { cat "$work/short/out.txt"; fail "short budget: exit $rc, want 4"; }
echo "run_gpu_check_test: PASS"
