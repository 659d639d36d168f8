#include "oneflow_lite/comm/tcp/frame.h"

#include "oneflow_lite/comm/wire.h"

namespace oflite {
namespace comm {
namespace tcp {

const char* FrameTypeName(FrameType type) {
  switch (type) {
    case FrameType::kHello: return "HELLO";
    case FrameType::kHelloAck: return "HELLO_ACK";
    case FrameType::kMessage: return "MESSAGE";
    case FrameType::kCredit: return "CREDIT";
    case FrameType::kWrite: return "WRITE";
    case FrameType::kWriteAck: return "WRITE_ACK";
    case FrameType::kReadRequest: return "READ_REQUEST";
    case FrameType::kReadResponse: return "READ_RESPONSE";
    case FrameType::kError: return "ERROR";
    case FrameType::kGoodbye: return "GOODBYE";
    case FrameType::kPing: return "PING";
  }
  return "UNKNOWN";
}

void EncodeFrameHeader(const FrameHeader& header, uint8_t* out) {
  wire::StoreU32(out + 0, kFrameMagic);
  wire::StoreU16(out + 4, kWireVersion);
  out[6] = static_cast<uint8_t>(header.type);
  out[7] = 0;
  wire::StoreU32(out + 8, header.status);
  wire::StoreU32(out + 12, header.rkey);
  wire::StoreU64(out + 16, header.request_id);
  wire::StoreU64(out + 24, header.address);
  wire::StoreU64(out + 32, header.length);
  wire::StoreU64(out + 40, header.payload_length);
}

namespace {

Status CheckLengths(const FrameHeader& header, const FrameLimits& limits) {
  const uint64_t payload = header.payload_length;
  switch (header.type) {
    case FrameType::kHello:
    case FrameType::kHelloAck:
    case FrameType::kError:
      if (payload > limits.max_control_size) {
        return InvalidArgumentError("control payload of ", payload,
                                    " bytes exceeds ", limits.max_control_size);
      }
      return Status::OK();
    case FrameType::kMessage:
      if (payload > limits.max_message_size || header.length != payload) {
        return InvalidArgumentError("message of ", payload,
                                    " bytes (length field ", header.length,
                                    ") exceeds the slot limit ",
                                    limits.max_message_size);
      }
      return Status::OK();
    case FrameType::kWrite:
    case FrameType::kReadResponse:
      if (header.length != payload || payload > limits.max_transfer_size) {
        return InvalidArgumentError("transfer payload ", payload,
                                    " bytes, length field ", header.length);
      }
      return Status::OK();
    case FrameType::kReadRequest:
      if (payload != 0 || header.length > limits.max_transfer_size) {
        return InvalidArgumentError("read request with payload ", payload,
                                    " and length ", header.length);
      }
      return Status::OK();
    case FrameType::kCredit:
    case FrameType::kWriteAck:
    case FrameType::kGoodbye:
    case FrameType::kPing:
      if (payload != 0) {
        return InvalidArgumentError("unexpected payload of ", payload, " bytes");
      }
      return Status::OK();
  }
  return InvalidArgumentError("unknown frame type");
}

}  // namespace

Status DecodeFrameHeader(const uint8_t* in, const FrameLimits& limits,
                         FrameHeader* header) {
  const uint32_t magic = wire::LoadU32(in);
  if (magic != kFrameMagic) {
    return InvalidArgumentError("bad frame magic 0x", std::hex, magic);
  }
  const uint16_t version = wire::LoadU16(in + 4);
  if (version != kWireVersion) {
    return InvalidArgumentError("unsupported wire version ", version,
                                " (this build speaks ", kWireVersion, ")");
  }
  const uint8_t type = in[6];
  if (type == 0 || type > kMaxFrameType) {
    return InvalidArgumentError("unknown frame type ", int{type});
  }
  if (in[7] != 0) {
    return InvalidArgumentError("reserved header byte is ", int{in[7]});
  }
  header->type = static_cast<FrameType>(type);
  header->status = wire::LoadU32(in + 8);
  header->rkey = wire::LoadU32(in + 12);
  header->request_id = wire::LoadU64(in + 16);
  header->address = wire::LoadU64(in + 24);
  header->length = wire::LoadU64(in + 32);
  header->payload_length = wire::LoadU64(in + 40);
  Status status = CheckLengths(*header, limits);
  if (!status.ok()) {
    return status.WithContext(FrameTypeName(header->type));
  }
  return Status::OK();
}

std::string EncodeHello(const Hello& hello) {
  std::string out;
  wire::AppendU32(&out, hello.rank);
  wire::AppendU32(&out, hello.world_size);
  wire::AppendU32(&out, hello.message_slots);
  wire::AppendU32(&out, hello.message_slot_size);
  wire::AppendBytes(&out, hello.job_token);
  return out;
}

StatusOr<Hello> DecodeHello(const void* data, size_t size) {
  wire::Reader reader(data, size);
  Hello hello;
  reader.ReadU32(&hello.rank);
  reader.ReadU32(&hello.world_size);
  reader.ReadU32(&hello.message_slots);
  reader.ReadU32(&hello.message_slot_size);
  reader.ReadBytes(&hello.job_token, kMaxJobTokenSize);
  if (!reader.ok() || reader.remaining() != 0) {
    return InvalidArgumentError("malformed HELLO payload of ", size, " bytes");
  }
  if (hello.world_size == 0 || hello.rank >= hello.world_size) {
    return InvalidArgumentError("HELLO: rank ", hello.rank,
                                " outside world of ", hello.world_size);
  }
  return hello;
}

}  // namespace tcp
}  // namespace comm
}  // namespace oflite
