#include "oneflow_lite/comm/tcp/tcp_transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <random>
#include <thread>

#include "oneflow_lite/comm/caller_progress.h"
#include "oneflow_lite/comm/socket_util.h"
#include "oneflow_lite/comm/spin_wait.h"
#include "oneflow_lite/comm/tcp/tcp_transport_impl.h"
#include "oneflow_lite/comm/wire.h"
#include "oneflow_lite/common/thread_name.h"

namespace oflite {
namespace comm {
namespace tcp {
namespace {

constexpr uint32_t kEndpointVersion = 1;
constexpr int kTickMilliseconds = 50;

class TcpMemoryRegion : public MemoryRegion {
 public:
  TcpMemoryRegion(std::shared_ptr<RegionTable> table, void* data, size_t size,
                  uint32_t access)
      : MemoryRegion(data, size, access), table_(std::move(table)) {
    rkey_ = table_->Add(static_cast<uint8_t*>(data), size, access);
  }
  ~TcpMemoryRegion() override { table_->Remove(rkey_); }

  uint32_t local_key() const override { return rkey_; }
  RemoteKey remote_key() const override {
    RemoteKey key;
    key.address = reinterpret_cast<uintptr_t>(data());
    key.length = size();
    key.rkey = rkey_;
    return key;
  }

 private:
  std::shared_ptr<RegionTable> table_;
  uint32_t rkey_ = 0;
};

Status SocketError(const std::string& what) {
  return UnavailableError(what, ": ", strerror(errno));
}

void TuneSocket(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Status SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return SocketError("fcntl(O_NONBLOCK)");
  }
  return Status::OK();
}


}  // namespace

TcpTransportImpl::TcpTransportImpl(const TransportOptions& options,
                                   const TcpOptions& tcp)
    : options_(options), tcp_(tcp) {
  limits_.max_message_size = options.message_slot_size;
  std::random_device random;
  regions_ = std::make_shared<RegionTable>(random());
}

Status TcpTransportImpl::Start() {
  if (options_.world_size < 1 || options_.rank < 0 ||
      options_.rank >= options_.world_size) {
    return InvalidArgumentError("rank ", options_.rank, " outside world of ",
                                options_.world_size);
  }
  if (options_.message_slots < 1 || options_.message_slot_size < 1) {
    return InvalidArgumentError("message ring needs at least one slot of one byte");
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return SocketError("socket");
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  ASSIGN_OR_RETURN(sockaddr_in address,
                   ResolveIpv4(tcp_.listen_host, tcp_.listen_port));
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&address),
             sizeof(address)) < 0) {
    return SocketError("rank " + std::to_string(options_.rank) + ": bind " +
                       tcp_.listen_host + ":" + std::to_string(tcp_.listen_port));
  }
  if (::listen(listen_fd_, 128) < 0) return SocketError("listen");
  socklen_t length = sizeof(address);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&address), &length);
  listen_port_ = ntohs(address.sin_port);
  RETURN_IF_ERROR(SetNonBlocking(listen_fd_));
  if (tcp_.max_pending_handshakes < 1) {
    return InvalidArgumentError("max_pending_handshakes ", tcp_.max_pending_handshakes);
  }
  acceptor_ = std::make_unique<Acceptor>(listen_fd_);

  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) return SocketError("epoll/eventfd");
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.ptr = &listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &event);
  event.data.ptr = &wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &event);
  progress_thread_ = std::thread([this] {
    NameThisThread("oflite-tcp");
    ProgressLoop();
  });
  return Status::OK();
}

TcpTransportImpl::~TcpTransportImpl() {
  if (progress_thread_.joinable()) {
    {
      // Under the lock: the progress thread may free rejected connections
      // (ReapRejected) until it stops. Lock order: transport, connection.
      std::lock_guard<std::mutex> lock(mutex_);
      for (auto& connection : connections_) connection->SayGoodbye();
    }
    stopping_ = true;
    uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
    progress_thread_.join();
  }
  const Status closed = CancelledError("transport of rank ", options_.rank,
                                       " shut down");
  for (auto& connection : connections_) connection->Fail(closed);
  connections_.clear();
  for (int fd : {listen_fd_, epoll_fd_, wake_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

StatusOr<std::unique_ptr<MemoryRegion>> TcpTransportImpl::RegisterMemory(
    void* data, size_t size, uint32_t access) {
  if (data == nullptr && size > 0) {
    return InvalidArgumentError("register: null buffer of ", size, " bytes");
  }
  return std::unique_ptr<MemoryRegion>(
      new TcpMemoryRegion(regions_, data, size, access));
}

StatusOr<std::string> TcpTransportImpl::LocalEndpoint(int peer_rank) {
  if (peer_rank < 0 || peer_rank >= options_.world_size ||
      peer_rank == options_.rank) {
    return InvalidArgumentError("no endpoint for peer rank ", peer_rank);
  }
  std::string bytes;
  wire::AppendU32(&bytes, kEndpointVersion);
  wire::AppendU32(&bytes, static_cast<uint32_t>(options_.rank));
  wire::AppendU32(&bytes, static_cast<uint32_t>(listen_port_));
  wire::AppendBytes(&bytes, tcp_.listen_host);
  return bytes;
}

std::string TcpTransportImpl::HelloPayload() const {
  Hello hello;
  hello.rank = options_.rank;
  hello.world_size = options_.world_size;
  hello.message_slots = options_.message_slots;
  hello.message_slot_size = options_.message_slot_size;
  hello.job_token = tcp_.job_token;
  return EncodeHello(hello);
}

Status TcpTransportImpl::CheckPeerHello(const Hello& hello,
                                        int expected_rank) const {
  if (hello.job_token != tcp_.job_token) {
    return PermissionDeniedError("rank ", options_.rank,
                                 " refused a connection claiming rank ",
                                 hello.rank, ": wrong job token");
  }
  if (expected_rank >= 0 && static_cast<int>(hello.rank) != expected_rank) {
    return PermissionDeniedError("expected rank ", expected_rank,
                                 ", the peer says it is rank ", hello.rank);
  }
  if (static_cast<int>(hello.world_size) != options_.world_size ||
      static_cast<int>(hello.rank) == options_.rank) {
    return InvalidArgumentError("rank ", hello.rank, " has world size ",
                                hello.world_size, ", rank ", options_.rank,
                                " has ", options_.world_size);
  }
  if (static_cast<int>(hello.message_slots) != options_.message_slots ||
      hello.message_slot_size != options_.message_slot_size) {
    return InvalidArgumentError("rank ", hello.rank, " uses a message ring of ",
                                hello.message_slots, " x ",
                                hello.message_slot_size, " bytes; rank ",
                                options_.rank, " uses ", options_.message_slots,
                                " x ", options_.message_slot_size);
  }
  return Status::OK();
}

Status TcpTransportImpl::AcceptHello(TcpConnection* connection,
                                     const Hello& hello) {
  RETURN_IF_ERROR(CheckPeerHello(hello, -1));
  if (static_cast<int>(hello.rank) > options_.rank) {
    return InvalidArgumentError("rank ", hello.rank, " dialed rank ",
                                options_.rank, "; the lower rank dials");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = peers_.find(hello.rank);
  if (it != peers_.end() && it->second->state() != TcpConnection::State::kFailed) {
    return AlreadyExistsError("rank ", hello.rank, " is already connected");
  }
  peers_[hello.rank] = connection;
  return Status::OK();
}

void TcpTransportImpl::NotifyStateChange() {
  std::lock_guard<std::mutex> lock(mutex_);
  changed_.notify_all();
}

void TcpTransportImpl::SetWriteInterest(TcpConnection* connection,
                                        bool enabled) {
  epoll_event event{};
  event.events = EPOLLIN | (enabled ? EPOLLOUT : 0);
  event.data.ptr = connection;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, connection->fd(), &event);
}

void TcpTransportImpl::OnConnectionFailed(TcpConnection* connection,
                                          int peer_rank, const Status& status) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, connection->fd(), nullptr);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (peer_rank < 0) rejected_.push_back(connection);
    changed_.notify_all();
  }
  if (peer_rank < 0) {
    LOG_EVERY_N(WARNING, 100) << "rank " << options_.rank
                              << " dropped an incoming connection: " << status
                              << " (one line per 100; " << google::COUNTER
                              << " so far)";
    return;
  }
  if (options_.on_peer_error && !stopping_) {
    options_.on_peer_error(peer_rank, status);
  }
}

TcpConnection* TcpTransportImpl::AddConnection(int fd, int peer_rank,
                                               const std::string& address) {
  auto owned = std::make_unique<TcpConnection>(this, fd, peer_rank, address);
  TcpConnection* connection = owned.get();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    connections_.push_back(std::move(owned));
    if (peer_rank >= 0) peers_[peer_rank] = connection;
  }
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.ptr = connection;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event);
  return connection;
}

void TcpTransportImpl::AcceptAll() {
  // A bounded batch per event, so that handshakes in progress are served too.
  for (int i = 0; i < 2 * tcp_.max_pending_handshakes; ++i) {
    int fd = -1;
    std::string address;
    switch (acceptor_->Accept(&fd, &address)) {
      case Acceptor::Result::kEmpty:
        return;
      case Acceptor::Result::kRetry:
        continue;
      case Acceptor::Result::kBackOff:
        PauseAccepting(Clock::now());
        return;
      case Acceptor::Result::kAccepted:
        break;
    }
    const Clock::time_point now = Clock::now();
    PruneHandshakes(now, /*make_room=*/true);
    ReapRejected();  // the evicted one: no event of this batch refers to it
    unidentified_.push_back({AddConnection(fd, -1, address), now});
  }
}

void TcpTransportImpl::PauseAccepting(Clock::time_point now) {
  epoll_event event{};
  event.events = 0;
  event.data.ptr = &listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &event);
  accept_paused_ = true;
  accept_paused_until_ = now + kAcceptBackoff;
}

void TcpTransportImpl::ResumeAcceptingIfDue(Clock::time_point now) {
  if (!accept_paused_ || now < accept_paused_until_) return;
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.ptr = &listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &event);
  accept_paused_ = false;
}

void TcpTransportImpl::PruneHandshakes(Clock::time_point now, bool make_room) {
  std::vector<std::pair<TcpConnection*, Status>> doomed;
  std::deque<Unidentified> kept;
  for (const Unidentified& entry : unidentified_) {
    TcpConnection* connection = entry.connection;
    if (connection->state() != TcpConnection::State::kHandshake ||
        connection->peer_rank() >= 0) {
      continue;  // identified (now a peer) or failed (being reaped)
    }
    if (now - entry.accepted > tcp_.handshake_timeout) {
      doomed.push_back({connection, DeadlineExceededError(
          "no HELLO within ", tcp_.handshake_timeout.count(), " ms")});
      continue;
    }
    kept.push_back(entry);
  }
  while (make_room && !kept.empty() &&
         static_cast<int>(kept.size()) >= tcp_.max_pending_handshakes) {
    doomed.push_back({kept.front().connection, ResourceExhaustedError(
        "evicted: ", tcp_.max_pending_handshakes,
        " newer connections were waiting for their HELLO")});
    kept.pop_front();
  }
  unidentified_.swap(kept);
  for (auto& [connection, status] : doomed) connection->Fail(status);
}

void TcpTransportImpl::ReapRejected() {
  std::vector<std::unique_ptr<TcpConnection>> dead;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (rejected_.empty()) return;
    for (TcpConnection* rejected : rejected_) {
      for (auto& owned : connections_) {
        if (owned.get() == rejected) dead.push_back(std::move(owned));
      }
    }
    rejected_.clear();
    connections_.erase(std::remove(connections_.begin(), connections_.end(), nullptr),
                       connections_.end());
  }
  auto is_dead = [&](const Unidentified& entry) {
    for (auto& owned : dead) {
      if (owned.get() == entry.connection) return true;
    }
    return false;
  };
  unidentified_.erase(
      std::remove_if(unidentified_.begin(), unidentified_.end(), is_dead),
      unidentified_.end());
  // `dead` goes out of scope here: sockets closed, buffers freed.
}

bool TcpTransportImpl::Poll() {
  if (!tcp_.caller_progress || stopping_.load(std::memory_order_relaxed) ||
      ProgressingHere::Active(this)) {
    return false;
  }
  // A thread waits without polling (BeginBlockingWait): the progress
  // thread reads, as without caller progress.
  if (!gate_.EnterPoll(SteadyNanoseconds(Clock::now()))) return false;
  std::unique_lock<std::mutex> progress(progress_mutex_, std::try_to_lock);
  if (!progress.owns_lock()) return false;
  ProgressingHere here(this);
  epoll_event events[16];
  const int count = epoll_wait(epoll_fd_, events, 16, 0);
  if (count <= 0) return false;
  return HandleEvents(events, count, /*from_caller=*/true).connections;
}

void TcpTransportImpl::EndPolling() {
  if (!tcp_.caller_progress) return;
  // Dekker with NapWhilePolled: it either sees this reset and does not nap
  // (on), or is seen napping and woken.
  if (gate_.EndPolling()) WakeNap();
}

void TcpTransportImpl::BeginBlockingWait() {
  if (tcp_.caller_progress && gate_.BeginBlocking()) WakeNap();
}

void TcpTransportImpl::EndBlockingWait() {
  if (tcp_.caller_progress) gate_.EndBlocking();
}

void TcpTransportImpl::WakeNap() {
  uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

bool TcpTransportImpl::CallersPolling(Clock::time_point now) const {
  return gate_.NapLeftNs(SteadyNanoseconds(now)) > 0;
}

Clock::duration TcpTransportImpl::NapWhilePolled(Clock::time_point until) {
  gate_.SetNapping(true);
  int64_t planned = 0;
  while (!stopping_.load()) {
    const int64_t now_ns = SteadyNanoseconds(Clock::now());
    const int64_t nap_ns = std::min(gate_.NapLeftNs(now_ns), SteadyNanoseconds(until) - now_ns);
    if (nap_ns <= 0) break;
    // Only the wake-up eventfd: the sockets are the callers' meanwhile.
    pollfd wake{wake_fd_, POLLIN, 0};
    const timespec nap{static_cast<time_t>(nap_ns / 1000000000),
                       static_cast<long>(nap_ns % 1000000000)};  // NOLINT(runtime/int)
    planned += nap_ns;
    if (::ppoll(&wake, 1, &nap, nullptr) > 0) {
      uint64_t value;
      (void)!::read(wake_fd_, &value, sizeof(value));
      break;  // EndPolling, shutdown, or a state change to look at
    }
  }
  gate_.SetNapping(false);
  return std::chrono::nanoseconds(planned);
}

TcpTransportImpl::Handled TcpTransportImpl::HandleEvents(const epoll_event* events, int count,
                                                         bool from_caller) {
  Handled handled;
  for (int i = 0; i < count; ++i) {
    void* tag = events[i].data.ptr;
    if (tag == &listen_fd_) {
      handled.accept_ready = true;
    } else if (tag == &wake_fd_) {
      if (from_caller) continue;  // the progress thread's
      uint64_t value;
      (void)!::read(wake_fd_, &value, sizeof(value));
    } else {
      auto* connection = static_cast<TcpConnection*>(tag);
      // Handshakes touch the progress thread's own bookkeeping
      // (unidentified_, rejected connections freed by it).
      if (from_caller && connection->state() != TcpConnection::State::kReady) continue;
      handled.connections = true;
      if (events[i].events & EPOLLOUT) connection->OnWritable();
      if (events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        connection->OnReadable();
      }
    }
  }
  return handled;
}

void TcpTransportImpl::ProgressLoop() {
  if (tcp_.caller_progress) ::prctl(PR_SET_TIMERSLACK, kCallerProgressTimerSlackNs, 0, 0, 0);
  epoll_event events[64];
  Clock::time_point next_tick = Clock::now();
  // Time this thread was away from epoll_wait since the last tick, counted
  // once a stretch exceeds a grace: handling events, or not scheduled (a
  // loaded host, a stopped process). Peers are not blamed for it. Every
  // stretch since `mark` is measured once, up to the tick's own clock
  // reading (a stop between waking and the tick belongs to this tick), and
  // counts whole: a peer stopped with us needs its own first tick after
  // the stop to ping again. A nap while callers poll is expected time away.
  constexpr auto kGrace = std::chrono::milliseconds(100);
  Clock::duration stalled{0};
  Clock::time_point mark = Clock::now();
  auto account = [&](Clock::time_point now, Clock::duration expected) {
    const Clock::duration away = now - mark - expected;
    if (away > kGrace) stalled += away;
    mark = now;
  };
  // After events, poll without sleeping for up to busy_poll, yielding in
  // between (SpinWait: not at all while the host is oversubscribed,
  // comm/spin_wait.h); then block in epoll_wait.
  SpinWait spin(tcp_.busy_poll);
  bool polling = false;
  while (!stopping_) {
    const Clock::time_point wait_begin = Clock::now();
    account(wait_begin, Clock::duration::zero());
    int count = 0;
    if (CallersPolling(wait_begin)) {
      // Callers read the established connections; this thread wakes for
      // EndPolling, and at each tick looks at everything once (listener,
      // handshakes) below.
      const Clock::duration napped = NapWhilePolled(next_tick);
      const Clock::time_point woke = Clock::now();
      account(woke, napped);
      spin.Reset();  // busy-poll a while when the callers are done
      polling = true;
      if (woke >= next_tick) count = epoll_wait(epoll_fd_, events, 64, 0);
    } else {
      const int wait_ms = polling ? 0 : kTickMilliseconds;
      count = epoll_wait(epoll_fd_, events, 64, wait_ms);
      account(Clock::now(), std::chrono::milliseconds(wait_ms));
      if (count > 0) {
        spin.Reset();
        // Busy-poll for a quick next event, unless a payload trickles in
        // (its next bytes are about kLowWaterWake away).
        polling = trickling_.load(std::memory_order_relaxed) == 0;
      } else if (polling) {
        polling = spin.Idle();  // yields first; false: block next round
      }
    }
    // A caller's Poll may have handled these events meanwhile: handled
    // again, they find nothing to read (harmless).
    std::lock_guard<std::mutex> progress(progress_mutex_);
    ProgressingHere here(this);
    if (HandleEvents(events, std::max(count, 0), /*from_caller=*/false).accept_ready) {
      // After this batch's events: what AcceptAll evicts can be freed at once.
      ReapRejected();
      AcceptAll();
    }
    const Clock::time_point now = Clock::now();
    if (now >= next_tick) {
      account(now, Clock::duration::zero());
      next_tick = now + std::chrono::milliseconds(kTickMilliseconds);
      ResumeAcceptingIfDue(now);
      PruneHandshakes(now, /*make_room=*/false);
      std::vector<TcpConnection*> all;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto& connection : connections_) all.push_back(connection.get());
      }
      for (TcpConnection* connection : all) connection->OnTick(now, stalled);
      stalled = Clock::duration::zero();
    }
    // After the batch: a rejected connection may appear in later events of
    // the same batch, so it is freed only here.
    ReapRejected();
  }
}

StatusOr<int> TcpTransportImpl::Dial(const std::string& host, int port,
                                     int peer_rank, Deadline deadline) {
  ASSIGN_OR_RETURN(sockaddr_in address, ResolveIpv4(host, port));
  Status last = UnavailableError("rank ", peer_rank, " at ", host, ":", port,
                                 " is unreachable");
  while (Clock::now() < deadline) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return SocketError("socket");
    int result = ::connect(fd, reinterpret_cast<sockaddr*>(&address),
                           sizeof(address));
    if (result < 0 && errno == EINPROGRESS) {
      pollfd poll_fd{fd, POLLOUT, 0};
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - Clock::now());
      if (::poll(&poll_fd, 1, std::max<int64_t>(0, left.count())) == 1) {
        int error = 0;
        socklen_t length = sizeof(error);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
        result = error == 0 ? 0 : -1;
        errno = error;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (result == 0) {
      TuneSocket(fd);
      return fd;
    }
    last = UnavailableError("rank ", peer_rank, " at ", host, ":", port,
                            " is unreachable: ", strerror(errno));
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return DeadlineExceededError(last.message());
}

Status TcpTransportImpl::WaitForAccepted(int peer_rank, Deadline deadline) {
  TcpConnection* connection = nullptr;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_until(lock, deadline, [&] {
      auto it = peers_.find(peer_rank);
      return it != peers_.end() &&
             it->second->state() != TcpConnection::State::kHandshake;
    });
    auto it = peers_.find(peer_rank);
    if (it == peers_.end()) {
      return DeadlineExceededError("rank ", peer_rank, " never connected to rank ",
                                   options_.rank);
    }
    connection = it->second;
  }
  return connection->WaitReady(deadline);
}

Status TcpTransportImpl::Connect(int peer_rank, const std::string& peer_endpoint,
                                 Deadline deadline) {
  if (peer_rank < 0 || peer_rank >= options_.world_size ||
      peer_rank == options_.rank) {
    return InvalidArgumentError("cannot connect rank ", options_.rank,
                                " to rank ", peer_rank);
  }
  wire::Reader reader(peer_endpoint.data(), peer_endpoint.size());
  uint32_t version = 0, rank = 0, port = 0;
  std::string host;
  reader.ReadU32(&version);
  reader.ReadU32(&rank);
  reader.ReadU32(&port);
  reader.ReadBytes(&host, 255);
  if (!reader.ok() || reader.remaining() != 0 || version != kEndpointVersion ||
      static_cast<int>(rank) != peer_rank || port == 0 || port > 65535) {
    return InvalidArgumentError("malformed TCP endpoint for rank ", peer_rank);
  }
  if (peer_rank < options_.rank) return WaitForAccepted(peer_rank, deadline);
  ASSIGN_OR_RETURN(int fd, Dial(host, static_cast<int>(port), peer_rank, deadline));
  TcpConnection* connection = AddConnection(fd, peer_rank);
  RETURN_IF_ERROR(connection->StartHandshake(HelloPayload()));
  Status ready = connection->WaitReady(deadline);
  if (!ready.ok()) connection->Fail(ready);
  return ready;
}

StatusOr<Connection*> TcpTransportImpl::GetConnection(int peer_rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = peers_.find(peer_rank);
  if (it == peers_.end()) {
    return FailedPreconditionError("rank ", options_.rank,
                                   " is not connected to rank ", peer_rank);
  }
  return static_cast<Connection*>(it->second);
}

StatusOr<std::unique_ptr<Transport>> CreateTcpTransport(
    const TransportOptions& options, const TcpOptions& tcp_options) {
  auto transport = std::make_unique<TcpTransportImpl>(options, tcp_options);
  RETURN_IF_ERROR(transport->Start());
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace tcp
}  // namespace comm
}  // namespace oflite
