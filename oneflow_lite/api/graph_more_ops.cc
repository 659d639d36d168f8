// Graph methods for the unary math, selection, indexing, pooling, loss and
// batch-norm ops (docs/ops.md). The other builders are in graph.cc and
// graph_ops.cc.
#include <string>
#include <vector>

#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/ops/op_builder.h"

namespace oflite {

Tensor Graph::Exp(const Tensor& x) { return Unary("exp", "x", x, "y"); }
Tensor Graph::Log(const Tensor& x) { return Unary("log", "x", x, "y"); }
Tensor Graph::Sqrt(const Tensor& x) { return Unary("sqrt", "x", x, "y"); }
Tensor Graph::Rsqrt(const Tensor& x) { return Unary("rsqrt", "x", x, "y"); }
Tensor Graph::Abs(const Tensor& x) { return Unary("abs", "x", x, "y"); }
Tensor Graph::Neg(const Tensor& x) { return Unary("neg", "x", x, "y"); }
Tensor Graph::Silu(const Tensor& x) { return Unary("silu", "x", x, "y"); }

Tensor Graph::Clamp(const Tensor& x, std::optional<double> min, std::optional<double> max) {
  if (!ok() || !CheckInputs("Clamp", {&x})) return {};
  OpConfBuilder builder("clamp", OpName("clamp"));
  builder.Input("x", x.lbn).Output("y");
  if (min) builder.Attr("min", *min);
  if (max) builder.Attr("max", *max);
  return EmitOne(builder.Build());
}

Tensor Graph::LeakyRelu(const Tensor& x, double alpha) {
  if (!ok() || !CheckInputs("LeakyRelu", {&x})) return {};
  return EmitOne(OpConfBuilder("leaky_relu", OpName("leaky_relu"))
                     .Input("x", x.lbn)
                     .Output("y")
                     .Attr("alpha", alpha)
                     .Build());
}

Tensor Graph::Maximum(const Tensor& x, const Tensor& y) {
  if (!ok() || !CheckInputs("Maximum", {&x, &y})) return {};
  return EmitOne(OpConfBuilder("maximum", OpName("maximum"))
                     .Input("x", x.lbn)
                     .Input("y", y.lbn)
                     .Output("out")
                     .Build());
}

Tensor Graph::Minimum(const Tensor& x, const Tensor& y) {
  if (!ok() || !CheckInputs("Minimum", {&x, &y})) return {};
  return EmitOne(OpConfBuilder("minimum", OpName("minimum"))
                     .Input("x", x.lbn)
                     .Input("y", y.lbn)
                     .Output("out")
                     .Build());
}

Tensor Graph::Where(const Tensor& condition, const Tensor& x, const Tensor& y) {
  if (!ok() || !CheckInputs("Where", {&condition, &x, &y})) return {};
  return EmitOne(OpConfBuilder("where", OpName("where"))
                     .Input("condition", condition.lbn)
                     .Input("x", x.lbn)
                     .Input("y", y.lbn)
                     .Output("out")
                     .Build());
}

Tensor Graph::OneHot(const Tensor& indices, int64_t depth, DataType dtype, double on_value,
                     double off_value) {
  if (!ok() || !CheckInputs("OneHot", {&indices})) return {};
  return EmitOne(OpConfBuilder("one_hot", OpName("one_hot"))
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
  return EmitOne(OpConfBuilder("gather", OpName("gather"))
                     .Input("x", x.lbn)
                     .Input("indices", indices.lbn)
                     .Output("out")
                     .Build());
}

Tensor Graph::AdaptiveAvgPool2d(const Tensor& x, int64_t output_h, int64_t output_w) {
  if (!ok() || !CheckInputs("AdaptiveAvgPool2d", {&x})) return {};
  return EmitOne(OpConfBuilder("adaptive_avg_pool2d", OpName("adaptive_avg_pool2d"))
                     .Input("x", x.lbn)
                     .Output("y")
                     .Attr("output_size", std::vector<int64_t>{output_h, output_w})
                     .Build());
}

Tensor Graph::BinaryCrossEntropyWithLogits(const Tensor& logits, const Tensor& targets) {
  if (!ok() || !CheckInputs("BinaryCrossEntropyWithLogits", {&logits, &targets})) return {};
  const std::string layer = LayerName("bce_with_logits", "");
  Tensor per_element = EmitOne(OpConfBuilder("binary_cross_entropy_with_logits", layer)
                                   .Input("x", logits.lbn)
                                   .Input("target", targets.lbn)
                                   .Output("out")
                                   .Build());
  if (!per_element.valid()) return {};
  return ReduceMean(per_element);
}

Tensor Graph::BatchNorm(const Tensor& x, const BatchNormOptions& options) {
  if (!ok() || !CheckInputs("BatchNorm", {&x})) return {};
  const std::string layer = LayerName("batch_norm", options.name);
  if (x.rank() < 2) {
    RecordError(InvalidArgumentError("batch_norm '", layer, "': want x [N, C, ...], got ",
                                     x.desc.ToString()));
    return {};
  }
  const Shape channel{x.shape().dim(1)};
  auto param = [&](const Tensor& shared, const std::string& suffix, const Initializer& init) {
    if (!shared.valid()) return MakeParameter(layer + "-" + suffix, channel, x.dtype(), init);
    if (shared.shape() != channel || shared.dtype() != x.dtype()) {
      RecordError(InvalidArgumentError("batch_norm '", layer, "': shared ", suffix, " ",
                                       shared.desc.ToString(), " does not fit x ",
                                       x.desc.ToString()));
      return Tensor();
    }
    return shared;
  };
  Tensor gamma = param(options.gamma, "gamma", Initializer::Ones());
  Tensor beta = param(options.beta, "beta", Initializer::Zeros());
  Tensor moving_mean = EmitOne(MakeVariableOp(OpName(layer + "-moving_mean"),
                                              TensorDesc(channel, x.dtype()), Initializer::Zeros(),
                                              /*trainable=*/false, NextSeed()));
  Tensor moving_variance =
      EmitOne(MakeVariableOp(OpName(layer + "-moving_variance"), TensorDesc(channel, x.dtype()),
                             Initializer::Ones(), /*trainable=*/false, NextSeed()));
  if (!ok()) return {};
  return EmitOne(OpConfBuilder("batch_norm", OpName(layer + "-norm"))
                     .Input("x", x.lbn)
                     .Input("gamma", gamma.lbn)
                     .Input("beta", beta.lbn)
                     .Input("moving_mean", moving_mean.lbn)
                     .Input("moving_variance", moving_variance.lbn)
                     .Output("y")
                     .Output("mean")
                     .Output("inv_variance")
                     .Attr("training", true)
                     .Attr("momentum", options.momentum)
                     .Attr("epsilon", options.epsilon)
                     .Build());
}

}  // namespace oflite
