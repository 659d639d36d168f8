// Helpers shared by the CommNet benchmarks (tools/bench/comm_*,
// allreduce_*): the flags they share (declared for cli::FlagSet), medians,
// free ports, forking ranks, the transport of a provider chosen by --comm.
// Single-threaded use before the ranks start; not a library API.
#ifndef ONEFLOW_LITE_TOOLS_BENCH_COMM_BENCH_UTIL_H_
#define ONEFLOW_LITE_TOOLS_BENCH_COMM_BENCH_UTIL_H_

#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "oneflow_lite/comm/launch/cpu_binding.h"
#include "oneflow_lite/comm/shm/shm_transport.h"
#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/comm/tcp/tcp_transport.h"
#include "oneflow_lite/session/flags.h"

namespace oflite {
namespace bench {

inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  if (values.empty()) return 0;
  const size_t middle = values.size() / 2;
  return values.size() % 2 ? values[middle]
                           : (values[middle - 1] + values[middle]) / 2;
}

inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// CPU time (user + system) of this process, all its threads, in seconds: a
// figure the other jobs on a shared machine disturb far less than wall time.
inline double ProcessCpuSeconds() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// "tcp,shm" -> {"tcp", "shm"}.
inline std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> items;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (comma > start) items.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

// --tcp_caller_poll=0|1: TcpOptions::caller_progress of the benches' tcp
// transports (-1: the provider's default).
inline int& BenchTcpCallerPoll() {
  static int value = -1;
  return value;
}

// --tcp_busy_poll_us=U: TcpOptions::busy_poll (-1: the provider's default).
inline long long& BenchTcpBusyPollUs() {
  static long long value = -1;
  return value;
}

// --tcp_quick_ack=0|1: TcpOptions::quick_ack (-1: the provider's default).
inline int& BenchTcpQuickAck() {
  static int value = -1;
  return value;
}

// A CommNet transport of provider `provider` (tcp or shm) for a bench rank;
// `shm` tunes the shm provider (the default: its defaults); tcp listens on
// `listen_host`.
inline StatusOr<std::unique_ptr<comm::Transport>> CreateBenchTransport(
    const std::string& provider, const comm::TransportOptions& options,
    const std::string& token, const comm::shm::ShmOptions& shm = {},
    const std::string& listen_host = "127.0.0.1") {
  if (provider == "shm") {
    ASSIGN_OR_RETURN(auto transport, comm::shm::CreateShmTransport(options, shm));
    return std::unique_ptr<comm::Transport>(std::move(transport));
  }
  if (provider != "tcp") return InvalidArgumentError("--comm: unknown provider '", provider, "'");
  comm::tcp::TcpOptions tcp_options;
  tcp_options.job_token = token;
  tcp_options.listen_host = listen_host;
  if (BenchTcpCallerPoll() >= 0) tcp_options.caller_progress = BenchTcpCallerPoll() != 0;
  if (BenchTcpBusyPollUs() >= 0) {
    tcp_options.busy_poll = std::chrono::microseconds(BenchTcpBusyPollUs());
  }
  if (BenchTcpQuickAck() >= 0) tcp_options.quick_ack = BenchTcpQuickAck() != 0;
  return comm::tcp::CreateTcpTransport(options, tcp_options);
}

// A port that was free a moment ago (bound then released).
inline int FreePort() {
  int port = 0;
  auto fd = comm::ListenTcp("127.0.0.1", &port);
  if (!fd.ok()) {
    std::fprintf(stderr, "no free port: %s\n", fd.status().ToString().c_str());
    std::exit(1);
  }
  ::close(*fd);
  return port;
}

// "1.23 0.98 0.75": the 1-, 5- and 15-minute load averages ("?" if unknown).
inline std::string LoadAverage() {
  double load[3];
  if (getloadavg(load, 3) != 3) return "?";
  char text[64];
  std::snprintf(text, sizeof(text), "%.2f %.2f %.2f", load[0], load[1], load[2]);
  return text;
}

// CPU binding of the ranks a bench forks (--bind, comm/launch/cpu_binding.h;
// the default auto is `oflite launch`'s and, at 2 ranks on a 2-core host,
// what mpirun does by default). The peers a bench starts as processes
// (mpirun, iperf3) are started with the launcher's own CPUs, or with the
// CPUs of the rank they stand in for, never inheriting a rank's binding by
// accident.
struct BenchBinding {
  comm::BindPolicy policy = comm::BindPolicy::kAuto;
  std::vector<int> launcher_cpus = comm::AllowedCpus();  // read once
  std::vector<std::vector<int>> cores = comm::GroupIntoCores(launcher_cpus);
};

inline BenchBinding& Binding() {
  static BenchBinding binding;
  return binding;
}

// The flags both CommNet benches take (cli::FlagSpecs): --repeats, the
// sizes --min_bytes..--max_bytes (x4 apart), --comm (its help is
// `comm_help`; unset: the bench's default providers), the ranks' --bind and
// the providers' tuning knobs (unset: the provider's own default).
inline std::vector<cli::FlagSpec> CommBenchFlagSpecs(const std::string& comm_help) {
  return {{"repeats", "samples per size (their median is printed)", false, "5"},
          {"min_bytes", "the smallest size; sizes grow x4 up to --max_bytes", false, "4096"},
          {"max_bytes", "the largest size", false, std::to_string(64 << 20)},
          {"comm", comm_help},
          {"bind",
           "CPU binding of the forked ranks: auto, cores or none (auto as `oflite launch`: "
           "each rank its own cores when they fit)",
           false, "auto"},
          {"shm_spin_us", "the shm provider's busy-poll bound (default: its own)"},
          {"shm_inline_bytes", "the shm provider's caller-thread copy bound (default: its own)"},
          {"shm_caller_poll", "waiting callers drive the shm rings (default: its own)", true},
          {"tcp_caller_poll", "waiting callers read the tcp sockets (default: its own)", true},
          {"tcp_busy_poll_us",
           "how long tcp's progress thread polls after an event (default: its own)"},
          {"tcp_quick_ack", "tcp acknowledges large payloads at once (default: its own)", true}};
}

// CommBenchFlagSpecs' values, read.
struct CommBenchOptions {
  int repeats = 0;
  size_t min_bytes = 0;
  size_t max_bytes = 0;
  std::vector<std::string> providers;  // empty: --comm unset
  comm::shm::ShmOptions shm;           // the shm knobs given
};

// Reads CommBenchFlagSpecs' flags: an InvalidArgument naming the flag for a
// bad value. Sets the --bind policy (Binding()) and the tcp knobs that
// CreateBenchTransport applies as it goes.
inline StatusOr<CommBenchOptions> ReadCommBenchFlags(const cli::FlagSet& flags) {
  constexpr int64_t kMaxMicroseconds = 10 * 1000 * 1000;
  CommBenchOptions options;
  ASSIGN_OR_RETURN(options.repeats, flags.GetInt("repeats", 1, 1000));
  ASSIGN_OR_RETURN(options.max_bytes, flags.GetInt("max_bytes", 4, int64_t{1} << 32));
  ASSIGN_OR_RETURN(options.min_bytes, flags.GetInt("min_bytes", 4, options.max_bytes));
  if (flags.Has("comm")) options.providers = SplitList(flags.Get("comm"));
  for (const std::string& provider : options.providers) {
    if (provider != "tcp" && provider != "shm") {
      return InvalidArgumentError("flag '--comm' takes tcp and shm (comma-separated), got '",
                                  flags.Get("comm"), "'");
    }
  }
  if (flags.Has("comm") && options.providers.empty()) {
    return InvalidArgumentError("flag '--comm' names no provider");
  }
  ASSIGN_OR_RETURN(Binding().policy, comm::ParseBindPolicy(flags.Get("bind"), "--bind"));
  if (flags.Has("shm_spin_us")) {
    ASSIGN_OR_RETURN(int64_t spin, flags.GetInt("shm_spin_us", 0, kMaxMicroseconds));
    options.shm.spin = std::chrono::microseconds(spin);
  }
  if (flags.Has("shm_inline_bytes")) {
    ASSIGN_OR_RETURN(options.shm.inline_copy_bytes,
                     flags.GetInt("shm_inline_bytes", 0, int64_t{1} << 30));
  }
  if (flags.Has("shm_caller_poll")) options.shm.caller_progress = flags.GetBool("shm_caller_poll");
  if (flags.Has("tcp_caller_poll")) BenchTcpCallerPoll() = flags.GetBool("tcp_caller_poll");
  if (flags.Has("tcp_busy_poll_us")) {
    ASSIGN_OR_RETURN(BenchTcpBusyPollUs(), flags.GetInt("tcp_busy_poll_us", 0, kMaxMicroseconds));
  }
  if (flags.Has("tcp_quick_ack")) BenchTcpQuickAck() = flags.GetBool("tcp_quick_ack");
  return options;
}

// The CPUs of local rank `rank` of `world` (empty: unbound).
inline std::vector<int> RankCpus(int rank, int world) {
  return comm::CpusForLocalRank(Binding().cores, rank, world, Binding().policy);
}

// "rank 0 on CPUs 0, rank 1 on CPUs 1" or "ranks unbound (...)".
inline std::string DescribeBinding(int world) {
  std::vector<std::vector<int>> rank_cpus;
  for (int rank = 0; rank < world; ++rank) rank_cpus.push_back(RankCpus(rank, world));
  return comm::DescribeBinding(rank_cpus, Binding().policy, Binding().cores.size());
}

// Binds the calling thread to `cpus` for its lifetime (what it starts
// meanwhile inherits them), then restores the thread's previous CPUs.
// Empty `cpus`: the launcher's CPUs.
class ScopedCpus {
 public:
  explicit ScopedCpus(const std::vector<int>& cpus) {
    CPU_ZERO(&previous_);
    saved_ = sched_getaffinity(0, sizeof(previous_), &previous_) == 0;
    Status bound = comm::BindToCpus(0, cpus.empty() ? Binding().launcher_cpus : cpus);
    if (!bound.ok()) std::fprintf(stderr, "bench: %s\n", bound.ToString().c_str());
  }
  ~ScopedCpus() {
    if (saved_) sched_setaffinity(0, sizeof(previous_), &previous_);
  }
  ScopedCpus(const ScopedCpus&) = delete;
  ScopedCpus& operator=(const ScopedCpus&) = delete;

 private:
  cpu_set_t previous_;
  bool saved_ = false;
};

// Forks ranks 1..world-1 (each bound by --bind, runs body(rank) and exits
// with its result), runs body(0) here on rank 0's CPUs (restored
// afterwards), and returns non-zero if any rank failed. Call before any
// thread exists.
inline int RunRanks(int world, const std::function<int(int)>& body) {
  std::vector<pid_t> children;
  for (int rank = 1; rank < world; ++rank) {
    const std::vector<int> cpus = RankCpus(rank, world);
    pid_t pid = ::fork();
    if (pid == 0) {
      Status bound = comm::BindToCpus(0, cpus);
      if (!bound.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", rank, bound.ToString().c_str());
        ::_exit(1);
      }
      std::fflush(stdout);
      ::_exit(body(rank));
    }
    children.push_back(pid);
  }
  int failed;
  {
    ScopedCpus bound(RankCpus(0, world));  // unbound: the launcher's CPUs, as before
    failed = body(0);
  }
  for (pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  return failed;
}

// The standard output of `command` (run by the shell); its exit status
// from pclose in `*status` when given (-1: it could not be started).
inline std::string RunCaptured(const std::string& command, int* status = nullptr) {
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    if (status != nullptr) *status = -1;
    return out;
  }
  char chunk[4096];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, pipe)) > 0) out.append(chunk, n);
  const int closed = ::pclose(pipe);
  if (status != nullptr) *status = closed;
  return out;
}

inline std::string SizeName(size_t bytes) {
  char text[32];
  if (bytes >= (1u << 20)) {
    std::snprintf(text, sizeof(text), "%zu MiB", bytes >> 20);
  } else {
    std::snprintf(text, sizeof(text), "%zu KiB", bytes >> 10);
  }
  return text;
}

}  // namespace bench
}  // namespace oflite

#endif  // ONEFLOW_LITE_TOOLS_BENCH_COMM_BENCH_UTIL_H_
