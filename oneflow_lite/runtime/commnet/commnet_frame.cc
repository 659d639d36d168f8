#include "oneflow_lite/runtime/commnet/commnet_frame.h"

#include <utility>

#include "oneflow_lite/common/little_endian.h"
#include "oneflow_lite/plan/plan_verifier.h"

namespace oflite {
namespace {

// Bytes of a kBounce frame before its shapes: payload, total, blob count.
constexpr size_t kBounceFixedBytes = 8 + 8 + 4;

StatusOr<std::string> EncodeHeader(CommNetFrameType type, const ActorMessage& message) {
  std::string frame;
  little_endian::AppendU8(&frame, kCommNetWireVersion);
  little_endian::AppendU8(&frame, static_cast<uint8_t>(type));
  ASSIGN_OR_RETURN(const std::string encoded, EncodeActorMessage(message));
  frame += encoded;
  return frame;
}

// The body of a kBounce frame (after the common header), read by `body`.
Status DecodeBounceBody(little_endian::Reader* body, BounceAnnouncement* announcement) {
  const std::string what = "bounce frame";
  if (body->remaining() < kBounceFixedBytes) {
    return DataLossError(what, ": ", body->remaining(), " bytes after the header, fewer than the ",
                         kBounceFixedBytes, " of payload number, byte count and blob count");
  }
  uint32_t blobs = 0;
  body->ReadU64(&announcement->payload);
  body->ReadU64(&announcement->total);
  body->ReadU32(&blobs);
  for (uint32_t b = 0; b < blobs; ++b) {
    uint32_t rank = 0;
    if (body->remaining() < 4) {
      return DataLossError(what, ": truncated shape of blob ", b, " of ", blobs);
    }
    body->ReadU32(&rank);
    if (rank > static_cast<uint32_t>(kMaxBlobRank) || body->remaining() < 8 * uint64_t{rank}) {
      return DataLossError(what, ": blob ", b, " of rank ", rank, " (at most ", kMaxBlobRank, ", ",
                           body->remaining(), " bytes left)");
    }
    std::vector<int64_t> dims(rank);
    for (uint32_t d = 0; d < rank; ++d) {
      uint64_t dim = 0;
      body->ReadU64(&dim);
      dims[d] = static_cast<int64_t>(dim);
      if (dims[d] < 0) return DataLossError(what, ": blob ", b, " has a negative dimension");
    }
    announcement->shapes.emplace_back(std::move(dims));
  }
  if (body->remaining() != 0) {
    return DataLossError(what, ": ", body->remaining(), " stray bytes after ", blobs, " shapes");
  }
  return body->status(what);
}

}  // namespace

StatusOr<std::string> EncodeMessageFrame(const ActorMessage& message) {
  return EncodeHeader(CommNetFrameType::kMessage, message);
}

StatusOr<std::string> EncodeDataFrame(const ActorMessage& message, uint64_t total, uint64_t offset,
                                      std::string_view chunk) {
  ASSIGN_OR_RETURN(std::string frame, EncodeHeader(CommNetFrameType::kData, message));
  frame.reserve(kDataFrameHeaderBytes + chunk.size());
  little_endian::AppendU64(&frame, total);
  little_endian::AppendU64(&frame, offset);
  frame.append(chunk.data(), chunk.size());
  return frame;
}

StatusOr<std::string> EncodeBounceFrame(const ActorMessage& message,
                                        const BounceAnnouncement& announcement) {
  ASSIGN_OR_RETURN(std::string frame, EncodeHeader(CommNetFrameType::kBounce, message));
  little_endian::AppendU64(&frame, announcement.payload);
  little_endian::AppendU64(&frame, announcement.total);
  little_endian::AppendU32(&frame, static_cast<uint32_t>(announcement.shapes.size()));
  for (const Shape& shape : announcement.shapes) {
    little_endian::AppendU32(&frame, static_cast<uint32_t>(shape.rank()));
    for (int64_t d : shape.dims()) little_endian::AppendU64(&frame, static_cast<uint64_t>(d));
  }
  return frame;
}

StatusOr<CommNetFrame> DecodeCommNetFrame(std::string_view bytes) {
  if (bytes.size() < kCommNetFrameHeaderBytes) {
    return DataLossError("CommNet frame of ", bytes.size(), " bytes, shorter than its ",
                         kCommNetFrameHeaderBytes, "-byte header");
  }
  const uint8_t version = static_cast<uint8_t>(bytes[0]);
  if (version != kCommNetWireVersion) {
    return DataLossError("CommNet frame of wire version ", static_cast<int>(version),
                         ", this build speaks ", static_cast<int>(kCommNetWireVersion));
  }
  CommNetFrame frame;
  ASSIGN_OR_RETURN(frame.message,
                   DecodeActorMessage(std::string(bytes.substr(2, kActorMessageWireBytes))));
  const uint8_t type = static_cast<uint8_t>(bytes[1]);
  frame.type = static_cast<CommNetFrameType>(type);
  little_endian::Reader body(bytes.data() + kCommNetFrameHeaderBytes,
                             bytes.size() - kCommNetFrameHeaderBytes);
  switch (frame.type) {
    case CommNetFrameType::kMessage:
      return frame;
    case CommNetFrameType::kData:
      if (bytes.size() < kDataFrameHeaderBytes) {
        return DataLossError("data frame of ", bytes.size(), " bytes, shorter than its ",
                             kDataFrameHeaderBytes, "-byte header");
      }
      body.ReadU64(&frame.chunk_total);
      body.ReadU64(&frame.chunk_offset);
      frame.chunk_bytes = bytes.substr(kDataFrameHeaderBytes);
      return frame;
    case CommNetFrameType::kBounce:
      RETURN_IF_ERROR(DecodeBounceBody(&body, &frame.bounce));
      return frame;
  }
  return DataLossError("CommNet frame of unknown type ", static_cast<int>(type));
}

}  // namespace oflite
