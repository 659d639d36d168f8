#include "oneflow_lite/comm/control/rendezvous_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "oneflow_lite/comm/control/channel.h"
#include "oneflow_lite/comm/socket_util.h"

namespace oflite {
namespace comm {
namespace control {
namespace {

constexpr int kPollMilliseconds = 100;
constexpr std::chrono::milliseconds kMaxRequestWait{10 * 60 * 1000};
constexpr std::chrono::milliseconds kFrameTimeout{10000};
// How often a waiting request checks whether its own client went away.
constexpr std::chrono::milliseconds kDepartureCheck{100};

ControlMessage Response(const Status& status, std::string value = "") {
  ControlMessage response;
  response.type = ControlType::kResponse;
  response.status = static_cast<uint32_t>(status.code());
  response.message = status.ok() ? "" : status.message();
  response.value = std::move(value);
  return response;
}

// True when the client's socket was closed or reset (a client sends nothing
// while one of its requests is pending, so any input here is end-of-file).
bool PeerGone(int fd) {
  pollfd poll_fd{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&poll_fd, 1, 0) <= 0) return false;
  return (poll_fd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLIN)) != 0;
}

// Waits for input or the stop flag; true when readable.
bool WaitReadable(int fd, const std::atomic<bool>& stopping) {
  while (!stopping) {
    pollfd poll_fd{fd, POLLIN, 0};
    if (::poll(&poll_fd, 1, kPollMilliseconds) > 0) return true;
  }
  return false;
}

}  // namespace

RendezvousServer::RendezvousServer(const RendezvousOptions& options)
    : options_(options) {}

StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(
    const RendezvousOptions& options) {
  if (options.world_size < 1) {
    return InvalidArgumentError("rendezvous: world size ", options.world_size);
  }
  std::unique_ptr<RendezvousServer> server(new RendezvousServer(options));
  server->port_ = options.port;
  ASSIGN_OR_RETURN(server->listen_fd_, ListenTcp(options.host, &server->port_));
  server->accept_thread_ = std::thread([s = server.get()] { s->AcceptLoop(); });
  return server;
}

RendezvousServer::~RendezvousServer() {
  stopping_ = true;
  changed_.notify_all();
  if (accept_thread_.joinable()) accept_thread_.join();
  std::vector<std::thread> workers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    workers.swap(workers_);
  }
  changed_.notify_all();
  for (auto& worker : workers) worker.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

void RendezvousServer::AcceptLoop() {
  while (WaitReadable(listen_fd_, stopping_)) {
    auto fd = AcceptTcp(listen_fd_, DeadlineAfter(std::chrono::milliseconds(0)));
    if (!fd.ok()) continue;
    std::lock_guard<std::mutex> lock(mutex_);
    open_fds_.push_back(*fd);
    workers_.emplace_back([this, fd = *fd] { Serve(fd); });
  }
}

void RendezvousServer::Serve(int fd) {
  const std::string who = "an incoming control connection";
  auto join = ReceiveControl(fd, DeadlineAfter(options_.join_timeout), who);
  Status admitted;
  int rank = -1;
  if (!join.ok()) {
    admitted = join.status();
  } else if (join->type != ControlType::kJoin ||
             join->key != options_.job_token) {
    admitted = PermissionDeniedError(
        "control connection refused: it did not present this job's token");
  } else if (static_cast<int>(join->world_size) != options_.world_size ||
             join->rank >= join->world_size) {
    admitted = InvalidArgumentError("rank ", join->rank, " joined with world size ",
                                    join->world_size, "; the job has ",
                                    options_.world_size);
  } else {
    std::lock_guard<std::mutex> lock(mutex_);
    rank = static_cast<int>(join->rank);
    if (joined_.count(rank) != 0) {
      admitted = AlreadyExistsError("rank ", rank, " joined twice");
    } else {
      joined_.insert(rank);
      changed_.notify_all();
    }
  }
  if (join.ok()) {
    SendControl(fd, Response(admitted), DeadlineAfter(kFrameTimeout), who)
        .IgnoreError();
  }
  if (!admitted.ok()) {
    LOG(WARNING) << "rendezvous: " << admitted;
    CloseConnection(fd);
    return;
  }
  const std::string peer = "rank " + std::to_string(rank);
  Status lost;
  while (WaitReadable(fd, stopping_)) {
    auto request = ReceiveControl(fd, DeadlineAfter(kFrameTimeout), peer);
    if (!request.ok()) {
      lost = request.status();
      break;
    }
    ControlMessage response = Handle(fd, rank, *request);
    Status sent = SendControl(fd, response, DeadlineAfter(kFrameTimeout), peer);
    if (!sent.ok()) {
      lost = sent;
      break;
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    departed_[rank] = lost.ok() ? peer + " disconnected" : lost.message();
    changed_.notify_all();
  }
  CloseConnection(fd);
}

void RendezvousServer::CloseConnection(int fd) {
  std::lock_guard<std::mutex> lock(mutex_);
  open_fds_.erase(std::remove(open_fds_.begin(), open_fds_.end(), fd),
                  open_fds_.end());
  ::close(fd);
}

ControlMessage RendezvousServer::Handle(int fd, int rank, const ControlMessage& request) {
  switch (request.type) {
    case ControlType::kPut: {
      std::lock_guard<std::mutex> lock(mutex_);
      store_[request.key] = request.value;
      changed_.notify_all();
      return Response(Status::OK());
    }
    case ControlType::kGet:
      return HandleGet(fd, rank, request);
    case ControlType::kBarrier:
      return HandleBarrier(fd, rank, request);
    default:
      return Response(InvalidArgumentError("rank ", rank, " sent request type ",
                                           static_cast<int>(request.type),
                                           " after joining"));
  }
}

ControlMessage RendezvousServer::HandleGet(int fd, int rank, const ControlMessage& request) {
  const auto timeout =
      std::min(kMaxRequestWait, std::chrono::milliseconds(request.timeout_ms));
  const int expected = request.expected_rank == kNoRank
                           ? -1
                           : static_cast<int>(request.expected_rank);
  std::unique_lock<std::mutex> lock(mutex_);
  WaitWatching(&lock, fd, rank, timeout, [&] {
    return stopping_ || store_.count(request.key) != 0 ||
           (expected >= 0 && departed_.count(expected) != 0);
  });
  auto it = store_.find(request.key);
  if (it != store_.end()) return Response(Status::OK(), it->second);
  if (expected >= 0 && departed_.count(expected) != 0) {
    return Response(UnavailableError("key '", request.key, "' will never come: ",
                                     departed_[expected]));
  }
  if (stopping_) return Response(CancelledError("rendezvous server shut down"));
  std::string from = expected >= 0 ? " from rank " + std::to_string(expected) : "";
  return Response(DeadlineExceededError("key '", request.key, "'", from,
                                        " not published within ",
                                        request.timeout_ms, " ms"));
}

void RendezvousServer::WaitWatching(std::unique_lock<std::mutex>* lock, int fd,
                                    int rank, std::chrono::milliseconds timeout,
                                    const std::function<bool()>& done) {
  const Deadline deadline = DeadlineAfter(timeout);
  while (!done() && Clock::now() < deadline) {
    changed_.wait_until(*lock, std::min(deadline, Clock::now() + kDepartureCheck));
    if (departed_.count(rank) == 0 && PeerGone(fd)) {
      departed_[rank] = "rank " + std::to_string(rank) + " disconnected";
      changed_.notify_all();
      return;
    }
  }
}

std::string RendezvousServer::DescribeRanks(const std::set<int>& ranks) const {
  std::ostringstream text;
  text << (ranks.size() == 1 ? "rank " : "ranks ");
  bool first = true;
  for (int rank : ranks) {
    text << (first ? "" : ", ") << rank;
    first = false;
  }
  return text.str();
}

ControlMessage RendezvousServer::HandleBarrier(int fd, int rank,
                                               const ControlMessage& request) {
  const auto timeout =
      std::min(kMaxRequestWait, std::chrono::milliseconds(request.timeout_ms));
  std::unique_lock<std::mutex> lock(mutex_);
  std::set<int>& arrived = barriers_[request.key];
  arrived.insert(rank);
  changed_.notify_all();
  auto missing = [&] {
    std::set<int> ranks;
    for (int r = 0; r < options_.world_size; ++r) {
      if (arrived.count(r) == 0) ranks.insert(r);
    }
    return ranks;
  };
  auto departed_missing = [&] {
    for (int r : missing()) {
      if (departed_.count(r) != 0) return r;
    }
    return -1;
  };
  WaitWatching(&lock, fd, rank, timeout, [&] {
    return stopping_ || missing().empty() || departed_missing() >= 0;
  });
  if (missing().empty()) return Response(Status::OK());
  const int gone = departed_missing();
  if (gone >= 0) {
    return Response(UnavailableError("barrier '", request.key, "' failed: ",
                                     departed_[gone]));
  }
  if (stopping_) return Response(CancelledError("rendezvous server shut down"));
  return Response(DeadlineExceededError("barrier '", request.key,
                                        "' timed out after ", request.timeout_ms,
                                        " ms waiting for ",
                                        DescribeRanks(missing())));
}

Status RendezvousServer::WaitForAllJoined(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [&] {
    return static_cast<int>(joined_.size()) == options_.world_size;
  });
  if (static_cast<int>(joined_.size()) == options_.world_size) return Status::OK();
  std::set<int> missing;
  for (int r = 0; r < options_.world_size; ++r) {
    if (joined_.count(r) == 0) missing.insert(r);
  }
  return DeadlineExceededError(DescribeRanks(missing), " never joined the job within ",
                               timeout.count(), " ms");
}

}  // namespace control
}  // namespace comm
}  // namespace oflite
