// Damaged plans for tests (test-only): each PlanMutation takes one real
// compiled plan (testing/test_plans.h) and breaks one fact the runtime
// trusts, in the ways issue 12 found reachable from a file: a kernel binding
// dropped, a kernel writing into another task's register, a KernelConf
// dropped, offsets outside their zone, ids out of range or duplicated,
// overflow-sized shapes. Used by plan_verifier_test (every mutation refused,
// message checked) and by write_mutated_plans (files for the CLI test).
#ifndef ONEFLOW_LITE_PLAN_TESTING_PLAN_MUTATIONS_H_
#define ONEFLOW_LITE_PLAN_TESTING_PLAN_MUTATIONS_H_

#include <functional>
#include <string>
#include <vector>

#include "proto/plan.pb.h"

namespace oflite {
namespace testing {

struct PlanMutation {
  std::string name;  // file-name friendly: "dropped_binding"
  std::string base;  // the compiled test plan it starts from ("mlp", ...)
  // Damages `plan`; returns what the verifier's message must contain (the
  // task's name and id, the field, the problem). Empty: it found nothing to
  // damage (a bug of the test plans).
  std::function<std::vector<std::string>(Plan*)> apply;
};

std::vector<PlanMutation> PlanMutations();

// Helpers shared with the tests.
// The first task (all machines) for which `pick` holds, or null.
TaskProto* FindTask(Plan* plan, const std::function<bool(const TaskProto&)>& pick);
// "task 'NAME' (m0/cpu0/s0/t3)", as the verifier names tasks.
std::string TaskLabelForTest(const TaskProto& task);
// A compute task running a two-input matmul.
bool IsMatmulTask(const TaskProto& task);

}  // namespace testing
}  // namespace oflite

#endif  // ONEFLOW_LITE_PLAN_TESTING_PLAN_MUTATIONS_H_
