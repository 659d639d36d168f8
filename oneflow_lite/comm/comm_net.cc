#include "oneflow_lite/comm/comm_net.h"

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

StatusOr<std::unique_ptr<CommNet>> CommNet::Start(const CommNetOptions& options) {
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
    ASSIGN_OR_RETURN(net->server_, control::RendezvousServer::Start(server));
  }
  control::ControlClientOptions client;
  client.master = options.master;
  client.rank = options.rank;
  client.world_size = options.world_size;
  client.job_token = token;
  client.connect_timeout = options.connect_timeout;
  ASSIGN_OR_RETURN(net->control_, control::ControlClient::Connect(client));

  TransportOptions transport = options.transport;
  transport.rank = options.rank;
  transport.world_size = options.world_size;
  transport.peer_timeout = options.peer_timeout;
  transport.on_message = net->router_.AsHandler();
  transport.on_peer_error = options.on_peer_error;
  if (options.provider) {
    ASSIGN_OR_RETURN(net->transport_, options.provider(transport));
  } else {
    tcp::TcpOptions tcp_options;
    tcp_options.listen_host = options.listen_host;
    tcp_options.job_token = token;
    ASSIGN_OR_RETURN(net->transport_, tcp::CreateTcpTransport(transport, tcp_options));
  }
  RETURN_IF_ERROR(control::ConnectTransport(net->transport_.get(), net->control_.get(),
                                            "commnet", options.connect_timeout));
  ASSIGN_OR_RETURN(net->pool_, RegisteredPool::Create(net->transport_.get(), options.pool,
                                                      &net->stats_.pool));
  return net;
}

}  // namespace comm
}  // namespace oflite
