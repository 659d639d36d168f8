#!/usr/bin/env bash
# tools/bench/scaling end to end in its smoke mode (a few steps of the MLP on
# 1 and 2 namespace hosts at 1 and 10 Gbit/s, oflite and, where
# /usr/bin/python3 has torch, PyTorch DDP): every configuration produces a
# row and its hosts are gone afterwards; --help runs nothing; bad arguments
# exit 2; overlap.py prints its line per framework. Figures are not checked (they are not results under load).
# Skips (exit 0, saying why) where namespaces cannot be built.
set -u
R="${TEST_SRCDIR}/oneflow_lite"
SCALING="$R/tools/bench/scaling/scaling.py"
NETNS="$R/tests/netns/netns.sh"
BINS=(--oflite "$R/tools/oflite/oflite" --write-job "$R/tools/bench/scaling/write_scaling_job")
TMP="${TEST_TMPDIR:-/tmp}/scaling_smoke"
rm -rf "$TMP"; mkdir -p "$TMP"
fail=0

# --help with an empty PATH and no binaries: any step past the help (the
# namespace check, a build of hosts) would fail and exit non-zero.
PATH=/nonexistent /usr/bin/python3 "$SCALING" --help --oflite /nonexistent --write-job /nonexistent \
  > "$TMP/help" 2>&1
rc=$?
if [[ $rc == 0 ]] && grep -qi "scaling efficiency" "$TMP/help"; then
  echo "ok: --help prints the help and runs nothing"
else echo "FAIL: --help: exit $rc"; head -5 "$TMP/help"; fail=1; fi
"$SCALING" --models rnn "${BINS[@]}" > "$TMP/bad" 2>&1
rc=$?
if [[ $rc == 2 ]] && grep -q "rnn" "$TMP/bad"; then echo "ok: --models rnn refused (exit 2)"
else echo "FAIL: --models rnn: exit $rc"; cat "$TMP/bad"; fail=1; fi

if ! "$NETNS" check > "$TMP/check" 2>&1; then
  echo "SKIP: the smoke run: network namespaces unavailable: $(cat "$TMP/check")"; exit $fail
fi
frameworks=oflite,ddp
if ! /usr/bin/python3 -c "import torch.distributed" 2> /dev/null; then
  echo "note: /usr/bin/python3 has no torch: oflite only"; frameworks=oflite
fi
# left_behind PID: the host sets of process PID still on the machine.
left_behind() { "$NETNS" list | grep "^oflnet-$1-"; }
"$SCALING" --smoke --frameworks "$frameworks" "${BINS[@]}" > "$TMP/smoke" 2>&1 &
pid=$!
wait $pid
rc=$?
sed 's/^/    /' "$TMP/smoke"
rows=$(grep -cE "^mlp +[12] +(-|1gbit|10gbit) +(oflite|ddp) +[0-9.]+ " "$TMP/smoke")
want=$(( 3 * $(tr ',' '\n' <<< "$frameworks" | wc -l) ))
if [[ $rc == 0 && $rows == "$want" ]]; then echo "ok: smoke run: $rows rows"
else echo "FAIL: smoke run: exit $rc, $rows of $want rows"; fail=1; fi
if [[ -n $(left_behind $pid) ]]; then echo "FAIL: scaling.py left $(left_behind $pid)"; fail=1; fi
# overlap.py (the all-reduce beside backward): one short run per framework.
OVERLAP="$R/tools/bench/scaling/overlap.py"
"$OVERLAP" --warmup 2 --measure 2 --frameworks "$frameworks" "${BINS[@]}" > "$TMP/overlap" 2>&1 &
pid=$!
wait $pid
rc=$?
sed 's/^/    /' "$TMP/overlap"
lines=$(grep -cE "^(oflite|ddp) .* [0-9]+% under comm;" "$TMP/overlap")
if [[ $rc == 0 && $lines == $(( want / 3 )) ]]; then echo "ok: overlap.py: $lines frameworks"
else echo "FAIL: overlap.py: exit $rc, $lines lines"; fail=1; fi
if [[ -n $(left_behind $pid) ]]; then echo "FAIL: overlap.py left $(left_behind $pid)"; fail=1; fi
exit $fail
