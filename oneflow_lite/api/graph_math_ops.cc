// Graph's math ops (arithmetic, elementwise functions, reductions) and its
// shape, selection and indexing ops: one op each, named from its type
// (docs/ops.md). Activations, pooling, losses and metrics are in
// graph_nn_ops.cc.
#include <string>
#include <vector>

#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/ops/op_builder.h"

namespace oflite {

// ---- Arithmetic ------------------------------------------------------------------

Tensor Graph::MatMul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                     double alpha) {
  if (!ok() || !CheckInputs("MatMul", {&a, &b})) return {};
  return EmitOne(OpConfBuilder("matmul", UniqueName("matmul"))
                     .Input("a", a.lbn)
                     .Input("b", b.lbn)
                     .Output("out")
                     .Attr("transpose_a", transpose_a)
                     .Attr("transpose_b", transpose_b)
                     .Attr("alpha", alpha)
                     .Build());
}

Tensor Graph::BiasAdd(const Tensor& a, const Tensor& bias, int64_t axis) {
  if (!ok() || !CheckInputs("BiasAdd", {&a, &bias})) return {};
  return EmitOne(OpConfBuilder("bias_add", UniqueName("bias_add"))
                     .Input("a", a.lbn)
                     .Input("b", bias.lbn)
                     .Output("out")
                     .Attr("axis", axis)
                     .Build());
}

// Equal shapes keep the `add` (add_n) op, so existing graphs are unchanged.
Tensor Graph::Add(const Tensor& a, const Tensor& b) {
  if (a.shape() == b.shape()) return AddN({a, b});
  return Binary("Add", "broadcast_add", a, b);
}

Tensor Graph::AddN(const std::vector<Tensor>& inputs) {
  std::vector<const Tensor*> pointers;
  std::vector<std::string> lbns;
  for (const Tensor& t : inputs) {
    pointers.push_back(&t);
    lbns.push_back(t.lbn);
  }
  if (!ok() || !CheckInputs("Add", pointers)) return {};
  return EmitOne(OpConfBuilder("add", UniqueName("add")).Input("in", lbns).Output("out").Build());
}

Tensor Graph::Sub(const Tensor& x, const Tensor& y) { return Binary("Sub", "sub", x, y); }
Tensor Graph::Mul(const Tensor& x, const Tensor& y) { return Binary("Mul", "mul", x, y); }
Tensor Graph::Div(const Tensor& x, const Tensor& y) { return Binary("Div", "div", x, y); }

Tensor Graph::ScalarAdd(const Tensor& x, double value) {
  if (!ok() || !CheckInputs("ScalarAdd", {&x})) return {};
  return EmitOne(OpConfBuilder("scalar_add", UniqueName("scalar_add"))
                     .Input("in", x.lbn)
                     .Output("out")
                     .Attr("value", value)
                     .Build());
}

Tensor Graph::ScalarMul(const Tensor& x, double value) {
  if (!ok() || !CheckInputs("ScalarMul", {&x})) return {};
  return EmitOne(OpConfBuilder("scalar_mul", UniqueName("scalar_mul"))
                     .Input("in", x.lbn)
                     .Output("out")
                     .Attr("value", value)
                     .Build());
}

Tensor Graph::Pow(const Tensor& x, double exponent) {
  if (!ok() || !CheckInputs("Pow", {&x})) return {};
  return EmitOne(OpConfBuilder("scalar_pow", UniqueName("scalar_pow"))
                     .Input("in", x.lbn)
                     .Output("out")
                     .Attr("exponent", exponent)
                     .Build());
}

// ---- Elementwise functions ---------------------------------------------------------

Tensor Graph::Exp(const Tensor& x) { return Unary("exp", "x", x, "y"); }
Tensor Graph::Log(const Tensor& x) { return Unary("log", "x", x, "y"); }
Tensor Graph::Sqrt(const Tensor& x) { return Unary("sqrt", "x", x, "y"); }
Tensor Graph::Rsqrt(const Tensor& x) { return Unary("rsqrt", "x", x, "y"); }
Tensor Graph::Abs(const Tensor& x) { return Unary("abs", "x", x, "y"); }
Tensor Graph::Neg(const Tensor& x) { return Unary("neg", "x", x, "y"); }

Tensor Graph::Clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  if (!ok() || !CheckInputs("Clamp", {&x})) return {};
  OpConfBuilder builder("clamp", UniqueName("clamp"));
  builder.Input("x", x.lbn).Output("y");
  if (min) builder.Attr("min", *min);
  if (max) builder.Attr("max", *max);
  return EmitOne(builder.Build());
}

Tensor Graph::Maximum(const Tensor& x, const Tensor& y) {
  return Binary("Maximum", "maximum", x, y);
}

Tensor Graph::Minimum(const Tensor& x, const Tensor& y) {
  return Binary("Minimum", "minimum", x, y);
}

// ---- Reductions ----------------------------------------------------------------------

Tensor Graph::ReduceSum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  if (!ok() || !CheckInputs("ReduceSum", {&x})) return {};
  return Reduce("reduce_sum", UniqueName("reduce_sum"), x, axes, keepdims);
}

Tensor Graph::ReduceMean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  if (!ok() || !CheckInputs("ReduceMean", {&x})) return {};
  return Reduce("reduce_mean", UniqueName("reduce_mean"), x, axes, keepdims);
}

// ---- Shapes --------------------------------------------------------------------------

Tensor Graph::Reshape(const Tensor& x, const Shape& shape) {
  if (!ok() || !CheckInputs("Reshape", {&x})) return {};
  return EmitOne(OpConfBuilder("reshape", UniqueName("reshape"))
                     .Input("x", x.lbn)
                     .Output("y")
                     .Attr("shape", shape)
                     .Build());
}

Tensor Graph::Flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (!ok() || !CheckInputs("Flatten", {&x})) return {};
  return EmitOne(OpConfBuilder("flatten", UniqueName("flatten"))
                     .Input("x", x.lbn)
                     .Output("y")
                     .Attr("start_dim", start_dim)
                     .Attr("end_dim", end_dim)
                     .Build());
}

Tensor Graph::Transpose(const Tensor& x, const std::vector<int64_t>& perm) {
  if (!ok() || !CheckInputs("Transpose", {&x})) return {};
  return EmitOne(OpConfBuilder("transpose", UniqueName("transpose"))
                     .Input("x", x.lbn)
                     .Output("y")
                     .Attr("perm", perm)
                     .Build());
}

Tensor Graph::Concat(const std::vector<Tensor>& inputs, int64_t axis) {
  std::vector<const Tensor*> pointers;
  std::vector<std::string> lbns;
  for (const Tensor& t : inputs) {
    pointers.push_back(&t);
    lbns.push_back(t.lbn);
  }
  if (!ok() || !CheckInputs("Concat", pointers)) return {};
  return EmitOne(OpConfBuilder("concat", UniqueName("concat"))
                     .Input("in", lbns)
                     .Output("out")
                     .Attr("axis", axis)
                     .Build());
}

Tensor Graph::Slice(const Tensor& x, const std::vector<int64_t>& start,
                    const std::vector<int64_t>& stop, const std::vector<int64_t>& step) {
  if (!ok() || !CheckInputs("Slice", {&x})) return {};
  return EmitOne(OpConfBuilder("slice", UniqueName("slice"))
                     .Input("x", x.lbn)
                     .Output("y")
                     .Attr("start", start)
                     .Attr("stop", stop)
                     .Attr("step", step)
                     .Build());
}

Tensor Graph::Identity(const Tensor& x) { return Unary("identity", "in", x, "out"); }

Tensor Graph::Cast(const Tensor& x, DataType dtype) {
  if (!ok() || !CheckInputs("Cast", {&x})) return {};
  return EmitOne(OpConfBuilder("cast", UniqueName("cast"))
                     .Input("in", x.lbn)
                     .Output("out")
                     .Attr("dtype", dtype)
                     .Build());
}

// ---- Selection and indexing ----------------------------------------------------------

Tensor Graph::Where(const Tensor& condition, const Tensor& x, const Tensor& y) {
  if (!ok() || !CheckInputs("Where", {&condition, &x, &y})) return {};
  return EmitOne(OpConfBuilder("where", UniqueName("where"))
                     .Input("condition", condition.lbn)
                     .Input("x", x.lbn)
                     .Input("y", y.lbn)
                     .Output("out")
                     .Build());
}

Tensor Graph::Iota(const Tensor& like, int64_t axis, DataType dtype) {
  if (!ok() || !CheckInputs("Iota", {&like})) return {};
  return EmitOne(OpConfBuilder("iota", UniqueName("iota"))
                     .Input("like", like.lbn)
                     .Output("out")
                     .Attr("axis", axis)
                     .Attr("dtype", dtype)
                     .Build());
}

Tensor Graph::Equal(const Tensor& x, const Tensor& y) { return Binary("Equal", "equal", x, y); }
Tensor Graph::NotEqual(const Tensor& x, const Tensor& y) {
  return Binary("NotEqual", "not_equal", x, y);
}
Tensor Graph::Less(const Tensor& x, const Tensor& y) { return Binary("Less", "less", x, y); }
Tensor Graph::LessEqual(const Tensor& x, const Tensor& y) {
  return Binary("LessEqual", "less_equal", x, y);
}
Tensor Graph::Greater(const Tensor& x, const Tensor& y) {
  return Binary("Greater", "greater", x, y);
}
Tensor Graph::GreaterEqual(const Tensor& x, const Tensor& y) {
  return Binary("GreaterEqual", "greater_equal", x, y);
}

Tensor Graph::OneHot(const Tensor& indices, int64_t depth, DataType dtype, double on_value,
                     double off_value) {
  if (!ok() || !CheckInputs("OneHot", {&indices})) return {};
  return EmitOne(OpConfBuilder("one_hot", UniqueName("one_hot"))
                     .Input("indices", indices.lbn)
                     .Output("out")
                     .Attr("depth", depth)
                     .Attr("dtype", dtype)
                     .Attr("on_value", on_value)
                     .Attr("off_value", off_value)
                     .Build());
}

Tensor Graph::Gather(const Tensor& x, const Tensor& indices) {
  if (!ok() || !CheckInputs("Gather", {&x, &indices})) return {};
  return EmitOne(OpConfBuilder("gather", UniqueName("gather"))
                     .Input("x", x.lbn)
                     .Input("indices", indices.lbn)
                     .Output("out")
                     .Build());
}

Tensor Graph::SelectRows(const Tensor& x, const Tensor& mask) {
  if (!ok() || !CheckInputs("SelectRows", {&x, &mask})) return {};
  return EmitOne(OpConfBuilder("select_rows", UniqueName("select_rows"))
                     .Input("x", x.lbn)
                     .Input("mask", mask.lbn)
                     .Output("y")
                     .Build());
}

}  // namespace oflite
