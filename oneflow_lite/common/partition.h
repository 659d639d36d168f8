// The balanced split rule, in one place: how a length is cut into `parts`
// contiguous parts, and the copies between a whole tensor and one part of it
// (a slab along one axis), plus the typed element-wise sum that partial-sum
// boxing, ring reduction and the SBP checker use.
//
// Rule: part i of n over a length L has L / n elements, plus one when
// i < L % n; parts follow each other in index order starting at 0. So the
// first L % n parts carry the remainder, and when n > L the last n - L parts
// are empty. Every layer that cuts or assembles a split tensor (compiler
// physical shapes, boxing, collectives, sharded checkpoints, variable
// initialisation, the test-time SBP checker) uses these functions, so the
// compiler's shapes and the runtime's copies cannot disagree.
//
// Pure functions on caller-owned memory; thread-safe. The copies never
// allocate and touch no memory for an empty slab (null pointers are fine
// then).
#ifndef ONEFLOW_LITE_COMMON_PARTITION_H_
#define ONEFLOW_LITE_COMMON_PARTITION_H_

#include <cstdint>

#include "oneflow_lite/common/data_type.h"
#include "oneflow_lite/common/shape.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/tensor.h"
#include "proto/common.pb.h"

namespace oflite {

// [begin, begin + size) along one axis.
struct PartRange {
  int64_t begin = 0;
  int64_t size = 0;

  int64_t end() const { return begin + size; }
  bool operator==(const PartRange& other) const {
    return begin == other.begin && size == other.size;
  }
};

// Part `index` of `parts` of `length` (>= 0) under the balanced rule.
// Requires parts >= 1 and 0 <= index < parts (CHECKed: callers validate plans
// and attributes before cutting).
PartRange BalancedPart(int64_t length, int64_t parts, int64_t index);

// `whole` with dimension `axis` replaced by the size of part `index`.
// Requires 0 <= axis < whole.rank().
Shape BalancedPartShape(const Shape& whole, int64_t axis, int64_t parts, int64_t index);

// Copies the slab `range` along `axis` of a dense row-major tensor of shape
// `whole` (elements of `elem_bytes`) to or from a dense part buffer holding
// just that slab (its shape is `whole` with dim(axis) = range.size).
// The range must lie inside whole.dim(axis); the buffers must not overlap.
void CopyWholeToPart(const Shape& whole, int64_t axis, PartRange range, int64_t elem_bytes,
                     const void* whole_data, void* part_data);
void CopyPartToWhole(const Shape& whole, int64_t axis, PartRange range, int64_t elem_bytes,
                     const void* part_data, void* whole_data);

// to[i] += from[i] for i < count, as elements of `dtype`. Unimplemented
// (naming the dtype) for a dtype that cannot be summed; supported: float32,
// float64, int32, int64 (CanAccumulate).
bool CanAccumulate(DataType dtype);
Status AccumulateInto(DataType dtype, const void* from, void* to, int64_t count);

// Whether an S(a) -> S(b) conversion can move blocks (each rank sends each
// peer only the part of its range along a that falls in the peer's range
// along b: runtime/commnet/all_to_all_parts.h, and the simulator's bytes):
// both SBPs split, on different axes of the static tensor `logical`. Sets
// the two axes when so.
bool SplitToSplitAxes(const SbpParallel& in, const SbpParallel& out, const TensorDesc& logical,
                      int64_t* in_axis, int64_t* out_axis);

// Sets `count` elements of `dtype` to the additive identity that leaves
// every addend's bits unchanged: -0.0 for float32 and float64 (x + -0.0 is
// x for every x, +0.0 and -0.0 included, where +0.0 would turn -0.0 into
// +0.0), 0 for int32 and int64. Unimplemented for other dtypes, as above.
Status FillAdditiveIdentity(DataType dtype, void* data, int64_t count);

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_PARTITION_H_
