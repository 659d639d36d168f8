#!/usr/bin/env bash
# Two `oflite run` ranks started by hand on loopback (TCP), without binding,
# share this host's CPUs (--share-host, comm/launch/host_share.h):
#  - bound first (taskset, one CPU each): each rank is alone on its CPUs
#    and says it shares nothing;
#  - unbound with --share-host bind: each names the 2 local ranks and binds
#    to its own CPUs, disjoint from the other's;
#  - unbound with --share-host threads: limited to floor(CPUs / 2) compute
#    threads, not bound; --share-host auto (the default) and off say so;
#  - every run trains to the same losses as the bound run (a small MLP,
#    whose kernels run on one thread whatever the count, so the figures
#    are bit for bit the same);
#  - a bad --share-host or OFLITE_SHARE_HOST exits 2 naming it.
# No timing is checked. Every run is bounded by `timeout`.
set -u
source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
fresh_tmp share_host

CPUS=$(/usr/bin/python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
NCPUS=$(echo "$CPUS" | tr ',' '\n' | wc -l)
if (( NCPUS < 2 )); then
  echo "FAIL: this test needs 2 CPUs in its affinity mask, has $CPUS"
  exit 1
fi
FIRST=${CPUS%%,*}
SECOND=$(echo "$CPUS" | cut -d, -f2)

loopback_cluster "$TMP/two.pbtxt" 2
MLP=(--batch 16 --features 16 --hidden 8 --classes 4 --iterations 300 --placement 0-1:cpu:0)
compile_mlp mlp "$TMP/two.pbtxt"
(( fail )) && exit 1
PORT=$(free_port 8)
export OFLITE_JOB_TOKEN="share-host-test-$$"

# run_job NAME PREFIX0 PREFIX1 ARGS...: both ranks (rank R under PREFIX R,
# e.g. "taskset -c 0", or "-" for none); logs $TMP/NAME.rR.log, exit codes
# RC0 RC1; the port steps for each job.
run_job() {
  local name=$1 p0=$2 p1=$3 pids=() r prefix
  shift 3
  for r in 0 1; do
    prefix=$p0
    (( r == 1 )) && prefix=$p1
    [[ $prefix == - ]] && prefix=""
    OFLITE_HOST="127.0.0.$((r + 1))" timeout 60 $prefix "$OFLITE" run --plan "$TMP/mlp.plan.pb" \
      --rank $r --master "127.0.0.1:$PORT" --comm tcp --eval=false --log-every 25 "$@" \
      > "$TMP/$name.r$r.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[0]}"; RC0=$?
  wait "${pids[1]}"; RC1=$?
  PORT=$((PORT + 1))
  if [[ $RC0 != 0 || $RC1 != 0 ]]; then
    echo "FAIL: $name: ranks exited $RC0 and $RC1"
    tail -5 "$TMP/$name.r0.log" "$TMP/$name.r1.log"
    fail=1
    return 1
  fi
}

# decision NAME RANK: the rank's host-share line, without its prefix.
decision() {
  grep "^oflite run: rank $2: .*(--share-host " "$TMP/$1.r$2.log" | sed "s/^oflite run: rank $2: //"
}

# losses NAME: rank 0's progress lines (iteration and loss).
losses() {
  grep '^iter ' "$TMP/$1.r0.log" | awk '{print $2, $3, $4}'
}

# expect NAME RANK PATTERN: the decision line matches the extended regex.
expect() {
  local line
  line=$(decision "$1" "$2")
  if [[ ! $line =~ $3 ]]; then
    echo "FAIL: $1: rank $2 said '$line', expected /$3/"
    fail=1
  else
    echo "ok: $1 rank $2: $line"
  fi
}

run_job bound "taskset -c $FIRST" "taskset -c $SECOND" &&
  expect bound 0 "^alone on CPUs $FIRST: nothing shared \(--share-host auto\)$" &&
  expect bound 1 "^alone on CPUs $SECOND: nothing shared \(--share-host auto\)$"
REFERENCE=$(losses bound)
if (( $(echo "$REFERENCE" | grep -c loss) < 10 )); then
  echo "FAIL: the bound run printed fewer than 10 progress lines:"; echo "$REFERENCE"; fail=1
fi

SHARE="2 ranks share CPUs [0-9,-]+, this is local rank"
BOUND0="" BOUND1=""
if run_job bind - - --share-host bind; then
  expect bind 0 "^$SHARE 0: bound to CPUs [0-9,-]+ \(--share-host bind\)$"
  expect bind 1 "^$SHARE 1: bound to CPUs [0-9,-]+ \(--share-host bind\)$"
  BOUND0=$(decision bind 0 | sed 's/.*bound to CPUs \([0-9,-]*\).*/\1/')
  BOUND1=$(decision bind 1 | sed 's/.*bound to CPUs \([0-9,-]*\).*/\1/')
  if [[ -z $BOUND0 || $BOUND0 == "$BOUND1" ]]; then
    echo "FAIL: bind: the ranks were bound to '$BOUND0' and '$BOUND1'"; fail=1
  fi
fi

THREADS=$((NCPUS / 2))
run_job threads - - --share-host threads &&
  expect threads 0 "^$SHARE 0: compute threads limited to $THREADS per CPU device \(--share-host threads\)$" &&
  expect threads 1 "^$SHARE 1: compute threads limited to $THREADS per CPU device \(--share-host threads\)$"

# The default: binding when the mask is the machine's, else threads.
run_job auto - - &&
  expect auto 0 "^$SHARE 0: (bound to CPUs [0-9,-]+|compute threads limited to $THREADS per CPU device; not bound: .*) \(--share-host auto\)$" &&
  expect auto 1 "^$SHARE 1: (bound to|compute threads limited to) "

OFLITE_SHARE_HOST=off run_job off - - &&
  expect off 0 "^$SHARE 0: left as they are \(--share-host off\)$"

for name in bind threads auto off; do
  [[ -f $TMP/$name.r0.log ]] || continue
  if [[ $(losses $name) != "$REFERENCE" ]]; then
    echo "FAIL: $name: losses differ from the bound run's:"
    diff <(echo "$REFERENCE") <(losses $name) | head -10
    fail=1
  else
    echo "ok: $name: the bound run's losses ($(echo "$REFERENCE" | tail -1))"
  fi
done

# Bad values: exit 2 naming the flag or the variable, before joining.
timeout 20 "$OFLITE" run --plan "$TMP/mlp.plan.pb" --rank 0 --master "127.0.0.1:$PORT" \
  --share-host sometimes > "$TMP/bad.log" 2>&1
rc=$?
if [[ $rc != 2 ]] || ! grep -q -- "--share-host: 'sometimes' is not a way to share the host" "$TMP/bad.log"; then
  echo "FAIL: --share-host sometimes: exit $rc"; cat "$TMP/bad.log"; fail=1
else
  echo "ok: --share-host sometimes: exit 2: $(tail -1 "$TMP/bad.log")"
fi
OFLITE_SHARE_HOST=cores timeout 20 "$OFLITE" run --plan "$TMP/mlp.plan.pb" --rank 0 \
  --master "127.0.0.1:$PORT" > "$TMP/bad_env.log" 2>&1
rc=$?
if [[ $rc != 2 ]] || ! grep -q "OFLITE_SHARE_HOST: 'cores'" "$TMP/bad_env.log"; then
  echo "FAIL: OFLITE_SHARE_HOST=cores: exit $rc"; cat "$TMP/bad_env.log"; fail=1
else
  echo "ok: OFLITE_SHARE_HOST=cores: exit 2"
fi
exit $fail
