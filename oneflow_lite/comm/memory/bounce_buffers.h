// Strategy (2): fixed-size pre-registered bounce buffers, for registers whose
// size is only known at run time (dynamic shapes): one CPU copy on the
// producer, only the valid bytes move, the message carries the byte count.
//
// BounceStreams is the one implementation; the runtime's CommNet route
// (runtime/commnet/commnet_route.h) runs it for every CM_BOUNCE_BUFFER
// register and the strategy suite (comm/testing/memory_strategy_conformance.cc)
// tests it: many independent streams per peer, one set of buffers per stream
// (so a stalled consumer only holds back its own stream), payloads queued by
// the producer and pulled by the consumer when it has a destination. See the
// class comment.
#ifndef ONEFLOW_LITE_COMM_MEMORY_BOUNCE_BUFFERS_H_
#define ONEFLOW_LITE_COMM_MEMORY_BOUNCE_BUFFERS_H_

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "oneflow_lite/comm/memory/counters.h"
#include "oneflow_lite/comm/message_router.h"
#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {

// Replies (releases) travel on `channel | kReplyBit` of a router channel.
constexpr uint32_t kReplyBit = 0x80000000u;

// ------------------------------------------------------------ BounceStreams
//
// Asynchronous bounce-buffer streams over every connection of a Transport.
// A stream is named by two u64s (the runtime uses register desc id and
// consumer task id); each direction of each (peer, stream) is independent.
//
// Producer: Enqueue(peer, stream, segments) gives the payload its number in
// the stream (0, 1, 2, ...) and returns at once. Its valid bytes (the
// concatenation of `segments`) are copied, once, into the stream's own
// registered buffers (`buffer_count` of `buffer_size` bytes, one
// registration per stream, made at the stream's first payload) chunk by
// chunk as buffers are free, each chunk announced with its byte counts and
// the buffer's RemoteKey; a RELEASE from the consumer frees the buffer and
// the next chunk is copied on the progress thread. The segments' memory must
// stay unchanged and alive until every chunk was announced, which is the
// case when the consumer only gives the memory back after Pull completed
// (the actor protocol's "returned"). A payload of 0 bytes sends nothing.
//
// Consumer: Pull(peer, stream, payload, total, region, segments, done) READs
// payload number `payload` (`total` bytes, learnt from the producer's own
// message) straight into `region` at `segments` (the same concatenation
// order) as its chunks are announced, releases each buffer when its READs
// completed, and runs `done` once: OK when all bytes arrived; otherwise the
// failed READ's or connection's error, DataLoss for a protocol violation
// (chunks of another payload, a key or range that does not match), or
// DeadlineExceeded after `pull_timeout`. One pull per stream at a time, in
// payload order. `done` runs on the progress thread, the monitor thread, or
// (0 bytes) the calling thread, never with a lock of this class held.
//
// No call blocks. A monitor thread (period 20 ms) fails pulls whose
// connection failed or whose deadline passed, and reports a failed
// producer-side stream through `on_error`. Thread-safe. The transport and
// router must outlive the object, the destination regions every pull.
struct BounceStreamOptions {
  uint32_t channel = 0x11;  // and channel | kReplyBit for releases
  size_t buffer_size = 256u << 10;
  int buffer_count = 2;
  std::chrono::milliseconds pull_timeout{120000};
};

using BounceStreamId = std::pair<uint64_t, uint64_t>;

struct ConstSegment {
  const void* data;
  size_t size;
};
struct RegionSegment {
  size_t offset;  // in the destination region
  size_t size;
};

class BounceStreams {
 public:
  static StatusOr<std::unique_ptr<BounceStreams>> Create(
      Transport* transport, MessageRouter* router,
      const BounceStreamOptions& options, StrategyCounters* counters,
      std::function<void(const Status&)> on_error);
  ~BounceStreams();

  // Producer side; `max_payload` sizes the stream's buffers at its first
  // payload (min(buffer_size, max_payload), at least 1 byte). Returns the
  // payload's number, or the stream's or connection's error.
  StatusOr<uint64_t> Enqueue(int peer, const BounceStreamId& stream,
                             std::vector<ConstSegment> segments,
                             size_t max_payload);

  // Consumer side; `region` needs kAccessLocalWrite and must cover
  // `segments`, whose sizes add up to `total`. An error returned here means
  // `done` will not run.
  Status Pull(int peer, const BounceStreamId& stream, uint64_t payload,
              uint64_t total, const MemoryRegion* region,
              std::vector<RegionSegment> segments,
              std::function<void(const Status&)> done);

  // Chunks announced but not yet pulled, over all streams (for tests).
  size_t queued_chunks() const;

 private:
  struct Sender;
  struct Receiver;
  struct Pulling;
  struct Chunk;
  using StreamKey = std::pair<int, BounceStreamId>;

  BounceStreams(Transport* transport, MessageRouter* router,
                const BounceStreamOptions& options, StrategyCounters* counters,
                std::function<void(const Status&)> on_error);
  StatusOr<std::shared_ptr<Sender>> SenderFor(int peer,
                                              const BounceStreamId& stream,
                                              size_t max_payload);
  std::shared_ptr<Receiver> ReceiverFor(int peer, const BounceStreamId& stream,
                                        Connection* connection);
  Status PumpLocked(Sender* sender);
  void OnAnnounce(int peer, const void* data, size_t size);
  void OnRelease(int peer, const void* data, size_t size);
  // Posts the READs of every queued chunk of the pull in progress; returns
  // the pull to finish (with its status) when it is complete or failed.
  std::shared_ptr<Pulling> DriveLocked(const std::shared_ptr<Receiver>& receiver);
  // A READ of `chunk` completed: the last one of the chunk releases its
  // buffer; the last chunk finishes the pull. Captures no `this`.
  static void OnChunkRead(StrategyCounters* counters, uint32_t channel,
                          const std::shared_ptr<Receiver>& receiver,
                          const std::shared_ptr<Pulling>& pull,
                          const std::shared_ptr<int>& remaining,
                          const Chunk& chunk, const Status& status);
  void Monitor();

  Transport* const transport_;
  MessageRouter* const router_;
  const BounceStreamOptions options_;
  StrategyCounters* const counters_;
  const std::function<void(const Status&)> on_error_;
  mutable std::mutex streams_mutex_;  // guards the two maps (not the streams)
  std::map<StreamKey, std::shared_ptr<Sender>> senders_;
  std::map<StreamKey, std::shared_ptr<Receiver>> receivers_;
  std::mutex monitor_mutex_;
  std::condition_variable monitor_wake_;
  bool stopping_ = false;
  std::thread monitor_;
};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_MEMORY_BOUNCE_BUFFERS_H_
