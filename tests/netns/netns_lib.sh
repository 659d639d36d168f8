# shellcheck shell=bash
# Network-namespace "hosts" on a private bridge with rate-shaped links: the
# way tests and benchmarks imitate separate machines on one Linux host.
# Sourced by bash scripts (tests/netns/netns.sh is its command-line face).
#
# A host set is N namespaces <id>-h0..<id>-h<N-1>, each with one link
# (eth0, a veth pair) into a bridge (br0) that lives in its own namespace
# <id>-br, so no interface or address of the set is visible outside it and
# two sets never collide. Host i has address 10.200.X.(i+1)/24 (X derived
# from the owner pid; the sets are isolated anyway). Each link is shaped in
# both directions with a token bucket (tc tbf, on eth0 inside the host and
# on its bridge port): a full-duplex link of RATE. No added delay (this
# kernel has no netem).
#
# Set ids are oflnet-<owner pid>-<owner start time>-<n>. A set is stale
# once its owner process is gone (pid dead, or reused by a process with
# another start time); netns_up reaps stale sets first, killing every
# process still inside their namespaces, so a kill -9 of a test leaves
# nothing behind after the next run. netns_up also installs EXIT/INT/TERM
# traps in the sourcing shell that tear its sets down (the library owns
# those traps: a script that needs its own cleanup calls netns_down_all in
# it).
#
# Functions (all bounded; none blocks longer than a few seconds):
#   netns_check                 0 if namespaces can be built here, else 1
#                               with the reason in NETNS_SKIP_REASON.
#   netns_up N RATE [OWNER_PID] creates a set of N hosts (RATE as tc writes
#                               it: 1gbit, 100mbit; "none" = unshaped).
#                               Sets NETNS_ID, NETNS_NS[i], NETNS_ADDR[i].
#   netns_shape ID N RATE       reshapes every link of set ID.
#   netns_exec I CMD...         runs CMD in host I of the current set.
#   netns_down ID               kills what runs in set ID and deletes it.
#   netns_down_all              tears down every set this shell created.
#   netns_reap                  tears down every stale set on the machine.
#   netns_list_sets             ids of every set on the machine.

NETNS_PREFIX=oflnet
NETNS_SKIP_REASON=""
NETNS_ID=""
NETNS_NS=()
NETNS_ADDR=()
_NETNS_CREATED=()
_NETNS_SEQ=0

# Start time (clock ticks since boot) of process $1, or nothing when it is gone.
netns_start_time() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }  # fields 3.. (the command name may hold spaces)
  # shellcheck disable=SC2086
  set -- $stat
  echo "${20}"
}

netns_check() {
  if [[ $(id -u) != 0 ]]; then NETNS_SKIP_REASON="not root (ip netns needs CAP_SYS_ADMIN)"; return 1; fi
  local tool
  for tool in ip tc; do
    command -v "$tool" > /dev/null || { NETNS_SKIP_REASON="no '$tool' command (iproute2)"; return 1; }
  done
  local probe="$NETNS_PREFIX-probe-$$"
  local err
  if ! err=$(ip netns add "$probe" 2>&1); then
    NETNS_SKIP_REASON="ip netns add denied: $err"; return 1
  fi
  if ! err=$( { ip -n "$probe" link add br0 type bridge &&
                ip -n "$probe" link add v0 type veth peer name v1 &&
                tc -n "$probe" qdisc replace dev v0 root tbf rate 1gbit burst 256kb latency 50ms; } 2>&1); then
    NETNS_SKIP_REASON="bridge/veth/tbf not available: $err"
    ip netns del "$probe" 2>/dev/null
    return 1
  fi
  ip netns del "$probe"
}

netns_list_sets() {
  ip netns list 2>/dev/null | awk '{ print $1 }' |
    sed -n "s/^\($NETNS_PREFIX-[0-9]*-[0-9]*-[0-9]*\)-\(br\|h[0-9]*\)\$/\1/p" | sort -u
}

# True when the owner encoded in set id $1 is still the same live process.
netns_owner_alive() {
  local rest=${1#"$NETNS_PREFIX"-}
  local pid=${rest%%-*}
  rest=${rest#*-}
  local start=${rest%%-*}
  [[ "$(netns_start_time "$pid")" == "$start" ]]
}

# Bytes of token-bucket burst for RATE: 2 ms at that rate, at least 64 KiB
# (one GSO packet), so the bucket is never the limit below the rate.
_netns_burst() {
  local rate=$1 bits
  case $rate in
    *gbit) bits=$(( ${rate%gbit} * 1000000000 )) ;;
    *mbit) bits=$(( ${rate%mbit} * 1000000 )) ;;
    *kbit) bits=$(( ${rate%kbit} * 1000 )) ;;
    *) return 1 ;;
  esac
  local bytes=$(( bits / 8 / 500 ))
  (( bytes < 65536 )) && bytes=65536
  echo "$bytes"
}

_netns_shape_link() {  # NS DEV RATE
  if [[ $3 == none ]]; then
    tc -n "$1" qdisc del dev "$2" root 2>/dev/null
    return 0
  fi
  local burst
  burst=$(_netns_burst "$3") || { echo "netns: bad rate '$3' (want N[gmk]bit or none)" >&2; return 2; }
  tc -n "$1" qdisc replace dev "$2" root tbf rate "$3" burst "$burst" latency 100ms
}

netns_shape() {  # ID N RATE
  local id=$1 n=$2 rate=$3 i
  for ((i = 0; i < n; ++i)); do
    _netns_shape_link "$id-h$i" eth0 "$rate" || return $?
    _netns_shape_link "$id-br" "p$i" "$rate" || return $?
  done
}

# Kills every process inside namespace $1 (bounded) and deletes it.
_netns_del() {
  local ns=$1 try pids
  for ((try = 0; try < 50; ++try)); do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [[ -z $pids ]] && break
    # shellcheck disable=SC2086
    kill -9 $pids 2>/dev/null
    sleep 0.1
  done
  ip netns del "$ns" 2>/dev/null
}

netns_down() {
  local id=$1 ns
  for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }' | grep "^$id-\(br\|h[0-9]*\)\$"); do
    _netns_del "$ns"
  done
}

netns_down_all() {
  local id
  for id in "${_NETNS_CREATED[@]}"; do netns_down "$id"; done
  _NETNS_CREATED=()
}

netns_reap() {
  local id
  for id in $(netns_list_sets); do
    if ! netns_owner_alive "$id"; then
      echo "netns: reaping stale set $id (its owner is gone)" >&2
      netns_down "$id"
    fi
  done
}

_netns_traps() {
  trap 'netns_down_all' EXIT
  trap 'netns_down_all; trap - INT; kill -INT $$' INT
  trap 'netns_down_all; trap - TERM; kill -TERM $$' TERM
}

netns_up() {  # N RATE [OWNER_PID]
  local n=$1 rate=$2 owner=${3:-$$} start i
  if ! [[ $n =~ ^[0-9]+$ ]] || (( n < 1 || n > 200 )); then
    echo "netns: host count '$n' not in 1..200" >&2; return 2
  fi
  start=$(netns_start_time "$owner") || { echo "netns: owner pid $owner is not running" >&2; return 2; }
  netns_reap
  NETNS_ID="$NETNS_PREFIX-$owner-$start-$_NETNS_SEQ"
  _NETNS_SEQ=$((_NETNS_SEQ + 1))
  [[ $owner == "$$" ]] && { _NETNS_CREATED+=("$NETNS_ID"); _netns_traps; }
  local subnet="10.200.$((owner % 250 + 1))"
  local br="$NETNS_ID-br"
  NETNS_NS=()
  NETNS_ADDR=()
  { ip netns add "$br" && ip -n "$br" link set lo up &&
      ip -n "$br" link add br0 type bridge forward_delay 0 &&
      ip -n "$br" link set br0 up; } || { netns_down "$NETNS_ID"; return 1; }
  for ((i = 0; i < n; ++i)); do
    local ns="$NETNS_ID-h$i" addr="$subnet.$((i + 1))"
    { ip netns add "$ns" && ip -n "$ns" link set lo up &&
        ip -n "$br" link add "p$i" type veth peer name eth0 netns "$ns" &&
        ip -n "$br" link set "p$i" master br0 up &&
        ip -n "$ns" addr add "$addr/24" dev eth0 &&
        ip -n "$ns" link set eth0 up; } || { netns_down "$NETNS_ID"; return 1; }
    NETNS_NS+=("$ns")
    NETNS_ADDR+=("$addr")
  done
  netns_shape "$NETNS_ID" "$n" "$rate" || { netns_down "$NETNS_ID"; return 2; }
}

netns_exec() {  # I CMD...
  local i=$1; shift
  ip netns exec "${NETNS_NS[$i]}" "$@"
}
