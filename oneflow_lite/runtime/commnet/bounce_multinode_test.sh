#!/usr/bin/env bash
# Dynamic-shape registers across machines with real processes: a 2-machine
# pipeline whose cross-machine registers use bounce buffers (bounce_plan
# switches them, as the compiler does for dynamic shapes) runs through
# `oflite launch` over tcp, equals the same pipeline on one machine within
# 1e-5 relative, and --stats shows every cross-machine byte under
# bounce-buffers: moved == copied (one copy) summed over the ranks, and
# nothing under static-zero-copy.
set -u
OFLITE="${TEST_SRCDIR}/oneflow_lite/tools/oflite/oflite"
WRITE_JOB="${TEST_SRCDIR}/oneflow_lite/oneflow_lite/testing/write_test_job"
BOUNCE_PLAN="${TEST_SRCDIR}/oneflow_lite/oneflow_lite/testing/bounce_plan"
TMP="${TEST_TMPDIR:-/tmp}/bounce_multinode"
rm -rf "$TMP"; mkdir -p "$TMP"
MLP=(--batch 16 --features 24 --hidden 12 --classes 4 --iterations 10)
die() { echo "FAIL: $*"; exit 1; }

: > "$TMP/one.pbtxt"
echo 'machine { id: 0 address: "127.0.0.1" cpu_devices: 2 }' >> "$TMP/one.pbtxt"
: > "$TMP/two.pbtxt"
echo 'machine { id: 0 address: "127.0.0.1" cpu_devices: 1 }' >> "$TMP/two.pbtxt"
echo 'machine { id: 1 address: "127.0.0.2" cpu_devices: 1 }' >> "$TMP/two.pbtxt"

"$WRITE_JOB" "$TMP/ref.job.pb" "${MLP[@]}" --stages 0:cpu:0,0:cpu:1 > "$TMP/out" 2>&1 &&
  "$WRITE_JOB" "$TMP/pp.job.pb" "${MLP[@]}" --stages 0:cpu:0,1:cpu:0 >> "$TMP/out" 2>&1 &&
  "$OFLITE" compile --job "$TMP/ref.job.pb" --cluster "$TMP/one.pbtxt" -o "$TMP/ref.plan.pb" \
    --quiet >> "$TMP/out" 2>&1 &&
  "$OFLITE" compile --job "$TMP/pp.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/pp.plan.pb" \
    --quiet >> "$TMP/out" 2>&1 &&
  "$BOUNCE_PLAN" "$TMP/pp.plan.pb" "$TMP/bounce.plan.pb" >> "$TMP/out" 2>&1 ||
  { tail -20 "$TMP/out"; die "building the plans"; }

timeout 120 "$OFLITE" run --plan "$TMP/ref.plan.pb" --metrics-out "$TMP/ref.txt" --eval=false \
  > "$TMP/ref.log" 2>&1 || { tail -20 "$TMP/ref.log"; die "reference run"; }
timeout 120 "$OFLITE" launch --plan "$TMP/bounce.plan.pb" --nproc 2 --comm tcp -- \
  --metrics-out "$TMP/bounce.{rank}.txt" --eval=false --stats > "$TMP/bounce.log" 2>&1 ||
  { tail -30 "$TMP/bounce.log"; die "2-machine launch of the bounce plan"; }

cat "$TMP"/bounce.[0-9].txt | sort -n > "$TMP/got"
sort -n "$TMP/ref.txt" > "$TMP/want"
[[ -s "$TMP/want" ]] || die "the reference reported no metrics"
awk 'NR == FNR { want[$1 " " $2] = $3; n++; next }
     { key = $1 " " $2; if (!(key in want)) { print "extra " key; bad = 1; next }
       d = $3 - want[key]; if (d < 0) d = -d; s = want[key]; if (s < 0) s = -s;
       if (d > 1e-5 * (s > 1e-12 ? s : 1e-12)) { print "differs " key ": " $3 " vs " want[key]; bad = 1 }
       seen++ }
     END { if (seen != n) { print "got " seen " of " n " metrics"; bad = 1 } exit bad }' \
  "$TMP/want" "$TMP/got" || die "the bounce pipeline differs from one machine"
echo "ok: 2-machine pipeline through bounce buffers equals 1 machine"

# Per rank: "bounce-buffers: moved M B, copied C B, ..." (launch prefixes the rank).
sums=$(grep -o "bounce-buffers: moved [0-9]* B, copied [0-9]* B" "$TMP/bounce.log" |
       awk '{ moved += $3; copied += $6; n++ } END { print n, moved, copied }')
read -r ranks moved copied <<< "$sums"
[[ $ranks == 2 ]] || { grep -A3 "comm" "$TMP/bounce.log"; die "expected --stats from 2 ranks"; }
[[ $moved -gt 0 && $moved == "$copied" ]] ||
  { grep -A3 "comm" "$TMP/bounce.log"; die "bounce bytes moved $moved, copied $copied"; }
[[ $(grep -c "static-zero-copy: moved 0 B" "$TMP/bounce.log") == 2 ]] ||
  { grep -A3 "comm" "$TMP/bounce.log"; die "bytes went through static zero-copy"; }
echo "ok: --stats: $moved bytes moved through bounce buffers, $copied copied once, none zero-copy"
grep "bounce-buffers" "$TMP/bounce.log" | sed 's/^/    /'
