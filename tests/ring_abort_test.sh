#!/usr/bin/env bash
# A local failure of one rank while its peers wait in a ring all-reduce, with
# real processes over TCP on loopback: a 3-machine data-parallel MLP where
# rank 1 runs a copy of the plan whose learning rate grows by 1e30 from
# iteration 5 on (poison_plan), so `--check-nan` fails on rank 1 a few
# iterations into the run while ranks 0 and 2 wait for its gradients in the
# next all-reduce. (Failing at iteration 1 raced rank 0's first loss log: the
# backward does not wait for the loss's gather, so rank 1 can fail before
# rank 0 has printed iteration 0.) Rank 1 must exit non-zero
# naming the NaN, and ranks 0 and 2 must exit non-zero within 30 s of it
# (the ring deadline is 120 s, the watchdog 60 s) naming rank 1 with its
# error: "rank 1 failed: <its error>", which only the abort notice that
# `oflite run` broadcasts on a failure carries ("lost rank 1", the lost
# connection, is not enough).
set -u
source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
POISON="${TEST_SRCDIR}/oneflow_lite/tests/poison_plan"
fresh_tmp ring_abort

: > "$TMP/three.pbtxt"
for m in 0 1 2; do
  echo "machine { id: $m address: \"127.0.0.$((m + 1))\" cpu_devices: 1 }" >> "$TMP/three.pbtxt"
done
"$WRITE_JOB" "$TMP/dp.job.pb" --batch 33 --features 784 --hidden 64 --classes 10 \
    --iterations 1000 --placement 0-2:cpu:0 > "$TMP/out" 2>&1 &&
  "$OFLITE" compile --job "$TMP/dp.job.pb" --cluster "$TMP/three.pbtxt" -o "$TMP/dp.plan.pb" \
    --quiet > "$TMP/out" 2>&1 &&
  "$POISON" "$TMP/dp.plan.pb" "$TMP/poisoned.plan.pb" 1 5 > "$TMP/out" 2>&1 ||
  { echo "FAIL: preparing the plans"; tail -20 "$TMP/out"; exit 1; }

PORT=$(free_port)
export OFLITE_JOB_TOKEN=ring-abort-test
declare -A PID RC END
for rank in 0 1 2; do
  plan="$TMP/dp.plan.pb"; [[ $rank == 1 ]] && plan="$TMP/poisoned.plan.pb"
  OFLITE_HOST=127.0.0.$((rank + 1)) "$OFLITE" run --plan "$plan" --rank $rank \
    --master 127.0.0.1:$PORT --comm tcp --check-nan --eval=false --log-every 1 \
    > "$TMP/r$rank.log" 2>&1 &
  PID[$rank]=$!
done
# Every wait is bounded: 90 s in all, then leftovers are killed.
for ((i = 0; i < 900; ++i)); do
  running=0
  for rank in 0 1 2; do
    [[ -n "${END[$rank]:-}" ]] && continue
    if kill -0 "${PID[$rank]}" 2>/dev/null; then running=1; continue; fi
    wait "${PID[$rank]}"; RC[$rank]=$?; END[$rank]=$(date +%s%N)
  done
  (( running )) || break
  sleep 0.1
done
for rank in 0 1 2; do
  if [[ -z "${END[$rank]:-}" ]]; then
    echo "FAIL: rank $rank still running after 90 s"; tail -5 "$TMP/r$rank.log"
    kill -9 "${PID[$rank]}" 2>/dev/null; wait "${PID[$rank]}" 2>/dev/null; fail=1
  fi
done
(( fail )) && exit 1

if [[ ${RC[1]} == 0 ]] || ! grep -q "NaN" "$TMP/r1.log"; then
  echo "FAIL: rank 1 (exit ${RC[1]}) did not fail on the NaN check"; tail -5 "$TMP/r1.log"; fail=1
fi
failed_at=$(grep -o "at iteration [0-9]*" "$TMP/r1.log" | head -1 | grep -o "[0-9]*$")
if [[ -z "$failed_at" ]] || (( failed_at < 5 )); then
  echo "FAIL: rank 1 failed at iteration '${failed_at}', expected 5 or later (poison_plan)"
  tail -3 "$TMP/r1.log"; fail=1
else
  echo "ok: rank 1 failed on the NaN check at iteration $failed_at"
fi
grep -q "iter " "$TMP/r0.log" ||
  { echo "FAIL: rank 0 never trained (the failure must come mid-run)"; tail -5 "$TMP/r0.log"; fail=1; }
for rank in 0 2; do
  after_ms=$(( (END[$rank] - END[1]) / 1000000 ))
  if [[ ${RC[$rank]} == 0 ]]; then
    echo "FAIL: rank $rank exit 0 after rank 1 failed"; tail -5 "$TMP/r$rank.log"; fail=1
  elif (( after_ms > 30000 )); then
    echo "FAIL: rank $rank exited ${after_ms} ms after rank 1"; fail=1
  elif grep -q "rank 1 failed: .*NaN" "$TMP/r$rank.log"; then
    echo "ok: rank $rank exit ${RC[$rank]} ${after_ms} ms after rank 1, with its error (abort notice)"
  else
    echo "FAIL: rank $rank did not report rank 1's error"; tail -5 "$TMP/r$rank.log"; fail=1
  fi
done
exit $fail
