#include "oneflow_lite/common/shape.h"

#include <sstream>

namespace oflite {

int64_t Shape::elem_count() const { return Count(0, rank()); }

int64_t Shape::Count(int64_t begin, int64_t end) const {
  int64_t n = 1;
  for (int64_t i = begin; i < end; ++i) n *= dims_.at(i);
  return n;
}

ShapeProto Shape::ToProto() const {
  ShapeProto proto;
  ToProto(&proto);
  return proto;
}

void Shape::ToProto(ShapeProto* proto) const {
  proto->clear_dim();
  for (int64_t d : dims_) proto->add_dim(d);
}

std::string Shape::ToString() const {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) os << ", ";
    os << dims_[i];
  }
  if (dims_.size() == 1) os << ",";
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Shape& shape) { return os << shape.ToString(); }

}  // namespace oflite
