// CUDA optimizer updates (fused: one pass over model, gradient and state)
// and the clip_scale global norm (double accumulation, like the CPU kernel).
#include <cmath>

#include "oneflow_lite/kernels/cuda/cuda_launch_util.cuh"
#include "oneflow_lite/kernels/cuda/nn_launch.h"

namespace oflite {
namespace cuda {
namespace {

// The gradient scale, or NaN (after reporting) if it is not finite.
__device__ inline float LoadScale(const float* scale, ErrorSlot* slot, int64_t i) {
  if (scale == nullptr) return 1.f;
  const float s = *scale;
  if (!isfinite(s) && i == 0) ReportError(slot, 0, 0);
  return s;
}

__global__ void SgdKernel(float* model, const float* diff, const float* scale, int64_t n,
                          UpdateParams p, ErrorSlot* slot) {
  OFLITE_GRID_LOOP(i, n) {
    const float s = LoadScale(scale, slot, i);
    if (!isfinite(s)) return;
    const float grad = s * diff[i] + p.weight_decay * model[i];
    model[i] -= p.lr * grad;
  }
}

__global__ void MomentumKernel(float* model, const float* diff, float* momentum,
                               const float* scale, int64_t n, UpdateParams p, ErrorSlot* slot) {
  OFLITE_GRID_LOOP(i, n) {
    const float s = LoadScale(scale, slot, i);
    if (!isfinite(s)) return;
    const float grad = s * diff[i] + p.weight_decay * model[i];
    const float mom = p.beta * momentum[i] + grad;
    momentum[i] = mom;
    model[i] -= p.lr * mom;
  }
}

__global__ void AdamKernel(float* model, const float* diff, float* m, float* v, const float* scale,
                           int64_t n, UpdateParams p, ErrorSlot* slot) {
  const float coupled = p.decoupled ? 0.f : p.weight_decay;
  const float decoupled = p.decoupled ? p.weight_decay : 0.f;
  OFLITE_GRID_LOOP(i, n) {
    const float s = LoadScale(scale, slot, i);
    if (!isfinite(s)) return;
    const float w = model[i];
    const float grad = s * diff[i] + coupled * w;
    const float m_new = p.beta1 * m[i] + (1.f - p.beta1) * grad;
    const float v_new = p.beta2 * v[i] + (1.f - p.beta2) * grad * grad;
    m[i] = m_new;
    v[i] = v_new;
    const float m_hat = m_new / p.bias_correction1;
    const float v_hat = v_new / p.bias_correction2;
    model[i] = w - p.lr * (m_hat / (sqrtf(v_hat) + p.epsilon) + decoupled * w);
  }
}

__global__ void SumSquaresKernel(const float* x, int64_t n, double* acc) {
  double sum = 0.0;
  OFLITE_GRID_LOOP(i, n) { sum += static_cast<double>(x[i]) * static_cast<double>(x[i]); }
  sum = BlockSum(sum);
  if (threadIdx.x == 0) atomicAdd(acc, sum);
}

__global__ void ClipFinishKernel(const double* acc, float* out, double max_norm, ErrorSlot* slot) {
  const double sum = acc[0];
  if (!isfinite(sum)) {
    // The scale must not keep the previous finite value: NaN makes every
    // update that reads it skip the step (LoadScale), as docs/gpu.md says.
    ReportError(slot, 0, 0);
    out[0] = __int_as_float(0x7fc00000);  // quiet NaN
    return;
  }
  const double ratio = max_norm / (sqrt(sum) + 1e-6);
  out[0] = static_cast<float>(ratio < 1.0 ? ratio : 1.0);
}

__global__ void AddScalarKernel(const double* x, double* acc) { acc[0] += x[0]; }

}  // namespace

cudaError_t LaunchSgdUpdate(float* model, const float* diff, const float* scale, int64_t n,
                            UpdateParams params, ErrorSlot* slot, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  SgdKernel<<<BlocksFor(n), kThreads, 0, stream>>>(model, diff, scale, n, params, slot);
  return cudaGetLastError();
}

cudaError_t LaunchMomentumUpdate(float* model, const float* diff, float* momentum,
                                 const float* scale, int64_t n, UpdateParams params,
                                 ErrorSlot* slot, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  MomentumKernel<<<BlocksFor(n), kThreads, 0, stream>>>(model, diff, momentum, scale, n, params,
                                                        slot);
  return cudaGetLastError();
}

cudaError_t LaunchAdamUpdate(float* model, const float* diff, float* m, float* v,
                             const float* scale, int64_t n, UpdateParams params, ErrorSlot* slot,
                             cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AdamKernel<<<BlocksFor(n), kThreads, 0, stream>>>(model, diff, m, v, scale, n, params, slot);
  return cudaGetLastError();
}

cudaError_t LaunchSumSquares(const float* x, int64_t n, double* acc, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  SumSquaresKernel<<<BlocksFor(n) < 1024 ? BlocksFor(n) : 1024, kThreads, 0, stream>>>(x, n, acc);
  return cudaGetLastError();
}

cudaError_t LaunchClipScaleFinish(const double* acc, float* out, double max_norm, ErrorSlot* slot,
                                  cudaStream_t stream) {
  ClipFinishKernel<<<1, 1, 0, stream>>>(acc, out, max_norm, slot);
  return cudaGetLastError();
}

cudaError_t LaunchAddScalar(const double* x, double* acc, cudaStream_t stream) {
  AddScalarKernel<<<1, 1, 0, stream>>>(x, acc);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace oflite
