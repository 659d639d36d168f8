// dropout and dropout_grad.
//
// y = x * mask / (1 - rate), mask (uint8, 1 = kept) drawn per element from
// DropoutUniform(seed attr, iteration, parallel_id, element index): the same
// (seed, iteration, device) always gives the same mask, and every iteration
// and every device of a split gets a fresh one. Under the all-broadcast
// signature on several devices the devices' masks differ too (a kernel is not
// told its SBP); prefer a split signature (docs/ops.md).
#include "oneflow_lite/ops/nn/nn_util.h"
#include "oneflow_lite/ops/nn/op_util.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace nn {
namespace {

Status CheckRate(const InferContext& ctx) {
  auto rate = DropoutRate(ctx.attrs());
  if (!rate.ok()) return ctx.Error(rate.status().message());
  return Status::OK();
}

Status InferDropout(InferContext* ctx) {
  RETURN_IF_ERROR(CheckRate(*ctx));
  const TensorDesc& x = ctx->Input("x");
  if (x.dtype != DT_FLOAT && x.dtype != DT_DOUBLE) {
    return ctx->Error("x must be float32 or float64, got ", x.ToString());
  }
  *ctx->Output("y") = x;
  *ctx->Output("mask") = TensorDesc(x.shape, DT_UINT8);
  return Status::OK();
}

Status InferDropoutGrad(InferContext* ctx) {
  RETURN_IF_ERROR(CheckRate(*ctx));
  const TensorDesc& dy = ctx->Input("dy");
  const TensorDesc& mask = ctx->Input("mask");
  if (dy.dtype != DT_FLOAT && dy.dtype != DT_DOUBLE) {
    return ctx->Error("dy must be float32 or float64, got ", dy.ToString());
  }
  if (mask.dtype != DT_UINT8) return ctx->Error("mask must be uint8, got ", mask.ToString());
  if (dy.shape != mask.shape) {
    return ctx->Error("shape mismatch: ", ShapePair("dy", dy.shape, "mask", mask.shape));
  }
  *ctx->Output("dx") = dy;
  return Status::OK();
}

// Elementwise: any axis may be split (each shard draws its own mask).
Status DropoutSbp(SbpContext* ctx) {
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < ctx->inputs().at(0).shape.rank(); ++i) axes.push_back(i);
  AddSameSplitSignatures(ctx, axes);
  return Status::OK();
}

Status DropoutGradRule(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("y");
  if (dy.empty() || !ctx->NeedsInputGrad("x")) return Status::OK();
  OpConf op = OpConfBuilder("dropout_grad", BackwardOpName(*ctx, "dropout_grad"))
                  .Input("dy", dy)
                  .Input("mask", ctx->OutputLbn("mask"))
                  .Output("dx")
                  .Attr("rate", ctx->attrs().GetFloatOr("rate", 0.0))
                  .Build();
  ASSIGN_OR_RETURN(std::string name, ctx->AddOp(AsBackward(*ctx, op)));
  ctx->SetInputGrad("x", 0, OutputLbn(name, "dx"));
  return Status::OK();
}

REGISTER_OP("dropout")
    .Input("x")
    .Output("y")
    .Output("mask")
    .Infer(InferDropout)
    .Sbp(DropoutSbp)
    .Grad(DropoutGradRule);
REGISTER_OP("dropout_grad")
    .Input("dy")
    .Input("mask")
    .Output("dx")
    .Infer(InferDropoutGrad)
    .Sbp(DropoutSbp);

}  // namespace
}  // namespace nn
}  // namespace oflite
