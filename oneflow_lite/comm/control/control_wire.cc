#include "oneflow_lite/comm/control/control_wire.h"

#include "oneflow_lite/comm/wire.h"

namespace oflite {
namespace comm {
namespace control {

std::string EncodeControlMessage(const ControlMessage& message) {
  std::string payload;
  switch (message.type) {
    case ControlType::kJoin:
      wire::AppendU32(&payload, message.rank);
      wire::AppendU32(&payload, message.world_size);
      wire::AppendBytes(&payload, message.key);
      break;
    case ControlType::kPut:
      wire::AppendBytes(&payload, message.key);
      wire::AppendBytes(&payload, message.value);
      break;
    case ControlType::kGet:
      wire::AppendBytes(&payload, message.key);
      wire::AppendU32(&payload, message.timeout_ms);
      wire::AppendU32(&payload, message.expected_rank);
      break;
    case ControlType::kBarrier:
      wire::AppendBytes(&payload, message.key);
      wire::AppendU32(&payload, message.timeout_ms);
      break;
    case ControlType::kPing:
      break;
    case ControlType::kResponse:
      wire::AppendU32(&payload, message.status);
      wire::AppendBytes(&payload, message.message);
      wire::AppendBytes(&payload, message.value);
      break;
  }
  std::string frame;
  wire::AppendU32(&frame, kControlMagic);
  wire::AppendU16(&frame, kControlVersion);
  wire::AppendU16(&frame, static_cast<uint16_t>(message.type));
  wire::AppendU32(&frame, static_cast<uint32_t>(payload.size()));
  wire::AppendU32(&frame, 0);
  return frame + payload;
}

Status DecodeControlHeader(const uint8_t* header, ControlType* type,
                           uint32_t* payload_length) {
  if (wire::LoadU32(header) != kControlMagic) {
    return InvalidArgumentError("not a control-plane frame (bad magic)");
  }
  const uint16_t version = wire::LoadU16(header + 4);
  if (version != kControlVersion) {
    return InvalidArgumentError("control-plane version ", version,
                                " (this build speaks ", kControlVersion, ")");
  }
  const uint16_t raw_type = wire::LoadU16(header + 6);
  if ((raw_type < 1 || raw_type > 5) && raw_type != 100) {
    return InvalidArgumentError("unknown control message type ", raw_type);
  }
  *payload_length = wire::LoadU32(header + 8);
  if (*payload_length > kMaxControlPayload || wire::LoadU32(header + 12) != 0) {
    return InvalidArgumentError("control payload of ", *payload_length,
                                " bytes or nonzero reserved field");
  }
  *type = static_cast<ControlType>(raw_type);
  return Status::OK();
}

StatusOr<ControlMessage> DecodeControlPayload(ControlType type,
                                              const std::string& payload) {
  wire::Reader reader(payload.data(), payload.size());
  ControlMessage message;
  message.type = type;
  switch (type) {
    case ControlType::kJoin:
      reader.ReadU32(&message.rank);
      reader.ReadU32(&message.world_size);
      reader.ReadBytes(&message.key, kMaxControlKey);
      break;
    case ControlType::kPut:
      reader.ReadBytes(&message.key, kMaxControlKey);
      reader.ReadBytes(&message.value, kMaxControlPayload);
      break;
    case ControlType::kGet:
      reader.ReadBytes(&message.key, kMaxControlKey);
      reader.ReadU32(&message.timeout_ms);
      reader.ReadU32(&message.expected_rank);
      break;
    case ControlType::kBarrier:
      reader.ReadBytes(&message.key, kMaxControlKey);
      reader.ReadU32(&message.timeout_ms);
      break;
    case ControlType::kPing:
      break;
    case ControlType::kResponse:
      reader.ReadU32(&message.status);
      reader.ReadBytes(&message.message, kMaxControlPayload);
      reader.ReadBytes(&message.value, kMaxControlPayload);
      break;
  }
  if (!reader.ok() || reader.remaining() != 0) {
    return InvalidArgumentError("malformed control message of type ",
                                static_cast<int>(type), " (", payload.size(),
                                " bytes)");
  }
  return message;
}

}  // namespace control
}  // namespace comm
}  // namespace oflite
