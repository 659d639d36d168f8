// adaptive_avg_pool2d(x [N, C, H, W]) -> y [N, C, OH, OW] with attr
// output_size (ints 2, each >= 1; H and W must be >= 1): output cell (i, j)
// is the mean of rows [floor(i H / OH), ceil((i + 1) H / OH)) and columns
// [floor(j W / OW), ceil((j + 1) W / OW)) (bins may overlap when OH does not
// divide H). adaptive_avg_pool2d_grad(dy, like) -> dx spreads each cell's
// gradient evenly over its bin (overlaps accumulate).
#include "oneflow_lite/ops/nn/adaptive_pool.h"
#include "oneflow_lite/ops/nn/op_util.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace nn {
namespace {

Status InferAdaptive(InferContext* ctx, const std::string& in_arg, const std::string& out_arg) {
  const TensorDesc& x = ctx->Input(in_arg);
  if (x.dtype != DT_FLOAT && x.dtype != DT_DOUBLE) {
    return ctx->Error(in_arg, " must be float32 or float64, got ", x.ToString());
  }
  auto out = AdaptivePoolOutputShape(ctx->attrs(), x.shape);
  if (!out.ok()) return ctx->Error(out.status().message());
  *ctx->Output(out_arg) = TensorDesc(*out, x.dtype);
  return Status::OK();
}

Status InferPool(InferContext* ctx) { return InferAdaptive(ctx, "x", "y"); }

Status InferPoolGrad(InferContext* ctx) {
  const TensorDesc& like = ctx->Input("like");
  const TensorDesc& dy = ctx->Input("dy");
  if (like.dtype != DT_FLOAT && like.dtype != DT_DOUBLE) {
    return ctx->Error("like must be float32 or float64, got ", like.ToString());
  }
  auto out = AdaptivePoolOutputShape(ctx->attrs(), like.shape);
  if (!out.ok()) return ctx->Error(out.status().message());
  if (dy.shape != *out || dy.dtype != like.dtype) {
    return ctx->Error("dy must be ", TensorDesc(*out, like.dtype).ToString(), ", got ",
                      dy.ToString());
  }
  *ctx->Output("dx") = like;
  return Status::OK();
}

// Batch and channel splits are exact; the grad is also linear in dy.
Status PoolSbp(SbpContext* ctx) {
  AddSameSplitSignatures(ctx, {0, 1});
  return Status::OK();
}

Status PoolGradSbp(SbpContext* ctx) {
  AddSameSplitSignatures(ctx, {0, 1});
  ctx->Add(SignatureByArg(*ctx, {{"dy", PartialSumSbp()}, {"like", BroadcastSbp()}},
                          {{"dx", PartialSumSbp()}}));
  return Status::OK();
}

Status PoolGradRule(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("y");
  if (dy.empty() || !ctx->NeedsInputGrad("x")) return Status::OK();
  OpConf op = OpConfBuilder("adaptive_avg_pool2d_grad", BackwardOpName(*ctx, "grad"))
                  .Input("dy", dy)
                  .Input("like", ctx->InputLbn("x"))
                  .Output("dx")
                  .Build();
  *op.mutable_attr() = ctx->op().attr();
  ASSIGN_OR_RETURN(std::string name, ctx->AddOp(AsBackward(*ctx, op)));
  ctx->SetInputGrad("x", 0, OutputLbn(name, "dx"));
  return Status::OK();
}

REGISTER_OP("adaptive_avg_pool2d")
    .Input("x")
    .Output("y")
    .Infer(InferPool)
    .Sbp(PoolSbp)
    .Grad(PoolGradRule);
REGISTER_OP("adaptive_avg_pool2d_grad")
    .Input("dy")
    .Input("like")
    .Output("dx")
    .Infer(InferPoolGrad)
    .Sbp(PoolGradSbp);

}  // namespace
}  // namespace nn
}  // namespace oflite
