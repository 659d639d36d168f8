#include "oneflow_lite/session/node_options.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "oneflow_lite/comm/builtin_providers.h"
#include "oneflow_lite/comm/launch/cpu_binding.h"
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

// Where rank, world and master came from, resolved by precedence.
struct Placement {
  int64_t rank = 0;
  std::string rank_source;  // "" for the default 0
  std::string master;
  std::string master_source;
};

// --hostfile, else OFLITE_HOSTFILE: its name and contents ("" for none).
Status ReadHostfile(const cli::FlagSet& flags, const Environment& env, Env* files,
                    std::string* name, std::string* contents) {
  *name = flags.Has("hostfile") ? flags.Get("hostfile") : env("OFLITE_HOSTFILE");
  if (name->empty()) return Status::OK();
  const std::string what = flags.Has("hostfile") ? "--hostfile" : "OFLITE_HOSTFILE";
  StatusOr<std::string> read = files->ReadFileToString(*name, 1 << 20);
  if (!read.ok()) return read.status().WithContext(what + " '" + *name + "'");
  *contents = std::move(*read);
  return Status::OK();
}

// The rank (see the file comment); it must name a machine of `plan`.
StatusOr<Placement> ResolvePlacement(const cli::FlagSet& flags, const Plan& plan,
                                     const Environment& env, const LauncherPlacement& launcher) {
  const int64_t machines = plan.machine_size() > 0 ? plan.machine_size() : 1;
  Placement placement;
  std::string text;
  if (flags.Has("rank")) {
    placement.rank_source = "--rank";
    text = flags.Get("rank");
  } else if (!env("RANK").empty()) {
    placement.rank_source = "RANK";
    text = env("RANK");
  } else if (launcher.rank.given()) {
    placement.rank_source = launcher.rank.source;
    text = std::to_string(launcher.rank.value);
  }
  if (!placement.rank_source.empty()) {
    StatusOr<int64_t> rank = cli::ParseInt64(text, placement.rank_source);
    if (!rank.ok() || *rank < 0 || *rank >= machines) {
      return InvalidArgumentError(placement.rank_source, " ", text,
                                  " is not a machine of the plan: it has ", machines,
                                  " machine(s), ranks 0..", machines - 1);
    }
    placement.rank = *rank;
  }
  // The world the launcher started must be the plan's.
  LauncherValue world = launcher.world;
  if (!env("WORLD_SIZE").empty()) {
    ASSIGN_OR_RETURN(world.value, cli::ParseInt64(env("WORLD_SIZE"), "WORLD_SIZE"));
    world.source = "WORLD_SIZE";
  }
  if (world.given() && world.value != machines) {
    return InvalidArgumentError(world.source, "=", world.value, " tasks were started but the plan has ",
                                machines, " machine(s): start one task per machine (e.g. srun -n ",
                                machines, ", mpirun -np ", machines, ")");
  }
  if (flags.Has("master")) {
    placement.master = flags.Get("master");
    placement.master_source = "--master";
  } else if (!env("OFLITE_MASTER").empty()) {
    placement.master = env("OFLITE_MASTER");
    placement.master_source = "OFLITE_MASTER";
  } else if (!launcher.master_host.empty()) {
    placement.master = launcher.master_host + ":" + std::to_string(launcher.master_port);
    placement.master_source = launcher.master_host_source + ", port from " +
                              launcher.master_port_source;
  }
  return placement;
}

// "rank 1 of 4 from Slurm (SLURM_PROCID), master node01:23456 from ...".
std::string DescribePlacement(const Placement& placement, const LauncherPlacement& launcher,
                              int64_t machines) {
  std::string line = "rank " + std::to_string(placement.rank) + " of " +
                     std::to_string(machines) + " from ";
  if (placement.rank_source.empty()) {
    line += "the default";
  } else if (placement.rank_source == launcher.rank.source) {
    line += launcher.launcher + " (" + placement.rank_source + ")";
  } else {
    line += placement.rank_source;
  }
  if (!placement.master.empty()) {
    line += ", master " + placement.master + " from " + placement.master_source;
  }
  return line;
}

// The CPUs of local rank `local_rank` when the launcher gave one and did
// not bind (the rule of `oflite launch --bind auto`); empty otherwise.
std::vector<int> LauncherBinding(const LauncherPlacement& launcher) {
  if (!launcher.local_rank.given() || !launcher.local_size.given() || launcher.cpus_bound ||
      launcher.local_rank.value >= launcher.local_size.value) {
    return {};
  }
  // A mask smaller than the machine's is the launcher's (or the user's)
  // binding: keep it.
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online > 0 && static_cast<long>(comm::AllowedCpus().size()) < online) return {};
  return comm::CpusForLocalRank(comm::AllowedCores(), static_cast<int>(launcher.local_rank.value),
                                static_cast<int>(launcher.local_size.value), comm::BindPolicy::kAuto);
}

// --comm names a registered provider; a multi-machine plan has a parseable
// master.
Status CheckJoinFlags(const Plan& plan, const NodeOptions& node, const std::string& source) {
  StatusOr<comm::ProviderFactory> provider = comm::BuiltinProviders({}).Find(node.comm);
  if (!provider.ok()) return provider.status().WithContext("--comm");
  if (plan.machine_size() <= 1) return Status::OK();
  if (node.master.empty()) {
    return InvalidArgumentError(
        "a ", plan.machine_size(),
        "-machine plan needs --master HOST:PORT (rank 0 serves it), or OFLITE_MASTER, a Slurm "
        "step (SLURM_STEP_NODELIST), or --hostfile / OFLITE_HOSTFILE under mpirun");
  }
  std::string host;
  int port = 0;
  Status parsed = comm::ParseHostPort(node.master, &host, &port);
  if (!parsed.ok()) return parsed.WithContext(source);
  return Status::OK();
}

// The error of a multi-machine plan without OFLITE_JOB_TOKEN.
Status MissingTokenError(const Plan& plan, const std::string& launcher) {
  std::string how =
      "`oflite launch` sets it; by hand, export the same random string on every rank";
  if (launcher == "Slurm") {
    how = "export it in the batch script before srun, e.g. `export OFLITE_JOB_TOKEN=$(openssl "
          "rand -hex 16)`: srun passes the environment to every task";
  } else if (launcher == "OpenMPI") {
    how = "export it and pass it to every rank: `export OFLITE_JOB_TOKEN=$(openssl rand -hex "
          "16); mpirun -x OFLITE_JOB_TOKEN ...`";
  }
  return InvalidArgumentError("OFLITE_JOB_TOKEN is not set: every rank of a ",
                              plan.machine_size(),
                              "-machine job needs the job's token, so that no stray process "
                              "can join it (",
                              how, ")");
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
      {"master", "rendezvous address HOST:PORT (rank 0 serves it; default: OFLITE_MASTER, "
                 "else the Slurm step's first node, else the --hostfile's first host)"},
      {"hostfile", "an OpenMPI hostfile whose first host is the master under mpirun "
                   "(default: OFLITE_HOSTFILE; port " + std::to_string(kDefaultMasterPort) + ")"},
      {"comm", "transport: " + comm::BuiltinProviders({}).NameList(), false, "auto"},
      {"host_id", "host identity for --comm auto: peers with the same one use shm "
                  "(default: OFLITE_HOST_ID, else boot id/hostname/network namespace)"},
      {"ring-timeout-seconds", "bound of one cross-machine ring collective", false, "120"},
      {"join-grace-seconds", kJoinGraceHelp, false, "5"},
      {"watchdog-seconds", "abort when no actor progresses this long", false, "60"},
      {"cpu-threads", "threads per CPU device, BLAS included (default: the plan's "
                      "cluster cpu_threads; 0 there: cores / CPU devices)", false, "0"},
      {"share-host", "ranks started unbound on one host: auto (bind each to its share of the "
                     "cores when even, else limit threads), threads (compute threads = CPUs / "
                     "local ranks), bind, or off (default: OFLITE_SHARE_HOST, else auto)"},
      {"cpu-kernels", "float32 convolutions and GEMMs: onednn or reference (im2col + "
                      "OpenBLAS; default: OFLITE_CPU_KERNELS, else onednn)"},
      {"check-nan", "fail on NaN/Inf in any kernel output", true, "false"},
      {"graph-replay", "replay captured device graphs of the plan's merged GPU tasks "
                       "(off: run them kernel by kernel; the NaN check turns it off)",
       true, "true"},
      {"stats", "print CommNet counters at exit (multi-machine)", true, "false"},
      {"test-freeze-at", "fault injection for tests: stop this rank (SIGSTOP) at a point "
                         "(join: after joining the control plane, before publishing its endpoints; "
                         "train-finish or eval-finish)"}};
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
  std::string hostfile_name, hostfile_contents;
  RETURN_IF_ERROR(ReadHostfile(flags, env, node.env, &hostfile_name, &hostfile_contents));
  ASSIGN_OR_RETURN(const LauncherPlacement launcher,
                   ReadLauncherPlacement(env, hostfile_name, hostfile_contents));
  ASSIGN_OR_RETURN(const Placement placement, ResolvePlacement(flags, plan, env, launcher));
  node.rank = placement.rank;
  node.master = placement.master;
  node.placement = DescribePlacement(placement, launcher, std::max(1, plan.machine_size()));
  node.local_rank = launcher.local_rank.value;
  if (plan.machine_size() > 1) node.bind_cpus = LauncherBinding(launcher);
  node.comm = flags.Get("comm");
  node.listen_host = Or(env("OFLITE_HOST"), "127.0.0.1");
  node.job_token = env("OFLITE_JOB_TOKEN");
  node.host_id = Or(flags.Get("host_id"), Or(env("OFLITE_HOST_ID"), comm::DefaultHostIdentity()));
  RETURN_IF_ERROR(CheckJoinFlags(plan, node, placement.master_source));
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
  const bool share_flag = flags.Has("share-host");
  if (share_flag || !env("OFLITE_SHARE_HOST").empty()) {
    ASSIGN_OR_RETURN(node.share_host,
                     comm::ParseShareHostMode(share_flag ? flags.Get("share-host")
                                                         : env("OFLITE_SHARE_HOST"),
                                              share_flag ? "--share-host" : "OFLITE_SHARE_HOST"));
  }
  if (flags.Has("cpu-kernels")) {
    RETURN_IF_ERROR(ParseCpuKernelLibrary(flags.Get("cpu-kernels"), "--cpu-kernels").status());
    node.cpu_kernels = flags.Get("cpu-kernels");
  }
  node.check_nan = flags.GetBool("check-nan");
  node.graph_replay = flags.GetBool("graph-replay");
  node.print_stats = flags.GetBool("stats");
  node.allow_tf32 = env("OFLITE_CUDA_ALLOW_TF32") == "1";
  node.freeze_at = flags.Get("test-freeze-at");
  if (!node.freeze_at.empty() && node.freeze_at != "join" && node.freeze_at != "train-finish" &&
      node.freeze_at != "eval-finish") {
    return InvalidArgumentError("--test-freeze-at '", node.freeze_at,
                                "' is not a point (join, train-finish or eval-finish)");
  }
  if (plan.machine_size() > 1 && node.job_token.empty()) {
    return MissingTokenError(plan, launcher.launcher);
  }
  return node;
}

}  // namespace session
}  // namespace oflite
