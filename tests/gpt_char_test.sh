#!/usr/bin/env bash
# The GPT example end to end with real processes (a small configuration on
# one fortune file, so it runs in seconds):
#  - it trains with validation every 10 iterations (val_loss lines in
#    --metrics-out), checkpoints, and generates text from the checkpoint:
#    the requested number of characters, all from the vocabulary, the same
#    text for the same --sample-seed;
#  - the PyTorch twin (tools/bench/gpt_torch.py) from the same initial
#    weights (--init-out) and the same windows gives the same loss every
#    iteration: within 1e-4 relative over the first 50 steps;
#  - data parallel on 2 processes (oflite launch, tcp) equals one machine;
#  - bad input is exit 2 naming it: a missing text file, a text shorter
#    than one window, heads that do not divide the channels, a checkpoint
#    that does not exist.
set -u
source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
GPT="${TEST_SRCDIR}/oneflow_lite/examples/gpt_char"
TWIN="${TEST_SRCDIR}/oneflow_lite/tools/bench/gpt_torch.py"
PY=/usr/bin/python3
TEXT=/usr/share/games/fortunes/fortunes
fresh_tmp gpt_char
T="$TMP"
check() {  # check DESCRIPTION EXPECTED_RC LOG CMD...
  local what=$1 want=$2 log=$3; shift 3
  timeout 600 "$@" > "$log" 2>&1; local rc=$?
  if [[ $rc != "$want" ]]; then echo "FAIL: $what: exit $rc, expected $want"; tail -25 "$log"; fail=1
  else echo "ok: $what"; fi
}
[[ -f "$TEXT" ]] || { echo "FAIL: $TEXT missing (tools/install_deps.sh installs fortunes)"; exit 1; }
SMALL=(--text "$TEXT" --layers 2 --heads 2 --channels 32 --block 16 --batch 4 --warmup 10
       --data-dir "$T/data")

# ---- Train, validate, checkpoint, generate -----------------------------------------
check "train 30 iterations with validation every 10" 0 "$T/train.log" "$GPT" "${SMALL[@]}" \
  --out-dir "$T" --iters 30 --init-out "$T/init" -- --eval-every 10 --save-every 30 \
  --checkpoint-dir "$T/ckpt" --metrics-out "$T/ours30.txt" --log-every 10
for it in 9 19; do
  grep -q "^$it val_loss " "$T/ours30.txt" ||
    { echo "FAIL: no val_loss after iteration $((it + 1))"; cat "$T/ours30.txt"; fail=1; }
done
grep -q "^validation at iteration 20 " "$T/train.log" ||
  { echo "FAIL: no validation line"; cat "$T/train.log"; fail=1; }
grep -q "^test (" "$T/train.log" || { echo "FAIL: no final validation"; fail=1; }
[[ -f "$T/ckpt/iter-30/MANIFEST" ]] || { echo "FAIL: no checkpoint at 30"; fail=1; }
[[ -f "$T/init/gpt-wte-weight.npy" && -f "$T/init/gpt-h1-mlp-proj-weight.npy" ]] ||
  { echo "FAIL: initial weights not written"; ls "$T/init"; fail=1; }

check "generate 40 characters" 0 "$T/gen1.log" "$GPT" "${SMALL[@]}" --out-dir "$T" \
  --generate-from "$T/ckpt/iter-30" --prompt "The " --tokens 40 --sample-seed 7
check "generate again with the same seed" 0 "$T/gen2.log" "$GPT" "${SMALL[@]}" --out-dir "$T" \
  --generate-from "$T/ckpt/iter-30" --prompt "The " --tokens 40 --sample-seed 7
"$PY" - "$T/gen1.log" "$T/gen2.log" "$T/data/vocab.txt" > "$T/gen.check" 2>&1 <<'PY' ||
import sys
def sample(path):
    text = open(path, "rb").read()
    at = text.rfind(b"The ")
    return text[at:at + 44]
a, b = sample(sys.argv[1]), sample(sys.argv[2])
assert a.startswith(b"The ") and len(a) == 44, a
assert a == b, (a, b)
vocab = set()
for line in open(sys.argv[3], encoding="latin-1"):
    if line.startswith("#") or "\t" not in line:
        continue
    vocab.add(eval("b" + line.split("\t", 1)[1].strip()))
assert all(bytes([c]) in vocab for c in a[4:]), a
print("sample:", a)
PY
  { echo "FAIL: generated text"; cat "$T/gen.check" "$T/gen1.log"; fail=1; }

# ---- The PyTorch twin: same loss every iteration -----------------------------------
check "oflite: 50 iterations" 0 "$T/ours50.log" "$GPT" "${SMALL[@]}" --out-dir "$T" --iters 50 \
  --init-out "$T/init50" -- --eval=false --metrics-out "$T/ours50.txt"
check "PyTorch twin: 50 iterations" 0 "$T/twin50.log" "$PY" "$TWIN" --init "$T/init50" \
  --tokens "$T/data/tokens.npy" --layers 2 --heads 2 --block 16 --batch 4 --iters 50 \
  --warmup 10 --seed 1 --metrics-out "$T/twin50.txt"
"$PY" - "$T/ours50.txt" "$T/twin50.txt" > "$T/twin.check" 2>&1 <<'PY' ||
import sys
def losses(path):
    return {int(i): float(v) for i, n, v in (l.split() for l in open(path)) if n == "loss"}
ours, twin = losses(sys.argv[1]), losses(sys.argv[2])
assert sorted(ours) == list(range(50)) and sorted(twin) == list(range(50)), (len(ours), len(twin))
worst = max(abs(ours[i] - twin[i]) / abs(twin[i]) for i in range(50))
print(f"first loss {ours[0]:.6f} vs {twin[0]:.6f}, last {ours[49]:.6f} vs {twin[49]:.6f}, "
      f"largest relative difference {worst:.2e}")
assert worst <= 1e-4, worst
assert ours[49] < ours[0] - 0.3, (ours[0], ours[49])
PY
  { echo "FAIL: twin losses differ"; cat "$T/twin.check"; fail=1; }
cat "$T/twin.check"

# ---- Data parallel on 2 processes equals one machine ---------------------------------
check "2-machine plan" 0 "$T/w2.log" "$GPT" "${SMALL[@]}" --out-dir "$T/two" --iters 20 \
  --machines 2 --compile-only
check "train on 2 processes" 0 "$T/dp.log" "$OFLITE" launch --plan "$T/two/gpt_char.plan.pb" \
  --nproc 2 --comm tcp -- --eval=false --metrics-out "$T/dp.{rank}.txt"
check "train on 1 process" 0 "$T/one.log" "$GPT" "${SMALL[@]}" --out-dir "$T" --iters 20 \
  -- --eval=false --metrics-out "$T/one.txt"
"$PY" - "$T/one.txt" "$T/dp.0.txt" > "$T/dp.check" 2>&1 <<'PY' ||
import sys
def losses(path):
    return {int(i): float(v) for i, n, v in (l.split() for l in open(path)) if n == "loss"}
one, two = losses(sys.argv[1]), losses(sys.argv[2])
assert sorted(one) == sorted(two) == list(range(20)), (len(one), len(two))
worst = max(abs(one[i] - two[i]) / abs(one[i]) for i in range(20))
print(f"largest relative difference {worst:.2e}")
assert worst <= 1e-5, worst
PY
  { echo "FAIL: 2 processes differ from one"; cat "$T/dp.check"; fail=1; }
cat "$T/dp.check"

# ---- Bad input ------------------------------------------------------------------------
check "missing text" 2 "$T/bad1.log" "$GPT" --text "$T/nope.txt" --data-dir "$T/d1" \
  --out-dir "$T" --compile-only
grep -q "$T/nope.txt" "$T/bad1.log" || { echo "FAIL: missing file not named"; cat "$T/bad1.log"; fail=1; }
printf 'tiny text' > "$T/tiny.txt"
check "text shorter than a window" 2 "$T/bad2.log" "$GPT" --text "$T/tiny.txt" \
  --data-dir "$T/d2" --out-dir "$T" --compile-only
grep -q "tokens.npy" "$T/bad2.log" || { echo "FAIL: short text not named"; cat "$T/bad2.log"; fail=1; }
check "heads not dividing channels" 2 "$T/bad3.log" "$GPT" "${SMALL[@]}" --heads 3 \
  --out-dir "$T" --compile-only
grep -q "heads" "$T/bad3.log" || { echo "FAIL: heads not named"; cat "$T/bad3.log"; fail=1; }
check "missing checkpoint" 2 "$T/bad4.log" "$GPT" "${SMALL[@]}" --out-dir "$T" \
  --generate-from "$T/no_such_ckpt" --tokens 5
grep -q "no_such_ckpt" "$T/bad4.log" || { echo "FAIL: checkpoint not named"; cat "$T/bad4.log"; fail=1; }

exit $fail
