// CPU kernels for matmul and matmul_bias (float32: oneDNN's sgemm, batched
// matmul and matmul with bias unless the reference kernels are selected,
// kernels/cpu/cpu_library.h; else OpenBLAS GEMM) and bias_add (float32: the
// vectorized loops of kernels/cpu/vec/vec.h).
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "oneflow_lite/kernels/cpu/cpu_library.h"
#include "oneflow_lite/kernels/cpu/math/gemm_orientation.h"
#include "oneflow_lite/kernels/cpu/onednn/onednn.h"
#include "oneflow_lite/kernels/cpu/parallel_rows.h"
#include "oneflow_lite/kernels/cpu/vec/vec.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/math/math_util.h"
#include "oneflow_lite/ops/math/matmul_util.h"

namespace oflite {
namespace math {
namespace {

// Row-major C[m, n] = alpha * op(A) op(B) + beta * C, ldc = n.
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c) {
  if (GetCpuKernelLibrary() == CpuKernelLibrary::kOneDnn && onednn::Available() &&
      onednn::Sgemm(ta, tb, m, n, k, static_cast<float>(alpha), a, lda, b, ldb, beta, c, n).ok()) {
    return;
  }
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              static_cast<float>(alpha), a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(n));
}

void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          int64_t lda, const double* b, int64_t ldb, double beta, double* c) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(n));
}

// MakeMatmulGeometry for a kernel: the error names the op; every dimension
// BLAS takes must fit its int.
StatusOr<MatmulGeometry> BlasGeometry(const KernelContext& ctx, const Shape& a, const Shape& b,
                                      bool transpose_a, bool transpose_b, bool sum_batch) {
  StatusOr<MatmulGeometry> g = MakeMatmulGeometry(a, b, transpose_a, transpose_b, sum_batch);
  if (!g.ok()) return ctx.Error(g.status().message());
  constexpr int64_t kMaxBlasDim = std::numeric_limits<int>::max();
  if (std::max({g->m, g->n, g->a_cols, g->b_cols, g->batch_count * g->m, g->batch_count * g->k}) >
      kMaxBlasDim) {
    return ctx.Error("dimension too large for BLAS (int): a ", a, ", b ", b);
  }
  return g;
}

// y[o, c, i] = x[o, c, i] + bias[c] (then ReLU) over [outer, channels,
// inner]: bias_add's arithmetic, shared by its kernels and matmul_bias's
// fallback.
template <typename T, bool kRelu>
void AddBiasToPlanes(const T* x, const T* bias, T* y, int64_t outer, int64_t channels,
                     int64_t inner) {
  if constexpr (std::is_same_v<T, float>) {
    if (inner == 1) {
      vec::Active().bias_add_rows(x, bias, y, outer, channels, kRelu);
    } else {
      vec::Active().bias_add_inner(x, bias, y, outer, channels, inner, kRelu);
    }
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t base = (o * channels + c) * inner;
      const T value = bias[c];
      for (int64_t i = 0; i < inner; ++i) {
        const T v = x[base + i] + value;
        y[base + i] = !kRelu || v > T(0) ? v : T(0);
      }
    }
  }
}

// out = alpha * op(a) * op(b) over the batch dims (ops/math/matmul_util.h).
// One GEMM when the batch folds into the rows (2-D, and the Linear case
// [..., m, k] x [k, n]) or, under sum_batch, into k (the Linear case's
// weight gradient); otherwise, in float32, one oneDNN batched matmul
// (threaded over the batch), else a loop of GEMMs (accumulating into out
// under sum_batch).
template <typename T>
class MatmulKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    transpose_a_ = ctx.attrs().GetBoolOr("transpose_a", false);
    transpose_b_ = ctx.attrs().GetBoolOr("transpose_b", false);
    sum_batch_ = ctx.attrs().GetBoolOr("sum_batch", false);
    alpha_ = ctx.attrs().GetFloatOr("alpha", 1.0);
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    const Blob& a = ctx->Input("a");
    const Blob& b = ctx->Input("b");
    Blob* out = ctx->Output("out");
    RETURN_IF_ERROR(Prepare(*ctx, a.shape(), b.shape()));
    const MatmulGeometry& g = geometry_;
    if (out->shape() != g.out) {
      return ctx->Error("blob shapes disagree: a ", a.shape(), ", b ", b.shape(), ", out ",
                        out->shape());
    }
    if (out->elem_count() == 0) return Status::OK();
    T* c = out->data<T>();
    if (g.k == 0 || g.batch_count == 0) {
      std::fill_n(c, out->elem_count(), T(0));
      return Status::OK();
    }
    const T* x = a.data<T>();
    const T* y = b.data<T>();
    const int64_t lda = std::max<int64_t>(1, g.a_cols), ldb = std::max<int64_t>(1, g.b_cols);
    if (g.FoldsIntoRows()) {
      OneGemm(transpose_a_, transpose_b_, g.batch_count * g.m, g.n, g.k, x, lda, y, ldb, c);
      return Status::OK();
    }
    if (g.FoldsIntoInner()) {
      OneGemm(true, false, g.m, g.n, g.batch_count * g.k, x, lda, y, ldb, c);
      return Status::OK();
    }
    if constexpr (std::is_same_v<T, float>) {
      if (batched_ != nullptr) return batched_->Run(x, y, c);
    }
    for (int64_t i = 0; i < g.batch_count; ++i) {
      int64_t a_offset = 0, b_offset = 0, out_offset = 0;
      g.Offsets(i, &a_offset, &b_offset, &out_offset);
      const T beta = g.sum_batch && i > 0 ? T(1) : T(0);
      Gemm(transpose_a_, transpose_b_, g.m, g.n, g.k, alpha_, x + a_offset, lda, y + b_offset, ldb,
           beta, c + out_offset);
    }
    return Status::OK();
  }

 private:
  // The single GEMM of the folded cases; float32 in the orientation that
  // runs faster for the shape (gemm_orientation.h).
  void OneGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const T* x, int64_t lda,
               const T* y, int64_t ldb, T* c) {
    if constexpr (std::is_same_v<T, float>) {
      orientation_.Run(ta, tb, m, n, k, static_cast<float>(alpha_), x, lda, y, ldb, c);
    } else {
      Gemm(ta, tb, m, n, k, alpha_, x, lda, y, ldb, T(0), c);
    }
  }

  // The geometry of these blob shapes, kept while they stay the same (the
  // planned shapes: no work or allocation per call), and for float32 with
  // oneDNN the batched primitive when no single GEMM does.
  Status Prepare(const KernelContext& ctx, const Shape& a, const Shape& b) {
    if (prepared_ && a == a_shape_ && b == b_shape_) return Status::OK();
    ASSIGN_OR_RETURN(geometry_, BlasGeometry(ctx, a, b, transpose_a_, transpose_b_, sum_batch_));
    a_shape_ = a;
    b_shape_ = b;
    prepared_ = true;
    batched_.reset();
    const MatmulGeometry& geometry = geometry_;
    if (std::is_same_v<T, float> && !geometry.sum_batch && !geometry.FoldsIntoRows() &&
        geometry.out.elem_count() > 0 && geometry.k > 0 &&
        GetCpuKernelLibrary() == CpuKernelLibrary::kOneDnn && onednn::Available()) {
      std::vector<int64_t> a_batch, b_batch;
      for (const MatmulGeometry::BatchAxis& axis : geometry.batch) {
        a_batch.push_back(axis.a_stride == 0 ? 1 : axis.extent);
        b_batch.push_back(axis.b_stride == 0 ? 1 : axis.extent);
      }
      auto batched =
          onednn::BatchedMatmul::Create(a_batch, b_batch, transpose_a_, transpose_b_, geometry.m,
                                        geometry.n, geometry.k, static_cast<float>(alpha_));
      // Refused shapes take the loop of GEMMs.
      if (batched.ok()) batched_ = std::move(*batched);
    }
    return Status::OK();
  }

  bool transpose_a_ = false;
  bool transpose_b_ = false;
  bool sum_batch_ = false;
  double alpha_ = 1.0;
  bool prepared_ = false;
  Shape a_shape_, b_shape_;
  MatmulGeometry geometry_;
  std::unique_ptr<onednn::BatchedMatmul> batched_;
  GemmOrientation orientation_{[](bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha,
                                  const float* a, int64_t lda, const float* b, int64_t ldb,
                                  float* c) { Gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, 0.f, c); }};
};

// matmul_bias (ops/math/fused_ops.cc, made by the compiler's fusion pass):
// out = op(a) op(b) + bias, one GEMM of [rows, k] x [k, n] (the Linear
// case). float32 with oneDNN: its matmul primitive adds the bias in the
// GEMM's epilogue, so out is written once; its GEMM may block the sums
// differently from sgemm's, so out can differ from matmul then bias_add in
// the last bits (fused_kernels_test.cc bounds the difference). Otherwise
// (float64, the reference library, no oneDNN) the GEMM and then the bias
// rows: matmul then bias_add's operations exactly.
template <typename T>
class MatmulBiasKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    transpose_a_ = ctx.attrs().GetBoolOr("transpose_a", false);
    transpose_b_ = ctx.attrs().GetBoolOr("transpose_b", false);
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    const Blob& a = ctx->Input("a");
    const Blob& b = ctx->Input("b");
    const Blob& bias = ctx->Input("bias");
    Blob* out = ctx->Output("out");
    RETURN_IF_ERROR(Prepare(*ctx, a.shape(), b.shape()));
    const MatmulGeometry& g = geometry_;
    if (out->shape() != g.out || bias.elem_count() != g.n) {
      return ctx->Error("blob shapes disagree: a ", a.shape(), ", b ", b.shape(), ", bias ",
                        bias.shape(), ", out ", out->shape());
    }
    if (out->elem_count() == 0) return Status::OK();
    const int64_t rows = g.batch_count * g.m;
    T* c = out->data<T>();
    const T* bias_data = bias.data<T>();
    if constexpr (std::is_same_v<T, float>) {
      if (fused_ != nullptr) return fused_->Run(a.data<T>(), b.data<T>(), bias_data, c);
    }
    if (g.k == 0) {
      std::fill_n(c, out->elem_count(), T(0));
    } else {
      Gemm(transpose_a_, transpose_b_, rows, g.n, g.k, 1.0, a.data<T>(),
           std::max<int64_t>(1, g.a_cols), b.data<T>(), std::max<int64_t>(1, g.b_cols), T(0), c);
    }
    ParallelRows(rows, g.n, [&](int64_t first, int64_t last) {
      T* block = c + first * g.n;
      AddBiasToPlanes<T, false>(block, bias_data, block, last - first, g.n, 1);
    });
    return Status::OK();
  }

 private:
  Status Prepare(const KernelContext& ctx, const Shape& a, const Shape& b) {
    if (prepared_ && a == a_shape_ && b == b_shape_) return Status::OK();
    ASSIGN_OR_RETURN(MatmulGeometry g, BlasGeometry(ctx, a, b, transpose_a_, transpose_b_, false));
    if (!g.FoldsIntoRows()) return ctx.Error("not one GEMM: a ", a, ", b ", b);
    geometry_ = std::move(g);
    a_shape_ = a;
    b_shape_ = b;
    prepared_ = true;
    fused_.reset();
    const MatmulGeometry& geometry = geometry_;
    if (std::is_same_v<T, float> && geometry.out.elem_count() > 0 && geometry.k > 0 &&
        GetCpuKernelLibrary() == CpuKernelLibrary::kOneDnn && onednn::Available()) {
      auto fused = onednn::GemmBias::Create(transpose_a_, transpose_b_,
                                            geometry.batch_count * geometry.m, geometry.n,
                                            geometry.k);
      // Refused shapes take the GEMM and then the bias rows.
      if (fused.ok()) fused_ = std::move(*fused);
    }
    return Status::OK();
  }

  bool transpose_a_ = false;
  bool transpose_b_ = false;
  bool prepared_ = false;
  Shape a_shape_, b_shape_;
  MatmulGeometry geometry_;
  std::unique_ptr<onednn::GemmBias> fused_;
};

// bias_add: out = a + b broadcast along `axis` of a. With kRelu the fused
// bias_add_relu (ops/math/fused_ops.cc, made by the compiler's fusion pass):
// y = relu(a + b), the same float operations in the same order as bias_add
// then relu, in one pass over memory (fused_kernels_test.cc runs the chain
// as the reference). Rows (or planes) are split over threads
// (kernels/cpu/parallel_rows.h); each element is computed alone, so the
// thread count changes no bit.
template <typename T, bool kRelu>
class BiasAddKernel final : public Kernel {
 public:
  Status Forward(KernelContext* ctx) override {
    const char* op = kRelu ? "bias_add_relu" : "bias_add";
    const Blob& a = ctx->Input("a");
    const Blob& b = ctx->Input("b");
    Blob* out = ctx->Output(kRelu ? "y" : "out");
    const Shape& shape = a.shape();
    int64_t axis = 0;
    if (!NormalizeAxis(ctx->attrs().GetIntOr("axis", 1), shape.rank(), &axis) ||
        b.elem_count() != shape.dim(axis) || out->shape() != shape) {
      return ctx->Error("bad blobs for ", op, ": a ", shape, ", b ", b.shape(),
                        kRelu ? ", y " : ", out ", out->shape());
    }
    const int64_t outer = shape.Count(0, axis);
    const int64_t channels = shape.dim(axis);
    const int64_t inner = shape.Count(axis + 1);
    const T* x = a.data<T>();
    const T* bias = b.data<T>();
    T* y = out->data<T>();
    if (inner == 1) {  // bias along the last axis: rows of `channels`
      ParallelRows(outer, channels, [&](int64_t first, int64_t last) {
        const int64_t offset = first * channels;
        AddBiasToPlanes<T, kRelu>(x + offset, bias, y + offset, last - first, channels, 1);
      });
      return Status::OK();
    }
    // Planes of `inner` elements, plane p adding bias[p % channels].
    ParallelRows(outer * channels, inner, [&](int64_t first, int64_t last) {
      for (int64_t p = first; p < last;) {
        const int64_t c = p % channels, count = std::min(last - p, channels - c);
        AddBiasToPlanes<T, kRelu>(x + p * inner, bias + c, y + p * inner, 1, count, inner);
        p += count;
      }
    });
    return Status::OK();
  }
};

REGISTER_KERNEL("matmul", DEVICE_CPU, DT_FLOAT, MatmulKernel<float>);
REGISTER_KERNEL("matmul", DEVICE_CPU, DT_DOUBLE, MatmulKernel<double>);
REGISTER_KERNEL("matmul_bias", DEVICE_CPU, DT_FLOAT, MatmulBiasKernel<float>);
REGISTER_KERNEL("matmul_bias", DEVICE_CPU, DT_DOUBLE, MatmulBiasKernel<double>);
REGISTER_KERNEL("bias_add", DEVICE_CPU, DT_FLOAT, BiasAddKernel<float, false>);
REGISTER_KERNEL("bias_add", DEVICE_CPU, DT_DOUBLE, BiasAddKernel<double, false>);
REGISTER_KERNEL("bias_add_relu", DEVICE_CPU, DT_FLOAT, BiasAddKernel<float, true>);
REGISTER_KERNEL("bias_add_relu", DEVICE_CPU, DT_DOUBLE, BiasAddKernel<double, true>);

}  // namespace
}  // namespace math
}  // namespace oflite
