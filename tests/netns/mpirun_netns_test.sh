#!/usr/bin/env bash
# OpenMPI's mpirun across network-namespace hosts: mpirun runs in a
# launcher namespace "ctl" and starts its daemons (orted) on the hosts
# through tests/netns/netns_rsh.sh as the remote shell (--mca
# plm_rsh_agent), as it would through ssh on a cluster. Every rank runs
# tests/netns/cluster_rank.sh -> `oflite run` (rank OMPI_COMM_WORLD_RANK,
# master the first host). Scenarios:
#  - `mpirun -np 2 --host A0,A1` trains the MLP (//examples:mlp_fashion_mnist's
#    2-machine plan) equal to one machine;
#  - kill -9 of the rank on host 1: mpirun exits non-zero, rank 0 names
#    rank 1, and no process is left on either host.
# As root, mpirun needs --allow-run-as-root (given). Skips (exit 0,
# "SKIPPED: reason") where namespaces cannot be built, mpirun is missing,
# or mpirun cannot start a trivial job on the hosts.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/netns/netns_lib.sh
source "$HERE/netns_lib.sh"
# shellcheck source=tests/netns/compare_lib.sh
source "$HERE/compare_lib.sh"
skip() { echo "SKIPPED: $*"; exit 0; }
if ! netns_check; then skip "network namespaces unavailable: $NETNS_SKIP_REASON"; fi
command -v mpirun > /dev/null || skip "no mpirun (tools/install_deps.sh installs openmpi-bin)"
OFLITE="${TEST_SRCDIR}/oneflow_lite/tools/oflite/oflite"
MLP_EXAMPLE="${TEST_SRCDIR}/oneflow_lite/examples/mlp_fashion_mnist"
TMP="${TEST_TMPDIR:-/tmp}/mpirun_netns"
rm -rf "$TMP"; mkdir -p "$TMP"
# OpenMPI's session directory holds Unix sockets (paths under 108 bytes,
# which Bazel's TEST_TMPDIR can exceed): a short TMPDIR for mpirun and orted.
SHORT=$(mktemp -d /tmp/oflmpi.XXXXXX) || { echo "FAIL: mktemp"; exit 1; }
fail=0

netns_up 3 none || { echo "FAIL: cannot build 3 hosts"; exit 1; }
export NETNS_RSH_SET=$NETNS_ID
CTL=2
HOSTS="${NETNS_ADDR[0]},${NETNS_ADDR[1]}"
echo "hosts: $HOSTS; mpirun on ${NETNS_ADDR[$CTL]} (set $NETNS_ID)"
MPIRUNS=()
cleanup() {
  local pid; for pid in "${MPIRUNS[@]}"; do kill -9 "$pid" 2> /dev/null; done
  netns_down_all
  rm -rf "$SHORT"
}
trap cleanup EXIT
trap 'cleanup; trap - INT; kill -INT $$' INT
trap 'cleanup; trap - TERM; kill -TERM $$' TERM
# The agent gets `HOST orted ...` like ssh; the job's own environment is
# passed with -x. No MPI traffic: the ranks are not MPI programs.
MPIRUN=(ip netns exec "${NETNS_NS[$CTL]}" env TMPDIR="$SHORT" mpirun --allow-run-as-root
        --mca plm_rsh_agent "$HERE/netns_rsh.sh" --mca plm_rsh_no_tree_spawn 1
        --mca oob_tcp_if_include eth0 --hostfile "$TMP/hf" -np 2 --map-by node
        -x NETNS_RSH_SET -x OFLITE_JOB_TOKEN -x OFLITE_TEST_OFLITE -x OFLITE_TEST_MASTER -x OFLITE_TEST_EXPLICIT)
# The hostfile serves mpirun and the ranks (master: its first host, port
# 29500, docs/launch.md).
printf '# the namespace hosts\n%s slots=1\n%s slots=1\n' "${NETNS_ADDR[0]}" "${NETNS_ADDR[1]}" \
  > "$TMP/hf"
export OFLITE_JOB_TOKEN="mpirun-netns-$$" OFLITE_TEST_OFLITE="$OFLITE" OFLITE_TEST_EXPLICIT="${OFLITE_TEST_EXPLICIT:-0}"
export OFLITE_TEST_MASTER="${NETNS_ADDR[0]}:29600"

# A trivial job first: where OpenMPI refuses, skip saying what it said.
if ! timeout 60 "${MPIRUN[@]}" sh -c 'echo "rank $OMPI_COMM_WORLD_RANK in $(ip -4 -o addr show dev eth0 | awk "{ print \$4 }")"' \
     > "$TMP/hello.log" 2>&1; then
  tail -5 "$TMP/hello.log"
  [[ -s $TMP/hello.log ]] || echo "(no output within 60 s)"
  skip "mpirun cannot start processes on the namespace hosts (output above)"
fi
echo "ok: mpirun reaches both hosts: $(sort "$TMP/hello.log" | tr '\n' ';')"

plan() {  # plan MACHINES DEVICES ITERS DIR
  "$MLP_EXAMPLE" --out-dir "$4" --iters "$3" --machines "$1" --devices "$2" --compile-only \
    > "$4.plan.log" 2>&1 || { echo "FAIL: writing the plan in $4"; tail "$4.plan.log"; exit 1; }
}
plan 1 2 20 "$TMP/m1"
plan 2 1 20 "$TMP/m2"
timeout 120 "$OFLITE" run --plan "$TMP/m1/mlp.plan.pb" --metrics-out "$TMP/ref.txt" \
  --eval=false > "$TMP/ref.log" 2>&1 || { echo "FAIL: the 1-machine run"; tail "$TMP/ref.log"; exit 1; }
# host_ranks: the oflite processes in the two hosts (pid and command).
host_ranks() {
  local i pid
  for i in 0 1; do
    for pid in $(ip netns pids "${NETNS_NS[$i]}" 2> /dev/null); do
      tr '\0' ' ' < "/proc/$pid/cmdline" 2> /dev/null | grep -q "oflite run" && echo "host $i: pid $pid"
    done
  done
}
# Every process in the three namespaces, with its state and wait channel:
# what a stalled job was doing when its bound ran out.
show_processes() {
  local i pid
  for i in 0 1 "$CTL"; do
    for pid in $(ip netns pids "${NETNS_NS[$i]}" 2> /dev/null); do
      echo "    ns $i: $(ps -o pid=,stat=,wchan:20=,args= -p "$pid" 2> /dev/null | cut -c1-160)"
    done
  done
}
# run_np2 PORT: the 2-rank job under a 120 s bound; sets rc, and saw_rank=1
# once an oflite rank ran on a host.
run_np2() {
  local start mpi
  start=$(date +%s%N)
  OFLITE_TEST_MASTER="${NETNS_ADDR[0]}:$1" timeout 120 "${MPIRUN[@]}" "$HERE/cluster_rank.sh" \
    --plan "$TMP/m2/mlp.plan.pb" --hostfile "$TMP/hf" --metrics-out "$TMP/np2.%t.txt" \
    --eval=false > "$TMP/np2.log" 2>&1 &
  mpi=$!
  MPIRUNS+=("$mpi")
  saw_rank=0
  while kill -0 "$mpi" 2> /dev/null; do
    [[ $saw_rank == 0 && -n "$(host_ranks)" ]] && saw_rank=1
    if (( ($(date +%s%N) - start) / 1000000000 >= 115 )) && [[ -z ${shown:-} ]]; then
      shown=1; echo "  processes 115 s into the job:"; show_processes
    fi
    sleep 0.2
  done
  wait "$mpi"
  rc=$?
  echo "  mpirun -np 2: exit $rc after $(( ($(date +%s%N) - start) / 1000000 )) ms (an oflite rank seen on a host: $saw_rank)"
}
run_np2 29600
# OpenMPI's own launch (orted through the rsh agent) has stalled once under
# CI's load before any rank started; that is not the job under test, so it
# gets one more try, said in the output. A job whose ranks ran gets none.
if [[ $rc == 124 && $saw_rank == 0 ]]; then
  echo "  mpirun started no oflite rank in 120 s (the launcher stalled); once more"
  shown=""
  run_np2 29602
fi
if [[ $rc != 0 ]]; then
  echo "FAIL: mpirun -np 2"; tail -20 "$TMP/np2.log"; fail=1
else
  compare "mpirun -np 2 on 2 hosts equals 1 machine" "$TMP/ref.txt" "$TMP"/np2.[01].txt
fi

# host_pids I: every process in host I.
host_pids() { ip netns pids "${NETNS_NS[$1]}" 2> /dev/null | tr '\n' ' '; }
nothing_left() {
  local left
  for ((i = 0; i < 150; ++i)); do
    left="$(host_pids 0)$(host_pids 1)"
    [[ -z ${left// /} ]] && { echo "ok: $1: no process left on either host"; return 0; }
    sleep 0.1
  done
  echo "FAIL: $1: processes left:"; ps -o pid,args -p "$(echo $left | tr ' ' ,)"; fail=1
}
nothing_left "after the job"

plan 2 1 100000000 "$TMP/long"
# start_endless PORT: the endless 2-rank job in the background (MPI: its pid).
start_endless() {
  OFLITE_TEST_MASTER="${NETNS_ADDR[0]}:$1" timeout 150 "${MPIRUN[@]}" "$HERE/cluster_rank.sh" \
    --plan "$TMP/long/mlp.plan.pb" --hostfile "$TMP/hf" --eval=false --log-every 100 \
    > "$TMP/kill9.log" 2>&1 &
  MPI=$!
  MPIRUNS+=("$MPI")
}
start_endless 29601
victim=""
retried=0
# Up to 120 s for the first "iter" line (100 steps): a 2-core machine
# loaded by other builds and tests beside CI has taken more than 60 s (the job's own runs take
# about 1 s); mpirun's own bound above is 150 s. As for the first job, a
# launch in which OpenMPI started no oflite rank within 60 s (its orted
# through the rsh agent stalled: seen once under CI's load, with nothing in
# the log) is not the job under test and gets one more try, said in the
# output; a job whose ranks ran gets none.
for ((i = 0; i < 1200; ++i)); do
  if grep -q "iter " "$TMP/kill9.log"; then
    for pid in $(host_pids 1); do
      tr '\0' ' ' 2> /dev/null < "/proc/$pid/cmdline" | grep -q "^$OFLITE run " && victim=$pid
    done
    [[ -n $victim ]] && break
  fi
  if (( i == 600 && retried == 0 )) && [[ -z "$(host_ranks)" ]]; then
    echo "  the endless job: mpirun started no oflite rank in 60 s (the launcher stalled); once more"
    show_processes
    # timeout passes TERM on to mpirun, which takes its daemons down; what
    # the stalled launch left in the hosts after 15 s is killed.
    kill -TERM "$MPI" 2> /dev/null; wait "$MPI" 2> /dev/null
    for ((j = 0; j < 150; ++j)); do
      [[ -z "$(host_pids 0)$(host_pids 1)" ]] && break
      sleep 0.1
    done
    for pid in $(host_pids 0) $(host_pids 1); do kill -9 "$pid" 2> /dev/null; done
    retried=1
    start_endless 29603
    i=0
    continue
  fi
  kill -0 "$MPI" 2> /dev/null || break
  sleep 0.1
done
if [[ -z $victim ]]; then
  echo "FAIL: the endless job did not start training (oflite ranks on the hosts: $(host_ranks | tr '\n' ' '))"
  tail -20 "$TMP/kill9.log"; show_processes; fail=1
else
  start=$(date +%s%N)
  kill -9 "$victim"
  wait "$MPI"; rc=$?
  elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
  if [[ $rc == 0 ]]; then
    echo "FAIL: kill -9 of rank 1: mpirun exit 0"; tail -5 "$TMP/kill9.log"; fail=1
  elif ! grep -q "lost rank 1" "$TMP/kill9.log"; then
    echo "FAIL: kill -9 of rank 1: rank 0 does not name it"; tail -8 "$TMP/kill9.log"; fail=1
  else
    echo "ok: kill -9 of rank 1: mpirun exit $rc after $elapsed ms: $(grep -m1 "lost rank 1" "$TMP/kill9.log")"
  fi
  nothing_left "kill -9 of rank 1"
fi

id=$NETNS_ID
cleanup
if netns_list_sets | grep -qx "$id"; then echo "FAIL: set $id left behind"; fail=1
else echo "ok: hosts torn down"; fi
exit $fail
