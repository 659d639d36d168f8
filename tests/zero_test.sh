#!/usr/bin/env bash
# Sharded optimizer states (ZeRO, --shard-optimizer; docs/compiler.md) end
# to end with real processes on loopback over the transport given as the
# first argument (tcp when absent; tests/BUILD runs tcp and shm):
#  - the MLP (write_test_job, Adam, `oflite compile --shard-optimizer`) and
#    the GPT example (AdamW, clipping, weight decay, warm-up + cosine; the
#    driver's --shard-optimizer) on 2 and 4 processes equal one machine
#    without sharding: every loss within 1e-5 relative over 20 iterations;
#  - `oflite inspect`: the variables per zone fall by the device count;
#  - kill -9 of rank 1 of a ZeRO job: rank 0 exits non-zero within 10 s
#    naming rank 1 (tcp only);
#  - checkpoints across layouts (tcp only; one process: a ZeRO plan of 1
#    machine x 2 devices): its checkpoint evaluates on one device to the
#    loss one device trained to, a one-device checkpoint evaluates on the
#    ZeRO layout to the same loss, and the ZeRO plan resumed from a
#    one-device checkpoint (Adam's m and v included) continues its losses;
#  - bad input is exit 2 naming the flag: --shard-optimizer on one device
#    (saves of ZeRO plans across machines: tests/checkpoint_layouts_test.sh).
set -u
source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
GPT="${TEST_SRCDIR}/oneflow_lite/examples/gpt_char"
COMM="${1:-tcp}"
TEXT=/usr/share/games/fortunes/fortunes
fresh_tmp "zero_$COMM"
export OFLITE_JOB_TOKEN=zero-test
# shellcheck source=tests/netns/compare_lib.sh
source "${TEST_SRCDIR}/oneflow_lite/tests/netns/compare_lib.sh"
[[ -f "$TEXT" ]] || { echo "FAIL: $TEXT missing (tools/install_deps.sh installs fortunes)"; exit 1; }

check() {  # check DESCRIPTION EXPECTED_RC LOG CMD...
  local what=$1 want=$2 log=$3; shift 3
  timeout 300 "$@" > "$log" 2>&1; local rc=$?
  if [[ $rc != "$want" ]]; then echo "FAIL: $what: exit $rc, expected $want"; tail -15 "$log"; fail=1
  else echo "ok: $what"; fi
}
cluster() { loopback_cluster "$@"; }  # cluster FILE MACHINES DEVICES
launch() {  # launch NAME PLAN NPROC [RUN_FLAGS...]
  local name=$1 plan=$2 nproc=$3; shift 3
  check "$name: $nproc processes over $COMM" 0 "$TMP/$name.log" "$OFLITE" launch --plan "$plan" \
    --nproc "$nproc" --comm "$COMM" -- --eval=false --metrics-out "$TMP/$name.{rank}.txt" "$@"
}
losses() {  # losses FILE...: the loss lines only (GPT runs also report val_loss)
  cat "$@" | awk '$2 == "loss"'
}

# ---- The MLP: oflite compile --shard-optimizer ---------------------------------------
MLP=(--batch 32 --features 784 --hidden 64 --classes 10 --iterations 20 --optimizer adam
     --fashion_mnist /usr/share/datasets/fashion-mnist)
cluster "$TMP/one.pbtxt" 1 1
"$WRITE_JOB" "$TMP/one.job.pb" "${MLP[@]}" --placement 0:cpu:0 > "$TMP/out" 2>&1 &&
  "$OFLITE" compile --job "$TMP/one.job.pb" --cluster "$TMP/one.pbtxt" -o "$TMP/one.plan.pb" \
    --quiet > "$TMP/out" 2>&1 || { echo "FAIL: compile the one-machine MLP"; cat "$TMP/out"; fail=1; }
check "MLP on one machine" 0 "$TMP/mlp1.log" "$OFLITE" run --plan "$TMP/one.plan.pb" --eval=false \
  --metrics-out "$TMP/mlp1.txt"
for n in 2 4; do
  cluster "$TMP/m$n.pbtxt" "$n" 1
  "$WRITE_JOB" "$TMP/m$n.job.pb" "${MLP[@]}" --placement "0-$((n - 1)):cpu:0" > "$TMP/out" 2>&1 &&
    "$OFLITE" compile --job "$TMP/m$n.job.pb" --cluster "$TMP/m$n.pbtxt" -o "$TMP/zm$n.plan.pb" \
      --shard-optimizer > "$TMP/out" 2>&1 ||
    { echo "FAIL: compile the MLP with --shard-optimizer on $n machines"; cat "$TMP/out"; fail=1; }
  launch "zmlp$n" "$TMP/zm$n.plan.pb" "$n"
  compare "MLP, ZeRO over $n processes, equals one machine" "$TMP/mlp1.txt" "$TMP"/zmlp$n.[0-9].txt
done
"$OFLITE" inspect "$TMP/zm2.plan.pb" > "$TMP/zm2.inspect" 2>&1
# Per tensor (--fuse_max_bytes 0): four gradients reduce-scattered, four
# parameters (and the loss) gathered, no all-reduce.
"$OFLITE" compile --job "$TMP/m2.job.pb" --cluster "$TMP/m2.pbtxt" -o "$TMP/zm2u.plan.pb" \
  --shard-optimizer --fuse_max_bytes 0 --quiet > "$TMP/out" 2>&1 ||
  { echo "FAIL: compile the unbucketed ZeRO MLP"; cat "$TMP/out"; fail=1; }
"$OFLITE" inspect "$TMP/zm2u.plan.pb" > "$TMP/zm2u.inspect" 2>&1
if [[ $(grep "^boxing conversions:" "$TMP/zm2u.inspect") == "boxing conversions: all_gather x5 reduce_scatter x4" ]]; then
  echo "ok: inspect: $(grep "^boxing conversions:" "$TMP/zm2u.inspect")"
else
  echo "FAIL: the MLP's gradients are not reduce-scattered"; grep "boxing conv" "$TMP/zm2u.inspect"; fail=1
fi
# By default the small ones share buckets (the trained runs above used
# them): the three small gradients' reduce-scatters in one, the three small
# parameters' all-gathers in another; the 784 x 64 weight's and the loss's
# stay their own.
if grep -q "fused all-reduce buckets: 2, of 6 conversions (0 all-reduces, 3 reduce-scatters and 3 all-gathers run as all-reduces)" "$TMP/zm2.inspect"; then
  echo "ok: inspect: $(grep "fused all-reduce buckets" "$TMP/zm2.inspect" | sed 's/^ *//')"
else
  echo "FAIL: ZeRO's small reduce-scatters and all-gathers are not bucketed"
  grep -A3 "boxing conv" "$TMP/zm2.inspect"; fail=1
fi

# ---- The GPT: the driver's --shard-optimizer -------------------------------------------
SMALL=(--text "$TEXT" --layers 2 --heads 2 --channels 32 --block 16 --batch 4 --warmup 10
       --data-dir "$TMP/data" --iters 20)
check "GPT on one machine" 0 "$TMP/gpt1.log" "$GPT" "${SMALL[@]}" --out-dir "$TMP/g1" \
  -- --eval=false --metrics-out "$TMP/gpt1.txt"
losses "$TMP/gpt1.txt" > "$TMP/gpt1.loss"
for n in 2 4; do
  check "GPT ZeRO plan for $n machines" 0 "$TMP/gz$n.compile.log" "$GPT" "${SMALL[@]}" \
    --out-dir "$TMP/gz$n" --machines "$n" --shard-optimizer --compile-only
  launch "gz$n" "$TMP/gz$n/gpt_char.plan.pb" "$n"
  losses "$TMP"/gz$n.[0-9].txt > "$TMP/gz$n.loss"
  compare "GPT, ZeRO over $n processes, equals one machine" "$TMP/gpt1.loss" "$TMP/gz$n.loss"
done

if [[ $COMM == tcp ]]; then
  # ---- Memory: the variables per zone fall by the device count -------------------------
  check "GPT plan for 2 machines without ZeRO" 0 "$TMP/gd2.compile.log" "$GPT" "${SMALL[@]}" \
    --out-dir "$TMP/gd2" --machines 2 --compile-only
  /usr/bin/python3 - "$TMP/gd2.compile.log" "$TMP/gz2.compile.log" "$TMP/gz4.compile.log" \
      > "$TMP/memory.check" 2>&1 <<'PY' ||
import re, sys
units = {"B": 1, "KiB": 1024, "MiB": 1024 ** 2, "GiB": 1024 ** 3}
def variables(path):  # the "variables" column of m0/host
    for line in open(path):
        if line.strip().startswith("m0/host"):
            value, unit = line.split()[-2:]
            return float(value) * units[unit]
    raise SystemExit(f"no memory line in {path}")
plain, two, four = (variables(p) for p in sys.argv[1:])
print(f"variables on m0/host: {plain / 1024:.1f} KiB plain, {two / 1024:.1f} KiB ZeRO 2 "
      f"({plain / two:.2f}x), {four / 1024:.1f} KiB ZeRO 4 ({plain / four:.2f}x)")
# Register alignment keeps each part a little above its share.
assert 1.8 <= plain / two <= 2.0 and 3.3 <= plain / four <= 4.0, (plain, two, four)
PY
    { echo "FAIL: variables per zone"; cat "$TMP/memory.check"; fail=1; }
  cat "$TMP/memory.check"

  # ---- kill -9 of a rank of a ZeRO job --------------------------------------------------
  "$WRITE_JOB" "$TMP/long.job.pb" --batch 32 --features 784 --hidden 64 --classes 10 \
    --iterations 1000000 --optimizer adam --placement 0-1:cpu:0 > "$TMP/out" 2>&1 &&
    "$OFLITE" compile --job "$TMP/long.job.pb" --cluster "$TMP/m2.pbtxt" -o "$TMP/long.plan.pb" \
      --shard-optimizer --quiet > "$TMP/out" 2>&1 || { echo "FAIL: compile long"; fail=1; }
  port=$(free_port)
  OFLITE_HOST=127.0.0.1 "$OFLITE" run --plan "$TMP/long.plan.pb" --rank 0 \
    --master 127.0.0.1:$port --comm tcp --eval=false --log-every 1000 > "$TMP/r0.log" 2>&1 &
  r0=$!
  OFLITE_HOST=127.0.0.2 "$OFLITE" run --plan "$TMP/long.plan.pb" --rank 1 \
    --master 127.0.0.1:$port --comm tcp --eval=false --log-every 1000 > "$TMP/r1.log" 2>&1 &
  r1=$!
  for ((i = 0; i < 3000; ++i)); do grep -q "iter " "$TMP/r1.log" 2>/dev/null && break; sleep 0.01; done
  kill -9 "$r1"
  start=$(date +%s%N)
  for ((i = 0; i < 150; ++i)); do kill -0 "$r0" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$r0" 2>/dev/null; then
    echo "FAIL: kill -9: rank 0 still running 15 s after rank 1 was killed"; kill -9 "$r0"; fail=1
    wait "$r0" 2>/dev/null
  else
    wait "$r0"; rc=$?
    elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
    if [[ $rc == 0 ]] || (( elapsed_ms > 10000 )) || ! grep -q "rank 1" "$TMP/r0.log"; then
      echo "FAIL: kill -9: rank 0 exit $rc after $elapsed_ms ms"; tail -5 "$TMP/r0.log"; fail=1
    else
      echo "ok: kill -9 of rank 1 of a ZeRO job: rank 0 exit $rc after $elapsed_ms ms: $(grep "rank 1" "$TMP/r0.log" | tail -1)"
    fi
  fi
  wait "$r1" 2>/dev/null

  # ---- Checkpoints across layouts ----------------------------------------------------------
  # One device trains 20 iterations, saving at 10 and 20, and evaluates.
  check "GPT on one device, checkpoints at 10 and 20" 0 "$TMP/c1.log" "$GPT" "${SMALL[@]}" \
    --out-dir "$TMP/c1" -- --save-every 10 --checkpoint-dir "$TMP/ck1" --eval-out "$TMP/c1.eval" \
    --metrics-out "$TMP/c1.txt"
  # ZeRO over 2 devices of one machine (one process) does the same.
  check "GPT ZeRO on 1 machine x 2 devices, checkpoint at 20" 0 "$TMP/cz.log" "$GPT" \
    "${SMALL[@]}" --out-dir "$TMP/cz" --devices 2 --shard-optimizer -- --save-every 20 \
    --checkpoint-dir "$TMP/ckz" --eval-out "$TMP/cz.eval" --metrics-out "$TMP/cz.txt"
  compare "GPT ZeRO on 2 devices equals one device" "$TMP/c1.txt" "$TMP/cz.txt"
  check "evaluate the ZeRO checkpoint on one device" 0 "$TMP/e1.log" "$OFLITE" eval \
    --plan "$TMP/c1/gpt_char.plan.pb" --checkpoint "$TMP/ckz/iter-20" --eval-out "$TMP/e1.eval"
  check "evaluate the one-device checkpoint on the ZeRO layout" 0 "$TMP/e2.log" "$OFLITE" eval \
    --plan "$TMP/cz/gpt_char.plan.pb" --checkpoint "$TMP/ck1/iter-20" --eval-out "$TMP/e2.eval"
  for e in e1 e2; do
    grep -v "samples\|correct" "$TMP/$e.eval" | awk '{print 0, $1, $2}' > "$TMP/$e.m"
    grep -v "samples\|correct" "$TMP/c1.eval" | awk '{print 0, $1, $2}' > "$TMP/c1.m"
    compare "$e: the checkpoint evaluates to one device's test loss" "$TMP/c1.m" "$TMP/$e.m"
  done
  cat "$TMP/c1.eval" "$TMP/e1.eval" "$TMP/e2.eval" | grep loss | tr '\n' ' '; echo
  # The ZeRO layout resumes from the one-device checkpoint at 10 (model and
  # Adam state restored as slices) and continues one device's losses.
  check "ZeRO resumes from the one-device checkpoint at 10" 0 "$TMP/rz.log" "$OFLITE" run \
    --plan "$TMP/cz/gpt_char.plan.pb" --resume "$TMP/ck1/iter-10" --eval=false \
    --metrics-out "$TMP/rz.txt"
  losses "$TMP/c1.txt" | awk '$1 >= 10' > "$TMP/c1.tail"
  losses "$TMP/rz.txt" > "$TMP/rz.loss"
  compare "ZeRO resumed from one device continues its losses (10..19)" "$TMP/c1.tail" "$TMP/rz.loss"

  # ---- Bad input -----------------------------------------------------------------------------
  check "--shard-optimizer on one device" 2 "$TMP/bad1.log" "$GPT" "${SMALL[@]}" \
    --out-dir "$TMP/bad" --shard-optimizer --compile-only
  grep -q -- "--shard-optimizer: every variable is on one device ('0:cpu:0').*--devices 2" \
    "$TMP/bad1.log" || { echo "FAIL: one device not explained"; cat "$TMP/bad1.log"; fail=1; }
  check "oflite compile --shard-optimizer on one device" 2 "$TMP/bad2.log" "$OFLITE" compile \
    --job "$TMP/one.job.pb" --cluster "$TMP/one.pbtxt" -o "$TMP/bad.plan.pb" --shard-optimizer
  grep -q -- "--shard-optimizer: every variable is on one device" "$TMP/bad2.log" ||
    { echo "FAIL: oflite compile: one device not explained"; cat "$TMP/bad2.log"; fail=1; }
  [[ ! -e "$TMP/bad.plan.pb" ]] || { echo "FAIL: a refused compile left a plan"; fail=1; }
fi

exit $fail
