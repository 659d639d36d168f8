#include "oneflow_lite/common/host_tensor.h"

namespace oflite {

HostTensor::HostTensor(TensorDesc desc) : desc_(std::move(desc)) {
  const int64_t bytes = desc_.ByteSize();
  // Round up so aligned_alloc's size is a multiple of the alignment; at
  // least one block so raw() is never null.
  const size_t alloc = static_cast<size_t>(std::max<int64_t>(64, (bytes + 63) / 64 * 64));
  void* p = std::aligned_alloc(64, alloc);
  CHECK(p != nullptr) << "out of host memory allocating " << alloc << " bytes for "
                      << desc_.ToString();
  std::memset(p, 0, alloc);
  data_.reset(p);
}

HostTensor HostTensor::Clone() const {
  HostTensor t(desc_);
  if (ByteSize() > 0) std::memcpy(t.raw(), raw(), ByteSize());
  return t;
}

}  // namespace oflite
