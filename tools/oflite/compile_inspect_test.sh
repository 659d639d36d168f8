#!/usr/bin/env bash
# oflite compile and inspect end to end: real jobs, real clusters, every
# inspect view, determinism, and bad input (exit 2, no output file left).
set -u
source "${TEST_SRCDIR}/oneflow_lite/tests/test_env.sh"
fresh_tmp compile_inspect
check() {  # check DESCRIPTION EXPECTED_RC ACTUAL_RC
  if [[ "$2" != "$3" ]]; then echo "FAIL: $1: exit $3, expected $2"; cat "$TMP/out"; fail=1; else echo "ok: $1"; fi
}
expect_in() {  # expect_in DESCRIPTION NEEDLE FILE
  if ! grep -q -- "$2" "$3"; then echo "FAIL: $1: '$2' not in output:"; cat "$3"; fail=1; fi
}

cat > "$TMP/one.pbtxt" <<'PB'
machine { id: 0 address: "127.0.0.1" cpu_devices: 1 }
PB
cat > "$TMP/two_by_two.pbtxt" <<'PB'
machine { id: 0 address: "127.0.0.1" cpu_devices: 2 }
machine { id: 1 address: "127.0.0.2" cpu_devices: 2 }
PB
"$WRITE_JOB" "$TMP/mlp1.job.pb" --placement 0:cpu:0 > "$TMP/out" 2>&1; check "write 1-device job" 0 $?
"$WRITE_JOB" "$TMP/mlp4.job.pb" --placement 0-1:cpu:0-1 > "$TMP/out" 2>&1; check "write 2x2 job" 0 $?

"$OFLITE" compile --job "$TMP/mlp1.job.pb" --cluster "$TMP/one.pbtxt" -o "$TMP/mlp1.plan.pb" > "$TMP/out" 2>&1
check "compile 1 device" 0 $?
expect_in "compile reports" "1 machine(s)" "$TMP/out"
"$OFLITE" compile --job "$TMP/mlp4.job.pb" --cluster "$TMP/two_by_two.pbtxt" --output "$TMP/mlp4.plan.pb" > "$TMP/out" 2>&1
check "compile 2x2" 0 $?
"$OFLITE" compile --job "$TMP/mlp4.job.pb" --cluster "$TMP/two_by_two.pbtxt" -o "$TMP/again.plan.pb" --quiet > "$TMP/out" 2>&1
check "compile 2x2 again" 0 $?
if cmp -s "$TMP/mlp4.plan.pb" "$TMP/again.plan.pb"; then echo "ok: byte-identical plans"; else echo "FAIL: plans differ"; fail=1; fi

"$OFLITE" inspect "$TMP/mlp4.plan.pb" > "$TMP/out" 2>&1; check "inspect summary" 0 $?
for needle in "version 2" "actors by kind" "collective" "memory per zone" "m1/host" "boxing conversions" "all_reduce" "127.0.0.2"; do
  expect_in "summary shows $needle" "$needle" "$TMP/out"
done
# How each register edge is ordered on a stream (docs/runtime.md), and
# whether the plan may be replayed as a CUDA graph (not: CPU, two machines).
expect_in "summary shows edge ordering" "stream-ordered, [0-9]* waiting for an event" "$TMP/out"
expect_in "summary shows graph replay" "CUDA graph replay: no (" "$TMP/out"
# The compiled facts a node runs: run settings, the evaluation plan, and each
# collective's algorithm: 2x2 devices (4 ring tasks on 2 machines) is
# all-to-all; data parallel over 2 machines of 1 device uses ring
# all-reduces.
expect_in "2x2 collectives are all-to-all" "collective algorithms (compiled): all_to_all x" "$TMP/out"
printf 'machine { id: 0 address: "127.0.0.1" cpu_devices: 1 }\nmachine { id: 1 address: "127.0.0.2" cpu_devices: 1 }\n' > "$TMP/two.pbtxt"
"$WRITE_JOB" "$TMP/mlp2.job.pb" --placement 0-1:cpu:0 > "$TMP/out" 2>&1; check "write 2x1 job" 0 $?
# This small MLP's all-reduces would all use the exchange (--exchange_max_bytes,
# checked below); with it off they are rings. Both without gradient buckets
# (--fuse_max_bytes 0: one collective per gradient; buckets checked below).
"$OFLITE" compile --job "$TMP/mlp2.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/mlp2x.plan.pb" --quiet --fuse_max_bytes 0 > "$TMP/out" 2>&1
check "compile 2x1 (exchange for small all-reduces)" 0 $?
"$OFLITE" inspect "$TMP/mlp2x.plan.pb" > "$TMP/out" 2>&1; check "inspect 2x1 exchange summary" 0 $?
expect_in "small all-reduces use the exchange" "collective algorithms (compiled): exchange_all_reduce x4 ring_all_gather x1" "$TMP/out"
expect_in "inspect says how the algorithms were chosen" "chosen by: the size rule (no calibration, no stated link rate)" "$TMP/out"
# A cluster that states its link rate: the size rule weighed on it.
printf 'machine { id: 0 address: "127.0.0.1" cpu_devices: 1 nic { gbit_per_s: 1 latency_us: 8 } }\nmachine { id: 1 address: "127.0.0.2" cpu_devices: 1 nic { gbit_per_s: 1 latency_us: 8 } }\n' > "$TMP/two_links.pbtxt"
"$OFLITE" compile --job "$TMP/mlp2.job.pb" --cluster "$TMP/two_links.pbtxt" -o "$TMP/mlp2l.plan.pb" --quiet --fuse_max_bytes 0 > "$TMP/out" 2>&1
check "compile 2x1 over stated links" 0 $?
"$OFLITE" inspect "$TMP/mlp2l.plan.pb" > "$TMP/out" 2>&1; check "inspect 2x1 over stated links" 0 $?
expect_in "stated links weigh the size rule" "chosen by: the size rule, weighed on the cluster's slowest stated link (1 Gbit/s, 8 us)" "$TMP/out"
"$OFLITE" compile --job "$TMP/mlp2.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/bad.plan.pb" --exchange_max_bytes -1 > "$TMP/out" 2>&1
check "--exchange_max_bytes -1 is bad input" 2 $?
expect_in "--exchange_max_bytes -1 names the flag" "exchange_max_bytes" "$TMP/out"
"$OFLITE" compile --job "$TMP/mlp2.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/mlp2.plan.pb" --quiet --exchange_max_bytes 0 --fuse_max_bytes 0 > "$TMP/out" 2>&1
check "compile 2x1" 0 $?
"$OFLITE" inspect "$TMP/mlp2.plan.pb" > "$TMP/out" 2>&1; check "inspect 2x1 summary" 0 $?
for needle in "run settings: seed 7, 8 sample(s)/iteration, training" "evaluation plan: none (the job reads no test split)" \
    "collective algorithms (compiled): ring_all_gather x1 ring_all_reduce x4" "all_reduce .* ring_all_reduce"; do
  if ! grep -q -- "$needle" "$TMP/out"; then echo "FAIL: summary lacks '$needle'"; cat "$TMP/out"; fail=1; fi
done
collective=$("$OFLITE" inspect "$TMP/mlp2.plan.pb" --actors | awk '$2 == "collective" { print $NF; exit }')
if [[ -z "$collective" ]]; then echo "FAIL: no collective actor listed"; fail=1; else
  "$OFLITE" inspect "$TMP/mlp2.plan.pb" --actor "$collective" > "$TMP/out" 2>&1; check "inspect collective actor" 0 $?
  expect_in "collective actor shows its algorithm" "collective algorithm ring_" "$TMP/out"
fi
"$OFLITE" inspect "$TMP/mlp2.plan.pb" --json > "$TMP/summary.json" 2>&1; check "inspect --json summary" 0 $?
if command -v python3 > /dev/null; then
  python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
rings = [b for b in d['boxing'] if b['ring']]
assert rings and all(b['algorithm'].startswith('ring_') for b in rings), d['boxing']
assert any(b['algorithm'] == 'ring_all_reduce' and b['buffer_bytes'] > 0 for b in rings), rings
assert d['seed'] == 7 and d['samples_per_iter'] == 8 and d['is_train'] is True, d
assert d['eval_plan']['state'] == 'no_test_split', d['eval_plan']
assert d['collective_note'] == 'the ring (exchange bound 0)', d['collective_note']
" "$TMP/summary.json"
  check "json shows collective algorithms and run settings" 0 $?
fi
# Gradient buckets (the default): the 4 small gradient all-reduces of this
# MLP become one fused collective, shown in the summary, the actor detail
# and the JSON; --fuse_max_bytes must be a byte count.
"$OFLITE" compile --job "$TMP/mlp2.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/mlp2f.plan.pb" --quiet > "$TMP/out" 2>&1
check "compile 2x1 with gradient buckets" 0 $?
"$OFLITE" inspect "$TMP/mlp2f.plan.pb" > "$TMP/out" 2>&1; check "inspect bucket summary" 0 $?
expect_in "one collective for the 4 gradients" "collective algorithms (compiled): exchange_all_reduce x1 ring_all_gather x1" "$TMP/out"
expect_in "bucket count" "fused all-reduce buckets: 1, of 4 all-reduces" "$TMP/out"
expect_in "bucket members" "bucket0: exchange_all_reduce .*dense_1-bias_add-grad_b/y_0, .*dense-matmul-grad_b/out_0" "$TMP/out"
"$OFLITE" inspect "$TMP/mlp2f.plan.pb" --actor "collective:all_reduce:bucket0@1" > "$TMP/out" 2>&1; check "inspect bucket actor" 0 $?
expect_in "bucket actor lists its members" "fused bucket of 4 all-reduces" "$TMP/out"
expect_in "bucket actor member line" "dense-bias_add-grad_b/y_0 float32(.*): regst [0-9]* -> regst [0-9]*, from element [0-9]" "$TMP/out"
"$OFLITE" inspect "$TMP/mlp2f.plan.pb" --json > "$TMP/bucket.json" 2>&1; check "inspect --json buckets" 0 $?
if command -v python3 > /dev/null; then
  python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
buckets = [b for b in d['boxing'] if b.get('members')]
assert len(buckets) == 1 and len(buckets[0]['members']) == 4, d['boxing']
assert buckets[0]['lbn'] == 'bucket0' and buckets[0]['algorithm'] == 'exchange_all_reduce', buckets
" "$TMP/bucket.json"
  check "json lists the bucket's members" 0 $?
fi
"$OFLITE" compile --job "$TMP/mlp2.job.pb" --cluster "$TMP/two.pbtxt" -o "$TMP/bad.plan.pb" --fuse_max_bytes -5 > "$TMP/out" 2>&1
check "--fuse_max_bytes -5 is bad input" 2 $?
expect_in "--fuse_max_bytes -5 names the flag" "fuse_max_bytes" "$TMP/out"

# Graph replay (docs/compiler.md, "GPU compute merge"): on one GPU the compute
# stream's ops become one replayed task; --graph-replay=false keeps one task
# per op. Plans for cuda:0 compile without a GPU.
printf 'machine { id: 0 address: "127.0.0.1" cpu_devices: 1 cuda_devices: 1 }\n' > "$TMP/gpu.pbtxt"
"$WRITE_JOB" "$TMP/gpu.job.pb" --placement 0:cuda:0 > "$TMP/out" 2>&1; check "write cuda:0 job" 0 $?
"$OFLITE" compile --job "$TMP/gpu.job.pb" --cluster "$TMP/gpu.pbtxt" -o "$TMP/gpu.plan.pb" --quiet > "$TMP/out" 2>&1
check "compile cuda:0" 0 $?
"$OFLITE" inspect "$TMP/gpu.plan.pb" > "$TMP/out" 2>&1; check "inspect cuda:0 summary" 0 $?
expect_in "one replayed task" "CUDA graph replay: yes (cuda:0: one captured task, [0-9]* ops); replayed: 'compute-graph@m0:cuda:0'" "$TMP/out"
"$OFLITE" inspect "$TMP/gpu.plan.pb" --actor compute-graph@m0:cuda:0 > "$TMP/out" 2>&1; check "inspect replayed actor" 0 $?
expect_in "replayed actor says so" "graph replay: this act may be captured" "$TMP/out"
"$OFLITE" inspect "$TMP/gpu.plan.pb" --json > "$TMP/gpu.json" 2>&1; check "inspect --json cuda:0" 0 $?
"$OFLITE" compile --job "$TMP/gpu.job.pb" --cluster "$TMP/gpu.pbtxt" -o "$TMP/gpu_ops.plan.pb" --quiet --graph-replay=false > "$TMP/out" 2>&1
check "compile cuda:0 --graph-replay=false" 0 $?
"$OFLITE" inspect "$TMP/gpu_ops.plan.pb" > "$TMP/out" 2>&1; check "inspect cuda:0 one task per op" 0 $?
expect_in "no replayed task" "CUDA graph replay: yes; replayed: none (one task per op)" "$TMP/out"
"$OFLITE" inspect "$TMP/gpu_ops.plan.pb" --json > "$TMP/gpu_ops.json" 2>&1; check "inspect --json one task per op" 0 $?
if command -v python3 > /dev/null; then
  python3 -c "
import json, sys
merged, ops = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert merged['graph_capturable'] and ops['graph_capturable'], (merged, ops)
tasks = merged['graph_replay_tasks']
assert len(tasks) == 1 and tasks[0]['name'] == 'compute-graph@m0:cuda:0', tasks
assert tasks[0]['device'] == 'cuda:0' and tasks[0]['kernels'] > 1, tasks
assert ops['graph_replay_tasks'] == [] and ops['graph_note'] == '', ops
assert merged['actors'] == ops['actors'] - tasks[0]['kernels'] + 1, (merged['actors'], ops['actors'])
" "$TMP/gpu.json" "$TMP/gpu_ops.json"
  check "json lists the replayed task" 0 $?
fi
"$OFLITE" compile --job "$TMP/gpu.job.pb" --cluster "$TMP/gpu.pbtxt" -o "$TMP/bad.plan.pb" --graph-replay=maybe > "$TMP/out" 2>&1
check "--graph-replay=maybe is bad input" 2 $?
expect_in "--graph-replay=maybe names the flag" "graph-replay" "$TMP/out"
"$OFLITE" compile --help > "$TMP/out" 2>&1; check "compile --help" 0 $?
expect_in "help lists --graph-replay" "graph-replay" "$TMP/out"

"$OFLITE" inspect "$TMP/mlp4.plan.pb" --actors > "$TMP/out" 2>&1; check "inspect --actors" 0 $?
expect_in "actor table" "dense-matmul@3" "$TMP/out"
"$OFLITE" inspect "$TMP/mlp4.plan.pb" --actors --machine 1 > "$TMP/out" 2>&1; check "inspect --machine 1" 0 $?
if grep -q "dense-matmul@0" "$TMP/out"; then echo "FAIL: machine 0 actor shown for --machine 1"; fail=1; fi
expect_in "machine 1 actor" "dense-matmul@2" "$TMP/out"
"$OFLITE" inspect "$TMP/mlp4.plan.pb" --actor dense-matmul@1 > "$TMP/out" 2>&1; check "inspect --actor" 0 $?
expect_in "actor detail kernel" "kernel dense-matmul (matmul" "$TMP/out"
expect_in "actor detail registers" "regst_num" "$TMP/out"
"$OFLITE" inspect "$TMP/mlp4.plan.pb" --actor no-such-actor > "$TMP/out" 2>&1; check "inspect unknown actor" 2 $?
"$OFLITE" inspect "$TMP/mlp4.plan.pb" --machine 7 > "$TMP/out" 2>&1; check "inspect machine out of range" 2 $?
"$OFLITE" inspect "$TMP/mlp4.plan.pb" --json --actors > "$TMP/plan.json" 2>&1; check "inspect --json" 0 $?
if command -v python3 > /dev/null; then
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['actors']==len(d['actor_list']) and len(d['machines'])==2, d" "$TMP/plan.json"
  check "json parses and is consistent" 0 $?
fi
"$OFLITE" inspect "$TMP/mlp4.plan.pb" --actor dense-matmul@1 --json > "$TMP/out" 2>&1; check "inspect --actor --json" 0 $?
expect_in "actor json" '"taskId"' "$TMP/out"
"$OFLITE" inspect "$TMP/mlp4.plan.pb" --dot > "$TMP/plan.dot" 2>&1; check "inspect --dot" 0 $?
expect_in "dot header" "digraph plan" "$TMP/plan.dot"
if command -v dot > /dev/null; then
  dot -Tsvg "$TMP/plan.dot" -o "$TMP/plan.svg" > "$TMP/out" 2>&1; check "dot renders" 0 $?
fi

# Bad input: exit 2, the culprit named, and no output file.
rm -f "$TMP/bad.plan.pb"
printf 'machine { id: 0 cpu_devices: \n' > "$TMP/corrupt.pbtxt"
"$OFLITE" compile --job "$TMP/mlp1.job.pb" --cluster "$TMP/corrupt.pbtxt" -o "$TMP/bad.plan.pb" > "$TMP/out" 2>&1
check "corrupt cluster" 2 $?
expect_in "corrupt cluster named" "corrupt.pbtxt" "$TMP/out"
[[ -e "$TMP/bad.plan.pb" ]] && { echo "FAIL: output left after corrupt cluster"; fail=1; }
"$OFLITE" compile --job "$TMP/mlp4.job.pb" --cluster "$TMP/one.pbtxt" -o "$TMP/bad.plan.pb" > "$TMP/out" 2>&1
check "placement outside cluster" 2 $?
expect_in "missing machine named" "machine 1" "$TMP/out"
[[ -e "$TMP/bad.plan.pb" ]] && { echo "FAIL: output left after bad placement"; fail=1; }
head -c 300 /dev/urandom > "$TMP/garbage.job.pb"
"$OFLITE" compile --job "$TMP/garbage.job.pb" --cluster "$TMP/one.pbtxt" -o "$TMP/bad.plan.pb" > "$TMP/out" 2>&1
check "garbage job" 2 $?
expect_in "garbage job named" "garbage.job.pb" "$TMP/out"
[[ -e "$TMP/bad.plan.pb" ]] && { echo "FAIL: output left after garbage job"; fail=1; }
ls "$TMP" | grep -q "bad.plan.pb" && { echo "FAIL: temporary output left"; fail=1; }
"$OFLITE" compile --job "$TMP/mlp1.job.pb" > "$TMP/out" 2>&1; check "missing flags" 2 $?
"$OFLITE" compile --job "$TMP/mlp1.job.pb" --cluster "$TMP/one.pbtxt" -o "$TMP/x.pb" --pipeline_depth 0 > "$TMP/out" 2>&1
check "bad pipeline depth" 2 $?
exit $fail
