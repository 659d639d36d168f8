#include "tools/oflite/session_setup.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <thread>

#include "oneflow_lite/comm/builtin_providers.h"
#include "oneflow_lite/comm/ibverbs/ibverbs_flags.h"
#include "oneflow_lite/comm/socket_util.h"

namespace oflite {
namespace cli {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

}  // namespace

StatusOr<int64_t> ResolveRank(const FlagSet& flags, const Plan& plan) {
  const int64_t machines = plan.machine_size() > 0 ? plan.machine_size() : 1;
  std::string source = "--rank";
  std::string text = flags.Get("rank");
  if (!flags.Has("rank")) {
    text.clear();
    for (const char* name : {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"}) {
      const char* value = std::getenv(name);
      if (value != nullptr && *value != '\0') {
        source = name;
        text = value;
        break;
      }
    }
    if (text.empty()) return 0;
  }
  StatusOr<int64_t> rank = ParseInt64(text, source);
  if (!rank.ok() || *rank < 0 || *rank >= machines) {
    return InvalidArgumentError(source, " ", text, " is not a machine of the plan: it has ",
                                machines, " machine(s), ranks 0..", machines - 1);
  }
  return *rank;
}

std::vector<FlagSpec> SessionFlagSpecs() {
  std::vector<FlagSpec> specs = {
      {"rank", "this node's machine id (else RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK)"},
      {"master", "rendezvous address HOST:PORT (rank 0 serves it)"},
      {"comm", "transport: " + comm::BuiltinProviders({}).NameList(), false, "auto"},
      {"ring-timeout-seconds", "bound of one cross-machine ring collective", false, "120"},
      {"join-grace-seconds", kJoinGraceHelp, false, "5"}};
  for (const comm::ibverbs::IbverbsFlag& flag : comm::ibverbs::IbverbsFlags()) {
    specs.push_back({flag.name, flag.help, flag.is_bool, flag.default_value});
  }
  const comm::ibverbs::IbverbsFlag& emulator = comm::ibverbs::IbEmulatorFlag();
  specs.push_back({emulator.name, emulator.help, emulator.is_bool, emulator.default_value});
  return specs;
}

Status CheckMultiMachineFlags(const FlagSet& flags, const Plan& plan) {
  StatusOr<comm::ProviderFactory> provider = comm::BuiltinProviders({}).Find(flags.Get("comm"));
  if (!provider.ok()) return provider.status().WithContext("--comm");
  RETURN_IF_ERROR(comm::ibverbs::IbEmulatorFromFlag(flags.Get("ib_emulator")).status());
  if (plan.machine_size() <= 1) return Status::OK();
  if (!flags.Has("master") || flags.Get("master").empty()) {
    return InvalidArgumentError("a ", plan.machine_size(),
                                "-machine plan needs --master HOST:PORT (rank 0 serves it)");
  }
  std::string host;
  int port = 0;
  Status parsed = comm::ParseHostPort(flags.Get("master"), &host, &port);
  if (!parsed.ok()) return parsed.WithContext("--master");
  return Status::OK();
}

StatusOr<SessionFlags> ReadSessionFlags(const FlagSet& flags, const Plan& plan) {
  SessionFlags read;
  ASSIGN_OR_RETURN(read.rank, ResolveRank(flags, plan));
  ASSIGN_OR_RETURN(read.ring_timeout,
                   flags.GetSeconds("ring-timeout-seconds", 1, kMaxDurationSeconds));
  ASSIGN_OR_RETURN(read.join_grace,
                   flags.GetSeconds("join-grace-seconds", 1, kMaxDurationSeconds));
  RETURN_IF_ERROR(CheckMultiMachineFlags(flags, plan));
  return read;
}

StatusOr<std::unique_ptr<MultiMachineSession>> StartSession(
    const FlagSet& flags, const Plan& plan, const SessionFlags& session_flags,
    const std::string& command, std::function<void(const JobFailure&)> on_fatal) {
  if (plan.machine_size() <= 1) return std::unique_ptr<MultiMachineSession>();
  std::map<std::string, std::string> ib_values;
  for (const comm::ibverbs::IbverbsFlag& flag : comm::ibverbs::IbverbsFlags()) {
    ib_values[flag.name] = flags.Get(flag.name);
  }
  ASSIGN_OR_RETURN(comm::ibverbs::IbverbsOptions ibverbs,
                   comm::ibverbs::IbverbsOptionsFromFlags(ib_values));
  comm::BuiltinProviderOptions providers;
  providers.listen_host = EnvOr("OFLITE_HOST", "127.0.0.1");
  providers.job_token = EnvOr("OFLITE_JOB_TOKEN", "");
  providers.ibverbs = ibverbs;
  providers.ib_emulator = flags.Get("ib_emulator");
  const int64_t rank = session_flags.rank;
  providers.note = [command, rank](const std::string& note) {
    std::fprintf(stderr, "%s: rank %lld: %s\n", command.c_str(), static_cast<long long>(rank),
                 note.c_str());
  };
  StatusOr<comm::ProviderFactory> provider =
      comm::BuiltinProviders(providers).Find(flags.Get("comm"));
  if (!provider.ok()) return provider.status().WithContext("--comm");
  MultiMachineOptions multi;
  multi.rank = rank;
  multi.master = flags.Get("master");
  multi.ring_timeout = session_flags.ring_timeout;
  multi.refused_rank_grace = session_flags.join_grace;
  multi.provider = *provider;
  multi.job_token = providers.job_token;
  multi.listen_host = providers.listen_host;
  multi.on_fatal = std::move(on_fatal);
  return MultiMachineSession::Start(plan, multi);
}

JobFailure AttributeFailure(const MultiMachineSession* session, const Status& status) {
  if (session == nullptr) return JobFailure();
  JobFailure failure = session->failure();
  if (failure.rank >= 0 || status.code() != StatusCode::kUnavailable) return failure;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (failure.rank < 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    failure = session->failure();
  }
  return failure;
}

}  // namespace cli
}  // namespace oflite
