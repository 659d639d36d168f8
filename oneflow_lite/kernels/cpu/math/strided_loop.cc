#include "oneflow_lite/kernels/cpu/math/strided_loop.h"

#include <glog/logging.h>

namespace oflite {
namespace math {

std::vector<int64_t> ContiguousStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.rank(), 1);
  for (int64_t i = shape.rank() - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape.dim(i + 1);
  return strides;
}

std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out) {
  CHECK_LE(in.rank(), out.rank());
  const std::vector<int64_t> contiguous = ContiguousStrides(in);
  std::vector<int64_t> strides(out.rank(), 0);
  const int64_t lead = out.rank() - in.rank();
  for (int64_t i = 0; i < in.rank(); ++i) {
    if (in.dim(i) != 1 || out.dim(i + lead) == 1) strides[i + lead] = contiguous[i];
  }
  return strides;
}

StridedLoop::StridedLoop(const std::vector<int64_t>& dims,
                         const std::vector<std::vector<int64_t>>& strides) {
  const int operands = static_cast<int>(strides.size());
  strides_.assign(operands, {});
  for (int64_t d : dims) {
    if (d == 0) empty_ = true;
  }
  // Keep axes of size > 1, merging each into the previous kept axis when
  // contiguous for every operand.
  for (size_t axis = 0; axis < dims.size(); ++axis) {
    if (dims[axis] == 1) continue;
    bool merge = !dims_.empty();
    for (int k = 0; merge && k < operands; ++k) {
      merge = strides_[k].back() == strides[k][axis] * dims[axis];
    }
    if (merge) {
      dims_.back() *= dims[axis];
      for (int k = 0; k < operands; ++k) strides_[k].back() = strides[k][axis];
    } else {
      dims_.push_back(dims[axis]);
      for (int k = 0; k < operands; ++k) strides_[k].push_back(strides[k][axis]);
    }
  }
  inner_strides_.assign(operands, 0);
  if (!dims_.empty()) {
    for (int k = 0; k < operands; ++k) inner_strides_[k] = strides_[k].back();
  }
}

}  // namespace math
}  // namespace oflite
