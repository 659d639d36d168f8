#!/usr/bin/env bash
# Command-line face of netns_lib.sh (the host sets are described there).
#
#   netns.sh check                       exit 0 if namespaces can be built,
#                                        else exit 1 printing why
#   netns.sh run --hosts N [--rate R] -- CMD...
#                                        builds a set owned by this process,
#                                        runs CMD once in every host at the
#                                        same time (environment: NETNS_INDEX,
#                                        NETNS_ADDR, NETNS_ADDRS space-separated,
#                                        NETNS_HOSTS), waits for all, tears
#                                        the set down (also on INT/TERM);
#                                        exit status: the first non-zero one
#   netns.sh up --hosts N [--rate R] --owner PID
#                                        builds a set owned by process PID
#                                        (torn down by `down`, or reaped by
#                                        the next up/run/reap once PID is
#                                        gone); prints "id ID", then
#                                        "host I NAMESPACE ADDRESS" per host
#   netns.sh shape --id ID --hosts N --rate R
#   netns.sh down --id ID
#   netns.sh reap                        tears down every stale set
#   netns.sh list                        ids of the sets on this machine
#
# RATE as tc writes it (1gbit, 10gbit, 100mbit) or "none"; default none.
# Exit 2 for bad arguments, 1 for failures.
set -u
# shellcheck source=tests/netns/netns_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/netns_lib.sh"

usage() { sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

hosts="" rate=none owner="" id=""
parse() {
  while (($#)); do
    case $1 in
      --hosts) hosts=${2:-}; shift 2 || return 2 ;;
      --rate) rate=${2:-}; shift 2 || return 2 ;;
      --owner) owner=${2:-}; shift 2 || return 2 ;;
      --id) id=${2:-}; shift 2 || return 2 ;;
      --) shift; REST=("$@"); return 0 ;;
      *) echo "netns.sh: unknown argument '$1'" >&2; return 2 ;;
    esac
  done
  REST=()
}

cmd_run() {
  [[ -n $hosts && ${#REST[@]} -gt 0 ]] || { echo "netns.sh run: needs --hosts N -- CMD" >&2; return 2; }
  netns_up "$hosts" "$rate" || return $?
  local pids=() i rc=0 status
  local all="${NETNS_ADDR[*]}"
  for ((i = 0; i < hosts; ++i)); do
    NETNS_INDEX=$i NETNS_ADDRS=$all NETNS_HOSTS=$hosts NETNS_ADDR=${NETNS_ADDR[$i]} \
      ip netns exec "${NETNS_NS[$i]}" "${REST[@]}" &
    pids+=($!)
  done
  for i in "${pids[@]}"; do
    wait "$i"; status=$?
    ((rc == 0)) && rc=$status
  done
  return $rc
}

main() {
  local sub=${1:-}
  [[ $sub == --help || $sub == -h || -z $sub ]] && { usage; return 0; }
  shift
  parse "$@" || { usage >&2; return 2; }
  case $sub in
    check)
      if netns_check; then echo "network namespaces available"; else echo "$NETNS_SKIP_REASON"; return 1; fi ;;
    run) cmd_run ;;
    up)
      [[ -n $hosts && -n $owner ]] || { echo "netns.sh up: needs --hosts N --owner PID" >&2; return 2; }
      netns_up "$hosts" "$rate" "$owner" || return $?
      echo "id $NETNS_ID"
      local i
      for ((i = 0; i < hosts; ++i)); do echo "host $i ${NETNS_NS[$i]} ${NETNS_ADDR[$i]}"; done ;;
    shape)
      [[ -n $id && -n $hosts ]] || { echo "netns.sh shape: needs --id ID --hosts N --rate R" >&2; return 2; }
      netns_shape "$id" "$hosts" "$rate" ;;
    down)
      [[ -n $id ]] || { echo "netns.sh down: needs --id ID" >&2; return 2; }
      netns_down "$id" ;;
    reap) netns_reap ;;
    list) netns_list_sets ;;
    *) echo "netns.sh: unknown command '$sub'" >&2; usage >&2; return 2 ;;
  esac
}

main "$@"
