// Layout ops: reshape, reshape_like, flatten, transpose, concat, slice and
// slice_grad.
#include <algorithm>

#include "oneflow_lite/ops/math/math_util.h"

namespace oflite {
namespace math {
namespace {

// ---- reshape family ----

StatusOr<Shape> ResolveReshape(InferContext* ctx, const TensorDesc& x, const Shape& target) {
  int64_t known = 1, unknown_axis = -1;
  std::vector<int64_t> dims = target.dims();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (unknown_axis >= 0) return ctx->Error("shape ", target, " has more than one -1");
      unknown_axis = static_cast<int64_t>(i);
    } else if (dims[i] < 0) {
      return ctx->Error("shape ", target, " has a negative dimension");
    } else {
      known *= dims[i];
    }
  }
  const int64_t count = x.shape.elem_count();
  if (unknown_axis >= 0) {
    if (known == 0 || count % known != 0) {
      return ctx->Error("cannot reshape ", Describe("x", x), " to ", target);
    }
    dims[unknown_axis] = count / known;
  } else if (known != count) {
    return ctx->Error("cannot reshape ", Describe("x", x), " (", count, " elements) to ", target,
                      " (", known, " elements)");
  }
  return Shape(dims);
}

Status InferReshape(InferContext* ctx) {
  const TensorDesc& x = ctx->Input("x");
  ASSIGN_OR_RETURN(Shape target, ctx->attrs().GetShape("shape"));
  ASSIGN_OR_RETURN(Shape out, ResolveReshape(ctx, x, target));
  *ctx->Output("y") = TensorDesc(out, x.dtype);
  return Status::OK();
}

Status InferReshapeLike(InferContext* ctx) {
  const TensorDesc& x = ctx->Input("x");
  const TensorDesc& like = ctx->Input("like");
  if (x.shape.elem_count() != like.shape.elem_count()) {
    return ctx->Error("element counts differ: ", Describe("x", x), " and ", Describe("like", like));
  }
  *ctx->Output("y") = TensorDesc(like.shape, x.dtype);
  return Status::OK();
}

Status InferFlatten(InferContext* ctx) {
  RETURN_IF_ERROR(CheckOptionalAttrTypes(
      ctx->op(), {{"start_dim", AttrValue::kI}, {"end_dim", AttrValue::kI}}));
  const TensorDesc& x = ctx->Input("x");
  const int64_t rank = x.shape.rank();
  if (rank == 0) {
    *ctx->Output("y") = TensorDesc(Shape({1}), x.dtype);
    return Status::OK();
  }
  int64_t start = 0, end = 0;
  const int64_t start_attr = ctx->attrs().GetIntOr("start_dim", 1);
  const int64_t end_attr = ctx->attrs().GetIntOr("end_dim", -1);
  if (!NormalizeAxis(start_attr, rank, &start) || !NormalizeAxis(end_attr, rank, &end) ||
      start > end) {
    return ctx->Error("invalid start_dim ", start_attr, " / end_dim ", end_attr, " for ",
                      Describe("x", x));
  }
  std::vector<int64_t> dims(x.shape.dims().begin(), x.shape.dims().begin() + start);
  dims.push_back(x.shape.Count(start, end + 1));
  dims.insert(dims.end(), x.shape.dims().begin() + end + 1, x.shape.dims().end());
  *ctx->Output("y") = TensorDesc(Shape(dims), x.dtype);
  return Status::OK();
}

// S(i) -> S(j) where a split of x along i is a split of y along j.
Status ReshapeSbp(SbpContext* ctx) {
  const Shape& in = SbpInput(*ctx, "x").shape;
  const Shape& out = SbpOutput(*ctx, "y").shape;
  for (auto [i, j] : ReshapeSplitAxes(in, out, ctx->parallel_num())) {
    ctx->Add(MakeSignature(ctx->op(), {{"x", SplitSbp(i)}}, {{"y", SplitSbp(j)}}));
  }
  AddPartialSignature(ctx, {"x"});
  return Status::OK();
}

Status ReshapeLikeSbp(SbpContext* ctx) {
  const Shape& in = SbpInput(*ctx, "x").shape;
  const Shape& out = SbpInput(*ctx, "like").shape;
  for (auto [i, j] : ReshapeSplitAxes(in, out, ctx->parallel_num())) {
    ctx->Add(MakeSignature(ctx->op(), {{"x", SplitSbp(i)}, {"like", SplitSbp(j)}},
                           {{"y", SplitSbp(j)}}));
  }
  AddPartialSignature(ctx, {"x"});
  return Status::OK();
}

// dx = reshape_like(dy, x).
Status ReshapeGrad(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("y");
  if (dy.empty() || !ctx->NeedsInputGrad("x")) return Status::OK();
  ASSIGN_OR_RETURN(std::string dx, AddGradOp(ctx,
                                             OpConfBuilder("reshape_like", GradOpName(*ctx, "grad"))
                                                 .Input("x", dy)
                                                 .Input("like", ctx->InputLbn("x"))
                                                 .Output("y")
                                                 .Build(),
                                             "y"));
  ctx->SetInputGrad("x", 0, dx);
  return Status::OK();
}

Status ReshapeLikeGrad(GradContext* ctx) {
  RETURN_IF_ERROR(SetZeroGrads(ctx, "like"));
  return ReshapeGrad(ctx);
}

// ---- transpose ----

StatusOr<std::vector<int64_t>> Permutation(const OpConf& op, const TensorDesc& x) {
  ASSIGN_OR_RETURN(std::vector<int64_t> perm, AttrView(op).GetInts("perm"));
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool valid = static_cast<int64_t>(perm.size()) == x.shape.rank();
  for (size_t i = 0; valid && i < sorted.size(); ++i) valid = sorted[i] == static_cast<int64_t>(i);
  if (!valid) {
    return InvalidArgumentError("op '", op.name(), "' (transpose): perm ", Shape(perm),
                                " is not a permutation of the axes of ", Describe("x", x));
  }
  return perm;
}

Status InferTranspose(InferContext* ctx) {
  const TensorDesc& x = ctx->Input("x");
  ASSIGN_OR_RETURN(std::vector<int64_t> perm, Permutation(ctx->op(), x));
  std::vector<int64_t> dims;
  for (int64_t p : perm) dims.push_back(x.shape.dim(p));
  *ctx->Output("y") = TensorDesc(Shape(dims), x.dtype);
  return Status::OK();
}

Status TransposeSbp(SbpContext* ctx) {
  ASSIGN_OR_RETURN(std::vector<int64_t> perm, Permutation(ctx->op(), SbpInput(*ctx, "x")));
  for (size_t j = 0; j < perm.size(); ++j) {
    ctx->Add(MakeSignature(ctx->op(), {{"x", SplitSbp(perm[j])}},
                           {{"y", SplitSbp(static_cast<int64_t>(j))}}));
  }
  AddPartialSignature(ctx, {"x"});
  return Status::OK();
}

Status TransposeGrad(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("y");
  if (dy.empty() || !ctx->NeedsInputGrad("x")) return Status::OK();
  ASSIGN_OR_RETURN(std::vector<int64_t> perm, Permutation(ctx->op(), ctx->InputDesc("x")));
  std::vector<int64_t> inverse(perm.size());
  for (size_t j = 0; j < perm.size(); ++j) inverse[perm[j]] = static_cast<int64_t>(j);
  ASSIGN_OR_RETURN(std::string dx, AddGradOp(ctx,
                                             OpConfBuilder("transpose", GradOpName(*ctx, "grad"))
                                                 .Input("x", dy)
                                                 .Output("y")
                                                 .Attr("perm", inverse)
                                                 .Build(),
                                             "y"));
  ctx->SetInputGrad("x", 0, dx);
  return Status::OK();
}

// ---- concat ----

StatusOr<int64_t> ConcatAxis(const OpConf& op, int64_t rank) {
  ASSIGN_OR_RETURN(int64_t axis, AttrView(op).GetInt("axis"));
  int64_t normalized = 0;
  if (!NormalizeAxis(axis, rank, &normalized)) {
    return InvalidArgumentError("op '", op.name(), "' (concat): axis ", axis,
                                " out of range for rank ", rank);
  }
  return normalized;
}

Status InferConcat(InferContext* ctx) {
  const TensorDesc& first = ctx->Input("in", 0);
  ASSIGN_OR_RETURN(int64_t axis, ConcatAxis(ctx->op(), first.shape.rank()));
  std::vector<int64_t> dims = first.shape.dims();
  for (int i = 1; i < ctx->InputCount("in"); ++i) {
    const TensorDesc& other = ctx->Input("in", i);
    bool compatible = other.dtype == first.dtype && other.shape.rank() == first.shape.rank();
    for (int64_t d = 0; compatible && d < first.shape.rank(); ++d) {
      compatible = d == axis || other.shape.dim(d) == first.shape.dim(d);
    }
    if (!compatible) {
      return ctx->Error("cannot concat along axis ", axis, ": ", Describe("in[0]", first), " and ",
                        Describe("in[" + std::to_string(i) + "]", other));
    }
    dims[axis] += other.shape.dim(axis);
  }
  *ctx->Output("out") = TensorDesc(Shape(dims), first.dtype);
  return Status::OK();
}

Status ConcatSbp(SbpContext* ctx) {
  const int64_t rank = SbpInput(*ctx, "in").shape.rank();
  ASSIGN_OR_RETURN(int64_t axis, ConcatAxis(ctx->op(), rank));
  for (int64_t i = 0; i < rank; ++i) {
    if (i != axis)
      ctx->Add(MakeSignature(ctx->op(), {{"in", SplitSbp(i)}}, {{"out", SplitSbp(i)}}));
  }
  AddPartialSignature(ctx, {"in"});
  return Status::OK();
}

// Each input's gradient is its slice of dy along the axis.
Status ConcatGrad(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("out");
  if (dy.empty()) return Status::OK();
  const Shape& out = ctx->OutputDesc("out").shape;
  ASSIGN_OR_RETURN(int64_t axis, ConcatAxis(ctx->op(), out.rank()));
  int64_t offset = 0;
  for (int i = 0; i < ctx->InputCount("in"); ++i) {
    const int64_t extent = ctx->InputDesc("in", i).shape.dim(axis);
    if (ctx->NeedsInputGrad("in", i)) {
      std::vector<int64_t> start(out.rank(), 0), stop = out.dims(), step(out.rank(), 1);
      start[axis] = offset;
      stop[axis] = offset + extent;
      ASSIGN_OR_RETURN(
          std::string dx,
          AddGradOp(ctx,
                    OpConfBuilder("slice", GradOpName(*ctx, "grad" + std::to_string(i)))
                        .Input("x", dy)
                        .Output("y")
                        .Attr("start", start)
                        .Attr("stop", stop)
                        .Attr("step", step)
                        .Build(),
                    "y"));
      ctx->SetInputGrad("in", i, dx);
    }
    offset += extent;
  }
  return Status::OK();
}

// ---- slice / slice_grad ----

Status InferSlice(InferContext* ctx) {
  RETURN_IF_ERROR(CheckOptionalAttrTypes(ctx->op(), {{"step", AttrValue::kInts}}));
  const TensorDesc& x = ctx->Input("x");
  ASSIGN_OR_RETURN(SliceSpec spec, NormalizeSlice(ctx->op(), x.shape));
  *ctx->Output("y") = TensorDesc(spec.out_shape, x.dtype);
  return Status::OK();
}

Status InferSliceGrad(InferContext* ctx) {
  RETURN_IF_ERROR(CheckOptionalAttrTypes(ctx->op(), {{"step", AttrValue::kInts}}));
  const TensorDesc& dy = ctx->Input("dy");
  const TensorDesc& like = ctx->Input("like");
  ASSIGN_OR_RETURN(SliceSpec spec, NormalizeSlice(ctx->op(), like.shape));
  if (dy.shape != spec.out_shape) {
    return ctx->Error(Describe("dy", dy), " is not the slice shape ", spec.out_shape, " of ",
                      Describe("like", like));
  }
  *ctx->Output("dx") = TensorDesc(like.shape, dy.dtype);
  return Status::OK();
}

// Whether axis i keeps a split under the slice: taken whole, or every
// step-th element from start < step to the end when each of n parts holds a
// multiple of step elements (then part p's slice, the same start and step
// on its own elements, is part p of the output: micro-batches,
// api/micro_batches.h). Records why not for a strided selection otherwise.
bool SliceKeepsSplit(SbpContext* ctx, const SliceSpec& spec, const Shape& in, int64_t i) {
  if (spec.IsFullAxis(i, in)) return true;
  const int64_t start = spec.start[i], step = spec.step[i], dim = in.dim(i);
  const int64_t n = ctx->parallel_num();
  if (step <= 1 || start >= step || spec.out_shape.dim(i) != (dim - start + step - 1) / step) {
    return false;
  }
  if (n <= 1) return false;
  if (dim % (n * step) == 0) return true;
  ctx->Withhold("slice '" + ctx->op().name() + "' keeps S(" + std::to_string(i) +
                ") only when axis " + std::to_string(i) + " (" + std::to_string(dim) +
                ") divides by devices x step (" + std::to_string(n) + " x " +
                std::to_string(step) + ")");
  return false;
}

// Axes taken whole (or strided row selections, above) stay split;
// everything is linear in the data.
Status SliceSbp(SbpContext* ctx, const std::string& data_arg, const std::string& shape_arg,
                const std::string& out_arg) {
  const Shape& in = SbpInput(*ctx, shape_arg).shape;
  ASSIGN_OR_RETURN(SliceSpec spec, NormalizeSlice(ctx->op(), in));
  for (int64_t i = 0; i < in.rank(); ++i) {
    if (!SliceKeepsSplit(ctx, spec, in, i)) continue;
    std::map<std::string, SbpParallel> inputs{{data_arg, SplitSbp(i)}, {shape_arg, SplitSbp(i)}};
    ctx->Add(MakeSignature(ctx->op(), inputs, {{out_arg, SplitSbp(i)}}));
  }
  AddPartialSignature(ctx, {data_arg});
  return Status::OK();
}

OpConf SliceLikeConf(GradContext* ctx, const std::string& type, const std::string& suffix) {
  OpConf conf = OpConfBuilder(type, GradOpName(*ctx, suffix)).Build();
  for (const AttrEntry& entry : ctx->op().attr()) {
    if (entry.key() == "start" || entry.key() == "stop" || entry.key() == "step") {
      *conf.add_attr() = entry;
    }
  }
  return conf;
}

Status SliceGradRule(GradContext* ctx) {
  const std::string dy = ctx->OutputGradLbn("y");
  if (dy.empty() || !ctx->NeedsInputGrad("x")) return Status::OK();
  OpConf conf = SliceLikeConf(ctx, "slice_grad", "grad");
  OpConf io = OpConfBuilder("slice_grad", conf.name())
                  .Input("dy", dy)
                  .Input("like", ctx->InputLbn("x"))
                  .Output("dx")
                  .Build();
  conf.mutable_input()->CopyFrom(io.input());
  conf.mutable_output()->CopyFrom(io.output());
  ASSIGN_OR_RETURN(std::string dx, AddGradOp(ctx, conf, "dx"));
  ctx->SetInputGrad("x", 0, dx);
  return Status::OK();
}

Status SliceGradGradRule(GradContext* ctx) {
  RETURN_IF_ERROR(SetZeroGrads(ctx, "like"));
  const std::string ddx = ctx->OutputGradLbn("dx");
  if (ddx.empty() || !ctx->NeedsInputGrad("dy")) return Status::OK();
  OpConf conf = SliceLikeConf(ctx, "slice", "grad");
  OpConf io = OpConfBuilder("slice", conf.name()).Input("x", ddx).Output("y").Build();
  conf.mutable_input()->CopyFrom(io.input());
  conf.mutable_output()->CopyFrom(io.output());
  ASSIGN_OR_RETURN(std::string g, AddGradOp(ctx, conf, "y"));
  ctx->SetInputGrad("dy", 0, g);
  return Status::OK();
}

REGISTER_OP("reshape").Input("x").Output("y").Infer(InferReshape).Sbp(ReshapeSbp).Grad(ReshapeGrad);
REGISTER_OP("reshape_like")
    .Input("x")
    .Input("like")
    .Output("y")
    .Infer(InferReshapeLike)
    .Sbp(ReshapeLikeSbp)
    .Grad(ReshapeLikeGrad);
REGISTER_OP("flatten").Input("x").Output("y").Infer(InferFlatten).Sbp(ReshapeSbp).Grad(ReshapeGrad);
REGISTER_OP("transpose")
    .Input("x")
    .Output("y")
    .Infer(InferTranspose)
    .Sbp(TransposeSbp)
    .Grad(TransposeGrad);
REGISTER_OP("concat")
    .VariadicInput("in")
    .Output("out")
    .Infer(InferConcat)
    .Sbp(ConcatSbp)
    .Grad(ConcatGrad);
REGISTER_OP("slice")
    .Input("x")
    .Output("y")
    .Infer(InferSlice)
    .Sbp([](SbpContext* ctx) { return SliceSbp(ctx, "x", "x", "y"); })
    .Grad(SliceGradRule);
REGISTER_OP("slice_grad")
    .Input("dy")
    .Input("like")
    .Output("dx")
    .Infer(InferSliceGrad)
    .Sbp([](SbpContext* ctx) { return SliceSbp(ctx, "dy", "like", "dx"); })
    .Grad(SliceGradGradRule);

}  // namespace
}  // namespace math
}  // namespace oflite
