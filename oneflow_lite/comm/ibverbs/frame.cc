#include "oneflow_lite/comm/ibverbs/frame.h"

#include <cstring>

#include "oneflow_lite/comm/wire.h"

namespace oflite {
namespace comm {
namespace ibverbs {

std::string Endpoint::Encode() const {
  std::string bytes;
  wire::AppendU32(&bytes, kMagic);
  wire::AppendU16(&bytes, kVersion);
  wire::AppendU16(&bytes, 0);
  wire::AppendU32(&bytes, rank);
  wire::AppendU32(&bytes, world_size);
  wire::AppendU32(&bytes, qp_num);
  wire::AppendU32(&bytes, psn);
  wire::AppendU16(&bytes, lid);
  wire::AppendU8(&bytes, link_layer);
  wire::AppendU8(&bytes, active_mtu);
  bytes.append(reinterpret_cast<const char*>(gid), sizeof(gid));
  wire::AppendU8(&bytes, has_gid);
  wire::AppendU32(&bytes, max_message_size);
  wire::AppendU32(&bytes, message_slots);
  wire::AppendU32(&bytes, slot_size);
  bytes.append(ring.Encode());
  return bytes;
}

StatusOr<Endpoint> Endpoint::Decode(const std::string& bytes) {
  wire::Reader reader(bytes.data(), bytes.size());
  uint32_t magic = 0;
  uint16_t version = 0, reserved = 0;
  reader.ReadU32(&magic);
  reader.ReadU16(&version);
  reader.ReadU16(&reserved);
  if (!reader.ok() || magic != kMagic) {
    return InvalidArgumentError("ibverbs endpoint: not an ibverbs endpoint (",
                                bytes.size(), " bytes; another provider?)");
  }
  if (version != kVersion) {
    return InvalidArgumentError("ibverbs endpoint: version ", version,
                                ", this build speaks ", kVersion);
  }
  Endpoint endpoint;
  reader.ReadU32(&endpoint.rank);
  reader.ReadU32(&endpoint.world_size);
  reader.ReadU32(&endpoint.qp_num);
  reader.ReadU32(&endpoint.psn);
  reader.ReadU16(&endpoint.lid);
  reader.ReadU8(&endpoint.link_layer);
  reader.ReadU8(&endpoint.active_mtu);
  for (uint8_t& byte : endpoint.gid) reader.ReadU8(&byte);
  reader.ReadU8(&endpoint.has_gid);
  reader.ReadU32(&endpoint.max_message_size);
  reader.ReadU32(&endpoint.message_slots);
  reader.ReadU32(&endpoint.slot_size);
  if (!reader.ok() || reader.remaining() != RemoteKey::kEncodedSize) {
    return InvalidArgumentError("ibverbs endpoint: truncated or oversized (",
                                bytes.size(), " bytes)");
  }
  ASSIGN_OR_RETURN(endpoint.ring,
                   RemoteKey::Decode(bytes.substr(bytes.size() -
                                                  RemoteKey::kEncodedSize)));
  if (reserved != 0 || endpoint.has_gid > 1) {
    return InvalidArgumentError("ibverbs endpoint: reserved fields set");
  }
  return endpoint;
}

void EncodeSlotHeader(uint32_t length, uint8_t* slot) {
  slot[0] = kSlotVersion;
  slot[1] = 0;  // kind: message
  wire::StoreU16(slot + 2, 0);
  wire::StoreU32(slot + 4, length);
}

bool DecodeSlotHeader(const uint8_t* slot, size_t max_length,
                      uint32_t* length) {
  if (slot[0] != kSlotVersion || slot[1] != 0 || wire::LoadU16(slot + 2) != 0) {
    return false;
  }
  *length = wire::LoadU32(slot + 4);
  return *length <= max_length;
}

uint32_t EncodeImm(ImmKind kind, uint64_t consumed_count) {
  uint32_t count = static_cast<uint32_t>(consumed_count) & kCountMask;
  switch (kind) {
    case ImmKind::kMessage:
      return count;
    case ImmKind::kCredit:
      return 0x80000000u | count;
    case ImmKind::kGoodbye:
      return 0xc0000000u;
  }
  return 0;
}

ImmKind DecodeImmKind(uint32_t imm) {
  if ((imm & 0x80000000u) == 0) return ImmKind::kMessage;
  return (imm & 0x40000000u) ? ImmKind::kGoodbye : ImmKind::kCredit;
}

uint64_t ExpandCount(uint32_t imm, uint64_t sent) {
  uint64_t behind = (static_cast<uint64_t>(sent) - (imm & kCountMask)) &
                    kCountMask;
  return sent - behind;
}

}  // namespace ibverbs
}  // namespace comm
}  // namespace oflite
