// A model that chooses its own placement (two machines) and duration (40
// iterations) in the model function, built with the training driver's usual
// command line: the driver keeps both and names the flags they override.
#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "tools/driver/trainer.h"

int main(int argc, char** argv) {
  oflite::driver::TrainerConfig defaults;
  return oflite::driver::TrainMain(
      "self_placed", defaults,
      [](const oflite::driver::TrainerConfig& c, oflite::Graph* g) {
        g->SetPlacement(oflite::Placement::Parse("0-1:cpu:0"));
        g->SetIterations(40);
        oflite::FashionMnistOptions data_options;
        data_options.flatten = true;
        auto data = oflite::FashionMnist(g, c.data_dir, c.batch, oflite::Split(0), data_options);
        auto logits = oflite::Dense(g, data.image, 10);
        g->AddMetric("accuracy", g->Accuracy(logits, data.label));
        g->Minimize(g->SparseSoftmaxCrossEntropy(logits, data.label),
                    oflite::Sgd{.learning_rate = c.lr});
      },
      argc, argv);
}
