// The CommNet/TCP wire format, version 1 (documented in docs/comm.md).
//
// Every frame is a fixed 48-byte header followed by `payload_length` bytes.
// All integers are little-endian and written field by field (no struct
// copies). Header layout (byte offsets):
//    0 u32 magic            "OFLC" = 0x434C464F
//    4 u16 version          kWireVersion
//    6 u8  type             FrameType
//    7 u8  reserved         must be 0
//    8 u32 status           StatusCode for kError / kWriteAck, else 0
//   12 u32 rkey             region key for kWrite / kReadRequest
//   16 u64 request_id       matches a response to its request; credits for
//                           kCredit
//   24 u64 address          remote address for kWrite / kReadRequest
//   32 u64 length           bytes to transfer (kWrite, kReadRequest,
//                           kReadResponse, kMessage)
//   40 u64 payload_length   bytes following this header
// DecodeFrameHeader validates everything a header alone can tell: magic,
// version, known type, reserved bits, and per-type length rules against
// FrameLimits. It never reads beyond the 48 bytes and never allocates.
// Functions here are pure and thread-safe.
#ifndef ONEFLOW_LITE_COMM_TCP_FRAME_H_
#define ONEFLOW_LITE_COMM_TCP_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace comm {
namespace tcp {

constexpr uint32_t kFrameMagic = 0x434C464Fu;  // bytes "OFLC"
constexpr uint16_t kWireVersion = 1;
constexpr size_t kFrameHeaderSize = 48;

enum class FrameType : uint8_t {
  kHello = 1,         // initiator -> acceptor: Hello payload
  kHelloAck = 2,      // acceptor -> initiator: Hello payload
  kMessage = 3,       // a ring message; consumes one credit
  kCredit = 4,        // request_id = credits returned
  kWrite = 5,         // payload goes to (rkey, address)
  kWriteAck = 6,      // request_id of the write; status
  kReadRequest = 7,   // read `length` bytes at (rkey, address)
  kReadResponse = 8,  // request_id; payload = the bytes
  kError = 9,         // status + UTF-8 message payload; connection fails
  kGoodbye = 10,      // orderly close
  kPing = 11,         // liveness when idle
};
constexpr uint8_t kMaxFrameType = 11;

const char* FrameTypeName(FrameType type);

struct FrameHeader {
  FrameType type = FrameType::kPing;
  uint32_t status = 0;
  uint32_t rkey = 0;
  uint64_t request_id = 0;
  uint64_t address = 0;
  uint64_t length = 0;
  uint64_t payload_length = 0;
};

struct FrameLimits {
  uint64_t max_message_size = 4096;
  uint64_t max_transfer_size = uint64_t{1} << 40;
  uint64_t max_control_size = 64 * 1024;
};

void EncodeFrameHeader(const FrameHeader& header, uint8_t* out);

// `in` must hold kFrameHeaderSize bytes.
Status DecodeFrameHeader(const uint8_t* in, const FrameLimits& limits,
                         FrameHeader* header);

// The handshake payload. The token proves the peer belongs to the job.
struct Hello {
  uint32_t rank = 0;
  uint32_t world_size = 0;
  uint32_t message_slots = 0;
  uint32_t message_slot_size = 0;
  std::string job_token;
};
constexpr size_t kMaxJobTokenSize = 256;

std::string EncodeHello(const Hello& hello);
StatusOr<Hello> DecodeHello(const void* data, size_t size);

}  // namespace tcp
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_TCP_FRAME_H_
