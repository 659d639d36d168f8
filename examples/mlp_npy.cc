// An MLP on your own data in NumPy .npy files: <data-dir>/train_x.npy
// (samples [N, ...], any numeric dtype), train_y.npy (integer labels [N]),
// and optionally test_x.npy / test_y.npy for the evaluation after training
// (docs/graph_api.md, "Your own data"). Samples are flattened and scaled
// by 1/255 (pixel-like uint8 data).
//
//   bazel run //examples:mlp_npy -- --data-dir /path/to/arrays --classes 10
//   bazel run //examples:mlp_npy -- --data-dir d --classes 10 --
//       --save-every 100 --checkpoint-dir ckpt   (one command; then oflite
//       eval / oflite predict)
#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/layers.h"
#include "tools/driver/trainer.h"

int main(int argc, char** argv) {
  oflite::driver::TrainerConfig defaults;
  defaults.data_dir = ".";
  return oflite::driver::TrainMain(
      "mlp_npy", defaults,
      [](const oflite::driver::TrainerConfig& c, oflite::Graph* g) {
        oflite::NpyDataOptions data_options;
        data_options.scale = 1.0 / 255;  // uint8 pixels (use 1.0 for standardized features)
        auto data = NpyData(g, c.data_dir, c.batch, oflite::Split(0), data_options);
        auto h = g->Relu(Dense(g, data.image, 128));
        auto logits = Dense(g, h, c.classes);
        g->AddMetric("accuracy", g->Accuracy(logits, data.label));
        g->AddOutput("logits", logits);
        g->Minimize(g->SparseSoftmaxCrossEntropy(logits, data.label),
                    oflite::Sgd{.learning_rate = c.lr});
      },
      argc, argv);
}
