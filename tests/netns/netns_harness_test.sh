#!/usr/bin/env bash
# The namespace harness (netns_lib.sh, netns.sh): hosts reach each other over
# their bridge, a shaped link carries no more than its rate, a host set is
# torn down (processes included) when its run is interrupted, a set left by
# a kill -9 is reaped by the next run, and a set whose owner lives is not.
# Skips (exit 0, saying why) where namespaces cannot be built.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NETNS="$HERE/netns.sh"
PROBE="$HERE/link_probe.py"
# shellcheck source=tests/netns/netns_lib.sh
source "$HERE/netns_lib.sh"
if ! netns_check; then echo "SKIP: network namespaces unavailable: $NETNS_SKIP_REASON"; exit 0; fi
TMP="${TEST_TMPDIR:-/tmp}/netns_harness.$$"
rm -rf "$TMP"; mkdir -p "$TMP"
fail=0

# wait_for WHAT CONDITION...: polls CONDITION for up to 20 s.
wait_for() {
  local what=$1 i; shift
  for ((i = 0; i < 200; ++i)); do "$@" && return 0; sleep 0.1; done
  echo "FAIL: timed out waiting for $what"; fail=1; return 1
}
set_of() { netns_list_sets | grep "^$NETNS_PREFIX-$1-"; }
has_set() { [[ -n $(set_of "$1") ]]; }
no_set() { [[ -z $(set_of "$1") ]]; }
sleepers_in() {  # SET_ID: pids of processes inside the set's namespaces
  local ns
  for ns in $(ip netns list 2> /dev/null | awk '{ print $1 }' | grep "^$1-"); do ip netns pids "$ns"; done
}
two_sleepers() { (( $(sleepers_in "$1" | wc -l) >= 2 )); }
running() {  # PIDS...: true when any of them runs (a zombie does not)
  local p state
  for p in "$@"; do
    state=$(cat "/proc/$p/stat" 2> /dev/null) || continue
    state=${state##*) }
    [[ ${state:0:1} != Z ]] && return 0
  done
  return 1
}
none_running() { ! running "$@"; }

# 1. Two hosts, a 20 Mbit/s link: 2.5 MB arrive whole and no faster than the
# rate allows (load can only slow the transfer down; 1.5x is the margin for
# the token bucket's initial burst).
netns_up 2 20mbit
netns_exec 0 /usr/bin/python3 "$PROBE" serve 5001 --timeout 60 > "$TMP/serve.out" 2>&1 &
server=$!
netns_exec 1 /usr/bin/python3 "$PROBE" send "${NETNS_ADDR[0]}" 5001 2500000 --timeout 60 \
  > "$TMP/send.out" 2>&1
wait "$server"
read -r _ bytes _ _ _ _ mbit _ < "$TMP/serve.out"
if [[ ${bytes:-0} != 2500000 ]]; then
  echo "FAIL: host 1 -> host 0: $(cat "$TMP/serve.out" "$TMP/send.out")"; fail=1
elif awk -v m="$mbit" 'BEGIN { exit !(m > 30) }'; then
  echo "FAIL: a 20mbit link carried $mbit Mbit/s (not shaped)"; fail=1
else
  echo "ok: host 1 -> host 0 over a 20mbit link: $(cat "$TMP/serve.out")"
fi
# The hosts' addresses are private to the set: the root namespace has none.
if ip -br addr | grep -q "${NETNS_ADDR[0]}/"; then
  echo "FAIL: ${NETNS_ADDR[0]} visible in the root namespace"; fail=1
else
  echo "ok: host addresses are invisible outside the set"
fi
# The set's owner (this shell) lives: a reap leaves the set alone.
netns_reap 2> /dev/null
if has_set $$; then echo "ok: reap keeps the set of a live owner"
else echo "FAIL: reap removed the set of a live owner"; fail=1; fi
netns_down_all
if no_set $$; then echo "ok: netns_down_all removed the set"
else echo "FAIL: set left after netns_down_all: $(set_of $$)"; fail=1; fi

# 2. SIGTERM to a run: its trap kills the hosts' processes and deletes the set.
"$NETNS" run --hosts 2 --rate 1gbit -- sleep 300 > "$TMP/term.out" 2>&1 &
runner=$!
if wait_for "the run's set" has_set $runner; then
  id=$(set_of $runner)
  wait_for "sleep in both hosts" two_sleepers "$id"
  kill -TERM $runner
  wait $runner
  if no_set $runner && [[ -z $(sleepers_in "$id") ]]; then
    echo "ok: SIGTERM to a run removes its set and what ran in it"
  else
    echo "FAIL: after SIGTERM: $(set_of $runner) $(sleepers_in "$id")"; fail=1
  fi
fi

# 3. kill -9 of a run: its trap cannot run, so its set and the sleeps in it
# stay until the next run (here, or any other test's on this machine)
# reaps them: then the set is gone and the sleeps are dead.
"$NETNS" run --hosts 2 --rate 1gbit -- sleep 300 > "$TMP/kill.out" 2>&1 &
runner=$!
if wait_for "the run's set" has_set $runner; then
  id=$(set_of $runner)
  wait_for "sleep in both hosts" two_sleepers "$id"
  pids=$(sleepers_in "$id")
  kill -9 $runner
  wait $runner 2> /dev/null
  # (Another test's run on this machine may reap it first: any run reaps.)
  if no_set $runner; then echo "note: the stale set was reaped by a concurrent run"; fi
  "$NETNS" run --hosts 1 -- true 2> "$TMP/next.err"
  # shellcheck disable=SC2086
  wait_for "the stale sleeps to die" none_running $pids
  alive=""
  for p in $pids; do running "$p" && alive+=" $p"; done
  if no_set $runner && [[ -z $alive ]]; then
    echo "ok: after kill -9 of a run, the next run reaped its set and killed$(echo " $pids" | tr '\n' ' ')"
  else
    echo "FAIL: after kill -9 and a new run: set '$(set_of $runner)', alive:$alive"; fail=1
    netns_down "$id"
  fi
fi

# 4. Bad input: exit 2 naming the argument.
"$NETNS" run --hosts 0 -- true > "$TMP/bad.out" 2>&1
rc=$?
if [[ $rc == 2 ]] && grep -q "host count '0'" "$TMP/bad.out"; then echo "ok: --hosts 0 refused (exit 2)"
else echo "FAIL: --hosts 0: exit $rc: $(cat "$TMP/bad.out")"; fail=1; fi
"$NETNS" run --hosts 1 --rate fast -- true > "$TMP/bad.out" 2>&1
rc=$?
if [[ $rc == 2 ]] && grep -q "bad rate 'fast'" "$TMP/bad.out"; then echo "ok: --rate fast refused (exit 2)"
else echo "FAIL: --rate fast: exit $rc: $(cat "$TMP/bad.out")"; fail=1; fi

rm -rf "$TMP"
exit $fail
