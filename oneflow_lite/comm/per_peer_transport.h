// PerPeerTransport: one Transport (the `--comm auto` provider) that reaches
// each peer through the provider that suits it: the shm provider for peers
// on this host, a cross-host provider (ibverbs or tcp) for the others.
//
// How ranks learn that they share a host: every rank's endpoint (published
// through the control plane, transport.h "Connecting") starts with its host
// identity, a string the caller passes in (the CLI derives it from the
// kernel's boot id, the hostname and the network namespace, and lets
// --host_id override it for tests: DefaultHostIdentity below). Both sides of
// a pair compare the same two strings, so they always pick the same provider.
//
// Registered memory is registered with both providers under one key (the
// cross-host provider's rkey, which the shm provider adopts), so a
// RemoteKey serves every peer whatever carries it. Handlers in
// TransportOptions are shared: they may run on either provider's progress
// thread, for different peers at the same time.
//
// Thread-safety and lifetimes follow transport.h.
#ifndef ONEFLOW_LITE_COMM_PER_PEER_TRANSPORT_H_
#define ONEFLOW_LITE_COMM_PER_PEER_TRANSPORT_H_

#include <memory>
#include <string>

#include "oneflow_lite/comm/shm/shm_transport.h"
#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {

// Takes both providers (created with the same TransportOptions).
std::unique_ptr<Transport> CreatePerPeerTransport(const TransportOptions& options,
                                                  std::unique_ptr<shm::ShmTransport> local,
                                                  std::unique_ptr<Transport> remote,
                                                  const std::string& host_id);

// "<hostname>/<boot id>/<network namespace>": equal for two processes
// exactly when they can reach each other's abstract unix sockets and
// memory. Reads the kernel (/proc), never the environment.
std::string DefaultHostIdentity();

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_PER_PEER_TRANSPORT_H_
