#include "oneflow_lite/api/transformer.h"

#include <algorithm>
#include <cmath>
#include <memory>
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

// The hints of TensorParallelOptions: flat over the group, or (data, tensor)
// pairs with B (parameters) or S(0) (activations) on the data axis.
class TensorParallelHints {
 public:
  TensorParallelHints(Graph* g, const TensorParallelOptions& options)
      : g_(g), options_(options) {}

  bool enabled() const { return options_.degree > 1; }
  void Parameter(const Tensor& t, const SbpParallel& sbp) const {
    if (Usable(t)) g_->HintSbp(t, Layout(BroadcastSbp(), sbp));
  }
  // An activation and, mirrored, its gradient: the gradient of a split
  // tensor is split alike, that of a replicated tensor or of a partial sum
  // is replicated (Megatron's backward: the partial sums of dX from the
  // column-split projections meet in one all-reduce, where the gradient
  // of the LayerNorm output they read is consumed).
  void Activation(const Tensor& t, const SbpParallel& sbp) const {
    if (!Usable(t)) return;
    g_->HintSbp(t, Layout(SplitSbp(0), sbp));
    g_->HintGradSbp(t, Layout(SplitSbp(0), IsPartialSum(sbp) ? BroadcastSbp() : sbp));
  }

 private:
  bool Usable(const Tensor& t) const { return enabled() && t.valid() && g_->ok(); }
  NdSbp Layout(const SbpParallel& data, const SbpParallel& tensor) const {
    NdSbp layout;
    if (options_.data_axis) *layout.add_sbp() = data;
    *layout.add_sbp() = tensor;
    return layout;
  }

  Graph* g_;
  TensorParallelOptions options_;
};

// A LayerNorm output replicated over the group, with the op's statistics
// (the compiler wants a hint on every output once one is hinted).
void HintReplicatedNorm(const TensorParallelHints& tp, const Tensor& y) {
  const std::string op = y.lbn.substr(0, y.lbn.find('/'));
  for (const char* output : {"/y_0", "/mean_0", "/inv_variance_0"}) {
    tp.Activation(Tensor{op + output, {}}, BroadcastSbp());
  }
}

// Column parallel (weight S(1), bias S(0), output split on its last axis)
// or row parallel (weight S(0), bias B, output P) hints of a Linear.
void HintColumnParallel(const TensorParallelHints& tp, const Layer& linear) {
  tp.Parameter(linear.weight, SplitSbp(1));
  if (linear.bias.valid()) tp.Parameter(linear.bias, SplitSbp(0));
  if (linear.output.valid()) tp.Activation(linear.output, SplitSbp(linear.output.rank() - 1));
}

void HintRowParallel(const TensorParallelHints& tp, const Layer& linear) {
  tp.Parameter(linear.weight, SplitSbp(0));
  if (linear.bias.valid()) tp.Parameter(linear.bias, BroadcastSbp());
  tp.Activation(linear.output, PartialSumSbp());
}

// Whether the tensor-parallel degree divides `count` (`what` of `layer`);
// records an error naming both numbers otherwise.
bool CheckDegree(Graph* g, const std::string& kind, const std::string& layer,
                 const TensorParallelOptions& options, int64_t count, const std::string& what) {
  if (options.degree >= 1 && count % options.degree == 0) return true;
  g->RecordError(InvalidArgumentError(kind, " '", layer, "': tensor-parallel degree ",
                                      options.degree, " does not divide the ", count, " ", what));
  return false;
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
  if (!CheckDegree(g, "attention", layer, options.tensor_parallel, options.heads, "heads")) {
    return {};
  }
  const int64_t heads = options.heads, head_dim = channels / heads;
  const TensorParallelHints tp(g, options.tensor_parallel);
  AttentionLayer result;
  LinearOptions in_proj;
  in_proj.use_bias = options.use_bias;
  in_proj.weight_init = Initializer::Normal(0.0, options.init_std);
  // [B, T, C] -> [B, H, T, D] for queries, keys and values.
  auto project_heads = [&](const std::string& part, Layer* linear) -> Tensor {
    in_proj.name = layer + "-" + part;
    *linear = Linear(g, x, channels, in_proj);
    if (!linear->output.valid()) return {};
    HintColumnParallel(tp, *linear);
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
  tp.Activation(merged, SplitSbp(2));  // each device its heads' channels
  LinearOptions out_proj;
  out_proj.use_bias = options.use_bias;
  out_proj.weight_init = Initializer::Normal(0.0, options.proj_init_std);
  out_proj.name = layer + "-proj";
  result.projection = Linear(g, merged, channels, out_proj);
  result.output = result.projection.output;
  if (!result.output.valid()) return {};
  HintRowParallel(tp, result.projection);
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
  if (!CheckDegree(g, "mlp", layer, options.tensor_parallel, hidden, "hidden units")) return {};
  const TensorParallelHints tp(g, options.tensor_parallel);
  MlpLayer result;
  LinearOptions fc;
  fc.use_bias = options.use_bias;
  fc.weight_init = Initializer::Normal(0.0, options.init_std);
  fc.name = layer + "-fc";
  result.fc = Linear(g, x, hidden, fc);
  if (!result.fc.output.valid()) return {};
  HintColumnParallel(tp, result.fc);
  Tensor h = EmitActivation(g, layer, options.activation, result.fc.output);
  if (!h.valid()) return {};
  LinearOptions proj = fc;
  proj.weight_init = Initializer::Normal(0.0, options.proj_init_std);
  proj.name = layer + "-proj";
  result.projection = Linear(g, h, channels, proj);
  result.output = result.projection.output;
  if (!result.output.valid()) return {};
  HintRowParallel(tp, result.projection);
  return result;
}

TransformerBlockLayer TransformerBlock(Graph* g, const Tensor& x,
                                       const TransformerBlockOptions& options) {
  if (!g->ok() || !g->CheckInputs("TransformerBlock", {&x})) return {};
  const std::string layer = g->UniqueName("block", options.name);
  if (!CheckSequence(g, "block", layer, x)) return {};
  const TensorParallelHints tp(g, options.tensor_parallel);
  TransformerBlockLayer result;
  LayerNormOptions ln;
  ln.epsilon = options.layer_norm_epsilon;
  ln.name = layer + "-ln_1";
  result.ln_1 = LayerNormLayer(g, x, ln);
  if (!result.ln_1.output.valid()) return {};
  HintReplicatedNorm(tp, result.ln_1.output);
  AttentionOptions attention;
  attention.heads = options.heads;
  attention.use_bias = options.use_bias;
  attention.init_std = options.init_std;
  attention.proj_init_std = options.proj_init_std;
  attention.tensor_parallel = options.tensor_parallel;
  attention.name = layer + "-attn";
  result.attention = CausalSelfAttention(g, result.ln_1.output, attention);
  if (!result.attention.output.valid()) return {};
  // The partial sums of the row-parallel projection meet here: the
  // sub-block's one all-reduce.
  Tensor h = EmitAdd(g, layer + "-residual_1", x, result.attention.output);
  if (!h.valid()) return {};
  tp.Activation(h, BroadcastSbp());
  ln.name = layer + "-ln_2";
  result.ln_2 = LayerNormLayer(g, h, ln);
  if (!result.ln_2.output.valid()) return {};
  HintReplicatedNorm(tp, result.ln_2.output);
  MlpOptions mlp;
  mlp.hidden = options.mlp_hidden;
  mlp.activation = options.activation;
  mlp.use_bias = options.use_bias;
  mlp.init_std = options.init_std;
  mlp.proj_init_std = options.proj_init_std;
  mlp.tensor_parallel = options.tensor_parallel;
  mlp.name = layer + "-mlp";
  result.mlp = MlpBlock(g, result.ln_2.output, mlp);
  if (!result.mlp.output.valid()) return {};
  result.output = EmitAdd(g, layer + "-residual_2", h, result.mlp.output);
  if (!result.output.valid()) return {};
  tp.Activation(result.output, BroadcastSbp());
  return result;
}

// ---- GPT -----------------------------------------------------------------------------

int64_t GptBlockStage(int64_t index, int64_t layers, int64_t stages) {
  if (stages <= 1 || layers <= 0) return 0;
  const int64_t base = layers / stages, longer = layers % stages;
  // The first `longer` stages hold base + 1 blocks each.
  if (index < longer * (base + 1)) return index / (base + 1);
  return longer + (index - longer * (base + 1)) / base;
}

namespace {

// While it lives, new ops go to stage `index` of `stages` (nothing when
// there are none).
std::unique_ptr<Graph::PlacementScope> StageScope(Graph* g, const std::vector<Placement>& stages,
                                                  size_t index) {
  if (stages.empty()) return nullptr;
  return std::make_unique<Graph::PlacementScope>(g->WithPlacement(stages[index]));
}

// The token and position embeddings of `tokens`: x [B, T, C].
Tensor GptEmbeddings(Graph* g, const std::string& name, const Tensor& tokens,
                     const GptConfig& config, GptModel* model) {
  const int64_t time = tokens.shape().dim(1), channels = config.channels;
  EmbeddingOptions wte;
  wte.initializer = Initializer::Normal(0.0, 0.02);
  wte.dtype = config.dtype;
  wte.name = name + "-wte";
  model->token_embedding = EmbeddingLayer(g, tokens, config.vocab_size, channels, wte);
  model->position_embedding = g->Parameter(name + "-wpe", Shape{config.block_size, channels},
                                           config.dtype, Initializer::Normal(0.0, 0.02));
  if (!g->ok()) return {};
  const TensorParallelHints tp(g, config.tensor_parallel);
  tp.Activation(model->token_embedding.output, BroadcastSbp());
  Tensor positions = model->position_embedding;
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
                            .Input("x", model->token_embedding.output.lbn)
                            .Input("y", positions.lbn)
                            .Output("out")
                            .Build());
  tp.Activation(x, BroadcastSbp());
  return x;
}

// ln_f and the logits of x [B, T, C].
bool GptHead(Graph* g, const std::string& name, const Tensor& x, const GptConfig& config,
             GptModel* model) {
  const TensorParallelHints tp(g, config.tensor_parallel);
  LayerNormOptions ln_f;
  ln_f.name = name + "-ln_f";
  model->ln_f = LayerNormLayer(g, x, ln_f);
  if (!model->ln_f.output.valid()) return false;
  HintReplicatedNorm(tp, model->ln_f.output);
  if (config.tie_weights) {
    model->lm_head = model->token_embedding.weight;
    model->logits = EmitMatmul(g, name + "-lm_head", model->ln_f.output, model->lm_head,
                               /*transpose_b=*/true);
  } else {
    LinearOptions head;
    head.use_bias = false;
    head.name = name + "-lm_head";
    Layer lm_head = Linear(g, model->ln_f.output, config.vocab_size, head);
    model->lm_head = lm_head.weight;
    model->logits = lm_head.output;
  }
  tp.Activation(model->logits, BroadcastSbp());
  return model->logits.valid();
}

}  // namespace

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
  const int64_t stages = static_cast<int64_t>(config.stages.size());
  if (stages > std::max<int64_t>(config.layers, 1)) {
    g->RecordError(InvalidArgumentError("gpt '", name, "': ", stages, " pipeline stages for ",
                                        config.layers, " layers; want at most one stage per "
                                        "layer"));
    return {};
  }
  const double proj_std = 0.02 / std::sqrt(2.0 * std::max<int64_t>(config.layers, 1));
  GptModel model;
  Tensor x;
  {
    auto scope = StageScope(g, config.stages, 0);
    x = GptEmbeddings(g, name, tokens, config, &model);
  }
  if (!x.valid()) return {};
  TransformerBlockOptions block;
  block.heads = config.heads;
  block.activation = config.activation;
  block.use_bias = config.use_bias;
  block.proj_init_std = proj_std;
  block.tensor_parallel = config.tensor_parallel;
  for (int64_t i = 0; i < config.layers; ++i) {
    auto scope = StageScope(g, config.stages, GptBlockStage(i, config.layers, stages));
    block.name = name + "-h" + std::to_string(i);
    model.blocks.push_back(TransformerBlock(g, x, block));
    x = model.blocks.back().output;
    if (!x.valid()) return {};
  }
  auto scope = StageScope(g, config.stages, stages > 0 ? stages - 1 : 0);
  if (!GptHead(g, name, x, config, &model)) return {};
  return model;
}

}  // namespace oflite
