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

std::string UniqueName(const std::string& base, std::set<std::string>* used) {
  std::string name = base;
  for (int k = 1; used->count(name); ++k) name = base + "_" + std::to_string(k);
  used->insert(name);
  return name;
}

struct Group {
  PlacementProto placement;
  NdSbp hint;
  std::vector<std::string> grads;
};

}  // namespace

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
    std::vector<Group> groups;
    std::vector<std::string> whole;
    for (const ArgProto& arg : op.input()) {
      for (const std::string& grad : arg.lbn()) {
        auto variable = variable_of_grad.find(grad);
        const NdSbp* hint = nullptr;
        if (variable != variable_of_grad.end() && variable->second->output_sbp_hint_size() > 0 &&
            SplitsSomeAxis(variable->second->output_sbp_hint(0))) {
          hint = &variable->second->output_sbp_hint(0);
        }
        if (hint == nullptr) {
          whole.push_back(grad);
          continue;
        }
        const PlacementProto placement = placement_of(*variable->second);
        auto group = std::find_if(groups.begin(), groups.end(), [&](const Group& g) {
          return g.placement.SerializeAsString() == placement.SerializeAsString() &&
                 g.hint.SerializeAsString() == hint->SerializeAsString();
        });
        if (group == groups.end()) {
          groups.push_back({placement, *hint, {}});
          group = groups.end() - 1;
        }
        group->grads.push_back(grad);
      }
    }
    if (groups.empty()) {  // nothing split: the clip reads its gradients as they are
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
    std::vector<std::string> sums;
    auto add_sum = [&](const std::vector<std::string>& grads, const PlacementProto& placement,
                       const NdSbp& in_hint, const NdSbp& out_hint) {
      OpConf sum = OpConfBuilder("square_sum", UniqueName(op.name() + "-square_sum", &used))
                       .Input("in", grads)
                       .Output("out")
                       .Build();
      *sum.mutable_placement() = placement;
      for (size_t i = 0; i < grads.size(); ++i) *sum.add_input_sbp_hint() = in_hint;
      *sum.add_output_sbp_hint() = out_hint;
      sum.set_is_optimizer(op.is_optimizer());
      sums.push_back(sum.output(0).lbn(0));
      LogicalBlobDesc* desc = result.job.add_blob();
      desc->set_lbn(sums.back());
      *desc->mutable_desc() = TensorDesc(Shape{}, DT_DOUBLE).ToProto();
      *result.job.add_op() = std::move(sum);
    };
    for (const Group& group : groups) {
      add_sum(group.grads, group.placement, group.hint, SumHint(group.hint));
    }
    if (!whole.empty()) add_sum(whole, placement_of(op), AllBroadcast(), AllBroadcast());
    OpConf scale = OpConfBuilder("clip_scale_from_square_sum", op.name())
                       .Input("square_sum", sums)
                       .Output("out")
                       .Attr("max_norm", AttrView(op).GetFloatOr("max_norm", 1.0))
                       .Attr("dtype", first->second->dtype())
                       .Build();
    *scale.mutable_placement() = placement_of(op);
    scale.mutable_control_input()->CopyFrom(op.control_input());
    for (size_t i = 0; i < sums.size(); ++i) *scale.add_input_sbp_hint() = AllBroadcast();
    if (op.output_sbp_hint_size() > 0) {
      *scale.add_output_sbp_hint() = op.output_sbp_hint(0);
    } else {
      *scale.add_output_sbp_hint() = AllBroadcast();
    }
    scale.set_is_optimizer(op.is_optimizer());
    if (scale.output(0).lbn(0) != op.output(0).lbn(0)) {
      return InternalError("clip norm pass: '", op.name(), "' would change its output from '",
                           op.output(0).lbn(0), "' to '", scale.output(0).lbn(0), "'");
    }
    *result.job.add_op() = std::move(scale);
    ++result.clips;
    result.groups += static_cast<int>(groups.size());
  }
  std::sort(result.job.mutable_blob()->begin(), result.job.mutable_blob()->end(),
            [](const LogicalBlobDesc& a, const LogicalBlobDesc& b) { return a.lbn() < b.lbn(); });
  return result;
}

}  // namespace compiler
}  // namespace oflite
