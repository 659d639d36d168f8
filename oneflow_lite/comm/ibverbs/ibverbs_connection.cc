#include "oneflow_lite/comm/ibverbs/ibverbs_connection.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

namespace oflite {
namespace comm {
namespace ibverbs {
namespace {

constexpr uint64_t kReceiveTag = 1ull << 63;

const char* OpcodeWords(ibv_wr_opcode opcode) {
  switch (opcode) {
    case IBV_WR_RDMA_READ: return "RDMA READ";
    case IBV_WR_RDMA_WRITE: return "RDMA WRITE";
    case IBV_WR_RDMA_WRITE_WITH_IMM: return "RDMA WRITE_WITH_IMM";
    default: return "SEND";
  }
}

const char* Hint(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_REM_ACCESS_ERR:
      return ": the peer rejected the remote key or range (unknown, "
             "deregistered, or without remote access)";
    case IBV_WC_RETRY_EXC_ERR:
      return ": the peer is unreachable (process dead, or an addressing / "
             "GID index / MTU mismatch; see docs/rdma.md)";
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return ": the peer had no receive posted";
    case IBV_WC_LOC_PROT_ERR:
      return ": local memory is not registered with this device";
    default:
      return "";
  }
}

uint32_t RandomPsn() {
  std::random_device device;
  return device() & 0xffffff;
}

}  // namespace

IbverbsConnection::IbverbsConnection(std::shared_ptr<VerbsDevice> device,
                                     ibv_cq* cq,
                                     const ConnectionSettings* settings,
                                     int peer_rank)
    : device_(std::move(device)),
      api_(device_->api()),
      cq_(cq),
      settings_(*settings),
      peer_rank_(peer_rank),
      receive_depth_(2 * settings->message_slots + 4) {}

StatusOr<std::unique_ptr<IbverbsConnection>> IbverbsConnection::Create(
    std::shared_ptr<VerbsDevice> device, ibv_cq* cq,
    const ConnectionSettings* settings, int peer_rank) {
  std::unique_ptr<IbverbsConnection> connection(
      new IbverbsConnection(std::move(device), cq, settings, peer_rank));
  RETURN_IF_ERROR(connection->Initialize());
  return connection;
}

std::string IbverbsConnection::Name() const {
  return status_internal::StrCat("ibverbs connection from rank ",
                                 settings_.rank, " to rank ", peer_rank_);
}

Status IbverbsConnection::Initialize() {
  psn_ = RandomPsn();
  ibv_qp_init_attr init{};
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = settings_.queue_depth + 1;  // + the goodbye
  init.cap.max_recv_wr = receive_depth_;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  qp_ = api_.create_qp(device_->pd(), &init);
  if (qp_ == nullptr) {
    return ResourceExhaustedError(
        Name(), ": create_qp on ", device_->name(), " failed (",
        std::strerror(errno), "; send depth ", init.cap.max_send_wr,
        ", receive depth ", init.cap.max_recv_wr, ", device max_qp_wr ",
        device_->device_attr().max_qp_wr, ")");
  }
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = device_->port();
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                         IBV_ACCESS_REMOTE_READ;
  if (int error = api_.modify_qp(qp_, &attr,
                                 IBV_QP_STATE | IBV_QP_PKEY_INDEX |
                                     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
      error != 0) {
    return InternalError(Name(), ": modify_qp to INIT failed: ",
                         std::strerror(error));
  }
  const size_t ring_bytes = settings_.slot_size * settings_.message_slots;
  send_ring_.reset(new uint8_t[ring_bytes]());
  receive_ring_.reset(new uint8_t[ring_bytes]());
  ASSIGN_OR_RETURN(send_ring_mr_,
                   device_->RegisterRaw(send_ring_.get(), ring_bytes,
                                        IBV_ACCESS_LOCAL_WRITE));
  ASSIGN_OR_RETURN(receive_ring_mr_,
                   device_->RegisterRaw(
                       receive_ring_.get(), ring_bytes,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  RETURN_IF_ERROR(PostReceives(receive_depth_));

  Endpoint endpoint;
  endpoint.rank = settings_.rank;
  endpoint.world_size = settings_.world_size;
  endpoint.qp_num = qp_->qp_num;
  endpoint.psn = psn_;
  endpoint.lid = device_->port_attr().lid;
  endpoint.link_layer = device_->port_attr().link_layer;
  endpoint.active_mtu = device_->port_attr().active_mtu;
  if (device_->gid_index() >= 0) {
    std::memcpy(endpoint.gid, device_->gid().raw, sizeof(endpoint.gid));
    endpoint.has_gid = 1;
  }
  endpoint.max_message_size = device_->port_attr().max_msg_sz;
  endpoint.message_slots = settings_.message_slots;
  endpoint.slot_size = static_cast<uint32_t>(settings_.slot_size);
  endpoint.ring.address = reinterpret_cast<uint64_t>(receive_ring_.get());
  endpoint.ring.length = ring_bytes;
  endpoint.ring.rkey = receive_ring_mr_->rkey;
  local_endpoint_ = endpoint.Encode();
  return Status::OK();
}

IbverbsConnection::~IbverbsConnection() {
  if (qp_ != nullptr) {
    int error = api_.destroy_qp(qp_);
    LOG_IF(WARNING, error != 0) << Name() << ": destroy_qp: "
                                << std::strerror(error);
  }
  if (send_ring_mr_ != nullptr) device_->DeregisterRaw(send_ring_mr_);
  if (receive_ring_mr_ != nullptr) device_->DeregisterRaw(receive_ring_mr_);
}

Status IbverbsConnection::PostReceives(int count) {
  for (int i = 0; i < count; ++i) {
    ibv_recv_wr wr{};
    wr.wr_id = kReceiveTag;
    wr.num_sge = 0;  // WRITE_WITH_IMM lands in the ring, not in the receive
    ibv_recv_wr* bad = nullptr;
    if (int error = api_.post_recv(qp_, &wr, &bad); error != 0) {
      return InternalError(Name(), ": post_recv failed: ",
                           std::strerror(error));
    }
  }
  return Status::OK();
}

Status IbverbsConnection::Connect(const std::string& peer_endpoint) {
  auto decoded = Endpoint::Decode(peer_endpoint);
  if (!decoded.ok()) {
    return decoded.status().WithContext(Name() + ": endpoint of rank " +
                                        std::to_string(peer_rank_));
  }
  const Endpoint& remote = *decoded;
  const ibv_port_attr& port = device_->port_attr();
  if (static_cast<int>(remote.rank) != peer_rank_ ||
      static_cast<int>(remote.world_size) != settings_.world_size) {
    return InvalidArgumentError(Name(), ": endpoint is from rank ",
                                remote.rank, " of ", remote.world_size,
                                ", expected rank ", peer_rank_, " of ",
                                settings_.world_size);
  }
  if (remote.message_slots != static_cast<uint32_t>(settings_.message_slots) ||
      remote.slot_size != settings_.slot_size ||
      remote.ring.length != settings_.slot_size * settings_.message_slots) {
    return InvalidArgumentError(
        Name(), ": ring geometry mismatch (rank ", peer_rank_, " has ",
        remote.message_slots, " x ", remote.slot_size, " bytes, this rank ",
        settings_.message_slots, " x ", settings_.slot_size, ")");
  }
  if (remote.link_layer != port.link_layer) {
    return InvalidArgumentError(Name(), ": link layers differ (rank ",
                                peer_rank_, " ",
                                int(remote.link_layer), ", this rank ",
                                int(port.link_layer),
                                "; 1 = InfiniBand, 2 = Ethernet)");
  }
  const bool global = device_->gid_index() >= 0;
  if (global && !remote.has_gid) {
    return InvalidArgumentError(
        Name(), ": this rank addresses peers by GID (index ",
        device_->gid_index(), ") but rank ", peer_rank_,
        " has none; give every rank the same --ib_gid_index");
  }
  ibv_mtu mtu = std::min(port.active_mtu, static_cast<ibv_mtu>(remote.active_mtu));
  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  rtr.path_mtu = mtu;
  rtr.dest_qp_num = remote.qp_num;
  rtr.rq_psn = remote.psn;
  rtr.max_dest_rd_atomic = static_cast<uint8_t>(
      std::min(16, std::max(1, device_->device_attr().max_qp_rd_atom)));
  rtr.min_rnr_timer = settings_.min_rnr_timer;
  rtr.ah_attr.port_num = device_->port();
  rtr.ah_attr.dlid = remote.lid;
  if (global) {
    rtr.ah_attr.is_global = 1;
    std::memcpy(rtr.ah_attr.grh.dgid.raw, remote.gid, sizeof(remote.gid));
    rtr.ah_attr.grh.sgid_index = static_cast<uint8_t>(device_->gid_index());
    rtr.ah_attr.grh.hop_limit = 64;
  }
  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  rts.timeout = settings_.ack_timeout;
  rts.retry_cnt = settings_.retry_count;
  rts.rnr_retry = settings_.rnr_retry;
  rts.sq_psn = psn_;
  rts.max_rd_atomic = static_cast<uint8_t>(
      std::min(16, std::max(1, device_->device_attr().max_qp_init_rd_atom)));

  std::lock_guard<std::mutex> lock(mutex_);
  if (connected_) return AlreadyExistsError(Name(), " is already connected");
  if (!sticky_.ok()) return sticky_;
  int error = api_.modify_qp(qp_, &rtr,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                 IBV_QP_MAX_DEST_RD_ATOMIC |
                                 IBV_QP_MIN_RNR_TIMER);
  if (error != 0) {
    return InternalError(Name(), ": modify_qp to RTR failed: ",
                         std::strerror(error), " (path MTU ",
                         verbs::MtuBytes(mtu), ", ",
                         global ? "GID index " + std::to_string(
                                                     device_->gid_index())
                                : "LID " + std::to_string(remote.lid),
                         ", remote QPN ", remote.qp_num, ")");
  }
  error = api_.modify_qp(qp_, &rts,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                             IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                             IBV_QP_MAX_QP_RD_ATOMIC);
  if (error != 0) {
    return InternalError(Name(), ": modify_qp to RTS failed: ",
                         std::strerror(error));
  }
  path_mtu_ = mtu;
  block_size_ = std::max<size_t>(
      1, std::min<size_t>({settings_.block_size, port.max_msg_sz,
                           remote.max_message_size}));
  remote_ring_ = remote.ring;
  connected_ = true;
  last_probe_ = Clock::now();
  VLOG(1) << Name() << " connected: QPN " << qp_->qp_num << " -> "
          << remote.qp_num << ", MTU " << verbs::MtuBytes(mtu)
          << ", block " << block_size_;
  return Status::OK();
}

bool IbverbsConnection::connected() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return connected_;
}

ibv_mtu IbverbsConnection::path_mtu() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return path_mtu_;
}

size_t IbverbsConnection::block_size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return block_size_;
}

size_t IbverbsConnection::max_message_size() const {
  return settings_.slot_size - kSlotHeaderSize;
}

Status IbverbsConnection::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sticky_;
}

Status IbverbsConnection::PostRead(const MemoryRegion& local,
                                   size_t local_offset,
                                   const RemoteKey& remote,
                                   size_t remote_offset, size_t length,
                                   Completion done) {
  if (!(local.access() & kAccessLocalWrite)) {
    return InvalidArgumentError(Name(), ": READ into a region registered "
                                        "without kAccessLocalWrite");
  }
  return PostTransfer(IBV_WR_RDMA_READ, local, local_offset, remote,
                      remote_offset, length, std::move(done));
}

Status IbverbsConnection::PostWrite(const MemoryRegion& local,
                                    size_t local_offset,
                                    const RemoteKey& remote,
                                    size_t remote_offset, size_t length,
                                    Completion done) {
  return PostTransfer(IBV_WR_RDMA_WRITE, local, local_offset, remote,
                      remote_offset, length, std::move(done));
}

Status IbverbsConnection::PostTransfer(ibv_wr_opcode opcode,
                                       const MemoryRegion& local,
                                       size_t local_offset,
                                       const RemoteKey& remote,
                                       size_t remote_offset, size_t length,
                                       Completion done) {
  RETURN_IF_ERROR(CheckTransferBounds(peer_rank_, local, local_offset, remote,
                                      remote_offset, length));
  const auto* region = dynamic_cast<const VerbsMemoryRegion*>(&local);
  if (region == nullptr || region->device() != device_.get()) {
    return InvalidArgumentError(Name(), ": the local region was not "
                                        "registered with this transport");
  }
  Deferred deferred;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!sticky_.ok()) return sticky_;
    if (!connected_) return FailedPreconditionError(Name(), " is not connected");
    auto operation = std::make_shared<Operation>();
    operation->done = std::move(done);
    operation->id = next_operation_id_++;
    size_t blocks = length == 0 ? 1 : (length + block_size_ - 1) / block_size_;
    operation->remaining = blocks;
    incomplete_.insert(operation->id);
    for (size_t block = 0; block < blocks; ++block) {
      size_t offset = block * block_size_;
      SendWork work;
      work.kind = WorkKind::kOperation;
      work.opcode = opcode;
      work.local_address =
          reinterpret_cast<uint64_t>(local.data()) + local_offset + offset;
      work.length = static_cast<uint32_t>(
          std::min(block_size_, length - std::min(length, offset)));
      work.lkey = local.local_key();
      work.remote_address = remote.address + remote_offset + offset;
      work.rkey = remote.rkey;
      work.operation = operation;
      pending_.push_back(std::move(work));
    }
    PumpLocked(&deferred);
  }
  for (auto& call : deferred) call();
  return Status::OK();
}

Status IbverbsConnection::SendMessage(const void* data, size_t size) {
  if (size > max_message_size()) {
    return InvalidArgumentError("message of ", size, " bytes to rank ",
                                peer_rank_, " exceeds the maximum of ",
                                max_message_size());
  }
  if (size > 0 && data == nullptr) {
    return InvalidArgumentError("message to rank ", peer_rank_,
                                " has no data");
  }
  Deferred deferred;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!sticky_.ok()) return sticky_;
    if (!connected_) return FailedPreconditionError(Name(), " is not connected");
    const uint64_t in_ring = messages_sent_ - peer_consumed_;
    if (backlog_.empty() && in_ring < static_cast<uint64_t>(settings_.message_slots)) {
      PlaceMessageLocked(data, size);
      PumpLocked(&deferred);
    } else if (backlog_.size() >=
               static_cast<size_t>(settings_.max_backlog_messages)) {
      return ResourceExhaustedError("backlog of messages to rank ", peer_rank_,
                                    " is full (", backlog_.size(),
                                    " waiting for credits)");
    } else {
      backlog_.emplace_back(static_cast<const char*>(data), size);
    }
  }
  for (auto& call : deferred) call();
  return Status::OK();
}

Status IbverbsConnection::SendMessages(std::vector<std::string> messages) {
  RETURN_IF_ERROR(CheckBatchSizes(messages));
  Deferred deferred;
  Status status;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!sticky_.ok()) return sticky_;
    if (!connected_) return FailedPreconditionError(Name(), " is not connected");
    for (std::string& message : messages) {
      const uint64_t in_ring = messages_sent_ - peer_consumed_;
      if (backlog_.empty() && in_ring < static_cast<uint64_t>(settings_.message_slots)) {
        PlaceMessageLocked(message.data(), message.size());
      } else if (backlog_.size() >= static_cast<size_t>(settings_.max_backlog_messages)) {
        status = ResourceExhaustedError("backlog of messages to rank ", peer_rank_,
                                        " is full (", backlog_.size(), " waiting for credits)");
        break;
      } else {
        backlog_.push_back(std::move(message));
      }
    }
    PumpLocked(&deferred);
  }
  for (auto& call : deferred) call();
  return status;
}

void IbverbsConnection::PlaceMessageLocked(const void* data, size_t size) {
  const uint64_t slot_index = messages_sent_ % settings_.message_slots;
  uint8_t* slot = send_ring_.get() + slot_index * settings_.slot_size;
  EncodeSlotHeader(static_cast<uint32_t>(size), slot);
  if (size > 0) std::memcpy(slot + kSlotHeaderSize, data, size);
  SendWork work;
  work.kind = WorkKind::kMessage;
  work.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  work.local_address = reinterpret_cast<uint64_t>(slot);
  work.length = static_cast<uint32_t>(kSlotHeaderSize + size);
  work.lkey = send_ring_mr_->lkey;
  work.remote_address = remote_ring_.address + slot_index * settings_.slot_size;
  work.rkey = remote_ring_.rkey;
  ++messages_sent_;
  pending_.push_back(std::move(work));
}

void IbverbsConnection::DrainBacklogLocked() {
  while (!backlog_.empty() &&
         messages_sent_ - peer_consumed_ <
             static_cast<uint64_t>(settings_.message_slots)) {
    PlaceMessageLocked(backlog_.front().data(), backlog_.front().size());
    backlog_.pop_front();
  }
}

void IbverbsConnection::QueueCreditUpdateLocked() {
  SendWork work;
  work.kind = WorkKind::kCredit;
  work.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;  // zero-length: no key checked
  credit_update_queued_ = true;
  pending_.push_back(work);
}

void IbverbsConnection::PumpLocked(Deferred* deferred) {
  // Up to kMaxChain work requests per post_send: one doorbell for a burst
  // (a batch of messages, a WRITE and the message behind it).
  constexpr size_t kMaxChain = 16;
  const size_t depth = static_cast<size_t>(settings_.queue_depth);
  while (!pending_.empty() && in_flight_.size() < depth) {
    const size_t count = std::min({kMaxChain, pending_.size(), depth - in_flight_.size()});
    ibv_send_wr chain[kMaxChain];
    ibv_sge sges[kMaxChain];
    for (size_t i = 0; i < count; ++i) {
      FillLocked(pending_[i], &chain[i], &sges[i]);
      chain[i].next = i + 1 < count ? &chain[i + 1] : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    const int error = api_.post_send(qp_, chain, &bad);
    // On an error, the requests before `bad` were posted (verbs contract).
    const size_t posted =
        error == 0 ? count : (bad != nullptr ? static_cast<size_t>(bad - chain) : 0);
    for (size_t i = 0; i < posted; ++i) {
      in_flight_.emplace(chain[i].wr_id, std::move(pending_.front()));
      pending_.pop_front();
    }
    if (error != 0) {
      FailLocked(InternalError(Name(), ": post_send failed: ", std::strerror(error)), true,
                 deferred);
      return;
    }
  }
}

void IbverbsConnection::FillLocked(const SendWork& work, ibv_send_wr* wr, ibv_sge* sge) {
  *sge = ibv_sge{work.local_address, work.length, work.lkey};
  *wr = ibv_send_wr{};
  wr->wr_id = next_wr_id_++;
  wr->sg_list = work.length > 0 ? sge : nullptr;
  wr->num_sge = work.length > 0 ? 1 : 0;
  wr->opcode = work.opcode;
  wr->send_flags = IBV_SEND_SIGNALED;
  wr->wr.rdma.remote_addr = work.remote_address;
  wr->wr.rdma.rkey = work.rkey;
  switch (work.kind) {
    case WorkKind::kMessage:
      wr->imm_data = htonl(EncodeImm(ImmKind::kMessage, messages_consumed_));
      credits_returned_ = messages_consumed_;
      break;
    case WorkKind::kCredit:
      wr->imm_data = htonl(EncodeImm(ImmKind::kCredit, messages_consumed_));
      credits_returned_ = messages_consumed_;
      credit_update_queued_ = false;
      break;
    case WorkKind::kGoodbye:
      wr->imm_data = htonl(EncodeImm(ImmKind::kGoodbye, 0));
      break;
    default:
      break;
  }
}

int IbverbsConnection::PostLocked(const SendWork& work) {
  ibv_sge sge;
  ibv_send_wr wr;
  FillLocked(work, &wr, &sge);
  ibv_send_wr* bad = nullptr;
  int error = api_.post_send(qp_, &wr, &bad);
  if (error == 0) in_flight_.emplace(wr.wr_id, work);
  return error;
}

void IbverbsConnection::CompleteWorkLocked(const SendWork& work,
                                           const Status& status,
                                           Deferred* deferred) {
  switch (work.kind) {
    case WorkKind::kOperation: {
      const std::shared_ptr<Operation>& operation = work.operation;
      if (!status.ok() && operation->status.ok()) operation->status = status;
      if (--operation->remaining == 0) {
        incomplete_.erase(operation->id);
        deferred->push_back([operation] {
          if (operation->done) operation->done(operation->status);
        });
      }
      break;
    }
    case WorkKind::kCredit:
      credit_update_queued_ = false;
      break;
    case WorkKind::kProbe:
      probe_queued_ = false;
      break;
    case WorkKind::kGoodbye:
      goodbye_settled_ = true;
      break;
    case WorkKind::kMessage:
      break;
  }
}

void IbverbsConnection::FailLocked(const Status& status, bool report,
                                   Deferred* deferred) {
  if (!sticky_.ok()) return;  // the first error wins
  sticky_ = status;
  LOG(WARNING) << status;
  if (report && !closing_ && settings_.on_peer_error) {
    PeerErrorHandler handler = settings_.on_peer_error;
    int peer = peer_rank_;
    deferred->push_back([handler, peer, status] { handler(peer, status); });
  }
  for (const SendWork& work : pending_) {
    CompleteWorkLocked(work, status, deferred);
  }
  pending_.clear();
  backlog_.clear();
  // Flush whatever the QP still holds: each comes back as WR_FLUSH_ERR.
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  api_.modify_qp(qp_, &attr, IBV_QP_STATE);
  progress_.notify_all();
}

void IbverbsConnection::Fail(const Status& status, Deferred* deferred) {
  std::lock_guard<std::mutex> lock(mutex_);
  FailLocked(status, true, deferred);
}

Status IbverbsConnection::StatusFromCompletion(const ibv_wc& wc,
                                               const SendWork& work) const {
  std::string what;
  switch (work.kind) {
    case WorkKind::kOperation:
      what = status_internal::StrCat(OpcodeWords(work.opcode), " of ",
                                     work.length, " bytes");
      break;
    case WorkKind::kMessage: what = "message"; break;
    case WorkKind::kCredit: what = "credit update"; break;
    case WorkKind::kProbe: what = "heartbeat probe"; break;
    case WorkKind::kGoodbye: what = "goodbye"; break;
  }
  auto status = static_cast<ibv_wc_status>(wc.status);
  std::string message = status_internal::StrCat(
      Name(), ": ", what, " failed with ", verbs::WcStatusName(status),
      " (vendor error ", wc.vendor_err, ")", Hint(status));
  if (status == IBV_WC_RETRY_EXC_ERR) return UnavailableError(message);
  return AbortedError(message);
}

void IbverbsConnection::OnCompletion(const ibv_wc& wc, Deferred* deferred) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (wc.wr_id & kReceiveTag) {
    OnReceiveLocked(wc, deferred);
  } else {
    OnSendLocked(wc, deferred);
  }
  progress_.notify_all();
}

void IbverbsConnection::OnSendLocked(const ibv_wc& wc, Deferred* deferred) {
  auto it = in_flight_.find(wc.wr_id);
  if (it == in_flight_.end()) {
    LOG(WARNING) << Name() << ": completion for unknown work request "
                 << wc.wr_id;
    return;
  }
  SendWork work = std::move(it->second);
  in_flight_.erase(it);
  if (wc.status == IBV_WC_SUCCESS) {
    peer_seen_ = true;
    CompleteWorkLocked(work, Status::OK(), deferred);
  } else if (wc.status == IBV_WC_WR_FLUSH_ERR) {
    FailLocked(AbortedError(Name(), ": the queue pair entered the error state"),
               true, deferred);
    CompleteWorkLocked(work, sticky_, deferred);
  } else {
    FailLocked(StatusFromCompletion(wc, work), true, deferred);
    CompleteWorkLocked(work, sticky_, deferred);
  }
  if (sticky_.ok()) PumpLocked(deferred);
}

void IbverbsConnection::OnReceiveLocked(const ibv_wc& wc, Deferred* deferred) {
  if (wc.status != IBV_WC_SUCCESS) {
    FailLocked(AbortedError(Name(), ": receive completed with ",
                            verbs::WcStatusName(wc.status)),
               true, deferred);
    return;
  }
  peer_seen_ = true;
  if (!(wc.wc_flags & IBV_WC_WITH_IMM)) {
    FailLocked(DataLossError(Name(), ": rank ", peer_rank_,
                             " sent a receive without an immediate"),
               true, deferred);
    return;
  }
  const uint32_t imm = ntohl(wc.imm_data);
  const ImmKind kind = DecodeImmKind(imm);
  if (kind == ImmKind::kGoodbye) {
    FailLocked(UnavailableError(Name(), ": rank ", peer_rank_,
                                " closed the connection"),
               true, deferred);
    return;
  }
  peer_consumed_ = std::max(peer_consumed_, ExpandCount(imm, messages_sent_));
  if (kind == ImmKind::kMessage) {
    const uint64_t slot_index = messages_arrived_ % settings_.message_slots;
    uint8_t* slot = receive_ring_.get() + slot_index * settings_.slot_size;
    ++messages_arrived_;
    uint32_t length = 0;
    if (messages_arrived_ - messages_consumed_ >
            static_cast<uint64_t>(settings_.message_slots) ||
        !DecodeSlotHeader(slot, max_message_size(), &length) ||
        wc.byte_len != kSlotHeaderSize + length) {
      FailLocked(DataLossError(Name(), ": rank ", peer_rank_,
                               " wrote a malformed or uncredited message"),
                 true, deferred);
      return;
    }
    deferred->push_back([this, slot, length] {
      if (settings_.on_message) {
        settings_.on_message(peer_rank_, slot + kSlotHeaderSize, length);
      }
      ConsumeMessage();
    });
  }
  if (Status status = PostReceives(1); !status.ok()) {
    FailLocked(status, true, deferred);
    return;
  }
  DrainBacklogLocked();
  PumpLocked(deferred);
}

void IbverbsConnection::ConsumeMessage() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++messages_consumed_;
}

void IbverbsConnection::OnBatchEnd(Deferred* deferred) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!connected_ || !sticky_.ok() || credit_update_queued_ ||
      messages_consumed_ == credits_returned_) {
    return;
  }
  for (const SendWork& work : pending_) {
    if (work.kind == WorkKind::kMessage) return;  // it will piggyback
  }
  QueueCreditUpdateLocked();
  PumpLocked(deferred);
}

void IbverbsConnection::OnTick(Clock::time_point now, Deferred* deferred) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!connected_ || !sticky_.ok() || !peer_seen_ || probe_queued_ ||
      now - last_probe_ < settings_.heartbeat_interval) {
    return;
  }
  last_probe_ = now;
  probe_queued_ = true;
  SendWork probe;
  probe.kind = WorkKind::kProbe;
  probe.opcode = IBV_WR_RDMA_WRITE;  // zero-length: acknowledged, no key
  pending_.push_back(probe);
  PumpLocked(deferred);
}

Status IbverbsConnection::Flush(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t operation_limit = next_operation_id_;
  const uint64_t message_limit = messages_sent_ + backlog_.size();
  bool done = progress_.wait_until(lock, deadline, [&] {
    return !sticky_.ok() ||
           ((incomplete_.empty() || *incomplete_.begin() >= operation_limit) &&
            peer_consumed_ >= message_limit);
  });
  if (!sticky_.ok()) return sticky_;
  if (!done) {
    return DeadlineExceededError(
        "flush of the ", Name(), " did not finish before the deadline (",
        incomplete_.size(), " operations outstanding, ",
        message_limit - std::min(message_limit, peer_consumed_),
        " messages not yet consumed by rank ", peer_rank_, ")");
  }
  return Status::OK();
}

void IbverbsConnection::BeginShutdown(Deferred* deferred) {
  std::lock_guard<std::mutex> lock(mutex_);
  closing_ = true;
  if (sticky_.ok()) {
    sticky_ = CancelledError("rank ", settings_.rank,
                             " shut down its transport (", Name(), ")");
    for (const SendWork& work : pending_) {
      CompleteWorkLocked(work, sticky_, deferred);
    }
    pending_.clear();
    backlog_.clear();
    if (connected_) {
      SendWork goodbye;
      goodbye.kind = WorkKind::kGoodbye;
      goodbye.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
      goodbye_posted_ = PostLocked(goodbye) == 0;  // uses the reserved slot
    }
  }
  if (!goodbye_posted_) goodbye_settled_ = true;
  progress_.notify_all();
}

bool IbverbsConnection::GoodbyeSettled() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return goodbye_settled_;
}

void IbverbsConnection::EnterErrorState() {
  std::lock_guard<std::mutex> lock(mutex_);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  api_.modify_qp(qp_, &attr, IBV_QP_STATE);
}

bool IbverbsConnection::Drained() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return in_flight_.empty();
}

void IbverbsConnection::CancelRemaining(Deferred* deferred) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& entry : in_flight_) {
    CompleteWorkLocked(entry.second, sticky_, deferred);
  }
  in_flight_.clear();
}

}  // namespace ibverbs
}  // namespace comm
}  // namespace oflite
