// conv2d (NCHW) and its two gradient ops.
#include "oneflow_lite/ops/nn/nn_util.h"
#include "oneflow_lite/ops/nn/op_util.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace nn {
namespace {

bool IsFloating(DataType t) { return t == DT_FLOAT || t == DT_DOUBLE; }

Status CheckDtypes(const InferContext& ctx, const std::vector<std::string>& args) {
  const TensorDesc& first = ctx.Input(args.at(0));
  if (!IsFloating(first.dtype)) {
    return ctx.Error("input '", args[0], "' must be float32 or float64, got ", first.ToString());
  }
  for (const std::string& arg : args) {
    if (ctx.Input(arg).dtype != first.dtype) {
      return ctx.Error("dtype mismatch: ", args[0], " ", first.ToString(), " vs ", arg, " ",
                       ctx.Input(arg).ToString());
    }
  }
  return Status::OK();
}

StatusOr<Window2d> ConvWindow(const InferContext& ctx, const Shape& x, const Shape& weight) {
  auto window = MakeConvWindow(ctx.attrs(), x, weight);
  if (!window.ok()) return ctx.Error(window.status().message());
  return window;
}

Shape ConvOutputShape(const Window2d& w, int64_t out_channels) {
  return Shape({w.batch, out_channels, w.out_h, w.out_w});
}

Status InferConv2d(InferContext* ctx) {
  RETURN_IF_ERROR(CheckDtypes(*ctx, {"x", "weight"}));
  const TensorDesc& x = ctx->Input("x");
  const Shape& weight = ctx->Input("weight").shape;
  ASSIGN_OR_RETURN(Window2d w, ConvWindow(*ctx, x.shape, weight));
  *ctx->Output("y") = TensorDesc(ConvOutputShape(w, weight.dim(0)), x.dtype);
  return Status::OK();
}

// dy must be exactly the conv2d output of (x, weight).
Status CheckDy(const InferContext& ctx, const Shape& x, const Shape& weight) {
  ASSIGN_OR_RETURN(Window2d w, ConvWindow(ctx, x, weight));
  const Shape expected = ConvOutputShape(w, weight.dim(0));
  const Shape& dy = ctx.Input("dy").shape;
  if (dy != expected) {
    return ctx.Error("dy does not match the conv2d output: ",
                     ShapePair("dy", dy, "expected", expected));
  }
  return Status::OK();
}

Status InferConv2dGradData(InferContext* ctx) {
  RETURN_IF_ERROR(CheckDtypes(*ctx, {"dy", "weight", "like"}));
  const TensorDesc& like = ctx->Input("like");
  RETURN_IF_ERROR(CheckDy(*ctx, like.shape, ctx->Input("weight").shape));
  *ctx->Output("dx") = like;
  return Status::OK();
}

Status InferConv2dGradFilter(InferContext* ctx) {
  RETURN_IF_ERROR(CheckDtypes(*ctx, {"dy", "x", "like"}));
  const TensorDesc& like = ctx->Input("like");
  RETURN_IF_ERROR(CheckDy(*ctx, ctx->Input("x").shape, like.shape));
  *ctx->Output("dw") = like;
  return Status::OK();
}

// Adds the signature in_sbps[i] for input in_args[i] -> out_sbp.
void AddSig(SbpContext* ctx, const std::vector<std::string>& in_args,
            const std::vector<SbpParallel>& in_sbps, const std::string& out_arg,
            const SbpParallel& out_sbp) {
  std::map<std::string, SbpParallel> inputs;
  for (size_t i = 0; i < in_args.size(); ++i) inputs[in_args[i]] = in_sbps[i];
  ctx->Add(SignatureByArg(*ctx, inputs, {{out_arg, out_sbp}}));
}

// conv2d(x, weight) -> y:
//   S(0) x, B w    -> S(0) y   (data parallel)
//   B x,    S(0) w -> S(1) y   (output channels split)
//   S(1) x, S(1) w -> P y      (input channels split; partial sums)
Status Conv2dSbp(SbpContext* ctx) {
  const auto S = SplitSbp;
  const SbpParallel B = BroadcastSbp(), P = PartialSumSbp();
  const std::vector<std::string> args = {"x", "weight"};
  AddSig(ctx, args, {S(0), B}, "y", S(0));
  AddSig(ctx, args, {B, S(0)}, "y", S(1));
  AddSig(ctx, args, {S(1), S(1)}, "y", P);
  return Status::OK();
}

// conv2d_grad_data(dy, weight, like) -> dx, the transpose of the above:
Status Conv2dGradDataSbp(SbpContext* ctx) {
  const auto S = SplitSbp;
  const SbpParallel B = BroadcastSbp(), P = PartialSumSbp();
  const std::vector<std::string> args = {"dy", "weight", "like"};
  AddSig(ctx, args, {S(0), B, S(0)}, "dx", S(0));
  AddSig(ctx, args, {S(1), S(0), B}, "dx", P);
  AddSig(ctx, args, {B, S(1), S(1)}, "dx", S(1));
  return Status::OK();
}

// conv2d_grad_filter(dy, x, like) -> dw:
Status Conv2dGradFilterSbp(SbpContext* ctx) {
  const auto S = SplitSbp;
  const SbpParallel B = BroadcastSbp(), P = PartialSumSbp();
  const std::vector<std::string> args = {"dy", "x", "like"};
  AddSig(ctx, args, {S(0), S(0), B}, "dw", P);
  AddSig(ctx, args, {S(1), B, S(0)}, "dw", S(0));
  AddSig(ctx, args, {B, S(1), S(1)}, "dw", S(1));
  return Status::OK();
}

OpConfBuilder& CopyConvAttrs(const AttrView& attrs, OpConfBuilder& builder) {
  builder.Attr("strides", attrs.GetIntsOr("strides", {1, 1}));
  builder.Attr("padding", attrs.GetIntsOr("padding", {0, 0}));
  builder.Attr("dilations", attrs.GetIntsOr("dilations", {1, 1}));
  return builder;
}

Status Conv2dGradRule(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("y");
  if (dy.empty()) return Status::OK();
  if (ctx->NeedsInputGrad("x")) {
    OpConfBuilder builder("conv2d_grad_data", BackwardOpName(*ctx, "conv2d_grad_data"));
    builder.Input("dy", dy)
        .Input("weight", ctx->InputLbn("weight"))
        .Input("like", ctx->InputLbn("x"))
        .Output("dx");
    ASSIGN_OR_RETURN(std::string name,
                     ctx->AddOp(AsBackward(*ctx, CopyConvAttrs(ctx->attrs(), builder).Build())));
    ctx->SetInputGrad("x", 0, OutputLbn(name, "dx"));
  }
  if (ctx->NeedsInputGrad("weight")) {
    OpConfBuilder builder("conv2d_grad_filter", BackwardOpName(*ctx, "conv2d_grad_filter"));
    builder.Input("dy", dy)
        .Input("x", ctx->InputLbn("x"))
        .Input("like", ctx->InputLbn("weight"))
        .Output("dw");
    ASSIGN_OR_RETURN(std::string name,
                     ctx->AddOp(AsBackward(*ctx, CopyConvAttrs(ctx->attrs(), builder).Build())));
    ctx->SetInputGrad("weight", 0, OutputLbn(name, "dw"));
  }
  return Status::OK();
}

REGISTER_OP("conv2d")
    .Input("x")
    .Input("weight")
    .Output("y")
    .Infer(InferConv2d)
    .Sbp(Conv2dSbp)
    .Grad(Conv2dGradRule);
REGISTER_OP("conv2d_grad_data")
    .Input("dy")
    .Input("weight")
    .Input("like")
    .Output("dx")
    .Infer(InferConv2dGradData)
    .Sbp(Conv2dGradDataSbp);
REGISTER_OP("conv2d_grad_filter")
    .Input("dy")
    .Input("x")
    .Input("like")
    .Output("dw")
    .Infer(InferConv2dGradFilter)
    .Sbp(Conv2dGradFilterSbp);

}  // namespace
}  // namespace nn
}  // namespace oflite
