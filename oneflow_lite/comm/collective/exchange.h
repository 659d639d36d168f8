// Exchange all-reduce: the small-payload all-reduce of CommNet.
//
// A ring all-reduce of N ranks takes 2 (N - 1) dependent steps, each a
// WRITE and a READY message through both ranks' progress threads; for a
// few KiB that latency, not bandwidth, is the cost. Here every rank sends
// its whole buffer to every other rank in transport messages (the payload
// rides inside the messages: no registration, no one-sided operation, no
// set-up handshake), then adds the N buffers in rank order. One message
// latency instead of 2 (N - 1), for (N - 1) times the bytes a rank sends:
// the compiler picks it below a size (compiler/collective_choice.h,
// ExchangeAllReduceFits) and records the choice in the plan.
//
// Determinism. Every rank computes ((b0 + b1) + b2) + ... in rank order
// with the same operations, so all ranks hold bit-identical sums (as the
// ring's all-gather phase guarantees for the ring).
//
// Wire (on `channel`, through the MessageRouter): per piece, kind (1 byte,
// 1 = piece), tag (8), call (8), total bytes (8), offset (8), then the
// piece's bytes; a piece fills one transport message. A piece whose tag
// differs from ours fails the communicator (DataLoss naming the sender),
// as the ring's set-up does.
//
// Contract. All ranks call AllReduce in the same order with the same count
// and dtype (DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64). A call blocks until
// done, the deadline, the cancel flag (within one 20 ms status poll) or a
// peer connection's failure (the error names the rank); failures other
// than bad arguments are sticky. One thread at a time per communicator; a
// peer may run ahead by any number of calls (its pieces are staged). The
// communicator must be destroyed before the router and the transport; the
// cancel flag must outlive it.
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
#include "oneflow_lite/comm/message_router.h"
#include "oneflow_lite/comm/transport.h"
#include "oneflow_lite/common/ring_segments.h"
#include "proto/common.pb.h"

namespace oflite {
namespace comm {

struct ExchangeOptions {
  uint32_t channel = 0x200;
  // The same on every rank (e.g. derived from the plan); checked per piece.
  uint64_t tag = 0;
  // Not owned; null: not cancellable.
  const CancelFlag* cancel = nullptr;
  // How long a waiting call polls (yielding, or Transport::Poll) before it
  // sleeps on its condition variable; as CollectiveOptions::wait_spin.
  std::chrono::microseconds wait_spin{200};
  // With a power-of-2 world: recursive doubling (log2 N rounds; in round k
  // each rank swaps what it holds with rank ^ 2^k and adds) instead of
  // every rank sending to every other. log2 N message latencies instead of
  // one, log2 N instead of N - 1 times the buffer sent and added. A world of
  // 2 always runs it (one round: the same as the direct exchange).
  bool recursive_doubling = false;
  // A peer announcing a larger buffer fails the communicator (DataLoss
  // naming it) instead of making this rank allocate it.
  size_t max_bytes = size_t{1} << 30;
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

  // Bytes this rank sends in one AllReduce of `bytes` over `world` ranks
  // (payload only): (world - 1) * bytes.
  // With `recursive_doubling` over a power-of-2 world (or a world of 2):
  // log2(world) * bytes.
  static size_t BytesSent(size_t bytes, int world, bool recursive_doubling = false) {
    if (world < 2) return 0;
    if (RunsPairwise(world, recursive_doubling)) {
      size_t rounds = 0;
      for (int span = 1; span < world; span <<= 1) ++rounds;
      return rounds * bytes;
    }
    return static_cast<size_t>(world - 1) * bytes;
  }

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
                       const ExchangeOptions& options);
  // The partner of the round in progress of a pairwise call, whose pieces
  // OnPiece adds straight into `data`; call 0: none.
  struct Active {
    uint64_t call = 0;
    int peer = -1;
    uint8_t* data = nullptr;
    size_t bytes = 0;
    DataType dtype = DT_FLOAT;
    size_t element = 1;
  };
  static constexpr size_t kUnsized = ~size_t{0};

  // Whether a world runs recursive doubling (PairwiseAllReduce): always at
  // 2, else when asked for and the world is a power of 2.
  static bool RunsPairwise(int world, bool recursive_doubling) {
    return world == 2 || (recursive_doubling && IsPowerOfTwo(world));
  }
  bool pairwise() const { return RunsPairwise(world_, options_.recursive_doubling); }
  void OnPiece(int peer, const void* data, size_t size);
  // The call's entry, created empty (every rank unsized) on first use.
  Incoming& IncomingLocked(uint64_t call);
  Status SendTo(const std::vector<int>& peers, const uint8_t* data, size_t bytes, uint64_t call);
  // Until every one of `peers` delivered `bytes` for `call`; `lock` holds mutex_.
  Status WaitFor(const std::vector<int>& peers, uint64_t call, size_t bytes, Deadline deadline,
                 std::unique_lock<std::mutex>* lock);
  Status DirectAllReduce(uint8_t* data, size_t count, DataType dtype, uint64_t call,
                         Deadline deadline);
  Status PairwiseAllReduce(uint8_t* data, size_t count, DataType dtype, uint64_t call,
                           Deadline deadline);
  Status HealthLocked() const;
  void FailLocked(const Status& status);

  Transport* const transport_;
  MessageRouter* const router_;
  const ExchangeOptions options_;
  const int rank_;
  const int world_;
  std::vector<Connection*> peers_;  // by rank; null for this rank

  std::mutex mutex_;
  std::condition_variable changed_;
  Status error_;
  uint64_t call_ = 0;      // calls started
  uint64_t finished_ = 0;  // calls whose pieces were all consumed
  std::map<uint64_t, Incoming> incoming_;  // by call
  Active active_;
};

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_COLLECTIVE_EXCHANGE_H_
