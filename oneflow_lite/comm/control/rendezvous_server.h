// The control-plane rendezvous service, served by rank 0.
//
// Holds the job's key-value store and barriers for `world_size` ranks. Every
// connection must first send JOIN with the job token, its rank and the world
// size; anything else (or a wrong token) is answered with PermissionDenied
// and closed. A rank may join once; when its connection drops, the rank is
// "departed" and every GET expecting it, and every barrier it has not
// reached, fails at once with an error naming it.
//
// Admission is built to stay bounded when anyone who can reach the port
// floods it (docs/comm.md, "Limits of the control plane"):
//   - one "front door" thread accepts and reads JOINs for every connection
//     that has not proven the token yet (poll, nonblocking reads); no thread
//     and at most kMaxJoinPayload + 16 bytes per such connection;
//   - a JOIN header claiming more than kMaxJoinPayload bytes, or any other
//     frame first, is refused and the socket closed at once;
//   - a connection that has not completed its JOIN within `join_timeout` is
//     closed;
//   - at most `max_pending_joins` connections wait for their JOIN; a new one
//     beyond that evicts the oldest (a genuine rank sends JOIN at once);
//   - at the file-descriptor limit, waiting connections are accepted and
//     closed (socket_util.h Acceptor) and accepting pauses briefly, so the
//     server neither spins nor stops serving once descriptors free up.
// An admitted rank gets one serving thread (at most `world_size`, since a
// rank joins once); blocking requests (GET, BARRIER) carry their own
// timeout, capped by the server.
//
// A refused JOIN that presented a wrong token while claiming rank R (in
// range and not joined) is remembered: if no JOIN with the right token
// arrives for R within `refused_rank_grace`, R is marked departed with a
// reason naming the refused address, so waiters on R fail naming the
// refusal instead of timing out. The grace keeps a stray or hostile
// connection from killing a job outright; the trade-off is that such a
// connection can still end a job whose rank R is more than the grace late.
//
// Silent ranks: clients send PING between calls (control_client.h). A rank
// that is joined, has no request in progress and has sent nothing for
// `silent_rank_timeout` (frozen, or its process hung) is marked departed
// ("rank R sent nothing for N ms"), so every GET expecting it and every
// barrier it has not reached fails naming it, as for a closed connection.
//
// Thread-safe. The destructor stops and joins every thread (bounded) and
// closes every socket.
#ifndef ONEFLOW_LITE_COMM_CONTROL_RENDEZVOUS_SERVER_H_
#define ONEFLOW_LITE_COMM_CONTROL_RENDEZVOUS_SERVER_H_

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "oneflow_lite/comm/control/control_wire.h"
#include "oneflow_lite/comm/socket_util.h"
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
  // Connections waiting for their JOIN, at most.
  int max_pending_joins = 64;
  // How long a wrong-token JOIN claiming a missing rank waits for the
  // genuine rank before that rank is declared lost (see above).
  std::chrono::milliseconds refused_rank_grace{5000};
  // A joined rank idle (no request in progress) and silent this long is
  // departed (see above); 0 never declares a silent rank departed.
  std::chrono::milliseconds silent_rank_timeout{0};
};

// Counters of the front door (a snapshot).
struct RendezvousStats {
  int64_t accepted = 0;  // connections accepted
  int64_t refused = 0;   // closed before or at JOIN (any reason)
  int64_t expired = 0;   // closed for not joining within join_timeout
  int64_t evicted = 0;   // closed to keep max_pending_joins
  int64_t shed = 0;      // dropped at the file-descriptor limit
  int pending = 0;       // waiting for their JOIN now
};

class RendezvousServer {
 public:
  static StatusOr<std::unique_ptr<RendezvousServer>> Start(
      const RendezvousOptions& options);
  ~RendezvousServer();

  int port() const { return port_; }

  // Blocks until every rank has joined, or DeadlineExceeded listing the
  // ranks that never arrived (Unavailable at once if a missing rank was
  // declared lost, e.g. after a wrong-token refusal).
  Status WaitForAllJoined(std::chrono::milliseconds timeout);

  RendezvousStats stats() const;

 private:
  struct Pending;
  struct RefusedClaim {
    std::string reason;
    Clock::time_point at;
  };

  explicit RendezvousServer(const RendezvousOptions& options);
  void FrontDoorLoop();
  void AcceptNew(Acceptor* acceptor, std::deque<Pending>* pending,
                 Clock::time_point* paused_until);
  // Reads what is available; true when `pending` is finished (admitted or
  // refused; its socket then belongs to a rank thread or is closed).
  bool ContinueJoin(Pending* pending);
  void FinishJoin(Pending* pending, const ControlMessage& join);
  Status Admit(const Pending& pending, const ControlMessage& join, int* rank);
  void ExpireRefusedClaims();
  void CountThenClose(int fd, int64_t* counter);  // counter in stats_
  void ServeRank(int fd, int rank);
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
  // Marks every silent rank departed (mutex_ held); true if one was.
  bool MarkSilentRanksLocked();

  const RendezvousOptions options_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread front_door_thread_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::thread> rank_threads_;  // at most world_size
  std::vector<int> open_fds_;              // of admitted ranks
  std::map<int, RefusedClaim> refused_claims_;  // rank -> first refusal
  RendezvousStats stats_;
  std::set<int> joined_;
  std::map<int, std::string> departed_;  // rank -> why
  // Per joined rank: when its last frame arrived or its last answer left,
  // and whether a request of it is being handled (both guarded by mutex_).
  std::map<int, Clock::time_point> last_heard_;
  std::set<int> in_request_;
  std::map<std::string, std::string> store_;
  std::map<std::string, std::set<int>> barriers_;  // name -> arrived ranks
};

}  // namespace control
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_CONTROL_RENDEZVOUS_SERVER_H_
