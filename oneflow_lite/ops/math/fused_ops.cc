// Fused ops the compiler substitutes for chains of plain ops
// (compiler/fusion.h); users never build them. No gradient rule: fusion runs
// on the full training job, after autodiff.
//   bias_add_relu(a, b; axis) -> y = relu(bias_add(a, b; axis))
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {
namespace {

StatusOr<int64_t> FusedBiasAxis(const OpConf& op, int64_t rank) {
  const int64_t axis = AttrView(op).GetIntOr("axis", 1);
  int64_t normalized = 0;
  if (!NormalizeAxis(axis, rank, &normalized)) {
    return InvalidArgumentError("op '", op.name(), "' (bias_add_relu): axis ", axis,
                                " out of range for rank ", rank);
  }
  return normalized;
}

Status InferBiasAddRelu(InferContext* ctx) {
  RETURN_IF_ERROR(CheckOptionalAttrTypes(ctx->op(), {{"axis", AttrValue::kI},
                                                     {"fused_from", AttrValue::kS}}));
  const TensorDesc& a = ctx->Input("a");
  const TensorDesc& b = ctx->Input("b");
  ASSIGN_OR_RETURN(int64_t axis, FusedBiasAxis(ctx->op(), a.shape.rank()));
  if (b.shape.rank() != 1 || b.shape.dim(0) != a.shape.dim(axis)) {
    return ctx->Error("bias must be 1-D of length a.dim(", axis, "): ", Describe("a", a), " and ",
                      Describe("b", b));
  }
  if (a.dtype != b.dtype || (a.dtype != DT_FLOAT && a.dtype != DT_DOUBLE)) {
    return ctx->Error("needs float32/float64 a and b of one dtype: ", Describe("a", a), " and ",
                      Describe("b", b));
  }
  *ctx->Output("y") = a;
  return Status::OK();
}

// bias_add's split signatures (relu is not linear: no partial sum).
Status BiasAddReluSbp(SbpContext* ctx) {
  const int64_t rank = SbpInput(*ctx, "a").shape.rank();
  ASSIGN_OR_RETURN(int64_t axis, FusedBiasAxis(ctx->op(), rank));
  for (int64_t i = 0; i < rank; ++i) {
    const SbpParallel b_sbp = i == axis ? SplitSbp(0) : BroadcastSbp();
    ctx->Add(MakeSignature(ctx->op(), {{"a", SplitSbp(i)}, {"b", b_sbp}}, {{"y", SplitSbp(i)}}));
  }
  return Status::OK();
}

REGISTER_OP("bias_add_relu")
    .Input("a")
    .Input("b")
    .Output("y")
    .Infer(InferBiasAddRelu)
    .Sbp(BiasAddReluSbp);

}  // namespace
}  // namespace math
}  // namespace oflite
