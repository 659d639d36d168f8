// Selecting elementwise ops with numpy broadcasting: maximum, minimum
// (x, y -> out), where (condition, x, y -> out) and maximum_grad /
// minimum_grad (dz, x, y -> dx).
//
// maximum/minimum propagate NaN (either operand NaN -> NaN). Their gradient
// goes to the selected operand; on a tie (x == y) each operand gets half, and
// a NaN operand gets the whole gradient (both, when both are NaN). The grad
// op computes the gradient of its `x`; the rule gets y's by swapping x and y.
// where: condition (bool, uint8, int32 or int64; nonzero = true) picks x,
// else y; gradients are where(condition, dz, 0) and where(condition, 0, dz),
// summed back to each operand's shape.
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {
namespace {

bool IsFloat(DataType t) { return t == DT_FLOAT || t == DT_DOUBLE; }
bool IsCondition(DataType t) {
  return t == DT_BOOL || t == DT_UINT8 || t == DT_INT32 || t == DT_INT64;
}

// The broadcast shape of every listed input.
StatusOr<Shape> BroadcastAll(const InferContext& ctx, const std::vector<std::string>& args) {
  Shape out = ctx.Input(args[0]).shape;
  for (size_t i = 1; i < args.size(); ++i) {
    Shape next;
    if (!BroadcastShapes(out, ctx.Input(args[i]).shape, &next)) {
      std::string text;
      for (const std::string& arg : args) text += " " + Describe(arg, ctx.Input(arg));
      return ctx.Error("shapes do not broadcast:", text);
    }
    out = next;
  }
  return out;
}

Status CheckMinMaxOperands(const InferContext& ctx) {
  const TensorDesc& x = ctx.Input("x");
  const TensorDesc& y = ctx.Input("y");
  if (x.dtype != y.dtype || !IsFloat(x.dtype)) {
    return ctx.Error("needs float32/float64 x and y of one dtype: ", Describe("x", x), " and ",
                     Describe("y", y));
  }
  return Status::OK();
}

Status InferMinMax(InferContext* ctx) {
  RETURN_IF_ERROR(CheckMinMaxOperands(*ctx));
  ASSIGN_OR_RETURN(Shape out, BroadcastAll(*ctx, {"x", "y"}));
  *ctx->Output("out") = TensorDesc(out, ctx->Input("x").dtype);
  return Status::OK();
}

Status InferMinMaxGrad(InferContext* ctx) {
  RETURN_IF_ERROR(CheckMinMaxOperands(*ctx));
  ASSIGN_OR_RETURN(Shape out, BroadcastAll(*ctx, {"x", "y"}));
  const TensorDesc& dz = ctx->Input("dz");
  if (dz != TensorDesc(out, ctx->Input("x").dtype)) {
    return ctx->Error("dz must have the broadcast shape ", out, " of x and y, got ",
                      Describe("dz", dz));
  }
  *ctx->Output("dx") = dz;
  return Status::OK();
}

Status InferWhere(InferContext* ctx) {
  const TensorDesc& c = ctx->Input("condition");
  const TensorDesc& x = ctx->Input("x");
  const TensorDesc& y = ctx->Input("y");
  if (!IsCondition(c.dtype)) {
    return ctx->Error("condition must be bool, uint8, int32 or int64, got ",
                      Describe("condition", c));
  }
  if (x.dtype != y.dtype || !(IsFloat(x.dtype) || x.dtype == DT_INT32 || x.dtype == DT_INT64)) {
    return ctx->Error("needs x and y of one dtype (float32/float64/int32/int64): ",
                      Describe("x", x), " and ", Describe("y", y));
  }
  ASSIGN_OR_RETURN(Shape out, BroadcastAll(*ctx, {"condition", "x", "y"}));
  *ctx->Output("out") = TensorDesc(out, x.dtype);
  return Status::OK();
}

Status MinMaxSbp(SbpContext* ctx) {
  AddBroadcastSplits(ctx, {"x", "y"}, "out");
  return Status::OK();
}

// dz's shape is the output's, so dz is always split with it.
Status MinMaxGradSbp(SbpContext* ctx) {
  AddBroadcastSplits(ctx, {"dz", "x", "y"}, "dx");
  AddPartialSignature(ctx, {"dz"});
  return Status::OK();
}

// where is linear in (x, y) together for a fixed condition.
Status WhereSbp(SbpContext* ctx) {
  AddBroadcastSplits(ctx, {"condition", "x", "y"}, "out");
  AddPartialSignature(ctx, {"x", "y"});
  return Status::OK();
}

Status SetReduced(GradContext* ctx, const std::string& arg, const std::string& grad) {
  ASSIGN_OR_RETURN(std::string reduced,
                   SumToInputShape(ctx, grad, ctx->OutputDesc("out").shape, arg));
  ctx->SetInputGrad(arg, 0, reduced);
  return Status::OK();
}

GradFn MinMaxGrad(const std::string& grad_type) {
  return [grad_type](GradContext* ctx) -> Status {
    const std::string dz = ctx->OutputGradLbn("out");
    if (dz.empty()) return Status::OK();
    for (const auto& [self, other] : {std::pair<std::string, std::string>{"x", "y"}, {"y", "x"}}) {
      if (!ctx->NeedsInputGrad(self)) continue;
      ASSIGN_OR_RETURN(std::string g,
                       AddGradOp(ctx,
                                 OpConfBuilder(grad_type, GradOpName(*ctx, "grad_" + self))
                                     .Input("dz", dz)
                                     .Input("x", ctx->InputLbn(self))
                                     .Input("y", ctx->InputLbn(other))
                                     .Output("dx")
                                     .Build(),
                                 "dx"));
      RETURN_IF_ERROR(SetReduced(ctx, self, g));
    }
    return Status::OK();
  };
}

Status WhereGrad(GradContext* ctx) {
  const std::string dz = ctx->OutputGradLbn("out");
  if (dz.empty() || !IsFloat(ctx->InputDesc("x").dtype)) return Status::OK();
  if (!ctx->NeedsInputGrad("x") && !ctx->NeedsInputGrad("y")) return Status::OK();
  ASSIGN_OR_RETURN(std::string zeros,
                   AddGradOp(ctx,
                             OpConfBuilder("zeros_like", GradOpName(*ctx, "grad_zeros"))
                                 .Input("like", dz)
                                 .Output("out")
                                 .Build(),
                             "out"));
  for (const std::string arg : {"x", "y"}) {
    if (!ctx->NeedsInputGrad(arg)) continue;
    ASSIGN_OR_RETURN(std::string g,
                     AddGradOp(ctx,
                               OpConfBuilder("where", GradOpName(*ctx, "grad_" + arg))
                                   .Input("condition", ctx->InputLbn("condition"))
                                   .Input("x", arg == "x" ? dz : zeros)
                                   .Input("y", arg == "x" ? zeros : dz)
                                   .Output("out")
                                   .Build(),
                               "out"));
    RETURN_IF_ERROR(SetReduced(ctx, arg, g));
  }
  return Status::OK();
}

REGISTER_OP("maximum")
    .Input("x")
    .Input("y")
    .Output("out")
    .Infer(InferMinMax)
    .Sbp(MinMaxSbp)
    .Grad(MinMaxGrad("maximum_grad"));
REGISTER_OP("minimum")
    .Input("x")
    .Input("y")
    .Output("out")
    .Infer(InferMinMax)
    .Sbp(MinMaxSbp)
    .Grad(MinMaxGrad("minimum_grad"));
REGISTER_OP("maximum_grad")
    .Input("dz")
    .Input("x")
    .Input("y")
    .Output("dx")
    .Infer(InferMinMaxGrad)
    .Sbp(MinMaxGradSbp);
REGISTER_OP("minimum_grad")
    .Input("dz")
    .Input("x")
    .Input("y")
    .Output("dx")
    .Infer(InferMinMaxGrad)
    .Sbp(MinMaxGradSbp);
REGISTER_OP("where")
    .Input("condition")
    .Input("x")
    .Input("y")
    .Output("out")
    .Infer(InferWhere)
    .Sbp(WhereSbp)
    .Grad(WhereGrad);

}  // namespace
}  // namespace math
}  // namespace oflite
