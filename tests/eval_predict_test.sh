#!/usr/bin/env bash
# oflite eval / oflite predict from checkpoints, end to end with real
# processes on Fashion-MNIST (the MLP example written by the training
# driver, 20 iterations):
#  - one machine: `oflite eval` of the final checkpoint gives the metrics
#    the training run printed after training (same trained variables);
#    `oflite run --resume <final checkpoint>` evaluates too (it used to fail
#    with "variable 'dense-weight' has no value to restore");
#  - `oflite predict` writes logits NumPy and PyTorch read, whose argmax
#    against the test labels counts exactly the correct samples eval printed;
#  - two machines (oflite launch --command eval|predict, tcp): the metrics
#    equal the training run's distributed evaluation and a one-machine
#    evaluation of the same checkpoint; the predictions equal one machine's;
#  - `oflite run` reports its evaluation exactly as `oflite eval` does: the
#    exact-count line and the same --eval-out keys (one implementation);
#  - eval and predict with --comm auto on one host put the peer on shm, as
#    `oflite run` does (one session start for every command);
#  - bad input (missing/corrupt checkpoint, unknown output, an --eval-out in
#    a missing folder, a non-boolean --eval) is exit 2 naming it, before any
#    work.
set -u
OFLITE="${TEST_SRCDIR}/oneflow_lite/tools/oflite/oflite"
MLP="${TEST_SRCDIR}/oneflow_lite/examples/mlp_fashion_mnist"
PY=/usr/bin/python3
DATA=/usr/share/datasets/fashion-mnist
T="${TEST_TMPDIR:-/tmp}/eval_predict"
rm -rf "$T"; mkdir -p "$T/one" "$T/two"
fail=0
check() {  # check DESCRIPTION EXPECTED_RC LOG CMD...
  local what=$1 want=$2 log=$3; shift 3
  timeout 300 "$@" > "$log" 2>&1; local rc=$?
  if [[ $rc != "$want" ]]; then echo "FAIL: $what: exit $rc, expected $want"; tail -20 "$log"; fail=1
  else echo "ok: $what"; fi
}
value() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
# same_metrics DESCRIPTION A B TOLERANCE: accuracy and loss of two --eval-out
# files agree within TOLERANCE relative.
same_metrics() {
  local what=$1 a=$2 b=$3 tol=$4 bad=0
  for key in accuracy loss; do
    local x y; x=$(value "$key" "$a"); y=$(value "$key" "$b")
    if [[ -z "$x" || -z "$y" ]] ||
       ! awk -v x="$x" -v y="$y" -v t="$tol" 'BEGIN { d = x - y; if (d < 0) d = -d;
           s = y < 0 ? -y : y; exit !(d <= t * (s > 1e-12 ? s : 1e-12)) }'; then
      echo "FAIL: $what: $key '$x' vs '$y'"; bad=1; fail=1
    fi
  done
  [[ $bad == 0 ]] && echo "ok: $what (accuracy $(value accuracy "$a"), loss $(value loss "$a"))"
}

# ---- One machine -------------------------------------------------------------
check "write the 1-machine plan" 0 "$T/w1.log" "$MLP" --out-dir "$T/one" --iters 20 --compile-only
P1="$T/one/mlp.plan.pb"
check "train and save" 0 "$T/train1.log" "$OFLITE" run --plan "$P1" --save-every 20 \
  --checkpoint-dir "$T/ck1" --eval-out "$T/train1.eval"
check "eval the final checkpoint" 0 "$T/eval1.log" "$OFLITE" eval --plan "$P1" \
  --checkpoint "$T/ck1" --eval-out "$T/eval1.eval"
same_metrics "eval equals the evaluation after training" "$T/eval1.eval" "$T/train1.eval" 1e-12
grep -q "^accuracy: [0-9]* of 9984 samples correct" "$T/train1.log" ||
  { echo "FAIL: oflite run prints no exact accuracy count"; tail -5 "$T/train1.log"; fail=1; }
[[ $(cut -d' ' -f1 "$T/train1.eval" | sort | tr '\n' ' ') == \
   $(cut -d' ' -f1 "$T/eval1.eval" | sort | tr '\n' ' ') ]] ||
  { echo "FAIL: run and eval write different --eval-out keys"; cat "$T/train1.eval" "$T/eval1.eval"; fail=1; }
[[ $(value accuracy_correct "$T/train1.eval") == $(value accuracy_correct "$T/eval1.eval") ]] ||
  { echo "FAIL: run and eval count different correct samples"; fail=1; }
grep -q "^accuracy: [0-9]* of 9984 samples correct" "$T/eval1.log" ||
  { echo "FAIL: no exact accuracy count"; cat "$T/eval1.log"; fail=1; }
[[ $(value samples "$T/eval1.eval") == 9984 ]] || { echo "FAIL: samples"; fail=1; }
check "run --resume <final checkpoint> evaluates" 0 "$T/resume1.log" "$OFLITE" run --plan "$P1" \
  --resume "$T/ck1/iter-20" --eval-out "$T/resume1.eval"
same_metrics "resumed evaluation equals eval" "$T/resume1.eval" "$T/eval1.eval" 1e-12
check "predict logits" 0 "$T/predict1.log" "$OFLITE" predict --plan "$P1" --checkpoint "$T/ck1" \
  --out "$T/p1.npy"
CORRECT=$(value accuracy_correct "$T/eval1.eval")
if "$PY" - "$T/p1.npy" "$DATA/t10k-labels-idx1-ubyte.gz" "$CORRECT" > "$T/py1.log" 2>&1 <<'EOF'
import gzip, sys
import numpy
import torch
logits = numpy.load(sys.argv[1])
assert logits.shape == (9984, 10) and logits.dtype == numpy.float32, (logits.shape, logits.dtype)
labels = numpy.frombuffer(gzip.open(sys.argv[2]).read()[8:], dtype=numpy.uint8)[:9984]
correct = int((logits.argmax(axis=1) == labels).sum())
assert correct == int(sys.argv[3]), (correct, sys.argv[3])
tensor = torch.from_numpy(logits)
assert tuple(tensor.shape) == (9984, 10) and torch.isfinite(tensor).all()
print("numpy and torch read", logits.shape, "correct", correct)
EOF
then echo "ok: predictions: $(cat "$T/py1.log")"
else echo "FAIL: predictions do not match eval"; cat "$T/py1.log"; fail=1; fi

# ---- Two machines ------------------------------------------------------------
check "write the 2-machine plan" 0 "$T/w2.log" "$MLP" --out-dir "$T/two" --iters 20 \
  --machines 2 --compile-only
P2="$T/two/mlp.plan.pb"
check "train on 2 machines and save" 0 "$T/train2.log" "$OFLITE" launch --plan "$P2" --nproc 2 \
  --comm tcp -- --save-every 20 --checkpoint-dir "$T/ck2.{rank}" --eval-out "$T/train2.eval.{rank}"
check "eval on 2 machines" 0 "$T/eval2.log" "$OFLITE" launch --command eval --plan "$P2" \
  --nproc 2 --comm tcp -- --checkpoint "$T/ck2.0" --eval-out "$T/eval2.eval.{rank}" --stats
same_metrics "2-machine eval equals the training run's evaluation" "$T/eval2.eval.0" \
  "$T/train2.eval.0" 1e-12
[[ $(grep -c "test (" "$T/eval2.log") == 1 && ! -e "$T/eval2.eval.1" ]] ||
  { echo "FAIL: rank 0 alone reports"; cat "$T/eval2.log"; fail=1; }
check "eval the 2-machine checkpoint on 1 machine" 0 "$T/eval21.log" "$OFLITE" eval --plan "$P1" \
  --checkpoint "$T/ck2.0" --eval-out "$T/eval21.eval"
same_metrics "2-machine eval equals 1 machine" "$T/eval2.eval.0" "$T/eval21.eval" 1e-5
[[ $(value accuracy_correct "$T/eval2.eval.0") == $(value accuracy_correct "$T/eval21.eval") ]] ||
  { echo "FAIL: correct counts differ"; fail=1; }
check "eval on 2 machines over --comm auto" 0 "$T/eval2auto.log" "$OFLITE" launch --command eval \
  --plan "$P2" --nproc 2 --comm auto -- --checkpoint "$T/ck2.0" --eval-out "$T/eval2auto.eval"
[[ $(grep -c "oflite eval: rank [01] of 2 joined over shm$" "$T/eval2auto.log") == 2 ]] ||
  { echo "FAIL: eval --comm auto on one host does not use shm"; grep joined "$T/eval2auto.log"; fail=1; }
[[ $(value accuracy_correct "$T/eval2auto.eval") == $(value accuracy_correct "$T/eval2.eval.0") ]] ||
  { echo "FAIL: eval over shm counts differently"; fail=1; }
check "predict on 2 machines over --comm auto" 0 "$T/predict2auto.log" "$OFLITE" launch \
  --command predict --plan "$P2" --nproc 2 --comm auto -- --checkpoint "$T/ck2.0" --out "$T/p2auto.npy"
[[ $(grep -c "oflite predict: rank [01] of 2 joined over shm$" "$T/predict2auto.log") == 2 ]] ||
  { echo "FAIL: predict --comm auto on one host does not use shm"; grep joined "$T/predict2auto.log"; fail=1; }
check "predict on 2 machines" 0 "$T/predict2.log" "$OFLITE" launch --command predict \
  --plan "$P2" --nproc 2 --comm tcp -- --checkpoint "$T/ck2.0" --out "$T/p2.npy"
check "predict the 2-machine checkpoint on 1 machine" 0 "$T/predict21.log" "$OFLITE" predict \
  --plan "$P1" --checkpoint "$T/ck2.0" --out "$T/p21.npy"
if "$PY" -c "
import numpy, sys
a, b = numpy.load('$T/p2.npy'), numpy.load('$T/p21.npy')
assert a.shape == b.shape == (9984, 10), (a.shape, b.shape)
assert numpy.allclose(a, b, rtol=1e-5, atol=1e-5), abs(a - b).max()
" > "$T/py2.log" 2>&1; then echo "ok: 2-machine predictions equal 1 machine"
else echo "FAIL: 2-machine predictions"; cat "$T/py2.log"; fail=1; fi

# ---- Bad input ---------------------------------------------------------------
check "eval without --checkpoint" 2 "$T/bad1.log" "$OFLITE" eval --plan "$P1"
grep -q -- "--checkpoint is required" "$T/bad1.log" || { echo "FAIL: flag not named"; fail=1; }
check "eval of a missing checkpoint" 2 "$T/bad2.log" "$OFLITE" eval --plan "$P1" \
  --checkpoint "$T/nothing-here"
grep -q "nothing-here" "$T/bad2.log" || { echo "FAIL: path not named"; cat "$T/bad2.log"; fail=1; }
cp -r "$T/ck1/iter-20" "$T/corrupt"
printf 'xxxx' | dd of="$T/corrupt/dense-weight.var" bs=1 seek=100 conv=notrunc 2> /dev/null
check "eval of a corrupt checkpoint" 2 "$T/bad3.log" "$OFLITE" eval --plan "$P1" \
  --checkpoint "$T/corrupt"
grep -q "dense-weight" "$T/bad3.log" || { echo "FAIL: variable not named"; cat "$T/bad3.log"; fail=1; }
check "predict an unknown output" 2 "$T/bad4.log" "$OFLITE" predict --plan "$P1" \
  --checkpoint "$T/ck1" --out "$T/x.npy" --output probabilities
grep -q "not an output of the plan (logits)" "$T/bad4.log" ||
  { echo "FAIL: outputs not listed"; cat "$T/bad4.log"; fail=1; }
check "eval --eval-out into a missing folder" 2 "$T/bad6.log" "$OFLITE" eval --plan "$P1" \
  --checkpoint "$T/ck1" --eval-out "$T/no/such/folder/x.eval"
grep -q "directory '$T/no/such/folder' does not exist" "$T/bad6.log" ||
  { echo "FAIL: missing folder not named"; cat "$T/bad6.log"; fail=1; }
check "run --eval-out into a missing folder, before training" 2 "$T/bad7.log" "$OFLITE" run \
  --plan "$P1" --eval-out "$T/no/such/folder/x.eval"
grep -q "does not exist" "$T/bad7.log" && ! grep -q "^iter " "$T/bad7.log" ||
  { echo "FAIL: run trained before refusing --eval-out"; cat "$T/bad7.log"; fail=1; }
check "run --eval=maybe" 2 "$T/bad8.log" "$OFLITE" run --plan "$P1" --eval=maybe
grep -q "flag '--eval' expects true or false" "$T/bad8.log" ||
  { echo "FAIL: --eval=maybe not refused"; cat "$T/bad8.log"; fail=1; }
check "run --checkpoint-dir onto a file, before training" 2 "$T/bad9.log" "$OFLITE" run \
  --plan "$P1" --save-every 5 --checkpoint-dir /etc/passwd
grep -q "'/etc/passwd' exists and is not a folder" "$T/bad9.log" && ! grep -q "^iter " "$T/bad9.log" ||
  { echo "FAIL: --checkpoint-dir onto a file"; cat "$T/bad9.log"; fail=1; }
check "launch --command bogus" 2 "$T/bad5.log" "$OFLITE" launch --command bogus --plan "$P2" \
  --nproc 2
exit $fail
