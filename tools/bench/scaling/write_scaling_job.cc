// write_scaling_job: the Job files of tools/bench/scaling (docs/benchmarks.md,
// "Data-parallel scaling across hosts"): the model the PyTorch peer
// (ddp_peer.py) builds too, trained data parallel over `--machines`
// machines of one CPU device each, on synthetic data (the random_batch
// source, split over the machines; the global batch is `--batch`).
//
//   write_scaling_job OUT.job.pb --model mlp|cnn --batch B --machines M
//                     --iterations N [--lr 0.01]
//
// mlp: 784-2048-2048-10, ReLU; cnn: [B,1,28,28] conv 16 3x3 pad 1, ReLU,
// maxpool 2, conv 32 3x3 pad 1, ReLU, maxpool 2, dense 10. Both: softmax
// cross-entropy, plain SGD. Exit 2 on a bad argument (named), 1 when the
// job cannot be built or written.
#include <cstdio>
#include <string>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/common/proto_io.h"

namespace oflite {
namespace {

struct Args {
  std::string out;
  std::string model = "mlp";
  int64_t batch = 64;
  int64_t machines = 1;
  int64_t iterations = 100;
  double lr = 0.01;
};

StatusOr<Job> BuildJob(const Args& args) {
  Graph g("scaling_" + args.model, /*seed=*/1);
  g.SetPlacement(Placement::Parse(args.machines == 1 ? "0:cpu:0"
                                                     : "0-" + std::to_string(args.machines - 1) +
                                                           ":cpu:0"));
  Tensor logits;
  Batch data;
  if (args.model == "mlp") {
    data = RandomBatch(&g, Shape{args.batch, 784}, 10);
    Tensor h = g.Relu(Dense(&g, data.image, 2048));
    h = g.Relu(Dense(&g, h, 2048));
    logits = Dense(&g, h, 10);
  } else {
    data = RandomBatch(&g, Shape{args.batch, 1, 28, 28}, 10);
    Conv2dOptions same;
    same.padding = {1, 1};
    Tensor x = MaxPool2d(&g, g.Relu(Conv2d(&g, data.image, 16, 3, same)), 2);  // [B, 16, 14, 14]
    x = MaxPool2d(&g, g.Relu(Conv2d(&g, x, 32, 3, same)), 2);                  // [B, 32, 7, 7]
    logits = Dense(&g, x, 10);
  }
  g.Minimize(g.SparseSoftmaxCrossEntropy(logits, data.label), Sgd{args.lr, 0.0});
  g.SetIterations(args.iterations);
  return g.Build();
}

// Parses argv into `args`; false (after naming the culprit) on bad input.
bool Parse(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    try {
      if (arg == "--model" && has_value) {
        args->model = argv[++i];
      } else if (arg == "--batch" && has_value) {
        args->batch = std::stoll(argv[++i]);
      } else if (arg == "--machines" && has_value) {
        args->machines = std::stoll(argv[++i]);
      } else if (arg == "--iterations" && has_value) {
        args->iterations = std::stoll(argv[++i]);
      } else if (arg == "--lr" && has_value) {
        args->lr = std::stod(argv[++i]);
      } else if (args->out.empty() && arg.rfind("--", 0) != 0) {
        args->out = arg;
      } else {
        std::fprintf(stderr, "write_scaling_job: unknown or incomplete argument '%s'\n", arg.c_str());
        return false;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "write_scaling_job: '%s' needs a number, not '%s'\n", arg.c_str(),
                   argv[i]);
      return false;
    }
  }
  if (args->out.empty()) {
    std::fprintf(stderr, "usage: write_scaling_job OUT.job.pb --model mlp|cnn --batch B "
                         "--machines M --iterations N [--lr LR]\n");
    return false;
  }
  if (args->model != "mlp" && args->model != "cnn") {
    std::fprintf(stderr, "write_scaling_job: --model '%s': want mlp or cnn\n", args->model.c_str());
    return false;
  }
  if (args->machines < 1 || args->batch < args->machines || args->iterations < 1) {
    std::fprintf(stderr, "write_scaling_job: need --machines >= 1, --batch >= --machines, "
                         "--iterations >= 1\n");
    return false;
  }
  return true;
}

}  // namespace
}  // namespace oflite

int main(int argc, char** argv) {
  oflite::Args args;
  if (!oflite::Parse(argc, argv, &args)) return 2;
  oflite::StatusOr<oflite::Job> job = oflite::BuildJob(args);
  if (!job.ok()) {
    std::fprintf(stderr, "write_scaling_job: %s\n", job.status().ToString().c_str());
    return 1;
  }
  const oflite::Status saved = oflite::SaveJob(args.out, *job);
  if (!saved.ok()) {
    std::fprintf(stderr, "write_scaling_job: %s\n", saved.ToString().c_str());
    return 1;
  }
  return 0;
}
