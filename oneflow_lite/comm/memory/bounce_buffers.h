// Strategy (2): fixed-size pre-registered bounce buffers, for registers whose
// size is only known at run time (dynamic shapes).
//
// The sender copies the valid bytes of a payload (one CPU copy) into one of
// `buffer_count` registered buffers of `buffer_size` bytes taken from a
// RegisteredPool and announces it to the receiver with a message carrying
// the byte counts and the buffer's RemoteKey. The receiver READs exactly those
// bytes straight into its own registered destination and sends RELEASE, which
// frees the buffer. Payloads larger than a buffer are split into chunks over
// several buffers; a payload of 0 bytes is one empty announcement.
//
// Messages travel on `channel` (announcements) and `channel | kReplyBit`
// (releases) of a MessageRouter, so one channel id serves both directions
// of a pair. Send and Receive block, bounded by their deadline, and fail as
// soon as the connection fails. One thread at a time per sender/receiver.
#ifndef ONEFLOW_LITE_COMM_MEMORY_BOUNCE_BUFFERS_H_
#define ONEFLOW_LITE_COMM_MEMORY_BOUNCE_BUFFERS_H_

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "oneflow_lite/comm/memory/counters.h"
#include "oneflow_lite/comm/memory/registered_pool.h"
#include "oneflow_lite/comm/message_router.h"
#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {

struct BounceOptions {
  uint32_t channel = 1;
  size_t buffer_size = 1u << 20;
  int buffer_count = 4;
};

constexpr uint32_t kReplyBit = 0x80000000u;

class BounceSender {
 public:
  static StatusOr<std::unique_ptr<BounceSender>> Create(
      Connection* connection, MessageRouter* router, RegisteredPool* pool,
      const BounceOptions& options, StrategyCounters* counters);
  ~BounceSender();

  // Copies and announces `size` bytes from `data` (any memory).
  Status Send(const void* data, size_t size, Deadline deadline);

 private:
  BounceSender(Connection* connection, MessageRouter* router,
               const BounceOptions& options, StrategyCounters* counters);
  void OnRelease(const void* data, size_t size);

  Connection* const connection_;
  MessageRouter* const router_;
  const BounceOptions options_;
  StrategyCounters* const counters_;
  std::vector<PoolBuffer> buffers_;
  std::mutex mutex_;
  std::condition_variable released_;
  std::vector<bool> busy_;
  Status protocol_error_;
  uint64_t sequence_ = 0;
};

class BounceReceiver {
 public:
  static StatusOr<std::unique_ptr<BounceReceiver>> Create(
      Connection* connection, MessageRouter* router,
      const BounceOptions& options, StrategyCounters* counters);
  ~BounceReceiver();

  // Receives the next payload into `destination` at `offset` (at most
  // `capacity` bytes) and returns its size. A payload larger than
  // `capacity` is drained and fails with OutOfRange.
  StatusOr<size_t> Receive(const MemoryRegion& destination, size_t offset,
                           size_t capacity, Deadline deadline);

 private:
  struct Announcement {
    uint64_t sequence;
    uint32_t slot;
    uint64_t total;
    uint64_t chunk_offset;
    uint64_t chunk_bytes;
    RemoteKey key;
  };
  BounceReceiver(Connection* connection, MessageRouter* router,
                 const BounceOptions& options, StrategyCounters* counters);
  void OnAnnounce(const void* data, size_t size);
  StatusOr<Announcement> NextAnnouncement(Deadline deadline);
  Status Release(uint32_t slot);

  Connection* const connection_;
  MessageRouter* const router_;
  const BounceOptions options_;
  StrategyCounters* const counters_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<Announcement> queue_;
  Status protocol_error_;
  uint64_t expected_sequence_ = 0;
};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_MEMORY_BOUNCE_BUFFERS_H_
