#include "oneflow_lite/runtime/actor_bodies.h"

#include <cstring>
#include <string>

#include "oneflow_lite/common/nd_sbp_view.h"

namespace oflite {
namespace {

template <typename T>
double SumOf(const Blob& blob) {
  double sum = 0;
  const T* data = static_cast<const T*>(blob.raw());
  for (int64_t i = 0; i < blob.elem_count(); ++i) sum += static_cast<double>(data[i]);
  return sum;
}

// On an asynchronous device the host touches registers only through the
// stream (Memcpy) and after Synchronize.
bool HostReadsThroughStream(const DeviceContext* device) {
  return device != nullptr && device->IsAsync();
}

}  // namespace

std::vector<const RegstDescProto*> DataRegsts(const TaskProto& task) {
  std::vector<const RegstDescProto*> data;
  for (const RegstDescProto& desc : task.produced()) {
    if (!desc.is_ctrl()) data.push_back(&desc);
  }
  return data;
}

double MeanOfBlobs(const std::vector<const Regst*>& regsts) {
  double sum = 0;
  int64_t count = 0;
  for (const Regst* regst : regsts) {
    for (const Blob& blob : regst->blobs) {
      switch (blob.dtype()) {
        case DT_FLOAT: sum += SumOf<float>(blob); break;
        case DT_DOUBLE: sum += SumOf<double>(blob); break;
        case DT_INT32: sum += SumOf<int32_t>(blob); break;
        case DT_INT64: sum += SumOf<int64_t>(blob); break;
        default: continue;
      }
      count += blob.elem_count();
    }
  }
  return count == 0 ? 0.0 : sum / static_cast<double>(count);
}

StatusOr<std::unique_ptr<ActBody>> ComputeBody::Create(const TaskProto& task,
                                                       const ActorEnv& env) {
  ASSIGN_OR_RETURN(std::unique_ptr<KernelRunner> kernels, KernelRunner::Create(task, env));
  return std::unique_ptr<ActBody>(new ComputeBody(std::move(kernels)));
}

StatusOr<std::unique_ptr<ActBody>> VariableBody::Create(const TaskProto& task,
                                                        const ActorEnv& env) {
  const std::string what = "variable task '" + task.name() + "'";
  const std::vector<const RegstDescProto*> outputs = DataRegsts(task);
  if (outputs.size() != 1 || outputs[0]->regst_num() != 1 || outputs[0]->blob_size() != 1) {
    return InvalidArgumentError(what, ": must produce one register with one blob and "
                                "regst_num 1 (it is updated in place)");
  }
  if (task.kernel_size() != 1) {
    return InvalidArgumentError(what, ": must have exactly one kernel (its initializer, "
                                "normally a 'variable' op); it has ", task.kernel_size());
  }
  std::unique_ptr<VariableBody> body(new VariableBody(task, env));
  ASSIGN_OR_RETURN(body->initializer_, KernelRunner::Create(task, env));
  body->part_.op_name = task.kernel(0).op().name();
  body->part_.parallel_id = task.parallel_ctx().parallel_id();
  body->part_.parallel_num = std::max<int64_t>(1, task.parallel_ctx().parallel_num());
  if (task.kernel(0).output_sbp_size() > 0) body->part_.sbp = task.kernel(0).output_sbp(0);
  // A hierarchical placement: the part as its 1-D view (common/nd_sbp_view.h),
  // which is what checkpoints and restores cut. Replicas of one part (the
  // devices that differ only on axes that do not split, e.g. the two rows
  // of a (B, S(1)) weight on 2x2) all restore it, but only the first saves
  // it: the same owner session/checkpoint_gather.h picks across machines.
  const ShapeProto& hierarchy = task.parallel_ctx().hierarchy();
  OneDimView view;
  if (hierarchy.dim_size() >= 2 && task.kernel(0).output_sbp_size() > 0 &&
      NdSbpOneDimView({hierarchy.dim().begin(), hierarchy.dim().end()},
                      body->part_.parallel_id, task.kernel(0).output_sbp(0), &view)) {
    body->part_.parallel_id = view.parallel_id;
    body->part_.parallel_num = view.parallel_num;
    body->part_.sbp.Clear();
    *body->part_.sbp.add_sbp() = view.sbp;
    body->owns_save_ = view.first_replica;
  }
  body->regst_ = env.regsts->Get(outputs[0]->regst_desc_id(), 0);
  return std::unique_ptr<ActBody>(std::move(body));
}

Blob* VariableBody::ValueBlob(ActContext* context) const {
  return &context->produced.at(regst_->desc->regst_desc_id())->blobs[0];
}

StatusOr<Blob> VariableBody::HostValue(const Blob& value, std::vector<char>* staging) const {
  if (!HostReadsThroughStream(env_->device)) return value;
  staging->assign(static_cast<size_t>(value.ByteSize()), 0);
  RETURN_IF_ERROR(
      env_->device->Memcpy(staging->data(), value.raw(), value.ByteSize(), CopyKind::kDeviceToHost));
  RETURN_IF_ERROR(env_->device->Synchronize());
  return Blob(staging->data(), value.desc());
}

Status VariableBody::Initialize(ActContext* context) {
  bool restored = false;
  if (env_->variables != nullptr) {
    Blob* value = ValueBlob(context);
    if (!HostReadsThroughStream(env_->device)) {
      ASSIGN_OR_RETURN(restored, env_->variables->Restore(part_, value));
    } else {
      std::vector<char> staging(static_cast<size_t>(value->ByteSize()), 0);
      Blob host(staging.data(), value->desc());
      ASSIGN_OR_RETURN(restored, env_->variables->Restore(part_, &host));
      if (restored) {
        RETURN_IF_ERROR(env_->device->Memcpy(value->raw(), staging.data(), value->ByteSize(),
                                             CopyKind::kHostToDevice));
        RETURN_IF_ERROR(env_->device->Synchronize());  // `staging` dies here
      }
    }
  }
  if (!restored) RETURN_IF_ERROR(initializer_->Run(context));
  initialized_ = true;
  last_saved_ = context->piece_id;
  return Status::OK();
}

Status VariableBody::Act(ActContext* context) {
  if (!initialized_) return Initialize(context);
  // The register is free again: every reader and the update of the previous
  // iteration returned it, so it holds the value after piece_id iterations.
  const int64_t completed = context->piece_id;
  if (env_->save_every > 0 && env_->variables != nullptr && owns_save_ &&
      completed % env_->save_every == 0 && completed != last_saved_) {
    std::vector<char> staging;
    ASSIGN_OR_RETURN(Blob value, HostValue(*ValueBlob(context), &staging));
    RETURN_IF_ERROR(env_->variables->Save(part_, completed, value));
    last_saved_ = completed;
  }
  return Status::OK();
}

Status VariableBody::OnFinish(int64_t end_piece) {
  if (env_->variables == nullptr || !initialized_ || !owns_save_ || end_piece == last_saved_) {
    return Status::OK();
  }
  last_saved_ = end_piece;
  std::vector<char> staging;
  ASSIGN_OR_RETURN(Blob value, HostValue(regst_->blobs[0], &staging));
  return env_->variables->Save(part_, end_piece, value);
}

StatusOr<std::unique_ptr<ActBody>> SinkBody::Create(const TaskProto& task, const ActorEnv& env) {
  std::unique_ptr<SinkBody> body(new SinkBody(task, env));
  ASSIGN_OR_RETURN(body->kernels_, KernelRunner::Create(task, env));
  return std::unique_ptr<ActBody>(std::move(body));
}

Status SinkBody::Act(ActContext* context) {
  RETURN_IF_ERROR(kernels_->Run(context));
  std::vector<std::pair<std::string, double>> metrics;
  for (const ConsumedRegst& consumed : task_->consumed()) {
    std::string name = consumed.name();
    bool listed = task_->sink().metric_size() == 0;
    bool is_output = false;
    for (const SinkMetric& metric : task_->sink().metric()) {
      if (metric.consumed_name() == consumed.name()) {
        name = metric.name();
        listed = true;
        is_output = metric.is_output();
      }
    }
    if (!listed) continue;  // e.g. a control register
    std::vector<const Regst*> parts;
    for (int64_t desc_id : consumed.regst_desc_id()) parts.push_back(context->consumed.at(desc_id));
    if (is_output) {
      if (env_->outputs == nullptr || parts.empty() || parts[0]->blobs.empty()) continue;
      RETURN_IF_ERROR(env_->outputs->OnOutput(context->piece_id, name, parts[0]->blobs[0])
                          .WithContext("output '" + name + "'"));
      continue;
    }
    metrics.emplace_back(name, MeanOfBlobs(parts));
  }
  if (env_->metrics != nullptr) env_->metrics->OnMetrics(context->piece_id, metrics);
  return Status::OK();
}

StatusOr<std::unique_ptr<ActBody>> CopyBody::Create(const TaskProto& task, const ActorEnv& env) {
  if (env.device == nullptr) {
    return InternalError("copy task '", task.name(), "': no device context");
  }
  if (task.device_type() != DEVICE_CPU && env.device->device_type() != task.device_type()) {
    return InvalidArgumentError("copy task '", task.name(), "' of a ",
                                DeviceType_Name(task.device_type()), " device runs on a ",
                                DeviceType_Name(env.device->device_type()), " stream");
  }
  const std::vector<const RegstDescProto*> outputs = DataRegsts(task);
  const ConsumedRegst* input = nullptr;
  for (const ConsumedRegst& consumed : task.consumed()) {
    if (consumed.name() == "in") input = &consumed;
  }
  if (input == nullptr || input->regst_desc_id_size() != 1 || outputs.size() != 1) {
    return InvalidArgumentError("copy task '", task.name(),
                                "': must consume one register 'in' and produce one");
  }
  const RegstDescProto* in = env.regsts->FindDesc(input->regst_desc_id(0));
  const RegstDescProto& out = *outputs[0];
  if (in->blob_size() != out.blob_size()) {
    return InvalidArgumentError("copy task '", task.name(), "': ", in->blob_size(),
                                " blobs in, ", out.blob_size(), " out");
  }
  for (int i = 0; i < out.blob_size(); ++i) {
    if (TensorDesc(in->blob(i).desc()) != TensorDesc(out.blob(i).desc())) {
      return InvalidArgumentError("copy task '", task.name(), "': blob ", i, " differs");
    }
  }
  const CopyKind kind = task.type() == TASK_COPY_H2D   ? CopyKind::kHostToDevice
                        : task.type() == TASK_COPY_D2H ? CopyKind::kDeviceToHost
                                                       : CopyKind::kHostToHost;
  return std::unique_ptr<ActBody>(
      new CopyBody(task, env, in->regst_desc_id(), out.regst_desc_id(), kind));
}

Status CopyBody::Act(ActContext* context) {
  Regst* in = context->consumed.at(in_);
  Regst* out = context->produced.at(out_);
  for (size_t i = 0; i < out->blobs.size(); ++i) {
    // Only a dynamic shape changes; rewriting an equal one would race with
    // stream-ordered readers of the copy still queued on the stream.
    if (out->blobs[i].shape() != in->blobs[i].shape()) {
      out->blobs[i].set_shape(in->blobs[i].shape());
    }
    Status copied = env_->device->Memcpy(out->blobs[i].raw(), in->blobs[i].raw(),
                                         in->blobs[i].ByteSize(), kind_);
    if (!copied.ok()) {
      return copied.WithContext("copy task '" + task_->name() + "', blob " + std::to_string(i) +
                                " (" + std::to_string(in->blobs[i].ByteSize()) +
                                " bytes) at iteration " + std::to_string(context->piece_id));
    }
  }
  return Status::OK();
}

}  // namespace oflite
