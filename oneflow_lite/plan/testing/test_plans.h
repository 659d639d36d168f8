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
// cuda (two GPUs; compiles without a GPU), cuda_one_gpu (the MLP with
// momentum on one GPU, whose compute tasks the compiler merged into one
// graph_replay task: compiler/graph_merge.h). Errors name the failing case.
// (The fuzzer's seeds: adding one changes its whole random sequence.)
StatusOr<std::vector<NamedPlan>> CompiledTestPlans();

// cuda_one_gpu (see above).
StatusOr<Plan> CompiledMergedGpuPlan();

// One of them by name, or NotFound.
StatusOr<Plan> CompiledTestPlan(const std::string& name);

}  // namespace testing
}  // namespace oflite

#endif  // ONEFLOW_LITE_PLAN_TESTING_TEST_PLANS_H_
