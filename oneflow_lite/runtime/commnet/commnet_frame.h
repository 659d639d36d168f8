// The wire format of CommNetRoute's frames: what one router message on
// comm::kActorChannel holds (docs/comm.md, "Running multi-machine plans").
//
// Every frame, version 2, all integers little-endian (common/little_endian.h):
//   u8 version (kCommNetWireVersion), u8 type, the actor message
//   (EncodeActorMessage, kActorMessageWireBytes = 37 bytes),
// then by type:
//   1 kMessage: nothing more (bytes after the actor message are ignored);
//   2 kData, one chunk of a pushed payload (CommNetRoute::SendWithData, the
//     empty payload of a control register's "produced"): u64 total payload
//     bytes, u64 offset of this chunk, then the chunk's bytes up to the end
//     of the frame;
//   3 kBounce, a "produced" whose bytes wait in bounce buffers: u64 payload
//     number (comm::BounceStreams), u64 valid bytes, u32 blob count, per blob
//     u32 rank (at most the plan's kMaxBlobRank, plan/plan_verifier.h) and
//     rank i64 dims (the actual shape, none negative); nothing may follow.
// A frame of another version is refused by name, so that two builds that
// disagree fail loudly instead of misreading each other.
//
// Free functions on values; thread-safe.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_FRAME_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "oneflow_lite/common/shape.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/runtime/actor_message.h"

namespace oflite {

inline constexpr uint8_t kCommNetWireVersion = 2;

enum class CommNetFrameType : uint8_t {
  kMessage = 1,
  kData = 2,
  kBounce = 3,
};

// Bytes every frame starts with: version, type and the actor message.
inline constexpr size_t kCommNetFrameHeaderBytes = 2 + kActorMessageWireBytes;
// Bytes of a kData frame before its chunk.
inline constexpr size_t kDataFrameHeaderBytes = kCommNetFrameHeaderBytes + 16;
// What a kBounce frame announces: the payload's number in its bounce stream,
// its valid bytes, and the actual shape of each blob.
struct BounceAnnouncement {
  uint64_t payload = 0;
  uint64_t total = 0;
  std::vector<Shape> shapes;
};

// A decoded frame. `chunk_*` are set for kData (chunk_bytes views the
// decoded input, valid while it is), `bounce` for kBounce.
struct CommNetFrame {
  CommNetFrameType type = CommNetFrameType::kMessage;
  ActorMessage message;
  uint64_t chunk_total = 0;
  uint64_t chunk_offset = 0;
  std::string_view chunk_bytes;
  BounceAnnouncement bounce;
};

// Encoders. They fail only when EncodeActorMessage does (a local-only kind).
StatusOr<std::string> EncodeMessageFrame(const ActorMessage& message);
// One chunk [offset, offset + chunk.size()) of a payload of `total` bytes.
StatusOr<std::string> EncodeDataFrame(const ActorMessage& message, uint64_t total, uint64_t offset,
                                      std::string_view chunk);
StatusOr<std::string> EncodeBounceFrame(const ActorMessage& message,
                                        const BounceAnnouncement& announcement);

// Decodes one frame. DataLoss naming what is wrong: a frame shorter than its
// header, another wire version, an unknown type, a kData frame without its
// offsets, a kBounce frame that is truncated, has a blob rank above
// kMaxBlobRank, a negative dimension or stray bytes; or what
// DecodeActorMessage refuses. `frame` must outlive the result's chunk_bytes.
StatusOr<CommNetFrame> DecodeCommNetFrame(std::string_view frame);

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_COMMNET_FRAME_H_
