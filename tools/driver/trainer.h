// The training driver: graph -> Job -> Plan -> train -> evaluate, for a
// program that defines a model and wants the usual command line.
//
//   #include "tools/driver/trainer.h"
//   int main(int argc, char** argv) {
//     oflite::driver::TrainerConfig defaults;  // batch 64, 1 epoch, lr 0.1
//     return oflite::driver::TrainMain("mlp", defaults,
//         [](const oflite::driver::TrainerConfig& c, oflite::Graph* g) {
//           auto data = g->FashionMnist(c.data_dir, c.batch);
//           auto logits = g->Dense(g->Relu(g->Dense(data.image, 256)), 10);
//           g->AddMetric("accuracy", g->Accuracy(logits, data.label));
//           g->AddOutput("logits", logits);  // for `oflite predict`
//           g->Minimize(g->SparseSoftmaxCrossEntropy(logits, data.label),
//                       oflite::Sgd{.learning_rate = c.lr});
//         }, argc, argv);
//   }
//
// (Bazel: deps = ["//tools/driver:trainer"].) TrainMain parses the flags
// below over `defaults`, calls the model function on a fresh Graph (seed
// --seed), sets iterations (--iters, else --epochs of the training split)
// and the placement (machines 0..M-1, CPU devices 0..D-1: data parallel
// when the model hints Split(0) on its data), builds the Job, compiles it
// with its evaluation plan for a loopback cluster (machine m at 127.0.0.m+1),
// writes <out-dir>/<name>.job.pb and <name>.plan.pb, prints the plan
// summary, and then:
//  - one machine: trains and evaluates in-process, exactly as `oflite run
//    --plan <plan> [args after --]` does (e.g. `-- --save-every 100
//    --checkpoint-dir ckpt`; evaluate or predict later with `oflite eval` /
//    `oflite predict --checkpoint ckpt/iter-N`);
//  - several machines: prints the `oflite launch` line that runs the plan.
// Flags: --data-dir, --batch (global), --epochs, --iters, --lr, --devices,
// --machines, --seed, --classes, --out-dir (default $BUILD_WORKSPACE_DIRECTORY/out
// under `bazel run`, else .), --compile-only. Returns the exit code
// (tools/oflite/commands.h: 2 for a bad flag or a graph/compile error,
// naming it). Not thread-safe (one call per process).
#ifndef TOOLS_DRIVER_TRAINER_H_
#define TOOLS_DRIVER_TRAINER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/common/status.h"
#include "proto/cluster.pb.h"
#include "proto/job.pb.h"
#include "proto/plan.pb.h"

namespace oflite {
namespace driver {

struct TrainerConfig {
  std::string data_dir = "/usr/share/datasets/fashion-mnist";
  int64_t batch = 64;
  int64_t epochs = 1;
  int64_t iters = 0;  // 0: epochs
  double lr = 0.1;
  int64_t devices = 1;   // CPU devices per machine
  int64_t machines = 1;  // machines of the cluster (127.0.0.1, 127.0.0.2, ...)
  int64_t seed = 1;
  int64_t classes = 10;  // for models whose data does not fix it (e.g. .npy)
};

// Adds the model to `g` (data source, layers, loss, metrics, outputs,
// optimizer). Errors are recorded in the graph (graph.h) and reported by
// TrainMain.
using ModelFn = std::function<void(const TrainerConfig& config, Graph* g)>;

// The whole program: see the file comment.
int TrainMain(const std::string& name, TrainerConfig defaults, const ModelFn& model, int argc,
              char** argv);

// The pieces, for programs with their own command line:
// the Job of `model` under `config` (iterations and placement set).
StatusOr<Job> BuildTrainingJob(const std::string& name, const TrainerConfig& config,
                               const ModelFn& model);
// `machines` machines on loopback addresses 127.0.0.1, 127.0.0.2, ...
// with `cpu_devices` CPU devices each.
ClusterProto LoopbackCluster(int64_t machines, int64_t cpu_devices);
// The training plan with its evaluation plan (api/node_plan.h) for
// LoopbackCluster(config.machines, config.devices).
StatusOr<Plan> CompileTrainingPlan(const Job& job, const TrainerConfig& config);

}  // namespace driver
}  // namespace oflite

#endif  // TOOLS_DRIVER_TRAINER_H_
