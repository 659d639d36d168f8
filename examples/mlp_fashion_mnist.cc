// The 784-256-256-10 MLP on Fashion-MNIST: one epoch of SGD (lr 0.1, batch 64)
// reaches about 85% test accuracy.
//
//   bazel run //examples:mlp_fashion_mnist                 # 1 CPU device
//   bazel run //examples:mlp_fashion_mnist -- --devices 2  # data parallel
#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/layers.h"
#include "tools/driver/trainer.h"

int main(int argc, char** argv) {
  oflite::driver::TrainerConfig defaults;
  return oflite::driver::TrainMain(
      "mlp", defaults,
      [](const oflite::driver::TrainerConfig& c, oflite::Graph* g) {
        oflite::FashionMnistOptions data_options;
        data_options.flatten = true;
        data_options.mean = 0.2860;  // the training split's pixel mean and std
        data_options.std = 0.3530;
        auto data = FashionMnist(g, c.data_dir, c.batch, oflite::Split(0), data_options);
        auto h = g->Relu(Dense(g, data.image, 256));
        h = g->Relu(Dense(g, h, 256));
        auto logits = Dense(g, h, 10);
        auto loss = g->SparseSoftmaxCrossEntropy(logits, data.label);
        g->AddMetric("accuracy", g->Accuracy(logits, data.label));
        g->AddOutput("logits", logits);  // per-sample scores for `oflite predict`
        g->Minimize(loss, oflite::Sgd{.learning_rate = c.lr});
      },
      argc, argv);
}
