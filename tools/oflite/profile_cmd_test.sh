#!/usr/bin/env bash
# oflite profile end to end on plans compiled by `oflite compile`: the
# kernels of one and of several plans into a text Calibration (parsed back
# by a second --update run, which measures nothing new), a data loader whose
# dataset is gone (a note, not a failure), kernels timed inside real runs
# (--run-plan: in_situ_us and the in-situ factors; a run that fails or
# outlasts its timeout), and bad input (exit 2 naming the flag or file,
# nothing written). Kernels only: the transports have tests of their own.
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

# In situ: the one-machine MLP run here (traced), profiled alone as well
# (no --plan needed): every kernel key gets in_situ_us beside us, and every
# op type a factor, the sum of its kernels' in_situ_us over the sum of us.
"$OFLITE" profile --run-plan "$TMP/one.plan.pb" --out "$TMP/situ.pbtxt" --kernels-only \
  --samples 1 --threads 1 --run-iters 6 > "$TMP/out" 2>&1
check "profile --run-plan" 0 $?
expect_in "measured alone too" "kernels: $one_t1 measured, 0 kept, 0 not measured over 1 plan(s)" \
  "$TMP/out"
expect_in "run summary" "in situ: plan '$TMP/one.plan.pb': iterations 2..5 counted (2 warm-up), step [0-9.]* ms; kernels per iteration: [0-9.]* ms in situ, [0-9.]* ms alone ($one_t1 keys" "$TMP/out"
expect_in "factors printed" "^  matmul  *cpu/t1 " "$TMP/out"
# in_situ_check FILE: every key has both times, and the factors are the
# time-weighted ratios per (op type, threads), sorted, one per group.
in_situ_check() {
  python3 - "$1" <<'PY' > "$TMP/check" 2>&1 || { echo "FAIL: in-situ calibration $1"; cat "$TMP/check"; fail=1; }
import re, statistics, sys
text = open(sys.argv[1]).read()
kernels = re.findall(r'^kernel \{\n(.*?)^\}', text, re.M | re.S)
factors = re.findall(r'^in_situ_factor \{\n(.*?)^\}', text, re.M | re.S)
def field(block, name, cast=str):
    m = re.search(r'^  %s: "?([^"\n]*)"?$' % name, block, re.M)
    return cast(m.group(1)) if m else None
assert kernels and factors, (len(kernels), len(factors))
ratios = {}
for k in kernels:
    us, situ = field(k, "us", float), field(k, "in_situ_us", float)
    assert us and us > 0 and situ and situ > 0, "no time alone or in situ: " + k
    ratios.setdefault((field(k, "op_type"), field(k, "threads", int)), []).append((situ, us))
got = [(field(f, "op_type"), field(f, "threads", int)) for f in factors]
assert got == sorted(ratios), (got, sorted(ratios))
for f in factors:
    group = (field(f, "op_type"), field(f, "threads", int))
    assert field(f, "device_type") == "DEVICE_CPU", f
    assert field(f, "kernels", int) == len(ratios[group]), (f, ratios[group])
    weighted = sum(s for s, _ in ratios[group]) / sum(u for _, u in ratios[group])
    assert abs(field(f, "factor", float) - weighted) < 1e-6 * weighted, (f, ratios[group])
print("%d kernels, %d factors" % (len(kernels), len(factors)))
PY
}
in_situ_check "$TMP/situ.pbtxt"
# --update with a plain --plan keeps every in-situ time and factor.
cp "$TMP/situ.pbtxt" "$TMP/situ.before"
"$OFLITE" profile --plan "$TMP/two.plan.pb" --out "$TMP/situ.pbtxt" --kernels-only --update \
  --samples 1 --threads 1 > "$TMP/out" 2>&1
check "profile --update after --run-plan" 0 $?
python3 - "$TMP/situ.before" "$TMP/situ.pbtxt" <<'PY' > "$TMP/check" 2>&1 || { echo "FAIL: --update lost in-situ figures"; cat "$TMP/check"; fail=1; }
import re, sys
before, after = (open(p).read() for p in sys.argv[1:])
def in_situ(text):
    return dict(re.findall(r'^  key: "(.*)"$(?:\n  .*)*?\n  in_situ_us: (\S+)$', text, re.M))
def factors(text):
    return re.findall(r'^in_situ_factor \{\n.*?^\}', text, re.M | re.S)
assert in_situ(before) and in_situ(after) == in_situ(before), (len(in_situ(before)), len(in_situ(after)))
assert factors(after) == factors(before) and factors(before)
assert after.count("\nkernel {") > before.count("\nkernel {"), "the second plan added no keys"
PY
# A second run with --update (one machine, two devices): its keys get
# in-situ times too, and the factors are recomputed over both plans' keys.
"$OFLITE" profile --run-plan "$TMP/two.plan.pb" --out "$TMP/situ.pbtxt" --kernels-only --update \
  --samples 1 --threads 1 --run-iters 6 > "$TMP/out" 2>&1
check "profile --run-plan --update" 0 $?
expect_in "nothing new alone" "kernels: 0 measured, $both kept" "$TMP/out"
in_situ_check "$TMP/situ.pbtxt"

# A run that fails (the Fashion-MNIST plan, whose dataset is gone): exit 1
# naming the plan, with the end of the run's output; the kernels measured
# alone are still written, without in-situ figures.
"$OFLITE" profile --run-plan "$TMP/fm.plan.pb" --out "$TMP/fmrun.pbtxt" --kernels-only \
  --samples 1 --run-iters 3 > "$TMP/out" 2>&1
check "a --run-plan whose run fails" 1 $?
expect_in "names the plan" "--run-plan: plan '$TMP/fm.plan.pb': its run .* exited with code" \
  "$TMP/out"
expect_in "the run's own error" "oflite run: .*fmnist" "$TMP/out"
grep -q '^  us:' "$TMP/fmrun.pbtxt" || { echo "FAIL: nothing written after a failed run"; fail=1; }
grep -q 'in_situ' "$TMP/fmrun.pbtxt" && { echo "FAIL: in-situ figures from a failed run"; fail=1; }

# A run that outlasts --run-timeout is killed (and reaped): exit 1 naming
# the plan and the bound. (A million iterations of a wider MLP take minutes.)
"$WRITE_JOB" "$TMP/wide.job.pb" --batch 64 --features 1024 --hidden 1024 --classes 4 \
  --iterations 2 > "$TMP/out" 2>&1 &&
  "$OFLITE" compile --job "$TMP/wide.job.pb" --cluster "$TMP/one.pbtxt" -o "$TMP/wide.plan.pb" \
    --quiet > "$TMP/out" 2>&1
check "compile the wide MLP" 0 $?
"$OFLITE" profile --run-plan "$TMP/wide.plan.pb" --out "$TMP/wide.pbtxt" --kernels-only \
  --samples 1 --run-iters 1000000 --run-timeout 1 > "$TMP/out" 2>&1
check "a --run-plan past its timeout" 1 $?
expect_in "names the timeout" "plan '$TMP/wide.plan.pb': its run .* did not finish within --run-timeout 1 s" \
  "$TMP/out"
if pgrep -f -- "--plan $TMP/wide.plan.pb" > /dev/null; then
  echo "FAIL: the timed-out run is still running"; fail=1
fi

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
loopback_cluster "$TMP/m2.pbtxt" 2
compile_mlp m2 "$TMP/m2.pbtxt" --placement 0-1:cpu:0
bad "--run-plan of two machines" "plan '$TMP/m2.plan.pb' runs on 2 machines" \
  --run-plan "$TMP/one.plan.pb,$TMP/m2.plan.pb" --out "$TMP/bad.pbtxt" --kernels-only
bad "missing --run-plan" "nope.plan.pb" --run-plan "$TMP/nope.plan.pb" --out "$TMP/bad.pbtxt" \
  --kernels-only
bad "empty name in --run-plan" "flag '--run-plan'" --run-plan ",$TMP/one.plan.pb" \
  --out "$TMP/bad.pbtxt" --kernels-only
bad "--run-iters 2" "flag '--run-iters'" --run-plan "$TMP/one.plan.pb" --out "$TMP/bad.pbtxt" \
  --kernels-only --run-iters 2
bad "--run-timeout 0" "flag '--run-timeout'" --run-plan "$TMP/one.plan.pb" \
  --out "$TMP/bad.pbtxt" --kernels-only --run-timeout 0
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
