// Shape: the dimensions of a tensor. A value type; rank 0 is a scalar
// (one element). Thread-compatible.
#ifndef ONEFLOW_LITE_COMMON_SHAPE_H_
#define ONEFLOW_LITE_COMMON_SHAPE_H_

#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "proto/common.pb.h"

namespace oflite {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}
  explicit Shape(const ShapeProto& proto) : dims_(proto.dim().begin(), proto.dim().end()) {}

  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t dim(int64_t i) const { return dims_.at(i); }
  int64_t& mutable_dim(int64_t i) { return dims_.at(i); }
  const std::vector<int64_t>& dims() const { return dims_; }
  // Product of all dims (1 for a scalar).
  int64_t elem_count() const;
  // Product of dims [begin, end).
  int64_t Count(int64_t begin, int64_t end) const;
  int64_t Count(int64_t begin) const { return Count(begin, rank()); }

  ShapeProto ToProto() const;
  void ToProto(ShapeProto* proto) const;
  // "(64, 784)".
  std::string ToString() const;

  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }

 private:
  std::vector<int64_t> dims_;
};

std::ostream& operator<<(std::ostream& os, const Shape& shape);

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_SHAPE_H_
