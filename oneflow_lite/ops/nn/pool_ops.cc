// max_pool2d / avg_pool2d (NCHW) and their grads.
//
// max_pool2d ignores padded positions; avg_pool2d divides by the number of
// in-bounds elements of each window (padding is not counted).
#include "oneflow_lite/ops/nn/nn_util.h"
#include "oneflow_lite/ops/nn/op_util.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace nn {
namespace {

StatusOr<Shape> PoolOutputShape(const InferContext& ctx, const TensorDesc& x) {
  if (x.dtype != DT_FLOAT && x.dtype != DT_DOUBLE) {
    return ctx.Error("input must be float32 or float64, got ", x.ToString());
  }
  auto window = MakePoolWindow(ctx.attrs(), x.shape);
  if (!window.ok()) return ctx.Error(window.status().message());
  return Shape({window->batch, window->channels, window->out_h, window->out_w});
}

Status CheckSameDesc(const InferContext& ctx, const std::string& arg, const TensorDesc& want,
                     const std::string& want_name) {
  const TensorDesc& got = ctx.Input(arg);
  if (got.shape != want.shape || got.dtype != want.dtype) {
    return ctx.Error("mismatch: ", arg, " ", got.ToString(), " vs ", want_name, " ",
                     want.ToString());
  }
  return Status::OK();
}

Status InferPool(InferContext* ctx) {
  const TensorDesc& x = ctx->Input("x");
  ASSIGN_OR_RETURN(Shape y, PoolOutputShape(*ctx, x));
  *ctx->Output("y") = TensorDesc(y, x.dtype);
  return Status::OK();
}

// max_pool2d_grad(dy, x, y) -> dx.
Status InferMaxPoolGrad(InferContext* ctx) {
  const TensorDesc& x = ctx->Input("x");
  ASSIGN_OR_RETURN(Shape y_shape, PoolOutputShape(*ctx, x));
  const TensorDesc y(y_shape, x.dtype);
  RETURN_IF_ERROR(CheckSameDesc(*ctx, "y", y, "pooled x"));
  RETURN_IF_ERROR(CheckSameDesc(*ctx, "dy", y, "pooled x"));
  *ctx->Output("dx") = x;
  return Status::OK();
}

// avg_pool2d_grad(dy, like) -> dx.
Status InferAvgPoolGrad(InferContext* ctx) {
  const TensorDesc& like = ctx->Input("like");
  ASSIGN_OR_RETURN(Shape y_shape, PoolOutputShape(*ctx, like));
  RETURN_IF_ERROR(CheckSameDesc(*ctx, "dy", TensorDesc(y_shape, like.dtype), "pooled like"));
  *ctx->Output("dx") = like;
  return Status::OK();
}

// Batch or channel split; pooling never mixes either.
Status PoolSbp(SbpContext* ctx) {
  AddSameSplitSignatures(ctx, {0, 1});
  return Status::OK();
}

OpConfBuilder& CopyPoolAttrs(const AttrView& attrs, OpConfBuilder& builder) {
  builder.Attr("kernel_size", attrs.GetIntsOr("kernel_size", {}));
  builder.Attr("strides", attrs.GetIntsOr("strides", {1, 1}));
  builder.Attr("padding", attrs.GetIntsOr("padding", {0, 0}));
  return builder;
}

Status MaxPoolGradRule(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("y");
  if (dy.empty() || !ctx->NeedsInputGrad("x")) return Status::OK();
  OpConfBuilder builder("max_pool2d_grad", BackwardOpName(*ctx, "max_pool2d_grad"));
  builder.Input("dy", dy)
      .Input("x", ctx->InputLbn("x"))
      .Input("y", ctx->OutputLbn("y"))
      .Output("dx");
  ASSIGN_OR_RETURN(std::string name,
                   ctx->AddOp(AsBackward(*ctx, CopyPoolAttrs(ctx->attrs(), builder).Build())));
  ctx->SetInputGrad("x", 0, OutputLbn(name, "dx"));
  return Status::OK();
}

Status AvgPoolGradRule(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("y");
  if (dy.empty() || !ctx->NeedsInputGrad("x")) return Status::OK();
  OpConfBuilder builder("avg_pool2d_grad", BackwardOpName(*ctx, "avg_pool2d_grad"));
  builder.Input("dy", dy).Input("like", ctx->InputLbn("x")).Output("dx");
  ASSIGN_OR_RETURN(std::string name,
                   ctx->AddOp(AsBackward(*ctx, CopyPoolAttrs(ctx->attrs(), builder).Build())));
  ctx->SetInputGrad("x", 0, OutputLbn(name, "dx"));
  return Status::OK();
}

REGISTER_OP("max_pool2d")
    .Input("x")
    .Output("y")
    .Infer(InferPool)
    .Sbp(PoolSbp)
    .Grad(MaxPoolGradRule);
REGISTER_OP("avg_pool2d")
    .Input("x")
    .Output("y")
    .Infer(InferPool)
    .Sbp(PoolSbp)
    .Grad(AvgPoolGradRule);
REGISTER_OP("max_pool2d_grad")
    .Input("dy")
    .Input("x")
    .Input("y")
    .Output("dx")
    .Infer(InferMaxPoolGrad)
    .Sbp(PoolSbp);
REGISTER_OP("avg_pool2d_grad")
    .Input("dy")
    .Input("like")
    .Output("dx")
    .Infer(InferAvgPoolGrad)
    .Sbp(PoolSbp);

}  // namespace
}  // namespace nn
}  // namespace oflite
