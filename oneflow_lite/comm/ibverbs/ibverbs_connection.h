// IbverbsConnection: the link to one peer over one RC queue pair.
//
// One QP carries everything: the caller's one-sided READs and WRITEs (split
// into work requests of at most `block_size` bytes), messages, credit
// updates, heartbeat probes and the goodbye. Work requests beyond the send
// queue's depth wait, in order, in a software queue.
//
// Messages. The peer owns a ring of `message_slots` slots of `slot_size`
// bytes registered for remote write; message k goes into slot k mod slots by
// an RDMA WRITE_WITH_IMM from our own registered send ring (the one copy
// SendMessage makes). The immediate (frame.h) also piggybacks how many of the
// peer's messages we have consumed. A sender holds one credit per free slot;
// a receiver runs the handler, then counts the slot consumed and, at the end
// of each completion batch, returns credits (piggybacked, or by a zero-length
// WRITE_WITH_IMM credit update). Every WRITE_WITH_IMM consumes one posted
// receive; a QP keeps 2 * slots + 4 receives posted (slots for messages, at
// most slots credit updates in flight, the goodbye), so a receive is always
// there and RNR never happens by design.
//
// Errors. The first error completion (or a goodbye, or the QP entering the
// error state) becomes the sticky status, naming both ranks and the verbs
// status; on_peer_error runs once; the QP is moved to ERR so that every
// outstanding work request comes back flushed and its callback runs with the
// sticky status. Liveness: once the peer has been seen, a zero-length RDMA
// WRITE probe every `heartbeat_interval` turns a dead peer into
// IBV_WC_RETRY_EXC_ERR within ack_timeout * (retry_count + 1).
//
// Threading: the Connection methods are thread-safe and never block (except
// Flush). On*/shutdown methods are for the owning transport's progress
// thread / destructor. Callbacks are never invoked under the lock: they are
// appended to a Deferred list that the transport runs.
#ifndef ONEFLOW_LITE_COMM_IBVERBS_IBVERBS_CONNECTION_H_
#define ONEFLOW_LITE_COMM_IBVERBS_IBVERBS_CONNECTION_H_

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "oneflow_lite/comm/ibverbs/frame.h"
#include "oneflow_lite/comm/ibverbs/verbs_device.h"
#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {
namespace ibverbs {

using Deferred = std::vector<std::function<void()>>;

// Fixed per transport; see IbverbsOptions for meanings and defaults.
struct ConnectionSettings {
  int rank = 0;
  int world_size = 1;
  size_t slot_size = 4096;
  int message_slots = 64;
  int max_backlog_messages = 1 << 16;
  int queue_depth = 128;
  size_t block_size = 1 << 20;
  uint8_t ack_timeout = 14;
  uint8_t retry_count = 7;
  uint8_t rnr_retry = 3;
  uint8_t min_rnr_timer = 12;
  std::chrono::milliseconds heartbeat_interval{1000};
  MessageHandler on_message;
  PeerErrorHandler on_peer_error;
};

class IbverbsConnection : public Connection {
 public:
  // Creates the QP (in INIT), registers both rings and posts the receives.
  static StatusOr<std::unique_ptr<IbverbsConnection>> Create(
      std::shared_ptr<VerbsDevice> device, ibv_cq* cq,
      const ConnectionSettings* settings, int peer_rank);
  ~IbverbsConnection() override;

  // Connection API (transport.h).
  int peer_rank() const override { return peer_rank_; }
  Status PostRead(const MemoryRegion& local, size_t local_offset,
                  const RemoteKey& remote, size_t remote_offset, size_t length,
                  Completion done) override;
  Status PostWrite(const MemoryRegion& local, size_t local_offset,
                   const RemoteKey& remote, size_t remote_offset,
                   size_t length, Completion done) override;
  Status SendMessage(const void* data, size_t size) override;
  // True: a message is an RDMA WRITE with immediate on the same RC queue
  // pair as the WRITEs, posted from one FIFO (pending_) in call order, and
  // an RC responder executes a QP's requests in order, so a message's
  // receive completion follows the data of every WRITE posted before it
  // (what NCCL's and UCX's RC transports rely on for "data, then flag").
  bool OrdersMessagesAfterWrites() const override { return true; }
  // One lock for the batch: the messages with credits are placed in the send
  // ring and posted as chains of work requests (one post_send, one doorbell,
  // per up to 16 of them).
  Status SendMessages(std::vector<std::string> messages) override;
  size_t max_message_size() const override;
  Status status() const override;
  Status Flush(Deadline deadline) override;

  // The bytes for the peer's Connect.
  const std::string& local_endpoint() const { return local_endpoint_; }
  // Moves the QP through RTR to RTS using the peer's endpoint bytes.
  Status Connect(const std::string& peer_endpoint);
  bool connected() const;
  uint32_t qp_num() const { return qp_->qp_num; }
  // After Connect: the negotiated path MTU and block size (for tests/logs).
  ibv_mtu path_mtu() const;
  size_t block_size() const;

  // Progress thread.
  void OnCompletion(const ibv_wc& wc, Deferred* deferred);
  void OnBatchEnd(Deferred* deferred);
  void OnTick(Clock::time_point now, Deferred* deferred);
  void Fail(const Status& status, Deferred* deferred);

  // Transport destructor, in this order.
  void BeginShutdown(Deferred* deferred);
  bool GoodbyeSettled() const;
  void EnterErrorState();
  bool Drained() const;
  void CancelRemaining(Deferred* deferred);

 private:
  enum class WorkKind { kOperation, kMessage, kCredit, kProbe, kGoodbye };
  struct Operation {
    Completion done;
    uint64_t id = 0;
    size_t remaining = 0;
    Status status;
  };
  struct SendWork {
    WorkKind kind = WorkKind::kOperation;
    ibv_wr_opcode opcode = IBV_WR_RDMA_WRITE;
    uint64_t local_address = 0;
    uint32_t length = 0;
    uint32_t lkey = 0;
    uint64_t remote_address = 0;
    uint32_t rkey = 0;
    std::shared_ptr<Operation> operation;
  };

  IbverbsConnection(std::shared_ptr<VerbsDevice> device, ibv_cq* cq,
                    const ConnectionSettings* settings, int peer_rank);
  Status Initialize();
  Status PostReceives(int count);
  Status PostTransfer(ibv_wr_opcode opcode, const MemoryRegion& local,
                      size_t local_offset, const RemoteKey& remote,
                      size_t remote_offset, size_t length, Completion done);
  // Posts pending_ in order, in chains of work requests, up to queue_depth.
  void PumpLocked(Deferred* deferred);
  // One work request for `work` (its sge in `sge`): a new wr_id, and the
  // credits it returns are counted as returned.
  void FillLocked(const SendWork& work, ibv_send_wr* wr, ibv_sge* sge);
  int PostLocked(const SendWork& work);
  void PlaceMessageLocked(const void* data, size_t size);
  void DrainBacklogLocked();
  void QueueCreditUpdateLocked();
  void CompleteWorkLocked(const SendWork& work, const Status& status,
                          Deferred* deferred);
  void FailLocked(const Status& status, bool report, Deferred* deferred);
  void OnReceiveLocked(const ibv_wc& wc, Deferred* deferred);
  void OnSendLocked(const ibv_wc& wc, Deferred* deferred);
  void ConsumeMessage();
  Status StatusFromCompletion(const ibv_wc& wc, const SendWork& work) const;
  std::string Name() const;

  const std::shared_ptr<VerbsDevice> device_;
  const verbs::VerbsApi& api_;
  ibv_cq* const cq_;
  const ConnectionSettings& settings_;
  const int peer_rank_;
  const int receive_depth_;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
  std::string local_endpoint_;
  std::unique_ptr<uint8_t[]> send_ring_;
  std::unique_ptr<uint8_t[]> receive_ring_;
  ibv_mr* send_ring_mr_ = nullptr;
  ibv_mr* receive_ring_mr_ = nullptr;
  uint64_t messages_arrived_ = 0;  // progress thread only

  mutable std::mutex mutex_;
  std::condition_variable progress_;  // flush waiters
  bool connected_ = false;
  bool closing_ = false;
  Status sticky_;
  bool error_reported_ = false;
  ibv_mtu path_mtu_ = IBV_MTU_256;
  size_t block_size_ = 0;
  RemoteKey remote_ring_;
  // Send queue.
  std::deque<SendWork> pending_;
  std::unordered_map<uint64_t, SendWork> in_flight_;
  uint64_t next_wr_id_ = 1;
  // One-sided operations not yet completed, by id (for Flush).
  std::set<uint64_t> incomplete_;
  uint64_t next_operation_id_ = 1;
  // Outgoing messages.
  uint64_t messages_sent_ = 0;   // placed in the ring
  uint64_t peer_consumed_ = 0;   // of ours, as last told by the peer
  std::deque<std::string> backlog_;
  // Incoming messages.
  uint64_t messages_consumed_ = 0;
  uint64_t credits_returned_ = 0;
  bool credit_update_queued_ = false;
  // Liveness and shutdown.
  bool peer_seen_ = false;
  bool probe_queued_ = false;
  Clock::time_point last_probe_{};
  bool goodbye_posted_ = false;
  bool goodbye_settled_ = false;
};

}  // namespace ibverbs
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_IBVERBS_IBVERBS_CONNECTION_H_
