// Graph methods that add one op each: activations, math, losses, metrics.
// (Layers with variables, sources and Build are in graph.cc.)
#include <string>
#include <vector>

#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/ops/op_builder.h"

namespace oflite {

// ---- Activations and math ---------------------------------------------------

Tensor Graph::Relu(const Tensor& x) { return Unary("relu", "x", x, "y"); }
Tensor Graph::Sigmoid(const Tensor& x) { return Unary("sigmoid", "x", x, "y"); }
Tensor Graph::Tanh(const Tensor& x) { return Unary("tanh", "x", x, "y"); }
Tensor Graph::Gelu(const Tensor& x) { return Unary("gelu", "x", x, "y"); }
Tensor Graph::Identity(const Tensor& x) { return Unary("identity", "in", x, "out"); }

Tensor Graph::Softmax(const Tensor& x, int64_t axis) {
  if (!ok() || !CheckInputs("Softmax", {&x})) return {};
  return EmitOne(OpConfBuilder("softmax", OpName("softmax"))
                     .Input("x", x.lbn)
                     .Output("y")
                     .Attr("axis", axis)
                     .Build());
}

Tensor Graph::LogSoftmax(const Tensor& x, int64_t axis) {
  if (!ok() || !CheckInputs("LogSoftmax", {&x})) return {};
  return EmitOne(OpConfBuilder("log_softmax", OpName("log_softmax"))
                     .Input("x", x.lbn)
                     .Output("y")
                     .Attr("axis", axis)
                     .Build());
}

Tensor Graph::MatMul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                     double alpha) {
  if (!ok() || !CheckInputs("MatMul", {&a, &b})) return {};
  return EmitOne(OpConfBuilder("matmul", OpName("matmul"))
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
  return EmitOne(OpConfBuilder("bias_add", OpName("bias_add"))
                     .Input("a", a.lbn)
                     .Input("b", bias.lbn)
                     .Output("out")
                     .Attr("axis", axis)
                     .Build());
}

Tensor Graph::Add(const Tensor& a, const Tensor& b) { return AddN({a, b}); }

Tensor Graph::AddN(const std::vector<Tensor>& inputs) {
  std::vector<const Tensor*> pointers;
  std::vector<std::string> lbns;
  for (const Tensor& t : inputs) {
    pointers.push_back(&t);
    lbns.push_back(t.lbn);
  }
  if (!ok() || !CheckInputs("Add", pointers)) return {};
  return EmitOne(OpConfBuilder("add", OpName("add")).Input("in", lbns).Output("out").Build());
}

namespace {
OpConf Binary(const std::string& type, const std::string& name, const Tensor& x, const Tensor& y) {
  return OpConfBuilder(type, name).Input("x", x.lbn).Input("y", y.lbn).Output("out").Build();
}
}  // namespace

Tensor Graph::Sub(const Tensor& x, const Tensor& y) {
  if (!ok() || !CheckInputs("Sub", {&x, &y})) return {};
  return EmitOne(Binary("sub", OpName("sub"), x, y));
}

Tensor Graph::Mul(const Tensor& x, const Tensor& y) {
  if (!ok() || !CheckInputs("Mul", {&x, &y})) return {};
  return EmitOne(Binary("mul", OpName("mul"), x, y));
}

Tensor Graph::Div(const Tensor& x, const Tensor& y) {
  if (!ok() || !CheckInputs("Div", {&x, &y})) return {};
  return EmitOne(Binary("div", OpName("div"), x, y));
}

Tensor Graph::ScalarAdd(const Tensor& x, double value) {
  if (!ok() || !CheckInputs("ScalarAdd", {&x})) return {};
  return EmitOne(OpConfBuilder("scalar_add", OpName("scalar_add"))
                     .Input("in", x.lbn)
                     .Output("out")
                     .Attr("value", value)
                     .Build());
}

Tensor Graph::ScalarMul(const Tensor& x, double value) {
  if (!ok() || !CheckInputs("ScalarMul", {&x})) return {};
  return EmitOne(OpConfBuilder("scalar_mul", OpName("scalar_mul"))
                     .Input("in", x.lbn)
                     .Output("out")
                     .Attr("value", value)
                     .Build());
}

Tensor Graph::Pow(const Tensor& x, double exponent) {
  if (!ok() || !CheckInputs("Pow", {&x})) return {};
  return EmitOne(OpConfBuilder("scalar_pow", OpName("scalar_pow"))
                     .Input("in", x.lbn)
                     .Output("out")
                     .Attr("exponent", exponent)
                     .Build());
}

namespace {
// An empty axis list (reduce everything) is left out: an empty `ints`
// attribute would not record its type.
OpConf ReduceOp(const std::string& type, const std::string& name, const Tensor& x,
                const std::vector<int64_t>& axes, bool keepdims) {
  OpConfBuilder builder(type, name);
  builder.Input("x", x.lbn).Output("y").Attr("keepdims", keepdims);
  if (!axes.empty()) builder.Attr("axis", axes);
  return builder.Build();
}
}  // namespace

Tensor Graph::ReduceSum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  if (!ok() || !CheckInputs("ReduceSum", {&x})) return {};
  return EmitOne(ReduceOp("reduce_sum", OpName("reduce_sum"), x, axes, keepdims));
}

Tensor Graph::ReduceMean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdims) {
  if (!ok() || !CheckInputs("ReduceMean", {&x})) return {};
  return EmitOne(ReduceOp("reduce_mean", OpName("reduce_mean"), x, axes, keepdims));
}

Tensor Graph::Reshape(const Tensor& x, const Shape& shape) {
  if (!ok() || !CheckInputs("Reshape", {&x})) return {};
  return EmitOne(OpConfBuilder("reshape", OpName("reshape"))
                     .Input("x", x.lbn)
                     .Output("y")
                     .Attr("shape", shape)
                     .Build());
}

Tensor Graph::Transpose(const Tensor& x, const std::vector<int64_t>& perm) {
  if (!ok() || !CheckInputs("Transpose", {&x})) return {};
  return EmitOne(OpConfBuilder("transpose", OpName("transpose"))
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
  return EmitOne(OpConfBuilder("concat", OpName("concat"))
                     .Input("in", lbns)
                     .Output("out")
                     .Attr("axis", axis)
                     .Build());
}

Tensor Graph::Slice(const Tensor& x, const std::vector<int64_t>& start,
                    const std::vector<int64_t>& stop, const std::vector<int64_t>& step) {
  if (!ok() || !CheckInputs("Slice", {&x})) return {};
  return EmitOne(OpConfBuilder("slice", OpName("slice"))
                     .Input("x", x.lbn)
                     .Output("y")
                     .Attr("start", start)
                     .Attr("stop", stop)
                     .Attr("step", step)
                     .Build());
}

Tensor Graph::Cast(const Tensor& x, DataType dtype) {
  if (!ok() || !CheckInputs("Cast", {&x})) return {};
  return EmitOne(OpConfBuilder("cast", OpName("cast"))
                     .Input("in", x.lbn)
                     .Output("out")
                     .Attr("dtype", dtype)
                     .Build());
}

// ---- Losses and metrics ------------------------------------------------------

Tensor Graph::SparseSoftmaxCrossEntropy(const Tensor& logits, const Tensor& labels) {
  if (!ok() || !CheckInputs("SparseSoftmaxCrossEntropy", {&logits, &labels})) return {};
  const std::string layer = LayerName("cross_entropy", "");
  std::vector<Tensor> outputs = Emit(OpConfBuilder("sparse_softmax_cross_entropy", layer)
                                         .Input("prediction", logits.lbn)
                                         .Input("label", labels.lbn)
                                         .Output("prob")
                                         .Output("out")
                                         .Build());
  if (outputs.size() != 2) return {};
  return EmitOne(ReduceOp("reduce_mean", OpName(layer + "-mean"), outputs[1], {}, false));
}

Tensor Graph::MeanSquaredError(const Tensor& prediction, const Tensor& target) {
  Tensor diff = Sub(prediction, target);
  return ReduceMean(Mul(diff, diff));
}

Tensor Graph::Accuracy(const Tensor& logits, const Tensor& labels) {
  if (!ok() || !CheckInputs("Accuracy", {&logits, &labels})) return {};
  return EmitOne(OpConfBuilder("accuracy", LayerName("accuracy", ""))
                     .Input("prediction", logits.lbn)
                     .Input("label", labels.lbn)
                     .Output("out")
                     .Build());
}

}  // namespace oflite
