// Wire formats of the ibverbs provider (documented in docs/comm.md and
// docs/rdma.md): the endpoint blob exchanged out of band before a connection,
// the header of a message-ring slot, and the meaning of the 32-bit immediate
// carried by every RDMA WRITE_WITH_IMM.
//
// All encodings are explicit little-endian (comm/wire.h) and versioned; none
// is a memcpy of a struct. Value types, thread-compatible.
#ifndef ONEFLOW_LITE_COMM_IBVERBS_FRAME_H_
#define ONEFLOW_LITE_COMM_IBVERBS_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "oneflow_lite/comm/transport.h"
#include "oneflow_lite/common/status.h"

namespace oflite {
namespace comm {
namespace ibverbs {

// Everything a peer needs to connect its RC QP to ours and to write into our
// message ring. Encoded as: u32 magic "OFIB", u16 version, u16 reserved, then
// the fields below in order (gid as 16 raw bytes, keys as RemoteKey::Encode).
struct Endpoint {
  static constexpr uint32_t kMagic = 0x4249464f;  // "OFIB" little-endian
  static constexpr uint16_t kVersion = 1;

  uint32_t rank = 0;
  uint32_t world_size = 0;
  uint32_t qp_num = 0;
  uint32_t psn = 0;          // our first send PSN (the peer's RQ PSN)
  uint16_t lid = 0;          // 0 on Ethernet
  uint8_t link_layer = 0;    // IBV_LINK_LAYER_*
  uint8_t active_mtu = 0;    // ibv_mtu of our port
  uint8_t gid[16] = {};      // our source GID (zero when LID-addressed)
  uint8_t has_gid = 0;       // 1: the peer must use a GRH to reach us
  uint32_t max_message_size = 0;  // port max_msg_sz
  uint32_t message_slots = 0;
  uint32_t slot_size = 0;
  RemoteKey ring;            // our receive ring for this peer

  std::string Encode() const;
  static StatusOr<Endpoint> Decode(const std::string& bytes);
};

// Header at the start of every message-ring slot: u8 version, u8 kind (0 =
// message), u16 reserved (0), u32 payload length.
constexpr size_t kSlotHeaderSize = 8;
constexpr uint8_t kSlotVersion = 1;
void EncodeSlotHeader(uint32_t length, uint8_t* slot);
// InvalidArgument-free check: returns false for a malformed header or a
// length beyond `max_length`.
bool DecodeSlotHeader(const uint8_t* slot, size_t max_length,
                      uint32_t* length);

// The immediate of a WRITE_WITH_IMM (host order here; sent as big-endian):
//   bit 31 = 0            a message landed in the next ring slot; bits 0..29
//                         piggyback the sender's count of messages it has
//                         consumed from us (credits for our direction);
//   bits 31..30 = 10      a credit update (zero-length), same bits 0..29;
//   bits 31..30 = 11      goodbye: the sender is closing the connection.
enum class ImmKind { kMessage, kCredit, kGoodbye };
constexpr uint32_t kCountMask = 0x3fffffff;
uint32_t EncodeImm(ImmKind kind, uint64_t consumed_count);
ImmKind DecodeImmKind(uint32_t imm);
// Reconstructs the full consumed count from its low 30 bits, given how many
// messages were sent (the count is <= sent and within 2^30 of it).
uint64_t ExpandCount(uint32_t imm, uint64_t sent);

}  // namespace ibverbs
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_IBVERBS_FRAME_H_
