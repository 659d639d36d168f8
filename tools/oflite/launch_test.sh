#!/usr/bin/env bash
# oflite launch with a stand-in node program (--oflite): every rank's output
# is prefixed, the job token and rank reach the nodes, and one failing rank
# stops the others with exit code 1 naming it.
set -u
OFLITE="${TEST_SRCDIR}/oneflow_lite/tools/oflite/oflite"
TMP="${TEST_TMPDIR:-/tmp}"
fail=0
# A valid plan with 3 (empty) machines: version 2, field 4 three times.
# launch checks --nproc against the machine count; the stand-in nodes
# never read it.
printf '\x08\x02\x22\x00\x22\x00\x22\x00' > "$TMP/p.plan.pb"

cat > "$TMP/node_ok.sh" <<'NODE'
#!/bin/sh
# args: run --plan P --rank R --master HOST:PORT
echo "node rank=$RANK world=$WORLD_SIZE host=$OFLITE_HOST token=${#OFLITE_JOB_TOKEN} args=$*"
NODE
cat > "$TMP/node_fail.sh" <<'NODE'
#!/bin/sh
if [ "$RANK" = "1" ]; then sleep 0.3; echo "rank one fails"; exit 4; fi
sleep 60
NODE
cat > "$TMP/node_blame.sh" <<'NODE'
#!/bin/sh
# Rank 0 ends first with 4 (a peer failed); rank 1, the real cause, later.
if [ "$RANK" = "0" ]; then sleep 0.2; echo "oflite run: rank 0: lost rank 1" >&2; exit 4; fi
sleep 1; echo "oflite run: rank 1: kernel matmul: boom" >&2; echo "bye"; exit 1
NODE
chmod +x "$TMP/node_ok.sh" "$TMP/node_fail.sh" "$TMP/node_blame.sh"

"$OFLITE" launch --plan "$TMP/p.plan.pb" --nproc 3 --oflite "$TMP/node_ok.sh" > "$TMP/out" 2>&1
rc=$?
[[ $rc == 0 ]] || { echo "FAIL: ok launch exited $rc"; cat "$TMP/out"; fail=1; }
for r in 0 1 2; do
  grep -q "^\[rank $r\] node rank=$r world=3 host=127.0.0.$((r+1)) token=32 args=run --plan $TMP/p.plan.pb --rank $r --master 127.0.0.1:" "$TMP/out" \
    || { echo "FAIL: rank $r line missing"; cat "$TMP/out"; fail=1; }
done

start=$(date +%s)
"$OFLITE" launch --plan "$TMP/p.plan.pb" --nproc 3 --oflite "$TMP/node_fail.sh" --grace_ms 1000 > "$TMP/out" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
[[ $rc == 1 ]] || { echo "FAIL: failing launch exited $rc"; cat "$TMP/out"; fail=1; }
grep -q "rank 1 exited with code 4; stopped the others" "$TMP/out" || { echo "FAIL: no culprit"; cat "$TMP/out"; fail=1; }
grep -q "^\[rank 1\] rank one fails" "$TMP/out" || { echo "FAIL: no prefixed line"; fail=1; }
(( elapsed < 20 )) || { echo "FAIL: took ${elapsed}s to stop the others"; fail=1; }

# The first cause is blamed, not the first rank to exit: the last line
# names rank 1 with its error line.
printf '\x08\x02\x22\x00\x22\x00' > "$TMP/p2.plan.pb"
"$OFLITE" launch --plan "$TMP/p2.plan.pb" --nproc 2 --oflite "$TMP/node_blame.sh" --grace_ms 5000 \
  > "$TMP/out" 2>&1
rc=$?
[[ $rc == 1 ]] || { echo "FAIL: blame launch exited $rc"; cat "$TMP/out"; fail=1; }
[[ "$(tail -1 "$TMP/out")" == "oflite launch: rank 1 exited with code 1: oflite run: rank 1: kernel matmul: boom" ]] ||
  { echo "FAIL: wrong blame"; cat "$TMP/out"; fail=1; }
grep -q "other ranks: 0 exited 4 (a peer failed)" "$TMP/out" || { echo "FAIL: rank 0's outcome"; fail=1; }

# A rank frozen by SIGSTOP while the others exit 4 (they lost it): launch
# kills it at once instead of waiting out two grace periods (it cannot act
# on SIGTERM), and its last line names the frozen rank, not the healthy
# survivor that exited first. With 2 and 3 ranks, the default --grace_ms.
cat > "$TMP/node_freeze.sh" <<'NODE'
#!/bin/sh
if [ "$RANK" = "1" ]; then echo "oflite run: freezing at train-finish" >&2; kill -STOP $$; echo never; exit 0; fi
sleep 0.5; echo "oflite run: rank $RANK: job ended by rank 1: lost rank 1" >&2; exit 4
NODE
chmod +x "$TMP/node_freeze.sh"
for n in 2 3; do
  plan="$TMP/p2.plan.pb"; (( n == 3 )) && plan="$TMP/p.plan.pb"
  start=$(date +%s%N)
  "$OFLITE" launch --plan "$plan" --nproc $n --oflite "$TMP/node_freeze.sh" > "$TMP/out" 2>&1
  rc=$?
  elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  last=$(tail -1 "$TMP/out")
  if [[ $rc != 1 ]]; then
    echo "FAIL: frozen rank of $n: launch exited $rc"; cat "$TMP/out"; fail=1
  elif [[ "$last" != "oflite launch: rank 1 was frozen (stopped by a signal) after every other rank exited with code 4 (a peer failed); killed it" ]]; then
    echo "FAIL: frozen rank of $n: the last line does not name rank 1: $last"; cat "$TMP/out"; fail=1
  elif (( elapsed_ms >= 8000 )); then
    echo "FAIL: frozen rank of $n: launch took ${elapsed_ms} ms"; fail=1
  elif ! grep -q "other ranks: 0 exited 4 (a peer failed)" "$TMP/out" || grep -q never "$TMP/out"; then
    echo "FAIL: frozen rank of $n: other outcomes"; cat "$TMP/out"; fail=1
  else
    echo "ok: frozen rank 1 of $n named after ${elapsed_ms} ms"
  fi
done

# Bad input found by the ranks (a flag after --) is exit 2 of launch too;
# a bad --comm is refused by launch itself.
cat > "$TMP/node_badflag.sh" <<'NODE'
#!/bin/sh
echo "oflite run: INVALID_ARGUMENT: flag '--iters' must be an integer in [0, 1099511627776], got '-5'" >&2
exit 2
NODE
chmod +x "$TMP/node_badflag.sh"
"$OFLITE" launch --plan "$TMP/p2.plan.pb" --nproc 2 --oflite "$TMP/node_badflag.sh" -- --iters -5 \
  > "$TMP/out" 2>&1
rc=$?
[[ $rc == 2 ]] || { echo "FAIL: bad flag after -- : launch exited $rc"; cat "$TMP/out"; fail=1; }
tail -1 "$TMP/out" | grep -q "exited with code 2: .*flag '--iters'" ||
  { echo "FAIL: bad flag after -- not named last"; cat "$TMP/out"; fail=1; }
"$OFLITE" launch --plan "$TMP/p2.plan.pb" --nproc 2 --comm bogus > "$TMP/out" 2>&1
rc=$?
[[ $rc == 2 ]] && grep -qF -- "--comm: unknown transport provider 'bogus' (known: auto, ibverbs, shm or tcp)" "$TMP/out" || { echo "FAIL: --comm bogus: $rc"; cat "$TMP/out"; fail=1; }

# A bad --ib_emulator fabric name is refused by launch itself (exit 2).
"$OFLITE" launch --plan "$TMP/p2.plan.pb" --nproc 2 --comm ibverbs --ib_emulator=a/b > "$TMP/out" 2>&1
rc=$?
[[ $rc == 2 ]] && grep -qF -- "--ib_emulator: emulated fabric name 'a/b'" "$TMP/out" ||
  { echo "FAIL: launch --ib_emulator=a/b: $rc"; cat "$TMP/out"; fail=1; }
"$OFLITE" launch --nproc 2 > "$TMP/out" 2>&1; [[ $? == 2 ]] || { echo "FAIL: missing --plan"; fail=1; }
"$OFLITE" launch --plan "$TMP/none.pb" --nproc 2 > "$TMP/out" 2>&1; [[ $? == 2 ]] || { echo "FAIL: missing plan file"; fail=1; }
grep -q "none.pb" "$TMP/out" || { echo "FAIL: plan not named"; fail=1; }
# CPU binding of local ranks: with 2 ranks on the CPUs this test may use,
# --bind auto gives each its own share (when there are at least 2 cores),
# none leaves both with the launcher's CPUs, and a bad policy is exit 2.
cat > "$TMP/node_cpus.sh" <<'NODE'
#!/bin/sh
echo "cpus $(grep Cpus_allowed_list /proc/self/status | cut -f2)"
NODE
chmod +x "$TMP/node_cpus.sh"
all=$(grep Cpus_allowed_list /proc/self/status | cut -f2)
"$OFLITE" launch --plan "$TMP/p2.plan.pb" --nproc 2 --oflite "$TMP/node_cpus.sh" --bind none \
  > "$TMP/out" 2>&1 || { echo "FAIL: --bind none launch"; cat "$TMP/out"; fail=1; }
grep -q "ranks unbound (--bind none)" "$TMP/out" || { echo "FAIL: no unbound line"; cat "$TMP/out"; fail=1; }
for r in 0 1; do
  grep -qx "\[rank $r\] cpus $all" "$TMP/out" || { echo "FAIL: --bind none rank $r"; cat "$TMP/out"; fail=1; }
done
if [[ $(nproc) -ge 2 ]]; then
  "$OFLITE" launch --plan "$TMP/p2.plan.pb" --nproc 2 --oflite "$TMP/node_cpus.sh" \
    > "$TMP/out" 2>&1 || { echo "FAIL: --bind auto launch"; cat "$TMP/out"; fail=1; }
  grep -q "; rank 0 on CPUs .*, rank 1 on CPUs " "$TMP/out" || { echo "FAIL: no binding line"; cat "$TMP/out"; fail=1; }
  c0=$(sed -n 's/^\[rank 0\] cpus //p' "$TMP/out")
  c1=$(sed -n 's/^\[rank 1\] cpus //p' "$TMP/out")
  [[ -n $c0 && -n $c1 && $c0 != "$c1" && $c0 != "$all" ]] ||
    { echo "FAIL: ranks not bound apart ($c0 / $c1, launcher $all)"; cat "$TMP/out"; fail=1; }
  grep -q "rank 0 on CPUs $c0, rank 1 on CPUs $c1" "$TMP/out" ||
    { echo "FAIL: the binding line does not match the ranks' CPUs"; cat "$TMP/out"; fail=1; }
fi
"$OFLITE" launch --plan "$TMP/p2.plan.pb" --nproc 2 --oflite "$TMP/node_cpus.sh" --bind core \
  > "$TMP/out" 2>&1
rc=$?
[[ $rc == 2 ]] && grep -q -- "--bind: 'core' is not a binding" "$TMP/out" ||
  { echo "FAIL: bad --bind exited $rc"; cat "$TMP/out"; fail=1; }

[[ $fail == 0 ]] && echo PASS
exit $fail
