#!/usr/bin/env bash
# Multi-machine plans over CommNet, end to end with real processes on
# loopback: data-parallel MLP on 2 and 3 machines equals the same
# parallelism on one machine (losses within 1e-5 relative), a 2-stage
# pipeline across 2 machines (zero-copy READs) equals it on one machine, and kill -9 of one
# rank makes the other exit non-zero within 10 s naming the lost rank.
set -u
OFLITE="${TEST_SRCDIR}/oneflow_lite/tools/oflite/oflite"
WRITE_JOB="${TEST_SRCDIR}/oneflow_lite/oneflow_lite/compiler/write_test_job"
TMP="${TEST_TMPDIR:-/tmp}/multinode"
rm -rf "$TMP"; mkdir -p "$TMP"
fail=0
MLP=(--batch 32 --features 784 --hidden 64 --classes 10 --iterations 20)

cluster() {  # cluster FILE MACHINES DEVICES
  : > "$1"
  for ((m = 0; m < $2; ++m)); do
    echo "machine { id: $m address: \"127.0.0.$((m + 1))\" cpu_devices: $3 }" >> "$1"
  done
}
compile() {  # compile NAME CLUSTER WRITE_JOB_ARGS...
  local name=$1 cl=$2; shift 2
  "$WRITE_JOB" "$TMP/$name.job.pb" "${MLP[@]}" "$@" > "$TMP/out" 2>&1 &&
    "$OFLITE" compile --job "$TMP/$name.job.pb" --cluster "$cl" -o "$TMP/$name.plan.pb" --quiet \
        > "$TMP/out" 2>&1 || { echo "FAIL: compile $name"; tail -20 "$TMP/out"; fail=1; }
}
# compare DESCRIPTION REFERENCE FILES...: the concatenated metrics of FILES
# (one machine's sink reports them) match REFERENCE within 1e-5 relative.
compare() {
  local what=$1 ref=$2; shift 2
  cat "$@" | sort -n > "$TMP/got"
  sort -n "$ref" > "$TMP/want"
  if [[ ! -s "$TMP/want" ]]; then echo "FAIL: $what: reference has no metrics"; fail=1; return; fi
  if awk 'NR == FNR { want[$1 " " $2] = $3; n++; next }
          { key = $1 " " $2; if (!(key in want)) { print "extra " key; bad = 1; next }
            d = $3 - want[key]; if (d < 0) d = -d; s = want[key]; if (s < 0) s = -s;
            if (d > 1e-5 * (s > 1e-12 ? s : 1e-12)) { print "differs " key ": " $3 " vs " want[key]; bad = 1 }
            seen++ }
          END { if (seen != n) { print "got " seen " of " n " metrics"; bad = 1 } exit bad }' \
      "$TMP/want" "$TMP/got"; then
    echo "ok: $what ($(wc -l < "$TMP/want") metric values equal)"
  else
    echo "FAIL: $what"; fail=1
  fi
}
launch() {  # launch NAME NPROC
  timeout 120 "$OFLITE" launch --plan "$TMP/$1.plan.pb" --nproc "$2" --comm tcp -- \
    --metrics-out "$TMP/$1.{rank}.txt" --stats --log-every 5 > "$TMP/$1.log" 2>&1
}

cluster "$TMP/one2.pbtxt" 1 2
cluster "$TMP/one3.pbtxt" 1 3
cluster "$TMP/two.pbtxt" 2 1
cluster "$TMP/three.pbtxt" 3 1

# Data parallel, 2 machines vs 2 devices of one machine.
compile ref2 "$TMP/one2.pbtxt" --placement 0:cpu:0-1
compile dp2 "$TMP/two.pbtxt" --placement 0-1:cpu:0
timeout 120 "$OFLITE" run --plan "$TMP/ref2.plan.pb" --eval=false --metrics-out "$TMP/ref2.txt" \
  > "$TMP/ref2.log" 2>&1 || { echo "FAIL: reference run"; tail -20 "$TMP/ref2.log"; fail=1; }
if launch dp2 2; then
  compare "2-machine data parallel equals 1 machine" "$TMP/ref2.txt" "$TMP"/dp2.*.txt
  # The gradient all-reduce runs as a ring over registered-pool buffers.
  [[ $(grep -c "registered-pool: moved [1-9]" "$TMP/dp2.log") == 2 ]] ||
    { echo "FAIL: --stats shows no ring bytes"; tail -20 "$TMP/dp2.log"; fail=1; }
else
  echo "FAIL: 2-machine launch"; tail -20 "$TMP/dp2.log"; fail=1
fi

# Data parallel on 3 machines.
MLP=(--batch 33 --features 784 --hidden 64 --classes 10 --iterations 20)  # S(0) over 3 parts
compile ref3 "$TMP/one3.pbtxt" --placement 0:cpu:0-2
compile dp3 "$TMP/three.pbtxt" --placement 0-2:cpu:0
MLP=(--batch 32 --features 784 --hidden 64 --classes 10 --iterations 20)
timeout 120 "$OFLITE" run --plan "$TMP/ref3.plan.pb" --eval=false --metrics-out "$TMP/ref3.txt" \
  > "$TMP/ref3.log" 2>&1 || { echo "FAIL: reference run 3"; tail -20 "$TMP/ref3.log"; fail=1; }
if launch dp3 3; then
  compare "3-machine data parallel equals 1 machine" "$TMP/ref3.txt" "$TMP"/dp3.*.txt
  [[ $(grep -c "registered-pool: moved [1-9]" "$TMP/dp3.log") == 3 ]] ||
    { echo "FAIL: 3-machine all-reduce did not run as a ring"; grep comm -A1 "$TMP/dp3.log"; fail=1; }
else
  echo "FAIL: 3-machine launch"; tail -20 "$TMP/dp3.log"; fail=1
fi

# Pipeline: stage 0 on machine 0, stage 1 on machine 1 (CommNet actors).
compile refpp "$TMP/one2.pbtxt" --stages 0:cpu:0,0:cpu:1
compile pp "$TMP/two.pbtxt" --stages 0:cpu:0,1:cpu:0
timeout 120 "$OFLITE" run --plan "$TMP/refpp.plan.pb" --eval=false --metrics-out "$TMP/refpp.txt" \
  > "$TMP/refpp.log" 2>&1 || { echo "FAIL: reference pipeline run"; tail -20 "$TMP/refpp.log"; fail=1; }
if launch pp 2; then
  compare "2-machine pipeline equals 1 machine" "$TMP/refpp.txt" "$TMP"/pp.*.txt
  # Static activations/gradients are pulled by one-sided READ on both machines.
  [[ $(grep -c "static-zero-copy: moved [1-9]" "$TMP/pp.log") == 2 ]] ||
    { echo "FAIL: pipeline did not use zero-copy READs"; grep comm -A3 "$TMP/pp.log"; fail=1; }
else
  echo "FAIL: pipeline launch"; tail -20 "$TMP/pp.log"; fail=1
fi

# kill -9 of rank 1 mid-training: rank 0 exits non-zero within 10 s naming rank 1.
MLP=(--batch 32 --features 784 --hidden 64 --classes 10 --iterations 1000000)
compile long "$TMP/two.pbtxt" --placement 0-1:cpu:0
PORT=$((20000 + RANDOM % 20000))
export OFLITE_JOB_TOKEN=multinode-test
# Started directly (not under timeout) so $! is the oflite process itself;
# every wait below is bounded and leftovers are killed.
OFLITE_HOST=127.0.0.1 "$OFLITE" run --plan "$TMP/long.plan.pb" --rank 0 \
  --master 127.0.0.1:$PORT --comm tcp --eval=false --log-every 1000 > "$TMP/r0.log" 2>&1 &
R0=$!
OFLITE_HOST=127.0.0.2 "$OFLITE" run --plan "$TMP/long.plan.pb" --rank 1 \
  --master 127.0.0.1:$PORT --comm tcp --eval=false --log-every 1000 > "$TMP/r1.log" 2>&1 &
R1=$!
for ((i = 0; i < 300; ++i)); do grep -q "iter " "$TMP/r0.log" 2>/dev/null && break; sleep 0.1; done
kill -9 "$R1"
start=$(date +%s%N)
for ((i = 0; i < 150; ++i)); do kill -0 "$R0" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$R0" 2>/dev/null; then
  echo "FAIL: rank 0 still running 15 s after rank 1 was killed"; kill -9 "$R0"; fail=1
  wait "$R0" "$R1" 2>/dev/null
else
  wait "$R0"; rc=$?
  wait "$R1" 2>/dev/null
  elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  if [[ $rc == 0 ]]; then echo "FAIL: rank 0 exit 0 after peer loss"; tail -5 "$TMP/r0.log"; fail=1;
  elif (( elapsed_ms > 10000 )); then echo "FAIL: rank 0 took ${elapsed_ms} ms"; fail=1;
  elif ! grep -q "lost rank 1" "$TMP/r0.log"; then echo "FAIL: rank 0 did not name rank 1"; tail -5 "$TMP/r0.log"; fail=1;
  else echo "ok: kill -9 rank 1 -> rank 0 exit $rc after ${elapsed_ms} ms naming rank 1"; fi
fi

exit $fail
