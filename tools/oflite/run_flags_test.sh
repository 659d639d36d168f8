#!/usr/bin/env bash
# Flag and argument errors of `oflite run` and `oflite launch` are exit 2
# with a message naming the flag (and the allowed range), before anything
# starts; and resuming verifies the checkpoint even when no iteration is
# left: a corrupt one is exit 2 naming its file, and a corrupt newest
# checkpoint under a root names the newest intact one (nothing deleted).
# Every command is bounded by `timeout` (a livelock or a wait is a failure).
set -u
source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
fresh_tmp run_flags
expect() {  # expect DESCRIPTION RC NEEDLE -- COMMAND...
  local what="$1" want="$2" needle="$3"; shift 4
  timeout 60 "$@" > "$TMP/out" 2>&1
  local rc=$?
  if [[ $rc != "$want" ]]; then
    echo "FAIL: $what: exit $rc, expected $want"; tail -5 "$TMP/out"; fail=1
  elif ! grep -qF -- "$needle" "$TMP/out"; then
    echo "FAIL: $what: '$needle' not in output:"; tail -5 "$TMP/out"; fail=1
  else
    echo "ok: $what"
  fi
}

echo 'machine { id: 0 address: "127.0.0.1" cpu_devices: 1 }' > "$TMP/one.pbtxt"
cp "$TMP/one.pbtxt" "$TMP/two.pbtxt"
echo 'machine { id: 1 address: "127.0.0.2" cpu_devices: 1 }' >> "$TMP/two.pbtxt"
MLP=(--batch 8 --features 16 --hidden 8 --classes 4)
"$WRITE_JOB" "$TMP/one.job.pb" "${MLP[@]}" --iterations 6 > "$TMP/out" 2>&1 &&
  "$OFLITE" compile --job "$TMP/one.job.pb" --cluster "$TMP/one.pbtxt" -o "$TMP/one.plan.pb" \
    --quiet > "$TMP/out" 2>&1 &&
  "$WRITE_JOB" "$TMP/two.job.pb" "${MLP[@]}" --iterations 6 --placement 0-1:cpu:0 \
    > "$TMP/out" 2>&1 &&
  "$OFLITE" compile --job "$TMP/two.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/two.plan.pb" \
    --quiet > "$TMP/out" 2>&1 || { echo "FAIL: preparing the plans"; cat "$TMP/out"; exit 1; }
ONE=(run --plan "$TMP/one.plan.pb" --eval=false)
TWO=(run --plan "$TMP/two.plan.pb" --eval=false)

# Durations: seconds -> milliseconds must not overflow (these livelocked or
# aborted), zero is meaningless.
for value in 9300000000000000 9223372036854775807 99999999999999999999 0 -1 abc; do
  expect "--watchdog-seconds $value" 2 \
    "flag '--watchdog-seconds' must be an integer in [1, 2592000], got '$value'" \
    -- "$OFLITE" "${ONE[@]}" --watchdog-seconds "$value"
done
expect "--ring-timeout-seconds huge" 2 "flag '--ring-timeout-seconds' must be an integer in [1," \
  -- "$OFLITE" "${TWO[@]}" --rank 0 --master 127.0.0.1:1 --ring-timeout-seconds 9300000000000000
expect "--join-grace-seconds 0" 2 "flag '--join-grace-seconds' must be an integer in [1," \
  -- "$OFLITE" "${TWO[@]}" --rank 0 --master 127.0.0.1:1 --join-grace-seconds 0
# Counts.
expect "--iters -5" 2 "flag '--iters' must be an integer in [0, " -- "$OFLITE" "${ONE[@]}" --iters -5
expect "--save-every -1" 2 "flag '--save-every' must be an integer in [0, " \
  -- "$OFLITE" "${ONE[@]}" --save-every -1 --checkpoint-dir "$TMP/x"
expect "--log-every 0" 2 "flag '--log-every' must be an integer in [1, " \
  -- "$OFLITE" "${ONE[@]}" --log-every 0
for value in -1 1025; do
  expect "--cpu-threads $value" 2 "flag '--cpu-threads' must be an integer in [0, 1024], got '$value'" \
    -- "$OFLITE" "${ONE[@]}" --cpu-threads "$value"
done
expect "--cpu-threads 1 runs" 0 "" -- "$OFLITE" "${ONE[@]}" --cpu-threads 1
# The library of the float32 convolutions and GEMMs (flag, or the variable).
expect "--cpu-kernels bogus" 2 "--cpu-kernels 'bogus' is not a CPU kernel library: onednn or reference" \
  -- "$OFLITE" "${ONE[@]}" --cpu-kernels bogus
expect "OFLITE_CPU_KERNELS bogus" 2 "OFLITE_CPU_KERNELS 'bogus' is not a CPU kernel library" \
  -- env OFLITE_CPU_KERNELS=bogus "$OFLITE" "${ONE[@]}"
expect "--cpu-kernels reference runs" 0 "" -- "$OFLITE" "${ONE[@]}" --cpu-kernels reference
expect "OFLITE_CPU_KERNELS=reference runs" 0 "" -- env OFLITE_CPU_KERNELS=reference "$OFLITE" "${ONE[@]}"
echo 'machine { id: 0 address: "127.0.0.1" cpu_devices: 1 cpu_threads: -3 }' > "$TMP/bad_threads.pbtxt"
expect "cluster cpu_threads -3" 2 "cluster: machine[0].cpu_threads -3 is out of range" \
  -- "$OFLITE" compile --job "$TMP/one.job.pb" --cluster "$TMP/bad_threads.pbtxt" -o "$TMP/o.pb"
expect "--save-every without --checkpoint-dir" 2 "--save-every needs --checkpoint-dir" \
  -- "$OFLITE" "${ONE[@]}" --save-every 2
# Positional arguments.
expect "run stray argument" 2 "unexpected argument 'stray.pb'" \
  -- "$OFLITE" "${ONE[@]}" stray.pb
expect "compile stray argument" 2 "unexpected argument 'extra'" \
  -- "$OFLITE" compile --job "$TMP/one.job.pb" --cluster "$TMP/one.pbtxt" -o "$TMP/o.pb" extra
expect "inspect second plan" 2 "unexpected argument 'again.pb'" \
  -- "$OFLITE" inspect "$TMP/one.plan.pb" again.pb
expect "inspect --machine -2" 2 "flag '--machine' must be an integer in [-1, " \
  -- "$OFLITE" inspect "$TMP/one.plan.pb" --machine -2
# Multi-machine flags: bad input, before joining anything.
expect "--rank 5 of 2" 2 "--rank 5 is not a machine of the plan: it has 2 machine(s), ranks 0..1" \
  -- "$OFLITE" "${TWO[@]}" --rank 5 --master 127.0.0.1:1
expect "RANK=7 of 1" 2 "RANK 7 is not a machine of the plan" -- env RANK=7 "$OFLITE" "${ONE[@]}"
expect "--comm bogus" 2 "--comm: unknown transport provider 'bogus' (known: auto, ibverbs, shm or tcp)" \
  -- "$OFLITE" "${TWO[@]}" --rank 1 --master 127.0.0.1:1 --comm bogus
expect "missing --master" 2 "a 2-machine plan needs --master HOST:PORT" \
  -- "$OFLITE" "${TWO[@]}" --rank 1
for master in localhost 127.0.0.1:99999 127.0.0.1:http :80; do
  expect "--master $master" 2 "--master: " -- "$OFLITE" "${TWO[@]}" --rank 1 --master "$master"
done
expect "no OFLITE_JOB_TOKEN" 2 "OFLITE_JOB_TOKEN is not set: every rank of a 2-machine job" \
  -- env -u OFLITE_JOB_TOKEN "$OFLITE" "${TWO[@]}" --rank 1 --master 127.0.0.1:1
expect "--check-nan=maybe" 2 "flag '--check-nan' expects true or false" \
  -- "$OFLITE" "${ONE[@]}" --check-nan=maybe
expect "--eval=2" 2 "flag '--eval' expects true or false" -- "$OFLITE" "${ONE[@]}" --eval=2
# launch: the process count must match the plan (this waited 60 s).
expect "launch --nproc 1 of 2" 2 "--nproc 1 but $TMP/two.plan.pb is a 2-machine plan: give --nproc 2" \
  -- "$OFLITE" launch --plan "$TMP/two.plan.pb" --nproc 1 --grace_ms 100
expect "launch --nproc 3 of 2" 2 "--nproc 3 but" \
  -- "$OFLITE" launch --plan "$TMP/two.plan.pb" --nproc 3
expect "launch --hosts a,b,c of 2" 2 "--hosts gives 3 host(s) but $TMP/two.plan.pb is a 2-machine" \
  -- "$OFLITE" launch --plan "$TMP/two.plan.pb" --hosts a,b,c --oflite /bin/false
expect "launch --nproc -1" 2 "flag '--nproc' must be an integer in [1, 253]" \
  -- "$OFLITE" launch --plan "$TMP/two.plan.pb" --nproc -1
expect "launch --grace_ms huge" 2 "flag '--grace_ms' must be an integer in [0, " \
  -- "$OFLITE" launch --plan "$TMP/two.plan.pb" --nproc 2 --grace_ms 99999999999999
expect "launch stray argument" 2 "unexpected argument 'oops'" \
  -- "$OFLITE" launch --plan "$TMP/two.plan.pb" --nproc 2 oops

# Resume. Checkpoints at iterations 2, 4 and 6 of a 6-iteration run.
CK="$TMP/ck"
expect "training with checkpoints" 0 "trained iterations 0..6" \
  -- "$OFLITE" "${ONE[@]}" --save-every 2 --checkpoint-dir "$CK"
expect "resume intact, nothing left" 0 "trained iterations 6..6" \
  -- "$OFLITE" "${ONE[@]}" --resume "$CK"
# A MANIFEST edited to an iteration outside the run: refused naming the
# file, offering the newest intact checkpoint (it was exit 1 from the
# runtime, naming neither).
for bad in -5 1000000; do
  rm -rf "$TMP/ckm"; cp -r "$CK" "$TMP/ckm"
  sed -i "s/^iteration 6\$/iteration $bad/" "$TMP/ckm/iter-6/MANIFEST"
  expect "resume MANIFEST iteration $bad" 2 \
    "$TMP/ckm/iter-6/MANIFEST records iteration $bad, outside this run's [0, 6]" \
    -- "$OFLITE" "${ONE[@]}" --resume "$TMP/ckm"
  grep -qF "resume from it with --resume $TMP/ckm/iter-4" "$TMP/out" ||
    { echo "FAIL: MANIFEST $bad: no intact checkpoint offered"; cat "$TMP/out"; fail=1; }
done
# Flip the last byte (data) of a variable file of the newest checkpoint.
VAR=$(ls "$CK/iter-6/"*.var | head -1)
last=$(( $(stat -c %s "$VAR") - 1 ))
byte=$(od -An -tu1 -j "$last" -N1 "$VAR" | tr -d ' ')
printf "$(printf '\\%03o' $(( (byte + 1) % 256 )))" |
  dd of="$VAR" bs=1 seek="$last" conv=notrunc 2> /dev/null
expect "resume flipped byte, nothing left" 2 "$VAR': data checksum mismatch" \
  -- "$OFLITE" "${ONE[@]}" --resume "$CK/iter-6"
expect "resume root, newest corrupt" 2 \
  "the newest intact checkpoint under '$CK' is '$CK/iter-4': resume from it with --resume $CK/iter-4" \
  -- "$OFLITE" "${ONE[@]}" --resume "$CK"
grep -qF "checkpoint '$CK/iter-6' cannot be used" "$TMP/out" ||
  { echo "FAIL: the corrupt checkpoint is not named"; cat "$TMP/out"; fail=1; }
[[ -d "$CK/iter-6" && -f "$VAR" ]] || { echo "FAIL: the corrupt checkpoint was deleted"; fail=1; }
expect "resume the offered checkpoint" 0 "trained iterations 4..6" \
  -- "$OFLITE" "${ONE[@]}" --resume "$CK/iter-4"
# Truncate a file of iter-4 too: now iter-2 is offered.
VAR4=$(ls "$CK/iter-4/"*.var | tail -1)
truncate -s 20 "$VAR4"
expect "resume truncated, nothing left" 2 "$VAR4': file has 20 bytes" \
  -- "$OFLITE" "${ONE[@]}" --resume "$CK/iter-4" --iters 4
expect "resume root, two corrupt" 2 "resume from it with --resume $CK/iter-2" \
  -- "$OFLITE" "${ONE[@]}" --resume "$CK"
: > "$CK/iter-2/MANIFEST"
expect "resume root, none intact" 2 "no older checkpoint under '$CK' is intact either" \
  -- "$OFLITE" "${ONE[@]}" --resume "$CK"
exit $fail
