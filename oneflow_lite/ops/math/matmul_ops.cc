// matmul and bias_add: definitions, SBP signatures and gradient rules.
#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {
namespace {

Status InferMatmul(InferContext* ctx) {
  RETURN_IF_ERROR(CheckOptionalAttrTypes(
      ctx->op(),
      {{"transpose_a", AttrValue::kB}, {"transpose_b", AttrValue::kB}, {"alpha", AttrValue::kF}}));
  const TensorDesc& a = ctx->Input("a");
  const TensorDesc& b = ctx->Input("b");
  const bool transpose_a = ctx->attrs().GetBoolOr("transpose_a", false);
  const bool transpose_b = ctx->attrs().GetBoolOr("transpose_b", false);
  if (a.shape.rank() != 2 || b.shape.rank() != 2) {
    return ctx->Error("matmul needs 2-D inputs, got ", Describe("a", a), " and ", Describe("b", b));
  }
  if (a.dtype != b.dtype) {
    return ctx->Error("dtype mismatch: ", Describe("a", a), " and ", Describe("b", b));
  }
  const int64_t m = a.shape.dim(transpose_a ? 1 : 0);
  const int64_t k = a.shape.dim(transpose_a ? 0 : 1);
  const int64_t kb = b.shape.dim(transpose_b ? 1 : 0);
  const int64_t n = b.shape.dim(transpose_b ? 0 : 1);
  if (k != kb) {
    return ctx->Error("inner dimensions differ: ", Describe("a", a),
                      transpose_a ? " (transposed)" : "", " and ", Describe("b", b),
                      transpose_b ? " (transposed)" : "", " give k = ", k, " vs ", kb);
  }
  *ctx->Output("out") = TensorDesc(Shape({m, n}), a.dtype);
  return Status::OK();
}

// out = alpha * op(a) * op(b), op(a) = [m, k], op(b) = [k, n].
Status MatmulSbp(SbpContext* ctx) {
  const bool transpose_a = ctx->attrs().GetBoolOr("transpose_a", false);
  const bool transpose_b = ctx->attrs().GetBoolOr("transpose_b", false);
  const int64_t a_m = transpose_a ? 1 : 0, a_k = transpose_a ? 0 : 1;
  const int64_t b_k = transpose_b ? 1 : 0, b_n = transpose_b ? 0 : 1;
  const OpConf& op = ctx->op();
  ctx->Add(
      MakeSignature(op, {{"a", SplitSbp(a_m)}, {"b", BroadcastSbp()}}, {{"out", SplitSbp(0)}}));
  ctx->Add(
      MakeSignature(op, {{"a", BroadcastSbp()}, {"b", SplitSbp(b_n)}}, {{"out", SplitSbp(1)}}));
  ctx->Add(
      MakeSignature(op, {{"a", SplitSbp(a_k)}, {"b", SplitSbp(b_k)}}, {{"out", PartialSumSbp()}}));
  ctx->Add(MakeSignature(op, {{"a", PartialSumSbp()}, {"b", BroadcastSbp()}},
                         {{"out", PartialSumSbp()}}));
  ctx->Add(MakeSignature(op, {{"a", BroadcastSbp()}, {"b", PartialSumSbp()}},
                         {{"out", PartialSumSbp()}}));
  return Status::OK();
}

OpConf MatmulConf(const std::string& name, const std::string& a, const std::string& b,
                  bool transpose_a, bool transpose_b, double alpha) {
  return OpConfBuilder("matmul", name)
      .Input("a", a)
      .Input("b", b)
      .Output("out")
      .Attr("transpose_a", transpose_a)
      .Attr("transpose_b", transpose_b)
      .Attr("alpha", alpha)
      .Build();
}

// With A = op(a), B = op(b): dA = alpha * dy * B^T, dB = alpha * A^T * dy.
Status MatmulGrad(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("out");
  if (dy.empty()) return Status::OK();
  const bool ta = ctx->attrs().GetBoolOr("transpose_a", false);
  const bool tb = ctx->attrs().GetBoolOr("transpose_b", false);
  const double alpha = ctx->attrs().GetFloatOr("alpha", 1.0);
  const std::string& a = ctx->InputLbn("a");
  const std::string& b = ctx->InputLbn("b");
  if (ctx->NeedsInputGrad("a")) {
    // ta: da = dA^T = alpha * B * dy^T.
    OpConf conf = ta ? MatmulConf(GradOpName(*ctx, "grad_a"), b, dy, tb, true, alpha)
                     : MatmulConf(GradOpName(*ctx, "grad_a"), dy, b, false, !tb, alpha);
    ASSIGN_OR_RETURN(std::string da, AddGradOp(ctx, conf, "out"));
    ctx->SetInputGrad("a", 0, da);
  }
  if (ctx->NeedsInputGrad("b")) {
    // tb: db = dB^T = alpha * dy^T * A.
    OpConf conf = tb ? MatmulConf(GradOpName(*ctx, "grad_b"), dy, a, true, ta, alpha)
                     : MatmulConf(GradOpName(*ctx, "grad_b"), a, dy, !ta, false, alpha);
    ASSIGN_OR_RETURN(std::string db, AddGradOp(ctx, conf, "out"));
    ctx->SetInputGrad("b", 0, db);
  }
  return Status::OK();
}

StatusOr<int64_t> BiasAxis(const OpConf& op, int64_t rank) {
  const int64_t axis = AttrView(op).GetIntOr("axis", 1);
  int64_t normalized = 0;
  if (!NormalizeAxis(axis, rank, &normalized)) {
    return InvalidArgumentError("op '", op.name(), "' (bias_add): axis ", axis,
                                " out of range for rank ", rank);
  }
  return normalized;
}

Status InferBiasAdd(InferContext* ctx) {
  RETURN_IF_ERROR(CheckOptionalAttrTypes(ctx->op(), {{"axis", AttrValue::kI}}));
  const TensorDesc& a = ctx->Input("a");
  const TensorDesc& b = ctx->Input("b");
  ASSIGN_OR_RETURN(int64_t axis, BiasAxis(ctx->op(), a.shape.rank()));
  if (b.shape.rank() != 1 || b.shape.dim(0) != a.shape.dim(axis)) {
    return ctx->Error("bias must be 1-D of length a.dim(", axis, "): ", Describe("a", a), " and ",
                      Describe("b", b));
  }
  if (a.dtype != b.dtype) {
    return ctx->Error("dtype mismatch: ", Describe("a", a), " and ", Describe("b", b));
  }
  *ctx->Output("out") = a;
  return Status::OK();
}

Status BiasAddSbp(SbpContext* ctx) {
  const int64_t rank = SbpInput(*ctx, "a").shape.rank();
  ASSIGN_OR_RETURN(int64_t axis, BiasAxis(ctx->op(), rank));
  for (int64_t i = 0; i < rank; ++i) {
    const SbpParallel b_sbp = i == axis ? SplitSbp(0) : BroadcastSbp();
    ctx->Add(MakeSignature(ctx->op(), {{"a", SplitSbp(i)}, {"b", b_sbp}}, {{"out", SplitSbp(i)}}));
  }
  ctx->Add(MakeSignature(ctx->op(), {{"a", PartialSumSbp()}, {"b", PartialSumSbp()}},
                         {{"out", PartialSumSbp()}}));
  return Status::OK();
}

Status BiasAddGrad(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("out");
  if (dy.empty()) return Status::OK();
  if (ctx->NeedsInputGrad("a")) ctx->SetInputGrad("a", 0, dy);
  if (ctx->NeedsInputGrad("b")) {
    const int64_t rank = ctx->InputDesc("a").shape.rank();
    if (rank == 1) {
      ctx->SetInputGrad("b", 0, dy);
      return Status::OK();
    }
    ASSIGN_OR_RETURN(int64_t axis, BiasAxis(ctx->op(), rank));
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < rank; ++i) {
      if (i != axis) axes.push_back(i);
    }
    ASSIGN_OR_RETURN(std::string db,
                     AddGradOp(ctx,
                               OpConfBuilder("reduce_sum", GradOpName(*ctx, "grad_b"))
                                   .Input("x", dy)
                                   .Output("y")
                                   .Attr("axis", axes)
                                   .Attr("keepdims", false)
                                   .Build(),
                               "y"));
    ctx->SetInputGrad("b", 0, db);
  }
  return Status::OK();
}

REGISTER_OP("matmul")
    .Input("a")
    .Input("b")
    .Output("out")
    .Infer(InferMatmul)
    .Sbp(MatmulSbp)
    .Grad(MatmulGrad);
REGISTER_OP("bias_add")
    .Input("a")
    .Input("b")
    .Output("out")
    .Infer(InferBiasAdd)
    .Sbp(BiasAddSbp)
    .Grad(BiasAddGrad);

}  // namespace
}  // namespace math
}  // namespace oflite
