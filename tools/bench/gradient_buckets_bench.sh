#!/usr/bin/env bash
# gradient_buckets_bench: the per-step effect of gradient buckets
# (docs/compiler.md, "Gradient buckets") on data-parallel training over 2
# ranks on loopback tcp (`oflite launch --nproc 2 --comm tcp`): each model's
# Job compiled twice for 2 machines of one CPU device, with the default
# buckets ("fused") and with `--fuse_max_bytes 0` ("unfused"), run in
# alternating order, sample after sample. Models:
#   lenet5  //examples:lenet5_fashion_mnist (Fashion-MNIST, batch 64)
#   cnn     write_scaling_job --model cnn (synthetic, batch 64)
#   mlp     write_scaling_job --model mlp, 784-2048-2048-10 (synthetic, batch 64)
# Prints per model and variant the buckets of the plan, then medians of:
# transfers per step on rank 0 (`--stats` registered-pool transfers: one per
# collective act), training wall time per step (rank 0's "trained
# iterations ... in Xs"), and CPU time per step (user+sys of the launcher and
# both ranks, /usr/bin/time; includes start-up, the same for both
# variants); the load average before and after each model.
#
#   bazel build //tools/oflite:oflite //tools/bench/scaling:write_scaling_job \
#       //examples:lenet5_fashion_mnist
#   tools/bench/gradient_buckets_bench.sh [--models lenet5,cnn,mlp] [--iters 200] [--samples 5]
set -u
models=lenet5,cnn,mlp; iters=200; samples=5
usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --help|-h) usage; exit 0 ;;
    --models) models="$2"; shift 2 ;;
    --iters) iters="$2"; shift 2 ;;
    --samples) samples="$2"; shift 2 ;;
    *) echo "gradient_buckets_bench: unknown flag '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$iters" =~ ^[1-9][0-9]*$ && "$samples" =~ ^[1-9][0-9]*$ ]] ||
  { echo "gradient_buckets_bench: --iters and --samples must be positive integers" >&2; exit 2; }
root="$(cd "$(dirname "$0")/../.." && pwd)"
oflite="$root/bazel-bin/tools/oflite/oflite"
write_job="$root/bazel-bin/tools/bench/scaling/write_scaling_job"
lenet="$root/bazel-bin/examples/lenet5_fashion_mnist"
for tool in "$oflite" "$write_job" "$lenet"; do
  [[ -x "$tool" ]] || { echo "gradient_buckets_bench: $tool not built (see --help)" >&2; exit 2; }
done
[[ -x /usr/bin/time ]] || { echo "gradient_buckets_bench: /usr/bin/time not found" >&2; exit 2; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
median() { sort -g | awk '{v[NR]=$1} END {if (NR==0) print "nan"; else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

printf 'machine { id: 0 address: "127.0.0.1" cpu_devices: 1 cpu_threads: 1 }\nmachine { id: 1 address: "127.0.0.2" cpu_devices: 1 cpu_threads: 1 }\n' \
  > "$tmp/two.pbtxt"

write_model_job() {  # write_model_job MODEL OUT.job.pb
  case "$1" in
    lenet5)
      "$lenet" --machines 2 --batch 64 --iters "$iters" --compile-only --out-dir "$tmp/lenet5" \
        > "$tmp/write.log" 2>&1 && cp "$tmp/lenet5/lenet5.job.pb" "$2" ;;
    cnn|mlp)
      "$write_job" "$2" --model "$1" --batch 64 --machines 2 --iterations "$iters" > "$tmp/write.log" 2>&1 ;;
    *) echo "gradient_buckets_bench: unknown model '$1'" >&2; return 2 ;;
  esac
}

# run PLAN TAG: one launch; appends "transfers/step wall_ms/step cpu_ms/step" to $tmp/TAG.
run() {
  local log="$tmp/run.log"
  /usr/bin/time -f "TIME %e %U %S" -o "$tmp/time" timeout 600 "$oflite" launch --plan "$1" \
    --nproc 2 --comm tcp -- --eval=false --stats > "$log" 2>&1 ||
    { echo "  $2: launch failed:"; tail -5 "$log"; return 1; }
  local transfers train cpu
  transfers=$(awk '/^\[rank 0\] registered-pool:/ { for (i = 1; i <= NF; ++i) if ($i == "transfers") print $(i + 1) }' "$log")
  train=$(sed -n 's/^\[rank 0\] trained iterations [0-9.]* in \([0-9.]*\)s.*/\1/p' "$log")
  cpu=$(awk '/^TIME/ { print $3 + $4 }' "$tmp/time")
  echo "${transfers:-nan} ${train:-nan} ${cpu:-nan}" |
    awk -v n="$iters" '{ printf "%.3f %.3f %.3f\n", $1 / n, $2 * 1000 / n, $3 * 1000 / n }' >> "$tmp/$2"
}

IFS=, read -r -a model_list <<< "$models"
for model in "${model_list[@]}"; do
  job="$tmp/$model.job.pb"
  write_model_job "$model" "$job" || { echo "$model: cannot write the job:"; tail -5 "$tmp/write.log"; exit 1; }
  for variant in fused unfused; do
    flags=(); [[ $variant == unfused ]] && flags=(--fuse_max_bytes 0)
    "$oflite" compile --job "$job" --cluster "$tmp/two.pbtxt" -o "$tmp/$model.$variant.plan.pb" --quiet \
      "${flags[@]}" > "$tmp/compile.log" 2>&1 || { echo "$model: compile failed"; cat "$tmp/compile.log"; exit 1; }
  done
  echo "== $model, 2 ranks over tcp, $iters iterations, $samples sample(s), load before: $(load)"
  "$oflite" inspect "$tmp/$model.fused.plan.pb" |
    grep -E "collective algorithms|fused all-reduce buckets|^    bucket[0-9]+:" | sed 's/^ */  fused plan: /'
  "$oflite" inspect "$tmp/$model.unfused.plan.pb" | grep "collective algorithms" | sed 's/^ */  unfused plan: /'
  : > "$tmp/fused"; : > "$tmp/unfused"
  for ((s = 0; s < samples; ++s)); do
    if ((s % 2 == 0)); then order=(fused unfused); else order=(unfused fused); fi
    for variant in "${order[@]}"; do run "$tmp/$model.$variant.plan.pb" "$variant" || exit 1; done
  done
  printf '  %-8s %16s %18s %18s\n' variant "transfers/step" "train ms/step" "CPU ms/step"
  for variant in fused unfused; do
    printf '  %-8s %16s %18s %18s\n' "$variant" \
      "$(cut -d' ' -f1 "$tmp/$variant" | median)" "$(cut -d' ' -f2 "$tmp/$variant" | median)" \
      "$(cut -d' ' -f3 "$tmp/$variant" | median)"
  done
  echo "  load after: $(load)"
done
