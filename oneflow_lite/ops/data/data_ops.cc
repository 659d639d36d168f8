// Data source ops: fashion_mnist and random_batch (docs/ops.md, "data
// family"). Shapes here are logical; when the compiler splits the outputs
// S(0) each device receives batch_size / parallel_num rows.
#include <string>

#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace {

constexpr int64_t kImageSide = 28;

Status InferFashionMnist(InferContext* ctx) {
  ASSIGN_OR_RETURN(int64_t batch, ctx->attrs().GetInt("batch_size"));
  if (batch <= 0) return ctx->Error("batch_size must be > 0, got ", batch);
  const std::string split = ctx->attrs().GetStringOr("split", "train");
  if (split != "train" && split != "test") {
    return ctx->Error("split must be 'train' or 'test', got '", split, "'");
  }
  const double std = ctx->attrs().GetFloatOr("std", 1.0);
  if (!(std > 0.0)) return ctx->Error("std must be > 0, got ", std);
  if (ctx->attrs().GetBoolOr("flatten", false)) {
    *ctx->Output("image") = TensorDesc(Shape{batch, kImageSide * kImageSide}, DT_FLOAT);
  } else {
    *ctx->Output("image") = TensorDesc(Shape{batch, 1, kImageSide, kImageSide}, DT_FLOAT);
  }
  *ctx->Output("label") = TensorDesc(Shape{batch}, DT_INT32);
  return Status::OK();
}

Status InferRandomBatch(InferContext* ctx) {
  ASSIGN_OR_RETURN(Shape shape, ctx->attrs().GetShape("shape"));
  if (shape.rank() < 1) return ctx->Error("shape must have a batch dimension, got ", shape);
  for (int64_t d : shape.dims()) {
    if (d <= 0) return ctx->Error("shape ", shape, " has a non-positive dimension");
  }
  ASSIGN_OR_RETURN(int64_t num_classes, ctx->attrs().GetInt("num_classes"));
  if (num_classes <= 0) return ctx->Error("num_classes must be > 0, got ", num_classes);
  DataType dtype = DT_FLOAT;
  if (ctx->attrs().Has("dtype")) {
    ASSIGN_OR_RETURN(dtype, ctx->attrs().GetDataType("dtype"));
  }
  if (dtype != DT_FLOAT && dtype != DT_DOUBLE) {
    return ctx->Error("dtype must be float32 or float64, got ", DataTypeName(dtype));
  }
  *ctx->Output("image") = TensorDesc(shape, dtype);
  *ctx->Output("label") = TensorDesc(Shape{shape.dim(0)}, DT_INT32);
  return Status::OK();
}

// Both outputs split on the batch when it divides evenly; B is implied.
Status BatchSplitSbp(SbpContext* ctx) {
  const int64_t batch = ctx->outputs().at(0).shape.dim(0);
  const int64_t n = ctx->parallel_num();
  if (batch % n == 0) {
    ctx->Add(SbpSignature{{}, {SplitSbp(0), SplitSbp(0)}});
  } else {
    const int64_t lower = batch / n * n, upper = lower + n;
    std::string examples = std::to_string(upper);
    if (lower > 0) examples = std::to_string(lower) + " or " + examples;
    ctx->Withhold("S(0) needs equal parts: batch " + std::to_string(batch) +
                  " is not divisible by " + std::to_string(n) +
                  " devices (use a batch divisible by " + std::to_string(n) + ", e.g. " +
                  examples + ")");
  }
  return Status::OK();
}

REGISTER_OP("fashion_mnist")
    .Output("image")
    .Output("label")
    .Source()
    .Infer(InferFashionMnist)
    .Sbp(BatchSplitSbp);

REGISTER_OP("random_batch")
    .Output("image")
    .Output("label")
    .Source()
    .Infer(InferRandomBatch)
    .Sbp(BatchSplitSbp);

}  // namespace
}  // namespace oflite
