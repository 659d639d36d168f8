// Ring collectives on CommNet: all-reduce (sum), reduce-scatter and
// all-gather over the ranks of a Transport, ring order = rank order, or
// over a group of them in the order given (CollectiveOptions::members). Used by
// the runtime's boxing actors across machines (P->B, P->S, S->B).
//
// Data path. The buffer is a caller-registered region (static zero-copy:
// registered once, e.g. at plan load). Each step moves one segment to the
// right neighbour in chunks of `chunk_bytes`: reduce steps WRITE a chunk into
// one of `slots` registered scratch slots of the neighbour (from a
// RegisteredPool) which it adds into its buffer and acknowledges (credit);
// gather steps WRITE straight into the neighbour's buffer. A READY message
// tells the neighbour the chunk has landed: sent right behind the WRITE
// where the connection orders a message after an outstanding WRITE
// (Connection::OrdersMessagesAfterWrites: tcp, ibverbs), else from the WRITE's
// completion; the same message either way (docs/comm.md).
// Sends are queued and issued as credits allow (from the progress thread),
// so no rank ever blocks in a send; the caller's thread only waits for
// incoming chunks, reduces and forwards them.
//
// Segments: element range [count * i / N, count * (i + 1) / N) is segment i.
// ReduceScatter leaves the sum of segment r on rank r; AllGather expects
// rank r's segment r and fills the rest.
//
// Identity. Every rank's communicator of one ring uses the same `channel`
// and `tag`; the tag travels with the set-up message and a neighbour with a
// different tag fails Create (DataLoss naming it), so two rings that were
// given the same channel by mistake are caught instead of mixing data.
//
// Cancellation. With options.cancel set, a cancelled flag fails Create and
// every call (in flight or later) with the flag's reason within one status
// poll (20 ms); the ring is then out of step, so the failure is sticky.
//
// Contract. All ranks call the same collectives in the same order with the
// same count and dtype (DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64). Calls block
// until done, the deadline, the cancel flag, or a neighbour's failure (error
// names the rank). One thread at a time per communicator. A failure other
// than a bad argument is sticky: the ranks are out of step, so later calls
// return it. The communicator must be destroyed before the router and the
// transport; the cancel flag must outlive it.
#ifndef ONEFLOW_LITE_COMM_COLLECTIVE_RING_H_
#define ONEFLOW_LITE_COMM_COLLECTIVE_RING_H_

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "oneflow_lite/comm/collective/cancel.h"
#include "oneflow_lite/comm/collective/rank_group.h"
#include "oneflow_lite/common/ring_segments.h"
#include "oneflow_lite/comm/memory/registered_pool.h"
#include "oneflow_lite/comm/message_router.h"
#include "oneflow_lite/comm/recycled_slots.h"
#include "oneflow_lite/comm/transport.h"
#include "proto/common.pb.h"

namespace oflite {
namespace comm {

struct CollectiveOptions {
  uint32_t channel = 0x100;  // router channel (and channel | kReplyBit)
  size_t chunk_bytes = kDefaultRingChunkBytes;
  int slots = kDefaultRingSlots;
  // How long the calling thread polls (yielding) for a neighbour's chunk
  // or its last WRITE's completion before it sleeps on a condition variable
  // (whose wake-up costs tens of microseconds on a VM, ~45 us when the
  // core halted). 0: sleep at once. 200 us rather than 50: with ranks bound
  // to cores, a neighbour a little late no longer costs a sleep and a
  // wake-up (docs/benchmarks.md, "Spin bounds"); the polls yield, so a
  // runnable thread of the core goes first, and stop early while the host
  // is oversubscribed (comm/spin_wait.h).
  std::chrono::microseconds wait_spin{200};
  // While it polls, drive the transport (Transport::Poll: shm then runs the
  // WRITEs, their completions and the READY handlers on this thread) instead
  // of only yielding. Off: on the 2-core VM it halved context switches but
  // doubled the CPU per 256 KiB all-reduce (the copies no longer overlap
  // the reduction), docs/comm.md "Caller progress".
  bool wait_poll = false;
  std::chrono::milliseconds setup_timeout{30000};
  // The same on every rank of the ring (e.g. derived from the plan); checked
  // against the right neighbour's at set-up.
  uint64_t tag = 0;
  // Not owned; null: not cancellable.
  const CancelFlag* cancel = nullptr;
  // The transport ranks of the ring, in ring order (rank_group.h); empty:
  // every rank in rank order. Segments and steps follow the ring order.
  std::vector<int> members;
};

enum class RingCollective { kAllReduce, kReduceScatter, kAllGather };

// One step of a ring collective on one rank: send segment `send_segment` to
// the right neighbour, receive segment `receive_segment` from the left one.
struct RingStep {
  int send_segment;
  int receive_segment;
  bool reduce;  // the received chunk is added (else it was written in place)
};

// The ring schedule, computed in one place: the steps rank `rank` of `world`
// runs for `collective`, in order (none when world == 1). RingCommunicator
// runs exactly these steps; byte accounting derives from them. Pure.
std::vector<RingStep> RingSchedule(RingCollective collective, int rank, int world);

// Bytes rank `rank` sends to its right neighbour in `collective` over
// `count` elements of `element_bytes`: the send segments of its schedule.
size_t RingBytesSent(RingCollective collective, size_t count, size_t element_bytes, int rank,
                     int world);

class RingCommunicator {
 public:
  static StatusOr<std::unique_ptr<RingCommunicator>> Create(
      Transport* transport, MessageRouter* router, RegisteredPool* pool,
      const CollectiveOptions& options);
  ~RingCommunicator();

  // `count` elements of `dtype` at `region.data() + offset`.
  Status AllReduce(const MemoryRegion& region, size_t offset, size_t count,
                   DataType dtype, Deadline deadline);
  Status ReduceScatter(const MemoryRegion& region, size_t offset, size_t count,
                       DataType dtype, Deadline deadline);
  Status AllGather(const MemoryRegion& region, size_t offset, size_t count,
                   DataType dtype, Deadline deadline);

  // Segment `index` of `world` over `count` elements (see the top of the
  // file); pure.
  static void SegmentBounds(size_t count, int world, int index, size_t* begin,
                            size_t* end);

 private:
  using Step = RingStep;
  struct SendItem {
    uint64_t sequence;
    size_t byte_offset;  // from the buffer start
    size_t bytes;
    bool to_scratch;
  };
  struct Ready {
    size_t byte_offset;
    size_t bytes;
    bool in_scratch;
    uint32_t slot;
  };

  RingCommunicator(Transport* transport, MessageRouter* router,
                   const CollectiveOptions& options, RankGroup group);
  // Whether a message on this ring's channels came from the neighbour that
  // sends it; if not, fails the ring naming the sender and returns false.
  bool FromNeighbour(int from, int neighbour, const char* what);
  // The transport ranks of the left and right neighbours (for errors).
  int LeftRank() const { return group_.Global((rank_ + world_ - 1) % world_); }
  int RightRank() const { return group_.Global((rank_ + 1) % world_); }
  Status Setup(RegisteredPool* pool);
  Status Run(RingCollective collective, const MemoryRegion& region,
             size_t offset, size_t count, DataType dtype, Deadline deadline);
  Status RunSteps(const std::vector<Step>& steps, const MemoryRegion& region,
                  size_t offset, size_t count, DataType dtype,
                  Deadline deadline);
  void QueueSendsLocked(const MemoryRegion& region, size_t offset,
                        size_t begin_byte, size_t end_byte, bool to_scratch);
  void PumpSendsLocked();
  // The READY message announcing `item`, written into scratch slot `slot`.
  static std::string ReadyMessage(const SendItem& item, uint32_t slot);
  void OnForward(const void* data, size_t size);   // from the left neighbour
  void OnBackward(const void* data, size_t size);  // from the right neighbour
  void OnBackwardLocked(const void* data, size_t size);
  StatusOr<Ready> WaitReady(uint64_t sequence, Deadline deadline);
  Status HealthLocked() const;
  void FailLocked(const Status& status);

  Transport* const transport_;
  MessageRouter* const router_;
  const CollectiveOptions options_;
  const RankGroup group_;
  const int rank_;   // in the ring
  const int world_;  // the ring's size
  Connection* left_ = nullptr;
  Connection* right_ = nullptr;
  PoolBuffer scratch_;

  std::mutex mutex_;
  std::condition_variable changed_;
  Status error_;
  RemoteKey right_scratch_;
  bool have_right_scratch_ = false;
  std::map<uint64_t, RemoteKey> right_data_keys_;  // by call id
  uint64_t call_ = 0;
  // Sending (to the right).
  const MemoryRegion* send_region_ = nullptr;
  size_t send_offset_ = 0;
  std::deque<SendItem> send_queue_;
  uint64_t next_send_sequence_ = 0;
  // The right neighbour's scratch slots: each reduce WRITE takes the one
  // freed last; its ACKs free them in the order of the WRITEs.
  RecycledSlots scratch_slots_;
  uint64_t sends_in_flight_ = 0;
  // Receiving (from the left).
  std::map<uint64_t, Ready> ready_;
  uint64_t next_receive_sequence_ = 0;
};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_COLLECTIVE_RING_H_
