#include "oneflow_lite/common/trace/trace.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>
#include <thread>

#include "gtest/gtest.h"

// Heap allocations made by the calling thread (operator new is replaced
// below for this test binary).
thread_local int64_t allocations = 0;

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
  tracer.SetOtherNumber("measured_step_us", 812.5);
  tracer.SetOtherNumber("not_a_number", std::nan(""));  // JSON has none: null
  const google::protobuf::Struct parsed = Parse(tracer.ToJson(clock));
  const auto& other = parsed.fields().at("otherData").struct_value().fields();
  EXPECT_EQ(other.at("measured_step_us").number_value(), 812.5);
  EXPECT_TRUE(other.at("not_a_number").has_null_value());
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

TEST(TraceTest, RecordingAllocatesNothingPerEvent) {
  Tracer tracer(TracerOptions{});
  Track* track = tracer.AddTrack("m0/cpu0/s0");
  ScopedCurrentTrack current(track, 0);
  const std::string op = "dense-matmul-grad_b";  // longer than a short-string buffer
  { Slice first("kernel", op); }                 // interns the name
  const int64_t before = allocations;
  for (int i = 0; i < 2000; ++i) {
    Slice slice("kernel", op);
  }
  const int64_t made = allocations - before;
  // Chunks of 1024 records (and the list of them), not one per event.
  EXPECT_LE(made, 10) << "allocations while recording 2000 slices";
  ASSERT_EQ(track->event_count(), 2001u);
  EXPECT_EQ(track->events()[2000].name, op);
}

TEST(TraceTest, NamesStayRightWhenTheirStorageIsReused) {
  Tracer tracer(TracerOptions{});
  Track* track = tracer.AddTrack("m0/cpu0/s0");
  ScopedCurrentTrack current(track, 0);
  std::string name = "first-op-with-a-long-name";
  { Slice slice("kernel", name); }
  name = "second-op-with-a-long-name";  // same object, other text
  { Slice slice("kernel", name); }
  name.assign("first-op-with-a-long-name");
  { Slice slice("kernel", name); }
  ASSERT_EQ(track->event_count(), 3u);
  EXPECT_EQ(track->events()[0].name, "first-op-with-a-long-name");
  EXPECT_EQ(track->events()[1].name, "second-op-with-a-long-name");
  EXPECT_EQ(track->events()[2].name, "first-op-with-a-long-name");
}

// A record whose name and arguments a Formatter writes from its numbers and
// payload (the runtime's recorders work this way).
void FormatTest(const EventRecord& record, const int64_t* payload, std::string* name,
                std::string* args) {
  *name = "step " + std::to_string(record.numbers[0]);
  *args = "\"sum\":" + std::to_string(payload[0] + payload[1]) + "," + *record.text;
}

TEST(TraceTest, FormattersRunWhenTheTraceIsWrittenAndRecordsNeverMove) {
  Tracer tracer(TracerOptions{});
  Track* track = tracer.AddTrack("worker");
  const std::string* fixed = track->Intern(std::string("\"fixed\":true"));
  EventRecord* first = nullptr;
  for (int64_t i = 0; i < 1500; ++i) {  // three chunks
    EventRecord* event = track->Append();
    if (i == 0) first = event;
    event->category = "collective";
    event->begin_ns = tracer.origin_ns() + 1000 * i;
    event->end_ns = event->begin_ns + 500;
    event->format = &FormatTest;
    event->text = fixed;
    event->numbers[0] = i;
    int64_t* payload = track->AppendPayload(event, 2);
    payload[0] = i;
    payload[1] = 1;
  }
  EXPECT_EQ(first, &track->record(0));
  EXPECT_EQ(first->numbers[0], 0);
  const google::protobuf::Struct parsed = Parse(tracer.ToJson(TraceClock{}));
  const auto& events = parsed.fields().at("traceEvents").list_value().values();
  ASSERT_EQ(events.size(), 2u + 1500u);  // process and thread names
  const auto& last = events[events.size() - 1].struct_value().fields();
  EXPECT_EQ(last.at("name").string_value(), "step 1499");
  EXPECT_EQ(last.at("args").struct_value().fields().at("sum").number_value(), 1500);
  EXPECT_TRUE(last.at("args").struct_value().fields().at("fixed").bool_value());
  EXPECT_EQ(last.at("ts").number_value(), 1499.0);
  EXPECT_EQ(last.at("dur").number_value(), 0.5);
  EXPECT_EQ(track->events()[7].args, "\"sum\":8,\"fixed\":true");
}
}  // namespace
}  // namespace trace
}  // namespace oflite

void* operator new(size_t size) {
  ++allocations;
  if (void* memory = std::malloc(size == 0 ? 1 : size)) return memory;
  throw std::bad_alloc();
}
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, size_t) noexcept { std::free(memory); }
