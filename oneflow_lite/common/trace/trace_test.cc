#include "oneflow_lite/common/trace/trace.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <atomic>
#include <chrono>
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

// MeasureCpu adds the thread's CPU time over the slice: all of a spin,
// next to none of a sleep (the bounds are loose: the claim is which of the
// two the time went to, not how fast anything runs).
TEST(TraceTest, KernelSlicesCanRecordTheirCpuTime) {
  TracerOptions options;
  options.cpu_time = true;
  Tracer tracer(options);
  Track* track = tracer.AddTrack("m0/cpu0/s0");
  ScopedCurrentTrack current(track, 0);
  {
    Slice slice("kernel", "sleeps");
    slice.AddArg("iteration", 0);
    slice.MeasureCpu();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  {
    Slice slice("kernel", "spins");
    slice.MeasureCpu();
    const int64_t start = Slice::ThreadCpuNs();
    while (Slice::ThreadCpuNs() - start < 20 * 1000 * 1000) {
    }
  }
  { Slice slice("kernel", "plain"); }
  ASSERT_EQ(track->event_count(), 3u);
  const auto cpu_us = [](const TraceEvent& event) {
    const google::protobuf::Struct args = Parse("{" + event.args + "}");
    EXPECT_EQ(args.fields().count("cpu_us"), 1u) << event.args;
    return args.fields().count("cpu_us") ? args.fields().at("cpu_us").number_value() : -1.0;
  };
  const TraceEvent& sleeps = track->events()[0];
  EXPECT_EQ(sleeps.args.rfind("\"iteration\":0,", 0), 0u) << sleeps.args;
  EXPECT_GE(sleeps.end_ns - sleeps.begin_ns, 50 * 1000 * 1000);
  EXPECT_GE(cpu_us(sleeps), 0.0);
  EXPECT_LT(cpu_us(sleeps), 25000.0);  // half the sleep
  const TraceEvent& spins = track->events()[1];
  EXPECT_GE(cpu_us(spins), 20000.0);
  EXPECT_LE(cpu_us(spins), (spins.end_ns - spins.begin_ns) / 1e3 + 1.0);
  EXPECT_EQ(track->events()[2].args, "");
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
  // Chunks of 64 KiB (and the list of them), not one per event.
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

// A record whose name and arguments a Formatter writes from its numbers
// (the runtime's recorders work this way).
void FormatTest(const EventRecord& record, std::string* name, std::string* args) {
  const int64_t* numbers = record.numbers();
  *name = "step " + std::to_string(numbers[0]);
  *args = "\"sum\":" + std::to_string(numbers[1] + numbers[2]) + "," + *record.text;
}

TEST(TraceTest, FormattersRunWhenTheTraceIsWrittenAndRecordsNeverMove) {
  Tracer tracer(TracerOptions{});
  Track* track = tracer.AddTrack("worker");
  const std::string* fixed = track->Intern(std::string("\"fixed\":true"));
  EventRecord* first = nullptr;
  for (int64_t i = 0; i < 1500; ++i) {  // two chunks of 64 KiB
    EventRecord* event = track->Append(3);
    if (i == 0) first = event;
    event->category = "collective";
    event->begin_ns = tracer.origin_ns() + 1000 * i;
    event->end_ns = event->begin_ns + 500;
    event->format = &FormatTest;
    event->text = fixed;
    event->numbers()[0] = i;
    event->numbers()[1] = i;
    event->numbers()[2] = 1;
  }
  EXPECT_EQ(first, &track->record(0));
  EXPECT_EQ(first->numbers()[0], 0);
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

// The numbers an event of RoundTrip carries: its index, then the index
// times 100 plus the position, negated at odd positions.
int64_t RoundTripNumber(int64_t event, size_t position) {
  if (position == 0) return event;
  const int64_t value = event * 100 + static_cast<int64_t>(position);
  return position % 2 == 1 ? -value : value;
}

void FormatCountAndSum(const EventRecord& record, std::string* name, std::string* args) {
  int64_t sum = 0;
  for (uint32_t i = 0; i < record.number_count; ++i) sum += record.numbers()[i];
  *name = "numbers";
  *args = "\"count\":" + std::to_string(record.number_count) + ",\"sum\":" + std::to_string(sum);
}

// Events of 0 to 10 numbers, many chunks of them, one event larger than a
// chunk, and flows: every record stays where Append put it, with its own
// numbers, and the JSON shows what was recorded.
TEST(TraceTest, NumbersRoundTripAcrossChunksWhateverTheirCount) {
  Tracer tracer(TracerOptions{});
  Track* track = tracer.AddTrack("worker");
  std::vector<EventRecord*> appended;
  std::vector<size_t> counts;
  constexpr int64_t kEvents = 6000;  // about 650 KB: ten chunks
  for (int64_t i = 0; i < kEvents; ++i) {
    const size_t count = i == kEvents / 2 ? 20000 : static_cast<size_t>(i % 11);
    EventRecord* event = track->Append(count);
    ASSERT_EQ(event->number_count, count);
    for (size_t j = 0; j < count; ++j) ASSERT_EQ(event->numbers()[j], 0) << i << " " << j;
    event->begin_ns = tracer.origin_ns() + i;
    event->end_ns = event->begin_ns + 1;
    event->category = "test";
    event->format = &FormatCountAndSum;
    for (size_t j = 0; j < count; ++j) event->numbers()[j] = RoundTripNumber(i, j);
    appended.push_back(event);
    counts.push_back(count);
  }
  const uint64_t flow = (uint64_t{1} << 52) - 1;
  track->AddFlow('s', flow, "produced", tracer.origin_ns() + kEvents);
  ASSERT_EQ(track->event_count(), static_cast<size_t>(kEvents) + 1);
  for (int64_t i = 0; i < kEvents; ++i) {
    const EventRecord& record = track->record(i);
    ASSERT_EQ(&record, appended[i]) << "record " << i << " moved";
    ASSERT_EQ(record.number_count, counts[i]);
    ASSERT_EQ(record.begin_ns, tracer.origin_ns() + i);
    ASSERT_EQ(record.flow_id(), 0u);
    for (size_t j = 0; j < counts[i]; ++j) {
      ASSERT_EQ(record.numbers()[j], RoundTripNumber(i, j)) << "record " << i << " number " << j;
    }
  }
  EXPECT_EQ(track->record(kEvents).flow_id(), flow);
  EXPECT_EQ(track->events()[kEvents].flow_id, flow);
  EXPECT_EQ(track->events()[kEvents].name, "produced");
  EXPECT_EQ(track->events()[0].args, "\"count\":0,\"sum\":0");
  // Event 13: 2 numbers, 13 and -(1301).
  EXPECT_EQ(track->events()[13].args, "\"count\":2,\"sum\":-1288");

  const google::protobuf::Struct parsed = Parse(tracer.ToJson(TraceClock{}));
  const auto& events = parsed.fields().at("traceEvents").list_value().values();
  ASSERT_EQ(events.size(), 2u + kEvents + 1);  // process and thread names
  const auto& big = events[2 + kEvents / 2].struct_value().fields();
  EXPECT_EQ(big.at("args").struct_value().fields().at("count").number_value(), 20000);
  const auto& last = events[events.size() - 1].struct_value().fields();
  EXPECT_EQ(last.at("ph").string_value(), "s");
  EXPECT_EQ(last.at("id").number_value(), static_cast<double>(flow));
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
