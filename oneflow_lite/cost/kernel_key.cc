#include "oneflow_lite/cost/kernel_key.h"

#include <algorithm>
#include <sstream>

#include "oneflow_lite/common/data_type.h"

namespace oflite {
namespace cost {

PlanIndex::PlanIndex(const Plan& plan) : plan_(&plan) {
  for (const MachinePlan& machine : plan.machine()) {
    for (const TaskProto& task : machine.task()) {
      tasks_.push_back(&task);
      task_by_id_[task.task_id()] = &task;
      for (const RegstDescProto& regst : task.produced()) regsts_[regst.regst_desc_id()] = &regst;
    }
  }
}

const RegstDescProto* PlanIndex::regst(int64_t regst_desc_id) const {
  auto it = regsts_.find(regst_desc_id);
  return it == regsts_.end() ? nullptr : it->second;
}

const TaskProto* PlanIndex::task(int64_t task_id) const {
  auto it = task_by_id_.find(task_id);
  return it == task_by_id_.end() ? nullptr : it->second;
}

namespace {

StatusOr<TensorDescProto> BoundDesc(const KernelConf& kernel, const BlobBinding& binding,
                                    const PlanIndex& index) {
  const RegstDescProto* regst = index.regst(binding.regst_desc_id());
  if (regst == nullptr) {
    return InvalidArgumentError("op '", kernel.op().name(), "': argument '", binding.arg(),
                                "' is bound to register desc ", binding.regst_desc_id(),
                                ", which no task of the plan produces");
  }
  if (binding.blob_index() < 0 || binding.blob_index() >= regst->blob_size()) {
    return InvalidArgumentError("op '", kernel.op().name(), "': argument '", binding.arg(),
                                "' is bound to blob ", binding.blob_index(), " of register desc ",
                                binding.regst_desc_id(), ", which has ", regst->blob_size());
  }
  return regst->blob(binding.blob_index()).desc();
}

std::string ShapeText(const TensorDescProto& desc) {
  std::string text;
  for (int i = 0; i < desc.shape().dim_size(); ++i) {
    if (i > 0) text += "x";
    text += std::to_string(desc.shape().dim(i));
  }
  return text.empty() ? "scalar" : text;
}

std::string AttrText(const AttrValue& value) {
  std::ostringstream out;
  switch (value.value_case()) {
    case AttrValue::kI: out << value.i(); break;
    case AttrValue::kF: out << value.f(); break;
    case AttrValue::kS: out << value.s(); break;
    case AttrValue::kB: out << (value.b() ? 1 : 0); break;
    case AttrValue::kInts:
      for (int i = 0; i < value.ints().value_size(); ++i) out << (i ? ":" : "") << value.ints().value(i);
      break;
    case AttrValue::kFloats:
      for (int i = 0; i < value.floats().value_size(); ++i) out << (i ? ":" : "") << value.floats().value(i);
      break;
    case AttrValue::kShape:
      for (int i = 0; i < value.shape().dim_size(); ++i) out << (i ? "x" : "") << value.shape().dim(i);
      break;
    case AttrValue::kDtype: out << DataTypeName(value.dtype()); break;
    case AttrValue::kStrs:
      for (int i = 0; i < value.strs().value_size(); ++i) out << (i ? ":" : "") << value.strs().value(i);
      break;
    default: break;
  }
  return out.str();
}

// Attributes that name files or blobs rather than shape the work.
bool NamesOnly(const std::string& key) {
  static const char* const kNames[] = {"path", "file", "dir", "dataset", "name"};
  return std::any_of(std::begin(kNames), std::end(kNames),
                     [&](const char* n) { return key == n; });
}

const char* DeviceText(DeviceType type) {
  switch (type) {
    case DEVICE_CPU: return "cpu";
    case DEVICE_CUDA: return "cuda";
    default: return "device?";
  }
}

}  // namespace

StatusOr<KernelShapes> ShapesOfKernel(const KernelConf& kernel, const PlanIndex& index) {
  KernelShapes shapes;
  for (const BlobBinding& binding : kernel.input()) {
    ASSIGN_OR_RETURN(TensorDescProto desc, BoundDesc(kernel, binding, index));
    shapes.inputs.push_back(std::move(desc));
  }
  for (const BlobBinding& binding : kernel.output()) {
    ASSIGN_OR_RETURN(TensorDescProto desc, BoundDesc(kernel, binding, index));
    shapes.outputs.push_back(std::move(desc));
  }
  return shapes;
}

StatusOr<std::string> KernelKey(const KernelConf& kernel, DeviceType device_type, int threads,
                                const PlanIndex& index) {
  ASSIGN_OR_RETURN(KernelShapes shapes, ShapesOfKernel(kernel, index));
  std::string key = kernel.op().op_type();
  key += " ";
  key += DataTypeName(kernel.dtype());
  key += " ";
  key += DeviceText(device_type);
  key += "/t" + std::to_string(threads);
  key += " in=";
  for (size_t i = 0; i < shapes.inputs.size(); ++i) {
    if (i > 0) key += ",";
    key += ShapeText(shapes.inputs[i]);
  }
  key += " out=";
  for (size_t i = 0; i < shapes.outputs.size(); ++i) {
    if (i > 0) key += ",";
    key += ShapeText(shapes.outputs[i]);
  }
  key += " {";
  bool first = true;
  for (const AttrEntry& entry : kernel.op().attr()) {
    if (NamesOnly(entry.key())) continue;
    if (!first) key += " ";
    first = false;
    key += entry.key() + "=" + AttrText(entry.value());
  }
  key += "}";
  return key;
}

int64_t KernelElements(const KernelShapes& shapes) {
  int64_t total = 0;
  auto add = [&](const TensorDescProto& desc) {
    int64_t n = 1;
    for (int64_t d : desc.shape().dim()) n *= d;
    total += n;
  };
  for (const auto& d : shapes.inputs) add(d);
  for (const auto& d : shapes.outputs) add(d);
  return total;
}

int CpuThreadsOf(const MachineProto& machine, int host_cores) {
  if (machine.cpu_threads() > 0) return machine.cpu_threads();
  int devices = std::max(1, machine.cpu_devices());
  return std::max(1, host_cores / devices);
}

}  // namespace cost
}  // namespace oflite
