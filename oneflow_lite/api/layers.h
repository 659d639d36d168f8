// The layer library: the parts of a model that own parameters or a name
// (Dense, Conv2d, MaxPool2d/AvgPool2d, LayerNorm, Embedding, BatchNorm,
// Dropout), as free functions adding their ops to a Graph (graph.h) through
// its building blocks.
//
//   oflite::Graph g("mlp", /*seed=*/1);
//   oflite::Layer fc = oflite::DenseLayer(&g, x, 1024);
//   g.HintSbp(fc.weight, oflite::Split(1));             // column-parallel weight
//   auto y = g.Relu(oflite::Dense(&g, fc.output, 10));
//
// A layer takes a unique name from its kind ("dense", "dense_1", ...) or
// options.name (an error if already used); its ops are "<layer>-<part>"
// ("dense-weight", "dense-matmul", "dense-bias_add"), and its variables get
// the graph's next seeds in call order, so the Job depends only on the
// sequence of calls (graph.h, "Determinism").
//
// Errors are the graph's, as for its own builders: a bad argument records
// one naming the layer, and after any error a layer adds nothing and
// returns invalid tensors. `g` must not be null; it is used during the call
// only. Thread-compatible, like the Graph.
#ifndef ONEFLOW_LITE_API_LAYERS_H_
#define ONEFLOW_LITE_API_LAYERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/variable.h"

namespace oflite {

struct DenseOptions {
  bool use_bias = true;
  Initializer weight_init = Initializer::XavierUniform();
  Initializer bias_init = Initializer::Zeros();
  // Share parameters: when valid, used instead of creating new variables
  // (weight [in, units], bias [units]).
  Tensor weight;
  Tensor bias;
  std::string name;
};

struct Conv2dOptions {
  std::vector<int64_t> strides = {1, 1};
  std::vector<int64_t> padding = {0, 0};
  std::vector<int64_t> dilations = {1, 1};
  bool use_bias = true;
  Initializer weight_init = Initializer::XavierUniform();
  Initializer bias_init = Initializer::Zeros();
  std::string name;
};

struct Pool2dOptions {
  std::vector<int64_t> strides;  // empty = kernel size
  std::vector<int64_t> padding = {0, 0};
  std::string name;
};

struct LayerNormOptions {
  int64_t begin_norm_axis = -1;
  double epsilon = 1e-5;
  std::string name;
};

struct EmbeddingOptions {
  Initializer initializer = Initializer::Normal(0.0, 1.0);
  DataType dtype = DT_FLOAT;  // of the table (and the output)
  std::string name;
};

// BatchNorm over every axis but the channel axis 1 (docs/ops.md,
// batch_norm): gamma (ones) and beta (zeros) are trainable, moving_mean
// (zeros) and moving_variance (ones) are non-trainable variables the op
// updates in place while training; the evaluation job uses them instead.
struct BatchNormOptions {
  double momentum = 0.9;  // running = momentum * running + (1 - momentum) * batch
  double epsilon = 1e-5;
  // Share parameters: when valid, used instead of creating new gamma/beta
  // ([C] each). The running statistics are always the layer's own.
  Tensor gamma;
  Tensor beta;
  std::string name;
};

// What a layer created, for hints and sharing: `output`, and its
// parameters as the variables' tensors (e.g. g.HintSbp(layer.weight,
// Split(1)) for a column-parallel Dense). `bias` is invalid without one;
// for LayerNorm weight/bias are gamma/beta; for Embedding weight is the
// table. All invalid when the graph recorded an error.
struct Layer {
  Tensor output;
  Tensor weight;
  Tensor bias;
};

// x [N, in] (rank > 2: flattened to [N, prod(rest)]) -> [N, units].
Tensor Dense(Graph* g, const Tensor& x, int64_t units, const DenseOptions& options = {});
// x [N, C, H, W] -> [N, filters, H', W']; weight [filters, C, k, k].
Tensor Conv2d(Graph* g, const Tensor& x, int64_t filters, int64_t kernel_size,
              const Conv2dOptions& options = {});
// gamma (ones) and beta (zeros) over x.shape[begin_norm_axis:].
Tensor LayerNorm(Graph* g, const Tensor& x, const LayerNormOptions& options = {});
// indices (int32/int64) -> [..., dim]; weight [vocab_size, dim].
Tensor Embedding(Graph* g, const Tensor& indices, int64_t vocab_size, int64_t dim,
                 const EmbeddingOptions& options = {});

// The same layers, returning their parameters too (the plain forms above
// return DenseLayer(...).output, and so on).
Layer DenseLayer(Graph* g, const Tensor& x, int64_t units, const DenseOptions& options = {});
Layer Conv2dLayer(Graph* g, const Tensor& x, int64_t filters, int64_t kernel_size,
                  const Conv2dOptions& options = {});
Layer LayerNormLayer(Graph* g, const Tensor& x, const LayerNormOptions& options = {});
Layer EmbeddingLayer(Graph* g, const Tensor& indices, int64_t vocab_size, int64_t dim,
                     const EmbeddingOptions& options = {});

// x [N, C, H, W], square kernel; the layer is one op named "<layer>".
Tensor MaxPool2d(Graph* g, const Tensor& x, int64_t kernel_size, const Pool2dOptions& options = {});
Tensor AvgPool2d(Graph* g, const Tensor& x, int64_t kernel_size, const Pool2dOptions& options = {});
// x [N, C, ...] -> same shape; creates the layer's variables
// ("<layer>-gamma", "-beta", "-moving_mean", "-moving_variance").
Tensor BatchNorm(Graph* g, const Tensor& x, const BatchNormOptions& options = {});
// Training-time dropout (the evaluation job turns it into identity); one
// op "<name>" (default "dropout", ...), seeded.
Tensor Dropout(Graph* g, const Tensor& x, double rate, const std::string& name = "");

}  // namespace oflite

#endif  // ONEFLOW_LITE_API_LAYERS_H_
