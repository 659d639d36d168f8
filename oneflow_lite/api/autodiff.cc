#include "oneflow_lite/api/autodiff.h"

#include <algorithm>
#include <set>
#include <vector>

#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/api/variable.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"

namespace oflite {
namespace {

bool IsFloating(DataType dtype) { return dtype == DT_FLOAT || dtype == DT_DOUBLE; }

const std::string& ArgLbn(const google::protobuf::RepeatedPtrField<ArgProto>& args,
                          const OpConf& op, const std::string& arg, int index) {
  for (const ArgProto& a : args) {
    if (a.name() == arg) {
      CHECK(index >= 0 && index < a.lbn_size())
          << "op '" << op.name() << "': arg " << arg << " has no index " << index;
      return a.lbn(index);
    }
  }
  LOG(FATAL) << "op '" << op.name() << "' (" << op.op_type() << ") has no arg '" << arg << "'";
}

class AutodiffPass;

// The GradContext handed to one forward op's gradient rule.
class GradContextImpl final : public GradContext {
 public:
  GradContextImpl(AutodiffPass* pass, OpConf forward, std::map<std::string, std::string> out_grads)
      : pass_(pass), forward_(std::move(forward)), out_grads_(std::move(out_grads)) {}

  const OpConf& op() const override { return forward_; }
  int InputCount(const std::string& arg) const override {
    for (const ArgProto& a : forward_.input()) {
      if (a.name() == arg) return a.lbn_size();
    }
    return 0;
  }
  const std::string& InputLbn(const std::string& arg, int index) const override {
    return ArgLbn(forward_.input(), forward_, arg, index);
  }
  const TensorDesc& InputDesc(const std::string& arg, int index) const override;
  const std::string& OutputLbn(const std::string& arg, int index) const override {
    return ArgLbn(forward_.output(), forward_, arg, index);
  }
  const TensorDesc& OutputDesc(const std::string& arg, int index) const override;
  std::string OutputGradLbn(const std::string& arg, int index) const override {
    auto it = out_grads_.find(OutputLbn(arg, index));
    return it == out_grads_.end() ? "" : it->second;
  }
  bool NeedsInputGrad(const std::string& arg, int index) const override;
  StatusOr<std::string> AddOp(OpConf op) override;
  void SetInputGrad(const std::string& arg, int index, const std::string& lbn) override {
    input_grads_[{arg, index}] = lbn;
  }

  const std::map<std::pair<std::string, int>, std::string>& input_grads() const {
    return input_grads_;
  }

 private:
  AutodiffPass* pass_;
  OpConf forward_;
  std::map<std::string, std::string> out_grads_;
  std::map<std::pair<std::string, int>, std::string> input_grads_;
};

class AutodiffPass {
 public:
  AutodiffPass(const Job& job, const AutodiffOptions& options)
      : job_(job), descs_(BlobDescsOf(job)), options_(options) {
    for (const OpConf& op : job.op()) used_names_.insert(op.name());
    forward_op_count_ = job.op_size();
  }

  StatusOr<AutodiffResult> Run();

  const TensorDesc& Desc(const std::string& lbn) const {
    auto it = descs_.find(lbn);
    CHECK(it != descs_.end()) << "autodiff: no desc for blob '" << lbn << "'";
    return it->second;
  }
  bool NeedsGrad(const std::string& lbn) const { return needs_grad_.count(lbn) > 0; }
  // Adds a backward op for `forward` (placement copied); returns its name.
  StatusOr<std::string> AddBackwardOp(OpConf op, const OpConf& forward);

 private:
  Status MarkBlobsDependingOnVariables(const std::vector<int>& order);
  // Seeds d(loss)/d(loss_lbn) = weight.
  Status SeedLoss(const std::string& loss_lbn, double weight);
  Status Differentiate(const OpConf& forward);
  // The gradient of `lbn`: its single contribution or the sum of all.
  StatusOr<std::string> SumGrads(const std::string& lbn);
  // The micro_batch tag of the op producing `lbn`; -1 when untagged.
  int64_t MicroBatchOf(const std::string& lbn) const;
  // Gradient accumulation over micro-batches: the contributions to a shared
  // blob's gradient (a variable's) summed one micro-batch at a time, in
  // micro-batch order, each `add` tagged with its newer part's micro-batch so
  // that it runs in that micro-batch's backward unit (pipeline_schedule.h)
  // and frees the part at once, instead of one sum of all M after the last.
  StatusOr<std::string> AccumulateByMicroBatch(
      const std::string& lbn, std::vector<std::pair<int64_t, std::string>> parts);
  void PruneUnusedBackwardOps(const std::map<std::string, std::string>& variable_grads);
  // Graph::HintGradSbp: the gradient of every forward output with an
  // OpConf.output_grad_sbp_hint becomes an input hint of each backward op
  // reading it (the other input slots get empty entries: unhinted).
  Status ApplyGradHints();

  Job job_;
  BlobDescMap descs_;
  const AutodiffOptions options_;
  std::set<std::string> used_names_;
  int forward_op_count_ = 0;
  std::set<std::string> needs_grad_;                       // lbns depending on variables
  std::map<std::string, std::vector<std::string>> grads_;  // lbn -> contributions
  std::map<std::string, std::string> summed_;              // lbn -> final grad lbn
};

const TensorDesc& GradContextImpl::InputDesc(const std::string& arg, int index) const {
  return pass_->Desc(InputLbn(arg, index));
}
const TensorDesc& GradContextImpl::OutputDesc(const std::string& arg, int index) const {
  return pass_->Desc(OutputLbn(arg, index));
}
bool GradContextImpl::NeedsInputGrad(const std::string& arg, int index) const {
  return pass_->NeedsGrad(InputLbn(arg, index));
}
StatusOr<std::string> GradContextImpl::AddOp(OpConf op) {
  return pass_->AddBackwardOp(std::move(op), forward_);
}

StatusOr<std::string> AutodiffPass::AddBackwardOp(OpConf op, const OpConf& forward) {
  std::string base = op.name().empty() ? forward.name() + "-" + op.op_type() + "_grad" : op.name();
  const std::string name = MakeUniqueName(base, &used_names_);
  op.set_name(name);
  for (ArgProto& arg : *op.mutable_output()) {
    if (arg.lbn_size() == 0) arg.add_lbn();
    for (int i = 0; i < arg.lbn_size(); ++i) arg.set_lbn(i, OutputLbn(name, arg.name(), i));
  }
  if (!op.has_placement() && forward.has_placement()) *op.mutable_placement() = forward.placement();
  op.set_is_backward(true);
  if (forward.has_micro_batch()) op.set_micro_batch(forward.micro_batch());
  ASSIGN_OR_RETURN(const OpDef* def, LookupOpDef(op.op_type(), name));
  for (const std::string& arg : def->mutable_inputs) op.add_mutable_input(arg);
  RETURN_IF_ERROR(InferAndRecord(op, &descs_));
  *job_.add_op() = std::move(op);
  return name;
}

Status AutodiffPass::MarkBlobsDependingOnVariables(const std::vector<int>& order) {
  for (int index : order) {
    const OpConf& op = job_.op(index);
    bool depends = IsTrainableVariable(op);
    for (const ArgProto& arg : op.input()) {
      for (const std::string& lbn : arg.lbn()) depends = depends || NeedsGrad(lbn);
    }
    if (!depends) continue;
    for (const ArgProto& arg : op.output()) {
      for (const std::string& lbn : arg.lbn()) {
        if (IsFloating(Desc(lbn).dtype)) needs_grad_.insert(lbn);
      }
    }
  }
  return Status::OK();
}

Status AutodiffPass::SeedLoss(const std::string& loss_lbn, double weight) {
  std::string producer_name, arg;
  if (!SplitLbn(loss_lbn, &producer_name, &arg) || !descs_.count(loss_lbn)) {
    return NotFoundError("autodiff: loss blob '", loss_lbn, "' is not produced by any op of job '",
                         job_.conf().name(), "'");
  }
  if (!NeedsGrad(loss_lbn)) {
    return InvalidArgumentError("autodiff: loss '", loss_lbn, "' (", Desc(loss_lbn).ToString(),
                                ") does not depend on any trainable variable");
  }
  const OpConf* producer = FindOp(job_, producer_name);
  CHECK(producer != nullptr);
  const OpConf forward = *producer;
  // The seed reads nothing: a zeros_like(loss) + weight would make the whole
  // backward wait for the loss, and a mean over a data-parallel batch needs
  // every rank's per-sample losses gathered first, a barrier each step. A
  // loss of dynamic shape takes its extents from the loss at run time.
  const TensorDesc& loss = Desc(loss_lbn);
  std::string ones;
  if (!loss.is_dynamic) {
    ASSIGN_OR_RETURN(ones,
                     AddBackwardOp(OpConfBuilder("constant", forward.name() + "-loss_grad_seed")
                                       .Output("out")
                                       .Attr("shape", loss.shape)
                                       .Attr("dtype", loss.dtype)
                                       .Attr("value", weight)
                                       .Build(),
                                   forward));
  } else {
    ASSIGN_OR_RETURN(std::string zeros,
                     AddBackwardOp(OpConfBuilder("zeros_like", forward.name() + "-loss_grad_zeros")
                                       .Input("like", loss_lbn)
                                       .Output("out")
                                       .Build(),
                                   forward));
    ASSIGN_OR_RETURN(ones,
                     AddBackwardOp(OpConfBuilder("scalar_add", forward.name() + "-loss_grad_ones")
                                       .Input("in", OutputLbn(zeros, "out"))
                                       .Output("out")
                                       .Attr("value", weight)
                                       .Build(),
                                   forward));
  }
  grads_[loss_lbn].push_back(OutputLbn(ones, "out"));
  return Status::OK();
}

StatusOr<std::string> AutodiffPass::SumGrads(const std::string& lbn) {
  auto done = summed_.find(lbn);
  if (done != summed_.end()) return done->second;
  const std::vector<std::string>& parts = grads_.at(lbn);
  std::string result = parts.front();
  std::string producer_name, arg;
  CHECK(SplitLbn(lbn, &producer_name, &arg));
  if (parts.size() > 1 && !FindOp(job_, producer_name)->has_micro_batch()) {
    std::vector<std::pair<int64_t, std::string>> tagged;  // micro-batch (-1: none), part
    for (const std::string& part : parts) tagged.emplace_back(MicroBatchOf(part), part);
    if (std::any_of(tagged.begin(), tagged.end(), [](const auto& t) { return t.first >= 0; })) {
      ASSIGN_OR_RETURN(result, AccumulateByMicroBatch(lbn, std::move(tagged)));
      summed_[lbn] = result;
      return result;
    }
  }
  if (parts.size() > 1) {
    const OpConf forward = *FindOp(job_, producer_name);
    OpConf sum = OpConfBuilder("add", producer_name + "-" + arg + "-grad_sum")
                     .Input("in", parts)
                     .Output("out")
                     .Build();
    // Parts made on one placement other than the producer's (the next
    // pipeline stage read the blob twice, e.g. a residual stream) are summed
    // there, so that one gradient crosses back instead of each part.
    const PlacementProto* common = nullptr;
    for (const std::string& part : parts) {
      std::string part_producer, part_arg;
      CHECK(SplitLbn(part, &part_producer, &part_arg));
      const OpConf* op = FindOp(job_, part_producer);
      if (op == nullptr || !op->has_placement() ||
          (common != nullptr && common->SerializeAsString() != op->placement().SerializeAsString())) {
        common = nullptr;
        break;
      }
      common = &op->placement();
    }
    if (common != nullptr && forward.has_placement() &&
        common->SerializeAsString() != forward.placement().SerializeAsString()) {
      *sum.mutable_placement() = *common;
    }
    ASSIGN_OR_RETURN(std::string name, AddBackwardOp(std::move(sum), forward));
    result = OutputLbn(name, "out");
  }
  summed_[lbn] = result;
  return result;
}

Status AutodiffPass::Differentiate(const OpConf& forward) {
  std::map<std::string, std::string> out_grads;
  for (const ArgProto& arg : forward.output()) {
    for (const std::string& lbn : arg.lbn()) {
      if (!grads_.count(lbn)) continue;
      ASSIGN_OR_RETURN(out_grads[lbn], SumGrads(lbn));
    }
  }
  if (out_grads.empty()) return Status::OK();
  std::vector<std::pair<std::string, int>> needed;
  for (const ArgProto& arg : forward.input()) {
    for (int i = 0; i < arg.lbn_size(); ++i) {
      if (NeedsGrad(arg.lbn(i))) needed.emplace_back(arg.name(), i);
    }
  }
  if (needed.empty()) return Status::OK();
  const std::string where = "autodiff: op '" + forward.name() + "' (" + forward.op_type() + ")";
  ASSIGN_OR_RETURN(const OpDef* def, LookupOpDef(forward.op_type(), forward.name()));
  if (!def->grad || def->no_grad) {
    return UnimplementedError(where, " has no gradient rule, but it lies between trainable ",
                              "variables and the loss '", job_.conf().train().loss_lbn(), "'");
  }
  GradContextImpl context(this, forward, out_grads);
  Status status = def->grad(&context);
  if (!status.ok()) return status.WithContext(where + ": gradient rule failed");
  for (const auto& [arg, index] : needed) {
    auto it = context.input_grads().find({arg, index});
    if (it == context.input_grads().end()) {
      return InternalError(where, ": gradient rule set no gradient for input ", arg, "[", index,
                           "], which leads to a trainable variable");
    }
    const std::string& input_lbn = ArgLbn(forward.input(), forward, arg, index);
    auto desc = descs_.find(it->second);
    if (desc == descs_.end()) {
      return InternalError(where, ": gradient of input ", arg, "[", index, "] is blob '",
                           it->second, "', which no op produces");
    }
    if (desc->second.shape != Desc(input_lbn).shape ||
        desc->second.dtype != Desc(input_lbn).dtype) {
      return InternalError(where, ": gradient of input ", arg, "[", index, "] is ",
                           desc->second.ToString(), " but the input is ",
                           Desc(input_lbn).ToString());
    }
    grads_[input_lbn].push_back(it->second);
  }
  return Status::OK();
}

int64_t AutodiffPass::MicroBatchOf(const std::string& lbn) const {
  std::string producer_name, arg;
  CHECK(SplitLbn(lbn, &producer_name, &arg));
  const OpConf* producer = FindOp(job_, producer_name);
  return producer != nullptr && producer->has_micro_batch() ? producer->micro_batch() : -1;
}

StatusOr<std::string> AutodiffPass::AccumulateByMicroBatch(
    const std::string& lbn, std::vector<std::pair<int64_t, std::string>> parts) {
  std::stable_sort(parts.begin(), parts.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string producer_name, arg;
  CHECK(SplitLbn(lbn, &producer_name, &arg));
  OpConf like = *FindOp(job_, producer_name);
  std::string sum = parts.front().second;
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i].first >= 0) {
      like.set_micro_batch(parts[i].first);
    } else {
      like.clear_micro_batch();
    }
    ASSIGN_OR_RETURN(std::string name,
                     AddBackwardOp(OpConfBuilder("add", producer_name + "-" + arg + "-grad_acc")
                                       .Input("in", std::vector<std::string>{sum, parts[i].second})
                                       .Output("out")
                                       .Build(),
                                   like));
    sum = OutputLbn(name, "out");
  }
  return sum;
}

void AutodiffPass::PruneUnusedBackwardOps(
    const std::map<std::string, std::string>& variable_grads) {
  std::set<std::string> needed;
  for (const auto& [name, lbn] : variable_grads) needed.insert(lbn);
  std::vector<bool> keep(job_.op_size(), true);
  for (int i = job_.op_size() - 1; i >= forward_op_count_; --i) {
    const OpConf& op = job_.op(i);
    bool used = false;
    for (const ArgProto& arg : op.output()) {
      for (const std::string& lbn : arg.lbn()) used = used || needed.count(lbn);
    }
    keep[i] = used;
    if (!used) continue;
    for (const ArgProto& arg : op.input()) {
      for (const std::string& lbn : arg.lbn()) needed.insert(lbn);
    }
  }
  google::protobuf::RepeatedPtrField<OpConf> kept;
  for (int i = 0; i < job_.op_size(); ++i) {
    if (keep[i]) {
      *kept.Add() = job_.op(i);
      continue;
    }
    for (const ArgProto& arg : job_.op(i).output()) {
      for (const std::string& lbn : arg.lbn()) descs_.erase(lbn);
    }
  }
  job_.mutable_op()->Swap(&kept);
}

Status AutodiffPass::ApplyGradHints() {
  std::map<std::string, std::pair<NdSbp, std::string>> hints;  // grad lbn -> hint, forward lbn
  for (int i = 0; i < forward_op_count_ && i < job_.op_size(); ++i) {
    const OpConf& op = job_.op(i);
    if (op.output_grad_sbp_hint_size() == 0) continue;
    int flat = 0;
    for (const ArgProto& arg : op.output()) {
      for (const std::string& lbn : arg.lbn()) {
        const int index = flat++;
        if (index >= op.output_grad_sbp_hint_size()) continue;
        const NdSbp& hint = op.output_grad_sbp_hint(index);
        auto grad = summed_.find(lbn);
        if (hint.sbp_size() == 0 || grad == summed_.end()) continue;
        auto [it, inserted] = hints.emplace(grad->second, std::make_pair(hint, lbn));
        if (!inserted && it->second.first.SerializeAsString() != hint.SerializeAsString()) {
          return InvalidArgumentError(
              "autodiff: blobs '", it->second.second, "' and '", lbn, "' share the gradient '",
              grad->second, "' but their gradient SBP hints differ (HintGradSbp); hint one of "
              "them, or both alike");
        }
      }
    }
  }
  if (hints.empty()) return Status::OK();
  for (OpConf& op : *job_.mutable_op()) {
    if (!op.is_backward()) continue;
    int flat = 0;
    for (const ArgProto& arg : op.input()) {
      for (const std::string& lbn : arg.lbn()) {
        const int index = flat++;
        auto it = hints.find(lbn);
        if (it == hints.end()) continue;
        while (op.input_sbp_hint_size() <= index) op.add_input_sbp_hint();
        *op.mutable_input_sbp_hint(index) = it->second.first;
      }
    }
    while (op.input_sbp_hint_size() > 0 && op.input_sbp_hint_size() < flat) {
      op.add_input_sbp_hint();
    }
  }
  return Status::OK();
}

StatusOr<AutodiffResult> AutodiffPass::Run() {
  const std::string& loss_lbn = job_.conf().train().loss_lbn();
  if (loss_lbn.empty()) {
    return FailedPreconditionError("autodiff: job '", job_.conf().name(), "' has no loss");
  }
  ASSIGN_OR_RETURN(std::vector<int> order, TopologicalOrder(job_));
  RETURN_IF_ERROR(MarkBlobsDependingOnVariables(order));
  if (options_.loss_parts.empty()) {
    RETURN_IF_ERROR(SeedLoss(loss_lbn, 1.0));
  } else {
    const double weight = 1.0 / static_cast<double>(options_.loss_parts.size());
    for (const std::string& part : options_.loss_parts) RETURN_IF_ERROR(SeedLoss(part, weight));
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const OpConf forward = job_.op(*it);  // a copy: AddOp appends to job_
    RETURN_IF_ERROR(Differentiate(forward));
  }
  AutodiffResult result;
  for (int i = 0; i < forward_op_count_; ++i) {
    const OpConf& op = job_.op(i);
    if (!IsTrainableVariable(op)) continue;
    const std::string lbn = OutputLbn(op.name(), "out");
    if (!grads_.count(lbn)) {
      LOG(WARNING) << "autodiff: the loss '" << loss_lbn << "' does not depend on variable '"
                   << op.name() << "'; it will not be updated";
      continue;
    }
    ASSIGN_OR_RETURN(result.variable_grads[op.name()], SumGrads(lbn));
  }
  PruneUnusedBackwardOps(result.variable_grads);
  RETURN_IF_ERROR(ApplyGradHints());
  SetBlobDescs(descs_, &job_);
  result.job = std::move(job_);
  return result;
}

}  // namespace

StatusOr<AutodiffResult> Autodiff(const Job& job, const AutodiffOptions& options) {
  return AutodiffPass(job, options).Run();
}

}  // namespace oflite
