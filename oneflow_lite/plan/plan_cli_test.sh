#!/usr/bin/env bash
# Every loader of a plan file verifies it: for each damaged plan
# (testing/plan_mutations.h), `oflite inspect` and `oflite run` exit 2 with a
# message naming the file, the task and the field; the undamaged compiled
# plans still inspect and run.
set -u
BIN="${TEST_SRCDIR}/oneflow_lite"
OFLITE="$BIN/tools/oflite/oflite"
WRITER="$BIN/oneflow_lite/plan/testing/write_mutated_plans"
DIR="${TEST_TMPDIR:-$(mktemp -d)}/plans"
mkdir -p "$DIR/bad"
fail=0
"$WRITER" "$DIR" || { echo "FAIL: write_mutated_plans"; exit 1; }

expect() {  # expect DESCRIPTION EXPECTED_RC ACTUAL_RC OUTPUT_FILE NEEDLE...
  local what="$1" want="$2" got="$3" out="$4"
  shift 4
  if [[ "$got" != "$want" ]]; then
    echo "FAIL: $what: exit $got, expected $want"; cat "$out"; fail=1; return
  fi
  for needle in "$@"; do
    if ! grep -qF -- "$needle" "$out"; then
      echo "FAIL: $what: '$needle' not in:"; cat "$out"; fail=1; return
    fi
  done
  echo "ok: $what"
}

out="$DIR/out"
"$OFLITE" inspect "$DIR/mlp.plan.pb" > "$out" 2>&1
expect "inspect mlp" 0 $? "$out"
"$OFLITE" run --plan "$DIR/mlp.plan.pb" --iters 2 > "$out" 2>&1
expect "run mlp" 0 $? "$out" "trained iterations 0..2"
for plan in data_parallel pipeline model_parallel two_machines machine_pipeline cuda; do
  "$OFLITE" inspect "$DIR/$plan.plan.pb" > "$out" 2>&1
  expect "inspect $plan" 0 $? "$out"
done

count=0
while IFS=$'\t' read -r -a fields; do
  name="${fields[0]}"
  needles=("${fields[@]:1}")
  file="$DIR/bad/$name.plan.pb"
  "$OFLITE" inspect "$file" > "$out" 2>&1
  expect "inspect $name" 2 $? "$out" "oflite inspect: plan '$file'" "${needles[@]}"
  "$OFLITE" run --plan "$file" > "$out" 2>&1
  expect "run $name" 2 $? "$out" "oflite run: INVALID_ARGUMENT: plan '$file'" "${needles[@]}"
  count=$((count + 1))
done < "$DIR/bad/manifest.tsv"
if (( count < 10 )); then echo "FAIL: only $count damaged plans"; fail=1; fi
exit $fail
