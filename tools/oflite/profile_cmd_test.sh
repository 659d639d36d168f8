#!/usr/bin/env bash
# oflite profile end to end on plans compiled by `oflite compile`: the
# kernels of one and of several plans into a text Calibration (parsed back
# by a second --update run, which measures nothing new), a data loader whose
# dataset is gone (a note, not a failure), and bad input (exit 2 naming the
# flag or file, nothing written). Kernels only: the transports have tests of
# their own.
set -u
source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
fresh_tmp profile_cmd
check() {  # check DESCRIPTION EXPECTED_RC ACTUAL_RC
  if [[ "$2" != "$3" ]]; then echo "FAIL: $1: exit $3, expected $2"; cat "$TMP/out"; fail=1; else echo "ok: $1"; fi
}
expect_in() {  # expect_in DESCRIPTION NEEDLE FILE
  if ! grep -q -- "$2" "$3"; then echo "FAIL: $1: '$2' not in output:"; cat "$3"; fail=1; fi
}
# measured_count FILE: N of "kernels: N measured, ..." in a summary.
measured_count() { sed -n 's/^kernels: \([0-9]*\) measured.*/\1/p' "$1"; }

loopback_cluster "$TMP/one.pbtxt" 1
loopback_cluster "$TMP/two.pbtxt" 1 2
MLP=(--batch 8 --features 16 --hidden 8 --classes 4 --iterations 2)
compile_mlp one "$TMP/one.pbtxt"
compile_mlp two "$TMP/two.pbtxt" --placement 0:cpu:0-1
[[ $fail == 0 ]] || exit 1

# One plan.
"$OFLITE" profile --plan "$TMP/one.plan.pb" --out "$TMP/cal.pbtxt" --kernels-only --samples 3 \
  > "$TMP/out" 2>&1
check "profile one plan" 0 $?
expect_in "summary" "kernels: [1-9][0-9]* measured, 0 kept, 0 not measured over 1 plan(s)" "$TMP/out"
first=$(measured_count "$TMP/out")
# The file: version 1, where it was measured, one entry per key, sorted,
# each with a positive time, and nothing of the runtime or transports.
python3 - "$TMP/cal.pbtxt" "$first" <<'PY' > "$TMP/check" 2>&1 || { echo "FAIL: calibration file"; cat "$TMP/check"; fail=1; }
import re, sys
text = open(sys.argv[1]).read()
assert re.search(r'^version: 1$', text, re.M), "no version 1"
for field in ("host", "cpu", "created"):
    assert re.search(r'^%s: ".+"$' % field, text, re.M), "no " + field
assert re.search(r'^created: "\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"$', text, re.M), "created is no UTC time"
keys = re.findall(r'^  key: "(.*)"$', text, re.M)
assert len(keys) == int(sys.argv[2]), (len(keys), sys.argv[2])
assert keys == sorted(keys) and len(set(keys)) == len(keys), "keys not sorted or repeated"
times = [float(t) for t in re.findall(r'^  us: (\S+)$', text, re.M)]
assert len(times) == len(keys) and all(t > 0 for t in times), times
assert all(" cpu/t" in k for k in keys), keys
assert any(k.startswith("matmul float32 cpu/t") for k in keys), keys
assert "transport {" not in text and "runtime {" not in text
PY
echo "ok: calibration file ($first kernel keys)"

# --update parses the file and measures nothing new.
cp "$TMP/cal.pbtxt" "$TMP/before.pbtxt"
"$OFLITE" profile --plan "$TMP/one.plan.pb" --out "$TMP/cal.pbtxt" --kernels-only --update \
  > "$TMP/out" 2>&1
check "profile --update, same plan" 0 $?
expect_in "nothing new" "kernels: 0 measured, $first kept, 0 not measured" "$TMP/out"
if ! diff <(grep -v '^created:' "$TMP/before.pbtxt") <(grep -v '^created:' "$TMP/cal.pbtxt") > /dev/null; then
  echo "FAIL: --update with nothing new changed the kernels"; fail=1
fi

# Several plans (a comma list and a repeated flag are the same), one thread
# each: a key both plans have (an update of the same weights) is measured
# once, and profiling them one by one with --update ends with the same keys.
"$OFLITE" profile --plan "$TMP/one.plan.pb,$TMP/two.plan.pb" --out "$TMP/both.pbtxt" \
  --kernels-only --samples 1 --threads 1 > "$TMP/out" 2>&1
check "profile a comma list of plans" 0 $?
expect_in "two plans" "over 2 plan(s)" "$TMP/out"
both=$(measured_count "$TMP/out")
"$OFLITE" profile --plan "$TMP/one.plan.pb" --plan "$TMP/two.plan.pb" --out "$TMP/both2.pbtxt" \
  --kernels-only --samples 1 --threads 1 > "$TMP/out" 2>&1
check "profile a repeated --plan" 0 $?
expect_in "same keys either way" "kernels: $both measured" "$TMP/out"
if ! diff <(grep '^  key:' "$TMP/both.pbtxt") <(grep '^  key:' "$TMP/both2.pbtxt") > /dev/null; then
  echo "FAIL: comma list and repeated --plan measured different keys"; fail=1
fi
"$OFLITE" profile --plan "$TMP/one.plan.pb" --out "$TMP/one_t1.pbtxt" --kernels-only --samples 1 \
  --threads 1 > "$TMP/out" 2>&1
check "profile one plan, 1 thread" 0 $?
one_t1=$(measured_count "$TMP/out")
"$OFLITE" profile --plan "$TMP/two.plan.pb" --out "$TMP/one_t1.pbtxt" --kernels-only --samples 1 \
  --threads 1 --update > "$TMP/out" 2>&1
check "profile --update with a second plan" 0 $?
expect_in "only the new keys" "kernels: $((both - one_t1)) measured, $one_t1 kept" "$TMP/out"
if ! diff <(grep '^  key:' "$TMP/both.pbtxt") <(grep '^  key:' "$TMP/one_t1.pbtxt") > /dev/null; then
  echo "FAIL: plan by plan with --update differs from both plans at once"; fail=1
fi

# A data loader whose dataset is gone by the time of the profile: a note
# naming the op, the other kernels measured, exit 0. (--eval: the
# evaluation plan's kernels too.)
mkdir -p "$TMP/fmnist"
cp /usr/share/datasets/fashion-mnist/*.gz "$TMP/fmnist/"
"$WRITE_JOB" "$TMP/fm.job.pb" --batch 8 --features 784 --hidden 8 --classes 10 --iterations 2 \
  --fashion_mnist "$TMP/fmnist" > "$TMP/out" 2>&1 &&
  "$OFLITE" compile --job "$TMP/fm.job.pb" --cluster "$TMP/one.pbtxt" -o "$TMP/fm.plan.pb" \
    --quiet > "$TMP/out" 2>&1
check "compile a Fashion-MNIST job" 0 $?
rm -rf "$TMP/fmnist"
"$OFLITE" profile --plan "$TMP/fm.plan.pb" --out "$TMP/fm.pbtxt" --kernels-only --samples 1 --eval \
  > "$TMP/out" 2>&1
check "profile with a missing dataset" 0 $?
expect_in "the loader is a note" "note: plan '$TMP/fm.plan.pb': op '.*' (fashion_mnist)" "$TMP/out"
expect_in "the note names the dataset" "fmnist" "$TMP/out"
expect_in "the rest is measured" "kernels: [1-9][0-9]* measured, 0 kept, 2 not measured" "$TMP/out"
grep -q '^  op_type: "fashion_mnist"' "$TMP/fm.pbtxt" && { echo "FAIL: the loader got a time"; fail=1; }

# Bad input: exit 2 naming the flag or the file, nothing written.
bad() {  # bad DESCRIPTION NEEDLE ARGS...
  local what=$1 needle=$2; shift 2
  rm -f "$TMP/bad.pbtxt"
  "$OFLITE" profile "$@" > "$TMP/out" 2>&1; check "$what" 2 $?
  expect_in "$what: message" "$needle" "$TMP/out"
  [[ -e "$TMP/bad.pbtxt" ]] && { echo "FAIL: $what wrote $TMP/bad.pbtxt"; fail=1; }
  return 0
}
bad "no --out" "--out is required" --plan "$TMP/one.plan.pb" --kernels-only
bad "--out in a missing folder" "no/such" --plan "$TMP/one.plan.pb" --kernels-only \
  --out "$TMP/no/such/cal.pbtxt"
bad "missing plan" "nope.plan.pb" --plan "$TMP/nope.plan.pb" --out "$TMP/bad.pbtxt" --kernels-only
head -c 2048 /dev/urandom > "$TMP/garbage.pb"
bad "corrupt plan" "garbage.pb" --plan "$TMP/one.plan.pb,$TMP/garbage.pb" --out "$TMP/bad.pbtxt" \
  --kernels-only
bad "empty name in --plan" "flag '--plan'" --plan "$TMP/one.plan.pb,," --out "$TMP/bad.pbtxt" \
  --kernels-only
bad "--samples 0" "flag '--samples'" --plan "$TMP/one.plan.pb" --out "$TMP/bad.pbtxt" \
  --kernels-only --samples 0
bad "--threads -1" "flag '--threads'" --plan "$TMP/one.plan.pb" --out "$TMP/bad.pbtxt" \
  --kernels-only --threads -1
bad "unknown transport" "unknown transport 'carrier-pigeon'" --plan "$TMP/one.plan.pb" \
  --out "$TMP/bad.pbtxt" --transports tcp,carrier-pigeon
bad "--ranks 1" "flag '--ranks'" --plan "$TMP/one.plan.pb" --out "$TMP/bad.pbtxt" --ranks 2,1
bad "--kernels-only without a plan" "no --plan" --out "$TMP/bad.pbtxt" --kernels-only
bad "unknown flag" "bogus" --plan "$TMP/one.plan.pb" --out "$TMP/bad.pbtxt" --bogus
# --update of a file that is no calibration: named, and left as it was.
echo "kernel { key: 3 }" > "$TMP/broken.pbtxt"
cp "$TMP/broken.pbtxt" "$TMP/broken.before"
bad "--update of a corrupt calibration" "broken.pbtxt" --plan "$TMP/one.plan.pb" \
  --out "$TMP/broken.pbtxt" --kernels-only --update
cmp -s "$TMP/broken.pbtxt" "$TMP/broken.before" || { echo "FAIL: the corrupt file was changed"; fail=1; }
echo "version: 7" > "$TMP/future.pbtxt"
bad "--update of a future calibration" "version 7" --plan "$TMP/one.plan.pb" \
  --out "$TMP/future.pbtxt" --kernels-only --update
"$OFLITE" profile --help > "$TMP/out" 2>&1; check "profile --help" 0 $?
expect_in "usage" "usage: oflite profile" "$TMP/out"
exit $fail
