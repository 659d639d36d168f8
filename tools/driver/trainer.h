// The training driver: graph -> Job -> Plan -> train -> evaluate, for a
// program that defines a model and wants the usual command line.
//
//   #include "oneflow_lite/api/data_sources.h"  // FashionMnist
//   #include "oneflow_lite/api/layers.h"        // Dense
//   #include "tools/driver/trainer.h"
//   int main(int argc, char** argv) {
//     oflite::driver::TrainerConfig defaults;  // batch 64, 1 epoch, lr 0.1
//     return oflite::driver::TrainMain("mlp", defaults,
//         [](const oflite::driver::TrainerConfig& c, oflite::Graph* g) {
//           auto data = FashionMnist(g, c.data_dir, c.batch);
//           auto logits = Dense(g, g->Relu(Dense(g, data.image, 256)), 10);
//           g->AddMetric("accuracy", g->Accuracy(logits, data.label));
//           g->AddOutput("logits", logits);  // for `oflite predict`
//           g->Minimize(g->SparseSoftmaxCrossEntropy(logits, data.label),
//                       oflite::Sgd{.learning_rate = c.lr});
//         }, argc, argv);
//   }
//
// (Bazel: deps = ["//tools/driver:trainer"], visible to any package, and
// the model's //oneflow_lite/api:layers and :data_sources; the public
// surface is listed in docs/graph_api.md.) TrainMain parses the
// flags below over `defaults`, calls the model function on a fresh Graph
// (seed --seed), builds the Job, compiles it with its evaluation plan for a
// loopback cluster (machine m at 127.0.0.m+1) sized for the job's
// placements, writes <out-dir>/<name>.job.pb and <name>.plan.pb, prints
// the plan summary (as `oflite inspect` does), and then:
//  - one machine: trains and evaluates in-process through the node session
//    library (oneflow_lite/session: TrainPlan below), exactly as `oflite
//    run --plan <plan> [flags after --]` does (e.g. `-- --save-every 100
//    --checkpoint-dir ckpt`; evaluate or predict later with `oflite eval` /
//    `oflite predict --checkpoint ckpt/iter-N`);
//  - several machines: prints the `oflite launch` line that runs the plan.
// For inference with inputs a program streams in (text generation):
// CompileInferencePlan and RunInference below, with HostInput sources
// (api/data_sources.h) fed through HostFeed (data/host_feed.h).
// What the model sets stays: a placement (Graph::SetPlacement) or a
// duration (SetIterations/SetEpochs) of the model's own is kept, and a flag
// given on the command line that it overrides (--machines, --devices,
// --iters, --epochs) is named in a note on stderr. The flags apply where
// the model sets nothing (placement: machines 0..M-1, CPU devices 0..D-1,
// data parallel when the model hints Split(0) on its data).
// Flags: --data-dir, --batch (global), --epochs, --iters, --lr, --devices,
// --machines, --seed, --classes, --shard-optimizer, --micro-batches, --pipeline-schedule
// (docs/graph_api.md, "Micro-batches"), --out-dir (default $BUILD_WORKSPACE_DIRECTORY/out
// under `bazel run`, else .), --compile-only; after `--`, the flags of
// `oflite run` (session/training.h, session/node_options.h). Returns the
// exit code (session/exit_codes.h: 2 for a bad flag or a graph/compile
// error, naming it). Not thread-safe (one call per process).
#ifndef TOOLS_DRIVER_TRAINER_H_
#define TOOLS_DRIVER_TRAINER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/common/host_tensor.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/data/host_feed.h"
#include "oneflow_lite/session/node_options.h"
#include "oneflow_lite/session/training.h"
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
  // Shard the variables and their optimizer state over the data-parallel
  // devices (ZeRO; api/shard_optimizer.h, docs/compiler.md): BuildTrainingJob
  // runs ShardOptimizerStates on the built job. --shard-optimizer.
  bool shard_optimizer = false;
  // Micro-batches per iteration (Graph::SetMicroBatches; 1: none) and the
  // pipeline schedule ordering them on each stage (--micro-batches,
  // --pipeline-schedule gpipe|1f1b).
  int64_t micro_batches = 1;
  PipelineSchedule pipeline_schedule = PIPELINE_1F1B;
  // The compiler's fusion passes (CompileTrainingPlan; --fuse).
  bool fuse = true;
  // The values of the program's own flags (TrainMainOptions::flags) as
  // given on the command line or their defaults, by name (no "--").
  std::map<std::string, std::string> model_flags;

  // Typed reads of model_flags; InvalidArgument naming the flag when it is
  // not declared or its value does not parse.
  StatusOr<int64_t> IntFlag(const std::string& name) const;
  StatusOr<double> DoubleFlag(const std::string& name) const;
  StatusOr<bool> BoolFlag(const std::string& name) const;
  std::string StringFlag(const std::string& name) const;  // "" when undeclared
};

// A flag of the program's own, beside the driver's (e.g. a GPT's --layers).
struct ModelFlag {
  std::string name;  // without "--"
  std::string help;
  std::string default_value;
  bool is_bool = false;  // --name alone means true
};

// What a program adds to TrainMain.
struct TrainMainOptions {
  std::vector<ModelFlag> flags;
  // Runs once the flags are read, before the model is built: it may prepare
  // data (e.g. tokenize a text) and change `config`. An error ends the
  // program with exit 2, printed with the program's name; a value ends it
  // with that exit code instead of training (a mode of the program's own,
  // e.g. generating text from a checkpoint).
  std::function<StatusOr<std::optional<int>>(TrainerConfig* config)> prepare;
  // Runs once the training Job is built, before it is compiled (e.g. to
  // write the initial weights with WriteInitialVariables). Errors: exit 2.
  std::function<Status(const TrainerConfig& config, const Job& job)> after_build;
};

// Adds the model to `g` (data source, layers, loss, metrics, outputs,
// optimizer). Errors are recorded in the graph (graph.h) and reported by
// TrainMain.
using ModelFn = std::function<void(const TrainerConfig& config, Graph* g)>;

// The whole program: see the file comment.
int TrainMain(const std::string& name, TrainerConfig defaults, const ModelFn& model, int argc,
              char** argv);
// The same with the program's own flags and hooks (TrainMainOptions).
int TrainMain(const std::string& name, TrainerConfig defaults, const ModelFn& model, int argc,
              char** argv, const TrainMainOptions& options);

// Writes the initial value of every variable of `job` that its initializer
// gives (trainable ones and the rest; optimizer state is zeros and is
// skipped) to <dir>/<variable name>.npy (float32/float64), so another
// framework can start from the same weights (the GPT example's PyTorch
// twin, tools/bench/gpt_torch.py). Creates `dir`. Names with bytes outside
// [A-Za-z0-9._-] are escaped as %XX, as checkpoint files are.
Status WriteInitialVariables(const Job& job, const std::string& dir);

// The pieces, for programs with their own command line (library calls;
// none parses an argv):
//
// The Job of `model` under `config`: config's placement and duration are
// the graph's defaults, set before the model runs, so the model's own
// choices win; config's micro-batches apply after it runs (unless the model
// called SetMicroBatches itself). `model_choices` (may be null) gets one line per choice of
// the model that differs from config's, e.g. "the model places itself on
// 0-1:cpu:0 (flags: 0:cpu:0)". With config.shard_optimizer, the job is
// sharded (ShardOptimizerStates; its errors are this call's) and
// `model_choices` also gets one line per variable left whole and why.
StatusOr<Job> BuildTrainingJob(const std::string& name, const TrainerConfig& config,
                               const ModelFn& model,
                               std::vector<std::string>* model_choices = nullptr);
// `machines` machines on loopback addresses 127.0.0.1, 127.0.0.2, ...
// with `cpu_devices` CPU devices each.
ClusterProto LoopbackCluster(int64_t machines, int64_t cpu_devices);
// The loopback cluster `job` needs: as many machines and CPU/CUDA devices
// per machine as its placements name.
ClusterProto ClusterForJob(const Job& job);
// The training plan with its evaluation plan (api/node_plan.h) for
// ClusterForJob(job), verified. fuse: the compiler's fusion passes
// (compiler/fusion.h: bias_add -> relu and matmul -> bias_add on CPU
// devices; the programs' --fuse).
StatusOr<Plan> CompileTrainingPlan(const Job& job, bool fuse = true);
// Trains and evaluates a one-machine `plan` in this process, exactly as
// `oflite run --plan` does with the same request and node options
// (session::Train: progress lines, checkpoints, the test line); returns the
// exit code, `result` (may be null) the iterations, counters and rank 0's
// evaluation. Blocks until done.
int TrainPlan(const Plan& plan, const session::TrainingRequest& request,
              const session::NodeOptions& node, session::TrainingResult* result = nullptr);

// ---- Inference with inputs streamed in ------------------------------------
//
// The plan of a forward-only `job` (built with Graph::BuildForward, or a
// Graph without Minimize; e.g. HostInput sources and Graph::AddOutput) for
// ClusterForJob(job), verified. InvalidArgument for a training job.
StatusOr<Plan> CompileInferencePlan(const Job& job);

// Receives one named output of one iteration: `value` is valid only during
// the call (copy what must outlive it).
using InferenceOutputFn =
    std::function<void(int64_t iteration, const std::string& name, const HostTensor& value)>;

// Runs a one-machine inference `plan` (CompileInferencePlan) for
// `iterations` iterations in this process, in one run of the plan, with
// every variable restored from `checkpoint` (a checkpoint folder, or a root
// of iter-* ones whose newest is taken; chosen and verified in full against
// the plan's variables before anything runs, as `oflite eval` does).
// `on_output` (may be empty) is called for each named output of every
// iteration, in iteration order, on a runtime thread; it may push the next
// tensor of a feed (HostFeed::Push, data/host_feed.h), which the plan's
// host_feed op then reads for a later iteration: a feedback loop (text
// generation feeds each sampled token back in). The first iteration's
// feeds must be pushed before the call (or from another thread). A
// host_feed wait is bounded by its op's timeout; a run failing elsewhere
// while a feed waits ends once that wait does.
// When it returns, every feed the plan's host_feed ops read is reset
// (data/host_feed.h: what is still queued, such as the push answering the
// last iteration, is dropped, and a closed feed is reopened), so a later
// run starts clean. Returns the exit code (session/exit_codes.h): 0; 2 for
// a training or multi-machine plan, a plan the verifier refuses,
// iterations outside [1, 2^40] or a missing, corrupt or mismatched
// checkpoint; 1 when the run fails (a feed's timeout, a pushed tensor of
// the wrong shape, a kernel error: the error names the op). The reason is
// printed on stderr as "<node.command>: <error>", as the other commands
// do; nothing else is printed. Blocks until done. Not thread-safe (one
// call at a time per process: NodeSession).
int RunInference(const Plan& plan, const std::string& checkpoint, int64_t iterations,
                 const InferenceOutputFn& on_output, const session::NodeOptions& node = {});

}  // namespace driver
}  // namespace oflite

#endif  // TOOLS_DRIVER_TRAINER_H_
