// train_gpu: per-step time of training on one GPU, ours next to PyTorch in
// the same run, for the 784-256-256-10 MLP at batch 64, 1024 and 16384, the
// 784-4096-4096-10 MLP ("mlp4k") at batch 4096, and LeNet-5 at batch 256 and
// 4096. Columns (milliseconds per step, FP32 everywhere, no TF32):
//   runtime_ms   the compiled plan (compiler::Compile for cuda:0, one task
//                per op: merge_gpu_compute off) through the actor runtime,
//                stream-ordered: each step loads a fresh batch on the CPU
//                and copies it to the device (H2D copy actor), as training
//                does. One run of warmup+iters steps; the host clock at
//                each iteration's metrics (the sink, once the step's loss
//                reached the host) after the warmup, in 5 windows of
//                iters/5 steps: the median window's milliseconds per step.
//                Start-up (lazy module loading, cuDNN algorithm choice,
//                graph capture) and teardown stay outside. (It was the
//                difference of two runs, which went negative when the first
//                run of the process paid the one-time start-up: 0.000.)
//   rt_graph_ms  the same through the actor runtime with the default plan:
//                the GPU's compute tasks merged into one task whose act is
//                captured as a CUDA graph and replayed (docs/gpu.md "Graph
//                replay"); "n/a" and the reason when nothing was replayed.
//   exec_ms      the same step through SingleGpuExecutor (tools/gpu): the
//                plan's kernels launched in a fixed order on one stream, the
//                synthetic batch drawn once and kept on the device. Median of
//                CUDA-event intervals between consecutive steps.
//   graph_ms     the executor's iteration captured once as a CUDA Graph and
//                replayed (only for plans with Plan.graph_capturable; "n/a"
//                and the reason otherwise). Median as exec_ms.
//   torch_eager_ms, torch_graph_ms   tools/bench/train_gpu_torch.py: PyTorch
//                eager and CUDA-graph replay of the same step, fixed device
//                batch.
// After each row, "kernel_profile" lines: the executor with per-op timing
// (SingleGpuOptions::time_ops, every step waits for the stream, so the sum
// is a serialized step), the host's time to make one batch (the CPU source
// the runtime columns run every step, overlapped with compute), its H2D
// copy, and the ops taking the most device time (--profile_top; 0: none).
// Convolutions print their cuDNN algorithm choice (OFLITE_CUDNN_NOTES) to
// stderr.
//
//   train_gpu [--iters 200] [--warmup 30] [--budget_s 0] [--python python3]
//             [--torch_script tools/bench/train_gpu_torch.py] [--profile_top 6]
//             [--help]
// Large configurations (batch >= 4096) run a quarter of --iters. With
// --budget_s > 0, a configuration that would start after the budget is
// reported "skipped: budget". Exit 0 when every configuration that ran
// trained (its loss went down) on every path of ours; 77 without a GPU.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/device/cuda/cuda_util.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/session/flags.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/train_gpu_clock.h"
#include "tools/gpu/gpu_jobs.h"
#include "tools/gpu/single_gpu_executor.h"

namespace oflite {
namespace {

// After "usage: ... <program>" in --help.
constexpr char kUsage[] =
    "[flags]\n\nPer-step time of training on one GPU, ours (actor runtime, executor, CUDA "
    "graph replay)\nnext to PyTorch eager and CUDA-graph replay in the same run (exit 77 "
    "without a GPU).";

// Median step milliseconds and the final loss of the executor, eager or
// replaying a captured graph (`graph`); `note` says why it did not replay.
StatusOr<std::pair<double, double>> TimeOurs(const Job& job, int64_t warmup, int64_t iters,
                                             bool graph, std::string* note) {
  SingleGpuOptions options;
  options.sources_once = true;
  options.graph_replay = graph;
  ASSIGN_OR_RETURN(auto executor, SingleGpuExecutor::Create(job, options));
  for (int64_t i = 0; i < warmup; ++i) RETURN_IF_ERROR(executor->Step());
  ASSIGN_OR_RETURN(auto before, executor->Metrics());
  if (graph && !executor->replaying()) {
    *note = executor->graph_note();
    return UnavailableError("no graph replay: ", executor->graph_note());
  }
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

// Milliseconds per step of one runtime run of warmup+iters steps of `plan`
// (IterationClock); with `want_replay`, Unavailable unless a task replayed
// captured graphs.
StatusOr<double> RunStepMs(const Plan& plan, int64_t warmup, int64_t iters, bool want_replay) {
  IterationClock clock(warmup + iters);
  RuntimeOptions options;
  options.total_iters = warmup + iters;
  options.watchdog_timeout = std::chrono::milliseconds(60000);
  options.metrics = &clock;
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, options));
  RETURN_IF_ERROR(runtime->Run());
  const RunStats& stats = runtime->stats();
  if (want_replay && stats.acts_replayed == 0) {
    return UnavailableError("the runtime replayed no graph: ",
                            stats.graph_note.empty() ? plan.graph_note() : stats.graph_note);
  }
  return clock.StepMs(warmup, 5);
}

ClusterProto OneGpuCluster() {
  ClusterProto cluster;  // one machine: a CPU for loading, cuda:0
  MachineProto* machine = cluster.add_machine();
  machine->set_id(0);
  machine->set_address("127.0.0.1");
  machine->set_cpu_devices(1);
  machine->set_cuda_devices(1);
  return cluster;
}

// Milliseconds per step of the compiled plan through the actor runtime.
StatusOr<double> TimeRuntime(const Plan& plan, int64_t warmup, int64_t iters, bool want_replay) {
  if (iters <= 0) return InvalidArgumentError("--iters must be positive");
  return RunStepMs(plan, warmup, iters, want_replay);
}

// The "kernel_profile" lines of a configuration (see the file comment).
Status ProfileOps(const Job& job, const char* model, int64_t batch, int top) {
  constexpr int kWarmup = 3, kSteps = 10;
  SingleGpuOptions options;
  options.time_ops = true;  // sources every step: their host time is the loading cost
  ASSIGN_OR_RETURN(auto executor, SingleGpuExecutor::Create(job, options));
  for (int i = 0; i < kWarmup; ++i) RETURN_IF_ERROR(executor->Step());
  executor->ResetOpTimes();
  for (int i = 0; i < kSteps; ++i) RETURN_IF_ERROR(executor->Step());
  RETURN_IF_ERROR(executor->Metrics().status());
  std::vector<OpTime> device_ops;
  double device = 0, host = 0, copy = 0;
  for (const OpTime& t : executor->OpTimes()) {
    if (t.on_host) {
      host += t.ms;
      copy += t.copy_ms;
    } else {
      device += t.ms;
      device_ops.push_back(t);
    }
  }
  std::printf("kernel_profile %-6s %6ld: device ops %.3f ms/step (serialized), host source "
              "%.3f ms/batch, H2D copy %.3f ms/batch\n",
              model, static_cast<long>(batch), device / kSteps, host / kSteps, copy / kSteps);
  std::stable_sort(device_ops.begin(), device_ops.end(),
                   [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
  for (size_t i = 0; i < device_ops.size() && static_cast<int>(i) < top; ++i) {
    const OpTime& t = device_ops[i];
    std::printf("kernel_profile %-6s %6ld:   %8.3f ms %5.1f%%  %s (%s)\n", model,
                static_cast<long>(batch), t.ms / kSteps, device > 0 ? 100.0 * t.ms / device : 0.0,
                t.name.c_str(), t.type.c_str());
  }
  return Status::OK();
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

struct Config {
  const char* model;  // "mlp", "mlp4k", "lenet5"
  int64_t batch;
};

StatusOr<Job> JobOf(const Config& c, int64_t iterations) {
  if (!std::strcmp(c.model, "lenet5")) return LeNetJob(c.batch, iterations, "0:cuda:0");
  const int64_t hidden = !std::strcmp(c.model, "mlp4k") ? 4096 : 256;
  return MlpJob(c.batch, iterations, "0:cuda:0", hidden);
}

std::string Ms(const StatusOr<double>& ms) {
  if (!ms.ok()) return "n/a";
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", *ms);
  return text;
}

// One row; false when one of our paths failed to train.
bool RunConfig(const Config& c, int64_t warmup, int64_t iters, const std::string& python,
               const std::string& script, int profile_top) {
  StatusOr<Job> job = JobOf(c, warmup + iters);
  if (!job.ok()) {
    std::printf("%-8s %6ld FAILED: %s\n", c.model, static_cast<long>(c.batch),
                job.status().ToString().c_str());
    return false;
  }
  compiler::CompileOptions per_op;
  per_op.merge_gpu_compute = false;
  StatusOr<Plan> op_plan = compiler::Compile(*job, OneGpuCluster(), per_op);
  StatusOr<double> runtime = op_plan.ok() ? TimeRuntime(*op_plan, warmup, iters, false)
                                          : StatusOr<double>(op_plan.status());
  StatusOr<Plan> plan = compiler::Compile(*job, OneGpuCluster());
  StatusOr<double> rt_graph = plan.ok() ? TimeRuntime(*plan, warmup, iters, true)
                                        : StatusOr<double>(plan.status());
  std::string graph_note;
  auto exec = TimeOurs(*job, warmup, iters, false, &graph_note);
  StatusOr<std::pair<double, double>> graph =
      UnavailableError("the plan is not graph-capturable: ",
                       plan.ok() ? plan->graph_note() : plan.status().ToString());
  if (plan.ok() && plan->graph_capturable()) graph = TimeOurs(*job, warmup, iters, true, &graph_note);
  auto torch = TimeTorch(python, script, c.model, c.batch, warmup, iters);
  const StatusOr<double> exec_ms =
      exec.ok() ? StatusOr<double>(exec->first) : StatusOr<double>(exec.status());
  const StatusOr<double> graph_ms =
      graph.ok() ? StatusOr<double>(graph->first) : StatusOr<double>(graph.status());
  std::printf("%-8s %6ld %11s %11s %9s %9s %14s %14s %10s\n", c.model,
              static_cast<long>(c.batch), Ms(runtime).c_str(), Ms(rt_graph).c_str(),
              Ms(exec_ms).c_str(), Ms(graph_ms).c_str(),
              torch.ok() ? Ms((*torch)[0]).c_str() : "n/a",
              torch.ok() ? Ms((*torch)[1]).c_str() : "n/a",
              exec.ok() ? Ms(exec->second).c_str() : "n/a");
  bool ok = true;
  for (const auto& [what, status] :
       {std::make_pair("runtime", runtime.status()), std::make_pair("rt_graph", rt_graph.status()),
        std::make_pair("exec", exec.status()),
        std::make_pair("graph", graph.status()), std::make_pair("torch", torch.status())}) {
    if (status.ok()) continue;
    std::printf("  %s %ld %s: %s\n", c.model, static_cast<long>(c.batch), what,
                status.ToString().c_str());
    const bool graph_not_asked = (!std::strcmp(what, "graph") || !std::strcmp(what, "rt_graph")) &&
                                 plan.ok() && !plan->graph_capturable();
    if (std::strcmp(what, "torch") != 0 && !graph_not_asked) ok = false;
  }
  if (profile_top > 0) {
    // Explains the row; a failure here does not fail the benchmark.
    Status profiled = ProfileOps(*job, c.model, c.batch, profile_top);
    if (!profiled.ok()) {
      std::printf("kernel_profile %-6s %6ld: n/a: %s\n", c.model, static_cast<long>(c.batch),
                  profiled.ToString().c_str());
    }
  }
  std::fflush(stdout);
  return ok;
}

std::vector<cli::FlagSpec> FlagSpecs() {
  return {{"iters", "measured steps per configuration (a quarter for batch >= 4096)", false, "200"},
          {"warmup", "steps before measuring (a quarter for batch >= 4096)", false, "30"},
          {"budget_s",
           "seconds after which configurations not yet started are reported "
           "\"skipped: budget\" (0: no budget)",
           false, "0"},
          {"profile_top", "ops listed per configuration in the kernel_profile lines (0: no profile)",
           false, "6"},
          {"python", "the PyTorch peer's interpreter", false, "python3"},
          {"torch_script", "the PyTorch peer", false, "tools/bench/train_gpu_torch.py"}};
}

struct Options {
  int64_t iters = 0, warmup = 0;
  int64_t budget_s = 0;  // 0: no budget
  int64_t profile_top = 6;
  std::string python, script;
};

StatusOr<Options> ReadOptions(const cli::FlagSet& flags) {
  Options options;
  ASSIGN_OR_RETURN(options.iters, flags.GetInt("iters", 1, 1000 * 1000 * 1000));
  ASSIGN_OR_RETURN(options.warmup, flags.GetInt("warmup", 1, 1000 * 1000 * 1000));
  ASSIGN_OR_RETURN(options.budget_s, flags.GetInt("budget_s", 0, cli::kMaxDurationSeconds));
  ASSIGN_OR_RETURN(options.profile_top, flags.GetInt("profile_top", 0, 1000));
  options.python = flags.Get("python");
  options.script = flags.Get("torch_script");
  return options;
}

int Run(const Options& options) {
  const int64_t iters = options.iters, warmup = options.warmup, budget_s = options.budget_s;
  const std::string& python = options.python;
  const std::string& script = options.script;
  if (CudaDeviceCount() == 0) {
    std::printf("train_gpu SKIPPED: no CUDA device\n");
    return 77;
  }
  // Each convolution's cuDNN algorithm choice, with the measured candidates,
  // on stderr (the first kernel of each geometry; blas_kernels.cc).
  setenv("OFLITE_CUDNN_NOTES", "1", /*overwrite=*/0);
  const auto begin = std::chrono::steady_clock::now();
  std::printf("%-8s %6s %11s %11s %9s %9s %14s %14s %10s\n", "model", "batch", "runtime_ms",
              "rt_graph_ms", "exec_ms", "graph_ms", "torch_eager_ms", "torch_graph_ms", "exec_loss");
  bool ok = true;
  for (const Config& c : {Config{"mlp", 64}, Config{"mlp", 1024}, Config{"lenet5", 256},
                          Config{"mlp", 16384}, Config{"mlp4k", 4096}, Config{"lenet5", 4096}}) {
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    if (budget_s > 0 && spent > static_cast<double>(budget_s)) {
      std::printf("%-8s %6ld skipped: budget (%.0f s of %ld s spent)\n", c.model,
                  static_cast<long>(c.batch), spent, static_cast<long>(budget_s));
      continue;
    }
    const bool large = c.batch >= 4096;
    ok = RunConfig(c, large ? std::max<int64_t>(5, warmup / 4) : warmup,
                   large ? std::max<int64_t>(20, iters / 4) : iters, python, script,
                   static_cast<int>(options.profile_top)) && ok;
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace oflite

int main(int argc, char** argv) {
  using namespace oflite;
  return bench::BenchMain(argc, argv, "train_gpu", kUsage, FlagSpecs(), ReadOptions, Run);
}
