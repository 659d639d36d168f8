// Small helpers for the CPU nn kernels: a typed GEMM (float32: oneDNN's
// sgemm unless the reference kernels are selected, kernels/cpu/cpu_library.h;
// float64 and the reference: OpenBLAS), index
// reading for int32/int64 label and index blobs, select_rows' mask test, the
// normalization kernels' begin axis and grad blobs (shared with the CUDA
// kernels), and the registration macro for the float32 + float64 kernel pair.
//
// Stateless and thread-safe. Gemm follows BLAS semantics on row-major
// matrices: C[M, N] = alpha * op(A)[M, K] * op(B)[K, N] + beta * C, and
// handles the degenerate sizes (M, N or K of 0) that BLAS rejects.
#ifndef ONEFLOW_LITE_KERNELS_CPU_NN_CPU_NN_UTIL_H_
#define ONEFLOW_LITE_KERNELS_CPU_NN_CPU_NN_UTIL_H_

#include <cstdint>

#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/kernels/kernel.h"

namespace oflite {
namespace nn {

template <typename T>
void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc);

// Element `i` of an int32 or int64 blob, widened to int64 (the dtype was
// validated by shape inference).
inline int64_t IndexAt(const Blob& blob, int64_t i) {
  return blob.dtype() == DT_INT32 ? blob.data<int32_t>()[i] : blob.data<int64_t>()[i];
}

// Whether select_rows keeps row `row`: element `row` of a host mask of
// `dtype` (int32, int64, float32 or float64) is not zero. Shared by the CPU
// kernel and the CUDA one (which reads the mask back first).
inline bool MaskKeepsRow(const void* mask, DataType dtype, int64_t row) {
  switch (dtype) {
    case DT_INT32: return static_cast<const int32_t*>(mask)[row] != 0;
    case DT_INT64: return static_cast<const int64_t*>(mask)[row] != 0;
    case DT_FLOAT: return static_cast<const float*>(mask)[row] != 0.f;
    case DT_DOUBLE: return static_cast<const double*>(mask)[row] != 0.0;
    default: return false;
  }
}

// A validated axis decomposition of a shape: [outer, axis_size, inner].
struct AxisLayout {
  int64_t outer = 1, size = 1, inner = 1;
};
StatusOr<AxisLayout> MakeAxisLayout(const Shape& shape, int64_t axis);

// layer_norm's and layer_norm_grad's attribute begin_norm_axis normalized
// against x's rank; an error naming the op if out of range.
StatusOr<int64_t> BeginNormAxis(const KernelInitContext& ctx);

// The blobs a normalization grad kernel (batch_norm_grad, layer_norm_grad;
// CPU and CUDA) reads and writes, as typed pointers borrowed from the
// context for one Forward call. dmean and dinv_variance are null when the op
// has no such input.
template <typename T>
struct NormGradBlobs {
  const T* dy;
  const T* x;
  const T* mean;
  const T* inv_variance;
  const T* gamma;
  const T* dmean;
  const T* dinv_variance;
  T* dx;
  T* dgamma;
  T* dbeta;
};

template <typename T>
NormGradBlobs<T> NormGradBlobsOf(KernelContext* ctx) {
  NormGradBlobs<T> b;
  b.dy = ctx->Input("dy").data<T>();
  b.x = ctx->Input("x").data<T>();
  b.mean = ctx->Input("mean").data<T>();
  b.inv_variance = ctx->Input("inv_variance").data<T>();
  b.gamma = ctx->Input("gamma").data<T>();
  b.dmean = ctx->HasInput("dmean") ? ctx->Input("dmean").data<T>() : nullptr;
  b.dinv_variance =
      ctx->HasInput("dinv_variance") ? ctx->Input("dinv_variance").data<T>() : nullptr;
  b.dx = ctx->Output("dx")->data<T>();
  b.dgamma = ctx->Output("dgamma")->data<T>();
  b.dbeta = ctx->Output("dbeta")->data<T>();
  return b;
}

}  // namespace nn
}  // namespace oflite

// Registers Kernel<float> for DT_FLOAT and Kernel<double> for DT_DOUBLE.
#define REGISTER_NN_CPU_KERNELS(op_type, KernelTemplate)                                     \
  REGISTER_KERNEL(op_type, ::oflite::DEVICE_CPU, ::oflite::DT_FLOAT, KernelTemplate<float>); \
  REGISTER_KERNEL(op_type, ::oflite::DEVICE_CPU, ::oflite::DT_DOUBLE, KernelTemplate<double>)

#endif  // ONEFLOW_LITE_KERNELS_CPU_NN_CPU_NN_UTIL_H_
