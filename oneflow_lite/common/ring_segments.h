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

// The exchange bound: partial-sum all-reduces of tensors of at most this
// many bytes (kTwoRankExchangeFactor times it between 2 ranks, half of it
// from 3 ranks) use the exchange
// all-reduce (comm/collective/exchange.h: every rank sends its whole buffer
// to every other in messages, one latency) instead of the ring (2 (N - 1)
// dependent steps), as long as what each rank sends, (N - 1) times the
// tensor, stays within kExchangeFanOut times the bound. Measured in
// tools/bench/allreduce_bench ("exch" and "plan" columns, 2-4 processes,
// docs/benchmarks.md): at 2 processes the exchange (pairwise there: the
// same bytes as the ring's two steps, in one) wins up to 256 KiB over tcp
// and shm (2026-12-05, four runs: 1.1-1.6x the ring over tcp, faster in
// three of four over shm), the ring from 1 MiB; from 3 processes
// scatter-gather (below) wins from 64 KiB.
inline constexpr size_t kExchangeAllReduceMaxBytes = 64 * 1024;
inline constexpr size_t kExchangeFanOut = 4;
inline constexpr size_t kTwoRankExchangeFactor = 4;
// From 3 ranks, scatter-gather takes the all-reduces above the exchange's
// and doubling's range up to this many times the exchange bound (512 KiB).
inline constexpr size_t kScatterGatherFactor = 8;

// The largest all-reduce the exchange takes over `world` ranks:
// kTwoRankExchangeFactor times the bound between 2, half of it from 3.
inline size_t SmallAllReduceMaxBytes(int world, size_t exchange_max_bytes) {
  return world == 2 ? kTwoRankExchangeFactor * exchange_max_bytes : exchange_max_bytes / 2;
}

// True for 1, 2, 4, 8, ...: the worlds recursive doubling pairs up.
inline bool IsPowerOfTwo(int world) { return world > 0 && (world & (world - 1)) == 0; }

// Over a power-of-2 world of 4 or more ranks, partial-sum all-reduces up to
// the exchange bound use recursive doubling instead (exchange.h,
// ExchangeSchedule::kDoubling): log2 N latencies and log2 N times the
// tensor sent per rank, where the exchange sends N - 1 times. Measured at
// 4 processes (allreduce_bench's "rd" column, docs/benchmarks.md): above
// the exchange from 4 KiB over tcp and shm; at 64 KiB above scatter-gather
// over tcp (by a third) and a little below it over shm (8 %), above both
// peers either way.
inline bool UseDoublingAllReduce(size_t bytes, int world,
                                 size_t exchange_max_bytes = kExchangeAllReduceMaxBytes) {
  return world >= 4 && IsPowerOfTwo(world) && bytes <= exchange_max_bytes;
}

// True when a partial-sum all-reduce of `bytes` over `world` ranks uses the
// exchange under the limit `max_bytes` (0: never) and recursive doubling
// does not apply.
inline bool UseExchangeAllReduce(size_t bytes, int world,
                                 size_t max_bytes = kExchangeAllReduceMaxBytes) {
  return world > 1 && max_bytes > 0 && bytes <= SmallAllReduceMaxBytes(world, max_bytes) &&
         bytes * static_cast<size_t>(world - 1) <= kExchangeFanOut * max_bytes &&
         !UseDoublingAllReduce(bytes, world, max_bytes);
}

// From 3 ranks, partial-sum all-reduces of at most kScatterGatherFactor
// times the exchange bound that neither the exchange nor recursive
// doubling takes use scatter-gather (exchange.h,
// ExchangeSchedule::kScatterGather: a reduce-scatter and an all-gather, each
// one step of direct messages): 2 latencies for the ring's bytes, where the
// ring takes 2 (N - 1) steps. Measured at 3 and 4 processes
// (allreduce_bench's "sg" column, docs/benchmarks.md): above the ring and
// the exchange from 64 KiB to 512 KiB over tcp and shm (level with them at
// 64 KiB over tcp at 3 processes and at 512 KiB over tcp at 3, 7 % below
// the ring at 512 KiB over shm at 4); the ring wins from 1 MiB. A bound
// of 0 turns it off with the exchange.
inline bool UseScatterGatherAllReduce(size_t bytes, int world,
                                      size_t exchange_max_bytes = kExchangeAllReduceMaxBytes) {
  return world >= 3 && exchange_max_bytes > 0 &&
         bytes <= kScatterGatherFactor * exchange_max_bytes &&
         !UseExchangeAllReduce(bytes, world, exchange_max_bytes) &&
         !UseDoublingAllReduce(bytes, world, exchange_max_bytes);
}

// Segment `index` of `count` elements over `world` ranks: [begin, end).
inline void RingSegmentBounds(size_t count, int world, int index, size_t* begin, size_t* end) {
  *begin = count * index / world;
  *end = count * (index + 1) / world;
}

}  // namespace oflite

#endif  // ONEFLOW_LITE_COMMON_RING_SEGMENTS_H_
