#!/bin/sh
# One rank of an `srun` step or an `mpirun` job over the namespace hosts
# (slurm_netns_test.sh, mpirun_netns_test.sh): `oflite run ARGS...` with
# this host's address (the namespace's eth0) as OFLITE_HOST; rank, world
# and master found by oflite run itself in Slurm's / OpenMPI's environment
# (docs/launch.md), or with OFLITE_TEST_EXPLICIT=1 passed as flags:
#   Slurm:   rank SLURM_PROCID; master the step's first node
#            (SLURM_STEP_NODELIST, "nI" or "n[I-J]": nodes are named nI and
#            resolve through the hosts' /etc/hosts) on port 20000 + job id
#            modulo 10000;
#   OpenMPI: rank OMPI_COMM_WORLD_RANK; master OFLITE_TEST_MASTER (mpirun
#            -x), HOST:PORT.
# "%t" in ARGS becomes the rank. OFLITE_TEST_OFLITE: the oflite binary.
addr=$(ip -4 -o addr show dev eth0 | awk '{ split($4, a, "/"); print a[1] }')
if [ -n "${SLURM_PROCID:-}" ]; then
  rank=$SLURM_PROCID
  first=$(echo "$SLURM_STEP_NODELIST" | sed 's/\[\([0-9]*\).*/\1/; s/,.*//')
  master="$(getent hosts "$first" | awk '{ print $1 }'):$((20000 + SLURM_JOB_ID % 10000))"
else
  rank=$OMPI_COMM_WORLD_RANK
  master=$OFLITE_TEST_MASTER
fi
args=""
for arg in "$@"; do
  args="$args '$(printf '%s' "$arg" | sed "s/%t/$rank/g; s/'/'\\\\''/g")'"
done
eval "set -- $args"
if [ "${OFLITE_TEST_EXPLICIT:-0}" = 1 ]; then
  OFLITE_HOST=$addr exec "$OFLITE_TEST_OFLITE" run --rank "$rank" --master "$master" --comm tcp "$@"
fi
# Default: oflite run finds rank, world and master in the launcher's
# environment itself (docs/launch.md); only the address is given.
OFLITE_HOST=$addr exec "$OFLITE_TEST_OFLITE" run --comm tcp "$@"
