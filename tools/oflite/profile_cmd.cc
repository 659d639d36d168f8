// oflite profile: measure this host for the cost model (docs/simulate.md)
// and write a calibration (proto/calibration.proto, text format) that
// `oflite simulate` and `oflite compile --auto-parallel` read.
//
//   oflite profile --plan P[,P2...] [--plan P3] --out C.pbtxt [--update]
//                  [--threads N] [--samples N] [--eval]
//                  [--kernels-only | --transports tcp,shm --ranks 2,3,4]
//
// Kernels: every distinct kernel key of the plans' CPU compute and source
// tasks (profile/kernel_profiler.h), e.g. every layout a search will
// compare. Runtime and transports: the actor overhead, the host copy speed,
// each transport's latency and bandwidth and its collectives' curves over
// the given rank counts (profile/transport_profiler.h); --kernels-only
// leaves them out.
//
// --update reads --out first and keeps everything in it: only kernel keys
// it lacks are measured (and the runtime or a transport it lacks), so a
// calibration grows plan by plan; a --out that does not exist yet is
// started afresh. A kernel that cannot run here (a data
// loader whose dataset is missing) is a note, not a failure.
//
// Exit codes (commands.h): 0 success (notes included), 2 bad input (a
// flag, a plan that cannot be read or verified, an --out of --update that
// does not parse, an output folder that does not exist: all checked before
// anything is measured), 1 a measurement or the write failed.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "oneflow_lite/common/env.h"
#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/kernels/cpu/cpu_threads.h"
#include "oneflow_lite/plan/plan_verifier.h"
#include "oneflow_lite/profile/kernel_profiler.h"
#include "oneflow_lite/profile/transport_profiler.h"
#include "oneflow_lite/session/flags.h"
#include "proto/calibration.pb.h"
#include "tools/oflite/commands.h"
#include "tools/oflite/interrupt_catcher.h"

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

// The flag layer keeps the last value of a flag given twice; --plan may be
// repeated, so its values are taken out of the command line here (the rest
// goes to the flag layer). A "--plan" with no value after it is left for
// the flag layer to report.
std::vector<char*> TakePlanFlags(int argc, char** argv, std::vector<std::string>* values) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i > 0 && arg == "--plan" && i + 1 < argc) {
      values->push_back(argv[++i]);
    } else if (i > 0 && arg.rfind("--plan=", 0) == 0) {
      values->push_back(arg.substr(7));
    } else {
      rest.push_back(argv[i]);
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
                       ProfileFlags* parsed) {
  for (const std::string& value : plan_values) {
    for (const std::string& path : SplitCommas(value)) {
      if (path.empty()) return "flag '--plan': empty file name in '" + value + "'";
      parsed->plans.push_back(path);
    }
  }
  parsed->out = flags.Get("out");
  if (parsed->out.empty()) return "--out is required (the calibration to write; see --help)";
  Status writable = Env::Default()->CheckParentDirectory(parsed->out);
  if (!writable.ok()) return writable.WithContext("--out").message();
  parsed->update = flags.GetBool("update");
  parsed->kernels_only = flags.GetBool("kernels-only");
  parsed->eval = flags.GetBool("eval");
  if (parsed->kernels_only && parsed->plans.empty()) {
    return "--kernels-only measures the kernels of --plan, and no --plan was given";
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
       {"kernels-only", "measure kernels only, not the runtime or the transports", true},
       {"transports", "the transports to measure, a comma list of tcp, shm, ibverbs", false,
        "tcp,shm"},
       {"ranks", "rank counts of the collective curves, a comma list", false, "2,3,4"}});
  std::vector<std::string> plan_values;
  std::vector<char*> args = TakePlanFlags(argc, argv, &plan_values);
  if (std::optional<int> done =
          flags.ParseCommandLine(static_cast<int>(args.size()), args.data(), kProgram)) {
    return *done;
  }
  ProfileFlags parsed;
  if (std::string bad = CheckFlags(flags, plan_values, &parsed); !bad.empty()) {
    return BadInput(bad);
  }

  // Every input is read and checked before the first measurement.
  std::vector<Plan> plans;
  for (const std::string& path : parsed.plans) {
    StatusOr<Plan> plan = LoadPlan(path);
    if (!plan.ok()) return BadInput("--plan: " + plan.status().message());
    Status verified = VerifyPlan(*plan);
    if (!verified.ok()) return BadInput("--plan: plan '" + path + "': " + verified.message());
    plans.push_back(*std::move(plan));
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
      return BadInput("--plan: plan '" + parsed.plans[p] + "': " + costs.status().message());
    }
    for (KernelCost& cost : *costs) {
      options.known_keys.insert(cost.key());
      *calibration.add_kernel() = std::move(cost);
    }
    measured += static_cast<int>(costs->size());
    unmeasured += report.unmeasured;
    for (const std::string& note : report.notes) {
      std::fprintf(stderr, "%s: note: plan '%s': %s\n", kProgram, parsed.plans[p].c_str(),
                   note.c_str());
    }
  }
  std::sort(calibration.mutable_kernel()->begin(), calibration.mutable_kernel()->end(),
            [](const KernelCost& a, const KernelCost& b) { return a.key() < b.key(); });

  // The runtime and the transports (profile/transport_profiler.h); with
  // --update only what the file lacks. A failure here still writes what
  // was measured, then exits 1.
  int transports_measured = 0;
  bool runtime_measured = false;
  int exit_code = kExitOk;
  if (!parsed.kernels_only && !(parsed.update && calibration.has_runtime())) {
    profile::RuntimeProfileOptions runtime_options;
    runtime_options.samples = parsed.samples;
    runtime_options.note = PrintNote;
    StatusOr<RuntimeCost> runtime = profile::ProfileRuntime(runtime_options);
    if (runtime.ok()) {
      *calibration.mutable_runtime() = *runtime;
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
