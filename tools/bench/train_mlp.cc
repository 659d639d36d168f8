// train_mlp: training throughput of the 784-256-256-10 MLP (ReLU, softmax
// cross-entropy, SGD lr 0.1) through compiler + actor runtime at batch 64
// and 256 within 1 and 2 cores, next to PyTorch running the same model on
// the same cores in the same run at its best thread setting (torch x
// OpenBLAS threads, swept), samples interleaved (tools/bench/
// train_bench_util.h says how threads are counted).
//
// Data: synthetic (the random_batch source, regenerated every step; the peer
// draws torch.rand/randint every step too).
//
//   bazel build //tools/bench:train_mlp
//   bazel-bin/tools/bench/train_mlp [--samples 5] [--iters 100]
//       [--peer_configs all|diag|auto] [--help]
#include <optional>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/layers.h"
#include "tools/bench/train_bench_util.h"

int main(int argc, char** argv) {
  using namespace oflite;
  bench::BenchOptions options;
  options.batches = {64, 256};
  if (std::optional<int> done =
          bench::ParseBenchFlags(argc, argv, "train_mlp",
                                 "train_mlp: 784-256-256-10 MLP training steps, oflite next to "
                                 "PyTorch at its best thread setting on the same cores",
                                 &options)) {
    return *done;
  }
  bench::BenchModel mlp{"mlp", "784-256-256-10, ReLU, softmax cross-entropy, SGD lr 0.1",
                        [](Graph* g, int64_t batch) {
                          Batch data = RandomBatch(g, Shape{batch, 784}, 10);
                          Tensor h = g->Relu(Dense(g, data.image, 256));
                          h = g->Relu(Dense(g, h, 256));
                          Tensor logits = Dense(g, h, 10);
                          g->Minimize(g->SparseSoftmaxCrossEntropy(logits, data.label),
                                      Sgd{0.1, 0.0});
                        }};
  return bench::RunBench({mlp}, options);
}
