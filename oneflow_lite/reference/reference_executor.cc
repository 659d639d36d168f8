#include "oneflow_lite/reference/reference_executor.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <limits>

#include "oneflow_lite/api/job_util.h"
#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/reference/op_by_op.h"

namespace oflite {
namespace {

const CpuDeviceContext* CpuContext() {
  static const CpuDeviceContext* const context = new CpuDeviceContext();
  return context;
}

HostTensor NanFilled(const TensorDesc& desc) {
  HostTensor tensor(desc);
  if (desc.dtype == DT_FLOAT) {
    std::fill_n(tensor.data<float>(), tensor.elem_count(), std::numeric_limits<float>::quiet_NaN());
  } else if (desc.dtype == DT_DOUBLE) {
    std::fill_n(tensor.data<double>(), tensor.elem_count(),
                std::numeric_limits<double>::quiet_NaN());
  }
  return tensor;
}

}  // namespace

StatusOr<std::unique_ptr<ReferenceExecutor>> ReferenceExecutor::Create(const Job& job) {
  std::unique_ptr<ReferenceExecutor> executor(new ReferenceExecutor(job));
  RETURN_IF_ERROR(
      executor->Prepare().WithContext("reference executor, job '" + job.conf().name() + "'"));
  return executor;
}

Status ReferenceExecutor::Prepare() {
  RETURN_IF_ERROR(ReinferBlobDescs(&job_));
  const BlobDescMap descs = BlobDescsOf(job_);
  for (const auto& [lbn, desc] : descs) tensors_.emplace(lbn, NanFilled(desc));
  ASSIGN_OR_RETURN(std::vector<int> order, TopologicalOrder(job_));
  for (int index : order) {
    const OpConf& op = job_.op(index);
    ASSIGN_OR_RETURN(KernelInitContext init,
                     MakeKernelInitContext(op, descs, job_.conf().seed(), CpuContext()));
    OpState state;
    state.op = &op;
    state.is_variable = op.op_type() == "variable";
    ASSIGN_OR_RETURN(state.kernel, CreateAndInitKernel(init, DEVICE_CPU, KernelDtypeOf(op, descs)));
    ops_.push_back(std::move(state));
  }
  return Status::OK();
}

Status ReferenceExecutor::RunOp(OpState* state, int64_t iteration) {
  const OpConf& op = *state->op;
  std::deque<Blob> blobs;
  KernelContext context(op, CpuContext(), iteration);
  BindOpBlobs(
      op, [this](const std::string& lbn, bool) { return tensors_.at(lbn).AsBlob(); }, &blobs,
      &context);
  return state->kernel->Forward(&context);
}

StatusOr<IterationMetrics> ReferenceExecutor::ReadMetrics() const {
  IterationMetrics metrics;
  metrics.iteration = iteration_;
  for (const ArgProto& metric : job_.conf().train().metric()) {
    if (metric.lbn_size() != 1) {
      return InvalidArgumentError("metric '", metric.name(), "' names ", metric.lbn_size(),
                                  " blobs, want 1");
    }
    auto it = tensors_.find(metric.lbn(0));
    if (it == tensors_.end()) {
      return NotFoundError("metric '", metric.name(), "': blob '", metric.lbn(0),
                           "' is not in the job");
    }
    ASSIGN_OR_RETURN(metrics.values[metric.name()], MetricValue(metric.name(), it->second));
  }
  return metrics;
}

StatusOr<std::vector<IterationMetrics>> ReferenceExecutor::Run(
    int64_t iterations, const std::vector<std::string>& fetch) {
  if (iterations < 0) return InvalidArgumentError("reference executor: negative iteration count");
  for (const std::string& lbn : fetch) RETURN_IF_ERROR(Fetch(lbn).status());
  for (OpState& state : ops_) {
    if (!state.is_variable || state.initialized) continue;
    RETURN_IF_ERROR(RunOp(&state, iteration_));
    state.initialized = true;
  }
  std::vector<IterationMetrics> results;
  for (int64_t step = 0; step < iterations; ++step) {
    for (OpState& state : ops_) {
      if (!state.is_variable) RETURN_IF_ERROR(RunOp(&state, iteration_));
    }
    ASSIGN_OR_RETURN(IterationMetrics metrics, ReadMetrics());
    for (const std::string& lbn : fetch) metrics.fetched.emplace(lbn, tensors_.at(lbn).Clone());
    results.push_back(std::move(metrics));
    ++iteration_;
  }
  return results;
}

Status ReferenceExecutor::SetVariable(const std::string& name, const HostTensor& value) {
  for (OpState& state : ops_) {
    if (state.op->name() != name) continue;
    if (!state.is_variable) {
      return InvalidArgumentError("reference executor: op '", name, "' is not a variable");
    }
    HostTensor& target = tensors_.at(OutputLbn(name, "out"));
    if (target.desc() != value.desc()) {
      return InvalidArgumentError("reference executor: variable '", name, "' is ",
                                  target.desc().ToString(), ", the value given is ",
                                  value.desc().ToString());
    }
    if (value.ByteSize() > 0) std::memcpy(target.raw(), value.raw(), value.ByteSize());
    state.initialized = true;
    return Status::OK();
  }
  return NotFoundError("reference executor: job '", job_.conf().name(), "' has no variable '", name,
                       "'");
}

StatusOr<const HostTensor*> ReferenceExecutor::Fetch(const std::string& lbn) const {
  auto it = tensors_.find(lbn);
  if (it == tensors_.end()) {
    return NotFoundError("reference executor: job '", job_.conf().name(), "' has no blob '", lbn,
                         "'");
  }
  return &it->second;
}

VariableMap ReferenceExecutor::Variables() const {
  VariableMap variables;
  for (const OpState& state : ops_) {
    if (!state.is_variable) continue;
    variables.emplace(state.op->name(), tensors_.at(OutputLbn(state.op->name(), "out")).Clone());
  }
  return variables;
}

StatusOr<ReferenceTrainResult> TrainReference(const Job& job, int64_t iterations) {
  if (iterations < 0) iterations = job.conf().total_iters();
  if (iterations <= 0) {
    return InvalidArgumentError("TrainReference: job '", job.conf().name(),
                                "' has no iteration count; pass one");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ReferenceExecutor> executor, ReferenceExecutor::Create(job));
  ReferenceTrainResult result;
  ASSIGN_OR_RETURN(result.iterations, executor->Run(iterations));
  for (const IterationMetrics& metrics : result.iterations) {
    auto it = metrics.values.find("loss");
    if (it != metrics.values.end()) result.losses.push_back(it->second);
  }
  result.variables = executor->Variables();
  return result;
}

StatusOr<std::map<std::string, double>> EvaluateReference(const Job& train_job,
                                                          const VariableMap& variables,
                                                          const EvalJobOptions& options,
                                                          int64_t iterations) {
  ASSIGN_OR_RETURN(Job eval_job, MakeEvalJob(train_job, options));
  if (iterations <= 0) iterations = eval_job.conf().total_iters();
  if (iterations <= 0) {
    return InvalidArgumentError("EvaluateReference: job '", eval_job.conf().name(),
                                "' has no iteration count; pass one");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ReferenceExecutor> executor,
                   ReferenceExecutor::Create(eval_job));
  for (const OpConf& op : eval_job.op()) {
    if (op.op_type() != "variable") continue;
    auto it = variables.find(op.name());
    if (it == variables.end()) {
      return NotFoundError("EvaluateReference: no value given for variable '", op.name(), "'");
    }
    RETURN_IF_ERROR(executor->SetVariable(op.name(), it->second));
  }
  ASSIGN_OR_RETURN(std::vector<IterationMetrics> runs, executor->Run(iterations));
  std::map<std::string, double> means;
  for (const IterationMetrics& metrics : runs) {
    for (const auto& [name, value] : metrics.values) means[name] += value;
  }
  for (auto& [name, sum] : means) sum /= static_cast<double>(runs.size());
  return means;
}

}  // namespace oflite
