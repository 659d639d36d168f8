#include "tools/gpu/single_gpu_executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>

#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/reference/op_by_op.h"

namespace oflite {
namespace {

constexpr int64_t kAlign = 256;

int64_t Aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

StatusOr<std::unique_ptr<SingleGpuExecutor>> SingleGpuExecutor::Create(
    const Job& job, const SingleGpuOptions& options) {
  if (options.time_ops && options.graph_replay) {
    return InvalidArgumentError("single-GPU executor: time_ops and graph_replay exclude each other "
                                "(a replayed graph has no per-op events)");
  }
  std::unique_ptr<SingleGpuExecutor> executor(new SingleGpuExecutor(job, options));
  RETURN_IF_ERROR(executor->Prepare().WithContext("single-GPU executor, job '" +
                                                  job.conf().name() + "'"));
  return executor;
}

Status SingleGpuExecutor::Prepare() {
  ASSIGN_OR_RETURN(cuda_, CudaDeviceContext::Create(options_.device_index));
  RETURN_IF_ERROR(ReinferBlobDescs(&job_));
  const BlobDescMap descs = BlobDescsOf(job_);
  ASSIGN_OR_RETURN(std::vector<int> order, TopologicalOrder(job_));

  // Which ops run on the host, and so which blobs need pinned staging.
  int64_t device_bytes = 0, pinned_bytes = 0;
  for (int index : order) {
    const OpConf& op = job_.op(index);
    OpState state;
    state.op = &op;
    state.is_variable = op.op_type() == "variable";
    state.on_host = !HasKernel(op.op_type(), DEVICE_CUDA, KernelDtypeOf(op, descs));
    if (state.on_host && op.input_size() > 0) {
      return UnimplementedError("op '", op.name(), "' (", op.op_type(),
                                ") has no CUDA kernel and is not a source");
    }
    for (const ArgProto& arg : op.output()) {
      for (const std::string& lbn : arg.lbn()) {
        BlobSlot& slot = blobs_[lbn];
        slot.desc = descs.at(lbn);
        device_bytes += Aligned(slot.desc.ByteSize());
        if (state.on_host) pinned_bytes += Aligned(slot.desc.ByteSize());
      }
    }
    ops_.push_back(std::move(state));
  }
  ASSIGN_OR_RETURN(device_block_, CudaMemoryBlock::AllocateDevice(
                                      options_.device_index, device_bytes,
                                      "cuda:" + std::to_string(options_.device_index)));
  ASSIGN_OR_RETURN(pinned_block_, CudaMemoryBlock::AllocatePinnedHost(pinned_bytes, "pinned_host"));
  int64_t device_offset = 0, pinned_offset = 0;
  for (OpState& state : ops_) {
    for (const ArgProto& arg : state.op->output()) {
      for (const std::string& lbn : arg.lbn()) {
        BlobSlot& slot = blobs_.at(lbn);
        slot.device = device_block_->data() + device_offset;
        device_offset += Aligned(slot.desc.ByteSize());
        if (state.on_host) {
          slot.host = pinned_block_->data() + pinned_offset;
          pinned_offset += Aligned(slot.desc.ByteSize());
        }
      }
    }
  }
  for (OpState& state : ops_) {
    const OpConf& op = *state.op;
    const DeviceContext* device =
        state.on_host ? static_cast<const DeviceContext*>(&cpu_) : cuda_.get();
    ASSIGN_OR_RETURN(KernelInitContext init,
                     MakeKernelInitContext(op, descs, job_.conf().seed(), device));
    ASSIGN_OR_RETURN(state.kernel,
                     CreateAndInitKernel(init, state.on_host ? DEVICE_CPU : DEVICE_CUDA,
                                         KernelDtypeOf(op, descs)));
    state.time.name = op.name();
    state.time.type = op.op_type();
    state.time.on_host = state.on_host;
    if (options_.time_ops) {
      CUDA_RETURN_IF_ERROR(cudaEventCreate(&state.begin));
      CUDA_RETURN_IF_ERROR(cudaEventCreate(&state.end));
    }
  }
  return Status::OK();
}

Status SingleGpuExecutor::RunOp(OpState* state) {
  const OpConf& op = *state->op;
  std::deque<Blob> blobs;  // stable addresses: the context keeps pointers
  const DeviceContext* device =
      state->on_host ? static_cast<const DeviceContext*>(&cpu_) : cuda_.get();
  KernelContext context(op, device, iteration_);
  // A host op writes its outputs to the pinned staging buffers.
  BindOpBlobs(
      op,
      [&](const std::string& lbn, bool is_output) {
        const BlobSlot& slot = blobs_.at(lbn);
        return Blob(is_output && state->on_host ? slot.host : slot.device, slot.desc);
      },
      &blobs, &context);
  if (state->on_host) {
    // The pinned staging buffer is reused: wait until its previous copy left.
    RETURN_IF_ERROR(cuda_->Synchronize());
  }
  const bool timed = options_.time_ops;
  if (timed && !state->on_host) CUDA_RETURN_IF_ERROR(cudaEventRecord(state->begin, cuda_->stream()));
  const auto host_begin = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(state->kernel->Forward(&context));
  if (timed && state->on_host) {
    state->time.ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_begin)
            .count();
    CUDA_RETURN_IF_ERROR(cudaEventRecord(state->begin, cuda_->stream()));
  }
  if (state->on_host) {
    for (const ArgProto& arg : op.output()) {
      for (const std::string& lbn : arg.lbn()) {
        const BlobSlot& slot = blobs_.at(lbn);
        CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.device, slot.host, slot.desc.ByteSize(),
                                             cudaMemcpyHostToDevice, cuda_->stream()));
      }
    }
  }
  if (timed) {
    CUDA_RETURN_IF_ERROR(cudaEventRecord(state->end, cuda_->stream()));
    state->recorded = true;
    ++state->time.calls;
  }
  return Status::OK();
}

Status SingleGpuExecutor::CollectOpTimes() {
  RETURN_IF_ERROR(cuda_->Synchronize());
  for (OpState& state : ops_) {
    if (!state.recorded) continue;
    float ms = 0;
    CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, state.begin, state.end));
    (state.on_host ? state.time.copy_ms : state.time.ms) += ms;
    state.recorded = false;
  }
  return Status::OK();
}

std::vector<OpTime> SingleGpuExecutor::OpTimes() const {
  std::vector<OpTime> times;
  for (const OpState& state : ops_) times.push_back(state.time);
  return times;
}

void SingleGpuExecutor::ResetOpTimes() {
  for (OpState& state : ops_) {
    const OpTime kept{state.time.name, state.time.type, state.time.on_host};
    state.time = kept;
  }
}

SingleGpuExecutor::~SingleGpuExecutor() {
  if (graph_exec_ != nullptr) cudaGraphExecDestroy(graph_exec_);
  for (OpState& state : ops_) {
    if (state.begin != nullptr) cudaEventDestroy(state.begin);
    if (state.end != nullptr) cudaEventDestroy(state.end);
  }
}

Status SingleGpuExecutor::RunDeviceOps() {
  for (OpState& state : ops_) {
    if (state.is_variable) continue;
    if (state.on_host && options_.sources_once && iteration_ > 0) continue;
    RETURN_IF_ERROR(RunOp(&state));
  }
  return Status::OK();
}

Status SingleGpuExecutor::TryCapture() {
  capture_tried_ = true;
  cudaStream_t stream = cuda_->stream();
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (err != cudaSuccess) {
    graph_note_ = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(err);
    cudaGetLastError();
    return Status::OK();
  }
  Status ran = RunDeviceOps();
  cudaGraph_t graph = nullptr;
  err = cudaStreamEndCapture(stream, &graph);
  if (!ran.ok() || err != cudaSuccess) {
    graph_note_ = "capture failed: " + (ran.ok() ? std::string(cudaGetErrorString(err))
                                                 : ran.ToString());
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    return Status::OK();
  }
  err = cudaGraphInstantiate(&graph_exec_, graph, 0);
  cudaGraphDestroy(graph);
  if (err != cudaSuccess) {
    graph_exec_ = nullptr;
    graph_note_ = std::string("cudaGraphInstantiate: ") + cudaGetErrorString(err);
    cudaGetLastError();
    return Status::OK();
  }
  graph_note_ = "replaying a captured graph";
  return Status::OK();
}

Status SingleGpuExecutor::Step() {
  RETURN_IF_ERROR(cuda_->Activate());
  if (!variables_ready_) {
    for (OpState& state : ops_) {
      if (state.is_variable) RETURN_IF_ERROR(RunOp(&state));
    }
    variables_ready_ = true;
  }
  const bool may_replay = options_.graph_replay && options_.sources_once && iteration_ > 0;
  if (may_replay && !capture_tried_) RETURN_IF_ERROR(TryCapture());
  if (may_replay && graph_exec_ != nullptr) {
    // Capture only recorded the work; every replay (the first one too) runs it.
    CUDA_RETURN_IF_ERROR(cudaGraphLaunch(graph_exec_, cuda_->stream()));
  } else {
    RETURN_IF_ERROR(RunDeviceOps());
  }
  if (options_.time_ops) RETURN_IF_ERROR(CollectOpTimes());
  ++iteration_;
  return Status::OK();
}

StatusOr<HostTensor> SingleGpuExecutor::Fetch(const std::string& lbn) {
  auto it = blobs_.find(lbn);
  if (it == blobs_.end()) return NotFoundError("job '", job_.conf().name(), "' has no blob '", lbn, "'");
  HostTensor tensor(it->second.desc);
  RETURN_IF_ERROR(cuda_->Synchronize());
  if (tensor.ByteSize() > 0) {
    CUDA_RETURN_IF_ERROR(cudaMemcpy(tensor.raw(), it->second.device, tensor.ByteSize(),
                                    cudaMemcpyDeviceToHost));
  }
  return tensor;
}

Status SingleGpuExecutor::ReportDeferredErrors() {
  RETURN_IF_ERROR(cuda_->Synchronize());
  for (const OpState& state : ops_) {
    if (state.on_host) continue;
    const KernelContext names(*state.op, cuda_.get(), std::max<int64_t>(0, iteration_ - 1));
    RETURN_IF_ERROR(state.kernel->ReportDeferredErrors(names));
  }
  return Status::OK();
}

StatusOr<std::map<std::string, double>> SingleGpuExecutor::Metrics() {
  // Replayed iterations call no Forward: their device-side reports (a bad
  // label) are read here.
  RETURN_IF_ERROR(ReportDeferredErrors());
  std::map<std::string, double> values;
  for (const ArgProto& metric : job_.conf().train().metric()) {
    if (metric.lbn_size() != 1) {
      return InvalidArgumentError("metric '", metric.name(), "' names ", metric.lbn_size(), " blobs");
    }
    ASSIGN_OR_RETURN(HostTensor t, Fetch(metric.lbn(0)));
    ASSIGN_OR_RETURN(values[metric.name()], MetricValue(metric.name(), t));
  }
  return values;
}

StatusOr<std::map<std::string, HostTensor>> SingleGpuExecutor::Variables() {
  std::map<std::string, HostTensor> variables;
  for (const OpState& state : ops_) {
    if (!state.is_variable) continue;
    ASSIGN_OR_RETURN(HostTensor t, Fetch(OutputLbn(state.op->name(), "out")));
    variables.emplace(state.op->name(), std::move(t));
  }
  return variables;
}

}  // namespace oflite
