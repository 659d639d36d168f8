#!/usr/bin/env bash
# The ResNet-style example (BatchNorm, adaptive pooling) end to end on the
# real dataset: a few training iterations on 2 devices, then the test-split
# evaluation with BatchNorm on its running statistics.
set -u
BIN="${TEST_SRCDIR}/oneflow_lite/examples/resnet_fashion_mnist"
OUT="${TEST_TMPDIR:-/tmp}/resnet"
mkdir -p "$OUT"
"$BIN" --out-dir "$OUT" --iters 8 --batch 32 --devices 2 -- --log-every 4 > "$OUT.log" 2>&1
rc=$?
if [[ $rc != 0 ]]; then echo "FAIL: exit $rc"; cat "$OUT.log"; exit 1; fi
grep -q "test (" "$OUT.log" || { echo "FAIL: no test accuracy line"; cat "$OUT.log"; exit 1; }
[[ -s "$OUT/resnet.plan.pb" ]] || { echo "FAIL: no plan written"; exit 1; }
echo ok
