#include "tools/oflite/trace_file.h"

#include <unistd.h>

#include <string>

#include "gtest/gtest.h"
#include "oneflow_lite/common/trace/trace.h"
#include "tools/oflite/trace_summary.h"
#include "oneflow_lite/session/trace_support.h"

namespace oflite {
namespace cli {
namespace {

constexpr int64_t kUs = 1000;  // ns

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(TraceItersTest, ParsesAWindowAndNamesTheFlag) {
  int64_t first = 0, end = 0;
  ASSERT_TRUE(session::ParseTraceIters("4:16", &first, &end).ok());
  EXPECT_EQ(first, 4);
  EXPECT_EQ(end, 16);
  for (const char* bad : {"16:4", "3:3", "x:1", "5", "-1:2", ":"}) {
    Status status = session::ParseTraceIters(bad, &first, &end);
    EXPECT_FALSE(status.ok()) << bad;
    EXPECT_NE(status.message().find("--trace-iters"), std::string::npos) << status.ToString();
  }
}

// Three iterations, 1000 us apart, on one stream thread: a 600 us handling
// holding a 500 us act holding a 400 us kernel.
void ThreeIterations(trace::Tracer* tracer, int64_t at_ns) {
  trace::Track* track = tracer->AddTrack("m0/cpu0/s0");
  for (int i = 0; i < 3; ++i) {
    const int64_t t = at_ns + i * 1000 * kUs;
    track->AddSlice("kernel", "matmul", t + 100 * kUs, t + 500 * kUs);
    track->AddSlice("act", "fc", t + 50 * kUs, t + 550 * kUs, "\"iteration\":" + std::to_string(i));
    track->AddSlice("handle", "fc", t, t + 600 * kUs,
                    "\"message\":\"produced r1[0] iteration " + std::to_string(i) +
                        " from m0/cpu0/s0/1\",\"actor\":2,\"from\":1,\"message_iteration\":" +
                        std::to_string(i));
  }
}

TEST(TraceSummaryTest, AccountsEveryThreadMicrosecond) {
  trace::Tracer tracer(trace::TracerOptions{});
  ThreeIterations(&tracer, tracer.origin_ns());
  const std::string path = TempPath("three.json");
  ASSERT_TRUE(tracer.WriteJson(path, trace::TraceClock{}).ok());
  StatusOr<TraceFile> file = ReadTraceFile(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const TraceSummary summary = Summarize(*file);
  ASSERT_EQ(summary.ranks.size(), 1u);
  const RankSummary& rank = summary.ranks[0];
  EXPECT_EQ(rank.iterations, 3);
  EXPECT_NEAR(rank.step_us, 1000, 1e-6);
  EXPECT_NEAR(rank.span_us, 2600, 1e-6);
  EXPECT_NEAR(rank.ops.at("matmul").total_us, 1200, 1e-6);
  EXPECT_EQ(rank.ops.at("matmul").count, 3);
  // Window: end of iteration 0 (600) to end of iteration 2 (2600), 2 steps.
  EXPECT_NEAR(rank.kernel_per_iter_us, 400, 1e-6);
  EXPECT_NEAR(rank.runtime_per_iter_us, 200, 1e-6);
  EXPECT_NEAR(rank.idle_per_iter_us, 400, 1e-6);
  EXPECT_EQ(rank.actors.at("fc").acts, 3);
  EXPECT_EQ(summary.critical_iteration, 1);
  ASSERT_EQ(summary.critical_path.size(), 1u);  // actor 1 left no trace
  EXPECT_NEAR(summary.critical_path[0].dur_us, 600, 1e-6);
  EXPECT_NEAR(summary.critical_path_us, 600, 1e-6);
  EXPECT_NE(SummaryText(summary).find("matmul"), std::string::npos);
}

// Level acts: no handle slices, so each act stands for the handling of the
// message that let it run. Per iteration, on one thread: act "a" (task 1,
// enabled by a returned register) then act "b" (task 2, enabled by a's
// produced register, ready_from 1) 100 us later.
TEST(TraceSummaryTest, ActsStandForTheirHandlingsAtLevelActs) {
  trace::Tracer tracer(trace::TracerOptions{});  // level acts
  trace::Track* track = tracer.AddTrack("m0/cpu0/s0");
  const int64_t at = tracer.origin_ns();
  for (int i = 0; i < 3; ++i) {
    const int64_t t = at + i * 1000 * kUs;
    const std::string it = std::to_string(i);
    track->AddSlice("kernel", "produce", t + 10 * kUs, t + 290 * kUs);
    track->AddSlice("act", "a", t, t + 300 * kUs,
                    "\"iteration\":" + it + ",\"task\":1,\"ready_after\":\"returned r1[0] "
                    "iteration " + it + " by m0/cpu0/s0/t2\",\"ready_from\":2");
    track->AddSlice("kernel", "consume", t + 410 * kUs, t + 590 * kUs);
    track->AddSlice("act", "b", t + 400 * kUs, t + 600 * kUs,
                    "\"iteration\":" + it + ",\"task\":2,\"ready_after\":\"produced r1[0] "
                    "iteration " + it + " from m0/cpu0/s0/t1\",\"ready_from\":1");
  }
  const std::string path = TempPath("acts.json");
  ASSERT_TRUE(tracer.WriteJson(path, trace::TraceClock{}).ok());
  StatusOr<TraceFile> file = ReadTraceFile(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const TraceSummary summary = Summarize(*file);
  EXPECT_EQ(summary.trace_level, "acts");
  ASSERT_EQ(summary.ranks.size(), 1u);
  const RankSummary& rank = summary.ranks[0];
  // Each act counts as one handled message, with the act's time.
  EXPECT_EQ(rank.actors.at("a").count, 3);
  EXPECT_EQ(rank.actors.at("a").acts, 3);
  EXPECT_NEAR(rank.actors.at("b").total_us, 3 * 200, 1e-6);
  // b waited 100 us for a's produced register; a starts the path (a
  // returned register ends it).
  EXPECT_EQ(summary.critical_iteration, 1);
  ASSERT_EQ(summary.critical_path.size(), 2u);
  EXPECT_EQ(summary.critical_path[0].actor, "a");
  EXPECT_EQ(summary.critical_path[1].actor, "b");
  EXPECT_NEAR(summary.critical_path[1].wait_us, 100, 1e-6);
  EXPECT_EQ(summary.critical_path[1].message.rfind("produced r1[0] iteration 1", 0), 0u);
  EXPECT_NEAR(summary.critical_path_us, 600, 1e-6);
  EXPECT_NE(SummaryText(summary).find("trace level: acts"), std::string::npos);
}

// Two ranks of a data-parallel step: grad -> all-reduce -> update, where
// rank 1's gradient takes 1500 us and rank 0's 300 us. Rank 0's update ends
// last, but its all-reduce could only finish once rank 1 had started it,
// so the critical path runs through rank 1's gradient.
void DataParallelRank(int rank, int64_t base_ns, const std::string& path) {
  trace::TracerOptions options;
  options.rank = rank;
  options.messages = true;
  trace::Tracer tracer(options);
  trace::Track* track = tracer.AddTrack("m" + std::to_string(rank) + "/cpu0/s0");
  const std::string r = std::to_string(rank);
  const int64_t grad_us = rank == 0 ? 300 : 1500;
  auto handle = [&](const std::string& actor, int64_t id, int64_t from, int64_t begin,
                    int64_t end, const std::string& message, int i) {
    track->AddSlice("handle", actor, begin, end,
                    "\"message\":\"" + message + "\",\"actor\":" + std::to_string(id) +
                        ",\"from\":" + std::to_string(from) +
                        ",\"message_iteration\":" + std::to_string(i));
  };
  for (int i = 0; i < 3; ++i) {
    const int64_t t = base_ns + i * 5000 * kUs;  // one clock for both ranks
    const std::string it = std::to_string(i);
    const std::string iteration = "\"iteration\":" + it;
    handle("grad@" + r, 10 + rank, 40 + rank, t, t + grad_us * kUs,
           "produced r1[0] iteration " + it + " from m" + r + "/cpu0/s0/t40", i);
    track->AddSlice("act", "grad@" + r, t + kUs, t + (grad_us - 1) * kUs, iteration);
    handle("collective:all_reduce:g@" + r, 20 + rank, 10 + rank, t + (grad_us + 10) * kUs,
           t + (grad_us + 20) * kUs, "produced r2[0] iteration " + it + " from m" + r, i);
    handle("collective:all_reduce:g@" + r, 20 + rank, -1, t + 3000 * kUs, t + 3010 * kUs,
           "wake-up (its asynchronous work finished)", i);
    const int64_t update_end = rank == 0 ? 3195 : 3190;
    handle("update@" + r, 30 + rank, 20 + rank, t + 3100 * kUs, t + (update_end + 1) * kUs,
           "produced r3[0] iteration " + it + " from m" + r, i);
    track->AddSlice("act", "update@" + r, t + 3110 * kUs, t + update_end * kUs, iteration);
  }
  ASSERT_TRUE(tracer.WriteJson(path, trace::TraceClock{}).ok());
}

TEST(TraceSummaryTest, CriticalPathCrossesToTheRankACollectiveWaitedFor) {
  const std::string rank0 = TempPath("dp-0.json"), rank1 = TempPath("dp-1.json");
  const std::string merged = TempPath("dp.json");
  const int64_t base_ns = trace::NowNs() + 1000000 * kUs;  // after both tracers' origins
  DataParallelRank(0, base_ns, rank0);
  DataParallelRank(1, base_ns, rank1);
  ASSERT_TRUE(MergeRankTraces({rank0, rank1}, merged).ok());
  StatusOr<TraceFile> file = ReadTraceFile(merged);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  const TraceSummary summary = Summarize(*file);
  EXPECT_EQ(summary.trace_level, "messages");
  EXPECT_EQ(summary.critical_iteration, 1);
  ASSERT_EQ(summary.critical_path.size(), 4u) << SummaryText(summary);
  EXPECT_EQ(summary.critical_path[0].actor, "grad@1");
  EXPECT_EQ(summary.critical_path[0].rank, 1);
  EXPECT_EQ(summary.critical_path[1].actor, "collective:all_reduce:g@1");
  EXPECT_EQ(summary.critical_path[2].actor, "collective:all_reduce:g@0");
  EXPECT_EQ(summary.critical_path[2].message.rfind("wake-up", 0), 0u);
  EXPECT_EQ(summary.critical_path[3].actor, "update@0");
}

TEST(TraceMergeTest, ShiftsEachRankOntoRankZerosClock) {
  trace::TracerOptions options;
  trace::Tracer rank0(options);
  options.rank = 1;
  trace::Tracer rank1(options);
  // Rank 1's clock runs 5 ms behind rank 0's: offset +5 ms.
  rank0.AddTrack("m0/cpu0/s0")
      ->AddSlice("act", "a", rank0.origin_ns() + 100 * kUs, rank0.origin_ns() + 200 * kUs);
  rank1.AddTrack("m1/cpu0/s0")
      ->AddSlice("act", "b", rank1.origin_ns() + 100 * kUs, rank1.origin_ns() + 200 * kUs);
  trace::TraceClock clock1;
  clock1.offset_ns = 5000 * kUs;
  clock1.uncertainty_ns = 7;
  const std::string p0 = TempPath("rank-0.json"), p1 = TempPath("rank-1.json");
  ASSERT_TRUE(rank0.WriteJson(p0, trace::TraceClock{}).ok());
  ASSERT_TRUE(rank1.WriteJson(p1, clock1).ok());
  const std::string merged_path = TempPath("merged.json");
  ASSERT_TRUE(MergeRankTraces({p0, p1}, merged_path).ok());
  StatusOr<TraceFile> merged = ReadTraceFile(merged_path);
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  double a = -1, b = -1;
  for (const TraceRecord& event : merged->events) (event.pid == 0 ? a : b) = event.ts_us;
  const double expected_us =
      static_cast<double>(rank1.origin_ns() + clock1.offset_ns - rank0.origin_ns()) / kUs;
  EXPECT_NEAR(b - a, expected_us, 0.01);
  EXPECT_EQ(merged->thread_names.size(), 2u);
  EXPECT_EQ(merged->other_data.fields().at("ranks").list_value().values_size(), 2);

  Status twice = MergeRankTraces({p0, p0}, merged_path);
  EXPECT_FALSE(twice.ok());
  EXPECT_NE(twice.message().find("rank-0.json"), std::string::npos) << twice.ToString();
}

TEST(TraceFileTest, RejectsWhatIsNotATrace) {
  const std::string path = TempPath("not_a_trace.json");
  FILE* file = std::fopen(path.c_str(), "w");
  std::fputs("{\"events\": []}", file);
  std::fclose(file);
  StatusOr<TraceFile> read = ReadTraceFile(path);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("traceEvents"), std::string::npos);
  EXPECT_FALSE(ReadTraceFile(TempPath("absent.json")).ok());
}

}  // namespace
}  // namespace cli
}  // namespace oflite
