// Wire format of the CommNet control plane, version 1 (docs/comm.md).
//
// A frame is a 16-byte header then `payload_length` bytes:
//    0 u32 magic           "OFCP" = 0x5043464F
//    4 u16 version         kControlVersion
//    6 u16 type            ControlType
//    8 u32 payload_length  <= kMaxControlPayload
//   12 u32 reserved        0
// Payloads are sequences of little-endian u32 and length-prefixed byte
// strings (wire.h), listed per type below. Pure functions; thread-safe.
#ifndef ONEFLOW_LITE_COMM_CONTROL_CONTROL_WIRE_H_
#define ONEFLOW_LITE_COMM_CONTROL_CONTROL_WIRE_H_

#include <cstdint>
#include <string>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace comm {
namespace control {

constexpr uint32_t kControlMagic = 0x5043464Fu;
constexpr uint16_t kControlVersion = 1;
constexpr size_t kControlHeaderSize = 16;
constexpr uint32_t kMaxControlPayload = 16u << 20;
constexpr uint32_t kNoRank = 0xFFFFFFFFu;
// Keys, barrier names and job tokens are at most this long.
constexpr uint32_t kMaxControlKey = 4096;
// The largest JOIN payload (rank, world size, token). Before a connection
// has proven the job token, the server reads no frame larger than this.
constexpr uint32_t kMaxJoinPayload = 4 + 4 + 4 + kMaxControlKey;

enum class ControlType : uint16_t {
  kJoin = 1,       // rank u32, world_size u32, token bytes
  kPut = 2,        // key bytes, value bytes
  kGet = 3,        // key bytes, timeout_ms u32, expected_rank u32 (kNoRank)
  kBarrier = 4,    // name bytes, timeout_ms u32
  kPing = 5,       // empty: the sender is alive (heartbeat between calls)
  kResponse = 100, // status u32, message bytes, value bytes
};

// One decoded request or response; unused fields stay empty/zero.
struct ControlMessage {
  ControlType type = ControlType::kResponse;
  uint32_t rank = 0;
  uint32_t world_size = 0;
  uint32_t timeout_ms = 0;
  uint32_t expected_rank = kNoRank;
  uint32_t status = 0;
  std::string key;    // key, barrier name, or token (kJoin)
  std::string value;  // value, or response value
  std::string message;
};

// Header + payload.
std::string EncodeControlMessage(const ControlMessage& message);
// Validates the header; *payload_length receives the payload size.
Status DecodeControlHeader(const uint8_t* header, ControlType* type,
                           uint32_t* payload_length);
StatusOr<ControlMessage> DecodeControlPayload(ControlType type,
                                              const std::string& payload);

}  // namespace control
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_CONTROL_CONTROL_WIRE_H_
