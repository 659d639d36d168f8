// CommNet for one process of a job: the bundle the runtime and `oflite run`
// start with. Start() (rank 0 first starts the rendezvous server at
// `master`) joins the control plane with the job token, creates the
// transport (tcp unless a provider factory is given, e.g. one from a
// ProviderRegistry, provider_registry.h), connects every peer
// through the rendezvous, and sets up a message router, a registered pool
// and the strategy counters. Everything is owned by the CommNet and torn
// down in dependency order by its destructor.
//
// Actor messages: pick a router channel (kActorChannel) and
// router()->SetHandler(...) before peers send (early messages are parked).
// Blocking: Start blocks up to options.connect_timeout and fails naming the
// rank that did not arrive. Accessors are thread-safe to call; the objects
// they return follow their own contracts.
#ifndef ONEFLOW_LITE_COMM_COMM_NET_H_
#define ONEFLOW_LITE_COMM_COMM_NET_H_

#include <functional>
#include <memory>
#include <string>

#include "oneflow_lite/comm/control/control_client.h"
#include "oneflow_lite/comm/control/rendezvous_server.h"
#include "oneflow_lite/comm/memory/counters.h"
#include "oneflow_lite/comm/memory/registered_pool.h"
#include "oneflow_lite/comm/message_router.h"
#include "oneflow_lite/comm/provider_registry.h"
#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {

struct CommNetOptions {
  int rank = 0;
  int world_size = 1;
  std::string master;     // HOST:PORT of rank 0's rendezvous
  // Required: every connection presents it. Nothing here reads the
  // environment; the CLI passes OFLITE_JOB_TOKEN / OFLITE_HOST in.
  std::string job_token;
  std::string listen_host = "127.0.0.1";  // the default tcp provider's address
  std::chrono::milliseconds connect_timeout{60000};
  std::chrono::milliseconds peer_timeout{10000};
  // Rank 0 only: how long a wrong-token JOIN claiming a missing rank waits
  // for the genuine one (control::RendezvousOptions::refused_rank_grace).
  std::chrono::milliseconds refused_rank_grace{5000};
  TransportOptions transport;  // ring geometry etc.; rank/world/handlers set by Start
  RegisteredPoolOptions pool;
  ProviderFactory provider;  // empty: the TCP provider
  PeerErrorHandler on_peer_error;
  // Fault injection for tests: called after this rank joined the control
  // plane, before it publishes its endpoints. Empty in production.
  std::function<void()> after_join;
};

// Router channels reserved by CommNet users.
constexpr uint32_t kActorChannel = 0x10;
constexpr uint32_t kCollectiveChannel = 0x100;

class CommNet {
 public:
  // Joins the job: the rendezvous (rank 0 serves it; ranks that go silent
  // are declared lost after peer_timeout plus a heartbeat), the control
  // client, the transport's connections. On failure `failed_peer` (may be
  // null) is set to the rank to blame (one that left, went silent, never
  // published or could not be connected, 0 when the master is gone), or -1
  // when this rank's own setup failed or no single peer is known.
  static StatusOr<std::unique_ptr<CommNet>> Start(const CommNetOptions& options,
                                                  int* failed_peer = nullptr);
  ~CommNet();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  Transport* transport() { return transport_.get(); }
  control::ControlClient* control() { return control_.get(); }
  MessageRouter* router() { return &router_; }
  RegisteredPool* pool() { return pool_.get(); }
  CommStats* stats() { return &stats_; }

 private:
  CommNet() = default;

  int rank_ = 0;
  int world_size_ = 1;
  MessageRouter router_;  // outlives the transport that calls into it
  CommStats stats_;
  std::unique_ptr<control::RendezvousServer> server_;
  std::unique_ptr<control::ControlClient> control_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<RegisteredPool> pool_;
};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_COMM_NET_H_
