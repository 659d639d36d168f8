#include "oneflow_lite/kernels/kernel.h"

#include <tuple>

#include "oneflow_lite/common/data_type.h"

namespace oflite {
namespace {

using Key = std::tuple<std::string, int, int>;

std::map<Key, KernelFactory>& Registry() {
  static auto* registry = new std::map<Key, KernelFactory>();
  return *registry;
}

template <typename Map>
const TensorDesc& DescAt(const Map& m, const std::string& arg, int index, const OpConf* op) {
  auto it = m.find(arg);
  CHECK(it != m.end() && index < static_cast<int>(it->second.size()))
      << "op '" << (op ? op->name() : "?") << "': no arg " << arg << "[" << index << "]";
  return it->second[index];
}

}  // namespace

const TensorDesc& KernelInitContext::Input(const std::string& arg, int index) const {
  return DescAt(inputs, arg, index, op);
}

const TensorDesc& KernelInitContext::Output(const std::string& arg, int index) const {
  return DescAt(outputs, arg, index, op);
}

void KernelContext::Bind(const std::string& arg, Blob* blob, std::vector<Binding>* bindings) {
  bindings->push_back(Binding{arg, Count(*bindings, arg), blob});
}

const KernelContext::Binding* KernelContext::Find(const std::vector<Binding>& bindings,
                                                  const std::string& arg, int index) {
  for (size_t i = 0; i < bindings.size(); ++i) {
    if (bindings[i].arg != arg) continue;
    // The bindings of one arg are usually made one after another.
    const size_t guess = i + static_cast<size_t>(index);
    if (index >= 0 && guess < bindings.size() && bindings[guess].index == index &&
        bindings[guess].arg == arg) {
      return &bindings[guess];
    }
    for (size_t j = i; j < bindings.size(); ++j) {
      if (bindings[j].index == index && bindings[j].arg == arg) return &bindings[j];
    }
    return nullptr;
  }
  return nullptr;
}

int KernelContext::Count(const std::vector<Binding>& bindings, const std::string& arg) {
  int count = 0;
  for (const Binding& binding : bindings) count += binding.arg == arg ? 1 : 0;
  return count;
}

int KernelContext::InputCount(const std::string& arg) const { return Count(inputs_, arg); }

const Blob& KernelContext::Input(const std::string& arg, int index) const {
  const Binding* binding = Find(inputs_, arg, index);
  CHECK(binding != nullptr && binding->blob != nullptr)
      << "op '" << op_->name() << "': input " << arg << "[" << index << "] not bound";
  return *binding->blob;
}

Blob* KernelContext::MutableInput(const std::string& arg, int index) {
  const Binding* binding = Find(inputs_, arg, index);
  CHECK(binding != nullptr && binding->blob != nullptr)
      << "op '" << op_->name() << "': input " << arg << "[" << index << "] not bound";
  return binding->blob;
}

int KernelContext::OutputCount(const std::string& arg) const { return Count(outputs_, arg); }

Blob* KernelContext::Output(const std::string& arg, int index) {
  const Binding* binding = Find(outputs_, arg, index);
  CHECK(binding != nullptr && binding->blob != nullptr)
      << "op '" << op_->name() << "': output " << arg << "[" << index << "] not bound";
  return binding->blob;
}

StatusOr<std::unique_ptr<Kernel>> CreateKernel(const OpConf& op, DeviceType device,
                                               DataType dtype) {
  auto it = Registry().find(Key{op.op_type(), device, dtype});
  if (it == Registry().end()) {
    return NotFoundError("op '", op.name(), "': no kernel for (", op.op_type(), ", ",
                         DeviceTypeName(device), ", ", DataTypeName(dtype), ")");
  }
  return it->second();
}

bool HasKernel(const std::string& op_type, DeviceType device, DataType dtype) {
  return Registry().count(Key{op_type, device, dtype}) > 0;
}

StatusOr<std::unique_ptr<Kernel>> CreateAndInitKernel(const KernelInitContext& init,
                                                      DeviceType device, DataType dtype) {
  ASSIGN_OR_RETURN(std::unique_ptr<Kernel> kernel, CreateKernel(*init.op, device, dtype));
  RETURN_IF_ERROR(kernel->Init(init));
  return kernel;
}

KernelRegistrar::KernelRegistrar(const std::string& op_type, DeviceType device, DataType dtype,
                                 KernelFactory factory) {
  CHECK(Registry().emplace(Key{op_type, device, dtype}, std::move(factory)).second)
      << "kernel (" << op_type << ", " << DeviceTypeName(device) << ", " << DataTypeName(dtype)
      << ") registered twice";
}

}  // namespace oflite
