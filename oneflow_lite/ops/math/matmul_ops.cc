// matmul and bias_add: definitions, SBP signatures and gradient rules.
#include "oneflow_lite/ops/math/math_util.h"
#include "oneflow_lite/ops/math/matmul_util.h"

namespace oflite {
namespace math {
namespace {

Status InferMatmul(InferContext* ctx) {
  RETURN_IF_ERROR(CheckOptionalAttrTypes(ctx->op(), {{"transpose_a", AttrValue::kB},
                                                     {"transpose_b", AttrValue::kB},
                                                     {"alpha", AttrValue::kF},
                                                     {"sum_batch", AttrValue::kB}}));
  const TensorDesc& a = ctx->Input("a");
  const TensorDesc& b = ctx->Input("b");
  StatusOr<MatmulGeometry> geometry = MakeMatmulGeometry(
      a.shape, b.shape, ctx->attrs().GetBoolOr("transpose_a", false),
      ctx->attrs().GetBoolOr("transpose_b", false), ctx->attrs().GetBoolOr("sum_batch", false));
  if (!geometry.ok()) return ctx->Error(geometry.status().message());
  if (a.dtype != b.dtype) {
    return ctx->Error("dtype mismatch: ", Describe("a", a), " and ", Describe("b", b));
  }
  *ctx->Output("out") = TensorDesc(geometry->out, a.dtype);
  return Status::OK();
}

// out = alpha * op(a) * op(b): MatmulSbpCases (matmul_util.h).
Status MatmulSbp(SbpContext* ctx) {
  for (const MatmulSbpCase& c :
       MatmulSbpCases(SbpInput(*ctx, "a").shape, SbpInput(*ctx, "b").shape,
                      SbpOutput(*ctx, "out").shape, ctx->attrs().GetBoolOr("transpose_a", false),
                      ctx->attrs().GetBoolOr("transpose_b", false),
                      ctx->attrs().GetBoolOr("sum_batch", false))) {
    ctx->Add(MakeSignature(ctx->op(), {{"a", c.a}, {"b", c.b}}, {{"out", c.out}}));
  }
  return Status::OK();
}

OpConf MatmulConf(const std::string& name, const std::string& a, const std::string& b,
                  bool transpose_a, bool transpose_b, double alpha, bool sum_batch = false) {
  OpConfBuilder builder("matmul", name);
  builder.Input("a", a)
      .Input("b", b)
      .Output("out")
      .Attr("transpose_a", transpose_a)
      .Attr("transpose_b", transpose_b)
      .Attr("alpha", alpha);
  // Only when set, so a 2-D job's bytes stay as they were.
  if (sum_batch) builder.Attr("sum_batch", true);
  return builder.Build();
}

Shape BatchDims(const Shape& shape) {
  return Shape(std::vector<int64_t>(shape.dims().begin(), shape.dims().end() - 2));
}

// The gradient of `input` ("a" or "b") as the matmul x * y (x, y, their
// transposes and the forward alpha given). The per-entry product has the
// input's matrix shape; its batch is the broadcast of x's and y's. Where
// that batch is the input's, this is the gradient; where the input is 2-D
// but the product batched, sum_batch sums the entries in the same matmul
// (for the Linear case's weight one GEMM over the folded batch); otherwise
// the batched product is summed back to the input's shape.
Status AddMatmulInputGrad(GradContext* ctx, const std::string& input, const std::string& suffix,
                          const std::string& x, const Shape& x_shape, bool transpose_x,
                          const std::string& y, const Shape& y_shape, bool transpose_y,
                          double alpha) {
  const Shape& target = ctx->InputDesc(input).shape;
  Shape batch;
  if (!BroadcastShapes(BatchDims(x_shape), BatchDims(y_shape), &batch)) {
    return InternalError("op '", ctx->op().name(), "' (matmul): gradient batch dims of ", x_shape,
                         " and ", y_shape, " do not broadcast");
  }
  const std::string name = GradOpName(*ctx, suffix);
  const bool whole = batch == BatchDims(target);
  const bool sum_batch = !whole && target.rank() == 2 && BatchDims(x_shape) == BatchDims(y_shape);
  ASSIGN_OR_RETURN(
      std::string grad,
      AddGradOp(ctx, MatmulConf(name, x, y, transpose_x, transpose_y, alpha, sum_batch), "out"));
  if (!whole && !sum_batch) {
    std::vector<int64_t> dims = batch.dims();
    dims.push_back(target.dim(target.rank() - 2));
    dims.push_back(target.dim(target.rank() - 1));
    ASSIGN_OR_RETURN(grad, SumToInputShape(ctx, grad, Shape(std::move(dims)), input));
  }
  ctx->SetInputGrad(input, 0, grad);
  return Status::OK();
}

// With A = op(a), B = op(b) per batch entry: dA = alpha * dy * B^T,
// dB = alpha * A^T * dy, summed over the batch dims the input is broadcast
// along (under sum_batch dy is one [m, n] matrix broadcast over the batch).
Status MatmulGrad(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("out");
  if (dy.empty()) return Status::OK();
  const bool ta = ctx->attrs().GetBoolOr("transpose_a", false);
  const bool tb = ctx->attrs().GetBoolOr("transpose_b", false);
  const double alpha = ctx->attrs().GetFloatOr("alpha", 1.0);
  const std::string& a = ctx->InputLbn("a");
  const std::string& b = ctx->InputLbn("b");
  const Shape& a_shape = ctx->InputDesc("a").shape;
  const Shape& b_shape = ctx->InputDesc("b").shape;
  const Shape& dy_shape = ctx->OutputDesc("out").shape;
  if (ctx->NeedsInputGrad("a")) {
    // ta: da = dA^T = alpha * B * dy^T.
    RETURN_IF_ERROR(
        ta ? AddMatmulInputGrad(ctx, "a", "grad_a", b, b_shape, tb, dy, dy_shape, true, alpha)
           : AddMatmulInputGrad(ctx, "a", "grad_a", dy, dy_shape, false, b, b_shape, !tb, alpha));
  }
  if (ctx->NeedsInputGrad("b")) {
    // tb: db = dB^T = alpha * dy^T * A.
    RETURN_IF_ERROR(
        tb ? AddMatmulInputGrad(ctx, "b", "grad_b", dy, dy_shape, true, a, a_shape, ta, alpha)
           : AddMatmulInputGrad(ctx, "b", "grad_b", a, a_shape, !ta, dy, dy_shape, false, alpha));
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
