// embedding (row gather) and embedding_grad (scatter-add).
//
// out = weight[indices]: weight [V, D], indices int32/int64 of any shape,
// out of shape indices.shape + [D]. An index outside [0, V) is an error
// raised by the kernel (naming the op, the index, its position and V).
//
// SBP: the row-split weight signature (S(0) weight -> P out, a masked
// gather) is not offered: a kernel cannot tell from its physical shapes
// whether its weight is a shard or the whole table (KernelInitContext carries
// no SBP), so it could not know which rows it owns. Splitting the embedding
// dimension (S(1) weight, B indices -> S(last) out) is offered instead.
#include "oneflow_lite/ops/nn/nn_util.h"
#include "oneflow_lite/ops/nn/op_util.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace nn {
namespace {

bool IsIndex(DataType t) { return t == DT_INT32 || t == DT_INT64; }

Shape GatheredShape(const Shape& indices, int64_t depth) {
  std::vector<int64_t> dims = indices.dims();
  dims.push_back(depth);
  return Shape(dims);
}

Status CheckIndices(const InferContext& ctx) {
  const TensorDesc& indices = ctx.Input("indices");
  if (!IsIndex(indices.dtype)) {
    return ctx.Error("indices must be int32 or int64, got ", indices.ToString());
  }
  return Status::OK();
}

Status CheckTable(const InferContext& ctx, const std::string& arg) {
  const TensorDesc& table = ctx.Input(arg);
  if (table.dtype != DT_FLOAT && table.dtype != DT_DOUBLE) {
    return ctx.Error(arg, " must be float32 or float64, got ", table.ToString());
  }
  if (table.shape.rank() != 2) {
    return ctx.Error(arg, " must be 2-D [V, D], got ", table.shape.ToString());
  }
  return Status::OK();
}

Status InferEmbedding(InferContext* ctx) {
  RETURN_IF_ERROR(CheckTable(*ctx, "weight"));
  RETURN_IF_ERROR(CheckIndices(*ctx));
  const TensorDesc& weight = ctx->Input("weight");
  *ctx->Output("out") =
      TensorDesc(GatheredShape(ctx->Input("indices").shape, weight.shape.dim(1)), weight.dtype);
  return Status::OK();
}

Status InferEmbeddingGrad(InferContext* ctx) {
  RETURN_IF_ERROR(CheckTable(*ctx, "like"));
  RETURN_IF_ERROR(CheckIndices(*ctx));
  const TensorDesc& like = ctx->Input("like");
  const TensorDesc& dy = ctx->Input("dy");
  const Shape expected = GatheredShape(ctx->Input("indices").shape, like.shape.dim(1));
  if (dy.dtype != like.dtype || dy.shape != expected) {
    return ctx->Error("dy must be ", TensorDesc(expected, like.dtype).ToString(),
                      " (indices shape + [D]): ", ShapePair("dy", dy.shape, "expected", expected));
  }
  *ctx->Output("dweight") = like;
  return Status::OK();
}

// embedding(weight, indices) -> out:
//   B weight, S(i) indices -> S(i) out, for each axis i of indices;
//   S(1) weight, B indices -> S(r) out, r = rank(indices) (the D axis).
Status EmbeddingSbp(SbpContext* ctx) {
  const int64_t indices_rank = SbpInputDesc(*ctx, "indices").shape.rank();
  for (int64_t i = 0; i < indices_rank; ++i) {
    ctx->Add(SignatureByArg(*ctx, {{"weight", BroadcastSbp()}, {"indices", SplitSbp(i)}},
                            {{"out", SplitSbp(i)}}));
  }
  ctx->Add(SignatureByArg(*ctx, {{"weight", SplitSbp(1)}, {"indices", BroadcastSbp()}},
                          {{"out", SplitSbp(indices_rank)}}));
  return Status::OK();
}

// embedding_grad(dy, indices, like) -> dweight, the transpose:
//   S(i) dy, S(i) indices, B like -> P dweight;
//   S(r) dy, B indices, S(1) like -> S(1) dweight.
Status EmbeddingGradSbp(SbpContext* ctx) {
  const int64_t indices_rank = SbpInputDesc(*ctx, "indices").shape.rank();
  for (int64_t i = 0; i < indices_rank; ++i) {
    ctx->Add(SignatureByArg(
        *ctx, {{"dy", SplitSbp(i)}, {"indices", SplitSbp(i)}, {"like", BroadcastSbp()}},
        {{"dweight", PartialSumSbp()}}));
  }
  ctx->Add(SignatureByArg(
      *ctx, {{"dy", SplitSbp(indices_rank)}, {"indices", BroadcastSbp()}, {"like", SplitSbp(1)}},
      {{"dweight", SplitSbp(1)}}));
  return Status::OK();
}

Status EmbeddingGradRule(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("out");
  if (dy.empty() || !ctx->NeedsInputGrad("weight")) return Status::OK();
  OpConf op = OpConfBuilder("embedding_grad", BackwardOpName(*ctx, "embedding_grad"))
                  .Input("dy", dy)
                  .Input("indices", ctx->InputLbn("indices"))
                  .Input("like", ctx->InputLbn("weight"))
                  .Output("dweight")
                  .Build();
  ASSIGN_OR_RETURN(std::string name, ctx->AddOp(AsBackward(*ctx, op)));
  ctx->SetInputGrad("weight", 0, OutputLbn(name, "dweight"));
  return Status::OK();
}

REGISTER_OP("embedding")
    .Input("weight")
    .Input("indices")
    .Output("out")
    .Infer(InferEmbedding)
    .Sbp(EmbeddingSbp)
    .Grad(EmbeddingGradRule);
REGISTER_OP("embedding_grad")
    .Input("dy")
    .Input("indices")
    .Input("like")
    .Output("dweight")
    .Infer(InferEmbeddingGrad)
    .Sbp(EmbeddingGradSbp);

}  // namespace
}  // namespace nn
}  // namespace oflite
