// BoxingBody: SBP conversion among the devices of one machine (all-reduce,
// reduce-scatter, all-gather, slice, all-to-all, copy, B -> P).
//
// Inputs: one part per consumed register, in the order of
// BoxingConf.in_regst_desc_id (the consumed order if empty), part i being
// parallel id i of `in_sbp`; blob 0 of each register. Outputs: one part per
// produced register in TaskProto.produced order, part j being parallel id j
// of `out_sbp`; blob 0 of each. The act assembles the logical tensor from
// the inputs (S(a): concatenate along a; B: part 0; P: sum of parts in
// parallel id order) and cuts each output from it (S(a): part j of a
// balanced split, the first dim % n parts one row longer; B: all; P: part 0
// gets it, the others zeros). Sums run in the blob dtype, part 0 first, so
// the result is deterministic. Used on its actor's thread only.
#ifndef ONEFLOW_LITE_RUNTIME_BOXING_BODY_H_
#define ONEFLOW_LITE_RUNTIME_BOXING_BODY_H_

#include <memory>
#include <vector>

#include "oneflow_lite/runtime/actor.h"
#include "oneflow_lite/runtime/actor_env.h"
#include "proto/plan.pb.h"

namespace oflite {

class BoxingBody final : public ActBody {
 public:
  static StatusOr<std::unique_ptr<ActBody>> Create(const TaskProto& task, const ActorEnv& env);
  Status Act(ActContext* context) override;

 private:
  explicit BoxingBody(const TaskProto& task) : task_(&task) {}
  Status Assemble(ActContext* context);
  Status Scatter(ActContext* context);

  const TaskProto* task_;
  std::vector<int64_t> inputs_;   // regst desc ids, part order
  std::vector<int64_t> outputs_;  // regst desc ids, part order
  TensorDesc logical_;
  std::vector<char> buffer_;      // the logical tensor of the current act
};

// Part `index` of `parts` of a balanced split of `dim`: [begin, begin+size).
void BalancedRange(int64_t dim, int64_t parts, int64_t index, int64_t* begin, int64_t* size);

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_BOXING_BODY_H_
