// Bin geometry of adaptive average pooling, shared by the op definition and
// the CPU/CUDA kernels (depends on common/ only). Output cell i of an axis
// of input length `in` and output length `out` averages input positions
// [AdaptiveBinStart(i), AdaptiveBinEnd(i)): floor(i * in / out) and
// ceil((i + 1) * in / out). Pure functions; thread-safe.
#ifndef ONEFLOW_LITE_OPS_NN_ADAPTIVE_POOL_H_
#define ONEFLOW_LITE_OPS_NN_ADAPTIVE_POOL_H_

#include <cstdint>

#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/common/shape.h"
#include "oneflow_lite/common/status.h"

namespace oflite {
namespace nn {

inline int64_t AdaptiveBinStart(int64_t i, int64_t in, int64_t out) { return i * in / out; }
inline int64_t AdaptiveBinEnd(int64_t i, int64_t in, int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

// [N, C, OH, OW] from x [N, C, H, W] and attr output_size (ints 2, >= 1).
// Errors (unprefixed: callers add the op) name the attribute or the shape.
StatusOr<Shape> AdaptivePoolOutputShape(const AttrView& attrs, const Shape& x);

}  // namespace nn
}  // namespace oflite

#endif  // ONEFLOW_LITE_OPS_NN_ADAPTIVE_POOL_H_
