#!/usr/bin/env bash
# The user package's programs end to end (Fashion-MNIST from
# /usr/share/datasets/fashion-mnist, as for //examples:examples_test).
set -u
DIR="${TEST_SRCDIR}/oneflow_lite/user_model"
T="${TEST_TMPDIR:-/tmp}/user_model"
rm -rf "$T"; mkdir -p "$T"
fail=0

# Library calls only: trains, evaluates, reads the result.
if (cd "$T" && timeout 300 "$DIR/train_in_code") > "$T/code.log" 2>&1; then
  grep -q "^test accuracy 0\.[6-9][0-9]* ([0-9]* of 9984 samples), iterations 0..150$" "$T/code.log" &&
    grep -q "^accuracy: [0-9]* of 9984 samples correct$" "$T/code.log" &&
    echo "ok: trained through library calls: $(grep '^test accuracy' "$T/code.log")" ||
    { echo "FAIL: train_in_code's result"; cat "$T/code.log"; fail=1; }
else
  echo "FAIL: train_in_code exited $?"; cat "$T/code.log"; fail=1
fi

# A GPT written against the public surface: trains on a fortune file and
# its validation loss falls below the uniform guess.
if timeout 300 "$DIR/gpt_in_code" /usr/share/games/fortunes/fortunes "$T/gpt" > "$T/gpt.log" 2>&1; then
  grep -q "^validation loss [0-9.]* after 120 iterations" "$T/gpt.log" &&
    echo "ok: a user's GPT: $(grep '^validation loss' "$T/gpt.log")" ||
    { echo "FAIL: gpt_in_code's result"; cat "$T/gpt.log"; fail=1; }
else
  echo "FAIL: gpt_in_code exited $?"; tail -20 "$T/gpt.log"; fail=1
fi

# The model's own placement and duration survive the flags, and the driver
# says which flags they override.
timeout 120 "$DIR/self_placed" --out-dir "$T" --machines 1 --iters 7 --compile-only \
  > "$T/placed.log" 2>&1; rc=$?
if [[ $rc != 0 ]]; then echo "FAIL: self_placed exited $rc"; cat "$T/placed.log"; fail=1; fi
grep -q "2 machine(s), 40 iteration(s)" "$T/placed.log" ||
  { echo "FAIL: the model's placement or duration was replaced"; cat "$T/placed.log"; fail=1; }
grep -q "note: the model places itself on 0-1:cpu:0 (flags: 0:cpu:0); --machines/--devices are not used" \
  "$T/placed.log" || { echo "FAIL: no note for --machines"; cat "$T/placed.log"; fail=1; }
grep -q "note: the model sets its own duration: 40 iteration(s); --iters/--epochs are not used" \
  "$T/placed.log" || { echo "FAIL: no note for --iters"; cat "$T/placed.log"; fail=1; }
# Without conflicting flags: no note.
timeout 120 "$DIR/self_placed" --out-dir "$T" --compile-only > "$T/quiet.log" 2>&1 ||
  { echo "FAIL: self_placed without flags"; cat "$T/quiet.log"; fail=1; }
! grep -q "note:" "$T/quiet.log" || { echo "FAIL: a note without a conflicting flag"; fail=1; }
[[ $fail == 0 ]] && echo "ok: the driver keeps the model's placement and duration"
exit $fail
