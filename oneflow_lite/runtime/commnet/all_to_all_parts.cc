#include "oneflow_lite/runtime/commnet/all_to_all_parts.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "oneflow_lite/common/partition.h"
#include "oneflow_lite/runtime/boxing_body.h"
#include "oneflow_lite/runtime/commnet/collective_algorithm.h"
#include "oneflow_lite/runtime/commnet/regst_payload.h"

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
  const int64_t n = static_cast<int64_t>(parts.size());
  const std::string who = "collective task '" + task_->name() + "'";
  std::vector<PartBytes> views;
  for (int64_t r = 0; r < n; ++r) {
    views.push_back({r, parts[r].data(), static_cast<int64_t>(parts[r].size())});
  }
  whole_.assign(logical_.ByteSize(), 0);
  RETURN_IF_ERROR(AssembleLogical(FirstSbp(conf.in_sbp()), logical_, n, views, whole_.data(), who));
  return CutLogical(FirstSbp(conf.out_sbp()), logical_, n, rank_of_.at(self_), whole_.data(),
                    output->raw(), output->ByteSize(), who);
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
