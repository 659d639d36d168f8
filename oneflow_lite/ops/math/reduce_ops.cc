// reduce_sum, reduce_mean and broadcast_like (the reductions' gradient).
#include <algorithm>

#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {
namespace {

std::string Prefix(const OpConf& op) { return "op '" + op.name() + "' (" + op.op_type() + "): "; }

StatusOr<std::vector<int64_t>> ReduceAxes(const OpConf& op, int64_t rank) {
  return NormalizeAxes(AttrView(op).GetIntsOr("axis", {}), rank, /*empty_means_all=*/true,
                       Prefix(op));
}

bool Contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

Status InferReduce(InferContext* ctx) {
  RETURN_IF_ERROR(
      CheckOptionalAttrTypes(ctx->op(), {{"axis", AttrValue::kInts}, {"keepdims", AttrValue::kB}}));
  const TensorDesc& x = ctx->Input("x");
  ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReduceAxes(ctx->op(), x.shape.rank()));
  if (x.dtype != DT_FLOAT && x.dtype != DT_DOUBLE) {
    return ctx->Error("needs a float32/float64 input, got ", Describe("x", x));
  }
  const bool keepdims = ctx->attrs().GetBoolOr("keepdims", false);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < x.shape.rank(); ++i) {
    if (!Contains(axes, i)) {
      dims.push_back(x.shape.dim(i));
    } else if (keepdims) {
      dims.push_back(1);
    }
  }
  *ctx->Output("y") = TensorDesc(Shape(dims), x.dtype);
  return Status::OK();
}

// Kept axes stay split; a split reduced axis gives partial sums (sum only:
// the mean kernel divides by the local extent). P -> P for both.
Status ReduceSbp(SbpContext* ctx, bool is_sum) {
  const int64_t rank = SbpInput(*ctx, "x").shape.rank();
  ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReduceAxes(ctx->op(), rank));
  const bool keepdims = ctx->attrs().GetBoolOr("keepdims", false);
  int64_t out_axis = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (Contains(axes, i)) {
      if (is_sum)
        ctx->Add(MakeSignature(ctx->op(), {{"x", SplitSbp(i)}}, {{"y", PartialSumSbp()}}));
      if (keepdims) ++out_axis;
      continue;
    }
    ctx->Add(MakeSignature(ctx->op(), {{"x", SplitSbp(i)}}, {{"y", SplitSbp(out_axis++)}}));
  }
  AddPartialSignature(ctx, {"x"});
  return Status::OK();
}

// dx = broadcast_like(dy, x) (times 1/count for the mean).
Status ReduceGrad(GradContext* ctx, bool is_mean) {
  const std::string dy = ctx->OutputGradLbn("y");
  if (dy.empty() || !ctx->NeedsInputGrad("x")) return Status::OK();
  const Shape& x_shape = ctx->InputDesc("x").shape;
  ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReduceAxes(ctx->op(), x_shape.rank()));
  OpConfBuilder builder("broadcast_like", GradOpName(*ctx, "grad"));
  builder.Input("x", dy).Input("like", ctx->InputLbn("x")).Output("y").Attr("axis", axes);
  ASSIGN_OR_RETURN(std::string dx, AddGradOp(ctx, builder.Build(), "y"));
  if (is_mean) {
    int64_t count = 1;
    for (int64_t axis : axes) count *= x_shape.dim(axis);
    const double scale = count > 0 ? 1.0 / static_cast<double>(count) : 0.0;
    ASSIGN_OR_RETURN(dx, AddScalarMulGradOp(ctx, dx, scale, "grad_scale"));
  }
  ctx->SetInputGrad("x", 0, dx);
  return Status::OK();
}

struct BroadcastLikeInfo {
  std::vector<int64_t> axes;       // normalized "axis" attr
  std::vector<int64_t> x_axis_of;  // per like axis, see BroadcastLikeAxisMap
};

StatusOr<BroadcastLikeInfo> AnalyzeBroadcastLike(const OpConf& op, const TensorDesc& x,
                                                 const TensorDesc& like) {
  BroadcastLikeInfo info;
  ASSIGN_OR_RETURN(info.axes, NormalizeAxes(AttrView(op).GetIntsOr("axis", {}), like.shape.rank(),
                                            /*empty_means_all=*/false, Prefix(op)));
  if (!BroadcastLikeAxisMap(x.shape, like.shape, info.axes, &info.x_axis_of)) {
    return InvalidArgumentError(Prefix(op), "cannot broadcast ", Describe("x", x), " to ",
                                Describe("like", like), " along axes ",
                                Shape(info.axes).ToString());
  }
  return info;
}

Status InferBroadcastLike(InferContext* ctx) {
  RETURN_IF_ERROR(CheckOptionalAttrTypes(ctx->op(), {{"axis", AttrValue::kInts}}));
  const TensorDesc& x = ctx->Input("x");
  const TensorDesc& like = ctx->Input("like");
  RETURN_IF_ERROR(AnalyzeBroadcastLike(ctx->op(), x, like).status());
  *ctx->Output("y") = TensorDesc(like.shape, x.dtype);
  return Status::OK();
}

Status BroadcastLikeSbp(SbpContext* ctx) {
  ASSIGN_OR_RETURN(BroadcastLikeInfo info,
                   AnalyzeBroadcastLike(ctx->op(), SbpInput(*ctx, "x"), SbpInput(*ctx, "like")));
  for (size_t i = 0; i < info.x_axis_of.size(); ++i) {
    const int64_t xi = info.x_axis_of[i];
    const SbpParallel x_sbp = xi >= 0 ? SplitSbp(xi) : BroadcastSbp();
    ctx->Add(MakeSignature(ctx->op(), {{"x", x_sbp}, {"like", SplitSbp(i)}}, {{"y", SplitSbp(i)}}));
  }
  AddPartialSignature(ctx, {"x"});
  return Status::OK();
}

// dx = reduce_sum(dy) over the broadcast axes, reshaped to x; like gets 0.
Status BroadcastLikeGrad(GradContext* ctx) {
  RETURN_IF_ERROR(SetZeroGrads(ctx, "like"));
  const std::string dy = ctx->OutputGradLbn("y");
  if (dy.empty() || !ctx->NeedsInputGrad("x")) return Status::OK();
  ASSIGN_OR_RETURN(BroadcastLikeInfo info,
                   AnalyzeBroadcastLike(ctx->op(), ctx->InputDesc("x"), ctx->InputDesc("like")));
  std::vector<int64_t> sum_axes;
  for (size_t i = 0; i < info.x_axis_of.size(); ++i) {
    if (info.x_axis_of[i] < 0) sum_axes.push_back(static_cast<int64_t>(i));
  }
  std::string dx = dy;
  if (!sum_axes.empty()) {
    ASSIGN_OR_RETURN(dx, AddGradOp(ctx,
                                   OpConfBuilder("reduce_sum", GradOpName(*ctx, "grad_sum"))
                                       .Input("x", dy)
                                       .Output("y")
                                       .Attr("axis", sum_axes)
                                       .Attr("keepdims", true)
                                       .Build(),
                                   "y"));
  }
  ASSIGN_OR_RETURN(dx, AddGradOp(ctx,
                                 OpConfBuilder("reshape_like", GradOpName(*ctx, "grad_reshape"))
                                     .Input("x", dx)
                                     .Input("like", ctx->InputLbn("x"))
                                     .Output("y")
                                     .Build(),
                                 "y"));
  ctx->SetInputGrad("x", 0, dx);
  return Status::OK();
}

REGISTER_OP("reduce_sum")
    .Input("x")
    .Output("y")
    .Infer(InferReduce)
    .Sbp([](SbpContext* ctx) { return ReduceSbp(ctx, /*is_sum=*/true); })
    .Grad([](GradContext* ctx) { return ReduceGrad(ctx, /*is_mean=*/false); });
REGISTER_OP("reduce_mean")
    .Input("x")
    .Output("y")
    .Infer(InferReduce)
    .Sbp([](SbpContext* ctx) { return ReduceSbp(ctx, /*is_sum=*/false); })
    .Grad([](GradContext* ctx) { return ReduceGrad(ctx, /*is_mean=*/true); });
REGISTER_OP("broadcast_like")
    .Input("x")
    .Input("like")
    .Output("y")
    .Infer(InferBroadcastLike)
    .Sbp(BroadcastLikeSbp)
    .Grad(BroadcastLikeGrad);

}  // namespace
}  // namespace math
}  // namespace oflite
