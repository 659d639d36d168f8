#include "oneflow_lite/common/tensor.h"

namespace oflite {

TensorDescProto TensorDesc::ToProto() const {
  TensorDescProto proto;
  shape.ToProto(proto.mutable_shape());
  proto.set_dtype(dtype);
  proto.set_is_dynamic(is_dynamic);
  return proto;
}

std::string TensorDesc::ToString() const {
  return std::string(DataTypeName(dtype)) + shape.ToString() + (is_dynamic ? "*" : "");
}

}  // namespace oflite
