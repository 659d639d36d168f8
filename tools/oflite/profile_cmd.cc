// oflite profile: measure this host for the cost model (docs/simulate.md)
// and write a calibration (proto/calibration.proto, text format) that
// `oflite simulate` and `oflite compile --auto-parallel` read.
//
//   oflite profile --plan P[,P2...] [--plan P3] --out C.pbtxt [--update]
//                  [--threads N] [--samples N] [--eval]
//                  [--run-plan P[,P2...] [--run-iters N] [--run-timeout S]]
//                  [--kernels-only | --transports tcp,shm --ranks 2,3,4]
//
// Kernels: every distinct kernel key of the plans' CPU compute and source
// tasks (profile/kernel_profiler.h), e.g. every layout a search will
// compare. Runtime and transports: the actor overhead, the host copy speed,
// each transport's latency and bandwidth and its collectives' curves over
// the given rank counts (profile/transport_profiler.h); --kernels-only
// leaves them out.
//
// In situ (--run-plan, one-machine plans): besides its kernels measured
// alone like a --plan's, each such plan is run on this host by a child
// `oflite run --trace` (this binary; it inherits the CPU affinity, so a
// taskset'd profile pins the run too), and its trace gives every kernel
// key's median time inside the run (KernelCost.in_situ_us, in_situ.h);
// per op type, device and thread count, the total in-situ time over the
// total time alone of its kernels is its InSituFactor. A run that fails or
// outlasts --run-timeout (then killed) is an error naming the plan, with
// the tail of its output.
//
// --update reads --out first and keeps everything in it: only kernel keys
// it lacks are measured (and the runtime or a transport it lacks), so a
// calibration grows plan by plan; a --out that does not exist yet is
// started afresh. The runs of --run-plan always happen; the keys they
// measure get a fresh in_situ_us, the file's other keys keep theirs, and
// the factors are recomputed over every kernel of the file with both
// times. A kernel that cannot run here (a data
// loader whose dataset is missing) is a note, not a failure.
//
// Exit codes (commands.h): 0 success (notes included), 2 bad input (a
// flag, a plan that cannot be read or verified, an --out of --update that
// does not parse, an output folder that does not exist: all checked before
// anything is measured; also a --run-plan of several machines), 1 a
// measurement, a run or the write failed (what was measured is still
// written).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "oneflow_lite/comm/launch/process_group.h"
#include "oneflow_lite/common/env.h"
#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/plan/plan_verifier.h"
#include "oneflow_lite/profile/cache_profiler.h"
#include "oneflow_lite/profile/kernel_profiler.h"
#include "oneflow_lite/profile/scheduler_profiler.h"
#include "oneflow_lite/profile/temp_directory.h"
#include "oneflow_lite/profile/transport_profiler.h"
#include "oneflow_lite/session/flags.h"
#include "proto/calibration.pb.h"
#include "tools/oflite/commands.h"
#include "tools/oflite/in_situ.h"
#include "tools/oflite/interrupt_catcher.h"
#include "tools/oflite/trace_file.h"

namespace oflite {
namespace cli {
namespace {

constexpr char kProgram[] = "oflite profile";
constexpr uint32_t kCalibrationVersion = 1;
// The transports a calibration may describe (TransportCost.name).
const char* const kTransports[] = {"tcp", "shm", "ibverbs"};
// Rank counts of the collective curves: a ring needs 2; more than this on
// one box measures the box's scheduler, not the transport.
constexpr int64_t kMaxRanks = 64;

int BadInput(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", kProgram, message.c_str());
  return kExitBadInput;
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    parts.push_back(
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

// The flag layer keeps the last value of a flag given twice; --plan and
// --run-plan may be repeated, so the values of `flag` ("--plan") are taken
// out of the command line here (the rest goes to the flag layer). A flag
// with no value after it is left for the flag layer to report.
std::vector<char*> TakeRepeatedFlag(const std::vector<char*>& args, const std::string& flag,
                                    std::vector<std::string>* values) {
  std::vector<char*> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string arg = args[i];
    if (i > 0 && arg == flag && i + 1 < args.size()) {
      values->push_back(args[++i]);
    } else if (i > 0 && arg.rfind(flag + "=", 0) == 0) {
      values->push_back(arg.substr(flag.size() + 1));
    } else {
      rest.push_back(args[i]);
    }
  }
  return rest;
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

// "model name" of the first processor in /proc/cpuinfo (x86; other
// architectures name it differently), else "unknown".
std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t begin = line.find_first_not_of(" \t", colon + 1);
    return begin == std::string::npos ? "unknown" : line.substr(begin);
  }
  return "unknown";
}

// The 1-minute load average (/proc/loadavg), or -1.
double LoadAverage() {
  std::ifstream loadavg("/proc/loadavg");
  double load = -1;
  if (!(loadavg >> load)) return -1;
  return load;
}

std::string UtcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm utc;
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

void PrintNote(const std::string& note) {
  std::fprintf(stderr, "%s: note: %s\n", kProgram, note.c_str());
}

// SIGINT/SIGTERM while the transport ranks run, for ProfileTransports to
// stop (and reap) them.
std::atomic<int> g_interrupt{0};

struct ProfileFlags {
  std::vector<std::string> plans;
  std::vector<std::string> run_plans;
  int64_t run_iters = 30;
  int64_t run_timeout_s = 300;
  std::string out;
  bool update = false;
  bool kernels_only = false;
  bool eval = false;
  int threads = 0;
  int samples = 5;
  std::vector<std::string> transports;
  std::vector<int> ranks;
};

// Checks every flag before anything is read or measured; "" when fine,
// else the message of exit 2.
std::string CheckFlags(const FlagSet& flags, const std::vector<std::string>& plan_values,
                       const std::vector<std::string>& run_plan_values, ProfileFlags* parsed) {
  for (const std::string& value : plan_values) {
    for (const std::string& path : SplitCommas(value)) {
      if (path.empty()) return "flag '--plan': empty file name in '" + value + "'";
      parsed->plans.push_back(path);
    }
  }
  for (const std::string& value : run_plan_values) {
    for (const std::string& path : SplitCommas(value)) {
      if (path.empty()) return "flag '--run-plan': empty file name in '" + value + "'";
      if (std::find(parsed->run_plans.begin(), parsed->run_plans.end(), path) ==
          parsed->run_plans.end()) {
        parsed->run_plans.push_back(path);
      }
    }
  }
  // A run of fewer iterations leaves no step after the warm-up third.
  StatusOr<int64_t> run_iters = flags.GetInt("run-iters", 3, 1000000);
  if (!run_iters.ok()) return run_iters.status().message();
  parsed->run_iters = *run_iters;
  StatusOr<int64_t> run_timeout = flags.GetInt("run-timeout", 1, 7 * 24 * 3600);
  if (!run_timeout.ok()) return run_timeout.status().message();
  parsed->run_timeout_s = *run_timeout;
  parsed->out = flags.Get("out");
  if (parsed->out.empty()) return "--out is required (the calibration to write; see --help)";
  Status writable = Env::Default()->CheckParentDirectory(parsed->out);
  if (!writable.ok()) return writable.WithContext("--out").message();
  parsed->update = flags.GetBool("update");
  parsed->kernels_only = flags.GetBool("kernels-only");
  parsed->eval = flags.GetBool("eval");
  if (parsed->kernels_only && parsed->plans.empty() && parsed->run_plans.empty()) {
    return "--kernels-only measures the kernels of --plan and --run-plan, and no --plan or "
           "--run-plan was given";
  }
  StatusOr<int64_t> threads = flags.GetInt("threads", 0, kMaxCpuThreads);
  if (!threads.ok()) return threads.status().message();
  parsed->threads = static_cast<int>(*threads);
  StatusOr<int64_t> samples = flags.GetInt("samples", 1, 1000000);
  if (!samples.ok()) return samples.status().message();
  parsed->samples = static_cast<int>(*samples);
  for (const std::string& name : SplitCommas(flags.Get("transports"))) {
    if (std::find_if(std::begin(kTransports), std::end(kTransports),
                     [&](const char* known) { return name == known; }) == std::end(kTransports)) {
      return "flag '--transports': unknown transport '" + name + "' (known: tcp, shm, ibverbs)";
    }
    if (std::find(parsed->transports.begin(), parsed->transports.end(), name) ==
        parsed->transports.end()) {
      parsed->transports.push_back(name);
    }
  }
  for (const std::string& text : SplitCommas(flags.Get("ranks"))) {
    StatusOr<int64_t> ranks = ParseInt64(text, "flag '--ranks'");
    if (!ranks.ok()) return ranks.status().message();
    if (*ranks < 2 || *ranks > kMaxRanks) {
      return "flag '--ranks': " + text + " is outside [2, " + std::to_string(kMaxRanks) + "]";
    }
    parsed->ranks.push_back(static_cast<int>(*ranks));
  }
  profile::TransportProfileOptions transport;
  transport.transports = parsed->transports;
  transport.ranks = parsed->ranks;
  transport.samples = parsed->samples;
  Status valid = profile::ValidateTransportProfileOptions(transport);
  if (!valid.ok()) return valid.message();
  return "";
}

// This program's own file: the runs use the same oflite as the profile.
StatusOr<std::string> SelfExecutable() {
  std::string path(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0) return UnavailableError("cannot read /proc/self/exe: ", std::strerror(errno));
  path.resize(static_cast<size_t>(n));
  return path;
}

// The last `count` lines of the file at `path` (a child's output, each
// line "[rank 0] ..." from the process group: the prefix is dropped),
// indented, for an error message.
std::string TailOf(const std::string& path, size_t count) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("[rank 0] ", 0) == 0) line.erase(0, 9);
    lines.push_back(line);
    if (lines.size() > count) lines.pop_front();
  }
  if (lines.empty()) return "  (no output)";
  std::string text;
  for (const std::string& kept : lines) text += (text.empty() ? "  " : "\n  ") + kept;
  return text;
}

// Runs the one-machine plan at `path` here for `flags.run_iters`
// iterations, traced (`oflite run --trace`), and reads its kernels' times
// from the trace. The child's output goes to a file (shown on failure);
// it is bounded by --run-timeout (SIGTERM, then SIGKILL, always reaped).
// An interrupt (g_interrupt) stops it and returns an error; the caller
// checks g_interrupt.
StatusOr<InSituTrace> MeasureInSitu(const std::string& path, const Plan& plan,
                                    const ProfileFlags& flags) {
  const std::string where = "--run-plan: plan '" + path + "'";
  ASSIGN_OR_RETURN(const std::string self, SelfExecutable());
  profile::TempDirectory dir;
  RETURN_IF_ERROR(dir.Create("oflite-profile-run").WithContext(where));
  const std::string trace_path = dir.path() + "/t.json";
  const std::string log_path = dir.path() + "/run.log";
  comm::RankProcess run;
  // Quiet: no evaluation after training, one progress line at most every
  // run_iters iterations (into the log file anyway).
  run.argv = {self,          "run",
              "--plan",      path,
              "--trace",     trace_path,
              "--iters",     std::to_string(flags.run_iters),
              "--log-every", std::to_string(flags.run_iters),
              "--eval=false"};
  if (flags.threads > 0) {
    run.argv.push_back("--cpu-threads");
    run.argv.push_back(std::to_string(flags.threads));
  }
  FILE* log = std::fopen(log_path.c_str(), "w");
  if (log == nullptr) {
    return UnavailableError(where, ": cannot write '", log_path, "': ", std::strerror(errno));
  }
  comm::ProcessGroupOptions options;
  options.output = log;
  options.grace = std::chrono::seconds(5);
  options.timeout = std::chrono::seconds(flags.run_timeout_s);
  options.interrupt = &g_interrupt;
  const auto start = std::chrono::steady_clock::now();
  StatusOr<comm::ProcessGroupResult> ran = [&] {
    InterruptCatcher catcher(&g_interrupt);
    return comm::RunProcessGroup({run}, options);
  }();
  std::fclose(log);
  if (!ran.ok()) return ran.status().WithContext(where + ": cannot start '" + self + " run'");
  if (ran->interrupted_by != 0) {
    return CancelledError(where, ": interrupted by signal ", ran->interrupted_by);
  }
  if (!ran->ok) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string how;
    if (seconds >= static_cast<double>(flags.run_timeout_s)) {
      how = "did not finish within --run-timeout " + std::to_string(flags.run_timeout_s) +
            " s (killed)";
    } else if (!ran->ranks.empty() && ran->ranks[0].signaled) {
      how = "was killed by signal " + std::to_string(ran->ranks[0].exit_code - 128);
    } else {
      how = "exited with code " + std::to_string(ran->exit_code);
    }
    return UnavailableError(where, ": its run (oflite run --iters ", flags.run_iters, ") ", how,
                            "; the end of its output:\n", TailOf(log_path, 15));
  }
  StatusOr<TraceFile> trace = ReadTraceFile(trace_path);
  if (!trace.ok()) return trace.status().WithContext(where);
  InSituOptions in_situ;
  in_situ.threads = flags.threads;
  in_situ.host_cores = AvailableCpuCores();
  StatusOr<InSituTrace> times = KernelTimesFromTrace(*trace, plan, in_situ);
  if (!times.ok()) return times.status().WithContext(where);
  return times;
}

std::string DeviceName(DeviceType type) { return type == DEVICE_CPU ? "cpu" : "cuda"; }

// For people: the run's step against the sum of its kernels per
// iteration, in situ and alone (over the keys that have both times).
void PrintRunSummary(const std::string& path, const InSituTrace& run,
                     const Calibration& calibration) {
  std::map<std::string, double> isolated;
  for (const KernelCost& kernel : calibration.kernel()) isolated[kernel.key()] = kernel.us();
  double in_situ_us = 0, alone_us = 0;
  int64_t calls = 0, keys = 0, without = 0;
  for (const auto& [key, kernel] : run.kernels) {
    auto it = isolated.find(key);
    if (it == isolated.end() || !(it->second > 0)) {
      ++without;
      continue;
    }
    ++keys;
    calls += static_cast<int64_t>(kernel.durations_us.size());
    for (double us : kernel.durations_us) in_situ_us += us;
    alone_us += it->second * static_cast<double>(kernel.durations_us.size());
  }
  std::printf("in situ: plan '%s': ", path.c_str());
  if (run.iterations > 0) {
    const double n = static_cast<double>(run.iterations);
    std::printf("iterations %lld..%lld counted (%lld warm-up)",
                static_cast<long long>(run.first_counted),
                static_cast<long long>(run.end_iteration - 1),
                static_cast<long long>(run.first_counted - run.first_iteration));
    if (run.step_us > 0) std::printf(", step %.3f ms", run.step_us / 1000);
    std::printf("; kernels per iteration: %.3f ms in situ, %.3f ms alone", in_situ_us / n / 1000,
                alone_us / n / 1000);
  } else {
    std::printf(
        "no iterations in the trace; kernels after the warm-up: %.3f ms in situ, %.3f ms "
        "alone",
        in_situ_us / 1000, alone_us / 1000);
  }
  std::printf(" (%lld keys, %lld calls", static_cast<long long>(keys),
              static_cast<long long>(calls));
  if (without > 0) {
    std::printf("; %lld key(s) with no time alone left out", static_cast<long long>(without));
  }
  if (run.other_slices + run.unmatched_slices > 0) {
    std::printf("; %lld slice(s) of other tasks, %lld not attributed",
                static_cast<long long>(run.other_slices),
                static_cast<long long>(run.unmatched_slices));
  }
  std::printf(")\n");
}

// How late a transport's polling thread handles an event while its core
// computes (profile/scheduler_profiler.h), printed; 0 with a note when this
// process may not use two cores (a taskset of one core: profile the
// runtime on the cores the ranks will use).
// The scheduler's slice between two compute threads on one core
// (profile/scheduler_profiler.h), printed; 0 with a note when not measured.
double CoreSliceUs() {
  StatusOr<double> slice = profile::ProfileCoreSliceUs(profile::SliceProfileOptions{});
  if (!slice.ok()) {
    PrintNote("runtime: core_slice_us not measured (0: the simulator shares cores fluidly): " +
              slice.status().message());
    return 0;
  }
  std::printf("scheduler: two compute threads on one core take turns of %.0f us "
              "(core_slice_us)\n",
              *slice);
  return *slice;
}

// The bytes the caches keep for a core's kernels (profile/cache_profiler.h),
// printed; 0 with a note when not measured.
double CacheBytes() {
  StatusOr<profile::CacheProfile> cache = profile::ProfileCacheBytes(profile::CacheProfileOptions{});
  if (!cache.ok()) {
    // Unavailable: the probe's add could not tell cache from memory (or
    // this build cannot flush lines, and then no kernel has a cold time and
    // the size charges nothing). The kernels' cold times are measured one
    // by one, so the listed last-level size keeps the cache term on
    // (cache_profiler.h, LastLevelCacheBytes).
    StatusOr<double> listed = cache.status().code() == StatusCode::kUnavailable
                                  ? profile::LastLevelCacheBytes()
                                  : StatusOr<double>(cache.status());
    if (!listed.ok()) {
      PrintNote("runtime: cache_bytes not measured (0: every kernel counted warm): " +
                cache.status().message());
      return 0;
    }
    PrintNote("runtime: cache_bytes is the last-level cache's listed size, " +
              std::to_string(static_cast<int64_t>(*listed / (1 << 20))) + " MiB: " +
              cache.status().message());
    return *listed;
  }
  std::printf("caches: a core's kernels find about %.0f MiB of recently touched data in cache "
              "(%.3f ns a byte there, %.3f from memory; cache_bytes)\n",
              cache->cache_bytes / (1 << 20), cache->ns_per_byte.front().second,
              cache->cold_ns_per_byte);
  return cache->cache_bytes;
}

double BusyCoreWakeupUs() {
  StatusOr<profile::WakeupProfile> wakeup =
      profile::ProfileBusyCoreWakeup(profile::WakeupProfileOptions{});
  if (!wakeup.ok()) {
    PrintNote("runtime: busy_core_wakeup_us not measured (0): " + wakeup.status().message());
    return 0;
  }
  std::printf("scheduler: a polling thread handles an event in %.1f us on an idle core, %.1f us "
              "on a computing one (busy_core_wakeup_us %.1f)\n",
              wakeup->idle_us, wakeup->busy_us, wakeup->extra_us());
  return wakeup->extra_us();
}

}  // namespace

int RunProfile(int argc, char** argv) {
  FlagSet flags(
      kProgram, "--plan PLAN.pb[,PLAN2.pb] --out CALIBRATION.pbtxt [--update] [--kernels-only]",
      {{"plan",
        "a compiled plan whose kernels to measure; repeat the flag or give a comma list for "
        "several (e.g. every layout a search compares)"},
       {"out", "the calibration to write (text Calibration, proto/calibration.proto)"},
       {"update",
        "read --out first and keep all of it: measure only the kernel keys (and runtime, "
        "transports) it lacks",
        true},
       {"threads",
        "compute threads of every kernel (0: as the runtime gives each plan machine's CPU "
        "devices on this host)",
        false, "0"},
       {"samples", "timed samples per kernel (the median is kept)", false, "5"},
       {"eval", "also measure the kernels of each plan's evaluation plan", true},
       {"run-plan",
        "a one-machine compiled plan to also run here (oflite run --trace) for its kernels' "
        "times inside a run (in_situ_us, in_situ_factor); its kernels are measured alone too; "
        "repeat the flag or give a comma list for several"},
       {"run-iters", "iterations of each --run-plan run (the first third is warm-up)", false, "30"},
       {"run-timeout", "seconds each --run-plan run may take before it is killed", false, "300"},
       {"kernels-only", "measure kernels only, not the runtime or the transports", true},
       {"transports", "the transports to measure, a comma list of tcp, shm, ibverbs", false,
        "tcp,shm"},
       {"ranks", "rank counts of the collective curves, a comma list", false, "2,3,4"}});
  std::vector<std::string> plan_values;
  std::vector<std::string> run_plan_values;
  std::vector<char*> args =
      TakeRepeatedFlag(std::vector<char*>(argv, argv + argc), "--plan", &plan_values);
  args = TakeRepeatedFlag(args, "--run-plan", &run_plan_values);
  if (std::optional<int> done =
          flags.ParseCommandLine(static_cast<int>(args.size()), args.data(), kProgram)) {
    return *done;
  }
  ProfileFlags parsed;
  if (std::string bad = CheckFlags(flags, plan_values, run_plan_values, &parsed); !bad.empty()) {
    return BadInput(bad);
  }

  // Every input is read and checked before the first measurement. The
  // --run-plan plans are measured alone too (once, if also a --plan).
  std::vector<std::string> profiled = parsed.plans;
  for (const std::string& path : parsed.run_plans) {
    if (std::find(profiled.begin(), profiled.end(), path) == profiled.end()) {
      profiled.push_back(path);
    }
  }
  std::vector<Plan> plans;
  for (const std::string& path : profiled) {
    const bool run_only =
        std::find(parsed.plans.begin(), parsed.plans.end(), path) == parsed.plans.end();
    const std::string flag = run_only ? "--run-plan" : "--plan";
    StatusOr<Plan> plan = LoadPlan(path);
    if (!plan.ok()) return BadInput(flag + ": " + plan.status().message());
    Status verified = VerifyPlan(*plan);
    if (!verified.ok()) return BadInput(flag + ": plan '" + path + "': " + verified.message());
    plans.push_back(*std::move(plan));
  }
  // A run here is one process: a plan of several machines needs a launch.
  std::vector<const Plan*> run_plans;
  for (const std::string& path : parsed.run_plans) {
    const Plan& plan = plans[std::find(profiled.begin(), profiled.end(), path) - profiled.begin()];
    if (plan.machine_size() != 1) {
      return BadInput("--run-plan: plan '" + path + "' runs on " +
                      std::to_string(plan.machine_size()) +
                      " machines; --run-plan runs one-machine plans on this host only (give it "
                      "to --plan for its kernels alone)");
    }
    run_plans.push_back(&plan);
  }
  Calibration calibration;
  if (parsed.update && Env::Default()->FileExists(parsed.out)) {
    Status read = ReadTextProto(parsed.out, &calibration);
    if (!read.ok()) return BadInput("--update: " + read.message());
    if (calibration.version() != kCalibrationVersion) {
      return BadInput("--update: '" + parsed.out + "' is a calibration of version " +
                      std::to_string(calibration.version()) + ", this oflite writes version " +
                      std::to_string(kCalibrationVersion));
    }
  }
  const std::string cpu = CpuModel();
  if (parsed.update && !calibration.cpu().empty() && calibration.cpu() != cpu) {
    std::fprintf(stderr,
                 "%s: note: '%s' was measured on a '%s', this host has a '%s': the kept entries "
                 "and the new ones come from different CPUs\n",
                 kProgram, parsed.out.c_str(), calibration.cpu().c_str(), cpu.c_str());
  }
  // Other work on the cores (a build, a training run) inflates the figures,
  // the multi-threaded kernels' most: one waiting thread holds up the rest.
  if (const double load = LoadAverage(); load >= 1.0) {
    PrintNote("the host is busy (load average " + std::to_string(load).substr(0, 4) + " on " +
              std::to_string(AvailableCpuCores()) +
              " available core(s)): the figures may come out slower than on an idle host");
  }
  const auto start = std::chrono::steady_clock::now();

  // Kernels: each key once over all the plans; the file's keys are known.
  profile::KernelProfileOptions options;
  options.threads = parsed.threads;
  options.samples = parsed.samples;
  options.include_eval_plan = parsed.eval;
  for (const KernelCost& kept : calibration.kernel()) options.known_keys.insert(kept.key());
  const int kept = static_cast<int>(options.known_keys.size());
  int measured = 0;
  int unmeasured = 0;
  for (size_t p = 0; p < plans.size(); ++p) {
    profile::KernelProfileReport report;
    StatusOr<std::vector<KernelCost>> costs =
        profile::ProfilePlanKernels(plans[p], options, &report);
    if (!costs.ok()) {
      const bool run_only = p >= parsed.plans.size();  // profiled: the --plan plans first
      return BadInput(std::string(run_only ? "--run-plan" : "--plan") + ": plan '" + profiled[p] +
                      "': " + costs.status().message());
    }
    for (KernelCost& cost : *costs) {
      options.known_keys.insert(cost.key());
      *calibration.add_kernel() = std::move(cost);
    }
    measured += static_cast<int>(costs->size());
    unmeasured += report.unmeasured;
    for (const std::string& note : report.notes) {
      std::fprintf(stderr, "%s: note: plan '%s': %s\n", kProgram, profiled[p].c_str(),
                   note.c_str());
    }
  }
  std::sort(calibration.mutable_kernel()->begin(), calibration.mutable_kernel()->end(),
            [](const KernelCost& a, const KernelCost& b) { return a.key() < b.key(); });

  // In situ: each --run-plan run once, its kernels' calls pooled by key
  // (a key two plans share gets the median of both runs' calls). A run
  // that fails is reported; the others and everything measured alone are
  // still written, then exit 1.
  int exit_code = kExitOk;
  std::vector<std::pair<std::string, InSituTrace>> runs;
  std::map<std::string, std::vector<double>> in_situ_calls;
  for (size_t r = 0; r < run_plans.size(); ++r) {
    StatusOr<InSituTrace> run = MeasureInSitu(parsed.run_plans[r], *run_plans[r], parsed);
    if (g_interrupt.load() != 0) {
      std::fprintf(stderr, "%s: interrupted by signal %d; nothing written\n", kProgram,
                   g_interrupt.load());
      return 128 + g_interrupt.load();
    }
    if (!run.ok()) {
      std::fprintf(stderr, "%s: %s\n", kProgram, run.status().message().c_str());
      exit_code = kExitFailure;
      continue;
    }
    for (const auto& [key, kernel] : run->kernels) {
      std::vector<double>& calls = in_situ_calls[key];
      calls.insert(calls.end(), kernel.durations_us.begin(), kernel.durations_us.end());
    }
    runs.emplace_back(parsed.run_plans[r], *std::move(run));
  }
  std::vector<InSituFactor> factors;
  if (!runs.empty()) {
    std::map<std::string, double> medians;
    for (auto& [key, calls] : in_situ_calls) medians[key] = MedianOf(std::move(calls));
    const std::vector<std::string> alone_missing = SetInSituTimes(medians, &calibration);
    if (!alone_missing.empty()) {
      PrintNote(std::to_string(alone_missing.size()) +
                " kernel key(s) timed in a run have no time alone (see the notes above), so "
                "their in-situ time is not written, e.g. [" +
                alone_missing.front() + "]");
    }
    factors = UpdateInSituFactors(&calibration);
  }
  // The runtime's cost per act inside the runs: each run's step less its
  // kernels' in-situ time per iteration, over its acts per iteration (one
  // per task), pooled over the runs.
  double residual_us = 0, acts = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    const InSituTrace& run = runs[r].second;
    if (run.iterations <= 0 || !(run.step_us > 0)) continue;
    double kernels_us = 0;
    for (const auto& [key, kernel] : run.kernels) {
      for (double us : kernel.durations_us) kernels_us += us;
    }
    int64_t tasks = 0;
    for (size_t q = 0; q < parsed.run_plans.size(); ++q) {
      if (parsed.run_plans[q] != runs[r].first) continue;
      for (const MachinePlan& m : run_plans[q]->machine()) tasks += m.task_size();
      break;
    }
    if (tasks <= 0) continue;
    residual_us += std::max(0.0, run.step_us - kernels_us / static_cast<double>(run.iterations));
    acts += static_cast<double>(tasks);
  }
  const double in_situ_act_us = acts > 0 ? residual_us / acts : 0;

  // The runtime and the transports (profile/transport_profiler.h); with
  // --update only what the file lacks. A failure here still writes what
  // was measured, then exits 1.
  int transports_measured = 0;
  bool runtime_measured = false;
  if (!parsed.kernels_only && !(parsed.update && calibration.has_runtime())) {
    profile::RuntimeProfileOptions runtime_options;
    runtime_options.samples = parsed.samples;
    runtime_options.note = PrintNote;
    StatusOr<RuntimeCost> runtime = profile::ProfileRuntime(runtime_options);
    if (runtime.ok()) {
      const double kept = calibration.runtime().in_situ_act_us();
      *calibration.mutable_runtime() = *runtime;
      calibration.mutable_runtime()->set_in_situ_act_us(kept);
      calibration.mutable_runtime()->set_busy_core_wakeup_us(BusyCoreWakeupUs());
      calibration.mutable_runtime()->set_core_slice_us(CoreSliceUs());
      calibration.mutable_runtime()->set_cache_bytes(CacheBytes());
      runtime_measured = true;
    } else {
      std::fprintf(stderr, "%s: runtime: %s\n", kProgram, runtime.status().message().c_str());
      exit_code = kExitFailure;
    }
  }
  std::vector<std::string> missing;
  if (!parsed.kernels_only) {
    for (const std::string& name : parsed.transports) {
      const bool in_file = std::any_of(
          calibration.transport().begin(), calibration.transport().end(),
          [&](const TransportCost& kept_transport) { return kept_transport.name() == name; });
      if (!(parsed.update && in_file)) missing.push_back(name);
    }
  }
  if (!missing.empty()) {
    profile::TransportProfileOptions transport_options;
    transport_options.transports = missing;
    transport_options.ranks = parsed.ranks;
    transport_options.samples = parsed.samples;
    transport_options.note = PrintNote;
    transport_options.interrupt = &g_interrupt;
    StatusOr<std::vector<TransportCost>> transports = [&] {
      InterruptCatcher catcher(&g_interrupt);
      return profile::ProfileTransports(transport_options);
    }();
    if (g_interrupt.load() != 0) {
      std::fprintf(stderr, "%s: interrupted by signal %d; nothing written\n", kProgram,
                   g_interrupt.load());
      return 128 + g_interrupt.load();
    }
    if (transports.ok()) {
      for (TransportCost& measured_transport : *transports) {
        // A fresh figure replaces one of the same name.
        auto* all = calibration.mutable_transport();
        all->erase(std::remove_if(all->begin(), all->end(),
                                  [&](const TransportCost& old) {
                                    return old.name() == measured_transport.name();
                                  }),
                   all->end());
        *calibration.add_transport() = std::move(measured_transport);
        ++transports_measured;
      }
    } else {
      std::fprintf(stderr, "%s: transports: %s\n", kProgram, transports.status().message().c_str());
      exit_code = kExitFailure;
    }
  }
  std::sort(calibration.mutable_transport()->begin(), calibration.mutable_transport()->end(),
            [](const TransportCost& a, const TransportCost& b) { return a.name() < b.name(); });

  if (in_situ_act_us > 0) calibration.mutable_runtime()->set_in_situ_act_us(in_situ_act_us);
  calibration.set_version(kCalibrationVersion);
  calibration.set_host(HostName());
  calibration.set_cpu(cpu);
  calibration.set_created(UtcNow());
  Status written = WriteTextProto(parsed.out, calibration);
  if (!written.ok()) {
    std::fprintf(stderr, "%s: %s\n", kProgram, written.message().c_str());
    return kExitFailure;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("kernels: %d measured, %d kept, %d not measured%s over %zu plan(s)\n", measured, kept,
              unmeasured, unmeasured > 0 ? " (see the notes)" : "", plans.size());
  for (const auto& [path, run] : runs) PrintRunSummary(path, run, calibration);
  if (in_situ_act_us > 0) {
    std::printf("runtime inside the runs: %.2f us per act beyond the kernels (step less kernels, "
                "over the acts per step)\n",
                in_situ_act_us);
  }
  if (!factors.empty()) {
    std::printf("in-situ factors (an op type's kernels: total time in situ / total alone):\n");
    for (const InSituFactor& factor : factors) {
      std::printf("  %-36s %s/t%d  %6.3f  (%d kernel%s)\n", factor.op_type().c_str(),
                  DeviceName(factor.device_type()).c_str(), factor.threads(), factor.factor(),
                  factor.kernels(), factor.kernels() == 1 ? "" : "s");
    }
  }
  if (!parsed.kernels_only) {
    std::printf("runtime: %s; transports: %d measured, %d in the file\n",
                runtime_measured            ? "measured"
                : calibration.has_runtime() ? "kept"
                                            : "not measured",
                transports_measured, calibration.transport_size());
  }
  std::printf("wrote %s in %.1f s\n", parsed.out.c_str(), seconds);
  return exit_code;
}

}  // namespace cli
}  // namespace oflite
