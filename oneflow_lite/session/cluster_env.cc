#include "oneflow_lite/session/cluster_env.h"

#include <cctype>
#include <sstream>

#include "oneflow_lite/session/flags.h"

namespace oflite {
namespace session {
namespace {

constexpr size_t kMaxHosts = 65536;

bool AllDigits(const std::string& text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// "01-04,07" -> {"01","02","03","04","07"}, padding kept.
StatusOr<std::vector<std::string>> ExpandRanges(const std::string& ranges,
                                                const std::string& what) {
  std::vector<std::string> out;
  std::stringstream stream(ranges);
  std::string item;
  while (std::getline(stream, item, ',')) {
    const size_t dash = item.find('-');
    const std::string low = item.substr(0, dash);
    const std::string high = dash == std::string::npos ? low : item.substr(dash + 1);
    if (!AllDigits(low) || !AllDigits(high) || low.size() > 9 || high.size() > 9) {
      return InvalidArgumentError(what, ": '", item, "' in [", ranges,
                                  "] is not a number or a range N-M");
    }
    const long first = std::stol(low), last = std::stol(high);
    if (last < first) {
      return InvalidArgumentError(what, ": range '", item, "' ends before it starts");
    }
    if (out.size() + static_cast<size_t>(last - first + 1) > kMaxHosts) {
      return InvalidArgumentError(what, ": more than ", kMaxHosts, " hosts");
    }
    for (long n = first; n <= last; ++n) {
      std::string digits = std::to_string(n);
      if (digits.size() < low.size()) digits.insert(0, low.size() - digits.size(), '0');
      out.push_back(digits);
    }
  }
  if (out.empty() || ranges.back() == ',') {
    return InvalidArgumentError(what, ": empty range list in [", ranges, "]");
  }
  return out;
}

// One top-level item ("rack[1-2]-n[01-02]") -> its hosts.
StatusOr<std::vector<std::string>> ExpandItem(const std::string& item, const std::string& what) {
  std::vector<std::string> hosts = {""};
  size_t at = 0;
  while (at < item.size()) {
    const size_t open = item.find('[', at);
    const std::string literal = item.substr(at, open == std::string::npos ? open : open - at);
    if (literal.find(']') != std::string::npos) {
      return InvalidArgumentError(what, ": unbalanced ']' in '", item, "'");
    }
    for (std::string& host : hosts) host += literal;
    if (open == std::string::npos) break;
    const size_t close = item.find(']', open);
    if (close == std::string::npos) {
      return InvalidArgumentError(what, ": unbalanced '[' in '", item, "'");
    }
    ASSIGN_OR_RETURN(std::vector<std::string> parts,
                     ExpandRanges(item.substr(open + 1, close - open - 1), what));
    if (hosts.size() * parts.size() > kMaxHosts) {
      return InvalidArgumentError(what, ": more than ", kMaxHosts, " hosts");
    }
    std::vector<std::string> next;
    for (const std::string& host : hosts) {
      for (const std::string& part : parts) next.push_back(host + part);
    }
    hosts.swap(next);
    at = close + 1;
  }
  return hosts;
}

// A non-negative integer variable; not given when unset.
StatusOr<LauncherValue> ReadCount(const Environment& env, const std::string& name) {
  LauncherValue value;
  const std::string text = env(name);
  if (text.empty()) return value;
  StatusOr<int64_t> parsed = cli::ParseInt64(text, name);
  if (!parsed.ok() || *parsed < 0) {
    return InvalidArgumentError(name, "='", text, "' is not a non-negative integer");
  }
  value.value = *parsed;
  value.source = name;
  return value;
}

StatusOr<LauncherPlacement> ReadSlurm(const Environment& env) {
  LauncherPlacement placement;
  placement.launcher = "Slurm";
  ASSIGN_OR_RETURN(placement.rank, ReadCount(env, "SLURM_PROCID"));
  ASSIGN_OR_RETURN(placement.world, ReadCount(env, "SLURM_STEP_NUM_TASKS"));
  if (!placement.world.given()) {
    ASSIGN_OR_RETURN(placement.world, ReadCount(env, "SLURM_NTASKS"));
  }
  if (placement.world.given() && placement.rank.value >= placement.world.value) {
    return InvalidArgumentError("SLURM_PROCID=", placement.rank.value, " is not below ",
                                placement.world.source, "=", placement.world.value);
  }
  ASSIGN_OR_RETURN(placement.local_rank, ReadCount(env, "SLURM_LOCALID"));
  std::string per_node_name = "SLURM_STEP_TASKS_PER_NODE";
  if (env(per_node_name).empty()) per_node_name = "SLURM_TASKS_PER_NODE";
  ASSIGN_OR_RETURN(const LauncherValue node_id, ReadCount(env, "SLURM_NODEID"));
  if (!env(per_node_name).empty() && node_id.given()) {
    ASSIGN_OR_RETURN(placement.local_size.value,
                     SlurmTasksOnNode(env(per_node_name), node_id.value, per_node_name));
    placement.local_size.source = per_node_name;
  }
  for (const char* name : {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"}) {
    if (env(name).empty()) continue;
    ASSIGN_OR_RETURN(std::vector<std::string> hosts, ExpandHostlist(env(name), name));
    placement.master_host = hosts.front();
    placement.master_host_source = name;
    break;
  }
  if (!placement.master_host.empty()) {
    if (env("SLURM_JOB_ID").empty()) {
      return InvalidArgumentError("SLURM_JOB_ID is not set although ",
                                  placement.master_host_source,
                                  " is: the master port is derived from it");
    }
    placement.master_port = SlurmMasterPort(env("SLURM_JOB_ID"), env("SLURM_STEP_ID"));
    placement.master_port_source = "SLURM_JOB_ID/SLURM_STEP_ID";
  }
  const std::string bind = env("SLURM_CPU_BIND_TYPE");
  placement.cpus_bound = !bind.empty() && bind.rfind("none", 0) != 0;
  return placement;
}

StatusOr<LauncherPlacement> ReadOpenMpi(const Environment& env, const std::string& hostfile_name,
                                        const std::string& hostfile_contents) {
  LauncherPlacement placement;
  placement.launcher = "OpenMPI";
  ASSIGN_OR_RETURN(placement.rank, ReadCount(env, "OMPI_COMM_WORLD_RANK"));
  ASSIGN_OR_RETURN(placement.world, ReadCount(env, "OMPI_COMM_WORLD_SIZE"));
  if (placement.world.given() && placement.rank.value >= placement.world.value) {
    return InvalidArgumentError("OMPI_COMM_WORLD_RANK=", placement.rank.value,
                                " is not below OMPI_COMM_WORLD_SIZE=", placement.world.value);
  }
  ASSIGN_OR_RETURN(placement.local_rank, ReadCount(env, "OMPI_COMM_WORLD_LOCAL_RANK"));
  ASSIGN_OR_RETURN(placement.local_size, ReadCount(env, "OMPI_COMM_WORLD_LOCAL_SIZE"));
  if (!hostfile_name.empty()) {
    ASSIGN_OR_RETURN(placement.master_host,
                     FirstHostOfHostfile(hostfile_contents, "hostfile '" + hostfile_name + "'"));
    placement.master_host_source = "hostfile " + hostfile_name;
    placement.master_port = kDefaultMasterPort;
    placement.master_port_source = "the default port";
  }
  return placement;
}

}  // namespace

StatusOr<std::vector<std::string>> ExpandHostlist(const std::string& text,
                                                  const std::string& what) {
  std::vector<std::string> hosts;
  std::string item;
  int depth = 0;
  auto flush = [&]() -> Status {
    if (item.empty()) return InvalidArgumentError(what, "='", text, "': empty host name");
    ASSIGN_OR_RETURN(std::vector<std::string> expanded, ExpandItem(item, what));
    if (hosts.size() + expanded.size() > kMaxHosts) {
      return InvalidArgumentError(what, ": more than ", kMaxHosts, " hosts");
    }
    hosts.insert(hosts.end(), expanded.begin(), expanded.end());
    item.clear();
    return Status::OK();
  };
  for (char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      return InvalidArgumentError(what, "='", text, "': a host list has no spaces");
    }
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) {
      return InvalidArgumentError(what, "='", text, "': unbalanced or nested brackets");
    }
    if (c == ',' && depth == 0) {
      RETURN_IF_ERROR(flush());
    } else {
      item.push_back(c);
    }
  }
  if (depth != 0) return InvalidArgumentError(what, "='", text, "': unbalanced '['");
  RETURN_IF_ERROR(flush());
  return hosts;
}

StatusOr<std::string> FirstHostOfHostfile(const std::string& contents, const std::string& what) {
  std::stringstream lines(contents);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    line = line.substr(0, line.find('#'));
    std::stringstream words(line);
    std::string host, option;
    if (!(words >> host)) continue;
    if (host.find('=') != std::string::npos) {
      return InvalidArgumentError(what, " line ", number, ": '", host,
                                  "' is an option, expected a host name first");
    }
    while (words >> option) {
      const size_t equals = option.find('=');
      const std::string key = option.substr(0, equals);
      if (equals == std::string::npos || (key != "slots" && key != "max_slots" &&
                                          key != "max-slots") ||
          !AllDigits(option.substr(equals + 1))) {
        return InvalidArgumentError(what, " line ", number, ": '", option,
                                    "' is not slots=N or max_slots=N");
      }
    }
    return host;
  }
  return InvalidArgumentError(what, " names no host");
}

int SlurmMasterPort(const std::string& job_id, const std::string& step_id) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : job_id + "." + step_id) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return kSlurmPortBase + static_cast<int>(hash % kSlurmPortSpan);
}

StatusOr<int64_t> SlurmTasksOnNode(const std::string& tasks_per_node, int64_t node_id,
                                   const std::string& what) {
  std::stringstream items(tasks_per_node);
  std::string item;
  int64_t node = 0;
  while (std::getline(items, item, ',')) {
    const size_t paren = item.find('(');
    const std::string count_text = item.substr(0, paren);
    int64_t repeat = 1;
    if (paren != std::string::npos) {
      const std::string times = item.substr(paren);
      if (times.size() < 4 || times.compare(0, 2, "(x") != 0 || times.back() != ')' ||
          !AllDigits(times.substr(2, times.size() - 3))) {
        return InvalidArgumentError(what, "='", tasks_per_node, "': '", item,
                                    "' is not N or N(xK)");
      }
      repeat = std::stoll(times.substr(2, times.size() - 3));
    }
    if (!AllDigits(count_text) || count_text.size() > 9 || repeat > (1 << 20)) {
      return InvalidArgumentError(what, "='", tasks_per_node, "': '", item,
                                  "' is not N or N(xK)");
    }
    if (node_id < node + repeat) return std::stoll(count_text);
    node += repeat;
  }
  return InvalidArgumentError(what, "='", tasks_per_node, "' has no node ", node_id,
                              " (SLURM_NODEID)");
}

StatusOr<LauncherPlacement> ReadLauncherPlacement(const Environment& env,
                                                  const std::string& hostfile_name,
                                                  const std::string& hostfile_contents) {
  if (!env("SLURM_PROCID").empty()) return ReadSlurm(env);
  if (!env("OMPI_COMM_WORLD_RANK").empty()) {
    return ReadOpenMpi(env, hostfile_name, hostfile_contents);
  }
  return LauncherPlacement();
}

}  // namespace session
}  // namespace oflite
