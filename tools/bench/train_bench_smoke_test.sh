#!/usr/bin/env bash
# train_mlp and train_cnn (cnn, lenet5, resnet) end to end, tiny
# (structure, not speed): every (model, batch, cores, layout) row holds ours
# and PyTorch's best setting by name, each group prints the last step's
# loss of every side as a number, and below each group the peer's sweep
# lists every setting of --peer_configs once, one marked best (the row's,
# with the lowest median) and, with several, one marked worst (the
# highest). The peer itself checks
# that it ran on the pinned CPUs with the threads asked (the bench fails the
# peer otherwise). Bad flags end with exit code 2.
set -euo pipefail
work=$(mktemp -d "${TEST_TMPDIR:-/tmp}/train-bench-smoke-XXXXXX")
trap 'rm -rf "$work"' EXIT
tiny=(--samples 2 --warmup 1 --iters 3)
with_torch=1
if ! /usr/bin/python3 -c "import torch" 2> /dev/null; then
  echo "PyTorch not importable by /usr/bin/python3: only our rows are checked"
  with_torch=0
fi

fail() { echo "FAIL: $*"; exit 1; }

# check_group OUT MODEL BATCH CORES "LAYOUTS" "SETTINGS": the rows of one
# group (LAYOUTS without the space: "2devx1 1devx2") and, with PyTorch, its
# sweep (SETTINGS comma-separated).
check_group() {
  local out=$1 model=$2 batch=$3 cores=$4 layouts=$5 settings=$6
  local best_label=""
  for layout in $layouts; do
    row=$(grep -E "^$model +$batch +$cores ${layout/x/ x}( |$)" "$out" | head -1) ||
      fail "no $model batch $batch $cores-core ${layout/x/ x} row"
    echo "$row" | grep -q " load [0-9.]* [0-9.]* [0-9.]* -> " || fail "no load average: $row"
    if [ $with_torch = 0 ]; then
      echo "$row" | grep -q "PyTorch peer skipped" || fail "no peer note: $row"
      continue
    fi
    label=$(echo "$row" | grep -oE "torch [0-9]+ x blas [0-9]+") || fail "no best setting: $row"
    echo "$row" | grep -qE "[0-9.]+x  load" || fail "no speed: $row"
    [ -z "$best_label" ] || [ "$best_label" = "$label" ] ||
      fail "rows of one group name different best settings: $best_label, $label"
    best_label=$label
  done
  # The group's loss line (after its rows): a number per layout and, with
  # PyTorch, one for its best setting (a NaN or a missing side fails).
  loss=$(awk -v head="^$model +$batch +$cores " '
      $0 ~ head { in_group = 1; next }
      in_group && /^  loss at step / { print; exit }' "$out")
  [ -n "$loss" ] || fail "no loss line for $model batch $batch $cores cores"
  for layout in $layouts; do
    echo "$loss" | grep -qE " oflite ${layout/x/ x} [0-9]+\.[0-9]+;" ||
      fail "no ${layout/x/ x} loss: $loss"
  done
  if [ $with_torch = 1 ]; then
    echo "$loss" | grep -qE " PyTorch $best_label [0-9]+\.[0-9]+$" || fail "no peer loss: $loss"
  fi
  [ $with_torch = 1 ] || return 0
  # The sweep: the lines after the group's "both sides on CPUs" line.
  sweep=$(awk -v head="^$model +$batch +$cores " '
      $0 ~ head { in_group = 1; next }
      in_group && /^  both sides on CPUs/ { in_sweep = 1; next }
      in_sweep && /^    torch / { print; next }
      in_sweep { exit }' "$out")
  [ -n "$sweep" ] || fail "no sweep for $model batch $batch $cores cores"
  got=$(echo "$sweep" | grep -oE "^    torch [0-9]+ x blas [0-9]+" | sed 's/^    //' |
        sort | tr '\n' ',')
  want=$(echo "$settings" | tr ',' '\n' | sort | tr '\n' ',')
  [ "$got" = "$want" ] || fail "$model $cores cores: settings [$got], expected [$want]"
  [ "$(echo "$sweep" | grep -c ' best$')" = 1 ] || fail "not one best: $sweep"
  n=$(echo "$sweep" | wc -l)
  [ "$(echo "$sweep" | grep -c ' worst$')" = $((n > 1 ? 1 : 0)) ] || fail "worst marks: $sweep"
  marked=$(echo "$sweep" | grep ' best$' | grep -oE "torch [0-9]+ x blas [0-9]+")
  [ "$marked" = "$best_label" ] || fail "row names $best_label, sweep marks $marked best"
  # ms is the 6th field ("torch t x blas b ms ..."): best the lowest, worst the highest.
  echo "$sweep" | awk '
      { ms = $6 + 0; if (NR == 1 || ms < min) min = ms; if (NR == 1 || ms > max) max = ms }
      / best$/ { best = $6 + 0 } / worst$/ { worst = $6 + 0; has_worst = 1 }
      END { exit !(best == min && (!has_worst || worst == max)) }' ||
    fail "best / worst are not the lowest / highest median: $sweep"
}

# MLP, 1 and 2 cores, both layouts, the full sweep (auto = all at <= 2 cores).
tools/bench/train_mlp --batches 8 --cores 1,2 "${tiny[@]}" > "$work/mlp.txt"
cat "$work/mlp.txt"
check_group "$work/mlp.txt" mlp 8 1 "1devx1" "torch 1 x blas 1"
check_group "$work/mlp.txt" mlp 8 2 "2devx1 1devx2" \
  "torch 1 x blas 1,torch 1 x blas 2,torch 2 x blas 1,torch 2 x blas 2"

# CNN, LeNet-5 and ResNet at 2 cores, the diagonal only (--batches: every
# model at 4).
tools/bench/train_cnn --batches 4 --cores 2 --layout dp --peer_configs diag --samples 1 \
  --warmup 1 --iters 2 > "$work/cnn.txt"
cat "$work/cnn.txt"
for model in cnn lenet5 resnet; do
  check_group "$work/cnn.txt" $model 4 2 "2devx1" "torch 1 x blas 1,torch 2 x blas 2"
done

# --models picks models; the ResNet's own batch (its example's, 128) holds
# without --batches.
tools/bench/train_cnn --models resnet --cores 1 --samples 1 --warmup 1 --iters 2 \
  > "$work/resnet.txt"
cat "$work/resnet.txt"
check_group "$work/resnet.txt" resnet 128 1 "1devx1" "torch 1 x blas 1"
if grep -qE "^(cnn|lenet5) " "$work/resnet.txt"; then fail "--models resnet ran other models"; fi

status=0
tools/bench/train_cnn --models=resnet,vgg > "$work/bad.txt" 2>&1 || status=$?
[ $status = 2 ] || fail "--models=resnet,vgg: exit $status, expected 2: $(cat "$work/bad.txt")"
grep -q -- "--models.*'vgg'" "$work/bad.txt" || fail "the error does not name --models and vgg"

for bad in --peer_configs=some --peer_timeout=0 --cores=0; do
  status=0
  tools/bench/train_mlp "$bad" > "$work/bad.txt" 2>&1 || status=$?
  [ $status = 2 ] || fail "$bad: exit $status, expected 2: $(cat "$work/bad.txt")"
  grep -q -- "${bad%%=*}" "$work/bad.txt" || fail "$bad: the error does not name the flag"
done
echo PASS
