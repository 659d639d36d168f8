#include "oneflow_lite/compiler/clip_norm.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace compiler {
namespace {

std::string OpOfLbn(const std::string& lbn) { return lbn.substr(0, lbn.find('/')); }

const std::string* SingleInput(const OpConf& op, const std::string& arg) {
  for (const ArgProto& a : op.input()) {
    if (a.name() == arg && a.lbn_size() == 1) return &a.lbn(0);
  }
  return nullptr;
}

bool SplitsSomeAxis(const NdSbp& hint) {
  return std::any_of(hint.sbp().begin(), hint.sbp().end(),
                     [](const SbpParallel& s) { return IsSplit(s); });
}

NdSbp AllBroadcast() {
  NdSbp hint;
  *hint.add_sbp() = BroadcastSbp();
  return hint;
}

// The hint of a group's sum: each split axis partial, the rest as given.
NdSbp SumHint(const NdSbp& input) {
  NdSbp out;
  for (const SbpParallel& s : input.sbp()) *out.add_sbp() = IsSplit(s) ? PartialSumSbp() : s;
  return out;
}

}  // namespace

std::vector<OpConf> ClipFromSquareSums(const OpConf& clip, const std::vector<SquareSumGroup>& groups,
                                       DataType dtype, std::set<std::string>* used) {
  std::vector<OpConf> ops;
  std::vector<std::string> sums;
  for (const SquareSumGroup& group : groups) {
    OpConf sum = OpConfBuilder("square_sum", MakeUniqueName(clip.name() + "-square_sum", used))
                     .Input("in", group.grads)
                     .Output("out")
                     .Build();
    if (group.has_placement) *sum.mutable_placement() = group.placement;
    for (const NdSbp& hint : group.input_hints) *sum.add_input_sbp_hint() = hint;
    *sum.add_output_sbp_hint() = group.output_hint;
    sum.set_is_optimizer(clip.is_optimizer());
    sums.push_back(sum.output(0).lbn(0));
    ops.push_back(std::move(sum));
  }
  OpConf scale = OpConfBuilder("clip_scale_from_square_sum", clip.name())
                     .Input("square_sum", sums)
                     .Output("out")
                     .Attr("max_norm", AttrView(clip).GetFloatOr("max_norm", 1.0))
                     .Attr("dtype", dtype)
                     .Build();
  if (clip.has_placement()) *scale.mutable_placement() = clip.placement();
  scale.mutable_control_input()->CopyFrom(clip.control_input());
  for (size_t i = 0; i < sums.size(); ++i) *scale.add_input_sbp_hint() = AllBroadcast();
  *scale.add_output_sbp_hint() =
      clip.output_sbp_hint_size() > 0 ? clip.output_sbp_hint(0) : AllBroadcast();
  scale.set_is_optimizer(clip.is_optimizer());
  ops.push_back(std::move(scale));
  return ops;
}

StatusOr<ClipNormResult> SplitClipNorms(const Job& job) {
  ClipNormResult result;
  std::map<std::string, const OpConf*> op_by_name;
  std::set<std::string> used;
  for (const OpConf& op : job.op()) {
    op_by_name[op.name()] = &op;
    used.insert(op.name());
  }
  // Gradient lbn -> the variable its update writes.
  std::map<std::string, const OpConf*> variable_of_grad;
  for (const OpConf& op : job.op()) {
    const std::string* grad = SingleInput(op, "model_diff");
    const std::string* model = SingleInput(op, "model");
    if (grad == nullptr || model == nullptr) continue;
    auto variable = op_by_name.find(OpOfLbn(*model));
    if (variable != op_by_name.end()) variable_of_grad.emplace(*grad, variable->second);
  }
  std::map<std::string, const TensorDescProto*> desc_of;
  for (const LogicalBlobDesc& blob : job.blob()) desc_of[blob.lbn()] = &blob.desc();
  auto placement_of = [&](const OpConf& op) {
    return op.has_placement() ? op.placement() : job.conf().default_placement();
  };

  result.job = job;
  result.job.clear_op();
  for (const OpConf& op : job.op()) {
    if (op.op_type() != "clip_scale") {
      *result.job.add_op() = op;
      continue;
    }
    std::vector<SquareSumGroup> groups;
    std::vector<std::string> whole;
    const std::string clip_placement = placement_of(op).SerializeAsString();
    const NdSbp broadcast = AllBroadcast();
    for (const ArgProto& arg : op.input()) {
      for (const std::string& grad : arg.lbn()) {
        auto variable = variable_of_grad.find(grad);
        if (variable == variable_of_grad.end()) {
          whole.push_back(grad);
          continue;
        }
        const NdSbp* hint = &broadcast;
        if (variable->second->output_sbp_hint_size() > 0 &&
            SplitsSomeAxis(variable->second->output_sbp_hint(0))) {
          hint = &variable->second->output_sbp_hint(0);
        }
        const PlacementProto placement = placement_of(*variable->second);
        // A whole gradient where the clip runs is summed there; one of a
        // parameter placed elsewhere (another pipeline stage) is summed
        // where it lives, so that a scalar crosses instead of the gradient.
        if (hint == &broadcast && placement.SerializeAsString() == clip_placement) {
          whole.push_back(grad);
          continue;
        }
        auto group = std::find_if(groups.begin(), groups.end(), [&](const SquareSumGroup& g) {
          return g.placement.SerializeAsString() == placement.SerializeAsString() &&
                 g.input_hints.front().SerializeAsString() == hint->SerializeAsString();
        });
        if (group == groups.end()) {
          group = groups.insert(groups.end(), SquareSumGroup{});
          group->has_placement = true;
          group->placement = placement;
          group->output_hint = SumHint(*hint);
        }
        group->grads.push_back(grad);
        group->input_hints.push_back(*hint);
      }
    }
    // Nothing split and nothing elsewhere: the clip reads its gradients as
    // they are.
    if (groups.empty()) {
      *result.job.add_op() = op;
      continue;
    }
    if (op.input_size() == 0 || op.input(0).lbn_size() == 0) {
      return InvalidArgumentError("clip_scale op '", op.name(), "' has no input");
    }
    auto first = desc_of.find(op.input(0).lbn(0));
    if (first == desc_of.end()) {
      return InvalidArgumentError("clip_scale op '", op.name(), "': its input '",
                                  op.input(0).lbn(0), "' has no blob desc in the job");
    }
    // The replacement states the clip's placement (the job's default when
    // the clip has none), as the groups state their parameters'.
    OpConf clip = op;
    *clip.mutable_placement() = placement_of(op);
    const int split_groups = static_cast<int>(groups.size());
    if (!whole.empty()) {
      SquareSumGroup rest;
      rest.grads = whole;
      rest.has_placement = true;
      rest.placement = clip.placement();
      rest.input_hints.assign(whole.size(), AllBroadcast());
      rest.output_hint = AllBroadcast();
      groups.push_back(std::move(rest));
    }
    std::vector<OpConf> ops = ClipFromSquareSums(clip, groups, first->second->dtype(), &used);
    for (OpConf& replacement : ops) {
      if (replacement.op_type() == "square_sum") {
        LogicalBlobDesc* desc = result.job.add_blob();
        desc->set_lbn(replacement.output(0).lbn(0));
        *desc->mutable_desc() = TensorDesc(Shape{}, DT_DOUBLE).ToProto();
      } else if (replacement.output(0).lbn(0) != op.output(0).lbn(0)) {
        return InternalError("clip norm pass: '", op.name(), "' would change its output from '",
                             op.output(0).lbn(0), "' to '", replacement.output(0).lbn(0), "'");
      }
      *result.job.add_op() = std::move(replacement);
    }
    ++result.clips;
    result.groups += split_groups;
  }
  std::sort(result.job.mutable_blob()->begin(), result.job.mutable_blob()->end(),
            [](const LogicalBlobDesc& a, const LogicalBlobDesc& b) { return a.lbn() < b.lbn(); });
  return result;
}

}  // namespace compiler
}  // namespace oflite
