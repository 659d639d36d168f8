#include "oneflow_lite/runtime/kernel_runner.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "oneflow_lite/common/nd_sbp_view.h"
#include "oneflow_lite/common/trace/trace.h"

namespace oflite {
namespace {

StatusOr<TensorDesc> DescOfBinding(const BlobBinding& binding, const RegstStore& regsts) {
  const RegstDescProto* desc = regsts.FindDesc(binding.regst_desc_id());
  if (desc == nullptr || binding.blob_index() < 0 ||
      binding.blob_index() >= desc->blob_size()) {
    return InvalidArgumentError("binding of arg '", binding.arg(), "': no blob ",
                                binding.blob_index(), " in register ", binding.regst_desc_id());
  }
  return TensorDesc(desc->blob(binding.blob_index()).desc());
}

template <typename T>
int64_t FirstNonFinite(const Blob& blob) {
  const T* data = blob.data<T>();
  for (int64_t i = 0; i < blob.elem_count(); ++i) {
    if (!std::isfinite(data[i])) return i;
  }
  return -1;
}

// The register of `desc_id` in the act (the produced copy before the
// consumed one), or null.
Regst* FindActRegst(int64_t desc_id, const ActContext& context) {
  auto produced = context.produced.find(desc_id);
  if (produced != context.produced.end()) return produced->second;
  auto consumed = context.consumed.find(desc_id);
  return consumed != context.consumed.end() ? consumed->second : nullptr;
}

// ResolveBinding without a StatusOr on the act's path: null where it would
// fail (ResolveBinding then says why).
Blob* FindBoundBlob(const BlobBinding& binding, const ActContext& context) {
  Regst* regst = FindActRegst(binding.regst_desc_id(), context);
  const int index = binding.blob_index();
  if (regst == nullptr || index < 0 || index >= static_cast<int>(regst->blobs.size())) {
    return nullptr;
  }
  return &regst->blobs[index];
}

}  // namespace

StatusOr<Blob*> ResolveBinding(const BlobBinding& binding, ActContext* context) {
  if (Blob* blob = FindBoundBlob(binding, *context)) return blob;
  if (FindActRegst(binding.regst_desc_id(), *context) == nullptr) {
    return InvalidArgumentError("arg '", binding.arg(), "' is bound to register ",
                                binding.regst_desc_id(),
                                " which the task neither consumes nor produces");
  }
  return InvalidArgumentError("arg '", binding.arg(), "': no blob ", binding.blob_index(),
                              " in register ", binding.regst_desc_id());
}

StatusOr<std::unique_ptr<KernelRunner>> KernelRunner::Create(const TaskProto& task,
                                                             const ActorEnv& env) {
  std::unique_ptr<KernelRunner> runner(new KernelRunner(task, env));
  for (const KernelConf& conf : task.kernel()) {
    const std::string where = "task '" + task.name() + "', op '" + conf.op().name() + "'";
    KernelInitContext init;
    init.op = &conf.op();
    init.parallel_id = task.parallel_ctx().parallel_id();
    init.parallel_num = std::max<int64_t>(1, task.parallel_ctx().parallel_num());
    KernelOneDimView(task, conf, &init.parallel_id, &init.parallel_num);
    init.seed = env.seed;
    init.device = env.device;
    for (const BlobBinding& binding : conf.input()) {
      StatusOr<TensorDesc> desc = DescOfBinding(binding, *env.regsts);
      if (!desc.ok()) return desc.status().WithContext(where);
      init.inputs[binding.arg()].push_back(*desc);
    }
    for (const BlobBinding& binding : conf.output()) {
      StatusOr<TensorDesc> desc = DescOfBinding(binding, *env.regsts);
      if (!desc.ok()) return desc.status().WithContext(where);
      init.outputs[binding.arg()].push_back(*desc);
    }
    StatusOr<std::unique_ptr<Kernel>> kernel =
        CreateAndInitKernel(init, task.device_type(), conf.dtype());
    if (!kernel.ok()) return kernel.status().WithContext(where);
    Entry entry{&conf, std::move(kernel).value()};
    if (env.device == nullptr || !env.device->IsAsync()) {
      entry.context = std::make_unique<KernelContext>(conf.op(), env.device, 0);
      for (const BlobBinding& binding : conf.input()) entry.context->BindInput(binding.arg(), nullptr);
      for (const BlobBinding& binding : conf.output()) {
        entry.context->BindOutput(binding.arg(), nullptr);
      }
    }
    runner->entries_.push_back(std::move(entry));
  }
  if (!task.graph_replay()) return runner;
  // A device without graphs (the CPU) runs such a task kernel by kernel as
  // planned; only a real reason to give up is worth a note.
  if (env.device == nullptr || !env.device->SupportsGraphs()) return runner;
  const std::string why_not = WhyNoReplay(task, env);
  runner->replay_ = why_not.empty();
  if (!why_not.empty() && env.graph_stats != nullptr) {
    env.graph_stats->NoteFallback("task '" + task.name() + "' runs stream-ordered: " + why_not);
  }
  return runner;
}

std::string KernelRunner::WhyNoReplay(const TaskProto& task, const ActorEnv& env) {
  if (env.check_nan) return "the NaN check is on";
  if (!env.graph_replay) return "graph replay is off";
  for (const KernelConf& conf : task.kernel()) {
    for (const auto* bindings : {&conf.input(), &conf.output()}) {
      for (const BlobBinding& binding : *bindings) {
        const RegstDescProto* desc = env.regsts->FindDesc(binding.regst_desc_id());
        if (desc != nullptr && desc->is_dynamic()) {
          return "register " + std::to_string(binding.regst_desc_id()) + " is dynamic";
        }
      }
    }
  }
  return "";
}

Status KernelRunner::Run(ActContext* context) {
  last_piece_ = context->piece_id;
  return replay_ ? RunReplayed(context) : RunAll(context);
}

Status KernelRunner::RunAll(ActContext* context) {
  for (const Entry& entry : entries_) RETURN_IF_ERROR(RunOne(entry, context));
  return Status::OK();
}

void KernelRunner::StopReplay(const std::string& why) {
  replay_ = false;
  const std::string note = "task '" + task_->name() + "' runs stream-ordered: " + why;
  std::fprintf(stderr, "%s\n", note.c_str());
  if (env_->graph_stats != nullptr) env_->graph_stats->NoteFallback(note);
}

Status KernelRunner::RunReplayed(ActContext* context) {
  // The register copies of the act fix the address of every blob bound
  // (a copy's blobs sit at fixed offsets in its memory).
  std::vector<const void*> key;
  key.reserve(context->consumed.size() + context->produced.size());
  for (const auto& [id, regst] : context->consumed) key.push_back(regst);
  for (const auto& [id, regst] : context->produced) key.push_back(regst);
  const DeviceContext* device = env_->device;
  auto found = graphs_.find(key);
  if (found != graphs_.end() && found->second.graph != nullptr) {
    trace::Slice traced("graph", task_->name(), &graph_trace_name_);
    RETURN_IF_ERROR(device->LaunchGraph(*found->second.graph));
    if (env_->graph_stats != nullptr) env_->graph_stats->replayed.fetch_add(1);
    return Status::OK();
  }
  if (found == graphs_.end()) {
    if (static_cast<int>(graphs_.size()) >= kMaxGraphs) return RunAll(context);
    found = graphs_.emplace(std::move(key), KeyedGraph()).first;
  }
  // The first act of a key runs uncaptured (lazy allocations, algorithm
  // choice happen outside the capture); the second is captured.
  if (!found->second.ran_uncaptured) {
    found->second.ran_uncaptured = true;
    return RunAll(context);
  }
  Status began = device->BeginCapture();
  if (!began.ok()) {
    StopReplay("BeginCapture failed: " + began.ToString());
    return RunAll(context);
  }
  Status ran = RunAll(context);
  StatusOr<std::unique_ptr<DeviceGraph>> graph = device->EndCapture();
  if (!graph.ok()) {
    // Nothing ran; the capture broke (maybe a kernel's own call broke it).
    StopReplay("capture failed: " + (ran.ok() ? graph.status() : ran).ToString());
    return RunAll(context);
  }
  RETURN_IF_ERROR(ran);  // a kernel's own error: the capture was fine
  found->second.graph = std::move(graph).value();
  if (env_->graph_stats != nullptr) {
    if (!captured_any_) env_->graph_stats->tasks.fetch_add(1);
    env_->graph_stats->captured.fetch_add(1);
  }
  captured_any_ = true;
  // Capture only recorded the work: launching it is this act's run.
  trace::Slice traced("graph", task_->name(), &graph_trace_name_);
  return device->LaunchGraph(*found->second.graph);
}

Status KernelRunner::ReportDeferredErrors() const {
  if (last_piece_ < 0) return Status::OK();
  for (const Entry& entry : entries_) {
    const KernelContext names(entry.conf->op(), env_->device, last_piece_);
    Status late = entry.kernel->ReportDeferredErrors(names);
    if (!late.ok()) return late.WithContext("task '" + task_->name() + "', after its last act");
  }
  return Status::OK();
}

Status KernelRunner::RunInline(const Entry& entry, ActContext* context) {
  KernelContext* call = entry.context.get();
  const KernelConf& conf = *entry.conf;
  for (int k = 0; k < conf.input_size(); ++k) {
    Blob* blob = FindBoundBlob(conf.input(k), *context);
    if (blob == nullptr) return ResolveBinding(conf.input(k), context).status();
    call->RebindInput(k, blob);
  }
  for (int k = 0; k < conf.output_size(); ++k) {
    Blob* blob = FindBoundBlob(conf.output(k), *context);
    if (blob == nullptr) return ResolveBinding(conf.output(k), context).status();
    call->RebindOutput(k, blob);
  }
  const int64_t piece = context->piece_id;
  call->set_iteration(piece);
  const OpConf& op = conf.op();
  Status status;
  {
    trace::Slice traced("kernel", op.name(), &entry.trace_name);
    traced.MeasureCpu();
    status = entry.kernel->Forward(call);
  }
  if (!status.ok()) {
    // Kernels name their op and iteration through ctx.Error; add it if not.
    if (status.message().find("'" + op.name() + "'") != std::string::npos) return status;
    return status.WithContext("op '" + op.name() + "' (" + op.op_type() + ") at iteration " +
                              std::to_string(piece));
  }
  if (!env_->check_nan) return Status::OK();
  std::vector<const Blob*> outputs;
  for (int k = 0; k < call->bound_output_count(); ++k) outputs.push_back(call->bound_output(k));
  return CheckFinite(entry, outputs, piece);
}

Status KernelRunner::RunOne(const Entry& entry, ActContext* context) {
  if (entry.context != nullptr) return RunInline(entry, context);
  // Bindings resolve on the actor's thread; the kernel runs in stream order
  // (now, or later on the stream's own thread: DeviceContext::Launch).
  auto bound = std::make_shared<BoundBlobs>();
  for (const BlobBinding& binding : entry.conf->input()) {
    ASSIGN_OR_RETURN(Blob * blob, ResolveBinding(binding, context));
    bound->inputs.emplace_back(binding.arg(), blob);
  }
  for (const BlobBinding& binding : entry.conf->output()) {
    ASSIGN_OR_RETURN(Blob * blob, ResolveBinding(binding, context));
    bound->outputs.emplace_back(binding.arg(), blob);
  }
  const OpConf* op = &entry.conf->op();
  Kernel* kernel = entry.kernel.get();
  const DeviceContext* device = env_->device;
  const int64_t piece = context->piece_id;
  trace::InternedName* trace_name = &entry.trace_name;
  auto work = [op, kernel, device, piece, bound, trace_name]() -> Status {
    KernelContext kernel_context(*op, device, piece);
    for (const auto& [arg, blob] : bound->inputs) kernel_context.BindInput(arg, blob);
    for (const auto& [arg, blob] : bound->outputs) kernel_context.BindOutput(arg, blob);
    // Recorded on the thread that runs the kernel when it has a trace track
    // (a stream thread; a device's own worker thread records nothing).
    trace::Slice traced("kernel", op->name(), trace_name);
    traced.MeasureCpu();
    Status status = kernel->Forward(&kernel_context);
    if (status.ok()) return status;
    // Kernels name their op and iteration through ctx.Error; add it if not.
    if (status.message().find("'" + op->name() + "'") != std::string::npos) return status;
    return status.WithContext("op '" + op->name() + "' (" + op->op_type() + ") at iteration " +
                              std::to_string(piece));
  };
  if (device == nullptr) {
    RETURN_IF_ERROR(work());
  } else {
    RETURN_IF_ERROR(device->Launch(std::move(work)));
  }
  if (!env_->check_nan) return Status::OK();
  std::vector<const Blob*> outputs;
  for (const auto& [arg, blob] : bound->outputs) outputs.push_back(blob);
  return CheckFinite(entry, outputs, piece);
}

Status KernelRunner::CheckFinite(const Entry& entry, const std::vector<const Blob*>& outputs,
                                 int64_t piece) const {
  const KernelContext names(entry.conf->op(), env_->device, piece);  // for Error()
  for (size_t k = 0; k < outputs.size(); ++k) {
    const Blob* output = outputs[k];
    const BlobBinding& binding = entry.conf->output(static_cast<int>(k));
    if (output->dtype() != DT_FLOAT && output->dtype() != DT_DOUBLE) continue;
    // An asynchronous device's output is read through its stream, once done.
    std::vector<char> staging;
    Blob host_copy;
    if (env_->device != nullptr && env_->device->IsAsync()) {
      staging.resize(static_cast<size_t>(output->ByteSize()));
      RETURN_IF_ERROR(env_->device->Memcpy(staging.data(), output->raw(), output->ByteSize(),
                                           CopyKind::kDeviceToHost));
      RETURN_IF_ERROR(env_->device->Synchronize());
      host_copy = Blob(staging.data(), output->desc());
      output = &host_copy;
    }
    const Blob& blob = *output;
    int64_t bad = -1;
    if (blob.dtype() == DT_FLOAT) bad = FirstNonFinite<float>(blob);
    if (blob.dtype() == DT_DOUBLE) bad = FirstNonFinite<double>(blob);
    if (bad >= 0) {
      return names.Error("NaN/Inf in output '", binding.arg(), "'[", binding.index(),
                         "] at element ", bad, " (NaN check enabled)");
    }
  }
  return Status::OK();
}

}  // namespace oflite
