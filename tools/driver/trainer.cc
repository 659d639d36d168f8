#include "tools/driver/trainer.h"

#include <glog/logging.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "oneflow_lite/api/node_plan.h"
#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/compiler/compiler.h"
#include "tools/oflite/commands.h"
#include "tools/oflite/flags.h"

namespace oflite {
namespace driver {
namespace {

int Fail(const std::string& name, const Status& status, int code) {
  std::fprintf(stderr, "%s: %s\n", name.c_str(), status.ToString().c_str());
  return code;
}

// Where outputs go: $BUILD_WORKSPACE_DIRECTORY/out under `bazel run`, else
// the current directory.
std::string DefaultOutDir() {
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  return workspace != nullptr ? std::string(workspace) + "/out" : ".";
}

}  // namespace

ClusterProto LoopbackCluster(int64_t machines, int64_t cpu_devices) {
  ClusterProto cluster;
  for (int64_t i = 0; i < machines; ++i) {
    MachineProto* m = cluster.add_machine();
    m->set_id(i);
    m->set_address("127.0.0." + std::to_string(i + 1));
    m->set_cpu_devices(static_cast<int32_t>(cpu_devices));
  }
  return cluster;
}

StatusOr<Job> BuildTrainingJob(const std::string& name, const TrainerConfig& config,
                               const ModelFn& model) {
  Graph g(name, config.seed);
  model(config, &g);
  if (config.iters > 0) {
    g.SetIterations(config.iters);
  } else {
    g.SetEpochs(config.epochs);
  }
  g.SetPlacement(Placement::Parse("0-" + std::to_string(config.machines - 1) + ":cpu:0-" +
                                  std::to_string(config.devices - 1)));
  return g.Build();
}

StatusOr<Plan> CompileTrainingPlan(const Job& job, const TrainerConfig& config) {
  return CompileNodePlan(job, LoopbackCluster(config.machines, config.devices));
}

int TrainMain(const std::string& name, TrainerConfig config, const ModelFn& model, int argc,
              char** argv) {
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  // Flags after "--" go to the trainer (oflite run).
  int own_argc = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      own_argc = i;
      break;
    }
  }
  cli::FlagSet flags(
      name, "[flags] [-- oflite-run flags]",
      {{"data-dir", "dataset directory (Fashion-MNIST idx files, or .npy arrays)", false,
        config.data_dir},
       {"batch", "global batch size", false, std::to_string(config.batch)},
       {"epochs", "epochs of the training split", false, std::to_string(config.epochs)},
       {"iters", "iterations instead of epochs (0: use --epochs)", false, "0"},
       {"lr", "learning rate", false, std::to_string(config.lr)},
       {"devices", "CPU devices per machine (data parallel)", false,
        std::to_string(config.devices)},
       {"machines", "machines (data parallel; written, then run with oflite launch)", false,
        std::to_string(config.machines)},
       {"seed", "job seed", false, std::to_string(config.seed)},
       {"classes", "classes of the labels (models on .npy data)", false,
        std::to_string(config.classes)},
       {"out-dir", "where to write the job and plan files", false, DefaultOutDir()},
       {"compile-only", "write the job and plan, do not train", true, "false"}});
  Status parsed = flags.Parse(own_argc, argv);
  if (!parsed.ok()) return Fail(name, parsed, cli::kExitBadInput);
  if (flags.help_requested()) {
    flags.PrintHelp();
    return cli::kExitOk;
  }
  for (const char* key : {"batch", "epochs", "iters", "devices", "machines", "seed", "classes"}) {
    if (!flags.GetInt(key).ok()) return Fail(name, flags.GetInt(key).status(), cli::kExitBadInput);
  }
  config.data_dir = flags.Get("data-dir");
  config.batch = *flags.GetInt("batch");
  config.epochs = *flags.GetInt("epochs");
  config.iters = *flags.GetInt("iters");
  config.devices = *flags.GetInt("devices");
  config.machines = *flags.GetInt("machines");
  config.seed = *flags.GetInt("seed");
  config.classes = *flags.GetInt("classes");
  config.lr = std::atof(flags.Get("lr").c_str());
  if (config.devices < 1 || config.machines < 1 || config.batch < 1 || config.lr <= 0 ||
      config.classes < 1) {
    return Fail(
        name,
        InvalidArgumentError("--devices, --machines, --batch, --classes and --lr must be positive"),
        cli::kExitBadInput);
  }

  StatusOr<Job> job = BuildTrainingJob(name, config, model);
  if (!job.ok()) return Fail(name, job.status(), cli::kExitBadInput);
  StatusOr<Plan> plan = CompileTrainingPlan(*job, config);
  if (!plan.ok()) return Fail(name, plan.status(), cli::kExitBadInput);
  const std::string out = flags.Get("out-dir");
  if (std::system(("mkdir -p '" + out + "'").c_str()) != 0) {
    return Fail(name, PermissionDeniedError("cannot create '", out, "'"), cli::kExitBadInput);
  }
  const std::string job_path = out + "/" + name + ".job.pb";
  const std::string plan_path = out + "/" + name + ".plan.pb";
  Status saved = SaveJob(job_path, *job);
  if (saved.ok()) saved = SavePlan(plan_path, *plan);
  if (!saved.ok()) return Fail(name, saved, cli::kExitBadInput);
  std::printf("wrote %s and %s\n", job_path.c_str(), plan_path.c_str());
  std::fflush(stdout);
  {
    std::string inspect = "inspect";
    std::vector<char*> inspect_argv = {inspect.data(), const_cast<char*>(plan_path.c_str())};
    if (cli::RunInspect(2, inspect_argv.data()) != cli::kExitOk) {
      return Fail(name, InternalError("cannot summarize '", plan_path, "'"), cli::kExitFailure);
    }
  }
  if (flags.GetBool("compile-only")) return cli::kExitOk;
  if (config.machines > 1) {
    std::printf("a %lld-machine plan: start it with\n  oflite launch --plan %s --nproc %lld\n",
                static_cast<long long>(config.machines), plan_path.c_str(),
                static_cast<long long>(config.machines));
    return cli::kExitOk;
  }

  // Train with the runtime, exactly as `oflite run --plan <plan>` does.
  std::vector<std::string> run_args = {"run", "--plan", plan_path};
  for (int i = own_argc + 1; i < argc; ++i) run_args.push_back(argv[i]);
  std::vector<char*> run_argv;
  for (std::string& a : run_args) run_argv.push_back(a.data());
  return cli::RunRun(static_cast<int>(run_argv.size()), run_argv.data());
}

}  // namespace driver
}  // namespace oflite
