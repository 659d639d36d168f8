// The geometry of one matmul (docs/ops.md): out = alpha * op(a) @ op(b),
// where the last two dims of a and b are the matrices (op() applies
// transpose_a / transpose_b to them) and the leading "batch" dims broadcast
// numpy-style. With sum_batch the products are summed over the batch instead
// (a and b then have identical batch dims) and out is one [m, n] matrix.
//
// Shape inference, the CPU kernel and the CUDA kernel all read a matmul
// through MakeMatmulGeometry, so the three agree on what is valid and on
// which cases are a single GEMM. Pure functions; thread-compatible values.
#ifndef ONEFLOW_LITE_OPS_MATH_MATMUL_UTIL_H_
#define ONEFLOW_LITE_OPS_MATH_MATMUL_UTIL_H_

#include <cstdint>
#include <vector>

#include "oneflow_lite/common/shape.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace math {

struct MatmulGeometry {
  // One axis of the batch walk. Offsets are in elements from the start of
  // the blob; a stride of 0 means the operand is broadcast along the axis
  // (out_stride is 0 for every axis under sum_batch).
  struct BatchAxis {
    int64_t extent = 0;
    int64_t a_stride = 0;
    int64_t b_stride = 0;
    int64_t out_stride = 0;
  };

  bool transpose_a = false, transpose_b = false, sum_batch = false;
  // op(a) is [m, k], op(b) is [k, n].
  int64_t m = 0, n = 0, k = 0;
  // Row lengths of the stored matrices (BLAS's lda, ldb for row-major).
  int64_t a_cols = 0, b_cols = 0;
  Shape out;
  // out's batch dims with extent-1 axes dropped and neighbouring axes that
  // every operand walks alike merged; outermost first. Empty: one matrix.
  std::vector<BatchAxis> batch;
  int64_t batch_count = 1;  // product of the extents (0 for an empty batch)

  // Element offsets of the matrices of batch entry `index` (row-major over
  // `batch`, 0 <= index < batch_count).
  void Offsets(int64_t index, int64_t* a, int64_t* b, int64_t* out) const;

  // The whole op is one GEMM of [rows, k] x [k, n] -> [rows, n] with
  // rows = batch_count * m: a is contiguous over the batch, not transposed,
  // and b is the same matrix for every entry (the "Linear" case). Also true
  // without batch.
  bool FoldsIntoRows() const;

  // sum_batch as one GEMM: k is the stored row dim of both operands
  // (transpose_a && !transpose_b) and both are contiguous over the batch,
  // so sum_i a_i^T b_i = A^T B with A = [batch_count * k, m] and
  // B = [batch_count * k, n] (the Linear case's weight gradient).
  bool FoldsIntoInner() const;
};

// Checks a and b (ranks >= 2, matching k, broadcastable batch dims; with
// sum_batch identical batch dims) and describes the product. The error's
// message names the shapes but not the op: callers prefix it.
StatusOr<MatmulGeometry> MakeMatmulGeometry(const Shape& a, const Shape& b, bool transpose_a,
                                            bool transpose_b, bool sum_batch);

// matmul's SBP signatures, one (a, b, out) triple each, for matmul and the
// fused matmul_bias: batch axes split like broadcasting binary ops (under
// sum_batch a batch axis split on both operands sums to P); a split along
// op(a)'s rows, along op(b)'s columns, or both along k (P); and P through
// a linear operand.
struct MatmulSbpCase {
  SbpParallel a, b, out;
};
std::vector<MatmulSbpCase> MatmulSbpCases(const Shape& a, const Shape& b, const Shape& out,
                                          bool transpose_a, bool transpose_b, bool sum_batch);

}  // namespace math
}  // namespace oflite

#endif  // ONEFLOW_LITE_OPS_MATH_MATMUL_UTIL_H_
