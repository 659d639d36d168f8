#include "oneflow_lite/testing/op_runner.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"

namespace oflite {
namespace {

bool IsFloating(DataType t) { return t == DT_FLOAT || t == DT_DOUBLE; }

}  // namespace

StatusOr<TensorMap> RunOp(const OpConf& op, TensorMap* env, const RunOpOptions& options) {
  ASSIGN_OR_RETURN(const OpDef* def, LookupOpDef(op.op_type(), op.name()));
  ArgDescs in_descs;
  for (const ArgProto& arg : op.input()) {
    for (const std::string& lbn : arg.lbn()) {
      auto it = env->find(lbn);
      if (it == env->end()) {
        return NotFoundError("op '", op.name(), "': input blob '", lbn, "' not in environment");
      }
      in_descs[arg.name()].push_back(it->second.desc());
    }
  }
  ASSIGN_OR_RETURN(ArgDescs out_descs, InferOp(op, in_descs));
  DataType dtype = options.dtype;
  if (dtype == DT_INVALID) {
    if (op.input_size() > 0) {
      dtype = env->at(op.input(0).lbn(0)).dtype();
    } else {
      dtype = out_descs.at(def->outputs.at(0)).at(0).dtype;
    }
  }
  static const CpuDeviceContext* const kCpu = new CpuDeviceContext();
  KernelInitContext init;
  init.op = &op;
  init.inputs = in_descs;
  init.outputs = out_descs;
  init.parallel_id = options.parallel_id;
  init.parallel_num = options.parallel_num;
  init.seed = options.seed;
  init.device = kCpu;
  ASSIGN_OR_RETURN(auto kernel, CreateAndInitKernel(init, DEVICE_CPU, dtype));

  TensorMap outputs;
  std::vector<Blob> blobs;
  blobs.reserve(64);
  KernelContext ctx(op, kCpu, options.iteration);
  for (const ArgProto& arg : op.input()) {
    for (const std::string& lbn : arg.lbn()) {
      blobs.push_back(env->at(lbn).AsBlob());
      ctx.BindInput(arg.name(), &blobs.back());
    }
  }
  for (const ArgProto& arg : op.output()) {
    const auto& descs = out_descs.at(arg.name());
    if (static_cast<int>(descs.size()) != arg.lbn_size()) {
      return InvalidArgumentError("op '", op.name(), "': output '", arg.name(), "' declares ",
                                  arg.lbn_size(), " blobs, inference made ", descs.size());
    }
    for (int i = 0; i < arg.lbn_size(); ++i) {
      auto [it, inserted] = outputs.emplace(arg.lbn(i), HostTensor(descs[i]));
      float nan = std::nanf("");
      if (descs[i].dtype == DT_FLOAT) std::fill_n(it->second.data<float>(), descs[i].shape.elem_count(), nan);
      if (descs[i].dtype == DT_DOUBLE) std::fill_n(it->second.data<double>(), descs[i].shape.elem_count(), std::nan(""));
      blobs.push_back(it->second.AsBlob());
      ctx.BindOutput(arg.name(), &blobs.back());
    }
  }
  CHECK_LE(blobs.size(), 64u) << "RunOp supports at most 64 blobs";
  RETURN_IF_ERROR(kernel->Forward(&ctx));
  return outputs;
}

HostTensor RandomTensor(const TensorDesc& desc, uint64_t seed, double lo, double hi) {
  HostTensor t(desc);
  std::mt19937_64 rng(seed);
  const int64_t n = desc.shape.elem_count();
  switch (desc.dtype) {
    case DT_FLOAT: {
      std::uniform_real_distribution<float> d(static_cast<float>(lo), static_cast<float>(hi));
      for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = d(rng);
      break;
    }
    case DT_DOUBLE: {
      std::uniform_real_distribution<double> d(lo, hi);
      for (int64_t i = 0; i < n; ++i) t.data<double>()[i] = d(rng);
      break;
    }
    case DT_INT32: {
      std::uniform_int_distribution<int32_t> d(static_cast<int32_t>(lo), static_cast<int32_t>(hi) - 1);
      for (int64_t i = 0; i < n; ++i) t.data<int32_t>()[i] = d(rng);
      break;
    }
    case DT_INT64: {
      std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(lo), static_cast<int64_t>(hi) - 1);
      for (int64_t i = 0; i < n; ++i) t.data<int64_t>()[i] = d(rng);
      break;
    }
    default:
      LOG(FATAL) << "RandomTensor: unsupported dtype " << DataTypeName(desc.dtype);
  }
  return t;
}

namespace {

// Runs the gradient rule's ops eagerly on float64 host tensors.
class EagerGradContext final : public GradContext {
 public:
  EagerGradContext(const OpConf& op, TensorMap* env, std::map<std::string, std::string> out_grads)
      : op_(op), env_(env), out_grads_(std::move(out_grads)) {}

  const OpConf& op() const override { return op_; }
  int InputCount(const std::string& arg) const override {
    for (const ArgProto& a : op_.input()) {
      if (a.name() == arg) return a.lbn_size();
    }
    return 0;
  }
  const std::string& InputLbn(const std::string& arg, int index) const override {
    return Find(op_.input(), arg, index);
  }
  const TensorDesc& InputDesc(const std::string& arg, int index) const override {
    return env_->at(InputLbn(arg, index)).desc();
  }
  const std::string& OutputLbn(const std::string& arg, int index) const override {
    return Find(op_.output(), arg, index);
  }
  const TensorDesc& OutputDesc(const std::string& arg, int index) const override {
    return env_->at(OutputLbn(arg, index)).desc();
  }
  std::string OutputGradLbn(const std::string& arg, int index) const override {
    auto it = out_grads_.find(OutputLbn(arg, index));
    return it == out_grads_.end() ? "" : it->second;
  }
  bool NeedsInputGrad(const std::string& arg, int index) const override {
    return IsFloating(InputDesc(arg, index).dtype);
  }
  StatusOr<std::string> AddOp(OpConf op) override {
    std::string base = op.name().empty() ? op.op_type() : op.name();
    std::string name = base + "_g" + std::to_string(counter_++);
    op.set_name(name);
    for (ArgProto& arg : *op.mutable_output()) {
      for (int i = 0; i < arg.lbn_size(); ++i) arg.set_lbn(i, ::oflite::OutputLbn(name, arg.name(), i));
    }
    ASSIGN_OR_RETURN(TensorMap outs, RunOp(op, env_));
    for (auto& [lbn, t] : outs) env_->emplace(lbn, std::move(t));
    return name;
  }
  void SetInputGrad(const std::string& arg, int index, const std::string& lbn) override {
    input_grads_[arg + "#" + std::to_string(index)] = lbn;
  }
  const std::map<std::string, std::string>& input_grads() const { return input_grads_; }

 private:
  static const std::string& Find(const google::protobuf::RepeatedPtrField<ArgProto>& args,
                                 const std::string& arg, int index) {
    for (const ArgProto& a : args) {
      if (a.name() == arg) return a.lbn(index);
    }
    LOG(FATAL) << "no arg " << arg;
  }

  const OpConf& op_;
  TensorMap* env_;
  std::map<std::string, std::string> out_grads_;
  std::map<std::string, std::string> input_grads_;
  int counter_ = 0;
};

TensorMap CloneMap(const TensorMap& m) {
  TensorMap out;
  for (const auto& [k, v] : m) out.emplace(k, v.Clone());
  return out;
}

// sum(c * out) over float64 outputs.
StatusOr<double> Loss(const OpConf& op, const TensorMap& inputs, const TensorMap& cotangents) {
  TensorMap env = CloneMap(inputs);
  ASSIGN_OR_RETURN(TensorMap outs, RunOp(op, &env));
  double loss = 0;
  for (const auto& [lbn, c] : cotangents) {
    const HostTensor& o = outs.at(lbn);
    for (int64_t i = 0; i < o.elem_count(); ++i) loss += c.data<double>()[i] * o.data<double>()[i];
  }
  return loss;
}

}  // namespace

Status CheckOpGradient(const OpConf& op, const TensorMap& env_in, const GradCheckOptions& opt) {
  ASSIGN_OR_RETURN(const OpDef* def, LookupOpDef(op.op_type(), op.name()));
  if (!def->grad) return FailedPreconditionError("op type '", op.op_type(), "' has no gradient rule");
  TensorMap env = CloneMap(env_in);
  ASSIGN_OR_RETURN(TensorMap outs, RunOp(op, &env));
  TensorMap cotangents;
  std::map<std::string, std::string> out_grads;
  uint64_t seed = opt.seed;
  for (auto& [lbn, t] : outs) {
    if (t.dtype() != DT_DOUBLE) continue;
    cotangents.emplace(lbn, RandomTensor(t.desc(), ++seed, -1.0, 1.0));
    out_grads[lbn] = lbn + "@grad";
  }
  for (auto& [lbn, t] : outs) env.emplace(lbn, std::move(t));
  for (auto& [lbn, c] : cotangents) env.emplace(lbn + "@grad", c.Clone());

  EagerGradContext ctx(op, &env, out_grads);
  RETURN_IF_ERROR(def->grad(&ctx).WithContext("gradient rule of '" + op.op_type() + "'"));

  for (const ArgProto& arg : op.input()) {
    if (std::find(opt.skip_inputs.begin(), opt.skip_inputs.end(), arg.name()) !=
        opt.skip_inputs.end()) {
      continue;
    }
    for (int idx = 0; idx < arg.lbn_size(); ++idx) {
      const std::string& lbn = arg.lbn(idx);
      if (env_in.at(lbn).dtype() != DT_DOUBLE) continue;
      auto g = ctx.input_grads().find(arg.name() + "#" + std::to_string(idx));
      if (g == ctx.input_grads().end()) {
        return InternalError("op '", op.name(), "': rule set no gradient for input ", arg.name(),
                             "[", idx, "]");
      }
      const HostTensor& analytic = env.at(g->second);
      const HostTensor& x = env_in.at(lbn);
      if (analytic.shape() != x.shape()) {
        return InternalError("op '", op.name(), "': gradient of ", arg.name(), " has shape ",
                             analytic.shape(), ", input has ", x.shape());
      }
      std::vector<int64_t> probe;
      const int64_t n = x.elem_count();
      if (n <= opt.max_elements_per_input) {
        for (int64_t i = 0; i < n; ++i) probe.push_back(i);
      } else {
        std::mt19937_64 rng(opt.seed + idx);
        std::uniform_int_distribution<int64_t> d(0, n - 1);
        for (int i = 0; i < opt.max_elements_per_input; ++i) probe.push_back(d(rng));
      }
      for (int64_t i : probe) {
        TensorMap plus = CloneMap(env_in), minus = CloneMap(env_in);
        plus.at(lbn).data<double>()[i] += opt.epsilon;
        minus.at(lbn).data<double>()[i] -= opt.epsilon;
        ASSIGN_OR_RETURN(double lp, Loss(op, plus, cotangents));
        ASSIGN_OR_RETURN(double lm, Loss(op, minus, cotangents));
        const double numeric = (lp - lm) / (2 * opt.epsilon);
        const double a = analytic.data<double>()[i];
        if (!(std::fabs(a - numeric) <= opt.atol + opt.rtol * std::fabs(numeric))) {
          return InternalError("op '", op.name(), "' (", op.op_type(), "): gradient of input ",
                               arg.name(), "[", idx, "] element ", i, ": analytic ", a,
                               " vs numeric ", numeric);
        }
      }
    }
  }
  return Status::OK();
}

}  // namespace oflite
