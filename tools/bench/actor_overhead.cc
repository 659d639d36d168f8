// actor_overhead: what the actor protocol costs per act.
//
// Runs chains and diamonds of N no-op compute actors (test_noop kernels on
// 1-element registers) for M iterations through the runtime, and, in the
// same run, a plain loop making the same N x M kernel calls on one thread.
// Prints microseconds per act, messages per second and the plain loop's
// microseconds per call. Each figure is the median of --repeats runs.
//
//   bazel run -c opt //tools/bench:actor_overhead -- [--actors 1,8,64]
//       [--iters 2000] [--repeats 5] [--threads 1] [--help]
// --threads T spreads the actors over T device streams (T threads),
// round-robin; 1 keeps the protocol cost apart from cross-thread wake-ups.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "oneflow_lite/device/device_context.h"
#include "oneflow_lite/kernels/kernel.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/runtime/testing/test_plan_builder.h"
#include "oneflow_lite/session/flags.h"
#include "tools/bench/bench_flags.h"

namespace oflite {
namespace {

using testing::TestPlanBuilder;

// After "usage: ... <program>" in --help.
constexpr char kUsage[] =
    "[flags]\n\nThe actor protocol's cost per act: chains and diamonds of no-op actors "
    "through the\nruntime next to a plain loop of the same kernel calls.";

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
  double cpu_us_per_act = 0;  // the process's CPU time (all threads) per act
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

double ProcessCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

Figures Measure(const Plan& plan, int64_t iters, int repeats) {
  std::vector<double> us_per_act, cpu_us_per_act, messages_per_second, loop_us;
  for (int r = 0; r < repeats; ++r) {
    auto runtime = Runtime::Create(plan, RuntimeOptions{}).value();
    const double cpu_before = ProcessCpuSeconds();
    CHECK_OK(runtime->Run());
    const double cpu = ProcessCpuSeconds() - cpu_before;
    const RunStats& stats = runtime->stats();
    us_per_act.push_back(stats.seconds * 1e6 / stats.acts);
    cpu_us_per_act.push_back(cpu * 1e6 / stats.acts);
    messages_per_second.push_back(stats.messages / stats.seconds);
    const double loop = PlainLoopSeconds(plan, iters);
    loop_us.push_back(loop * 1e6 / stats.acts);
  }
  return Figures{Median(us_per_act), Median(cpu_us_per_act), Median(messages_per_second),
                 Median(loop_us)};
}

struct Options {
  std::vector<int64_t> actor_counts;
  int64_t iters = 0;
  int repeats = 0;
  int threads = 0;
};

std::vector<cli::FlagSpec> FlagSpecs() {
  return {
      {"actors", "actor counts, comma-separated: a chain and a diamond of each", false, "1,8,64"},
      {"iters", "iterations per run", false, "2000"},
      {"repeats", "runs per figure (their median is printed)", false, "5"},
      {"threads", "device streams (threads) the actors are spread over, round-robin", false, "1"}};
}

StatusOr<Options> ReadOptions(const cli::FlagSet& flags) {
  Options options;
  ASSIGN_OR_RETURN(options.actor_counts, bench::GetIntList(flags, "actors", 1, 100000));
  ASSIGN_OR_RETURN(options.iters, flags.GetInt("iters", 1, 1000000000));
  ASSIGN_OR_RETURN(options.repeats, flags.GetInt("repeats", 1, 1000));
  ASSIGN_OR_RETURN(options.threads, flags.GetInt("threads", 1, 1024));
  return options;
}

int Run(const Options& options) {
  const int64_t iters = options.iters;
  const int repeats = options.repeats;
  const int threads = options.threads;
  std::printf("actor_overhead: %lld iterations, %d threads, median of %d runs\n",
              static_cast<long long>(iters), threads, repeats);
  std::printf("%-8s %7s %12s %12s %14s %16s\n", "shape", "actors", "us/act", "cpu us/act",
              "messages/s", "plain loop us/call");
  for (const char* shape : {"chain", "diamond"}) {
    for (int actors : options.actor_counts) {
      const Plan plan = !std::strcmp(shape, "chain") ? ChainPlan(actors, threads, iters)
                                                     : DiamondPlan(actors, threads, iters);
      const Figures f = Measure(plan, iters, repeats);
      std::printf("%-8s %7d %12.3f %12.3f %14.0f %16.4f\n", shape, actors, f.us_per_act,
                  f.cpu_us_per_act, f.messages_per_second, f.loop_us_per_call);
    }
  }
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) == 3) {
    std::printf("load average %.2f %.2f %.2f (at the end)\n", load[0], load[1], load[2]);
  }
  return 0;
}

}  // namespace
}  // namespace oflite

int main(int argc, char** argv) {
  using namespace oflite;
  return bench::BenchMain(argc, argv, "actor_overhead", kUsage, FlagSpecs(), ReadOptions, Run);
}
