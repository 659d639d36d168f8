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

#include <algorithm>
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

  // The innermost runs ForEachRow visits (0 when empty, 1 for rank 0).
  int64_t RowCount() const;

  template <typename RowFn>
  void ForEachRow(RowFn&& row) const {
    ForEachRowIn(0, RowCount(), row);
  }

  // Like ForEachRow, for runs [first, last) of ForEachRow's order only (a
  // thread's share of the runs: kernels/cpu/parallel_rows.h).
  template <typename RowFn>
  void ForEachRowIn(int64_t first, int64_t last, RowFn&& row) const;

 private:
  std::vector<int64_t> dims_;                  // merged; last is the inner run
  std::vector<std::vector<int64_t>> strides_;  // per operand, per merged axis
  std::vector<int64_t> inner_strides_;
  bool empty_ = false;
};

inline int64_t StridedLoop::RowCount() const {
  if (empty_) return 0;
  int64_t rows = 1;
  for (size_t axis = 0; axis + 1 < dims_.size(); ++axis) rows *= dims_[axis];
  return rows;
}

template <typename RowFn>
void StridedLoop::ForEachRowIn(int64_t first, int64_t last, RowFn&& row) const {
  if (empty_ || first >= last) return;
  const int operands = static_cast<int>(strides_.size());
  std::vector<int64_t> offsets(operands, 0);
  const int64_t rank = static_cast<int64_t>(dims_.size());
  if (rank == 0) {
    row(offsets.data(), int64_t{1});
    return;
  }
  const int64_t inner = dims_[rank - 1];
  // The outer index of run `first` (row-major over the axes before the last).
  std::vector<int64_t> index(rank - 1, 0);
  for (int64_t axis = rank - 2, rest = first; axis >= 0; --axis) {
    index[axis] = rest % dims_[axis];
    rest /= dims_[axis];
    for (int k = 0; k < operands; ++k) offsets[k] += index[axis] * strides_[k][axis];
  }
  for (int64_t run = first; run < last; ++run) {
    row(offsets.data(), inner);
    for (int64_t axis = rank - 2; axis >= 0; --axis) {
      for (int k = 0; k < operands; ++k) offsets[k] += strides_[k][axis];
      if (++index[axis] < dims_[axis]) break;
      for (int k = 0; k < operands; ++k) offsets[k] -= strides_[k][axis] * dims_[axis];
      index[axis] = 0;
    }
  }
}

// out[r * out_row_stride + c] = in[r + c * in_col_stride] for r < rows,
// c < cols, in kTransposeTile x kTransposeTile tiles so that both the reads
// and the writes of a tile stay in cache: the transpose kernel's inner
// step, and the turn of a GEMM's result (gemm_orientation.h).
constexpr int64_t kTransposeTile = 32;

template <typename T>
void CopyTransposedTiles(const T* in, int64_t in_col_stride, T* out, int64_t out_row_stride,
                         int64_t rows, int64_t cols) {
  for (int64_t r0 = 0; r0 < rows; r0 += kTransposeTile) {
    const int64_t r1 = std::min(rows, r0 + kTransposeTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTransposeTile) {
      const int64_t c1 = std::min(cols, c0 + kTransposeTile);
      for (int64_t r = r0; r < r1; ++r) {
        T* o = out + r * out_row_stride;
        const T* p = in + r;
        for (int64_t c = c0; c < c1; ++c) o[c] = p[c * in_col_stride];
      }
    }
  }
}

}  // namespace math
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CPU_MATH_STRIDED_LOOP_H_
