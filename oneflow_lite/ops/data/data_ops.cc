// Data source ops: fashion_mnist, npy_dataset, random_batch, host_feed and
// token_window (docs/ops.md, "data family"). Shapes here are logical; when the compiler
// splits the outputs S(0) each device receives batch_size / parallel_num rows.
#include <cstdint>
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

// host_feed: the tensor a program pushed under `feed` (data/host_feed.h),
// one per iteration, of exactly `shape` and `dtype`. Only the
// all-broadcast signature (no Sbp function): its kernel refuses a
// placement of more than one device.
Status InferHostFeed(InferContext* ctx) {
  ASSIGN_OR_RETURN(std::string feed, ctx->attrs().GetString("feed"));
  if (feed.empty()) return ctx->Error("feed must name a host feed, got an empty name");
  ASSIGN_OR_RETURN(Shape shape, ctx->attrs().GetShape("shape"));
  for (int64_t d : shape.dims()) {
    if (d < 0) return ctx->Error("shape ", shape, " has a negative dimension");
  }
  ASSIGN_OR_RETURN(DataType dtype, ctx->attrs().GetDataType("dtype"));
  if (dtype != DT_INT32 && dtype != DT_INT64 && dtype != DT_FLOAT && dtype != DT_DOUBLE) {
    return ctx->Error("dtype must be int32, int64, float32 or float64, got ",
                      DataTypeName(dtype));
  }
  const int64_t timeout_ms = ctx->attrs().GetIntOr("timeout_ms", 60000);
  if (timeout_ms <= 0) return ctx->Error("timeout_ms must be > 0, got ", timeout_ms);
  *ctx->Output("out") = TensorDesc(shape, dtype);
  return Status::OK();
}

REGISTER_OP("host_feed").Output("out").Source().Infer(InferHostFeed);

// token_window: windows of a token file and their next-token targets (api:
// TokenWindows, api/data_sources.h; the file and its splits:
// data/token_file.h). The file itself is read by the kernel at Init.
Status InferTokenWindow(InferContext* ctx) {
  ASSIGN_OR_RETURN(int64_t batch, ctx->attrs().GetInt("batch_size"));
  if (batch <= 0) return ctx->Error("batch_size must be > 0, got ", batch);
  ASSIGN_OR_RETURN(int64_t block, ctx->attrs().GetInt("block_size"));
  if (block <= 0) return ctx->Error("block_size must be > 0, got ", block);
  ASSIGN_OR_RETURN(int64_t vocab, ctx->attrs().GetInt("vocab_size"));
  if (vocab <= 0 || vocab > INT32_MAX) {
    return ctx->Error("vocab_size must be in [1, 2^31 - 1] (int32 ids), got ", vocab);
  }
  ASSIGN_OR_RETURN(std::string path, ctx->attrs().GetString("path"));
  if (path.empty()) return ctx->Error("path (the token file) is empty");
  const std::string split = ctx->attrs().GetStringOr("split", "train");
  if (split != "train" && split != "test") {
    return ctx->Error("split must be 'train' or 'test', got '", split, "'");
  }
  const std::string dtype = ctx->attrs().GetStringOr("token_dtype", "uint16");
  if (dtype != "uint16" && dtype != "int32") {
    return ctx->Error("token_dtype must be 'uint16' or 'int32', got '", dtype, "'");
  }
  const double val_fraction = ctx->attrs().GetFloatOr("val_fraction", 0.1);
  if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
    return ctx->Error("val_fraction must be in [0, 1), got ", val_fraction);
  }
  const int64_t eval_batches = ctx->attrs().GetIntOr("eval_batches", 20);
  if (eval_batches < 0) return ctx->Error("eval_batches must be >= 0, got ", eval_batches);
  *ctx->Output("input") = TensorDesc(Shape{batch, block}, DT_INT32);
  *ctx->Output("target") = TensorDesc(Shape{batch, block}, DT_INT32);
  return Status::OK();
}

REGISTER_OP("token_window")
    .Output("input")
    .Output("target")
    .Source()
    .Infer(InferTokenWindow)
    .Sbp(BatchSplitSbp);

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
