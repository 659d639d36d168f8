#!/usr/bin/env bash
# oflite launch with real 2-machine jobs (TCP on loopback):
#  - SIGTERM / SIGINT to launch reach every rank: each rank pid is gone
#    within a bound, and launch exits 128 + the signal saying it was
#    interrupted (the ranks used to keep running as orphans);
#  - kill -9 of rank 1 mid-training: launch exits 1 and its last line
#    blames rank 1 (killed by signal 9), not rank 0, which exits on its own
#    after losing rank 1 and may exit first;
#  - SIGSTOP of rank 1 mid-training: launch kills the frozen rank as soon as
#    rank 0 exits 4 (within 8 s of the SIGSTOP, peer loss included) and its
#    last line names rank 1.
# Every wait is bounded; leftovers are killed at the end.
set -u
source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
fresh_tmp launch_signal
LEFT=()
cleanup() { for pid in "${LEFT[@]}"; do kill -9 "$pid" 2> /dev/null; done; }
trap cleanup EXIT

echo 'machine { id: 0 address: "127.0.0.1" cpu_devices: 1 }' > "$TMP/two.pbtxt"
echo 'machine { id: 1 address: "127.0.0.2" cpu_devices: 1 }' >> "$TMP/two.pbtxt"
"$WRITE_JOB" "$TMP/two.job.pb" --batch 8 --features 16 --hidden 8 --classes 4 \
    --iterations 100000000 --placement 0-1:cpu:0 > "$TMP/out" 2>&1 &&
  "$OFLITE" compile --job "$TMP/two.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/two.plan.pb" \
    --quiet > "$TMP/out" 2>&1 || { echo "FAIL: preparing the plan"; cat "$TMP/out"; exit 1; }

# start_job LOG: launches the job in the background (LAUNCH: its pid) and
# waits up to 120 s until the job trains (rank 0 holds the sink and prints
# the progress); RANK_PIDS: launch's children.
start_job() {
  : > "$1"
  "$OFLITE" launch --plan "$TMP/two.plan.pb" --nproc 2 --comm tcp --grace_ms 3000 \
    -- --eval=false --log-every 200 > "$1" 2>&1 &
  LAUNCH=$!
  LEFT+=("$LAUNCH")
  for ((i = 0; i < 1200; ++i)); do
    grep -q '^\[rank 0\] iter ' "$1" && break
    kill -0 "$LAUNCH" 2> /dev/null || break
    sleep 0.1
  done
  RANK_PIDS=($(pgrep -P "$LAUNCH"))
  LEFT+=("${RANK_PIDS[@]}")
  if [[ ${#RANK_PIDS[@]} != 2 ]] || ! grep -q '^\[rank 0\] iter ' "$1"; then
    echo "FAIL: the job did not start training (ranks: ${RANK_PIDS[*]:-none})"; tail -20 "$1"
    return 1
  fi
}

# wait_launch SECONDS: waits for launch to exit (RC: its code, 999 if not).
wait_launch() {
  RC=999
  for ((i = 0; i < $1 * 10; ++i)); do
    kill -0 "$LAUNCH" 2> /dev/null || { wait "$LAUNCH"; RC=$?; return; }
    sleep 0.1
  done
}

for sig in TERM INT; do
  log="$TMP/$sig.log"
  start_job "$log" || { fail=1; continue; }
  kill -s "$sig" "$LAUNCH"
  wait_launch 30
  code=$(( 128 + $(kill -l "$sig") ))
  if [[ $RC != "$code" ]]; then
    echo "FAIL: SIG$sig: launch exit $RC, expected $code"; tail -5 "$log"; fail=1
  elif ! tail -1 "$log" | grep -q "oflite launch: interrupted by signal $(kill -l "$sig")"; then
    echo "FAIL: SIG$sig: no 'interrupted' line last"; tail -5 "$log"; fail=1
  fi
  for pid in "${RANK_PIDS[@]}"; do
    for ((i = 0; i < 50; ++i)); do kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2> /dev/null; then
      echo "FAIL: SIG$sig: rank pid $pid still running after launch exited"; fail=1
    fi
  done
  (( fail )) || echo "ok: SIG$sig forwarded: launch exit $RC, no rank left"
done

# rank1_pid: prints the pid of the started job's rank 1; status 1 (and a
# FAIL line) when there is none.
rank1_pid() {
  local pid
  for pid in "${RANK_PIDS[@]}"; do
    tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q -- "--rank 1 " && { echo "$pid"; return 0; }
  done
  echo "FAIL: rank 1 not found among ${RANK_PIDS[*]}" >&2
  return 1
}

log="$TMP/kill9.log"
if start_job "$log"; then
  rank1=$(rank1_pid) || fail=1
  kill -9 "$rank1"
  wait_launch 60
  last=$(tail -1 "$log")
  if [[ $RC != 1 ]]; then
    echo "FAIL: kill -9 rank 1: launch exit $RC"; tail -5 "$log"; fail=1
  elif [[ "$last" != "oflite launch: rank 1 was killed by signal 9"* ]]; then
    echo "FAIL: kill -9 rank 1: last line blames another: $last"; tail -5 "$log"; fail=1
  else
    echo "ok: kill -9 rank 1 blamed: $last"
  fi
else
  fail=1
fi

# SIGSTOP of rank 1 mid-training: rank 0 loses it (peer loss, about 5 s)
# and exits 4; launch then kills the frozen rank at once and its last line
# names rank 1, not rank 0. It used to wait out two grace periods (SIGTERM
# cannot reach a stopped process) and blame rank 0, the first to exit.
log="$TMP/sigstop.log"
if start_job "$log"; then
  rank1=$(rank1_pid) || fail=1
  start=$(date +%s%N)
  kill -STOP "$rank1"
  wait_launch 60
  elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  last=$(tail -1 "$log")
  if [[ $RC != 1 ]]; then
    echo "FAIL: SIGSTOP rank 1: launch exit $RC"; tail -5 "$log"; fail=1
  elif [[ "$last" != "oflite launch: rank 1 was frozen (stopped by a signal) after every other rank exited with code 4"* ]]; then
    echo "FAIL: SIGSTOP rank 1: last line does not name rank 1: $last"; tail -5 "$log"; fail=1
  elif (( elapsed_ms > 8000 )); then
    echo "FAIL: SIGSTOP rank 1: launch ended ${elapsed_ms} ms after the SIGSTOP"; tail -5 "$log"; fail=1
  else
    echo "ok: SIGSTOP rank 1 named after ${elapsed_ms} ms: $last"
  fi
  kill -0 "$rank1" 2> /dev/null && { echo "FAIL: the frozen rank $rank1 survived launch"; fail=1; }
else
  fail=1
fi
exit $fail
