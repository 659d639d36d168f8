#!/usr/bin/env bash
# The example programs end to end on the real dataset: compile and write
# plans; train a few iterations and evaluate; bad flags give exit code 2.
set -u
DIR="${TEST_SRCDIR}/oneflow_lite/examples"
OUT="${TEST_TMPDIR:-/tmp}/examples"
fail=0
run() {  # run NAME EXPECTED_RC CMD...
  local name=$1 want=$2; shift 2
  "$@" > "$OUT.log" 2>&1; local rc=$?
  if [[ $rc != "$want" ]]; then echo "FAIL: $name: exit $rc, expected $want"; cat "$OUT.log"; fail=1
  else echo "ok: $name"; fi
}
mkdir -p "$OUT"
run "lenet compile" 0 "$DIR/lenet5_fashion_mnist" --out-dir "$OUT" --compile-only
[[ -s "$OUT/lenet5.plan.pb" && -s "$OUT/lenet5.job.pb" ]] || { echo "FAIL: lenet files"; fail=1; }
run "mlp 30 iterations on 2 devices" 0 "$DIR/mlp_fashion_mnist" --out-dir "$OUT" --iters 30 --devices 2 -- --log-every 10
grep -q "test (" "$OUT.log" || { echo "FAIL: no test accuracy line"; cat "$OUT.log"; fail=1; }
grep -q "accuracy" "$OUT.log" || { echo "FAIL: no accuracy"; fail=1; }
run "mlp 2-machine plan" 0 "$DIR/mlp_fashion_mnist" --out-dir "$OUT" --machines 2
grep -q "oflite launch --plan" "$OUT.log" || { echo "FAIL: no launch hint"; cat "$OUT.log"; fail=1; }
grep -q "2 machine(s)" "$OUT.log" || { echo "FAIL: not a 2-machine plan"; cat "$OUT.log"; fail=1; }
run "bad flag" 2 "$DIR/mlp_fashion_mnist" --bogus
run "missing dataset" 2 "$DIR/mlp_fashion_mnist" --data-dir /nonexistent/fashion --compile-only
grep -q "/nonexistent/fashion" "$OUT.log" || { echo "FAIL: dataset path not named"; cat "$OUT.log"; fail=1; }
exit $fail
