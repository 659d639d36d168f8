// Internal: the shm provider's Transport (contract: shm_transport.h).
// Exposed to shm_connection.cc only.
#ifndef ONEFLOW_LITE_COMM_SHM_SHM_TRANSPORT_IMPL_H_
#define ONEFLOW_LITE_COMM_SHM_SHM_TRANSPORT_IMPL_H_

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "oneflow_lite/comm/caller_progress.h"
#include "oneflow_lite/comm/shm/shm_connection.h"
#include "oneflow_lite/comm/shm/shm_handshake.h"
#include "oneflow_lite/comm/shm/shm_region_table.h"
#include "oneflow_lite/comm/shm/shm_transport.h"

namespace oflite {
namespace comm {
namespace shm {

class ShmTransportImpl : public ShmTransport {
 public:
  ShmTransportImpl(const TransportOptions& options, const ShmOptions& shm);
  ~ShmTransportImpl() override;

  // Creates the listener, doorbell, region table and progress thread.
  Status Start();

  const char* provider_name() const override { return "shm"; }
  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* data, size_t size,
                                                         uint32_t access) override;
  StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemoryWithKey(void* data, size_t size,
                                                                uint32_t access,
                                                                uint32_t rkey) override;
  StatusOr<std::unique_ptr<SharedBlock>> AllocateShareable(size_t size) override;
  StatusOr<std::string> LocalEndpoint(int peer_rank) override;
  Status Connect(int peer_rank, const std::string& peer_endpoint, Deadline deadline) override;
  StatusOr<Connection*> GetConnection(int peer_rank) override;
  // Caller progress: one PollOnce (one-sided operations, every connection's
  // inbound ring and backlog) on the calling thread, if the progress mutex
  // is free. While callers poll, the progress thread naps (NapWhilePolled).
  bool Poll() override;
  void EndPolling() override;
  void BeginBlockingWait() override;
  void EndBlockingWait() override;

  // The live blocks of AllocateShareable, by address, so that a region
  // registered inside one names its memfd. Shared with the blocks, which
  // may outlive the transport. Thread-safe.
  class Blocks {
   public:
    void Add(const std::shared_ptr<SharedMapping>& memfd);
    void Remove(const SharedMapping* memfd);
    // The block holding [data, data + size), or null.
    std::shared_ptr<SharedMapping> Find(const void* data, size_t size);

   private:
    std::mutex mutex_;
    std::map<uintptr_t, std::weak_ptr<SharedMapping>> by_address_;
  };

  // For connections (any thread).
  const TransportOptions& options() const { return options_; }
  size_t inline_copy_bytes() const { return shm_.inline_copy_bytes; }
  void Enqueue(OneSidedOp op);
  void Wake();
  void ReportPeerError(int peer_rank, const Status& status);

 private:
  // A HELLO received by the listener, waiting for the Connect of its rank.
  struct Arrival {
    int fd = -1;
    Hello hello;
    std::vector<int> fds;
  };

  void ProgressLoop();
  // One pass over operations and connections; progress_mutex_ held.
  bool PollOnceLocked(Clock::time_point now);
  // Refreshes polled_ from connections_ if one was added; progress_mutex_ held.
  void RefreshPolledLocked();
  void SleepUntilWoken();
  // While a caller polled within kCallerQuiet: sleeps on the epoll set
  // (peer hang-ups, EndPolling's doorbell) in short naps, leaving the
  // rings, copies and backlogs to the callers' Polls. The `sleeping` words
  // stay down: peers ring no doorbell.
  void NapWhilePolled();
  bool CallersPolling(Clock::time_point now) const;
  // epoll_wait; a connection's hang-up is handled under progress_mutex_.
  void HandleEvents(int timeout_ms);
  bool RunOps();
  std::vector<ShmConnection*> Snapshot();
  StatusOr<ConnectionSetup> Dial(const Endpoint& peer, Deadline deadline);
  StatusOr<ConnectionSetup> Accept(const Endpoint& peer, Deadline deadline);
  Status ReceiveOneArrival(Deadline deadline);
  StatusOr<ConnectionSetup> FinishAccept(Arrival* arrival, const Endpoint& peer);
  Status AddConnection(ConnectionSetup setup);
  std::string PeerName(int peer_rank) const;

  const TransportOptions options_;
  const ShmOptions shm_;
  std::shared_ptr<LocalRegionTable> regions_;
  const std::shared_ptr<Blocks> blocks_ = std::make_shared<Blocks>();
  std::string socket_name_;
  uint64_t nonce_ = 0;
  int listen_fd_ = -1;
  int doorbell_fd_ = -1;
  int epoll_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> sleeping_{false};
  std::thread progress_thread_;

  // Whoever holds it drains the rings, runs the operations and their
  // callbacks: the progress thread (lock) or a caller in Poll (try_lock).
  std::mutex progress_mutex_;
  std::vector<ShmConnection*> polled_;  // guarded by progress_mutex_
  uint64_t polled_version_ = ~uint64_t{0};  // guarded by progress_mutex_
  // The last caller's Poll, the progress thread's nap (NapWhilePolled) and
  // the blocking waiters.
  CallerProgressGate gate_;

  std::mutex ops_mutex_;
  std::deque<OneSidedOp> ops_;
  std::atomic<size_t> ops_queued_{0};  // ops_.size(), read without the lock

  std::mutex accept_mutex_;          // one acceptor at a time
  std::map<int, Arrival> arrivals_;  // by claimed rank; guarded by accept_mutex_

  std::mutex mutex_;
  std::map<int, std::unique_ptr<ShmConnection>> connections_;
  std::atomic<uint64_t> connections_version_{0};
};

}  // namespace shm
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_SHM_SHM_TRANSPORT_IMPL_H_
