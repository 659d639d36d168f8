#!/usr/bin/env bash
# Checkpoints saved by multi-machine runs whose variables are split across
# machines (docs/checkpoint_format.md, "Multi-machine saves"), with real
# processes over tcp on loopback and a tiny GPT (examples/gpt_char.cc):
#  - ZeRO DP 2 over 2 processes, TP 2 over 2 processes, and DP 2 x TP 2
#    over 4 processes each save at iterations 10 and 20 with --save-every 10
#    into one --checkpoint-dir (rank 0 writes; nothing else appears there);
#  - `oflite eval` of each of those checkpoints on the one-machine plan
#    equals the eval of the one-machine run's checkpoint of the same
#    iteration within 1e-5 relative (and says when the files are
#    byte-identical);
#  - the one-machine plan resumed from each multi-machine checkpoint at 10
#    continues the one-machine losses (10..19) within 1e-5 relative.
set -u
source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
GPT="${TEST_SRCDIR}/oneflow_lite/examples/gpt_char"
TEXT=/usr/share/games/fortunes/fortunes
fresh_tmp checkpoint_layouts
export OFLITE_JOB_TOKEN=checkpoint-layouts-test
# shellcheck source=tests/netns/compare_lib.sh
source "${TEST_SRCDIR}/oneflow_lite/tests/netns/compare_lib.sh"
[[ -f "$TEXT" ]] || { echo "FAIL: $TEXT missing (tools/install_deps.sh installs fortunes)"; exit 1; }
SMALL=(--text "$TEXT" --layers 2 --heads 2 --channels 32 --block 16 --batch 4 --warmup 10
       --data-dir "$TMP/data" --iters 20)

check() {  # check DESCRIPTION EXPECTED_RC LOG CMD...
  local what=$1 want=$2 log=$3; shift 3
  timeout 120 "$@" > "$log" 2>&1; local rc=$?
  if [[ $rc != "$want" ]]; then echo "FAIL: $what: exit $rc, expected $want"; tail -15 "$log"; fail=1
  else echo "ok: $what"; fi
}
losses() {  # losses FILE...: the loss lines only
  cat "$@" | awk '$2 == "loss"'
}
metrics() {  # metrics EVAL_OUT: its metrics as "0 name value" lines, counts left out
  grep -v "samples\|correct" "$1" | awk '{print 0, $1, $2}'
}
ONE="$TMP/one/gpt_char.plan.pb"

# ---- One machine: the reference -------------------------------------------------------
check "GPT on one machine, checkpoints at 10 and 20" 0 "$TMP/one.log" "$GPT" "${SMALL[@]}" \
  --out-dir "$TMP/one" -- --save-every 10 --checkpoint-dir "$TMP/ck_one" --eval=false \
  --metrics-out "$TMP/one.txt"
for it in 10 20; do
  check "eval the one-machine checkpoint at $it" 0 "$TMP/eval_one_$it.log" "$OFLITE" eval \
    --plan "$ONE" --checkpoint "$TMP/ck_one/iter-$it" --eval-out "$TMP/one_$it.eval"
  metrics "$TMP/one_$it.eval" > "$TMP/one_$it.m"
done
losses "$TMP/one.txt" | awk '$1 >= 10' > "$TMP/one.tail"

# ---- Split layouts across processes ---------------------------------------------------
layout() {  # layout NAME NPROC GPT_FLAGS...
  local name=$1 nproc=$2; shift 2
  check "$name plan" 0 "$TMP/$name.plan.log" "$GPT" "${SMALL[@]}" --out-dir "$TMP/$name" "$@" \
    --compile-only || return
  check "$name on $nproc processes saves at 10 and 20" 0 "$TMP/$name.log" "$OFLITE" launch \
    --plan "$TMP/$name/gpt_char.plan.pb" --nproc "$nproc" --comm tcp -- --save-every 10 \
    --checkpoint-dir "$TMP/ck_$name" --eval=false --metrics-out "$TMP/$name.{rank}.txt"
  local listed; listed=$(cd "$TMP/ck_$name" 2>/dev/null && ls | tr '\n' ' ')
  [[ $listed == "iter-10 iter-20 " ]] ||
    { echo "FAIL: $name: checkpoint folder holds '$listed'"; fail=1; }
  for it in 10 20; do
    check "$name: eval its checkpoint at $it on one machine" 0 "$TMP/eval_${name}_$it.log" \
      "$OFLITE" eval --plan "$ONE" --checkpoint "$TMP/ck_$name/iter-$it" \
      --eval-out "$TMP/${name}_$it.eval"
    metrics "$TMP/${name}_$it.eval" > "$TMP/${name}_$it.m"
    compare "$name: the checkpoint at $it evaluates as one machine's" "$TMP/one_$it.m" \
      "$TMP/${name}_$it.m"
    if diff -rq "$TMP/ck_one/iter-$it" "$TMP/ck_$name/iter-$it" > /dev/null; then
      echo "  $name: iter-$it byte-identical to one machine's"
    fi
  done
  echo "  $name: test loss at 20: $(grep loss "$TMP/${name}_20.eval") (one machine: $(grep loss "$TMP/one_20.eval"))"
  check "$name: one machine resumes from its checkpoint at 10" 0 "$TMP/resume_$name.log" \
    "$OFLITE" run --plan "$ONE" --resume "$TMP/ck_$name/iter-10" --eval=false \
    --metrics-out "$TMP/resume_$name.txt"
  losses "$TMP/resume_$name.txt" > "$TMP/resume_$name.loss"
  compare "$name: resumed on one machine, continues its losses (10..19)" "$TMP/one.tail" \
    "$TMP/resume_$name.loss"
}
layout zero2 2 --machines 2 --shard-optimizer
layout tp2 2 --machines 2 --tp 2
layout dp2tp2 4 --machines 4 --dp 2 --tp 2

exit $fail
