// A 2-stage pipeline MLP on Fashion-MNIST with a data-dependent shape
// crossing machines: stage 0 (machine 0) computes the hidden layer and
// selects the rows of the samples that are not class 0 (SelectRows: a
// dynamic tensor, [K, 64] with K known per batch); stage 1 (machine 1)
// finishes the classifier and reports the mean hidden activation of those
// rows ("selected_mean"), so the dynamic tensor moves from machine 0 to
// machine 1 through bounce buffers, only its valid bytes
// (oflite run --stats: "bounce-buffers: moved ..."). "selected" counts the
// rows per batch (the sum of a ones column selected the same way, also
// computed on machine 1). With --machines 1 both stages run on machine 0 (the
// reference the 2-machine run equals: tests/dynamic_rows_test.sh).
//
//   bazel run //examples:dynamic_rows_pipeline -- --machines 2 --iters 50
//   oflite launch --plan out/dynamic_rows.plan.pb --nproc 2 --comm tcp -- --stats
#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/layers.h"
#include "tools/driver/trainer.h"

int main(int argc, char** argv) {
  oflite::driver::TrainerConfig defaults;
  return oflite::driver::TrainMain(
      "dynamic_rows", defaults,
      [](const oflite::driver::TrainerConfig& c, oflite::Graph* g) {
        const std::string second = c.machines > 1 ? "1:cpu:0" : "0:cpu:0";
        oflite::Tensor h, selected, selected_ones, label;
        {
          auto stage = g->WithPlacement(oflite::Placement::Parse("0:cpu:0"));
          oflite::FashionMnistOptions data_options;
          data_options.flatten = true;
          data_options.mean = 0.2860;
          data_options.std = 0.3530;
          auto data = FashionMnist(g, c.data_dir, c.batch, oflite::Split(0), data_options);
          label = data.label;
          h = g->Relu(Dense(g, data.image, 64));
          selected = g->SelectRows(h, data.label);  // rows of classes 1..9
          // A ones column through the same selection: its sum counts them.
          auto ones = g->ScalarAdd(g->ScalarMul(g->Cast(data.label, oflite::DT_FLOAT), 0.0), 1.0);
          selected_ones = g->SelectRows(ones, data.label);
        }
        auto stage = g->WithPlacement(oflite::Placement::Parse(second));
        auto logits = Dense(g, h, 10);
        g->AddMetric("accuracy", g->Accuracy(logits, label));
        g->AddMetric("selected", g->ReduceSum(selected_ones));
        g->AddMetric("selected_mean", g->ReduceMean(selected));
        g->Minimize(g->SparseSoftmaxCrossEntropy(logits, label),
                    oflite::Sgd{.learning_rate = c.lr});
      },
      argc, argv);
}
