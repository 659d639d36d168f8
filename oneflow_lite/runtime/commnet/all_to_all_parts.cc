#include "oneflow_lite/runtime/commnet/all_to_all_parts.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "oneflow_lite/common/partition.h"
#include "oneflow_lite/runtime/commnet/collective_algorithm.h"

namespace oflite {

Status AllToAllParts::SendPart(const ActorMessage& m, const Regst& part) {
  for (const auto& [task, rank] : rank_of_) {
    if (task == self_) continue;
    RETURN_IF_ERROR(route_->SendWithData(
        ActorMessage::Produced(self_, task, m.regst_desc_id, m.regst_index, m.piece_id), part));
  }
  return Status::OK();
}

Status AllToAllParts::OnPeerPart(const ActorMessage& m) {
  ASSIGN_OR_RETURN(std::string payload, route_->TakePayload(m));
  parts_[m.piece_id][rank_of_.at(m.src_actor_id)] = std::move(payload);
  return Status::OK();
}

bool AllToAllParts::HasAllParts(int64_t piece) const {
  const size_t peers = rank_of_.size() - 1;
  if (peers == 0) return true;
  auto it = parts_.find(piece);
  return it != parts_.end() && it->second.size() == peers;
}

Status AllToAllParts::Assemble(int64_t piece, const Blob& own, Blob* output) {
  const int64_t n = static_cast<int64_t>(rank_of_.size());
  const int64_t me = rank_of_.at(self_);
  std::vector<std::string> parts(n);
  for (int64_t r = 0; r < n; ++r) {
    if (r == me) {
      parts[r].assign(static_cast<const char*>(own.raw()), own.ByteSize());
      continue;
    }
    ASSIGN_OR_RETURN(std::vector<PayloadBlob> blobs, ParsePayload(parts_[piece][r]));
    if (blobs.empty()) return DataLossError("part of ring rank ", r, " has no blob");
    parts[r] = std::move(blobs[0].bytes);
  }
  parts_.erase(piece);
  return Combine(parts, output);
}

Status AllToAllParts::Combine(const std::vector<std::string>& parts, Blob* output) {
  const BoxingConf& conf = task_->boxing();
  const SbpParallel& in = FirstSbp(conf.in_sbp());
  const SbpParallel& out = FirstSbp(conf.out_sbp());
  const int64_t n = static_cast<int64_t>(parts.size());
  const int64_t me = rank_of_.at(self_);
  const int64_t elem = SizeOf(logical_.dtype);
  const int64_t bytes = logical_.ByteSize();
  whole_.assign(bytes, 0);
  if (in.has_partial_sum()) {
    for (int64_t r = 0; r < n; ++r) {
      if (static_cast<int64_t>(parts[r].size()) != bytes) {
        return InvalidArgumentError("part of ring rank ", r, " has ", parts[r].size(),
                                    " bytes, logical ", logical_.ToString());
      }
      if (r == 0) {
        std::memcpy(whole_.data(), parts[0].data(), bytes);
        continue;
      }
      RETURN_IF_ERROR(
          AccumulateInto(logical_.dtype, parts[r].data(), whole_.data(), bytes / elem)
              .WithContext("collective partial-sum"));
    }
  } else if (in.has_split_axis()) {
    const int64_t dim = logical_.shape.dim(in.split_axis());
    for (int64_t r = 0; r < n; ++r) {
      const PartRange range = BalancedPart(dim, n, r);
      const int64_t expect =
          logical_.shape.elem_count() / std::max<int64_t>(1, dim) * range.size * elem;
      if (static_cast<int64_t>(parts[r].size()) != expect) {
        return InvalidArgumentError("part of ring rank ", r, " has ", parts[r].size(),
                                    " bytes, expected ", expect);
      }
      CopyPartToWhole(logical_.shape, in.split_axis(), range, elem, parts[r].data(),
                      whole_.data());
    }
  } else {
    if (static_cast<int64_t>(parts[0].size()) != bytes) {
      return InvalidArgumentError("broadcast part size");
    }
    std::memcpy(whole_.data(), parts[0].data(), bytes);
  }
  char* dst = static_cast<char*>(output->raw());
  if (out.has_split_axis()) {
    const PartRange range = BalancedPart(logical_.shape.dim(out.split_axis()), n, me);
    CopyWholeToPart(logical_.shape, out.split_axis(), range, elem, whole_.data(), dst);
  } else if (out.has_partial_sum() && me != 0) {
    std::memset(dst, 0, bytes);
  } else {
    std::memcpy(dst, whole_.data(), bytes);
  }
  return Status::OK();
}

std::string AllToAllParts::Describe() const {
  std::ostringstream os;
  os << "peer parts for " << parts_.size() << " pieces";
  for (const auto& [piece, ranks] : parts_) {
    os << " (piece " << piece << ": " << ranks.size() << " of " << rank_of_.size() - 1 << ")";
    break;
  }
  return os.str();
}

}  // namespace oflite
