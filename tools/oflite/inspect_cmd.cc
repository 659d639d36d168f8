// oflite inspect: summarize a Plan file.
#include <cstdio>
#include <map>
#include <string>

#include "oneflow_lite/common/proto_io.h"
#include "proto/plan.pb.h"
#include "tools/oflite/commands.h"
#include "tools/oflite/flags.h"

namespace oflite {
namespace cli {
namespace {

std::string HumanBytes(int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", v, units[u]);
  return buf;
}

void PrintSummary(const Plan& plan) {
  std::printf("plan: job '%s', version %u, %d machine(s), %lld iteration(s)\n",
              plan.job().conf().name().c_str(), plan.version(), plan.machine_size(),
              static_cast<long long>(plan.total_iters()));
  for (const MachinePlan& m : plan.machine()) {
    std::map<std::string, int> by_type;
    int regsts = 0;
    for (const TaskProto& t : m.task()) {
      by_type[TaskType_Name(t.type())]++;
      regsts += t.produced_size();
    }
    std::printf("machine %lld: %d actor(s), %d register desc(s)\n",
                static_cast<long long>(m.machine_id()), m.task_size(), regsts);
    for (const auto& [type, n] : by_type) std::printf("  %-16s %d\n", type.c_str(), n);
    for (const MemBlockProto& b : m.mem_block()) {
      std::printf("  memory %-16s %s\n", MemZoneType_Name(b.zone().type()).c_str(),
                  HumanBytes(b.size()).c_str());
    }
  }
}

}  // namespace

int RunInspect(int argc, char** argv) {
  FlagSet flags("inspect", "PLAN.pb", {});
  Status s = flags.Parse(argc, argv);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return kExitBadInput;
  }
  if (flags.help_requested()) {
    flags.PrintHelp();
    return kExitOk;
  }
  if (flags.positional().size() != 1) {
    std::fprintf(stderr, "oflite inspect: expected one plan file (see 'oflite inspect --help')\n");
    return kExitBadInput;
  }
  StatusOr<Plan> plan = LoadPlan(flags.positional()[0]);
  if (!plan.ok()) {
    std::fprintf(stderr, "oflite inspect: %s\n", plan.status().message().c_str());
    return kExitBadInput;
  }
  PrintSummary(*plan);
  return kExitOk;
}

}  // namespace cli
}  // namespace oflite
