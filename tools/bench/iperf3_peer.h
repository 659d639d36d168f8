// iperf3 as a peer of the point-to-point bench: one single-stream TCP
// transfer on loopback, `total` bytes written `size` bytes at a time
// (`iperf3 -c 127.0.0.1 -n total -l size`; iperf3 refuses blocks above
// 1 MiB, so larger sizes use its largest, 1 MiB), against a one-off server
// (`iperf3 -s -1`) this process starts and reaps. The figure is the
// receiver's rate from iperf3's JSON report, in MB/s.
//
// Availability: Iperf3Available() says whether the binary is on PATH
// (tools/install_deps.sh installs Debian's iperf3). A sample that fails
// (server not up within 5 s, client error, unparsable report) returns a
// negative value; the bench prints "-" for a size with no good sample.
// Blocking: a sample runs as long as the transfer (and at most 5 s of
// start-up retries); the child processes never outlive it.
#ifndef TOOLS_BENCH_IPERF3_PEER_H_
#define TOOLS_BENCH_IPERF3_PEER_H_

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tools/bench/comm_bench_util.h"

extern char** environ;

namespace oflite {
namespace bench {

inline bool Iperf3Available() {
  return std::system("command -v iperf3 >/dev/null 2>&1") == 0;
}

// The number after "bits_per_second" in the "sum_received" object of an
// iperf3 -J report; negative when absent.
inline double Iperf3ReceivedBitsPerSecond(const std::string& json) {
  size_t at = json.find("\"sum_received\"");
  if (at == std::string::npos) return -1;
  at = json.find("\"bits_per_second\"", at);
  if (at == std::string::npos) return -1;
  at = json.find(':', at);
  if (at == std::string::npos) return -1;
  return std::strtod(json.c_str() + at + 1, nullptr);
}

inline constexpr size_t kIperf3MaxBlock = 1u << 20;

// One sample (MB/s), or negative on failure. `port` must be free. The
// server runs on `server_cpus` and the client on `client_cpus` (empty: the
// launcher's CPUs), as the ranks they stand in for (comm_bench_util.h).
inline double Iperf3Sample(int port, size_t size, size_t total,
                           const std::vector<int>& server_cpus,
                           const std::vector<int>& client_cpus) {
  size = std::min(size, kIperf3MaxBlock);
  const std::string port_text = std::to_string(port);
  const char* server_argv[] = {"iperf3", "-s", "-1", "-p", port_text.c_str(), nullptr};
  pid_t server = -1;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  int spawned;
  {
    ScopedCpus cpus(server_cpus);
    spawned = posix_spawnp(&server, "iperf3", &actions, nullptr,
                           const_cast<char* const*>(server_argv), environ);
  }
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  const std::string client = "iperf3 -J -c 127.0.0.1 -p " + port_text + " -n " +
                             std::to_string(total) + " -l " + std::to_string(size) +
                             " 2>/dev/null";
  double bits = -1;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  ScopedCpus cpus(client_cpus);
  while (bits < 0 && std::chrono::steady_clock::now() < give_up) {
    bits = Iperf3ReceivedBitsPerSecond(RunCaptured(client));
    if (bits < 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(server, SIGTERM);
  int status = 0;
  ::waitpid(server, &status, 0);
  return bits < 0 ? -1 : bits / 8 / 1e6;
}

}  // namespace bench
}  // namespace oflite

#endif  // TOOLS_BENCH_IPERF3_PEER_H_
