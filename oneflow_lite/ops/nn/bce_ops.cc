// binary_cross_entropy_with_logits(x, target) -> out, elementwise:
//   out = max(x, 0) - x * target + log(1 + exp(-|x|))
// (= -t log sigmoid(x) - (1 - t) log(1 - sigmoid(x)), stable for any x).
// x and target: same shape and float dtype; reduce `out` for a scalar loss.
// Gradients (one grad op): dx = dy * (sigmoid(x) - target), dtarget = -dy * x.
#include "oneflow_lite/ops/nn/op_util.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace nn {
namespace {

Status CheckSame(const InferContext& ctx, const std::vector<std::string>& args) {
  const TensorDesc& x = ctx.Input(args[0]);
  if (x.dtype != DT_FLOAT && x.dtype != DT_DOUBLE) {
    return ctx.Error(args[0], " must be float32 or float64, got ", x.ToString());
  }
  for (size_t i = 1; i < args.size(); ++i) {
    if (ctx.Input(args[i]) != x) {
      return ctx.Error(args[i], " must match ", args[0], " ", x.ToString(), ", got ",
                       ctx.Input(args[i]).ToString());
    }
  }
  return Status::OK();
}

Status InferBce(InferContext* ctx) {
  RETURN_IF_ERROR(CheckSame(*ctx, {"x", "target"}));
  *ctx->Output("out") = ctx->Input("x");
  return Status::OK();
}

Status InferBceGrad(InferContext* ctx) {
  RETURN_IF_ERROR(CheckSame(*ctx, {"dy", "x", "target"}));
  *ctx->Output("dx") = ctx->Input("x");
  *ctx->Output("dtarget") = ctx->Input("x");
  return Status::OK();
}

std::vector<int64_t> AllAxes(const SbpContext& ctx) {
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < SbpInputDesc(ctx, "x").shape.rank(); ++i) axes.push_back(i);
  return axes;
}

Status BceSbp(SbpContext* ctx) {
  AddSameSplitSignatures(ctx, AllAxes(*ctx));
  return Status::OK();
}

// Linear in dy: P dy, B x, B target -> P dx, P dtarget.
Status BceGradSbp(SbpContext* ctx) {
  AddSameSplitSignatures(ctx, AllAxes(*ctx));
  ctx->Add(SignatureByArg(
      *ctx, {{"dy", PartialSumSbp()}, {"x", BroadcastSbp()}, {"target", BroadcastSbp()}},
      {{"dx", PartialSumSbp()}, {"dtarget", PartialSumSbp()}}));
  return Status::OK();
}

// One grad op gives both gradients (dtarget = -dy * x is one multiply).
Status BceGradRule(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("out");
  if (dy.empty() || (!ctx->NeedsInputGrad("x") && !ctx->NeedsInputGrad("target"))) {
    return Status::OK();
  }
  OpConf op = OpConfBuilder("binary_cross_entropy_with_logits_grad", BackwardOpName(*ctx, "grad"))
                  .Input("dy", dy)
                  .Input("x", ctx->InputLbn("x"))
                  .Input("target", ctx->InputLbn("target"))
                  .Output("dx")
                  .Output("dtarget")
                  .Build();
  ASSIGN_OR_RETURN(std::string name, ctx->AddOp(AsBackward(*ctx, op)));
  if (ctx->NeedsInputGrad("x")) ctx->SetInputGrad("x", 0, OutputLbn(name, "dx"));
  if (ctx->NeedsInputGrad("target")) ctx->SetInputGrad("target", 0, OutputLbn(name, "dtarget"));
  return Status::OK();
}

REGISTER_OP("binary_cross_entropy_with_logits")
    .Input("x")
    .Input("target")
    .Output("out")
    .Infer(InferBce)
    .Sbp(BceSbp)
    .Grad(BceGradRule);
REGISTER_OP("binary_cross_entropy_with_logits_grad")
    .Input("dy")
    .Input("x")
    .Input("target")
    .Output("dx")
    .Output("dtarget")
    .Infer(InferBceGrad)
    .Sbp(BceGradSbp);

}  // namespace
}  // namespace nn
}  // namespace oflite
