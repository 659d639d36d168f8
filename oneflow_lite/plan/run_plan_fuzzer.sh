#!/bin/bash
# Builds the plan fuzzer with clang's libFuzzer (+ ASan/UBSan) and runs it
# for a bounded time, seeded with real compiled plans. The verifier and the
# entry point are compiled here, with coverage; the runtime, kernels and ops
# come from the gcc-built libplan_fuzz_deps.so, whose call to VerifyPlan
# resolves to the instrumented copy (-rdynamic). Skips (exit 0, with a note)
# when clang++ or libFuzzer is missing. Usage: run_plan_fuzzer.sh [seconds]
set -euo pipefail
seconds="${1:-60}"
root="$(cd "$(dirname "$(realpath "$0")")/../.." && pwd)"
runfiles="${TEST_SRCDIR:-$(dirname "$0")/run_plan_fuzzer.sh.runfiles}/oneflow_lite"
if ! command -v clang++ >/dev/null; then
  echo "clang++ not installed: libFuzzer run skipped"; exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
deps="$runfiles/oneflow_lite/plan/libplan_fuzz_deps.so"
# Under --config=asan/tsan/ubsan the gcc-built library carries gcc's
# sanitizer runtime, which cannot share a process with clang's: the
# structured plan_fuzz_test covers those configurations.
if readelf -d "$deps" 2>/dev/null | grep -qE 'lib(a|t|ub)san'; then
  echo "libplan_fuzz_deps.so is built with a gcc sanitizer: libFuzzer run skipped"
  echo "(plan_fuzz_test runs the same target under this configuration)"; exit 0
fi
cp "$deps" "$work/"
if ! clang++ -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined \
    -I"$root" -I"$runfiles" \
    "$root/oneflow_lite/plan/plan_fuzz.cc" \
    "$root/oneflow_lite/plan/plan_verifier.cc" \
    "$root/oneflow_lite/plan/task_checks.cc" \
    "$root/oneflow_lite/plan/task_kind_checks.cc" \
    -rdynamic -L"$work" -lplan_fuzz_deps -Wl,-rpath,"$work" \
    -lprotobuf -lglog -lgflags -lpthread -o "$work/plan_fuzzer" 2>"$work/build.log"; then
  if grep -q "fuzzer" "$work/build.log"; then
    echo "libFuzzer unavailable:"; tail -3 "$work/build.log"; exit 0
  fi
  cat "$work/build.log"; exit 1
fi
mkdir -p "$work/seeds/bad" "$work/corpus"
"$runfiles/oneflow_lite/plan/testing/write_mutated_plans" "$work/seeds" >/dev/null
artifacts="${TEST_UNDECLARED_OUTPUTS_DIR:-$work}/"
# -rss_limit_mb bounds a run; a verified plan that makes the runtime
# allocate beyond it is reported like a crash.
ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 \
"$work/plan_fuzzer" -max_total_time="$seconds" -max_len=65536 -timeout=20 \
    -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$artifacts" \
    "$work/corpus" "$work/seeds"
