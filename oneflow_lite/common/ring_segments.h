// The ring's flat segments and its default message sizes: how
// comm::RingCommunicator (comm/collective/ring.h) cuts `count` elements among `world` ranks, and
// the chunk bytes and scratch slots it uses unless told otherwise.
// Header-only and free of dependencies, in common/ so that the compiler, which records
// each collective's algorithm and buffers in the Plan
// (compiler/collective_choice.h), applies the very rule the ring runs.
// Pure functions; thread-safe.
#ifndef ONEFLOW_LITE_COMMON_RING_SEGMENTS_H_
#define ONEFLOW_LITE_COMMON_RING_SEGMENTS_H_

#include <cstddef>

namespace oflite {

// Bytes of one ring message (a multiple of every element size).
inline constexpr size_t kDefaultRingChunkBytes = 512 * 1024;
// Ring messages in flight per rank (scratch slots at the receiver).
inline constexpr int kDefaultRingSlots = 4;

// Partial-sum all-reduces of tensors of at most this many bytes use the
// exchange all-reduce (comm/collective/exchange.h: every rank sends its
// whole buffer to every other in messages, one latency) instead of the ring
// (2 (N - 1) dependent steps), as long as what each rank sends, (N - 1)
// times the tensor, stays within kExchangeFanOut times it. Measured in
// tools/bench/allreduce_bench ("exch" and "plan" columns, 2-4 processes,
// docs/benchmarks.md): the exchange wins up to 64 KiB at 2, 3 and 4
// processes over tcp and shm, the ring from 256 KiB.
inline constexpr size_t kExchangeAllReduceMaxBytes = 64 * 1024;
inline constexpr size_t kExchangeFanOut = 4;

// True for 1, 2, 4, 8, ...: the worlds recursive doubling pairs up.
inline bool IsPowerOfTwo(int world) { return world > 0 && (world & (world - 1)) == 0; }

// Over a power-of-2 world of 4 or more ranks, partial-sum all-reduces up to
// the exchange bound use recursive doubling instead (exchange.h,
// ExchangeOptions::recursive_doubling): log2 N latencies and log2 N times
// the tensor sent per rank, where the exchange sends N - 1 times. Measured
// at 4 processes (allreduce_bench's "rd" column, docs/benchmarks.md): above
// the exchange from 4 KiB over tcp and shm (64 KiB: about 2.5x); at 256 KiB
// a little above the ring over tcp but well below it over shm, so the
// bound stays the exchange's.
inline bool UseDoublingAllReduce(size_t bytes, int world,
                                 size_t exchange_max_bytes = kExchangeAllReduceMaxBytes) {
  return world >= 4 && IsPowerOfTwo(world) && bytes <= exchange_max_bytes;
}

// True when a partial-sum all-reduce of `bytes` over `world` ranks uses the
// exchange under the limit `max_bytes` (0: never) and recursive doubling
// does not apply.
inline bool UseExchangeAllReduce(size_t bytes, int world,
                                 size_t max_bytes = kExchangeAllReduceMaxBytes) {
  return world > 1 && max_bytes > 0 && bytes <= max_bytes &&
         bytes * static_cast<size_t>(world - 1) <= kExchangeFanOut * max_bytes &&
         !UseDoublingAllReduce(bytes, world, max_bytes);
}

// Segment `index` of `count` elements over `world` ranks: [begin, end).
inline void RingSegmentBounds(size_t count, int world, int index, size_t* begin, size_t* end) {
  *begin = count * index / world;
  *end = count * (index + 1) / world;
}

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_RING_SEGMENTS_H_
