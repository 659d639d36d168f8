// Test helpers for flood and descriptor-limit tests of CommNet's listeners
// (control/ and tcp/): process counters read from /proc, loopback sockets,
// and a server run in a child process whose file descriptors are exhausted.
// Linux only; not thread-safe.
// Link target: //oneflow_lite/comm/testing:listener_flood (testonly).
#ifndef ONEFLOW_LITE_COMM_TESTING_LISTENER_FLOOD_H_
#define ONEFLOW_LITE_COMM_TESTING_LISTENER_FLOOD_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace oflite {
namespace comm {
namespace testing {

// Entries of /proc/PID/fd (0: this process).
int OpenDescriptors(pid_t pid = 0);
// VmRSS in bytes, and the "Threads:" line of /proc/PID/status.
int64_t ResidentBytes(pid_t pid = 0);
int ThreadCount(pid_t pid = 0);
// User + system CPU seconds of the whole process, from /proc/PID/stat.
double CpuSeconds(pid_t pid);

// CPU seconds that `pid` and a spinning thread of this process used over
// the same `window`. Under load a busy-looping server gets about the share
// the spinner gets, and a resting one next to nothing, so comparing the two
// bounds a spin without trusting the wall clock.
struct CpuAgainstSpinner {
  double process = 0;
  double spinner = 0;
};
CpuAgainstSpinner MeasureCpuAgainstSpinner(pid_t pid, std::chrono::milliseconds window);

// A blocking loopback connection to `port`, or -1.
int ConnectLoopback(int port);
// Waits up to `bound` for the peer to close `fd` (EOF or reset); true if it
// did. Data the server sent before closing is skipped.
bool ClosedByPeer(int fd, std::chrono::milliseconds bound);
// True if nothing says `fd` was closed by the peer right now.
bool StillOpen(int fd);
void CloseAll(std::vector<int>* fds);

// Runs a server in a forked child process with RLIMIT_NOFILE = `limit`:
// the child calls `start` (which returns the listening port, holding the
// server in *keep), then opens /dev/null until no descriptor is left, and
// reports the port. ReleaseDescriptors() makes the child close those
// fillers. The destructor stops the child (bounded) and reaps it. Call
// Start before any thread is running in this process.
class StarvedServer {
 public:
  using StartFn = std::function<int(std::shared_ptr<void>* keep)>;
  static std::unique_ptr<StarvedServer> Start(int limit, StartFn start);
  ~StarvedServer();

  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  // Returns once the child has closed its filler descriptors.
  bool ReleaseDescriptors();

 private:
  StarvedServer() = default;
  pid_t pid_ = -1;
  int port_ = 0;
  int to_child_ = -1;
  int from_child_ = -1;
};

// At `server`'s descriptor limit: opens 20 loopback connections to it,
// measures the child's CPU over 2 s against a spinning thread, then closes
// them and makes the child release its fillers. Empty when the child used
// under a fifth of the spinner's CPU (accept() at EMFILE does not spin) and
// released its fillers; otherwise what went wrong, naming `what`.
std::string FloodAtDescriptorLimit(StarvedServer* server, const std::string& what);

}  // namespace testing
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_TESTING_LISTENER_FLOOD_H_
