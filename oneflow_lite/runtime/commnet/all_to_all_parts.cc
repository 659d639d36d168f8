#include "oneflow_lite/runtime/commnet/all_to_all_parts.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "oneflow_lite/common/partition.h"
#include "oneflow_lite/runtime/boxing_body.h"
#include "oneflow_lite/runtime/commnet/collective_algorithm.h"
#include "oneflow_lite/runtime/commnet/regst_payload.h"

namespace oflite {

AllToAllParts::AllToAllParts(const TaskProto& task, const TensorDesc& logical,
                             const std::map<int64_t, int64_t>& rank_of, int64_t self,
                             CommNetRoute* route)
    : task_(&task), logical_(logical), rank_of_(rank_of), self_(self), route_(route) {
  // Block mode when so; the axes stay -1 otherwise.
  SplitToSplitAxes(FirstSbp(task.boxing().in_sbp()), FirstSbp(task.boxing().out_sbp()), logical,
                   &in_axis_, &out_axis_);
}

Shape AllToAllParts::BlockShape(int64_t from, int64_t to) const {
  const int64_t n = static_cast<int64_t>(rank_of_.size());
  Shape block = BalancedPartShape(logical_.shape, in_axis_, n, from);
  block.mutable_dim(out_axis_) = BalancedPart(logical_.shape.dim(out_axis_), n, to).size;
  return block;
}

Status AllToAllParts::SendBlocks(const ActorMessage& m, const Blob& part) {
  const int64_t n = static_cast<int64_t>(rank_of_.size());
  const int64_t me = rank_of_.at(self_);
  const Shape part_shape = BalancedPartShape(logical_.shape, in_axis_, n, me);
  const int64_t elem = SizeOf(logical_.dtype);
  if (part.ByteSize() != part_shape.elem_count() * elem) {
    return InvalidArgumentError("collective task '", task_->name(), "': part of ring rank ", me,
                                " has ", part.ByteSize(), " bytes, expected ",
                                part_shape.elem_count() * elem, " (", part_shape.ToString(),
                                " of ", logical_.ToString(), ")");
  }
  std::string block;
  for (const auto& [task, rank] : rank_of_) {
    if (task == self_) continue;
    block.resize(BlockShape(me, rank).elem_count() * elem);
    CopyWholeToPart(part_shape, out_axis_, BalancedPart(logical_.shape.dim(out_axis_), n, rank),
                    elem, part.raw(), block.data());
    RETURN_IF_ERROR(route_->SendWithBytes(
        ActorMessage::Produced(self_, task, m.regst_desc_id, m.regst_index, m.piece_id), block));
  }
  return Status::OK();
}

Status AllToAllParts::AssembleBlocks(int64_t piece, const Blob& own, Blob* output) {
  const int64_t n = static_cast<int64_t>(rank_of_.size());
  const int64_t me = rank_of_.at(self_);
  const int64_t elem = SizeOf(logical_.dtype);
  const Shape out_shape = BalancedPartShape(logical_.shape, out_axis_, n, me);
  if (output->ByteSize() != out_shape.elem_count() * elem) {
    return InvalidArgumentError("collective task '", task_->name(), "': output of ring rank ", me,
                                " has ", output->ByteSize(), " bytes, expected ",
                                out_shape.elem_count() * elem, " (", out_shape.ToString(), ")");
  }
  std::map<int64_t, std::string>& received = parts_[piece];
  std::string mine;
  for (int64_t r = 0; r < n; ++r) {
    const std::string* block = nullptr;
    if (r == me) {
      mine.resize(BlockShape(me, me).elem_count() * elem);
      CopyWholeToPart(BalancedPartShape(logical_.shape, in_axis_, n, me), out_axis_,
                      BalancedPart(logical_.shape.dim(out_axis_), n, me), elem, own.raw(),
                      mine.data());
      block = &mine;
    } else {
      block = &received[r];
      const int64_t expect = BlockShape(r, me).elem_count() * elem;
      if (static_cast<int64_t>(block->size()) != expect) {
        return DataLossError("collective task '", task_->name(), "': the block from ring rank ",
                             r, " has ", block->size(), " bytes, expected ", expect, " (",
                             BlockShape(r, me).ToString(), ")");
      }
    }
    CopyPartToWhole(out_shape, in_axis_, BalancedPart(logical_.shape.dim(in_axis_), n, r), elem,
                    block->data(), output->raw());
  }
  parts_.erase(piece);
  return Status::OK();
}

Status AllToAllParts::SendPart(const ActorMessage& m, const Regst& part) {
  if (in_axis_ >= 0) return SendBlocks(m, part.blobs.at(0));
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
  if (in_axis_ >= 0) return AssembleBlocks(piece, own, output);
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
