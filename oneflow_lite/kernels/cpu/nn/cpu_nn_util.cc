#include "oneflow_lite/kernels/cpu/nn/cpu_nn_util.h"

#include <cblas.h>

#include <algorithm>

#include "oneflow_lite/kernels/cpu/cpu_library.h"
#include "oneflow_lite/kernels/cpu/onednn/onednn.h"
#include "oneflow_lite/ops/nn/nn_util.h"

namespace oflite {
namespace nn {
namespace {

// C = beta * C for a GEMM with an empty inner dimension.
template <typename T>
void ScaleRows(int64_t m, int64_t n, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    T* row = c + i * ldc;
    if (beta == T(0)) {
      std::fill(row, row + n, T(0));
    } else {
      for (int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
  }
}

CBLAS_TRANSPOSE Trans(bool t) { return t ? CblasTrans : CblasNoTrans; }

}  // namespace

template <>
void Gemm<float>(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                 int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) return ScaleRows(m, n, beta, c, ldc);
  if (GetCpuKernelLibrary() == CpuKernelLibrary::kOneDnn && onednn::Available() &&
      onednn::Sgemm(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc).ok()) {
    return;
  }
  cblas_sgemm(CblasRowMajor, Trans(transpose_a), Trans(transpose_b), m, n, k, alpha, a, lda, b, ldb,
              beta, c, ldc);
}

template <>
void Gemm<double>(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, double alpha,
                  const double* a, int64_t lda, const double* b, int64_t ldb, double beta,
                  double* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) return ScaleRows(m, n, beta, c, ldc);
  cblas_dgemm(CblasRowMajor, Trans(transpose_a), Trans(transpose_b), m, n, k, alpha, a, lda, b, ldb,
              beta, c, ldc);
}

StatusOr<AxisLayout> MakeAxisLayout(const Shape& shape, int64_t axis) {
  ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(axis, shape.rank()));
  AxisLayout layout;
  layout.outer = shape.Count(0, a);
  layout.size = shape.dim(a);
  layout.inner = shape.Count(a + 1);
  return layout;
}

StatusOr<int64_t> BeginNormAxis(const KernelInitContext& ctx) {
  const Shape& x = ctx.Input("x").shape;
  auto axis = NormalizeAxis(ctx.attrs().GetIntOr("begin_norm_axis", -1), x.rank());
  if (!axis.ok()) {
    return InvalidArgumentError("op '", ctx.op->name(), "' (", ctx.op->op_type(),
                                "): begin_norm_axis: ", axis.status().message());
  }
  return *axis;
}

}  // namespace nn
}  // namespace oflite
