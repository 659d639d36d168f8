// Transformer layers: Linear over the last axis, causal self-attention, the
// MLP block, the pre-LayerNorm transformer block and a GPT, as free
// functions adding their ops to a Graph (graph.h), in the manner of
// layers.h: unique layer names ("attention", "attention_1", ... or
// options.name), ops "<layer>-<part>", errors recorded in the graph and
// naming the layer, parameters returned for hints and sharing.
//
//   oflite::Graph g("gpt", /*seed=*/1);
//   auto data = oflite::TokenWindows(&g, "tokens.npy", 12, 64, 65);   // [B, T]
//   oflite::GptConfig config{.vocab_size = 65, .block_size = 64};
//   oflite::GptModel gpt = oflite::Gpt(&g, data.input, config);       // logits [B, T, V]
//   g.Minimize(g.SparseSoftmaxCrossEntropy(gpt.logits, data.target), oflite::AdamW{});
//
// Weights are [in, out] as for Dense (y = x w + b); the initial values
// follow GPT-2: normal(0, 0.02) for weights and embeddings, normal(0, 0.02 /
// sqrt(2 layers)) for the projections that write into the residual
// stream, zero biases, LayerNorm gamma 1 and beta 0.
//
// Causality: attention scores go through `causal_softmax` (docs/ops.md), so
// the output at position t reads only tokens 0..t; changing a later token
// changes nothing before it (api/transformer_test.cc checks it).
#ifndef ONEFLOW_LITE_API_TRANSFORMER_H_
#define ONEFLOW_LITE_API_TRANSFORMER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/api/placement.h"
#include "oneflow_lite/api/variable.h"

namespace oflite {

// Megatron-LM tensor parallelism, said with SBP hints only (no op of its
// own): in each attention and MLP sub-block the first projections (query,
// key, value, MLP fc: weights [in, out] hinted S(1), biases S(0)) are split
// by output column, so the heads and the MLP's hidden units are spread over
// the group (the head axis of the reshape / transpose / batched matmul /
// causal_softmax chain is split); the second projection (attention proj,
// MLP proj: weight S(0)) is split by input row and leaves a partial sum P,
// its bias added once (B -> P keeps it on one device), and the residual sum
// is hinted B: one all-reduce per sub-block in the forward pass. LayerNorm
// outputs and the residual stream are replicated (B) over the group. Each
// activation's gradient is hinted alike (Graph::HintGradSbp; P's gradient
// B), so the backward is Megatron's too: the partial sums of dX from the
// column-split projections all-reduced once before LayerNorm's backward.
//
// The group is the devices of the ops' placement (flat hints), or, with
// `data_axis`, the second axis of a [data, tensor] placement hierarchy
// (e.g. "0-1:cpu:0-1@2x2"): every hint is then the pair (data, tensor),
// B on the data axis for parameters and S(0) (the batch) for activations.
// The compiler must accept the 2-D hints for that (docs/graph_api.md).
struct TensorParallelOptions {
  int64_t degree = 1;      // 1: no hints; must divide the heads and the MLP's hidden units
  bool data_axis = false;  // hints are (data, tensor) pairs for a [data, tensor] hierarchy
};

struct LinearOptions {
  bool use_bias = true;
  Initializer weight_init = Initializer::Normal(0.0, 0.02);
  Initializer bias_init = Initializer::Zeros();
  std::string name;
};

// x [..., in] -> [..., units]: one matmul over the last axis (the leading
// axes are folded into the GEMM's rows), weight [in, units], bias [units].
// Unlike Dense, no flattening: a [B, T, C] input gives [B, T, units].
Layer Linear(Graph* g, const Tensor& x, int64_t units, const LinearOptions& options = {});

struct AttentionOptions {
  int64_t heads = 1;  // must divide the channels
  bool use_bias = true;
  // The output projection's weights (normal(0, proj_std)); GPT passes 0.02 /
  // sqrt(2 layers).
  double init_std = 0.02;
  double proj_init_std = 0.02;
  TensorParallelOptions tensor_parallel;  // degree must divide heads
  std::string name;
};

// The parameters of CausalSelfAttention: the query, key, value and output
// projections (each a Linear of [C, C]).
struct AttentionLayer {
  Tensor output;
  Layer query;
  Layer key;
  Layer value;
  Layer projection;
};

// x [B, T, C] -> [B, T, C]: per head h (C / heads channels each),
// softmax(q k^T / sqrt(C / heads), causal) v, heads concatenated, then the
// output projection.
AttentionLayer CausalSelfAttention(Graph* g, const Tensor& x, const AttentionOptions& options);

struct MlpOptions {
  int64_t hidden = 0;  // 0: 4 x channels
  std::string activation = "gelu";  // "gelu" (erf), "gelu_tanh", "relu"
  bool use_bias = true;
  double init_std = 0.02;
  double proj_init_std = 0.02;
  TensorParallelOptions tensor_parallel;  // degree must divide hidden
  std::string name;
};

struct MlpLayer {
  Tensor output;
  Layer fc;          // [C, hidden]
  Layer projection;  // [hidden, C]
};

// x [..., C] -> [..., C]: Linear(hidden), activation, Linear(C).
MlpLayer MlpBlock(Graph* g, const Tensor& x, const MlpOptions& options = {});

struct TransformerBlockOptions {
  int64_t heads = 1;
  int64_t mlp_hidden = 0;  // 0: 4 x channels
  std::string activation = "gelu";
  bool use_bias = true;
  double layer_norm_epsilon = 1e-5;
  double init_std = 0.02;
  double proj_init_std = 0.02;
  // Attention and MLP split over a tensor-parallel group; the LayerNorm
  // outputs and both residual sums are hinted B (replicated in the group).
  TensorParallelOptions tensor_parallel;
  std::string name;
};

struct TransformerBlockLayer {
  Tensor output;
  Layer ln_1;
  AttentionLayer attention;
  Layer ln_2;
  MlpLayer mlp;
};

// Pre-LayerNorm block: x + attention(ln_1(x)), then + mlp(ln_2(.)).
TransformerBlockLayer TransformerBlock(Graph* g, const Tensor& x,
                                       const TransformerBlockOptions& options);

struct GptConfig {
  int64_t vocab_size = 0;
  int64_t block_size = 0;  // the longest sequence (rows of the position table)
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t channels = 128;
  std::string activation = "gelu";
  bool use_bias = true;
  // Output logits as x wte^T (GPT-2's weight tying) instead of an own
  // lm_head [C, V].
  bool tie_weights = false;
  DataType dtype = DT_FLOAT;
  // Every block tensor parallel (TransformerBlockOptions); the embeddings,
  // ln_f and lm_head stay replicated over the group (hinted B).
  TensorParallelOptions tensor_parallel;
  // Pipeline stages: empty puts every op on the graph's placement; K
  // placements split the blocks into K contiguous groups in order (layers
  // / K each, the first layers % K stages one more; K <= layers), the
  // embeddings on the first stage and ln_f / lm_head on the last. Tensor
  // parallelism applies inside each stage's placement. The caller puts the
  // loss on stages.back() (Graph::WithPlacement). Variable names do not
  // depend on the stages or the tensor parallelism.
  std::vector<Placement> stages;
  std::string name;  // default "gpt"
};

struct GptModel {
  Tensor logits;  // [B, T, vocab]
  Layer token_embedding;     // weight [V, C]
  Tensor position_embedding;  // [block_size, C]
  std::vector<TransformerBlockLayer> blocks;
  Layer ln_f;
  Tensor lm_head;  // [C, V]; the token table when tied
};

// tokens [B, T] (int32/int64, T <= block_size) -> logits [B, T, V].
// Variables: "<name>-wte-weight", "<name>-wpe", "<name>-h<i>-..." per block,
// "<name>-ln_f-gamma/beta", "<name>-lm_head-weight" (untied).
// The stage of block `index` among `layers` blocks split into `stages`
// (GptConfig::stages): contiguous, the first layers % stages one longer.
int64_t GptBlockStage(int64_t index, int64_t layers, int64_t stages);
GptModel Gpt(Graph* g, const Tensor& tokens, const GptConfig& config);

}  // namespace oflite

#endif  // ONEFLOW_LITE_API_TRANSFORMER_H_
