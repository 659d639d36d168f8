// Internal to the ibverbs provider: the Transport implementation behind
// CreateIbverbsTransport (ibverbs_transport.h has the contract). Exposed in
// this header only so that provider tests can reach connection details
// (negotiated MTU, block size, QP numbers).
#ifndef ONEFLOW_LITE_COMM_IBVERBS_IBVERBS_TRANSPORT_IMPL_H_
#define ONEFLOW_LITE_COMM_IBVERBS_IBVERBS_TRANSPORT_IMPL_H_

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "oneflow_lite/comm/ibverbs/ibverbs_connection.h"
#include "oneflow_lite/comm/ibverbs/ibverbs_transport.h"
#include "oneflow_lite/comm/ibverbs/verbs_device.h"

namespace oflite {
namespace comm {
namespace ibverbs {

class IbverbsTransport : public Transport {
 public:
  static StatusOr<std::unique_ptr<IbverbsTransport>> Create(
      const TransportOptions& options, const IbverbsOptions& ibverbs_options);
  ~IbverbsTransport() override;

  const char* provider_name() const override { return "ibverbs"; }
  int rank() const override { return settings_.rank; }
  int world_size() const override { return settings_.world_size; }
  StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(
      void* data, size_t size, uint32_t access) override;
  StatusOr<std::string> LocalEndpoint(int peer_rank) override;
  Status Connect(int peer_rank, const std::string& peer_endpoint,
                 Deadline deadline) override;
  StatusOr<Connection*> GetConnection(int peer_rank) override;

  // For tests: the connection object whether or not it is connected.
  IbverbsConnection* connection_for_test(int peer_rank);
  const VerbsDevice& device() const { return *device_; }

 private:
  IbverbsTransport(const TransportOptions& options,
                   const IbverbsOptions& ibverbs_options);
  Status Initialize();
  Status CheckPeer(int peer_rank) const;
  StatusOr<IbverbsConnection*> GetOrCreate(int peer_rank);
  void RunProgress();
  // Idle step with a completion channel: arms the CQ (and returns, so the
  // caller polls once more), or sleeps on the channel until an event or
  // `timeout`.
  void WaitForCompletion(std::chrono::milliseconds timeout);
  std::vector<IbverbsConnection*> Snapshot();
  void WaitUntil(const std::function<bool()>& condition,
                 std::chrono::milliseconds timeout);
  void Shutdown();

  ConnectionSettings settings_;
  const IbverbsOptions ibverbs_options_;
  std::shared_ptr<const verbs::VerbsApi> api_;
  std::shared_ptr<VerbsDevice> device_;
  ibv_cq* cq_ = nullptr;
  ibv_comp_channel* channel_ = nullptr;  // null: polling only
  unsigned int unacked_events_ = 0;      // progress thread only
  bool armed_ = false;                   // progress thread only

  std::mutex mutex_;  // guards the two maps
  std::map<int, std::unique_ptr<IbverbsConnection>> connections_;
  std::map<uint32_t, IbverbsConnection*> by_qp_num_;
  std::atomic<uint64_t> connections_version_{0};

  std::atomic<bool> stop_{false};
  std::thread progress_;
};

}  // namespace ibverbs
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_IBVERBS_IBVERBS_TRANSPORT_IMPL_H_
