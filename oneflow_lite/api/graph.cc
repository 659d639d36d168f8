#include "oneflow_lite/api/graph.h"

#include <algorithm>

#include "oneflow_lite/api/autodiff.h"
#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/api/micro_batches.h"
#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/common/version.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"

namespace oflite {
namespace {

bool IsFloating(DataType dtype) { return dtype == DT_FLOAT || dtype == DT_DOUBLE; }

std::string DescribeInputs(const OpConf& op, const std::map<std::string, TensorDesc>& descs) {
  std::string out;
  for (const ArgProto& arg : op.input()) {
    for (int i = 0; i < arg.lbn_size(); ++i) {
      auto it = descs.find(arg.lbn(i));
      if (!out.empty()) out += ", ";
      out += arg.name() + (arg.lbn_size() > 1 ? "[" + std::to_string(i) + "]" : "") + "=" +
             (it == descs.end() ? "?" : it->second.ToString());
    }
  }
  return out;
}

}  // namespace

Graph::Graph(std::string name, int64_t seed) : name_(std::move(name)), seed_(seed) {
  default_placement_ = Placement().proto();
}

void Graph::RecordError(const Status& status) {
  if (status_.ok() && !status.ok()) status_ = status.WithContext("graph '" + name_ + "'");
}

// ---- Configuration ---------------------------------------------------------

void Graph::SetPlacement(const Placement& placement) {
  default_placement_ = placement.proto();
  placement_set_ = true;
}

void Graph::SetPlacement(const StatusOr<Placement>& placement) {
  if (!placement.ok()) return RecordError(placement.status());
  SetPlacement(*placement);
}

Graph::PlacementScope::PlacementScope(Graph* graph, bool restore, PlacementProto previous,
                                      bool had_previous)
    : graph_(graph),
      restore_(restore),
      previous_(std::move(previous)),
      had_previous_(had_previous) {}

Graph::PlacementScope::PlacementScope(PlacementScope&& other) noexcept
    : graph_(other.graph_),
      restore_(other.restore_),
      previous_(std::move(other.previous_)),
      had_previous_(other.had_previous_) {
  other.restore_ = false;
}

Graph::PlacementScope::~PlacementScope() {
  if (!restore_) return;
  graph_->has_scope_placement_ = had_previous_;
  graph_->scope_placement_ = previous_;
}

Graph::PlacementScope Graph::WithPlacement(const Placement& placement) {
  PlacementScope scope(this, true, scope_placement_, has_scope_placement_);
  has_scope_placement_ = true;
  scope_placement_ = placement.proto();
  return scope;
}

Graph::PlacementScope Graph::WithPlacement(const StatusOr<Placement>& placement) {
  if (!placement.ok()) {
    RecordError(placement.status());
    return PlacementScope(this, false, PlacementProto(), false);
  }
  return WithPlacement(*placement);
}

void Graph::HintSbp(const Tensor& tensor, const SbpParallel& sbp) {
  NdSbp nd;
  *nd.add_sbp() = sbp;
  HintSbp(tensor, nd);
}

void Graph::HintSbp(const Tensor& tensor, const NdSbp& sbp) {
  int index = 0, outputs = 0;
  OpConf* op = HintedOutput("HintSbp", tensor, &index, &outputs);
  if (op == nullptr) return;
  while (op->output_sbp_hint_size() < outputs) op->add_output_sbp_hint();
  *op->mutable_output_sbp_hint(index) = sbp;
}

void Graph::HintGradSbp(const Tensor& tensor, const SbpParallel& sbp) {
  NdSbp nd;
  *nd.add_sbp() = sbp;
  HintGradSbp(tensor, nd);
}

void Graph::HintGradSbp(const Tensor& tensor, const NdSbp& sbp) {
  int index = 0, outputs = 0;
  OpConf* op = HintedOutput("HintGradSbp", tensor, &index, &outputs);
  if (op == nullptr) return;
  if (sbp.sbp_size() == 0) {
    return RecordError(InvalidArgumentError("HintGradSbp: empty SBP for tensor '", tensor.lbn,
                                            "'; give one SBP, e.g. B"));
  }
  while (op->output_grad_sbp_hint_size() < outputs) op->add_output_grad_sbp_hint();
  *op->mutable_output_grad_sbp_hint(index) = sbp;
}

OpConf* Graph::HintedOutput(const char* what, const Tensor& tensor, int* index, int* outputs) {
  if (!ok() || !CheckInputs(what, {&tensor})) return nullptr;
  std::string op_name, arg;
  OpConf* op = SplitLbn(tensor.lbn, &op_name, &arg) ? FindMutableOp(&job_, op_name) : nullptr;
  if (op == nullptr) {
    RecordError(NotFoundError(what, ": tensor '", tensor.lbn, "' is not in this graph"));
    return nullptr;
  }
  *index = -1;
  *outputs = 0;
  for (const ArgProto& output : op->output()) {
    for (const std::string& lbn : output.lbn()) {
      if (lbn == tensor.lbn) *index = *outputs;
      ++*outputs;
    }
  }
  CHECK_GE(*index, 0) << tensor.lbn;
  return op;
}

void Graph::SetIterations(int64_t iterations) {
  if (iterations < 0) {
    return RecordError(InvalidArgumentError("SetIterations: negative count ", iterations));
  }
  iterations_ = iterations;
}

void Graph::SetEpochs(int64_t epochs) {
  if (epochs <= 0) return RecordError(InvalidArgumentError("SetEpochs: want > 0, got ", epochs));
  epochs_ = epochs;
}

void Graph::AddMetric(const std::string& name, const Tensor& scalar) {
  if (!ok() || !CheckInputs("AddMetric '" + name + "'", {&scalar})) return;
  if (name.empty()) return RecordError(InvalidArgumentError("AddMetric: empty metric name"));
  if (scalar.desc.shape.elem_count() != 1) {
    return RecordError(
        InvalidArgumentError("metric '", name, "' must be a scalar, got ", scalar.desc.ToString()));
  }
  for (const auto& [existing, lbn] : metrics_) {
    if (existing == name) {
      return RecordError(AlreadyExistsError("metric name '", name, "' is already used"));
    }
  }
  metrics_.emplace_back(name, scalar.lbn);
}

void Graph::AddOutput(const std::string& name, const Tensor& tensor) {
  if (!ok() || !CheckInputs("AddOutput '" + name + "'", {&tensor})) return;
  if (name.empty() || name.find_first_of(" \t\n") != std::string::npos) {
    return RecordError(InvalidArgumentError("AddOutput: output name '", name,
                                            "' must be non-empty without whitespace"));
  }
  for (const auto& [existing, lbn] : metrics_) {
    if (existing == name) {
      return RecordError(AlreadyExistsError("output name '", name, "' is already a metric"));
    }
  }
  for (const auto& [existing, lbn] : outputs_) {
    if (existing == name) {
      return RecordError(AlreadyExistsError("output name '", name, "' is already used"));
    }
  }
  outputs_.emplace_back(name, tensor.lbn);
}

// ---- Op emission -------------------------------------------------------------

bool Graph::CheckInputs(const std::string& what, const std::vector<const Tensor*>& inputs) {
  for (const Tensor* tensor : inputs) {
    if (!tensor->valid()) {
      RecordError(InvalidArgumentError(what, ": an input tensor is invalid (default-constructed)"));
      return false;
    }
    if (!descs_.count(tensor->lbn)) {
      RecordError(NotFoundError(what, ": tensor '", tensor->lbn, "' is not in this graph"));
      return false;
    }
  }
  return true;
}

std::string Graph::UniqueName(const std::string& kind, const std::string& requested) {
  if (requested.empty()) return MakeUniqueName(kind, &used_names_);
  if (!used_names_.insert(requested).second) {
    RecordError(AlreadyExistsError("name '", requested, "' is already used"));
  }
  return requested;
}

std::vector<Tensor> Graph::Emit(OpConf op) {
  if (!ok()) return {};
  if (op.name().empty()) op.set_name(UniqueName(op.op_type()));
  used_names_.insert(op.name());
  for (ArgProto& arg : *op.mutable_output()) {
    if (arg.lbn_size() == 0) arg.add_lbn();
    for (int i = 0; i < arg.lbn_size(); ++i) arg.set_lbn(i, OutputLbn(op.name(), arg.name(), i));
  }
  if (has_scope_placement_ && !op.has_placement()) *op.mutable_placement() = scope_placement_;
  StatusOr<const OpDef*> def = LookupOpDef(op.op_type(), op.name());
  if (!def.ok()) {
    RecordError(def.status());
    return {};
  }
  op.clear_mutable_input();
  for (const std::string& arg : (*def)->mutable_inputs) op.add_mutable_input(arg);
  Status status = InferAndRecord(op, &descs_);
  if (!status.ok()) {
    RecordError(
        Status(status.code(), status.message() + " [inputs: " + DescribeInputs(op, descs_) + "]"));
    return {};
  }
  std::vector<Tensor> outputs;
  for (const ArgProto& arg : op.output()) {
    for (const std::string& lbn : arg.lbn()) outputs.push_back(Tensor{lbn, descs_.at(lbn)});
  }
  *job_.add_op() = std::move(op);
  return outputs;
}

Tensor Graph::EmitOne(OpConf op) {
  std::vector<Tensor> outputs = Emit(std::move(op));
  return outputs.empty() ? Tensor() : outputs.front();
}

Tensor Graph::Unary(const std::string& op_type, const std::string& input_arg, const Tensor& x,
                    const std::string& output_arg) {
  if (!ok() || !CheckInputs(op_type, {&x})) return {};
  return EmitOne(OpConfBuilder(op_type, UniqueName(op_type))
                     .Input(input_arg, x.lbn)
                     .Output(output_arg)
                     .Build());
}

Tensor Graph::Binary(const std::string& what, const std::string& op_type, const Tensor& x,
                     const Tensor& y) {
  if (!ok() || !CheckInputs(what, {&x, &y})) return {};
  return EmitOne(OpConfBuilder(op_type, UniqueName(op_type))
                     .Input("x", x.lbn)
                     .Input("y", y.lbn)
                     .Output("out")
                     .Build());
}

// An empty axis list (reduce everything) is left out: an empty `ints`
// attribute would not record its type.
Tensor Graph::Reduce(const std::string& op_type, const std::string& name, const Tensor& x,
                     const std::vector<int64_t>& axes, bool keepdims) {
  OpConfBuilder builder(op_type, name);
  builder.Input("x", x.lbn).Output("y").Attr("keepdims", keepdims);
  if (!axes.empty()) builder.Attr("axis", axes);
  return EmitOne(builder.Build());
}

std::vector<Tensor> Graph::AddOp(OpConf op) {
  if (!ok()) return {};
  for (const ArgProto& arg : op.input()) {
    for (const std::string& lbn : arg.lbn()) {
      if (!descs_.count(lbn)) {
        RecordError(NotFoundError("op '", op.name(), "' (", op.op_type(), "): input '", arg.name(),
                                  "' reads '", lbn, "', not a blob of this graph"));
        return {};
      }
    }
  }
  if (!op.name().empty() && used_names_.count(op.name())) {
    RecordError(AlreadyExistsError("op name '", op.name(), "' is already used"));
    return {};
  }
  return Emit(std::move(op));
}

Tensor Graph::Parameter(const std::string& name, const Shape& shape, DataType dtype,
                        const Initializer& init, bool trainable) {
  return EmitOne(
      MakeVariableOp(UniqueName(name), TensorDesc(shape, dtype), init, trainable, NextSeed()));
}

void Graph::RecordDataSource(int64_t batch_size, int64_t train_examples) {
  if (batch_size_ == 0) batch_size_ = batch_size;
  if (train_examples > 0 && train_source_size_ == 0) {
    train_source_size_ = train_examples;
    train_batch_size_ = batch_size;
  }
}

// ---- Variables -----------------------------------------------------------------

Tensor Graph::Variable(const std::string& name, const Shape& shape,
                       const VariableOptions& options) {
  if (!ok()) return {};
  const std::string op_name = UniqueName("variable", name);
  return EmitOne(MakeVariableOp(op_name, TensorDesc(shape, options.dtype),
                                ResolveInitializer(options.initializer, shape), options.trainable,
                                NextSeed()));
}

// ---- Training and Build ------------------------------------------------------

void Graph::Minimize(const Tensor& loss, const Optimizer& optimizer,
                     const MinimizeOptions& options) {
  if (!ok() || !CheckInputs("Minimize", {&loss})) return;
  if (is_train_) return RecordError(FailedPreconditionError("Minimize called twice"));
  if (!IsFloating(loss.dtype()) || loss.desc.shape.elem_count() != 1) {
    return RecordError(
        InvalidArgumentError("Minimize: the loss '", loss.lbn, "' must be a floating scalar, got ",
                             loss.desc.ToString(), " (reduce it, e.g. with ReduceMean)"));
  }
  is_train_ = true;
  loss_lbn_ = loss.lbn;
  optimizer_ = MakeOptimizerConf(optimizer, options);
}

StatusOr<int64_t> Graph::TotalIterations() const {
  if (iterations_ >= 0) return iterations_;
  if (epochs_ > 0 && train_source_size_ == 0) {
    return FailedPreconditionError("graph '", name_,
                                   "': SetEpochs needs a Fashion-MNIST training source; use "
                                   "SetIterations");
  }
  if (train_source_size_ == 0) return int64_t{0};
  int64_t epochs = epochs_ > 0 ? epochs_ : 1;
  return epochs * train_source_size_ / train_batch_size_;
}

StatusOr<Job> Graph::BuildForward() const {
  RETURN_IF_ERROR(status_);
  ASSIGN_OR_RETURN(int64_t total_iters, TotalIterations());
  Job job = job_;
  job.set_version(kJobVersion);
  JobConf* conf = job.mutable_conf();
  conf->set_name(name_);
  conf->set_seed(seed_);
  *conf->mutable_default_placement() = default_placement_;
  conf->set_is_train(is_train_);
  conf->set_total_iters(total_iters);
  conf->set_batch_size(batch_size_);
  TrainConf* train = conf->mutable_train();
  if (is_train_) {
    train->set_loss_lbn(loss_lbn_);
    *train->mutable_optimizer() = optimizer_;
    train->mutable_optimizer()->mutable_lr()->set_total_iters(total_iters);
    ArgProto* metric = train->add_metric();
    metric->set_name("loss");
    metric->add_lbn(loss_lbn_);
  }
  for (const auto& [name, lbn] : metrics_) {
    if (is_train_ && name == "loss") {
      if (lbn == loss_lbn_) continue;  // already reported first
      return InvalidArgumentError("graph '", name_, "': metric 'loss' is '", lbn,
                                  "', but the minimized loss is '", loss_lbn_, "'");
    }
    ArgProto* metric = train->add_metric();
    metric->set_name(name);
    metric->add_lbn(lbn);
  }
  for (const auto& [name, lbn] : outputs_) {
    ArgProto* output = train->add_output();
    output->set_name(name);
    output->add_lbn(lbn);
  }
  SetBlobDescs(descs_, &job);
  return job;
}

void Graph::SetMicroBatches(int64_t count, PipelineSchedule schedule) {
  if (count < 1) {
    return RecordError(InvalidArgumentError("SetMicroBatches: micro-batches ", count,
                                            " must be at least 1 (1: no micro-batches)"));
  }
  if (schedule != PIPELINE_GPIPE && schedule != PIPELINE_1F1B) {
    return RecordError(InvalidArgumentError("SetMicroBatches: pipeline schedule ",
                                            PipelineSchedule_Name(schedule),
                                            "; use PIPELINE_GPIPE or PIPELINE_1F1B"));
  }
  micro_batches_ = count;
  pipeline_schedule_ = schedule;
}

StatusOr<Job> Graph::Build() const {
  ASSIGN_OR_RETURN(Job job, BuildForward());
  const std::string where = "graph '" + name_ + "'";
  if (!is_train_) {
    if (micro_batches_ > 1) {
      return FailedPreconditionError(where, ": micro-batches ", micro_batches_,
                                     " need a training graph (Minimize)");
    }
    return job;
  }
  AutodiffOptions autodiff_options;
  if (micro_batches_ > 1) {
    StatusOr<MicroBatchedJob> unrolled = UnrollMicroBatches(job, micro_batches_, pipeline_schedule_);
    if (!unrolled.ok()) return unrolled.status().WithContext(where);
    job = std::move(unrolled->job);
    autodiff_options.loss_parts = std::move(unrolled->loss_parts);
  }
  StatusOr<AutodiffResult> autodiff = Autodiff(job, autodiff_options);
  if (!autodiff.ok()) return autodiff.status().WithContext(where);
  StatusOr<Job> trained = AddOptimizerOps(autodiff->job, autodiff->variable_grads);
  if (!trained.ok()) return trained.status().WithContext(where);
  return trained;
}

}  // namespace oflite
