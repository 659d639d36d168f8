#!/usr/bin/env bash
# A data-dependent shape across machines, end to end: the
# dynamic_rows_pipeline example (stage 0 on machine 0 selects the rows of
# the samples not of class 0, a dynamic tensor; stage 1 on machine 1 reduces
# them) on 2 machines over tcp equals the same model on one machine (every
# metric of every iteration within 1e-5 relative); the plan moves the
# dynamic registers with bounce buffers, and --stats shows machine 1
# received exactly the valid bytes: the selected rows of every iteration
# (64 float32 activations plus one float32 of the ones column per row),
# which vary from batch to batch.
set -u
OFLITE="${TEST_SRCDIR}/oneflow_lite/tools/oflite/oflite"
EXAMPLE="${TEST_SRCDIR}/oneflow_lite/examples/dynamic_rows_pipeline"
T="${TEST_TMPDIR:-/tmp}/dynamic_rows"
rm -rf "$T"; mkdir -p "$T/one" "$T/two"
fail=0
ITERS=20
"$EXAMPLE" --out-dir "$T/one" --iters $ITERS --batch 32 --compile-only > "$T/w1.log" 2>&1 ||
  { echo "FAIL: 1-machine plan"; cat "$T/w1.log"; exit 1; }
"$EXAMPLE" --out-dir "$T/two" --iters $ITERS --batch 32 --machines 2 --compile-only \
  > "$T/w2.log" 2>&1 || { echo "FAIL: 2-machine plan"; cat "$T/w2.log"; exit 1; }
"$OFLITE" inspect "$T/two/dynamic_rows.plan.pb" > "$T/inspect.log" 2>&1
# The selected rows leave machine 0 through bounce buffers; static
# registers (the hidden layer itself) stay zero-copy.
grep -Eq "m0->m1 bounce +8.0 KiB +select_rows/y_0" "$T/inspect.log" &&
  grep -Eq "m0->m1 zero-copy +8.0 KiB +relu/y_0" "$T/inspect.log" ||
  { echo "FAIL: inspect shows no bounce-buffer edge for the selection"; cat "$T/inspect.log"; fail=1; }

timeout 300 "$OFLITE" run --plan "$T/one/dynamic_rows.plan.pb" --eval=false \
  --metrics-out "$T/one.txt" > "$T/one.log" 2>&1 ||
  { echo "FAIL: 1-machine run"; tail -20 "$T/one.log"; fail=1; }
timeout 300 "$OFLITE" launch --plan "$T/two/dynamic_rows.plan.pb" --nproc 2 --comm tcp -- \
  --eval=false --stats --metrics-out "$T/two.{rank}.txt" > "$T/two.log" 2>&1 ||
  { echo "FAIL: 2-machine launch"; tail -30 "$T/two.log"; fail=1; }

# Every metric of every iteration (the sink is on machine 0).
if awk 'NR == FNR { want[$1 " " $2] = $3; n++; next }
        { key = $1 " " $2; if (!(key in want)) { print "extra " key; bad = 1; next }
          d = $3 - want[key]; if (d < 0) d = -d; s = want[key]; if (s < 0) s = -s;
          if (d > 1e-5 * (s > 1 ? s : 1)) { print "differs " key ": " $3 " vs " want[key]; bad = 1 }
          seen++ }
        END { if (seen != n || n == 0) { print "got " seen " of " n " metrics"; bad = 1 }
              exit bad }' "$T/one.txt" "$T/two.0.txt"; then
  echo "ok: 2 machines equal 1 machine ($(wc -l < "$T/one.txt") metric values)"
else
  echo "FAIL: 2-machine metrics differ from 1 machine"; fail=1
fi

# The selected row counts vary, and machine 1 received exactly their bytes.
COUNTS=$(awk '$2 == "selected" { printf "%d ", $3 + 0.5 }' "$T/one.txt")
DISTINCT=$(echo $COUNTS | tr ' ' '\n' | sort -u | wc -l)
WANT=$(echo $COUNTS | tr ' ' '\n' | awk '{ s += $1 * (64 * 4 + 4) } END { print s }')
MOVED=$(sed -n 's/^\[rank 1\] bounce-buffers: moved \([0-9]*\) B.*/\1/p' "$T/two.log")
echo "selected rows per batch: $COUNTS"
if [[ $DISTINCT -lt 2 ]]; then echo "FAIL: the selection never varied"; fail=1; fi
if [[ "$MOVED" == "$WANT" && "$WANT" -gt 0 ]]; then
  echo "ok: machine 1 received $MOVED B through bounce buffers: the selected rows' bytes" \
       "(a static register would move $((ITERS * 32 * (64 * 4 + 4))) B)"
else
  echo "FAIL: bounce-buffer bytes on machine 1: '$MOVED', want $WANT"
  grep -A3 "comm (" "$T/two.log"; fail=1
fi
exit $fail
