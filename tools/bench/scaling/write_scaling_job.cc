// write_scaling_job: the Job files of tools/bench/scaling (docs/benchmarks.md,
// "Data-parallel scaling across hosts"): the model the PyTorch peer
// (ddp_peer.py) builds too, trained data parallel over `--machines`
// machines of one CPU device each, on synthetic data (the random_batch
// source, split over the machines; the global batch is `--batch`).
//
//   write_scaling_job OUT.job.pb [--model mlp] [--batch 64] [--machines 1]
//                     [--iterations 100] [--lr 0.01] [--help]
//
// mlp: 784-2048-2048-10, ReLU; cnn: [B,1,28,28] conv 16 3x3 pad 1, ReLU,
// maxpool 2, conv 32 3x3 pad 1, ReLU, maxpool 2, dense 10. Both: softmax
// cross-entropy, plain SGD. Exit 2 on a bad argument (named), 1 when the
// job cannot be built or written.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/session/flags.h"
#include "tools/bench/bench_flags.h"

namespace oflite {
namespace {

// After "usage: ... <program>" in --help.
constexpr char kUsage[] =
    "OUT.job.pb [--model mlp|cnn] [--batch B] [--machines M] [--iterations N] [--lr LR]\n\n"
    "Writes the Job of tools/bench/scaling (docs/benchmarks.md): the model trained data\n"
    "parallel over --machines machines on synthetic data.";

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

std::vector<cli::FlagSpec> FlagSpecs() {
  const Args defaults;
  return {
      {"model", "mlp or cnn", false, defaults.model},
      {"batch", "global batch (split over the machines)", false, std::to_string(defaults.batch)},
      {"machines", "machines of one CPU device each (data parallel)", false,
       std::to_string(defaults.machines)},
      {"iterations", "training iterations", false, std::to_string(defaults.iterations)},
      {"lr", "SGD learning rate", false, "0.01"}};
}

StatusOr<Args> ReadArgs(const cli::FlagSet& flags) {
  Args args;
  if (flags.positional().empty()) {
    return InvalidArgumentError("the output file OUT.job.pb is missing (see --help)");
  }
  args.out = flags.positional()[0];
  args.model = flags.Get("model");
  if (args.model != "mlp" && args.model != "cnn") {
    return InvalidArgumentError("flag '--model' must be mlp or cnn, got '", args.model, "'");
  }
  constexpr int64_t kMax = int64_t{1} << 30;
  ASSIGN_OR_RETURN(args.machines, flags.GetInt("machines", 1, 4096));
  ASSIGN_OR_RETURN(args.batch, flags.GetInt("batch", args.machines, kMax));
  ASSIGN_OR_RETURN(args.iterations, flags.GetInt("iterations", 1, kMax));
  ASSIGN_OR_RETURN(args.lr, flags.GetPositiveDouble("lr"));
  return args;
}

// Builds and writes the job: exit 0, or 1 (the error printed).
int Write(const Args& args) {
  StatusOr<Job> job = BuildJob(args);
  const Status saved = job.ok() ? SaveJob(args.out, *job) : job.status();
  if (!saved.ok()) {
    std::fprintf(stderr, "write_scaling_job: %s\n", saved.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace oflite

int main(int argc, char** argv) {
  using namespace oflite;
  return bench::BenchMain(argc, argv, "write_scaling_job", kUsage, FlagSpecs(), ReadArgs, Write,
                          /*max_positional=*/1);
}
