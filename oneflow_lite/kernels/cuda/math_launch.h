// Launchers of the CUDA math kernels (elementwise, broadcast, reductions,
// layout). Float32 unless noted; layout copies move raw 1/4/8-byte elements.
// See launch_common.h for the StridedIndex convention.
#ifndef ONEFLOW_LITE_KERNELS_CUDA_MATH_LAUNCH_H_
#define ONEFLOW_LITE_KERNELS_CUDA_MATH_LAUNCH_H_

#include "oneflow_lite/kernels/cuda/launch_common.h"

namespace oflite {
namespace cuda {

// kGelu: erf form; kGeluTanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
enum class UnaryOp { kRelu, kSigmoid, kTanh, kGelu, kGeluTanh, kScalarAdd, kScalarMul, kScalarPow };
enum class ActivationGradOp { kRelu, kSigmoid, kTanh, kGelu, kGeluTanh };
// kAddRelu: a + b if positive, else 0 (the fused bias_add_relu; as relu).
enum class BinaryOp { kAdd, kSub, kMul, kDiv, kAddRelu };
enum class ElemKind { kF32, kF64, kI32, kI64, kU8 };

// y[i] = op(x[i]) with `param` the scalar attr (value or exponent).
cudaError_t LaunchUnary(UnaryOp op, const float* x, float* y, int64_t n, float param,
                        cudaStream_t stream);
// dx[i] = op'(dy[i], saved[i]) (saved: y for relu/sigmoid/tanh, x for gelu).
cudaError_t LaunchActivationGrad(ActivationGradOp op, const float* dy, const float* saved,
                                 float* dx, int64_t n, cudaStream_t stream);
// out[i] = op(a[off0(i)], b[off1(i)]) for i over index (out is contiguous).
// out may alias a or b only when the aliased operand is itself contiguous.
cudaError_t LaunchBinary(BinaryOp op, const float* a, const float* b, float* out,
                         const StridedIndex& index, cudaStream_t stream);
// out[i] = op(a[i], b[(i / inner) % channels]) for i in [0, n): a bias
// along one axis of a contiguous tensor (channels: that axis's extent,
// inner: the elements after it). One division and one remainder per
// element, in 32 bits when n < 2^31.
cudaError_t LaunchBiasAdd(BinaryOp op, const float* a, const float* b, float* out, int64_t n,
                          int64_t channels, int64_t inner, cudaStream_t stream);
// dst[off1(i)] = src[off0(i)] for i over index; elem_size is 1, 4 or 8.
cudaError_t LaunchStridedCopy(const void* src, void* dst, int elem_size, const StridedIndex& index,
                              cudaStream_t stream);
// y[o] = (sum over r of x[off0_outer(o) + off0_inner(r)]) / divisor, y
// contiguous over outer's dims. An empty inner space gives 0 / divisor.
// One block per output; when there are few outputs and long sums (a
// convolution's bias gradient: 6 outputs of 3.2M terms at batch 4096) each
// sum is split over ReduceSplits(...) blocks whose partial sums go to
// `partials` (at least kReducePartials doubles of device memory, owned by
// the caller; may be null, then no split) and are added in a fixed order by
// a second kernel: deterministic, as two runs of a plan must agree. The
// split path sums in double (a bias gradient is a sum of millions of terms
// that mostly cancel); OFLITE_CUDA_REDUCE_SPLIT=0 turns it off.
constexpr int64_t kReducePartials = 4096;
int64_t ReduceSplits(int64_t out_count, int64_t inner_count);
cudaError_t LaunchReduceSum(const float* x, float* y, const StridedIndex& outer,
                            const StridedIndex& inner, float divisor, double* partials,
                            cudaStream_t stream);
// out[i] = convert(in[i]); float -> int truncates toward zero, -> u8 is != 0.
cudaError_t LaunchCast(const void* in, ElemKind in_kind, void* out, ElemKind out_kind, int64_t n,
                       cudaStream_t stream);

}  // namespace cuda
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CUDA_MATH_LAUNCH_H_
