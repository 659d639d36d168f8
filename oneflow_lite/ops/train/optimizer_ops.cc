// Optimizer update ops (sgd_update, momentum_update, adam_update),
// clip_scale, and the two halves of clip_scale for sharded gradients
// (square_sum, clip_scale_from_square_sum) (docs/ops.md, "train family").
// Update ops write their mutable inputs in place and have no outputs.
#include <algorithm>
#include <string>
#include <vector>

#include "oneflow_lite/ops/op_def.h"
#include "oneflow_lite/ops/sbp.h"
#include "oneflow_lite/ops/train/optimizer_config.h"

namespace oflite {
namespace {

// model, model_diff and every state input share one float desc; the
// optional scale is a one-element tensor of that dtype.
Status InferUpdate(InferContext* ctx, const std::vector<std::string>& state_args) {
  const TensorDesc& model = ctx->Input("model");
  if (model.dtype != DT_FLOAT && model.dtype != DT_DOUBLE) {
    return ctx->Error("model must be float32 or float64, got ", model.ToString());
  }
  std::vector<std::string> same_as_model = {"model_diff"};
  same_as_model.insert(same_as_model.end(), state_args.begin(), state_args.end());
  for (const std::string& arg : same_as_model) {
    const TensorDesc& desc = ctx->Input(arg);
    if (desc.shape != model.shape || desc.dtype != model.dtype) {
      return ctx->Error(arg, " ", desc.ToString(), " does not match model ", model.ToString());
    }
  }
  if (ctx->InputCount("scale") > 0) {
    const TensorDesc& scale = ctx->Input("scale");
    if (scale.shape.elem_count() != 1 || scale.dtype != model.dtype) {
      return ctx->Error("scale must be a one-element ", DataTypeName(model.dtype), " tensor, got ",
                        scale.ToString());
    }
  }
  StatusOr<OptimizerAttrs> attrs = OptimizerAttrsFromOp(ctx->op());
  return attrs.status();
}

// Elementwise: model, diff and states split on the same axis, scale broadcast.
Status UpdateSbp(SbpContext* ctx) {
  const Shape& shape = ctx->inputs().at(0).shape;
  for (int64_t axis = 0; axis < shape.rank(); ++axis) {
    if (shape.dim(axis) < ctx->parallel_num()) continue;
    SbpSignature sig;
    for (const ArgProto& arg : ctx->op().input()) {
      for (int i = 0; i < arg.lbn_size(); ++i) {
        sig.inputs.push_back(arg.name() == "scale" ? BroadcastSbp() : SplitSbp(axis));
      }
    }
    ctx->Add(std::move(sig));
  }
  return Status::OK();
}

// Every "in" of one float dtype (float32 or float64), returned.
StatusOr<DataType> CommonFloatInputDtype(InferContext* ctx) {
  const DataType dtype = ctx->Input("in").dtype;
  if (dtype != DT_FLOAT && dtype != DT_DOUBLE) {
    return ctx->Error("in must be float32 or float64, got ", DataTypeName(dtype));
  }
  for (int i = 1; i < ctx->InputCount("in"); ++i) {
    if (ctx->Input("in", i).dtype != dtype) {
      return ctx->Error("in[", i, "] is ", DataTypeName(ctx->Input("in", i).dtype), ", in[0] is ",
                        DataTypeName(dtype));
    }
  }
  return dtype;
}

Status InferClipScale(InferContext* ctx) {
  ASSIGN_OR_RETURN(const DataType dtype, CommonFloatInputDtype(ctx));
  ASSIGN_OR_RETURN(double max_norm, ctx->attrs().GetFloat("max_norm"));
  if (!(max_norm > 0.0)) return ctx->Error("max_norm must be > 0, got ", max_norm);
  *ctx->Output("out") = TensorDesc(Shape{}, dtype);
  return Status::OK();
}

// Every "in" of one float dtype; out is a float64 scalar.
Status InferSquareSum(InferContext* ctx) {
  RETURN_IF_ERROR(CommonFloatInputDtype(ctx).status());
  *ctx->Output("out") = TensorDesc(Shape{}, DT_DOUBLE);
  return Status::OK();
}

// A sum of squares over split inputs is a partial sum: each device adds the
// squares of its slices. Offered: every input on its ShardAxis (the layout
// the sharded optimizer gives gradients), and every input on one common
// axis; both -> P. (B -> B is the compiler's all-broadcast.)
Status SquareSumSbp(SbpContext* ctx) {
  const int64_t n = ctx->parallel_num();
  SbpSignature shard;
  for (const TensorDesc& in : ctx->inputs()) {
    const int64_t axis = ShardAxis(in.shape, n);
    if (axis < 0) {
      ctx->Withhold("inputs on their shard axes: input " + in.ToString() + " has no axis of " +
                    std::to_string(n) + " or more rows");
      shard.inputs.clear();
      break;
    }
    shard.inputs.push_back(SplitSbp(axis));
  }
  if (!shard.inputs.empty()) {
    shard.outputs = {PartialSumSbp()};
    ctx->Add(std::move(shard));
  }
  int64_t max_rank = 0;
  for (const TensorDesc& in : ctx->inputs()) max_rank = std::max(max_rank, in.shape.rank());
  for (int64_t axis = 0; axis < max_rank; ++axis) {
    SbpSignature sig;
    for (const TensorDesc& in : ctx->inputs()) {
      if (axis >= in.shape.rank() || in.shape.dim(axis) < n) break;
      sig.inputs.push_back(SplitSbp(axis));
    }
    if (sig.inputs.size() != ctx->inputs().size()) continue;
    sig.outputs = {PartialSumSbp()};
    ctx->Add(std::move(sig));
  }
  return Status::OK();
}

// square_sum: float64 scalars; out: one scalar of the `dtype` attribute.
Status InferClipScaleFromSquareSum(InferContext* ctx) {
  for (int i = 0; i < ctx->InputCount("square_sum"); ++i) {
    const TensorDesc& in = ctx->Input("square_sum", i);
    if (in.dtype != DT_DOUBLE || in.shape.elem_count() != 1) {
      return ctx->Error("square_sum[", i, "] must be a float64 scalar, got ", in.ToString());
    }
  }
  ASSIGN_OR_RETURN(double max_norm, ctx->attrs().GetFloat("max_norm"));
  if (!(max_norm > 0.0)) return ctx->Error("max_norm must be > 0, got ", max_norm);
  ASSIGN_OR_RETURN(DataType dtype, ctx->attrs().GetDataType("dtype"));
  if (dtype != DT_FLOAT && dtype != DT_DOUBLE) {
    return ctx->Error("dtype must be float32 or float64, got ", DataTypeName(dtype));
  }
  *ctx->Output("out") = TensorDesc(Shape{}, dtype);
  return Status::OK();
}

REGISTER_OP("sgd_update")
    .MutableInput("model")
    .Input("model_diff")
    .OptionalInput("scale")
    .NoGrad()
    .Infer([](InferContext* ctx) { return InferUpdate(ctx, {}); })
    .Sbp(UpdateSbp);

REGISTER_OP("momentum_update")
    .MutableInput("model")
    .Input("model_diff")
    .MutableInput("momentum")
    .OptionalInput("scale")
    .NoGrad()
    .Infer([](InferContext* ctx) { return InferUpdate(ctx, {"momentum"}); })
    .Sbp(UpdateSbp);

REGISTER_OP("adam_update")
    .MutableInput("model")
    .Input("model_diff")
    .MutableInput("m")
    .MutableInput("v")
    .OptionalInput("scale")
    .NoGrad()
    .Infer([](InferContext* ctx) {
      return InferUpdate(ctx, {"m", "v"});
    })
    .Sbp(UpdateSbp);

REGISTER_OP("clip_scale").VariadicInput("in").Output("out").NoGrad().Infer(InferClipScale);

REGISTER_OP("square_sum")
    .VariadicInput("in")
    .Output("out")
    .NoGrad()
    .Infer(InferSquareSum)
    .Sbp(SquareSumSbp);

REGISTER_OP("clip_scale_from_square_sum")
    .VariadicInput("square_sum")
    .Output("out")
    .NoGrad()
    .Infer(InferClipScaleFromSquareSum);

}  // namespace
}  // namespace oflite
