// Launchers of the CUDA nn and train kernels (float32). Layouts follow the
// CPU kernels: softmax/argmax over [outer, size, inner] with the reduced
// axis in the middle; cross-entropy [N, C] (N = the label's element count); layer norm [rows, cols]; pooling
// and adaptive pooling over N*C planes. Integer labels/indices are int32 or
// int64 (`wide`). Bad labels/indices are reported through an ErrorSlot
// (launch_common.h).
#ifndef ONEFLOW_LITE_KERNELS_CUDA_NN_LAUNCH_H_
#define ONEFLOW_LITE_KERNELS_CUDA_NN_LAUNCH_H_

#include "oneflow_lite/kernels/cuda/launch_common.h"

namespace oflite {
namespace cuda {

struct AxisDims {
  int64_t outer = 1, size = 1, inner = 1;
};

struct IndexArray {
  const void* data = nullptr;
  bool wide = false;  // int64 when true, int32 otherwise
};

cudaError_t LaunchSoftmax(const float* x, float* y, AxisDims dims, bool log, cudaStream_t stream);
cudaError_t LaunchSoftmaxGrad(const float* dy, const float* y, float* dx, AxisDims dims, bool log,
                              cudaStream_t stream);
// causal_softmax over rows of Tk keys (rows = batch * Tq; row r is query
// r % Tq, which sees the first min(Tk, max(0, q + 1 + Tk - Tq)) keys; the
// rest of its output is 0).
struct CausalDims {
  int64_t rows = 0, queries = 1, keys = 0;
};
cudaError_t LaunchCausalSoftmax(const float* x, float* y, CausalDims dims, float scale,
                                cudaStream_t stream);
cudaError_t LaunchCausalSoftmaxGrad(const float* dy, const float* y, float* dx, CausalDims dims,
                                    float scale, cudaStream_t stream);
cudaError_t LaunchSparseCrossEntropy(const float* x, IndexArray label, float* prob, float* out,
                                     int64_t rows, int64_t classes, ErrorSlot* slot,
                                     cudaStream_t stream);
// dprob may be null.
cudaError_t LaunchSparseCrossEntropyGrad(const float* dy, const float* prob, IndexArray label,
                                         const float* dprob, float* dx, int64_t rows,
                                         int64_t classes, ErrorSlot* slot, cudaStream_t stream);
cudaError_t LaunchLayerNorm(const float* x, const float* gamma, const float* beta, float* y,
                            float* mean, float* inv_variance, int64_t rows, int64_t cols,
                            float epsilon, cudaStream_t stream);
// dmean and dinv_variance may be null.
cudaError_t LaunchLayerNormGrad(const float* dy, const float* x, const float* mean,
                                const float* inv_variance, const float* gamma, const float* dmean,
                                const float* dinv_variance, float* dx, float* dgamma,
                                float* dbeta, int64_t rows, int64_t cols, cudaStream_t stream);
// binary_cross_entropy_with_logits over n elements:
// out = max(x, 0) - x t + log1p(exp(-|x|)); grad dx = dy (sigmoid(x) - t),
// dt = -dy x.
cudaError_t LaunchBce(const float* x, const float* t, float* out, int64_t n, cudaStream_t stream);
cudaError_t LaunchBceGrad(const float* dy, const float* x, const float* t, float* dx, float* dt,
                          int64_t n, cudaStream_t stream);
// out [count, dim] = weight rows by index (also gather's, with vocab = the
// rows of x and dim = the row size).
cudaError_t LaunchEmbedding(const float* weight, IndexArray indices, float* out, int64_t count,
                            int64_t vocab, int64_t dim, ErrorSlot* slot, cudaStream_t stream);
// Zeroes dweight, then scatter-adds dy rows with atomicAdd.
cudaError_t LaunchEmbeddingGrad(const float* dy, IndexArray indices, float* dweight, int64_t count,
                                int64_t vocab, int64_t dim, ErrorSlot* slot, cudaStream_t stream);
// out [count, depth]: off everywhere, on at each index; bad indices are
// reported in the slot.
cudaError_t LaunchOneHot(IndexArray indices, float* out, int64_t count, int64_t depth, float on,
                         float off, ErrorSlot* slot, cudaStream_t stream);
// keep(i) = DropoutUniform(seed, iteration, parallel_id, i) >= rate (the CPU
// kernel's counter-based formula, bit for bit).
cudaError_t LaunchDropout(const float* x, float* y, unsigned char* mask, int64_t n, double rate,
                          int64_t seed, int64_t iteration, int64_t parallel_id,
                          cudaStream_t stream);
cudaError_t LaunchDropoutGrad(const float* dy, const unsigned char* mask, float* dx, int64_t n,
                              float scale, cudaStream_t stream);
// y (int32) = index of the first maximum along the axis.
cudaError_t LaunchArgmax(const float* x, int32_t* y, AxisDims dims, cudaStream_t stream);
// out[0] = (rows with first argmax == label) / rows, 0 for rows == 0.
cudaError_t LaunchAccuracy(const float* prediction, IndexArray label, float* out, int64_t rows,
                           int64_t classes, cudaStream_t stream);

struct PoolDims {
  int64_t planes = 0, height = 0, width = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
};
// Max ignores padded positions (0 for an empty window); ties go to the first
// maximum in row-major window order. Average divides by the in-bounds count.
cudaError_t LaunchMaxPool(const float* x, float* y, PoolDims dims, cudaStream_t stream);
cudaError_t LaunchMaxPoolGrad(const float* dy, const float* x, float* dx, PoolDims dims,
                              cudaStream_t stream);
cudaError_t LaunchAvgPool(const float* x, float* y, PoolDims dims, cudaStream_t stream);
cudaError_t LaunchAvgPoolGrad(const float* dy, float* dx, PoolDims dims, cudaStream_t stream);

// planes = N * C; y [planes, oh, ow] from x [planes, h, w].
cudaError_t LaunchAdaptiveAvgPool(const float* x, float* y, int64_t planes, int64_t h, int64_t w,
                                  int64_t oh, int64_t ow, cudaStream_t stream);
// Zeroes dx, then adds each cell's share with atomicAdd.
cudaError_t LaunchAdaptiveAvgPoolGrad(const float* dy, float* dx, int64_t planes, int64_t h,
                                      int64_t w, int64_t oh, int64_t ow, cudaStream_t stream);

// Optimizer updates, fused: one pass reads the gradient and state once and
// writes model and state. `scale` is a device scalar or null; a non-finite
// scale leaves everything unchanged and is reported through `slot`.
struct UpdateParams {
  float lr = 0.f, weight_decay = 0.f, beta = 0.9f, beta1 = 0.9f, beta2 = 0.999f, epsilon = 1e-8f;
  float bias_correction1 = 1.f, bias_correction2 = 1.f;  // 1 - beta^t
  bool decoupled = false;
};
cudaError_t LaunchSgdUpdate(float* model, const float* diff, const float* scale, int64_t n,
                            UpdateParams params, ErrorSlot* slot, cudaStream_t stream);
cudaError_t LaunchMomentumUpdate(float* model, const float* diff, float* momentum,
                                 const float* scale, int64_t n, UpdateParams params,
                                 ErrorSlot* slot, cudaStream_t stream);
cudaError_t LaunchAdamUpdate(float* model, const float* diff, float* m, float* v,
                             const float* scale, int64_t n, UpdateParams params, ErrorSlot* slot,
                             cudaStream_t stream);
// acc[0] += sum of x[i]^2 in double (acc zeroed by the caller).
cudaError_t LaunchSumSquares(const float* x, int64_t n, double* acc, cudaStream_t stream);
// out[0] = min(1, max_norm / (sqrt(acc[0]) + 1e-6)); a non-finite norm is
// reported through slot (out is then left unchanged).
cudaError_t LaunchClipScaleFinish(const double* acc, float* out, double max_norm, ErrorSlot* slot,
                                  cudaStream_t stream);
// acc[0] += x[0] for one float64 scalar (square_sum results; acc zeroed by
// the caller).
cudaError_t LaunchAddScalar(const double* x, double* acc, cudaStream_t stream);

}  // namespace cuda
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CUDA_NN_LAUNCH_H_
