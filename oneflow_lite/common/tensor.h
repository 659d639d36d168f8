// TensorDesc (shape + dtype) and Blob (a non-owning view of a tensor's
// memory). Kernels receive Blobs; whoever created the memory (the runtime's
// register, a test, the reference executor) owns it and keeps it alive for
// the kernel call. A Blob is not thread-safe; the actor protocol guarantees a
// register's blobs are touched by one actor at a time.
#ifndef ONEFLOW_LITE_COMMON_TENSOR_H_
#define ONEFLOW_LITE_COMMON_TENSOR_H_

#include <cstdint>
#include <string>

#include <glog/logging.h>

#include "oneflow_lite/common/data_type.h"
#include "oneflow_lite/common/shape.h"
#include "proto/common.pb.h"

namespace oflite {

struct TensorDesc {
  Shape shape;
  DataType dtype = DT_INVALID;
  bool is_dynamic = false;

  TensorDesc() = default;
  TensorDesc(Shape s, DataType t, bool dynamic = false)
      : shape(std::move(s)), dtype(t), is_dynamic(dynamic) {}
  explicit TensorDesc(const TensorDescProto& proto)
      : shape(proto.shape()), dtype(proto.dtype()), is_dynamic(proto.is_dynamic()) {}

  int64_t ByteSize() const { return shape.elem_count() * SizeOf(dtype); }
  TensorDescProto ToProto() const;
  // "float32(64, 784)".
  std::string ToString() const;
  bool operator==(const TensorDesc& o) const {
    return shape == o.shape && dtype == o.dtype && is_dynamic == o.is_dynamic;
  }
  bool operator!=(const TensorDesc& o) const { return !(*this == o); }
};

class Blob {
 public:
  Blob() = default;
  Blob(void* data, TensorDesc desc) : data_(data), desc_(std::move(desc)) {}

  const TensorDesc& desc() const { return desc_; }
  const Shape& shape() const { return desc_.shape; }
  DataType dtype() const { return desc_.dtype; }
  int64_t elem_count() const { return desc_.shape.elem_count(); }
  int64_t ByteSize() const { return desc_.ByteSize(); }

  // For dynamic blobs the producer sets the actual shape (<= the max shape).
  void set_shape(Shape shape) { desc_.shape = std::move(shape); }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <typename T>
  T* data() {
    DCHECK_EQ(kDataTypeOf<T>, desc_.dtype);
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data() const {
    DCHECK_EQ(kDataTypeOf<T>, desc_.dtype);
    return static_cast<const T*>(data_);
  }

 private:
  void* data_ = nullptr;
  TensorDesc desc_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_TENSOR_H_
