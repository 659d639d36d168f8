#!/bin/bash
# Builds frame_fuzz.cc with clang's libFuzzer (+ ASan/UBSan) and runs it for a
# bounded time. Skips (exit 0, with a note) when clang++ or libFuzzer is
# missing. Usage: run_frame_fuzzer.sh [seconds, default 20]
set -euo pipefail
seconds="${1:-20}"
root="$(cd "$(dirname "$(realpath "$0")")/../../.." && pwd)"
if ! command -v clang++ >/dev/null; then
  echo "clang++ not installed: libFuzzer run skipped"; exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if ! clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined \
    -I"$root" \
    "$root/oneflow_lite/comm/tcp/frame_fuzz.cc" \
    "$root/oneflow_lite/comm/tcp/frame.cc" \
    "$root/oneflow_lite/comm/control/control_wire.cc" \
    "$root/oneflow_lite/common/status.cc" \
    -lglog -lgflags -o "$work/frame_fuzzer" 2>"$work/build.log"; then
  if grep -q "fuzzer" "$work/build.log"; then
    echo "libFuzzer unavailable:"; tail -3 "$work/build.log"; exit 0
  fi
  cat "$work/build.log"; exit 1
fi
mkdir -p "$work/corpus"
"$work/frame_fuzzer" -max_total_time="$seconds" -max_len=4096 \
    -print_final_stats=1 "$work/corpus"
