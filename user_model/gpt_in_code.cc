// A transformer as a user writes it in a package of their own, against the
// public surface only: tokenize a text (PrepareCorpus), a small GPT
// (api/transformer.h) on TokenWindows, trained with AdamW and validated on
// the held-out tail through library calls.
//
//   gpt_in_code TEXT OUT_DIR   prints "validation loss L after N iterations"
// Exit code: 2 for bad input, TrainPlan's, or 1 when the validation loss
// did not fall below the uniform guess's log(vocabulary).
#include <cmath>
#include <cstdio>
#include <string>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/api/transformer.h"
#include "tools/driver/trainer.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: gpt_in_code TEXT OUT_DIR\n");
    return 2;
  }
  oflite::StatusOr<oflite::PreparedCorpus> corpus = oflite::PrepareCorpus({argv[1]}, argv[2]);
  if (!corpus.ok()) {
    std::fprintf(stderr, "gpt_in_code: %s\n", corpus.status().ToString().c_str());
    return 2;
  }
  oflite::driver::TrainerConfig config;
  config.batch = 8;
  config.iters = 120;
  config.classes = corpus->vocab_size;
  auto model = [&](const oflite::driver::TrainerConfig& c, oflite::Graph* g) {
    auto data = oflite::TokenWindows(g, corpus->tokens_path, c.batch, /*block=*/16, c.classes);
    oflite::GptConfig gpt_config;
    gpt_config.vocab_size = c.classes;
    gpt_config.block_size = 16;
    gpt_config.layers = 1;
    gpt_config.heads = 2;
    gpt_config.channels = 16;
    gpt_config.tie_weights = true;
    oflite::GptModel gpt = oflite::Gpt(g, data.input, gpt_config);
    g->Minimize(g->SparseSoftmaxCrossEntropy(gpt.logits, data.target),
                oflite::AdamW{.learning_rate = 3e-3}, {.weight_decay_min_rank = 2});
  };
  oflite::StatusOr<oflite::Job> job = oflite::driver::BuildTrainingJob("user_gpt", config, model);
  oflite::StatusOr<oflite::Plan> plan =
      job.ok() ? oflite::driver::CompileTrainingPlan(*job) : job.status();
  if (!plan.ok()) {
    std::fprintf(stderr, "gpt_in_code: %s\n", plan.status().ToString().c_str());
    return 2;
  }
  oflite::session::TrainingRequest request;
  request.log_every = 40;
  oflite::session::NodeOptions node;
  node.command = "gpt_in_code";
  oflite::session::TrainingResult result;
  const int code = oflite::driver::TrainPlan(*plan, request, node, &result);
  if (code != 0) return code;
  if (!result.evaluation.has_value()) return 1;
  const double loss = result.evaluation->sums.Means().at("loss");
  std::printf("validation loss %.4f after %lld iterations (uniform guess %.4f)\n", loss,
              static_cast<long long>(result.end_iteration),
              std::log(static_cast<double>(corpus->vocab_size)));
  return loss < std::log(static_cast<double>(corpus->vocab_size)) ? 0 : 1;
}
