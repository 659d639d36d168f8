// train_cnn: training throughput of three small CNNs on 28x28 single-channel
// images through compiler + actor runtime, within 1 and 2 cores,
// next to PyTorch on the same cores in the same run at its best thread
// setting (torch x OpenBLAS threads, swept), samples interleaved
// (tools/bench/train_bench_util.h):
//   cnn:    conv 1->16 3x3 pad 1, ReLU, maxpool 2, conv 16->32 3x3 pad 1,
//           ReLU, maxpool 2, dense 10; momentum SGD (lr 0.01, 0.9)
//   lenet5: conv 1->6 5x5 pad 2, ReLU, maxpool 2, conv 6->16 5x5, ReLU,
//           maxpool 2, dense 120, ReLU, 84, ReLU, 10; momentum SGD (0.05, 0.9)
//   resnet: the network of examples/resnet_fashion_mnist.cc (BatchNorm in
//           training mode, adaptive average pooling), its optimizer, learning
//           rate and batch (128)
// cnn and lenet5 run at batch 64 unless --batches says otherwise.
// Data: synthetic, regenerated every step on both sides.
//
//   bazel build -c opt //tools/bench:train_cnn
//   bazel-bin/tools/bench/train_cnn [--models cnn,lenet5,resnet] [--samples 5]
//       [--iters 100] [--peer_configs all|diag|auto] [--help]
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

// The ResNet of examples/resnet_fashion_mnist.cc, layer for layer (the
// example builds it inside its main, so it is repeated here; keep the two
// equal): a 3x3 stem with BatchNorm, max pool, two residual blocks (the
// second downsampling through a strided 1x1 projection), adaptive average
// pooling to 3x3 over the 7x7 map, dense 10; momentum SGD (0.05, 0.9). Its
// data is random_batch rather than Fashion-MNIST, and it adds no accuracy
// metric (the PyTorch twin computes none either).
Tensor ConvBn(Graph* g, const Tensor& x, int64_t filters, int64_t kernel, int64_t stride) {
  Conv2dOptions conv;
  conv.strides = {stride, stride};
  conv.padding = {kernel / 2, kernel / 2};
  conv.use_bias = false;
  conv.weight_init = Initializer::KaimingUniform();
  return BatchNorm(g, Conv2d(g, x, filters, kernel, conv));
}

Tensor ResidualBlock(Graph* g, const Tensor& x, int64_t filters, int64_t stride) {
  Tensor h = g->Relu(ConvBn(g, x, filters, 3, stride));
  h = ConvBn(g, h, filters, 3, 1);
  const bool same = stride == 1 && x.shape().dim(1) == filters;
  Tensor skip = same ? x : ConvBn(g, x, filters, 1, stride);
  return g->Relu(g->Add(h, skip));
}

void BuildResnet(Graph* g, int64_t batch) {
  Batch data = RandomBatch(g, Shape{batch, 1, 28, 28}, 10);
  Tensor x = g->Relu(ConvBn(g, data.image, 8, 3, 1));  // [B, 8, 28, 28]
  x = MaxPool2d(g, x, 2);                              // [B, 8, 14, 14]
  x = ResidualBlock(g, x, 8, 1);                       // [B, 8, 14, 14]
  x = ResidualBlock(g, x, 16, 2);                      // [B, 16, 7, 7]
  x = g->Flatten(g->AdaptiveAvgPool2d(x, 3, 3));       // [B, 16 * 3 * 3]
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
  const std::vector<bench::BenchModel> models = {
      {"cnn", "conv16-pool-conv32-pool-dense10 (3x3 pad 1), momentum SGD", BuildCnn},
      {"lenet5", "LeNet-5 (6/16 5x5 convs, 120-84-10), momentum SGD", BuildLenet5},
      {"resnet",
       "examples/resnet_fashion_mnist: stem conv8+BN, 2 residual blocks (8, 16 stride 2), "
       "adaptive avg pool 3x3, dense10, momentum SGD",
       BuildResnet,
       {128}}};
  for (const bench::BenchModel& model : models) options.models.push_back(model.name);
  if (std::optional<int> done =
          bench::ParseBenchFlags(argc, argv, "train_cnn",
                                 "train_cnn: small CNN, LeNet-5 and ResNet training steps, oflite "
                                 "next to PyTorch at its best thread setting on the same cores",
                                 &options)) {
    return *done;
  }
  return bench::RunBench(models, options);
}
