// train_mlp: training throughput of the 784-256-256-10 MLP (ReLU, softmax
// cross-entropy, SGD lr 0.1) through compiler + actor runtime, at batch 64
// and 256, on 1 CPU device (one compute thread) and 2 CPU devices (data
// parallel, two compute threads), next to PyTorch running the same model
// and batch with torch.set_num_threads(1 or 2) in the same run.
//
// Data: synthetic (the random_batch source, regenerated every step; the
// peer draws torch.rand/randint every step too). OpenBLAS is limited to one
// thread so "threads" means the runtime's compute threads.
// Step time = wall time between the sink's reports of the first measured
// and the last iteration, divided by the iterations between them.
//
//   bazel run -c opt //tools/bench:train_mlp -- [--iters 300] [--warmup 30]
//       [--torch_script tools/bench/train_mlp_torch.py] [--python /usr/bin/python3]
//
// --trace_overhead 1: instead, the cost of timeline tracing (docs/tracing.md):
// each configuration runs untraced and traced (every iteration recorded),
// alternating, --repeats times; prints the median step time of each and the
// overhead, plus the process CPU time (user + sys) per step of each mode;
// --batch N / --threads N keep one configuration; --trace_overhead 2 runs
// only the untraced runs and 3 only the traced ones (to compare instruction
// counts under callgrind, one process each).
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

#include "oneflow_lite/api/graph.h"
#include "oneflow_lite/common/trace/trace.h"
#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/runtime/runtime.h"

extern "C" void openblas_set_num_threads(int num_threads);

namespace oflite {
namespace {

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
  Batch data = g.RandomBatch(Shape{batch, 784}, 10);
  Tensor h = g.Relu(g.Dense(data.image, 256));
  h = g.Relu(g.Dense(h, 256));
  Tensor logits = g.Dense(h, 10);
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

// Runs the PyTorch peer; its last line is "step_ms X samples_per_s Y loss Z".
StatusOr<Result> RunTorch(const std::string& python, const std::string& script, int64_t batch,
                          int threads, int64_t warmup, int64_t iters) {
  if (access(python.c_str(), X_OK) != 0) return UnavailableError(python, " not found");
  if (access(script.c_str(), R_OK) != 0) return UnavailableError(script, " not found");
  const std::string command = python + " " + script + " --batch " + std::to_string(batch) +
                              " --threads " + std::to_string(threads) + " --warmup " +
                              std::to_string(warmup) + " --iters " + std::to_string(iters) +
                              " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return UnavailableError("cannot run ", command);
  char line[512];
  std::string last, all;
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    last = line;
    all += line;
  }
  const int status = pclose(pipe);
  Result result;
  if (status != 0 || std::sscanf(last.c_str(), "step_ms %lf samples_per_s %lf loss %lf",
                                 &result.step_ms, &result.samples_per_second,
                                 &result.final_loss) != 3) {
    return UnavailableError("PyTorch peer failed (", command, "): ", all);
  }
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

// Step time untraced vs traced (see the header comment).
int TraceOverhead(int mode, int64_t warmup, int64_t iters, int repeats, int64_t only_batch,
                  int64_t only_threads) {
  std::printf("%-6s %-8s %12s %12s %9s %14s %14s\n", "batch", "threads", "off ms", "on ms",
              "overhead", "off cpu ms/it", "on cpu ms/it");
  for (int64_t batch : {64, 256}) {
    for (int threads : {1, 2}) {
      const bool batch_kept = only_batch == 0 || batch == only_batch;
      if (!batch_kept || (only_threads != 0 && threads != only_threads)) continue;
      std::vector<double> step[2], cpu[2];
      for (int r = 0; r < 2 * repeats; ++r) {
        const int on = r % 2;
        if ((mode == 2 && on) || (mode == 3 && !on)) continue;  // 2: off only, 3: on only
        trace::Tracer tracer(trace::TracerOptions{});
        const double cpu_before = CpuSeconds();
        StatusOr<Result> ours =
            RunOurs(batch, threads, warmup, iters, on ? &tracer : nullptr);
        if (!ours.ok()) {
          std::fprintf(stderr, "oflite run failed: %s\n", ours.status().ToString().c_str());
          return 1;
        }
        step[on].push_back(ours->step_ms);
        cpu[on].push_back((CpuSeconds() - cpu_before) * 1e3 / (warmup + iters));
      }
      if (step[0].empty() || step[1].empty()) {
        std::printf("%-6lld %-8d (one mode only)\n", static_cast<long long>(batch), threads);
        continue;
      }
      const double off = Median(step[0]), traced = Median(step[1]);
      std::printf("%-6lld %-8d %12.3f %12.3f %8.1f%% %14.3f %14.3f\n",
                  static_cast<long long>(batch), threads, off, traced,
                  100 * (traced - off) / off, Median(cpu[0]), Median(cpu[1]));
      std::fflush(stdout);
    }
  }
  return 0;
}

int Main(int argc, char** argv) {
  int64_t iters = 300, warmup = 30, trace_overhead = 0, repeats = 3, only_batch = 0,
          only_threads = 0;
  std::string python = "/usr/bin/python3";
  std::string script = "tools/bench/train_mlp_torch.py";
  if (const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY")) {
    script = std::string(workspace) + "/" + script;
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iters")) iters = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--warmup")) warmup = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--torch_script")) script = argv[i + 1];
    else if (!std::strcmp(argv[i], "--python")) python = argv[i + 1];
    else if (!std::strcmp(argv[i], "--trace_overhead")) trace_overhead = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::max(1LL, std::atoll(argv[i + 1]));
    else if (!std::strcmp(argv[i], "--batch")) only_batch = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) only_threads = std::atoll(argv[i + 1]);
  }
  openblas_set_num_threads(1);
  if (trace_overhead != 0) {
    std::printf("train_mlp --trace_overhead: %lld measured steps after %lld warm-up, median of "
                "%lld runs per mode\n", static_cast<long long>(iters),
                static_cast<long long>(warmup), static_cast<long long>(repeats));
    return TraceOverhead(static_cast<int>(trace_overhead), warmup, iters,
                         static_cast<int>(repeats), only_batch, only_threads);
  }
  std::printf("train_mlp: 784-256-256-10 MLP, SGD, synthetic data, %lld measured steps after "
              "%lld warm-up\n", static_cast<long long>(iters), static_cast<long long>(warmup));
  std::printf("%-6s %-8s %12s %14s %12s %14s\n", "batch", "threads", "oflite ms", "oflite samp/s",
              "torch ms", "torch samp/s");
  for (int64_t batch : {64, 256}) {
    for (int threads : {1, 2}) {
      StatusOr<Result> ours = RunOurs(batch, threads, warmup, iters);
      if (!ours.ok()) {
        std::fprintf(stderr, "oflite run failed: %s\n", ours.status().ToString().c_str());
        return 1;
      }
      StatusOr<Result> torch = RunTorch(python, script, batch, threads, warmup, iters);
      std::printf("%-6lld %-8d %12.3f %14.0f", static_cast<long long>(batch), threads,
                  ours->step_ms, ours->samples_per_second);
      if (torch.ok()) {
        std::printf(" %12.3f %14.0f\n", torch->step_ms, torch->samples_per_second);
      } else {
        std::printf("   (PyTorch peer skipped: %s)\n", torch.status().message().c_str());
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace oflite

int main(int argc, char** argv) { return oflite::Main(argc, argv); }
