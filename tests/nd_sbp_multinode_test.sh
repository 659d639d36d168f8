#!/usr/bin/env bash
# n-D SBP end to end (docs/compiler.md, "n-D SBP"), real processes on
# loopback: an MLP in data x tensor parallel on a 2x2 hierarchy (data
# (S(0), B), first weight (B, S(1)), second weight (B, S(0)) producing
# (S(0), P)), on 2 machines x 2 CPU devices ("0-1:cpu:0-1@2x2") and on 4
# machines x 1 device ("0-3:cpu:0@2x2"), equals the same model on one device
# (losses within 1e-5 relative over 50 iterations; on 4 machines the
# sub-groups' all-reduces run rings or exchanges over the group's ranks);
# `oflite inspect` shows the n-D SBP and each collective's sub-group; kill -9 of rank 1 mid-training
# ends rank 0 within 10 s naming rank 1. The transport is the first argument
# (tcp when absent; tests/BUILD runs it over tcp and shm).
set -u
source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
COMM="${1:-tcp}"
fresh_tmp nd_sbp
# shellcheck source=tests/netns/compare_lib.sh
source "${TEST_SRCDIR}/oneflow_lite/tests/netns/compare_lib.sh"
MLP=(--model_parallel dp_tp --batch 16 --features 12 --hidden 8 --classes 4 --iterations 50)

cluster() { loopback_cluster "$@"; }  # cluster FILE MACHINES DEVICES
compile() {  # compile NAME CLUSTER PLACEMENT [WRITE_JOB_ARGS...]
  local name=$1 cl=$2 placement=$3; shift 3
  compile_mlp "$name" "$cl" --placement "$placement" "$@"
}
launch() {  # launch NAME NPROC
  timeout 120 "$OFLITE" launch --plan "$TMP/$1.plan.pb" --nproc "$2" --comm "$COMM" \
    -- --metrics-out "$TMP/$1.{rank}.txt" > "$TMP/$1.log" 2>&1 ||
    { echo "FAIL: launch $1"; tail -20 "$TMP/$1.log"; fail=1; }
}

cluster "$TMP/one.pbtxt" 1 1
cluster "$TMP/two2.pbtxt" 2 2
cluster "$TMP/four1.pbtxt" 4 1
compile ref "$TMP/one.pbtxt" 0:cpu:0
timeout 60 "$OFLITE" run --plan "$TMP/ref.plan.pb" --metrics-out "$TMP/ref.txt" > "$TMP/ref.log" 2>&1 ||
  { echo "FAIL: reference run"; tail -20 "$TMP/ref.log"; fail=1; }

# 2 machines x 2 devices: axis 0 across the machines, axis 1 inside each.
compile dptp "$TMP/two2.pbtxt" 0-1:cpu:0-1@2x2
"$OFLITE" inspect "$TMP/dptp.plan.pb" > "$TMP/dptp.inspect" 2>&1
"$OFLITE" inspect "$TMP/dptp.plan.pb" --json > "$TMP/dptp.json" 2>&1
for want in "all_reduce axis 1 of 2x2 groups {0,1} {2,3}: (S(0), P) -> (S(0), B)" \
            "all_reduce axis 0 of 2x2 group {0,2}" "all_reduce axis 0 of 2x2 group {1,3}" \
            "(B, S(0))          on 2x2   b0/out_0" \
            '{"lbn":"w0/out_0","hierarchy":"2x2","sbp":"(B, S(1))"}' \
            '{"lbn":"random_batch/image_0","hierarchy":"2x2","sbp":"(S(0), B)"}'; do
  grep -qF -- "$want" "$TMP/dptp.inspect" "$TMP/dptp.json" ||
    { echo "FAIL: inspect does not show '$want'"; sed -n '/boxing conv/,$p' "$TMP/dptp.inspect"; fail=1; }
done
grep -q "n-D SBP (" "$TMP/dptp.inspect" && echo "ok: inspect shows n-D SBP and sub-groups"
launch dptp 2 && compare "DP x TP on 2 machines x 2 devices equals 1 device" "$TMP/ref.txt" \
  "$TMP"/dptp.[0-9].txt

# 4 machines x 1 device: every sub-group spans machines, so its all-reduces
# run a communicator over the group's ranks (ring or exchange), not the
# all-to-all of parts.
compile dptp4 "$TMP/four1.pbtxt" 0-3:cpu:0@2x2
"$OFLITE" inspect "$TMP/dptp4.plan.pb" > "$TMP/dptp4.inspect" 2>&1
if grep -E "^  all_reduce .* task\(s\)  (ring_all_reduce|exchange_all_reduce|doubling_all_reduce)" \
     "$TMP/dptp4.inspect" > /dev/null; then
  echo "ok: 4 x 1 sub-group all-reduces run over the group's ranks"
else
  echo "FAIL: no sub-group all-reduce runs a communicator"; sed -n '/boxing conv/,$p' "$TMP/dptp4.inspect"; fail=1
fi
launch dptp4 4 && compare "DP x TP on 4 machines x 1 device equals 1 device" "$TMP/ref.txt" \
  "$TMP"/dptp4.[0-9].txt

# A hierarchy that does not match the placement's devices: exit 2, named.
"$WRITE_JOB" "$TMP/bad.job.pb" "${MLP[@]}" --placement 0-1:cpu:0-1@3x2 > "$TMP/bad.log" 2>&1
rc=$?
if [[ $rc == 2 ]] && grep -q "hierarchy has 6 devices, the placement has 4" "$TMP/bad.log"; then
  echo "ok: bad hierarchy refused: $(tail -1 "$TMP/bad.log")"
else echo "FAIL: bad hierarchy: exit $rc"; tail -5 "$TMP/bad.log"; fail=1; fi

# kill -9 of rank 1 mid-training: rank 0 ends within 10 s naming rank 1.
MLP=(--model_parallel dp_tp --batch 16 --features 12 --hidden 8 --classes 4 --iterations 1000000)
compile long "$TMP/two2.pbtxt" 0-1:cpu:0-1@2x2
port=$(free_port)
OFLITE_JOB_TOKEN=nd-sbp-test OFLITE_HOST=127.0.0.1 "$OFLITE" run --plan "$TMP/long.plan.pb" --rank 0 \
  --master 127.0.0.1:$port --comm "$COMM" --log-every 1000 > "$TMP/r0.log" 2>&1 &
r0=$!
OFLITE_JOB_TOKEN=nd-sbp-test OFLITE_HOST=127.0.0.2 "$OFLITE" run --plan "$TMP/long.plan.pb" --rank 1 \
  --master 127.0.0.1:$port --comm "$COMM" --log-every 1000 > "$TMP/r1.log" 2>&1 &
r1=$!
for ((i = 0; i < 3000; ++i)); do grep -q "joined" "$TMP/r1.log" 2>/dev/null && break; sleep 0.01; done
sleep 0.5
kill -9 "$r1"
start=$(date +%s%N)
for ((i = 0; i < 150; ++i)); do kill -0 "$r0" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$r0" 2>/dev/null; then
  echo "FAIL: rank 0 still running 15 s after rank 1 was killed"; kill -9 "$r0"; fail=1
fi
wait "$r0"; rc=$?
wait "$r1" 2>/dev/null
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
if [[ $rc != 0 ]] && (( elapsed_ms <= 10000 )) && grep -q "rank 1" "$TMP/r0.log"; then
  echo "ok: kill -9 rank 1: rank 0 exit $rc after ${elapsed_ms} ms: $(grep "rank 1" "$TMP/r0.log" | tail -1)"
else
  echo "FAIL: kill -9 rank 1: rank 0 exit $rc after ${elapsed_ms} ms"; tail -5 "$TMP/r0.log"; fail=1
fi
if ls /dev/shm 2>/dev/null | grep -q oflite; then
  echo "FAIL: shared-memory objects left: $(ls /dev/shm | grep oflite)"; fail=1
fi
exit $fail
