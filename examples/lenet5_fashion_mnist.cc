// LeNet-5 on Fashion-MNIST: two 5x5 convolutions with max pooling, then
// 120-84-10 dense layers; SGD with momentum.
//
//   bazel run //examples:lenet5_fashion_mnist
//   bazel run //examples:lenet5_fashion_mnist -- --iters 200
#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/layers.h"
#include "tools/driver/trainer.h"

// [B, 1, 28, 28] -> conv 5x5 pad 2 -> [B, 6, 28, 28] -> pool -> conv 5x5 -> pool -> 400.

int main(int argc, char** argv) {
  oflite::driver::TrainerConfig defaults;
  defaults.batch = 256;
  defaults.lr = 0.05;
  return oflite::driver::TrainMain(
      "lenet5", defaults,
      [](const oflite::driver::TrainerConfig& c, oflite::Graph* g) {
        oflite::FashionMnistOptions data_options;
        data_options.mean = 0.2860;  // the training split's pixel mean and std
        data_options.std = 0.3530;
        auto data = FashionMnist(g, c.data_dir, c.batch, oflite::Split(0), data_options);
        oflite::Conv2dOptions same;
        same.padding = {2, 2};
        auto x = MaxPool2d(g, g->Relu(Conv2d(g, data.image, 6, 5, same)), 2);  // [B, 6, 14, 14]
        x = MaxPool2d(g, g->Relu(Conv2d(g, x, 16, 5)), 2);                    // [B, 16, 5, 5]
        x = g->Relu(Dense(g, x, 120));
        x = g->Relu(Dense(g, x, 84));
        auto logits = Dense(g, x, 10);
        auto loss = g->SparseSoftmaxCrossEntropy(logits, data.label);
        g->AddMetric("accuracy", g->Accuracy(logits, data.label));
        g->AddOutput("logits", logits);  // per-sample scores for `oflite predict`
        g->Minimize(loss, oflite::Momentum{.learning_rate = c.lr, .momentum = 0.9});
      },
      argc, argv);
}
