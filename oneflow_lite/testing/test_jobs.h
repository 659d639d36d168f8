// Test fixtures: MLP jobs built with the graph API in the parallel layouts
// the compiler must handle, and small clusters. Test-only.
#ifndef ONEFLOW_LITE_COMPILER_TEST_JOBS_H_
#define ONEFLOW_LITE_COMPILER_TEST_JOBS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"

namespace oflite {
namespace compiler {

enum class ModelParallel {
  kNone,
  kSplitColumns,  // first Dense weight S(1): B input -> S(1) output
  kSplitRows,     // first Dense weight S(0): S(1) input -> P output
  // Data x tensor parallel on a 2-axis hierarchy (n-D SBP): data (S(0), B),
  // first Dense weight (B, S(1)) and bias (B, S(0)), second Dense weight
  // (B, S(0)), whose output is (S(0), P): Megatron's MLP under data
  // parallel. Needs at least one hidden layer.
  kDataTensor2d,
  // Megatron's MLP on a 1-axis placement, hinted as api/transformer.cc
  // hints a transformer's: the batch B on every device, first Dense weight
  // S(1) and bias S(0) (B input -> S(1) output and gradient), second Dense
  // weight S(0) (S(1) input -> P output with a B gradient: one all-reduce
  // of activations each way); the later layers as the compiler deduces
  // them. Needs at least one hidden layer.
  kMegatron,
};

// The optimizer of a training MlpSpec (learning rate 0.1, constant).
enum class MlpOptimizer {
  kSgd,       // sgd_update
  kMomentum,  // momentum_update, momentum 0.9 (a second variable per weight)
  kAdam,      // adam_update: its bias correction reads the iteration
};

struct MlpSpec {
  int64_t batch = 8;
  int64_t features = 16;
  std::vector<int64_t> hidden = {32};
  int64_t classes = 4;
  std::string placement = "0:cpu:0";
  // One placement per Dense layer (hidden.size() + 1), for pipelines; the
  // data source goes with the first, the loss with the last. Empty: all on
  // `placement`.
  std::vector<std::string> stages;
  ModelParallel model_parallel = ModelParallel::kNone;
  // The hidden layers' activation: "relu" or "gelu" (erf form).
  std::string activation = "relu";
  bool train = true;
  bool accuracy_metric = false;
  MlpOptimizer optimizer = MlpOptimizer::kSgd;
  // > 0: clip the global gradient norm (a second reader of every gradient).
  double clip_global_norm = 0.0;
  int64_t iterations = 5;
  // Non-empty: the data source is Fashion-MNIST from this directory
  // (flattened images, features must be 784, classes 10) instead of the
  // synthetic random batch (so that evaluation has a test split).
  std::string fashion_mnist_dir;
  // Graph::SetMicroBatches: > 1 splits each iteration into micro-batches
  // ordered per stage by `schedule` (api/micro_batches.h).
  int64_t micro_batches = 1;
  PipelineSchedule schedule = PIPELINE_1F1B;
};

StatusOr<Job> BuildMlpJob(const MlpSpec& spec);

// LeNet-5 (two conv + max-pool blocks, three Dense layers) on a synthetic
// [batch, 1, 28, 28] random batch of 10 classes, trained with momentum 0.9,
// every op on `placement`.
StatusOr<Job> BuildLeNetJob(const std::string& placement, int64_t batch = 4,
                            int64_t iterations = 3);

// A tiny GPT (2 blocks of 4 heads, 64 channels, block 16, vocab 13)
// trained with SGD on token windows of a batch of 8 from a cyclic text
// written to `tokens_path` (.npy); every op on `placement`; with
// `tensor_parallel` > 1 the hand-written Megatron hints of
// api/transformer.h (the batch whole, B).
StatusOr<Job> BuildTinyGptJob(const std::string& tokens_path, const std::string& placement,
                              int64_t tensor_parallel = 1, double learning_rate = 0.01,
                              int64_t iterations = 4);

// `machines` machines, each with `cpus` CPU and `gpus` CUDA devices, at
// 127.0.0.(i+1).
ClusterProto MakeCluster(int machines, int cpus, int gpus = 0);

}  // namespace compiler
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMPILER_TEST_JOBS_H_
