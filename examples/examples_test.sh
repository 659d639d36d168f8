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

# The .npy example on arrays NumPy wrote (a Fashion-MNIST subset: uint8
# samples [N, 28, 28], int64 labels): trains, evaluates on test_*.npy,
# saves; oflite predict writes logits numpy reads; bad files are named.
NPY="$OUT/npy"; mkdir -p "$NPY"
/usr/bin/python3 - "$NPY" <<'PY' > "$OUT.log" 2>&1 || { echo "FAIL: numpy"; cat "$OUT.log"; fail=1; }
import gzip, sys
import numpy
d = "/usr/share/datasets/fashion-mnist/"
def idx(name, offset):
    return numpy.frombuffer(gzip.open(d + name).read()[offset:], dtype=numpy.uint8)
x = idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 28, 28)
y = idx("train-labels-idx1-ubyte.gz", 8).astype(numpy.int64)
numpy.save(sys.argv[1] + "/train_x.npy", x[:3000])
numpy.save(sys.argv[1] + "/train_y.npy", y[:3000])
numpy.save(sys.argv[1] + "/test_x.npy", x[3000:4000])
numpy.save(sys.argv[1] + "/test_y.npy", y[3000:4000])
PY
run "mlp_npy trains on .npy arrays" 0 "$DIR/mlp_npy" --data-dir "$NPY" --out-dir "$OUT" \
  --epochs 2 --batch 50 --devices 2 -- --log-every 60 --save-every 120 --checkpoint-dir "$OUT/npyck"
grep -q "test (1000 samples" "$OUT.log" || { echo "FAIL: no npy test line"; cat "$OUT.log"; fail=1; }
ACC=$(sed -n 's/^test (.*accuracy \([0-9.]*\).*/\1/p' "$OUT.log")
awk -v a="$ACC" 'BEGIN { exit !(a > 0.6) }' ||
  { echo "FAIL: npy accuracy '$ACC' not above 0.6"; cat "$OUT.log"; fail=1; }
OFLITE="${TEST_SRCDIR}/oneflow_lite/tools/oflite/oflite"
run "predict from the npy checkpoint" 0 "$OFLITE" predict --plan "$OUT/mlp_npy.plan.pb" \
  --checkpoint "$OUT/npyck" --out "$OUT/npy_logits.npy"
/usr/bin/python3 -c "import numpy, sys; a = numpy.load('$OUT/npy_logits.npy'); \
assert a.shape == (1000, 10), a.shape" || { echo "FAIL: npy predictions"; fail=1; }
cp "$NPY/train_y.npy" "$NPY/keep_y.npy"
/usr/bin/python3 -c "import numpy; numpy.save('$NPY/train_y.npy', numpy.zeros(2999, numpy.int64))"
run "mismatched .npy counts" 2 "$DIR/mlp_npy" --data-dir "$NPY" --out-dir "$OUT" --compile-only
grep -q "train_x.npy' holds 3000 samples but '.*train_y.npy' holds 2999 labels" "$OUT.log" ||
  { echo "FAIL: counts not named"; cat "$OUT.log"; fail=1; }
exit $fail
