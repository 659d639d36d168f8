// Helpers shared by the nn op definitions and their kernels: axis
// normalization, 2-D window geometry (conv and pooling) and the dropout mask
// generator. Depends on common/ only, so kernels can use it without the op
// registry (op-definition helpers live in op_util.h).
//
// Everything here is a pure function of its arguments (no state), so it is
// thread-safe. Errors are InvalidArgument statuses whose text the caller
// prefixes with the op (InferContext::Error / KernelContext::Error add it).
#ifndef ONEFLOW_LITE_OPS_NN_NN_UTIL_H_
#define ONEFLOW_LITE_OPS_NN_NN_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/common/shape.h"
#include "oneflow_lite/common/status.h"

namespace oflite {
namespace nn {

// Maps `axis` in [-rank, rank) to [0, rank); error text names the axis and
// the rank.
StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank);

// Geometry of a 2-D sliding window over an NCHW tensor, shared by conv2d and
// the pooling ops. Output size per spatial dim:
//   out = (in + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1.
struct Window2d {
  int64_t batch = 0, channels = 0, height = 0, width = 0;
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t out_h = 0, out_w = 0;

  int64_t InSpatial() const { return height * width; }
  int64_t OutSpatial() const { return out_h * out_w; }
  int64_t KernelSpatial() const { return kernel_h * kernel_w; }
};

// Reads strides/padding/dilations (ints of length 2; strides default [1,1],
// padding [0,0], dilations [1,1]) and validates them against the NCHW input
// shape `x` and the window size. An error names the offending attribute and
// value, or the input shape when the window does not fit.
StatusOr<Window2d> MakeWindow2d(const AttrView& attrs, const Shape& x, int64_t kernel_h,
                                int64_t kernel_w, bool with_dilations);

// conv2d: x [N,C,H,W], weight [O,C,KH,KW].
StatusOr<Window2d> MakeConvWindow(const AttrView& attrs, const Shape& x, const Shape& weight);
// Pooling: x [N,C,H,W] and attr kernel_size (ints 2).
StatusOr<Window2d> MakePoolWindow(const AttrView& attrs, const Shape& x);

// The dropout keep decision for element `index` of a tensor: a counter-based
// hash of (seed, iteration, parallel_id, index), so masks are reproducible,
// independent of evaluation order, and differ across iterations and devices.
// Returns a uniform value in [0, 1); the element is kept when it is >= rate.
double DropoutUniform(int64_t seed, int64_t iteration, int64_t parallel_id, int64_t index);

// Validates dropout's rate attribute: 0 <= rate < 1.
StatusOr<double> DropoutRate(const AttrView& attrs);

// "(2, 3)" vs "(2, 4)" style message used by every shape-mismatch error.
std::string ShapePair(const std::string& name_a, const Shape& a, const std::string& name_b,
                      const Shape& b);

}  // namespace nn
}  // namespace oflite

#endif  // ONEFLOW_LITE_OPS_NN_NN_UTIL_H_
