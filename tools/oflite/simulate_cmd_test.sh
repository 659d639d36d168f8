#!/usr/bin/env bash
# oflite simulate and oflite compile --auto-parallel end to end: a plan of
# 2 machines with 1 Gbit/s NICs simulated from a calibration `oflite
# profile` wrote (text, JSON, predicted Chrome trace; the same numbers
# twice), a what-if link that changes the prediction, the automatic layout
# (its report in the plan, printed by inspect, which verifies the plan
# as every loader does), a calibration that sets the collectives, and bad input (exit 2
# naming the flag or file).
set -u
source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
fresh_tmp simulate_cmd
check() {  # check DESCRIPTION EXPECTED_RC ACTUAL_RC
  if [[ "$2" != "$3" ]]; then echo "FAIL: $1: exit $3, expected $2"; cat "$TMP/out"; fail=1; else echo "ok: $1"; fi
}
expect_in() {  # expect_in DESCRIPTION NEEDLE FILE
  if ! grep -q -- "$2" "$3"; then echo "FAIL: $1: '$2' not in output:"; cat "$3"; fail=1; fi
}

cat > "$TMP/two.pbtxt" <<'PB'
machine { id: 0 address: "127.0.0.1" cpu_devices: 1 cpu_threads: 1 nic { gbit_per_s: 1 latency_us: 20 } }
machine { id: 1 address: "127.0.0.2" cpu_devices: 1 cpu_threads: 1 nic { gbit_per_s: 1 latency_us: 20 } }
PB
MLP=(--batch 32 --features 64 --hidden 1024 --classes 8 --iterations 4)
compile_mlp dp "$TMP/two.pbtxt" --placement 0-1:cpu:0
[[ $fail == 0 ]] || exit 1
"$OFLITE" profile --plan "$TMP/dp.plan.pb" --out "$TMP/cal.pbtxt" --kernels-only --threads 1 \
  --samples 3 > "$TMP/out" 2>&1
check "profile" 0 $?

# Text, JSON and a trace; the same inputs give the same numbers.
"$OFLITE" simulate --plan "$TMP/dp.plan.pb" --calibration "$TMP/cal.pbtxt" --trace "$TMP/t.json" \
  > "$TMP/out" 2>&1
check "simulate" 0 $?
expect_in "step time" "^predicted step time: [0-9.]* ms" "$TMP/out"
expect_in "critical path" "^critical path" "$TMP/out"
expect_in "collective on the path" "collective" "$TMP/out"
"$OFLITE" simulate --plan "$TMP/dp.plan.pb" --calibration "$TMP/cal.pbtxt" --json > "$TMP/a.json" 2>&1
check "simulate --json" 0 $?
"$OFLITE" simulate --plan "$TMP/dp.plan.pb" --calibration "$TMP/cal.pbtxt" --json > "$TMP/b.json" 2>&1
cmp -s "$TMP/a.json" "$TMP/b.json" || { echo "FAIL: two runs differ"; fail=1; }
"$OFLITE" simulate --plan "$TMP/dp.plan.pb" --calibration "$TMP/cal.pbtxt" --json \
  --link-gbps 0.1 > "$TMP/slow.json" 2>&1
check "simulate --link-gbps" 0 $?
python3 - "$TMP/a.json" "$TMP/slow.json" "$TMP/t.json" <<'PY' > "$TMP/check" 2>&1 || { echo "FAIL: JSON"; cat "$TMP/check"; fail=1; }
import json, sys
a = json.load(open(sys.argv[1]))
slow = json.load(open(sys.argv[2]))
trace = json.load(open(sys.argv[3]))
assert a["step_time_ms"] > 0 and len(a["machines"]) == 2, a
assert a["kernels"]["missing"] == 0 and a["kernels"]["measured"] > 0, a["kernels"]
assert all(m["egress_bytes_per_step"] > 0 for m in a["machines"]), a["machines"]
# 10x slower links: the gradients' all-reduce takes longer.
assert slow["step_time_ms"] > a["step_time_ms"] * 2, (slow["step_time_ms"], a["step_time_ms"])
assert trace["otherData"]["predicted"] is True
acts = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
assert any(e["cat"] == "collective" for e in acts) and any(e["cat"] == "act" for e in acts)
PY
echo "ok: JSON, what-if link and trace"

# The automatic layout: a plan with its report, which inspect prints and
# the runtime's verifier accepts.
"$OFLITE" compile --job "$TMP/dp.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/auto.plan.pb" \
  --auto-parallel --calibration "$TMP/cal.pbtxt" > "$TMP/out" 2>&1
check "compile --auto-parallel" 0 $?
expect_in "choice table" "<- chosen" "$TMP/out"
"$OFLITE" inspect "$TMP/auto.plan.pb" > "$TMP/out" 2>&1
check "inspect the auto plan" 0 $?
expect_in "how it was chosen" "layout chosen by --auto-parallel: " "$TMP/out"
expect_in "dp among the candidates" "^  dp " "$TMP/out"
"$OFLITE" compile --job "$TMP/dp.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/small.plan.pb" \
  --auto-parallel --calibration "$TMP/cal.pbtxt" --memory-limit 1K > "$TMP/out" 2>&1
check "no layout fits 1 KiB" 2 $?
expect_in "names the limit" "no layout fits" "$TMP/out"
[[ ! -e "$TMP/small.plan.pb" ]] || { echo "FAIL: a plan was written"; fail=1; }

# A calibration whose shm curve makes the ring fastest sets the algorithm
# of the gradients' all-reduces, where the size rule picks the exchange
# (the exchange's 10 s floor outweighs the link's share, which favours the
# exchange's one latency).
python3 - "$TMP/cal.pbtxt" "$TMP/ring.pbtxt" <<'PY'
import sys
text = open(sys.argv[1]).read()
curve = lambda alg, us: ("  collective {\n    algorithm: %s\n    ranks: 2\n"
                         "    point { bytes: 1024 us: %g }\n    point { bytes: 1073741824 us: %g }\n  }\n"
                         % (alg, us, us))
text += ("transport {\n  name: \"shm\"\n  latency_us: 1\n  gbyte_per_s: 10\n" +
         curve("COLLECTIVE_RING_ALL_REDUCE", 1) + curve("COLLECTIVE_EXCHANGE_ALL_REDUCE", 1e7) +
         "}\n")
open(sys.argv[2], "w").write(text)
PY
"$OFLITE" compile --job "$TMP/dp.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/ring.plan.pb" \
  --calibration "$TMP/ring.pbtxt" --transport shm --quiet > "$TMP/out" 2>&1
check "compile --calibration --transport shm" 0 $?
# The size rule gives the gradients (the largest, 256 KiB, within the
# 2-rank exchange bound) the exchange; the curves give them the ring.
"$OFLITE" inspect "$TMP/dp.plan.pb" > "$TMP/out" 2>&1
expect_in "the size rule's exchange" "exchange_all_reduce x" "$TMP/out"
"$OFLITE" inspect "$TMP/ring.plan.pb" > "$TMP/out" 2>&1
expect_in "ring chosen from the curves" "ring_all_reduce x" "$TMP/out"
if grep -q "exchange_all_reduce x" "$TMP/out"; then
  echo "FAIL: an exchange all-reduce is left where the curves favour the ring"; cat "$TMP/out"; fail=1
fi

# Bad input.
bad() {  # bad DESCRIPTION NEEDLE ARGS...
  local what=$1 needle=$2; shift 2
  "$OFLITE" "$@" > "$TMP/out" 2>&1
  check "$what" 2 $?
  expect_in "$what" "$needle" "$TMP/out"
}
echo "garbage {" > "$TMP/broken.pbtxt"
printf 'version: 1\nkernel { key: "k" us: -3 }\n' > "$TMP/negative.pbtxt"
printf 'version: 1\nkernel { key: "k" us: 3 cold_us: -1 }\n' > "$TMP/negative_cold.pbtxt"
printf 'version: 1\nruntime { cache_bytes: -5 }\n' > "$TMP/negative_cache.pbtxt"
bad "no --plan" "--plan" simulate --calibration "$TMP/cal.pbtxt"
bad "no --calibration" "--calibration" simulate --plan "$TMP/dp.plan.pb"
bad "missing plan" "nope.pb" simulate --plan "$TMP/nope.pb" --calibration "$TMP/cal.pbtxt"
bad "corrupt calibration" "broken.pbtxt" simulate --plan "$TMP/dp.plan.pb" --calibration "$TMP/broken.pbtxt"
bad "negative kernel time" "has time -3" simulate --plan "$TMP/dp.plan.pb" --calibration "$TMP/negative.pbtxt"
bad "negative cold time" "has cold time -1" simulate --plan "$TMP/dp.plan.pb" --calibration "$TMP/negative_cold.pbtxt"
bad "negative cache size" "runtime has a negative" simulate --plan "$TMP/dp.plan.pb" --calibration "$TMP/negative_cache.pbtxt"
bad "unknown transport" "--transport" simulate --plan "$TMP/dp.plan.pb" --calibration "$TMP/cal.pbtxt" --transport udp
bad "negative link" "--link-gbps" simulate --plan "$TMP/dp.plan.pb" --calibration "$TMP/cal.pbtxt" --link-gbps -1
bad "auto without calibration" "--calibration" compile --job "$TMP/dp.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/x.pb" --auto-parallel
bad "memory limit without auto" "--auto-parallel" compile --job "$TMP/dp.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/x.pb" --memory-limit 1G
bad "bad memory limit" "--memory-limit" compile --job "$TMP/dp.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/x.pb" --auto-parallel --calibration "$TMP/cal.pbtxt" --memory-limit lots
exit $fail
