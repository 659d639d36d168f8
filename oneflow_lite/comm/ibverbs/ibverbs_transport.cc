#include "oneflow_lite/comm/ibverbs/ibverbs_transport.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "oneflow_lite/comm/ibverbs/ibverbs_transport_impl.h"
#include "oneflow_lite/comm/spin_wait.h"
#include "oneflow_lite/comm/verbs_api/verbs_library.h"
#include "oneflow_lite/common/thread_name.h"

namespace oflite {
namespace comm {
namespace ibverbs {
namespace {

Status ValidateOptions(const TransportOptions& options,
                       const IbverbsOptions& ibverbs) {
  if (options.world_size < 1 || options.rank < 0 ||
      options.rank >= options.world_size) {
    return InvalidArgumentError("ibverbs: rank ", options.rank,
                                " outside world of ", options.world_size);
  }
  if (options.message_slot_size <= kSlotHeaderSize ||
      options.message_slot_size > (1u << 30) || options.message_slots < 1 ||
      options.message_slots > (1 << 20)) {
    return InvalidArgumentError(
        "ibverbs: message ring of ", options.message_slots, " slots of ",
        options.message_slot_size, " bytes is out of range (slots 1..2^20, "
        "slot size ", kSlotHeaderSize + 1, "..2^30)");
  }
  if (options.max_backlog_messages < 0 || ibverbs.queue_depth < 1 ||
      ibverbs.block_size < 1) {
    return InvalidArgumentError("ibverbs: queue depth, block size and "
                                "backlog must be positive");
  }
  if (ibverbs.ack_timeout > 31 || ibverbs.retry_count > 7 ||
      ibverbs.rnr_retry > 7 || ibverbs.min_rnr_timer > 31) {
    return InvalidArgumentError("ibverbs: ack_timeout (0..31), retry_count "
                                "(0..7), rnr_retry (0..7) or min_rnr_timer "
                                "(0..31) out of range");
  }
  return Status::OK();
}

}  // namespace

StatusOr<std::unique_ptr<Transport>> CreateIbverbsTransport(
    const TransportOptions& options, const IbverbsOptions& ibverbs_options) {
  ASSIGN_OR_RETURN(auto transport,
                   IbverbsTransport::Create(options, ibverbs_options));
  return std::unique_ptr<Transport>(std::move(transport));
}

IbverbsTransport::IbverbsTransport(const TransportOptions& options,
                                   const IbverbsOptions& ibverbs_options)
    : ibverbs_options_(ibverbs_options) {
  settings_.rank = options.rank;
  settings_.world_size = options.world_size;
  settings_.slot_size = options.message_slot_size;
  settings_.message_slots = options.message_slots;
  settings_.max_backlog_messages = options.max_backlog_messages;
  settings_.queue_depth = ibverbs_options.queue_depth;
  settings_.block_size = ibverbs_options.block_size;
  settings_.ack_timeout = ibverbs_options.ack_timeout;
  settings_.retry_count = ibverbs_options.retry_count;
  settings_.rnr_retry = ibverbs_options.rnr_retry;
  settings_.min_rnr_timer = ibverbs_options.min_rnr_timer;
  settings_.heartbeat_interval = ibverbs_options.heartbeat_interval;
  settings_.on_message = options.on_message;
  settings_.on_peer_error = options.on_peer_error;
}

StatusOr<std::unique_ptr<IbverbsTransport>> IbverbsTransport::Create(
    const TransportOptions& options, const IbverbsOptions& ibverbs_options) {
  RETURN_IF_ERROR(ValidateOptions(options, ibverbs_options));
  std::unique_ptr<IbverbsTransport> transport(
      new IbverbsTransport(options, ibverbs_options));
  RETURN_IF_ERROR(transport->Initialize());
  return transport;
}

Status IbverbsTransport::Initialize() {
  api_ = ibverbs_options_.api;
  if (api_ == nullptr) {
    verbs::VerbsLibraryOptions library;
    library.fork_safe = false;  // done below, for every implementation
    ASSIGN_OR_RETURN(api_, verbs::LoadVerbsLibrary(library));
  }
  if (ibverbs_options_.fork_safe) {
    if (int error = api_->fork_init(); error != 0) {
      return FailedPreconditionError(
          "ibverbs: ibv_fork_init failed (", std::strerror(error),
          "); it must run before any registration in this process");
    }
  }
  ASSIGN_OR_RETURN(device_,
                   VerbsDevice::Open(api_, ibverbs_options_.device));
  const ibv_device_attr& limits = device_->device_attr();
  const int receive_depth = 2 * settings_.message_slots + 4;
  if (settings_.queue_depth + 1 > limits.max_qp_wr ||
      receive_depth > limits.max_qp_wr) {
    return InvalidArgumentError(
        "ibverbs: queue depth ", settings_.queue_depth, " or ",
        settings_.message_slots, " message slots (", receive_depth,
        " receives) exceed max_qp_wr ", limits.max_qp_wr, " of ",
        device_->name());
  }
  const int peers = settings_.world_size - 1;
  const long long cqe =
      static_cast<long long>(peers) *
          (settings_.queue_depth + 1 + receive_depth) + 1;
  if (cqe > limits.max_cqe) {
    return ResourceExhaustedError("ibverbs: a completion queue of ", cqe,
                                  " entries exceeds max_cqe ", limits.max_cqe,
                                  " of ", device_->name(),
                                  "; lower --ib_queue_depth or the slots");
  }
  if (ibverbs_options_.event_driven && api_->create_comp_channel &&
      api_->req_notify_cq && api_->get_cq_event && api_->ack_cq_events) {
    channel_ = api_->create_comp_channel(device_->context());
    if (channel_ == nullptr) {
      return ResourceExhaustedError("ibverbs: create_comp_channel on ",
                                    device_->name(), " failed: ",
                                    std::strerror(errno));
    }
  }
  cq_ = api_->create_cq(device_->context(), static_cast<int>(cqe), nullptr,
                        channel_, 0);
  if (cq_ == nullptr) {
    return ResourceExhaustedError("ibverbs: create_cq(", cqe, ") on ",
                                  device_->name(), " failed: ",
                                  std::strerror(errno));
  }
  progress_ = std::thread([this] {
    NameThisThread("oflite-verbs");
    RunProgress();
  });
  LOG(INFO) << "ibverbs transport rank " << settings_.rank << " on "
            << device_->name() << " port " << int(device_->port()) << " ("
            << (device_->is_ethernet() ? "RoCE" : "InfiniBand")
            << ", LID " << device_->port_attr().lid << ", GID index "
            << device_->gid_index() << ", active MTU "
            << verbs::MtuBytes(device_->port_attr().active_mtu) << ", via "
            << api_->implementation << ")";
  return Status::OK();
}

IbverbsTransport::~IbverbsTransport() { Shutdown(); }

void IbverbsTransport::WaitUntil(const std::function<bool()>& condition,
                                 std::chrono::milliseconds timeout) {
  Deadline deadline = DeadlineAfter(timeout);
  while (!condition() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void IbverbsTransport::Shutdown() {
  std::vector<IbverbsConnection*> connections = Snapshot();
  if (progress_.joinable()) {
    Deferred deferred;
    for (IbverbsConnection* connection : connections) {
      connection->BeginShutdown(&deferred);
    }
    for (auto& call : deferred) call();
    WaitUntil(
        [&] {
          return std::all_of(connections.begin(), connections.end(),
                             [](IbverbsConnection* c) {
                               return c->GoodbyeSettled();
                             });
        },
        ibverbs_options_.shutdown_timeout);
    for (IbverbsConnection* connection : connections) {
      connection->EnterErrorState();
    }
    WaitUntil(
        [&] {
          return std::all_of(connections.begin(), connections.end(),
                             [](IbverbsConnection* c) { return c->Drained(); });
        },
        ibverbs_options_.shutdown_timeout);
    stop_ = true;
    progress_.join();
    Deferred rest;
    for (IbverbsConnection* connection : connections) {
      connection->CancelRemaining(&rest);
    }
    for (auto& call : rest) call();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    by_qp_num_.clear();
    connections_.clear();  // destroys the QPs before their CQ
  }
  if (cq_ != nullptr) {
    if (unacked_events_ > 0) api_->ack_cq_events(cq_, unacked_events_);
    int error = api_->destroy_cq(cq_);
    LOG_IF(WARNING, error != 0) << "ibverbs: destroy_cq: "
                                << std::strerror(error);
  }
  if (channel_ != nullptr) {
    int error = api_->destroy_comp_channel(channel_);
    LOG_IF(WARNING, error != 0) << "ibverbs: destroy_comp_channel: "
                                << std::strerror(error);
  }
}

void IbverbsTransport::WaitForCompletion(std::chrono::milliseconds timeout) {
  if (!armed_) {
    // Arm, and return to poll once more: a completion that landed before
    // arming raises no event and would otherwise wait for the timeout.
    if (api_->req_notify_cq(cq_, 0) == 0) {
      armed_ = true;
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return;
  }
  pollfd descriptor{channel_->fd, POLLIN, 0};
  if (::poll(&descriptor, 1, static_cast<int>(timeout.count())) != 1) return;
  ibv_cq* event_cq = nullptr;
  void* event_context = nullptr;
  if (api_->get_cq_event(channel_, &event_cq, &event_context) == 0) {
    armed_ = false;
    // Acked in batches (acking takes a lock in libibverbs).
    if (++unacked_events_ >= 64) {
      api_->ack_cq_events(cq_, unacked_events_);
      unacked_events_ = 0;
    }
  }
}

std::vector<IbverbsConnection*> IbverbsTransport::Snapshot() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<IbverbsConnection*> connections;
  for (auto& entry : connections_) connections.push_back(entry.second.get());
  return connections;
}

void IbverbsTransport::RunProgress() {
  constexpr int kBatch = 64;
  ibv_wc completions[kBatch];
  std::vector<IbverbsConnection*> connections;
  uint64_t seen_version = ~0ull;
  Clock::time_point last_tick = Clock::now();
  int idle_rounds = 0;
  while (!stop_.load(std::memory_order_acquire)) {
    if (seen_version != connections_version_.load()) {
      seen_version = connections_version_.load();
      connections = Snapshot();
    }
    int count = api_->poll_cq(cq_, kBatch, completions);
    Deferred deferred;
    if (count < 0) {
      Status error = InternalError("ibverbs: poll_cq on ", device_->name(),
                                   " failed (completion queue overrun?)");
      for (IbverbsConnection* connection : connections) {
        connection->Fail(error, &deferred);
      }
      count = 0;
    }
    std::set<IbverbsConnection*> touched;
    if (count > 0) {
      std::vector<IbverbsConnection*> targets(count, nullptr);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        for (int i = 0; i < count; ++i) {
          auto it = by_qp_num_.find(completions[i].qp_num);
          if (it != by_qp_num_.end()) targets[i] = it->second;
        }
      }
      for (int i = 0; i < count; ++i) {
        if (targets[i] == nullptr) continue;
        targets[i]->OnCompletion(completions[i], &deferred);
        touched.insert(targets[i]);
      }
    }
    for (auto& call : deferred) call();
    deferred.clear();
    for (IbverbsConnection* connection : touched) {
      connection->OnBatchEnd(&deferred);
    }
    Clock::time_point now = Clock::now();
    if (now - last_tick >= std::chrono::milliseconds(10)) {
      last_tick = now;
      for (IbverbsConnection* connection : connections) {
        connection->OnTick(now, &deferred);
      }
    }
    for (auto& call : deferred) call();
    if (count > 0) {
      idle_rounds = 0;
    } else if (++idle_rounds < ibverbs_options_.busy_poll_rounds && !HostOversubscribed()) {
      // Yields while the host has a CPU to spare; on an oversubscribed one
      // it goes straight to waiting (comm/spin_wait.h).
      std::this_thread::yield();
    } else if (channel_ != nullptr) {
      WaitForCompletion(std::chrono::milliseconds(10));
    } else {
      int shift = std::min(idle_rounds - ibverbs_options_.busy_poll_rounds, 6);
      std::this_thread::sleep_for(std::chrono::microseconds(10 << shift));
    }
  }
}

Status IbverbsTransport::CheckPeer(int peer_rank) const {
  if (peer_rank < 0 || peer_rank >= settings_.world_size ||
      peer_rank == settings_.rank) {
    return InvalidArgumentError("ibverbs: rank ", settings_.rank,
                                " has no peer rank ", peer_rank,
                                " (world of ", settings_.world_size, ")");
  }
  return Status::OK();
}

StatusOr<IbverbsConnection*> IbverbsTransport::GetOrCreate(int peer_rank) {
  RETURN_IF_ERROR(CheckPeer(peer_rank));
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = connections_.find(peer_rank);
  if (it != connections_.end()) return it->second.get();
  ASSIGN_OR_RETURN(auto connection,
                   IbverbsConnection::Create(device_, cq_, &settings_,
                                             peer_rank));
  IbverbsConnection* raw = connection.get();
  by_qp_num_[raw->qp_num()] = raw;
  connections_[peer_rank] = std::move(connection);
  connections_version_.fetch_add(1);
  return raw;
}

StatusOr<std::unique_ptr<MemoryRegion>> IbverbsTransport::RegisterMemory(
    void* data, size_t size, uint32_t access) {
  return device_->Register(data, size, access);
}

StatusOr<std::string> IbverbsTransport::LocalEndpoint(int peer_rank) {
  ASSIGN_OR_RETURN(IbverbsConnection * connection, GetOrCreate(peer_rank));
  return connection->local_endpoint();
}

Status IbverbsTransport::Connect(int peer_rank,
                                 const std::string& peer_endpoint,
                                 Deadline /*deadline: Connect never waits*/) {
  ASSIGN_OR_RETURN(IbverbsConnection * connection, GetOrCreate(peer_rank));
  return connection->Connect(peer_endpoint);
}

StatusOr<Connection*> IbverbsTransport::GetConnection(int peer_rank) {
  RETURN_IF_ERROR(CheckPeer(peer_rank));
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = connections_.find(peer_rank);
  if (it == connections_.end() || !it->second->connected()) {
    return FailedPreconditionError("ibverbs: rank ", settings_.rank,
                                   " is not connected to rank ", peer_rank);
  }
  return static_cast<Connection*>(it->second.get());
}

IbverbsConnection* IbverbsTransport::connection_for_test(int peer_rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = connections_.find(peer_rank);
  return it == connections_.end() ? nullptr : it->second.get();
}

}  // namespace ibverbs
}  // namespace comm
}  // namespace oflite
