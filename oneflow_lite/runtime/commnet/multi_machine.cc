#include "oneflow_lite/runtime/commnet/multi_machine.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <unistd.h>

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
  net.provider = [self, comm, rank](const comm::TransportOptions& transport)
      -> StatusOr<std::unique_ptr<comm::Transport>> {
    if (comm == "tcp") {
      self->provider_ = "tcp";
      return MakeTcp(transport);
    }
    StatusOr<std::unique_ptr<comm::Transport>> verbs =
        comm::ibverbs::CreateIbverbsTransport(transport, comm::ibverbs::IbverbsOptions());
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
  std::fprintf(stderr, "oflite run: rank %lld of %d joined over %s\n",
               static_cast<long long>(rank), world, session->provider_.c_str());
  session->route_ = std::make_unique<CommNetRoute>(
      session->net_.get(), [self](const Status& status) { self->OnFatal(status.ToString()); });
  session->registry_ = MultiMachineActorRegistry(session->route_.get());
  return session;
}

MultiMachineSession::~MultiMachineSession() {
  finishing_ = true;
  route_.reset();
  net_.reset();
}

void MultiMachineSession::OnFatal(const std::string& what) {
  if (finishing_) return;
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
  const std::string who = "rank " + std::to_string(options_.rank);
  route_->Attach(runtime->bus(), runtime->regsts());
  RETURN_IF_ERROR(route_->RegisterStaticRegisters(*plan_).WithContext(who));
  RETURN_IF_ERROR(net_->control()
                      ->Barrier("actors-ready", options_.connect_timeout)
                      .WithContext(who + " waiting for every rank's actors"));
  return route_->FetchStaticKeys(*plan_, options_.connect_timeout).WithContext(who);
}

void MultiMachineSession::Detach() { route_->Detach(); }

Status MultiMachineSession::Finish() {
  finishing_ = true;
  return net_->control()
      ->Barrier("run-done", options_.connect_timeout)
      .WithContext("rank " + std::to_string(options_.rank) + " waiting for every rank to finish");
}

std::string MultiMachineSession::StatsSummary() const {
  std::ostringstream os;
  os << "comm (" << provider_ << "): actor frames sent " << route_->messages_sent()
     << ", register bytes pushed " << route_->bytes_sent() << "\n"
     << net_->stats()->Summary();
  return os.str();
}

}  // namespace oflite
