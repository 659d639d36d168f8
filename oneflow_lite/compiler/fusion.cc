#include "oneflow_lite/compiler/fusion.h"

#include <map>
#include <set>
#include <vector>

#include <google/protobuf/util/message_differencer.h>

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

bool Plain(const OpConf& op) {
  return op.output_sbp_hint_size() == 0 && op.input_sbp_hint_size() == 0 &&
         op.control_input_size() == 0 && !op.is_backward() && !op.is_optimizer();
}

OpConf BiasAddRelu(const OpConf& bias_add, const OpConf& relu) {
  OpConf fused;
  fused.set_name(relu.name());
  fused.set_op_type("bias_add_relu");
  *fused.add_input() = bias_add.input(0);
  *fused.add_input() = bias_add.input(1);
  ArgProto* out = fused.add_output();
  out->set_name("y");
  out->add_lbn(SingleOutput(relu));
  // Attributes stay sorted by key: axis < fused_from.
  for (const AttrEntry& entry : bias_add.attr()) {
    if (entry.key() == "axis") *fused.add_attr() = entry;
  }
  AttrEntry* from = fused.add_attr();
  from->set_key("fused_from");
  from->mutable_value()->set_s(bias_add.name() + "+" + relu.name());
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

// Fused kernels exist for CPU and CUDA devices.
bool HasFusedKernel(const Job& job, const OpConf& op) {
  DeviceType type = DEVICE_CPU;  // the compiler's default placement
  if (op.has_placement()) {
    type = op.placement().device_type();
  } else if (job.conf().has_default_placement()) {
    type = job.conf().default_placement().device_type();
  }
  return type == DEVICE_CPU || type == DEVICE_CUDA;
}

}  // namespace

FusionResult FuseElementwiseChains(const Job& job) {
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
  for (int i = 0; i < job.op_size(); ++i) {
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
