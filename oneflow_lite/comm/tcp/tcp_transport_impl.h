// Internal: the TCP provider's Transport (see tcp_transport.h for the
// contract). Exposed to tcp_connection.cc only.
#ifndef ONEFLOW_LITE_COMM_TCP_TCP_TRANSPORT_IMPL_H_
#define ONEFLOW_LITE_COMM_TCP_TCP_TRANSPORT_IMPL_H_

#include <sys/epoll.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/comm/tcp/frame.h"
#include "oneflow_lite/comm/tcp/tcp_region_table.h"
#include "oneflow_lite/comm/tcp/tcp_connection.h"
#include "oneflow_lite/comm/caller_progress.h"
#include "oneflow_lite/comm/tcp/tcp_transport.h"

namespace oflite {
namespace comm {
namespace tcp {

class TcpTransportImpl : public Transport {
 public:
  TcpTransportImpl(const TransportOptions& options, const TcpOptions& tcp);
  ~TcpTransportImpl() override;

  Status Start();

  const char* provider_name() const override { return "tcp"; }
  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(
      void* data, size_t size, uint32_t access) override;
  StatusOr<std::string> LocalEndpoint(int peer_rank) override;
  Status Connect(int peer_rank, const std::string& peer_endpoint,
                 Deadline deadline) override;
  StatusOr<Connection*> GetConnection(int peer_rank) override;
  // Caller progress (TcpOptions::caller_progress): epoll without waiting
  // and the events of established connections handled on the calling
  // thread, under progress_mutex_.
  bool Poll() override;
  void EndPolling() override;
  void BeginBlockingWait() override;
  void EndBlockingWait() override;

  // For connections.
  const TransportOptions& options() const { return options_; }
  const TcpOptions& tcp_options() const { return tcp_; }
  // Connections reading a trickling payload behind a raised SO_RCVLOWAT
  // (TcpOptions::receive_low_water): +1 when one raises it, -1 when it
  // lowers it back. While any does, the progress thread blocks after its
  // events instead of busy-polling: the next bytes are about a millisecond
  // away by construction.
  void NoteTrickling(int delta) { trickling_.fetch_add(delta, std::memory_order_relaxed); }
  const FrameLimits& limits() const { return limits_; }
  RegionTable* regions() { return regions_.get(); }
  std::string HelloPayload() const;
  // Validates an accepted peer's HELLO and binds the connection to its rank.
  Status AcceptHello(TcpConnection* connection, const Hello& hello);
  Status CheckPeerHello(const Hello& hello, int expected_rank) const;
  void SetWriteInterest(TcpConnection* connection, bool enabled);
  void OnConnectionFailed(TcpConnection* connection, int peer_rank,
                          const Status& status);
  void NotifyStateChange();

 private:
  void ProgressLoop();
  // Handles `count` events from epoll_wait; progress_mutex_ held. The
  // progress thread handles all; a caller (`from_caller`) only those of
  // established connections.
  struct Handled {
    bool accept_ready = false;  // the listener has connections to accept
    bool connections = false;   // a connection's event was handled
  };
  Handled HandleEvents(const epoll_event* events, int count, bool from_caller);
  // Whether a caller polled within kCallerQuiet of `now`.
  bool CallersPolling(Clock::time_point now) const;
  // Wakes a napping progress thread (wake_fd_).
  void WakeNap();
  // Sleeps on wake_fd_ until no caller polled for kCallerQuiet, EndPolling
  // rings, or `until`; returns the nap it planned (the liveness account's
  // expected time away).
  Clock::duration NapWhilePolled(Clock::time_point until);
  void AcceptAll();
  void PauseAccepting(Clock::time_point now);
  void ResumeAcceptingIfDue(Clock::time_point now);
  // Drops identified or failed entries from unidentified_, fails those past
  // the handshake timeout, and (with `make_room`) evicts the oldest until
  // one more fits under max_pending_handshakes. Progress thread.
  void PruneHandshakes(Clock::time_point now, bool make_room);
  // Frees unidentified connections that failed. Progress thread, when no
  // event still to be handled refers to them.
  void ReapRejected();
  StatusOr<int> Dial(const std::string& host, int port, int peer_rank,
                     Deadline deadline);
  Status WaitForAccepted(int peer_rank, Deadline deadline);
  TcpConnection* AddConnection(int fd, int peer_rank,
                               const std::string& address = "");

  const TransportOptions options_;
  const TcpOptions tcp_;
  FrameLimits limits_;
  std::shared_ptr<RegionTable> regions_;
  int listen_fd_ = -1;
  int listen_port_ = 0;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<int> trickling_{0};
  std::thread progress_thread_;
  // Serializes reading and handling (every handler and completion, the
  // ticks, accepting and reaping) between the progress thread and callers
  // of Poll; taken before mutex_ and any connection's lock.
  std::mutex progress_mutex_;
  // The last caller's Poll, the progress thread's nap and the blocking
  // waiters (caller_progress.h).
  CallerProgressGate gate_;

  // Progress thread only.
  std::unique_ptr<Acceptor> acceptor_;
  bool accept_paused_ = false;
  Clock::time_point accept_paused_until_;
  struct Unidentified {
    TcpConnection* connection;
    Clock::time_point accepted;
  };
  std::deque<Unidentified> unidentified_;  // accepted, no HELLO yet; oldest first

  // May be held while taking a connection's lock, never the other way.
  std::mutex mutex_;
  std::condition_variable changed_;
  // Every connection; a failed one stays as a tombstone once it was bound
  // to a rank, and is freed at once (ReapRejected) if it never was.
  std::vector<std::unique_ptr<TcpConnection>> connections_;
  std::map<int, TcpConnection*> peers_;  // bound by rank
  std::vector<TcpConnection*> rejected_;  // failed before identification
};

}  // namespace tcp
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_TCP_TCP_TRANSPORT_IMPL_H_
