// layer_norm over the trailing dims [begin_norm_axis, rank) and its grad.
//
// x viewed as [M, D] with M = prod(dims before begin_norm_axis),
// D = prod(dims from begin_norm_axis):
//   mean, inv_variance: shape x.shape[:begin_norm_axis]
//   y = (x - mean) * inv_variance * gamma + beta, gamma/beta of shape
//   x.shape[begin_norm_axis:], inv_variance = 1 / sqrt(var + epsilon)
//   (biased variance).
#include "oneflow_lite/ops/nn/nn_util.h"
#include "oneflow_lite/ops/nn/op_util.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace nn {
namespace {

StatusOr<int64_t> BeginNormAxis(const InferContext& ctx, const Shape& x) {
  if (x.rank() == 0) return ctx.Error("x must have rank >= 1, got a scalar");
  auto axis = NormalizeAxis(ctx.attrs().GetIntOr("begin_norm_axis", -1), x.rank());
  if (!axis.ok()) return ctx.Error("begin_norm_axis: ", axis.status().message());
  const double epsilon = ctx.attrs().GetFloatOr("epsilon", 1e-5);
  if (!(epsilon > 0)) return ctx.Error("epsilon must be > 0, got ", epsilon);
  return *axis;
}

Shape Prefix(const Shape& s, int64_t end) {
  return Shape(std::vector<int64_t>(s.dims().begin(), s.dims().begin() + end));
}
Shape Suffix(const Shape& s, int64_t begin) {
  return Shape(std::vector<int64_t>(s.dims().begin() + begin, s.dims().end()));
}

Status Expect(const InferContext& ctx, const std::string& arg, const TensorDesc& want) {
  const TensorDesc& got = ctx.Input(arg);
  if (got.shape != want.shape || got.dtype != want.dtype) {
    return ctx.Error(arg, " must be ", want.ToString(), ", got ", got.ToString());
  }
  return Status::OK();
}

Status InferLayerNorm(InferContext* ctx) {
  const TensorDesc& x = ctx->Input("x");
  if (x.dtype != DT_FLOAT && x.dtype != DT_DOUBLE) {
    return ctx->Error("x must be float32 or float64, got ", x.ToString());
  }
  ASSIGN_OR_RETURN(int64_t begin, BeginNormAxis(*ctx, x.shape));
  const TensorDesc param(Suffix(x.shape, begin), x.dtype);
  RETURN_IF_ERROR(Expect(*ctx, "gamma", param));
  RETURN_IF_ERROR(Expect(*ctx, "beta", param));
  *ctx->Output("y") = x;
  *ctx->Output("mean") = TensorDesc(Prefix(x.shape, begin), x.dtype);
  *ctx->Output("inv_variance") = TensorDesc(Prefix(x.shape, begin), x.dtype);
  return Status::OK();
}

Status InferLayerNormGrad(InferContext* ctx) {
  const TensorDesc& x = ctx->Input("x");
  if (x.dtype != DT_FLOAT && x.dtype != DT_DOUBLE) {
    return ctx->Error("x must be float32 or float64, got ", x.ToString());
  }
  ASSIGN_OR_RETURN(int64_t begin, BeginNormAxis(*ctx, x.shape));
  const TensorDesc stat(Prefix(x.shape, begin), x.dtype);
  const TensorDesc param(Suffix(x.shape, begin), x.dtype);
  RETURN_IF_ERROR(Expect(*ctx, "dy", x));
  RETURN_IF_ERROR(Expect(*ctx, "mean", stat));
  RETURN_IF_ERROR(Expect(*ctx, "inv_variance", stat));
  RETURN_IF_ERROR(Expect(*ctx, "gamma", param));
  if (ctx->InputCount("dmean") > 0) RETURN_IF_ERROR(Expect(*ctx, "dmean", stat));
  if (ctx->InputCount("dinv_variance") > 0) RETURN_IF_ERROR(Expect(*ctx, "dinv_variance", stat));
  *ctx->Output("dx") = x;
  *ctx->Output("dgamma") = param;
  *ctx->Output("dbeta") = param;
  return Status::OK();
}

int64_t SbpBeginNormAxis(const SbpContext& ctx) {
  const int64_t rank = ctx.inputs().at(0).shape.rank();
  auto axis = NormalizeAxis(ctx.attrs().GetIntOr("begin_norm_axis", -1), rank);
  return axis.ok() ? *axis : 0;
}

// layer_norm(x, gamma, beta) -> y, mean, inv_variance: S(i) x for every
// i < begin_norm_axis, B gamma/beta.
Status LayerNormSbp(SbpContext* ctx) {
  for (int64_t i = 0; i < SbpBeginNormAxis(*ctx); ++i) {
    ctx->Add(SignatureByArg(
        *ctx, {{"x", SplitSbp(i)}, {"gamma", BroadcastSbp()}, {"beta", BroadcastSbp()}},
        {{"y", SplitSbp(i)}, {"mean", SplitSbp(i)}, {"inv_variance", SplitSbp(i)}}));
  }
  return Status::OK();
}

// layer_norm_grad(dy, x, mean, inv_variance, gamma[, dmean][, dinv_variance])
// -> dx S(i), dgamma P, dbeta P.
Status LayerNormGradSbp(SbpContext* ctx) {
  for (int64_t i = 0; i < SbpBeginNormAxis(*ctx); ++i) {
    std::map<std::string, SbpParallel> inputs;
    for (const char* arg : {"dy", "x", "mean", "inv_variance", "dmean", "dinv_variance"}) {
      inputs[arg] = SplitSbp(i);
    }
    inputs["gamma"] = BroadcastSbp();
    ctx->Add(SignatureByArg(
        *ctx, inputs,
        {{"dx", SplitSbp(i)}, {"dgamma", PartialSumSbp()}, {"dbeta", PartialSumSbp()}}));
  }
  return Status::OK();
}

// Gradients of the statistics outputs (rarely used, but part of the math)
// ride along as optional inputs of the one grad op. y's gradient is required
// whenever any gradient flows.
Status LayerNormGradRule(GradContext* ctx) {
  return NormalizationGradRule(
      ctx, "layer_norm", /*statistics_grads=*/true, [&](OpConfBuilder* builder) {
        builder->Attr("begin_norm_axis", ctx->attrs().GetIntOr("begin_norm_axis", -1));
        builder->Attr("epsilon", ctx->attrs().GetFloatOr("epsilon", 1e-5));
      });
}

REGISTER_OP("layer_norm")
    .Input("x")
    .Input("gamma")
    .Input("beta")
    .Output("y")
    .Output("mean")
    .Output("inv_variance")
    .Infer(InferLayerNorm)
    .Sbp(LayerNormSbp)
    .Grad(LayerNormGradRule);
// The grad op's arguments are those NormalizationGradRule writes (op_util.h).
const OpRegistrar kLayerNormGradDef =
    NormalizationGradOpDef("layer_norm").Infer(InferLayerNormGrad).Sbp(LayerNormGradSbp);

}  // namespace
}  // namespace nn
}  // namespace oflite
