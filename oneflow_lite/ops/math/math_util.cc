#include "oneflow_lite/ops/math/math_util.h"

#include <algorithm>

namespace oflite {
namespace math {

Status CheckOptionalAttrTypes(const OpConf& op, std::initializer_list<AttrType> attrs) {
  for (const AttrEntry& entry : op.attr()) {
    for (const AttrType& expected : attrs) {
      // An empty list may be stored without a value case.
      const AttrValue::ValueCase got = entry.value().value_case();
      if (entry.key() == expected.key && got != expected.type && got != AttrValue::VALUE_NOT_SET) {
        return InvalidArgumentError("op '", op.name(), "' (", op.op_type(), "): attribute '",
                                    entry.key(), "' has the wrong type (see docs/ops.md)");
      }
    }
  }
  return Status::OK();
}

bool NormalizeAxis(int64_t axis, int64_t rank, int64_t* normalized) {
  if (axis < -rank || axis >= rank) return false;
  *normalized = axis < 0 ? axis + rank : axis;
  return true;
}

StatusOr<std::vector<int64_t>> NormalizeAxes(const std::vector<int64_t>& axes, int64_t rank,
                                             bool empty_means_all, const std::string& where) {
  std::vector<int64_t> result;
  if (axes.empty() && empty_means_all) {
    for (int64_t i = 0; i < rank; ++i) result.push_back(i);
    return result;
  }
  for (int64_t axis : axes) {
    int64_t normalized = 0;
    if (!NormalizeAxis(axis, rank, &normalized)) {
      return InvalidArgumentError(where, "axis ", axis, " out of range for rank ", rank);
    }
    if (std::find(result.begin(), result.end(), normalized) != result.end()) {
      return InvalidArgumentError(where, "axis ", axis, " listed twice");
    }
    result.push_back(normalized);
  }
  std::sort(result.begin(), result.end());
  return result;
}

bool BroadcastShapes(const Shape& a, const Shape& b, Shape* out) {
  const int64_t rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(rank);
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t ai = i - (rank - a.rank());
    const int64_t bi = i - (rank - b.rank());
    const int64_t da = ai >= 0 ? a.dim(ai) : 1;
    const int64_t db = bi >= 0 ? b.dim(bi) : 1;
    if (da != db && da != 1 && db != 1) return false;
    dims[i] = da == 1 ? db : da;
  }
  *out = Shape(std::move(dims));
  return true;
}

bool BroadcastLikeAxisMap(const Shape& x, const Shape& like, const std::vector<int64_t>& axes,
                          std::vector<int64_t>* x_axis_of) {
  const int64_t rank = like.rank();
  x_axis_of->assign(rank, -1);
  auto listed = [&](int64_t i) { return std::find(axes.begin(), axes.end(), i) != axes.end(); };
  if (axes.empty()) {
    if (x.rank() > rank) return false;
    for (int64_t i = 0; i < rank; ++i) {
      const int64_t xi = i - (rank - x.rank());
      if (xi < 0) continue;
      if (x.dim(xi) == like.dim(i)) {
        (*x_axis_of)[i] = xi;
      } else if (x.dim(xi) != 1) {
        return false;
      }
    }
    return true;
  }
  if (x.rank() == rank) {
    for (int64_t i = 0; i < rank; ++i) {
      if (listed(i)) {
        if (x.dim(i) != 1) return false;
      } else if (x.dim(i) == like.dim(i)) {
        (*x_axis_of)[i] = i;
      } else {
        return false;
      }
    }
    return true;
  }
  if (x.rank() != rank - static_cast<int64_t>(axes.size())) return false;
  int64_t xi = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (listed(i)) continue;
    if (x.dim(xi) != like.dim(i)) return false;
    (*x_axis_of)[i] = xi++;
  }
  return true;
}

StatusOr<SliceSpec> NormalizeSlice(const OpConf& op, const Shape& in) {
  AttrView attrs(op);
  const std::string where = "op '" + op.name() + "' (" + op.op_type() + "): ";
  ASSIGN_OR_RETURN(std::vector<int64_t> start, attrs.GetInts("start"));
  ASSIGN_OR_RETURN(std::vector<int64_t> stop, attrs.GetInts("stop"));
  std::vector<int64_t> step = attrs.GetIntsOr("step", std::vector<int64_t>(in.rank(), 1));
  const size_t rank = static_cast<size_t>(in.rank());
  if (start.size() != rank || stop.size() != rank || step.size() != rank) {
    return InvalidArgumentError(where, "start/stop/step need one value per axis of ", in, ", got ",
                                start.size(), "/", stop.size(), "/", step.size());
  }
  SliceSpec spec;
  std::vector<int64_t> out_dims(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (step[i] <= 0) {
      return InvalidArgumentError(where, "step must be positive, got ", step[i], " on axis ", i);
    }
    const int64_t dim = in.dim(i);
    auto clamp = [dim](int64_t v) {
      return std::min(std::max(v < 0 ? v + dim : v, int64_t{0}), dim);
    };
    const int64_t begin = clamp(start[i]);
    const int64_t end = clamp(stop[i]);
    spec.start.push_back(begin);
    spec.step.push_back(step[i]);
    out_dims[i] = end > begin ? (end - begin + step[i] - 1) / step[i] : 0;
  }
  spec.out_shape = Shape(std::move(out_dims));
  return spec;
}

std::string Describe(const std::string& arg, const TensorDesc& desc) {
  return arg + " " + desc.ToString();
}

namespace {

void AppendArgs(const google::protobuf::RepeatedPtrField<ArgProto>& args,
                const std::map<std::string, SbpParallel>& sbps, const OpConf& op,
                std::vector<SbpParallel>* flat) {
  for (const ArgProto& arg : args) {
    auto it = sbps.find(arg.name());
    CHECK(it != sbps.end()) << "op '" << op.name() << "' (" << op.op_type()
                            << "): SBP signature misses arg " << arg.name();
    for (int i = 0; i < arg.lbn_size(); ++i) flat->push_back(it->second);
  }
}

}  // namespace

SbpSignature MakeSignature(const OpConf& op, const std::map<std::string, SbpParallel>& inputs,
                           const std::map<std::string, SbpParallel>& outputs) {
  SbpSignature sig;
  AppendArgs(op.input(), inputs, op, &sig.inputs);
  AppendArgs(op.output(), outputs, op, &sig.outputs);
  return sig;
}

namespace {

int FlatIndex(const google::protobuf::RepeatedPtrField<ArgProto>& args, const OpConf& op,
              const std::string& arg, int index) {
  int flat = 0;
  for (const ArgProto& a : args) {
    if (a.name() == arg) {
      CHECK_LT(index, a.lbn_size())
          << "op '" << op.name() << "': no arg " << arg << "[" << index << "]";
      return flat + index;
    }
    flat += a.lbn_size();
  }
  LOG(FATAL) << "op '" << op.name() << "' (" << op.op_type() << "): no arg " << arg;
  return -1;
}

}  // namespace

const TensorDesc& SbpInput(const SbpContext& ctx, const std::string& arg, int index) {
  return ctx.inputs().at(FlatIndex(ctx.op().input(), ctx.op(), arg, index));
}

const TensorDesc& SbpOutput(const SbpContext& ctx, const std::string& arg, int index) {
  return ctx.outputs().at(FlatIndex(ctx.op().output(), ctx.op(), arg, index));
}

void AddAllSplitSignatures(SbpContext* ctx, int64_t rank) {
  for (int64_t axis = 0; axis < rank; ++axis) {
    SbpSignature sig;
    sig.inputs.assign(ctx->inputs().size(), SplitSbp(axis));
    sig.outputs.assign(ctx->outputs().size(), SplitSbp(axis));
    ctx->Add(std::move(sig));
  }
}

void AddPartialSignature(SbpContext* ctx, const std::vector<std::string>& partial_inputs) {
  std::map<std::string, SbpParallel> inputs, outputs;
  for (const ArgProto& arg : ctx->op().input()) {
    const bool partial =
        std::find(partial_inputs.begin(), partial_inputs.end(), arg.name()) != partial_inputs.end();
    inputs[arg.name()] = partial ? PartialSumSbp() : BroadcastSbp();
  }
  for (const ArgProto& arg : ctx->op().output()) outputs[arg.name()] = PartialSumSbp();
  ctx->Add(MakeSignature(ctx->op(), inputs, outputs));
}

void AddBroadcastSplits(SbpContext* ctx, const std::vector<std::string>& operands,
                        const std::string& out_arg,
                        const std::map<std::string, SbpParallel>& fixed) {
  const Shape& out = SbpOutput(*ctx, out_arg).shape;
  for (int64_t i = 0; i < out.rank(); ++i) {
    std::map<std::string, SbpParallel> inputs = fixed;
    bool split = false;
    for (const std::string& arg : operands) {
      const Shape& s = SbpInput(*ctx, arg).shape;
      const int64_t axis = i - (out.rank() - s.rank());
      if (axis >= 0 && s.dim(axis) == out.dim(i)) {
        inputs[arg] = SplitSbp(axis);
        split = true;
      } else {
        inputs[arg] = BroadcastSbp();
      }
    }
    if (split) ctx->Add(MakeSignature(ctx->op(), inputs, {{out_arg, SplitSbp(i)}}));
  }
}

std::vector<std::pair<int64_t, int64_t>> ReshapeSplitAxes(const Shape& in, const Shape& out,
                                                          int64_t parallel_num) {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  int64_t in_prefix = 1;
  for (int64_t i = 0; i < in.rank(); ++i) {
    int64_t out_prefix = 1;
    for (int64_t j = 0; j < out.rank(); ++j) {
      if (out_prefix == in_prefix) {
        const int64_t a = in.dim(i), b = out.dim(j);
        const bool even = parallel_num > 0 && a % parallel_num == 0 && b % parallel_num == 0;
        if (a == b || even) pairs.emplace_back(i, j);
      }
      out_prefix *= out.dim(j);
    }
    in_prefix *= in.dim(i);
  }
  return pairs;
}

StatusOr<std::string> AddGradOp(GradContext* ctx, const OpConf& op, const std::string& out_arg) {
  ASSIGN_OR_RETURN(std::string name, ctx->AddOp(op));
  return OutputLbn(name, out_arg);
}

std::string GradOpName(const GradContext& ctx, const std::string& suffix) {
  return ctx.op().name() + "-" + suffix;
}

StatusOr<std::string> AddBinaryGradOp(GradContext* ctx, const std::string& type,
                                      const std::string& x, const std::string& y,
                                      const std::string& suffix) {
  return AddGradOp(ctx,
                   OpConfBuilder(type, GradOpName(*ctx, suffix))
                       .Input("x", x)
                       .Input("y", y)
                       .Output("out")
                       .Build(),
                   "out");
}

StatusOr<std::string> AddScalarMulGradOp(GradContext* ctx, const std::string& in, double value,
                                         const std::string& suffix) {
  return AddGradOp(ctx,
                   OpConfBuilder("scalar_mul", GradOpName(*ctx, suffix))
                       .Input("in", in)
                       .Output("out")
                       .Attr("value", value)
                       .Build(),
                   "out");
}

StatusOr<std::string> SumToInputShape(GradContext* ctx, const std::string& grad,
                                      const Shape& grad_shape, const std::string& arg) {
  const Shape& target = ctx->InputDesc(arg).shape;
  if (target == grad_shape) return grad;
  const int64_t lead = grad_shape.rank() - target.rank();
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < grad_shape.rank(); ++i) {
    if (i < lead || (target.dim(i - lead) == 1 && grad_shape.dim(i) != 1)) axes.push_back(i);
  }
  std::string summed = grad;
  if (!axes.empty()) {
    ASSIGN_OR_RETURN(summed, AddGradOp(ctx,
                                       OpConfBuilder("reduce_sum", GradOpName(*ctx, arg + "_sum"))
                                           .Input("x", grad)
                                           .Output("y")
                                           .Attr("axis", axes)
                                           .Attr("keepdims", true)
                                           .Build(),
                                       "y"));
  }
  return AddGradOp(ctx,
                   OpConfBuilder("reshape_like", GradOpName(*ctx, arg + "_reshape"))
                       .Input("x", summed)
                       .Input("like", ctx->InputLbn(arg))
                       .Output("y")
                       .Build(),
                   "y");
}

Status SetZeroGrads(GradContext* ctx, const std::string& arg) {
  for (int i = 0; i < ctx->InputCount(arg); ++i) {
    if (!ctx->NeedsInputGrad(arg, i)) continue;
    ASSIGN_OR_RETURN(std::string zeros,
                     AddGradOp(ctx,
                               OpConfBuilder("zeros_like", GradOpName(*ctx, arg + "_zero"))
                                   .Input("like", ctx->InputLbn(arg, i))
                                   .Output("out")
                                   .Build(),
                               "out"));
    ctx->SetInputGrad(arg, i, zeros);
  }
  return Status::OK();
}

}  // namespace math
}  // namespace oflite
