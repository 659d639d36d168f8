#!/usr/bin/env bash
# A remote shell into the network-namespace hosts of tests/netns, with
# ssh's contract: `netns_rsh.sh [OPTIONS] HOST COMMAND...` joins COMMAND
# with blanks and runs it with sh in the namespace whose eth0 holds address
# HOST, stdin, stdout and stderr passed through, its exit code returned.
# Options are ignored, as far as they come before HOST (OpenMPI's rsh
# agent and `oflite launch --rsh` pass none; `-x` and friends are skipped).
# The set to search is NETNS_RSH_SET (a set id: its hosts are namespaces
# ID-h0, ID-h1, ...); without it, every set of the harness on this machine
# (fine when one test runs at a time).
set -u
while [[ $# -gt 0 && $1 == -* ]]; do shift; done
[[ $# -ge 2 ]] || { echo "usage: netns_rsh.sh HOST COMMAND..." >&2; exit 255; }
host=$1
shift
for ns in $(ip netns list 2> /dev/null | awk '{ print $1 }' |
            grep -E "^${NETNS_RSH_SET:-oflnet-[0-9]+-[0-9]+-[0-9]+}-h[0-9]+\$"); do
  if ip -n "$ns" -4 -o addr show dev eth0 2> /dev/null | grep -q " inet $host/"; then
    exec ip netns exec "$ns" sh -c "$*"
  fi
done
echo "netns_rsh.sh: no namespace host has address $host" >&2
exit 255
