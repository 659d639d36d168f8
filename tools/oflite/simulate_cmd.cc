// oflite simulate: predict how a Plan runs from a calibration
// (docs/simulate.md).
//
//   oflite simulate --plan P.pb --calibration C.pbtxt [--json]
//       [--trace predicted.json] [--transport tcp] [--iterations 24]
//       [--link-gbps G] [--link-latency-us L] [--host-cores N]
//
// Prints the predicted step time, each thread's busy share, each machine's
// communication (and how much of it no compute hides), its memory, the
// critical path and what the calibration lacked. Exit 2 for bad flags, an
// unreadable or corrupt plan or calibration (naming the file).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "oneflow_lite/common/proto_io.h"
#include "oneflow_lite/compiler/plan_summary.h"
#include "oneflow_lite/cost/calibration.h"
#include "oneflow_lite/cost/simulator.h"
#include "oneflow_lite/plan/plan_verifier.h"
#include "oneflow_lite/session/flags.h"
#include "proto/calibration.pb.h"
#include "proto/plan.pb.h"
#include "tools/oflite/commands.h"

namespace oflite {
namespace cli {
namespace {

constexpr const char* kProgram = "oflite simulate";

int Fail(const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", kProgram, message.c_str());
  return kExitBadInput;
}

std::string Ms(double us) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f ms", us / 1e3);
  return buf;
}

void PrintText(const std::string& plan_path, const cost::SimResult& r) {
  std::printf("predicted step time: %s  (iterations %lld simulated, steady state over %lld; "
              "first iteration %s)\n",
              Ms(r.step_time_us).c_str(), static_cast<long long>(r.iterations),
              static_cast<long long>(r.iterations - r.warmup), Ms(r.first_iteration_us).c_str());
  std::printf("plan: %s\n", plan_path.c_str());
  std::printf("kernels: %lld measured, %lld estimated, %lld missing\n",
              static_cast<long long>(r.kernels_measured),
              static_cast<long long>(r.kernels_estimated),
              static_cast<long long>(r.kernels_missing));
  std::printf("\nmachines:\n  %-8s %12s %13s %14s %14s %16s %14s %12s\n", "machine",
              "busiest thr", "CPU/step", "comm CPU/step", "comm/step", "exposed/step", "sent/step",
              "memory");
  for (const cost::SimMachineStat& m : r.machines) {
    std::printf("  %-8lld %11.1f%% %13s %14s %14s %16s %14s %12s\n",
                static_cast<long long>(m.machine), 100 * m.compute_busy_share,
                Ms(m.cpu_us_per_step).c_str(), Ms(m.comm_cpu_us_per_step).c_str(),
                Ms(m.comm_us_per_step).c_str(),
                Ms(m.exposed_comm_us_per_step).c_str(),
                compiler::HumanBytes(static_cast<int64_t>(m.egress_bytes_per_step)).c_str(),
                compiler::HumanBytes(m.memory_bytes).c_str());
  }
  std::printf("\nthreads:\n");
  for (const cost::SimThreadStat& t : r.threads) {
    std::printf("  %-28s busy %5.1f%%  %lld acts/step\n", t.name.c_str(), 100 * t.busy_share,
                static_cast<long long>(t.acts_per_step));
  }
  std::printf("\ncritical path (per step, largest first):\n");
  int shown = 0;
  for (const cost::SimPathEntry& p : r.critical_path) {
    if (shown++ >= 12) break;
    std::printf("  %10s  %-10s %s\n", Ms(p.us_per_step).c_str(), p.kind.c_str(), p.what.c_str());
  }
  for (const std::string& note : r.notes) std::printf("note: %s\n", note.c_str());
}

}  // namespace

int RunSimulate(int argc, char** argv) {
  FlagSet flags(kProgram,
                "--plan P.pb --calibration C.pbtxt [--json] [--trace OUT.json] [--transport tcp] "
                "[--iterations 24] [--link-gbps G] [--link-latency-us L] [--host-cores N]",
                {{"plan", "the Plan file to simulate"},
                 {"calibration", "the calibration `oflite profile` wrote (text proto)"},
                 {"json", "print one JSON object instead of tables", true},
                 {"trace", "also write the predicted timeline as a Chrome trace to this file"},
                 {"transport", "transport between machines: its calibrated costs apply", false,
                  "tcp"},
                 {"iterations", "iterations to simulate (a third warm the pipeline up)", false,
                  "24"},
                 {"link-gbps", "what-if: every link at this rate (Gbit/s; 0 = unlimited)"},
                 {"link-latency-us", "what-if: every link with this one-way latency (us)"},
                 {"host-cores",
                  "cores of each machine whose cluster entry leaves cpu_threads 0 (default: "
                  "this host's)"}},
                /*max_positional=*/0);
  if (std::optional<int> done = flags.ParseCommandLine(argc, argv, kProgram)) return *done;
  if (!flags.Has("plan")) return Fail("flag '--plan' is required");
  if (!flags.Has("calibration")) {
    return Fail("flag '--calibration' is required (write one with `oflite profile --plan P --out C.pbtxt`)");
  }
  StatusOr<Plan> plan = LoadPlan(flags.Get("plan"));
  if (!plan.ok()) return Fail("plan '" + flags.Get("plan") + "': " + plan.status().message());
  Status verified = VerifyPlan(*plan);
  if (!verified.ok()) return Fail("plan '" + flags.Get("plan") + "': " + verified.message());
  Calibration calibration;
  Status read = ReadTextProto(flags.Get("calibration"), &calibration);
  if (!read.ok()) {
    return Fail("calibration '" + flags.Get("calibration") + "': " + read.message());
  }
  Status valid = cost::ValidateCalibration(calibration, flags.Get("calibration"));
  if (!valid.ok()) return Fail(valid.message());

  cost::SimOptions options;
  options.transport = flags.Get("transport");
  if (options.transport != "tcp" && options.transport != "shm" && options.transport != "ibverbs") {
    return Fail("flag '--transport': '" + options.transport + "' is not tcp, shm or ibverbs");
  }
  StatusOr<int64_t> iterations = flags.GetInt("iterations", 3, 100000);
  if (!iterations.ok()) return Fail(iterations.status().message());
  options.iterations = *iterations;
  for (const char* name : {"link-gbps", "link-latency-us"}) {
    if (!flags.Has(name)) continue;
    char* end = nullptr;
    std::string text = flags.Get(name);
    double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(v >= 0) || v > 1e9) {
      return Fail(std::string("flag '--") + name + "': '" + text + "' is not a number >= 0");
    }
    (std::string(name) == "link-gbps" ? options.link_gbit_per_s : options.link_latency_us) = v;
  }
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  StatusOr<int64_t> host_cores = flags.GetInt("host-cores", 1, 4096);
  if (flags.Has("host-cores")) {
    if (!host_cores.ok()) return Fail(host_cores.status().message());
    cores = static_cast<int>(*host_cores);
  }
  options.host_cores = cores;
  options.record_timeline = flags.Has("trace");

  StatusOr<cost::SimResult> result = cost::SimulatePlan(*plan, calibration, options);
  if (!result.ok()) {
    return Fail("plan '" + flags.Get("plan") + "': " + result.status().message());
  }
  if (flags.Has("trace")) {
    std::ofstream out(flags.Get("trace"));
    out << cost::SimChromeTrace(*result);
    if (!out.good()) return Fail("flag '--trace': cannot write '" + flags.Get("trace") + "'");
  }
  if (flags.GetBool("json")) {
    std::printf("%s\n", cost::SimResultJson(*result).c_str());
  } else {
    PrintText(flags.Get("plan"), *result);
    if (flags.Has("trace")) std::printf("predicted timeline: %s\n", flags.Get("trace").c_str());
  }
  return 0;
}

}  // namespace cli
}  // namespace oflite
