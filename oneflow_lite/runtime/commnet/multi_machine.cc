#include "oneflow_lite/runtime/commnet/multi_machine.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <unistd.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "oneflow_lite/comm/ibverbs/ibverbs_transport.h"
#include "oneflow_lite/comm/tcp/tcp_transport.h"
#include "oneflow_lite/runtime/commnet/commnet_actors.h"

namespace oflite {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

StatusOr<std::unique_ptr<comm::Transport>> MakeTcp(const comm::TransportOptions& options) {
  comm::tcp::TcpOptions tcp;
  tcp.listen_host = EnvOr("OFLITE_HOST", "127.0.0.1");
  tcp.job_token = EnvOr("OFLITE_JOB_TOKEN", "");
  return comm::tcp::CreateTcpTransport(options, tcp);
}

// 16 hex digits of FNV-1a over the plan's deterministic serialization.
std::string PlanFingerprint(const Plan& plan) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    plan.SerializeToCodedStream(&coded);
  }
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace

StatusOr<std::unique_ptr<MultiMachineSession>> MultiMachineSession::Start(
    const Plan& plan, const MultiMachineOptions& options) {
  const int world = plan.machine_size();
  if (options.rank < 0 || options.rank >= world) {
    return InvalidArgumentError("rank ", options.rank, " is not a machine of the plan (",
                                world, " machines)");
  }
  if (options.master.empty()) {
    return InvalidArgumentError("a ", world, "-machine plan needs --master HOST:PORT");
  }
  if (options.comm != "tcp" && options.comm != "ibverbs" && options.comm != "auto") {
    return InvalidArgumentError("--comm=", options.comm, ": expected ibverbs, tcp or auto");
  }
  std::unique_ptr<MultiMachineSession> session(new MultiMachineSession());
  MultiMachineSession* self = session.get();
  session->options_ = options;
  ASSIGN_OR_RETURN(session->plan_, FindMachinePlan(plan, options.rank));
  comm::CommNetOptions net;
  net.rank = static_cast<int>(options.rank);
  net.world_size = world;
  net.master = options.master;
  net.connect_timeout = options.connect_timeout;
  net.peer_timeout = options.peer_timeout;
  // Registers travel as pushed chunks: larger slots, fewer messages.
  net.transport.message_slot_size = 64 << 10;
  net.on_peer_error = [self](int peer, const Status& status) {
    self->OnFatal("lost rank " + std::to_string(peer) + ": " + status.ToString());
  };
  const std::string comm = options.comm;
  const int64_t rank = options.rank;
  const comm::ibverbs::IbverbsOptions ibverbs = options.ibverbs;
  net.provider = [self, comm, rank, ibverbs](const comm::TransportOptions& transport)
      -> StatusOr<std::unique_ptr<comm::Transport>> {
    if (comm == "tcp") {
      self->provider_ = "tcp";
      return MakeTcp(transport);
    }
    StatusOr<std::unique_ptr<comm::Transport>> verbs =
        comm::ibverbs::CreateIbverbsTransport(transport, ibverbs);
    if (verbs.ok() || comm == "ibverbs") {
      self->provider_ = "ibverbs";
      return verbs;
    }
    std::fprintf(stderr, "oflite run: rank %lld: --comm=auto: ibverbs unavailable (%s); using tcp\n",
                 static_cast<long long>(rank), verbs.status().ToString().c_str());
    self->provider_ = "tcp";
    return MakeTcp(transport);
  };
  if (options.provider) {
    net.provider = options.provider;
    session->provider_ = options.provider_name;
  }
  ASSIGN_OR_RETURN(session->net_, comm::CommNet::Start(net));
  session->abort_ = std::make_unique<AbortNotice>(
      session->net_->transport(), session->net_->router(),
      // A peer's failure ends this rank even when it waits at a final
      // barrier (finishing_ is not consulted): the job cannot complete.
      [self](int, const Status& reason) { self->ExitNaming(reason.message()); });
  std::fprintf(stderr, "oflite run: rank %lld of %d joined over %s\n",
               static_cast<long long>(rank), world, session->provider_.c_str());
  session->MakeRoute();
  return session;
}

void MultiMachineSession::MakeRoute() {
  route_ = std::make_unique<CommNetRoute>(
      net_.get(), [this](const Status& status) { OnFatal(status.ToString()); });
  route_->set_key_prefix(KeyPrefix());
  CollectiveActorOptions collectives;
  collectives.abort = abort_.get();
  collectives.ring_timeout = options_.ring_timeout;
  registry_ = MultiMachineActorRegistry(route_.get(), collectives);
}

std::string MultiMachineSession::BarrierName(const std::string& what) const {
  return run_name_.empty() ? what : run_name_ + "/" + what;
}

std::string MultiMachineSession::KeyPrefix() const {
  return "oflite/run/" + std::to_string(run_index_) + "-" + run_name_ + "/";
}

MultiMachineSession::~MultiMachineSession() {
  finishing_ = true;
  route_.reset();
  abort_.reset();
  net_.reset();
}

void MultiMachineSession::AbortPeers(const Status& status) {
  // The peers leave once they hear it; their going is not news here.
  finishing_ = true;
  if (abort_ != nullptr && !status.ok()) abort_->Broadcast(status);
}

void MultiMachineSession::OnFatal(const std::string& what) {
  if (finishing_) return;
  ExitNaming(what);
}

void MultiMachineSession::ExitNaming(const std::string& what) const {
  std::fprintf(stderr, "oflite run: rank %lld: %s\n", static_cast<long long>(options_.rank),
               what.c_str());
  std::fflush(stderr);
  std::fflush(stdout);
  _exit(1);
}

void MultiMachineSession::Configure(RuntimeOptions* options) {
  options->remote_route = route_.get();
  options->registry = &registry_;
}

Status MultiMachineSession::AfterCreate(Runtime* runtime) {
  const std::string who = Who();
  route_->Attach(runtime->bus(), runtime->regsts());
  RETURN_IF_ERROR(route_->RegisterStaticRegisters(*plan_).WithContext(who));
  RETURN_IF_ERROR(net_->control()
                      ->Barrier(BarrierName("actors-ready"), options_.connect_timeout)
                      .WithContext(who + " waiting for every rank's actors"));
  return route_->FetchStaticKeys(*plan_, options_.connect_timeout).WithContext(who);
}

void MultiMachineSession::Detach() { route_->Detach(); }

Status MultiMachineSession::Finish() {
  finishing_ = true;
  return net_->control()
      ->Barrier(BarrierName("run-done"), options_.connect_timeout)
      .WithContext(Who() + " waiting for every rank to finish" +
                   (run_name_.empty() ? "" : " " + run_name_));
}

Status MultiMachineSession::BeginRun(const Plan& plan, const std::string& name) {
  if (!finishing_) {
    return FailedPreconditionError(Who(), ": BeginRun('", name,
                                   "') before the previous run's Finish");
  }
  if (name.empty()) return InvalidArgumentError("BeginRun: a run needs a name");
  if (plan.machine_size() != net_->world_size()) {
    return InvalidArgumentError(Who(), ": the ", name, " plan has ", plan.machine_size(),
                                " machines, the job ", net_->world_size());
  }
  ASSIGN_OR_RETURN(const MachinePlan* part, FindMachinePlan(plan, options_.rank));
  retired_messages_ += route_->messages_sent();
  retired_bytes_ += route_->bytes_sent();
  retired_bounce_payloads_ += route_->bounce_payloads_sent();
  // The old route (its registered memory, its bounce-channel handlers) goes
  // before the new one installs its own handlers on the router.
  ++run_index_;
  run_name_ = name;
  route_.reset();
  MakeRoute();  // its keys under this run's prefix
  plan_ = part;
  finishing_ = false;
  const std::string fingerprint = PlanFingerprint(plan);
  const std::string key = KeyPrefix() + "plan";
  if (options_.rank == 0) return net_->control()->Put(key, fingerprint);
  StatusOr<std::string> expected =
      net_->control()->Get(key, options_.connect_timeout, /*publisher_rank=*/0);
  if (!expected.ok()) {
    return expected.status().WithContext(Who() + " waiting for rank 0's " + name + " plan");
  }
  if (*expected != fingerprint) {
    return FailedPreconditionError(Who(), ": its ", name, " plan (fingerprint ", fingerprint,
                                   ") differs from rank 0's (", *expected,
                                   "); every rank must run the same oflite on the same job");
  }
  return Status::OK();
}

StatusOr<std::vector<std::string>> MultiMachineSession::GatherToRoot(const std::string& key,
                                                                     const std::string& value) {
  const std::string prefix = KeyPrefix() + key + "/";
  RETURN_IF_ERROR(net_->control()
                      ->Put(prefix + std::to_string(options_.rank), value)
                      .WithContext(Who() + " publishing " + key));
  std::vector<std::string> values;
  if (options_.rank != 0) return values;
  for (int rank = 0; rank < net_->world_size(); ++rank) {
    StatusOr<std::string> got =
        net_->control()->Get(prefix + std::to_string(rank), options_.connect_timeout, rank);
    if (!got.ok()) return got.status().WithContext("rank 0 gathering " + key);
    values.push_back(std::move(*got));
  }
  return values;
}

std::string MultiMachineSession::StatsSummary() const {
  std::ostringstream os;
  os << "comm (" << provider_ << "): actor frames sent "
     << retired_messages_ + route_->messages_sent() << ", payloads through bounce buffers "
     << retired_bounce_payloads_ + route_->bounce_payloads_sent()
     << ", bytes pushed inside actor frames (collective fallback) "
     << retired_bytes_ + route_->bytes_sent() << "\n"
     << net_->stats()->Summary();
  return os.str();
}

}  // namespace oflite
