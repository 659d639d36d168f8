#include "oneflow_lite/runtime/actor_message.h"

#include <sstream>

#include "oneflow_lite/common/id.h"

namespace oflite {
namespace {

void PutLittleEndian(uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t GetLittleEndian(const std::string& in, int offset, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) {
    value |= static_cast<uint64_t>(static_cast<uint8_t>(in[offset + i])) << (8 * i);
  }
  return value;
}

}  // namespace

const char* MessageKindName(MessageKind kind) {
  switch (kind) {
    case MessageKind::kProduced: return "produced";
    case MessageKind::kReturned: return "returned";
    case MessageKind::kEndOfData: return "end-of-data";
    case MessageKind::kStart: return "start";
  }
  return "unknown";
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

std::string EncodeActorMessage(const ActorMessage& message) {
  std::string out;
  out.reserve(kActorMessageWireBytes);
  out.push_back(static_cast<char>(message.kind));
  PutLittleEndian(static_cast<uint64_t>(message.src_actor_id), 8, &out);
  PutLittleEndian(static_cast<uint64_t>(message.dst_actor_id), 8, &out);
  PutLittleEndian(static_cast<uint64_t>(message.regst_desc_id), 8, &out);
  PutLittleEndian(static_cast<uint32_t>(message.regst_index), 4, &out);
  PutLittleEndian(static_cast<uint64_t>(message.piece_id), 8, &out);
  return out;
}

StatusOr<ActorMessage> DecodeActorMessage(const std::string& bytes) {
  if (static_cast<int>(bytes.size()) != kActorMessageWireBytes) {
    return DataLossError("actor message: expected ", kActorMessageWireBytes, " bytes, got ",
                         bytes.size());
  }
  const uint8_t kind = static_cast<uint8_t>(bytes[0]);
  if (kind < 1 || kind > 4) return DataLossError("actor message: unknown kind ", int{kind});
  ActorMessage message;
  message.kind = static_cast<MessageKind>(kind);
  message.src_actor_id = static_cast<int64_t>(GetLittleEndian(bytes, 1, 8));
  message.dst_actor_id = static_cast<int64_t>(GetLittleEndian(bytes, 9, 8));
  message.regst_desc_id = static_cast<int64_t>(GetLittleEndian(bytes, 17, 8));
  message.regst_index = static_cast<int32_t>(GetLittleEndian(bytes, 25, 4));
  message.piece_id = static_cast<int64_t>(GetLittleEndian(bytes, 29, 8));
  return message;
}

}  // namespace oflite
