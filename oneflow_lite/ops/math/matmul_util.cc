#include "oneflow_lite/ops/math/matmul_util.h"

#include <string>

#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {

void MatmulGeometry::Offsets(int64_t index, int64_t* a, int64_t* b, int64_t* out) const {
  *a = *b = *out = 0;
  for (auto axis = batch.rbegin(); axis != batch.rend(); ++axis) {
    const int64_t i = index % axis->extent;
    index /= axis->extent;
    *a += i * axis->a_stride;
    *b += i * axis->b_stride;
    *out += i * axis->out_stride;
  }
}

bool MatmulGeometry::FoldsIntoRows() const {
  if (batch.empty()) return true;
  return !sum_batch && !transpose_a && batch.size() == 1 && batch[0].b_stride == 0 &&
         batch[0].a_stride == m * k;
}

bool MatmulGeometry::FoldsIntoInner() const {
  if (batch.empty()) return true;
  return sum_batch && transpose_a && !transpose_b && batch.size() == 1 &&
         batch[0].a_stride == m * k && batch[0].b_stride == k * n;
}

namespace {

std::string Transposed(bool transpose) { return transpose ? " (transposed)" : ""; }

// The batch walk over out's batch dims `dims`, right-aligning a's and b's
// batch dims (the caller checked they broadcast).
std::vector<MatmulGeometry::BatchAxis> BatchAxes(const Shape& a, const Shape& b,
                                                 const std::vector<int64_t>& dims,
                                                 const MatmulGeometry& g) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  const int64_t a_lead = rank - (a.rank() - 2), b_lead = rank - (b.rank() - 2);
  std::vector<MatmulGeometry::BatchAxis> axes(rank);
  int64_t a_stride = g.m * g.k, b_stride = g.k * g.n, out_stride = g.sum_batch ? 0 : g.m * g.n;
  for (int64_t i = rank - 1; i >= 0; --i) {
    const int64_t a_dim = i >= a_lead ? a.dim(i - a_lead) : 1;
    const int64_t b_dim = i >= b_lead ? b.dim(i - b_lead) : 1;
    axes[i] = {dims[i], a_dim == 1 ? 0 : a_stride, b_dim == 1 ? 0 : b_stride, out_stride};
    a_stride *= a_dim;
    b_stride *= b_dim;
    out_stride *= dims[i];
  }
  // Drop extent-1 axes, then merge an axis into the one inside it when both
  // operands (and out) continue the inner axis's stride.
  std::vector<MatmulGeometry::BatchAxis> merged;
  for (const auto& axis : axes) {
    if (axis.extent == 1) continue;
    if (!merged.empty()) {
      MatmulGeometry::BatchAxis& outer = merged.back();
      if (outer.a_stride == axis.a_stride * axis.extent &&
          outer.b_stride == axis.b_stride * axis.extent &&
          outer.out_stride == axis.out_stride * axis.extent) {
        outer = {outer.extent * axis.extent, axis.a_stride, axis.b_stride, axis.out_stride};
        continue;
      }
    }
    merged.push_back(axis);
  }
  return merged;
}

}  // namespace

StatusOr<MatmulGeometry> MakeMatmulGeometry(const Shape& a, const Shape& b, bool transpose_a,
                                            bool transpose_b, bool sum_batch) {
  if (a.rank() < 2 || b.rank() < 2) {
    return InvalidArgumentError("matmul needs inputs of rank >= 2, got a ", a, " and b ", b);
  }
  MatmulGeometry g;
  g.transpose_a = transpose_a;
  g.transpose_b = transpose_b;
  g.sum_batch = sum_batch;
  const int64_t a_rows = a.dim(a.rank() - 2), b_rows = b.dim(b.rank() - 2);
  g.a_cols = a.dim(a.rank() - 1);
  g.b_cols = b.dim(b.rank() - 1);
  g.m = transpose_a ? g.a_cols : a_rows;
  g.k = transpose_a ? a_rows : g.a_cols;
  g.n = transpose_b ? b_rows : g.b_cols;
  const int64_t kb = transpose_b ? g.b_cols : b_rows;
  if (g.k != kb) {
    return InvalidArgumentError("inner dimensions differ: a ", a, Transposed(transpose_a),
                                " and b ", b, Transposed(transpose_b), " give k = ", g.k, " vs ",
                                kb);
  }
  const Shape a_batch(std::vector<int64_t>(a.dims().begin(), a.dims().end() - 2));
  const Shape b_batch(std::vector<int64_t>(b.dims().begin(), b.dims().end() - 2));
  Shape batch;
  if (sum_batch) {
    if (a_batch != b_batch) {
      return InvalidArgumentError("sum_batch needs equal batch dims, got a ", a, " and b ", b);
    }
    batch = a_batch;
    g.out = Shape({g.m, g.n});
  } else {
    if (!BroadcastShapes(a_batch, b_batch, &batch)) {
      return InvalidArgumentError("batch dims do not broadcast: a ", a, " and b ", b);
    }
    std::vector<int64_t> out_dims = batch.dims();
    out_dims.push_back(g.m);
    out_dims.push_back(g.n);
    g.out = Shape(std::move(out_dims));
  }
  g.batch_count = batch.elem_count();
  g.batch = BatchAxes(a, b, batch.dims(), g);
  return g;
}

namespace {

// The SBP of `operand` (right-aligned batch dims) for S(i) of out's batch
// axis i: S on the operand's own axis when it holds out's full extent, B
// when it is broadcast along i (size 1 or absent).
SbpParallel BatchOperandSbp(const Shape& operand, const Shape& out, int64_t i) {
  const int64_t axis = i - (out.rank() - operand.rank());
  if (axis >= 0 && operand.dim(axis) == out.dim(i)) return SplitSbp(axis);
  return BroadcastSbp();
}

}  // namespace

std::vector<MatmulSbpCase> MatmulSbpCases(const Shape& a, const Shape& b, const Shape& out,
                                          bool transpose_a, bool transpose_b, bool sum_batch) {
  std::vector<MatmulSbpCase> cases;
  if (sum_batch) {
    for (int64_t i = 0; i + 2 < a.rank(); ++i) {
      cases.push_back({SplitSbp(i), SplitSbp(i), PartialSumSbp()});
    }
  } else {
    for (int64_t i = 0; i + 2 < out.rank(); ++i) {
      cases.push_back({BatchOperandSbp(a, out, i), BatchOperandSbp(b, out, i), SplitSbp(i)});
    }
  }
  const int64_t a_m = a.rank() - (transpose_a ? 1 : 2), a_k = a.rank() - (transpose_a ? 2 : 1);
  const int64_t b_k = b.rank() - (transpose_b ? 1 : 2), b_n = b.rank() - (transpose_b ? 2 : 1);
  cases.push_back({SplitSbp(a_m), BroadcastSbp(), SplitSbp(out.rank() - 2)});
  cases.push_back({BroadcastSbp(), SplitSbp(b_n), SplitSbp(out.rank() - 1)});
  cases.push_back({SplitSbp(a_k), SplitSbp(b_k), PartialSumSbp()});
  cases.push_back({PartialSumSbp(), BroadcastSbp(), PartialSumSbp()});
  cases.push_back({BroadcastSbp(), PartialSumSbp(), PartialSumSbp()});
  return cases;
}

}  // namespace math
}  // namespace oflite
