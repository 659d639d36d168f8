// A rank's connection to the rendezvous service (rank 0 serves it).
//
// Connect() dials the master (retrying until its deadline, since the master
// may start later), presents the job token, rank and world size, and waits
// for admission; a connection the master closes without answering (it sheds
// connections under a flood or at its descriptor limit) is dialed again
// until the deadline. Put/Get/Barrier are blocking, bounded requests; errors name
// the missing rank where one is known (GET with an expected publisher,
// barriers). If the master dies, every call fails with an error saying so.
// Abort(reason) ends the call in progress and every later one with
// `reason` (e.g. "rank 2 lost": a peer-loss handler wakes a rank waiting at
// a barrier instead of letting it wait for the barrier's deadline).
// Between calls a background thread sends PING every heartbeat_interval
// (skipped while a call is in progress), so the master can tell a rank that
// is frozen from one that is busy (rendezvous_server.h, silent ranks).
// Thread-safe: calls are serialized on the one connection; Abort may be
// called from any thread, also while a call is blocked.
#ifndef ONEFLOW_LITE_COMM_CONTROL_CONTROL_CLIENT_H_
#define ONEFLOW_LITE_COMM_CONTROL_CONTROL_CLIENT_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "oneflow_lite/comm/control/control_wire.h"
#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {
namespace control {

struct ControlClientOptions {
  std::string master;  // "host:port" of rank 0's rendezvous server
  int rank = 0;
  int world_size = 1;
  std::string job_token;
  std::chrono::milliseconds connect_timeout{30000};
  // Between calls, a PING this often; 0 sends none.
  std::chrono::milliseconds heartbeat_interval{1000};
};

class ControlClient {
 public:
  static StatusOr<std::unique_ptr<ControlClient>> Connect(
      const ControlClientOptions& options);
  ~ControlClient();

  int rank() const { return options_.rank; }
  int world_size() const { return options_.world_size; }

  Status Put(const std::string& key, const std::string& value);
  // Waits up to `timeout` for `key`. With `publisher_rank` >= 0 the wait
  // fails early (naming it) if that rank leaves the job.
  StatusOr<std::string> Get(const std::string& key,
                            std::chrono::milliseconds timeout,
                            int publisher_rank = -1);
  // All ranks must call barriers in the same order; `name` is for errors
  // and must be the same on every rank for a given call.
  Status Barrier(const std::string& name, std::chrono::milliseconds timeout);
  // Makes the blocked call (if any) and every later call return `reason`
  // (not OK; the first reason is kept). Never blocks; the connection to the
  // master is shut down (the master sees this rank leave).
  void Abort(const Status& reason);
  // True once a call failed because the connection to the master broke
  // (not an error the master answered, not an Abort): rank 0 is gone.
  bool master_lost() const { return master_lost_.load(); }

 private:
  ControlClient(const ControlClientOptions& options, int fd);
  StatusOr<std::string> Call(const ControlMessage& request,
                             std::chrono::milliseconds wait);
  StatusOr<std::string> CallLocked(const ControlMessage& request,
                                   std::chrono::milliseconds wait);
  Status aborted() const;
  // The heartbeat thread: a PING whenever no call holds mutex_.
  void HeartbeatLoop();

  const ControlClientOptions options_;
  const int fd_;
  std::mutex mutex_;  // held for a whole call (request and answer)
  std::mutex heartbeat_mutex_;
  std::condition_variable heartbeat_wake_;
  bool heartbeat_stop_ = false;  // guarded by heartbeat_mutex_
  std::thread heartbeat_;
  std::atomic<bool> master_lost_{false};
  int barrier_count_ = 0;
  mutable std::mutex abort_mutex_;
  Status aborted_;  // guarded by abort_mutex_
};

// A fresh random job token (32 hex digits).
std::string GenerateJobToken();

}  // namespace control
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_CONTROL_CONTROL_CLIENT_H_
