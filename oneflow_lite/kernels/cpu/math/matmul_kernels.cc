// CPU kernels for matmul (float32: oneDNN's sgemm unless the reference
// kernels are selected, kernels/cpu/cpu_library.h; else OpenBLAS GEMM) and
// bias_add (float32: the vectorized loops of kernels/cpu/vec/vec.h).
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>

#include "oneflow_lite/kernels/cpu/cpu_library.h"
#include "oneflow_lite/kernels/cpu/onednn/onednn.h"
#include "oneflow_lite/kernels/cpu/vec/vec.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {
namespace {

void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha, const float* a,
          int lda, const float* b, int ldb, float* c) {
  if (GetCpuKernelLibrary() == CpuKernelLibrary::kOneDnn && onednn::Available() &&
      onednn::Sgemm(ta == CblasTrans, tb == CblasTrans, m, n, k, static_cast<float>(alpha), a, lda,
                    b, ldb, 0.0f, c, n)
          .ok()) {
    return;
  }
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, static_cast<float>(alpha), a, lda, b, ldb, 0.0f, c,
              n);
}

void Gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha,
          const double* a, int lda, const double* b, int ldb, double* c) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, 0.0, c, n);
}

// out[m, n] = alpha * op(a)[m, k] * op(b)[k, n].
template <typename T>
class MatmulKernel final : public Kernel {
 public:
  Status Init(const KernelInitContext& ctx) override {
    transpose_a_ = ctx.attrs().GetBoolOr("transpose_a", false);
    transpose_b_ = ctx.attrs().GetBoolOr("transpose_b", false);
    alpha_ = ctx.attrs().GetFloatOr("alpha", 1.0);
    return Status::OK();
  }

  Status Forward(KernelContext* ctx) override {
    const Blob& a = ctx->Input("a");
    const Blob& b = ctx->Input("b");
    Blob* out = ctx->Output("out");
    if (a.shape().rank() != 2 || b.shape().rank() != 2 || out->shape().rank() != 2) {
      return ctx->Error("matmul needs 2-D blobs, got a ", a.shape(), ", b ", b.shape());
    }
    const int64_t m = a.shape().dim(transpose_a_ ? 1 : 0);
    const int64_t k = a.shape().dim(transpose_a_ ? 0 : 1);
    const int64_t n = b.shape().dim(transpose_b_ ? 0 : 1);
    const int64_t kb = b.shape().dim(transpose_b_ ? 1 : 0);
    if (k != kb || out->shape() != Shape({m, n})) {
      return ctx->Error("blob shapes disagree: a ", a.shape(), ", b ", b.shape(), ", out ",
                        out->shape());
    }
    constexpr int64_t kMaxBlasDim = std::numeric_limits<int>::max();
    if (std::max({m, n, k, a.shape().dim(1), b.shape().dim(1)}) > kMaxBlasDim) {
      return ctx->Error("dimension too large for BLAS (int): a ", a.shape(), ", b ", b.shape());
    }
    if (m == 0 || n == 0) return Status::OK();
    T* c = out->data<T>();
    if (k == 0) {
      std::fill_n(c, m * n, T(0));
      return Status::OK();
    }
    const int lda = static_cast<int>(std::max<int64_t>(1, a.shape().dim(1)));
    const int ldb = static_cast<int>(std::max<int64_t>(1, b.shape().dim(1)));
    Gemm(transpose_a_ ? CblasTrans : CblasNoTrans, transpose_b_ ? CblasTrans : CblasNoTrans,
         static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha_, a.data<T>(), lda,
         b.data<T>(), ldb, c);
    return Status::OK();
  }

 private:
  bool transpose_a_ = false;
  bool transpose_b_ = false;
  double alpha_ = 1.0;
};

// bias_add: out = a + b broadcast along `axis` of a. With kRelu the fused
// bias_add_relu (ops/math/fused_ops.cc, made by the compiler's fusion pass):
// y = relu(a + b), the same float operations in the same order as bias_add
// then relu, in one pass over memory (fused_kernels_test.cc runs the chain
// as the reference).
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
    if constexpr (std::is_same_v<T, float>) {
      if (inner == 1) {
        vec::Active().bias_add_rows(x, bias, y, outer, channels, kRelu);
      } else {
        vec::Active().bias_add_inner(x, bias, y, outer, channels, inner, kRelu);
      }
      return Status::OK();
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
    return Status::OK();
  }
};

REGISTER_KERNEL("matmul", DEVICE_CPU, DT_FLOAT, MatmulKernel<float>);
REGISTER_KERNEL("matmul", DEVICE_CPU, DT_DOUBLE, MatmulKernel<double>);
REGISTER_KERNEL("bias_add", DEVICE_CPU, DT_FLOAT, BiasAddKernel<float, false>);
REGISTER_KERNEL("bias_add", DEVICE_CPU, DT_DOUBLE, BiasAddKernel<double, false>);
REGISTER_KERNEL("bias_add_relu", DEVICE_CPU, DT_FLOAT, BiasAddKernel<float, true>);
REGISTER_KERNEL("bias_add_relu", DEVICE_CPU, DT_DOUBLE, BiasAddKernel<double, true>);

}  // namespace
}  // namespace math
}  // namespace oflite
