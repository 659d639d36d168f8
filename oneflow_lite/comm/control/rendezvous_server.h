// The control-plane rendezvous service, served by rank 0.
//
// Holds the job's key-value store and barriers for `world_size` ranks. Every
// connection must first send JOIN with the job token, its rank and the world
// size; anything else (or a wrong token) is answered with PermissionDenied
// and closed. A rank may join once; when its connection drops, the rank is
// "departed" and every GET expecting it, and every barrier it has not
// reached, fails at once with an error naming it.
//
// One thread accepts; one thread per connection serves requests (worlds are
// small). Blocking requests (GET, BARRIER) carry their own timeout, capped by
// the server. Thread-safe. The destructor stops all threads (bounded) and
// closes all sockets.
#ifndef ONEFLOW_LITE_COMM_CONTROL_RENDEZVOUS_SERVER_H_
#define ONEFLOW_LITE_COMM_CONTROL_RENDEZVOUS_SERVER_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "oneflow_lite/comm/control/control_wire.h"
#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {
namespace control {

struct RendezvousOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 picks a free port
  int world_size = 1;
  std::string job_token;
  // A connection must JOIN within this long.
  std::chrono::milliseconds join_timeout{5000};
};

class RendezvousServer {
 public:
  static StatusOr<std::unique_ptr<RendezvousServer>> Start(
      const RendezvousOptions& options);
  ~RendezvousServer();

  int port() const { return port_; }

  // Blocks until every rank has joined, or DeadlineExceeded listing the
  // ranks that never arrived.
  Status WaitForAllJoined(std::chrono::milliseconds timeout);

 private:
  explicit RendezvousServer(const RendezvousOptions& options);
  void AcceptLoop();
  void Serve(int fd);
  void CloseConnection(int fd);
  ControlMessage Handle(int fd, int rank, const ControlMessage& request);
  ControlMessage HandleGet(int fd, int rank, const ControlMessage& request);
  ControlMessage HandleBarrier(int fd, int rank, const ControlMessage& request);
  // Waits (mutex_ held via `lock`) until `done`, the timeout, or the
  // requester `rank`'s socket closing, which marks it departed.
  void WaitWatching(std::unique_lock<std::mutex>* lock, int fd, int rank,
                    std::chrono::milliseconds timeout,
                    const std::function<bool()>& done);
  std::string DescribeRanks(const std::set<int>& ranks) const;

  const RendezvousOptions options_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread accept_thread_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::thread> workers_;
  std::vector<int> open_fds_;
  std::set<int> joined_;
  std::map<int, std::string> departed_;  // rank -> why
  std::map<std::string, std::string> store_;
  std::map<std::string, std::set<int>> barriers_;  // name -> arrived ranks
};

}  // namespace control
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_CONTROL_RENDEZVOUS_SERVER_H_
