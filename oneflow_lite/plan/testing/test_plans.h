// Real compiled plans for the plan verifier's tests and the plan fuzzer's
// seeds (test-only): the MLP test job compiled in the layouts the compiler
// supports. Each plan is compiled on request (a few milliseconds).
#ifndef ONEFLOW_LITE_PLAN_TESTING_TEST_PLANS_H_
#define ONEFLOW_LITE_PLAN_TESTING_TEST_PLANS_H_

#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace testing {

struct NamedPlan {
  std::string name;  // "mlp", "data_parallel", "pipeline", ...
  Plan plan;
};

// mlp (one CPU), data_parallel (cpu:0-1), pipeline (two stages),
// model_parallel (columns), two_machines (data-parallel over 2 machines:
// ring collectives), machine_pipeline (one stage per machine: CommNet),
// cuda (two GPUs; compiles without a GPU). Errors name the failing case.
StatusOr<std::vector<NamedPlan>> CompiledTestPlans();

// One of them by name, or NotFound.
StatusOr<Plan> CompiledTestPlan(const std::string& name);

}  // namespace testing
}  // namespace oflite

#endif  // ONEFLOW_LITE_PLAN_TESTING_TEST_PLANS_H_
