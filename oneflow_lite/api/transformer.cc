#include "oneflow_lite/api/transformer.h"

#include <cmath>
#include <string>
#include <vector>

#include "oneflow_lite/ops/op_builder.h"

namespace oflite {
namespace {

Tensor EmitReshape(Graph* g, const std::string& name, const Tensor& x, const Shape& shape) {
  return g->EmitOne(OpConfBuilder("reshape", g->UniqueName(name))
                        .Input("x", x.lbn)
                        .Output("y")
                        .Attr("shape", shape)
                        .Build());
}

Tensor EmitTranspose(Graph* g, const std::string& name, const Tensor& x,
                     const std::vector<int64_t>& perm) {
  return g->EmitOne(OpConfBuilder("transpose", g->UniqueName(name))
                        .Input("x", x.lbn)
                        .Output("y")
                        .Attr("perm", perm)
                        .Build());
}

Tensor EmitMatmul(Graph* g, const std::string& name, const Tensor& a, const Tensor& b,
                  bool transpose_b) {
  return g->EmitOne(OpConfBuilder("matmul", g->UniqueName(name))
                        .Input("a", a.lbn)
                        .Input("b", b.lbn)
                        .Output("out")
                        .Attr("transpose_a", false)
                        .Attr("transpose_b", transpose_b)
                        .Attr("alpha", 1.0)
                        .Build());
}

// The residual sum a + b (equal shapes).
Tensor EmitAdd(Graph* g, const std::string& name, const Tensor& a, const Tensor& b) {
  return g->EmitOne(
      OpConfBuilder("add", g->UniqueName(name)).Input("in", {a.lbn, b.lbn}).Output("out").Build());
}

Tensor EmitActivation(Graph* g, const std::string& layer, const std::string& activation,
                      const Tensor& x) {
  if (activation == "relu") {
    return g->EmitOne(
        OpConfBuilder("relu", g->UniqueName(layer + "-relu")).Input("x", x.lbn).Output("y").Build());
  }
  OpConfBuilder gelu("gelu", g->UniqueName(layer + "-gelu"));
  gelu.Input("x", x.lbn).Output("y");
  if (activation == "gelu_tanh") gelu.Attr("approximate", "tanh");
  return g->EmitOne(gelu.Build());
}

// A [B, T, C] input, or an error naming `what` and `layer`.
bool CheckSequence(Graph* g, const std::string& what, const std::string& layer, const Tensor& x) {
  if (x.rank() == 3 && x.shape().dim(2) > 0) return true;
  g->RecordError(InvalidArgumentError(what, " '", layer, "': want x [batch, time, channels], got ",
                                      x.desc.ToString()));
  return false;
}

}  // namespace

// ---- Linear --------------------------------------------------------------------------

Layer Linear(Graph* g, const Tensor& x, int64_t units, const LinearOptions& options) {
  if (!g->ok() || !g->CheckInputs("Linear", {&x})) return {};
  const std::string layer = g->UniqueName("linear", options.name);
  if (x.rank() < 1 || units <= 0) {
    g->RecordError(InvalidArgumentError("linear '", layer,
                                        "': want an input of rank >= 1 and units > 0, got ",
                                        x.desc.ToString(), " and units ", units));
    return {};
  }
  const int64_t in = x.shape().dim(x.rank() - 1);
  Tensor weight = g->Parameter(layer + "-weight", Shape{in, units}, x.dtype(), options.weight_init);
  if (!g->ok()) return {};
  Tensor rows = x;
  if (x.rank() == 1) rows = EmitReshape(g, layer + "-rows", x, Shape{1, in});
  Tensor y = EmitMatmul(g, layer + "-matmul", rows, weight, /*transpose_b=*/false);
  if (x.rank() == 1 && y.valid()) y = EmitReshape(g, layer + "-vector", y, Shape{units});
  if (!y.valid()) return {};
  if (!options.use_bias) return Layer{y, weight, {}};
  Tensor bias = g->Parameter(layer + "-bias", Shape{units}, x.dtype(), options.bias_init);
  if (!g->ok()) return {};
  Tensor out = g->EmitOne(OpConfBuilder("bias_add", g->UniqueName(layer + "-bias_add"))
                              .Input("a", y.lbn)
                              .Input("b", bias.lbn)
                              .Output("out")
                              .Attr("axis", int64_t{-1})
                              .Build());
  return out.valid() ? Layer{out, weight, bias} : Layer{};
}

// ---- Attention -----------------------------------------------------------------------

AttentionLayer CausalSelfAttention(Graph* g, const Tensor& x, const AttentionOptions& options) {
  if (!g->ok() || !g->CheckInputs("CausalSelfAttention", {&x})) return {};
  const std::string layer = g->UniqueName("attention", options.name);
  if (!CheckSequence(g, "attention", layer, x)) return {};
  const int64_t batch = x.shape().dim(0), time = x.shape().dim(1), channels = x.shape().dim(2);
  if (options.heads <= 0 || channels % options.heads != 0) {
    g->RecordError(InvalidArgumentError("attention '", layer, "': ", options.heads,
                                        " heads do not divide ", channels, " channels"));
    return {};
  }
  const int64_t heads = options.heads, head_dim = channels / heads;
  AttentionLayer result;
  LinearOptions in_proj;
  in_proj.use_bias = options.use_bias;
  in_proj.weight_init = Initializer::Normal(0.0, options.init_std);
  // [B, T, C] -> [B, H, T, D] for queries, keys and values.
  auto project_heads = [&](const std::string& part, Layer* linear) -> Tensor {
    in_proj.name = layer + "-" + part;
    *linear = Linear(g, x, channels, in_proj);
    if (!linear->output.valid()) return {};
    Tensor split = EmitReshape(g, layer + "-" + part + "-heads", linear->output,
                               Shape{batch, time, heads, head_dim});
    if (!split.valid()) return {};
    return EmitTranspose(g, layer + "-" + part + "-transpose", split, {0, 2, 1, 3});
  };
  Tensor q = project_heads("query", &result.query);
  Tensor k = project_heads("key", &result.key);
  Tensor v = project_heads("value", &result.value);
  if (!g->ok()) return {};
  Tensor scores = EmitMatmul(g, layer + "-scores", q, k, /*transpose_b=*/true);  // [B, H, T, T]
  if (!scores.valid()) return {};
  Tensor weights = g->EmitOne(OpConfBuilder("causal_softmax", g->UniqueName(layer + "-softmax"))
                                  .Input("x", scores.lbn)
                                  .Output("y")
                                  .Attr("scale", 1.0 / std::sqrt(static_cast<double>(head_dim)))
                                  .Build());
  if (!weights.valid()) return {};
  Tensor mixed = EmitMatmul(g, layer + "-mix", weights, v, /*transpose_b=*/false);  // [B, H, T, D]
  if (!mixed.valid()) return {};
  Tensor merged = EmitTranspose(g, layer + "-merge-transpose", mixed, {0, 2, 1, 3});
  if (!merged.valid()) return {};
  merged = EmitReshape(g, layer + "-merge", merged, Shape{batch, time, channels});
  if (!merged.valid()) return {};
  LinearOptions out_proj;
  out_proj.use_bias = options.use_bias;
  out_proj.weight_init = Initializer::Normal(0.0, options.proj_init_std);
  out_proj.name = layer + "-proj";
  result.projection = Linear(g, merged, channels, out_proj);
  result.output = result.projection.output;
  if (!result.output.valid()) return {};
  return result;
}

// ---- MLP and the block ---------------------------------------------------------------

MlpLayer MlpBlock(Graph* g, const Tensor& x, const MlpOptions& options) {
  if (!g->ok() || !g->CheckInputs("MlpBlock", {&x})) return {};
  const std::string layer = g->UniqueName("mlp", options.name);
  if (x.rank() < 1 || options.hidden < 0 ||
      (options.activation != "gelu" && options.activation != "gelu_tanh" &&
       options.activation != "relu")) {
    g->RecordError(InvalidArgumentError("mlp '", layer, "': want x of rank >= 1, hidden >= 0 and "
                                        "activation gelu, gelu_tanh or relu; got ",
                                        x.desc.ToString(), ", hidden ", options.hidden, ", '",
                                        options.activation, "'"));
    return {};
  }
  const int64_t channels = x.shape().dim(x.rank() - 1);
  const int64_t hidden = options.hidden > 0 ? options.hidden : 4 * channels;
  MlpLayer result;
  LinearOptions fc;
  fc.use_bias = options.use_bias;
  fc.weight_init = Initializer::Normal(0.0, options.init_std);
  fc.name = layer + "-fc";
  result.fc = Linear(g, x, hidden, fc);
  if (!result.fc.output.valid()) return {};
  Tensor h = EmitActivation(g, layer, options.activation, result.fc.output);
  if (!h.valid()) return {};
  LinearOptions proj = fc;
  proj.weight_init = Initializer::Normal(0.0, options.proj_init_std);
  proj.name = layer + "-proj";
  result.projection = Linear(g, h, channels, proj);
  result.output = result.projection.output;
  if (!result.output.valid()) return {};
  return result;
}

TransformerBlockLayer TransformerBlock(Graph* g, const Tensor& x,
                                       const TransformerBlockOptions& options) {
  if (!g->ok() || !g->CheckInputs("TransformerBlock", {&x})) return {};
  const std::string layer = g->UniqueName("block", options.name);
  if (!CheckSequence(g, "block", layer, x)) return {};
  TransformerBlockLayer result;
  LayerNormOptions ln;
  ln.epsilon = options.layer_norm_epsilon;
  ln.name = layer + "-ln_1";
  result.ln_1 = LayerNormLayer(g, x, ln);
  if (!result.ln_1.output.valid()) return {};
  AttentionOptions attention;
  attention.heads = options.heads;
  attention.use_bias = options.use_bias;
  attention.init_std = options.init_std;
  attention.proj_init_std = options.proj_init_std;
  attention.name = layer + "-attn";
  result.attention = CausalSelfAttention(g, result.ln_1.output, attention);
  if (!result.attention.output.valid()) return {};
  Tensor h = EmitAdd(g, layer + "-residual_1", x, result.attention.output);
  if (!h.valid()) return {};
  ln.name = layer + "-ln_2";
  result.ln_2 = LayerNormLayer(g, h, ln);
  if (!result.ln_2.output.valid()) return {};
  MlpOptions mlp;
  mlp.hidden = options.mlp_hidden;
  mlp.activation = options.activation;
  mlp.use_bias = options.use_bias;
  mlp.init_std = options.init_std;
  mlp.proj_init_std = options.proj_init_std;
  mlp.name = layer + "-mlp";
  result.mlp = MlpBlock(g, result.ln_2.output, mlp);
  if (!result.mlp.output.valid()) return {};
  result.output = EmitAdd(g, layer + "-residual_2", h, result.mlp.output);
  if (!result.output.valid()) return {};
  return result;
}

// ---- GPT -----------------------------------------------------------------------------

GptModel Gpt(Graph* g, const Tensor& tokens, const GptConfig& config) {
  if (!g->ok() || !g->CheckInputs("Gpt", {&tokens})) return {};
  const std::string name = g->UniqueName("gpt", config.name);
  if (tokens.rank() != 2 || (tokens.dtype() != DT_INT32 && tokens.dtype() != DT_INT64)) {
    g->RecordError(InvalidArgumentError("gpt '", name, "': want tokens [batch, time] of int32 or "
                                        "int64, got ", tokens.desc.ToString()));
    return {};
  }
  const int64_t time = tokens.shape().dim(1);
  if (config.vocab_size <= 0 || config.block_size <= 0 || config.layers < 0 ||
      config.heads <= 0 || config.channels <= 0 || config.channels % config.heads != 0 ||
      time > config.block_size) {
    g->RecordError(InvalidArgumentError(
        "gpt '", name, "': want vocab_size > 0, heads dividing channels and a sequence of at "
        "most block_size tokens; got vocab_size ", config.vocab_size, ", block_size ",
        config.block_size, ", layers ", config.layers, ", heads ", config.heads, ", channels ",
        config.channels, ", tokens ", tokens.desc.ToString()));
    return {};
  }
  const int64_t channels = config.channels;
  const double proj_std = 0.02 / std::sqrt(2.0 * std::max<int64_t>(config.layers, 1));
  GptModel model;
  EmbeddingOptions wte;
  wte.initializer = Initializer::Normal(0.0, 0.02);
  wte.dtype = config.dtype;
  wte.name = name + "-wte";
  model.token_embedding = EmbeddingLayer(g, tokens, config.vocab_size, channels, wte);
  model.position_embedding = g->Parameter(name + "-wpe", Shape{config.block_size, channels},
                                          config.dtype, Initializer::Normal(0.0, 0.02));
  if (!g->ok()) return {};
  Tensor positions = model.position_embedding;
  if (time < config.block_size) {
    positions = g->EmitOne(OpConfBuilder("slice", g->UniqueName(name + "-wpe-slice"))
                               .Input("x", positions.lbn)
                               .Output("y")
                               .Attr("start", std::vector<int64_t>{0, 0})
                               .Attr("stop", std::vector<int64_t>{time, channels})
                               .Attr("step", std::vector<int64_t>{1, 1})
                               .Build());
  }
  if (!positions.valid()) return {};
  Tensor x = g->EmitOne(OpConfBuilder("broadcast_add", g->UniqueName(name + "-embed"))
                            .Input("x", model.token_embedding.output.lbn)
                            .Input("y", positions.lbn)
                            .Output("out")
                            .Build());
  if (!x.valid()) return {};
  TransformerBlockOptions block;
  block.heads = config.heads;
  block.activation = config.activation;
  block.use_bias = config.use_bias;
  block.proj_init_std = proj_std;
  for (int64_t i = 0; i < config.layers; ++i) {
    block.name = name + "-h" + std::to_string(i);
    model.blocks.push_back(TransformerBlock(g, x, block));
    x = model.blocks.back().output;
    if (!x.valid()) return {};
  }
  LayerNormOptions ln_f;
  ln_f.name = name + "-ln_f";
  model.ln_f = LayerNormLayer(g, x, ln_f);
  if (!model.ln_f.output.valid()) return {};
  if (config.tie_weights) {
    model.lm_head = model.token_embedding.weight;
    model.logits = EmitMatmul(g, name + "-lm_head", model.ln_f.output, model.lm_head,
                              /*transpose_b=*/true);
  } else {
    LinearOptions head;
    head.use_bias = false;
    head.name = name + "-lm_head";
    Layer lm_head = Linear(g, model.ln_f.output, config.vocab_size, head);
    model.lm_head = lm_head.weight;
    model.logits = lm_head.output;
  }
  if (!model.logits.valid()) return {};
  return model;
}

}  // namespace oflite
