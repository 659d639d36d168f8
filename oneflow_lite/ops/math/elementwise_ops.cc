// Elementwise arithmetic: add (add_n), broadcast_add/sub/mul/div with numpy
// broadcasting, scalar_add/scalar_mul/scalar_pow, identity, zeros_like and
// cast.
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {
namespace {

bool IsFloatingType(DataType t) { return t == DT_FLOAT || t == DT_DOUBLE; }

// ---- add (variadic, same shapes) ----

Status InferAdd(InferContext* ctx) {
  const TensorDesc& first = ctx->Input("in", 0);
  for (int i = 1; i < ctx->InputCount("in"); ++i) {
    const TensorDesc& other = ctx->Input("in", i);
    if (other.shape != first.shape || other.dtype != first.dtype) {
      return ctx->Error("add needs equal shapes and dtypes: ", Describe("in[0]", first), " vs ",
                        Describe("in[" + std::to_string(i) + "]", other));
    }
  }
  *ctx->Output("out") = first;
  return Status::OK();
}

Status AddSbp(SbpContext* ctx) {
  AddAllSplitSignatures(ctx, SbpInput(*ctx, "in").shape.rank());
  AddPartialSignature(ctx, {"in"});
  return Status::OK();
}

Status AddGrad(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("out");
  if (dy.empty()) return Status::OK();
  for (int i = 0; i < ctx->InputCount("in"); ++i) {
    if (ctx->NeedsInputGrad("in", i)) ctx->SetInputGrad("in", i, dy);
  }
  return Status::OK();
}

// ---- broadcast_add / sub / mul / div (broadcasting) ----

Status InferBroadcastBinary(InferContext* ctx) {
  const TensorDesc& x = ctx->Input("x");
  const TensorDesc& y = ctx->Input("y");
  if (x.dtype != y.dtype) {
    return ctx->Error("dtype mismatch: ", Describe("x", x), " and ", Describe("y", y));
  }
  Shape out;
  if (!BroadcastShapes(x.shape, y.shape, &out)) {
    return ctx->Error("shapes do not broadcast: ", Describe("x", x), " and ", Describe("y", y));
  }
  *ctx->Output("out") = TensorDesc(out, x.dtype);
  return Status::OK();
}

// S(i) of the output takes S on each operand that has the full axis i and B
// on an operand that is broadcast along it.
void AddBroadcastSplitSignatures(SbpContext* ctx) {
  const Shape& x = SbpInput(*ctx, "x").shape;
  const Shape& y = SbpInput(*ctx, "y").shape;
  const Shape& out = SbpOutput(*ctx, "out").shape;
  auto operand_sbp = [&](const Shape& s, int64_t i, bool* split) {
    const int64_t axis = i - (out.rank() - s.rank());
    if (axis >= 0 && s.dim(axis) == out.dim(i)) {
      *split = true;
      return SplitSbp(axis);
    }
    return BroadcastSbp();
  };
  for (int64_t i = 0; i < out.rank(); ++i) {
    bool split = false;
    SbpParallel xs = operand_sbp(x, i, &split);
    SbpParallel ys = operand_sbp(y, i, &split);
    if (!split) continue;
    ctx->Add(MakeSignature(ctx->op(), {{"x", xs}, {"y", ys}}, {{"out", SplitSbp(i)}}));
  }
}

// broadcast_add and sub are linear in (x, y) together: P, P -> P.
Status SubSbp(SbpContext* ctx) {
  AddBroadcastSplitSignatures(ctx);
  AddPartialSignature(ctx, {"x", "y"});
  return Status::OK();
}

Status MulSbp(SbpContext* ctx) {
  AddBroadcastSplitSignatures(ctx);
  AddPartialSignature(ctx, {"x"});
  AddPartialSignature(ctx, {"y"});
  return Status::OK();
}

Status DivSbp(SbpContext* ctx) {
  AddBroadcastSplitSignatures(ctx);
  AddPartialSignature(ctx, {"x"});
  return Status::OK();
}

// Sets input `arg`'s gradient to `grad` (output-shaped) summed to its shape.
Status SetReducedGrad(GradContext* ctx, const std::string& arg, const std::string& grad) {
  ASSIGN_OR_RETURN(std::string reduced,
                   SumToInputShape(ctx, grad, ctx->OutputDesc("out").shape, arg));
  ctx->SetInputGrad(arg, 0, reduced);
  return Status::OK();
}

// Each operand gets dy summed back to its own shape.
Status BroadcastAddGrad(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("out");
  if (dy.empty()) return Status::OK();
  if (ctx->NeedsInputGrad("x")) RETURN_IF_ERROR(SetReducedGrad(ctx, "x", dy));
  if (ctx->NeedsInputGrad("y")) RETURN_IF_ERROR(SetReducedGrad(ctx, "y", dy));
  return Status::OK();
}

Status SubGrad(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("out");
  if (dy.empty()) return Status::OK();
  if (ctx->NeedsInputGrad("x")) RETURN_IF_ERROR(SetReducedGrad(ctx, "x", dy));
  if (ctx->NeedsInputGrad("y")) {
    ASSIGN_OR_RETURN(std::string neg, AddScalarMulGradOp(ctx, dy, -1.0, "grad_y_neg"));
    RETURN_IF_ERROR(SetReducedGrad(ctx, "y", neg));
  }
  return Status::OK();
}

Status MulGrad(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("out");
  if (dy.empty()) return Status::OK();
  if (ctx->NeedsInputGrad("x")) {
    ASSIGN_OR_RETURN(std::string g, AddBinaryGradOp(ctx, "mul", dy, ctx->InputLbn("y"), "grad_x"));
    RETURN_IF_ERROR(SetReducedGrad(ctx, "x", g));
  }
  if (ctx->NeedsInputGrad("y")) {
    ASSIGN_OR_RETURN(std::string g, AddBinaryGradOp(ctx, "mul", dy, ctx->InputLbn("x"), "grad_y"));
    RETURN_IF_ERROR(SetReducedGrad(ctx, "y", g));
  }
  return Status::OK();
}

// out = x / y: dx = dy / y, dy_y = -dy * out / y.
Status DivGrad(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("out");
  if (dy.empty()) return Status::OK();
  const std::string& y = ctx->InputLbn("y");
  if (ctx->NeedsInputGrad("x")) {
    ASSIGN_OR_RETURN(std::string g, AddBinaryGradOp(ctx, "div", dy, y, "grad_x"));
    RETURN_IF_ERROR(SetReducedGrad(ctx, "x", g));
  }
  if (ctx->NeedsInputGrad("y")) {
    ASSIGN_OR_RETURN(std::string t,
                     AddBinaryGradOp(ctx, "mul", dy, ctx->OutputLbn("out"), "grad_y_mul"));
    ASSIGN_OR_RETURN(std::string q, AddBinaryGradOp(ctx, "div", t, y, "grad_y_div"));
    ASSIGN_OR_RETURN(std::string g, AddScalarMulGradOp(ctx, q, -1.0, "grad_y_neg"));
    RETURN_IF_ERROR(SetReducedGrad(ctx, "y", g));
  }
  return Status::OK();
}

// ---- unary: scalar ops, identity, zeros_like, cast ----

Status InferSameAsIn(InferContext* ctx) {
  *ctx->Output("out") = ctx->Input("in");
  return Status::OK();
}

Status SplitSbpOfIn(SbpContext* ctx) {
  AddAllSplitSignatures(ctx, SbpInput(*ctx, "in").shape.rank());
  return Status::OK();
}

Status LinearUnarySbp(SbpContext* ctx) {
  AddAllSplitSignatures(ctx, SbpInput(*ctx, "in").shape.rank());
  AddPartialSignature(ctx, {"in"});
  return Status::OK();
}

Status PassThroughGrad(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("out");
  if (!dy.empty() && ctx->NeedsInputGrad("in")) ctx->SetInputGrad("in", 0, dy);
  return Status::OK();
}

Status ScalarMulGrad(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("out");
  if (dy.empty() || !ctx->NeedsInputGrad("in")) return Status::OK();
  ASSIGN_OR_RETURN(std::string g,
                   AddScalarMulGradOp(ctx, dy, ctx->attrs().GetFloatOr("value", 0.0), "grad"));
  ctx->SetInputGrad("in", 0, g);
  return Status::OK();
}

// d(x^p) = p * x^(p-1).
Status ScalarPowGrad(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("out");
  if (dy.empty() || !ctx->NeedsInputGrad("in")) return Status::OK();
  const double exponent = ctx->attrs().GetFloatOr("exponent", 1.0);
  ASSIGN_OR_RETURN(std::string pow,
                   AddGradOp(ctx,
                             OpConfBuilder("scalar_pow", GradOpName(*ctx, "grad_pow"))
                                 .Input("in", ctx->InputLbn("in"))
                                 .Output("out")
                                 .Attr("exponent", exponent - 1.0)
                                 .Build(),
                             "out"));
  ASSIGN_OR_RETURN(std::string scaled, AddScalarMulGradOp(ctx, pow, exponent, "grad_scale"));
  ASSIGN_OR_RETURN(std::string g, AddBinaryGradOp(ctx, "mul", dy, scaled, "grad"));
  ctx->SetInputGrad("in", 0, g);
  return Status::OK();
}

Status InferScalar(InferContext* ctx, const char* key) {
  if (!ctx->attrs().Has(key)) return ctx->Error("missing float attribute '", key, "'");
  RETURN_IF_ERROR(ctx->attrs().GetFloat(key).status());
  const TensorDesc& in = ctx->Input("in");
  if (!IsFloatingType(in.dtype)) {
    return ctx->Error("needs a float32/float64 input, got ", Describe("in", in));
  }
  *ctx->Output("out") = in;
  return Status::OK();
}

Status InferZerosLike(InferContext* ctx) {
  *ctx->Output("out") = ctx->Input("like");
  return Status::OK();
}

Status ZerosLikeSbp(SbpContext* ctx) {
  AddAllSplitSignatures(ctx, SbpInput(*ctx, "like").shape.rank());
  AddPartialSignature(ctx, {"like"});
  return Status::OK();
}

Status ZerosLikeGrad(GradContext* ctx) { return SetZeroGrads(ctx, "like"); }

// `constant`: a tensor of attr `shape` whose every element is attr `value`,
// in attr `dtype` (default float32). It reads nothing, so it runs as soon as
// its output register is free: autodiff seeds a loss's gradient with it, so
// that the backward does not wait for the loss itself (in a data-parallel
// plan that would wait for the gather of every rank's per-sample losses).
Status InferConstant(InferContext* ctx) {
  ASSIGN_OR_RETURN(Shape shape, ctx->attrs().GetShape("shape"));
  for (int64_t d : shape.dims()) {
    if (d < 0) return ctx->Error("shape ", shape, " has a negative dimension");
  }
  if (!ctx->attrs().Has("value")) return ctx->Error("missing float attribute 'value'");
  RETURN_IF_ERROR(ctx->attrs().GetFloat("value").status());
  DataType dtype = DT_FLOAT;
  if (ctx->attrs().Has("dtype")) {
    ASSIGN_OR_RETURN(dtype, ctx->attrs().GetDataType("dtype"));
  }
  if (!IsFloatingType(dtype)) {
    return ctx->Error("dtype must be float32 or float64, got ", DataTypeName(dtype));
  }
  *ctx->Output("out") = TensorDesc(shape, dtype);
  return Status::OK();
}

Status InferCast(InferContext* ctx) {
  ASSIGN_OR_RETURN(DataType dtype, ctx->attrs().GetDataType("dtype"));
  const TensorDesc& in = ctx->Input("in");
  if (SizeOf(dtype) == 0) return ctx->Error("invalid target dtype for ", Describe("in", in));
  *ctx->Output("out") = TensorDesc(in.shape, dtype, in.is_dynamic);
  return Status::OK();
}

// A partial sum stays one under a cast between float types (up to rounding);
// integer casts truncate, so only splits are offered for them.
Status CastSbp(SbpContext* ctx) {
  const TensorDesc& in = SbpInput(*ctx, "in");
  AddAllSplitSignatures(ctx, in.shape.rank());
  if (IsFloatingType(in.dtype) && IsFloatingType(SbpOutput(*ctx, "out").dtype)) {
    AddPartialSignature(ctx, {"in"});
  }
  return Status::OK();
}

Status CastGrad(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("out");
  const DataType in_type = ctx->InputDesc("in").dtype;
  if (dy.empty() || !ctx->NeedsInputGrad("in") || !IsFloatingType(in_type)) return Status::OK();
  ASSIGN_OR_RETURN(std::string g, AddGradOp(ctx,
                                            OpConfBuilder("cast", GradOpName(*ctx, "grad"))
                                                .Input("in", dy)
                                                .Output("out")
                                                .Attr("dtype", in_type)
                                                .Build(),
                                            "out"));
  ctx->SetInputGrad("in", 0, g);
  return Status::OK();
}

REGISTER_OP("add").VariadicInput("in").Output("out").Infer(InferAdd).Sbp(AddSbp).Grad(AddGrad);
REGISTER_OP("broadcast_add")
    .Input("x")
    .Input("y")
    .Output("out")
    .Infer(InferBroadcastBinary)
    .Sbp(SubSbp)
    .Grad(BroadcastAddGrad);
REGISTER_OP("sub")
    .Input("x")
    .Input("y")
    .Output("out")
    .Infer(InferBroadcastBinary)
    .Sbp(SubSbp)
    .Grad(SubGrad);
REGISTER_OP("mul")
    .Input("x")
    .Input("y")
    .Output("out")
    .Infer(InferBroadcastBinary)
    .Sbp(MulSbp)
    .Grad(MulGrad);
REGISTER_OP("div")
    .Input("x")
    .Input("y")
    .Output("out")
    .Infer(InferBroadcastBinary)
    .Sbp(DivSbp)
    .Grad(DivGrad);
REGISTER_OP("scalar_add")
    .Input("in")
    .Output("out")
    .Infer([](InferContext* ctx) { return InferScalar(ctx, "value"); })
    .Sbp(SplitSbpOfIn)
    .Grad(PassThroughGrad);
REGISTER_OP("scalar_mul")
    .Input("in")
    .Output("out")
    .Infer([](InferContext* ctx) { return InferScalar(ctx, "value"); })
    .Sbp(LinearUnarySbp)
    .Grad(ScalarMulGrad);
REGISTER_OP("scalar_pow")
    .Input("in")
    .Output("out")
    .Infer([](InferContext* ctx) { return InferScalar(ctx, "exponent"); })
    .Sbp(SplitSbpOfIn)
    .Grad(ScalarPowGrad);
REGISTER_OP("identity")
    .Input("in")
    .Output("out")
    .Infer(InferSameAsIn)
    .Sbp(LinearUnarySbp)
    .Grad(PassThroughGrad);
REGISTER_OP("zeros_like")
    .Input("like")
    .Output("out")
    .Infer(InferZerosLike)
    .Sbp(ZerosLikeSbp)
    .Grad(ZerosLikeGrad);
// Every element is the same, so a split holds what B would.
REGISTER_OP("constant").Output("out").Infer(InferConstant).Sbp(SplitOutputAlongLongAxes);
REGISTER_OP("cast").Input("in").Output("out").Infer(InferCast).Sbp(CastSbp).Grad(CastGrad);

}  // namespace
}  // namespace math
}  // namespace oflite
