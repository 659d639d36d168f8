#include "oneflow_lite/comm/launch/cpu_binding.h"

#include <errno.h>
#include <sched.h>
#include <string.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <utility>

#include "oneflow_lite/common/id_ranges.h"

namespace oflite {
namespace comm {
namespace {

// The integer in `path`, or -1 when it cannot be read.
int ReadInt(const std::string& path) {
  std::ifstream in(path);
  int value = -1;
  if (!(in >> value)) return -1;
  return value;
}

}  // namespace

StatusOr<BindPolicy> ParseBindPolicy(const std::string& text, const std::string& source) {
  if (text == "auto") return BindPolicy::kAuto;
  if (text == "cores") return BindPolicy::kCores;
  if (text == "none") return BindPolicy::kNone;
  return InvalidArgumentError(source, ": '", text, "' is not a binding (auto, cores or none)");
}

const char* BindPolicyName(BindPolicy policy) {
  switch (policy) {
    case BindPolicy::kAuto:
      return "auto";
    case BindPolicy::kCores:
      return "cores";
    case BindPolicy::kNone:
      return "none";
  }
  return "?";
}

std::vector<std::vector<int>> GroupIntoCores(const std::vector<int>& cpus,
                                             const std::string& sysfs_root) {
  // (package, core) -> CPUs; a CPU whose topology cannot be read is a core
  // of its own (keyed apart from every real one by a negative package).
  std::map<std::pair<int, int>, std::vector<int>> by_core;
  for (int cpu : cpus) {
    const std::string dir = sysfs_root + "/cpu" + std::to_string(cpu) + "/topology/";
    const int package = ReadInt(dir + "physical_package_id");
    const int core = ReadInt(dir + "core_id");
    const std::pair<int, int> key =
        package < 0 || core < 0 ? std::make_pair(-1 - cpu, 0) : std::make_pair(package, core);
    by_core[key].push_back(cpu);
  }
  std::vector<std::vector<int>> cores;
  for (auto& entry : by_core) {
    std::sort(entry.second.begin(), entry.second.end());
    cores.push_back(std::move(entry.second));
  }
  std::sort(cores.begin(), cores.end(),
            [](const std::vector<int>& a, const std::vector<int>& b) { return a[0] < b[0]; });
  return cores;
}

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  }
  if (cpus.empty()) {
    const int current = sched_getcpu();
    cpus.push_back(current < 0 ? 0 : current);
  }
  return cpus;
}

std::vector<std::vector<int>> AllowedCores(const std::string& sysfs_root) {
  return GroupIntoCores(AllowedCpus(), sysfs_root);
}

std::vector<int> CpusForLocalRank(const std::vector<std::vector<int>>& cores, int local_rank,
                                  int local_size, BindPolicy policy) {
  const int count = static_cast<int>(cores.size());
  if (policy == BindPolicy::kNone || count == 0 || local_size <= 0 || local_rank < 0 ||
      local_rank >= local_size) {
    return {};
  }
  std::vector<int> cpus;
  if (local_size <= count) {
    // Rank r gets [r*C/L, (r+1)*C/L): every core given out, shares differ
    // by at most one core.
    const int begin = static_cast<int>(static_cast<int64_t>(local_rank) * count / local_size);
    const int end = static_cast<int>(static_cast<int64_t>(local_rank + 1) * count / local_size);
    for (int core = begin; core < end; ++core) {
      cpus.insert(cpus.end(), cores[core].begin(), cores[core].end());
    }
  } else if (policy == BindPolicy::kCores || local_size % count == 0) {
    cpus = cores[local_rank % count];
  }
  return cpus;
}

Status BindToCpus(pid_t pid, const std::vector<int>& cpus) {
  if (cpus.empty()) return Status::OK();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      return InvalidArgumentError("CPU ", cpu, " is out of range (0..", CPU_SETSIZE - 1, ")");
    }
    CPU_SET(cpu, &set);
  }
  if (sched_setaffinity(pid, sizeof(set), &set) != 0) {
    return UnavailableError("cannot bind ", pid == 0 ? std::string("this process")
                                                     : "process " + std::to_string(pid),
                            " to CPUs ", DescribeCpus(cpus), ": ", strerror(errno));
  }
  return Status::OK();
}

std::string DescribeCpus(const std::vector<int>& cpus) {
  std::vector<int> sorted = cpus;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  return IdRangesText(sorted);
}

std::string DescribeBinding(const std::vector<std::vector<int>>& rank_cpus, BindPolicy policy,
                            size_t cores) {
  std::string text;
  for (size_t rank = 0; rank < rank_cpus.size(); ++rank) {
    if (rank_cpus[rank].empty()) continue;
    text += (text.empty() ? "" : ", ") + std::string("rank ") + std::to_string(rank) +
            " on CPUs " + DescribeCpus(rank_cpus[rank]);
  }
  if (!text.empty()) return text;
  if (policy == BindPolicy::kNone) return "ranks unbound (--bind none)";
  return "ranks unbound (" + std::to_string(rank_cpus.size()) + " ranks, " +
         std::to_string(cores) + " cores)";
}

}  // namespace comm
}  // namespace oflite
