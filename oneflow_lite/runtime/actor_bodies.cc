#include "oneflow_lite/runtime/actor_bodies.h"

#include <cstring>

namespace oflite {
namespace {

template <typename T>
double SumOf(const Blob& blob) {
  double sum = 0;
  const T* data = static_cast<const T*>(blob.raw());
  for (int64_t i = 0; i < blob.elem_count(); ++i) sum += static_cast<double>(data[i]);
  return sum;
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
  body->regst_ = env.regsts->Get(outputs[0]->regst_desc_id(), 0);
  return std::unique_ptr<ActBody>(std::move(body));
}

Blob* VariableBody::ValueBlob(ActContext* context) const {
  return &context->produced.at(regst_->desc->regst_desc_id())->blobs[0];
}

Status VariableBody::Initialize(ActContext* context) {
  bool restored = false;
  if (env_->variables != nullptr) {
    ASSIGN_OR_RETURN(restored, env_->variables->Restore(part_, ValueBlob(context)));
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
  if (env_->save_every > 0 && env_->variables != nullptr && completed % env_->save_every == 0 &&
      completed != last_saved_) {
    RETURN_IF_ERROR(env_->variables->Save(part_, completed, *ValueBlob(context)));
    last_saved_ = completed;
  }
  return Status::OK();
}

Status VariableBody::OnFinish(int64_t end_piece) {
  if (env_->variables == nullptr || !initialized_ || end_piece == last_saved_) {
    return Status::OK();
  }
  last_saved_ = end_piece;
  return env_->variables->Save(part_, end_piece, regst_->blobs[0]);
}

StatusOr<std::unique_ptr<ActBody>> SinkBody::Create(const TaskProto& task, const ActorEnv& env) {
  std::unique_ptr<SinkBody> body(new SinkBody(task, env));
  ASSIGN_OR_RETURN(body->kernels_, KernelRunner::Create(task, env));
  return std::unique_ptr<ActBody>(std::move(body));
}

Status SinkBody::Act(ActContext* context) {
  RETURN_IF_ERROR(kernels_->Run(context));
  if (env_->metrics == nullptr) return Status::OK();
  std::vector<std::pair<std::string, double>> metrics;
  for (const ConsumedRegst& consumed : task_->consumed()) {
    std::string name = consumed.name();
    bool listed = task_->sink().metric_size() == 0;
    for (const SinkMetric& metric : task_->sink().metric()) {
      if (metric.consumed_name() == consumed.name()) {
        name = metric.name();
        listed = true;
      }
    }
    if (!listed) continue;  // e.g. a control register
    std::vector<const Regst*> parts;
    for (int64_t desc_id : consumed.regst_desc_id()) parts.push_back(context->consumed.at(desc_id));
    metrics.emplace_back(name, MeanOfBlobs(parts));
  }
  env_->metrics->OnMetrics(context->piece_id, metrics);
  return Status::OK();
}

StatusOr<std::unique_ptr<ActBody>> CopyBody::Create(const TaskProto& task, const ActorEnv& env) {
  if (task.device_type() == DEVICE_CUDA) {
    return UnimplementedError("copy task '", task.name(), "': CUDA copies need --config=cuda");
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
  return std::unique_ptr<ActBody>(new CopyBody(task, in->regst_desc_id(), out.regst_desc_id()));
}

Status CopyBody::Act(ActContext* context) {
  Regst* in = context->consumed.at(in_);
  Regst* out = context->produced.at(out_);
  for (size_t i = 0; i < out->blobs.size(); ++i) {
    out->blobs[i].set_shape(in->blobs[i].shape());
    if (in->blobs[i].ByteSize() > 0) {
      std::memcpy(out->blobs[i].raw(), in->blobs[i].raw(), in->blobs[i].ByteSize());
    }
  }
  return Status::OK();
}

}  // namespace oflite
