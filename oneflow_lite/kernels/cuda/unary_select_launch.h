// Launchers of the CUDA kernels of the unary math ops (exp, log, sqrt,
// rsqrt, abs, neg, clamp, leaky_relu, silu) and their (dy, x) -> dx
// gradients, of maximum/minimum(+grad) and of where. Float32; semantics as
// the CPU kernels (docs/ops.md). See launch_common.h for the StridedIndex
// convention; launchers only enqueue work and return cudaGetLastError().
#ifndef ONEFLOW_LITE_KERNELS_CUDA_UNARY_SELECT_LAUNCH_H_
#define ONEFLOW_LITE_KERNELS_CUDA_UNARY_SELECT_LAUNCH_H_

#include "oneflow_lite/kernels/cuda/launch_common.h"

namespace oflite {
namespace cuda {

enum class MapOp { kExp, kLog, kSqrt, kRsqrt, kAbs, kNeg, kClamp, kLeakyRelu, kSilu };
enum class MapGradOp { kAbs, kClamp, kLeakyRelu, kSilu };
enum class SelectOp { kMax, kMin };
enum class CondKind { kU8, kI32, kI64 };  // bool is stored as one byte

// y = op(x); p0/p1: clamp's lo/hi, leaky_relu's alpha (p0).
cudaError_t LaunchMap(MapOp op, const float* x, float* y, int64_t n, float p0, float p1,
                      cudaStream_t stream);
cudaError_t LaunchMapGrad(MapGradOp op, const float* dy, const float* x, float* dx, int64_t n,
                          float p0, float p1, cudaStream_t stream);
// out[i] = op(a[off0(i)], b[off1(i)]) over index (out contiguous).
cudaError_t LaunchSelect(SelectOp op, const float* a, const float* b, float* out,
                         const StridedIndex& index, cudaStream_t stream);
// dx[i] = dz[off0(i)] * share of x(a[off1(i)], b[off2(i)]).
cudaError_t LaunchSelectGrad(SelectOp op, const float* dz, const float* a, const float* b,
                             float* dx, const StridedIndex& index, cudaStream_t stream);
// out[i] = cond[off0(i)] != 0 ? a[off1(i)] : b[off2(i)].
cudaError_t LaunchWhere(const void* cond, CondKind kind, const float* a, const float* b, float* out,
                        const StridedIndex& index, cudaStream_t stream);

}  // namespace cuda
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CUDA_UNARY_SELECT_LAUNCH_H_
