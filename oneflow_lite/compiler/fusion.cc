#include "oneflow_lite/compiler/fusion.h"

#include <map>
#include <set>
#include <vector>

#include <google/protobuf/util/message_differencer.h>

#include "oneflow_lite/common/attr.h"

namespace oflite {
namespace compiler {
namespace {

// The single lbn of input `arg`, or "" if the op has not exactly one.
std::string SingleInput(const OpConf& op, const std::string& arg) {
  for (const ArgProto& a : op.input()) {
    if (a.name() == arg) return a.lbn_size() == 1 ? a.lbn(0) : "";
  }
  return "";
}

std::string SingleOutput(const OpConf& op) {
  if (op.output_size() != 1 || op.output(0).lbn_size() != 1) return "";
  return op.output(0).lbn(0);
}

// Appends an argument `name` holding the one blob `lbn`.
void AddArg(google::protobuf::RepeatedPtrField<ArgProto>* args, const std::string& name,
            const std::string& lbn) {
  ArgProto* arg = args->Add();
  arg->set_name(name);
  arg->add_lbn(lbn);
}

// Readers of each lbn: op inputs, the loss and the metrics.
std::map<std::string, int> ReaderCounts(const Job& job) {
  std::map<std::string, int> readers;
  for (const OpConf& op : job.op()) {
    for (const ArgProto& arg : op.input()) {
      for (const std::string& lbn : arg.lbn()) ++readers[lbn];
    }
  }
  ++readers[job.conf().train().loss_lbn()];
  for (const ArgProto& metric : job.conf().train().metric()) {
    for (const std::string& lbn : metric.lbn()) ++readers[lbn];
  }
  return readers;
}

// The ops that read each lbn, each listed once (in job order).
std::map<std::string, std::vector<int>> ReaderOps(const Job& job) {
  std::map<std::string, std::vector<int>> readers;
  for (int i = 0; i < job.op_size(); ++i) {
    for (const ArgProto& arg : job.op(i).input()) {
      for (const std::string& lbn : arg.lbn()) {
        std::vector<int>& ops = readers[lbn];
        if (ops.empty() || ops.back() != i) ops.push_back(i);
      }
    }
  }
  return readers;
}

// No SBP hints and no control inputs of its own.
bool Unconstrained(const OpConf& op) {
  return op.output_sbp_hint_size() == 0 && op.input_sbp_hint_size() == 0 &&
         op.control_input_size() == 0;
}

// An unconstrained forward op.
bool Plain(const OpConf& op) {
  return Unconstrained(op) && !op.is_backward() && !op.is_optimizer();
}

OpConf BiasAddRelu(const OpConf& bias_add, const OpConf& relu) {
  OpConf fused;
  fused.set_name(relu.name());
  fused.set_op_type("bias_add_relu");
  *fused.add_input() = bias_add.input(0);
  *fused.add_input() = bias_add.input(1);
  AddArg(fused.mutable_output(), "y", SingleOutput(relu));
  for (const AttrEntry& entry : bias_add.attr()) {
    if (entry.key() == "axis") *fused.add_attr() = entry;
  }
  SetStringAttr(&fused, "fused_from", bias_add.name() + "+" + relu.name());
  if (relu.has_placement()) *fused.mutable_placement() = relu.placement();
  // Both ops belong to the same micro-batch (pipeline_schedule.h).
  if (relu.has_micro_batch()) fused.set_micro_batch(relu.micro_batch());
  return fused;
}

// An op that had to run after a fused bias_add (e.g. the update of the
// variable it reads) now runs after the fused op, which reads the same
// inputs.
void RenameControlInputs(const std::map<std::string, std::string>& renamed, Job* job) {
  for (OpConf& op : *job->mutable_op()) {
    std::vector<std::string> names;
    std::set<std::string> seen;
    for (const std::string& name : op.control_input()) {
      auto it = renamed.find(name);
      const std::string& target = it == renamed.end() ? name : it->second;
      if (seen.insert(target).second) names.push_back(target);
    }
    op.clear_control_input();
    for (const std::string& name : names) op.add_control_input(name);
  }
}

bool SamePlacement(const OpConf& a, const OpConf& b) {
  return a.has_placement() == b.has_placement() &&
         google::protobuf::util::MessageDifferencer::Equals(a.placement(), b.placement());
}

DeviceType DeviceOf(const Job& job, const OpConf& op) {
  if (op.has_placement()) return op.placement().device_type();
  if (job.conf().has_default_placement()) return job.conf().default_placement().device_type();
  return DEVICE_CPU;  // the compiler's default placement
}

// bias_add_relu kernels exist for CPU and CUDA devices.
bool HasFusedKernel(const Job& job, const OpConf& op) {
  const DeviceType type = DeviceOf(job, op);
  return type == DEVICE_CPU || type == DEVICE_CUDA;
}

const TensorDescProto* BlobDesc(const Job& job, const std::string& lbn) {
  for (const LogicalBlobDesc& blob : job.blob()) {
    if (blob.lbn() == lbn) return &blob.desc();
  }
  return nullptr;
}

// A matmul the matmul_bias kernel takes (ops/math/fused_ops.cc): alpha 1,
// no sum_batch, a 2-D b and, when a is batched, an untransposed a (one GEMM
// of [rows, k] x [k, n]); static shapes.
bool OneGemm(const Job& job, const OpConf& matmul) {
  const AttrView attrs(matmul);
  if (attrs.GetFloatOr("alpha", 1.0) != 1.0 || attrs.GetBoolOr("sum_batch", false)) return false;
  const TensorDescProto* a = BlobDesc(job, SingleInput(matmul, "a"));
  const TensorDescProto* b = BlobDesc(job, SingleInput(matmul, "b"));
  if (a == nullptr || b == nullptr || a->is_dynamic() || b->is_dynamic()) return false;
  if (b->shape().dim_size() != 2 || a->shape().dim_size() < 2) return false;
  return a->shape().dim_size() == 2 || !attrs.GetBoolOr("transpose_a", false);
}

bool ErfGelu(const OpConf& op) {
  return AttrView(op).GetStringOr("approximate", "none") == "none";
}

bool BiasAlongLastAxis(const Job& job, const OpConf& bias_add, const std::string& x) {
  const TensorDescProto* desc = BlobDesc(job, x);
  if (desc == nullptr) return false;
  const int64_t rank = desc->shape().dim_size();
  const int64_t axis = AttrView(bias_add).GetIntOr("axis", 1);
  return axis == rank - 1 || axis == -1;
}

OpConf MatmulBias(const OpConf& matmul, const OpConf& bias_add) {
  OpConf fused;
  fused.set_name(bias_add.name());
  fused.set_op_type("matmul_bias");
  *fused.add_input() = matmul.input(0);
  *fused.add_input() = matmul.input(1);
  AddArg(fused.mutable_input(), "bias", SingleInput(bias_add, "b"));
  AddArg(fused.mutable_output(), "out", SingleOutput(bias_add));
  for (const AttrEntry& entry : matmul.attr()) {
    if (entry.key() == "transpose_a" || entry.key() == "transpose_b") *fused.add_attr() = entry;
  }
  SetStringAttr(&fused, "fused_from", matmul.name() + "+" + bias_add.name());
  if (bias_add.has_placement()) *fused.mutable_placement() = bias_add.placement();
  if (bias_add.has_micro_batch()) fused.set_micro_batch(bias_add.micro_batch());
  return fused;
}

}  // namespace

FusionResult FuseElementwiseChains(const Job& job) { return FuseOps(job, FusionOptions()); }

FusionResult FuseOps(const Job& job, const FusionOptions& options) {
  FusionResult result;
  result.job = job;
  const std::map<std::string, int> readers = ReaderCounts(job);
  std::map<std::string, int> producer;  // lbn -> op index
  for (int i = 0; i < job.op_size(); ++i) {
    for (const ArgProto& arg : job.op(i).output()) {
      for (const std::string& lbn : arg.lbn()) producer[lbn] = i;
    }
  }
  std::set<int> removed;
  std::set<std::string> removed_lbns;
  std::map<std::string, std::string> renamed;  // bias_add name -> fused op name
  for (int i = 0; i < job.op_size() && options.bias_add_relu; ++i) {
    const OpConf& relu = job.op(i);
    if (relu.op_type() != "relu" || !Plain(relu) || SingleOutput(relu).empty()) continue;
    const std::string x = SingleInput(relu, "x");
    auto it = producer.find(x);
    if (it == producer.end()) continue;
    const OpConf& bias_add = job.op(it->second);
    if (bias_add.op_type() != "bias_add" || !Plain(bias_add) ||
        SingleInput(bias_add, "a").empty() || SingleInput(bias_add, "b").empty() ||
        bias_add.input_size() != 2 || readers.at(x) != 1 || !SamePlacement(bias_add, relu) ||
        !HasFusedKernel(job, relu)) {
      continue;
    }
    *result.job.mutable_op(i) = BiasAddRelu(bias_add, relu);
    removed.insert(it->second);
    removed_lbns.insert(x);
    renamed[bias_add.name()] = relu.name();
    ++result.fused;
  }
  // matmul -> bias_add along the last axis, for the bias_adds the loop above
  // left (a hidden layer's bias_add -> relu stays exact).
  for (int i = 0; i < job.op_size() && options.matmul_bias; ++i) {
    const OpConf& bias_add = job.op(i);
    if (bias_add.op_type() != "bias_add" || removed.count(i) || !Plain(bias_add) ||
        bias_add.input_size() != 2 || SingleOutput(bias_add).empty() ||
        SingleInput(bias_add, "b").empty() || DeviceOf(job, bias_add) != DEVICE_CPU) {
      continue;
    }
    const std::string x = SingleInput(bias_add, "a");
    auto it = producer.find(x);
    if (x.empty() || it == producer.end() || removed.count(it->second)) continue;
    const OpConf& matmul = job.op(it->second);
    if (matmul.op_type() != "matmul" || !Plain(matmul) || matmul.input_size() != 2 ||
        SingleInput(matmul, "a").empty() || SingleInput(matmul, "b").empty() ||
        readers.at(x) != 1 || !SamePlacement(matmul, bias_add) || !OneGemm(job, matmul) ||
        !BiasAlongLastAxis(job, bias_add, x)) {
      continue;
    }
    *result.job.mutable_op(i) = MatmulBias(matmul, bias_add);
    removed.insert(it->second);
    removed_lbns.insert(x);
    renamed[matmul.name()] = bias_add.name();
    ++result.fused;
  }
  // gelu(x) and its gelu_grad(dy, x) ops => gelu_and_derivative(x) -> y,
  // dydx and mul(dy, dydx): the backward reads dydx instead of recomputing
  // the erf form's CDF and density from x (exact, see fusion.h).
  const std::map<std::string, std::vector<int>> reader_ops =
      options.gelu_derivative ? ReaderOps(job) : std::map<std::string, std::vector<int>>();
  for (int i = 0; i < job.op_size() && options.gelu_derivative; ++i) {
    const OpConf& gelu = job.op(i);
    if (gelu.op_type() != "gelu" || !Plain(gelu) || !ErfGelu(gelu) ||
        SingleOutput(gelu).empty() || DeviceOf(job, gelu) != DEVICE_CPU) {
      continue;
    }
    const std::string x = SingleInput(gelu, "x");
    const TensorDescProto* y_desc = BlobDesc(job, SingleOutput(gelu));
    if (x.empty() || y_desc == nullptr || y_desc->is_dynamic()) continue;
    std::vector<int> grads;
    bool other_reader = false;
    for (int j : reader_ops.at(x)) {
      if (j == i) continue;
      const OpConf& op = job.op(j);
      if (op.op_type() == "gelu_grad" && op.is_backward() && Unconstrained(op) && ErfGelu(op) &&
          SingleInput(op, "x") == x && !SingleInput(op, "dy").empty() &&
          !SingleOutput(op).empty() && SamePlacement(op, gelu)) {
        grads.push_back(j);
      } else {
        other_reader = true;
      }
    }
    // x read by no one else (the loss and metrics count, and an op reading
    // it twice), at least one gradient.
    if (other_reader || grads.empty() || readers.at(x) != 1 + static_cast<int>(grads.size())) {
      continue;
    }
    const std::string dydx = gelu.name() + "/dydx_0";
    OpConf fused = gelu;
    fused.set_op_type("gelu_and_derivative");
    AddArg(fused.mutable_output(), "dydx", dydx);
    SetStringAttr(&fused, "fused_from", gelu.name() + "+" + job.op(grads.front()).name());
    *result.job.mutable_op(i) = fused;
    LogicalBlobDesc* blob = result.job.add_blob();
    blob->set_lbn(dydx);
    *blob->mutable_desc() = *y_desc;
    for (int j : grads) {
      const OpConf& grad = job.op(j);
      OpConf mul = grad;
      mul.set_op_type("mul");
      mul.clear_input();
      mul.clear_attr();
      mul.clear_output();
      AddArg(mul.mutable_input(), "x", SingleInput(grad, "dy"));
      AddArg(mul.mutable_input(), "y", dydx);
      AddArg(mul.mutable_output(), "out", SingleOutput(grad));
      *result.job.mutable_op(j) = mul;
    }
    ++result.fused;
  }
  if (result.fused == 0) return result;
  Job& out = result.job;
  google::protobuf::RepeatedPtrField<OpConf> kept;
  for (int i = 0; i < out.op_size(); ++i) {
    if (!removed.count(i)) *kept.Add() = out.op(i);
  }
  out.mutable_op()->Swap(&kept);
  RenameControlInputs(renamed, &out);
  google::protobuf::RepeatedPtrField<LogicalBlobDesc> blobs;
  for (const LogicalBlobDesc& blob : out.blob()) {
    if (!removed_lbns.count(blob.lbn())) *blobs.Add() = blob;
  }
  out.mutable_blob()->Swap(&blobs);
  return result;
}

}  // namespace compiler
}  // namespace oflite
