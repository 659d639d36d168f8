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
#include <cstring>
#include <string>
#include <vector>

#include "oneflow_lite/api/node_plan.h"
#include "oneflow_lite/api/shard_optimizer.h"
#include "oneflow_lite/common/env.h"
#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/compiler/plan_summary.h"
#include "tools/oflite/commands.h"
#include "oneflow_lite/session/flags.h"

namespace oflite {
namespace cli {
namespace {

int Fail(int code, const Status& status) {
  std::fprintf(stderr, "oflite compile: %s\n", status.message().c_str());
  return code;
}

}  // namespace

int RunCompile(int argc, char** argv) {
  FlagSet flags("oflite compile", "--job JOB.pb --cluster CLUSTER.pbtxt -o PLAN.pb",
                {{"job", "the Job file written by a model program"},
                 {"cluster", "the cluster description (text ClusterProto)"},
                 {"o", "where to write the Plan"},
                 {"output", "same as -o"},
                 {"no_memory_reuse", "give every register its own memory", true},
                 {"fuse", "fuse bias_add -> relu chains into one kernel (docs/compiler.md)", true},
                 {"pipeline_depth", "regst_num on stage boundaries and cross-machine edges",
                  false, "2"},
                 {"exchange_max_bytes",
                  "partial-sum collectives of tensors of at most this many bytes (and at most 4x "
                  "this sent per rank) use the exchange all-reduce, larger ones the ring (0: "
                  "always the ring)",
                  false, std::to_string(compiler::CompileOptions().exchange_max_bytes)},
                 {"fuse_max_bytes",
                  "small partial-sum all-reduces across machines are fused into buckets of at "
                  "most this many bytes, one collective each (0: one collective per tensor)",
                  false, std::to_string(compiler::CompileOptions().fuse_max_bytes)},
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
  StatusOr<Plan> plan = CompileNodePlan(*job, *cluster, options);
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
