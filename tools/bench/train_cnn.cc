// train_cnn: training throughput of two small CNNs on 28x28 single-channel
// images through compiler + actor runtime, batch 64, 1 and 2 computing
// threads, next to PyTorch with the same thread count in the same run,
// samples interleaved (tools/bench/train_bench_util.h):
//   cnn:    conv 1->16 3x3 pad 1, ReLU, maxpool 2, conv 16->32 3x3 pad 1,
//           ReLU, maxpool 2, dense 10; momentum SGD (lr 0.01, 0.9)
//   lenet5: conv 1->6 5x5 pad 2, ReLU, maxpool 2, conv 6->16 5x5, ReLU,
//           maxpool 2, dense 120, ReLU, 84, ReLU, 10; momentum SGD (0.05, 0.9)
// Data: synthetic, regenerated every step on both sides.
//
//   bazel build //tools/bench:train_cnn
//   bazel-bin/tools/bench/train_cnn [--samples 5] [--iters 100] [--help]
#include <optional>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/layers.h"
#include "tools/bench/train_bench_util.h"

namespace oflite {
namespace {

Tensor SameConvReluPool(Graph* g, const Tensor& x, int64_t filters, int64_t kernel, int64_t pad) {
  Conv2dOptions options;
  options.padding = {pad, pad};
  return MaxPool2d(g, g->Relu(Conv2d(g, x, filters, kernel, options)), 2);
}

void BuildCnn(Graph* g, int64_t batch) {
  Batch data = RandomBatch(g, Shape{batch, 1, 28, 28}, 10);
  Tensor x = SameConvReluPool(g, data.image, 16, 3, 1);  // [B, 16, 14, 14]
  x = SameConvReluPool(g, x, 32, 3, 1);                   // [B, 32, 7, 7]
  Tensor logits = Dense(g, x, 10);
  g->Minimize(g->SparseSoftmaxCrossEntropy(logits, data.label),
              Momentum{.learning_rate = 0.01, .momentum = 0.9});
}

void BuildLenet5(Graph* g, int64_t batch) {
  Batch data = RandomBatch(g, Shape{batch, 1, 28, 28}, 10);
  Tensor x = SameConvReluPool(g, data.image, 6, 5, 2);  // [B, 6, 14, 14]
  x = SameConvReluPool(g, x, 16, 5, 0);                  // [B, 16, 5, 5]
  x = g->Relu(Dense(g, x, 120));
  x = g->Relu(Dense(g, x, 84));
  Tensor logits = Dense(g, x, 10);
  g->Minimize(g->SparseSoftmaxCrossEntropy(logits, data.label),
              Momentum{.learning_rate = 0.05, .momentum = 0.9});
}

}  // namespace
}  // namespace oflite

int main(int argc, char** argv) {
  using namespace oflite;
  bench::BenchOptions options;
  options.batches = {64};
  if (std::optional<int> done =
          bench::ParseBenchFlags(argc, argv, "train_cnn",
                                 "train_cnn: small CNN and LeNet-5 training steps, oflite next to "
                                 "PyTorch with equal computing threads",
                                 &options)) {
    return *done;
  }
  return bench::RunBench(
      {{"cnn", "conv16-pool-conv32-pool-dense10 (3x3 pad 1), momentum SGD", BuildCnn},
       {"lenet5", "LeNet-5 (6/16 5x5 convs, 120-84-10), momentum SGD", BuildLenet5}},
      options);
}
