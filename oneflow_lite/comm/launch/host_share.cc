#include "oneflow_lite/comm/launch/host_share.h"

#include <dirent.h>
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "oneflow_lite/comm/control/control_client.h"
#include "oneflow_lite/comm/launch/cpu_binding.h"

namespace oflite {
namespace comm {
namespace {

constexpr char kKeyPrefix[] = "oflite/host-share/";

// The thread ids of this process now.
std::vector<pid_t> ThreadIds() {
  std::vector<pid_t> tids;
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return tids;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    tids.push_back(static_cast<pid_t>(std::strtol(entry->d_name, nullptr, 10)));
  }
  ::closedir(dir);
  return tids;
}

std::string FirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// This process's cgroup path (/proc/self/cgroup) in the hierarchy whose
// controller list contains `controller` ("" for the v2 hierarchy, "0::");
// false when there is none.
bool CgroupPath(const std::string& root, const std::string& controller, std::string* path) {
  std::ifstream in(root + "/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t first = line.find(':');
    const size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    bool match = controller.empty() ? line.compare(0, 3, "0::") == 0 : false;
    if (!controller.empty()) {
      std::stringstream list(controllers);
      std::string name;
      while (std::getline(list, name, ',')) match = match || name == controller;
    }
    if (match) {
      *path = line.substr(second + 1);
      return true;
    }
  }
  return false;
}

}  // namespace

StatusOr<std::vector<int>> ParseCpuList(const std::string& text, const std::string& source) {
  std::vector<int> cpus;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    int low = -1, high = -1;
    char extra = 0;
    const int read = std::sscanf(item.c_str(), "%d-%d%c", &low, &high, &extra);
    if (read == 1 && item.find('-') == std::string::npos) high = low;
    if ((read != 1 && read != 2) || low < 0 || high < low || high >= CPU_SETSIZE) {
      return InvalidArgumentError(source, ": '", text, "' is not a CPU list (e.g. 0-3,8)");
    }
    for (int cpu = low; cpu <= high; ++cpu) cpus.push_back(cpu);
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  if (cpus.empty()) return InvalidArgumentError(source, ": an empty CPU list");
  return cpus;
}

int MachineCpuCount(const std::string& root) {
  std::vector<std::string> files;
  std::string path;
  if (CgroupPath(root, "", &path)) {
    files.push_back(root + "/sys/fs/cgroup" + path + "/cpuset.cpus.effective");
  }
  if (CgroupPath(root, "cpuset", &path)) {
    files.push_back(root + "/sys/fs/cgroup/cpuset" + path + "/cpuset.effective_cpus");
    files.push_back(root + "/sys/fs/cgroup/cpuset" + path + "/cpuset.cpus");
  }
  for (const std::string& file : files) {
    const std::string line = FirstLine(file);
    if (line.empty()) continue;
    StatusOr<std::vector<int>> cpus = ParseCpuList(line, file);
    if (cpus.ok()) return static_cast<int>(cpus->size());
  }
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 0;
}

StatusOr<ShareHostMode> ParseShareHostMode(const std::string& text, const std::string& source) {
  if (text == "auto") return ShareHostMode::kAuto;
  if (text == "threads") return ShareHostMode::kThreads;
  if (text == "bind") return ShareHostMode::kBind;
  if (text == "off") return ShareHostMode::kOff;
  return InvalidArgumentError(source, ": '", text,
                              "' is not a way to share the host (auto, threads, bind or off)");
}

const char* ShareHostModeName(ShareHostMode mode) {
  switch (mode) {
    case ShareHostMode::kAuto:
      return "auto";
    case ShareHostMode::kThreads:
      return "threads";
    case ShareHostMode::kBind:
      return "bind";
    case ShareHostMode::kOff:
      return "off";
  }
  return "?";
}

std::string CpuShareKey(const std::string& host_id, const std::vector<int>& allowed_cpus) {
  return host_id + "|" + DescribeCpus(allowed_cpus);
}

StatusOr<std::vector<std::string>> ExchangeCpuShareKeys(control::ControlClient* control, int rank,
                                                        int world, const std::string& key,
                                                        std::chrono::milliseconds timeout) {
  Status put = control->Put(kKeyPrefix + std::to_string(rank), key);
  if (!put.ok()) return put.WithContext("rank " + std::to_string(rank) + " publishing its CPUs");
  std::vector<std::string> keys;
  for (int peer = 0; peer < world; ++peer) {
    if (peer == rank) {
      keys.push_back(key);
      continue;
    }
    StatusOr<std::string> got = control->Get(kKeyPrefix + std::to_string(peer), timeout, peer);
    if (!got.ok()) {
      return got.status().WithContext("rank " + std::to_string(rank) + " reading rank " +
                                      std::to_string(peer) + "'s CPUs");
    }
    keys.push_back(std::move(*got));
  }
  return keys;
}

HostShare DecideHostShare(const HostShareInput& input) {
  HostShare share;
  const bool known = input.rank >= 0 && input.rank < static_cast<int>(input.keys.size());
  if (known) {
    share.local_size = 0;
    for (int r = 0; r < static_cast<int>(input.keys.size()); ++r) {
      if (input.keys[r] != input.keys[input.rank]) continue;
      if (r < input.rank) ++share.local_rank;
      ++share.local_size;
    }
  }
  const int cpus = std::max<int>(1, static_cast<int>(input.allowed_cpus.size()));
  const std::string cpu_text = DescribeCpus(input.allowed_cpus);
  const std::string flag = std::string(" (--share-host ") + ShareHostModeName(input.mode) + ")";
  if (share.local_size <= 1) {
    share.description = "alone on CPUs " + cpu_text + ": nothing shared" + flag;
    return share;
  }
  const std::string head = std::to_string(share.local_size) + " ranks share CPUs " + cpu_text +
                           ", this is local rank " + std::to_string(share.local_rank);
  if (input.mode == ShareHostMode::kOff) {
    share.description = head + ": left as they are" + flag;
    return share;
  }
  std::string not_bound;  // why binding was not possible
  if (input.mode == ShareHostMode::kAuto || input.mode == ShareHostMode::kBind) {
    std::vector<int> bind;
    if (input.mode == ShareHostMode::kAuto && input.online_cpus > 0 && cpus < input.online_cpus) {
      not_bound = "the affinity mask is narrower than the machine's " +
                  std::to_string(input.online_cpus) +
                  " CPUs (the user's or the launcher's), kept (--share-host bind splits it)";
    } else {
      bind = CpusForLocalRank(input.cores, share.local_rank, share.local_size, BindPolicy::kAuto);
      if (bind.empty() || static_cast<int>(bind.size()) >= cpus) {
        not_bound = std::to_string(share.local_size) + " ranks do not divide evenly over " +
                    std::to_string(input.cores.size()) + " core(s)";
        bind.clear();
      }
    }
    if (!bind.empty()) {
      share.bind_cpus = bind;
      share.description = head + ": bound to CPUs " + DescribeCpus(bind);
      if (input.requested_threads > 0) {
        share.description +=
            ", " + input.requested_source + " " + std::to_string(input.requested_threads) + " kept";
      }
      share.description += flag;
      return share;
    }
  }
  // Limit the threads: each rank computes on its share of the CPUs.
  const int per_rank = std::max(1, cpus / share.local_size);
  if (input.requested_threads > 0) {
    share.description = head + ": " + input.requested_source + " " +
                        std::to_string(input.requested_threads) + " kept (a fair share is " +
                        std::to_string(per_rank) + " CPU(s) per rank)";
  } else {
    share.cpu_threads = std::max(1, per_rank / std::max(1, input.cpu_devices));
    share.description = head + ": compute threads limited to " + std::to_string(share.cpu_threads) +
                        " per CPU device";
  }
  if (input.mode == ShareHostMode::kBind || !not_bound.empty()) {
    share.description += "; not bound: " + (not_bound.empty() ? std::string("?") : not_bound);
  }
  share.description += flag;
  return share;
}

Status BindAllThreads(const std::vector<int>& cpus) {
  if (cpus.empty()) return Status::OK();
  // The calling thread first: threads it starts from now on inherit.
  RETURN_IF_ERROR(BindToCpus(0, cpus));
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  // A thread may start while the list is read (from a thread not yet
  // bound), so read it again until a pass finds none new.
  std::set<pid_t> done;
  for (int pass = 0; pass < 8; ++pass) {
    bool fresh = false;
    for (pid_t tid : ThreadIds()) {
      if (!done.insert(tid).second) continue;
      fresh = true;
      // A thread that ended meanwhile (ESRCH) needs nothing.
      if (::sched_setaffinity(tid, sizeof(set), &set) != 0 && errno != ESRCH) {
        return UnavailableError("cannot bind thread ", tid, " to CPUs ", DescribeCpus(cpus), ": ",
                                strerror(errno));
      }
    }
    if (!fresh) return Status::OK();
  }
  return Status::OK();
}

}  // namespace comm
}  // namespace oflite
