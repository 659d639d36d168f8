// oflite: compile, inspect, run and launch OneFlow-Lite plans.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <glog/logging.h>

#include "oneflow_lite/common/version.h"
#include "oneflow_lite/kernels/cpu/cpu_library.h"
#include "oneflow_lite/profile/transport_profiler.h"
#include "tools/oflite/commands.h"
#include "tools/oflite/openblas_core.h"

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int, char**);
};

int RunVersion(int argc, char** argv) {
  std::printf("oflite %s (plan format %u, job format %u)\n", oflite::kOfliteVersion,
              oflite::kPlanVersion, oflite::kJobVersion);
  return 0;
}

const Command kCommands[] = {
    {"compile", "compile a Job for a cluster into a Plan file", oflite::cli::RunCompile},
    {"inspect", "show what a Plan file runs where and how much memory it takes",
     oflite::cli::RunInspect},
    {"run", "run this node's part of a Plan (one process per machine)", oflite::cli::RunRun},
    {"launch", "start every machine of a Plan as local (or ssh) processes",
     oflite::cli::RunLaunch},
    {"trace", "summarize or merge timeline traces (oflite run --trace)", oflite::cli::RunTrace},
    {"eval", "evaluate a checkpoint with a plan's evaluation plan (metrics over the split)",
     oflite::cli::RunEval},
    {"predict", "write a named output of every sample to a .npy file, from a checkpoint",
     oflite::cli::RunPredict},
    {"profile", "measure this host's kernels, runtime and transports into a calibration",
     oflite::cli::RunProfile},
    {"simulate", "predict a Plan's step time, busy shares and critical path from a calibration",
     oflite::cli::RunSimulate},
    {"version", "print the oflite version and file format versions", RunVersion},
};

void PrintUsage(FILE* out) {
  std::fprintf(out, "usage: oflite <command> [flags]\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-9s %s\n", c.name, c.summary);
  std::fprintf(out, "\n'oflite <command> --help' describes a command's flags.\n");
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything else: may start this program again (same pid) with
  // OPENBLAS_CORETYPE set (tools/oflite/openblas_core.h).
  oflite::cli::ReexecForOpenBlasCore(argv);
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    PrintUsage(argc < 2 ? stderr : stdout);
    return argc < 2 ? oflite::cli::kExitBadInput : 0;
  }
  if (!std::strcmp(argv[1], "--version")) return RunVersion(0, nullptr);
  // The library of the float32 CPU convolutions and GEMMs for every command
  // (run, eval, predict, and the ranks launch starts inherit the variable);
  // `run --cpu-kernels` overrides it.
  if (const char* library = std::getenv("OFLITE_CPU_KERNELS"); library != nullptr && *library) {
    oflite::StatusOr<oflite::CpuKernelLibrary> parsed =
        oflite::ParseCpuKernelLibrary(library, "OFLITE_CPU_KERNELS");
    if (!parsed.ok()) {
      std::fprintf(stderr, "oflite: %s\n", parsed.status().message().c_str());
      return oflite::cli::kExitBadInput;
    }
    oflite::SetCpuKernelLibrary(*parsed);
  }
  // Hidden: one rank of `oflite profile`'s transport runs, which start this
  // program again (oneflow_lite/profile/transport_profiler.h).
  if (!std::strcmp(argv[1], oflite::profile::kProfileRankCommand)) {
    return oflite::profile::RunTransportProfileRank(argc - 1, argv + 1);
  }
  for (const Command& c : kCommands) {
    if (!std::strcmp(argv[1], c.name)) return c.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "oflite: unknown command '%s'\n\n", argv[1]);
  PrintUsage(stderr);
  return oflite::cli::kExitBadInput;
}
