#include "oneflow_lite/runtime/commnet/regst_payload.h"

#include <cstring>
#include <utility>

#include "oneflow_lite/common/little_endian.h"
#include "oneflow_lite/plan/plan_verifier.h"

namespace oflite {
namespace {

uint64_t GetU64(const char* data) {
  return little_endian::LoadU64(reinterpret_cast<const uint8_t*>(data));
}

}  // namespace

std::string SerializeRegst(const Regst& regst) {
  std::string out;
  for (const Blob& blob : regst.blobs) {
    little_endian::AppendU64(&out, static_cast<uint64_t>(blob.shape().rank()));
    for (int64_t d : blob.shape().dims()) little_endian::AppendU64(&out, static_cast<uint64_t>(d));
    const int64_t bytes = blob.ByteSize();
    little_endian::AppendU64(&out, static_cast<uint64_t>(bytes));
    out.append(static_cast<const char*>(blob.raw()), bytes);
  }
  return out;
}

StatusOr<std::vector<PayloadBlob>> ParsePayload(const std::string& payload) {
  std::vector<PayloadBlob> blobs;
  size_t at = 0;
  auto need = [&](size_t n) { return at + n <= payload.size(); };
  while (at < payload.size()) {
    if (!need(8)) return DataLossError("register payload: truncated blob header at byte ", at);
    const uint64_t ndim = GetU64(payload.data() + at);
    at += 8;
    if (ndim > static_cast<uint64_t>(kMaxBlobRank) || !need(8 * ndim + 8)) {
      return DataLossError("register payload: bad rank ", ndim);
    }
    std::vector<int64_t> dims(ndim);
    for (uint64_t i = 0; i < ndim; ++i, at += 8)
      dims[i] = static_cast<int64_t>(GetU64(payload.data() + at));
    const uint64_t bytes = GetU64(payload.data() + at);
    at += 8;
    if (!need(bytes)) return DataLossError("register payload: blob of ", bytes, " bytes truncated");
    blobs.push_back(PayloadBlob{Shape(std::move(dims)), payload.substr(at, bytes)});
    at += bytes;
  }
  return blobs;
}

Status DeserializeRegst(const std::string& payload, Regst* regst) {
  ASSIGN_OR_RETURN(std::vector<PayloadBlob> blobs, ParsePayload(payload));
  if (blobs.size() != regst->blobs.size()) {
    return DataLossError("register ", regst->desc->regst_desc_id(), ": payload has ", blobs.size(),
                         " blobs, the register ", regst->blobs.size());
  }
  for (size_t i = 0; i < blobs.size(); ++i) {
    Blob& blob = regst->blobs[i];
    const int64_t capacity = regst->desc->blob(static_cast<int>(i)).bytes();
    const int64_t bytes = blobs[i].shape.elem_count() * SizeOf(blob.dtype());
    if (bytes != static_cast<int64_t>(blobs[i].bytes.size()) || bytes > capacity) {
      return DataLossError("register ", regst->desc->regst_desc_id(), " blob ", i, ": ",
                           blobs[i].bytes.size(), " bytes for shape ", blobs[i].shape.ToString(),
                           " (capacity ", capacity, ")");
    }
    blob.set_shape(blobs[i].shape);
    if (bytes > 0) std::memcpy(blob.raw(), blobs[i].bytes.data(), bytes);
  }
  return Status::OK();
}

}  // namespace oflite
