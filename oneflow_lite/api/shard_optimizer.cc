#include "oneflow_lite/api/shard_optimizer.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/api/placement.h"
#include "oneflow_lite/compiler/clip_norm.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace {

constexpr char kFlag[] = "--shard-optimizer";

bool IsUpdate(const OpConf& op) {
  return op.is_optimizer() && (op.op_type() == "sgd_update" || op.op_type() == "momentum_update" ||
                               op.op_type() == "adam_update");
}

NdSbp Hint(const SbpParallel& sbp) {
  NdSbp hint;
  *hint.add_sbp() = sbp;
  return hint;
}

std::string PlacementName(const PlacementProto& proto) {
  StatusOr<Placement> placement = Placement::FromProto(proto);
  return placement.ok() ? placement->ToString() : "(invalid placement)";
}

int64_t DeviceCount(const PlacementProto& p) {
  return static_cast<int64_t>(p.machine_id_size()) * p.device_id_size();
}

// The first lbn of input `arg` of `op`; empty when absent.
std::string InputLbn(const OpConf& op, const std::string& arg) {
  for (const ArgProto& a : op.input()) {
    if (a.name() == arg && a.lbn_size() > 0) return a.lbn(0);
  }
  return "";
}

// One variable to shard, found from its update op.
struct Shard {
  std::string variable;             // op name
  std::vector<std::string> states;  // state variable op names
  std::string update;               // update op name
  std::string gathered;             // the identity op added for readers
  int64_t axis = 0;
  int64_t devices = 0;
};

class ShardPass {
 public:
  explicit ShardPass(const Job& job) : job_(job), descs_(BlobDescsOf(job)) {
    for (int i = 0; i < job.op_size(); ++i) used_names_.insert(job.op(i).name());
    producer_ = ProducerIndex(job);
  }

  StatusOr<Job> Run(ShardOptimizerReport* report);

 private:
  const PlacementProto& PlacementOf(const OpConf& op) const {
    return op.has_placement() ? op.placement() : job_.conf().default_placement();
  }
  const OpConf* ProducerOf(const std::string& lbn) const {
    auto it = producer_.find(lbn);
    return it == producer_.end() ? nullptr : &job_.op(it->second);
  }
  Status CheckDataParallel() const;
  Status Choose(const OpConf& update);
  Status CheckSomethingToShard() const;
  Job Rewrite() const;
  void RewriteReaders(Job* job) const;
  std::vector<OpConf> ShardedClip(const OpConf& clip) const;

  const Job& job_;
  BlobDescMap descs_;
  std::map<std::string, int> producer_;  // lbn -> op index
  std::set<std::string> used_names_;
  std::vector<Shard> shards_;
  std::map<std::string, const Shard*> by_variable_, by_update_, by_grad_;
  std::vector<std::string> kept_;
  std::set<std::string> one_device_placements_;
  int64_t one_device_variables_ = 0;
  int64_t updates_ = 0;
};

Status ShardPass::CheckDataParallel() const {
  for (const OpConf& op : job_.op()) {
    StatusOr<const OpDef*> def = LookupOpDef(op.op_type(), op.name());
    if (!def.ok() || !(*def)->is_source) continue;
    for (const NdSbp& hint : op.output_sbp_hint()) {
      for (const SbpParallel& sbp : hint.sbp()) {
        if (!IsBroadcast(sbp) || DeviceCount(PlacementOf(op)) < 2) continue;
        return InvalidArgumentError(
            kFlag, ": data source '", op.name(), "' (", op.op_type(), ") is hinted B on '",
            PlacementName(PlacementOf(op)), "': its batch is not split over the ",
            DeviceCount(PlacementOf(op)),
            " devices, so the job is not data parallel and its gradients are not partial sums "
            "to reduce-scatter (split the batch, Split(0) on the source, or drop ",
            kFlag, ")");
      }
    }
  }
  return Status::OK();
}

Status ShardPass::Choose(const OpConf& update) {
  ++updates_;
  const std::string model_lbn = InputLbn(update, "model");
  const OpConf* variable = ProducerOf(model_lbn);
  if (variable == nullptr || variable->op_type() != "variable") {
    return InvalidArgumentError(kFlag, ": update '", update.name(), "' writes '", model_lbn,
                                "', which no variable op produces");
  }
  const PlacementProto& placement = PlacementOf(*variable);
  const int64_t n = DeviceCount(placement);
  if (placement.hierarchy().dim_size() > 1) {
    return InvalidArgumentError(kFlag, ": variable '", variable->name(),
                                "' is on the hierarchical placement '", PlacementName(placement),
                                "'; sharding covers flat data-parallel placements only (use a "
                                "flat placement, e.g. '",
                                PlacementName([&] {
                                  PlacementProto flat = placement;
                                  flat.clear_hierarchy();
                                  return flat;
                                }()),
                                "', or drop ", kFlag, ")");
  }
  if (n < 2) {
    one_device_placements_.insert(PlacementName(placement));
    ++one_device_variables_;
    kept_.push_back("'" + variable->name() + "' is on one device ('" + PlacementName(placement) +
                    "')");
    return Status::OK();
  }
  if (variable->output_sbp_hint_size() > 0 && variable->output_sbp_hint(0).sbp_size() > 0) {
    kept_.push_back("'" + variable->name() + "' keeps its own layout " +
                    SbpToString(variable->output_sbp_hint(0).sbp(0)));
    return Status::OK();
  }
  const TensorDesc& desc = descs_.at(model_lbn);
  const int64_t axis = ShardAxis(desc.shape, n);
  if (axis < 0) {
    kept_.push_back("'" + variable->name() + "' " + desc.ToString() + " has no axis of " +
                    std::to_string(n) + " or more rows: stays B");
    return Status::OK();
  }
  Shard shard;
  shard.variable = variable->name();
  shard.update = update.name();
  shard.axis = axis;
  shard.devices = n;
  for (const ArgProto& arg : update.input()) {
    if (arg.name() == "model" || arg.name() == "model_diff" || arg.name() == "scale") continue;
    const OpConf* state = ProducerOf(arg.lbn(0));
    if (state == nullptr || state->op_type() != "variable") {
      return InvalidArgumentError(kFlag, ": state input '", arg.name(), "' of update '",
                                  update.name(), "' is not a variable");
    }
    shard.states.push_back(state->name());
  }
  shard.gathered = MakeUniqueName(variable->name() + "-gathered", &used_names_);
  shards_.push_back(std::move(shard));
  return Status::OK();
}

Status ShardPass::CheckSomethingToShard() const {
  if (updates_ == 0) {
    return InvalidArgumentError(kFlag, ": job '", job_.conf().name(),
                                "' has no optimizer update ops: nothing to shard (use it on a "
                                "training job, after Minimize)");
  }
  if (!shards_.empty()) return Status::OK();
  if (one_device_variables_ == updates_) {
    std::string where;
    for (const std::string& p : one_device_placements_) {
      where += (where.empty() ? "'" : ", '") + p + "'";
    }
    return InvalidArgumentError(
        kFlag, ": every variable is on one device (", where,
        "): there is nothing to shard (train data parallel on 2 or more devices, e.g. "
        "--devices 2 or --machines 2, or drop ",
        kFlag, ")");
  }
  std::string why;
  for (const std::string& k : kept_) why += (why.empty() ? "" : "; ") + k;
  return InvalidArgumentError(kFlag, ": no variable can be sharded: ", why, " (drop ", kFlag, ")");
}

// Every reader of a sharded variable but its update reads "<var>-gathered".
void ShardPass::RewriteReaders(Job* job) const {
  for (OpConf& op : *job->mutable_op()) {
    if (by_update_.count(op.name())) continue;
    for (ArgProto& arg : *op.mutable_input()) {
      for (int i = 0; i < arg.lbn_size(); ++i) {
        std::string name, rest;
        if (!SplitLbn(arg.lbn(i), &name, &rest)) continue;
        auto it = by_variable_.find(name);
        if (it == by_variable_.end() || op.name() == it->second->gathered) continue;
        arg.set_lbn(i, OutputLbn(it->second->gathered, "out"));
      }
    }
  }
  TrainConf* train = job->mutable_conf()->mutable_train();
  for (auto* list : {train->mutable_metric(), train->mutable_output()}) {
    for (ArgProto& arg : *list) {
      for (int i = 0; i < arg.lbn_size(); ++i) {
        std::string name, rest;
        if (!SplitLbn(arg.lbn(i), &name, &rest)) continue;
        auto it = by_variable_.find(name);
        if (it != by_variable_.end()) arg.set_lbn(i, OutputLbn(it->second->gathered, "out"));
      }
    }
  }
}

// The square_sum ops and the clip_scale_from_square_sum op replacing
// `clip` (same name, same output lbn).
std::vector<OpConf> ShardPass::ShardedClip(const OpConf& clip) const {
  std::vector<std::string> grads;
  for (const ArgProto& arg : clip.input()) {
    for (const std::string& lbn : arg.lbn()) grads.push_back(lbn);
  }
  // Sharded gradients grouped by placement (stages of a pipeline each get
  // their own), in order of first appearance, each on its shard axis, P
  // out; the rest in one group, B.
  std::vector<compiler::SquareSumGroup> sums;
  compiler::SquareSumGroup whole;
  for (const std::string& g : grads) {
    auto it = by_grad_.find(g);
    if (it == by_grad_.end()) {
      whole.grads.push_back(g);
      whole.input_hints.push_back(Hint(BroadcastSbp()));
      continue;
    }
    const PlacementProto& placement = PlacementOf(*FindOp(job_, it->second->update));
    auto group = std::find_if(sums.begin(), sums.end(), [&](const compiler::SquareSumGroup& gr) {
      return gr.placement.SerializeAsString() == placement.SerializeAsString();
    });
    if (group == sums.end()) {
      group = sums.insert(sums.end(), compiler::SquareSumGroup{});
      group->has_placement = true;
      group->placement = placement;
      group->output_hint = Hint(PartialSumSbp());
    }
    group->grads.push_back(g);
    group->input_hints.push_back(Hint(SplitSbp(it->second->axis)));
  }
  if (!whole.grads.empty()) {
    whole.has_placement = clip.has_placement();
    whole.placement = clip.placement();
    whole.output_hint = Hint(BroadcastSbp());
    sums.push_back(std::move(whole));
  }
  std::set<std::string> used = used_names_;
  return compiler::ClipFromSquareSums(clip, sums, descs_.at(grads.at(0)).dtype, &used);
}

Job ShardPass::Rewrite() const {
  Job job = job_;
  job.clear_op();
  for (const OpConf& original : job_.op()) {
    OpConf op = original;
    if (op.op_type() == "clip_scale" && op.is_optimizer() && !by_grad_.empty()) {
      for (OpConf& replaced : ShardedClip(op)) *job.add_op() = std::move(replaced);
      continue;
    }
    auto update = by_update_.find(op.name());
    if (update != by_update_.end()) {
      const Shard& shard = *update->second;
      op.clear_input_sbp_hint();
      for (const ArgProto& arg : op.input()) {
        for (int i = 0; i < arg.lbn_size(); ++i) {
          *op.add_input_sbp_hint() =
              Hint(arg.name() == "scale" ? BroadcastSbp() : SplitSbp(shard.axis));
        }
      }
      // The readers now read the gathered copy; only it reads the variable.
      op.clear_control_input();
      op.add_control_input(shard.gathered);
    }
    auto variable = by_variable_.find(op.name());
    if (variable != by_variable_.end()) {
      op.clear_output_sbp_hint();
      *op.add_output_sbp_hint() = Hint(SplitSbp(variable->second->axis));
    }
    *job.add_op() = op;
    if (variable != by_variable_.end()) {
      OpConf gathered = OpConfBuilder("identity", variable->second->gathered)
                            .Input("in", OutputLbn(op.name(), "out"))
                            .Output("out")
                            .Build();
      if (op.has_placement()) *gathered.mutable_placement() = op.placement();
      *gathered.add_input_sbp_hint() = Hint(BroadcastSbp());
      *gathered.add_output_sbp_hint() = Hint(BroadcastSbp());
      *job.add_op() = std::move(gathered);
    }
  }
  RewriteReaders(&job);
  return job;
}

StatusOr<Job> ShardPass::Run(ShardOptimizerReport* report) {
  if (!job_.conf().is_train()) {
    return InvalidArgumentError(kFlag, ": job '", job_.conf().name(),
                                "' does not train (no Minimize): there is no optimizer state to "
                                "shard");
  }
  if (descs_.empty()) {  // a Job file written without its blob descs
    Job inferred = job_;
    RETURN_IF_ERROR(ReinferBlobDescs(&inferred).WithContext("shard optimizer pass"));
    descs_ = BlobDescsOf(inferred);
  }
  RETURN_IF_ERROR(CheckDataParallel());
  for (const OpConf& op : job_.op()) {
    if (IsUpdate(op)) RETURN_IF_ERROR(Choose(op));
  }
  RETURN_IF_ERROR(CheckSomethingToShard());
  for (const Shard& shard : shards_) {
    by_variable_[shard.variable] = &shard;
    by_update_[shard.update] = &shard;
    by_grad_[InputLbn(*FindOp(job_, shard.update), "model_diff")] = &shard;
  }
  // A sharded state variable takes its model's layout.
  std::map<std::string, const Shard*> states;
  for (const Shard& shard : shards_) {
    for (const std::string& state : shard.states) states[state] = &shard;
  }
  Job job = Rewrite();
  for (OpConf& op : *job.mutable_op()) {
    auto it = states.find(op.name());
    if (it == states.end()) continue;
    op.clear_output_sbp_hint();
    *op.add_output_sbp_hint() = Hint(SplitSbp(it->second->axis));
  }
  RETURN_IF_ERROR(ReinferBlobDescs(&job).WithContext("shard optimizer pass"));
  if (report != nullptr) {
    for (const Shard& shard : shards_) {
      report->sharded.push_back("'" + shard.variable + "' S(" + std::to_string(shard.axis) +
                                ") over " + std::to_string(shard.devices) + " devices, " +
                                std::to_string(shard.states.size()) + " state variable(s)");
    }
    report->kept = kept_;
  }
  return job;
}

}  // namespace

StatusOr<Job> ShardOptimizerStates(const Job& job, ShardOptimizerReport* report) {
  return ShardPass(job).Run(report);
}

}  // namespace oflite
