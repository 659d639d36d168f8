#include "oneflow_lite/session/node_session.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>

#include "oneflow_lite/comm/builtin_providers.h"
#include "oneflow_lite/comm/launch/cpu_binding.h"
#include "oneflow_lite/comm/launch/host_share.h"
#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/kernels/cpu/cpu_library.h"
#include "oneflow_lite/plan/plan_verifier.h"
#include "oneflow_lite/session/exit_codes.h"

namespace oflite {
namespace session {
namespace {

// The failure the session attributes the end of this rank's run to. A run
// that failed with UNAVAILABLE (a connection to a peer lost) may see the
// connection's sticky error a moment before the transport reports the loss
// to the session, so then this waits up to 500 ms for that report: the exit
// code names the lost peer (4) instead of blaming this rank (1). Returns at
// once for any other status, or with rank -1 when nothing is attributed.
JobFailure AttributeFailure(const MultiMachineSession* session, const Status& status, Env* env) {
  if (session == nullptr) return JobFailure();
  JobFailure failure = session->failure();
  if (failure.rank >= 0 || status.code() != StatusCode::kUnavailable) return failure;
  const int64_t give_up_us = env->NowMicros() + 500 * 1000;
  while (failure.rank < 0 && env->NowMicros() < give_up_us) {
    env->SleepForMicroseconds(2000);
    failure = session->failure();
  }
  return failure;
}

// Stops peers' messages reaching a runtime's bus before the runtime goes.
class DetachOnExit {
 public:
  explicit DetachOnExit(MultiMachineSession* session) : session_(session) {}
  ~DetachOnExit() {
    if (session_ != nullptr) session_->Detach();
  }

 private:
  MultiMachineSession* session_;
};

}  // namespace

StatusOr<Plan> LoadVerifiedPlan(const std::string& path) {
  ASSIGN_OR_RETURN(Plan plan, LoadPlan(path));
  Status verified = VerifyPlan(plan);
  if (!verified.ok()) return verified.WithContext("plan '" + path + "'");
  return plan;
}

int ReportFailure(const std::string& command, const Status& status, int code) {
  std::fprintf(stderr, "%s: %s\n", command.c_str(), status.ToString().c_str());
  std::fflush(stderr);
  return code;
}

int ReportStartFailure(const std::string& command, const Status& status) {
  const bool refused = status.code() == StatusCode::kPermissionDenied;
  return ReportFailure(command, status, refused ? cli::kExitBadInput : cli::kExitFailure);
}

StatusOr<std::unique_ptr<NodeSession>> NodeSession::Start(const Plan& plan,
                                                           const NodeOptions& options) {
  if (!options.cpu_kernels.empty()) {
    ASSIGN_OR_RETURN(CpuKernelLibrary library,
                     ParseCpuKernelLibrary(options.cpu_kernels, "--cpu-kernels"));
    SetCpuKernelLibrary(library);  // read when the kernels are created
  }
  std::unique_ptr<NodeSession> node(new NodeSession(options));
  if (plan.machine_size() <= 1) return node;
  std::string binding;
  if (!options.bind_cpus.empty()) {
    // Before any runtime thread exists, so every thread inherits it.
    RETURN_IF_ERROR(comm::BindToCpus(0, options.bind_cpus));
    binding = "; local rank " + std::to_string(options.local_rank) + " on CPUs " +
              comm::DescribeCpus(options.bind_cpus);
  }
  std::fprintf(stderr, "%s: %s%s\n", options.command.c_str(), options.placement.c_str(),
               binding.c_str());
  comm::BuiltinProviderOptions providers;
  providers.listen_host = options.listen_host;
  providers.job_token = options.job_token;
  providers.ibverbs = options.ibverbs;
  providers.ib_emulator = options.ib_emulator;
  providers.host_id = options.host_id;
  const std::string command = options.command;
  const int64_t rank = options.rank;
  providers.note = [command, rank](const std::string& note) {
    std::fprintf(stderr, "%s: rank %lld: %s\n", command.c_str(), static_cast<long long>(rank),
                 note.c_str());
  };
  StatusOr<comm::ProviderFactory> provider =
      comm::BuiltinProviders(providers).Find(options.comm);
  if (!provider.ok()) return provider.status().WithContext("--comm");
  MultiMachineOptions multi;
  multi.rank = rank;
  multi.master = options.master;
  multi.ring_timeout = options.ring_timeout;
  multi.refused_rank_grace = options.join_grace;
  multi.provider = *provider;
  multi.job_token = options.job_token;
  multi.listen_host = options.listen_host;
  multi.program = options.command;
  NodeSession* self = node.get();
  multi.on_fatal = [self](const JobFailure& failure) { self->ExitForJobFailure(failure); };
  multi.after_join = [self] { self->FreezeIfAsked("join"); };
  ASSIGN_OR_RETURN(node->multi_, MultiMachineSession::Start(plan, multi));
  node->ShareHost(plan);
  return node;
}

NodeSession::~NodeSession() = default;

void NodeSession::ShareHost(const Plan& plan) {
  comm::HostShareInput input;
  input.mode = options_.share_host;
  input.rank = static_cast<int>(options_.rank);
  input.allowed_cpus = comm::AllowedCpus();
  // Every rank takes part, --share-host off too, so none waits for a peer
  // that would not publish.
  StatusOr<std::vector<std::string>> keys = comm::ExchangeCpuShareKeys(
      multi_->control(), input.rank, plan.machine_size(),
      comm::CpuShareKey(options_.host_id, input.allowed_cpus), std::chrono::seconds(60));
  const std::string prefix = options_.command + ": rank " + std::to_string(options_.rank) + ": ";
  if (!keys.ok()) {
    // Only a lost peer or master makes this fail: the session's peer-loss
    // handling names it and sets the exit code (4), as for any other step,
    // so the job is not failed here with a code of its own.
    std::fprintf(stderr, "%shost share skipped: %s\n", prefix.c_str(),
                 keys.status().ToString().c_str());
    return;
  }
  input.keys = std::move(*keys);
  input.online_cpus = comm::MachineCpuCount();
  input.cores = comm::GroupIntoCores(input.allowed_cpus);
  if (options_.rank < plan.cluster().machine_size()) {
    const MachineProto& machine = plan.cluster().machine(input.rank);
    input.cpu_devices = machine.cpu_devices();
    input.requested_threads = machine.cpu_threads();
    input.requested_source = "the plan's cpu_threads";
  }
  if (options_.cpu_threads > 0) {
    input.requested_threads = options_.cpu_threads;
    input.requested_source = "--cpu-threads";
  }
  const comm::HostShare share = comm::DecideHostShare(input);
  // Before the runtime starts its threads; the transport's and OpenBLAS's
  // already run and are moved too.
  Status bound = comm::BindAllThreads(share.bind_cpus);
  if (!bound.ok()) {
    std::fprintf(stderr, "%s%s; not bound: %s\n", prefix.c_str(), share.description.c_str(),
                 bound.ToString().c_str());
    return;
  }
  host_share_threads_ = share.cpu_threads;
  std::fprintf(stderr, "%s%s\n", prefix.c_str(), share.description.c_str());
}

RuntimeOptions NodeSession::BaseRuntimeOptions() const {
  RuntimeOptions options;
  options.machine_id = options_.rank;
  options.watchdog_timeout = options_.watchdog;
  options.check_nan = options_.check_nan;
  options.graph_replay = options_.graph_replay;
  options.cpu_threads = options_.cpu_threads > 0 ? options_.cpu_threads : host_share_threads_;
  options.device.allow_tf32 = options_.allow_tf32;
  options.plan_verified = true;  // LoadVerifiedPlan, or the caller compiled it
  return options;
}

StatusOr<RunStats> NodeSession::RunPlan(const Plan& plan, RuntimeOptions options,
                                        const PlanRun& run) {
  MultiMachineSession* session = multi_.get();
  if (session != nullptr && runs_ > 0) RETURN_IF_ERROR(session->BeginRun(plan, run.name));
  ++runs_;
  if (session != nullptr) session->Configure(&options);
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
  DetachOnExit detach(session);  // destroyed before the runtime
  if (session != nullptr) RETURN_IF_ERROR(session->AfterCreate(runtime.get()));
  Status ran = runtime->Run();
  if (!ran.ok()) return run.context.empty() ? ran : ran.WithContext(run.context);
  if (run.before_finish) RETURN_IF_ERROR(run.before_finish());
  FreezeIfAsked(run.name + "-finish");
  if (session != nullptr) RETURN_IF_ERROR(session->Finish(run.last));
  return runtime->stats();
}

void NodeSession::FreezeIfAsked(const std::string& point) const {
  if (options_.freeze_at != point) return;
  std::fprintf(stderr, "%s: freezing at %s (--test-freeze-at)\n", options_.command.c_str(),
               point.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  std::raise(SIGSTOP);
}

bool NodeSession::ClaimFailureReport() { return !failure_reported_.exchange(true); }

int NodeSession::ReportJobFailure(const JobFailure& failure) {
  const bool peer = failure.rank != rank();
  if (peer) {
    std::fprintf(stderr, "%s: rank %lld: job ended by rank %d: %s\n", options_.command.c_str(),
                 static_cast<long long>(rank()), failure.rank, failure.reason.message().c_str());
  } else {
    std::fprintf(stderr, "%s: rank %lld: %s\n", options_.command.c_str(),
                 static_cast<long long>(rank()), failure.reason.ToString().c_str());
  }
  std::fflush(stderr);
  std::fflush(stdout);
  return peer ? cli::kExitPeerFailed : cli::kExitFailure;
}

void NodeSession::ExitForJobFailure(const JobFailure& failure) {
  if (!ClaimFailureReport()) {
    // The main thread printed the failure and is ending the process; if it
    // does not within 2 s (blocked on the lost peer), end it with its code.
    options_.env->SleepForMicroseconds(2 * 1000 * 1000);
    const int decided = decided_exit_code_.load();
    _exit(decided >= 0 ? decided : cli::kExitPeerFailed);
  }
  _exit(ReportJobFailure(failure));
}

int NodeSession::Fail(const Status& status, int code) {
  const JobFailure failure = AttributeFailure(multi_.get(), status, options_.env);
  if (!ClaimFailureReport()) {
    // The fatal handler is printing and will end the process.
    options_.env->SleepForMicroseconds(5 * 1000 * 1000);
    return failure.rank >= 0 && failure.rank != rank() ? cli::kExitPeerFailed : code;
  }
  if (failure.rank >= 0 && failure.rank != rank()) {
    decided_exit_code_ = cli::kExitPeerFailed;
    return ReportJobFailure(failure);
  }
  decided_exit_code_ = code;
  ReportFailure(options_.command, status, code);
  if (multi_ != nullptr) multi_->AbortPeers(status);
  return code;
}

void NodeSession::PrintStats() const {
  if (multi_ == nullptr || !options_.print_stats) return;
  std::printf("%s\n", multi_->StatsSummary().c_str());
  std::fflush(stdout);
}

}  // namespace session
}  // namespace oflite
