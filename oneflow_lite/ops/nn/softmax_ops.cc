// softmax, log_softmax, their grads, and sparse_softmax_cross_entropy.
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

// ---- sparse_softmax_cross_entropy ----

Status CheckPredictionAndLabel(const InferContext& ctx, const std::string& prediction_arg) {
  RETURN_IF_ERROR(CheckFloating(ctx, prediction_arg));
  const TensorDesc& prediction = ctx.Input(prediction_arg);
  const TensorDesc& label = ctx.Input("label");
  if (prediction.shape.rank() != 2) {
    return ctx.Error(prediction_arg, " must be 2-D [N, C], got ", prediction.shape.ToString());
  }
  if (prediction.shape.dim(1) == 0) {
    return ctx.Error(prediction_arg, " has no classes: ", prediction.shape.ToString());
  }
  if (!IsIndex(label.dtype)) {
    return ctx.Error("label must be int32 or int64, got ", label.ToString());
  }
  if (label.shape.rank() != 1 || label.shape.dim(0) != prediction.shape.dim(0)) {
    return ctx.Error("label must be [N] for ", prediction_arg, " [N, C]: ",
                     ShapePair(prediction_arg, prediction.shape, "label", label.shape));
  }
  return Status::OK();
}

Status InferXent(InferContext* ctx) {
  RETURN_IF_ERROR(CheckPredictionAndLabel(*ctx, "prediction"));
  const TensorDesc& prediction = ctx->Input("prediction");
  *ctx->Output("prob") = prediction;
  *ctx->Output("out") = TensorDesc(Shape({prediction.shape.dim(0)}), prediction.dtype);
  return Status::OK();
}

Status InferXentGrad(InferContext* ctx) {
  RETURN_IF_ERROR(CheckPredictionAndLabel(*ctx, "prob"));
  const TensorDesc& prob = ctx->Input("prob");
  const TensorDesc& dy = ctx->Input("dy");
  if (dy.dtype != prob.dtype || dy.shape != Shape({prob.shape.dim(0)})) {
    return ctx->Error("dy must be ", DataTypeName(prob.dtype),
                      " [N]: ", ShapePair("dy", dy.shape, "prob", prob.shape));
  }
  if (ctx->InputCount("dprob") > 0) RETURN_IF_ERROR(CheckSameDesc(*ctx, "dprob", "prob"));
  *ctx->Output("dx") = prob;
  return Status::OK();
}

// Every arg split over the batch.
Status BatchSplitSbp(SbpContext* ctx) {
  AddSameSplitSignatures(ctx, {0});
  return Status::OK();
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
    .Sbp(BatchSplitSbp)
    .Grad(XentGradRule);

REGISTER_OP("sparse_softmax_cross_entropy_grad")
    .Input("dy")
    .Input("prob")
    .Input("label")
    .OptionalInput("dprob")
    .Output("dx")
    .Infer(InferXentGrad)
    .Sbp(BatchSplitSbp);

}  // namespace
}  // namespace nn
}  // namespace oflite
