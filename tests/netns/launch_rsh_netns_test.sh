#!/usr/bin/env bash
# oflite launch --hosts over network-namespace hosts, with tests/netns/
# netns_rsh.sh (`ip netns exec` behind ssh's contract) as --rsh:
#  - the MLP on 2 hosts (data parallel, tcp) trains equal to the same
#    parallelism on one machine (compare_lib.sh: every metric within 1e-5);
#  - SIGTERM and SIGINT to launch reach the remote ranks through their
#    controlling shells: launch exits 128 + the signal, and no process is
#    left in either host within 10 s;
#  - kill -9 of launch itself: its remote ranks see their control pipe end
#    and stop, nothing left in either host within 10 s;
#  - kill -9 of the rank on host 1: launch exits 1 naming rank 1.
# Skips (exit 0, "SKIPPED: reason") where namespaces cannot be built.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/netns/netns_lib.sh
source "$HERE/netns_lib.sh"
# shellcheck source=tests/netns/compare_lib.sh
source "$HERE/compare_lib.sh"
if ! netns_check; then echo "SKIPPED: network namespaces unavailable: $NETNS_SKIP_REASON"; exit 0; fi
OFLITE="${TEST_SRCDIR}/oneflow_lite/tools/oflite/oflite"
WRITE_JOB="${TEST_SRCDIR}/oneflow_lite/oneflow_lite/testing/write_test_job"
RSH="$HERE/netns_rsh.sh"
TMP="${TEST_TMPDIR:-/tmp}/launch_rsh_netns"
rm -rf "$TMP"; mkdir -p "$TMP"
fail=0
DATA=/usr/share/datasets/fashion-mnist
MLP=(--batch 32 --features 784 --hidden 64 --classes 10 --iterations 20 --accuracy
     --fashion_mnist "$DATA")

netns_up 2 none || { echo "FAIL: cannot build 2 hosts"; exit 1; }
export NETNS_RSH_SET=$NETNS_ID
HOSTS="${NETNS_ADDR[0]},${NETNS_ADDR[1]}"
echo "hosts: $HOSTS (set $NETNS_ID)"
LAUNCHES=()
cleanup() {  # launches first (their ranks then end), then the hosts
  local pid; for pid in "${LAUNCHES[@]}"; do kill -9 "$pid" 2> /dev/null; done
  netns_down_all
}
trap cleanup EXIT
trap 'cleanup; trap - INT; kill -INT $$' INT
trap 'cleanup; trap - TERM; kill -TERM $$' TERM

compile() {  # compile NAME MACHINES WRITE_JOB_ARGS...
  local name=$1 machines=$2 m; shift 2
  : > "$TMP/$name.cluster"
  for ((m = 0; m < machines; ++m)); do
    echo "machine { id: $m address: \"${NETNS_ADDR[$m]}\" cpu_devices: $((3 - machines)) }" \
      >> "$TMP/$name.cluster"
  done
  "$WRITE_JOB" "$TMP/$name.job.pb" "${MLP[@]}" "$@" > "$TMP/out" 2>&1 &&
    "$OFLITE" compile --job "$TMP/$name.job.pb" --cluster "$TMP/$name.cluster" \
      -o "$TMP/$name.plan.pb" --quiet > "$TMP/out" 2>&1 ||
    { echo "FAIL: compile $name"; tail -20 "$TMP/out"; exit 1; }
}
# host_pids I: every process in host I (the rank, its controller...).
host_pids() { ip netns pids "${NETNS_NS[$1]}" 2> /dev/null | tr '\n' ' '; }
# no_process_left WHAT: both hosts are empty within 10 s.
no_process_left() {
  local left i
  for ((i = 0; i < 100; ++i)); do
    left="$(host_pids 0)$(host_pids 1)"
    [[ -z ${left// /} ]] && { echo "ok: $1: no process left on either host"; return 0; }
    sleep 0.1
  done
  echo "FAIL: $1: processes left on the hosts:"; ps -o pid,args -p "${left// /,}" | head; fail=1
  local pid; for pid in $left; do kill -9 "$pid" 2> /dev/null; done
  return 1
}

# ---- The MLP on 2 hosts equals 1 machine ---------------------------------
compile ref 1 --placement 0:cpu:0-1
compile dp 2 --placement 0-1:cpu:0
timeout 120 "$OFLITE" run --plan "$TMP/ref.plan.pb" --metrics-out "$TMP/ref.txt" --eval=false \
  > "$TMP/ref.log" 2>&1 || { echo "FAIL: reference run"; tail -20 "$TMP/ref.log"; exit 1; }
start=$(date +%s%N)
timeout 180 "$OFLITE" launch --plan "$TMP/dp.plan.pb" --hosts "$HOSTS" --rsh "$RSH" \
  --oflite "$OFLITE" --comm tcp -- --metrics-out "$TMP/dp.{rank}.txt" --eval=false \
  > "$TMP/dp.log" 2>&1
rc=$?
echo "launch --hosts --rsh: exit $rc after $(( ($(date +%s%N) - start) / 1000000 )) ms"
if [[ $rc != 0 ]]; then
  echo "FAIL: launch --hosts with --rsh $RSH"; tail -20 "$TMP/dp.log"; fail=1
else
  compare "2 hosts through --rsh equal 1 machine" "$TMP/ref.txt" "$TMP"/dp.[01].txt
fi
no_process_left "after the job"

# ---- Signals reach the remote ranks --------------------------------------
MLP[9]=100000000  # --iterations: runs until stopped
compile long 2 --placement 0-1:cpu:0
# start_long LOG: launches the endless job in the background (LAUNCH: its
# pid) and waits up to 60 s until rank 0 trains on its host.
start_long() {
  "$OFLITE" launch --plan "$TMP/long.plan.pb" --hosts "$HOSTS" --rsh "$RSH" --oflite "$OFLITE" \
    --comm tcp --grace_ms 3000 -- --eval=false --log-every 100 > "$1" 2>&1 &
  LAUNCH=$!
  LAUNCHES+=("$LAUNCH")
  for ((i = 0; i < 600; ++i)); do
    grep -q '^\[rank 0\] iter ' "$1" && [[ -n "$(host_pids 1)" ]] && return 0
    kill -0 "$LAUNCH" 2> /dev/null || break
    sleep 0.1
  done
  echo "FAIL: the endless job did not start training"; tail -20 "$1"; fail=1
  return 1
}
# wait_launch SECONDS: RC = launch's exit code (999: still running).
wait_launch() {
  RC=999
  for ((i = 0; i < $1 * 10; ++i)); do
    kill -0 "$LAUNCH" 2> /dev/null || { wait "$LAUNCH"; RC=$?; return; }
    sleep 0.1
  done
}
for sig in TERM INT; do
  log="$TMP/$sig.log"
  start_long "$log" || continue
  echo "  before SIG$sig: host 0 runs $(host_pids 0), host 1 runs $(host_pids 1)"
  kill -s "$sig" "$LAUNCH"
  start=$(date +%s%N)
  wait_launch 30
  code=$(( 128 + $(kill -l "$sig") ))
  if [[ $RC != "$code" ]]; then
    echo "FAIL: SIG$sig: launch exit $RC, expected $code"; tail -5 "$log"; fail=1
  elif ! tail -1 "$log" | grep -q "oflite launch: interrupted by signal $(kill -l "$sig")"; then
    echo "FAIL: SIG$sig: no 'interrupted' line last"; tail -5 "$log"; fail=1
  else
    echo "ok: SIG$sig to launch: exit $RC after $(( ($(date +%s%N) - start) / 1000000 )) ms"
  fi
  no_process_left "SIG$sig to launch"
done

# kill -9 of launch: nothing forwards a signal, the control pipes end.
log="$TMP/kill9_launch.log"
if start_long "$log"; then
  kill -9 "$LAUNCH"
  wait "$LAUNCH" 2> /dev/null
  no_process_left "kill -9 of launch"
fi

# kill -9 of the remote rank on host 1: launch blames rank 1.
log="$TMP/kill9_rank.log"
if start_long "$log"; then
  rank1=$(for pid in $(host_pids 1); do
            tr '\0' ' ' 2> /dev/null < "/proc/$pid/cmdline" | grep -q "^$OFLITE run " && echo "$pid"
          done | head -1)
  if [[ -z $rank1 ]]; then
    echo "FAIL: no oflite run process on host 1"; fail=1
  else
    kill -9 "$rank1"
    wait_launch 60
    last=$(tail -1 "$log")
    if [[ $RC != 1 || $last != "oflite launch: rank 1 exited with code 137"* ]]; then
      echo "FAIL: kill -9 of rank 1: launch exit $RC, last line: $last"; tail -5 "$log"; fail=1
    else
      echo "ok: kill -9 of rank 1 on host 1: launch exit 1: $last"
    fi
  fi
  no_process_left "kill -9 of rank 1"
fi

id=$NETNS_ID
cleanup
if netns_list_sets | grep -qx "$id"; then echo "FAIL: set $id left behind"; fail=1
else echo "ok: hosts torn down"; fi
exit $fail
