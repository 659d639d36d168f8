// The C++ graph API: build a Job (the logical graph) the way one writes a
// model in a mature framework. Graph (this header) is the builder: one op
// per call, placement and SBP hints, metrics and outputs, Minimize, Build.
// The layers (Dense, Conv2d, LayerNorm, BatchNorm, ...: layers.h) and the
// data sources (FashionMnist, NpyData, RandomBatch: data_sources.h) are free
// functions that add their ops to a Graph through its building blocks
// (below, "Building blocks").
//
//   oflite::Graph g("mlp", /*seed=*/42);
//   auto data = oflite::FashionMnist(&g, "/usr/share/datasets/fashion-mnist", 64,
//                                    oflite::Split(0));
//   auto h = g.Relu(oflite::Dense(&g, data.image, 256));  // rank > 2 inputs are flattened
//   auto logits = oflite::Dense(&g, g.Relu(oflite::Dense(&g, h, 256)), 10);
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
// Names: layers and sources get unique names from their kind ("dense",
// "dense_1", ...) or from options.name; the layer's ops are "<layer>-<part>"
// (e.g. "dense-weight", "dense-matmul"). An explicit name that is already
// taken is an error. The op methods of Graph name their op from its type.
//
// Determinism: names, variable seeds (DeriveSeed(job seed, counter)) and the
// Job's field order depend only on the sequence of calls, so building the
// same graph twice gives byte-identical Jobs (api/job_golden_test.cc holds
// fingerprints of such Jobs).
//
// A Graph is single-threaded (thread-compatible); Tensors are plain values
// that stay meaningful only for the Graph that made them. The op methods
// are in graph_math_ops.cc (arithmetic, reductions, shapes, selection,
// indexing) and graph_nn_ops.cc (activations, pooling, losses, metrics).
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

struct VariableOptions {
  // Default (Initializer::Auto): Glorot (Xavier) uniform for a weight of
  // rank >= 2 (fan-in/fan-out from its shape, ops/train/initializer.h),
  // zeros for a bias or any rank < 2 variable. Give Initializer::Zeros()
  // explicitly for an all-zero matrix.
  Initializer initializer = Initializer::Auto();
  DataType dtype = DT_FLOAT;
  bool trainable = true;
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
  // Layout of the gradient of `tensor` (OpConf.output_grad_sbp_hint), as
  // OneFlow's to_global(grad_sbp=...): autodiff hints every backward op
  // that reads the gradient with it as an input hint, so the compiler
  // converts the gradient to it once, where it is consumed, however the
  // producers of its parts chose (e.g. P partial sums all-reduced to B).
  // Only a training graph reads it; a tensor with no gradient ignores it.
  void HintGradSbp(const Tensor& tensor, const SbpParallel& sbp);
  void HintGradSbp(const Tensor& tensor, const NdSbp& sbp);

  // How long to train: a fixed iteration count, or epochs of the training
  // data source (epochs * split size / batch size, rounded down). Unset:
  // one epoch when the graph has a training data source (RecordDataSource;
  // Fashion-MNIST and .npy train splits), else 0 (= until the data source
  // ends).
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

  // ---- Variables -----------------------------------------------------------
  // A variable op named `name` (unique; empty: "variable", "variable_1",
  // ...). Layers make their own parameters (layers.h).
  Tensor Variable(const std::string& name, const Shape& shape, const VariableOptions& options = {});

  // ---- Math (graph_math_ops.cc) ----------------------------------------------
  // Semantics (broadcasting, NaN, ties, bounds) in docs/ops.md.
  // alpha * op(a) op(b) on inputs of rank >= 2: the last two dims are the
  // matrices (the transposes apply to them), the leading batch dims
  // broadcast numpy-style (e.g. [B, H, T, D] x [B, H, D, T], or [B, T, C]
  // x [C, N] as one GEMM).
  Tensor MatMul(const Tensor& a, const Tensor& b, bool transpose_a = false,
                bool transpose_b = false, double alpha = 1.0);
  Tensor BiasAdd(const Tensor& a, const Tensor& bias, int64_t axis = 1);
  // a + b with numpy broadcasting: equal shapes emit `add`, others
  // `broadcast_add` (e.g. [B, T, C] + [T, C]).
  Tensor Add(const Tensor& a, const Tensor& b);
  Tensor AddN(const std::vector<Tensor>& inputs);
  Tensor Sub(const Tensor& x, const Tensor& y);
  Tensor Mul(const Tensor& x, const Tensor& y);
  Tensor Div(const Tensor& x, const Tensor& y);
  Tensor ScalarAdd(const Tensor& x, double value);
  Tensor ScalarMul(const Tensor& x, double value);
  Tensor Pow(const Tensor& x, double exponent);
  Tensor Exp(const Tensor& x);
  Tensor Log(const Tensor& x);
  Tensor Sqrt(const Tensor& x);
  Tensor Rsqrt(const Tensor& x);
  Tensor Abs(const Tensor& x);
  Tensor Neg(const Tensor& x);
  // At least one bound; the gradient passes where min <= x <= max.
  Tensor Clamp(const Tensor& x, std::optional<double> min, std::optional<double> max);
  Tensor Maximum(const Tensor& x, const Tensor& y);  // numpy broadcasting
  Tensor Minimum(const Tensor& x, const Tensor& y);
  Tensor ReduceSum(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);
  Tensor ReduceMean(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdims = false);

  // ---- Shapes, selection, indexing (graph_math_ops.cc) -------------------
  Tensor Reshape(const Tensor& x, const Shape& shape);  // one -1 allowed
  Tensor Flatten(const Tensor& x, int64_t start_dim = 1, int64_t end_dim = -1);
  Tensor Transpose(const Tensor& x, const std::vector<int64_t>& perm);
  Tensor Concat(const std::vector<Tensor>& inputs, int64_t axis);
  Tensor Slice(const Tensor& x, const std::vector<int64_t>& start, const std::vector<int64_t>& stop,
               const std::vector<int64_t>& step);
  Tensor Identity(const Tensor& x);
  Tensor Cast(const Tensor& x, DataType dtype);
  // condition (bool/uint8/int32/int64, nonzero = true) ? x : y, broadcast.
  Tensor Where(const Tensor& condition, const Tensor& x, const Tensor& y);
  // like's shape holding each element's index along `axis` (negative
  // allowed); dtype int32, int64, float32 or float64. Not differentiable.
  Tensor Iota(const Tensor& like, int64_t axis, DataType dtype = DT_INT32);
  // uint8 1/0 with numpy broadcasting (a condition for Where); not
  // differentiable. NaN compares false except under NotEqual.
  Tensor Equal(const Tensor& x, const Tensor& y);
  Tensor NotEqual(const Tensor& x, const Tensor& y);
  Tensor Less(const Tensor& x, const Tensor& y);
  Tensor LessEqual(const Tensor& x, const Tensor& y);
  Tensor Greater(const Tensor& x, const Tensor& y);
  Tensor GreaterEqual(const Tensor& x, const Tensor& y);
  // indices (int32/int64) -> indices.shape + [depth] of `dtype`.
  Tensor OneHot(const Tensor& indices, int64_t depth, DataType dtype = DT_FLOAT,
                double on_value = 1.0, double off_value = 0.0);
  // Rows of x [R, ...] by index: indices.shape + x.shape[1:].
  Tensor Gather(const Tensor& x, const Tensor& indices);
  // The rows of x [N, ...] whose mask [N] is not zero, in order: a dynamic
  // tensor (desc max shape [N, ...], marked "*"; the actual row count is
  // known per iteration). Not differentiable; a cross-machine edge carrying
  // it uses bounce buffers (only the valid bytes move).
  Tensor SelectRows(const Tensor& x, const Tensor& mask);

  // ---- Activations and pooling (graph_nn_ops.cc) -----------------------------
  Tensor Relu(const Tensor& x);
  Tensor Sigmoid(const Tensor& x);
  Tensor Tanh(const Tensor& x);
  // approximate: "none" (erf form) or "tanh" (PyTorch's approximate='tanh').
  Tensor Gelu(const Tensor& x, const std::string& approximate = "none");
  Tensor Silu(const Tensor& x);
  Tensor LeakyRelu(const Tensor& x, double alpha = 0.01);
  Tensor Softmax(const Tensor& x, int64_t axis = -1);
  Tensor LogSoftmax(const Tensor& x, int64_t axis = -1);
  // x [..., Tq, Tk] -> softmax over the last axis of scale * x where query i
  // sees key j only if j <= i + (Tk - Tq); hidden positions are exactly 0.
  Tensor CausalSoftmax(const Tensor& x, double scale = 1.0);
  // x [N, C, H, W] -> [N, C, output_h, output_w]. (The named pooling layers
  // MaxPool2d and AvgPool2d are in layers.h.)
  Tensor AdaptiveAvgPool2d(const Tensor& x, int64_t output_h, int64_t output_w);

  // ---- Losses and metrics (graph_nn_ops.cc) ----------------------------------
  // Mean of the cross entropy over every position: a scalar. logits [..., C]
  // (e.g. [N, C] or [B, T, V]), labels int32/int64 with logits' leading dims.
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
  // declaration order (empty on error). Inputs that are not blobs of this
  // graph and a name already used are errors.
  std::vector<Tensor> AddOp(OpConf op);

  // ---- Building blocks -------------------------------------------------------
  // What the layers (layers.h) and data sources (data_sources.h) are written
  // with; a user's own layer may use them too, in the same pattern:
  //   if (!g->ok() || !g->CheckInputs("MyLayer", {&x})) return {};
  //   const std::string layer = g->UniqueName("my_layer", options.name);
  //   Tensor w = g->Parameter(layer + "-weight", shape, x.dtype(), init);
  //   return g->EmitOne(OpConfBuilder("matmul", g->UniqueName(layer + "-matmul"))...);
  // Emit and EmitOne do nothing once the graph has an error.

  // Records `status` (not OK) as the graph's error, prefixed with "graph
  // '<name>'", unless an earlier error is already recorded.
  void RecordError(const Status& status);
  // True when every tensor is valid and belongs to this graph; otherwise
  // records an error naming `what` (e.g. "Dense") and returns false.
  bool CheckInputs(const std::string& what, const std::vector<const Tensor*>& inputs);
  // Reserves a name: `requested` when not empty (an error if already used),
  // else `kind` made unique ("dense", "dense_1", ...).
  std::string UniqueName(const std::string& kind, const std::string& requested = "");
  // Adds `op`, named by UniqueName (or unnamed: a unique name from its
  // type), reading blobs of this graph (checked first with CheckInputs),
  // outputs declared by arg and count; runs shape inference; returns the
  // outputs flattened (empty on error, the error recorded). Unlike AddOp it
  // trusts the caller's reserved name. EmitOne returns the first output.
  std::vector<Tensor> Emit(OpConf op);
  Tensor EmitOne(OpConf op);
  // The seed of the next seeded op (variable, dropout, data source):
  // DeriveSeed(job seed, k) for the k-th call.
  int64_t NextSeed() { return DeriveSeed(seed_, seed_counter_++); }
  // A layer's variable named UniqueName(name) (e.g. "dense-weight"), with
  // `init` as given (not resolved from the shape) and the next seed.
  Tensor Parameter(const std::string& name, const Shape& shape, DataType dtype,
                   const Initializer& init, bool trainable = true);
  // Tells the graph a data source was added: the first call sets the Job's
  // batch_size; the first with `train_examples` > 0 (a training split of
  // that many examples) fixes an epoch as train_examples / batch_size
  // iterations (SetEpochs and the default of one epoch).
  void RecordDataSource(int64_t batch_size, int64_t train_examples);

  // ---- Training ------------------------------------------------------------
  // Marks the graph for training: `loss` must be a floating scalar.
  void Minimize(const Tensor& loss, const Optimizer& optimizer,
                const MinimizeOptions& options = {});

  // ---- Micro-batches and pipeline schedules -----------------------------------
  // Splits each training iteration into `count` micro-batches whose
  // gradients accumulate before one optimizer update (api/micro_batches.h):
  // Build clones the batch-dependent forward ops per micro-batch (micro-batch
  // k = rows k, k + count, ... of the batch), makes the loss and metrics the
  // mean over the micro-batches and the compiler orders each pipeline stage
  // (a placement of the forward ops) by `schedule`: PIPELINE_GPIPE
  // (fill-drain) or PIPELINE_1F1B (docs/compiler.md, "Micro-batches and
  // pipeline schedules"). count 1 (the default) is no micro-batching and
  // leaves the Job exactly as without the call. Errors, recorded as the
  // graph's: count < 1 or an UNSET schedule here; at Build, a count that does
  // not divide a data source's batch (or its per-device share under an S(0)
  // hint), a graph without Minimize, an op updating a variable from the batch
  // (batch_norm). The training driver's --micro-batches and
  // --pipeline-schedule call it.
  void SetMicroBatches(int64_t count, PipelineSchedule schedule = PIPELINE_1F1B);
  int64_t micro_batches() const { return micro_batches_; }

  // ---- Build -----------------------------------------------------------------
  // The forward Job only (no autodiff / optimizer ops); conf filled.
  [[nodiscard]] StatusOr<Job> BuildForward() const;
  // The full Job: forward, then (if Minimize was called) the micro-batch
  // unroll (SetMicroBatches), Autodiff and the optimizer pass. Ops carry
  // mutable_input; Job.blob holds every desc.
  [[nodiscard]] StatusOr<Job> Build() const;

 private:
  // One op `op_type` reading x as `input_arg`, writing `output_arg`.
  Tensor Unary(const std::string& op_type, const std::string& input_arg, const Tensor& x,
               const std::string& output_arg);
  // One op `op_type` reading x and y as "x" and "y", writing "out"; `what`
  // names the builder in input errors.
  Tensor Binary(const std::string& what, const std::string& op_type, const Tensor& x,
                const Tensor& y);
  // The reduce op `op_type` named `name` (graph_math_ops.cc).
  Tensor Reduce(const std::string& op_type, const std::string& name, const Tensor& x,
                const std::vector<int64_t>& axes, bool keepdims);
  StatusOr<int64_t> TotalIterations() const;
  // The op producing `tensor` (its flat output `index` of `outputs`), or
  // null with an error recorded naming `what`.
  OpConf* HintedOutput(const char* what, const Tensor& tensor, int* index, int* outputs);

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
  int64_t train_batch_size_ = 0;                              // of the training data source
  int64_t train_source_size_ = 0;                             // its number of examples
  int64_t batch_size_ = 0;                                    // of the first data source
  std::vector<std::pair<std::string, std::string>> metrics_;  // name, lbn
  std::vector<std::pair<std::string, std::string>> outputs_;  // name, lbn
  bool is_train_ = false;
  int64_t micro_batches_ = 1;
  PipelineSchedule pipeline_schedule_ = PIPELINE_1F1B;
  std::string loss_lbn_;
  OptimizerConf optimizer_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_API_GRAPH_H_
