// The compiler's collective algorithm choice over the conditions a ring
// needs: SBP pair, ring segments, ring order, machine count, dtype, size.
#include "oneflow_lite/compiler/collective_choice.h"

#include <gtest/gtest.h>

#include "oneflow_lite/common/ring_segments.h"
#include "oneflow_lite/common/id.h"
#include "oneflow_lite/cost/calibration.h"

#include <set>

namespace oflite {
namespace compiler {
namespace {

SbpParallel Split(int axis) {
  SbpParallel s;
  s.set_split_axis(axis);
  return s;
}
SbpParallel Broadcast() {
  SbpParallel s;
  s.set_broadcast(true);
  return s;
}
SbpParallel PartialSum() {
  SbpParallel s;
  s.set_partial_sum(true);
  return s;
}

int64_t TaskOn(int64_t machine) {
  TaskIdParts parts;
  parts.stream.machine = machine;
  parts.stream.device_type = DEVICE_CPU;
  parts.stream.stream = 4;
  parts.task_index = 3;
  return *EncodeTaskId(parts);
}

// A collective over one task per machine `machines[r]` (ring rank r).
BoxingConf Conf(const SbpParallel& in, const SbpParallel& out, const std::vector<int64_t>& dims,
                DataType dtype, const std::vector<int64_t>& machines) {
  BoxingConf conf;
  *conf.mutable_in_sbp()->add_sbp() = in;
  *conf.mutable_out_sbp()->add_sbp() = out;
  for (int64_t d : dims) conf.mutable_logical_desc()->mutable_shape()->add_dim(d);
  conf.mutable_logical_desc()->set_dtype(dtype);
  for (int64_t m : machines) conf.add_ring_task_id(TaskOn(m));
  conf.set_parallel_num(static_cast<int64_t>(machines.size()));
  return conf;
}

CollectiveAlgorithm Choose(const BoxingConf& conf, int64_t machines) {
  return ChooseCollective(conf, machines).algorithm();
}

TEST(CollectiveChoiceTest, SbpPairsAndSegments) {
  const std::vector<int64_t> two = {0, 1};
  EXPECT_EQ(Choose(Conf(PartialSum(), Broadcast(), {4, 3}, DT_FLOAT, two), 2),
            COLLECTIVE_RING_ALL_REDUCE);
  // 4 rows over 2: rows [0,2) = elements [0,6) = ring segment 0.
  EXPECT_EQ(Choose(Conf(PartialSum(), Split(0), {4, 3}, DT_FLOAT, two), 2),
            COLLECTIVE_RING_REDUCE_SCATTER);
  EXPECT_EQ(Choose(Conf(Split(0), Broadcast(), {4, 3}, DT_FLOAT, two), 2),
            COLLECTIVE_RING_ALL_GATHER);
  // 3 rows of 2 over 2: rows [0,2) = 4 elements, ring segment 0 = 3.
  EXPECT_EQ(Choose(Conf(PartialSum(), Split(0), {3, 2}, DT_FLOAT, two), 2),
            COLLECTIVE_RING_ALL_REDUCE);
  EXPECT_EQ(Choose(Conf(Split(0), Broadcast(), {3, 2}, DT_FLOAT, two), 2), COLLECTIVE_ALL_TO_ALL);
  EXPECT_EQ(Choose(Conf(PartialSum(), Split(1), {4, 4}, DT_FLOAT, two), 2),
            COLLECTIVE_RING_ALL_REDUCE);
  EXPECT_EQ(Choose(Conf(Split(1), Broadcast(), {4, 4}, DT_FLOAT, two), 2), COLLECTIVE_ALL_TO_ALL);
  EXPECT_EQ(Choose(Conf(Split(0), Split(1), {4, 4}, DT_FLOAT, two), 2), COLLECTIVE_ALL_TO_ALL);
  EXPECT_EQ(Choose(Conf(Broadcast(), Split(0), {4, 4}, DT_FLOAT, two), 2), COLLECTIVE_ALL_TO_ALL);
}

TEST(CollectiveChoiceTest, RingNeedsDistinctMachinesAnAddableDtypeAndElements) {
  const BoxingConf good = Conf(PartialSum(), Broadcast(), {5}, DT_FLOAT, {0, 1, 2});
  EXPECT_EQ(Choose(good, 3), COLLECTIVE_RING_ALL_REDUCE);
  // A group of the cluster's machines (one axis of a 2-D placement), in
  // any order: the communicator runs over those ranks in ring order.
  EXPECT_EQ(Choose(good, 4), COLLECTIVE_RING_ALL_REDUCE);
  EXPECT_EQ(Choose(Conf(PartialSum(), Broadcast(), {5}, DT_FLOAT, {1, 0, 2}), 3),
            COLLECTIVE_RING_ALL_REDUCE);
  EXPECT_EQ(Choose(Conf(PartialSum(), Broadcast(), {5}, DT_FLOAT, {1, 3}), 4),
            COLLECTIVE_RING_ALL_REDUCE);
  // Two ring tasks on one machine, or a machine outside the cluster.
  EXPECT_EQ(Choose(Conf(PartialSum(), Broadcast(), {5}, DT_FLOAT, {0, 0, 2}), 3),
            COLLECTIVE_ALL_TO_ALL);
  EXPECT_EQ(Choose(Conf(PartialSum(), Broadcast(), {5}, DT_FLOAT, {0, 3}), 3),
            COLLECTIVE_ALL_TO_ALL);
  EXPECT_EQ(Choose(Conf(PartialSum(), Broadcast(), {5}, DT_FLOAT, {0}), 1),
            COLLECTIVE_ALL_TO_ALL);  // one rank: no ring
  for (DataType dtype : {DT_DOUBLE, DT_INT32, DT_INT64}) {
    EXPECT_EQ(Choose(Conf(PartialSum(), Broadcast(), {5}, dtype, {0, 1, 2}), 3),
              COLLECTIVE_RING_ALL_REDUCE);
  }
  EXPECT_EQ(Choose(Conf(PartialSum(), Broadcast(), {5}, DT_INT8, {0, 1, 2}), 3),
            COLLECTIVE_ALL_TO_ALL);
  EXPECT_EQ(Choose(Conf(PartialSum(), Broadcast(), {0, 5}, DT_FLOAT, {0, 1, 2}), 3),
            COLLECTIVE_ALL_TO_ALL);
}

TEST(CollectiveChoiceTest, RingRecordsItsBuffers) {
  const CollectiveConf ring =
      ChooseCollective(Conf(PartialSum(), Broadcast(), {6, 7}, DT_DOUBLE, {0, 1}), 2);
  EXPECT_EQ(ring.buffer_bytes(), 6 * 7 * 8);
  EXPECT_EQ(ring.element_count(), 42);
  EXPECT_EQ(ring.chunk_bytes(), static_cast<int64_t>(kDefaultRingChunkBytes));
  EXPECT_EQ(ring.slots(), kDefaultRingSlots);
  const CollectiveConf all_to_all =
      ChooseCollective(Conf(Split(1), Broadcast(), {6, 7}, DT_DOUBLE, {0, 1}), 2);
  EXPECT_EQ(all_to_all.algorithm(), COLLECTIVE_ALL_TO_ALL);
  EXPECT_EQ(all_to_all.buffer_bytes(), 0);
  EXPECT_EQ(all_to_all.chunk_bytes(), 0);
}

// The stated-link model ranks only what the size rule allows at a size,
// by latencies, messages and bytes at the link's rate.
TEST(CollectiveChoiceTest, StatedLinkModelRanksTheSizeRulesAlgorithms) {
  const std::vector<int64_t> two = {0, 1};
  const std::vector<int64_t> three = {0, 1, 2};
  const std::vector<int64_t> four = {0, 1, 2, 3};
  auto on = [](double gbit) {
    LinkSpec link;
    link.set_gbit_per_s(gbit);
    link.set_latency_us(8);
    return [link](CollectiveAlgorithm a, int64_t n, int64_t bytes) {
      return cost::StatedLinkCollectiveUs(link, 65536, a, static_cast<int>(n), bytes);
    };
  };
  // By hand at 1 Gbit/s (125 bytes a us), 64 KiB over 4 ranks: doubling
  // 2 x 18 + 2 x 10 + 131072 / 125 = 1104.6 us; scatter-gather 2 x 18 +
  // 6 x 10 + 98304 / 125 = 882.4; the ring 6 x 18 + 60 + 786.4 = 954.4.
  LinkSpec gbit;
  gbit.set_gbit_per_s(1);
  gbit.set_latency_us(8);
  EXPECT_NEAR(cost::StatedLinkCollectiveUs(gbit, 65536, COLLECTIVE_DOUBLING_ALL_REDUCE, 4, 65536),
              1104.576, 1e-3);
  EXPECT_NEAR(
      cost::StatedLinkCollectiveUs(gbit, 65536, COLLECTIVE_SCATTER_GATHER_ALL_REDUCE, 4, 65536),
      882.432, 1e-3);
  EXPECT_NEAR(cost::StatedLinkCollectiveUs(gbit, 65536, COLLECTIVE_RING_ALL_REDUCE, 4, 65536),
              954.432, 1e-3);
  auto k64 = Conf(PartialSum(), Broadcast(), {128, 128}, DT_FLOAT, four);
  EXPECT_EQ(ChooseCollective(k64, 4, 65536, on(1)).algorithm(),
            COLLECTIVE_SCATTER_GATHER_ALL_REDUCE);
  EXPECT_EQ(ChooseCollective(k64, 4, 65536, on(10)).algorithm(), COLLECTIVE_DOUBLING_ALL_REDUCE);
  // 3 ranks, 16 KiB: the exchange sends twice the tensor in one step,
  // scatter-gather 4/3 of it in two: the exchange at 10 Gbit/s only.
  auto k16 = Conf(PartialSum(), Broadcast(), {64, 64}, DT_FLOAT, three);
  ASSERT_EQ(ChooseCollective(k16, 3, 65536).algorithm(), COLLECTIVE_EXCHANGE_ALL_REDUCE);
  EXPECT_EQ(ChooseCollective(k16, 3, 65536, on(10)).algorithm(), COLLECTIVE_EXCHANGE_ALL_REDUCE);
  EXPECT_EQ(ChooseCollective(k16, 3, 65536, on(1)).algorithm(),
            COLLECTIVE_SCATTER_GATHER_ALL_REDUCE);
  // 2 ranks: the exchange sends what the ring sends in one step: kept.
  auto k256 = Conf(PartialSum(), Broadcast(), {256, 256}, DT_FLOAT, two);
  EXPECT_EQ(ChooseCollective(k256, 2, 65536, on(1)).algorithm(), COLLECTIVE_EXCHANGE_ALL_REDUCE);
  // Above the rule's bounds only the ring is a candidate (1 MiB over 4).
  auto m1 = Conf(PartialSum(), Broadcast(), {512, 512}, DT_FLOAT, four);
  EXPECT_EQ(ChooseCollective(m1, 4, 65536, on(1)).algorithm(), COLLECTIVE_RING_ALL_REDUCE);
  EXPECT_LT(cost::StatedLinkCollectiveUs(gbit, 65536, COLLECTIVE_SCATTER_GATHER_ALL_REDUCE, 4,
                                         1 << 20),
            0);
  // Sending more bytes than the rule's pick, an algorithm is no candidate:
  // the exchange at 4 ranks, even for a tiny tensor it would take in one
  // step, leaves recursive doubling its measured lead.
  EXPECT_LT(cost::StatedLinkCollectiveUs(gbit, 65536, COLLECTIVE_EXCHANGE_ALL_REDUCE, 4, 512), 0);
  auto tiny = Conf(PartialSum(), Broadcast(), {128}, DT_FLOAT, four);
  EXPECT_EQ(ChooseCollective(tiny, 4, 65536, on(1)).algorithm(), COLLECTIVE_DOUBLING_ALL_REDUCE);
  // No stated rate, or the exchange bound 0: no figure, the size rule.
  LinkSpec unstated;
  EXPECT_LT(cost::StatedLinkCollectiveUs(unstated, 65536, COLLECTIVE_RING_ALL_REDUCE, 4, 65536),
            0);
  EXPECT_LT(cost::StatedLinkCollectiveUs(gbit, 0, COLLECTIVE_RING_ALL_REDUCE, 4, 65536), 0);
}

}  // namespace
}  // namespace compiler
}  // namespace oflite

namespace oflite {
namespace compiler {
namespace {

// Partial-sum conversions of at most exchange_max_bytes bytes (4x it
// between 2 ranks, half of it from 3 ranks), of which each rank sends (N - 1) copies within 4x that
// bound, use the exchange all-reduce, and over 4, 8, ... ranks up to the
// bound (whatever the fan-out) recursive doubling; from 3 ranks larger
// ones up to 8x the bound scatter-gather; larger ones, gathers and a
// threshold of 0 keep the ring.
TEST(CollectiveChoiceTest, SmallPartialSumsUseTheExchange) {
  const std::vector<int64_t> two = {0, 1};
  const std::vector<int64_t> four = {0, 1, 2, 3};
  // 4 x 3 floats = 48 bytes.
  auto p_to_b = Conf(PartialSum(), Broadcast(), {4, 3}, DT_FLOAT, two);
  CollectiveConf exchange = ChooseCollective(p_to_b, 2, 48);
  EXPECT_EQ(exchange.algorithm(), COLLECTIVE_EXCHANGE_ALL_REDUCE);
  EXPECT_EQ(exchange.buffer_bytes(), 48);
  EXPECT_EQ(exchange.element_count(), 12);
  EXPECT_EQ(exchange.chunk_bytes(), 0);
  EXPECT_EQ(exchange.slots(), 0);
  // Between 2 ranks up to kTwoRankExchangeFactor (4) times the bound: 48
  // bytes take the exchange from a bound of 12, the ring below it.
  EXPECT_EQ(ChooseCollective(p_to_b, 2, 12).algorithm(), COLLECTIVE_EXCHANGE_ALL_REDUCE);
  EXPECT_EQ(ChooseCollective(p_to_b, 2, 11).algorithm(), COLLECTIVE_RING_ALL_REDUCE);
  EXPECT_EQ(ChooseCollective(p_to_b, 2, 0).algorithm(), COLLECTIVE_RING_ALL_REDUCE);
  // Powers of 2 from 4 ranks: recursive doubling up to the bound, whatever
  // the fan-out (a bound of 0 turns it off with the exchange); above it,
  // scatter-gather (below).
  auto p_to_b4 = Conf(PartialSum(), Broadcast(), {4, 3}, DT_FLOAT, four);
  CollectiveConf doubling = ChooseCollective(p_to_b4, 4, 48);
  EXPECT_EQ(doubling.algorithm(), COLLECTIVE_DOUBLING_ALL_REDUCE);
  EXPECT_EQ(doubling.buffer_bytes(), 48);
  EXPECT_EQ(doubling.chunk_bytes(), 0);
  EXPECT_EQ(ChooseCollective(p_to_b4, 4, 47).algorithm(), COLLECTIVE_SCATTER_GATHER_ALL_REDUCE);
  EXPECT_EQ(ChooseCollective(p_to_b4, 4, 0).algorithm(), COLLECTIVE_RING_ALL_REDUCE);
  const std::vector<int64_t> eight = {0, 1, 2, 3, 4, 5, 6, 7};
  auto p_to_b8 = Conf(PartialSum(), Broadcast(), {4, 3}, DT_FLOAT, eight);
  EXPECT_EQ(ChooseCollective(p_to_b8, 8, 48).algorithm(), COLLECTIVE_DOUBLING_ALL_REDUCE);
  // Other worlds from 3 ranks: the exchange up to half the bound, each of 3
  // ranks sending 2 x 48 bytes (within 4 x 96); each of 6 would send 5 x
  // 48 = 240: the fan-out bound needs a limit of 60 (and 96 for the half).
  const std::vector<int64_t> three = {0, 1, 2};
  auto p_to_b3 = Conf(PartialSum(), Broadcast(), {4, 3}, DT_FLOAT, three);
  EXPECT_EQ(ChooseCollective(p_to_b3, 3, 96).algorithm(), COLLECTIVE_EXCHANGE_ALL_REDUCE);
  const std::vector<int64_t> six = {0, 1, 2, 3, 4, 5};
  auto p_to_b6 = Conf(PartialSum(), Broadcast(), {4, 3}, DT_FLOAT, six);
  EXPECT_EQ(ChooseCollective(p_to_b6, 6, 96).algorithm(), COLLECTIVE_EXCHANGE_ALL_REDUCE);
  // Above half the bound (and where the fan-out bars the exchange) up to 8
  // times it: scatter-gather, no chunks, no slots; beyond, the ring.
  CollectiveConf scatter_gather = ChooseCollective(p_to_b3, 3, 95);
  EXPECT_EQ(scatter_gather.algorithm(), COLLECTIVE_SCATTER_GATHER_ALL_REDUCE);
  EXPECT_EQ(scatter_gather.buffer_bytes(), 48);
  EXPECT_EQ(scatter_gather.element_count(), 12);
  EXPECT_EQ(scatter_gather.chunk_bytes(), 0);
  EXPECT_EQ(scatter_gather.slots(), 0);
  EXPECT_EQ(ChooseCollective(p_to_b3, 3, 6).algorithm(), COLLECTIVE_SCATTER_GATHER_ALL_REDUCE);
  EXPECT_EQ(ChooseCollective(p_to_b3, 3, 5).algorithm(), COLLECTIVE_RING_ALL_REDUCE);
  EXPECT_EQ(ChooseCollective(p_to_b3, 3, 0).algorithm(), COLLECTIVE_RING_ALL_REDUCE);
  EXPECT_EQ(ChooseCollective(p_to_b6, 6, 95).algorithm(), COLLECTIVE_SCATTER_GATHER_ALL_REDUCE);
  EXPECT_EQ(ChooseCollective(p_to_b4, 4, 6).algorithm(), COLLECTIVE_SCATTER_GATHER_ALL_REDUCE);
  EXPECT_EQ(ChooseCollective(p_to_b8, 8, 6).algorithm(), COLLECTIVE_SCATTER_GATHER_ALL_REDUCE);
  // Not at 2 ranks (the ring's schedule there), and not for a P -> S the
  // ring runs as a reduce-scatter: {6, 2} cuts at the ring's segments.
  EXPECT_EQ(ChooseCollective(p_to_b, 2, 6).algorithm(), COLLECTIVE_RING_ALL_REDUCE);
  EXPECT_EQ(ChooseCollective(Conf(PartialSum(), Split(0), {6, 2}, DT_FLOAT, three), 3, 8)
                .algorithm(),
            COLLECTIVE_RING_REDUCE_SCATTER);
  // The default bounds: 3 ranks, 32 KiB exchange, 32 KiB + 4 to 512 KiB
  // scatter-gather, then the ring.
  for (const auto& [floats, want] :
       {std::pair{int64_t{8192}, COLLECTIVE_EXCHANGE_ALL_REDUCE},
        std::pair{int64_t{8193}, COLLECTIVE_SCATTER_GATHER_ALL_REDUCE},
        std::pair{int64_t{131072}, COLLECTIVE_SCATTER_GATHER_ALL_REDUCE},
        std::pair{int64_t{131073}, COLLECTIVE_RING_ALL_REDUCE}}) {
    EXPECT_EQ(ChooseCollective(Conf(PartialSum(), Broadcast(), {floats}, DT_FLOAT, three), 3,
                               static_cast<int64_t>(kExchangeAllReduceMaxBytes))
                  .algorithm(),
              want)
        << floats;
  }
  // P -> S over 4 ranks: recursive doubling, then cut.
  EXPECT_EQ(ChooseCollective(Conf(PartialSum(), Split(0), {4, 3}, DT_FLOAT, four), 4, 1024)
                .algorithm(),
            COLLECTIVE_DOUBLING_ALL_REDUCE);
  // P -> S: exchange, then cut (as the ring all-reduce path does).
  EXPECT_EQ(ChooseCollective(Conf(PartialSum(), Split(0), {4, 3}, DT_FLOAT, two), 2, 1024)
                .algorithm(),
            COLLECTIVE_EXCHANGE_ALL_REDUCE);
  // Gathers and all-to-all are untouched.
  EXPECT_EQ(ChooseCollective(Conf(Split(0), Broadcast(), {4, 3}, DT_FLOAT, two), 2, 1024)
                .algorithm(),
            COLLECTIVE_RING_ALL_GATHER);
  EXPECT_EQ(ChooseCollective(Conf(PartialSum(), Broadcast(), {5}, DT_INT8, {0, 1}), 2, 1024)
                .algorithm(),
            COLLECTIVE_ALL_TO_ALL);
}

}  // namespace
}  // namespace compiler
}  // namespace oflite

namespace oflite {
namespace compiler {
namespace {

TEST(CollectiveChoiceTest, ACalibratedModelPicksItsFastestAlgorithm) {
  const std::vector<int64_t> two = {0, 1};
  const std::vector<int64_t> four = {0, 1, 2, 3};
  // 1 MiB of floats: the size rule says ring.
  auto big = Conf(PartialSum(), Broadcast(), {512, 512}, DT_FLOAT, two);
  ASSERT_EQ(ChooseCollective(big, 2, 65536).algorithm(), COLLECTIVE_RING_ALL_REDUCE);
  // A model in which the exchange is faster at this size (as shm measured
  // at 2 processes): the exchange, with no ring buffers.
  CollectiveTimeFn exchange_wins = [](CollectiveAlgorithm a, int64_t, int64_t) {
    return a == COLLECTIVE_EXCHANGE_ALL_REDUCE ? 100.0 : 200.0;
  };
  CollectiveConf chosen = ChooseCollective(big, 2, 65536, exchange_wins);
  EXPECT_EQ(chosen.algorithm(), COLLECTIVE_EXCHANGE_ALL_REDUCE);
  EXPECT_EQ(chosen.buffer_bytes(), 1 << 20);
  EXPECT_EQ(chosen.chunk_bytes(), 0);
  // A model in which the ring is faster keeps the ring with its chunks.
  CollectiveTimeFn ring_wins = [](CollectiveAlgorithm a, int64_t, int64_t) {
    return a == COLLECTIVE_RING_ALL_REDUCE ? 1.0 : 9.0;
  };
  CollectiveConf ring = ChooseCollective(big, 2, 65536, ring_wins);
  EXPECT_EQ(ring.algorithm(), COLLECTIVE_RING_ALL_REDUCE);
  EXPECT_GT(ring.chunk_bytes(), 0);
  // Doubling only on power-of-2 rings of 4 or more; scatter-gather from 3.
  std::set<CollectiveAlgorithm> asked;
  CollectiveTimeFn record = [&](CollectiveAlgorithm a, int64_t, int64_t) {
    asked.insert(a);
    return a == COLLECTIVE_DOUBLING_ALL_REDUCE ? 1.0 : 5.0;
  };
  ChooseCollective(big, 2, 65536, record);
  EXPECT_FALSE(asked.count(COLLECTIVE_DOUBLING_ALL_REDUCE));
  EXPECT_FALSE(asked.count(COLLECTIVE_SCATTER_GATHER_ALL_REDUCE));
  auto big4 = Conf(PartialSum(), Broadcast(), {512, 512}, DT_FLOAT, four);
  EXPECT_EQ(ChooseCollective(big4, 4, 65536, record).algorithm(), COLLECTIVE_DOUBLING_ALL_REDUCE);
  EXPECT_TRUE(asked.count(COLLECTIVE_SCATTER_GATHER_ALL_REDUCE));
  // A model that knows nothing leaves the size rule; non-reducing
  // conversions are never asked about.
  CollectiveTimeFn unknown = [](CollectiveAlgorithm, int64_t, int64_t) { return -1.0; };
  EXPECT_EQ(ChooseCollective(big, 2, 65536, unknown).algorithm(), COLLECTIVE_RING_ALL_REDUCE);
  auto gather = Conf(Split(0), Broadcast(), {512, 512}, DT_FLOAT, two);
  EXPECT_EQ(ChooseCollective(gather, 2, 65536, exchange_wins).algorithm(),
            COLLECTIVE_RING_ALL_GATHER);
}

}  // namespace
}  // namespace compiler
}  // namespace oflite
