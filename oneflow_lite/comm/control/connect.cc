#include "oneflow_lite/comm/control/connect.h"

#include <vector>

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
                        std::chrono::milliseconds timeout, int* culprit) {
  int ignored = -1;
  if (culprit == nullptr) culprit = &ignored;
  *culprit = -1;
  const int rank = transport->rank();
  const int world = transport->world_size();
  const Deadline deadline = DeadlineAfter(timeout);
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank) continue;
    ASSIGN_OR_RETURN(std::string endpoint, transport->LocalEndpoint(peer));
    Status put = control->Put(EndpointKey(scope, rank, peer), endpoint);
    if (!put.ok()) {
      if (control->master_lost()) *culprit = 0;
      return put;
    }
  }
  // Every endpoint first, then the connections: a rank that never
  // publishes (dead or frozen before it did) then fails every other rank
  // in this GET, through the master, instead of leaving some of them
  // waiting in a transport connect for a peer that never comes.
  std::vector<std::string> endpoints(world);
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank) continue;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    StatusOr<std::string> endpoint =
        control->Get(EndpointKey(scope, peer, rank),
                     std::max(left, std::chrono::milliseconds(0)), peer);
    if (!endpoint.ok()) {
      // Unavailable: the peer left or went silent; DeadlineExceeded: it
      // never published. Either way that peer is to blame, unless the
      // master itself is gone.
      const StatusCode code = endpoint.status().code();
      if (control->master_lost()) {
        *culprit = 0;
      } else if (code == StatusCode::kUnavailable || code == StatusCode::kDeadlineExceeded) {
        *culprit = peer;
      }
      return endpoint.status();
    }
    endpoints[peer] = std::move(*endpoint);
  }
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank) continue;
    Status connected = transport->Connect(peer, endpoints[peer], deadline);
    if (!connected.ok()) {
      *culprit = peer;
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
