#include "oneflow_lite/api/layers.h"

#include <string>
#include <vector>

#include "oneflow_lite/ops/op_builder.h"

namespace oflite {
namespace {

// The bias_add "<layer>-bias_add" of `y` and `bias` along axis 1.
Tensor EmitBiasAdd(Graph* g, const std::string& layer, const Tensor& y, const Tensor& bias) {
  return g->EmitOne(OpConfBuilder("bias_add", g->UniqueName(layer + "-bias_add"))
                        .Input("a", y.lbn)
                        .Input("b", bias.lbn)
                        .Output("out")
                        .Attr("axis", int64_t{1})
                        .Build());
}

Tensor Pool(Graph* g, const std::string& op_type, const Tensor& x, int64_t kernel_size,
            const Pool2dOptions& options) {
  if (!g->ok() || !g->CheckInputs(op_type, {&x})) return {};
  const std::string layer = g->UniqueName(op_type, options.name);
  std::vector<int64_t> strides = options.strides;
  if (strides.empty()) strides = {kernel_size, kernel_size};
  return g->EmitOne(OpConfBuilder(op_type, layer)
                        .Input("x", x.lbn)
                        .Output("y")
                        .Attr("kernel_size", std::vector<int64_t>{kernel_size, kernel_size})
                        .Attr("strides", strides)
                        .Attr("padding", options.padding)
                        .Build());
}

}  // namespace

// ---- Dense -----------------------------------------------------------------------

Tensor Dense(Graph* g, const Tensor& x, int64_t units, const DenseOptions& options) {
  return DenseLayer(g, x, units, options).output;
}

Layer DenseLayer(Graph* g, const Tensor& x, int64_t units, const DenseOptions& options) {
  if (!g->ok() || !g->CheckInputs("Dense", {&x})) return {};
  const std::string layer = g->UniqueName("dense", options.name);
  if (x.rank() < 2 || units <= 0) {
    g->RecordError(InvalidArgumentError("dense '", layer,
                                        "': want an input of rank >= 2 and units > 0, got ",
                                        x.desc.ToString(), " and units ", units));
    return {};
  }
  Tensor in = x;
  if (x.rank() > 2) {
    in = g->EmitOne(OpConfBuilder("flatten", g->UniqueName(layer + "-flatten"))
                        .Input("x", x.lbn)
                        .Output("y")
                        .Attr("start_dim", int64_t{1})
                        .Attr("end_dim", int64_t{-1})
                        .Build());
    if (!in.valid()) return {};
  }
  const Shape want_weight{in.shape().dim(1), units};
  Tensor weight = options.weight;
  if (weight.valid()) {
    if (!g->CheckInputs("dense '" + layer + "' weight", {&weight})) return {};
    if (weight.shape() != want_weight) {
      g->RecordError(InvalidArgumentError("dense '", layer, "': input ", in.desc.ToString(),
                                          " does not match the shared weight ",
                                          weight.desc.ToString(), " (want ", want_weight, ")"));
      return {};
    }
  } else {
    weight = g->Parameter(layer + "-weight", want_weight, x.dtype(), options.weight_init);
  }
  Tensor y = g->EmitOne(OpConfBuilder("matmul", g->UniqueName(layer + "-matmul"))
                            .Input("a", in.lbn)
                            .Input("b", weight.lbn)
                            .Output("out")
                            .Attr("transpose_a", false)
                            .Attr("transpose_b", false)
                            .Attr("alpha", 1.0)
                            .Build());
  if (!options.use_bias || !y.valid()) return y.valid() ? Layer{y, weight, {}} : Layer{};
  Tensor bias = options.bias.valid()
                    ? options.bias
                    : g->Parameter(layer + "-bias", Shape{units}, x.dtype(), options.bias_init);
  if (!g->ok() || !g->CheckInputs("dense '" + layer + "' bias", {&bias})) return {};
  Tensor out = EmitBiasAdd(g, layer, y, bias);
  return out.valid() ? Layer{out, weight, bias} : Layer{};
}

// ---- Conv2d and pooling ----------------------------------------------------------

Tensor Conv2d(Graph* g, const Tensor& x, int64_t filters, int64_t kernel_size,
              const Conv2dOptions& options) {
  return Conv2dLayer(g, x, filters, kernel_size, options).output;
}

Layer Conv2dLayer(Graph* g, const Tensor& x, int64_t filters, int64_t kernel_size,
                  const Conv2dOptions& options) {
  if (!g->ok() || !g->CheckInputs("Conv2d", {&x})) return {};
  const std::string layer = g->UniqueName("conv2d", options.name);
  if (x.rank() != 4 || filters <= 0 || kernel_size <= 0) {
    g->RecordError(InvalidArgumentError(
        "conv2d '", layer, "': want x [N, C, H, W], filters > 0, kernel > 0; got ",
        x.desc.ToString(), ", filters ", filters, ", kernel ", kernel_size));
    return {};
  }
  Tensor weight =
      g->Parameter(layer + "-weight", Shape{filters, x.shape().dim(1), kernel_size, kernel_size},
                   x.dtype(), options.weight_init);
  Tensor y = g->EmitOne(OpConfBuilder("conv2d", g->UniqueName(layer + "-conv"))
                            .Input("x", x.lbn)
                            .Input("weight", weight.lbn)
                            .Output("y")
                            .Attr("strides", options.strides)
                            .Attr("padding", options.padding)
                            .Attr("dilations", options.dilations)
                            .Build());
  if (!options.use_bias || !y.valid()) return y.valid() ? Layer{y, weight, {}} : Layer{};
  Tensor bias = g->Parameter(layer + "-bias", Shape{filters}, x.dtype(), options.bias_init);
  Tensor out = EmitBiasAdd(g, layer, y, bias);
  return out.valid() ? Layer{out, weight, bias} : Layer{};
}

Tensor MaxPool2d(Graph* g, const Tensor& x, int64_t kernel_size, const Pool2dOptions& options) {
  return Pool(g, "max_pool2d", x, kernel_size, options);
}

Tensor AvgPool2d(Graph* g, const Tensor& x, int64_t kernel_size, const Pool2dOptions& options) {
  return Pool(g, "avg_pool2d", x, kernel_size, options);
}

// ---- Normalization -----------------------------------------------------------------

Tensor LayerNorm(Graph* g, const Tensor& x, const LayerNormOptions& options) {
  return LayerNormLayer(g, x, options).output;
}

Layer LayerNormLayer(Graph* g, const Tensor& x, const LayerNormOptions& options) {
  if (!g->ok() || !g->CheckInputs("LayerNorm", {&x})) return {};
  const std::string layer = g->UniqueName("layer_norm", options.name);
  int64_t begin =
      options.begin_norm_axis < 0 ? options.begin_norm_axis + x.rank() : options.begin_norm_axis;
  if (begin < 0 || begin >= x.rank()) {
    g->RecordError(InvalidArgumentError("layer_norm '", layer, "': begin_norm_axis ",
                                        options.begin_norm_axis, " is out of range for ",
                                        x.desc.ToString()));
    return {};
  }
  Shape param_shape(std::vector<int64_t>(x.shape().dims().begin() + begin, x.shape().dims().end()));
  Tensor gamma = g->Parameter(layer + "-gamma", param_shape, x.dtype(), Initializer::Ones());
  Tensor beta = g->Parameter(layer + "-beta", param_shape, x.dtype(), Initializer::Zeros());
  if (!g->ok()) return {};
  Tensor y = g->EmitOne(OpConfBuilder("layer_norm", g->UniqueName(layer + "-norm"))
                            .Input("x", x.lbn)
                            .Input("gamma", gamma.lbn)
                            .Input("beta", beta.lbn)
                            .Output("y")
                            .Output("mean")
                            .Output("inv_variance")
                            .Attr("begin_norm_axis", options.begin_norm_axis)
                            .Attr("epsilon", options.epsilon)
                            .Build());
  return y.valid() ? Layer{y, gamma, beta} : Layer{};
}

Tensor BatchNorm(Graph* g, const Tensor& x, const BatchNormOptions& options) {
  if (!g->ok() || !g->CheckInputs("BatchNorm", {&x})) return {};
  const std::string layer = g->UniqueName("batch_norm", options.name);
  if (x.rank() < 2) {
    g->RecordError(InvalidArgumentError("batch_norm '", layer, "': want x [N, C, ...], got ",
                                        x.desc.ToString()));
    return {};
  }
  const Shape channel{x.shape().dim(1)};
  auto param = [&](const Tensor& shared, const std::string& suffix, const Initializer& init) {
    if (!shared.valid()) return g->Parameter(layer + "-" + suffix, channel, x.dtype(), init);
    if (shared.shape() != channel || shared.dtype() != x.dtype()) {
      g->RecordError(InvalidArgumentError("batch_norm '", layer, "': shared ", suffix, " ",
                                          shared.desc.ToString(), " does not fit x ",
                                          x.desc.ToString()));
      return Tensor();
    }
    return shared;
  };
  Tensor gamma = param(options.gamma, "gamma", Initializer::Ones());
  Tensor beta = param(options.beta, "beta", Initializer::Zeros());
  Tensor moving_mean = g->Parameter(layer + "-moving_mean", channel, x.dtype(),
                                    Initializer::Zeros(), /*trainable=*/false);
  Tensor moving_variance = g->Parameter(layer + "-moving_variance", channel, x.dtype(),
                                        Initializer::Ones(), /*trainable=*/false);
  if (!g->ok()) return {};
  return g->EmitOne(OpConfBuilder("batch_norm", g->UniqueName(layer + "-norm"))
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

// ---- Embedding and dropout -----------------------------------------------------------

Tensor Embedding(Graph* g, const Tensor& indices, int64_t vocab_size, int64_t dim,
                 const EmbeddingOptions& options) {
  return EmbeddingLayer(g, indices, vocab_size, dim, options).output;
}

Layer EmbeddingLayer(Graph* g, const Tensor& indices, int64_t vocab_size, int64_t dim,
                     const EmbeddingOptions& options) {
  if (!g->ok() || !g->CheckInputs("Embedding", {&indices})) return {};
  const std::string layer = g->UniqueName("embedding", options.name);
  Tensor weight =
      g->Parameter(layer + "-weight", Shape{vocab_size, dim}, options.dtype, options.initializer);
  if (!g->ok()) return {};
  Tensor out = g->EmitOne(OpConfBuilder("embedding", g->UniqueName(layer + "-lookup"))
                              .Input("weight", weight.lbn)
                              .Input("indices", indices.lbn)
                              .Output("out")
                              .Build());
  return out.valid() ? Layer{out, weight, {}} : Layer{};
}

Tensor Dropout(Graph* g, const Tensor& x, double rate, const std::string& name) {
  if (!g->ok() || !g->CheckInputs("Dropout", {&x})) return {};
  return g->EmitOne(OpConfBuilder("dropout", g->UniqueName("dropout", name))
                        .Input("x", x.lbn)
                        .Output("y")
                        .Output("mask")
                        .Attr("rate", rate)
                        .Attr("seed", g->NextSeed())
                        .Build());
}

}  // namespace oflite
