// actor_overhead: what the actor protocol costs per act.
//
// Runs chains and diamonds of N no-op compute actors (test_noop kernels on
// 1-element registers) for M iterations through the runtime, and, in the
// same run, a plain loop making the same N x M kernel calls on one thread.
// Prints microseconds per act, messages per second and the plain loop's
// microseconds per call. Each figure is the median of --repeats runs.
//
//   bazel run -c opt //tools/bench:actor_overhead -- [--actors 1,8,64]
//       [--iters 2000] [--repeats 5] [--threads 1]
// --threads T spreads the actors over T device streams (T threads),
// round-robin; 1 keeps the protocol cost apart from cross-thread wake-ups.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/testing/test_plan_builder.h"

namespace oflite {
namespace {

using testing::TestPlanBuilder;

const TensorDesc kScalar(Shape{1}, DT_FLOAT);

// source -> n no-op actors in a line -> (nothing).
Plan ChainPlan(int actors, int threads, int64_t iters) {
  TestPlanBuilder b;
  const int64_t source = b.AddTask("source", TASK_SOURCE, 0);
  int64_t prev = b.AddRegst(source, "out", {kScalar}, 2);
  b.AddKernel(source, "source", "test_noop", {}, {{"out", prev}});
  for (int i = 0; i < actors; ++i) {
    const std::string name = "noop" + std::to_string(i);
    const int64_t task = b.AddTask(name, TASK_COMPUTE, (i + 1) % threads);
    const int64_t out = b.AddRegst(task, "out", {kScalar}, 2);
    b.Consume(task, prev);
    b.AddKernel(task, name, "test_noop", {{"in", prev}}, {{"out", out}});
    prev = out;
  }
  return b.Build(iters);
}

// source -> n no-op actors side by side -> join.
Plan DiamondPlan(int actors, int threads, int64_t iters) {
  TestPlanBuilder b;
  const int64_t source = b.AddTask("source", TASK_SOURCE, 0);
  const int64_t src_out = b.AddRegst(source, "out", {kScalar}, 2);
  b.AddKernel(source, "source", "test_noop", {}, {{"out", src_out}});
  const int64_t join = b.AddTask("join", TASK_COMPUTE, 0);
  std::vector<std::pair<std::string, int64_t>> join_inputs;
  for (int i = 0; i < actors; ++i) {
    const std::string name = "noop" + std::to_string(i);
    const int64_t task = b.AddTask(name, TASK_COMPUTE, (i + 1) % threads);
    const int64_t out = b.AddRegst(task, "out", {kScalar}, 2);
    b.Consume(task, src_out);
    b.AddKernel(task, name, "test_noop", {{"in", src_out}}, {{"out", out}});
    b.Consume(join, out, "in" + std::to_string(i));
    join_inputs.emplace_back("in", out);
  }
  const int64_t join_out = b.AddRegst(join, "out", {kScalar}, 2);
  b.AddKernel(join, "join", "test_noop", join_inputs, {{"out", join_out}});
  return b.Build(iters);
}

struct Figures {
  double us_per_act = 0;
  double messages_per_second = 0;
  double loop_us_per_call = 0;
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// The same kernel calls without actors: every kernel of the plan, in task
// order, once per iteration.
double PlainLoopSeconds(const Plan& plan, int64_t iters) {
  CpuDeviceContext device;
  std::vector<std::unique_ptr<Kernel>> kernels;
  std::vector<std::unique_ptr<KernelContext>> contexts;
  float scalar = 0;
  Blob blob(&scalar, kScalar);
  for (const TaskProto& task : plan.machine(0).task()) {
    for (const KernelConf& conf : task.kernel()) {
      kernels.push_back(CreateKernel(conf.op(), DEVICE_CPU, DT_FLOAT).value());
      contexts.push_back(std::make_unique<KernelContext>(conf.op(), &device, 0));
      for (const BlobBinding& input : conf.input()) contexts.back()->BindInput(input.arg(), &blob);
      for (const BlobBinding& output : conf.output()) {
        contexts.back()->BindOutput(output.arg(), &blob);
      }
    }
  }
  const auto begin = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < iters; ++i) {
    for (size_t k = 0; k < kernels.size(); ++k) {
      contexts[k]->set_iteration(i);
      CHECK_OK(kernels[k]->Forward(contexts[k].get()));
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
}

Figures Measure(const Plan& plan, int64_t iters, int repeats) {
  std::vector<double> us_per_act, messages_per_second, loop_us;
  for (int r = 0; r < repeats; ++r) {
    auto runtime = Runtime::Create(plan, RuntimeOptions{}).value();
    CHECK_OK(runtime->Run());
    const RunStats& stats = runtime->stats();
    us_per_act.push_back(stats.seconds * 1e6 / stats.acts);
    messages_per_second.push_back(stats.messages / stats.seconds);
    const double loop = PlainLoopSeconds(plan, iters);
    loop_us.push_back(loop * 1e6 / stats.acts);
  }
  return Figures{Median(us_per_act), Median(messages_per_second), Median(loop_us)};
}

std::vector<int> ParseList(const char* text) {
  std::vector<int> values;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) values.push_back(std::atoi(item.c_str()));
  return values;
}

int Main(int argc, char** argv) {
  std::vector<int> actor_counts = {1, 8, 64};
  int64_t iters = 2000;
  int repeats = 5;
  int threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--actors")) actor_counts = ParseList(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--iters")) iters = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
  }
  std::printf("actor_overhead: %lld iterations, %d threads, median of %d runs\n",
              static_cast<long long>(iters), threads, repeats);
  std::printf("%-8s %7s %12s %14s %16s\n", "shape", "actors", "us/act", "messages/s",
              "plain loop us/call");
  for (const char* shape : {"chain", "diamond"}) {
    for (int actors : actor_counts) {
      const Plan plan = !std::strcmp(shape, "chain") ? ChainPlan(actors, threads, iters)
                                                     : DiamondPlan(actors, threads, iters);
      const Figures f = Measure(plan, iters, repeats);
      std::printf("%-8s %7d %12.3f %14.0f %16.4f\n", shape, actors, f.us_per_act,
                  f.messages_per_second, f.loop_us_per_call);
    }
  }
  return 0;
}

}  // namespace
}  // namespace oflite

int main(int argc, char** argv) { return oflite::Main(argc, argv); }
