#!/usr/bin/env bash
# Timeline traces end to end (docs/tracing.md):
#  - a 2-machine data-parallel MLP (two real `oflite run` processes over
#    TCP, started by `oflite launch ... -- --trace DIR --trace-iters 8:40`):
#    both rank files and the merged trace.json are valid trace-event JSON,
#    every flow has both ends, slices nest on every track, only the window's
#    iterations are recorded (trace_check.py, Python's own JSON parser);
#  - `oflite trace summary --json` of it agrees with trace_check.py's own
#    reading of the trace (per-op totals, step time, kernels + runtime + idle
#    = threads x step within 10 %, the critical path adds up) and with the
#    step time the session timed itself from the sink's reports (10 %);
#  - the two machines at the default level (acts), a 2-stage pipeline at
#    level acts (flows whose start a producer sends itself), a one-machine
#    `oflite run --trace FILE --trace-level messages`, and bad input (exit 2
#    naming the flag or the file).
set -u
source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
CHECK="${TEST_SRCDIR}/oneflow_lite/tools/oflite/trace_check.py"
fresh_tmp trace_test
expect() {  # expect WHAT COMMAND...: the command must succeed
  local what=$1; shift
  if ! "$@" > "$TMP/out" 2>&1; then echo "FAIL: $what"; tail -30 "$TMP/out"; fail=1; return 1; fi
}

echo 'machine { id: 0 address: "127.0.0.1" cpu_devices: 1 }' > "$TMP/two.pbtxt"
echo 'machine { id: 1 address: "127.0.0.2" cpu_devices: 1 }' >> "$TMP/two.pbtxt"
echo 'machine { id: 0 address: "127.0.0.1" cpu_devices: 1 }' > "$TMP/one.pbtxt"
"$WRITE_JOB" "$TMP/two.job.pb" --batch 32 --features 64 --hidden 32 --classes 4 \
    --iterations 48 --placement 0-1:cpu:0 > "$TMP/out" 2>&1 &&
  "$OFLITE" compile --job "$TMP/two.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/two.plan.pb" \
    --quiet > "$TMP/out" 2>&1 &&
  "$WRITE_JOB" "$TMP/pipe.job.pb" --batch 32 --features 64 --hidden 32 --classes 4 \
    --iterations 48 --stages 0:cpu:0,1:cpu:0 > "$TMP/out" 2>&1 &&
  "$OFLITE" compile --job "$TMP/pipe.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/pipe.plan.pb" \
    --quiet > "$TMP/out" 2>&1 &&
  "$WRITE_JOB" "$TMP/one.job.pb" --batch 32 --features 64 --hidden 32 --classes 4 \
    --iterations 40 --placement 0:cpu:0 > "$TMP/out" 2>&1 &&
  "$OFLITE" compile --job "$TMP/one.job.pb" --cluster "$TMP/one.pbtxt" -o "$TMP/one.plan.pb" \
    --quiet > "$TMP/out" 2>&1 || { echo "FAIL: preparing the plans"; cat "$TMP/out"; exit 1; }

# Two machines, traced window 8:40.
if expect "launch with --trace" timeout 300 "$OFLITE" launch --plan "$TMP/two.plan.pb" \
    --nproc 2 --comm tcp -- --eval=false --log-every 100 --trace "$TMP/tr" --trace-iters 8:40; then
  grep -q "merged the traces of 2 ranks" "$TMP/out" || { echo "FAIL: no merge line"; fail=1; }
  grep -q '"trace_level":"acts"' "$TMP/tr/rank-0.json" ||
    { echo "FAIL: the default level is not acts"; fail=1; }
  for r in 0 1; do
    expect "rank $r trace" python3 "$CHECK" "$TMP/tr/rank-$r.json" --window 8:40 --lone-rank ||
      cat "$TMP/out"
  done
  # A lone rank's flows end on the other rank: checked in the merged file.
  if expect "trace summary --json" "$OFLITE" trace summary --json "$TMP/tr/trace.json"; then
    cp "$TMP/out" "$TMP/summary.json"
    expect "merged trace and summary" python3 "$CHECK" "$TMP/tr/trace.json" --ranks 2 \
      --window 8:40 --expect-comm --expect-timed --summary "$TMP/summary.json" || true
    cat "$TMP/out"
  fi
  expect "trace summary (text)" "$OFLITE" trace summary "$TMP/tr/trace.json" &&
    { grep -q "critical path of iteration" "$TMP/out" && grep -q "communication" "$TMP/out"; } ||
    { echo "FAIL: text summary lacks its sections"; cat "$TMP/out"; fail=1; }
  grep -q '"clock_offset_ns"' "$TMP/tr/trace.json" ||
    { echo "FAIL: merged trace does not state the clock offsets"; fail=1; }
fi

# A 2-stage pipeline at level acts: its producers send "produced" to the
# other machine themselves (a CommNet actor there pulls the register), from
# handlings that record no slice of their own unless they send across.
if expect "pipeline launch with --trace" timeout 300 "$OFLITE" launch --plan "$TMP/pipe.plan.pb" \
    --nproc 2 --comm tcp -- --eval=false --log-every 100 --trace "$TMP/trp" --trace-iters 8:40; then
  if expect "pipeline trace summary --json" "$OFLITE" trace summary --json "$TMP/trp/trace.json"; then
    cp "$TMP/out" "$TMP/pipe.summary.json"
    expect "pipeline trace and summary" python3 "$CHECK" "$TMP/trp/trace.json" --ranks 2 \
      --window 8:40 --summary "$TMP/pipe.summary.json" || true
  fi
fi

# One machine, every iteration, every message handled (level messages;
# the two machines above ran the default level, acts).
if expect "run --trace" timeout 300 "$OFLITE" run --plan "$TMP/one.plan.pb" --eval=false \
    --log-every 100 --trace "$TMP/one.json" --trace-level messages; then
  grep -q '"trace_level":"messages"' "$TMP/one.json" ||
    { echo "FAIL: the one-machine trace does not state level messages"; fail=1; }
  "$OFLITE" trace summary --json "$TMP/one.json" > "$TMP/one.summary.json" &&
    expect "one-machine trace and summary" python3 "$CHECK" "$TMP/one.json" \
      --expect-timed --summary "$TMP/one.summary.json" || true
fi

# Ranks started by hand, one with --trace and one without: both end within
# seconds (not after the clock measurement's 60 s), non-zero, and the one
# that ends for itself names the flag and the other rank.
PORT=$(free_port)
for r in 0 1; do
  extra=(); [[ $r == 0 ]] && extra=(--trace "$TMP/mixed")
  OFLITE_JOB_TOKEN=mixed-trace OFLITE_HOST=127.0.0.1 timeout 40 "$OFLITE" run \
    --plan "$TMP/two.plan.pb" --rank $r --master 127.0.0.1:$PORT --comm tcp --eval=false \
    "${extra[@]}" > "$TMP/mixed-$r.log" 2>&1 &
  pids[$r]=$!
done
start=$SECONDS
wait "${pids[0]}"; rc0=$?
wait "${pids[1]}"; rc1=$?
if [[ $rc0 == 0 || $rc1 == 0 || $rc0 == 124 || $rc1 == 124 || $((SECONDS - start)) -gt 30 ]]; then
  echo "FAIL: ranks with and without --trace exited $rc0 and $rc1 after $((SECONDS - start)) s"
  cat "$TMP/mixed-0.log" "$TMP/mixed-1.log"; fail=1
elif ! grep -q "rank 0 traces but rank(s) 1 do not" "$TMP/mixed-0.log" &&
     ! grep -q "rank 1 does not trace but rank(s) 0 do" "$TMP/mixed-1.log"; then
  echo "FAIL: no rank named the other's --trace"; cat "$TMP/mixed-0.log" "$TMP/mixed-1.log"; fail=1
fi

# Bad input: exit 2 naming the flag or file.
"$OFLITE" run --plan "$TMP/one.plan.pb" --trace "$TMP/x.json" --trace-iters 7 > "$TMP/out" 2>&1
rc=$?
[[ $rc == 2 ]] && grep -q "trace-iters" "$TMP/out" ||
  { echo "FAIL: --trace-iters 7 exited $rc"; cat "$TMP/out"; fail=1; }
"$OFLITE" run --plan "$TMP/one.plan.pb" --trace-iters 1:3 > "$TMP/out" 2>&1
rc=$?
[[ $rc == 2 ]] && grep -q "needs --trace" "$TMP/out" ||
  { echo "FAIL: --trace-iters without --trace exited $rc"; cat "$TMP/out"; fail=1; }
"$OFLITE" run --plan "$TMP/one.plan.pb" --trace "$TMP/x.json" --trace-level all > "$TMP/out" 2>&1
rc=$?
[[ $rc == 2 ]] && grep -q "trace-level" "$TMP/out" ||
  { echo "FAIL: --trace-level all exited $rc"; cat "$TMP/out"; fail=1; }
"$OFLITE" trace summary "$TMP/missing.json" > "$TMP/out" 2>&1
rc=$?
[[ $rc == 2 ]] && grep -q "missing.json" "$TMP/out" ||
  { echo "FAIL: summary of a missing file exited $rc"; cat "$TMP/out"; fail=1; }
echo '{"traceEvents": [' > "$TMP/bad.json"
"$OFLITE" trace summary "$TMP/bad.json" > "$TMP/out" 2>&1
rc=$?
[[ $rc == 2 ]] && grep -q "bad.json" "$TMP/out" ||
  { echo "FAIL: summary of malformed JSON exited $rc"; cat "$TMP/out"; fail=1; }

[[ $fail == 0 ]] && echo "PASS"
exit $fail
