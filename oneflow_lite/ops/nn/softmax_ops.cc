// softmax, log_softmax, causal_softmax, their grads, and
// sparse_softmax_cross_entropy.
#include "oneflow_lite/ops/nn/nn_util.h"
#include "oneflow_lite/ops/nn/op_util.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace nn {
namespace {

bool IsFloating(DataType t) { return t == DT_FLOAT || t == DT_DOUBLE; }
bool IsIndex(DataType t) { return t == DT_INT32 || t == DT_INT64; }

Status CheckFloating(const InferContext& ctx, const std::string& arg) {
  const TensorDesc& d = ctx.Input(arg);
  if (!IsFloating(d.dtype)) {
    return ctx.Error("input '", arg, "' must be float32 or float64, got ", d.ToString());
  }
  return Status::OK();
}

Status CheckSameDesc(const InferContext& ctx, const std::string& a, const std::string& b) {
  const TensorDesc& da = ctx.Input(a);
  const TensorDesc& db = ctx.Input(b);
  if (da.shape != db.shape) {
    return ctx.Error("shape mismatch: ", ShapePair(a, da.shape, b, db.shape));
  }
  if (da.dtype != db.dtype) {
    return ctx.Error("dtype mismatch: ", a, " ", da.ToString(), " vs ", b, " ", db.ToString());
  }
  return Status::OK();
}

StatusOr<int64_t> SoftmaxAxis(const InferContext& ctx, const Shape& shape) {
  if (shape.rank() == 0) return ctx.Error("input must have rank >= 1, got a scalar");
  auto axis = NormalizeAxis(ctx.attrs().GetIntOr("axis", -1), shape.rank());
  if (!axis.ok()) return ctx.Error(axis.status().message());
  return *axis;
}

Status InferSoftmax(InferContext* ctx) {
  RETURN_IF_ERROR(CheckFloating(*ctx, "x"));
  RETURN_IF_ERROR(SoftmaxAxis(*ctx, ctx->Input("x").shape).status());
  *ctx->Output("y") = ctx->Input("x");
  return Status::OK();
}

Status InferSoftmaxGrad(InferContext* ctx) {
  RETURN_IF_ERROR(CheckFloating(*ctx, "dy"));
  RETURN_IF_ERROR(CheckSameDesc(*ctx, "dy", "y"));
  RETURN_IF_ERROR(SoftmaxAxis(*ctx, ctx->Input("y").shape).status());
  *ctx->Output("dx") = ctx->Input("dy");
  return Status::OK();
}

// Split along every axis except the softmax axis.
Status SoftmaxSbp(SbpContext* ctx) {
  const Shape& shape = ctx->inputs().at(0).shape;
  auto axis = NormalizeAxis(ctx->attrs().GetIntOr("axis", -1), shape.rank());
  if (!axis.ok()) return Status::OK();
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < shape.rank(); ++i) {
    if (i != *axis) axes.push_back(i);
  }
  AddSameSplitSignatures(ctx, axes);
  return Status::OK();
}

GradFn SoftmaxGradRule(const std::string& grad_type) {
  return [grad_type](GradContext* ctx) -> Status {
    const std::string dy = ctx->OutputGradLbn("y");
    if (dy.empty() || !ctx->NeedsInputGrad("x")) return Status::OK();
    OpConf op = OpConfBuilder(grad_type, BackwardOpName(*ctx, grad_type))
                    .Input("dy", dy)
                    .Input("y", ctx->OutputLbn("y"))
                    .Output("dx")
                    .Attr("axis", ctx->attrs().GetIntOr("axis", -1))
                    .Build();
    ASSIGN_OR_RETURN(std::string name, ctx->AddOp(AsBackward(*ctx, op)));
    ctx->SetInputGrad("x", 0, OutputLbn(name, "dx"));
    return Status::OK();
  };
}

REGISTER_OP("softmax")
    .Input("x")
    .Output("y")
    .Infer(InferSoftmax)
    .Sbp(SoftmaxSbp)
    .Grad(SoftmaxGradRule("softmax_grad"));
REGISTER_OP("log_softmax")
    .Input("x")
    .Output("y")
    .Infer(InferSoftmax)
    .Sbp(SoftmaxSbp)
    .Grad(SoftmaxGradRule("log_softmax_grad"));
REGISTER_OP("softmax_grad")
    .Input("dy")
    .Input("y")
    .Output("dx")
    .Infer(InferSoftmaxGrad)
    .Sbp(SoftmaxSbp);
REGISTER_OP("log_softmax_grad")
    .Input("dy")
    .Input("y")
    .Output("dx")
    .Infer(InferSoftmaxGrad)
    .Sbp(SoftmaxSbp);

// ---- causal_softmax ----
//
// x [..., Tq, Tk]: softmax over the last axis of scale * x, where query i
// sees key j only when j <= i + (Tk - Tq) (the queries are the last Tq of Tk
// positions). Hidden positions are exactly 0; a query that sees no key (Tq >
// Tk) gets a row of zeros. The mask depends on absolute positions, so only the
// batch axes (all but the last two) may be split.

Status CheckCausalInput(const InferContext& ctx, const std::string& arg) {
  RETURN_IF_ERROR(CheckFloating(ctx, arg));
  const Shape& shape = ctx.Input(arg).shape;
  if (shape.rank() < 2) {
    return ctx.Error(arg, " must have rank >= 2 ([..., queries, keys]), got ", shape.ToString());
  }
  if (ctx.attrs().Has("scale") && !ctx.attrs().GetFloat("scale").ok()) {
    return ctx.Error("attribute 'scale' must be a float");
  }
  return Status::OK();
}

Status InferCausalSoftmax(InferContext* ctx) {
  RETURN_IF_ERROR(CheckCausalInput(*ctx, "x"));
  *ctx->Output("y") = ctx->Input("x");
  return Status::OK();
}

Status InferCausalSoftmaxGrad(InferContext* ctx) {
  RETURN_IF_ERROR(CheckCausalInput(*ctx, "y"));
  RETURN_IF_ERROR(CheckSameDesc(*ctx, "dy", "y"));
  *ctx->Output("dx") = ctx->Input("dy");
  return Status::OK();
}

// S(i) on every arg for each batch axis i < rank - 2.
Status CausalSoftmaxSbp(SbpContext* ctx) {
  const int64_t rank = ctx->inputs().at(0).shape.rank();
  std::vector<int64_t> axes;
  for (int64_t i = 0; i + 2 < rank; ++i) axes.push_back(i);
  AddSameSplitSignatures(ctx, axes);
  return Status::OK();
}

Status CausalSoftmaxGradRule(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("y");
  if (dy.empty() || !ctx->NeedsInputGrad("x")) return Status::OK();
  OpConf op = OpConfBuilder("causal_softmax_grad", BackwardOpName(*ctx, "causal_softmax_grad"))
                  .Input("dy", dy)
                  .Input("y", ctx->OutputLbn("y"))
                  .Output("dx")
                  .Attr("scale", ctx->attrs().GetFloatOr("scale", 1.0))
                  .Build();
  ASSIGN_OR_RETURN(std::string name, ctx->AddOp(AsBackward(*ctx, op)));
  ctx->SetInputGrad("x", 0, OutputLbn(name, "dx"));
  return Status::OK();
}

REGISTER_OP("causal_softmax")
    .Input("x")
    .Output("y")
    .Infer(InferCausalSoftmax)
    .Sbp(CausalSoftmaxSbp)
    .Grad(CausalSoftmaxGradRule);
REGISTER_OP("causal_softmax_grad")
    .Input("dy")
    .Input("y")
    .Output("dx")
    .Infer(InferCausalSoftmaxGrad)
    .Sbp(CausalSoftmaxSbp);

// ---- sparse_softmax_cross_entropy ----

// [..., C] -> [...].
Shape LeadingShape(const Shape& shape) {
  std::vector<int64_t> dims = shape.dims();
  if (!dims.empty()) dims.pop_back();
  return Shape(dims);
}

// prediction [..., C] (C >= 1) and label [...] int32/int64 with the same
// leading dims; a 1-D prediction takes a scalar label.
Status CheckPredictionAndLabel(const InferContext& ctx, const std::string& prediction_arg) {
  RETURN_IF_ERROR(CheckFloating(ctx, prediction_arg));
  const TensorDesc& prediction = ctx.Input(prediction_arg);
  const TensorDesc& label = ctx.Input("label");
  const Shape& shape = prediction.shape;
  if (shape.rank() < 1) {
    return ctx.Error(prediction_arg, " must have rank >= 1 ([..., C]), got a scalar");
  }
  if (shape.dim(shape.rank() - 1) == 0) {
    return ctx.Error(prediction_arg, " has no classes: ", shape.ToString());
  }
  if (!IsIndex(label.dtype)) {
    return ctx.Error("label must be int32 or int64, got ", label.ToString());
  }
  if (label.shape != LeadingShape(shape)) {
    return ctx.Error("label must have ", prediction_arg, "'s leading dims [...] of [..., C]: ",
                     ShapePair(prediction_arg, shape, "label", label.shape));
  }
  return Status::OK();
}

Status InferXent(InferContext* ctx) {
  RETURN_IF_ERROR(CheckPredictionAndLabel(*ctx, "prediction"));
  const TensorDesc& prediction = ctx->Input("prediction");
  *ctx->Output("prob") = prediction;
  *ctx->Output("out") = TensorDesc(LeadingShape(prediction.shape), prediction.dtype);
  return Status::OK();
}

Status InferXentGrad(InferContext* ctx) {
  RETURN_IF_ERROR(CheckPredictionAndLabel(*ctx, "prob"));
  const TensorDesc& prob = ctx->Input("prob");
  const TensorDesc& dy = ctx->Input("dy");
  if (dy.dtype != prob.dtype || dy.shape != LeadingShape(prob.shape)) {
    return ctx->Error("dy must be ", DataTypeName(prob.dtype),
                      " with prob's leading dims [...] of [..., C]: ",
                      ShapePair("dy", dy.shape, "prob", prob.shape));
  }
  if (ctx->InputCount("dprob") > 0) RETURN_IF_ERROR(CheckSameDesc(*ctx, "dprob", "prob"));
  *ctx->Output("dx") = prob;
  return Status::OK();
}

// Every arg split along the same leading axis of `classes_arg` [..., C]
// (never the class axis, which the label does not have).
SbpFn LeadingAxesSplitSbp(const std::string& classes_arg) {
  return [classes_arg](SbpContext* ctx) -> Status {
    const int64_t rank = SbpInputDesc(*ctx, classes_arg).shape.rank();
    std::vector<int64_t> axes;
    for (int64_t i = 0; i + 1 < rank; ++i) axes.push_back(i);
    AddSameSplitSignatures(ctx, axes);
    return Status::OK();
  };
}

// Gradients may flow into both outputs: `out` (the usual loss) and `prob`
// (when the probabilities feed further ops). Both go into one grad op.
Status XentGradRule(GradContext* ctx) {
  const std::string dout = ctx->OutputGradLbn("out");
  const std::string dprob = ctx->OutputGradLbn("prob");
  if (!ctx->NeedsInputGrad("prediction") || (dout.empty() && dprob.empty())) {
    return Status::OK();
  }
  OpConf op;
  if (dout.empty()) {
    op = OpConfBuilder("softmax_grad", BackwardOpName(*ctx, "softmax_grad"))
             .Input("dy", dprob)
             .Input("y", ctx->OutputLbn("prob"))
             .Output("dx")
             .Attr("axis", int64_t{-1})
             .Build();
  } else {
    OpConfBuilder builder("sparse_softmax_cross_entropy_grad",
                          BackwardOpName(*ctx, "sparse_softmax_cross_entropy_grad"));
    builder.Input("dy", dout)
        .Input("prob", ctx->OutputLbn("prob"))
        .Input("label", ctx->InputLbn("label"));
    if (!dprob.empty()) builder.Input("dprob", dprob);
    op = builder.Output("dx").Build();
  }
  ASSIGN_OR_RETURN(std::string name, ctx->AddOp(AsBackward(*ctx, op)));
  ctx->SetInputGrad("prediction", 0, OutputLbn(name, "dx"));
  return Status::OK();
}

REGISTER_OP("sparse_softmax_cross_entropy")
    .Input("prediction")
    .Input("label")
    .Output("prob")
    .Output("out")
    .Infer(InferXent)
    .Sbp(LeadingAxesSplitSbp("prediction"))
    .Grad(XentGradRule);

REGISTER_OP("sparse_softmax_cross_entropy_grad")
    .Input("dy")
    .Input("prob")
    .Input("label")
    .OptionalInput("dprob")
    .Output("dx")
    .Infer(InferXentGrad)
    .Sbp(LeadingAxesSplitSbp("prob"));

}  // namespace
}  // namespace nn
}  // namespace oflite
