// The byte form of a register's contents when they travel inside CommNet
// frames (CommNetRoute::SendWithData, the collective actors' fallback
// parts, a control register's empty "produced"): per blob, in BlobInRegst
// order, u64 rank, rank u64 dims (the actual shape), u64 byte count, then
// the blob's valid bytes; all integers little-endian
// (common/little_endian.h). No header: the frame around it is versioned
// (commnet_frame.h). Documented with the frames in docs/comm.md.
//
// Free functions; thread-safe on distinct registers.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_REGST_PAYLOAD_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_REGST_PAYLOAD_H_

#include <string>
#include <vector>

#include "oneflow_lite/common/shape.h"
#include "oneflow_lite/common/status.h"
#include "oneflow_lite/runtime/regst.h"

namespace oflite {

// Serializes every blob of `regst` (actual shapes, valid bytes only).
std::string SerializeRegst(const Regst& regst);
// Writes a payload from SerializeRegst into `regst` (same blob count and
// dtypes; each shape must fit the blob's capacity). DataLoss otherwise.
Status DeserializeRegst(const std::string& payload, Regst* regst);
// The blobs of a payload as (shape, bytes) pairs. DataLoss naming the byte
// or blob at fault for a truncated payload or a rank above the plan's
// kMaxBlobRank.
struct PayloadBlob {
  Shape shape;
  std::string bytes;
};
StatusOr<std::vector<PayloadBlob>> ParsePayload(const std::string& payload);

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_REGST_PAYLOAD_H_
