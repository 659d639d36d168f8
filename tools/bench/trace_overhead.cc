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
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "oneflow_lite/api/data_sources.h"
#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/api/layers.h"
#include "oneflow_lite/common/trace/trace.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/runtime/runtime.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace oflite {
namespace {

constexpr char kHelp[] =
    "trace_overhead: step time of the 784-256-256-10 MLP (synthetic data, SGD) with\n"
    "timeline tracing off, at level acts (oflite run --trace's default) and at level\n"
    "messages (every iteration recorded), runs of the three modes in turn.\n"
    "  --iters N      measured steps per run (300)\n"
    "  --warmup N     steps before measuring (30)\n"
    "  --repeats N    runs per mode; medians are printed (5)\n"
    "  --batch N      only this batch (64 and 256 by default)\n"
    "  --threads N    only this many CPU devices, one computing thread each\n"
    "                 (1 and 2 by default)\n"
    "  --mode M       1: all modes; 2: untraced only; 3: acts only; 4: messages only\n"
    "                 (one mode per process, e.g. to compare instruction counts\n"
    "                 under callgrind)\n";

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

int Main(int argc, char** argv) {
  int64_t iters = 300, warmup = 30, mode = 1, repeats = 5, only_batch = 0, only_threads = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::printf("%s", kHelp);
      return 0;
    }
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iters")) iters = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--warmup")) warmup = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--mode")) mode = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::max(1LL, std::atoll(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--batch")) only_batch = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) only_threads = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "trace_overhead: unknown flag %s (see --help)\n", argv[i]);
      return 2;
    }
  }
  if (argc % 2 == 0) {
    std::fprintf(stderr, "trace_overhead: flag %s needs a value (see --help)\n", argv[argc - 1]);
    return 2;
  }
  if (mode < 1 || mode > 4 || iters < 1 || warmup < 1) {
    std::fprintf(stderr, "trace_overhead: --mode must be 1-4, --iters and --warmup >= 1\n");
    return 2;
  }
  openblas_set_num_threads(1);
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf("trace_overhead: 784-256-256-10 MLP, %lld measured steps after %lld warm-up, "
              "median of %lld runs per mode, load average %.2f %.2f %.2f\n",
              static_cast<long long>(iters), static_cast<long long>(warmup),
              static_cast<long long>(repeats), load[0], load[1], load[2]);
  return TraceOverhead(static_cast<int>(mode), warmup, iters, static_cast<int>(repeats),
                       only_batch, only_threads);
}

}  // namespace
}  // namespace oflite

int main(int argc, char** argv) { return oflite::Main(argc, argv); }
