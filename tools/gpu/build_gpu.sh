#!/usr/bin/env bash
# Builds the GPU binaries on a machine WITHOUT a GPU and stages them, with
# the scripts they need, into gpu_stage/ (git-ignored) at the repository
# root. Only CUDA's own libraries (cudart, cuBLAS, cuDNN) and glibc stay
# dynamic (with libstdc++, which Bazel's toolchain always links as -lstdc++;
# gcc 12's is older than any the GPU image has): protobuf, glog (+libunwind,
# lzma), gflags, OpenBLAS (+gfortran, quadmath), zlib and gtest are linked
# statically, so the binaries run on a GPU machine that has CUDA 13 and
# PyTorch but no Bazel. The stripped binaries travel as one bin.tar.xz
# (about 15 MB; the device tool carries at most 64 MiB), which
# run_gpu_check.sh unpacks.
#
#   tools/gpu/build_gpu.sh            # env: BAZEL_OUTPUT_BASE, JOBS (default 2)
# Then carry gpu_stage/ to the GPU machine and run gpu_stage/run_gpu_check.sh.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"

targets=(
  //oneflow_lite/device/cuda:cuda_device_test
  //oneflow_lite/device/cuda:cuda_runtime_pieces_test
  //oneflow_lite/kernels/cuda:cuda_kernels_test
  //oneflow_lite/kernels/cuda:reduce_launch_test
  //oneflow_lite/runtime:cuda_runtime_test
  //tools/gpu:kernel_coverage_test
  //tools/gpu:gpu_check
  //tools/bench:train_gpu
)
bazel ${BAZEL_OUTPUT_BASE:+--output_base="$BAZEL_OUTPUT_BASE"} build \
  --config=cuda --config=static --dynamic_mode=off --jobs="${JOBS:-2}" "${targets[@]}"
bin="$(bazel ${BAZEL_OUTPUT_BASE:+--output_base="$BAZEL_OUTPUT_BASE"} info \
  --config=cuda --config=static --dynamic_mode=off bazel-bin 2>/dev/null)"

stage="$root/gpu_stage"
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/tools/bench"
for target in "${targets[@]}"; do
  path="${target#//}"
  path="${path/://}"
  install -m 0755 "$bin/$path" "$stage/bin/$(basename "$path")"
done
install -m 0644 tools/bench/train_gpu_torch.py "$stage/tools/bench/"
install -m 0755 tools/gpu/run_gpu_check.sh "$stage/run_gpu_check.sh"
git rev-parse HEAD > "$stage/COMMIT" 2>/dev/null || true

# Only CUDA libraries, libstdc++ and the C runtime may be dynamic (direct
# dependencies, as the dynamic section lists them).
status=0
for f in "$stage"/bin/*; do
  bad="$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -Ev \
    '^(ld-linux-x86-64|libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libcudart|libcublas|libcublasLt|libcudnn)\.so' || true)"
  if [[ -n "$bad" ]]; then
    echo "build_gpu: $(basename "$f") links dynamically against: $bad" >&2
    status=1
  fi
done
strip -s "$stage"/bin/*
tar -C "$stage" -cf - bin | xz -6 -T"${JOBS:-2}" > "$stage/bin.tar.xz"
rm -rf "$stage/bin"
du -sh "$stage"
echo "build_gpu: staged ${#targets[@]} binaries (bin.tar.xz) into $stage (commit $(cat "$stage/COMMIT" 2>/dev/null))"
exit $status
