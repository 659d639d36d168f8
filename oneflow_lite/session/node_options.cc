#include "oneflow_lite/session/node_options.h"

#include <cstdlib>
#include <map>

#include "oneflow_lite/comm/builtin_providers.h"
#include "oneflow_lite/comm/ibverbs/ibverbs_flags.h"
#include "oneflow_lite/comm/per_peer_transport.h"
#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/kernels/cpu/cpu_library.h"
#include "oneflow_lite/kernels/cpu/cpu_threads.h"

namespace oflite {
namespace session {
namespace {

std::string Or(const std::string& value, const std::string& fallback) {
  return value.empty() ? fallback : value;
}

// This node's rank: --rank, else RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK,
// else 0; it must name a machine of `plan`.
StatusOr<int64_t> ResolveRank(const cli::FlagSet& flags, const Plan& plan,
                              const Environment& env) {
  const int64_t machines = plan.machine_size() > 0 ? plan.machine_size() : 1;
  std::string source = "--rank";
  std::string text = flags.Get("rank");
  if (!flags.Has("rank")) {
    text.clear();
    for (const char* name : {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"}) {
      if (!env(name).empty()) {
        source = name;
        text = env(name);
        break;
      }
    }
    if (text.empty()) return 0;
  }
  StatusOr<int64_t> rank = cli::ParseInt64(text, source);
  if (!rank.ok() || *rank < 0 || *rank >= machines) {
    return InvalidArgumentError(source, " ", text, " is not a machine of the plan: it has ",
                                machines, " machine(s), ranks 0..", machines - 1);
  }
  return *rank;
}

// --comm names a registered provider; a multi-machine plan has a parseable
// --master.
Status CheckJoinFlags(const cli::FlagSet& flags, const Plan& plan, const NodeOptions& node) {
  StatusOr<comm::ProviderFactory> provider = comm::BuiltinProviders({}).Find(node.comm);
  if (!provider.ok()) return provider.status().WithContext("--comm");
  if (plan.machine_size() <= 1) return Status::OK();
  if (node.master.empty()) {
    return InvalidArgumentError("a ", plan.machine_size(),
                                "-machine plan needs --master HOST:PORT (rank 0 serves it)");
  }
  std::string host;
  int port = 0;
  Status parsed = comm::ParseHostPort(node.master, &host, &port);
  if (!parsed.ok()) return parsed.WithContext("--master");
  return Status::OK();
}

}  // namespace

Environment ProcessEnvironment() {
  return [](const std::string& name) {
    const char* value = std::getenv(name.c_str());
    return value != nullptr ? std::string(value) : std::string();
  };
}

std::vector<cli::FlagSpec> NodeFlagSpecs() {
  std::vector<cli::FlagSpec> specs = {
      {"rank", "this node's machine id (else RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK)"},
      {"master", "rendezvous address HOST:PORT (rank 0 serves it)"},
      {"comm", "transport: " + comm::BuiltinProviders({}).NameList(), false, "auto"},
      {"host_id", "host identity for --comm auto: peers with the same one use shm "
                  "(default: OFLITE_HOST_ID, else boot id/hostname/network namespace)"},
      {"ring-timeout-seconds", "bound of one cross-machine ring collective", false, "120"},
      {"join-grace-seconds", kJoinGraceHelp, false, "5"},
      {"watchdog-seconds", "abort when no actor progresses this long", false, "60"},
      {"cpu-threads", "threads per CPU device, BLAS included (default: the plan's "
                      "cluster cpu_threads; 0 there: cores / CPU devices)", false, "0"},
      {"cpu-kernels", "float32 convolutions and GEMMs: onednn or reference (im2col + "
                      "OpenBLAS; default: OFLITE_CPU_KERNELS, else onednn)"},
      {"check-nan", "fail on NaN/Inf in any kernel output", true, "false"},
      {"graph-replay", "replay captured device graphs of the plan's merged GPU tasks "
                       "(off: run them kernel by kernel; the NaN check turns it off)",
       true, "true"},
      {"stats", "print CommNet counters at exit (multi-machine)", true, "false"},
      {"test-freeze-at", "fault injection for tests: stop this rank (SIGSTOP) at a point "
                         "(train-finish or eval-finish)"}};
  // The ibverbs provider's --ib_* flags (comm/ibverbs/ibverbs_flags.h).
  for (const comm::ibverbs::IbverbsFlag& flag : comm::ibverbs::IbverbsFlags()) {
    specs.push_back({flag.name, flag.help, flag.is_bool, flag.default_value});
  }
  const comm::ibverbs::IbverbsFlag& emulator = comm::ibverbs::IbEmulatorFlag();
  specs.push_back({emulator.name, emulator.help, emulator.is_bool, emulator.default_value});
  return specs;
}

StatusOr<NodeOptions> ReadNodeOptions(const cli::FlagSet& flags, const Plan& plan,
                                      const Environment& env, const std::string& command) {
  NodeOptions node;
  node.command = command;
  ASSIGN_OR_RETURN(node.rank, ResolveRank(flags, plan, env));
  node.master = flags.Get("master");
  node.comm = flags.Get("comm");
  node.listen_host = Or(env("OFLITE_HOST"), "127.0.0.1");
  node.job_token = env("OFLITE_JOB_TOKEN");
  node.host_id = Or(flags.Get("host_id"), Or(env("OFLITE_HOST_ID"), comm::DefaultHostIdentity()));
  RETURN_IF_ERROR(CheckJoinFlags(flags, plan, node));
  std::map<std::string, std::string> ib_values;
  for (const comm::ibverbs::IbverbsFlag& flag : comm::ibverbs::IbverbsFlags()) {
    ib_values[flag.name] = flags.Get(flag.name);
  }
  ASSIGN_OR_RETURN(node.ibverbs, comm::ibverbs::IbverbsOptionsFromFlags(ib_values));
  ASSIGN_OR_RETURN(node.ib_emulator, comm::ibverbs::IbEmulatorFromFlag(flags.Get("ib_emulator")));
  ASSIGN_OR_RETURN(node.ring_timeout,
                   flags.GetSeconds("ring-timeout-seconds", 1, cli::kMaxDurationSeconds));
  ASSIGN_OR_RETURN(node.join_grace,
                   flags.GetSeconds("join-grace-seconds", 1, cli::kMaxDurationSeconds));
  ASSIGN_OR_RETURN(node.watchdog,
                   flags.GetSeconds("watchdog-seconds", 1, cli::kMaxDurationSeconds));
  ASSIGN_OR_RETURN(const int64_t cpu_threads, flags.GetInt("cpu-threads", 0, kMaxCpuThreads));
  node.cpu_threads = static_cast<int>(cpu_threads);
  if (flags.Has("cpu-kernels")) {
    RETURN_IF_ERROR(ParseCpuKernelLibrary(flags.Get("cpu-kernels"), "--cpu-kernels").status());
    node.cpu_kernels = flags.Get("cpu-kernels");
  }
  node.check_nan = flags.GetBool("check-nan");
  node.graph_replay = flags.GetBool("graph-replay");
  node.print_stats = flags.GetBool("stats");
  node.allow_tf32 = env("OFLITE_CUDA_ALLOW_TF32") == "1";
  node.freeze_at = flags.Get("test-freeze-at");
  if (!node.freeze_at.empty() && node.freeze_at != "train-finish" &&
      node.freeze_at != "eval-finish") {
    return InvalidArgumentError("--test-freeze-at '", node.freeze_at,
                                "' is not a point (train-finish or eval-finish)");
  }
  if (plan.machine_size() > 1 && node.job_token.empty()) {
    return InvalidArgumentError(
        "OFLITE_JOB_TOKEN is not set: every rank of a ", plan.machine_size(),
        "-machine job needs the job's token (`oflite launch` sets it; by hand, export the same "
        "random string on every rank)");
  }
  return node;
}

}  // namespace session
}  // namespace oflite
