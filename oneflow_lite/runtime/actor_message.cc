#include "oneflow_lite/runtime/actor_message.h"

#include <sstream>

#include "oneflow_lite/common/id.h"
#include "oneflow_lite/common/little_endian.h"

namespace oflite {
const char* MessageKindName(MessageKind kind) {
  switch (kind) {
    case MessageKind::kProduced: return "produced";
    case MessageKind::kReturned: return "returned";
    case MessageKind::kEndOfData: return "end-of-data";
    case MessageKind::kStart: return "start";
    case MessageKind::kWakeup: return "wake-up";
    case MessageKind::kReadDone: return "read-done";
    case MessageKind::kAbort: return "abort";
  }
  return "unknown";
}

bool IsWireKind(MessageKind kind) {
  return kind == MessageKind::kProduced || kind == MessageKind::kReturned ||
         kind == MessageKind::kEndOfData || kind == MessageKind::kStart;
}

std::string ActorMessage::ToString() const {
  std::ostringstream os;
  os << MessageKindName(kind) << " "
     << (src_actor_id >= 0 ? TaskIdToString(src_actor_id) : std::string("runtime")) << " -> "
     << TaskIdToString(dst_actor_id);
  if (regst_desc_id >= 0) os << " regst " << regst_desc_id << "[" << regst_index << "]";
  if (piece_id >= 0) os << " piece " << piece_id;
  return os.str();
}

StatusOr<std::string> EncodeActorMessage(const ActorMessage& message) {
  if (!IsWireKind(message.kind)) {
    return InvalidArgumentError("actor message '", message.ToString(), "': kind '",
                                MessageKindName(message.kind),
                                "' is local to one machine and never goes on a wire");
  }
  std::string out;
  out.reserve(kActorMessageWireBytes);
  little_endian::AppendU8(&out, static_cast<uint8_t>(message.kind));
  little_endian::AppendU64(&out, static_cast<uint64_t>(message.src_actor_id));
  little_endian::AppendU64(&out, static_cast<uint64_t>(message.dst_actor_id));
  little_endian::AppendU64(&out, static_cast<uint64_t>(message.regst_desc_id));
  little_endian::AppendU32(&out, static_cast<uint32_t>(message.regst_index));
  little_endian::AppendU64(&out, static_cast<uint64_t>(message.piece_id));
  return out;
}

StatusOr<ActorMessage> DecodeActorMessage(const std::string& bytes) {
  if (static_cast<int>(bytes.size()) != kActorMessageWireBytes) {
    return DataLossError("actor message: expected ", kActorMessageWireBytes, " bytes, got ",
                         bytes.size());
  }
  little_endian::Reader reader(bytes.data(), bytes.size());
  uint8_t kind = 0;
  uint64_t src = 0, dst = 0, regst_desc = 0, piece = 0;
  uint32_t regst_index = 0;
  reader.ReadU8(&kind);
  if (!IsWireKind(static_cast<MessageKind>(kind))) {
    return DataLossError("actor message: kind ", int{kind}, " is not a wire kind (1..4)");
  }
  reader.ReadU64(&src);
  reader.ReadU64(&dst);
  reader.ReadU64(&regst_desc);
  reader.ReadU32(&regst_index);
  reader.ReadU64(&piece);
  RETURN_IF_ERROR(reader.status("actor message"));
  ActorMessage message;
  message.kind = static_cast<MessageKind>(kind);
  message.src_actor_id = static_cast<int64_t>(src);
  message.dst_actor_id = static_cast<int64_t>(dst);
  message.regst_desc_id = static_cast<int64_t>(regst_desc);
  message.regst_index = static_cast<int32_t>(regst_index);
  message.piece_id = static_cast<int64_t>(piece);
  return message;
}

}  // namespace oflite
