// Exchange all-reduce: the small- and mid-payload all-reduces of CommNet.
//
// A ring all-reduce of N ranks takes 2 (N - 1) dependent steps, each a
// WRITE and a READY message through both ranks' progress threads; for a
// few KiB that latency, not bandwidth, is the cost. Here the payload rides
// inside transport messages (no registration, no one-sided operation, no
// set-up handshake) on one of three schedules (ExchangeSchedule):
//  * kDirect: every rank sends its whole buffer to every other rank, then
//    adds the N buffers in rank order. One message latency, (N - 1) times
//    the buffer sent.
//  * kDoubling (power-of-2 worlds): log2 N rounds; in round k each rank
//    swaps what it holds with rank ^ 2^k and adds. log2 N latencies and
//    times the buffer.
//  * kScatterGather: the buffer is cut into N segments as the ring cuts it
//    (common/ring_segments.h); each rank sends segment j to rank j, rank j
//    sums its segment in rank order (reduce-scatter), then sends the sum to
//    every rank (all-gather). Two message latencies for the ring's 2 (N - 1)
//    / N times the buffer sent.
// The compiler picks the schedule by size and world size
// (compiler/collective_choice.h) and records it in the plan.
//
// Determinism. Every rank ends with the same bits: kDirect and each
// segment of kScatterGather sum ((b0 + b1) + b2) + ... in rank order (a
// segment once, on its owner); kDoubling adds the same two values on both
// partners of each round (one addition commutes).
//
// Wire (on `channel`, through the MessageRouter): per piece, kind (1 byte:
// 1 = piece, 2 = all-gather piece of kScatterGather), tag (8), call (8),
// total bytes (8), offset (8), then the piece's bytes; a piece fills one
// transport message and continues its sender's last piece of that kind and
// call. A piece whose tag differs from ours fails the communicator
// (DataLoss naming the sender), as the ring's set-up does.
//
// Contract. All ranks call AllReduce in the same order with the same count
// and dtype (DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64) and the same schedule.
// A call blocks until done, the deadline, the cancel flag (within one 20 ms
// status poll) or a peer connection's failure (the error names the rank);
// failures other than bad arguments are sticky. One thread at a time per
// communicator; a peer may run ahead by any number of calls (its pieces
// are staged). The communicator must be destroyed before the router and
// the transport; the cancel flag must outlive it.
#ifndef ONEFLOW_LITE_COMM_COLLECTIVE_EXCHANGE_H_
#define ONEFLOW_LITE_COMM_COLLECTIVE_EXCHANGE_H_

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "oneflow_lite/comm/collective/cancel.h"
#include "oneflow_lite/comm/collective/rank_group.h"
#include "oneflow_lite/comm/message_router.h"
#include "oneflow_lite/comm/transport.h"
#include "oneflow_lite/common/ring_segments.h"
#include "proto/common.pb.h"

namespace oflite {
namespace comm {

enum class ExchangeSchedule { kDirect, kDoubling, kScatterGather };

// "exchange", "recursive doubling", "scatter-gather" (for errors and traces).
inline const char* ExchangeScheduleName(ExchangeSchedule schedule) {
  switch (schedule) {
    case ExchangeSchedule::kDirect: return "exchange";
    case ExchangeSchedule::kDoubling: return "recursive doubling";
    case ExchangeSchedule::kScatterGather: return "scatter-gather";
  }
  return "exchange";
}

struct ExchangeOptions {
  uint32_t channel = 0x200;
  // The same on every rank (e.g. derived from the plan); checked per piece.
  uint64_t tag = 0;
  // Not owned; null: not cancellable.
  const CancelFlag* cancel = nullptr;
  // How long a waiting call polls (yielding, or Transport::Poll) before it
  // sleeps on its condition variable; as CollectiveOptions::wait_spin.
  std::chrono::microseconds wait_spin{200};
  // Calls of at most this many bytes drive the transport while they wait
  // (Transport::Poll, where the provider has caller progress); larger ones
  // leave it to the progress thread (Transport::BeginBlockingWait) and
  // only yield. Measured on 2 cores over shm, 2-4 processes: polling made
  // 4 and 16 KiB 1.2-2.2x faster. Above 16 KiB it paid only once the
  // progress thread's naps for pollers had grown from 200 us to 2 ms
  // (caller_progress.h, kCallerQuiet): then five alternating runs put 64
  // KiB at 1.16-2.2x and 256 KiB at 1.0-1.3x of waiting without polling
  // (docs/comm.md, "Who polls"), a 2-rank training step level.
  size_t poll_max_bytes = size_t{256} << 10;
  // See the file comment. kDoubling needs a power-of-2 world (Create
  // refuses others); a world of 2 runs kDirect as kDoubling (one round: the
  // same bytes, added as they arrive).
  ExchangeSchedule schedule = ExchangeSchedule::kDirect;
  // A peer announcing a larger buffer fails the communicator (DataLoss
  // naming it) instead of making this rank allocate it.
  size_t max_bytes = size_t{1} << 30;
  // The transport ranks taking part, in group order (rank_group.h); empty:
  // every rank. The schedule runs on group ranks; a piece from a rank
  // outside the group fails the communicator.
  std::vector<int> members;
};

// Bytes of header in front of each piece's payload (after the router's
// channel header).
inline constexpr size_t kExchangePieceHeaderBytes = 1 + 8 + 8 + 8 + 8;

class ExchangeCommunicator {
 public:
  // Registers the channel's handler; no messages are exchanged.
  static StatusOr<std::unique_ptr<ExchangeCommunicator>> Create(Transport* transport,
                                                                MessageRouter* router,
                                                                const ExchangeOptions& options);
  ~ExchangeCommunicator();
  ExchangeCommunicator(const ExchangeCommunicator&) = delete;
  ExchangeCommunicator& operator=(const ExchangeCommunicator&) = delete;

  // Sums `count` elements of `dtype` at `data` over all ranks, in place.
  Status AllReduce(void* data, size_t count, DataType dtype, Deadline deadline);

  // Bytes `rank` sends in one AllReduce of `count` elements of
  // `element_bytes` over `world` ranks (payload only): kDirect (N - 1) times
  // the buffer, kDoubling (and kDirect at 2 ranks) log2 N times,
  // kScatterGather every segment but its own once and its own N - 1 times.
  static size_t BytesSent(size_t count, size_t element_bytes, int rank, int world,
                          ExchangeSchedule schedule);

 private:
  // The pieces of one call received so far, per sending rank.
  struct Incoming {
    // By rank; allocated (not zeroed: every byte is written by a piece)
    // on the first piece, of `sizes[rank]` bytes.
    std::vector<std::unique_ptr<uint8_t[]>> buffers;
    std::vector<size_t> sizes;
    std::vector<size_t> received;  // bytes, by rank
  };

  ExchangeCommunicator(Transport* transport, MessageRouter* router,
                       const ExchangeOptions& options, RankGroup group);
  // Where OnPiece puts pieces of the call in progress straight into the
  // caller's buffer instead of staging them: the partner of a pairwise
  // round (added at their offset), or every peer of kScatterGather's
  // all-gather (copied into the sender's segment). key 0: none.
  struct Active {
    uint64_t key = 0;
    int peer = -1;  // -1: every peer, copying into its segment
    uint8_t* data = nullptr;
    size_t count = 0;
    DataType dtype = DT_FLOAT;
    size_t element = 1;
  };
  static constexpr size_t kUnsized = ~size_t{0};

  // The schedule a world runs: kDirect at 2 ranks runs pairwise.
  static ExchangeSchedule Effective(int world, ExchangeSchedule schedule) {
    return world == 2 && schedule == ExchangeSchedule::kDirect ? ExchangeSchedule::kDoubling
                                                               : schedule;
  }
  // Incoming pieces are kept per call and kind: the all-gather pieces of
  // kScatterGather apart from the others.
  static uint64_t Key(uint64_t call, bool gather) { return call * 2 + (gather ? 1 : 0); }
  // Segment `index` of `count` elements of `element` bytes over `world`
  // ranks (the ring's cut, RingSegmentBounds): byte offset and length.
  static size_t SegmentBegin(size_t count, size_t element, int world, int index);
  static size_t SegmentBytes(size_t count, size_t element, int world, int index);
  void OnPiece(int peer, const void* data, size_t size);
  // The entry of a key, created empty (every rank unsized) on first use.
  Incoming& IncomingLocked(uint64_t key);
  Status SendTo(const std::vector<int>& peers, uint8_t kind, const uint8_t* data, size_t bytes,
                uint64_t call);
  // Until every one of `peers` delivered `bytes[peer]` for `key`; `lock`
  // holds mutex_.
  Status WaitFor(const std::vector<int>& peers, uint64_t key, const std::vector<size_t>& bytes,
                 Deadline deadline, std::unique_lock<std::mutex>* lock);
  Status DirectAllReduce(uint8_t* data, size_t count, DataType dtype, uint64_t call,
                         Deadline deadline);
  Status PairwiseAllReduce(uint8_t* data, size_t count, DataType dtype, uint64_t call,
                           Deadline deadline);
  Status ScatterGatherAllReduce(uint8_t* data, size_t count, DataType dtype, uint64_t call,
                                Deadline deadline);
  // Sums `count` elements in rank order: this rank's `mine` with the staged
  // parts of every other rank in `incoming`, into `mine`.
  Status SumInRankOrder(uint8_t* mine, size_t count, DataType dtype, Incoming* incoming) const;
  Status HealthLocked() const;
  void FailLocked(const Status& status);

  Transport* const transport_;
  MessageRouter* const router_;
  const ExchangeOptions options_;
  const RankGroup group_;
  const int rank_;   // group ranks from here on
  const int world_;  // the group's size
  std::vector<Connection*> peers_;  // by group rank; null for this rank
  std::vector<int> others_;         // the other group ranks, from the right neighbour on

  std::mutex mutex_;
  std::condition_variable changed_;
  Status error_;
  bool poll_ = true;       // this call polls (poll_max_bytes); the calling thread's
  uint64_t call_ = 0;      // calls started
  uint64_t finished_ = 0;  // calls whose pieces were all consumed
  std::map<uint64_t, Incoming> incoming_;  // by Key(call, gather)
  Active active_;
};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_COLLECTIVE_EXCHANGE_H_
