// batch_norm over every axis but the channel axis 1, and its grad.
//
// x [N, C, ...] (rank >= 2); gamma, beta, moving_mean, moving_variance [C].
// Training (attr training = true, the default): per channel c, over the
// m = N * prod(dims after 1) elements of channel c,
//   mean = sum x / m, var = sum (x - mean)^2 / m (biased),
//   inv_variance = 1 / sqrt(var + epsilon),
//   y = (x - mean) * inv_variance * gamma + beta,
// and the running statistics (mutable inputs, written in place):
//   moving_mean = momentum * moving_mean + (1 - momentum) * mean,
//   moving_variance = momentum * moving_variance + (1 - momentum) * var * m / (m - 1)
// (unbiased; var itself when m == 1; no update and NaN mean/inv_variance
// when m == 0). Inference (training = false): mean = moving_mean,
// inv_variance = 1 / sqrt(moving_variance + epsilon); nothing is written.
//
// Data parallelism: statistics are per device (like PyTorch's BatchNorm
// under DDP): with x split along the batch, each device normalizes with
// its own shard's statistics and updates its own copy of the running
// statistics, so the "B" mean/inv_variance outputs differ across devices.
// See docs/ops.md.
#include "oneflow_lite/ops/nn/nn_util.h"
#include "oneflow_lite/ops/nn/op_util.h"
#include "oneflow_lite/ops/op_builder.h"
#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"

namespace oflite {
namespace nn {
namespace {

Status CheckAttrs(const InferContext& ctx) {
  const AttrView& attrs = ctx.attrs();
  for (const char* key : {"momentum", "epsilon"}) {
    if (attrs.Has(key)) RETURN_IF_ERROR(attrs.GetFloat(key).status());
  }
  if (attrs.Has("training")) RETURN_IF_ERROR(attrs.GetBool("training").status());
  const double epsilon = attrs.GetFloatOr("epsilon", 1e-5);
  if (!(epsilon > 0)) return ctx.Error("epsilon must be > 0, got ", epsilon);
  const double momentum = attrs.GetFloatOr("momentum", 0.9);
  if (!(momentum >= 0 && momentum <= 1)) {
    return ctx.Error("momentum must be in [0, 1], got ", momentum);
  }
  return Status::OK();
}

Status CheckX(const InferContext& ctx) {
  const TensorDesc& x = ctx.Input("x");
  if (x.dtype != DT_FLOAT && x.dtype != DT_DOUBLE) {
    return ctx.Error("x must be float32 or float64, got ", x.ToString());
  }
  if (x.shape.rank() < 2) return ctx.Error("x must be [N, C, ...] (rank >= 2), got ", x.ToString());
  return Status::OK();
}

Status Expect(const InferContext& ctx, const std::string& arg, const TensorDesc& want) {
  const TensorDesc& got = ctx.Input(arg);
  if (got.shape != want.shape || got.dtype != want.dtype) {
    return ctx.Error(arg, " must be ", want.ToString(), " (one value per channel of x ",
                     ctx.Input("x").ToString(), "), got ", got.ToString());
  }
  return Status::OK();
}

TensorDesc ChannelDesc(const TensorDesc& x) { return TensorDesc(Shape{x.shape.dim(1)}, x.dtype); }

Status InferBatchNorm(InferContext* ctx) {
  RETURN_IF_ERROR(CheckAttrs(*ctx));
  RETURN_IF_ERROR(CheckX(*ctx));
  const TensorDesc& x = ctx->Input("x");
  const TensorDesc channel = ChannelDesc(x);
  for (const char* arg : {"gamma", "beta", "moving_mean", "moving_variance"}) {
    RETURN_IF_ERROR(Expect(*ctx, arg, channel));
  }
  *ctx->Output("y") = x;
  *ctx->Output("mean") = channel;
  *ctx->Output("inv_variance") = channel;
  return Status::OK();
}

Status InferBatchNormGrad(InferContext* ctx) {
  RETURN_IF_ERROR(CheckAttrs(*ctx));
  RETURN_IF_ERROR(CheckX(*ctx));
  const TensorDesc& x = ctx->Input("x");
  const TensorDesc channel = ChannelDesc(x);
  RETURN_IF_ERROR(Expect(*ctx, "dy", x));
  for (const char* arg : {"mean", "inv_variance", "gamma"}) {
    RETURN_IF_ERROR(Expect(*ctx, arg, channel));
  }
  for (const char* arg : {"dmean", "dinv_variance"}) {
    if (ctx->InputCount(arg) > 0) RETURN_IF_ERROR(Expect(*ctx, arg, channel));
  }
  *ctx->Output("dx") = x;
  *ctx->Output("dgamma") = channel;
  *ctx->Output("dbeta") = channel;
  return Status::OK();
}

bool Training(const SbpContext& ctx) { return ctx.attrs().GetBoolOr("training", true); }

// Axes of x other than the channel axis that a signature may split: the
// batch axis in training (per-device statistics), every non-channel axis in
// inference (the statistics are fixed, so any split is exact).
std::vector<int64_t> NonChannelSplitAxes(const SbpContext& ctx) {
  const int64_t rank = SbpInputDesc(ctx, "x").shape.rank();
  std::vector<int64_t> axes = {0};
  if (!Training(ctx)) {
    for (int64_t i = 2; i < rank; ++i) axes.push_back(i);
  }
  return axes;
}

// S(i) x, B parameters and statistics -> S(i) y, B mean/inv_variance for
// the axes above; S(1) x, S(0) per-channel tensors -> S(1) y, S(0) stats
// (channel split: exact in both modes).
Status BatchNormSbp(SbpContext* ctx) {
  const SbpParallel b = BroadcastSbp(), s0 = SplitSbp(0);
  for (int64_t axis : NonChannelSplitAxes(*ctx)) {
    ctx->Add(SignatureByArg(*ctx,
                            {{"x", SplitSbp(axis)},
                             {"gamma", b},
                             {"beta", b},
                             {"moving_mean", b},
                             {"moving_variance", b}},
                            {{"y", SplitSbp(axis)}, {"mean", b}, {"inv_variance", b}}));
  }
  ctx->Add(SignatureByArg(*ctx,
                          {{"x", SplitSbp(1)},
                           {"gamma", s0},
                           {"beta", s0},
                           {"moving_mean", s0},
                           {"moving_variance", s0}},
                          {{"y", SplitSbp(1)}, {"mean", s0}, {"inv_variance", s0}}));
  return Status::OK();
}

Status BatchNormGradSbp(SbpContext* ctx) {
  const SbpParallel b = BroadcastSbp(), s0 = SplitSbp(0), p = PartialSumSbp();
  for (int64_t axis : NonChannelSplitAxes(*ctx)) {
    std::map<std::string, SbpParallel> inputs;
    for (const char* arg : {"mean", "inv_variance", "gamma", "dmean", "dinv_variance"}) {
      inputs[arg] = b;
    }
    inputs["dy"] = inputs["x"] = SplitSbp(axis);
    ctx->Add(SignatureByArg(*ctx, inputs, {{"dx", SplitSbp(axis)}, {"dgamma", p}, {"dbeta", p}}));
  }
  std::map<std::string, SbpParallel> inputs;
  for (const char* arg : {"mean", "inv_variance", "gamma", "dmean", "dinv_variance"}) {
    inputs[arg] = s0;
  }
  inputs["dy"] = inputs["x"] = SplitSbp(1);
  ctx->Add(SignatureByArg(*ctx, inputs, {{"dx", SplitSbp(1)}, {"dgamma", s0}, {"dbeta", s0}}));
  return Status::OK();
}

// One grad op takes y's gradient and, in training, the gradients of the
// batch statistics (optional inputs). The running statistics get none.
Status BatchNormGradRule(GradContext* ctx) {
  const bool training = ctx->attrs().GetBoolOr("training", true);
  return NormalizationGradRule(ctx, "batch_norm", training, [&](OpConfBuilder* builder) {
    builder->Attr("training", training);
    builder->Attr("epsilon", ctx->attrs().GetFloatOr("epsilon", 1e-5));
  });
}

REGISTER_OP("batch_norm")
    .Input("x")
    .Input("gamma")
    .Input("beta")
    .MutableInput("moving_mean")
    .MutableInput("moving_variance")
    .Output("y")
    .Output("mean")
    .Output("inv_variance")
    .Infer(InferBatchNorm)
    .Sbp(BatchNormSbp)
    .Grad(BatchNormGradRule);
// The grad op's arguments are those NormalizationGradRule writes (op_util.h).
const OpRegistrar kBatchNormGradDef =
    NormalizationGradOpDef("batch_norm").Infer(InferBatchNormGrad).Sbp(BatchNormGradSbp);

}  // namespace
}  // namespace nn
}  // namespace oflite
