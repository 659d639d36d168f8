#include "oneflow_lite/comm/control/rendezvous_server.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "oneflow_lite/comm/control/channel.h"
#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/common/thread_name.h"

namespace oflite {
namespace comm {
namespace control {
namespace {

constexpr int kPollMilliseconds = 100;
constexpr std::chrono::milliseconds kMaxRequestWait{10 * 60 * 1000};
constexpr std::chrono::milliseconds kFrameTimeout{10000};
// How often a waiting request checks whether its own client went away.
constexpr std::chrono::milliseconds kDepartureCheck{100};
// How long the destructor lets requests in progress send their answers.
constexpr std::chrono::milliseconds kShutdownDrain{2000};

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

// A connection that has not joined yet: owned by the front-door thread.
struct RendezvousServer::Pending {
  int fd = -1;
  std::string peer;  // "a.b.c.d:port"
  Clock::time_point deadline;
  uint8_t header[kControlHeaderSize];
  size_t header_read = 0;
  ControlType type = ControlType::kJoin;
  std::string payload;  // sized from the header, at most kMaxJoinPayload
  size_t payload_read = 0;
};

RendezvousServer::RendezvousServer(const RendezvousOptions& options)
    : options_(options) {}

StatusOr<std::unique_ptr<RendezvousServer>> RendezvousServer::Start(
    const RendezvousOptions& options) {
  if (options.world_size < 1) {
    return InvalidArgumentError("rendezvous: world size ", options.world_size);
  }
  if (options.max_pending_joins < 1) {
    return InvalidArgumentError("rendezvous: max_pending_joins ",
                                options.max_pending_joins);
  }
  std::unique_ptr<RendezvousServer> server(new RendezvousServer(options));
  server->port_ = options.port;
  ASSIGN_OR_RETURN(server->listen_fd_, ListenTcp(options.host, &server->port_));
  server->front_door_thread_ =
      std::thread([s = server.get()] {
        NameThisThread("oflite-rdzv");
        s->FrontDoorLoop();
      });
  return server;
}

RendezvousServer::~RendezvousServer() {
  stopping_ = true;
  changed_.notify_all();
  if (front_door_thread_.joinable()) front_door_thread_.join();
  std::vector<std::thread> threads;
  {
    // Requests being answered finish first (bounded): a rank waiting on a
    // key of a lost rank must read "will never come: <culprit>", not a
    // closed connection that would blame the master.
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, kShutdownDrain, [&] { return in_request_.empty(); });
    for (int fd : open_fds_) ::shutdown(fd, SHUT_RDWR);
    threads.swap(rank_threads_);
  }
  changed_.notify_all();
  for (auto& thread : threads) thread.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

RendezvousStats RendezvousServer::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void RendezvousServer::FrontDoorLoop() {
  Acceptor acceptor(listen_fd_);
  std::deque<Pending> pending;  // oldest first
  Clock::time_point paused_until{};
  std::vector<pollfd> fds;
  while (!stopping_) {
    const Clock::time_point now = Clock::now();
    fds.assign(1, pollfd{now >= paused_until ? listen_fd_ : -1, POLLIN, 0});
    for (const Pending& p : pending) fds.push_back(pollfd{p.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), kPollMilliseconds) < 0 && errno != EINTR) {
      LOG(ERROR) << "rendezvous: poll: " << strerror(errno);
      std::this_thread::sleep_for(kAcceptBackoff);
    }
    const Clock::time_point after = Clock::now();
    std::deque<Pending> still;
    for (size_t i = 0; i < pending.size(); ++i) {
      Pending& p = pending[i];
      if (fds[i + 1].revents != 0 && ContinueJoin(&p)) continue;
      if (after >= p.deadline) {
        CountThenClose(p.fd, &stats_.expired);
        continue;
      }
      still.push_back(std::move(p));
    }
    pending.swap(still);
    if (fds[0].revents != 0) AcceptNew(&acceptor, &pending, &paused_until);
    ExpireRefusedClaims();
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.pending = static_cast<int>(pending.size());
    stats_.shed = acceptor.shed();
  }
  for (const Pending& p : pending) ::close(p.fd);
}

void RendezvousServer::AcceptNew(Acceptor* acceptor, std::deque<Pending>* pending,
                                 Clock::time_point* paused_until) {
  // A bounded batch per round, so that joins in progress are served too.
  for (int i = 0; i < 2 * options_.max_pending_joins; ++i) {
    Pending p;
    const Acceptor::Result result = acceptor->Accept(&p.fd, &p.peer);
    if (result == Acceptor::Result::kEmpty) return;
    if (result == Acceptor::Result::kRetry) continue;
    if (result == Acceptor::Result::kBackOff) {
      *paused_until = Clock::now() + kAcceptBackoff;
      return;
    }
    p.deadline = DeadlineAfter(options_.join_timeout);
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.accepted;
    if (static_cast<int>(pending->size()) >= options_.max_pending_joins) {
      ::close(pending->front().fd);
      pending->pop_front();
      ++stats_.evicted;
    }
    pending->push_back(std::move(p));
  }
}

bool RendezvousServer::ContinueJoin(Pending* p) {
  auto refuse = [&](const std::string& why) {
    LOG_EVERY_N(WARNING, 100) << "rendezvous: refused the connection from "
                              << p->peer << ": " << why << " (one line per 100; "
                              << google::COUNTER << " so far)";
    CountThenClose(p->fd, &stats_.refused);
    return true;
  };
  while (true) {
    const bool in_header = p->header_read < kControlHeaderSize;
    char* into = in_header ? reinterpret_cast<char*>(p->header) + p->header_read
                           : &p->payload[0] + p->payload_read;
    const size_t want = in_header ? kControlHeaderSize - p->header_read
                                  : p->payload.size() - p->payload_read;
    if (want > 0) {
      const ssize_t got = ::recv(p->fd, into, want, MSG_DONTWAIT);
      if (got == 0) return refuse("closed before joining");
      if (got < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
        return refuse(strerror(errno));
      }
      (in_header ? p->header_read : p->payload_read) += got;
      if (static_cast<size_t>(got) < want) return false;
    }
    if (in_header) {
      uint32_t length = 0;
      Status valid = DecodeControlHeader(p->header, &p->type, &length);
      if (!valid.ok()) return refuse(valid.message());
      if (p->type != ControlType::kJoin || length > kMaxJoinPayload) {
        return refuse("its first frame was not a JOIN of at most " +
                      std::to_string(kMaxJoinPayload) + " bytes (type " +
                      std::to_string(static_cast<int>(p->type)) + ", " +
                      std::to_string(length) + " bytes)");
      }
      p->payload.assign(length, '\0');
      continue;
    }
    auto join = DecodeControlPayload(p->type, p->payload);
    if (!join.ok()) return refuse(join.status().message());
    FinishJoin(p, *join);
    return true;
  }
}

void RendezvousServer::FinishJoin(Pending* p, const ControlMessage& join) {
  int rank = -1;
  Status admitted = Admit(*p, join, &rank);
  if (admitted.ok()) return;  // the rank's thread owns the socket now
  // Best effort and nonblocking: a small answer into an empty send buffer.
  SendControl(p->fd, Response(admitted), DeadlineAfter(std::chrono::milliseconds(0)),
              p->peer)
      .IgnoreError();
  CountThenClose(p->fd, &stats_.refused);
}

void RendezvousServer::CountThenClose(int fd, int64_t* counter) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++*counter;
  }
  ::close(fd);  // after counting: a peer that sees the close sees the count
}

Status RendezvousServer::Admit(const Pending& p, const ControlMessage& join,
                               int* rank) {
  const bool in_world = join.rank < static_cast<uint32_t>(options_.world_size);
  if (join.key != options_.job_token) {
    const std::string what = "a control connection from " + p.peer +
                             " claiming rank " + std::to_string(join.rank) +
                             " was refused: wrong job token";
    std::lock_guard<std::mutex> lock(mutex_);
    const int claimed = static_cast<int>(join.rank);
    if (in_world && joined_.count(claimed) == 0 && departed_.count(claimed) == 0 &&
        refused_claims_.count(claimed) == 0) {
      LOG(WARNING) << "rendezvous: " << what;
      refused_claims_[claimed] = RefusedClaim{what, Clock::now()};
    }
    return PermissionDeniedError(what);
  }
  if (static_cast<int>(join.world_size) != options_.world_size || !in_world) {
    return InvalidArgumentError("rank ", join.rank, " joined with world size ",
                                join.world_size, "; the job has ",
                                options_.world_size);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  *rank = static_cast<int>(join.rank);
  if (joined_.count(*rank) != 0) {
    return AlreadyExistsError("rank ", *rank, " joined twice");
  }
  if (departed_.count(*rank) != 0) {
    return FailedPreconditionError("rank ", *rank, " joined too late: ",
                                   departed_[*rank]);
  }
  joined_.insert(*rank);
  last_heard_[*rank] = Clock::now();
  refused_claims_.erase(*rank);
  open_fds_.push_back(p.fd);
  rank_threads_.emplace_back([this, fd = p.fd, r = *rank] { ServeRank(fd, r); });
  changed_.notify_all();
  return Status::OK();
}

void RendezvousServer::ExpireRefusedClaims() {
  std::lock_guard<std::mutex> lock(mutex_);
  const Clock::time_point now = Clock::now();
  for (auto it = refused_claims_.begin(); it != refused_claims_.end();) {
    if (now - it->second.at < options_.refused_rank_grace) {
      ++it;
      continue;
    }
    const int rank = it->first;
    departed_[rank] =
        "rank " + std::to_string(rank) + " never joined: " + it->second.reason +
        ", and no rank " + std::to_string(rank) + " with the right token joined within " +
        std::to_string(options_.refused_rank_grace.count()) + " ms";
    LOG(ERROR) << "rendezvous: " << departed_[rank];
    it = refused_claims_.erase(it);
    changed_.notify_all();
  }
}

void RendezvousServer::ServeRank(int fd, int rank) {
  const std::string peer = "rank " + std::to_string(rank);
  Status lost = SendControl(fd, Response(Status::OK()), DeadlineAfter(kFrameTimeout), peer);
  while (lost.ok() && WaitReadable(fd, stopping_)) {
    auto request = ReceiveControl(fd, DeadlineAfter(kFrameTimeout), peer);
    if (!request.ok()) {
      lost = request.status();
      break;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      in_request_.insert(rank);
    }
    ControlMessage response = Handle(fd, rank, *request);
    lost = SendControl(fd, response, DeadlineAfter(kFrameTimeout), peer);
    std::lock_guard<std::mutex> lock(mutex_);
    in_request_.erase(rank);
    last_heard_[rank] = Clock::now();
    if (stopping_) changed_.notify_all();  // the destructor drains answers
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // The first reason stays: a rank already marked silent (frozen) whose
    // connection then closes, as the job ends, is still reported as silent
    // to the ranks whose waits read it afterwards.
    departed_.emplace(rank, lost.ok() ? peer + " disconnected" : lost.message());
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
    case ControlType::kPing:
      return Response(Status::OK());
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
    if (MarkSilentRanksLocked()) changed_.notify_all();
  }
}

bool RendezvousServer::MarkSilentRanksLocked() {
  if (options_.silent_rank_timeout.count() <= 0) return false;
  const Clock::time_point now = Clock::now();
  bool marked = false;
  for (const auto& [rank, heard] : last_heard_) {
    if (in_request_.count(rank) != 0 || departed_.count(rank) != 0) continue;
    const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - heard);
    if (silent < options_.silent_rank_timeout) continue;
    departed_[rank] = "rank " + std::to_string(rank) + " sent nothing for " +
                      std::to_string(silent.count()) +
                      " ms (no heartbeat: frozen or hung)";
    LOG(ERROR) << "rendezvous: " << departed_[rank];
    marked = true;
  }
  return marked;
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
  auto missing = [&] {
    std::set<int> ranks;
    for (int r = 0; r < options_.world_size; ++r) {
      if (joined_.count(r) == 0) ranks.insert(r);
    }
    return ranks;
  };
  auto lost = [&]() -> int {
    for (int r : missing()) {
      if (departed_.count(r) != 0) return r;
    }
    return -1;
  };
  changed_.wait_for(lock, timeout, [&] { return missing().empty() || lost() >= 0; });
  if (missing().empty()) return Status::OK();
  if (lost() >= 0) return UnavailableError(departed_[lost()]);
  return DeadlineExceededError(DescribeRanks(missing()), " never joined the job within ",
                               timeout.count(), " ms");
}

}  // namespace control
}  // namespace comm
}  // namespace oflite
