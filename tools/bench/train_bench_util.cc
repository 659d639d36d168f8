#include "tools/bench/train_bench_util.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/kernels/cpu/cpu_library.h"
#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/kernels/cpu/onednn/onednn.h"
#include "oneflow_lite/runtime/runtime.h"
#include "oneflow_lite/session/flags.h"
#include "tools/bench/bench_flags.h"
#include "tools/oflite/openblas_core.h"

namespace oflite {
namespace bench {
namespace {

double CpuSeconds() {
  rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
         1e-6 * (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

int ProcessThreads() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return 0;
  int count = 0;
  while (dirent* entry = readdir(dir)) count += entry->d_name[0] != '.';
  closedir(dir);
  return count;
}

std::string LoadAverage() {
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) != 3) return "?";
  char text[64];
  std::snprintf(text, sizeof(text), "%.2f %.2f %.2f", load[0], load[1], load[2]);
  return text;
}

// Wall and CPU time between the sink's reports of the first measured and
// the last iteration (the metrics observer runs on the sink's thread).
class StepClock : public MetricsObserver {
 public:
  explicit StepClock(int64_t warmup) : warmup_(warmup) {}
  void OnMetrics(int64_t iteration, const std::vector<std::pair<std::string, double>>&) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    const double cpu = CpuSeconds();
    if (iteration == warmup_) {
      first_ = now;
      first_cpu_ = cpu;
      threads_ = ProcessThreads();
    }
    last_ = now;
    last_cpu_ = cpu;
    last_iteration_ = iteration;
  }
  double StepSeconds() const { return Elapsed() / Steps(); }
  double CpuStepSeconds() const { return (last_cpu_ - first_cpu_) / Steps(); }
  int threads() const { return threads_; }

 private:
  double Elapsed() const { return std::chrono::duration<double>(last_ - first_).count(); }
  double Steps() const { return static_cast<double>(std::max<int64_t>(1, last_iteration_ - warmup_)); }

  const int64_t warmup_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point first_, last_;
  double first_cpu_ = 0, last_cpu_ = 0;
  int64_t last_iteration_ = 0;
  int threads_ = 0;
};

struct Sample {
  double step_ms = 0;
  double cpu_ms = 0;  // user+sys CPU time per step, all threads
  int threads = 0;    // threads of the process while measuring
};

// One row: the devices and threads ours runs with; the peer gets `cores`.
struct Layout {
  int cores = 1;
  int devices = 1;
  int cpu_threads = 1;
  std::string Label() const {
    return std::to_string(devices) + "dev x" + std::to_string(cpu_threads);
  }
};

StatusOr<Sample> RunOurs(const BenchModel& model, int64_t batch, const Layout& layout,
                         const BenchOptions& options) {
  Graph g(model.name + "_bench", /*seed=*/1);
  const std::string devices =
      layout.devices == 1 ? "0:cpu:0" : "0:cpu:0-" + std::to_string(layout.devices - 1);
  g.SetPlacement(Placement::Parse(devices));
  model.build(&g, batch);
  g.SetIterations(options.warmup + options.iters + 1);
  ASSIGN_OR_RETURN(Job job, g.Build());
  ClusterProto cluster;
  MachineProto* machine = cluster.add_machine();
  machine->set_id(0);
  machine->set_address("127.0.0.1");
  machine->set_cpu_devices(layout.devices);
  machine->set_cpu_threads(layout.cpu_threads);
  compiler::CompileOptions compile_options;
  compile_options.fuse = options.fuse;
  ASSIGN_OR_RETURN(Plan plan, compiler::Compile(job, cluster, compile_options));
  StepClock clock(options.warmup);
  RuntimeOptions runtime_options;
  runtime_options.metrics = &clock;
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, runtime_options));
  RETURN_IF_ERROR(runtime->Run());
  return Sample{clock.StepSeconds() * 1e3, clock.CpuStepSeconds() * 1e3, clock.threads()};
}

// The peer's last line: "step_ms X cpu_ms Y threads T loss L".
StatusOr<Sample> RunPeer(const BenchModel& model, int64_t batch, int cores,
                         const BenchOptions& options) {
  if (access(options.python.c_str(), X_OK) != 0) {
    return UnavailableError(options.python, " not found");
  }
  if (access(options.torch_script.c_str(), R_OK) != 0) {
    return UnavailableError(options.torch_script, " not found");
  }
  std::ostringstream command;
  command << options.python << " " << options.torch_script << " --model " << model.name
          << " --batch " << batch << " --threads " << cores << " --warmup " << options.warmup
          << " --iters " << options.iters << " 2>&1";
  FILE* pipe = popen(command.str().c_str(), "r");
  if (pipe == nullptr) return UnavailableError("cannot run ", command.str());
  char line[512];
  std::string last, all;
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    last = line;
    all += line;
  }
  const int status = pclose(pipe);
  Sample sample;
  double loss = 0;
  if (status != 0 || std::sscanf(last.c_str(), "step_ms %lf cpu_ms %lf threads %d loss %lf",
                                 &sample.step_ms, &sample.cpu_ms, &sample.threads, &loss) != 4) {
    return UnavailableError("PyTorch peer failed (", command.str(), "): ", all);
  }
  return sample;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

struct Medians {
  double step_ms = 0, cpu_ms = 0;
  int threads = 0;
};

Medians MedianOf(const std::vector<Sample>& samples) {
  std::vector<double> step, cpu;
  Medians m;
  for (const Sample& s : samples) {
    step.push_back(s.step_ms);
    cpu.push_back(s.cpu_ms);
    m.threads = std::max(m.threads, s.threads);
  }
  m.step_ms = Median(step);
  m.cpu_ms = Median(cpu);
  return m;
}

std::vector<Layout> Layouts(int cores, const std::string& layout) {
  if (cores == 1) return {{1, 1, 1}};
  std::vector<Layout> layouts;
  if (layout != "threads") layouts.push_back({cores, cores, 1});
  if (layout != "dp") layouts.push_back({cores, 1, cores});
  return layouts;
}

// Runs one row (samples interleaved) and prints it; false if ours failed.
bool RunRow(const BenchModel& model, int64_t batch, const Layout& layout,
            const BenchOptions& options) {
  const std::string load_before = LoadAverage();
  std::vector<Sample> ours, peer;
  std::string peer_error;
  for (int s = 0; s < options.samples; ++s) {
    StatusOr<Sample> mine = RunOurs(model, batch, layout, options);
    if (!mine.ok()) {
      std::fprintf(stderr, "oflite run failed (%s, batch %lld, %s): %s\n", model.name.c_str(),
                   static_cast<long long>(batch), layout.Label().c_str(),
                   mine.status().ToString().c_str());
      return false;
    }
    ours.push_back(*mine);
    if (!peer_error.empty()) continue;
    StatusOr<Sample> theirs = RunPeer(model, batch, layout.cores, options);
    if (theirs.ok()) {
      peer.push_back(*theirs);
    } else {
      peer_error = theirs.status().message();
    }
  }
  const Medians a = MedianOf(ours);
  std::printf("%-7s %5lld %5d %-8s %9.3f %9.0f %8.3f %4d", model.name.c_str(),
              static_cast<long long>(batch), layout.cores, layout.Label().c_str(), a.step_ms,
              batch * 1e3 / a.step_ms, a.cpu_ms, a.threads);
  if (!peer.empty()) {
    const Medians b = MedianOf(peer);
    std::printf(" %9.3f %9.0f %8.3f %4d %7.2fx", b.step_ms, batch * 1e3 / b.step_ms, b.cpu_ms,
                b.threads, b.step_ms / a.step_ms);
  } else {
    std::printf("   (PyTorch peer skipped: %s)", peer_error.c_str());
  }
  std::printf("  load %s -> %s\n", load_before.c_str(), LoadAverage().c_str());
  std::fflush(stdout);
  return true;
}

std::string JoinList(const std::vector<int64_t>& values) {
  std::string text;
  for (int64_t value : values) text += (text.empty() ? "" : ",") + std::to_string(value);
  return text;
}

// The flags, their defaults those of `defaults`.
std::vector<cli::FlagSpec> FlagSpecs(const BenchOptions& defaults) {
  return {{"batches", "global batch sizes, comma-separated", false, JoinList(defaults.batches)},
          {"cores",
           "computing threads per side, comma-separated (ours: CPU devices x cpu_threads; "
           "PyTorch: set_num_threads(C), set_num_interop_threads(1))",
           false, JoinList(std::vector<int64_t>(defaults.cores.begin(), defaults.cores.end()))},
          {"layout", "for C > 1: dp (C devices x 1 thread), threads (1 device x C) or both", false,
           defaults.layout},
          {"samples", "samples per side and row, interleaved ours/peer; the table shows medians",
           false, std::to_string(defaults.samples)},
          {"warmup", "unmeasured steps per sample", false, std::to_string(defaults.warmup)},
          {"iters", "measured steps per sample", false, std::to_string(defaults.iters)},
          {"python", "the peer's interpreter", false, defaults.python},
          {"torch_script", "the peer", false, defaults.torch_script},
          {"fuse", "compile with the fusion pass: true or false", false,
           defaults.fuse ? "true" : "false"},
          {"cpu_kernels",
           "onednn (oneDNN convolutions and float32 GEMMs) or reference (our im2col + OpenBLAS "
           "kernels) (default: onednn, or $OFLITE_CPU_KERNELS)"},
          {"openblas_coretype",
           "re-run this program with OPENBLAS_CORETYPE=T (both sides inherit it: PyTorch's "
           "matmuls use the same OpenBLAS) (default: the family this CPU supports (SkylakeX, "
           "Haswell) when OpenBLAS would pick a weaker one and the variable is unset)"}};
}

// Reads the flags into `options` (its fields not given keep their values).
Status ReadFlags(const cli::FlagSet& flags, BenchOptions* options) {
  constexpr int64_t kMaxSteps = 1000 * 1000 * 1000;
  ASSIGN_OR_RETURN(options->batches, GetIntList(flags, "batches", 1, 1 << 20));
  ASSIGN_OR_RETURN(std::vector<int64_t> cores, GetIntList(flags, "cores", 1, 1024));
  options->cores.assign(cores.begin(), cores.end());
  options->layout = flags.Get("layout");
  if (options->layout != "dp" && options->layout != "threads" && options->layout != "both") {
    return InvalidArgumentError("flag '--layout' must be dp, threads or both, got '",
                                options->layout, "'");
  }
  ASSIGN_OR_RETURN(options->samples, flags.GetInt("samples", 1, 1000));
  ASSIGN_OR_RETURN(options->warmup, flags.GetInt("warmup", 0, kMaxSteps));
  ASSIGN_OR_RETURN(options->iters, flags.GetInt("iters", 1, kMaxSteps));
  options->python = flags.Get("python");
  options->torch_script = flags.Get("torch_script");
  // A value, not a switch: "--fuse false" as before.
  ASSIGN_OR_RETURN(options->fuse, cli::ParseBool(flags.Get("fuse"), "flag '--fuse'"));
  if (flags.Has("cpu_kernels")) {
    ASSIGN_OR_RETURN(CpuKernelLibrary library,
                     ParseCpuKernelLibrary(flags.Get("cpu_kernels"), "--cpu_kernels"));
    SetCpuKernelLibrary(library);
  }
  return Status::OK();
}

}  // namespace

std::optional<int> ParseBenchFlags(int argc, char** argv, const std::string& program,
                                   const std::string& about, BenchOptions* options) {
  options->torch_script = "tools/bench/train_cpu_torch.py";
  if (const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY")) {
    options->torch_script = std::string(workspace) + "/" + options->torch_script;
  }
  cli::FlagSet flags(program,
                     "[flags]\n\n" + about +
                         ".\nColumns: ms = median wall time per step, samp/s = batch / ms, cpu "
                         "ms = median\nuser+sys CPU time per step of the whole process, thr = "
                         "threads of the process,\nspeed = PyTorch ms / oflite ms (> 1: oflite "
                         "faster).",
                     FlagSpecs(*options));
  auto read = [options](const cli::FlagSet& parsed) -> StatusOr<BenchOptions> {
    BenchOptions read_options = *options;
    RETURN_IF_ERROR(ReadFlags(parsed, &read_options));
    return read_options;
  };
  if (std::optional<int> done = ParseAndRead(&flags, argc, argv, program, read, options)) {
    return done;
  }
  // Both sides inherit the variable (PyTorch's Linear layers use the same
  // OpenBLAS): without --openblas_coretype, the family this CPU deserves.
  if (flags.Get("openblas_coretype").empty()) {
    cli::ReexecForOpenBlasCore(argv);
  } else {
    cli::ReexecWithOpenBlasCore(flags.Get("openblas_coretype"), argv);
  }
  return std::nullopt;
}

int RunBench(const std::vector<BenchModel>& models, const BenchOptions& options) {
  std::printf("%lld measured steps after %lld warm-up, %d samples per side (medians), interleaved"
              "\nours (before the first row; each row sets its own BLAS threads): %s; fusion %s\n"
              "float32 convolutions and GEMMs: %s (%s)\n",
              static_cast<long long>(options.iters), static_cast<long long>(options.warmup),
              options.samples, CpuComputeDescription().c_str(), options.fuse ? "on" : "off",
              CpuKernelLibraryName(GetCpuKernelLibrary()), onednn::Description().c_str());
  const char* core_type = std::getenv("OPENBLAS_CORETYPE");
  std::printf("OPENBLAS_CORETYPE=%s (both sides); cores available: %d; load average %s\n",
              core_type != nullptr ? core_type : "(unset)", AvailableCpuCores(),
              LoadAverage().c_str());
  for (const BenchModel& model : models) std::printf("%s: %s\n", model.name.c_str(),
                                                     model.description.c_str());
  std::printf("%-7s %5s %5s %-8s %9s %9s %8s %4s %9s %9s %8s %4s %8s\n", "model", "batch",
              "cores", "oflite", "ms", "samp/s", "cpu ms", "thr", "torch ms", "samp/s", "cpu ms",
              "thr", "speed");
  for (const BenchModel& model : models) {
    for (int64_t batch : options.batches) {
      for (int cores : options.cores) {
        for (const Layout& layout : Layouts(cores, options.layout)) {
          if (!RunRow(model, batch, layout, options)) return 1;
        }
      }
    }
  }
  return 0;
}

}  // namespace bench
}  // namespace oflite
