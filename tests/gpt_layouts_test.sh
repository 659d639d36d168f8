#!/usr/bin/env bash
# The GPT example's layouts (examples/gpt_char.cc: --tp, --stages, --dp) with
# real processes, each equal to one machine within 1e-5 relative in loss at
# every one of 30 iterations (a tiny GPT on one fortune file):
#  - tensor parallel 2 on one process with 2 CPU devices, and on 2
#    processes over the transport given as $1 (tcp when absent; tests/BUILD
#    runs it for tcp and shm);
#  - 2 pipeline stages on 2 processes; tensor parallel 2 x 2 stages on 4;
#  - data parallel 2 x tensor parallel 2 (a [2, 2] hierarchy, 2-D hints) on
#    one process with 4 devices, on 2 processes of 2 devices (data parallel
#    across the processes, tensor parallel inside each) and on 4 processes;
#  - the one-process 2 x 2 run's checkpoint (its (B, S(k)) weights have two
#    replicas each; one saves) evaluates on one device (oflite eval) to the
#    one-machine checkpoint's loss within 1e-5 relative;
#  - the plan has the Megatron-LM forward: per block, the query/key/value
#    and MLP fc weights column split, attention and MLP proj outputs
#    partial sums, each all-reduced once (oflite inspect);
#  - bad layouts are exit 2 naming the flag and the numbers.
set -u
source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
GPT="${TEST_SRCDIR}/oneflow_lite/examples/gpt_char"
PY=/usr/bin/python3
TEXT=/usr/share/games/fortunes/fortunes
COMM="${1:-tcp}"
fresh_tmp "gpt_layouts_$COMM"
T="$TMP"
[[ -f "$TEXT" ]] || { echo "FAIL: $TEXT missing (tools/install_deps.sh installs fortunes)"; exit 1; }
SMALL=(--text "$TEXT" --layers 2 --heads 2 --channels 32 --block 16 --batch 4 --warmup 10
       --data-dir "$T/data" --iters 30)
RUN=(-- --eval=false)
SAVE=()  # extra run flags of the next in_process
check() {  # check DESCRIPTION EXPECTED_RC LOG CMD...
  local what=$1 want=$2 log=$3; shift 3
  timeout 120 "$@" > "$log" 2>&1; local rc=$?
  if [[ $rc != "$want" ]]; then echo "FAIL: $what: exit $rc, expected $want"; tail -20 "$log"; fail=1
  else echo "ok: $what"; fi
}
same_losses() {  # same_losses NAME METRICS: METRICS equals the one-machine run
  "$PY" - "$T/one.txt" "$2" > "$T/$1.check" 2>&1 <<'PY' ||
import sys
def losses(path):
    return {int(i): float(v) for i, n, v in (l.split() for l in open(path)) if n == "loss"}
one, other = losses(sys.argv[1]), losses(sys.argv[2])
assert sorted(one) == sorted(other) == list(range(30)), (len(one), len(other))
worst = max(abs(one[i] - other[i]) / abs(one[i]) for i in range(30))
print(f"largest relative difference {worst:.2e}")
assert worst <= 1e-5, worst
PY
    { echo "FAIL: $1 differs from one machine"; cat "$T/$1.check"; fail=1; return; }
  echo "  $1: $(cat "$T/$1.check")"
}
in_process() {  # in_process NAME FLAGS...: trains in this process
  local name=$1; shift
  check "$name" 0 "$T/$name.log" "$GPT" "${SMALL[@]}" --out-dir "$T/$name" "$@" "${RUN[@]}" \
    "${SAVE[@]}" --metrics-out "$T/$name.txt"
  same_losses "$name" "$T/$name.txt"
}
launched() {  # launched NAME NPROC FLAGS...: compiles, then oflite launch over $COMM
  local name=$1 nproc=$2; shift 2
  check "$name plan" 0 "$T/$name.plan.log" "$GPT" "${SMALL[@]}" --out-dir "$T/$name" "$@" \
    --compile-only
  check "$name on $nproc processes ($COMM)" 0 "$T/$name.log" "$OFLITE" launch \
    --plan "$T/$name/gpt_char.plan.pb" --nproc "$nproc" --comm "$COMM" "${RUN[@]}" \
    --metrics-out "$T/$name.{rank}.txt"
  same_losses "$name" "$T/$name.0.txt"
}

check "one machine" 0 "$T/one.log" "$GPT" "${SMALL[@]}" --out-dir "$T/one" "${RUN[@]}" \
  --save-every 30 --checkpoint-dir "$T/ck_one" --metrics-out "$T/one.txt"

in_process tp2_devices --devices 2 --tp 2
launched tp2 2 --machines 2 --tp 2
launched pp2 2 --machines 2 --stages 2
launched tp2_pp2 4 --machines 4 --tp 2 --stages 2
SAVE=(--save-every 30 --checkpoint-dir "$T/ck_dp2_tp2")
in_process dp2_tp2_devices --devices 4 --tp 2 --dp 2
SAVE=()
launched dp2_tp2_processes 2 --machines 2 --devices 2 --tp 2
launched dp2_tp2 4 --machines 4 --tp 2
# All three: 2 stages, each a 2 x 2 (DP x TP) group of 2 processes x 2
# devices, 1F1B over 2 micro-batches.
launched dp2_tp2_pp2 4 --machines 4 --devices 2 --dp 2 --tp 2 --stages 2 --micro-batches 2

# The 2 x 2 checkpoint on one device: each distinct part saved by one
# replica, the assembled tensors those of one machine.
eval_loss() {  # eval_loss NAME CHECKPOINT: oflite eval on the one-machine plan
  check "$1: eval on one device" 0 "$T/$1.eval.log" "$OFLITE" eval \
    --plan "$T/one/gpt_char.plan.pb" --checkpoint "$2" --eval-out "$T/$1.eval"
}
eval_loss one_ck "$T/ck_one/iter-30"
eval_loss dp2_tp2_ck "$T/ck_dp2_tp2/iter-30"
"$PY" - "$T/one_ck.eval" "$T/dp2_tp2_ck.eval" > "$T/ck.check" 2>&1 <<'PY' ||
import sys
def loss(path):
    return next(float(l.split()[1]) for l in open(path) if l.split()[0] == "loss")
one, other = loss(sys.argv[1]), loss(sys.argv[2])
print(f"test loss {other:.6f}, one machine {one:.6f}")
assert abs(one - other) <= 1e-5 * abs(one), (one, other)
PY
  { echo "FAIL: the 2 x 2 checkpoint does not evaluate as one machine's"; cat "$T/ck.check"; fail=1; }
echo "  dp2_tp2 checkpoint: $(cat "$T/ck.check")"

# The forward of each block: 4 column-split weights (S(1)), 2 row-split
# (S(0)) whose products are P, and their two all-reduces (P -> B at the
# residual sums). The backward (gradient hints): the dX partial sums of
# the column-split projections all-reduced once per sub-block before
# LayerNorm's backward; besides, only all-gathers of split weights'
# gradients for the global-norm clip; nothing touches a block's forward
# tensors but the two forward all-reduces (docs/examples.md).
"$PY" - "$T/tp2_devices/gpt_char.plan.pb" "$OFLITE" > "$T/megatron.check" 2>&1 <<'PY' ||
import json, subprocess, sys
plan, oflite = sys.argv[1], sys.argv[2]
info = json.loads(subprocess.run([oflite, "inspect", plan, "--json"], check=True,
                                 capture_output=True, text=True).stdout)
def signature(op):
    text = subprocess.run([oflite, "inspect", plan, "--actor", op + "@0"], check=True,
                          capture_output=True, text=True).stdout
    return next(l for l in text.splitlines() if l.startswith("  kernel ")).split(": ", 1)[1]
for block in ("gpt-h0", "gpt-h1"):
    for part in ("attn-query", "attn-key", "attn-value", "mlp-fc"):
        assert signature(f"{block}-{part}-matmul") == "B, S(1) -> S(2)", (block, part)
    for part in ("attn-proj", "mlp-proj"):
        assert signature(f"{block}-{part}-matmul") == "S(2), S(0) -> P", (block, part)
    for part in ("attn-scores", "attn-mix"):
        assert signature(f"{block}-{part}") == "S(1), S(1) -> S(1)", (block, part)
    assert signature(f"{block}-attn-softmax") == "S(1) -> S(1)", block
    reduced = [b for b in info["boxing"] if b["kind"] == "all_reduce" and
               b["lbn"].startswith(block + "-") and "grad" not in b["lbn"]]
    names = sorted(b["lbn"] for b in reduced)
    assert names == [f"{block}-attn-proj-bias_add/out_0", f"{block}-mlp-proj-bias_add/out_0"], names
    print(block, "forward all-reduces:", ", ".join(names))
    mine = [b for b in info["boxing"] if b["lbn"].startswith(block + "-")]
    backward = sorted(b["lbn"] for b in mine if b["kind"] == "all_reduce" and "grad" in b["lbn"])
    assert backward == [f"{block}-ln_1-norm-y_0-grad_sum/out_0",
                        f"{block}-mlp-fc-matmul-grad_a/out_0"], backward
    others = [(b["kind"], b["lbn"]) for b in mine if b["kind"] not in ("all_reduce", "b_to_p") and
              not (b["kind"] == "all_gather" and
                   b["lbn"].split("/")[0].endswith(("-matmul-grad_b", "-bias_add-grad_b")))]
    assert not others, others
    print(block, "backward all-reduces:", ", ".join(backward))
PY
  { echo "FAIL: not the Megatron-LM forward"; cat "$T/megatron.check"; fail=1; }
cat "$T/megatron.check"

# ---- Bad layouts ----------------------------------------------------------------------
bad() {  # bad NAME PATTERN FLAGS...
  local name=$1 pattern=$2; shift 2
  check "$name" 2 "$T/$name.log" "$GPT" "${SMALL[@]}" --out-dir "$T/bad" "$@" --compile-only
  grep -q -- "$pattern" "$T/$name.log" || { echo "FAIL: $name: no '$pattern'"; cat "$T/$name.log"; fail=1; }
}
bad "tp not dividing heads" "--tp 3 does not divide --heads 2.*e.g. --tp 2" --devices 3 --tp 3
bad "stages over layers" "--stages 3 does not split --layers 2.*e.g. --stages 2" --machines 3 \
  --stages 3
bad "layout over the devices" "--tp 2 x --stages 2 (4 devices) does not fit the 2 devices.*e.g." \
  --machines 2 --tp 2 --stages 2
bad "dp not matching" "--dp 3 x --tp 1 x --stages 1 (3 devices) does not fit the 2 devices" \
  --devices 2 --dp 3

exit $fail
