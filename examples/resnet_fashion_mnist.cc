// A small ResNet-style CNN on Fashion-MNIST: a 3x3 stem, two residual
// blocks (conv-BatchNorm-ReLU-conv-BatchNorm plus the skip, the second one
// downsampling with a strided 1x1 projection), adaptive average pooling to
// 3x3 (overlapping bins over the 7x7 map) and a linear classifier; SGD with
// momentum. The evaluation after
// training runs BatchNorm on its running statistics.
//
//   bazel run //examples:resnet_fashion_mnist
//   bazel run //examples:resnet_fashion_mnist -- --iters 100 --devices 2
#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/layers.h"
#include "tools/driver/trainer.h"

namespace {

using oflite::Graph;
using oflite::Tensor;

Tensor ConvBn(Graph* g, const Tensor& x, int64_t filters, int64_t kernel, int64_t stride) {
  oflite::Conv2dOptions conv;
  conv.strides = {stride, stride};
  conv.padding = {kernel / 2, kernel / 2};
  conv.use_bias = false;  // BatchNorm's beta takes the bias's place
  conv.weight_init = oflite::Initializer::KaimingUniform();
  return BatchNorm(g, Conv2d(g, x, filters, kernel, conv));
}

// relu(bn(conv(relu(bn(conv(x))))) + skip(x)); skip is a strided 1x1
// conv + bn when the shape changes.
Tensor ResidualBlock(Graph* g, const Tensor& x, int64_t filters, int64_t stride) {
  Tensor h = g->Relu(ConvBn(g, x, filters, 3, stride));
  h = ConvBn(g, h, filters, 3, 1);
  const bool same = stride == 1 && x.shape().dim(1) == filters;
  Tensor skip = same ? x : ConvBn(g, x, filters, 1, stride);
  return g->Relu(g->Add(h, skip));
}

}  // namespace

int main(int argc, char** argv) {
  oflite::driver::TrainerConfig defaults;
  defaults.batch = 128;
  defaults.lr = 0.05;
  return oflite::driver::TrainMain(
      "resnet", defaults,
      [](const oflite::driver::TrainerConfig& c, Graph* g) {
        oflite::FashionMnistOptions data_options;
        data_options.mean = 0.2860;  // the training split's pixel mean and std
        data_options.std = 0.3530;
        auto data = FashionMnist(g, c.data_dir, c.batch, oflite::Split(0), data_options);
        Tensor x = g->Relu(ConvBn(g, data.image, 8, 3, 1));  // [B, 8, 28, 28]
        x = MaxPool2d(g, x, 2);                              // [B, 8, 14, 14]
        x = ResidualBlock(g, x, 8, 1);                       // [B, 8, 14, 14]
        x = ResidualBlock(g, x, 16, 2);                      // [B, 16, 7, 7]
        x = g->Flatten(g->AdaptiveAvgPool2d(x, 3, 3));       // [B, 16 * 3 * 3]
        Tensor logits = Dense(g, x, 10);
        Tensor loss = g->SparseSoftmaxCrossEntropy(logits, data.label);
        g->AddMetric("accuracy", g->Accuracy(logits, data.label));
        g->AddOutput("logits", logits);  // per-sample scores for `oflite predict`
        g->Minimize(loss, oflite::Momentum{.learning_rate = c.lr, .momentum = 0.9});
      },
      argc, argv);
}
