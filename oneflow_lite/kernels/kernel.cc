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

int KernelContext::InputCount(const std::string& arg) const {
  auto it = inputs_.find(arg);
  return it == inputs_.end() ? 0 : static_cast<int>(it->second.size());
}

const Blob& KernelContext::Input(const std::string& arg, int index) const {
  auto it = inputs_.find(arg);
  CHECK(it != inputs_.end() && index < static_cast<int>(it->second.size()))
      << "op '" << op_->name() << "': input " << arg << "[" << index << "] not bound";
  return *it->second[index];
}

Blob* KernelContext::MutableInput(const std::string& arg, int index) {
  auto it = inputs_.find(arg);
  CHECK(it != inputs_.end() && index < static_cast<int>(it->second.size()))
      << "op '" << op_->name() << "': input " << arg << "[" << index << "] not bound";
  return it->second[index];
}

int KernelContext::OutputCount(const std::string& arg) const {
  auto it = outputs_.find(arg);
  return it == outputs_.end() ? 0 : static_cast<int>(it->second.size());
}

Blob* KernelContext::Output(const std::string& arg, int index) {
  auto it = outputs_.find(arg);
  CHECK(it != outputs_.end() && index < static_cast<int>(it->second.size()))
      << "op '" << op_->name() << "': output " << arg << "[" << index << "] not bound";
  return it->second[index];
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
