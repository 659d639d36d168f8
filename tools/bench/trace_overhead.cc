// trace_overhead: what timeline tracing (docs/tracing.md) costs the
// 784-256-256-10 MLP of train_mlp: each configuration runs untraced, traced
// at the default level (acts) and traced at --trace-level messages, in turn,
// --repeats times; prints the median step time of each, the overheads and
// the process CPU time (user + sys) per step of each mode.
// Step time = wall time between the sink's reports of the first measured and
// the last iteration, divided by the iterations between them.
//
//   bazel build -c opt //tools/bench:trace_overhead
//   bazel-bin/tools/bench/trace_overhead [--iters 300] [--repeats 5] [--help]
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/common/trace/trace.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/session/flags.h"
#include "tools/bench/bench_flags.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace oflite {
namespace {

// After "usage: ... <program>" in --help.
constexpr char kUsage[] =
    "[flags]\n\nStep time of the 784-256-256-10 MLP (synthetic data, SGD) with timeline "
    "tracing off,\nat level acts (oflite run --trace's default) and at level messages (every "
    "iteration\nrecorded), runs of the three modes in turn.";

class StepClock : public MetricsObserver {
 public:
  explicit StepClock(int64_t warmup) : warmup_(warmup) {}
  void OnMetrics(int64_t iteration,
                 const std::vector<std::pair<std::string, double>>& metrics) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    if (iteration == warmup_) first_ = now;
    last_ = now;
    last_iteration_ = iteration;
    for (const auto& [name, value] : metrics) {
      if (name == "loss") loss_ = value;
    }
  }
  double StepSeconds() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::chrono::duration<double>(last_ - first_).count() / (last_iteration_ - warmup_);
  }
  double loss() {
    std::lock_guard<std::mutex> lock(mutex_);
    return loss_;
  }

 private:
  const int64_t warmup_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point first_, last_;
  int64_t last_iteration_ = 0;
  double loss_ = 0;
};

StatusOr<Job> MlpJob(int64_t batch, int devices, int64_t iters) {
  Graph g("mlp_bench", /*seed=*/1);
  g.SetPlacement(Placement::Parse(devices == 1 ? "0:cpu:0" : "0:cpu:0-" +
                                                                 std::to_string(devices - 1)));
  Batch data = RandomBatch(&g, Shape{batch, 784}, 10);
  Tensor h = g.Relu(Dense(&g, data.image, 256));
  h = g.Relu(Dense(&g, h, 256));
  Tensor logits = Dense(&g, h, 10);
  Tensor loss = g.SparseSoftmaxCrossEntropy(logits, data.label);
  g.Minimize(loss, Sgd{0.1, 0.0});
  g.SetIterations(iters);
  return g.Build();
}

struct Result {
  double step_ms = 0;
  double samples_per_second = 0;
  double final_loss = 0;
};

StatusOr<Result> RunOurs(int64_t batch, int threads, int64_t warmup, int64_t iters,
                         trace::Tracer* tracer = nullptr) {
  ASSIGN_OR_RETURN(Job job, MlpJob(batch, threads, warmup + iters));
  ClusterProto cluster;
  MachineProto* machine = cluster.add_machine();
  machine->set_id(0);
  machine->set_address("127.0.0.1");
  machine->set_cpu_devices(threads);
  // One computing thread per device (the BLAS pool included), as train_mlp's
  // "Ndev x1" rows: with the default (cores / devices) one device's BLAS pool
  // fills both cores, and any other thread's work (the recorders') then
  // slows its GEMMs, which measures contention rather than tracing.
  machine->set_cpu_threads(1);
  ASSIGN_OR_RETURN(Plan plan, compiler::Compile(job, cluster));
  StepClock clock(warmup);
  RuntimeOptions options;
  options.metrics = &clock;
  options.tracer = tracer;
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
  RETURN_IF_ERROR(runtime->Run());
  Result result;
  result.step_ms = clock.StepSeconds() * 1e3;
  result.samples_per_second = batch / clock.StepSeconds();
  result.final_loss = clock.loss();
  return result;
}

double CpuSeconds() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Step time untraced vs traced at both levels (see the header comment).
int TraceOverhead(int mode, int64_t warmup, int64_t iters, int repeats, int64_t only_batch,
                  int64_t only_threads) {
  std::printf("%-6s %-8s %9s %9s %9s %9s %9s %10s %10s %10s\n", "batch", "threads", "off ms",
              "acts ms", "msgs ms", "acts +%", "msgs +%", "off cpu/it", "acts cpu", "msgs cpu");
  for (int64_t batch : {64, 256}) {
    for (int threads : {1, 2}) {
      const bool batch_kept = only_batch == 0 || batch == only_batch;
      if (!batch_kept || (only_threads != 0 && threads != only_threads)) continue;
      std::vector<double> step[3], cpu[3];  // off, acts, messages
      for (int r = 0; r < 3 * repeats; ++r) {
        const int level = r % 3;
        if (mode != 1 && level != mode - 2) continue;
        trace::TracerOptions options;
        options.messages = level == 2;
        trace::Tracer tracer(options);
        const double cpu_before = CpuSeconds();
        StatusOr<Result> ours =
            RunOurs(batch, threads, warmup, iters, level > 0 ? &tracer : nullptr);
        if (!ours.ok()) {
          std::fprintf(stderr, "oflite run failed: %s\n", ours.status().ToString().c_str());
          return 1;
        }
        step[level].push_back(ours->step_ms);
        cpu[level].push_back((CpuSeconds() - cpu_before) * 1e3 / (warmup + iters));
      }
      if (step[0].empty() || step[1].empty() || step[2].empty()) {
        std::printf("%-6lld %-8d (one mode only)\n", static_cast<long long>(batch), threads);
        continue;
      }
      const double off = Median(step[0]), acts = Median(step[1]), messages = Median(step[2]);
      std::printf("%-6lld %-8d %9.3f %9.3f %9.3f %8.1f%% %8.1f%% %10.3f %10.3f %10.3f\n",
                  static_cast<long long>(batch), threads, off, acts, messages,
                  100 * (acts - off) / off, 100 * (messages - off) / off, Median(cpu[0]),
                  Median(cpu[1]), Median(cpu[2]));
      std::fflush(stdout);
    }
  }
  return 0;
}

std::vector<cli::FlagSpec> FlagSpecs() {
  return {{"iters", "measured steps per run", false, "300"},
          {"warmup", "steps before measuring", false, "30"},
          {"repeats", "runs per mode; medians are printed", false, "5"},
          {"batch", "only this batch, 64 or 256 (0: both)", false, "0"},
          {"threads", "only this many CPU devices, one computing thread each, 1 or 2 (0: both)",
           false, "0"},
          {"mode",
           "1: all modes; 2: untraced only; 3: acts only; 4: messages only (one mode per "
           "process, e.g. to compare instruction counts under callgrind)",
           false, "1"}};
}

struct Options {
  int64_t iters = 0, warmup = 0, mode = 0, repeats = 0, only_batch = 0, only_threads = 0;
};

StatusOr<Options> ReadOptions(const cli::FlagSet& flags) {
  Options options;
  ASSIGN_OR_RETURN(options.iters, flags.GetInt("iters", 1, 1000 * 1000 * 1000));
  ASSIGN_OR_RETURN(options.warmup, flags.GetInt("warmup", 1, 1000 * 1000 * 1000));
  ASSIGN_OR_RETURN(options.repeats, flags.GetInt("repeats", 1, 1000));
  ASSIGN_OR_RETURN(options.mode, flags.GetInt("mode", 1, 4));
  ASSIGN_OR_RETURN(options.only_batch, flags.GetInt("batch", 0, 256));
  if (options.only_batch != 0 && options.only_batch != 64 && options.only_batch != 256) {
    return InvalidArgumentError("flag '--batch' must be 64, 256 or 0 (both), got '",
                                flags.Get("batch"), "'");
  }
  ASSIGN_OR_RETURN(options.only_threads, flags.GetInt("threads", 0, 2));
  return options;
}

int Run(const Options& options) {
  const int64_t iters = options.iters, warmup = options.warmup, repeats = options.repeats;
  openblas_set_num_threads(1);
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf("trace_overhead: 784-256-256-10 MLP, %lld measured steps after %lld warm-up, "
              "median of %lld runs per mode, load average %.2f %.2f %.2f\n",
              static_cast<long long>(iters), static_cast<long long>(warmup),
              static_cast<long long>(repeats), load[0], load[1], load[2]);
  return TraceOverhead(static_cast<int>(options.mode), warmup, iters, static_cast<int>(repeats),
                       options.only_batch, options.only_threads);
}

}  // namespace
}  // namespace oflite

int main(int argc, char** argv) {
  using namespace oflite;
  return bench::BenchMain(argc, argv, "trace_overhead", kUsage, FlagSpecs(), ReadOptions, Run);
}
