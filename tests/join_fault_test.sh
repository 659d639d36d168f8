#!/usr/bin/env bash
# A rank lost during JOIN (issue 34), with real processes over TCP on
# loopback: 3 ranks, rank 1 stops itself (SIGSTOP, oflite run
# --test-freeze-at=join) right after joining the control plane, before it
# publishes its endpoints, while ranks 0 and 2 wait for it:
#  - left frozen: ranks 0 and 2 exit 4 naming rank 1 ("job ended by rank 1:
#    lost rank 1 while joining: ... sent nothing ...") within the peer timeout
#    (5 s) plus a heartbeat and slack, not at the 60 s connect timeout;
#  - then killed -9: ranks 0 and 2 exit 4 naming rank 1 within a few seconds.
# Not covered: the master killed before it answered the others' JOIN, or
# ending the job (rank 1 lost) while another rank is still dialing it: that
# rank cannot tell it from a master not started yet and redials until the
# connect timeout.
# Every wait is bounded; leftover processes are killed.
set -u
source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
fresh_tmp join_fault
export OFLITE_JOB_TOKEN=join-fault-test
if [[ -n ${TSAN_OPTIONS:-} ]]; then export TSAN_OPTIONS="$TSAN_OPTIONS:report_thread_leaks=0"; fi

: > "$TMP/cluster.pbtxt"
for m in 0 1 2; do
  echo "machine { id: $m address: \"127.0.0.$((m + 1))\" cpu_devices: 1 }" >> "$TMP/cluster.pbtxt"
done
"$WRITE_JOB" "$TMP/job.pb" --features 784 --hidden 32 --classes 10 --placement "0-2:cpu:0" \
    --batch 33 --iterations 1000000 > "$TMP/out" 2>&1 &&
  "$OFLITE" compile --job "$TMP/job.pb" --cluster "$TMP/cluster.pbtxt" -o "$TMP/plan.pb" \
    --quiet > "$TMP/out" 2>&1 || { echo "FAIL: compile"; tail -20 "$TMP/out"; exit 1; }

declare -A PID RC END
# start VICTIM: one `oflite run` per rank; VICTIM freezes at join.
start() {
  local victim=$1
  PORT=$(free_port)
  PID=(); RC=(); END=()
  rm -f "$TMP"/r*.log
  for rank in 0 1 2; do
    local extra=()
    (( rank == victim )) && extra=(--test-freeze-at=join)
    OFLITE_HOST=127.0.0.$((rank + 1)) "$OFLITE" run --plan "$TMP/plan.pb" --rank $rank \
      --master 127.0.0.1:$PORT --comm tcp --eval=false "${extra[@]}" > "$TMP/r$rank.log" 2>&1 &
    PID[$rank]=$!
  done
}
# await_others VICTIM SECONDS: waits (bounded) for every other rank to exit.
await_others() {
  local victim=$1 limit=$(( $2 * 10 ))
  for ((i = 0; i < limit; ++i)); do
    local running=0
    for rank in 0 1 2; do
      (( rank == victim )) && continue
      [[ -n "${END[$rank]:-}" ]] && continue
      if kill -0 "${PID[$rank]}" 2>/dev/null; then running=1; continue; fi
      wait "${PID[$rank]}"; RC[$rank]=$?; END[$rank]=$(date +%s%N)
    done
    (( running )) || return 0
    sleep 0.1
  done
}
# check_blamed WHAT VICTIM SINCE_NS BOUND_MS PATTERN
check_blamed() {
  local what=$1 victim=$2 since=$3 bound=$4 pattern=$5
  for rank in 0 1 2; do
    (( rank == victim )) && continue
    if [[ -z "${END[$rank]:-}" ]]; then
      echo "FAIL: $what: rank $rank still running"; tail -3 "$TMP/r$rank.log"
      kill -9 "${PID[$rank]}" 2>/dev/null; wait "${PID[$rank]}" 2>/dev/null; fail=1; continue
    fi
    local after_ms=$(( (END[$rank] - since) / 1000000 ))
    local last; last=$(grep "^oflite run: rank $rank: " "$TMP/r$rank.log" | tail -1)
    if [[ ${RC[$rank]} != 4 ]]; then
      echo "FAIL: $what: rank $rank exit ${RC[$rank]}, expected 4"; tail -3 "$TMP/r$rank.log"; fail=1
    elif (( after_ms > bound )); then
      echo "FAIL: $what: rank $rank exited after ${after_ms} ms (bound ${bound} ms)"; fail=1
    elif ! [[ $last =~ "job ended by rank $victim: " ]] || ! [[ $last =~ $pattern ]]; then
      echo "FAIL: $what: rank $rank blamed wrongly: $last"; fail=1
    else
      echo "ok: $what: rank $rank exit 4 after ${after_ms} ms: ${last:0:200}"
    fi
  done
}
finish_victim() {
  kill -9 "${PID[$1]}" 2>/dev/null
  wait "${PID[$1]}" 2>/dev/null
}
wait_for_log() {  # FILE PATTERN SECONDS
  for ((i = 0; i < $3 * 100; ++i)); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.01; done
  return 1
}
# scenario WHAT VICTIM KILL BOUND_MS PATTERN: VICTIM freezes at join; with
# KILL=1 it is then killed -9.
scenario() {
  local what=$1 victim=$2 kill=$3 bound=$4 pattern=$5
  start "$victim"
  if ! wait_for_log "$TMP/r$victim.log" "freezing at join" 60; then
    echo "FAIL: $what: rank $victim never reached join"; tail -3 "$TMP/r$victim.log"; fail=1
  fi
  # Killed: first let the other ranks reach the master (the victim froze
  # when it joined; the others may still be dialing). A rank still dialing
  # when the master ends the job waits for its connect timeout (see the
  # header: the same as a master lost before it answered).
  if (( kill )); then sleep 2; kill -9 "${PID[$victim]}"; fi
  local since; since=$(date +%s%N)
  await_others "$victim" 70
  check_blamed "$what" "$victim" "$since" "$bound" "$pattern"
  finish_victim "$victim"
}

for rep in 1 2; do
  scenario "rank 1 frozen during JOIN #$rep" 1 0 15000 "lost rank 1 while joining: .*sent nothing"
done
for rep in 1 2; do
  scenario "rank 1 killed -9 during JOIN #$rep" 1 1 8000 "lost rank 1 while joining"
done
exit $fail
