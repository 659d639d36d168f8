// train_gpu: step time of the 784-256-256-10 MLP (batch 64 and 1024) and of
// LeNet-5 (batch 256) on one GPU, next to PyTorch eager and PyTorch
// CUDA-graph replay of the same step on the same GPU in the same run.
//
// Ours: the whole training step (forward, backward, SGD / momentum updates)
// through SingleGpuExecutor (tools/gpu): CUDA kernels launched in a fixed
// order on one stream from preallocated memory. The synthetic batch is drawn
// once and stays on the device (the runtime overlaps loading with compute;
// the peer keeps a fixed device batch too). Step time: CUDA events recorded
// between consecutive steps, median over --iters steps after --warmup.
// FP32 everywhere (no TF32 on either side).
//
// Also the compiled plan through the actor runtime (compiler::Compile for
// cuda:0, Runtime): every step then loads a fresh batch on the CPU and
// copies it to the device (H2D copy actor), as training does. Its step time
// is wall clock: (time of a run of warmup+iters steps - time of a run of
// warmup steps) / iters, so allocation, handles and thread start-up cancel.
//
//   train_gpu [--iters 200] [--warmup 30] [--python python3]
//             [--torch_script tools/bench/train_gpu_torch.py]
// Prints one row per configuration: ours (executor), ours (runtime), torch
// eager, torch graph (ms).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/device/cuda/cuda_util.h"
#include "oneflow_lite/runtime/runtime.h"
#include "tools/gpu/gpu_jobs.h"
#include "tools/gpu/single_gpu_executor.h"

namespace oflite {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Median step milliseconds and the final loss.
StatusOr<std::pair<double, double>> TimeOurs(const Job& job, int64_t warmup, int64_t iters) {
  SingleGpuOptions options;
  options.sources_once = true;
  ASSIGN_OR_RETURN(auto executor, SingleGpuExecutor::Create(job, options));
  for (int64_t i = 0; i < warmup; ++i) RETURN_IF_ERROR(executor->Step());
  ASSIGN_OR_RETURN(auto before, executor->Metrics());
  cudaStream_t stream = executor->device().stream();
  std::vector<cudaEvent_t> events(iters + 1);
  for (cudaEvent_t& e : events) CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));
  for (int64_t i = 0; i < iters; ++i) {
    CUDA_RETURN_IF_ERROR(cudaEventRecord(events[i], stream));
    RETURN_IF_ERROR(executor->Step());
  }
  CUDA_RETURN_IF_ERROR(cudaEventRecord(events[iters], stream));
  CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events[iters]));
  std::vector<double> steps;
  for (int64_t i = 0; i < iters; ++i) {
    float ms = 0;
    CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events[i], events[i + 1]));
    steps.push_back(ms);
  }
  for (cudaEvent_t e : events) cudaEventDestroy(e);
  ASSIGN_OR_RETURN(auto after, executor->Metrics());
  if (!(after.at("loss") < before.at("loss"))) {
    return InternalError("loss did not decrease on the fixed batch: ", before.at("loss"), " -> ",
                         after.at("loss"));
  }
  return std::make_pair(Median(steps), after.at("loss"));
}

// Wall seconds of one runtime run of `iters` steps of `plan`.
StatusOr<double> RunSeconds(const Plan& plan, int64_t iters) {
  RuntimeOptions options;
  options.total_iters = iters;
  options.watchdog_timeout = std::chrono::milliseconds(60000);
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
  RETURN_IF_ERROR(runtime->Run());
  return runtime->stats().seconds;
}

// Milliseconds per step of the compiled plan through the actor runtime.
StatusOr<double> TimeRuntime(const Job& job, int64_t warmup, int64_t iters) {
  ClusterProto cluster;  // one machine: a CPU for loading, cuda:0
  MachineProto* machine = cluster.add_machine();
  machine->set_id(0);
  machine->set_address("127.0.0.1");
  machine->set_cpu_devices(1);
  machine->set_cuda_devices(1);
  ASSIGN_OR_RETURN(Plan plan, compiler::Compile(job, cluster));
  ASSIGN_OR_RETURN(double short_run, RunSeconds(plan, warmup));
  ASSIGN_OR_RETURN(double long_run, RunSeconds(plan, warmup + iters));
  if (iters <= 0) return InvalidArgumentError("--iters must be positive");
  return std::max(0.0, long_run - short_run) * 1000.0 / static_cast<double>(iters);
}

// The peer's last line: "eager_ms X graph_ms Y loss Z".
StatusOr<std::vector<double>> TimeTorch(const std::string& python, const std::string& script,
                                        const std::string& model, int64_t batch, int64_t warmup,
                                        int64_t iters) {
  if (access(script.c_str(), R_OK) != 0) return UnavailableError(script, " not found");
  const std::string command = python + " " + script + " --model " + model + " --batch " +
                              std::to_string(batch) + " --warmup " + std::to_string(warmup) +
                              " --iters " + std::to_string(iters) + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return UnavailableError("cannot run ", command);
  char line[1024];
  std::string last, all;
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    last = line;
    all += line;
  }
  const int status = pclose(pipe);
  double eager = 0, graph = 0, loss = 0;
  if (status != 0 ||
      std::sscanf(last.c_str(), "eager_ms %lf graph_ms %lf loss %lf", &eager, &graph, &loss) != 3) {
    return UnavailableError("PyTorch peer failed (", command, "): ", all);
  }
  return std::vector<double>{eager, graph, loss};
}

int Main(int argc, char** argv) {
  int64_t iters = 200, warmup = 30;
  std::string python = "python3", script = "tools/bench/train_gpu_torch.py";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iters")) iters = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--warmup")) warmup = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--python")) python = argv[i + 1];
    if (!std::strcmp(argv[i], "--torch_script")) script = argv[i + 1];
  }
  if (CudaDeviceCount() == 0) {
    std::printf("train_gpu SKIPPED: no CUDA device\n");
    return 77;
  }
  struct Config {
    const char* model;
    int64_t batch;
  };
  std::printf("%-8s %6s %12s %12s %14s %14s %10s\n", "model", "batch", "oflite_ms",
              "runtime_ms", "torch_eager_ms", "torch_graph_ms", "oflite_loss");
  bool ok = true;
  for (const Config& c : {Config{"mlp", 64}, Config{"mlp", 1024}, Config{"lenet5", 256}}) {
    const bool lenet = !std::strcmp(c.model, "lenet5");
    auto job = lenet ? LeNetJob(c.batch, warmup + iters, "0:cuda:0")
                     : MlpJob(c.batch, warmup + iters, "0:cuda:0");
    auto ours = job.ok() ? TimeOurs(*job, warmup, iters) : StatusOr<std::pair<double, double>>(job.status());
    auto torch = TimeTorch(python, script, c.model, c.batch, warmup, iters);
    auto runtime = job.ok() ? TimeRuntime(*job, warmup, iters) : StatusOr<double>(job.status());
    char runtime_ms[32] = "FAILED";
    if (runtime.ok()) {
      std::snprintf(runtime_ms, sizeof(runtime_ms), "%.3f", *runtime);
    } else {
      std::fprintf(stderr, "%s batch %ld: runtime run failed: %s\n", c.model,
                   static_cast<long>(c.batch), runtime.status().ToString().c_str());
      ok = false;
    }
    if (!ours.ok()) {
      std::printf("%-8s %6ld ours FAILED: %s\n", c.model, static_cast<long>(c.batch),
                  ours.status().ToString().c_str());
      ok = false;
      continue;
    }
    if (!torch.ok()) {
      std::printf("%-8s %6ld %12.3f %12s %14s %14s %10.4f   (torch: %s)\n", c.model,
                  static_cast<long>(c.batch), ours->first, runtime_ms, "n/a", "n/a",
                  ours->second, torch.status().ToString().c_str());
      continue;
    }
    std::printf("%-8s %6ld %12.3f %12s %14.3f %14.3f %10.4f\n", c.model,
                static_cast<long>(c.batch), ours->first, runtime_ms, (*torch)[0], (*torch)[1],
                ours->second);
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace oflite

int main(int argc, char** argv) { return oflite::Main(argc, argv); }
