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
#include <sstream>

#include "oneflow_lite/compiler/compiler.h"
#include "oneflow_lite/kernels/cpu/cpu_library.h"
#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/kernels/cpu/onednn/onednn.h"
#include "oneflow_lite/runtime/runtime.h"
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

bool ParseList(const std::string& text, std::vector<int64_t>* out) {
  out->clear();
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    char* end = nullptr;
    const long long value = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || value <= 0) return false;
    out->push_back(value);
  }
  return !out->empty();
}

bool ParseBool(const std::string& text, bool* out) {
  if (text != "true" && text != "false") return false;
  *out = text == "true";
  return true;
}

void PrintHelp(const std::string& program, const std::string& about) {
  std::printf(
      "%s\n\nusage: %s [flags]\n"
      "  --batches B1,B2     global batch sizes\n"
      "  --cores C1,C2       computing threads per side (ours: CPU devices x cpu_threads;\n"
      "                      PyTorch: set_num_threads(C), set_num_interop_threads(1))\n"
      "  --layout L          for C > 1: dp (C devices x 1 thread), threads (1 device x C),\n"
      "                      both (default)\n"
      "  --samples N         samples per side and row, interleaved ours/peer (default 5);\n"
      "                      the table shows medians\n"
      "  --warmup W --iters I  steps per sample: W unmeasured, then I measured (10, 100)\n"
      "  --python P          the peer's interpreter (default /usr/bin/python3)\n"
      "  --torch_script S    the peer (default tools/bench/train_cpu_torch.py)\n"
      "  --fuse true|false   compile with the fusion pass (default true)\n"
      "  --cpu_kernels L     onednn (default: oneDNN convolutions and float32 GEMMs) or\n"
      "                      reference (our im2col + OpenBLAS kernels)\n"
      "  --openblas_coretype T  re-run this program with OPENBLAS_CORETYPE=T (both sides\n"
      "                      inherit it: PyTorch's matmuls use the same OpenBLAS); default:\n"
      "                      the family this CPU supports (SkylakeX, Haswell) when OpenBLAS\n"
      "                      would pick a weaker one and the variable is unset\n"
      "  --help              print this and run nothing\n"
      "Columns: ms = median wall time per step, samp/s = batch / ms, cpu ms = median\n"
      "user+sys CPU time per step of the whole process, thr = threads of the process,\n"
      "speed = PyTorch ms / oflite ms (> 1: oflite faster).\n",
      about.c_str(), program.c_str());
}

}  // namespace

bool ParseBenchFlags(int argc, char** argv, const std::string& program, const std::string& about,
                     BenchOptions* options, int* exit_code) {
  options->torch_script = "tools/bench/train_cpu_torch.py";
  if (const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY")) {
    options->torch_script = std::string(workspace) + "/" + options->torch_script;
  }
  std::string core_type;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      PrintHelp(program, about);
      *exit_code = 0;
      return false;
    }
    std::vector<int64_t> list;
    const bool has_value = i + 1 < argc;
    const std::string value = has_value ? argv[i + 1] : "";
    bool ok = has_value;
    if (flag == "--batches") ok = ok && ParseList(value, &options->batches);
    else if (flag == "--cores" && (ok = ok && ParseList(value, &list))) {
      options->cores.assign(list.begin(), list.end());
    } else if (flag == "--samples") ok = ok && (options->samples = std::atoi(value.c_str())) > 0;
    else if (flag == "--warmup") ok = ok && (options->warmup = std::atoll(value.c_str())) >= 0;
    else if (flag == "--iters") ok = ok && (options->iters = std::atoll(value.c_str())) > 0;
    else if (flag == "--python") options->python = value;
    else if (flag == "--torch_script") options->torch_script = value;
    else if (flag == "--openblas_coretype") core_type = value;
    else if (flag == "--cpu_kernels") {
      StatusOr<CpuKernelLibrary> library = ParseCpuKernelLibrary(value, "--cpu_kernels");
      if ((ok = ok && library.ok())) SetCpuKernelLibrary(*library);
    }
    else if (flag == "--fuse") ok = ok && ParseBool(value, &options->fuse);
    else if (flag == "--layout") {
      options->layout = value;
      ok = ok && (value == "dp" || value == "threads" || value == "both");
    } else ok = false;
    if (!ok) {
      std::fprintf(stderr, "%s: bad flag or value '%s %s' (see --help)\n", program.c_str(),
                   flag.c_str(), value.c_str());
      *exit_code = 2;
      return false;
    }
    ++i;
  }
  // Both sides inherit the variable (PyTorch's Linear layers use the same
  // OpenBLAS): without --openblas_coretype, the family this CPU deserves.
  if (core_type.empty()) {
    cli::ReexecForOpenBlasCore(argv);
  } else {
    cli::ReexecWithOpenBlasCore(core_type, argv);
  }
  return true;
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
