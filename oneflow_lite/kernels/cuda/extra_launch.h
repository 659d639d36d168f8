// Launchers of the CUDA kernels for the ops added with issue 18: unary math
// (exp, log, sqrt, rsqrt, abs, neg, clamp, leaky_relu, silu) and their
// gradients, maximum/minimum(+grad), where, binary cross-entropy with
// logits(+grad), one_hot, adaptive_avg_pool2d(+grad) and batch_norm(+grad).
// gather/gather_grad reuse LaunchEmbedding/LaunchEmbeddingGrad
// (nn_launch.h). Float32; semantics as the CPU kernels (docs/ops.md).
// Launchers only enqueue work and return cudaGetLastError().
#ifndef ONEFLOW_LITE_KERNELS_CUDA_EXTRA_LAUNCH_H_
#define ONEFLOW_LITE_KERNELS_CUDA_EXTRA_LAUNCH_H_

#include "oneflow_lite/kernels/cuda/launch_common.h"
#include "oneflow_lite/kernels/cuda/nn_launch.h"

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
cudaError_t LaunchBce(const float* x, const float* t, float* out, int64_t n, cudaStream_t stream);
cudaError_t LaunchBceGrad(const float* dy, const float* x, const float* t, float* dx, float* dt,
                          int64_t n, cudaStream_t stream);
// out [count, depth]: off everywhere, on at each index; bad indices are
// reported in the slot.
cudaError_t LaunchOneHot(IndexArray indices, float* out, int64_t count, int64_t depth, float on,
                         float off, ErrorSlot* slot, cudaStream_t stream);
// planes = N * C; y [planes, oh, ow] from x [planes, h, w].
cudaError_t LaunchAdaptiveAvgPool(const float* x, float* y, int64_t planes, int64_t h, int64_t w,
                                  int64_t oh, int64_t ow, cudaStream_t stream);
// Zeroes dx, then adds each cell's share with atomicAdd.
cudaError_t LaunchAdaptiveAvgPoolGrad(const float* dy, float* dx, int64_t planes, int64_t h,
                                      int64_t w, int64_t oh, int64_t ow, cudaStream_t stream);

// x viewed as [n, c, s].
struct ChannelDims {
  int64_t n = 0, c = 0, s = 1;
};
// Training: batch statistics into mean/inv and the running update (skipped
// when n * s == 0); inference: mean/inv from the running statistics.
cudaError_t LaunchBatchNormStats(const float* x, ChannelDims dims, bool training, float momentum,
                                 float epsilon, float* mean, float* inv, float* moving_mean,
                                 float* moving_var, cudaStream_t stream);
cudaError_t LaunchBatchNormApply(const float* x, const float* mean, const float* inv,
                                 const float* gamma, const float* beta, float* y, ChannelDims dims,
                                 cudaStream_t stream);
// dmean / dinv may be null (and are ignored unless training).
cudaError_t LaunchBatchNormGrad(const float* dy, const float* x, const float* mean,
                                const float* inv, const float* gamma, const float* dmean,
                                const float* dinv, bool training, float* dx, float* dgamma,
                                float* dbeta, ChannelDims dims, cudaStream_t stream);

}  // namespace cuda
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CUDA_EXTRA_LAUNCH_H_
