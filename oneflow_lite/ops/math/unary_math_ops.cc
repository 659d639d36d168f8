// Elementwise unary math: exp, log, sqrt, rsqrt, abs, neg, clamp,
// leaky_relu, silu, and the gradient ops that need the forward input
// (abs_grad, clamp_grad, leaky_relu_grad, silu_grad). Semantics, NaN and
// boundary rules are in docs/ops.md ("unary math").
//
// Gradient rules reuse existing ops where the derivative is a product of
// tensors already in the graph: exp -> mul(dy, y); log -> div(dy, x);
// sqrt -> scalar_mul(div(dy, y), 0.5); rsqrt -> scalar_mul(div(mul(dy, y), x),
// -0.5); neg -> neg(dy). The others have a `*_grad(dy, x) -> dx` op.
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {
namespace {

bool IsFloat(DataType t) { return t == DT_FLOAT || t == DT_DOUBLE; }

Status InferFloatUnary(InferContext* ctx) {
  const TensorDesc& x = ctx->Input("x");
  if (!IsFloat(x.dtype)) return ctx->Error("needs a float32/float64 input, got ", Describe("x", x));
  *ctx->Output("y") = x;
  return Status::OK();
}

// clamp: at least one of min/max, min <= max when both are given.
Status InferClamp(InferContext* ctx) {
  RETURN_IF_ERROR(
      CheckOptionalAttrTypes(ctx->op(), {{"min", AttrValue::kF}, {"max", AttrValue::kF}}));
  const bool has_min = ctx->attrs().Has("min"), has_max = ctx->attrs().Has("max");
  if (!has_min && !has_max) return ctx->Error("needs a float attribute 'min' or 'max' (or both)");
  if (has_min && has_max && ctx->attrs().GetFloatOr("min", 0) > ctx->attrs().GetFloatOr("max", 0)) {
    return ctx->Error("min ", ctx->attrs().GetFloatOr("min", 0), " > max ",
                      ctx->attrs().GetFloatOr("max", 0));
  }
  return InferFloatUnary(ctx);
}

Status InferLeakyRelu(InferContext* ctx) {
  RETURN_IF_ERROR(CheckOptionalAttrTypes(ctx->op(), {{"alpha", AttrValue::kF}}));
  return InferFloatUnary(ctx);
}

Status InferUnaryGrad(InferContext* ctx) {
  const TensorDesc& dy = ctx->Input("dy");
  const TensorDesc& x = ctx->Input("x");
  if (dy != x) {
    return ctx->Error("dy and x must match: ", Describe("dy", dy), " vs ", Describe("x", x));
  }
  if (!IsFloat(x.dtype)) return ctx->Error("needs float32/float64, got ", Describe("x", x));
  *ctx->Output("dx") = dy;
  return Status::OK();
}

Status SplitSbp(SbpContext* ctx) {
  AddAllSplitSignatures(ctx, SbpInput(*ctx, "x").shape.rank());
  return Status::OK();
}

// neg is linear: a partial sum stays one.
Status LinearSbp(SbpContext* ctx) {
  AddAllSplitSignatures(ctx, SbpInput(*ctx, "x").shape.rank());
  AddPartialSignature(ctx, {"x"});
  return Status::OK();
}

// Every *_grad op is linear in dy.
Status UnaryGradSbp(SbpContext* ctx) {
  AddAllSplitSignatures(ctx, SbpInput(*ctx, "dy").shape.rank());
  AddPartialSignature(ctx, {"dy"});
  return Status::OK();
}

// The gradient of x, or "" when none is needed.
std::string NeededDy(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("y");
  return ctx->NeedsInputGrad("x") ? dy : std::string();
}

Status ExpGrad(GradContext* ctx) {
  const std::string dy = NeededDy(ctx);
  if (dy.empty()) return Status::OK();
  ASSIGN_OR_RETURN(std::string g, AddBinaryGradOp(ctx, "mul", dy, ctx->OutputLbn("y"), "grad"));
  ctx->SetInputGrad("x", 0, g);
  return Status::OK();
}

Status LogGrad(GradContext* ctx) {
  const std::string dy = NeededDy(ctx);
  if (dy.empty()) return Status::OK();
  ASSIGN_OR_RETURN(std::string g, AddBinaryGradOp(ctx, "div", dy, ctx->InputLbn("x"), "grad"));
  ctx->SetInputGrad("x", 0, g);
  return Status::OK();
}

// d sqrt(x) = 0.5 / sqrt(x).
Status SqrtGrad(GradContext* ctx) {
  const std::string dy = NeededDy(ctx);
  if (dy.empty()) return Status::OK();
  ASSIGN_OR_RETURN(std::string q, AddBinaryGradOp(ctx, "div", dy, ctx->OutputLbn("y"), "grad_div"));
  ASSIGN_OR_RETURN(std::string g, AddScalarMulGradOp(ctx, q, 0.5, "grad"));
  ctx->SetInputGrad("x", 0, g);
  return Status::OK();
}

// d x^(-1/2) = -0.5 x^(-3/2) = -0.5 * y / x.
Status RsqrtGrad(GradContext* ctx) {
  const std::string dy = NeededDy(ctx);
  if (dy.empty()) return Status::OK();
  ASSIGN_OR_RETURN(std::string t, AddBinaryGradOp(ctx, "mul", dy, ctx->OutputLbn("y"), "grad_mul"));
  ASSIGN_OR_RETURN(std::string q, AddBinaryGradOp(ctx, "div", t, ctx->InputLbn("x"), "grad_div"));
  ASSIGN_OR_RETURN(std::string g, AddScalarMulGradOp(ctx, q, -0.5, "grad"));
  ctx->SetInputGrad("x", 0, g);
  return Status::OK();
}

Status NegGrad(GradContext* ctx) {
  const std::string dy = NeededDy(ctx);
  if (dy.empty()) return Status::OK();
  ASSIGN_OR_RETURN(
      std::string g,
      AddGradOp(ctx,
                OpConfBuilder("neg", GradOpName(*ctx, "grad")).Input("x", dy).Output("y").Build(),
                "y"));
  ctx->SetInputGrad("x", 0, g);
  return Status::OK();
}

// dx = <grad_type>(dy, x) with the forward op's attributes copied over.
GradFn XGrad(const std::string& grad_type) {
  return [grad_type](GradContext* ctx) -> Status {
    const std::string dy = NeededDy(ctx);
    if (dy.empty()) return Status::OK();
    OpConf op = OpConfBuilder(grad_type, GradOpName(*ctx, "grad"))
                    .Input("dy", dy)
                    .Input("x", ctx->InputLbn("x"))
                    .Output("dx")
                    .Build();
    *op.mutable_attr() = ctx->op().attr();
    ASSIGN_OR_RETURN(std::string g, AddGradOp(ctx, op, "dx"));
    ctx->SetInputGrad("x", 0, g);
    return Status::OK();
  };
}

#define OFLITE_UNARY_OP(type, infer, sbp, grad) \
  REGISTER_OP(type).Input("x").Output("y").Infer(infer).Sbp(sbp).Grad(grad)
#define OFLITE_UNARY_GRAD_OP(type) \
  REGISTER_OP(type).Input("dy").Input("x").Output("dx").Infer(InferUnaryGrad).Sbp(UnaryGradSbp)

OFLITE_UNARY_OP("exp", InferFloatUnary, SplitSbp, ExpGrad);
OFLITE_UNARY_OP("log", InferFloatUnary, SplitSbp, LogGrad);
OFLITE_UNARY_OP("sqrt", InferFloatUnary, SplitSbp, SqrtGrad);
OFLITE_UNARY_OP("rsqrt", InferFloatUnary, SplitSbp, RsqrtGrad);
OFLITE_UNARY_OP("abs", InferFloatUnary, SplitSbp, XGrad("abs_grad"));
OFLITE_UNARY_OP("neg", InferFloatUnary, LinearSbp, NegGrad);
OFLITE_UNARY_OP("clamp", InferClamp, SplitSbp, XGrad("clamp_grad"));
OFLITE_UNARY_OP("leaky_relu", InferLeakyRelu, SplitSbp, XGrad("leaky_relu_grad"));
OFLITE_UNARY_OP("silu", InferFloatUnary, SplitSbp, XGrad("silu_grad"));
OFLITE_UNARY_GRAD_OP("abs_grad");
OFLITE_UNARY_GRAD_OP("clamp_grad");
OFLITE_UNARY_GRAD_OP("leaky_relu_grad");
OFLITE_UNARY_GRAD_OP("silu_grad");

}  // namespace
}  // namespace math
}  // namespace oflite
