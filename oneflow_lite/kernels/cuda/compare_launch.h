// Launchers of the CUDA iota and comparison kernels (ops/math/compare_ops.cc).
// Comparisons read x and y of one dtype (`kind`) through a StridedIndex
// (operand 0: x, 1: y; numpy broadcasting) and write a contiguous uint8 1/0
// output; iota writes the index along the middle axis of [outer, size,
// inner] in the output's dtype.
#ifndef ONEFLOW_LITE_KERNELS_CUDA_COMPARE_LAUNCH_H_
#define ONEFLOW_LITE_KERNELS_CUDA_COMPARE_LAUNCH_H_

#include "oneflow_lite/kernels/cuda/launch_common.h"

namespace oflite {
namespace cuda {

enum class CompareOp { kEqual, kNotEqual, kLess, kLessEqual, kGreater, kGreaterEqual };
enum class ValueKind { kF32, kF64, kI32, kI64 };

cudaError_t LaunchCompare(CompareOp op, ValueKind kind, const void* x, const void* y,
                          unsigned char* out, const StridedIndex& index, cudaStream_t stream);
cudaError_t LaunchIota(ValueKind kind, void* out, int64_t outer, int64_t size, int64_t inner,
                       cudaStream_t stream);

}  // namespace cuda
}  // namespace oflite

#endif  // ONEFLOW_LITE_KERNELS_CUDA_COMPARE_LAUNCH_H_
