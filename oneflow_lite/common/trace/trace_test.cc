#include "oneflow_lite/common/trace/trace.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <thread>

#include "gtest/gtest.h"

namespace oflite {
namespace trace {
namespace {

google::protobuf::Struct Parse(const std::string& json) {
  google::protobuf::Struct parsed;
  auto status = google::protobuf::util::JsonStringToMessage(json, &parsed);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return parsed;
}

TEST(TraceTest, OffUnlessAThreadHoldsATrack) {
  EXPECT_EQ(CurrentTrack(), nullptr);
  Slice slice("kernel", "matmul");
  EXPECT_FALSE(slice.recording());
}

TEST(TraceTest, RecordsOnlyInsideTheIterationWindow) {
  TracerOptions options;
  options.first_iteration = 2;
  options.end_iteration = 4;
  Tracer tracer(options);
  Track* track = tracer.AddTrack("m0/cpu0/s0");
  ScopedCurrentTrack current(track);
  for (int64_t iteration = 0; iteration < 6; ++iteration) {
    ScopedCurrentTrack act(track, iteration);
    Slice slice("kernel", "op" + std::to_string(iteration));
    slice.AddArg("iteration", iteration);
  }
  ASSERT_EQ(track->event_count(), 2u);
  EXPECT_EQ(track->events()[0].name, "op2");
  EXPECT_EQ(track->events()[1].name, "op3");
  EXPECT_EQ(track->events()[1].args, "\"iteration\":3");
  EXPECT_FALSE(track->active());  // restored
}

TEST(TraceTest, ThreadsWriteTheirOwnTracksAndTheJsonParses) {
  Tracer tracer(TracerOptions{});
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    Track* track = tracer.AddTrack("thread \"" + std::to_string(t) + "\"");
    threads.emplace_back([track, t] {
      ScopedCurrentTrack current(track, 0);
      for (int i = 0; i < 100; ++i) {
        Slice outer("act", "act");
        { Slice inner("kernel", "k\n"); }
        track->AddFlow(t == 0 ? 's' : 'f', FlowId({i}), "produced", NowNs());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  TraceClock clock;
  clock.offset_ns = -1234;
  const google::protobuf::Struct parsed = Parse(tracer.ToJson(clock));
  const auto& events = parsed.fields().at("traceEvents").list_value().values();
  // 1 process name + 3 thread names + 3 * 100 * (2 slices + 1 flow).
  EXPECT_EQ(events.size(), 1u + 3u + 900u);
  EXPECT_EQ(
      parsed.fields().at("otherData").struct_value().fields().at("clock_offset_ns").number_value(),
      -1234);
  int slices = 0;
  for (const auto& event : events) {
    const auto& fields = event.struct_value().fields();
    if (fields.at("ph").string_value() == "X") {
      ++slices;
      EXPECT_GE(fields.at("dur").number_value(), 0);
    }
  }
  EXPECT_EQ(slices, 600);
}

TEST(TraceTest, FlowIdsAgreeForTheSamePartsAndFitADouble) {
  EXPECT_EQ(FlowId({1, 2, 3}), FlowId({1, 2, 3}));
  EXPECT_NE(FlowId({1, 2, 3}), FlowId({1, 3, 2}));
  EXPECT_LT(FlowId({-1, 99}), uint64_t{1} << 52);
}

}  // namespace
}  // namespace trace
}  // namespace oflite
