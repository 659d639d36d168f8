#include "oneflow_lite/comm/control/connect.h"

namespace oflite {
namespace comm {
namespace control {
namespace {

std::string EndpointKey(const std::string& scope, int from, int to) {
  return scope + "/endpoint/" + std::to_string(from) + "->" + std::to_string(to);
}

}  // namespace

Status ConnectTransport(Transport* transport, ControlClient* control,
                        const std::string& scope,
                        std::chrono::milliseconds timeout) {
  const int rank = transport->rank();
  const int world = transport->world_size();
  const Deadline deadline = DeadlineAfter(timeout);
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank) continue;
    ASSIGN_OR_RETURN(std::string endpoint, transport->LocalEndpoint(peer));
    RETURN_IF_ERROR(control->Put(EndpointKey(scope, rank, peer), endpoint));
  }
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank) continue;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    ASSIGN_OR_RETURN(std::string endpoint,
                     control->Get(EndpointKey(scope, peer, rank),
                                  std::max(left, std::chrono::milliseconds(0)),
                                  peer));
    Status connected = transport->Connect(peer, endpoint, deadline);
    if (!connected.ok()) {
      return connected.WithContext("rank " + std::to_string(rank) +
                                   " connecting to rank " + std::to_string(peer));
    }
  }
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - Clock::now());
  return control->Barrier(scope + "/connected",
                          std::max(left, std::chrono::milliseconds(0)));
}

Status PublishRemoteKey(ControlClient* control, const std::string& name,
                        const RemoteKey& key) {
  return control->Put(name + "@" + std::to_string(control->rank()),
                      key.Encode());
}

StatusOr<RemoteKey> FetchRemoteKey(ControlClient* control,
                                   const std::string& name, int owner_rank,
                                   std::chrono::milliseconds timeout) {
  ASSIGN_OR_RETURN(std::string bytes,
                   control->Get(name + "@" + std::to_string(owner_rank),
                                timeout, owner_rank));
  auto key = RemoteKey::Decode(bytes);
  if (!key.ok()) {
    return key.status().WithContext("memory key '" + name + "' of rank " +
                                    std::to_string(owner_rank));
  }
  return key;
}

}  // namespace control
}  // namespace comm
}  // namespace oflite
