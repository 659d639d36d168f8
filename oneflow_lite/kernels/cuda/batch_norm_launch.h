// Launchers of the CUDA batch_norm and batch_norm_grad kernels (float32;
// formulas in oneflow_lite/ops/nn/batch_norm_ops.cc, semantics as the CPU
// kernels). Launchers only enqueue work and return cudaGetLastError().
#ifndef ONEFLOW_LITE_KERNELS_CUDA_BATCH_NORM_LAUNCH_H_
#define ONEFLOW_LITE_KERNELS_CUDA_BATCH_NORM_LAUNCH_H_

#include "oneflow_lite/kernels/cuda/launch_common.h"

namespace oflite {
namespace cuda {

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

#endif  // ONEFLOW_LITE_KERNELS_CUDA_BATCH_NORM_LAUNCH_H_
