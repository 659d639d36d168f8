// ProfileRuntime on the real runtime, and ProfileTransports over real tcp
// and shm between real processes: this binary is also the rank program
// (its main runs `profile-rank`, as oflite's does). Checks structure and
// sanity (positive, finite, ascending, every algorithm), never speed.
#include "oneflow_lite/profile/transport_profiler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace oflite {
namespace profile {
namespace {

bool PositiveFinite(double value) { return std::isfinite(value) && value > 0; }

// Small and quick: a few sizes, 3 samples.
TransportProfileOptions SmallOptions(std::vector<std::string>* notes) {
  TransportProfileOptions options;
  options.transports = {"tcp", "shm"};
  options.ranks = {2};
  options.bytes = {4096, 65536, 1 << 20};
  options.samples = 3;
  options.stream_bytes = 1 << 20;
  options.budget = std::chrono::milliseconds(40000);
  options.op_timeout = std::chrono::milliseconds(20000);
  options.busy_messages = false;  // on in the test of its own figure
  options.note = [notes](const std::string& note) {
    std::fprintf(stderr, "note: %s\n", note.c_str());
    notes->push_back(note);
  };
  return options;
}

std::string Join(const std::vector<std::string>& notes) {
  std::string text;
  for (const std::string& note : notes) text += note + "\n";
  return text;
}

// Every algorithm of every rank count, once, with a point per size in
// ascending order, each positive and finite.
void ExpectCurves(const TransportCost& cost, const std::vector<int>& worlds,
                  const std::vector<int64_t>& bytes) {
  size_t expected_curves = 0;
  for (int world : worlds) {
    for (CollectiveAlgorithm algorithm : ProfiledAlgorithms(world)) {
      ++expected_curves;
      int found = 0;
      for (const CollectiveCurve& curve : cost.collective()) {
        if (curve.ranks() != world || curve.algorithm() != algorithm) continue;
        ++found;
        ASSERT_EQ(curve.point_size(), static_cast<int>(bytes.size()))
            << cost.name() << " " << CollectiveAlgorithm_Name(algorithm) << " at " << world;
        for (int i = 0; i < curve.point_size(); ++i) {
          EXPECT_EQ(curve.point(i).bytes(), bytes[i]);
          EXPECT_TRUE(PositiveFinite(curve.point(i).us()))
              << cost.name() << " " << CollectiveAlgorithm_Name(algorithm) << " "
              << curve.point(i).bytes() << " B: " << curve.point(i).us();
        }
      }
      EXPECT_EQ(found, 1) << cost.name() << " " << CollectiveAlgorithm_Name(algorithm) << " at "
                          << world << " ranks";
    }
  }
  EXPECT_EQ(static_cast<size_t>(cost.collective_size()), expected_curves) << cost.name();
}

// The busy-core estimate from phases worked out by hand: quiet phases spend
// 1 ms of their 150 off the core, messaging ones 5 ms with 100 answers, so
// each message took the core 40 us.
TEST(BusyMessageCostTest, TimeOffTheCoreOverTheAnswers) {
  std::vector<BusyPhase> phases;
  for (int i = 0; i < 9; ++i) {
    const bool messaging = i % 2 == 1;
    const double cpu = messaging ? 0.145 : 0.149;
    // Pass rates per CPU second that wander by +-2 % (the host's noise)
    // and lose nothing to messages on average.
    const double jitter = (i % 4 == 1) ? 1.02 : (i % 4 == 3 ? 0.98 : 1.0);
    phases.push_back({10000.0 * cpu * jitter, 0.150, cpu, messaging ? 100u : 0u});
  }
  BusyMessageCost cost = EstimateBusyMessageCost(phases);
  EXPECT_EQ(cost.phases, 4);
  EXPECT_NEAR(cost.taken_us, 40.0, 1e-6);
  // The slowed part is the jitter: +-29 us, quartiles on both sides of 0,
  // so it is not counted.
  EXPECT_FALSE(cost.slowed_counted) << cost.summary;
  EXPECT_NEAR(cost.us, 40.0, 1e-6);
  EXPECT_NE(cost.summary.find("not counted"), std::string::npos) << cost.summary;

  // Messages that also slow every pass by 2 % (a cache the path took) add
  // 0.02 x 145 ms / 100 = 29 us a message, which is counted.
  for (size_t i = 1; i < phases.size(); i += 2) phases[i].units = 10000.0 * 0.145 * 0.98;
  for (size_t i = 0; i < phases.size(); i += 2) phases[i].units = 10000.0 * 0.149;
  cost = EstimateBusyMessageCost(phases);
  EXPECT_TRUE(cost.slowed_counted) << cost.summary;
  EXPECT_NEAR(cost.slowed_us, 29.0, 1e-6);
  EXPECT_NEAR(cost.us, 69.0, 1e-6);
}

TEST(BusyMessageCostTest, PhasesWithoutAnswersAreSkipped) {
  std::vector<BusyPhase> phases(5, BusyPhase{1000, 0.150, 0.149, 0});
  EXPECT_EQ(EstimateBusyMessageCost(phases).phases, 0);
  phases[3].answered = 50;
  phases[3].cpu_seconds = 0.147;
  const BusyMessageCost cost = EstimateBusyMessageCost(phases);
  EXPECT_EQ(cost.phases, 1);
  EXPECT_NEAR(cost.taken_us, 2e3 / 50, 1e-6);
  // Too few phases for a busy probe at all: nothing, not a crash.
  EXPECT_EQ(EstimateBusyMessageCost({}).phases, 0);
  EXPECT_EQ(EstimateBusyMessageCost(std::vector<BusyPhase>(2)).phases, 0);
}

TEST(ProfiledAlgorithmsTest, DependOnTheRankCount) {
  EXPECT_EQ(ProfiledAlgorithms(2).size(), 4u);
  const std::vector<CollectiveAlgorithm> three = ProfiledAlgorithms(3);
  EXPECT_EQ(three.size(), 5u);
  EXPECT_EQ(three.back(), COLLECTIVE_SCATTER_GATHER_ALL_REDUCE);
  const std::vector<CollectiveAlgorithm> four = ProfiledAlgorithms(4);
  ASSERT_EQ(four.size(), 6u);
  EXPECT_EQ(four[4], COLLECTIVE_DOUBLING_ALL_REDUCE);
  EXPECT_EQ(ProfiledAlgorithms(6).size(), 5u);  // not a power of 2: no doubling
  EXPECT_EQ(DefaultProfileBytes().front(), 4096);
  EXPECT_EQ(DefaultProfileBytes().back(), 64 << 20);
  EXPECT_EQ(DefaultProfileBytes().size(), 8u);  // x4 apart
}

TEST(ProfileRuntimeTest, FiguresArePositiveAndFinite) {
  RuntimeProfileOptions options;  // the defaults (under a second): runs long enough to
                                  // span several scheduler slices on a busy host
  std::vector<std::string> notes;
  options.note = [&notes](const std::string& note) { notes.push_back(note); };
  StatusOr<RuntimeCost> cost = ProfileRuntime(options);
  // Spread notes may come on a busy machine; they are shown, not failed.
  for (const std::string& note : notes) std::fprintf(stderr, "note: %s\n", note.c_str());
  ASSERT_TRUE(cost.ok()) << cost.status();
  std::fprintf(stderr, "runtime: act %.3f us, message %.3f us, copy %.2f GB/s\n", cost->act_us(),
               cost->message_us(), cost->copy_gbyte_per_s());
  EXPECT_TRUE(PositiveFinite(cost->act_us()));
  EXPECT_TRUE(PositiveFinite(cost->message_us()));
  EXPECT_TRUE(PositiveFinite(cost->copy_gbyte_per_s()));
}

TEST(ProfileRuntimeTest, RefusesBadOptions) {
  RuntimeProfileOptions options;
  options.samples = 0;
  StatusOr<RuntimeCost> cost = ProfileRuntime(options);
  ASSERT_FALSE(cost.ok());
  EXPECT_EQ(cost.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(cost.status().message().find("samples"), std::string::npos) << cost.status();
  options = RuntimeProfileOptions();
  options.fan_in = 1;
  cost = ProfileRuntime(options);
  ASSERT_FALSE(cost.ok());
  EXPECT_NE(cost.status().message().find("fan_in"), std::string::npos) << cost.status();
}

TEST(ProfileTransportsTest, RefusesBadOptions) {
  std::vector<std::string> notes;
  struct Case {
    const char* name;
    std::function<void(TransportProfileOptions*)> mutate;
    const char* expected;  // in the message
  };
  const std::vector<Case> cases = {
      {"one rank",
       [](TransportProfileOptions* o) {
         o->ranks = {2, 1};
       },
       "ranks: 1 is below 2"},
      {"unknown transport",
       [](TransportProfileOptions* o) {
         o->transports = {"tcp", "udp"};
       },
       "unknown transport 'udp'"},
      {"transport twice",
       [](TransportProfileOptions* o) {
         o->transports = {"shm", "shm"};
       },
       "'shm' given twice"},
      {"no transport", [](TransportProfileOptions* o) { o->transports.clear(); },
       "transports: none"},
      {"odd size",
       [](TransportProfileOptions* o) {
         o->bytes = {4096, 6};
       },
       "bytes: 6"},
      {"no sample", [](TransportProfileOptions* o) { o->samples = 0; }, "samples: 0"},
      {"no budget", [](TransportProfileOptions* o) { o->budget = std::chrono::milliseconds(0); },
       "budget"},
  };
  for (const Case& c : cases) {
    TransportProfileOptions options = SmallOptions(&notes);
    c.mutate(&options);
    StatusOr<std::vector<TransportCost>> costs = ProfileTransports(options);
    ASSERT_FALSE(costs.ok()) << c.name;
    EXPECT_EQ(costs.status().code(), StatusCode::kInvalidArgument) << c.name;
    EXPECT_NE(costs.status().message().find(c.expected), std::string::npos)
        << c.name << ": " << costs.status();
  }
  EXPECT_TRUE(notes.empty()) << Join(notes);  // refused before any work
}

TEST(ProfileTransportsTest, TcpAndShmBetweenTwoProcesses) {
  std::vector<std::string> notes;
  TransportProfileOptions options = SmallOptions(&notes);
  // Every point must be measured, as below: with a thread computing on a
  // rank's core the tcp round trip read 2 ms, and 40 s left 1 MiB out.
  options.budget = std::chrono::seconds(240);
  options.busy_messages = true;
  StatusOr<std::vector<TransportCost>> costs = ProfileTransports(options);
  ASSERT_TRUE(costs.ok()) << costs.status() << "\n" << Join(notes);
  ASSERT_EQ(costs->size(), 2u) << Join(notes);
  EXPECT_EQ((*costs)[0].name(), "tcp");
  EXPECT_EQ((*costs)[1].name(), "shm");
  for (const TransportCost& cost : *costs) {
    std::fprintf(stderr,
                 "%s: latency %.2f us, stream %.2f GB/s, %.3f CPU ns per byte, %.1f us of a busy "
                 "core per message\n",
                 cost.name().c_str(), cost.latency_us(), cost.gbyte_per_s(),
                 cost.cpu_ns_per_byte(), cost.busy_message_us());
    EXPECT_TRUE(PositiveFinite(cost.latency_us())) << cost.name();
    EXPECT_TRUE(PositiveFinite(cost.gbyte_per_s())) << cost.name();
    // Moving a byte costs an end some CPU, and no more than all the CPUs
    // it may use for the byte's share of the stream's time (with a margin:
    // the CPU window also holds two barriers, the rate is a median).
    EXPECT_TRUE(PositiveFinite(cost.cpu_ns_per_byte())) << cost.name();
    const double cpus = std::max(1u, std::thread::hardware_concurrency());
    EXPECT_LT(cost.cpu_ns_per_byte(), 1.5 * cpus / cost.gbyte_per_s()) << cost.name();
    // A message costs a busy core at most a few time slices (0: not
    // measured, or no loss within the noise, each said in a note).
    EXPECT_TRUE(std::isfinite(cost.busy_message_us()) && cost.busy_message_us() >= 0 &&
                cost.busy_message_us() < 20000)
        << cost.name() << ": " << cost.busy_message_us();
    ExpectCurves(cost, {2}, options.bytes);
  }
  // The busy-core probe needs two cores and may read no loss on a quiet
  // host: its notes say so. Nothing else is noted.
  std::vector<std::string> others;
  for (const std::string& note : notes) {
    if (note.find("busy-core message cost") == std::string::npos) others.push_back(note);
  }
  EXPECT_TRUE(others.empty()) << Join(others);
}

// 3 and 4 processes: scatter-gather and recursive doubling join the
// curves; without 2 among the ranks the latency and stream get a 2-process
// run of their own.
TEST(ProfileTransportsTest, ShmAtThreeAndFourProcesses) {
  std::vector<std::string> notes;
  TransportProfileOptions options = SmallOptions(&notes);
  options.transports = {"shm"};
  options.ranks = {4, 3};
  options.bytes = {65536, 4096};  // given in any order; curves ascend
  // Every point must be measured: the budget only stands in for the
  // target's timeout. (40 s left 64 KiB out in CI beside other tests: 4
  // shm ranks on 2 busy cores took 2.3 s for the 4 KiB points, and the
  // budget's estimate scales that by the size.)
  options.budget = std::chrono::seconds(240);
  StatusOr<std::vector<TransportCost>> costs = ProfileTransports(options);
  ASSERT_TRUE(costs.ok()) << costs.status() << "\n" << Join(notes);
  ASSERT_EQ(costs->size(), 1u);
  const TransportCost& cost = (*costs)[0];
  EXPECT_TRUE(PositiveFinite(cost.latency_us()));
  EXPECT_TRUE(PositiveFinite(cost.gbyte_per_s()));
  ExpectCurves(cost, {3, 4}, {4096, 65536});
  EXPECT_TRUE(notes.empty()) << Join(notes);
}

// A size that cannot fit in the budget is left out with a note, the
// figures before it kept: from 4 KiB (which takes well over 0.1 ms: a
// dozen barriers and samples) the estimate for 64 MiB is over 1.6 s.
TEST(ProfileTransportsTest, SizesBeyondTheBudgetAreLeftOutWithANote) {
  std::vector<std::string> notes;
  TransportProfileOptions options = SmallOptions(&notes);
  options.transports = {"tcp"};
  options.bytes = {4096, 64 << 20};
  options.budget = std::chrono::milliseconds(1600);
  StatusOr<std::vector<TransportCost>> costs = ProfileTransports(options);
  ASSERT_TRUE(costs.ok()) << costs.status() << "\n" << Join(notes);
  ASSERT_EQ(costs->size(), 1u);
  EXPECT_TRUE(PositiveFinite((*costs)[0].latency_us()));
  ExpectCurves((*costs)[0], {2}, {4096});
  ASSERT_EQ(notes.size(), 1u) << Join(notes);
  EXPECT_NE(notes[0].find("tcp, 2 ranks: sizes from 64 MiB on not measured"), std::string::npos)
      << notes[0];
}

// Ranks that cannot start fail their runs, which become notes; with no
// figure at all the profile fails naming the runs. ibverbs without a
// device here is skipped with a note before any process starts.
TEST(ProfileTransportsTest, RanksThatCannotStartAreReported) {
  std::vector<std::string> notes;
  TransportProfileOptions options = SmallOptions(&notes);
  options.transports = {"ibverbs", "tcp"};
  options.bytes = {4096};
  options.budget = std::chrono::milliseconds(20000);
  options.executable = "/nonexistent/oflite";
  StatusOr<std::vector<TransportCost>> costs = ProfileTransports(options);
  ASSERT_FALSE(costs.ok());
  EXPECT_EQ(costs.status().code(), StatusCode::kUnavailable) << costs.status();
  EXPECT_NE(costs.status().message().find("tcp, 2 ranks"), std::string::npos) << costs.status();
  bool ibverbs_noted = false, tcp_noted = false;
  for (const std::string& note : notes) {
    ibverbs_noted |= note.rfind("ibverbs", 0) == 0;
    tcp_noted |= note.rfind("tcp, 2 ranks: failed", 0) == 0;
  }
  EXPECT_TRUE(ibverbs_noted) << Join(notes);  // skipped, or its run failed
  EXPECT_TRUE(tcp_noted) << Join(notes);
}

}  // namespace
}  // namespace profile
}  // namespace oflite

int main(int argc, char** argv) {
  // The rank processes ProfileTransports starts run this binary again.
  if (argc > 1 && !std::strcmp(argv[1], oflite::profile::kProfileRankCommand)) {
    return oflite::profile::RunTransportProfileRank(argc - 1, argv + 1);
  }
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
