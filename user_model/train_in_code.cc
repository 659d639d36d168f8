// A program that builds, compiles, trains and evaluates a model through
// library calls only (no argv is made up): Graph -> BuildTrainingJob ->
// CompileTrainingPlan -> TrainPlan, then reads the evaluation's result.
//
//   train_in_code [DATA_DIR]   prints "test accuracy A (N of M samples)"
// Exit code: TrainPlan's, or 1 when the accuracy is below 0.6.
#include <cstdio>
#include <string>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "tools/driver/trainer.h"

int main(int argc, char** argv) {
  oflite::driver::TrainerConfig config;
  if (argc > 1) config.data_dir = argv[1];
  config.batch = 64;
  config.iters = 150;
  auto model = [](const oflite::driver::TrainerConfig& c, oflite::Graph* g) {
    oflite::FashionMnistOptions data_options;
    data_options.flatten = true;
    auto data = oflite::FashionMnist(g, c.data_dir, c.batch, oflite::Split(0), data_options);
    auto logits = oflite::Dense(g, g->Relu(oflite::Dense(g, data.image, 64)), 10);
    g->AddMetric("accuracy", g->Accuracy(logits, data.label));
    g->Minimize(g->SparseSoftmaxCrossEntropy(logits, data.label),
                oflite::Sgd{.learning_rate = c.lr});
  };
  oflite::StatusOr<oflite::Job> job = oflite::driver::BuildTrainingJob("user_mlp", config, model);
  if (!job.ok()) {
    std::fprintf(stderr, "train_in_code: %s\n", job.status().ToString().c_str());
    return 2;
  }
  oflite::StatusOr<oflite::Plan> plan = oflite::driver::CompileTrainingPlan(*job);
  if (!plan.ok()) {
    std::fprintf(stderr, "train_in_code: %s\n", plan.status().ToString().c_str());
    return 2;
  }
  oflite::session::TrainingRequest request;
  request.log_every = 50;
  oflite::session::NodeOptions node;
  node.command = "train_in_code";
  oflite::session::TrainingResult result;
  const int code = oflite::driver::TrainPlan(*plan, request, node, &result);
  if (code != 0) return code;
  if (!result.evaluation.has_value()) {
    std::fprintf(stderr, "train_in_code: no evaluation result\n");
    return 1;
  }
  const double accuracy = result.evaluation->sums.Means().at("accuracy");
  std::printf("test accuracy %.4f (%lld of %lld samples), iterations %lld..%lld\n", accuracy,
              static_cast<long long>(result.evaluation->correct.at("accuracy")),
              static_cast<long long>(result.evaluation->samples),
              static_cast<long long>(result.start_iteration),
              static_cast<long long>(result.end_iteration));
  return accuracy >= 0.6 ? 0 : 1;
}
