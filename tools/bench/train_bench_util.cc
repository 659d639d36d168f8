#include "tools/bench/train_bench_util.h"

#include <dirent.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>

#include "oneflow_lite/comm/launch/cpu_binding.h"
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
// the last iteration (the metrics observer runs on the sink's thread), and
// the loss of iteration `loss_iteration` (0-based).
class StepClock : public MetricsObserver {
 public:
  StepClock(int64_t warmup, int64_t loss_iteration)
      : warmup_(warmup), loss_iteration_(loss_iteration) {}
  void OnMetrics(int64_t iteration,
                 const std::vector<std::pair<std::string, double>>& metrics) override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [name, value] : metrics) {
      if (name == "loss" && iteration == loss_iteration_) loss_ = value;
    }
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
  double loss() const { return loss_; }

 private:
  double Elapsed() const { return std::chrono::duration<double>(last_ - first_).count(); }
  double Steps() const {
    return static_cast<double>(std::max<int64_t>(1, last_iteration_ - warmup_));
  }

  const int64_t warmup_;
  const int64_t loss_iteration_;
  std::mutex mutex_;
  std::chrono::steady_clock::time_point first_, last_;
  double first_cpu_ = 0, last_cpu_ = 0;
  int64_t last_iteration_ = 0;
  int threads_ = 0;
  double loss_ = 0;
};

struct Sample {
  double step_ms = 0;
  double cpu_ms = 0;  // user+sys CPU time per step, all threads
  int threads = 0;    // threads of the process while measuring
  double loss = 0;    // the last step's
};

// One row: the devices and threads ours runs with within `cores`.
struct Layout {
  int cores = 1;
  int devices = 1;
  int cpu_threads = 1;
  std::string Label() const {
    return std::to_string(devices) + "dev x" + std::to_string(cpu_threads);
  }
};

// One setting of the peer: torch.set_num_threads(torch_threads) and an
// OpenBLAS pool of blas_threads.
struct PeerConfig {
  int torch_threads = 1;
  int blas_threads = 1;
  std::string Label() const {
    return "torch " + std::to_string(torch_threads) + " x blas " + std::to_string(blas_threads);
  }
};

// The peer's settings within `cores` (BenchOptions::peer_configs).
std::vector<PeerConfig> PeerConfigs(int cores, const std::string& which) {
  const bool all = which == "all" || (which == "auto" && cores <= 2);
  std::vector<PeerConfig> configs;
  for (int t = 1; t <= cores; ++t) {
    for (int b = 1; b <= cores; ++b) {
      if (all || t == b) configs.push_back({t, b});
    }
  }
  return configs;
}

// The CPUs a budget of `cores` is pinned to: the first `cores` of those the
// process could run on when the bench started (`allowed`), or all of them
// when there are fewer (the group then says it oversubscribes them).
std::vector<int> BudgetCpus(const std::vector<int>& allowed, int cores) {
  return {allowed.begin(), allowed.begin() + std::min<size_t>(allowed.size(), cores)};
}

// Restricts every thread of this process to `cpus`. Threads started later
// inherit the mask of the thread that starts them, and so does the peer,
// which popen forks from this thread: both sides compute on the same CPUs.
// Every thread and not only this one, since OpenBLAS started its pool when
// it loaded.
Status PinProcess(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return UnavailableError("cannot list /proc/self/task: ", strerror(errno));
  Status status;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const pid_t tid = static_cast<pid_t>(std::atoi(entry->d_name));
    // A thread that ended since the listing (ESRCH) needs no mask.
    if (sched_setaffinity(tid, sizeof(set), &set) != 0 && errno != ESRCH) {
      status = UnavailableError("cannot pin thread ", tid, " to CPUs ", comm::DescribeCpus(cpus),
                                ": ", strerror(errno));
      break;
    }
  }
  closedir(dir);
  return status;
}

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
  // The loss of the peer's last step, its (warmup + iters)-th: ours runs
  // one iteration more (the clock starts at the first measured one's end).
  StepClock clock(options.warmup, options.warmup + options.iters - 1);
  RuntimeOptions runtime_options;
  runtime_options.metrics = &clock;
  ASSIGN_OR_RETURN(std::unique_ptr<Runtime> runtime, Runtime::Create(plan, runtime_options));
  RETURN_IF_ERROR(runtime->Run());
  return Sample{clock.StepSeconds() * 1e3, clock.CpuStepSeconds() * 1e3, clock.threads(),
                clock.loss()};
}

// The peer's last line: "step_ms X cpu_ms Y threads T loss L cpus C
// torch_threads t blas_threads b". C, t and b are checked against what was
// asked (`cpus`: the CPUs this process is pinned to), so a setting that did
// not take fails loudly instead of measuring something else. The run is
// bounded by --peer_timeout (coreutils timeout, which kills the whole
// process group).
StatusOr<Sample> RunPeer(const BenchModel& model, int64_t batch, const PeerConfig& config, int cpus,
                         const BenchOptions& options) {
  if (access(options.python.c_str(), X_OK) != 0) {
    return UnavailableError(options.python, " not found");
  }
  if (access(options.torch_script.c_str(), R_OK) != 0) {
    return UnavailableError(options.torch_script, " not found");
  }
  std::ostringstream command;
  command << "timeout -k 5 " << options.peer_timeout_s << " " << options.python << " "
          << options.torch_script << " --model " << model.name << " --batch " << batch
          << " --torch-threads " << config.torch_threads << " --blas-threads "
          << config.blas_threads << " --warmup " << options.warmup << " --iters " << options.iters
          << " 2>&1";
  FILE* pipe = popen(command.str().c_str(), "r");
  if (pipe == nullptr) return UnavailableError("cannot run ", command.str());
  char line[512];
  std::string last, all;
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    last = line;
    all += line;
  }
  const int status = pclose(pipe);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 124) {
    return DeadlineExceededError("PyTorch peer (", config.Label(), ") ran past --peer_timeout ",
                                 options.peer_timeout_s, " s: ", command.str());
  }
  Sample sample;
  int peer_cpus = 0, torch_threads = 0, blas_threads = 0;
  if (status != 0 ||
      std::sscanf(last.c_str(),
                  "step_ms %lf cpu_ms %lf threads %d loss %lf cpus %d torch_threads %d "
                  "blas_threads %d",
                  &sample.step_ms, &sample.cpu_ms, &sample.threads, &sample.loss, &peer_cpus,
                  &torch_threads, &blas_threads) != 7) {
    return UnavailableError("PyTorch peer (", config.Label(), ") failed (", command.str(),
                            "): ", all);
  }
  if (peer_cpus != cpus || torch_threads != config.torch_threads ||
      (blas_threads >= 0 && blas_threads != config.blas_threads)) {
    return InternalError("PyTorch peer asked for ", config.Label(), " on ", cpus,
                         " CPUs ran torch ", torch_threads, " x blas ", blas_threads, " on ",
                         peer_cpus, " CPUs: ", last);
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
  double step_ms = 0, cpu_ms = 0, loss = 0;
  int threads = 0;
};

Medians MedianOf(const std::vector<Sample>& samples) {
  std::vector<double> step, cpu, loss;
  Medians m;
  for (const Sample& s : samples) {
    step.push_back(s.step_ms);
    cpu.push_back(s.cpu_ms);
    loss.push_back(s.loss);
    m.threads = std::max(m.threads, s.threads);
  }
  m.step_ms = Median(step);
  m.cpu_ms = Median(cpu);
  m.loss = Median(loss);
  return m;
}

std::vector<Layout> Layouts(int cores, const std::string& layout) {
  if (cores == 1) return {{1, 1, 1}};
  std::vector<Layout> layouts;
  if (layout != "threads") layouts.push_back({cores, cores, 1});
  if (layout != "dp") layouts.push_back({cores, 1, cores});
  return layouts;
}

// "ms samp/s cpu-ms thr" of one side, in the table's columns.
void PrintMedians(const Medians& m, int64_t batch) {
  std::printf(" %9.3f %9.0f %8.3f %4d", m.step_ms, batch * 1e3 / m.step_ms, m.cpu_ms, m.threads);
}

// One (model, batch, cores) group: ours in every layout and the peer in
// every setting, pinned to `cpus`, sampled round by round. Each round
// starts one entry later than the one before, so every entry takes every
// place in the order once per that many rounds and none always follows the
// same neighbour (e.g. a peer setting that leaves the cores hot). Prints a
// row per layout (ours against the peer's fastest setting by median wall
// time) and then the peer's whole sweep; false if ours failed or pinning
// did.
bool RunGroup(const BenchModel& model, int64_t batch, int cores, const std::vector<int>& cpus,
              const BenchOptions& options) {
  const std::vector<Layout> layouts = Layouts(cores, options.layout);
  const std::vector<PeerConfig> configs = PeerConfigs(cores, options.peer_configs);
  if (Status pinned = PinProcess(cpus); !pinned.ok()) {
    std::fprintf(stderr, "%s\n", pinned.ToString().c_str());
    return false;
  }
  const size_t entries = layouts.size() + configs.size();
  std::vector<std::vector<Sample>> ours(layouts.size()), peer(configs.size());
  std::string peer_error;
  const std::string load_before = LoadAverage();
  for (int round = 0; round < options.samples; ++round) {
    for (size_t k = 0; k < entries; ++k) {
      const size_t e = (round + k) % entries;
      if (e < layouts.size()) {
        StatusOr<Sample> mine = RunOurs(model, batch, layouts[e], options);
        if (!mine.ok()) {
          std::fprintf(stderr, "oflite run failed (%s, batch %lld, %s): %s\n", model.name.c_str(),
                       static_cast<long long>(batch), layouts[e].Label().c_str(),
                       mine.status().ToString().c_str());
          return false;
        }
        ours[e].push_back(*mine);
        continue;
      }
      if (!peer_error.empty()) continue;
      const size_t c = e - layouts.size();
      StatusOr<Sample> theirs =
          RunPeer(model, batch, configs[c], static_cast<int>(cpus.size()), options);
      if (theirs.ok()) {
        peer[c].push_back(*theirs);
      } else {
        peer_error = theirs.status().message();
      }
    }
  }
  const std::string load_after = LoadAverage();
  // The peer counts only with every setting measured: a best of some
  // would not be its best.
  std::vector<Medians> peer_medians;
  size_t best = 0, worst = 0;
  if (peer_error.empty()) {
    for (size_t c = 0; c < configs.size(); ++c) {
      peer_medians.push_back(MedianOf(peer[c]));
      if (peer_medians[c].step_ms < peer_medians[best].step_ms) best = c;
      if (peer_medians[c].step_ms > peer_medians[worst].step_ms) worst = c;
    }
  }
  for (size_t l = 0; l < layouts.size(); ++l) {
    const Medians a = MedianOf(ours[l]);
    std::printf("%-7s %5lld %5d %-8s", model.name.c_str(), static_cast<long long>(batch), cores,
                layouts[l].Label().c_str());
    PrintMedians(a, batch);
    if (peer_error.empty()) {
      const Medians& b = peer_medians[best];
      std::printf("  %-16s", configs[best].Label().c_str());
      PrintMedians(b, batch);
      std::printf(" %7.2fx", b.step_ms / a.step_ms);
    } else {
      std::printf("  (PyTorch peer skipped: %s)", peer_error.c_str());
    }
    std::printf("  load %s -> %s\n", load_before.c_str(), load_after.c_str());
  }
  // Both sides train the same network from the same kind of init on data
  // of the same distribution: their losses after the same steps should be
  // in the same range (a twin that computes something else shows here).
  std::printf("  loss at step %lld (medians):",
              static_cast<long long>(options.warmup + options.iters));
  for (size_t l = 0; l < layouts.size(); ++l) {
    std::printf(" oflite %s %.4f;", layouts[l].Label().c_str(), MedianOf(ours[l]).loss);
  }
  if (peer_error.empty()) {
    std::printf(" PyTorch %s %.4f", configs[best].Label().c_str(), peer_medians[best].loss);
  }
  std::printf("\n");
  std::printf(
      "  both sides on CPUs %s%s", comm::DescribeCpus(cpus).c_str(),
      static_cast<int>(cpus.size()) < cores ? " (fewer than the cores: oversubscribed)" : "");
  if (peer_error.empty()) {
    std::printf("; PyTorch's %zu settings (medians of %d):\n", configs.size(), options.samples);
    for (size_t c = 0; c < configs.size(); ++c) {
      std::printf("    %-16s", configs[c].Label().c_str());
      PrintMedians(peer_medians[c], batch);
      std::printf("%s\n", c == best ? "  best" : configs.size() > 1 && c == worst ? "  worst" : "");
    }
  } else {
    std::printf("\n");
  }
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
  const std::string batches_default = JoinList(defaults.batches);
  std::vector<cli::FlagSpec> specs = {
      {"batches",
       "global batch sizes, comma-separated (default: a model's own where it "
       "has some, else " +
           batches_default + ")"},
      {"cores",
       "core budgets, comma-separated: both sides pinned to the same C CPUs; ours computes "
       "with CPU devices x cpu_threads = C, PyTorch with set_num_threads(t) x "
       "OPENBLAS_NUM_THREADS=b for the settings of --peer_configs (1 <= t, b <= C), its "
       "best shown",
       false, JoinList(std::vector<int64_t>(defaults.cores.begin(), defaults.cores.end()))},
      {"layout", "for C > 1: dp (C devices x 1 thread), threads (1 device x C) or both", false,
       defaults.layout},
      {"peer_configs",
       "PyTorch's settings at C cores: all (every t, b in 1..C), diag (t = b) or auto (all "
       "up to 2 cores, diag above)",
       false, defaults.peer_configs},
      {"peer_timeout", "seconds one PyTorch run may take, start-up included", false,
       std::to_string(defaults.peer_timeout_s)},
      {"samples",
       "samples per setting and row, interleaved (ours, every PyTorch setting, ours, ...); "
       "the table shows medians",
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
  if (defaults.models.size() > 1) {
    std::string all;
    for (const std::string& name : defaults.models) all += (all.empty() ? "" : ",") + name;
    specs.push_back({"models", "the models to run, comma-separated, among " + all, false, all});
  }
  return specs;
}

// Reads the flags into `options` (its fields not given keep their values).
Status ReadFlags(const cli::FlagSet& flags, BenchOptions* options) {
  constexpr int64_t kMaxSteps = 1000 * 1000 * 1000;
  if (flags.Has("batches")) {
    ASSIGN_OR_RETURN(options->batches, GetIntList(flags, "batches", 1, 1 << 20));
    options->batches_given = true;
  }
  if (options->models.size() > 1) {
    const std::vector<std::string> known = options->models;
    const std::string text = flags.Get("models");
    options->models.clear();
    size_t start = 0;
    while (true) {
      const size_t comma = std::min(text.find(',', start), text.size());
      const std::string name = text.substr(start, comma - start);
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        std::string all;
        for (const std::string& k : known) all += (all.empty() ? "" : ",") + k;
        return InvalidArgumentError("flag '--models' must be a comma-separated list of ", all,
                                    ", got '", text, "' ('", name, "' is not one)");
      }
      options->models.push_back(name);
      if (comma == text.size()) break;
      start = comma + 1;
    }
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> cores, GetIntList(flags, "cores", 1, 1024));
  options->cores.assign(cores.begin(), cores.end());
  options->layout = flags.Get("layout");
  if (options->layout != "dp" && options->layout != "threads" && options->layout != "both") {
    return InvalidArgumentError("flag '--layout' must be dp, threads or both, got '",
                                options->layout, "'");
  }
  options->peer_configs = flags.Get("peer_configs");
  if (options->peer_configs != "all" && options->peer_configs != "diag" &&
      options->peer_configs != "auto") {
    return InvalidArgumentError("flag '--peer_configs' must be all, diag or auto, got '",
                                options->peer_configs, "'");
  }
  ASSIGN_OR_RETURN(options->peer_timeout_s,
                   flags.GetInt("peer_timeout", 1, cli::kMaxDurationSeconds));
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
                         "threads of the process;\ntorch best = PyTorch's fastest setting "
                         "(torch threads x OpenBLAS threads), the\ncolumns after it that "
                         "setting's; speed = its ms / oflite ms (> 1: oflite faster).\nEach "
                         "group lists every PyTorch setting below its rows.",
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

int RunBench(const std::vector<BenchModel>& all_models, const BenchOptions& options) {
  std::vector<BenchModel> models;
  for (const BenchModel& model : all_models) {
    if (options.models.empty() || std::find(options.models.begin(), options.models.end(),
                                            model.name) != options.models.end()) {
      models.push_back(model);
    }
  }
  // Before any pinning: the CPUs the budgets are taken from.
  const std::vector<int> allowed = comm::AllowedCpus();
  std::printf(
      "%lld measured steps after %lld warm-up, %d samples per setting (medians), "
      "interleaved\nours (before the first row; each row sets its own BLAS threads): %s; "
      "fusion %s\nfloat32 convolutions and GEMMs: %s (%s)\n",
      static_cast<long long>(options.iters), static_cast<long long>(options.warmup),
      options.samples, CpuComputeDescription().c_str(), options.fuse ? "on" : "off",
      CpuKernelLibraryName(GetCpuKernelLibrary()), onednn::Description().c_str());
  const char* core_type = std::getenv("OPENBLAS_CORETYPE");
  std::printf(
      "OPENBLAS_CORETYPE=%s (both sides); CPUs available: %s; C cores: both sides "
      "pinned to the first C; PyTorch settings: %s; load average %s\n",
      core_type != nullptr ? core_type : "(unset)", comm::DescribeCpus(allowed).c_str(),
      options.peer_configs.c_str(), LoadAverage().c_str());
  for (const BenchModel& model : models) {
    std::printf("%s: %s\n", model.name.c_str(), model.description.c_str());
  }
  std::printf("%-7s %5s %5s %-8s %9s %9s %8s %4s  %-16s %9s %9s %8s %4s %8s\n", "model", "batch",
              "cores", "oflite", "ms", "samp/s", "cpu ms", "thr", "torch best", "ms", "samp/s",
              "cpu ms", "thr", "speed");
  for (const BenchModel& model : models) {
    const std::vector<int64_t>& batches =
        options.batches_given || model.batches.empty() ? options.batches : model.batches;
    for (int64_t batch : batches) {
      for (int cores : options.cores) {
        if (!RunGroup(model, batch, cores, BudgetCpus(allowed, cores), options)) return 1;
      }
    }
  }
  return 0;
}

}  // namespace bench
}  // namespace oflite
