// Shared helpers for the math op family: axis normalization, numpy-style
// broadcasting of shapes, SBP signature construction by argument name, and
// the small building blocks that gradient rules use (adding a backward op
// and getting its output lbn, summing a broadcast gradient back to an
// input's shape).
//
// All functions are pure or act only on the context passed in; they are
// thread-compatible like the contexts themselves.
#ifndef ONEFLOW_LITE_OPS_MATH_MATH_UTIL_H_
#define ONEFLOW_LITE_OPS_MATH_MATH_UTIL_H_

#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "oneflow_lite/common/shape.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace math {

// AttrView's *Or getters fall back to the default when an attribute has the
// wrong type; inference calls this first so that a mistyped optional
// attribute (e.g. transpose_a given as an int) is an error naming the op and
// the key instead of being silently ignored.
struct AttrType {
  const char* key;
  AttrValue::ValueCase type;
};
Status CheckOptionalAttrTypes(const OpConf& op, std::initializer_list<AttrType> attrs);

// Maps a possibly negative axis into [0, rank). False if out of range.
bool NormalizeAxis(int64_t axis, int64_t rank, int64_t* normalized);

// Normalizes a list of axes (negative allowed) against `rank`; an empty list
// means every axis when `empty_means_all`. Returns the sorted, unique axes or
// an error (out of range, duplicate) prefixed with `where`.
StatusOr<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, int64_t rank,
                                             bool empty_means_all, const std::string& where);

// Numpy broadcasting: shapes are aligned at the right; each pair of dims must
// be equal or one of them 1. False if incompatible.
bool BroadcastShapes(const Shape& a, const Shape& b, Shape* out);

// How broadcast_like maps x onto like's shape. `axes` are the normalized,
// sorted axes of `like` along which x is broadcast; empty means numpy-style
// right alignment. On success fills, for every axis of like, the axis of x
// holding the same extent, or -1 where x is broadcast (absent or size 1).
// x must have like's shape with `axes` removed or set to 1.
bool BroadcastLikeAxisMap(const Shape& x, const Shape& like, const std::vector<int64_t>& axes,
                          std::vector<int64_t>* x_axis_of);

// A slice normalized against the shape it reads from: per axis the first
// index, the (positive) step and the extent of the result. Attributes
// start/stop/step hold one value per axis; negative start/stop count from
// the end and both are clamped to [0, dim], like Python slices.
struct SliceSpec {
  std::vector<int64_t> start;
  std::vector<int64_t> step;
  Shape out_shape;
  // Whether axis i is taken whole (start 0, step 1, full extent).
  bool IsFullAxis(int64_t i, const Shape& in) const {
    return start[i] == 0 && step[i] == 1 && out_shape.dim(i) == in.dim(i);
  }
};
StatusOr<SliceSpec> NormalizeSlice(const OpConf& op, const Shape& in);

// "a (2, 3)" style text for error messages.
std::string Describe(const std::string& arg, const TensorDesc& desc);

// A signature whose flattened input/output order follows the OpConf. Every
// lbn of an arg gets that arg's SBP; CHECK-fails if an arg of the OpConf has
// no entry (a programmer bug in an SbpFn).
SbpSignature MakeSignature(const OpConf& op, const std::map<std::string, SbpParallel>& inputs,
                           const std::map<std::string, SbpParallel>& outputs);

// The logical desc of input `arg`[index] of the op (found by name, since
// SbpContext::inputs() is flattened in OpConf order). CHECK-fails if absent.
const TensorDesc& SbpInput(const SbpContext& ctx, const std::string& arg, int index = 0);
const TensorDesc& SbpOutput(const SbpContext& ctx, const std::string& arg, int index = 0);

// Adds, for every input/output arg of the op, the signature "S(axis) on all
// -> S(axis)" for each axis in [0, rank).
void AddAllSplitSignatures(SbpContext* ctx, int64_t rank);
// Numpy-broadcasting ops: for each axis i of output `out_arg`, S(i) out with
// S on every listed operand that holds axis i whole and B on one broadcast
// along it (only when at least one operand is split). `fixed` inputs keep
// the given SBP in every signature.
void AddBroadcastSplits(SbpContext* ctx, const std::vector<std::string>& operands,
                        const std::string& out_arg,
                        const std::map<std::string, SbpParallel>& fixed = {});
// Adds "P on every input (listed) and B on the others -> P on all outputs".
void AddPartialSignature(SbpContext* ctx, const std::vector<std::string>& partial_inputs);

// Pairs (input axis, output axis) such that splitting the input of a
// row-major reshape from `in` to `out` along the input axis is the same as
// splitting the output along the output axis into `parallel_num` equal
// parts (both leading products equal and the split dims compatible).
std::vector<std::pair<int64_t, int64_t>> ReshapeSplitAxes(const Shape& in, const Shape& out,
                                                          int64_t parallel_num);

// Adds `op` to the gradient graph and returns the lbn of its output `arg`[0].
StatusOr<std::string> AddGradOp(GradContext* ctx, const OpConf& op, const std::string& out_arg);

// A name for a backward op: "<forward op name>-<suffix>".
std::string GradOpName(const GradContext& ctx, const std::string& suffix);

// Adds the binary op `type`(x, y) -> out (e.g. "mul", "div") named
// GradOpName(suffix) and returns the lbn of its output.
StatusOr<std::string> AddBinaryGradOp(GradContext* ctx, const std::string& type,
                                      const std::string& x, const std::string& y,
                                      const std::string& suffix);

// Adds scalar_mul(in) * value named GradOpName(suffix) and returns the lbn of
// its output.
StatusOr<std::string> AddScalarMulGradOp(GradContext* ctx, const std::string& in, double value,
                                         const std::string& suffix);

// Sums `grad` (shape `grad_shape`, the broadcast output shape) back to the
// shape of input `arg`; returns `grad` unchanged when shapes already match.
StatusOr<std::string> SumToInputShape(GradContext* ctx, const std::string& grad,
                                      const Shape& grad_shape, const std::string& arg);

// Sets the gradient of every lbn of `arg` that needs one to zeros_like(it)
// (for inputs read only for their shape, such as `like`).
Status SetZeroGrads(GradContext* ctx, const std::string& arg);

}  // namespace math
}  // namespace oflite

#endif  // ONEFLOW_LITE_OPS_MATH_MATH_UTIL_H_
