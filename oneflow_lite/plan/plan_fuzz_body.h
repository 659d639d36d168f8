// The body of the plan fuzz target (test-only): parses bytes as a Plan and,
// if the verifier accepts it, loads it with the runtime on every machine it
// lists (memory plan, registers, threads, actors, kernels initialized) and
// runs one-machine plans for one iteration, with small bounds (64 MiB per
// zone, 512 tasks, a 500 ms watchdog). Any CHECK, crash or sanitizer report
// from here on a verified plan is a bug: the verifier must refuse the plan
// or the runtime must return a Status.
//
// Kept apart from the libFuzzer entry point (plan_fuzz.cc) so that the
// clang build (run_plan_fuzzer.sh) can link the gcc-built runtime as one
// shared library (libplan_fuzz_deps.so) while compiling the verifier itself
// with coverage instrumentation.
#ifndef ONEFLOW_LITE_PLAN_PLAN_FUZZ_BODY_H_
#define ONEFLOW_LITE_PLAN_PLAN_FUZZ_BODY_H_

#include <cstddef>
#include <cstdint>

namespace oflite {

// Returns 0 (libFuzzer's convention). Blocks until the run ends.
int FuzzPlanBytes(const uint8_t* data, size_t size);

}  // namespace oflite

#endif  // ONEFLOW_LITE_PLAN_PLAN_FUZZ_BODY_H_
