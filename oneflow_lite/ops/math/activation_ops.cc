// Activations relu, sigmoid, tanh, gelu and their gradient ops.
// relu/sigmoid/tanh gradients read the forward output y; gelu's reads x.
// gelu and gelu_grad take `approximate`: "none" (default, the erf form) or
// "tanh" (0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))).
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {
namespace {

Status InferActivation(InferContext* ctx) {
  const TensorDesc& x = ctx->Input("x");
  if (x.dtype != DT_FLOAT && x.dtype != DT_DOUBLE) {
    return ctx->Error("needs a float32/float64 input, got ", Describe("x", x));
  }
  *ctx->Output("y") = x;
  return Status::OK();
}

Status ActivationSbp(SbpContext* ctx) {
  AddAllSplitSignatures(ctx, SbpInput(*ctx, "x").shape.rank());
  return Status::OK();
}

// dy and the saved tensor (`saved`: "y" or "x") must agree.
Status InferActivationGrad(InferContext* ctx, const std::string& saved) {
  const TensorDesc& dy = ctx->Input("dy");
  const TensorDesc& other = ctx->Input(saved);
  if (dy != other) {
    return ctx->Error("dy and ", saved, " must match: ", Describe("dy", dy), " vs ",
                      Describe(saved, other));
  }
  *ctx->Output("dx") = dy;
  return Status::OK();
}

// Every gradient op is linear in dy.
Status ActivationGradSbp(SbpContext* ctx) {
  AddAllSplitSignatures(ctx, SbpInput(*ctx, "dy").shape.rank());
  AddPartialSignature(ctx, {"dy"});
  return Status::OK();
}

// dx = <type>_grad(dy, <saved>), where saved is the forward "y" or "x".
GradFn MakeActivationGrad(const std::string& grad_type, const std::string& saved) {
  return [grad_type, saved](GradContext* ctx) -> Status {
    const std::string dy = ctx->OutputGradLbn("y");
    if (dy.empty() || !ctx->NeedsInputGrad("x")) return Status::OK();
    const std::string& saved_lbn = saved == "y" ? ctx->OutputLbn("y") : ctx->InputLbn("x");
    ASSIGN_OR_RETURN(std::string dx, AddGradOp(ctx,
                                               OpConfBuilder(grad_type, GradOpName(*ctx, "grad"))
                                                   .Input("dy", dy)
                                                   .Input(saved, saved_lbn)
                                                   .Output("dx")
                                                   .Build(),
                                               "dx"));
    ctx->SetInputGrad("x", 0, dx);
    return Status::OK();
  };
}

InferFn GradInfer(const std::string& saved) {
  return [saved](InferContext* ctx) { return InferActivationGrad(ctx, saved); };
}

Status CheckGeluApproximate(const InferContext& ctx) {
  if (!ctx.attrs().Has("approximate")) return Status::OK();
  StatusOr<std::string> value = ctx.attrs().GetString("approximate");
  if (!value.ok() || (*value != "none" && *value != "tanh")) {
    return ctx.Error("attribute 'approximate' must be \"none\" or \"tanh\", got ",
                     value.ok() ? "\"" + *value + "\"" : std::string("a non-string"));
  }
  return Status::OK();
}

Status InferGelu(InferContext* ctx) {
  RETURN_IF_ERROR(CheckGeluApproximate(*ctx));
  return InferActivation(ctx);
}

Status InferGeluGrad(InferContext* ctx) {
  RETURN_IF_ERROR(CheckGeluApproximate(*ctx));
  return InferActivationGrad(ctx, "x");
}

// gelu_grad(dy, x) with the forward op's `approximate`.
Status GeluGradRule(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("y");
  if (dy.empty() || !ctx->NeedsInputGrad("x")) return Status::OK();
  OpConfBuilder grad("gelu_grad", GradOpName(*ctx, "grad"));
  grad.Input("dy", dy).Input("x", ctx->InputLbn("x")).Output("dx");
  // The attribute only when the forward op has one: erf-form jobs keep
  // their bytes (api/job_golden_test.cc).
  if (ctx->attrs().Has("approximate")) {
    grad.Attr("approximate", ctx->attrs().GetStringOr("approximate", "none"));
  }
  ASSIGN_OR_RETURN(std::string dx, AddGradOp(ctx, grad.Build(), "dx"));
  ctx->SetInputGrad("x", 0, dx);
  return Status::OK();
}

REGISTER_OP("relu")
    .Input("x")
    .Output("y")
    .Infer(InferActivation)
    .Sbp(ActivationSbp)
    .Grad(MakeActivationGrad("relu_grad", "y"));
REGISTER_OP("sigmoid")
    .Input("x")
    .Output("y")
    .Infer(InferActivation)
    .Sbp(ActivationSbp)
    .Grad(MakeActivationGrad("sigmoid_grad", "y"));
REGISTER_OP("tanh")
    .Input("x")
    .Output("y")
    .Infer(InferActivation)
    .Sbp(ActivationSbp)
    .Grad(MakeActivationGrad("tanh_grad", "y"));
REGISTER_OP("gelu")
    .Input("x")
    .Output("y")
    .Infer(InferGelu)
    .Sbp(ActivationSbp)
    .Grad(GeluGradRule);

REGISTER_OP("relu_grad")
    .Input("dy")
    .Input("y")
    .Output("dx")
    .Infer(GradInfer("y"))
    .Sbp(ActivationGradSbp);
REGISTER_OP("sigmoid_grad")
    .Input("dy")
    .Input("y")
    .Output("dx")
    .Infer(GradInfer("y"))
    .Sbp(ActivationGradSbp);
REGISTER_OP("tanh_grad")
    .Input("dy")
    .Input("y")
    .Output("dx")
    .Infer(GradInfer("y"))
    .Sbp(ActivationGradSbp);
REGISTER_OP("gelu_grad")
    .Input("dy")
    .Input("x")
    .Output("dx")
    .Infer(InferGeluGrad)
    .Sbp(ActivationGradSbp);

}  // namespace
}  // namespace math
}  // namespace oflite
