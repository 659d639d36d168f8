#!/usr/bin/env bash
# Hostile connections while a job trains (issue 12, findings 1 and 2), with
# real processes over TCP on loopback: a 2-machine data-parallel MLP trains
# while flood_peer hits rank 0's master port and both ranks' data ports with
# thousands of connections that never prove the job token (connect+close,
# a control header claiming 16 MiB, 48 bytes of garbage, idle sockets held
# open). Every 0.2 s the descriptors (/proc/PID/fd), threads (Threads:) and
# resident memory (VmRSS) of both ranks are sampled: each must stay within a
# bound of its value before the flood (the listeners' caps: 64 waiting
# connections per port), both ranks must exit 0, and the final losses must
# equal those of the same job run without a flood.
set -u
source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
FLOOD="${TEST_SRCDIR}/oneflow_lite/tests/flood_peer"
fresh_tmp flood
# The job must outlast the flood (about 8 s of flooding on a loaded 2-core
# machine), yet a fixed count cannot fit every machine: 60000 iterations took
# over 90 s in CI beside other tests, 20000 ended before the flood on an idle
# host once the synthetic source got faster (2026-12-04). So the run starts
# with 20000 and, if the job ended first, runs once more with three times
# as many (FLOOD_TEST_ITERS sets the first count).
ITERS=${FLOOD_TEST_ITERS:-20000}

: > "$TMP/two.pbtxt"
for m in 0 1; do
  echo "machine { id: $m address: \"127.0.0.1\" cpu_devices: 1 }" >> "$TMP/two.pbtxt"
done
"$WRITE_JOB" "$TMP/dp.job.pb" --batch 32 --features 784 --hidden 64 --classes 10 \
    --iterations "$ITERS" --placement 0-1:cpu:0 > "$TMP/out" 2>&1 &&
  "$OFLITE" compile --job "$TMP/dp.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/dp.plan.pb" \
    --quiet > "$TMP/out" 2>&1 || { echo "FAIL: preparing the plan"; tail -20 "$TMP/out"; exit 1; }

# start_job NAME: both ranks in the background (PIDS), logs in $TMP/NAME.r*.log.
PORT=$(free_port)
declare -a PIDS
start_job() {
  local name=$1
  PORT=$((PORT + 1))
  for rank in 0 1; do
    OFLITE_JOB_TOKEN=flood-test OFLITE_HOST=127.0.0.1 "$OFLITE" run --plan "$TMP/dp.plan.pb" \
      --rank $rank --master 127.0.0.1:$PORT --comm tcp --eval=false --log-every 50 \
      --metrics-out "$TMP/$name.$rank.txt" > "$TMP/$name.r$rank.log" 2>&1 &
    PIDS[$rank]=$!
  done
}
# finish_job NAME: waits (180 s at most) for both ranks; false unless both exit 0.
finish_job() {
  local name=$1 ok=0
  for rank in 0 1; do
    for ((i = 0; i < 1800; ++i)); do kill -0 "${PIDS[$rank]}" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "${PIDS[$rank]}" 2>/dev/null; then
      echo "FAIL: $name: rank $rank still running after 180 s"; kill -9 "${PIDS[$rank]}"; ok=1
    fi
    wait "${PIDS[$rank]}"; local rc=$?
    if [[ $rc != 0 ]]; then echo "FAIL: $name: rank $rank exit $rc"; tail -5 "$TMP/$name.r$rank.log"; ok=1; fi
  done
  return $ok
}
# listen_ports PID: the TCP ports PID listens on (from /proc/net/tcp).
listen_ports() {
  local inode hex
  for inode in $(ls -l /proc/$1/fd 2>/dev/null | sed -n 's/.*socket:\[\([0-9]*\)\]$/\1/p'); do
    for hex in $(awk -v inode="$inode" '$4 == "0A" && $10 == inode { split($2, a, ":"); print a[2] }' \
                 /proc/net/tcp); do
      echo $((16#$hex))
    done
  done
}
fds() { ls /proc/$1/fd 2>/dev/null | wc -l; }
threads() { awk '/^Threads:/ { print $2 }' /proc/$1/status 2>/dev/null; }
rss_kb() { awk '/^VmRSS:/ { print $2 }' /proc/$1/status 2>/dev/null; }

# The reference: the same job, no flood.
start_job plain
finish_job plain || { echo "FAIL: the unflooded job"; exit 1; }

start_job flooded
# Rank 0 prints progress once both ranks are connected and training; the
# second line is past the runtime's start-up.
for ((i = 0; i < 600; ++i)); do
  grep -q "iter 100/" "$TMP/flooded.r0.log" 2>/dev/null && break
  sleep 0.1
done
declare -A BASE_FDS BASE_THREADS BASE_RSS MAX_FDS MAX_THREADS MAX_RSS
targets=("$PORT")  # the master port
for rank in 0 1; do
  pid=${PIDS[$rank]}
  BASE_FDS[$rank]=$(fds $pid); BASE_THREADS[$rank]=$(threads $pid); BASE_RSS[$rank]=$(rss_kb $pid)
  MAX_FDS[$rank]=${BASE_FDS[$rank]}; MAX_THREADS[$rank]=${BASE_THREADS[$rank]}; MAX_RSS[$rank]=${BASE_RSS[$rank]}
  for port in $(listen_ports $pid); do [[ $port != "$PORT" ]] && targets+=("$port"); done
done
if (( ${#targets[@]} != 3 )); then
  echo "FAIL: expected the master port and 2 data ports, found: ${targets[*]}"
  kill -9 "${PIDS[@]}" 2>/dev/null; wait 2>/dev/null; exit 1
fi
echo "flooding ports ${targets[*]} (master $PORT) while the job trains"
flooders=()
for port in "${targets[@]}"; do
  for part in a b; do
    "$FLOOD" "$port" connect-close 1000 > "$TMP/flood.cc$part.$port" 2>&1 & flooders+=($!)
  done
  "$FLOOD" "$port" idle 300 3000 > "$TMP/flood.idle.$port" 2>&1 & flooders+=($!)
  mode=data-garbage; [[ $port == "$PORT" ]] && mode=control-header
  "$FLOOD" "$port" $mode 200 5000 > "$TMP/flood.bad.$port" 2>&1 & flooders+=($!)
done
# Sample until every flooder is done (bounded: 120 s).
for ((i = 0; i < 600; ++i)); do
  for rank in 0 1; do
    pid=${PIDS[$rank]}
    kill -0 $pid 2>/dev/null || continue
    grep -q "trained iterations" "$TMP/flooded.r$rank.log" && continue  # shutting down
    v=$(fds $pid); [[ -n $v ]] && (( v > MAX_FDS[$rank] )) && MAX_FDS[$rank]=$v
    v=$(threads $pid); [[ -n $v ]] && (( v > MAX_THREADS[$rank] )) && MAX_THREADS[$rank]=$v
    v=$(rss_kb $pid); [[ -n $v ]] && (( v > MAX_RSS[$rank] )) && MAX_RSS[$rank]=$v
  done
  running=0
  for f in "${flooders[@]}"; do kill -0 $f 2>/dev/null && running=1; done
  (( running )) || break
  sleep 0.2
done
for f in "${flooders[@]}"; do kill -9 $f 2>/dev/null; wait $f 2>/dev/null; done
cat "$TMP"/flood.*.* | sed 's/^/  /'
both_alive=1
for rank in 0 1; do
  grep -q "trained iterations" "$TMP/flooded.r$rank.log" && both_alive=0
done
finish_job flooded || fail=1

# Bounds: 64 waiting connections per listener (rank 0 has two listeners) and
# slack; no thread per connection (8 of slack for the runtime's own); far
# less memory than 256 KiB or 16 MiB per connection would take.
for rank in 0 1; do
  fd_bound=$((BASE_FDS[$rank] + 64 * (rank == 0 ? 2 : 1) + 16))
  echo "rank $rank: fds ${BASE_FDS[$rank]} -> max ${MAX_FDS[$rank]} (bound $fd_bound)," \
       "threads ${BASE_THREADS[$rank]} -> max ${MAX_THREADS[$rank]}," \
       "VmRSS ${BASE_RSS[$rank]} kB -> max ${MAX_RSS[$rank]} kB"
  (( MAX_FDS[$rank] <= fd_bound )) || { echo "FAIL: rank $rank descriptors grew under the flood"; fail=1; }
  (( MAX_THREADS[$rank] <= BASE_THREADS[$rank] + 8 )) ||
    { echo "FAIL: rank $rank threads grew under the flood"; fail=1; }
  (( MAX_RSS[$rank] <= BASE_RSS[$rank] + 65536 )) ||
    { echo "FAIL: rank $rank resident memory grew by more than 64 MiB under the flood"; fail=1; }
done
if (( ! both_alive )); then
  if [[ -z ${FLOOD_TEST_RETRIED:-} ]]; then
    echo "note: the job ($ITERS iterations) ended before the flood did; again with $((ITERS * 3))"
    FLOOD_TEST_RETRIED=1 FLOOD_TEST_ITERS=$((ITERS * 3)) exec bash "$0" "$@"
  fi
  echo "FAIL: the job ended before the flood did (raise FLOOD_TEST_ITERS): nothing was shown"; fail=1
fi
# One machine's sink reports the metrics: compare the two runs' union.
cat "$TMP"/plain.[01].txt | sort -n > "$TMP/plain.all"
cat "$TMP"/flooded.[01].txt | sort -n > "$TMP/flooded.all"
if [[ -s "$TMP/plain.all" ]] && cmp -s "$TMP/plain.all" "$TMP/flooded.all"; then
  echo "ok: the flooded job's $(wc -l < "$TMP/plain.all") metric values equal the unflooded" \
       "run's (last: $(tail -1 "$TMP/flooded.all"))"
else
  echo "FAIL: metrics differ under the flood"; diff "$TMP/plain.all" "$TMP/flooded.all" | head -5; fail=1
fi
(( fail )) || echo "ok: flooded job stayed bounded and finished with the same losses"
exit $fail
