// BoxingBody: SBP conversion among the devices of one machine (all-reduce,
// reduce-scatter, all-gather, slice, all-to-all, copy, B -> P); one task per
// output part (docs/plan_format.md, TASK_BOXING).
//
// Inputs: the registers BoxingConf.in_regst_desc_id (the consumed order if
// empty), input k holding part in_parallel_id[k] (k if empty) of `in_sbp`
// over parallel_num parts; blob 0 of each. Output: blob 0 of the one
// produced register, part out_parallel_id of `out_sbp`. The act assembles
// the logical tensor from the inputs (S(a): each part at its balanced range
// along a; B: the first input; P: the sum of the inputs in parallel id
// order, the lowest first, in the blob dtype, so results are deterministic)
// and cuts the output from it (S(a): the balanced range of the part; B:
// all; P: part 0 gets it, the others zeros). Used on its actor's thread.
#ifndef ONEFLOW_LITE_RUNTIME_BOXING_BODY_H_
#define ONEFLOW_LITE_RUNTIME_BOXING_BODY_H_

#include <memory>
#include <string>
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
  std::vector<std::pair<int64_t, int64_t>> inputs_;  // (parallel id, regst desc id), sorted
  int64_t output_ = 0;                               // regst desc id
  int64_t out_part_ = 0;
  int64_t parts_ = 1;
  TensorDesc logical_;
  std::vector<char> buffer_;      // the logical tensor of the current act
};

// The first SBP of `sbp` (the one-dimensional SBP boxing converts),
// broadcast when it has none.
const SbpParallel& FirstSbp(const NdSbp& sbp);

// The SBP assembly rule, in one place for BoxingBody (one machine) and the
// collective actor's all-to-all (commnet/all_to_all_parts.h).
//
// One part of a logical tensor: its part index (parallel id or ring rank)
// and its bytes.
struct PartBytes {
  int64_t index = 0;
  const void* data = nullptr;
  int64_t bytes = 0;
};

// Fills `whole` (logical.ByteSize() bytes) from `parts`, sorted by index,
// of `in` over `num_parts` parts: S(a) each part at its balanced range
// along a, B the first part, P the sum of the parts in index order (the
// lowest first, in the dtype: deterministic). A part of the wrong size is
// InvalidArgument naming `who` and the part.
Status AssembleLogical(const SbpParallel& in, const TensorDesc& logical, int64_t num_parts,
                       const std::vector<PartBytes>& parts, char* whole, const std::string& who);

// Cuts part `index` of `out` over `num_parts` from `whole` into `dst` of
// `dst_bytes`: S(a) the part's balanced range, B all, P part 0 all and the
// others zeros. A destination of the wrong size is InvalidArgument.
Status CutLogical(const SbpParallel& out, const TensorDesc& logical, int64_t num_parts,
                  int64_t index, const char* whole, void* dst, int64_t dst_bytes,
                  const std::string& who);

// Part `index` of `parts` of a balanced split of `dim`: [begin, begin+size).
// The rule lives in common/partition.h (BalancedPart); this is its
// out-parameter spelling for runtime callers.
void BalancedRange(int64_t dim, int64_t parts, int64_t index, int64_t* begin, int64_t* size);

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_BOXING_BODY_H_
