#!/usr/bin/env bash
# The multinode scenarios of tests/multinode_test.sh with every rank on its
# own "host": a network namespace with its own address, joined to the others
# through a bridge over links shaped to RATE (netns_lib.sh; default 1gbit,
# MULTINODE_NETNS_RATE overrides), ranks started as `ip netns exec HOST
# oflite run --rank R --master HOST0:PORT --comm tcp`. Data parallel on 2
# and 3 hosts, a 2-stage pipeline and a model-parallel MLP on 2 hosts equal
# the same parallelism on one machine (losses, accuracies and the test
# metrics of the distributed evaluation within 1e-5 relative); their
# traffic crosses the shaped links (tc counters); kill -9 of one rank
# mid-training and during the evaluation makes the other exit non-zero
# within 10 s naming the lost rank; a cut link (no FIN, no RST) makes both
# ranks exit 4 within 15 s naming the other. Skips (exit 0, saying why) where
# namespaces cannot be built; every namespace and process is gone at exit,
# and a kill -9 of this test leaves a set the next run reaps.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/netns/netns_lib.sh
source "$HERE/netns_lib.sh"
# shellcheck source=tests/netns/compare_lib.sh
source "$HERE/compare_lib.sh"
if ! netns_check; then echo "SKIP: network namespaces unavailable: $NETNS_SKIP_REASON"; exit 0; fi
OFLITE="${TEST_SRCDIR}/oneflow_lite/tools/oflite/oflite"
WRITE_JOB="${TEST_SRCDIR}/oneflow_lite/oneflow_lite/testing/write_test_job"
TMP="${TEST_TMPDIR:-/tmp}/multinode_netns"
RATE="${MULTINODE_NETNS_RATE:-1gbit}"
rm -rf "$TMP"; mkdir -p "$TMP"
fail=0
DATA=/usr/share/datasets/fashion-mnist
MLP=(--batch 32 --features 784 --hidden 64 --classes 10 --iterations 20 --accuracy
     --fashion_mnist "$DATA")

netns_up 3 "$RATE" || { echo "FAIL: cannot build 3 hosts"; exit 1; }
echo "hosts: ${NETNS_ADDR[*]} (set $NETNS_ID, links at $RATE)"
TOKEN="netns-test-$$"
PORT=29500

cluster() {  # cluster FILE MACHINES DEVICES: machine m at host m's address
  : > "$1"
  for ((m = 0; m < $2; ++m)); do
    echo "machine { id: $m address: \"${NETNS_ADDR[$m]}\" cpu_devices: $3 }" >> "$1"
  done
}
compile() {  # compile NAME CLUSTER WRITE_JOB_ARGS...
  local name=$1 cl=$2; shift 2
  "$WRITE_JOB" "$TMP/$name.job.pb" "${MLP[@]}" "$@" > "$TMP/out" 2>&1 &&
    "$OFLITE" compile --job "$TMP/$name.job.pb" --cluster "$cl" -o "$TMP/$name.plan.pb" --quiet \
        > "$TMP/out" 2>&1 || { echo "FAIL: compile $name"; tail -20 "$TMP/out"; fail=1; }
}
reference() {  # reference NAME: the single-machine run, with evaluation
  timeout 120 "$OFLITE" run --plan "$TMP/$1.plan.pb" --metrics-out "$TMP/$1.txt" \
    --eval-out "$TMP/$1.eval.txt" > "$TMP/$1.log" 2>&1 ||
    { echo "FAIL: reference run $1"; tail -20 "$TMP/$1.log"; fail=1; }
}
# start_rank NAME R LOG RUN_FLAGS...: rank R of NAME's plan in host R, in
# the background ($! is the oflite process: ip netns exec and env exec; a
# shell function such as netns_exec would leave $! a subshell). With
# BOUND=S set, the rank runs under `timeout -s KILL S` ($! is then timeout,
# which passes a TERM on): a rank of the endless plan that this test does
# not kill itself dies by then even if the test is kill -9'd, and its peer
# follows it (peer loss).
start_rank() {
  local name=$1 r=$2 log=$3; shift 3
  local bound=()
  [[ -n ${BOUND:-} ]] && bound=(timeout -s KILL "$BOUND")
  ip netns exec "${NETNS_NS[$r]}" "${bound[@]}" env OFLITE_JOB_TOKEN="$TOKEN" \
    OFLITE_HOST="${NETNS_ADDR[$r]}" "$OFLITE" run --plan "$TMP/$name.plan.pb" --rank "$r" \
    --master "${NETNS_ADDR[0]}:$PORT" --comm tcp "$@" > "$log" 2>&1 &
}
# launch NAME NPROC: every rank in its host, bounded by 120 s; $TMP/NAME.log
# holds their output with "[rank R] " prefixes, as `oflite launch` writes it.
launch() {
  local name=$1 nproc=$2 r pids=() rc=0 status
  PORT=$((PORT + 1))
  for ((r = 0; r < nproc; ++r)); do
    start_rank "$name" "$r" "$TMP/$name.r$r.log" --metrics-out "$TMP/$name.$r.txt" \
      --eval-out "$TMP/$name.eval.$r.txt" --stats --log-every 5 --watchdog-seconds 100
    pids+=($!)
  done
  for ((i = 0; i < 1200; ++i)); do
    running=0
    for r in "${pids[@]}"; do kill -0 "$r" 2> /dev/null && running=1; done
    ((running)) || break
    sleep 0.1
  done
  for r in "${pids[@]}"; do kill -9 "$r" 2> /dev/null; wait "$r"; status=$?; ((rc == 0)) && rc=$status; done
  : > "$TMP/$name.log"
  for ((r = 0; r < nproc; ++r)); do sed "s/^/[rank $r] /" "$TMP/$name.r$r.log" >> "$TMP/$name.log"; done
  return $rc
}
tc_sent() {  # tc_sent HOST: bytes host HOST's shaped link has sent so far
  netns_exec "$1" tc -s qdisc show dev eth0 | awk '/Sent/ { print $2; exit }'
}
# crossed NAME HOSTS...: the hosts' links together carried at least the
# bytes their ranks moved through CommNet (--stats; a ring step is counted
# by its sender, a READ by its reader), so the job did not go around them.
crossed() {
  local name=$1 r moved=0 sent=0; shift
  for r in "$@"; do
    moved=$(( moved + $(grep -o "moved [0-9]*" "$TMP/$name.r$r.log" | awk '{ s += $2 } END { print s + 0 }') ))
    sent=$(( sent + $(tc_sent "$r") - ${SENT_BEFORE[$r]} ))
  done
  if (( moved == 0 || sent < moved )); then
    echo "FAIL: $name: the links sent $sent B, the ranks moved $moved B"; fail=1
  else
    echo "ok: $name: the ranks' $moved CommNet bytes crossed the shaped links ($sent B sent)"
  fi
}
mark_links() { SENT_BEFORE=(); local r; for r in 0 1 2; do SENT_BEFORE[$r]=$(tc_sent $r); done; }

cluster "$TMP/one2.pbtxt" 1 2
cluster "$TMP/one3.pbtxt" 1 3
cluster "$TMP/two.pbtxt" 2 1
cluster "$TMP/three.pbtxt" 3 1

# scenario NAME NPROC REF WHAT: launches NAME over NPROC hosts and checks it
# against the one-machine run REF (training metrics, evaluation, links).
scenario() {
  local name=$1 nproc=$2 ref=$3 what=$4
  mark_links
  if launch "$name" "$nproc"; then
    compare "$nproc-host $what equals 1 machine" "$TMP/$ref.txt" "$TMP/$name".[0-9].txt
    compare_eval "$nproc-host $what evaluation equals 1 machine" "$ref" "$name" "$nproc"
    crossed "$name" $(seq 0 $((nproc - 1)))
  else
    echo "FAIL: $nproc-host $what launch"; tail -20 "$TMP/$name.log"; fail=1
  fi
}

compile ref2 "$TMP/one2.pbtxt" --placement 0:cpu:0-1
compile dp2 "$TMP/two.pbtxt" --placement 0-1:cpu:0
reference ref2
scenario dp2 2 ref2 "data parallel"

MLP[1]=33  # S(0) over 3 parts
compile ref3 "$TMP/one3.pbtxt" --placement 0:cpu:0-2
compile dp3 "$TMP/three.pbtxt" --placement 0-2:cpu:0
MLP[1]=32
reference ref3
scenario dp3 3 ref3 "data parallel"

compile refpp "$TMP/one2.pbtxt" --stages 0:cpu:0,0:cpu:1
compile pp "$TMP/two.pbtxt" --stages 0:cpu:0,1:cpu:0
reference refpp
scenario pp 2 refpp "pipeline"

compile refmp "$TMP/one2.pbtxt" --placement 0:cpu:0-1 --model_parallel columns
compile mp "$TMP/two.pbtxt" --placement 0-1:cpu:0 --model_parallel columns
reference refmp
scenario mp 2 refmp "model parallel"

# kill_rank1 WHAT PLAN WHEN RUN_FLAGS...: ranks 0 and 1 of PLAN in hosts 0
# and 1; kill -9 of rank 1 once its log matches WHEN; rank 0 must exit
# non-zero within 10 s naming rank 1, without printing a test line.
kill_rank1() {
  local what=$1 plan=$2 when=$3; shift 3
  PORT=$((PORT + 1))
  BOUND=240 start_rank "$plan" 0 "$TMP/r0.log" "$@"
  local r0=$!
  start_rank "$plan" 1 "$TMP/r1.log" "$@"
  local r1=$!
  for ((i = 0; i < 3000; ++i)); do grep -q "$when" "$TMP/r1.log" 2> /dev/null && break; sleep 0.01; done
  kill -9 "$r1"
  local start; start=$(date +%s%N)
  for ((i = 0; i < 150; ++i)); do kill -0 "$r0" 2> /dev/null || break; sleep 0.1; done
  if kill -0 "$r0" 2> /dev/null; then
    echo "FAIL: $what: rank 0 still running 15 s after rank 1 was killed"; kill -TERM "$r0"; fail=1
    wait "$r0" "$r1" 2> /dev/null
    return
  fi
  wait "$r0"; local rc=$?
  wait "$r1" 2> /dev/null
  local elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  if [[ $rc == 0 ]]; then echo "FAIL: $what: rank 0 exit 0 after peer loss"; tail -5 "$TMP/r0.log"; fail=1
  elif (( elapsed_ms > 10000 )); then echo "FAIL: $what: rank 0 took ${elapsed_ms} ms"; fail=1
  elif ! grep -q "rank 1" "$TMP/r0.log"; then echo "FAIL: $what: rank 0 did not name rank 1"; tail -5 "$TMP/r0.log"; fail=1
  elif grep -q "test (" "$TMP/r0.log"; then echo "FAIL: $what: rank 0 printed a test line"; fail=1
  else echo "ok: $what: rank 0 exit $rc after ${elapsed_ms} ms: $(grep "rank 1" "$TMP/r0.log" | tail -1)"; fi
}

MLP=(--batch 32 --features 784 --hidden 64 --classes 10 --iterations 1000000)
compile long "$TMP/two.pbtxt" --placement 0-1:cpu:0
kill_rank1 "kill -9 rank 1 (other host) mid-training" long "iter " --eval=false --log-every 1000
# A cut link (host 1's cable pulled: no FIN or RST reaches anyone, which
# loopback cannot imitate): both ranks exit 4 within 15 s, each naming the
# other as silent. The link comes back up for what follows.
cut_link() {
  PORT=$((PORT + 1))
  BOUND=240 start_rank long 0 "$TMP/c0.log" --eval=false --log-every 1000
  local r0=$!
  start_rank long 1 "$TMP/c1.log" --eval=false --log-every 1000
  local r1=$!
  for ((i = 0; i < 3000; ++i)); do grep -q "iter " "$TMP/c1.log" 2> /dev/null && break; sleep 0.01; done
  ip -n "${NETNS_NS[1]}" link set eth0 down
  local start; start=$(date +%s%N)
  for ((i = 0; i < 300; ++i)); do
    kill -0 "$r0" 2> /dev/null || kill -0 "$r1" 2> /dev/null || break; sleep 0.1
  done
  local elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  kill -TERM "$r0" 2> /dev/null  # timeout passes it on to rank 0
  kill -9 "$r1" 2> /dev/null
  wait "$r0"; local rc0=$?
  wait "$r1"; local rc1=$?
  ip -n "${NETNS_NS[1]}" link set eth0 up
  if [[ $rc0 != 4 || $rc1 != 4 ]]; then
    echo "FAIL: cut link: exits $rc0 and $rc1 (want 4 and 4) after ${elapsed_ms} ms"
    tail -2 "$TMP/c0.log" "$TMP/c1.log"; fail=1
  elif (( elapsed_ms > 15000 )); then echo "FAIL: cut link: ranks took ${elapsed_ms} ms"; fail=1
  elif ! grep -q "lost rank 1" "$TMP/c0.log" || ! grep -q "lost rank 0" "$TMP/c1.log"; then
    echo "FAIL: cut link: a rank did not name the other"; tail -2 "$TMP/c0.log" "$TMP/c1.log"; fail=1
  else
    echo "ok: cut link of host 1: both ranks exit 4 within ${elapsed_ms} ms: $(tail -1 "$TMP/c0.log")"
  fi
}
cut_link
MLP=(--batch 4 --features 784 --hidden 64 --classes 10 --iterations 2 --accuracy
     --fashion_mnist "$DATA")
compile evalkill "$TMP/two.pbtxt" --placement 0-1:cpu:0
kill_rank1 "kill -9 rank 1 (other host) during evaluation" evalkill "trained iterations"

id=$NETNS_ID
netns_down_all
if netns_list_sets | grep -qx "$id"; then echo "FAIL: set $id left behind"; fail=1
else echo "ok: hosts torn down"; fi
exit $fail
