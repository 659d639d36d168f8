#!/usr/bin/env bash
# A real Slurm (Debian's slurm-wlm, munge) over the network-namespace hosts
# of tests/netns: munged with a generated key, slurmctld in a controller
# namespace "ctl" (the hosts' bridge is not reachable from the root
# namespace, and this test adds no address outside the namespaces it
# creates), one slurmd per host (NodeName nI, NodeAddr = the host's
# address), all configured by a generated slurm.conf in the test's tmp dir
# (no cgroups: proctrack/linuxproc, task/none), started here and torn down
# at exit whatever happens. Scenarios:
#  - `srun -N 2` trains the MLP (//examples:mlp_fashion_mnist's 2-machine
#    plan, `oflite run --plan P` per task) equal to one machine, and with 4
#    hosts `srun -N 4` its 4-machine plan equal to one machine;
#  - `scancel` of a running job ends every rank: no process left on any
#    host;
#  - kill -9 of the rank on one node ends the job (srun exits non-zero) and
#    the output names that rank.
# The ranks start through tests/netns/cluster_rank.sh (rank, world and master
# from the Slurm environment). Skips (exit 0, "SKIPPED: reason") where
# namespaces cannot be built or the daemons do not come up.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=tests/netns/netns_lib.sh
source "$HERE/netns_lib.sh"
# shellcheck source=tests/netns/compare_lib.sh
source "$HERE/compare_lib.sh"
skip() { echo "SKIPPED: $*"; exit 0; }
if ! netns_check; then skip "network namespaces unavailable: $NETNS_SKIP_REASON"; fi
for tool in munged slurmctld slurmd srun scancel sinfo squeue; do
  command -v "$tool" > /dev/null || PATH="$PATH:/usr/sbin"
  command -v "$tool" > /dev/null ||
    skip "no '$tool' (tools/install_deps.sh installs slurm-wlm and munge)"
done
OFLITE="${TEST_SRCDIR}/oneflow_lite/tools/oflite/oflite"
MLP_EXAMPLE="${TEST_SRCDIR}/oneflow_lite/examples/mlp_fashion_mnist"
RANK_SH="$HERE/cluster_rank.sh"
TMP="${TEST_TMPDIR:-/tmp}/slurm_netns"
NODES="${SLURM_NETNS_NODES:-4}"
rm -rf "$TMP"; mkdir -p "$TMP"
chmod 755 "$TMP"
# Unix sockets (munge's, slurmstepd's in the spool) need paths under 108
# bytes, which Bazel's TEST_TMPDIR can exceed: those live in SHORT.
SHORT=$(mktemp -d /tmp/oflslurm.XXXXXX) || { echo "FAIL: mktemp"; exit 1; }
chmod 755 "$SHORT"
fail=0

# ---- Hosts: nodes h0..h(N-1) and the controller ctl (the last) -------------
netns_up $((NODES + 1)) none || { echo "FAIL: cannot build $((NODES + 1)) hosts"; exit 1; }
CTL=$NODES
echo "nodes: ${NETNS_ADDR[*]:0:$NODES}; controller ${NETNS_ADDR[$CTL]} (set $NETNS_ID)"
DAEMONS=()
cleanup() {
  local pid
  for pid in "${DAEMONS[@]}"; do kill -TERM "$pid" 2> /dev/null; done
  for ((i = 0; i < 30; ++i)); do
    local alive=0
    for pid in "${DAEMONS[@]}"; do kill -0 "$pid" 2> /dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for pid in "${DAEMONS[@]}"; do kill -9 "$pid" 2> /dev/null; done
  DAEMONS=()
  netns_down_all  # kills whatever is left in the hosts (slurmstepd, ranks)
  rm -rf "$SHORT"
  local ns
  for ns in "${NETNS_NS[@]}"; do rm -rf "/etc/netns/$ns"; done
  rmdir /etc/netns 2> /dev/null  # when nothing else uses it
}
trap cleanup EXIT
trap 'cleanup; trap - INT; kill -INT $$' INT
trap 'cleanup; trap - TERM; kill -TERM $$' TERM
on() { local i=$1; shift; ip netns exec "${NETNS_NS[$i]}" "$@"; }
# Node names resolve in every host (what a cluster's DNS does): ip netns
# exec mounts /etc/netns/NS/hosts over /etc/hosts.
for dir in /etc/netns/"$NETNS_PREFIX"-*; do  # a kill -9'd run's, its namespace reaped
  [[ -d $dir && ! -e /run/netns/${dir##*/} ]] && rm -rf "$dir"
done
for ((i = 0; i <= NODES; ++i)); do
  mkdir -p "/etc/netns/${NETNS_NS[$i]}"
  { echo "127.0.0.1 localhost"
    for ((j = 0; j < NODES; ++j)); do echo "${NETNS_ADDR[$j]} n$j"; done
    echo "${NETNS_ADDR[$CTL]} ctl"; } > "/etc/netns/${NETNS_NS[$i]}/hosts"
done

# ---- munge ---------------------------------------------------------------
MUNGE="$SHORT/munge"
mkdir -p "$MUNGE" && chmod 755 "$MUNGE"
dd if=/dev/urandom of="$MUNGE/munge.key" bs=1024 count=1 status=none
chmod 400 "$MUNGE/munge.key"
SOCK="$MUNGE/sock"
munged --foreground --force --key-file="$MUNGE/munge.key" --socket="$SOCK" \
  --pid-file="$MUNGE/munged.pid" --log-file="$TMP/munged.log" \
  --seed-file="$MUNGE/munged.seed" > "$TMP/munged.out" 2>&1 &
DAEMONS+=($!)
for ((i = 0; i < 50; ++i)); do [[ -S $SOCK ]] && break; sleep 0.1; done
[[ -S $SOCK ]] || { cat "$TMP/munged.out" "$TMP/munged.log" 2> /dev/null | tail -5
                    skip "munged did not start"; }

# ---- slurm.conf ----------------------------------------------------------
CONF="$TMP/slurm.conf"
mkdir -p "$TMP/state" "$SHORT/spool" "$TMP/log"
{
  echo "ClusterName=oflnetns"
  echo "SlurmctldHost=$(hostname -s)(${NETNS_ADDR[$CTL]})"
  echo "SlurmUser=root"
  echo "SlurmdUser=root"
  echo "SlurmctldPort=6817"
  echo "SlurmdPort=6818"
  echo "AuthType=auth/munge"
  echo "AuthInfo=socket=$SOCK"
  echo "CredType=cred/munge"
  echo "StateSaveLocation=$TMP/state"
  echo "SlurmdSpoolDir=$SHORT/spool/%n"
  echo "SlurmctldPidFile=$TMP/slurmctld.pid"
  echo "SlurmdPidFile=$SHORT/spool/slurmd.%n.pid"
  echo "SlurmctldLogFile=$TMP/log/slurmctld.log"
  echo "SlurmdLogFile=$TMP/log/slurmd.%n.log"
  echo "ProctrackType=proctrack/linuxproc"
  echo "TaskPlugin=task/none"
  echo "JobAcctGatherType=jobacct_gather/none"
  echo "AccountingStorageType=accounting_storage/none"
  echo "SchedulerType=sched/builtin"
  echo "SelectType=select/linear"
  echo "MpiDefault=none"
  echo "ReturnToService=2"
  echo "SlurmctldTimeout=10"
  echo "SlurmdTimeout=10"
  echo "KillWait=3"
  echo "MinJobAge=5"
  echo "InactiveLimit=0"
  for ((j = 0; j < NODES; ++j)); do
    echo "NodeName=n$j NodeAddr=${NETNS_ADDR[$j]} NodeHostname=n$j CPUs=1 State=UNKNOWN"
  done
  echo "PartitionName=oflite Nodes=n[0-$((NODES - 1))] Default=YES MaxTime=INFINITE State=UP"
} > "$CONF"
echo "CgroupPlugin=cgroup/v1" > "$TMP/cgroup.conf"
export SLURM_CONF="$CONF"

# ---- Daemons -------------------------------------------------------------
on "$CTL" slurmctld -D -i -f "$CONF" > "$TMP/log/slurmctld.out" 2>&1 &
DAEMONS+=($!)
for ((j = 0; j < NODES; ++j)); do
  mkdir -p "$SHORT/spool/n$j"
  # slurmd 22.05 probes the cgroup version even with proctrack/linuxproc
  # and task/none, and ip netns exec's fresh /sys has nothing under
  # /sys/fs/cgroup: an empty tmpfs there, in the mount namespace of this
  # slurmd alone, reads as cgroup v1 (cgroup.conf), where nothing is used.
  on "$j" sh -c 'mount -t tmpfs oflite-nocgroup /sys/fs/cgroup && exec "$@"' slurmd \
    slurmd -D -N "n$j" -f "$CONF" > "$TMP/log/slurmd.n$j.out" 2>&1 &
  DAEMONS+=($!)
done
# Every node idle within 30 s, or skip saying what the daemons said.
idle=0
for ((i = 0; i < 300; ++i)); do
  idle=$(on "$CTL" sinfo -h -N -o "%t" 2> /dev/null | grep -c '^idle')
  ((idle == NODES)) && break
  sleep 0.1
done
if ((idle != NODES)); then
  on "$CTL" sinfo -N 2>&1 | head
  tail -5 "$TMP"/log/*.log "$TMP"/log/*.out 2> /dev/null
  skip "Slurm did not come up ($idle of $NODES nodes idle after 30 s)"
fi
echo "ok: slurmctld and $NODES slurmd up: $(on "$CTL" sinfo -h -o '%P %D %t %N')"

# ---- Plans ---------------------------------------------------------------
plan() {  # plan MACHINES DEVICES: the example's plan in $TMP/mM
  "$MLP_EXAMPLE" --out-dir "$TMP/m$1" --iters 20 --machines "$1" --devices "$2" --compile-only \
    > "$TMP/m$1.plan.log" 2>&1 || { echo "FAIL: writing the $1-machine plan"; tail "$TMP/m$1.plan.log"; exit 1; }
}
plan 1 2
plan 2 1
timeout 120 "$OFLITE" run --plan "$TMP/m1/mlp.plan.pb" --metrics-out "$TMP/ref2.txt" \
  --eval=false > "$TMP/ref2.log" 2>&1 || { echo "FAIL: the 1-machine run"; tail "$TMP/ref2.log"; exit 1; }
export OFLITE_JOB_TOKEN="slurm-netns-$$"
export OFLITE_TEST_OFLITE="$OFLITE"

# srun_train NAME N PLAN: `srun -N N` runs PLAN, metrics in $TMP/NAME.R.txt.
srun_train() {
  local name=$1 n=$2 plan=$3 start rc
  start=$(date +%s%N)
  on "$CTL" timeout 120 srun -N "$n" --ntasks-per-node=1 -J "$name" "$RANK_SH" \
    --plan "$plan" --metrics-out "$TMP/$name.%t.txt" --eval=false > "$TMP/$name.log" 2>&1
  rc=$?
  echo "  srun -N $n: exit $rc after $(( ($(date +%s%N) - start) / 1000000 )) ms"
  if [[ $rc != 0 ]]; then echo "FAIL: srun -N $n"; tail -20 "$TMP/$name.log"; fail=1; return 1; fi
}
if srun_train n2 2 "$TMP/m2/mlp.plan.pb"; then
  compare "srun -N 2 equals 1 machine" "$TMP/ref2.txt" "$TMP"/n2.[01].txt
fi
if ((NODES >= 4)); then
  plan 4 1
  plan 1 4
  mv "$TMP/m1" "$TMP/m1x4"
  timeout 120 "$OFLITE" run --plan "$TMP/m1x4/mlp.plan.pb" --metrics-out "$TMP/ref4.txt" \
    --eval=false > "$TMP/ref4.log" 2>&1 || { echo "FAIL: the 1-machine run (4 devices)"; fail=1; }
  if srun_train n4 4 "$TMP/m4/mlp.plan.pb"; then
    compare "srun -N 4 equals 1 machine" "$TMP/ref4.txt" "$TMP"/n4.[0-3].txt
  fi
fi

# ---- scancel and kill -9 of a rank (an endless run) ------------------------
"$MLP_EXAMPLE" --out-dir "$TMP/long" --iters 100000000 --machines 2 --devices 1 --compile-only \
  > "$TMP/long.plan.log" 2>&1 || { echo "FAIL: the endless plan"; exit 1; }
# node_ranks J: pids of `oflite run` on node J.
node_ranks() {
  local pid
  for pid in $(ip netns pids "${NETNS_NS[$1]}" 2> /dev/null); do
    tr '\0' ' ' 2> /dev/null < "/proc/$pid/cmdline" | grep -q "^$OFLITE run " && echo "$pid"
  done
}
# rank_pid R: "NODE PID" of the `oflite run` of rank R (its SLURM_PROCID),
# on whichever node Slurm put it (after scancel, n0 may still be completing
# and the next job land on n1-n2).
rank_pid() {
  local j pid
  for ((j = 0; j < NODES; ++j)); do
    for pid in $(node_ranks "$j"); do
      tr '\0' '\n' 2> /dev/null < "/proc/$pid/environ" | grep -qx "SLURM_PROCID=$1" &&
        { echo "$j $pid"; return 0; }
    done
  done
  return 1
}
# start_long NAME: the endless job under srun -N 2 in the background
# (SRUN: its pid), waiting up to 60 s until rank 0 trains.
start_long() {
  : > "$TMP/$1.log"
  on "$CTL" timeout 150 srun -N 2 --ntasks-per-node=1 -J "$1" "$RANK_SH" \
    --plan "$TMP/long/mlp.plan.pb" --eval=false --log-every 100 > "$TMP/$1.log" 2>&1 &
  SRUN=$!
  for ((i = 0; i < 600; ++i)); do
    grep -q "iter " "$TMP/$1.log" && rank_pid 1 > /dev/null && return 0
    kill -0 "$SRUN" 2> /dev/null || break
    sleep 0.1
  done
  echo "FAIL: $1: the job did not start training"; tail -20 "$TMP/$1.log"; fail=1
  kill -9 "$SRUN" 2> /dev/null
  return 1
}
# step_pids J: every process on node J but slurmd itself (the ranks, their
# slurmstepd).
step_pids() {
  local pid
  for pid in $(ip netns pids "${NETNS_NS[$1]}" 2> /dev/null); do
    tr '\0' ' ' 2> /dev/null < "/proc/$pid/cmdline" | grep -q "^slurmd " || echo "$pid"
  done
}
# nothing_left WHAT: no process of a job step on any node within 15 s.
nothing_left() {
  local left j
  for ((i = 0; i < 150; ++i)); do
    left=""
    for ((j = 0; j < NODES; ++j)); do left+="$(step_pids "$j") "; done
    [[ -z ${left// /} ]] && { echo "ok: $1: no process left on any node (slurmd aside)"; return 0; }
    sleep 0.1
  done
  echo "FAIL: $1: processes left:"; ps -o pid,args -p "$(echo $left | tr ' ' ,)"; fail=1
  local pid; for pid in $left; do kill -9 "$pid" 2> /dev/null; done
}
if start_long scancel; then
  job=$(on "$CTL" squeue -h -n scancel -o %i | head -1)
  start=$(date +%s%N)
  on "$CTL" scancel "$job"
  wait "$SRUN"; rc=$?
  echo "  scancel $job: srun exit $rc after $(( ($(date +%s%N) - start) / 1000000 )) ms"
  nothing_left "scancel"
fi
if start_long kill9; then
  read -r vnode victim < <(rank_pid 1)
  start=$(date +%s%N)
  kill -9 "$victim"
  wait "$SRUN"; rc=$?
  elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
  if [[ $rc == 0 ]]; then
    echo "FAIL: kill -9 of rank 1: srun exit 0"; tail -5 "$TMP/kill9.log"; fail=1
  elif ! grep -q "n$vnode: task 1: Killed" "$TMP/kill9.log" || ! grep -q "lost rank 1" "$TMP/kill9.log"; then
    echo "FAIL: kill -9 of rank 1: srun and rank 0 do not both name it"; tail -5 "$TMP/kill9.log"; fail=1
  else
    echo "ok: kill -9 of rank 1 on n$vnode: srun exit $rc after $elapsed ms:"
    grep "n$vnode: task 1: Killed\|lost rank 1" "$TMP/kill9.log" | sed 's/^/    /'
  fi
  nothing_left "kill -9 of rank 1"
fi

id=$NETNS_ID
cleanup
if netns_list_sets | grep -qx "$id"; then echo "FAIL: set $id left behind"; fail=1
else echo "ok: Slurm and the hosts torn down"; fi
exit $fail
