// binary_cross_entropy_with_logits(x, target) -> out, elementwise:
//   out = max(x, 0) - x * target + log(1 + exp(-|x|))
// (= -t log sigmoid(x) - (1 - t) log(1 - sigmoid(x)), stable for any x).
// x and target: same shape and float dtype; reduce `out` for a scalar loss.
// Gradients: dx = dy * (sigmoid(x) - target) (grad op), dtarget = -dy * x.
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

// Linear in dy: P dy, B x, B target -> P dx.
Status BceGradSbp(SbpContext* ctx) {
  AddSameSplitSignatures(ctx, AllAxes(*ctx));
  ctx->Add(SignatureByArg(
      *ctx, {{"dy", PartialSumSbp()}, {"x", BroadcastSbp()}, {"target", BroadcastSbp()}},
      {{"dx", PartialSumSbp()}}));
  return Status::OK();
}

StatusOr<std::string> AddBackward(GradContext* ctx, const OpConf& op, const std::string& arg) {
  ASSIGN_OR_RETURN(std::string name, ctx->AddOp(AsBackward(*ctx, op)));
  return OutputLbn(name, arg);
}

Status BceGradRule(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("out");
  if (dy.empty()) return Status::OK();
  if (ctx->NeedsInputGrad("x")) {
    ASSIGN_OR_RETURN(std::string dx,
                     AddBackward(ctx,
                                 OpConfBuilder("binary_cross_entropy_with_logits_grad",
                                               BackwardOpName(*ctx, "grad_x"))
                                     .Input("dy", dy)
                                     .Input("x", ctx->InputLbn("x"))
                                     .Input("target", ctx->InputLbn("target"))
                                     .Output("dx")
                                     .Build(),
                                 "dx"));
    ctx->SetInputGrad("x", 0, dx);
  }
  if (ctx->NeedsInputGrad("target")) {
    ASSIGN_OR_RETURN(std::string product, AddBackward(ctx,
                                                      OpConfBuilder("mul",
                                                                    BackwardOpName(*ctx,
                                                                                   "grad_target_mul"))
                                                          .Input("x", dy)
                                                          .Input("y", ctx->InputLbn("x"))
                                                          .Output("out")
                                                          .Build(),
                                                      "out"));
    ASSIGN_OR_RETURN(std::string dt,
                     AddBackward(ctx,
                                 OpConfBuilder("neg", BackwardOpName(*ctx, "grad_target"))
                                     .Input("x", product)
                                     .Output("y")
                                     .Build(),
                                 "y"));
    ctx->SetInputGrad("target", 0, dt);
  }
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
    .Infer(InferBceGrad)
    .Sbp(BceGradSbp);

}  // namespace
}  // namespace nn
}  // namespace oflite
