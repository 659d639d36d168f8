// oflite compile: Job + cluster -> Plan, everything a node needs in one
// file (CompileNodePlan, api/node_plan.h): the training plan with its run
// settings, variable descs and collective algorithms, and its evaluation
// plan (docs/plan_format.md).
//
// Exit codes (commands.h): 0 success, 2 bad input (a file that cannot be
// read or parsed, a job the compiler rejects, an output folder that does
// not exist: checked before anything is compiled), 1 the plan could not be
// written. The plan is written atomically (SavePlan), so a failed compile
// never leaves a partial or stale-looking output file behind.
#include <cstdio>
#include <memory>
#include <cstring>
#include <string>
#include <vector>

#include "oneflow_lite/api/auto_parallel.h"
#include "oneflow_lite/api/node_plan.h"
#include "oneflow_lite/api/shard_optimizer.h"
#include "oneflow_lite/common/env.h"
#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/compiler/plan_summary.h"
#include "oneflow_lite/cost/calibration.h"
#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/plan/plan_verifier.h"
#include "oneflow_lite/profile/kernel_profiler.h"
#include "proto/calibration.pb.h"
#include "tools/oflite/commands.h"
#include "oneflow_lite/session/flags.h"

namespace oflite {
namespace cli {
namespace {

int Fail(int code, const Status& status) {
  std::fprintf(stderr, "oflite compile: %s\n", status.message().c_str());
  return code;
}

// "8G", "512M", "1048576": bytes; 0 or negative is an error.
StatusOr<int64_t> ParseBytes(const std::string& text, const std::string& flag) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  double scale = 1;
  std::string unit = end ? std::string(end) : "";
  if (unit == "K" || unit == "KiB") scale = 1024.0;
  else if (unit == "M" || unit == "MiB") scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB") scale = 1024.0 * 1024 * 1024;
  else if (!unit.empty()) v = -1;
  if (text.empty() || end == text.c_str() || !(v > 0) || v * scale > 9e18) {
    return InvalidArgumentError("flag '--", flag, "': '", text,
                                "' is not a positive size (bytes, or with K, M, G)");
  }
  return static_cast<int64_t>(v * scale);
}

std::string Ms(double us) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f ms", us / 1e3);
  return buf;
}

void PrintChoice(const AutoParallelReport& report) {
  std::printf("auto-parallel: %lld layout(s) compiled and simulated (transport %s)\n",
              static_cast<long long>(report.evaluated()), report.transport().c_str());
  std::printf("  %-28s %12s %12s  %s\n", "layout", "predicted", "memory/mach", "");
  int shown = 0;
  for (const LayoutCandidate& c : report.candidate()) {
    if (shown++ >= 12) break;
    std::string mark = c.name() == report.chosen() ? "<- chosen" : "";
    if (!c.error().empty()) mark = "not possible: " + c.error().substr(0, 100);
    if (c.over_memory_limit()) mark = "over the memory limit";
    std::printf("  %-28s %12s %9.1f MiB  %s\n", c.name().c_str(),
                c.error().empty() ? Ms(c.predicted_step_us()).c_str() : "-",
                c.peak_machine_bytes() / 1048576.0, mark.c_str());
  }
  if (report.candidate_size() > 12) {
    std::printf("  ... %d more (oflite inspect PLAN lists them all)\n",
                report.candidate_size() - 12);
  }
}

}  // namespace

int RunCompile(int argc, char** argv) {
  FlagSet flags("oflite compile", "--job JOB.pb --cluster CLUSTER.pbtxt -o PLAN.pb",
                {{"job", "the Job file written by a model program"},
                 {"cluster", "the cluster description (text ClusterProto)"},
                 {"o", "where to write the Plan"},
                 {"output", "same as -o"},
                 {"no_memory_reuse", "give every register its own memory", true},
                 {"fuse",
                  "fuse bias_add -> relu chains, and on CPU devices an erf gelu with its "
                  "gradient (gelu_and_derivative), into one kernel each (docs/compiler.md)",
                  true},
                 {"fuse_matmul_bias",
                  "fuse matmul -> bias_add pairs on CPU devices into one GEMM with the bias in "
                  "its epilogue (not bit-identical to the pair; docs/compiler.md)",
                  true},
                 {"pipeline_depth", "regst_num on stage boundaries and cross-machine edges",
                  false, "2"},
                 {"exchange_max_bytes",
                  "partial-sum collectives of tensors of at most this many bytes (4x this between "
                  "2 ranks, half from 3; at most 4x this sent per rank) use the exchange "
                  "all-reduce, larger ones the ring (0: always the ring)",
                  false, std::to_string(compiler::CompileOptions().exchange_max_bytes)},
                 {"fuse_max_bytes",
                  "small partial-sum all-reduces across machines are fused into buckets of at "
                  "most this many bytes, one collective each (0: one collective per tensor)",
                  false, std::to_string(compiler::CompileOptions().fuse_max_bytes)},
                 {"split_clip_norm",
                  "a global-norm clip over gradients of split parameters sums their squares "
                  "where they lie and all-reduces one scalar per group instead of gathering "
                  "every gradient (docs/compiler.md); --split_clip_norm=false reads them whole",
                  true, "true"},
                 {"graph-replay",
                  "merge each GPU's compute-stream tasks of a graph-capturable plan into one "
                  "task the runtime may capture as a CUDA graph and replay (docs/compiler.md); "
                  "--graph-replay=false keeps one task per op",
                  true, "true"},
                 {"shard-optimizer",
                  "shard the job's variables and optimizer state over its data-parallel "
                  "devices (ZeRO, docs/compiler.md): gradients reduce-scattered, parameters "
                  "all-gathered",
                  true},
                 {"auto-parallel",
                  "choose the layout (data, tensor, pipeline parallel, hybrids, micro-batches) "
                  "by simulated step time (docs/simulate.md); needs --calibration",
                  true},
                 {"calibration",
                  "the calibration of `oflite profile`: each partial-sum collective takes the "
                  "algorithm its curves predict fastest on --transport (and --auto-parallel "
                  "simulates with it)"},
                 {"memory-limit",
                  "with --auto-parallel: the most memory a machine's plan may take (bytes, or "
                  "with K, M, G)"},
                 {"ignore-hints",
                  "with --auto-parallel: the job's SBP hints and placements are free to change",
                  true},
                 {"transport", "with --calibration: the transport whose calibrated costs apply "
                  "between machines", false, "tcp"},
                 {"search-seconds",
                  "with --auto-parallel: stop compiling further candidates after this long",
                  false, "300"},
                 {"pipeline-margin",
                  "with --auto-parallel: a pipelined layout is chosen over the best one without "
                  "stages only when predicted faster by more than this many percent "
                  "(docs/simulate.md); 0: the fastest prediction wins",
                  false, "3"},
                 {"measure",
                  "with --auto-parallel: time the kernels the calibration lacks on this host "
                  "and add them to the calibration file",
                  true, "true"},
                 {"quiet", "print nothing on success", true}});
  // Accept the conventional short "-o FILE" next to "--o FILE".
  std::vector<char*> args(argv, argv + argc);
  static char long_o[] = "--o";
  for (char*& arg : args) {
    if (std::strcmp(arg, "-o") == 0) arg = long_o;
  }
  if (std::optional<int> done = flags.ParseCommandLine(static_cast<int>(args.size()), args.data(),
                                                         "oflite compile")) {
    return *done;
  }
  std::string output = flags.Has("o") ? flags.Get("o") : flags.Get("output");
  if (!flags.Has("job") || !flags.Has("cluster") || output.empty()) {
    std::fprintf(stderr, "oflite compile: --job, --cluster and -o are required (see --help)\n");
    return kExitBadInput;
  }
  // A missing output folder is bad input found now, not after the work.
  Status writable = Env::Default()->CheckParentDirectory(output);
  if (!writable.ok()) return Fail(kExitBadInput, writable.WithContext("-o"));
  compiler::CompileOptions options;
  options.memory.enable_reuse = !flags.GetBool("no_memory_reuse");
  options.fuse = flags.GetBool("fuse");
  options.fuse_matmul_bias = flags.GetBool("fuse_matmul_bias");
  options.split_clip_norms = flags.GetBool("split_clip_norm");
  StatusOr<int64_t> depth = flags.GetInt("pipeline_depth", 1, 64);
  if (!depth.ok()) return Fail(kExitBadInput, depth.status());
  options.tasks.pipeline_depth = static_cast<int>(*depth);
  StatusOr<int64_t> exchange = flags.GetInt("exchange_max_bytes", 0, int64_t{1} << 30);
  if (!exchange.ok()) return Fail(kExitBadInput, exchange.status());
  options.exchange_max_bytes = *exchange;
  StatusOr<int64_t> fuse_bytes = flags.GetInt("fuse_max_bytes", 0, int64_t{1} << 30);
  if (!fuse_bytes.ok()) return Fail(kExitBadInput, fuse_bytes.status());
  options.fuse_max_bytes = *fuse_bytes;
  const std::string replay = flags.Get("graph-replay");
  if (replay != "true" && replay != "false" && replay != "1" && replay != "0") {
    std::fprintf(stderr, "oflite compile: flag '--graph-replay' must be true or false, got '%s'\n",
                 replay.c_str());
    return kExitBadInput;
  }
  options.merge_gpu_compute = replay == "true" || replay == "1";

  StatusOr<Job> job = LoadJob(flags.Get("job"));
  if (!job.ok()) return Fail(kExitBadInput, job.status());
  if (flags.GetBool("shard-optimizer")) {
    ShardOptimizerReport report;
    job = ShardOptimizerStates(*job, &report);
    if (!job.ok()) {
      return Fail(kExitBadInput, job.status().WithContext("job '" + flags.Get("job") + "'"));
    }
    for (const std::string& kept : report.kept) {
      std::fprintf(stderr, "oflite compile: note: --shard-optimizer leaves a variable whole: %s\n",
                   kept.c_str());
    }
  }
  StatusOr<ClusterProto> cluster = compiler::LoadCluster(flags.Get("cluster"));
  if (!cluster.ok()) return Fail(kExitBadInput, cluster.status());
  // With a calibration, collectives are chosen from its curves.
  const std::string calibration_path = flags.Has("calibration") ? flags.Get("calibration") : "";
  Calibration calibration;
  std::shared_ptr<cost::CostTables> tables;
  const std::string transport_name = flags.Get("transport");
  if (transport_name != "tcp" && transport_name != "shm" && transport_name != "ibverbs") {
    std::fprintf(stderr, "oflite compile: flag '--transport': '%s' is not tcp, shm or ibverbs\n",
                 transport_name.c_str());
    return kExitBadInput;
  }
  if (!calibration_path.empty()) {
    Status read = ReadTextProto(calibration_path, &calibration);
    if (read.ok()) read = cost::ValidateCalibration(calibration, calibration_path);
    if (!read.ok()) {
      return Fail(kExitBadInput, read.WithContext("calibration '" + calibration_path + "'"));
    }
    tables = std::make_shared<cost::CostTables>(calibration);
    const TransportCost* transport = tables->transport(transport_name);
    if (transport == nullptr) {
      std::fprintf(stderr, "oflite compile: note: calibration '%s' has no transport '%s': "
                           "collectives follow the size rule\n",
                   calibration_path.c_str(), transport_name.c_str());
    } else {
      LinkSpec link = cost::SlowestLink(*cluster);
      TransportCost transport_copy = *transport;
      options.collective_source = "the curves of calibration '" + calibration_path + "' over " +
                                  transport_name + ", against the cluster's slowest link";
      options.collective_time = [tables, transport_copy, link](CollectiveAlgorithm a, int64_t n,
                                                               int64_t bytes) {
        return cost::PredictCollectiveUs(*tables, &transport_copy, link, a, static_cast<int>(n),
                                         bytes);
      };
    }
  }
  StatusOr<Plan> plan = InternalError("not compiled");
  if (flags.GetBool("auto-parallel")) {
    if (flags.GetBool("shard-optimizer")) {
      std::fprintf(stderr, "oflite compile: --shard-optimizer with --auto-parallel: the search "
                           "compares the sharded layout ('zero') itself\n");
      return kExitBadInput;
    }
    if (calibration_path.empty()) {
      std::fprintf(stderr, "oflite compile: --auto-parallel needs --calibration (write one with "
                           "`oflite profile --plan P --out C.pbtxt`)\n");
      return kExitBadInput;
    }
    AutoParallelOptions auto_options;
    auto_options.compile = options;
    auto_options.ignore_hints = flags.GetBool("ignore-hints");
    auto_options.sim.transport = transport_name;
    auto_options.sim.host_cores = AvailableCpuCores();
    StatusOr<int64_t> seconds = flags.GetInt("search-seconds", 1, 86400);
    if (!seconds.ok()) return Fail(kExitBadInput, seconds.status());
    auto_options.time_budget_seconds = static_cast<double>(*seconds);
    StatusOr<int64_t> margin = flags.GetInt("pipeline-margin", 0, 100);
    if (!margin.ok()) return Fail(kExitBadInput, margin.status());
    auto_options.pipeline_margin = static_cast<double>(*margin) / 100.0;
    if (flags.Has("memory-limit")) {
      StatusOr<int64_t> limit = ParseBytes(flags.Get("memory-limit"), "memory-limit");
      if (!limit.ok()) return Fail(kExitBadInput, limit.status());
      auto_options.memory_limit_bytes = *limit;
    }
    const std::string measure = flags.Get("measure");
    bool measured_any = false;
    if (measure == "true" || measure == "1") {
      auto_options.measure_missing = [&measured_any](const Plan& candidate,
                                                      Calibration* into) -> Status {
        profile::KernelProfileOptions kernel_options;
        for (const KernelCost& k : into->kernel()) kernel_options.known_keys.insert(k.key());
        profile::KernelProfileReport kernel_report;
        ASSIGN_OR_RETURN(std::vector<KernelCost> costs,
                         profile::ProfilePlanKernels(candidate, kernel_options, &kernel_report));
        for (KernelCost& k : costs) *into->add_kernel() = std::move(k);
        measured_any = measured_any || !costs.empty();
        return Status::OK();
      };
    }
    auto_options.verify = [](const Plan& candidate) { return VerifyPlan(candidate); };
    bool quiet = flags.GetBool("quiet");
    auto_options.log = [quiet](const std::string& line) {
      if (!quiet) std::fprintf(stderr, "oflite compile: %s\n", line.c_str());
    };
    StatusOr<AutoParallelResult> chosen = ChooseLayout(*job, *cluster, calibration, auto_options);
    if (!chosen.ok()) {
      return Fail(kExitBadInput, chosen.status().WithContext("job '" + flags.Get("job") + "'"));
    }
    chosen->plan.mutable_auto_parallel()->set_calibration(calibration_path + " (" +
                                                          calibration.host() + ")");
    if (measured_any) {
      Status wrote = WriteTextProto(calibration_path, chosen->calibration);
      if (!wrote.ok()) return Fail(kExitFailure, wrote.WithContext("calibration"));
      if (!quiet) {
        std::printf("added the kernels the calibration lacked to %s (%d kernels now)\n",
                    calibration_path.c_str(), chosen->calibration.kernel_size());
      }
    }
    if (!quiet) PrintChoice(chosen->plan.auto_parallel());
    plan = std::move(chosen->plan);
  } else {
    for (const char* name : {"memory-limit", "ignore-hints"}) {
      if (flags.Has(name)) {
        std::fprintf(stderr, "oflite compile: flag '--%s' needs --auto-parallel\n", name);
        return kExitBadInput;
      }
    }
    plan = CompileNodePlan(*job, *cluster, options);
  }
  if (!plan.ok()) {
    return Fail(kExitBadInput, plan.status().WithContext("job '" + flags.Get("job") + "'"));
  }
  Status saved = SavePlan(output, *plan);
  if (!saved.ok()) return Fail(kExitFailure, saved);
  if (!flags.GetBool("quiet")) {
    compiler::PlanSummary summary = compiler::Summarize(*plan);
    std::printf("wrote %s: %d machine(s), %d actor(s), %d register(s), %zu cross-machine edge(s)\n",
                output.c_str(), plan->machine_size(), summary.actor_count, summary.regst_count,
                summary.cross_machine_edges.size());
  }
  return kExitOk;
}

}  // namespace cli
}  // namespace oflite
