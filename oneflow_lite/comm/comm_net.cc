#include "oneflow_lite/comm/comm_net.h"

#include <memory>
#include <mutex>
#include <thread>

#include "oneflow_lite/comm/control/connect.h"
#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/comm/tcp/tcp_transport.h"

namespace oflite {
namespace comm {
CommNet::~CommNet() {
  pool_.reset();       // deregisters its blocks
  transport_.reset();  // completes outstanding operations
  control_.reset();
  server_.reset();
}

namespace {

// The first peer whose connection failed while the transport was coming up.
struct FirstPeerError {
  std::mutex mutex;
  int peer = -1;
  int Get() {
    std::lock_guard<std::mutex> lock(mutex);
    return peer;
  }
};

// How long a failed join waits for the transport to report the peer behind
// it (e.g. a barrier failed because a rank died after connecting).
constexpr std::chrono::milliseconds kCulpritGrace{1000};
// Between a control client's heartbeats (control_client.h).
constexpr std::chrono::milliseconds kHeartbeatInterval{1000};

}  // namespace

StatusOr<std::unique_ptr<CommNet>> CommNet::Start(const CommNetOptions& options,
                                                  int* failed_peer) {
  int ignored = -1;
  if (failed_peer == nullptr) failed_peer = &ignored;
  *failed_peer = -1;
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgumentError("rank ", options.rank, " outside a world of ",
                                options.world_size);
  }
  const std::string& token = options.job_token;
  if (token.empty()) {
    return InvalidArgumentError("rank ", options.rank,
                                ": no job token (CommNetOptions::job_token; oflite reads "
                                "OFLITE_JOB_TOKEN)");
  }
  std::unique_ptr<CommNet> net(new CommNet());
  net->rank_ = options.rank;
  net->world_size_ = options.world_size;
  if (options.rank == 0) {
    control::RendezvousOptions server;
    RETURN_IF_ERROR(ParseHostPort(options.master, &server.host, &server.port));
    server.host = "0.0.0.0";  // reachable on every interface of rank 0
    server.world_size = options.world_size;
    server.job_token = token;
    server.refused_rank_grace = options.refused_rank_grace;
    server.silent_rank_timeout = options.peer_timeout + kHeartbeatInterval;
    ASSIGN_OR_RETURN(net->server_, control::RendezvousServer::Start(server));
  }
  control::ControlClientOptions client;
  client.master = options.master;
  client.rank = options.rank;
  client.world_size = options.world_size;
  client.job_token = token;
  client.connect_timeout = options.connect_timeout;
  client.heartbeat_interval = kHeartbeatInterval;
  {
    StatusOr<std::unique_ptr<control::ControlClient>> control =
        control::ControlClient::Connect(client);
    if (!control.ok()) {
      // Refused (a wrong token) is this rank's fault; otherwise the master
      // never answered.
      if (control.status().code() != StatusCode::kPermissionDenied && options.rank != 0) {
        *failed_peer = 0;
      }
      return control.status();
    }
    net->control_ = std::move(*control);
  }
  if (options.after_join) options.after_join();

  TransportOptions transport = options.transport;
  transport.rank = options.rank;
  transport.world_size = options.world_size;
  transport.peer_timeout = options.peer_timeout;
  transport.on_message = net->router_.AsHandler();
  auto first_error = std::make_shared<FirstPeerError>();
  transport.on_peer_error = [first_error, forward = options.on_peer_error](
                                int peer, const Status& status) {
    {
      std::lock_guard<std::mutex> lock(first_error->mutex);
      if (first_error->peer < 0) first_error->peer = peer;
    }
    if (forward) forward(peer, status);
  };
  if (options.provider) {
    ASSIGN_OR_RETURN(net->transport_, options.provider(transport));
  } else {
    tcp::TcpOptions tcp_options;
    tcp_options.listen_host = options.listen_host;
    tcp_options.job_token = token;
    ASSIGN_OR_RETURN(net->transport_, tcp::CreateTcpTransport(transport, tcp_options));
  }
  Status connected = control::ConnectTransport(net->transport_.get(), net->control_.get(),
                                               "commnet", options.connect_timeout,
                                               failed_peer);
  if (!connected.ok()) {
    const Deadline give_up = DeadlineAfter(kCulpritGrace);
    while (*failed_peer < 0 && first_error->Get() < 0 && Clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (*failed_peer < 0) *failed_peer = first_error->Get();
    if (*failed_peer < 0 && net->control_->master_lost()) *failed_peer = 0;
    return connected;
  }
  ASSIGN_OR_RETURN(net->pool_, RegisteredPool::Create(net->transport_.get(), options.pool,
                                                      &net->stats_.pool));
  return net;
}

}  // namespace comm
}  // namespace oflite
