// Internal to the plan verifier (plan_verifier.cc, task_checks.cc): an index
// of a plan's tasks and registers, built once with the id checks, and the
// error helpers that give every message the same shape. Not a public API.
#ifndef ONEFLOW_LITE_PLAN_PLAN_INDEX_H_
#define ONEFLOW_LITE_PLAN_PLAN_INDEX_H_

#include <cstdint>
#include <map>
#include <string>

#include "oneflow_lite/common/id.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/tensor.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace plan_internal {

struct RegstEntry {
  const RegstDescProto* desc = nullptr;
  const TaskProto* producer = nullptr;  // the task whose `produced` holds it
};

// Pointers into the verified Plan, which outlives the index.
struct PlanIndex {
  std::map<int64_t, const TaskProto*> tasks;
  std::map<int64_t, RegstEntry> regsts;

  const TaskProto* FindTask(int64_t id) const {
    auto it = tasks.find(id);
    return it == tasks.end() ? nullptr : it->second;
  }
  const RegstEntry* FindRegst(int64_t id) const {
    auto it = regsts.find(id);
    return it == regsts.end() ? nullptr : &it->second;
  }
};

// "task 'NAME' (m0/cpu0/s0/t3)" or, for an undecodable id, the raw number.
std::string TaskLabel(const TaskProto& task);

// InvalidArgument "task 'NAME' (ID): FIELD: ...".
template <typename... Args>
Status TaskError(const TaskProto& task, const std::string& field, const Args&... args) {
  return InvalidArgumentError(TaskLabel(task), ": ", field, ": ", args...);
}

// Byte size of `desc`, or an error message (in `problem`) when the dtype is
// not a real one, a dim is negative, the rank exceeds kMaxBlobRank or the
// size does not fit in int64. Returns -1 on error.
int64_t CheckedByteSize(const TensorDescProto& desc, std::string* problem);

// a + b, false on int64 overflow.
inline bool CheckedAdd(int64_t a, int64_t b, int64_t* sum) {
  return !__builtin_add_overflow(a, b, sum);
}

// Kernel bindings and op arguments of every KernelConf of `task`.
Status CheckKernels(const TaskProto& task, const PlanIndex& index);
// What the actor of each task kind trusts (copy, boxing, commnet,
// collective, sink, variable).
Status CheckTaskKind(const TaskProto& task, const PlanIndex& index);

}  // namespace plan_internal
}  // namespace oflite

#endif  // ONEFLOW_LITE_PLAN_PLAN_INDEX_H_
