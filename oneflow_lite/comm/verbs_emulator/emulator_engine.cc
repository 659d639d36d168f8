// The verbs emulator's data path: posting work requests, the delivery engine
// (one thread per fabric) and completion queues.
//
// Per RC QP the engine executes the head of the send queue and only then the
// next one (in order, like an HCA's requester). A head that cannot proceed
// waits: a dropped packet until the transport timeout, an RNR NAK until the
// responder's RNR timer; meanwhile later work requests of that QP wait too.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "oneflow_lite/comm/verbs_emulator/emulator_fabric.h"

namespace oflite {
namespace verbs {
namespace emulator {
namespace {

bool IsSupportedOpcode(ibv_wr_opcode opcode) {
  return opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM ||
         opcode == IBV_WR_RDMA_WRITE || opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
         opcode == IBV_WR_RDMA_READ;
}

bool ConsumesReceive(ibv_wr_opcode opcode) {
  return opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM ||
         opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
}

bool IsRdma(ibv_wr_opcode opcode) {
  return opcode == IBV_WR_RDMA_WRITE || opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
         opcode == IBV_WR_RDMA_READ;
}

ibv_wc_opcode SendCompletionOpcode(ibv_wr_opcode opcode) {
  switch (opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ:
      return IBV_WC_RDMA_READ;
    default:
      return IBV_WC_SEND;
  }
}

// The RNR NAK timer encodings of the IB specification, in microseconds.
Clock::duration RnrDelay(uint8_t timer) {
  static const uint32_t kMicroseconds[32] = {
      655360, 10,    20,    30,    40,    60,     80,     120,
      160,    240,   320,   480,   640,   960,    1280,   1920,
      2560,   3840,  5120,  7680,  10240, 15360,  20480,  30720,
      40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return std::chrono::microseconds(kMicroseconds[timer & 31]);
}

uint32_t PacketCount(uint64_t length, ibv_mtu mtu) {
  uint64_t mtu_bytes = static_cast<uint64_t>(MtuBytes(mtu));
  if (mtu_bytes == 0 || length == 0) return 1;
  return static_cast<uint32_t>((length + mtu_bytes - 1) / mtu_bytes);
}

bool RangeInside(uint64_t address, uint64_t length, const ibv_mr& mr) {
  uint64_t start = reinterpret_cast<uint64_t>(mr.addr);
  return address >= start && length <= mr.length &&
         address - start <= mr.length - length;
}

bool SameGid(const ibv_gid& a, const ibv_gid& b) {
  return std::memcmp(a.raw, b.raw, sizeof(a.raw)) == 0;
}

// Whether `device` owns `gid` as an entry of `type`.
bool HasGid(const Device& device, const ibv_gid& gid, ibv_gid_type type) {
  static const ibv_gid kZero{};
  if (SameGid(gid, kZero)) return false;
  for (int i = 0; i < kGidTableLength; ++i) {
    if (SameGid(device.gids[i], gid) && device.gid_types[i] == type) {
      return true;
    }
  }
  return false;
}

// Whether a packet sent from `from` with address vector `ah` lands on `to`.
// With a GRH the packet has the type (IB, RoCE v1 or v2) of its source GID
// entry, and only a destination entry of the same type accepts it.
bool Reaches(const Device& from, const ibv_ah_attr& ah, const Device& to) {
  if (from.options.link_layer != to.options.link_layer) return false;
  ibv_gid_type type = from.gid_types[ah.grh.sgid_index % kGidTableLength];
  if (to.options.link_layer == LinkLayer::kEthernet) {
    return ah.is_global && HasGid(to, ah.grh.dgid, type);
  }
  return ah.dlid == to.lid && (!ah.is_global || HasGid(to, ah.grh.dgid, type));
}

uint64_t TotalLength(const std::vector<Segment>& segments) {
  uint64_t total = 0;
  for (const Segment& segment : segments) total += segment.length;
  return total;
}

// The packet of `request`, the head of `qp`, as addressed on the wire.
void AddressPacket(const QueuePair& qp, const SendRequest& request,
                   Packet* packet) {
  packet->qp_num = qp.qp.qp_num;
  packet->dest_qp_num = qp.attr.dest_qp_num;
  packet->psn = qp.next_send_psn;
  packet->ah = qp.attr.ah_attr;
  packet->path_mtu = qp.attr.path_mtu;
  packet->opcode = request.opcode;
  packet->length = request.length;
  packet->remote_address = request.remote_address;
  packet->rkey = request.rkey;
  packet->imm_data = request.imm_data;
  packet->has_imm = request.has_imm;
}

}  // namespace

int Fabric::PostSend(ibv_qp* handle, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = qp_handles_.find(handle);
  if (it == qp_handles_.end()) {
    if (bad_wr != nullptr) *bad_wr = wr;
    return EINVAL;
  }
  QueuePair* qp = it->second;
  int error = 0;
  for (ibv_send_wr* current = wr; current != nullptr; current = current->next) {
    error = AcceptSend(qp, *current);
    if (error != 0) {
      if (bad_wr != nullptr) *bad_wr = current;
      break;
    }
  }
  if (qp->attr.qp_state == IBV_QPS_ERR) FlushQueues(qp);
  lock.unlock();
  work_.notify_all();
  return error;
}

int Fabric::AcceptSend(QueuePair* qp, const ibv_send_wr& wr) {
  ibv_qp_state state = qp->attr.qp_state;
  if (state != IBV_QPS_RTS && state != IBV_QPS_ERR) return EINVAL;
  if (!IsSupportedOpcode(wr.opcode)) return EINVAL;
  if (wr.num_sge < 0 || wr.num_sge > static_cast<int>(qp->cap.max_send_sge) ||
      (wr.num_sge > 0 && wr.sg_list == nullptr)) {
    return EINVAL;
  }
  if (qp->next_send_sequence - qp->send_retired >= qp->cap.max_send_wr) {
    return ENOMEM;  // send queue full
  }
  SendRequest request;
  request.wr_id = wr.wr_id;
  request.opcode = wr.opcode;
  request.signaled = qp->signal_all || (wr.send_flags & IBV_SEND_SIGNALED);
  for (int i = 0; i < wr.num_sge; ++i) request.length += wr.sg_list[i].length;
  request.is_inline = (wr.send_flags & IBV_SEND_INLINE) != 0;
  if (request.is_inline) {
    if (wr.opcode == IBV_WR_RDMA_READ ||
        request.length > qp->cap.max_inline_data) {
      return EINVAL;
    }
    for (int i = 0; i < wr.num_sge; ++i) {  // copied now; lkey is ignored
      request.inline_data.append(
          reinterpret_cast<const char*>(wr.sg_list[i].addr),
          wr.sg_list[i].length);
    }
  } else {
    request.sges.assign(wr.sg_list, wr.sg_list + wr.num_sge);
  }
  if (IsRdma(wr.opcode)) {
    request.remote_address = wr.wr.rdma.remote_addr;
    request.rkey = wr.wr.rdma.rkey;
  }
  request.has_imm = wr.opcode == IBV_WR_SEND_WITH_IMM ||
                    wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
  request.imm_data = wr.imm_data;
  request.sequence = qp->next_send_sequence++;
  qp->send_queue.push_back(std::move(request));
  return 0;
}

int Fabric::PostRecv(ibv_qp* handle, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = qp_handles_.find(handle);
  QueuePair* qp = it == qp_handles_.end() ? nullptr : it->second;
  int error = qp == nullptr ? EINVAL : 0;
  for (ibv_recv_wr* current = wr; qp != nullptr && current != nullptr;
       current = current->next) {
    if (qp->attr.qp_state == IBV_QPS_RESET || current->num_sge < 0 ||
        current->num_sge > static_cast<int>(qp->cap.max_recv_sge) ||
        (current->num_sge > 0 && current->sg_list == nullptr)) {
      error = EINVAL;
    } else if (qp->next_recv_sequence - qp->recv_retired >=
               qp->cap.max_recv_wr) {
      error = ENOMEM;  // receive queue full
    }
    if (error != 0) {
      if (bad_wr != nullptr) *bad_wr = current;
      break;
    }
    RecvRequest request;
    request.sequence = qp->next_recv_sequence++;
    request.wr_id = current->wr_id;
    request.sges.assign(current->sg_list, current->sg_list + current->num_sge);
    qp->recv_queue.push_back(std::move(request));
  }
  if (qp == nullptr && bad_wr != nullptr) *bad_wr = wr;
  if (qp != nullptr && qp->attr.qp_state == IBV_QPS_ERR) FlushQueues(qp);
  lock.unlock();
  work_.notify_all();
  return error;
}

int Fabric::PollCq(ibv_cq* handle, int num_entries, ibv_wc* wc) {
  std::lock_guard<std::mutex> lock(mutex_);
  CompletionQueue* cq = Lookup(cqs_, handle);
  if (cq == nullptr || num_entries < 0 || (num_entries > 0 && wc == nullptr) ||
      cq->overrun) {
    return -1;
  }
  int count = 0;
  while (count < num_entries && !cq->entries.empty()) {
    const CompletionEntry& entry = cq->entries.front();
    wc[count++] = entry.wc;
    uint64_t& retired =
        entry.is_send ? entry.qp->send_retired : entry.qp->recv_retired;
    retired = std::max(retired, entry.sequence + 1);
    cq->entries.pop_front();
  }
  return count;
}

void Fabric::RunEngine() {
  std::unique_lock<std::mutex> lock(mutex_);
  std::vector<RemoteCall> calls;
  while (!stopping_) {
    Clock::time_point now = Clock::now();
    Clock::time_point wake = now + std::chrono::milliseconds(100);
    bool progressed = false;
    for (auto& entry : qps_) {
      QueuePair* qp = entry.second.get();
      if (qp->attr.qp_state != IBV_QPS_RTS || qp->send_queue.empty()) continue;
      if (qp->retry_at > now) {
        wake = std::min(wake, qp->retry_at);
        continue;
      }
      ProcessHead(qp, now, &calls);
      progressed = true;
    }
    if (!calls.empty()) {
      ExchangeCalls(&lock, &calls);  // unlocks while packets are on the wire
    } else if (progressed) {  // let posters and pollers in between rounds
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    } else {
      work_.wait_until(lock, wake);
    }
  }
}

void Fabric::ProcessHead(QueuePair* qp, Clock::time_point now,
                         std::vector<RemoteCall>* calls) {
  const SendRequest& request = qp->send_queue.front();
  Packet packet;
  if (request.length > qp->device->options.max_message_size) {
    FailHead(qp, IBV_WC_LOC_LEN_ERR);
    return;
  }
  if (request.is_inline) {
    packet.memory.segments.push_back(
        {reinterpret_cast<uint8_t*>(
             const_cast<char*>(request.inline_data.data())),
         request.length});
  } else if (!CheckLocal(*qp, request.sges,
                         request.opcode == IBV_WR_RDMA_READ,
                         &packet.memory.segments)) {
    FailHead(qp, IBV_WC_LOC_PROT_ERR);
    return;
  }
  AddressPacket(*qp, request, &packet);
  if (qp->device->failed) {
    Dropped(qp, now);
    return;
  }
  Device* target = LocalTarget(*qp);
  if (target != nullptr) {
    Conclude(qp, Respond(*qp->device, packet, target), now);
    return;
  }
  RemoteCall call;
  if (MakeRemoteCall(*qp, packet, &call)) {
    calls->push_back(std::move(call));
    return;
  }
  Dropped(qp, now);  // no port answers to this address
}

Device* Fabric::LocalTarget(const QueuePair& qp) const {
  Device* target = nullptr;
  for (const auto& device : devices_) {
    if (Reaches(*qp.device, qp.attr.ah_attr, *device)) target = device.get();
  }
  return target;
}

QueuePair* Fabric::Accepting(const Device& from, const Packet& packet,
                             Device* target) const {
  if (target->failed || !Reaches(from, packet.ah, *target)) return nullptr;
  auto it = target->qps.find(packet.dest_qp_num);
  if (it == target->qps.end()) return nullptr;
  QueuePair* responder = it->second;
  ibv_qp_state state = responder->attr.qp_state;
  if (state != IBV_QPS_RTR && state != IBV_QPS_RTS) return nullptr;
  // An RC responder accepts only its own peer, and answers along its path.
  if (responder->attr.dest_qp_num != packet.qp_num ||
      !Reaches(*target, responder->attr.ah_attr, from)) {
    return nullptr;
  }
  // Both directions of a connection must speak the same GRH type (a RoCE v1
  // requester gets no answer from a responder configured for v2).
  const ibv_ah_attr& forward = packet.ah;
  const ibv_ah_attr& backward = responder->attr.ah_attr;
  if (forward.is_global && backward.is_global &&
      from.gid_types[forward.grh.sgid_index % kGidTableLength] !=
          target->gid_types[backward.grh.sgid_index % kGidTableLength]) {
    return nullptr;
  }
  // Frames above a port's MTU are dropped on the wire.
  if (packet.path_mtu > target->options.active_mtu ||
      responder->attr.path_mtu > from.options.active_mtu) {
    return nullptr;
  }
  return responder;
}

Response Fabric::Respond(const Device& from, const Packet& packet,
                         Device* target) {
  QueuePair* responder = Accepting(from, packet, target);
  if (responder == nullptr) return {Outcome::kDrop, 0};
  if (packet.psn != responder->expected_recv_psn) {
    // A repeat of the request answered last (its ACK was lost) is ACKed
    // again; a READ is executed again. Other PSNs are NAKed: they time out.
    if (!responder->answered_any || packet.psn != responder->answered_psn) {
      return {Outcome::kDrop, 0};
    }
    Segment remote{nullptr, 0};
    if (packet.opcode == IBV_WR_RDMA_READ &&
        (!CheckRemote(*responder, packet, &remote) ||
         !MoveBytes(packet.memory, {remote}, packet.length, true))) {
      return {Outcome::kDrop, 0};
    }
    return {Outcome::kAck, 0};
  }
  return Execute(packet, responder);
}

Response Fabric::Execute(const Packet& packet, QueuePair* responder) {
  const ibv_wr_opcode opcode = packet.opcode;
  Segment remote{nullptr, 0};
  if (IsRdma(opcode) && !CheckRemote(*responder, packet, &remote)) {
    EnterError(responder);
    return {Outcome::kRemoteAccess, 0};
  }
  std::vector<Segment> receive;
  if (ConsumesReceive(opcode)) {
    if (responder->recv_queue.empty()) {  // RNR NAK
      return {Outcome::kRnrNak, responder->attr.min_rnr_timer};
    }
    if (opcode != IBV_WR_RDMA_WRITE_WITH_IMM) {
      RecvRequest posted = responder->recv_queue.front();
      ibv_wc_status responder_status = IBV_WC_SUCCESS;
      Outcome outcome = Outcome::kAck;
      if (!CheckLocal(*responder, posted.sges, true, &receive)) {
        responder_status = IBV_WC_LOC_PROT_ERR;
        outcome = Outcome::kRemoteOperation;
      } else if (TotalLength(receive) < packet.length) {
        responder_status = IBV_WC_LOC_LEN_ERR;
        outcome = Outcome::kRemoteInvalid;
      }
      if (responder_status != IBV_WC_SUCCESS) {
        responder->recv_queue.pop_front();
        CompleteRecv(responder, posted, responder_status, nullptr);
        EnterError(responder);
        return {outcome, 0};
      }
    }
  }
  bool moved = opcode == IBV_WR_RDMA_READ
                   ? MoveBytes(packet.memory, {remote}, packet.length, true)
               : IsRdma(opcode)
                   ? MoveBytes(packet.memory, {remote}, packet.length, false)
                   : MoveBytes(packet.memory, receive, packet.length, false);
  if (!moved) return {Outcome::kRequesterFault, 0};
  uint32_t packets = PacketCount(packet.length, packet.path_mtu);
  responder->answered_any = true;
  responder->answered_psn = packet.psn;
  responder->expected_recv_psn =
      (responder->expected_recv_psn + packets) & kPsnMask;
  if (ConsumesReceive(opcode)) {
    RecvRequest posted = std::move(responder->recv_queue.front());
    responder->recv_queue.pop_front();
    CompleteRecv(responder, posted, IBV_WC_SUCCESS, &packet);
  }
  return {Outcome::kAck, 0};
}

bool Fabric::CheckLocal(const QueuePair& qp, const std::vector<ibv_sge>& sges,
                        bool need_local_write,
                        std::vector<Segment>* segments) const {
  segments->clear();
  for (const ibv_sge& sge : sges) {
    if (sge.length == 0) continue;
    auto it = qp.device->mrs.find(sge.lkey);
    if (it == qp.device->mrs.end()) return false;
    const MemoryRegion& mr = *it->second;
    if (mr.pd != qp.pd || !RangeInside(sge.addr, sge.length, mr.mr)) {
      return false;
    }
    if (need_local_write && !(mr.access & IBV_ACCESS_LOCAL_WRITE)) {
      return false;
    }
    segments->push_back({reinterpret_cast<uint8_t*>(sge.addr), sge.length});
  }
  return true;
}

bool Fabric::CheckRemote(const QueuePair& responder, const Packet& packet,
                         Segment* segment) const {
  *segment = {reinterpret_cast<uint8_t*>(packet.remote_address),
              packet.length};
  if (packet.length == 0) return true;  // zero-length RDMA checks no key
  int needed = packet.opcode == IBV_WR_RDMA_READ ? IBV_ACCESS_REMOTE_READ
                                                 : IBV_ACCESS_REMOTE_WRITE;
  if (!(responder.attr.qp_access_flags & needed)) return false;
  auto it = responder.device->mrs.find(packet.rkey);
  if (it == responder.device->mrs.end()) return false;
  const MemoryRegion& mr = *it->second;
  return mr.pd == responder.pd && (mr.access & needed) &&
         RangeInside(packet.remote_address, packet.length, mr.mr);
}

void Fabric::Conclude(QueuePair* qp, const Response& response,
                      Clock::time_point now) {
  switch (response.outcome) {
    case Outcome::kAck:
      Acknowledge(qp);
      return;
    case Outcome::kDrop:
      Dropped(qp, now);
      return;
    case Outcome::kRnrNak:
      if (qp->attr.rnr_retry != 7 && ++qp->rnr_retries > qp->attr.rnr_retry) {
        FailHead(qp, IBV_WC_RNR_RETRY_EXC_ERR);
      } else {
        qp->retry_at = now + RnrDelay(response.rnr_timer);
      }
      return;
    case Outcome::kRemoteAccess:
      FailHead(qp, IBV_WC_REM_ACCESS_ERR);
      return;
    case Outcome::kRemoteOperation:
      FailHead(qp, IBV_WC_REM_OP_ERR);
      return;
    case Outcome::kRemoteInvalid:
      FailHead(qp, IBV_WC_REM_INV_REQ_ERR);
      return;
    case Outcome::kRequesterFault:
      FailHead(qp, IBV_WC_LOC_PROT_ERR);
      return;
  }
}

void Fabric::Acknowledge(QueuePair* qp) {
  SendRequest request = std::move(qp->send_queue.front());
  qp->send_queue.pop_front();
  uint32_t packets = PacketCount(request.length, qp->attr.path_mtu);
  qp->next_send_psn = (qp->next_send_psn + packets) & kPsnMask;
  qp->transport_retries = 0;
  qp->rnr_retries = 0;
  if (request.signaled) CompleteSend(qp, request, IBV_WC_SUCCESS);
}

// Retransmits after the ACK timeout, until the retry count is spent.
void Fabric::Dropped(QueuePair* qp, Clock::time_point now) {
  if (qp->attr.timeout == 0) {
    qp->retry_at = now + std::chrono::milliseconds(100);
  } else if (++qp->transport_retries > qp->attr.retry_cnt) {
    FailHead(qp, IBV_WC_RETRY_EXC_ERR);
  } else {
    qp->retry_at = now + TransportTimeout(qp->attr.timeout);
  }
}

void Fabric::FailHead(QueuePair* qp, ibv_wc_status status) {
  SendRequest request = std::move(qp->send_queue.front());
  qp->send_queue.pop_front();
  CompleteSend(qp, request, status);  // error completions are always made
  EnterError(qp);
}

void Fabric::EnterError(QueuePair* qp) {
  qp->attr.qp_state = IBV_QPS_ERR;
  qp->qp.state = IBV_QPS_ERR;
  qp->transport_retries = 0;
  qp->rnr_retries = 0;
  FlushQueues(qp);
}

void Fabric::FlushQueues(QueuePair* qp) {
  for (const SendRequest& request : qp->send_queue) {
    CompleteSend(qp, request, IBV_WC_WR_FLUSH_ERR);
  }
  qp->send_queue.clear();
  for (const RecvRequest& request : qp->recv_queue) {
    CompleteRecv(qp, request, IBV_WC_WR_FLUSH_ERR, nullptr);
  }
  qp->recv_queue.clear();
}

void Fabric::CompleteSend(QueuePair* qp, const SendRequest& request,
                          ibv_wc_status status) {
  CompletionEntry entry;
  entry.wc.wr_id = request.wr_id;
  entry.wc.status = status;
  entry.wc.opcode = SendCompletionOpcode(request.opcode);
  entry.wc.byte_len = static_cast<uint32_t>(request.length);
  entry.wc.qp_num = qp->qp.qp_num;
  entry.qp = qp;
  entry.sequence = request.sequence;
  entry.is_send = true;
  PushCompletion(qp->send_cq, entry);
}

void Fabric::CompleteRecv(QueuePair* qp, const RecvRequest& request,
                          ibv_wc_status status, const Packet* sender) {
  CompletionEntry entry;
  entry.wc.wr_id = request.wr_id;
  entry.wc.status = status;
  entry.wc.opcode = IBV_WC_RECV;
  entry.wc.qp_num = qp->qp.qp_num;
  if (sender != nullptr) {
    entry.wc.src_qp = sender->qp_num;
    entry.wc.byte_len = static_cast<uint32_t>(sender->length);
    if (sender->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
      entry.wc.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
    }
    if (sender->has_imm) {
      entry.wc.wc_flags |= IBV_WC_WITH_IMM;
      entry.wc.imm_data = sender->imm_data;
    }
  }
  entry.qp = qp;
  entry.sequence = request.sequence;
  entry.is_send = false;
  PushCompletion(qp->recv_cq, entry);
}

void Fabric::PushCompletion(CompletionQueue* cq, const CompletionEntry& entry) {
  if (cq->overrun) return;
  if (cq->entries.size() >= cq->capacity) {
    cq->overrun = true;
    return;
  }
  cq->entries.push_back(entry);
  if (cq->armed && cq->channel != nullptr) {  // one event per arming
    cq->armed = false;
    cq->channel->events.push_back(&cq->cq);
    const char byte = 1;
    ssize_t written = write(cq->channel->write_fd, &byte, 1);
    (void)written;  // a pipe of unread events cannot fill: one per arming
  }
}

ibv_comp_channel* Fabric::CreateCompChannel(ibv_context* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  Context* context = Lookup(contexts_, handle);
  int fds[2];
  if (context == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  if (pipe2(fds, O_CLOEXEC) != 0) return nullptr;  // errno from pipe2
  auto channel = std::make_unique<CompletionChannel>();
  channel->owner = context;
  channel->channel.context = handle;
  channel->channel.fd = fds[0];
  channel->write_fd = fds[1];
  ibv_comp_channel* result = &channel->channel;
  ++context->users;
  channels_[result] = std::move(channel);
  return result;
}

int Fabric::DestroyCompChannel(ibv_comp_channel* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  CompletionChannel* channel = Lookup(channels_, handle);
  if (channel == nullptr) return EINVAL;
  if (channel->users > 0) return EBUSY;
  close(channel->channel.fd);
  close(channel->write_fd);
  --channel->owner->users;
  channels_.erase(handle);
  return 0;
}

int Fabric::ReqNotifyCq(ibv_cq* handle) {
  std::lock_guard<std::mutex> lock(mutex_);
  CompletionQueue* cq = Lookup(cqs_, handle);
  if (cq == nullptr || cq->channel == nullptr) return EINVAL;
  cq->armed = true;
  return 0;
}

int Fabric::GetCqEvent(ibv_comp_channel* handle, ibv_cq** cq,
                       void** cq_context) {
  int fd;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    CompletionChannel* channel = Lookup(channels_, handle);
    if (channel == nullptr) return -1;
    fd = channel->channel.fd;
  }
  char byte;
  if (read(fd, &byte, 1) != 1) return -1;  // blocks like libibverbs
  std::lock_guard<std::mutex> lock(mutex_);
  CompletionChannel* channel = Lookup(channels_, handle);
  if (channel == nullptr || channel->events.empty()) return -1;
  ibv_cq* event = channel->events.front();
  channel->events.pop_front();
  CompletionQueue* queue = Lookup(cqs_, event);
  ++queue->events_delivered;
  *cq = event;
  if (cq_context != nullptr) *cq_context = event->cq_context;
  return 0;
}

void Fabric::AckCqEvents(ibv_cq* handle, unsigned int count) {
  std::lock_guard<std::mutex> lock(mutex_);
  CompletionQueue* cq = Lookup(cqs_, handle);
  if (cq != nullptr) cq->events_acked += count;
}

void Fabric::PurgeCompletions(QueuePair* qp) {
  for (CompletionQueue* cq : {qp->send_cq, qp->recv_cq}) {
    auto& entries = cq->entries;
    entries.erase(std::remove_if(entries.begin(), entries.end(),
                                 [qp](const CompletionEntry& entry) {
                                   return entry.qp == qp;
                                 }),
                  entries.end());
  }
}

}  // namespace emulator
}  // namespace verbs
}  // namespace oflite
