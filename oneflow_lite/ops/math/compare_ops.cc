// Ops for building masks: iota (the index along one axis, in the shape of
// `like`) and the comparisons equal, not_equal, less, less_equal, greater,
// greater_equal (x, y -> out, numpy broadcasting, uint8 1/0), whose output
// is a condition for `where` (select_ops.cc). For instance a causal mask is
// greater_equal(iota(scores, -2), iota(scores, -1)).
//
// Neither kind is differentiable (a comparison is piecewise constant, iota
// reads only its input's shape): their rules give every input that needs one
// a zero gradient, so they may sit on a path from a variable to the loss.
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {
namespace {

bool IsCompared(DataType t) {
  return t == DT_FLOAT || t == DT_DOUBLE || t == DT_INT32 || t == DT_INT64;
}

StatusOr<int64_t> IotaAxis(const OpConf& op, const AttrView& attrs, int64_t rank) {
  StatusOr<int64_t> axis = attrs.GetInt("axis");
  if (!axis.ok()) {
    return InvalidArgumentError("op '", op.name(), "' (iota): needs an int attribute 'axis'");
  }
  int64_t normalized = 0;
  if (!NormalizeAxis(*axis, rank, &normalized)) {
    return InvalidArgumentError("op '", op.name(), "' (iota): axis ", *axis,
                                " is out of range for rank ", rank);
  }
  return normalized;
}

Status InferIota(InferContext* ctx) {
  const TensorDesc& like = ctx->Input("like");
  RETURN_IF_ERROR(IotaAxis(ctx->op(), ctx->attrs(), like.shape.rank()).status());
  DataType dtype = DT_INT32;
  if (ctx->attrs().Has("dtype")) {
    StatusOr<DataType> given = ctx->attrs().GetDataType("dtype");
    if (!given.ok() || !IsCompared(*given)) {
      return ctx->Error("attribute 'dtype' must be int32, int64, float32 or float64");
    }
    dtype = *given;
  }
  *ctx->Output("out") = TensorDesc(like.shape, dtype);
  return Status::OK();
}

// out[..., i, ...] = i depends on the absolute index along `axis`, so only
// the other axes may be split.
Status IotaSbp(SbpContext* ctx) {
  const int64_t rank = SbpInput(*ctx, "like").shape.rank();
  StatusOr<int64_t> axis = IotaAxis(ctx->op(), ctx->attrs(), rank);
  if (!axis.ok()) return Status::OK();
  for (int64_t i = 0; i < rank; ++i) {
    if (i != *axis)
      ctx->Add(MakeSignature(ctx->op(), {{"like", SplitSbp(i)}}, {{"out", SplitSbp(i)}}));
  }
  return Status::OK();
}

Status InferCompare(InferContext* ctx) {
  const TensorDesc& x = ctx->Input("x");
  const TensorDesc& y = ctx->Input("y");
  if (x.dtype != y.dtype || !IsCompared(x.dtype)) {
    return ctx->Error("needs x and y of one dtype (float32/float64/int32/int64): ",
                      Describe("x", x), " and ", Describe("y", y));
  }
  Shape out;
  if (!BroadcastShapes(x.shape, y.shape, &out)) {
    return ctx->Error("shapes do not broadcast: ", Describe("x", x), " and ", Describe("y", y));
  }
  *ctx->Output("out") = TensorDesc(out, DT_UINT8);
  return Status::OK();
}

Status CompareSbp(SbpContext* ctx) {
  AddBroadcastSplits(ctx, {"x", "y"}, "out");
  return Status::OK();
}

Status ZeroGradsOf(GradContext* ctx, const std::vector<std::string>& args) {
  for (const std::string& arg : args) RETURN_IF_ERROR(SetZeroGrads(ctx, arg));
  return Status::OK();
}

REGISTER_OP("iota").Input("like").Output("out").Infer(InferIota).Sbp(IotaSbp).Grad(
    [](GradContext* ctx) { return ZeroGradsOf(ctx, {"like"}); });

#define OFLITE_COMPARE_OP(type)              \
  REGISTER_OP(type)                          \
      .Input("x")                            \
      .Input("y")                            \
      .Output("out")                         \
      .Infer(InferCompare)                   \
      .Sbp(CompareSbp)                       \
      .Grad([](GradContext* ctx) {           \
        return ZeroGradsOf(ctx, {"x", "y"}); \
      })

OFLITE_COMPARE_OP("equal");
OFLITE_COMPARE_OP("not_equal");
OFLITE_COMPARE_OP("less");
OFLITE_COMPARE_OP("less_equal");
OFLITE_COMPARE_OP("greater");
OFLITE_COMPARE_OP("greater_equal");

#undef OFLITE_COMPARE_OP

}  // namespace
}  // namespace math
}  // namespace oflite
