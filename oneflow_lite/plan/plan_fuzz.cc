// Fuzz target for plan loading: the bytes are parsed as a Plan; a plan the
// verifier accepts is loaded by the runtime on every machine it lists
// (memory plan, registers, threads, actors, kernels initialized) and, for
// one-machine plans, run for one iteration. Any CHECK, crash or sanitizer
// report reachable from a verified plan is a bug: either the verifier must
// refuse the plan or the runtime must return a Status. Built two ways:
//  * plan_fuzz_test (gcc, cc_test): structured mutations of real compiled
//    plans (plan_fuzz_test.cc), also under --config=asan/ubsan;
//  * with clang: clang++ -fsanitize=fuzzer,address,undefined
//    (run_plan_fuzzer.sh), seeded with the compiled plans.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "oneflow_lite/plan/plan_verifier.h"
#include "oneflow_lite/runtime/runtime.h"
#include "proto/plan.pb.h"

namespace {

// Bounds that keep one input cheap: small blocks, a short watchdog.
constexpr int64_t kFuzzZoneBytes = 64 << 20;
constexpr int64_t kFuzzMaxTasks = 512;

void LoadAndRun(const oflite::Plan& plan) {
  int64_t tasks = 0;
  for (const oflite::MachinePlan& machine : plan.machine()) tasks += machine.task_size();
  if (tasks > kFuzzMaxTasks) return;
  for (const oflite::MachinePlan& machine : plan.machine()) {
    oflite::RuntimeOptions options;
    options.machine_id = machine.machine_id();
    options.total_iters = 1;
    options.max_zone_bytes = kFuzzZoneBytes;
    options.watchdog_timeout = std::chrono::milliseconds(500);
    oflite::StatusOr<std::unique_ptr<oflite::Runtime>> runtime =
        oflite::Runtime::Create(plan, options);
    if (!runtime.ok()) continue;
    // Other machines are not there: only one-machine plans can run.
    if (plan.machine_size() == 1) (*runtime)->Run().IgnoreError();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  oflite::Plan plan;
  if (!plan.ParseFromArray(data, static_cast<int>(size))) return 0;
  if (!oflite::VerifyPlan(plan).ok()) return 0;
  LoadAndRun(plan);
  return 0;
}
