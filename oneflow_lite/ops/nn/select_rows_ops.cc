// select_rows(x [N, ...], mask [N]) -> y [K, ...]: the rows of x whose mask
// is not zero, in order; K is known only at run time, so y is dynamic
// (is_dynamic, max shape [N, ...]; the kernel sets the actual shape, and a
// cross-machine register holding it moves through bounce buffers, only the
// valid bytes). x: float32, float64, int32 or int64; mask: int32, int64,
// float32 or float64. Not differentiable (use it on data or for metrics);
// offers only the all-broadcast signature: concatenating per-device
// selections of a split batch would need dynamic boxing.
#include "oneflow_lite/ops/nn/nn_util.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace nn {
namespace {

Status InferSelectRows(InferContext* ctx) {
  const TensorDesc& x = ctx->Input("x");
  const TensorDesc& mask = ctx->Input("mask");
  const auto numeric = [](DataType t) {
    return t == DT_FLOAT || t == DT_DOUBLE || t == DT_INT32 || t == DT_INT64;
  };
  if (!numeric(x.dtype) || x.shape.rank() < 1) {
    return ctx->Error("x must be float32/float64/int32/int64 of rank >= 1, got ", x.ToString());
  }
  if (!numeric(mask.dtype) || mask.shape != Shape({x.shape.dim(0)})) {
    return ctx->Error("mask must be a numeric [N] for x [N, ...]: ",
                      ShapePair("x", x.shape, "mask", mask.shape));
  }
  *ctx->Output("y") = TensorDesc(x.shape, x.dtype, /*dynamic=*/true);
  return Status::OK();
}

REGISTER_OP("select_rows")
    .Input("x")
    .Input("mask")
    .Output("y")
    .NoGrad()
    .Infer(InferSelectRows);

}  // namespace
}  // namespace nn
}  // namespace oflite
