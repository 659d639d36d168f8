// StridedLoop: iteration over an N-d index space where each of several
// operands (output and inputs) is addressed through its own strides, used by
// the broadcasting, reduction, transpose and slice kernels.
//
// Construction merges adjacent axes that are contiguous for every operand and
// drops size-1 axes, so the innermost run is as long as possible. ForEachRow
// calls `row(offsets, count)` once per innermost run, where offsets[k] is the
// element offset of operand k at the run's start; the caller walks the run
// with the operand's innermost stride (InnerStride), typically in a simple
// vectorizable loop specialized for strides 0 and 1.
//
// A StridedLoop is an immutable value; ForEachRow is reentrant.
#ifndef ONEFLOW_LITE_KERNELS_CPU_MATH_STRIDED_LOOP_H_
#define ONEFLOW_LITE_KERNELS_CPU_MATH_STRIDED_LOOP_H_

#include <cstdint>
#include <vector>

#include "oneflow_lite/common/shape.h"

namespace oflite {
namespace math {

// Row-major element strides of a contiguous tensor of `shape`.
std::vector<int64_t> ContiguousStrides(const Shape& shape);

// Strides that read a tensor of shape `in` (right-aligned, numpy style) over
// the index space `out`: 0 along axes where `in` is absent or has size 1.
std::vector<int64_t> BroadcastStrides(const Shape& in, const Shape& out);

class StridedLoop {
 public:
  // `strides[k]` has one stride per axis of `dims` for operand k.
  StridedLoop(const std::vector<int64_t>& dims, const std::vector<std::vector<int64_t>>& strides);

  int64_t InnerStride(int operand) const { return inner_strides_[operand]; }
  // The merged axes (size-1 axes dropped) and each operand's strides on them.
  const std::vector<int64_t>& dims() const { return dims_; }
  const std::vector<int64_t>& strides(int operand) const { return strides_[operand]; }
  bool empty() const { return empty_; }

  template <typename RowFn>
  void ForEachRow(RowFn&& row) const;

 private:
  std::vector<int64_t> dims_;                  // merged; last is the inner run
  std::vector<std::vector<int64_t>> strides_;  // per operand, per merged axis
  std::vector<int64_t> inner_strides_;
  bool empty_ = false;
};

template <typename RowFn>
void StridedLoop::ForEachRow(RowFn&& row) const {
  if (empty_) return;
  const int operands = static_cast<int>(strides_.size());
  std::vector<int64_t> offsets(operands, 0);
  const int64_t rank = static_cast<int64_t>(dims_.size());
  if (rank == 0) {
    row(offsets.data(), int64_t{1});
    return;
  }
  const int64_t inner = dims_[rank - 1];
  std::vector<int64_t> index(rank - 1, 0);
  while (true) {
    row(offsets.data(), inner);
    int64_t axis = rank - 2;
    for (; axis >= 0; --axis) {
      for (int k = 0; k < operands; ++k) offsets[k] += strides_[k][axis];
      if (++index[axis] < dims_[axis]) break;
      for (int k = 0; k < operands; ++k) offsets[k] -= strides_[k][axis] * dims_[axis];
      index[axis] = 0;
    }
    if (axis < 0) return;
  }
}

}  // namespace math
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_MATH_STRIDED_LOOP_H_
