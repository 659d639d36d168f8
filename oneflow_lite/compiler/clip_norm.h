// Split clip norms: a Job -> Job pass the compiler runs first (compiler.h),
// before fusion. The global-norm clip (clip_scale, Optimizer's
// clip_global_norm) reads every gradient whole: under tensor parallelism the
// gradients of split parameters are split too, so each would be all-gathered
// (the GPT's dp2 x tp2 layout on 4 machines: 40 all-gathers a step) only to
// be squared and summed. A sum of squares over a split tensor is a partial
// sum of the parts' sums, so this pass replaces such a clip by
//
//   square_sum(gradients of parameters hinted alike)  -> one float64 scalar
//                                                        per group, partial
//                                                        (P) on the axes
//                                                        the hint splits
//   square_sum(every other gradient)                  -> B
//   clip_scale_from_square_sum(the scalars)           -> the clip's output
//                                                        (same name, lbn)
//
// Groups: the gradients whose parameters (the variable an update op reads
// as "model" with the gradient as "model_diff") have the same placement and
// the same output_sbp_hint with a split on some axis. Each group's
// square_sum sits on that placement with the hint on every input and the
// hint, splits made P, on its output; the compiler then reduces one scalar
// per group over the split axes instead of gathering every gradient.
//
// Pipelines: a parameter with no split hint placed elsewhere than the clip
// (another pipeline stage) has its gradient summed where it lives, in one
// square_sum per such placement, B in and out: one scalar crosses to the
// clip instead of the stage's gradients (the GPT of 7 M parameters in two
// stages moved 28 MiB a step for the clip alone). Gradients with no split
// hint on the clip's own placement are summed in one square_sum there.
//
// A clip whose gradients have no split hint and live where it runs (data
// parallelism, layouts the compiler chose without hints) is left as it is,
// and so is a job sharded by ShardOptimizerStates (which makes the same
// split for sharded gradients: no clip_scale op is left).
//
// Numerics: the norm sums the same squares in float64 in another order, so
// the clip factor can differ from clip_scale's in the last bits of a double,
// which its float cast almost always absorbs (tests compare within 1e-6).
// Pure function; thread-safe.
#ifndef ONEFLOW_LITE_COMPILER_CLIP_NORM_H_
#define ONEFLOW_LITE_COMPILER_CLIP_NORM_H_

#include <set>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "proto/job.pb.h"

namespace oflite {
namespace compiler {

// One square_sum of a clip's replacement: its gradients, where it runs
// (has_placement false: the job's default) and its hints (one per
// gradient, and the output's).
struct SquareSumGroup {
  std::vector<std::string> grads;
  bool has_placement = false;
  PlacementProto placement;
  std::vector<NdSbp> input_hints;
  NdSbp output_hint;
};

// The ops that replace `clip` (a clip_scale over gradients of `dtype`): one
// square_sum per group, named "<clip>-square_sum" made unique against
// `used`, then clip_scale_from_square_sum under the clip's name and output
// (its placement, control inputs and max_norm; B in, the clip's output hint
// or B out); optimizer ops when the clip is one. Shared by SplitClipNorms
// and the sharded optimizer's clip (api/shard_optimizer.h).
std::vector<OpConf> ClipFromSquareSums(const OpConf& clip, const std::vector<SquareSumGroup>& groups,
                                       DataType dtype, std::set<std::string>* used);

struct ClipNormResult {
  Job job;
  int clips = 0;   // clip_scale ops replaced
  int groups = 0;  // square_sum ops made for split gradients or other placements
};

// InvalidArgument (naming the op) when a clip_scale op has no input or its
// first input has no recorded blob desc.
StatusOr<ClipNormResult> SplitClipNorms(const Job& job);

}  // namespace compiler
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMPILER_CLIP_NORM_H_
