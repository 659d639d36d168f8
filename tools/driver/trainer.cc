#include "tools/driver/trainer.h"

#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "oneflow_lite/api/micro_batches.h"
#include "oneflow_lite/api/node_plan.h"
#include "oneflow_lite/api/shard_optimizer.h"
#include "oneflow_lite/common/attr.h"
#include "oneflow_lite/checkpoint/checkpoint.h"
#include "oneflow_lite/common/env.h"
#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/compiler/pipeline_schedule.h"
#include "oneflow_lite/compiler/plan_summary_text.h"
#include "oneflow_lite/data/npy.h"
#include "oneflow_lite/kernels/cpu/train/initial_values.h"
#include "oneflow_lite/plan/plan_verifier.h"
#include "oneflow_lite/runtime/variable_stores.h"
#include "oneflow_lite/session/checkpoint_choice.h"
#include "oneflow_lite/session/evaluation.h"
#include "oneflow_lite/session/exit_codes.h"
#include "oneflow_lite/session/flags.h"
#include "oneflow_lite/session/node_session.h"

namespace oflite {
namespace driver {
namespace {

int Fail(const std::string& name, const Status& status, int code) {
  return session::ReportFailure(name, status, code);
}

// Where outputs go: $BUILD_WORKSPACE_DIRECTORY/out under `bazel run`, else
// the current directory.
std::string DefaultOutDir(const session::Environment& env) {
  const std::string workspace = env("BUILD_WORKSPACE_DIRECTORY");
  return !workspace.empty() ? workspace + "/out" : ".";
}

std::string PlacementText(const PlacementProto& proto) {
  StatusOr<Placement> placement = Placement::FromProto(proto);
  return placement.ok() ? placement->ToString() : "(invalid placement)";
}

Placement ConfigPlacement(const TrainerConfig& config) {
  return *Placement::Parse("0-" + std::to_string(config.machines - 1) + ":cpu:0-" +
                           std::to_string(config.devices - 1));
}

// Splits argv at the first "--": the driver's own flags before, `oflite
// run`'s after.
int OwnArgc(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") return i;
  }
  return argc;
}

// Hands each named output to a program's InferenceOutputFn as a HostTensor.
class OutputForwarder final : public OutputObserver {
 public:
  explicit OutputForwarder(const InferenceOutputFn* on_output) : on_output_(on_output) {}

  Status OnOutput(int64_t iteration, const std::string& name, const Blob& value) override {
    TensorDesc desc = value.desc();
    desc.is_dynamic = false;  // the actual shape of this iteration
    HostTensor copy(desc);
    if (copy.ByteSize() > 0) std::memcpy(copy.raw(), value.raw(), copy.ByteSize());
    (*on_output_)(iteration, name, copy);
    return Status::OK();
  }

 private:
  const InferenceOutputFn* on_output_;  // not owned
};

// The feeds the plan's host_feed ops read.
std::set<std::string> HostFeedsOf(const Plan& plan) {
  std::set<std::string> feeds;
  for (const MachinePlan& machine : plan.machine()) {
    for (const TaskProto& task : machine.task()) {
      for (const KernelConf& kernel : task.kernel()) {
        if (kernel.op().op_type() != "host_feed") continue;
        StatusOr<std::string> feed = AttrView(kernel.op()).GetString("feed");
        if (feed.ok()) feeds.insert(*feed);
      }
    }
  }
  return feeds;
}

// What RunInference runs: an inference plan of one machine, for a count of
// iterations it can hold.
Status CheckInferencePlan(const Plan& plan, int64_t iterations) {
  if (plan.is_train()) {
    return InvalidArgumentError(
        "RunInference needs an inference plan, not a training plan (compile a forward-only "
        "job with CompileInferencePlan)");
  }
  if (plan.machine_size() != 1) {
    return InvalidArgumentError("RunInference runs a one-machine plan; this one has ",
                                plan.machine_size(), " machines");
  }
  if (iterations < 1 || iterations > session::kMaxIterations) {
    return InvalidArgumentError("RunInference: iterations must be in [1, ",
                                session::kMaxIterations, "], got ", iterations);
  }
  return Status::OK();
}

std::string Divisors(int64_t n, int64_t wanted) {
  std::string out;
  for (int64_t d : NearestDivisors(n, wanted)) out += (out.empty() ? "" : " or ") + std::to_string(d);
  return out;
}

// --micro-batches against --batch. The per-device batch is checked by the
// graph at Build, against each data source's own placement and split: a
// model may place itself (pipeline stages, tensor parallelism), so the
// flags' machines x devices are not its data-parallel degree.
Status CheckMicroBatches(const TrainerConfig& config) {
  const int64_t m = config.micro_batches;
  if (m < 1) {
    return InvalidArgumentError("flag '--micro-batches': ", m,
                                " must be at least 1 (1: no micro-batches)");
  }
  if (m == 1) return Status::OK();
  if (config.batch % m != 0) {
    return InvalidArgumentError("flag '--micro-batches': ", m, " does not divide --batch ",
                                config.batch, "; use ", Divisors(config.batch, m),
                                ", or a batch divisible by ", m);
  }
  return Status::OK();
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

ClusterProto ClusterForJob(const Job& job) {
  int64_t machines = 1, cpu_devices = 1, cuda_devices = 0;
  auto count = [&](const PlacementProto& placement) {
    for (int64_t m : placement.machine_id()) machines = std::max(machines, m + 1);
    for (int64_t d : placement.device_id()) {
      if (placement.device_type() == DEVICE_CUDA) {
        cuda_devices = std::max(cuda_devices, d + 1);
      } else {
        cpu_devices = std::max(cpu_devices, d + 1);
      }
    }
  };
  count(job.conf().default_placement());
  for (const OpConf& op : job.op()) {
    if (op.has_placement()) count(op.placement());
  }
  ClusterProto cluster = LoopbackCluster(machines, cpu_devices);
  for (MachineProto& m : *cluster.mutable_machine()) {
    m.set_cuda_devices(static_cast<int32_t>(cuda_devices));
  }
  return cluster;
}

StatusOr<Job> BuildTrainingJob(const std::string& name, const TrainerConfig& config,
                               const ModelFn& model, std::vector<std::string>* model_choices) {
  Graph g(name, config.seed);
  model(config, &g);
  if (config.micro_batches != 1 && g.micro_batches() == 1) {
    g.SetMicroBatches(config.micro_batches, config.pipeline_schedule);
  }
  // The config applies only where the model chose nothing itself.
  const Placement flags_placement = ConfigPlacement(config);
  const bool own_placement = g.placement_set();
  const bool own_duration = g.duration_set();
  if (!own_placement) g.SetPlacement(flags_placement);
  if (!own_duration) {
    if (config.iters > 0) {
      g.SetIterations(config.iters);
    } else {
      g.SetEpochs(config.epochs);
    }
  }
  ASSIGN_OR_RETURN(Job job, g.Build());
  ShardOptimizerReport sharding;
  if (config.shard_optimizer) {
    ASSIGN_OR_RETURN(job, ShardOptimizerStates(job, &sharding));
  }
  if (model_choices != nullptr) {
    for (const std::string& kept : sharding.kept) {
      model_choices->push_back("--shard-optimizer leaves a variable whole: " + kept);
    }
    const std::string placement = PlacementText(job.conf().default_placement());
    if (own_placement && placement != flags_placement.ToString()) {
      model_choices->push_back("the model places itself on " + placement + " (flags: " +
                               flags_placement.ToString() + ")");
    }
    if (own_duration) {
      model_choices->push_back("the model sets its own duration: " +
                               std::to_string(job.conf().total_iters()) + " iteration(s)");
    }
  }
  return job;
}

StatusOr<Plan> CompileTrainingPlan(const Job& job, bool fuse) {
  compiler::CompileOptions options;
  options.fuse = fuse;
  options.fuse_matmul_bias = fuse;
  ASSIGN_OR_RETURN(Plan plan, CompileNodePlan(job, ClusterForJob(job), options));
  RETURN_IF_ERROR(VerifyPlan(plan));
  return plan;
}

int TrainPlan(const Plan& plan, const session::TrainingRequest& request,
              const session::NodeOptions& node_options, session::TrainingResult* result) {
  Status checked = session::CheckTrainingRequest(request, plan, node_options.env);
  if (!checked.ok()) return session::ReportFailure(node_options.command, checked, cli::kExitBadInput);
  StatusOr<std::unique_ptr<session::NodeSession>> node =
      session::NodeSession::Start(plan, node_options);
  if (!node.ok()) return session::ReportStartFailure(node_options.command, node.status());
  return session::Train(node->get(), plan, request, result);
}

StatusOr<int64_t> TrainerConfig::IntFlag(const std::string& name) const {
  auto it = model_flags.find(name);
  if (it == model_flags.end()) return InvalidArgumentError("no flag '--", name, "' is declared");
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(it->second.c_str(), &end, 10);
  if (it->second.empty() || *end != '\0' || errno != 0) {
    return InvalidArgumentError("flag '--", name, "': '", it->second, "' is not an integer");
  }
  return static_cast<int64_t>(value);
}

StatusOr<double> TrainerConfig::DoubleFlag(const std::string& name) const {
  auto it = model_flags.find(name);
  if (it == model_flags.end()) return InvalidArgumentError("no flag '--", name, "' is declared");
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0' || errno != 0 || !std::isfinite(value)) {
    return InvalidArgumentError("flag '--", name, "': '", it->second, "' is not a finite number");
  }
  return value;
}

StatusOr<bool> TrainerConfig::BoolFlag(const std::string& name) const {
  auto it = model_flags.find(name);
  if (it == model_flags.end()) return InvalidArgumentError("no flag '--", name, "' is declared");
  if (it->second == "true") return true;
  if (it->second == "false") return false;
  return InvalidArgumentError("flag '--", name, "': '", it->second, "' is not true or false");
}

std::string TrainerConfig::StringFlag(const std::string& name) const {
  auto it = model_flags.find(name);
  return it == model_flags.end() ? "" : it->second;
}

Status WriteInitialVariables(const Job& job, const std::string& dir) {
  RETURN_IF_ERROR(Env::Default()->CreateDirectories(dir));
  for (const OpConf& op : job.op()) {
    if (op.op_type() != "variable" || op.is_optimizer()) continue;
    ASSIGN_OR_RETURN(HostTensor value, InitialVariableValue(op, job.conf().seed()));
    std::string file = VariableFileName(op.name());
    file = dir + "/" + file.substr(0, file.rfind('.')) + ".npy";
    RETURN_IF_ERROR(WriteNpy(file, value.dtype(), value.shape().dims(), value.raw()));
  }
  return Status::OK();
}

StatusOr<Plan> CompileInferencePlan(const Job& job) {
  if (job.conf().is_train()) {
    return InvalidArgumentError("job '", job.conf().name(),
                                "' trains (Minimize): an inference plan needs a forward-only "
                                "job (Graph::BuildForward, or a graph without Minimize)");
  }
  return CompileTrainingPlan(job);
}

int RunInference(const Plan& plan, const std::string& checkpoint, int64_t iterations,
                 const InferenceOutputFn& on_output, const session::NodeOptions& node_options) {
  const std::string& command = node_options.command;
  // Whatever happens, the feeds of this plan start the next run empty.
  const std::set<std::string> feeds = HostFeedsOf(plan);
  struct ResetFeeds {
    const std::set<std::string>& feeds;
    ~ResetFeeds() {
      for (const std::string& feed : feeds) HostFeed::Reset(feed);
    }
  } reset_feeds{feeds};
  Status checked = CheckInferencePlan(plan, iterations);
  if (checked.ok()) checked = VerifyPlan(plan);
  if (!checked.ok()) return session::ReportFailure(command, checked, cli::kExitBadInput);
  StatusOr<std::map<std::string, TensorDesc>> variables = PlanVariables(plan);
  if (!variables.ok()) {
    return session::ReportFailure(command, variables.status(), cli::kExitBadInput);
  }
  StatusOr<std::string> chosen =
      session::ChooseCheckpoint(checkpoint, *variables, node_options.env);
  if (!chosen.ok()) return session::ReportFailure(command, chosen.status(), cli::kExitBadInput);

  StatusOr<std::unique_ptr<session::NodeSession>> node =
      session::NodeSession::Start(plan, node_options);
  if (!node.ok()) return session::ReportStartFailure(command, node.status());
  std::unique_ptr<CheckpointVariableStore> store =
      session::CheckpointRestorer(*chosen, *variables);
  OutputForwarder outputs(&on_output);
  session::EvaluationRequest request;
  request.eval_plan = &plan;
  request.variables = store.get();
  request.outputs = on_output ? &outputs : nullptr;
  request.iterations = iterations;
  StatusOr<session::EvaluationResult> result = session::RunEvaluation(node->get(), request);
  if (!result.ok()) return (*node)->Fail(result.status(), cli::kExitFailure);
  return cli::kExitOk;
}

int TrainMain(const std::string& name, TrainerConfig config, const ModelFn& model, int argc,
              char** argv) {
  return TrainMain(name, std::move(config), model, argc, argv, TrainMainOptions());
}

int TrainMain(const std::string& name, TrainerConfig config, const ModelFn& model, int argc,
              char** argv, const TrainMainOptions& options) {
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  const session::Environment env = session::ProcessEnvironment();
  // Under `bazel run` the program starts in its runfiles tree; relative
  // paths on its command line (--checkpoint-dir ckpt, --text my.txt) mean
  // the directory the user typed the command in.
  const std::string working = env("BUILD_WORKING_DIRECTORY");
  if (!working.empty() && chdir(working.c_str()) != 0) {
    std::fprintf(stderr, "%s: note: cannot enter %s; relative paths are taken from %s\n",
                 name.c_str(), working.c_str(), "the runfiles directory");
  }
  const int own_argc = OwnArgc(argc, argv);
  std::vector<cli::FlagSpec> specs = {
      {"data-dir", "dataset directory (Fashion-MNIST idx files, or .npy arrays)", false,
        config.data_dir},
       {"batch", "global batch size", false, std::to_string(config.batch)},
       {"epochs", "epochs of the training split", false, std::to_string(config.epochs)},
       {"iters", "iterations instead of epochs (0: use --epochs)", false,
        std::to_string(config.iters)},
       {"lr", "learning rate", false, std::to_string(config.lr)},
       {"devices", "CPU devices per machine (data parallel)", false,
        std::to_string(config.devices)},
       {"machines", "machines (data parallel; written, then run with oflite launch)", false,
        std::to_string(config.machines)},
       {"seed", "job seed", false, std::to_string(config.seed)},
       {"classes", "classes of the labels (models on .npy data)", false,
        std::to_string(config.classes)},
       {"micro-batches",
        "micro-batches per iteration; gradients accumulate before one update (1: none)", false,
        std::to_string(config.micro_batches)},
       {"pipeline-schedule", "order of the micro-batches on each pipeline stage: gpipe or 1f1b",
        false, compiler::PipelineScheduleName(config.pipeline_schedule)},
       {"shard-optimizer",
        "shard variables and optimizer state over the data-parallel devices (ZeRO: "
        "gradients reduce-scattered, parameters all-gathered; docs/compiler.md)",
        true, "false"},
       {"fuse",
        "fuse op chains into one kernel: bias_add -> relu, and on CPU devices gelu with its "
        "gradient and matmul -> bias_add (docs/compiler.md; --fuse=false: one kernel per op)",
        true, config.fuse ? "true" : "false"},
       {"out-dir", "where to write the job and plan files", false, DefaultOutDir(env)},
       {"compile-only", "write the job and plan, do not train", true, "false"}};
  for (const ModelFlag& flag : options.flags) {
    specs.push_back({flag.name, flag.help, flag.is_bool, flag.default_value});
  }
  cli::FlagSet flags(name, "[flags] [-- oflite-run flags]", std::move(specs));
  if (std::optional<int> done = flags.ParseCommandLine(own_argc, argv, name)) return *done;
  // The flags after "--" are `oflite run`'s: their syntax is checked now,
  // their meaning against the plan once it is compiled.
  std::vector<cli::FlagSpec> run_specs = session::TrainingFlagSpecs();
  for (cli::FlagSpec& spec : session::NodeFlagSpecs()) run_specs.push_back(std::move(spec));
  cli::FlagSet run_flags(name, "-- [oflite run flags]", std::move(run_specs));
  std::vector<char*> run_argv = {argv[0]};
  for (int i = own_argc + 1; i < argc; ++i) run_argv.push_back(argv[i]);
  Status parsed = run_flags.Parse(static_cast<int>(run_argv.size()), run_argv.data());
  if (!parsed.ok()) return Fail(name, parsed, cli::kExitBadInput);

  for (const char* key :
       {"batch", "epochs", "iters", "devices", "machines", "seed", "classes", "micro-batches"}) {
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
  config.shard_optimizer = flags.GetBool("shard-optimizer");
  config.fuse = flags.GetBool("fuse");
  config.micro_batches = *flags.GetInt("micro-batches");
  StatusOr<PipelineSchedule> schedule =
      compiler::ParsePipelineSchedule(flags.Get("pipeline-schedule"));
  if (!schedule.ok()) {
    return Fail(name, schedule.status().WithContext("flag '--pipeline-schedule'"),
                cli::kExitBadInput);
  }
  config.pipeline_schedule = *schedule;
  Status micro = CheckMicroBatches(config);
  if (!micro.ok()) return Fail(name, micro, cli::kExitBadInput);
  StatusOr<double> lr = flags.GetPositiveDouble("lr");
  if (!lr.ok()) return Fail(name, lr.status(), cli::kExitBadInput);
  config.lr = *lr;
  if (config.devices < 1 || config.machines < 1 || config.batch < 1 || config.classes < 1) {
    return Fail(name,
                InvalidArgumentError("--devices, --machines, --batch and --classes must be positive"),
                cli::kExitBadInput);
  }

  for (const ModelFlag& flag : options.flags) {
    config.model_flags[flag.name] =
        flag.is_bool ? (flags.GetBool(flag.name) ? "true" : "false") : flags.Get(flag.name);
  }
  if (options.prepare) {
    StatusOr<std::optional<int>> prepared = options.prepare(&config);
    if (!prepared.ok()) return Fail(name, prepared.status(), cli::kExitBadInput);
    if (prepared->has_value()) return **prepared;
  }

  std::vector<std::string> model_choices;
  StatusOr<Job> job = BuildTrainingJob(name, config, model, &model_choices);
  if (!job.ok()) return Fail(name, job.status(), cli::kExitBadInput);
  if (options.after_build) {
    Status done = options.after_build(config, *job);
    if (!done.ok()) return Fail(name, done, cli::kExitBadInput);
  }
  // A flag given on the command line that the model's own choice overrides.
  const bool placement_flags = flags.Has("machines") || flags.Has("devices");
  const bool duration_flags = flags.Has("iters") || flags.Has("epochs");
  for (const std::string& choice : model_choices) {
    if (choice.rfind("--shard-optimizer", 0) == 0) {
      std::fprintf(stderr, "%s: note: %s\n", name.c_str(), choice.c_str());
      continue;
    }
    const bool placement = choice.rfind("the model places", 0) == 0;
    if (placement ? placement_flags : duration_flags) {
      std::fprintf(stderr, "%s: note: %s; %s not used\n", name.c_str(), choice.c_str(),
                   placement ? "--machines/--devices are" : "--iters/--epochs are");
    }
  }
  StatusOr<Plan> plan = CompileTrainingPlan(*job, config.fuse);
  if (!plan.ok()) return Fail(name, plan.status(), cli::kExitBadInput);
  const std::string out = flags.Get("out-dir");
  Status made = Env::Default()->CreateDirectories(out);
  if (!made.ok()) return Fail(name, made.WithContext("--out-dir"), cli::kExitBadInput);
  const std::string job_path = out + "/" + name + ".job.pb";
  const std::string plan_path = out + "/" + name + ".plan.pb";
  Status saved = SaveJob(job_path, *job);
  if (saved.ok()) saved = SavePlan(plan_path, *plan);
  if (!saved.ok()) return Fail(name, saved, cli::kExitBadInput);
  std::printf("wrote %s and %s\n", job_path.c_str(), plan_path.c_str());
  compiler::PrintPlanSummary(stdout, *plan);
  std::fflush(stdout);
  if (flags.GetBool("compile-only")) return cli::kExitOk;
  if (plan->machine_size() > 1) {
    std::printf("a %d-machine plan: start it with\n  oflite launch --plan %s --nproc %d\n",
                plan->machine_size(), plan_path.c_str(), plan->machine_size());
    return cli::kExitOk;
  }
  StatusOr<session::NodeOptions> node =
      session::ReadNodeOptions(run_flags, *plan, env, name);
  if (!node.ok()) return Fail(name, node.status(), cli::kExitBadInput);
  StatusOr<session::TrainingRequest> request =
      session::ReadTrainingRequest(run_flags, *plan, node->env);
  if (!request.ok()) return Fail(name, request.status(), cli::kExitBadInput);
  return TrainPlan(*plan, *request, *node);
}

}  // namespace driver
}  // namespace oflite
