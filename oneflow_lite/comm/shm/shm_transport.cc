#include "oneflow_lite/comm/shm/shm_transport.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <random>
#include <thread>

#include "oneflow_lite/comm/caller_progress.h"
#include "oneflow_lite/comm/shm/shm_transport_impl.h"
#include "oneflow_lite/comm/spin_wait.h"
#include "oneflow_lite/common/thread_name.h"

namespace oflite {
namespace comm {
namespace shm {
namespace {

constexpr int kMaxSleepMs = 100;  // bounds how late a credit timeout is seen
constexpr auto kHandshakeTimeout = std::chrono::milliseconds(2000);

class ShmRegion : public MemoryRegion {
 public:
  // `memfd`: the memfd the region lies in (kept mapped and open until the
  // entry is gone), else null.
  ShmRegion(void* data, size_t size, uint32_t access, std::shared_ptr<LocalRegionTable> table,
            uint32_t slot, uint32_t rkey, std::shared_ptr<SharedMapping> memfd)
      : MemoryRegion(data, size, access),
        table_(std::move(table)),
        slot_(slot),
        rkey_(rkey),
        memfd_(std::move(memfd)) {}
  ~ShmRegion() override { table_->Remove(slot_); }

  uint32_t local_key() const override { return rkey_; }
  RemoteKey remote_key() const override {
    return {reinterpret_cast<uint64_t>(data()), size(), rkey_};
  }

 private:
  const std::shared_ptr<LocalRegionTable> table_;
  const uint32_t slot_;
  const uint32_t rkey_;
  const std::shared_ptr<SharedMapping> memfd_;
};

// AllocateShareable's memory: a memfd, known to the transport's block
// registry while this object lives.
class ShmBlock : public SharedBlock {
 public:
  ShmBlock(std::shared_ptr<SharedMapping> memfd, size_t size,
           std::shared_ptr<ShmTransportImpl::Blocks> blocks)
      : memfd_(std::move(memfd)), size_(size), blocks_(std::move(blocks)) {}
  ~ShmBlock() override { blocks_->Remove(memfd_.get()); }
  uint8_t* data() const override { return memfd_->data(); }
  size_t size() const override { return size_; }

 private:
  const std::shared_ptr<SharedMapping> memfd_;
  const size_t size_;
  const std::shared_ptr<ShmTransportImpl::Blocks> blocks_;
};

void CloseAll(const std::vector<int>& fds) {
  for (int fd : fds) ::close(fd);
}

// Each region from AllocateRegistered keeps its memfd's descriptor open (a
// peer takes its own copy with pidfd_getfd), and bounce streams allocate
// one each: raise the soft limit on descriptors to the hard one, once per
// process, rather than fail a large plan at the distribution's default of
// 1024.
void RaiseDescriptorLimit() {
  static const bool raised = [] {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return false;
    limit.rlim_cur = limit.rlim_max;
    return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
  }();
  (void)raised;
}

}  // namespace

ShmTransportImpl::ShmTransportImpl(const TransportOptions& options, const ShmOptions& shm)
    : options_(options), shm_(shm) {}

Status ShmTransportImpl::Start() {
  if (options_.message_slots <= 0 || options_.message_slot_size <= kSlotHeaderSize) {
    return InvalidArgumentError("shm rings need message_slots > 0 and message_slot_size > ",
                                kSlotHeaderSize);
  }
  RaiseDescriptorLimit();
  ASSIGN_OR_RETURN(regions_,
                   LocalRegionTable::Create(shm_.region_table_capacity, shm_.remove_wait));
  ASSIGN_OR_RETURN(listen_fd_, ListenAbstract(&socket_name_));
  std::random_device random;
  nonce_ = (uint64_t{random()} << 32) | random();
  doorbell_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (doorbell_fd_ < 0 || epoll_fd_ < 0) {
    return UnavailableError("shm transport of rank ", options_.rank, ": ", std::strerror(errno));
  }
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.ptr = nullptr;  // the doorbell
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, doorbell_fd_, &event) != 0) {
    return UnavailableError("shm transport: epoll_ctl: ", std::strerror(errno));
  }
  progress_thread_ = std::thread([this] {
    NameThisThread("oflite-shm");
    ProgressLoop();
  });
  return Status::OK();
}

ShmTransportImpl::~ShmTransportImpl() {
  stopping_.store(true);
  if (doorbell_fd_ >= 0) ::eventfd_write(doorbell_fd_, 1);
  if (progress_thread_.joinable()) progress_thread_.join();
  const Status closed = CancelledError("shm transport of rank ", options_.rank, " destroyed");
  for (ShmConnection* connection : Snapshot()) {
    connection->Fail(closed.WithContext("rank " + std::to_string(connection->peer_rank())),
                     /*report=*/false);
  }
  {
    std::lock_guard<std::mutex> progress(progress_mutex_);
    RunOps();  // completes whatever is left with the sticky Cancelled
  }
  connections_.clear();
  for (auto& entry : arrivals_) {
    ::close(entry.second.fd);
    CloseAll(entry.second.fds);
  }
  for (int fd : {listen_fd_, doorbell_fd_, epoll_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

StatusOr<std::unique_ptr<MemoryRegion>> ShmTransportImpl::RegisterMemory(void* data, size_t size,
                                                                         uint32_t access) {
  return RegisterMemoryWithKey(data, size, access, regions_->NewKey());
}

StatusOr<std::unique_ptr<MemoryRegion>> ShmTransportImpl::RegisterMemoryWithKey(void* data,
                                                                                size_t size,
                                                                                uint32_t access,
                                                                                uint32_t rkey) {
  // A region inside a block of AllocateShareable: peers may map its memfd.
  std::shared_ptr<SharedMapping> memfd = blocks_->Find(data, size);
  RegionMemfd where;
  if (memfd != nullptr) {
    where.fd = memfd->fd();
    where.offset = static_cast<uint8_t*>(data) - memfd->data();
    where.inode = memfd->inode();
  }
  ASSIGN_OR_RETURN(uint32_t slot, regions_->Insert(rkey, data, size, access, where));
  return std::unique_ptr<MemoryRegion>(
      new ShmRegion(data, size, access, regions_, slot, rkey, std::move(memfd)));
}

StatusOr<std::unique_ptr<SharedBlock>> ShmTransportImpl::AllocateShareable(size_t size) {
  const size_t page = 4096;
  const size_t mapped = std::max(page, (size + page - 1) / page * page);
  ASSIGN_OR_RETURN(std::unique_ptr<SharedMapping> memory,
                   SharedMapping::Create("oflite-shm-registered", mapped));
  std::shared_ptr<SharedMapping> memfd(std::move(memory));
  blocks_->Add(memfd);
  return std::unique_ptr<SharedBlock>(new ShmBlock(memfd, size, blocks_));
}

void ShmTransportImpl::Blocks::Add(const std::shared_ptr<SharedMapping>& memfd) {
  std::lock_guard<std::mutex> lock(mutex_);
  by_address_[reinterpret_cast<uintptr_t>(memfd->data())] = memfd;
}

void ShmTransportImpl::Blocks::Remove(const SharedMapping* memfd) {
  std::lock_guard<std::mutex> lock(mutex_);
  by_address_.erase(reinterpret_cast<uintptr_t>(memfd->data()));
}

std::shared_ptr<SharedMapping> ShmTransportImpl::Blocks::Find(const void* data, size_t size) {
  const auto start = reinterpret_cast<uintptr_t>(data);
  std::lock_guard<std::mutex> lock(mutex_);
  auto after = by_address_.upper_bound(start);
  if (after == by_address_.begin()) return nullptr;
  std::shared_ptr<SharedMapping> memfd = std::prev(after)->second.lock();
  if (memfd == nullptr) return nullptr;
  const auto base = reinterpret_cast<uintptr_t>(memfd->data());
  if (start + size > base + memfd->size()) return nullptr;
  return memfd;
}

StatusOr<std::string> ShmTransportImpl::LocalEndpoint(int peer_rank) {
  if (peer_rank < 0 || peer_rank >= options_.world_size || peer_rank == options_.rank) {
    return InvalidArgumentError("no shm endpoint for rank ", peer_rank, " (this is rank ",
                                options_.rank, " of ", options_.world_size, ")");
  }
  Endpoint endpoint;
  endpoint.rank = options_.rank;
  endpoint.pid = static_cast<uint64_t>(::getpid());
  endpoint.nonce = nonce_;
  endpoint.socket_name = socket_name_;
  return EncodeEndpoint(endpoint);
}

std::string ShmTransportImpl::PeerName(int peer_rank) const {
  return "rank " + std::to_string(peer_rank);
}

Status ShmTransportImpl::Connect(int peer_rank, const std::string& peer_endpoint,
                                 Deadline deadline) {
  RETURN_IF_ERROR(LocalEndpoint(peer_rank).status());
  StatusOr<Endpoint> endpoint = DecodeEndpoint(peer_endpoint);
  if (!endpoint.ok())
    return endpoint.status().WithContext("shm endpoint of rank " + std::to_string(peer_rank));
  if (endpoint->rank != static_cast<uint32_t>(peer_rank)) {
    return InvalidArgumentError("shm endpoint for rank ", peer_rank, " claims rank ",
                                endpoint->rank);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (connections_.count(peer_rank)) {
      return AlreadyExistsError("rank ", options_.rank, " is already connected to rank ",
                                peer_rank);
    }
  }
  StatusOr<ConnectionSetup> setup =
      options_.rank < peer_rank ? Dial(*endpoint, deadline) : Accept(*endpoint, deadline);
  if (!setup.ok()) return setup.status();
  return AddConnection(std::move(*setup));
}

StatusOr<ConnectionSetup> ShmTransportImpl::Dial(const Endpoint& peer, Deadline deadline) {
  const int peer_rank = static_cast<int>(peer.rank);
  const std::string name = PeerName(peer_rank);
  ASSIGN_OR_RETURN(int fd, DialAbstract(peer.socket_name, deadline, name));
  ConnectionSetup setup;
  setup.peer_rank = peer_rank;
  setup.side = 0;
  setup.socket_fd = fd;
  std::vector<int> fds;
  auto fail = [&](const Status& status) {
    ::close(fd);
    CloseAll(fds);
    return status.WithContext("connecting rank " + std::to_string(options_.rank) + " to " + name +
                              " over shm");
  };
  StatusOr<pid_t> pid = PeerPid(fd);
  if (!pid.ok()) return fail(pid.status());
  if (static_cast<uint64_t>(*pid) != peer.pid) {
    return fail(PermissionDeniedError("the listener is pid ", *pid, ", not ", peer.pid));
  }
  setup.peer_pid = *pid;
  const uint32_t slots = options_.message_slots;
  const uint32_t slot_size = options_.message_slot_size;
  auto segment = SharedMapping::Create("oflite-shm-rings", SegmentSize(slots, slot_size));
  if (!segment.ok()) return fail(segment.status());
  auto* header = reinterpret_cast<SegmentHeader*>((*segment)->data());
  header->magic = kSegmentMagic;
  header->version = kShmVersion;
  header->slots = slots;
  header->slot_size = slot_size;
  Hello hello{static_cast<uint32_t>(options_.rank),
              static_cast<uint32_t>(options_.world_size),
              slots,
              slot_size,
              nonce_,
              peer.nonce};
  Status sent = SendRecord(fd, EncodeHello(hello),
                           {(*segment)->fd(), doorbell_fd_, regions_->mapping()->fd()}, name);
  if (!sent.ok()) return fail(sent);
  (*segment)->CloseFd();
  std::string bytes;
  Status received = ReceiveRecord(fd, deadline, &bytes, &fds, name);
  if (!received.ok()) return fail(received);
  StatusOr<HelloAck> ack = DecodeHelloAck(bytes);
  if (!ack.ok()) return fail(ack.status());
  if (!ack->error.empty()) return fail(PermissionDeniedError(name, " refused: ", ack->error));
  if (ack->rank != peer.rank || fds.size() != 2) {
    return fail(PermissionDeniedError(name, " answered as rank ", ack->rank, " with ", fds.size(),
                                      " descriptors"));
  }
  setup.peer_doorbell_fd = fds[0];
  const int table_fd = fds[1];
  fds.clear();
  auto table_mapping = SharedMapping::Adopt(table_fd, kTableHeaderBytes, name);
  if (!table_mapping.ok()) {
    ::close(setup.peer_doorbell_fd);
    return fail(table_mapping.status());
  }
  auto table = PeerRegionTable::Adopt(std::move(*table_mapping), peer_rank);
  if (!table.ok()) {
    ::close(setup.peer_doorbell_fd);
    return fail(table.status());
  }
  setup.segment = std::move(*segment);
  setup.peer_table = std::move(*table);
  setup.pair_id = nonce_ * 31 + peer.nonce;
  return setup;
}

StatusOr<ConnectionSetup> ShmTransportImpl::Accept(const Endpoint& peer, Deadline deadline) {
  const int peer_rank = static_cast<int>(peer.rank);
  std::lock_guard<std::mutex> lock(accept_mutex_);
  while (arrivals_.count(peer_rank) == 0) {
    if (Clock::now() >= deadline) {
      return DeadlineExceededError("rank ", peer_rank, " did not dial the shm listener of rank ",
                                   options_.rank, " in time");
    }
    Status received = ReceiveOneArrival(deadline);
    if (!received.ok())
      LOG(WARNING) << "shm listener of rank " << options_.rank << ": " << received;
  }
  Arrival arrival = std::move(arrivals_[peer_rank]);
  arrivals_.erase(peer_rank);
  return FinishAccept(&arrival, peer);
}

Status ShmTransportImpl::ReceiveOneArrival(Deadline deadline) {
  pollfd ready{listen_fd_, POLLIN, 0};
  if (::poll(&ready, 1, 20) <= 0) return Status::OK();
  const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return Status::OK();
  Arrival arrival;
  arrival.fd = fd;
  std::string bytes;
  const Deadline bound = std::min(deadline, Clock::now() + kHandshakeTimeout);
  Status received = ReceiveRecord(fd, bound, &bytes, &arrival.fds, "an unidentified process");
  StatusOr<Hello> hello = received.ok() ? DecodeHello(bytes) : StatusOr<Hello>(received);
  if (!hello.ok() || hello->rank >= static_cast<uint32_t>(options_.world_size)) {
    ::close(fd);
    CloseAll(arrival.fds);
    return hello.ok() ? PermissionDeniedError("HELLO from rank ", hello->rank, " of a world of ",
                                              options_.world_size)
                      : hello.status();
  }
  arrival.hello = *hello;
  auto previous = arrivals_.find(static_cast<int>(hello->rank));
  if (previous != arrivals_.end()) {
    ::close(previous->second.fd);
    CloseAll(previous->second.fds);
  }
  arrivals_[static_cast<int>(hello->rank)] = std::move(arrival);
  return Status::OK();
}

StatusOr<ConnectionSetup> ShmTransportImpl::FinishAccept(Arrival* arrival, const Endpoint& peer) {
  const int peer_rank = static_cast<int>(peer.rank);
  const std::string name = PeerName(peer_rank);
  const Hello& hello = arrival->hello;
  auto refuse = [&](const std::string& why) {
    SendRecord(arrival->fd, EncodeHelloAck({static_cast<uint32_t>(options_.rank), why}), {}, name)
        .IgnoreError();
    ::close(arrival->fd);
    CloseAll(arrival->fds);
    return PermissionDeniedError("shm connection from ", name, " to rank ", options_.rank,
                                 " refused: ", why);
  };
  StatusOr<pid_t> pid = PeerPid(arrival->fd);
  if (!pid.ok() || static_cast<uint64_t>(*pid) != peer.pid) {
    return refuse("the dialing process is not the pid its endpoint announced");
  }
  if (hello.dialer_nonce != peer.nonce || hello.acceptor_nonce != nonce_) {
    return refuse("HELLO nonces do not match the published endpoints (another job?)");
  }
  if (hello.world_size != static_cast<uint32_t>(options_.world_size) ||
      hello.slots != static_cast<uint32_t>(options_.message_slots) ||
      hello.slot_size != static_cast<uint32_t>(options_.message_slot_size)) {
    return refuse("world size or ring geometry differs (" + std::to_string(hello.world_size) +
                  " ranks, " + std::to_string(hello.slots) + " x " +
                  std::to_string(hello.slot_size) + " bytes)");
  }
  if (arrival->fds.size() != 3) return refuse("HELLO without its three descriptors");
  const std::vector<int> fds = arrival->fds;
  arrival->fds.clear();
  auto segment = SharedMapping::Adopt(fds[0], SegmentSize(hello.slots, hello.slot_size), name);
  auto table_mapping = SharedMapping::Adopt(fds[2], kTableHeaderBytes, name);
  arrival->fds = {fds[1]};
  if (!segment.ok()) return refuse(segment.status().message());
  if (!table_mapping.ok()) return refuse(table_mapping.status().message());
  const auto* header = reinterpret_cast<const SegmentHeader*>((*segment)->data());
  if (header->magic != kSegmentMagic || header->version != kShmVersion ||
      header->slots != hello.slots || header->slot_size != hello.slot_size) {
    return refuse("malformed ring segment");
  }
  auto table = PeerRegionTable::Adopt(std::move(*table_mapping), peer_rank);
  if (!table.ok()) return refuse(table.status().message());
  Status sent = SendRecord(arrival->fd, EncodeHelloAck({static_cast<uint32_t>(options_.rank), ""}),
                           {doorbell_fd_, regions_->mapping()->fd()}, name);
  if (!sent.ok()) {
    ::close(arrival->fd);
    CloseAll(arrival->fds);
    return sent;
  }
  (*segment)->CloseFd();
  ConnectionSetup setup;
  setup.peer_rank = peer_rank;
  setup.side = 1;
  setup.peer_pid = *pid;
  setup.socket_fd = arrival->fd;
  setup.peer_doorbell_fd = fds[1];
  setup.pair_id = hello.dialer_nonce * 31 + nonce_;
  setup.segment = std::move(*segment);
  setup.peer_table = std::move(*table);
  return setup;
}

Status ShmTransportImpl::AddConnection(ConnectionSetup setup) {
  const int peer_rank = setup.peer_rank;
  auto connection = std::make_unique<ShmConnection>(this, std::move(setup));
  epoll_event event{};
  event.events = EPOLLIN | EPOLLRDHUP;
  event.data.ptr = connection.get();
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, connection->socket_fd(), &event) != 0) {
    return UnavailableError("shm connection to rank ", peer_rank,
                            ": epoll_ctl: ", std::strerror(errno));
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    connections_[peer_rank] = std::move(connection);
    connections_version_.fetch_add(1);
  }
  // A progress thread asleep since before this connection raised no
  // sleeping word in its segment: peers would not ring it until its sleep
  // times out (kMaxSleepMs). Wake it to take the connection in.
  Wake();
  return Status::OK();
}

StatusOr<Connection*> ShmTransportImpl::GetConnection(int peer_rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = connections_.find(peer_rank);
  if (found == connections_.end()) {
    return FailedPreconditionError("rank ", options_.rank, " is not connected to rank ", peer_rank,
                                   " over shm");
  }
  return static_cast<Connection*>(found->second.get());
}

void ShmTransportImpl::Enqueue(OneSidedOp op) {
  {
    std::lock_guard<std::mutex> lock(ops_mutex_);
    ops_.push_back(std::move(op));
    ops_queued_.store(ops_.size(), std::memory_order_seq_cst);
  }
  Wake();
}

void ShmTransportImpl::Wake() {
  if (sleeping_.load(std::memory_order_seq_cst)) ::eventfd_write(doorbell_fd_, 1);
}

void ShmTransportImpl::ReportPeerError(int peer_rank, const Status& status) {
  if (options_.on_peer_error && !stopping_.load()) options_.on_peer_error(peer_rank, status);
}

std::vector<ShmConnection*> ShmTransportImpl::Snapshot() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<ShmConnection*> connections;
  for (auto& entry : connections_) connections.push_back(entry.second.get());
  return connections;
}

bool ShmTransportImpl::RunOps() {
  if (ops_queued_.load(std::memory_order_acquire) == 0) return false;
  std::deque<OneSidedOp> ops;
  {
    std::lock_guard<std::mutex> lock(ops_mutex_);
    ops.swap(ops_);
    ops_queued_.store(0, std::memory_order_relaxed);
  }
  for (OneSidedOp& op : ops) {
    const Status status = op.connection->RunOp(op);
    op.done(status);
    op.connection->OpDone();
  }
  return !ops.empty();
}

void ShmTransportImpl::RefreshPolledLocked() {
  const uint64_t version = connections_version_.load();
  if (version == polled_version_) return;
  polled_version_ = version;
  polled_ = Snapshot();
}

bool ShmTransportImpl::PollOnceLocked(Clock::time_point now) {
  ProgressingHere here(this);
  RefreshPolledLocked();
  bool worked = RunOps();
  for (ShmConnection* connection : polled_) {
    worked |= connection->PollInbound();
    worked |= connection->PollOutbound(now);
  }
  return worked;
}

bool ShmTransportImpl::Poll() {
  // Not from inside a handler or callback: this thread holds the mutex.
  if (!shm_.caller_progress || stopping_.load(std::memory_order_relaxed) ||
      ProgressingHere::Active(this)) {
    return false;
  }
  const Clock::time_point now = Clock::now();
  // A thread waits without polling (BeginBlockingWait): the progress
  // thread delivers, as without caller progress.
  if (!gate_.EnterPoll(SteadyNanoseconds(now))) return false;
  std::unique_lock<std::mutex> progress(progress_mutex_, std::try_to_lock);
  if (!progress.owns_lock()) return false;
  return PollOnceLocked(now);
}

void ShmTransportImpl::EndPolling() {
  if (gate_.EndPolling()) ::eventfd_write(doorbell_fd_, 1);
}

void ShmTransportImpl::BeginBlockingWait() {
  if (shm_.caller_progress && gate_.BeginBlocking()) ::eventfd_write(doorbell_fd_, 1);
}

void ShmTransportImpl::EndBlockingWait() {
  if (shm_.caller_progress) gate_.EndBlocking();
}

bool ShmTransportImpl::CallersPolling(Clock::time_point now) const {
  return gate_.NapLeftNs(SteadyNanoseconds(now)) > 0;
}

void ShmTransportImpl::ProgressLoop() {
  ::prctl(PR_SET_TIMERSLACK, kCallerProgressTimerSlackNs, 0, 0, 0);
  Clock::time_point last_events = Clock::now();
  // Between polls that found nothing it yields (so a thread of ours or the
  // peer's can run), for at most `spin`, and not at all while the host is
  // oversubscribed (comm/spin_wait.h): polling would then take the CPU from
  // whoever must produce our next event.
  SpinWait spin(shm_.spin);
  while (!stopping_.load()) {
    Clock::time_point now = Clock::now();
    if (CallersPolling(now)) {
      NapWhilePolled();
      last_events = Clock::now();
      spin.Reset();
      continue;
    }
    bool worked;
    {
      std::lock_guard<std::mutex> progress(progress_mutex_);
      worked = PollOnceLocked(now);
    }
    if (worked) {
      spin.Reset();
      // Busy: still look at the sockets now and then (a peer may be gone).
      if (now - last_events > std::chrono::milliseconds(5)) {
        HandleEvents(0);
        last_events = now;
      }
      continue;
    }
    if (spin.Idle()) continue;
    SleepUntilWoken();
    last_events = Clock::now();
    spin.Reset();
  }
}

void ShmTransportImpl::NapWhilePolled() {
  // Dekker with EndPolling and BeginBlockingWait: either they see the nap
  // and ring the doorbell, or this thread sees the reset stamp or the
  // blocking waiter and does not nap.
  gate_.SetNapping(true);
  while (!stopping_.load()) {
    const int64_t nap_ns = gate_.NapLeftNs(SteadyNanoseconds(Clock::now()));
    if (nap_ns <= 0) break;
    pollfd ready{epoll_fd_, POLLIN, 0};
    const timespec nap{0, static_cast<long>(nap_ns)};  // NOLINT(runtime/int)
    if (::ppoll(&ready, 1, &nap, nullptr) > 0) HandleEvents(0);
  }
  gate_.SetNapping(false);
}

void ShmTransportImpl::SleepUntilWoken() {
  bool pending;
  {
    std::lock_guard<std::mutex> progress(progress_mutex_);
    sleeping_.store(true, std::memory_order_seq_cst);
    for (ShmConnection* connection : polled_) connection->SetSleeping(true);
    pending = ops_queued_.load(std::memory_order_seq_cst) != 0;
    for (ShmConnection* connection : polled_) {
      pending |= connection->HasInbound() || connection->HasOutboundWork();
    }
  }
  // A caller's Poll meanwhile may drain what made `pending`; it then only
  // costs one pass.
  HandleEvents(pending || stopping_.load() ? 0 : kMaxSleepMs);
  std::lock_guard<std::mutex> progress(progress_mutex_);
  for (ShmConnection* connection : polled_) connection->SetSleeping(false);
  sleeping_.store(false, std::memory_order_seq_cst);
}

void ShmTransportImpl::HandleEvents(int timeout_ms) {
  epoll_event events[16];
  const int count = ::epoll_wait(epoll_fd_, events, 16, timeout_ms);
  for (int i = 0; i < count; ++i) {
    auto* connection = static_cast<ShmConnection*>(events[i].data.ptr);
    if (connection == nullptr) {
      eventfd_t value;
      ::eventfd_read(doorbell_fd_, &value);
      continue;
    }
    // Nothing travels on the socket after the handshake: any event means
    // the peer closed it or its process ended. Deliver what it published.
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, connection->socket_fd(), nullptr);
    {
      std::lock_guard<std::mutex> progress(progress_mutex_);
      ProgressingHere here(this);
      connection->PollInbound();
    }
    connection->Fail(UnavailableError("rank ", connection->peer_rank(),
                                      " closed its shm connection (its process exited, was "
                                      "killed or destroyed its transport)"));
  }
}

StatusOr<std::unique_ptr<ShmTransport>> CreateShmTransport(const TransportOptions& options,
                                                           const ShmOptions& shm_options) {
  auto transport = std::make_unique<ShmTransportImpl>(options, shm_options);
  RETURN_IF_ERROR(transport->Start());
  return std::unique_ptr<ShmTransport>(std::move(transport));
}

}  // namespace shm
}  // namespace comm
}  // namespace oflite
