#!/usr/bin/env bash
# Multi-machine plans over CommNet, end to end with real processes on
# loopback: data-parallel MLP (Fashion-MNIST) on 2 and 3 machines equals the
# same parallelism on one machine (losses and accuracies within 1e-5
# relative), a 2-stage pipeline across 2 machines (zero-copy READs) and a
# 2-machine model-parallel MLP equal them on one machine, and so does the
# distributed evaluation after training
# (rank 0 prints the one test line; its metrics equal the single-machine
# evaluation within 1e-5 relative); --eval=false skips it, and so does a
# job without a test split; kill -9 of one
# rank mid-training, and of one rank during the evaluation, makes the other
# exit non-zero within 10 s naming the lost rank.
# The transport is the first argument (tcp when absent; tests/BUILD runs the
# script once per transport: tcp, shm, auto with mixed host identities, and
# ibverbs_emu: --comm ibverbs on the cross-process verbs emulator through
# --ib_emulator, which needs no RDMA hardware).
# With shm and auto, a killed rank must leave no shared-memory object; with
# ibverbs_emu no socket of the emulated fabric may be left.
set -u
source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
COMM="${1:-tcp}"
EXTRA=()  # flags every rank gets
if [[ $COMM == ibverbs_emu ]]; then
  COMM=ibverbs
  # Random: abstract socket names are host-wide, pids repeat across sandboxes.
  FABRIC="multinode-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
  EXTRA=(--ib_emulator="$FABRIC")
fi
fresh_tmp multinode
DATA=/usr/share/datasets/fashion-mnist
MLP=(--batch 32 --features 784 --hidden 64 --classes 10 --iterations 20 --accuracy
     --fashion_mnist "$DATA")

cluster() { loopback_cluster "$@"; }  # cluster FILE MACHINES DEVICES
compile() { compile_mlp "$@"; }   # compile NAME CLUSTER WRITE_JOB_ARGS...
# compare and compare_eval: the metric comparisons shared with the namespace
# variant of this test.
# shellcheck source=tests/netns/compare_lib.sh
source "${TEST_SRCDIR}/oneflow_lite/tests/netns/compare_lib.sh"
launch() {  # launch NAME NPROC [RUN_FLAGS...]
  local name=$1 nproc=$2; shift 2
  timeout 120 "$OFLITE" launch --plan "$TMP/$name.plan.pb" --nproc "$nproc" --comm "$COMM" \
    "${EXTRA[@]}" -- --metrics-out "$TMP/$name.{rank}.txt" --eval-out "$TMP/$name.eval.{rank}.txt" --stats \
    --log-every 5 "$@" > "$TMP/$name.log" 2>&1
}
reference() {  # reference NAME: the single-machine run, with evaluation
  timeout 120 "$OFLITE" run --plan "$TMP/$1.plan.pb" --metrics-out "$TMP/$1.txt" \
    --eval-out "$TMP/$1.eval.txt" > "$TMP/$1.log" 2>&1 ||
    { echo "FAIL: reference run $1"; tail -20 "$TMP/$1.log"; fail=1; }
}

cluster "$TMP/one2.pbtxt" 1 2
cluster "$TMP/one3.pbtxt" 1 3
cluster "$TMP/two.pbtxt" 2 1
cluster "$TMP/three.pbtxt" 3 1

# Data parallel, 2 machines vs 2 devices of one machine.
compile ref2 "$TMP/one2.pbtxt" --placement 0:cpu:0-1
compile dp2 "$TMP/two.pbtxt" --placement 0-1:cpu:0
reference ref2
if launch dp2 2; then
  compare "2-machine data parallel equals 1 machine" "$TMP/ref2.txt" "$TMP"/dp2.[0-9].txt
  compare_eval "2-machine data-parallel evaluation equals 1 machine" ref2 dp2 2
  # Every rank says which transport carries its peers (auto on one host: shm).
  want_transport=$COMM; [[ $COMM == auto ]] && want_transport=shm
  [[ $(grep -c "joined over $want_transport\$" "$TMP/dp2.log") == 2 ]] ||
    { echo "FAIL: start-up lines do not say $want_transport"; grep joined "$TMP/dp2.log"; fail=1; }
  # The gradient all-reduce runs as a ring over registered-pool buffers.
  [[ $(grep -c "registered-pool: moved [1-9]" "$TMP/dp2.log") == 2 ]] ||
    { echo "FAIL: --stats shows no ring bytes"; tail -20 "$TMP/dp2.log"; fail=1; }
else
  echo "FAIL: 2-machine launch"; tail -20 "$TMP/dp2.log"; fail=1
fi

# Gradient buckets (the compiler's default, docs/compiler.md): dp2's three
# small gradients (bias 64, 64x10 weights, bias 10; the 784x64 weights stay
# a collective of their own) run as one fused collective. Without buckets
# (--fuse_max_bytes 0) every metric is exactly the same: each gradient is
# summed in the same rank order either way.
"$OFLITE" inspect "$TMP/dp2.plan.pb" > "$TMP/dp2.inspect" 2>&1
grep -q "fused all-reduce buckets: 1, of 3 all-reduces" "$TMP/dp2.inspect" ||
  { echo "FAIL: dp2 has no bucket of its 3 small gradients"; grep -A3 "boxing conv" "$TMP/dp2.inspect"; fail=1; }
"$OFLITE" compile --job "$TMP/dp2.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/dp2u.plan.pb" --quiet \
  --fuse_max_bytes 0 > "$TMP/out" 2>&1 || { echo "FAIL: compile dp2u"; tail -5 "$TMP/out"; fail=1; }
if launch dp2u 2 --eval=false; then
  if cmp -s <(cat "$TMP"/dp2.[0-9].txt | sort) <(cat "$TMP"/dp2u.[0-9].txt | sort) &&
      [[ -s "$TMP/dp2.0.txt" || -s "$TMP/dp2.1.txt" ]]; then
    echo "ok: gradient buckets change no metric ($(cat "$TMP"/dp2u.[0-9].txt | wc -l) values identical)"
  else
    echo "FAIL: fused and unfused data parallel differ"
    diff <(cat "$TMP"/dp2.[0-9].txt | sort) <(cat "$TMP"/dp2u.[0-9].txt | sort) | head; fail=1
  fi
else
  echo "FAIL: 2-machine launch without buckets"; tail -20 "$TMP/dp2u.log"; fail=1
fi

# Data parallel on 3 machines.
MLP[1]=33  # S(0) over 3 parts
compile ref3 "$TMP/one3.pbtxt" --placement 0:cpu:0-2
compile dp3 "$TMP/three.pbtxt" --placement 0-2:cpu:0
MLP[1]=32
reference ref3
if launch dp3 3; then
  compare "3-machine data parallel equals 1 machine" "$TMP/ref3.txt" "$TMP"/dp3.[0-9].txt
  compare_eval "3-machine data-parallel evaluation equals 1 machine" ref3 dp3 3
  [[ $(grep -c "registered-pool: moved [1-9]" "$TMP/dp3.log") == 3 ]] ||
    { echo "FAIL: 3-machine all-reduce did not run as a ring"; grep comm -A1 "$TMP/dp3.log"; fail=1; }
else
  echo "FAIL: 3-machine launch"; tail -20 "$TMP/dp3.log"; fail=1
fi

# --comm auto with host identities that put ranks 0 and 1 on one host and
# rank 2 on another: shm between 0 and 1, tcp to 2, in one job; results
# still equal one machine.
if [[ $COMM == auto ]]; then
  port=$(free_port)
  hosts=(host-a host-a host-b)
  pids=()
  for rank in 0 1 2; do
    OFLITE_JOB_TOKEN=multinode-test OFLITE_HOST=127.0.0.$((rank + 1)) timeout 120 "$OFLITE" run \
      --plan "$TMP/dp3.plan.pb" --rank $rank --master 127.0.0.1:$port --comm auto \
      --host_id "${hosts[$rank]}" --metrics-out "$TMP/mixed.$rank.txt" --eval=false --stats \
      > "$TMP/mixed.$rank.log" 2>&1 &
    pids+=($!)
  done
  mixed_ok=1
  for pid in "${pids[@]}"; do wait "$pid" || mixed_ok=0; done
  if [[ $mixed_ok == 1 ]]; then
    compare "3 machines, shm and tcp mixed, equal 1 machine" "$TMP/ref3.txt" "$TMP"/mixed.[0-9].txt
    grep -q "joined over auto: shm to rank 1; tcp to rank 2$" "$TMP/mixed.0.log" &&
      grep -q "joined over tcp$" "$TMP/mixed.2.log" &&
      grep -q "^comm (auto: shm to rank 0; tcp to rank 2)" "$TMP/mixed.1.log" ||
      { echo "FAIL: mixed transports not reported"; grep -h "joined\|^comm" "$TMP"/mixed.*.log; fail=1; }
  else
    echo "FAIL: mixed shm/tcp job"; tail -5 "$TMP"/mixed.*.log; fail=1
  fi
fi

# Pipeline: stage 0 on machine 0, stage 1 on machine 1 (CommNet actors).
compile refpp "$TMP/one2.pbtxt" --stages 0:cpu:0,0:cpu:1
compile pp "$TMP/two.pbtxt" --stages 0:cpu:0,1:cpu:0
reference refpp
if launch pp 2; then
  compare "2-machine pipeline equals 1 machine" "$TMP/refpp.txt" "$TMP"/pp.[0-9].txt
  compare_eval "2-machine pipeline evaluation equals 1 machine" refpp pp 2
  # Static activations/gradients are pulled by one-sided READ on both machines.
  [[ $(grep -c "static-zero-copy: moved [1-9]" "$TMP/pp.log") == 2 ]] ||
    { echo "FAIL: pipeline did not use zero-copy READs"; grep comm -A3 "$TMP/pp.log"; fail=1; }
else
  echo "FAIL: pipeline launch"; tail -20 "$TMP/pp.log"; fail=1
fi

# Model parallel (the first layer's weight split by columns over the two
# machines): each machine evaluates with its own slice of the trained weight.
compile refmp "$TMP/one2.pbtxt" --placement 0:cpu:0-1 --model_parallel columns
compile mp "$TMP/two.pbtxt" --placement 0-1:cpu:0 --model_parallel columns
reference refmp
if launch mp 2; then
  compare "2-machine model parallel equals 1 machine" "$TMP/refmp.txt" "$TMP"/mp.[0-9].txt
  compare_eval "2-machine model-parallel evaluation equals 1 machine" refmp mp 2
else
  echo "FAIL: model-parallel launch"; tail -20 "$TMP/mp.log"; fail=1
fi

# --eval=false: no evaluation on any rank.
if timeout 120 "$OFLITE" launch --plan "$TMP/pp.plan.pb" --nproc 2 --comm "$COMM" "${EXTRA[@]}" \
    -- --iters 2 --eval=false > "$TMP/noeval.log" 2>&1; then
  if grep -q "test" "$TMP/noeval.log"; then echo "FAIL: --eval=false evaluated"; grep test "$TMP/noeval.log"; fail=1
  else echo "ok: --eval=false skips the evaluation on every rank"; fi
else
  echo "FAIL: --eval=false launch"; tail -20 "$TMP/noeval.log"; fail=1
fi

# kill_rank1 WHAT PLAN WHEN RUN_FLAGS...: starts 2 ranks of PLAN, kill -9s
# rank 1 as soon as its log matches WHEN; rank 0 must exit non-zero within
# 10 s naming rank 1, without printing a test line.
kill_rank1() {
  local what=$1 plan=$2 when=$3; shift 3
  local port=$(free_port)
  # Started directly (not under timeout) so $! is the oflite process itself;
  # every wait below is bounded and leftovers are killed.
  OFLITE_JOB_TOKEN=multinode-test OFLITE_HOST=127.0.0.1 "$OFLITE" run --plan "$plan" --rank 0 \
    --master 127.0.0.1:$port --comm "$COMM" "${EXTRA[@]}" "$@" > "$TMP/r0.log" 2>&1 &
  local r0=$!
  OFLITE_JOB_TOKEN=multinode-test OFLITE_HOST=127.0.0.2 "$OFLITE" run --plan "$plan" --rank 1 \
    --master 127.0.0.1:$port --comm "$COMM" "${EXTRA[@]}" "$@" > "$TMP/r1.log" 2>&1 &
  local r1=$!
  for ((i = 0; i < 3000; ++i)); do grep -q "$when" "$TMP/r1.log" 2>/dev/null && break; sleep 0.01; done
  kill -9 "$r1"
  local start; start=$(date +%s%N)
  for ((i = 0; i < 150; ++i)); do kill -0 "$r0" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$r0" 2>/dev/null; then
    echo "FAIL: $what: rank 0 still running 15 s after rank 1 was killed"; kill -9 "$r0"; fail=1
    wait "$r0" "$r1" 2>/dev/null
    return
  fi
  wait "$r0"; local rc=$?
  wait "$r1" 2>/dev/null
  local elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  if [[ $rc == 0 ]]; then echo "FAIL: $what: rank 0 exit 0 after peer loss"; tail -5 "$TMP/r0.log"; fail=1
  elif (( elapsed_ms > 10000 )); then echo "FAIL: $what: rank 0 took ${elapsed_ms} ms"; fail=1
  elif ! grep -q "rank 1" "$TMP/r0.log"; then echo "FAIL: $what: rank 0 did not name rank 1"; tail -5 "$TMP/r0.log"; fail=1
  elif grep -q "test (" "$TMP/r0.log"; then echo "FAIL: $what: rank 0 printed a test line"; fail=1
  else echo "ok: $what: rank 0 exit $rc after ${elapsed_ms} ms: $(grep "rank 1" "$TMP/r0.log" | tail -1)"; fi
  if ls /dev/shm 2>/dev/null | grep -q oflite; then
    echo "FAIL: $what: shared-memory objects left in /dev/shm: $(ls /dev/shm | grep oflite)"; fail=1
  fi
  if [[ -n ${FABRIC:-} ]] && grep -q "@oflite-verbs/$FABRIC/" /proc/net/unix; then
    echo "FAIL: $what: emulated fabric sockets left: $(grep -o "@oflite-verbs/$FABRIC/.*" /proc/net/unix)"
    fail=1
  fi
}

# kill -9 of rank 1 mid-training.
MLP=(--batch 32 --features 784 --hidden 64 --classes 10 --iterations 1000000)
compile long "$TMP/two.pbtxt" --placement 0-1:cpu:0
kill_rank1 "kill -9 rank 1 mid-training" "$TMP/long.plan.pb" "iter " --eval=false --log-every 1000
# A job without a test split (random_batch) skips the evaluation on every rank.
if timeout 120 "$OFLITE" launch --plan "$TMP/long.plan.pb" --nproc 2 --comm "$COMM" "${EXTRA[@]}" \
    -- --iters 2 > "$TMP/nosplit.log" 2>&1; then
  if [[ $(grep -c "test: skipped" "$TMP/nosplit.log") == 2 ]]; then
    echo "ok: no test split: every rank skips the evaluation"
  else echo "FAIL: no test split: expected a skip note per rank"; grep test "$TMP/nosplit.log"; fail=1; fi
else
  echo "FAIL: launch of a job without test split"; tail -20 "$TMP/nosplit.log"; fail=1
fi
# A bad --ib_* value is refused before the rank joins anything (exit 2,
# naming the flag).
"$OFLITE" run --plan "$TMP/long.plan.pb" --rank 0 --master 127.0.0.1:1 --comm ibverbs \
  --ib_gid_index=abc > "$TMP/ibflag.log" 2>&1
rc=$?
if [[ $rc == 2 ]] && grep -q "ib_gid_index" "$TMP/ibflag.log"; then
  echo "ok: bad --ib_gid_index refused: $(tail -1 "$TMP/ibflag.log")"
else echo "FAIL: bad --ib_gid_index: exit $rc"; tail -5 "$TMP/ibflag.log"; fail=1; fi
"$OFLITE" run --plan "$TMP/long.plan.pb" --rank 0 --master 127.0.0.1:1 --comm ibverbs \
  --ib_emulator=a/b > "$TMP/ibflag.log" 2>&1
rc=$?
if [[ $rc == 2 ]] && grep -q "ib_emulator.*'a/b'" "$TMP/ibflag.log"; then
  echo "ok: bad --ib_emulator refused: $(tail -1 "$TMP/ibflag.log")"
else echo "FAIL: bad --ib_emulator: exit $rc"; tail -5 "$TMP/ibflag.log"; fail=1; fi
# kill -9 of rank 1 during the evaluation (small test batches: a long pass).
MLP=(--batch 4 --features 784 --hidden 64 --classes 10 --iterations 2 --accuracy
     --fashion_mnist "$DATA")
compile evalkill "$TMP/two.pbtxt" --placement 0-1:cpu:0
kill_rank1 "kill -9 rank 1 during evaluation" "$TMP/evalkill.plan.pb" "trained iterations"

exit $fail
