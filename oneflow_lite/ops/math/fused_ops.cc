// Fused ops the compiler substitutes for chains of plain ops
// (compiler/fusion.h); users never build them. No gradient rule: fusion runs
// on the full training job, after autodiff.
//   bias_add_relu(a, b; axis) -> y = relu(bias_add(a, b; axis))
//   matmul_bias(a, b, bias; transpose_a, transpose_b) -> out =
//       bias_add(matmul(a, b), bias; axis -1), for a matmul that is one GEMM
//       (MatmulGeometry::FoldsIntoRows: b one matrix, the Linear case) with
//       alpha 1; the CPU kernel adds the bias in the GEMM's epilogue
//   gelu_and_derivative(x) -> y = gelu(x), dydx = d gelu / dx (erf form):
//       replaces a gelu and its gelu_grad(dy, x), which becomes mul(dy,
//       dydx); the CPU kernel gives gelu's bits and dydx such that dy * dydx
//       is gelu_grad's dx bit for bit
#include "oneflow_lite/ops/math/math_util.h"
#include "oneflow_lite/ops/math/matmul_util.h"

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

Status InferMatmulBias(InferContext* ctx) {
  RETURN_IF_ERROR(CheckOptionalAttrTypes(ctx->op(), {{"transpose_a", AttrValue::kB},
                                                     {"transpose_b", AttrValue::kB},
                                                     {"fused_from", AttrValue::kS}}));
  const TensorDesc& a = ctx->Input("a");
  const TensorDesc& b = ctx->Input("b");
  const TensorDesc& bias = ctx->Input("bias");
  StatusOr<MatmulGeometry> geometry =
      MakeMatmulGeometry(a.shape, b.shape, ctx->attrs().GetBoolOr("transpose_a", false),
                         ctx->attrs().GetBoolOr("transpose_b", false), /*sum_batch=*/false);
  if (!geometry.ok()) return ctx->Error(geometry.status().message());
  if (b.shape.rank() != 2 || !geometry->FoldsIntoRows()) {
    return ctx->Error("needs one GEMM: a 2-D b and an untransposed a when a is batched; got ",
                      Describe("a", a), " and ", Describe("b", b));
  }
  if (bias.shape.rank() != 1 || bias.shape.dim(0) != geometry->n) {
    return ctx->Error("bias must be 1-D of length n = ", geometry->n, ": ", Describe("bias", bias));
  }
  if (a.dtype != b.dtype || a.dtype != bias.dtype || (a.dtype != DT_FLOAT && a.dtype != DT_DOUBLE)) {
    return ctx->Error("needs float32/float64 a, b and bias of one dtype: ", Describe("a", a), ", ",
                      Describe("b", b), " and ", Describe("bias", bias));
  }
  *ctx->Output("out") = TensorDesc(geometry->out, a.dtype);
  return Status::OK();
}

// matmul's signatures (MatmulSbpCases) with the bias's part: broadcast
// where out is split along its rows or batch, split where out is split
// along n, a partial sum where out is one (adding every rank's share of the
// bias sums to the bias once).
Status MatmulBiasSbp(SbpContext* ctx) {
  const Shape& out = SbpOutput(*ctx, "out").shape;
  for (const MatmulSbpCase& c :
       MatmulSbpCases(SbpInput(*ctx, "a").shape, SbpInput(*ctx, "b").shape, out,
                      ctx->attrs().GetBoolOr("transpose_a", false),
                      ctx->attrs().GetBoolOr("transpose_b", false), /*sum_batch=*/false)) {
    SbpParallel bias = BroadcastSbp();
    if (IsPartialSum(c.out)) {
      bias = PartialSumSbp();
    } else if (SbpEqual(c.out, SplitSbp(out.rank() - 1))) {
      bias = SplitSbp(0);
    }
    ctx->Add(MakeSignature(ctx->op(), {{"a", c.a}, {"b", c.b}, {"bias", bias}}, {{"out", c.out}}));
  }
  return Status::OK();
}

Status InferGeluAndDerivative(InferContext* ctx) {
  RETURN_IF_ERROR(CheckOptionalAttrTypes(ctx->op(), {{"approximate", AttrValue::kS},
                                                     {"fused_from", AttrValue::kS}}));
  if (ctx->attrs().GetStringOr("approximate", "none") != "none") {
    return ctx->Error("only the erf form (approximate \"none\") is fused");
  }
  const TensorDesc& x = ctx->Input("x");
  if (x.dtype != DT_FLOAT && x.dtype != DT_DOUBLE) {
    return ctx->Error("needs float32/float64 x: ", Describe("x", x));
  }
  *ctx->Output("y") = x;
  *ctx->Output("dydx") = x;
  return Status::OK();
}

Status GeluAndDerivativeSbp(SbpContext* ctx) {
  AddAllSplitSignatures(ctx, SbpInput(*ctx, "x").shape.rank());
  return Status::OK();
}

REGISTER_OP("gelu_and_derivative")
    .Input("x")
    .Output("y")
    .Output("dydx")
    .Infer(InferGeluAndDerivative)
    .Sbp(GeluAndDerivativeSbp);

REGISTER_OP("matmul_bias")
    .Input("a")
    .Input("b")
    .Input("bias")
    .Output("out")
    .Infer(InferMatmulBias)
    .Sbp(MatmulBiasSbp);

}  // namespace
}  // namespace math
}  // namespace oflite
