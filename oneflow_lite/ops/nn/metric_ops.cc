// argmax and accuracy (not differentiable).
//
// accuracy(prediction [N, C], label [N]) -> out, a scalar of prediction's
// dtype: the fraction of rows whose argmax (first maximum) equals the label;
// 0 for an empty batch. It offers only the all-broadcast signature: over a
// split batch each shard's fraction is not P-summable (the mean needs the
// shard size and the global N, and shards may be uneven), so the compiler
// gathers prediction and label (small: [N, C] and [N]) instead.
#include "oneflow_lite/ops/nn/nn_util.h"
#include "oneflow_lite/ops/nn/op_util.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace nn {
namespace {

bool IsFloating(DataType t) { return t == DT_FLOAT || t == DT_DOUBLE; }

Status InferArgmax(InferContext* ctx) {
  const TensorDesc& x = ctx->Input("x");
  if (!IsFloating(x.dtype)) return ctx->Error("x must be float32 or float64, got ", x.ToString());
  if (x.shape.rank() == 0) return ctx->Error("x must have rank >= 1, got a scalar");
  auto axis = NormalizeAxis(ctx->attrs().GetIntOr("axis", -1), x.shape.rank());
  if (!axis.ok()) return ctx->Error(axis.status().message());
  if (x.shape.dim(*axis) == 0) return ctx->Error("argmax over an empty axis of ", x.ToString());
  std::vector<int64_t> dims = x.shape.dims();
  dims.erase(dims.begin() + *axis);
  *ctx->Output("y") = TensorDesc(Shape(dims), DT_INT32);
  return Status::OK();
}

// S(i) x -> S(i') y for every axis i other than the reduced one (i' is i in
// y's numbering).
Status ArgmaxSbp(SbpContext* ctx) {
  const int64_t rank = ctx->inputs().at(0).shape.rank();
  auto axis = NormalizeAxis(ctx->attrs().GetIntOr("axis", -1), rank);
  if (!axis.ok()) return Status::OK();
  for (int64_t i = 0; i < rank; ++i) {
    if (i == *axis) continue;
    SbpSignature sig;
    sig.inputs = {SplitSbp(i)};
    sig.outputs = {SplitSbp(i < *axis ? i : i - 1)};
    ctx->Add(std::move(sig));
  }
  return Status::OK();
}

Status InferAccuracy(InferContext* ctx) {
  const TensorDesc& prediction = ctx->Input("prediction");
  const TensorDesc& label = ctx->Input("label");
  if (!IsFloating(prediction.dtype) || prediction.shape.rank() != 2) {
    return ctx->Error("prediction must be float32/float64 [N, C], got ", prediction.ToString());
  }
  if (prediction.shape.dim(1) == 0) return ctx->Error("prediction has no classes");
  if (label.dtype != DT_INT32 && label.dtype != DT_INT64) {
    return ctx->Error("label must be int32 or int64, got ", label.ToString());
  }
  if (label.shape != Shape({prediction.shape.dim(0)})) {
    return ctx->Error("label must be [N] for prediction [N, C]: ",
                      ShapePair("prediction", prediction.shape, "label", label.shape));
  }
  *ctx->Output("out") = TensorDesc(Shape(), prediction.dtype);
  return Status::OK();
}

REGISTER_OP("argmax").Input("x").Output("y").NoGrad().Infer(InferArgmax).Sbp(ArgmaxSbp);
REGISTER_OP("accuracy")
    .Input("prediction")
    .Input("label")
    .Output("out")
    .NoGrad()
    .Infer(InferAccuracy);

}  // namespace
}  // namespace nn
}  // namespace oflite
