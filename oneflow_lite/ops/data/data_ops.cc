// Data source ops: fashion_mnist, npy_dataset and random_batch (docs/ops.md, "data
// family"). Shapes here are logical; when the compiler splits the outputs
// S(0) each device receives batch_size / parallel_num rows.
#include <string>
#include <vector>

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

// Both outputs split on the batch when it divides evenly, or, with the
// source's uneven_split attribute, into balanced parts (boxing and the
// kernels' shards follow common/partition.h) when every device gets at
// least one row; B is implied.
Status BatchSplitSbp(SbpContext* ctx) {
  const int64_t batch = ctx->outputs().at(0).shape.dim(0);
  const int64_t n = ctx->parallel_num();
  const bool uneven = ctx->attrs().GetBoolOr("uneven_split", false);
  if (batch % n == 0 || (uneven && batch >= n)) {
    ctx->Add(SbpSignature{{}, {SplitSbp(0), SplitSbp(0)}});
  } else {
    const int64_t lower = batch / n * n, upper = lower + n;
    std::string examples = std::to_string(upper);
    if (lower > 0) examples = std::to_string(lower) + " or " + examples;
    std::string reason = "S(0) needs equal parts: batch " + std::to_string(batch) +
                         " is not divisible by " + std::to_string(n) +
                         " devices (use a batch divisible by " + std::to_string(n) + ", e.g. " +
                         examples + ")";
    if (batch >= n) {
      reason += ", or let the source split it into balanced parts (its uneven_split option)";
    }
    ctx->Withhold(reason);
  }
  return Status::OK();
}

// npy_dataset: batches of a user's arrays (api: NpyData, api/data_sources.h; the
// kernel reads <path>/<split>_x.npy and <split>_y.npy). The sample shape
// is recorded at build time from the .npy header; images are float32.
Status InferNpyDataset(InferContext* ctx) {
  ASSIGN_OR_RETURN(int64_t batch, ctx->attrs().GetInt("batch_size"));
  if (batch <= 0) return ctx->Error("batch_size must be > 0, got ", batch);
  const std::string split = ctx->attrs().GetStringOr("split", "train");
  if (split != "train" && split != "test") {
    return ctx->Error("split must be 'train' or 'test', got '", split, "'");
  }
  ASSIGN_OR_RETURN(Shape sample, ctx->attrs().GetShape("sample_shape"));
  for (int64_t d : sample.dims()) {
    if (d <= 0) return ctx->Error("sample_shape ", sample, " has a non-positive dimension");
  }
  const double std = ctx->attrs().GetFloatOr("std", 1.0);
  if (!(std > 0.0)) return ctx->Error("std must be > 0, got ", std);
  std::vector<int64_t> dims = {batch};
  dims.insert(dims.end(), sample.dims().begin(), sample.dims().end());
  *ctx->Output("image") = TensorDesc(Shape(dims), DT_FLOAT);
  *ctx->Output("label") = TensorDesc(Shape{batch}, DT_INT32);
  return Status::OK();
}

REGISTER_OP("npy_dataset")
    .Output("image")
    .Output("label")
    .Source()
    .Infer(InferNpyDataset)
    .Sbp(BatchSplitSbp);

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
