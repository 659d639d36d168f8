#include "oneflow_lite/comm/control/control_client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <random>
#include <thread>

#include "oneflow_lite/comm/control/channel.h"
#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/common/thread_name.h"

namespace oflite {
namespace comm {
namespace control {
namespace {

// Slack for the server's answer beyond the request's own timeout.
constexpr std::chrono::milliseconds kAnswerSlack{10000};
// Between attempts to join when the master closed a connection unanswered.
constexpr std::chrono::milliseconds kRejoinPause{100};

uint32_t ToMilliseconds(std::chrono::milliseconds timeout) {
  return static_cast<uint32_t>(
      std::clamp<int64_t>(timeout.count(), 0, 0x7FFFFFFF));
}

}  // namespace

std::string GenerateJobToken() {
  std::random_device random;
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (int i = 0; i < 32; ++i) token.push_back(kHex[random() % 16]);
  return token;
}

ControlClient::ControlClient(const ControlClientOptions& options, int fd)
    : options_(options), fd_(fd) {}

ControlClient::~ControlClient() {
  {
    std::lock_guard<std::mutex> lock(heartbeat_mutex_);
    heartbeat_stop_ = true;
  }
  heartbeat_wake_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  ::close(fd_);
}

void ControlClient::HeartbeatLoop() {
  ControlMessage ping;
  ping.type = ControlType::kPing;
  std::unique_lock<std::mutex> wait_lock(heartbeat_mutex_);
  while (!heartbeat_wake_.wait_for(wait_lock, options_.heartbeat_interval,
                                   [this] { return heartbeat_stop_; })) {
    // A call in progress keeps the master's view of this rank fresh.
    std::unique_lock<std::mutex> call(mutex_, std::try_to_lock);
    if (!call.owns_lock() || !aborted().ok()) continue;
    // A failure here shows again on the next call, which reports it.
    (void)CallLocked(ping, std::chrono::milliseconds(0));
  }
}

StatusOr<std::unique_ptr<ControlClient>> ControlClient::Connect(
    const ControlClientOptions& options) {
  std::string host;
  int port = 0;
  RETURN_IF_ERROR(ParseHostPort(options.master, &host, &port));
  const Deadline deadline = DeadlineAfter(options.connect_timeout);
  const std::string master = "the master (rank 0)";
  while (true) {
    ASSIGN_OR_RETURN(int fd, DialTcp(host, port, deadline, master));
    std::unique_ptr<ControlClient> client(new ControlClient(options, fd));
    ControlMessage join;
    join.type = ControlType::kJoin;
    join.rank = static_cast<uint32_t>(options.rank);
    join.world_size = static_cast<uint32_t>(options.world_size);
    join.key = options.job_token;
    const Status sent = SendControl(fd, join, deadline, master);
    StatusOr<ControlMessage> answer =
        sent.ok() ? ReceiveControl(fd, deadline, master) : StatusOr<ControlMessage>(sent);
    // Closed without an answer: the master shed this connection (a flood, or
    // its descriptor limit). Dial again while the deadline allows.
    if (answer.status().code() == StatusCode::kUnavailable &&
        Clock::now() + kRejoinPause < deadline) {
      std::this_thread::sleep_for(kRejoinPause);
      continue;
    }
    RETURN_IF_ERROR(answer.status());
    if (answer->type != ControlType::kResponse) {
      return DataLossError(master, " answered JOIN with type ",
                           static_cast<int>(answer->type));
    }
    if (answer->status != 0) {
      return Status(static_cast<StatusCode>(std::min<uint32_t>(answer->status, 15)),
                    "rank " + std::to_string(options.rank) +
                        " was refused by the master: " + answer->message);
    }
    if (options.heartbeat_interval.count() > 0) {
      ControlClient* self = client.get();
      client->heartbeat_ = std::thread([self] {
        NameThisThread("oflite-beat");
        self->HeartbeatLoop();
      });
    }
    return client;
  }
}

void ControlClient::Abort(const Status& reason) {
  {
    std::lock_guard<std::mutex> lock(abort_mutex_);
    if (!aborted_.ok()) return;
    aborted_ = reason.ok() ? AbortedError("rank ", options_.rank, ": control plane aborted")
                           : reason;
  }
  ::shutdown(fd_, SHUT_RDWR);  // wakes a call blocked on the socket
}

Status ControlClient::aborted() const {
  std::lock_guard<std::mutex> lock(abort_mutex_);
  return aborted_;
}

StatusOr<std::string> ControlClient::Call(const ControlMessage& request,
                                          std::chrono::milliseconds wait) {
  std::lock_guard<std::mutex> lock(mutex_);
  RETURN_IF_ERROR(aborted());
  StatusOr<std::string> answer = CallLocked(request, wait);
  if (!answer.ok()) {
    Status abort = aborted();  // the failure may be the abort's shutdown
    if (!abort.ok()) return abort;
  }
  return answer;
}

StatusOr<std::string> ControlClient::CallLocked(const ControlMessage& request,
                                                std::chrono::milliseconds wait) {
  const std::string master = "the master (rank 0)";
  const Deadline deadline = DeadlineAfter(wait + kAnswerSlack);
  Status sent = SendControl(fd_, request, deadline, master);
  StatusOr<ControlMessage> received =
      sent.ok() ? ReceiveControl(fd_, deadline, master) : StatusOr<ControlMessage>(sent);
  if (!received.ok()) {
    // A deadline is the master being slow; anything else is the link gone.
    if (received.status().code() != StatusCode::kDeadlineExceeded && aborted().ok()) {
      master_lost_ = true;
    }
    return received.status();
  }
  ControlMessage answer = std::move(*received);
  if (answer.type != ControlType::kResponse) {
    return DataLossError(master, " sent an unexpected message");
  }
  if (answer.status != 0) {
    const uint32_t code = answer.status <= 15 ? answer.status : 2;
    return Status(static_cast<StatusCode>(code), answer.message);
  }
  return std::move(answer.value);
}

Status ControlClient::Put(const std::string& key, const std::string& value) {
  ControlMessage request;
  request.type = ControlType::kPut;
  request.key = key;
  request.value = value;
  return Call(request, std::chrono::milliseconds(0)).status();
}

StatusOr<std::string> ControlClient::Get(const std::string& key,
                                         std::chrono::milliseconds timeout,
                                         int publisher_rank) {
  ControlMessage request;
  request.type = ControlType::kGet;
  request.key = key;
  request.timeout_ms = ToMilliseconds(timeout);
  request.expected_rank =
      publisher_rank < 0 ? kNoRank : static_cast<uint32_t>(publisher_rank);
  return Call(request, timeout);
}

Status ControlClient::Barrier(const std::string& name,
                              std::chrono::milliseconds timeout) {
  ControlMessage request;
  request.type = ControlType::kBarrier;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    request.key = name + "#" + std::to_string(barrier_count_++);
  }
  request.timeout_ms = ToMilliseconds(timeout);
  return Call(request, timeout).status();
}

}  // namespace control
}  // namespace comm
}  // namespace oflite
