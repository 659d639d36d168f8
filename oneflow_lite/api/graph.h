// The C++ graph API: build a Job (the logical graph) the way one writes a
// model in a mature framework.
//
//   oflite::Graph g("mlp", /*seed=*/42);
//   auto data = g.FashionMnist("/usr/share/datasets/fashion-mnist", 64, oflite::Split(0));
//   auto h = g.Relu(g.Dense(data.image, 256));       // rank > 2 inputs are flattened
//   auto logits = g.Dense(g.Relu(g.Dense(h, 256)), 10);
//   auto loss = g.SparseSoftmaxCrossEntropy(logits, data.label);  // mean over batch
//   g.AddMetric("accuracy", g.Accuracy(logits, data.label));
//   g.Minimize(loss, oflite::Sgd{.learning_rate = 0.1});
//   g.SetPlacement(oflite::Placement::Parse("0:cpu:0-1"));
//   oflite::StatusOr<oflite::Job> job = g.Build();   // forward + backward + updates
//   if (!job.ok()) { LOG(ERROR) << job.status(); ... }
//   CHECK_OK(oflite::SaveJob("mlp.job.pb", *job));   // common/proto_io.h
//
// Tensors are symbolic handles: an lbn and the static TensorDesc inferred
// when the op was added. Every builder call runs the op's shape inference
// immediately (InferOp); on a mismatch the graph records the error, whose
// message names the op, its type and every input desc, e.g.
//   graph 'mlp': op 'dense_1-matmul' (matmul): ... [inputs: a=float32(64, 784),
//   b=float32(100, 10)]
// Errors are sticky: after the first one, builder calls do nothing and
// return invalid tensors, and Build() returns that first error, so one check
// at the end suffices (status() lets a caller stop earlier). Build() is
// [[nodiscard]] through StatusOr, so an error cannot go unnoticed.
//
// Names: layers get unique names from their kind ("dense", "dense_1", ...)
// or from options.name; the layer's ops are "<layer>-<part>" (e.g.
// "dense-weight", "dense-matmul"). An explicit name that is already taken
// is an error.
//
// Determinism: names, variable seeds (DeriveSeed(job seed, counter)) and the
// Job's field order depend only on the sequence of calls, so building the
// same graph twice gives byte-identical Jobs.
//
// A Graph is single-threaded (thread-compatible); Tensors are plain values
// that stay meaningful only for the Graph that made them.
#ifndef ONEFLOW_LITE_API_GRAPH_H_
#define ONEFLOW_LITE_API_GRAPH_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "oneflow_lite/api/optimizer.h"
#include "oneflow_lite/api/placement.h"
#include "oneflow_lite/api/variable.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/ops/sbp.h"
#include "proto/job.pb.h"

namespace oflite {

// A symbolic tensor: the lbn of a blob of the graph and its static desc.
struct Tensor {
  std::string lbn;
  TensorDesc desc;

  bool valid() const { return !lbn.empty(); }
  const Shape& shape() const { return desc.shape; }
  DataType dtype() const { return desc.dtype; }
  int64_t rank() const { return desc.shape.rank(); }
};

// SBP hint shorthands (one placement level).
inline SbpParallel Split(int64_t axis) { return SplitSbp(axis); }
inline SbpParallel Broadcast() { return BroadcastSbp(); }
inline SbpParallel PartialSum() { return PartialSumSbp(); }

// Fashion-MNIST sizes (the train and test splits of the idx files).
inline constexpr int64_t kFashionMnistTrainSize = 60000;
inline constexpr int64_t kFashionMnistTestSize = 10000;

struct Batch {
  Tensor image;  // float32 [B, 1, 28, 28] or [B, 784] when flattened
  Tensor label;  // int32 [B]
};

struct FashionMnistOptions {
  std::string split = "train";  // "train" or "test"
  bool shuffle = true;
  bool flatten = false;  // image [B, 784] instead of [B, 1, 28, 28]
  double mean = 0.0;     // image = (pixel / 255 - mean) / std
  double std = 1.0;
  // Check at build time that the split's idx files exist under the path
  // (the kernel checks again when it starts).
  bool check_path = true;
  // Split a batch the devices do not divide into balanced parts (device k
  // gets batch / p rows, plus one if k < batch % p) instead of refusing it;
  // results equal one device (the loss and metrics average the gathered
  // batch).
  bool uneven_split = false;
  std::string name;
};

struct NpyDataOptions {
  std::string split = "train";  // "train" or "test"
  bool shuffle = true;          // per epoch, by the job seed
  // image = (x * scale - mean) / std, as float32 (x of any numeric dtype).
  double scale = 1.0;
  double mean = 0.0;
  double std = 1.0;
  bool uneven_split = false;  // as FashionMnistOptions::uneven_split
  std::string name;
};

struct VariableOptions {
  // Default (Initializer::Auto): Glorot (Xavier) uniform for a weight of
  // rank >= 2 (fan-in/fan-out from its shape, ops/train/initializer.h),
  // zeros for a bias or any rank < 2 variable. Give Initializer::Zeros()
  // explicitly for an all-zero matrix.
  Initializer initializer = Initializer::Auto();
  DataType dtype = DT_FLOAT;
  bool trainable = true;
};

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

class Graph {
 public:
  // `seed` is the job seed: variable initializers, dropout and shuffling
  // derive their seeds from it.
  explicit Graph(std::string name, int64_t seed = 0);
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  // The first error recorded (OK if none).
  const Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }

  // ---- Configuration -----------------------------------------------------
  // The job's default placement (ops without their own). Default "0:cpu:0".
  // The StatusOr overload records a parse error as the graph's error.
  void SetPlacement(const Placement& placement);
  void SetPlacement(const StatusOr<Placement>& placement);
  // Whether SetPlacement was called (the training driver keeps a model's
  // own placement instead of its flags').
  bool placement_set() const { return placement_set_; }

  // While the returned scope lives, new ops get `placement`. Scopes nest.
  class [[nodiscard]] PlacementScope {
   public:
    PlacementScope(PlacementScope&& other) noexcept;
    PlacementScope(const PlacementScope&) = delete;
    ~PlacementScope();

   private:
    friend class Graph;
    PlacementScope(Graph* graph, bool restore, PlacementProto previous, bool had_previous);
    Graph* graph_;
    bool restore_;
    PlacementProto previous_;
    bool had_previous_;
  };
  PlacementScope WithPlacement(const Placement& placement);
  PlacementScope WithPlacement(const StatusOr<Placement>& placement);

  // SBP hint on the op producing `tensor`, for that output blob.
  void HintSbp(const Tensor& tensor, const SbpParallel& sbp);
  void HintSbp(const Tensor& tensor, const NdSbp& sbp);

  // How long to train: a fixed iteration count, or epochs of the training
  // data source (epochs * split size / batch size, rounded down). Unset:
  // one epoch when the graph has a Fashion-MNIST source, else 0 (= until
  // the data source ends).
  void SetIterations(int64_t iterations);
  void SetEpochs(int64_t epochs);
  // Whether SetIterations or SetEpochs was called.
  bool duration_set() const { return iterations_ >= 0 || epochs_ > 0; }

  // A named scalar reported every iteration, in the order added. Once
  // Minimize is called the loss is reported first as "loss" (a metric
  // "loss" naming another tensor is then an error at Build). Inference-only
  // graphs may add their own "loss".
  void AddMetric(const std::string& name, const Tensor& scalar);
  // A named tensor of any shape (e.g. "logits" [B, classes]) that inference
  // and evaluation plans deliver whole to the sink every iteration:
  // `oflite predict` writes it per sample (Job: TrainConf.output; training
  // plans leave it out). Names are unique among metrics and outputs.
  void AddOutput(const std::string& name, const Tensor& tensor);

  // ---- Sources -----------------------------------------------------------
  Tensor Variable(const std::string& name, const Shape& shape, const VariableOptions& options = {});
  // `batch_size` is the logical (global) batch; `sbp` hints how it is split
  // over the placement's devices (Split(0): data parallel).
  Batch FashionMnist(const std::string& path, int64_t batch_size, const SbpParallel& sbp = Split(0),
                     const FashionMnistOptions& options = {});
  // Batches of the user's arrays: <dir>/train_x.npy (samples [N, ...], any
  // numeric dtype) and train_y.npy (integer labels [N]), plus test_x.npy /
  // test_y.npy for the evaluation plan when present (data/npy_dataset.h).
  // The headers are read now (sample shape and count; a bad file is the
  // graph's error, naming it); the data is read by the kernel on every
  // machine, each device taking its rows of each batch. image: float32
  // [B, sample dims...]; label: int32 [B]. Epochs count the train split.
  Batch NpyData(const std::string& dir, int64_t batch_size, const SbpParallel& sbp = Split(0),
                const NpyDataOptions& options = {});
  // Deterministic synthetic data: image `dtype` (float32 or float64) of
  // `image_shape` ([B, ...]), label int32 [B] in [0, num_classes).
  Batch RandomBatch(const Shape& image_shape, int64_t num_classes,
                    const SbpParallel& sbp = Split(0), DataType dtype = DT_FLOAT,
                    const std::string& name = "");

  // ---- Layers (create variables) -----------------------------------------
  // x [N, in] (rank > 2: flattened to [N, prod(rest)]) -> [N, units].
  Tensor Dense(const Tensor& x, int64_t units, const DenseOptions& options = {});
  // x [N, C, H, W] -> [N, filters, H', W']; weight [filters, C, k, k].
  Tensor Conv2d(const Tensor& x, int64_t filters, int64_t kernel_size,
                const Conv2dOptions& options = {});
  Tensor MaxPool2d(const Tensor& x, int64_t kernel_size, const Pool2dOptions& options = {});
  Tensor AvgPool2d(const Tensor& x, int64_t kernel_size, const Pool2dOptions& options = {});
  // gamma (ones) and beta (zeros) over x.shape[begin_norm_axis:].
  Tensor LayerNorm(const Tensor& x, const LayerNormOptions& options = {});
  // indices (int32/int64) -> [..., dim]; weight [vocab_size, dim].
  Tensor Embedding(const Tensor& indices, int64_t vocab_size, int64_t dim,
                   const EmbeddingOptions& options = {});
  // The same layers, returning their parameters too (the plain forms above
  // return DenseLayer(...).output, and so on).
  Layer DenseLayer(const Tensor& x, int64_t units, const DenseOptions& options = {});
  Layer Conv2dLayer(const Tensor& x, int64_t filters, int64_t kernel_size,
                    const Conv2dOptions& options = {});
  Layer LayerNormLayer(const Tensor& x, const LayerNormOptions& options = {});
  Layer EmbeddingLayer(const Tensor& indices, int64_t vocab_size, int64_t dim,
                       const EmbeddingOptions& options = {});
  // Training-time dropout (the evaluation job turns it into identity).
  Tensor Dropout(const Tensor& x, double rate, const std::string& name = "");
  Tensor Flatten(const Tensor& x, int64_t start_dim = 1, int64_t end_dim = -1);

  // ---- Activations -------------------------------------------------------
  Tensor Relu(const Tensor& x);
  Tensor Sigmoid(const Tensor& x);
  Tensor Tanh(const Tensor& x);
  Tensor Gelu(const Tensor& x);
  Tensor Softmax(const Tensor& x, int64_t axis = -1);
  Tensor LogSoftmax(const Tensor& x, int64_t axis = -1);

  // ---- Math --------------------------------------------------------------
  Tensor MatMul(const Tensor& a, const Tensor& b, bool transpose_a = false,
                bool transpose_b = false, double alpha = 1.0);
  Tensor BiasAdd(const Tensor& a, const Tensor& bias, int64_t axis = 1);
  Tensor Add(const Tensor& a, const Tensor& b);
  Tensor AddN(const std::vector<Tensor>& inputs);
  Tensor Sub(const Tensor& x, const Tensor& y);
  Tensor Mul(const Tensor& x, const Tensor& y);
  Tensor Div(const Tensor& x, const Tensor& y);
  Tensor ScalarAdd(const Tensor& x, double value);
  Tensor ScalarMul(const Tensor& x, double value);
  Tensor Pow(const Tensor& x, double exponent);
  Tensor ReduceSum(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
  Tensor ReduceMean(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
  Tensor Reshape(const Tensor& x, const Shape& shape);  // one -1 allowed
  Tensor Transpose(const Tensor& x, const std::vector<int64_t>& perm);
  Tensor Concat(const std::vector<Tensor>& inputs, int64_t axis);
  Tensor Slice(const Tensor& x, const std::vector<int64_t>& start, const std::vector<int64_t>& stop,
               const std::vector<int64_t>& step);
  Tensor Identity(const Tensor& x);
  // The rows of x [N, ...] whose mask [N] is not zero, in order: a dynamic
  // tensor (desc max shape [N, ...], marked "*"; the actual row count is
  // known per iteration). Not differentiable; a cross-machine edge carrying
  // it uses bounce buffers (only the valid bytes move).
  Tensor SelectRows(const Tensor& x, const Tensor& mask);
  Tensor Cast(const Tensor& x, DataType dtype);

  // ---- More math, selection, indexing, normalization (graph_more_ops.cc) ---
  // Semantics (NaN, ties, bounds) in docs/ops.md.
  Tensor Exp(const Tensor& x);
  Tensor Log(const Tensor& x);
  Tensor Sqrt(const Tensor& x);
  Tensor Rsqrt(const Tensor& x);
  Tensor Abs(const Tensor& x);
  Tensor Neg(const Tensor& x);
  // At least one bound; the gradient passes where min <= x <= max.
  Tensor Clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
  Tensor LeakyRelu(const Tensor& x, double alpha = 0.01);
  Tensor Silu(const Tensor& x);
  Tensor Maximum(const Tensor& x, const Tensor& y);  // numpy broadcasting
  Tensor Minimum(const Tensor& x, const Tensor& y);
  // condition (bool/uint8/int32/int64, nonzero = true) ? x : y, broadcast.
  Tensor Where(const Tensor& condition, const Tensor& x, const Tensor& y);
  // indices (int32/int64) -> indices.shape + [depth] of `dtype`.
  Tensor OneHot(const Tensor& indices, int64_t depth, DataType dtype = DT_FLOAT,
                double on_value = 1.0, double off_value = 0.0);
  // Rows of x [R, ...] by index: indices.shape + x.shape[1:].
  Tensor Gather(const Tensor& x, const Tensor& indices);
  // x [N, C, H, W] -> [N, C, output_h, output_w].
  Tensor AdaptiveAvgPool2d(const Tensor& x, int64_t output_h, int64_t output_w);
  // x [N, C, ...] -> same shape; creates the layer's variables.
  Tensor BatchNorm(const Tensor& x, const BatchNormOptions& options = {});

  // ---- Losses and metrics ------------------------------------------------
  // Mean over the batch of the per-sample cross entropy: a scalar.
  Tensor SparseSoftmaxCrossEntropy(const Tensor& logits, const Tensor& labels);
  // Mean of (prediction - target)^2 over all elements: a scalar.
  Tensor MeanSquaredError(const Tensor& prediction, const Tensor& target);
  // Fraction of rows whose argmax equals the label: a float32 scalar.
  Tensor Accuracy(const Tensor& logits, const Tensor& labels);
  // Mean over all elements of the binary cross entropy of sigmoid(logits)
  // against targets in [0, 1] (same shape and dtype): a scalar.
  Tensor BinaryCrossEntropyWithLogits(const Tensor& logits, const Tensor& targets);

  // ---- Any registered op ---------------------------------------------------
  // Adds `op` as written (inputs by lbn; outputs declared by arg and count,
  // lbns are rewritten to "<name>/<arg>_<i>"). An empty name is replaced by
  // a unique one from the op type. Returns the outputs, flattened in
  // declaration order (empty on error).
  std::vector<Tensor> AddOp(OpConf op);

  // ---- Training ------------------------------------------------------------
  // Marks the graph for training: `loss` must be a floating scalar.
  void Minimize(const Tensor& loss, const Optimizer& optimizer,
                const MinimizeOptions& options = {});

  // ---- Build -----------------------------------------------------------------
  // The forward Job only (no autodiff / optimizer ops); conf filled.
  [[nodiscard]] StatusOr<Job> BuildForward() const;
  // The full Job: forward, then (if Minimize was called) Autodiff and the
  // optimizer pass. Ops carry mutable_input; Job.blob holds every desc.
  [[nodiscard]] StatusOr<Job> Build() const;

 private:
  // Adds an op whose outputs are declared; runs inference; returns the
  // outputs flattened (empty on error, with the error recorded).
  std::vector<Tensor> Emit(OpConf op);
  Tensor EmitOne(OpConf op);
  bool CheckInputs(const std::string& what, const std::vector<const Tensor*>& inputs);
  // A unique layer name: `requested` (error if taken) or from `kind`.
  std::string LayerName(const std::string& kind, const std::string& requested);
  std::string OpName(const std::string& base);
  Tensor Unary(const std::string& op_type, const std::string& input_arg, const Tensor& x,
               const std::string& output_arg);
  Tensor Pool(const std::string& op_type, const Tensor& x, int64_t kernel_size,
              const Pool2dOptions& options);
  Tensor MakeParameter(const std::string& name, const Shape& shape, DataType dtype,
                       const Initializer& init);
  // The bias_add `layer`-bias_add of `y` and `bias` along axis 1.
  Tensor EmitBiasAdd(const std::string& layer, const Tensor& y, const Tensor& bias);
  // Emits a dataset source op (outputs image, label; uneven_split set when
  // asked), hints `sbp` on both, and records the batch size and, for the
  // train split, the source's `train_examples` (epochs -> iterations).
  Batch EmitDataSource(OpConf op, bool uneven_split, const SbpParallel& sbp, int64_t batch_size,
                       const std::string& split, int64_t train_examples);
  int64_t NextSeed() { return DeriveSeed(seed_, seed_counter_++); }
  void RecordError(const Status& status);
  StatusOr<int64_t> TotalIterations() const;

  std::string name_;
  int64_t seed_;
  int64_t seed_counter_ = 0;
  Status status_;
  Job job_;  // ops in creation order; blobs kept in descs_
  std::map<std::string, TensorDesc> descs_;
  std::set<std::string> used_names_;
  PlacementProto default_placement_;
  bool placement_set_ = false;
  bool has_scope_placement_ = false;
  PlacementProto scope_placement_;
  int64_t iterations_ = -1;
  int64_t epochs_ = -1;
  int64_t train_batch_size_ = 0;                              // of the Fashion-MNIST train source
  int64_t train_source_size_ = 0;                             // its number of examples
  int64_t batch_size_ = 0;                                    // of the first data source
  std::vector<std::pair<std::string, std::string>> metrics_;  // name, lbn
  std::vector<std::pair<std::string, std::string>> outputs_;  // name, lbn
  bool is_train_ = false;
  std::string loss_lbn_;
  OptimizerConf optimizer_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_API_GRAPH_H_
