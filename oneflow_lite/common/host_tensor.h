// HostTensor: an owning, 64-byte aligned tensor in host memory.
//
// Used by the reference executor, checkpoints, data loading and tests; the
// runtime itself cuts blobs out of planned memory instead. Movable, not
// copyable (use Clone). Thread-compatible.
#ifndef ONEFLOW_LITE_COMMON_HOST_TENSOR_H_
#define ONEFLOW_LITE_COMMON_HOST_TENSOR_H_

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "oneflow_lite/common/tensor.h"

namespace oflite {

class HostTensor {
 public:
  HostTensor() = default;
  // Zero-filled.
  explicit HostTensor(TensorDesc desc);
  HostTensor(HostTensor&&) = default;
  HostTensor& operator=(HostTensor&&) = default;

  template <typename T>
  static HostTensor FromVector(const Shape& shape, const std::vector<T>& values) {
    HostTensor t(TensorDesc(shape, kDataTypeOf<T>));
    CHECK_EQ(static_cast<int64_t>(values.size()), shape.elem_count());
    if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(T));
    return t;
  }

  HostTensor Clone() const;

  const TensorDesc& desc() const { return desc_; }
  const Shape& shape() const { return desc_.shape; }
  DataType dtype() const { return desc_.dtype; }
  int64_t elem_count() const { return desc_.shape.elem_count(); }
  int64_t ByteSize() const { return desc_.ByteSize(); }

  void* raw() { return data_.get(); }
  const void* raw() const { return data_.get(); }
  template <typename T>
  T* data() {
    CHECK_EQ(kDataTypeOf<T>, desc_.dtype);
    return static_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    CHECK_EQ(kDataTypeOf<T>, desc_.dtype);
    return static_cast<const T*>(raw());
  }
  template <typename T>
  std::vector<T> ToVector() const {
    const T* p = data<T>();
    return std::vector<T>(p, p + elem_count());
  }

  // A Blob view of this tensor (valid while the tensor lives).
  Blob AsBlob() { return Blob(raw(), desc_); }

 private:
  struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
  };
  TensorDesc desc_;
  std::unique_ptr<void, FreeDeleter> data_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_HOST_TENSOR_H_
