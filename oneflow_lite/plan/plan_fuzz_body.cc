#include "oneflow_lite/plan/plan_fuzz_body.h"

#include <google/protobuf/stubs/logging.h>

#include <chrono>
#include <memory>

#include "oneflow_lite/plan/plan_verifier.h"
#include "oneflow_lite/runtime/runtime.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace {

constexpr int64_t kFuzzZoneBytes = 64 << 20;
constexpr int64_t kFuzzMaxTasks = 512;

void LoadAndRun(const Plan& plan) {
  int64_t tasks = 0;
  for (const MachinePlan& machine : plan.machine()) tasks += machine.task_size();
  if (tasks > kFuzzMaxTasks) return;
  for (const MachinePlan& machine : plan.machine()) {
    RuntimeOptions options;
    options.machine_id = machine.machine_id();
    options.total_iters = 1;
    options.max_zone_bytes = kFuzzZoneBytes;
    options.watchdog_timeout = std::chrono::milliseconds(500);
    StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(plan, options);
    if (!runtime.ok()) continue;
    // Other machines are not there: only one-machine plans can run.
    if (plan.machine_size() == 1) (*runtime)->Run().IgnoreError();
  }
}

}  // namespace

int FuzzPlanBytes(const uint8_t* data, size_t size) {
  // Mutated strings are often not UTF-8; protobuf would log each refusal.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  Plan plan;
  if (!plan.ParseFromArray(data, static_cast<int>(size))) return 0;
  if (!VerifyPlan(plan).ok()) return 0;
  LoadAndRun(plan);
  return 0;
}

}  // namespace oflite
