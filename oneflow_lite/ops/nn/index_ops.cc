// one_hot and gather (rows by index) with gather_grad (scatter-add).
//
// one_hot(indices int32/int64) -> out indices.shape + [depth], dtype attr
// (float32 default, or float64): on_value where the last index equals the
// element's value, off_value elsewhere. Not differentiable.
//
// gather(x [R, ...], indices int32/int64) -> out indices.shape + x.shape[1:]:
// out[i..., j...] = x[indices[i...], j...]. Any float x of rank >= 1 (an
// embedding generalized to any row shape). Indices outside [0, R) (or
// [0, depth) for one_hot) are a kernel error naming the op, the index, its
// flat position and the bound. gather_grad(dy, indices, like) -> dx of like's
// shape: zeros with dy's rows added at their indices (repeats accumulate).
#include "oneflow_lite/ops/nn/nn_util.h"
#include "oneflow_lite/ops/nn/op_util.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace nn {
namespace {

bool IsIndex(DataType t) { return t == DT_INT32 || t == DT_INT64; }
bool IsFloat(DataType t) { return t == DT_FLOAT || t == DT_DOUBLE; }

Status CheckIndices(const InferContext& ctx) {
  const TensorDesc& indices = ctx.Input("indices");
  if (!IsIndex(indices.dtype)) {
    return ctx.Error("indices must be int32 or int64, got ", indices.ToString());
  }
  return Status::OK();
}

Status InferOneHot(InferContext* ctx) {
  RETURN_IF_ERROR(CheckIndices(*ctx));
  if (!ctx->attrs().Has("depth")) return ctx->Error("missing int attribute 'depth'");
  ASSIGN_OR_RETURN(int64_t depth, ctx->attrs().GetInt("depth"));
  if (depth < 0) return ctx->Error("depth must be >= 0, got ", depth);
  for (const char* key : {"on_value", "off_value"}) {
    if (ctx->attrs().Has(key)) RETURN_IF_ERROR(ctx->attrs().GetFloat(key).status());
  }
  DataType dtype = DT_FLOAT;
  if (ctx->attrs().Has("dtype")) {
    ASSIGN_OR_RETURN(dtype, ctx->attrs().GetDataType("dtype"));
  }
  if (!IsFloat(dtype)) return ctx->Error("dtype must be float32 or float64");
  std::vector<int64_t> dims = ctx->Input("indices").shape.dims();
  dims.push_back(depth);
  *ctx->Output("out") = TensorDesc(Shape(dims), dtype);
  return Status::OK();
}

// S(i) indices -> S(i) out, for each axis of indices.
Status OneHotSbp(SbpContext* ctx) {
  const int64_t rank = SbpInputDesc(*ctx, "indices").shape.rank();
  for (int64_t i = 0; i < rank; ++i) {
    ctx->Add(SignatureByArg(*ctx, {{"indices", SplitSbp(i)}}, {{"out", SplitSbp(i)}}));
  }
  return Status::OK();
}

// indices.shape + rows.shape[1:].
Shape GatheredShape(const Shape& indices, const Shape& rows) {
  std::vector<int64_t> dims = indices.dims();
  for (int64_t i = 1; i < rows.rank(); ++i) dims.push_back(rows.dim(i));
  return Shape(dims);
}

Status CheckRows(const InferContext& ctx, const std::string& arg) {
  const TensorDesc& rows = ctx.Input(arg);
  if (!IsFloat(rows.dtype) || rows.shape.rank() < 1) {
    return ctx.Error(arg, " must be float32/float64 of rank >= 1, got ", rows.ToString());
  }
  return Status::OK();
}

Status InferGather(InferContext* ctx) {
  RETURN_IF_ERROR(CheckRows(*ctx, "x"));
  RETURN_IF_ERROR(CheckIndices(*ctx));
  const TensorDesc& x = ctx->Input("x");
  *ctx->Output("out") = TensorDesc(GatheredShape(ctx->Input("indices").shape, x.shape), x.dtype);
  return Status::OK();
}

Status InferGatherGrad(InferContext* ctx) {
  RETURN_IF_ERROR(CheckRows(*ctx, "like"));
  RETURN_IF_ERROR(CheckIndices(*ctx));
  const TensorDesc& like = ctx->Input("like");
  const TensorDesc& dy = ctx->Input("dy");
  const Shape expected = GatheredShape(ctx->Input("indices").shape, like.shape);
  if (dy.dtype != like.dtype || dy.shape != expected) {
    return ctx->Error("dy must be ", TensorDesc(expected, like.dtype).ToString(),
                      " (indices shape + like.shape[1:]), got ", dy.ToString());
  }
  *ctx->Output("dx") = like;
  return Status::OK();
}

// gather(x, indices) -> out:
//   B x, S(i) indices -> S(i) out, for each axis i of indices;
//   S(k) x (k >= 1), B indices -> S(r + k - 1) out, r = rank(indices).
Status GatherSbp(SbpContext* ctx) {
  const int64_t r = SbpInputDesc(*ctx, "indices").shape.rank();
  const int64_t x_rank = SbpInputDesc(*ctx, "x").shape.rank();
  for (int64_t i = 0; i < r; ++i) {
    ctx->Add(SignatureByArg(*ctx, {{"x", BroadcastSbp()}, {"indices", SplitSbp(i)}},
                            {{"out", SplitSbp(i)}}));
  }
  for (int64_t k = 1; k < x_rank; ++k) {
    ctx->Add(SignatureByArg(*ctx, {{"x", SplitSbp(k)}, {"indices", BroadcastSbp()}},
                            {{"out", SplitSbp(r + k - 1)}}));
  }
  return Status::OK();
}

// gather_grad(dy, indices, like) -> dx, the transpose of gather's:
//   S(i) dy, S(i) indices, B like -> P dx;
//   S(r + k - 1) dy, B indices, S(k) like -> S(k) dx.
Status GatherGradSbp(SbpContext* ctx) {
  const int64_t r = SbpInputDesc(*ctx, "indices").shape.rank();
  const int64_t like_rank = SbpInputDesc(*ctx, "like").shape.rank();
  for (int64_t i = 0; i < r; ++i) {
    ctx->Add(SignatureByArg(
        *ctx, {{"dy", SplitSbp(i)}, {"indices", SplitSbp(i)}, {"like", BroadcastSbp()}},
        {{"dx", PartialSumSbp()}}));
  }
  for (int64_t k = 1; k < like_rank; ++k) {
    ctx->Add(SignatureByArg(
        *ctx, {{"dy", SplitSbp(r + k - 1)}, {"indices", BroadcastSbp()}, {"like", SplitSbp(k)}},
        {{"dx", SplitSbp(k)}}));
  }
  return Status::OK();
}

Status GatherGradRule(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("out");
  if (dy.empty() || !ctx->NeedsInputGrad("x")) return Status::OK();
  OpConf op = OpConfBuilder("gather_grad", BackwardOpName(*ctx, "gather_grad"))
                  .Input("dy", dy)
                  .Input("indices", ctx->InputLbn("indices"))
                  .Input("like", ctx->InputLbn("x"))
                  .Output("dx")
                  .Build();
  ASSIGN_OR_RETURN(std::string name, ctx->AddOp(AsBackward(*ctx, op)));
  ctx->SetInputGrad("x", 0, OutputLbn(name, "dx"));
  return Status::OK();
}

REGISTER_OP("one_hot").Input("indices").Output("out").Infer(InferOneHot).Sbp(OneHotSbp);
REGISTER_OP("gather")
    .Input("x")
    .Input("indices")
    .Output("out")
    .Infer(InferGather)
    .Sbp(GatherSbp)
    .Grad(GatherGradRule);
REGISTER_OP("gather_grad")
    .Input("dy")
    .Input("indices")
    .Input("like")
    .Output("dx")
    .Infer(InferGatherGrad)
    .Sbp(GatherGradSbp);

}  // namespace
}  // namespace nn
}  // namespace oflite
