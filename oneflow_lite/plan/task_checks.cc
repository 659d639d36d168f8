// Kernel bindings and the per-kind facts actors trust (see plan_index.h).
#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "oneflow_lite/common/data_type.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/plan/plan_index.h"
#include "oneflow_lite/plan/plan_verifier.h"

namespace oflite {
namespace plan_internal {
namespace {

bool Contains(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

bool Produces(const TaskProto& task, int64_t regst_desc_id) {
  for (const RegstDescProto& desc : task.produced()) {
    if (desc.regst_desc_id() == regst_desc_id) return true;
  }
  return false;
}

bool Consumes(const TaskProto& task, int64_t regst_desc_id) {
  for (const ConsumedRegst& consumed : task.consumed()) {
    for (int64_t id : consumed.regst_desc_id()) {
      if (id == regst_desc_id) return true;
    }
  }
  return false;
}

// The bound blobs of one kernel, by arg name, in binding order.
using BoundDescs = std::map<std::string, std::vector<TensorDesc>>;

// One list of bindings (`input` or `output`): every binding points at a
// blob of a register the task may touch, and indices count 0, 1, ... per arg
// (the runtime binds in list order).
Status CheckBindingList(const TaskProto& task, const std::string& prefix,
                        const google::protobuf::RepeatedPtrField<BlobBinding>& bindings,
                        bool outputs, const PlanIndex& index, BoundDescs* bound) {
  for (int j = 0; j < bindings.size(); ++j) {
    const BlobBinding& binding = bindings[j];
    const std::string field = prefix + (outputs ? ".output[" : ".input[") + std::to_string(j) +
                              "] ('" + binding.arg() + "'[" + std::to_string(binding.index()) +
                              "])";
    const RegstEntry* regst = index.FindRegst(binding.regst_desc_id());
    if (regst == nullptr) {
      return TaskError(task, field, "no register ", binding.regst_desc_id(), " in the plan");
    }
    const bool own = Produces(task, binding.regst_desc_id());
    if (outputs && !own) {
      return TaskError(task, field, "writes register ", binding.regst_desc_id(), " owned by ",
                       TaskLabel(*regst->producer),
                       "; a kernel writes only registers its task "
                       "produces");
    }
    if (!own && !Consumes(task, binding.regst_desc_id())) {
      return TaskError(task, field, "register ", binding.regst_desc_id(),
                       " is neither consumed nor produced by the task");
    }
    if (binding.blob_index() < 0 || binding.blob_index() >= regst->desc->blob_size()) {
      return TaskError(task, field, "no blob ", binding.blob_index(), " in register ",
                       binding.regst_desc_id(), " (it has ", regst->desc->blob_size(), ")");
    }
    std::vector<TensorDesc>& descs = (*bound)[binding.arg()];
    if (binding.index() != static_cast<int>(descs.size())) {
      return TaskError(task, field, "index ", binding.index(), " out of order (expected ",
                       descs.size(), ")");
    }
    descs.emplace_back(regst->desc->blob(binding.blob_index()).desc());
  }
  return Status::OK();
}

int CountOf(const BoundDescs& bound, const std::string& arg) {
  auto it = bound.find(arg);
  return it == bound.end() ? 0 : static_cast<int>(it->second.size());
}

int OpConfCount(const google::protobuf::RepeatedPtrField<ArgProto>& args, const std::string& arg) {
  for (const ArgProto& a : args) {
    if (a.name() == arg) return a.lbn_size();
  }
  return 0;
}

// Every blob the OpConf lists for an argument is bound, and no more.
Status CheckOpConfArgs(const TaskProto& task, const std::string& field, const char* kind,
                       const google::protobuf::RepeatedPtrField<ArgProto>& args,
                       const BoundDescs& bound) {
  for (const ArgProto& arg : args) {
    const int count = CountOf(bound, arg.name());
    if (count < arg.lbn_size()) {
      return TaskError(task, field, kind, " '", arg.name(), "'[", count, "] is not bound");
    }
    if (count > arg.lbn_size()) {
      return TaskError(task, field, kind, " '", arg.name(), "': ", count,
                       " bound blobs but the op lists ", arg.lbn_size());
    }
  }
  return Status::OK();
}

// Bound args against the op definition and the OpConf: every argument the
// kernel will ask for is bound (kernel.cc would CHECK-fail otherwise).
Status CheckArgs(const TaskProto& task, const std::string& prefix, const KernelConf& conf,
                 const OpDef& def, const BoundDescs& inputs, const BoundDescs& outputs) {
  for (const auto& [arg, descs] : inputs) {
    if (!Contains(def.inputs, arg)) {
      return TaskError(task, prefix + ".input", "'", arg, "' is not an input of ", def.type);
    }
  }
  for (const auto& [arg, descs] : outputs) {
    if (!Contains(def.outputs, arg)) {
      return TaskError(task, prefix + ".output", "'", arg, "' is not an output of ", def.type);
    }
  }
  for (const std::string& arg : def.inputs) {
    const int count = CountOf(inputs, arg);
    if (count == 0 && !Contains(def.optional_inputs, arg)) {
      return TaskError(task, prefix + ".input", "input '", arg, "'[0] is not bound");
    }
    if (count > 1 && !Contains(def.variadic_inputs, arg)) {
      return TaskError(task, prefix + ".input", "input '", arg, "' takes one blob, ", count,
                       " are bound");
    }
    if (count != OpConfCount(conf.op().input(), arg)) {
      return TaskError(task, prefix + ".input", "input '", arg, "': ", count,
                       " bound blobs but the op lists ", OpConfCount(conf.op().input(), arg));
    }
  }
  for (const std::string& arg : def.outputs) {
    if (CountOf(outputs, arg) == 0) {
      return TaskError(task, prefix + ".output", "output '", arg, "'[0] is not bound");
    }
    if (CountOf(outputs, arg) != OpConfCount(conf.op().output(), arg)) {
      return TaskError(task, prefix + ".output", "output '", arg, "': ", CountOf(outputs, arg),
                       " bound blobs but the op lists ", OpConfCount(conf.op().output(), arg));
    }
  }
  return Status::OK();
}

// An input the op writes in place must be the task's own register or one it
// is a mutator of (the producer orders mutators after every reader).
Status CheckMutableInputs(const TaskProto& task, const std::string& prefix, const KernelConf& conf,
                          const OpDef& def, const PlanIndex& index) {
  for (const BlobBinding& binding : conf.input()) {
    if (!Contains(def.mutable_inputs, binding.arg())) continue;
    if (Produces(task, binding.regst_desc_id())) continue;
    const RegstDescProto& desc = *index.FindRegst(binding.regst_desc_id())->desc;
    const auto& mutators = desc.mutator_task_id();
    if (std::find(mutators.begin(), mutators.end(), task.task_id()) == mutators.end()) {
      return TaskError(task, prefix + ".input ('" + binding.arg() + "')", "writes register ",
                       binding.regst_desc_id(), " in place but is not one of its mutators");
    }
  }
  return Status::OK();
}

// On one device physical descs are logical ones: the op's own inference on
// the bound inputs must give the bound outputs (kernels trust these shapes).
Status CheckInferredShapes(const TaskProto& task, const std::string& prefix, const OpConf& op,
                           const BoundDescs& inputs, const BoundDescs& outputs) {
  for (const auto* descs : {&inputs, &outputs}) {
    for (const auto& [arg, list] : *descs) {
      for (const TensorDesc& desc : list) {
        if (desc.is_dynamic) return Status::OK();
      }
    }
  }
  StatusOr<ArgDescs> inferred = InferOp(op, inputs);
  if (!inferred.ok()) {
    return TaskError(task, prefix, "the bound input blobs fail the op's inference: ",
                     inferred.status().message());
  }
  for (const auto& [arg, list] : outputs) {
    auto it = inferred->find(arg);
    for (size_t i = 0; i < list.size(); ++i) {
      if (it == inferred->end() || i >= it->second.size() || it->second[i] != list[i]) {
        return TaskError(task, prefix + ".output ('" + arg + "'[" + std::to_string(i) + "])",
                         "bound blob is ", list[i].ToString(), " but the op infers ",
                         it == inferred->end() || i >= it->second.size()
                             ? std::string("nothing")
                             : it->second[i].ToString());
      }
    }
  }
  return Status::OK();
}

// On several devices physical shapes need not follow the op's inference
// (a reshape of a split part), but dtypes must: the kernel reads every blob
// as its dtype. When inference on the bound blobs works, the outputs'
// dtypes must be the inferred ones; when it fails only because of the
// inputs' dtypes (it works with every input at the kernel's dtype), the
// plan is refused.
Status CheckInferredDtypes(const TaskProto& task, const std::string& prefix, const KernelConf& conf,
                           const BoundDescs& inputs, const BoundDescs& outputs) {
  StatusOr<ArgDescs> inferred = InferOp(conf.op(), inputs);
  if (!inferred.ok()) {
    BoundDescs uniform = inputs;
    for (auto& [arg, list] : uniform) {
      for (TensorDesc& desc : list) desc.dtype = conf.dtype();
    }
    if (InferOp(conf.op(), uniform).ok()) {
      return TaskError(task, prefix + ".input",
                       "the bound blobs' dtypes fail the op's "
                       "inference: ",
                       inferred.status().message());
    }
    return Status::OK();
  }
  for (const auto& [arg, list] : outputs) {
    auto it = inferred->find(arg);
    for (size_t i = 0; i < list.size(); ++i) {
      if (it != inferred->end() && i < it->second.size() && it->second[i].dtype != list[i].dtype) {
        return TaskError(task, prefix + ".output ('" + arg + "'[" + std::to_string(i) + "])",
                         "bound blob is ", DataTypeName(list[i].dtype), " but the op infers ",
                         DataTypeName(it->second[i].dtype));
      }
    }
  }
  return Status::OK();
}

// The registry key's dtype is the first input's (the first output's for ops
// without inputs): the kernel is instantiated for it.
Status CheckKernelDtype(const TaskProto& task, const std::string& prefix, const KernelConf& conf,
                        const PlanIndex& index) {
  const BlobBinding* first = conf.input_size() > 0    ? &conf.input(0)
                             : conf.output_size() > 0 ? &conf.output(0)
                                                      : nullptr;
  if (first == nullptr) return Status::OK();
  const RegstDescProto& desc = *index.FindRegst(first->regst_desc_id())->desc;
  const DataType blob = desc.blob(first->blob_index()).desc().dtype();
  if (blob != conf.dtype()) {
    return TaskError(task, prefix + ".dtype", DataTypeName(conf.dtype()), " but its first blob ('",
                     first->arg(), "') is ", DataTypeName(blob));
  }
  return Status::OK();
}

Status CheckKernel(const TaskProto& task, int k, const PlanIndex& index) {
  const KernelConf& conf = task.kernel(k);
  const std::string prefix = "kernel[" + std::to_string(k) + "] (op '" + conf.op().name() + "', " +
                             conf.op().op_type() + ")";
  if (conf.op().op_type().empty()) return TaskError(task, prefix + ".op.op_type", "empty");
  if (!DataType_IsValid(conf.dtype())) {
    return TaskError(task, prefix + ".dtype", static_cast<int>(conf.dtype()),
                     " is not a data type");
  }
  BoundDescs inputs, outputs;
  RETURN_IF_ERROR(CheckBindingList(task, prefix, conf.input(), false, index, &inputs));
  RETURN_IF_ERROR(CheckBindingList(task, prefix, conf.output(), true, index, &outputs));
  RETURN_IF_ERROR(CheckKernelDtype(task, prefix, conf, index));
  RETURN_IF_ERROR(CheckOpConfArgs(task, prefix + ".input", "input", conf.op().input(), inputs));
  RETURN_IF_ERROR(CheckOpConfArgs(task, prefix + ".output", "output", conf.op().output(), outputs));
  StatusOr<const OpDef*> def = LookupOpDef(conf.op().op_type());
  if (!def.ok()) return Status::OK();  // no definition linked: the kernel lookup decides
  RETURN_IF_ERROR(CheckArgs(task, prefix, conf, **def, inputs, outputs));
  RETURN_IF_ERROR(CheckMutableInputs(task, prefix, conf, **def, index));
  if (task.parallel_ctx().parallel_num() <= 1) {
    RETURN_IF_ERROR(CheckInferredShapes(task, prefix, conf.op(), inputs, outputs));
  } else {
    RETURN_IF_ERROR(CheckInferredDtypes(task, prefix, conf, inputs, outputs));
  }
  return Status::OK();
}

}  // namespace

Status CheckKernels(const TaskProto& task, const PlanIndex& index) {
  const bool runs_kernels =
      task.type() == TASK_COMPUTE || task.type() == TASK_SOURCE || task.type() == TASK_VARIABLE;
  if (runs_kernels && task.kernel_size() == 0) {
    return TaskError(task, "kernel", "a ", TaskType_Name(task.type()), " task has no KernelConf");
  }
  for (int k = 0; k < task.kernel_size(); ++k) RETURN_IF_ERROR(CheckKernel(task, k, index));
  return Status::OK();
}

}  // namespace plan_internal
}  // namespace oflite
