// Tracing a whole run (docs/tracing.md): with RuntimeOptions.tracer every
// stream thread gets a track; each act of an iteration in the window is one
// "act" slice with its kernels inside, at level "messages" inside the
// "handle" slice of the message that enabled it (level "acts", the
// default, records no handling of a local message); nothing outside the
// window is recorded.
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <string>

#include "oneflow_lite/common/trace/trace.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/testing/test_fixtures.h"

namespace oflite {
namespace {

// The slice of `category` on `track` that contains `inner`, or null.
const trace::TraceEvent* Enclosing(const trace::Track& track, const trace::TraceEvent& inner,
                                   const std::string& category) {
  for (const trace::TraceEvent& event : track.events()) {
    if (event.phase == 'X' && category == event.category && event.begin_ns <= inner.begin_ns &&
        inner.end_ns <= event.end_ns) {
      return &event;
    }
  }
  return nullptr;
}

int64_t IterationOf(const trace::TraceEvent& act) {
  const std::string key = "\"iteration\":";
  return std::stoll(act.args.substr(act.args.find(key) + key.size()));
}

// Runs `plan` with `tracer` recording; null (with the failure reported)
// when the runtime cannot be made or the run fails. `plan` must outlive
// the runtime, which is kept for its stats.
std::unique_ptr<Runtime> RunTraced(const Plan& plan, trace::Tracer* tracer) {
  RuntimeOptions options;
  options.tracer = tracer;
  StatusOr<std::unique_ptr<Runtime>> runtime = Runtime::Create(plan, options);
  EXPECT_TRUE(runtime.ok()) << runtime.status().ToString();
  if (!runtime.ok()) return nullptr;
  const Status ran = (*runtime)->Run();
  EXPECT_TRUE(ran.ok()) << ran.ToString();
  return ran.ok() ? std::move(*runtime) : nullptr;
}

TEST(TraceRuntimeTest, RecordsEachActOfTheWindowOnceInsideItsHandling) {
  trace::TracerOptions window;
  window.first_iteration = 3;
  window.end_iteration = 7;
  window.messages = true;
  trace::Tracer tracer(window);
  const Plan plan = testing::ChainPlan(/*length=*/3, /*regst_num=*/2, /*iters=*/10);
  std::unique_ptr<Runtime> runtime = RunTraced(plan, &tracer);
  ASSERT_NE(runtime, nullptr);
  const std::vector<const trace::Track*> tracks = tracer.tracks();
  EXPECT_EQ(static_cast<int64_t>(tracks.size()), runtime->stats().threads);

  std::map<std::string, std::multiset<int64_t>> iterations_by_task;
  int kernels = 0;
  for (const trace::Track* track : tracks) {
    for (const trace::TraceEvent& event : track->events()) {
      if (event.phase != 'X') continue;
      EXPECT_LE(event.begin_ns, event.end_ns);
      if (std::string(event.category) == "act") {
        iterations_by_task[event.name].insert(IterationOf(event));
        EXPECT_NE(Enclosing(*track, event, "handle"), nullptr) << event.name;
      }
      if (std::string(event.category) == "kernel") {
        ++kernels;
        EXPECT_NE(Enclosing(*track, event, "act"), nullptr) << event.name;
      }
    }
  }
  // source, 3 x add_one, sink: one act per iteration 3..6 each.
  ASSERT_EQ(iterations_by_task.size(), 5u);
  for (const auto& [task, iterations] : iterations_by_task) {
    EXPECT_EQ(iterations, (std::multiset<int64_t>{3, 4, 5, 6})) << task;
  }
  EXPECT_GE(kernels, 4 * 3);  // at least the add_one kernels
  const std::string json = tracer.ToJson(trace::TraceClock{});
  EXPECT_NE(json.find("\"ready_after\":\"produced r"), std::string::npos);
  EXPECT_NE(json.find("\"idle_before_us\":"), std::string::npos);
}

// What an act and a handled message record, formatted from their stored
// numbers when the trace is read (docs/tracing.md, "Reading"): every
// field in its place. add<i> consumes one register and produces one.
TEST(TraceRuntimeTest, ActAndMessageArgumentsKeepEveryField) {
  trace::TracerOptions every_message;
  every_message.messages = true;
  trace::Tracer tracer(every_message);
  const Plan plan = testing::ChainPlan(/*length=*/3, /*regst_num=*/2, /*iters=*/6);
  ASSERT_NE(RunTraced(plan, &tracer), nullptr);
  const std::string regst = R"(r\d+\[\d+\])";
  const std::string message = R"((produced|returned) )" + regst +
                              R"( iteration \d+ (from|by) m0/cpu\d+/s\d+/t\d+)";
  const std::regex add_act(R"re("iteration":\d+,"task":\d+,"ops":\["add\d"\],"consumed":")re" +
                           regst + R"re(","produced":")re" + regst + R"re(","ready_after":")re" +
                           message +
                           R"re(","ready_from":\d+,"idle_before_us":\d+|"iteration":0,.*)re");
  const std::regex handle(R"re("message":")re" + message +
                          R"re(","actor":\d+,"from":\d+,"message_iteration":\d+)re");
  const std::regex add_number(R"re(^"iteration":(\d+),"task":\d+,"ops":\["add(\d)"\])re");
  int add_acts = 0, handles = 0;
  for (const trace::Track* track : tracer.tracks()) {
    for (const trace::TraceEvent& event : track->events()) {
      const std::string category = event.category;
      std::smatch add;
      if (category == "act" && std::regex_search(event.args, add, add_number)) {
        ++add_acts;
        EXPECT_TRUE(std::regex_match(event.args, add_act)) << event.args;
        // add<i> reads r<i+1> and writes r<i+2>, copy (iteration % 2).
        const int i = std::stoi(add[2]);
        const std::string copy = "[" + std::to_string(std::stoi(add[1]) % 2) + "]";
        EXPECT_NE(event.args.find("\"consumed\":\"r" + std::to_string(i + 1) + copy +
                                  "\",\"produced\":\"r" + std::to_string(i + 2) + copy + "\""),
                  std::string::npos)
            << event.args;
      }
      if (category == "handle" && (event.args.find("\"message\":\"produced") == 0 ||
                                   event.args.find("\"message\":\"returned") == 0)) {
        ++handles;
        EXPECT_TRUE(std::regex_match(event.args, handle)) << event.args;
      }
    }
  }
  EXPECT_EQ(add_acts, 3 * 6);
  EXPECT_GT(handles, 2 * 3 * 6);
}

// Level "acts" (the default): the same acts, each once, with their
// kernels and the message that let them run (text and sender), but no
// handle slice: on one machine without collectives every actor records
// acts, so no handling of a local message is recorded: the trace holds
// the events of level "messages" less its handle slices.
TEST(TraceRuntimeTest, ActsLevelRecordsEveryActButNoLocalHandling) {
  const Plan plan = testing::ChainPlan(/*length=*/3, /*regst_num=*/2, /*iters=*/10);
  size_t events[2] = {0, 0};
  int handles_at[2] = {0, 0};
  for (bool messages : {false, true}) {
    trace::TracerOptions level;
    level.messages = messages;
    trace::Tracer tracer(level);
    ASSERT_NE(RunTraced(plan, &tracer), nullptr);
    std::map<std::string, std::multiset<int64_t>> iterations_by_task;
    int handles = 0, kernels = 0;
    for (const trace::Track* track : tracer.tracks()) {
      events[messages] += track->event_count();
      for (const trace::TraceEvent& event : track->events()) {
        const std::string category = event.category;
        if (category == "handle") ++handles;
        if (category == "kernel") {
          ++kernels;
          EXPECT_NE(Enclosing(*track, event, "act"), nullptr) << event.name;
        }
        if (category != "act") continue;
        iterations_by_task[event.name].insert(IterationOf(event));
        // Every act says what let it run; one sent by another actor names it.
        EXPECT_NE(event.args.find("\"ready_after\":\""), std::string::npos) << event.args;
        const bool sent = event.args.find("\"ready_after\":\"produced r") != std::string::npos ||
                          event.args.find("\"ready_after\":\"returned r") != std::string::npos;
        EXPECT_EQ(sent, event.args.find("\"ready_from\":") != std::string::npos) << event.args;
      }
    }
    ASSERT_EQ(iterations_by_task.size(), 5u);
    for (const auto& [task, iterations] : iterations_by_task) {
      EXPECT_EQ(iterations.size(), 10u) << task;
    }
    EXPECT_GE(kernels, 10 * 3);
    handles_at[messages] = handles;
    if (messages) {
      EXPECT_GT(handles, 2 * 3 * 10);
    } else {
      EXPECT_EQ(handles, 0);
    }
    const std::string json = tracer.ToJson(trace::TraceClock{});
    EXPECT_NE(json.find(messages ? "\"trace_level\":\"messages\"" : "\"trace_level\":\"acts\""),
              std::string::npos);
  }
  // The levels differ by the handle slices only.
  EXPECT_EQ(events[1], events[0] + static_cast<size_t>(handles_at[1]));
}

TEST(TraceRuntimeTest, UntracedRunHasNoTrackAndAWindowPastTheRunRecordsNothing) {
  const Plan plan = testing::ChainPlan(3, 2, 5);  // outlives the runtimes
  RuntimeOptions untraced;
  StatusOr<std::unique_ptr<Runtime>> plain = Runtime::Create(plan, untraced);
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE((*plain)->Run().ok());
  EXPECT_EQ(trace::CurrentTrack(), nullptr);

  trace::TracerOptions window;
  window.first_iteration = 100;
  window.end_iteration = 200;
  trace::Tracer tracer(window);
  ASSERT_NE(RunTraced(plan, &tracer), nullptr);
  ASSERT_FALSE(tracer.tracks().empty());
  for (const trace::Track* track : tracer.tracks()) EXPECT_EQ(track->event_count(), 0u);
}

}  // namespace
}  // namespace oflite
