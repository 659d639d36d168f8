// The verbs emulator across processes (VerbsEmulator::Join): the packet a
// requester sends to the process owning the destination port, the reply, and
// the byte mover acting as the responder's HCA.
//
// Packet wire format (little-endian, after the link's u64 sequence):
//   u8 version (1)
//   requester port: u8 link layer (0 IB, 1 Ethernet), u16 LID, u8 active MTU,
//     6 x (16-byte GID, u8 GID type)
//   u32 requester QPN, u32 destination QPN, u32 PSN,
//   address vector: u16 DLID, u8 is_global, u8 sgid_index, 16-byte DGID,
//   u8 path MTU, u8 opcode (ibv_wr_opcode), u64 length, u64 remote address,
//   u32 rkey, u32 immediate data (as posted), u8 has_imm,
//   u8 inline: 1 -> u32 size + bytes; 0 -> u32 count + count x (u64 address,
//     u64 length) of the requester's registered memory.
// Reply: u8 version (1), u8 outcome (Outcome), u8 RNR timer.
// docs/rdma.md ("Without hardware") describes what this models.
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "oneflow_lite/comm/verbs_emulator/emulator_fabric.h"
#include "oneflow_lite/common/little_endian.h"

namespace oflite {
namespace verbs {
namespace emulator {
namespace {

constexpr uint8_t kVersion = 1;
constexpr uint32_t kMaxWireSegments = 64;
constexpr size_t kMaxInline = 4096;
// A reply normally comes in microseconds; this bound only matters for a
// peer that is alive but stopped (the packet then counts as lost).
constexpr std::chrono::milliseconds kMinReplyWait{2000};

void AppendRaw(std::string* out, const uint8_t* bytes, size_t size) {
  out->append(reinterpret_cast<const char*>(bytes), size);
}

void ReadRaw(little_endian::Reader* reader, uint8_t* bytes, size_t size) {
  for (size_t i = 0; i < size; ++i) reader->ReadU8(&bytes[i]);
}

std::string EncodePacket(const Device& from, const Packet& packet,
                         bool is_inline) {
  using namespace little_endian;
  std::string out;
  AppendU8(&out, kVersion);
  AppendU8(&out, from.options.link_layer == LinkLayer::kEthernet ? 1 : 0);
  AppendU16(&out, from.lid);
  AppendU8(&out, static_cast<uint8_t>(from.options.active_mtu));
  for (int i = 0; i < kGidTableLength; ++i) {
    AppendRaw(&out, from.gids[i].raw, 16);
    AppendU8(&out, static_cast<uint8_t>(from.gid_types[i]));
  }
  AppendU32(&out, packet.qp_num);
  AppendU32(&out, packet.dest_qp_num);
  AppendU32(&out, packet.psn);
  AppendU16(&out, packet.ah.dlid);
  AppendU8(&out, packet.ah.is_global);
  AppendU8(&out, packet.ah.grh.sgid_index);
  AppendRaw(&out, packet.ah.grh.dgid.raw, 16);
  AppendU8(&out, static_cast<uint8_t>(packet.path_mtu));
  AppendU8(&out, static_cast<uint8_t>(packet.opcode));
  AppendU64(&out, packet.length);
  AppendU64(&out, packet.remote_address);
  AppendU32(&out, packet.rkey);
  AppendU32(&out, packet.imm_data);
  AppendU8(&out, packet.has_imm ? 1 : 0);
  AppendU8(&out, is_inline ? 1 : 0);
  if (is_inline) {
    const Segment& data = packet.memory.segments.front();
    AppendBytes(&out, std::string(reinterpret_cast<char*>(data.address),
                                  data.length));
    return out;
  }
  AppendU32(&out, static_cast<uint32_t>(packet.memory.segments.size()));
  for (const Segment& segment : packet.memory.segments) {
    AppendU64(&out, reinterpret_cast<uint64_t>(segment.address));
    AppendU64(&out, segment.length);
  }
  return out;
}

void ReadPort(little_endian::Reader* reader, Device* from) {
  uint8_t link_layer, mtu, type;
  reader->ReadU8(&link_layer);
  from->options.link_layer =
      link_layer == 1 ? LinkLayer::kEthernet : LinkLayer::kInfiniBand;
  reader->ReadU16(&from->lid);
  reader->ReadU8(&mtu);
  from->options.active_mtu = static_cast<ibv_mtu>(mtu);
  for (int i = 0; i < kGidTableLength; ++i) {
    ReadRaw(reader, from->gids[i].raw, 16);
    reader->ReadU8(&type);
    from->gid_types[i] = static_cast<ibv_gid_type>(type);
  }
}

// False for a malformed packet (dropped, as the wire would).
bool DecodePacket(const std::string& body, pid_t sender, Device* from,
                  Packet* packet) {
  little_endian::Reader reader(body.data(), body.size());
  uint8_t version, is_global, mtu, opcode, has_imm, is_inline;
  reader.ReadU8(&version);
  ReadPort(&reader, from);
  reader.ReadU32(&packet->qp_num);
  reader.ReadU32(&packet->dest_qp_num);
  reader.ReadU32(&packet->psn);
  reader.ReadU16(&packet->ah.dlid);
  reader.ReadU8(&is_global);
  packet->ah.is_global = is_global;
  reader.ReadU8(&packet->ah.grh.sgid_index);
  ReadRaw(&reader, packet->ah.grh.dgid.raw, 16);
  reader.ReadU8(&mtu);
  packet->path_mtu = static_cast<ibv_mtu>(mtu);
  reader.ReadU8(&opcode);
  packet->opcode = static_cast<ibv_wr_opcode>(opcode);
  reader.ReadU64(&packet->length);
  reader.ReadU64(&packet->remote_address);
  reader.ReadU32(&packet->rkey);
  reader.ReadU32(&packet->imm_data);
  reader.ReadU8(&has_imm);
  packet->has_imm = has_imm != 0;
  reader.ReadU8(&is_inline);
  if (is_inline) {
    reader.ReadBytes(&packet->inline_data, kMaxInline);
    packet->memory.pid = 0;  // the bytes travel in the packet
    packet->memory.segments.push_back(
        {reinterpret_cast<uint8_t*>(&packet->inline_data[0]),
         packet->inline_data.size()});
  } else {
    uint32_t count = 0;
    reader.ReadU32(&count);
    if (count > kMaxWireSegments) return false;
    packet->memory.pid = sender;
    for (uint32_t i = 0; reader.ok() && i < count; ++i) {
      uint64_t address, length;
      reader.ReadU64(&address);
      reader.ReadU64(&length);
      packet->memory.segments.push_back(
          {reinterpret_cast<uint8_t*>(address), length});
    }
  }
  const bool known_opcode =
      opcode == IBV_WR_SEND || opcode == IBV_WR_SEND_WITH_IMM ||
      opcode == IBV_WR_RDMA_WRITE || opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
      (opcode == IBV_WR_RDMA_READ && !is_inline);
  return reader.ok() && reader.remaining() == 0 && version == kVersion &&
         known_opcode && packet->path_mtu >= IBV_MTU_256 &&
         packet->path_mtu <= IBV_MTU_4096;
}

std::string EncodeResponse(const Response& response) {
  std::string out;
  little_endian::AppendU8(&out, kVersion);
  little_endian::AppendU8(&out, static_cast<uint8_t>(response.outcome));
  little_endian::AppendU8(&out, response.rnr_timer);
  return out;
}

bool DecodeResponse(const std::string& body, Response* response) {
  little_endian::Reader reader(body.data(), body.size());
  uint8_t version, outcome;
  reader.ReadU8(&version);
  reader.ReadU8(&outcome);
  reader.ReadU8(&response->rnr_timer);
  if (!reader.ok() || version != kVersion ||
      outcome > static_cast<uint8_t>(Outcome::kRequesterFault)) {
    return false;
  }
  response->outcome = static_cast<Outcome>(outcome);
  return true;
}

// The slot of the port a packet from `local` with `ah` is addressed to: the
// DLID on InfiniBand; on Ethernet the slot encoded in the DGID (the port
// GUID in the link-local GID, or the last two bytes of ::ffff:10.0.x.y).
int SlotOf(const Device& local, const ibv_ah_attr& ah) {
  int slot = 0;
  if (local.options.link_layer == LinkLayer::kInfiniBand) {
    slot = ah.dlid;
  } else if (ah.is_global) {
    const uint8_t* raw = ah.grh.dgid.raw;
    if (raw[0] == 0xfe && raw[1] == 0x80) {
      uint64_t guid = 0;
      for (int i = 8; i < 16; ++i) guid = guid << 8 | raw[i];
      slot = guid >= kGuidBase && guid - kGuidBase < kMaxSlot
                 ? static_cast<int>(guid - kGuidBase) + 1
                 : 0;
    } else if (raw[10] == 0xff && raw[11] == 0xff && raw[12] == 10) {
      slot = raw[14] << 8 | raw[15];
    }
  }
  return slot >= 1 && slot <= kMaxSlot ? slot : 0;
}

// Moves `size` bytes between this process's `mine` and the requester's
// `theirs` (one contiguous piece each).
bool MoveChunk(pid_t pid, uint8_t* mine, uint8_t* theirs, uint64_t size,
               bool to_requester) {
  if (pid == 0) {
    if (to_requester) {
      std::memmove(theirs, mine, size);
    } else {
      std::memmove(mine, theirs, size);
    }
    return true;
  }
  while (size > 0) {
    iovec local{mine, size};
    iovec remote{theirs, size};
    ssize_t moved = to_requester
                        ? ::process_vm_writev(pid, &local, 1, &remote, 1, 0)
                        : ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (moved <= 0) return false;  // gone (ESRCH), unmapped, or EPERM
    mine += moved;
    theirs += moved;
    size -= static_cast<uint64_t>(moved);
  }
  return true;
}

}  // namespace

bool MoveBytes(const RequesterMemory& requester,
               const std::vector<Segment>& mine, uint64_t length,
               bool to_requester) {
  const std::vector<Segment>& theirs = requester.segments;
  size_t a = 0, b = 0;
  uint64_t a_offset = 0, b_offset = 0;
  while (length > 0 && a < mine.size() && b < theirs.size()) {
    uint64_t chunk = std::min({length, mine[a].length - a_offset,
                               theirs[b].length - b_offset});
    if (!MoveChunk(requester.pid, mine[a].address + a_offset,
                   theirs[b].address + b_offset, chunk, to_requester)) {
      return false;
    }
    length -= chunk;
    a_offset += chunk;
    b_offset += chunk;
    if (a_offset == mine[a].length) ++a, a_offset = 0;
    if (b_offset == theirs[b].length) ++b, b_offset = 0;
  }
  return true;
}

void Fabric::AttachLink(std::unique_ptr<Link> link) {
  std::lock_guard<std::mutex> lock(mutex_);
  link_ = std::move(link);
}

Device* Fabric::FindDeviceBySlot(int slot) const {
  for (const auto& device : devices_) {
    if (device->slot == slot) return device.get();
  }
  return nullptr;
}

bool Fabric::MakeRemoteCall(const QueuePair& qp, const Packet& packet,
                            RemoteCall* call) const {
  if (link_ == nullptr) return false;
  call->slot = SlotOf(*qp.device, packet.ah);
  if (call->slot == 0) return false;
  const SendRequest& head = qp.send_queue.front();
  call->qp_key = {qp.device->index, qp.qp.qp_num};
  call->sequence = head.sequence;
  call->body = EncodePacket(*qp.device, packet, head.is_inline);
  call->wait = std::max(
      kMinReplyWait, std::chrono::duration_cast<std::chrono::milliseconds>(
                         TransportTimeout(qp.attr.timeout)));
  return true;
}

void Fabric::ExchangeCalls(std::unique_lock<std::mutex>* lock,
                           std::vector<RemoteCall>* calls) {
  lock->unlock();  // the responder may be a fabric of this process
  for (RemoteCall& call : *calls) {
    call.reply = link_->Exchange(call.slot, call.body, call.wait);
  }
  lock->lock();
  Clock::time_point now = Clock::now();
  for (const RemoteCall& call : *calls) ConcludeRemote(call, now);
  calls->clear();
}

void Fabric::ConcludeRemote(const RemoteCall& call, Clock::time_point now) {
  auto it = qps_.find(call.qp_key);
  if (it == qps_.end()) return;  // destroyed meanwhile
  QueuePair* qp = it->second.get();
  // Reset, flushed or moved on meanwhile: the answer is for nothing.
  if (qp->attr.qp_state != IBV_QPS_RTS || qp->send_queue.empty() ||
      qp->send_queue.front().sequence != call.sequence) {
    return;
  }
  Response response;
  if (!call.reply || !DecodeResponse(*call.reply, &response)) {
    response = {Outcome::kDrop, 0};
  }
  Conclude(qp, response, now);
}

std::string Fabric::HandleRemote(int slot, pid_t sender,
                                 const std::string& body) {
  Device from;
  Packet packet;
  Response response;  // kDrop
  if (DecodePacket(body, sender, &from, &packet)) {
    std::unique_lock<std::mutex> lock(mutex_);
    Device* target = FindDeviceBySlot(slot);
    if (target != nullptr) response = Respond(from, packet, target);
    lock.unlock();
    work_.notify_all();
  }
  return EncodeResponse(response);
}

}  // namespace emulator
}  // namespace verbs
}  // namespace oflite
