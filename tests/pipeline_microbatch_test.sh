#!/usr/bin/env bash
# Micro-batched pipelines end to end with real processes on loopback
# (docs/compiler.md, "Micro-batches and pipeline schedules"): the
# Fashion-MNIST MLP split into 2 stages on 2 machines with 4 micro-batches,
# under GPipe and 1F1B, and data parallel x pipeline on 4 machines (each
# stage data parallel over 2 machines), each equal to one machine without
# micro-batches within 1e-5 relative over 50 iterations (losses and
# accuracies; the GPipe run's evaluation too). `oflite inspect` shows each
# stage's order and the bubble. With tcp (the default) also the training
# driver's bad --micro-batches / --pipeline-schedule: exit 2, naming the
# flag and the numbers with a valid choice.
# The transport is the first argument (tcp or shm).
set -u
source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
COMM="${1:-tcp}"
fresh_tmp pipeline_microbatch
MLP=(--batch 32 --features 784 --hidden 64 --classes 10 --iterations 50 --accuracy
     --fashion_mnist /usr/share/datasets/fashion-mnist)
# shellcheck source=tests/netns/compare_lib.sh
source "${TEST_SRCDIR}/oneflow_lite/tests/netns/compare_lib.sh"

cluster() { loopback_cluster "$@"; }  # cluster FILE MACHINES
compile() { compile_mlp "$@"; }   # compile NAME CLUSTER WRITE_JOB_ARGS...
launch() {  # launch NAME NPROC [RUN_FLAGS...]
  local name=$1 nproc=$2; shift 2
  timeout 120 "$OFLITE" launch --plan "$TMP/$name.plan.pb" --nproc "$nproc" --comm "$COMM" \
    -- --metrics-out "$TMP/$name.{rank}.txt" --eval-out "$TMP/$name.eval.{rank}.txt" "$@" \
    > "$TMP/$name.log" 2>&1 || { echo "FAIL: launch $name"; tail -20 "$TMP/$name.log"; fail=1; }
}

cluster "$TMP/one.pbtxt" 1
cluster "$TMP/two.pbtxt" 2
cluster "$TMP/four.pbtxt" 4

# The reference: one machine, one device, the whole batch per step.
compile ref "$TMP/one.pbtxt"
timeout 120 "$OFLITE" run --plan "$TMP/ref.plan.pb" --metrics-out "$TMP/ref.txt" \
  --eval-out "$TMP/ref.eval.txt" > "$TMP/ref.log" 2>&1 ||
  { echo "FAIL: reference run"; tail -20 "$TMP/ref.log"; fail=1; }

for schedule in gpipe 1f1b; do
  compile "pp_$schedule" "$TMP/two.pbtxt" --stages 0:cpu:0,1:cpu:0 --micro_batches 4 \
    --schedule "$schedule"
  "$OFLITE" inspect "$TMP/pp_$schedule.plan.pb" > "$TMP/pp_$schedule.inspect" 2>&1
  grep -q "^pipeline schedule: $schedule, 4 micro-batches, 2 stage(s), .*= 1/5 = 20.0%" \
    "$TMP/pp_$schedule.inspect" ||
    { echo "FAIL: inspect shows no $schedule schedule"; tail -5 "$TMP/pp_$schedule.inspect"; fail=1; }
  if [[ $schedule == gpipe ]]; then
    want="stage 0 (0:cpu:0): F0 F1 F2 F3 B0 B1 B2 B3"
    launch pp_gpipe 2
    compare_eval "2-stage GPipe evaluation equals 1 machine" ref pp_gpipe 2
  else
    want="stage 0 (0:cpu:0): F0 F1 B0 F2 B1 F3 B2 B3"
    launch pp_1f1b 2 --eval=false --trace "$TMP/trace" --trace-iters 10:20
    # The idle-share reader on the merged trace: one line per stage thread.
    /usr/bin/python3 "${TEST_SRCDIR}/oneflow_lite/tools/bench/pipeline_bubble.py" \
      "$TMP/trace/trace.json" --stages 2 --micro-batches 4 > "$TMP/bubble.txt" 2>&1 &&
      [[ $(grep -c "^  rank [01] m[01]/cpu0/s0 .* idle " "$TMP/bubble.txt") == 2 ]] &&
      grep -q "^ideal bubble (S-1)/(M+S-1) = 1/5 = 20.0%" "$TMP/bubble.txt" ||
      { echo "FAIL: pipeline_bubble.py"; cat "$TMP/bubble.txt"; fail=1; }
  fi
  grep -qF "$want" "$TMP/pp_$schedule.inspect" ||
    { echo "FAIL: $schedule order"; grep stage "$TMP/pp_$schedule.inspect"; fail=1; }
  compare "2 stages x 4 micro-batches ($schedule, $COMM) equal 1 machine" "$TMP/ref.txt" \
    "$TMP"/pp_$schedule.[0-9].txt

  # Data parallel x pipeline: stage 0 on machines 0-1, stage 1 on 2-3, the
  # batch split S(0) over each stage (8 rows per machine, 2 per micro-batch).
  compile "dpp_$schedule" "$TMP/four.pbtxt" --stages 0-1:cpu:0,2-3:cpu:0 --micro_batches 4 \
    --schedule "$schedule"
  launch "dpp_$schedule" 4 --eval=false
  compare "DP 2 x PP 2 x 4 micro-batches ($schedule, $COMM) equal 1 machine" "$TMP/ref.txt" \
    "$TMP"/dpp_$schedule.[0-9].txt
done

# The micro-batch row selections keep the data-parallel split: no boxing
# converts a data blob, only the losses' S(0) -> B and the gradients' P -> B
# (4 all-reduces, each over a stage's pair of machines; the last stage's
# two small gradients share one bucket).
"$OFLITE" inspect "$TMP/dpp_1f1b.plan.pb" > "$TMP/dpp.inspect" 2>&1
grep -q "^boxing conversions: all_gather x12 all_reduce x3$" "$TMP/dpp.inspect" &&
  grep -q "^  fused all-reduce buckets: 1, of 2 all-reduces$" "$TMP/dpp.inspect" ||
  { echo "FAIL: DP x PP boxing"; grep -A3 "^boxing" "$TMP/dpp.inspect"; fail=1; }

if [[ $COMM == tcp ]]; then
  MLP_EXAMPLE="${TEST_SRCDIR}/oneflow_lite/examples/mlp_fashion_mnist"
  expect_exit2() {  # expect_exit2 WANTED_TEXT ARGS...
    local want=$1; shift
    "$MLP_EXAMPLE" --compile-only --out-dir "$TMP/driver" "$@" > "$TMP/driver.out" 2>&1
    local rc=$?
    if [[ $rc != 2 ]] || ! grep -qF "$want" "$TMP/driver.out"; then
      echo "FAIL: mlp_fashion_mnist $*: exit $rc"; cat "$TMP/driver.out"; fail=1
    fi
  }
  expect_exit2 "flag '--micro-batches': 3 does not divide --batch 64; use 2 or 4" \
    --micro-batches 3
  expect_exit2 "flag '--micro-batches': 0 must be at least 1" --micro-batches 0
  expect_exit2 "do not divide the per-device batch 16 of data source" \
    --micro-batches 32 --devices 4
  expect_exit2 "flag '--pipeline-schedule': unknown pipeline schedule 'zigzag'; use gpipe" \
    --micro-batches 2 --pipeline-schedule zigzag
  "$MLP_EXAMPLE" --compile-only --out-dir "$TMP/driver" --micro-batches 4 \
    --pipeline-schedule gpipe > "$TMP/driver.out" 2>&1 &&
    grep -q "^pipeline schedule: gpipe, 4 micro-batches, 1 stage(s)" "$TMP/driver.out" ||
    { echo "FAIL: driver --micro-batches 4"; tail -5 "$TMP/driver.out"; fail=1; }
fi

[[ $fail == 0 ]] && echo "PASS" || echo "FAILED"
exit $fail
