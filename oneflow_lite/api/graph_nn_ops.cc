// Graph's neural-network ops without parameters: activations, adaptive
// pooling, losses and metrics (docs/ops.md). Layers with parameters or a
// name are in layers.cc; math and shape ops in graph_math_ops.cc.
#include <string>
#include <vector>

#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/ops/op_builder.h"

namespace oflite {

// ---- Activations -----------------------------------------------------------------

Tensor Graph::Relu(const Tensor& x) { return Unary("relu", "x", x, "y"); }
Tensor Graph::Sigmoid(const Tensor& x) { return Unary("sigmoid", "x", x, "y"); }
Tensor Graph::Tanh(const Tensor& x) { return Unary("tanh", "x", x, "y"); }
// The default form adds no attribute (jobs written before it stay the same);
// inference rejects an unknown value, naming the op.
Tensor Graph::Gelu(const Tensor& x, const std::string& approximate) {
  if (!ok() || !CheckInputs("Gelu", {&x})) return {};
  if (approximate == "none") return Unary("gelu", "x", x, "y");
  return EmitOne(OpConfBuilder("gelu", UniqueName("gelu"))
                     .Input("x", x.lbn)
                     .Output("y")
                     .Attr("approximate", approximate)
                     .Build());
}
Tensor Graph::Silu(const Tensor& x) { return Unary("silu", "x", x, "y"); }

Tensor Graph::LeakyRelu(const Tensor& x, double alpha) {
  if (!ok() || !CheckInputs("LeakyRelu", {&x})) return {};
  return EmitOne(OpConfBuilder("leaky_relu", UniqueName("leaky_relu"))
                     .Input("x", x.lbn)
                     .Output("y")
                     .Attr("alpha", alpha)
                     .Build());
}

Tensor Graph::Softmax(const Tensor& x, int64_t axis) {
  if (!ok() || !CheckInputs("Softmax", {&x})) return {};
  return EmitOne(OpConfBuilder("softmax", UniqueName("softmax"))
                     .Input("x", x.lbn)
                     .Output("y")
                     .Attr("axis", axis)
                     .Build());
}

Tensor Graph::LogSoftmax(const Tensor& x, int64_t axis) {
  if (!ok() || !CheckInputs("LogSoftmax", {&x})) return {};
  return EmitOne(OpConfBuilder("log_softmax", UniqueName("log_softmax"))
                     .Input("x", x.lbn)
                     .Output("y")
                     .Attr("axis", axis)
                     .Build());
}

Tensor Graph::CausalSoftmax(const Tensor& x, double scale) {
  if (!ok() || !CheckInputs("CausalSoftmax", {&x})) return {};
  return EmitOne(OpConfBuilder("causal_softmax", UniqueName("causal_softmax"))
                     .Input("x", x.lbn)
                     .Output("y")
                     .Attr("scale", scale)
                     .Build());
}

// ---- Pooling ---------------------------------------------------------------------

Tensor Graph::AdaptiveAvgPool2d(const Tensor& x, int64_t output_h, int64_t output_w) {
  if (!ok() || !CheckInputs("AdaptiveAvgPool2d", {&x})) return {};
  return EmitOne(OpConfBuilder("adaptive_avg_pool2d", UniqueName("adaptive_avg_pool2d"))
                     .Input("x", x.lbn)
                     .Output("y")
                     .Attr("output_size", std::vector<int64_t>{output_h, output_w})
                     .Build());
}

// ---- Losses and metrics ----------------------------------------------------------

Tensor Graph::SparseSoftmaxCrossEntropy(const Tensor& logits, const Tensor& labels) {
  if (!ok() || !CheckInputs("SparseSoftmaxCrossEntropy", {&logits, &labels})) return {};
  const std::string layer = UniqueName("cross_entropy");
  std::vector<Tensor> outputs = Emit(OpConfBuilder("sparse_softmax_cross_entropy", layer)
                                         .Input("prediction", logits.lbn)
                                         .Input("label", labels.lbn)
                                         .Output("prob")
                                         .Output("out")
                                         .Build());
  if (outputs.size() != 2) return {};
  return Reduce("reduce_mean", UniqueName(layer + "-mean"), outputs[1], {}, false);
}

Tensor Graph::MeanSquaredError(const Tensor& prediction, const Tensor& target) {
  Tensor diff = Sub(prediction, target);
  return ReduceMean(Mul(diff, diff));
}

Tensor Graph::Accuracy(const Tensor& logits, const Tensor& labels) {
  if (!ok() || !CheckInputs("Accuracy", {&logits, &labels})) return {};
  return EmitOne(OpConfBuilder("accuracy", UniqueName("accuracy"))
                     .Input("prediction", logits.lbn)
                     .Input("label", labels.lbn)
                     .Output("out")
                     .Build());
}

Tensor Graph::BinaryCrossEntropyWithLogits(const Tensor& logits, const Tensor& targets) {
  if (!ok() || !CheckInputs("BinaryCrossEntropyWithLogits", {&logits, &targets})) return {};
  const std::string layer = UniqueName("bce_with_logits");
  Tensor per_element = EmitOne(OpConfBuilder("binary_cross_entropy_with_logits", layer)
                                   .Input("x", logits.lbn)
                                   .Input("target", targets.lbn)
                                   .Output("out")
                                   .Build());
  if (!per_element.valid()) return {};
  return ReduceMean(per_element);
}

}  // namespace oflite
