// Internal: one shm connection (see shm_transport.h for the design). The
// caller-facing methods (Connection API) are thread-safe; the Poll*/Run*/Has*
// methods and SetSleeping belong to whoever holds the transport's progress
// mutex (its progress thread, or a caller inside Transport::Poll), so one
// thread at a time drains the rings and runs handlers. The idle polls
// (PollOutbound, PollInbound, HasOutboundWork) take no connection lock while
// there is nothing to do, so busy-polling never contends with senders.
#ifndef ONEFLOW_LITE_COMM_SHM_SHM_CONNECTION_H_
#define ONEFLOW_LITE_COMM_SHM_SHM_CONNECTION_H_

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "oneflow_lite/comm/recycled_slots.h"
#include "oneflow_lite/comm/shm/shm_region_table.h"
#include "oneflow_lite/comm/shm/shm_segment.h"
#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {
namespace shm {

class ShmTransportImpl;
class ShmConnection;

// A READ or WRITE waiting for the progress thread: to be copied there, or
// (`copied`) already copied by the posting thread, with `result`, waiting
// only for its completion to run.
struct OneSidedOp {
  ShmConnection* connection = nullptr;
  bool write = false;
  bool copied = false;
  Status result;
  uint8_t* local = nullptr;
  RemoteKey remote;
  uint64_t remote_offset = 0;
  size_t length = 0;
  Completion done;
};

// Everything a connected pair shares, handed over by the handshake.
struct ConnectionSetup {
  int peer_rank = -1;
  int side = 0;  // 0: this rank is the lower of the pair
  pid_t peer_pid = 0;
  int socket_fd = -1;         // the handshake socket, kept for liveness
  int peer_doorbell_fd = -1;  // the peer's eventfd
  uint64_t pair_id = 0;       // from both nonces; the same at both ends
  std::unique_ptr<SharedMapping> segment;
  std::unique_ptr<PeerRegionTable> peer_table;
};

class ShmConnection : public Connection {
 public:
  ShmConnection(ShmTransportImpl* transport, ConnectionSetup setup);
  ~ShmConnection() override;

  int peer_rank() const override { return peer_rank_; }
  Status PostRead(const MemoryRegion& local, size_t local_offset, const RemoteKey& remote,
                  size_t remote_offset, size_t length, Completion done) override;
  Status PostWrite(const MemoryRegion& local, size_t local_offset, const RemoteKey& remote,
                   size_t remote_offset, size_t length, Completion done) override;
  Status SendMessage(const void* data, size_t size) override;
  // Both parts copied straight into the slot (or joined into the backlog).
  Status SendMessageParts(const void* head, size_t head_size, const void* body,
                          size_t body_size) override;
  // One lock for the batch and one doorbell for the peer.
  Status SendMessages(std::vector<std::string> messages) override;
  size_t max_message_size() const override { return slot_size_ - kSlotHeaderSize; }
  Status status() const override;
  Status Flush(Deadline deadline) override;

  // Makes `status` sticky (first failure wins); reports it through
  // on_peer_error when `report`. Any thread.
  void Fail(const Status& status, bool report = true);
  int socket_fd() const { return socket_fd_; }

  // Under the transport's progress mutex. Each returns true if it did
  // something.
  bool PollInbound();
  bool PollOutbound(Clock::time_point now);
  bool HasInbound() const;
  // Backlogged messages and a free slot to move them into: work a progress
  // thread about to sleep must not miss (credits returned before it raised
  // its `sleeping` word rang no doorbell).
  bool HasOutboundWork() const;
  void SetSleeping(bool sleeping);
  // Runs one READ/WRITE to completion (the copy itself, unless the posting
  // thread did it); failures of the peer's keys or process fail the
  // connection.
  Status RunOp(const OneSidedOp& op);
  void OpDone();

 private:
  Status Post(bool write, const MemoryRegion& local, size_t local_offset, const RemoteKey& remote,
              size_t remote_offset, size_t length, Completion done);
  bool TryPushLocked(const void* data, size_t size) { return TryPushLocked(data, size, nullptr, 0); }
  // The message `head` then `body` into a free slot's buffer and its
  // descriptor into the next slot (shm_segment.h), if a credit is free.
  bool TryPushLocked(const void* head, size_t head_size, const void* body, size_t body_size);
  void RingPeerIfSleeping();
  Status Copy(bool write, uint8_t* local, uint64_t remote_address, size_t length);
  // Checks the peer's key and copies; any thread. The caller fails the
  // connection on an error (RunOp, on the progress thread).
  Status PinAndCopy(bool write, uint8_t* local, const RemoteKey& remote, uint64_t remote_offset,
                    size_t length);
  // The peer's memfd holding region `rkey` (its entry pinned; `memfd` as
  // the entry names it), mapped here: on first use its descriptor is taken
  // with pidfd_getfd and mapped, once per memfd however many regions lie
  // in it. Null where that is refused or fails (the copy then takes
  // cross-memory attach). `end`: the memfd offset the copy reaches.
  std::shared_ptr<SharedMapping> PeerMapping(uint32_t rkey, const RegionMemfd& memfd,
                                             uint64_t end);

  ShmTransportImpl* const transport_;
  const int peer_rank_;
  const int side_;
  const pid_t peer_pid_;
  const int socket_fd_;
  const int peer_doorbell_fd_;
  // Keys of the rings' happens-before edges for tsan (shm_tsan.h): messages
  // of ring s, credits of ring s.
  uint64_t MessageKey(int ring) const { return pair_id_ * 4 + ring; }
  uint64_t CreditKey(int ring) const { return pair_id_ * 4 + 2 + ring; }
  const uint64_t pair_id_;
  const std::unique_ptr<SharedMapping> segment_;
  const std::unique_ptr<PeerRegionTable> peer_table_;
  // The peer's memfds mapped so far, by inode number (which no other memfd
  // can take while the mapping holds this one), with the keys of the
  // regions seen in each. A memfd none of whose regions is registered any
  // more is dropped (swept as new memfds come); mappings are shared with
  // copies in flight.
  struct MappedMemfd {
    std::shared_ptr<SharedMapping> mapping;
    std::vector<uint32_t> rkeys;
  };
  std::mutex mappings_mutex_;
  std::map<uint64_t, MappedMemfd> mappings_;  // guarded by mappings_mutex_
  int pidfd_ = -1;                              // guarded by mappings_mutex_
  bool mapping_refused_ = false;                // guarded by mappings_mutex_
  SegmentHeader* const header_;
  const uint32_t slots_;
  const uint32_t slot_size_;
  RingHeader* const out_ring_;
  RingHeader* const in_ring_;
  uint8_t* const out_slots_;
  uint8_t* const in_slots_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  Status status_;
  std::atomic<bool> failed_{false};  // status_ is not OK (read without the lock)
  std::deque<std::string> backlog_;
  std::atomic<size_t> backlog_size_{0};  // backlog_.size(), read without the lock
  std::atomic<int> flush_waiters_{0};    // threads in Flush (notified on credits)
  uint64_t out_head_ = 0;  // messages in the ring so far
  // Payload buffers (slot indices) of the outgoing ring, taken in the
  // order of the messages and freed as the consumer's tail passes them:
  // small messages take the one freed last, large ones the one freed
  // first (shm_segment.h).
  RecycledSlots out_buffers_;
  uint64_t sent_ = 0;      // messages accepted: ring + backlog
  uint64_t ops_posted_ = 0;
  uint64_t ops_completed_ = 0;

  // Under the transport's progress mutex.
  uint64_t in_tail_ = 0;
  uint64_t last_out_tail_ = 0;
  Clock::time_point last_credit_;
};

}  // namespace shm
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_SHM_SHM_CONNECTION_H_
