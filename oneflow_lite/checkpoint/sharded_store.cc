#include "oneflow_lite/checkpoint/sharded_store.h"

#include <algorithm>
#include <cstring>

#include "oneflow_lite/checkpoint/checkpoint.h"
#include "oneflow_lite/common/partition.h"

namespace oflite {
namespace {

// Copies the part's rows between logical and part memory; `to_part` says
// which way.
void CopyRows(const TensorDesc& logical_desc, const PartLayout& layout, void* logical, void* part,
              bool to_part) {
  const int64_t elem_size = SizeOf(logical_desc.dtype);
  if (layout.split_axis < 0) {
    const int64_t bytes = logical_desc.ByteSize();
    if (bytes > 0) std::memcpy(to_part ? part : logical, to_part ? logical : part, bytes);
    return;
  }
  const Shape& shape = logical_desc.shape;
  const int64_t axis = layout.split_axis;
  const PartRange range = BalancedPart(shape.dim(axis), layout.parallel_num, layout.parallel_id);
  if (to_part) {
    CopyWholeToPart(shape, axis, range, elem_size, logical, part);
  } else {
    CopyPartToWhole(shape, axis, range, elem_size, part, logical);
  }
}

}  // namespace

StatusOr<TensorDesc> PartDesc(const std::string& name, const TensorDesc& logical,
                              const PartLayout& layout) {
  if (layout.parallel_num < 1 || layout.parallel_id < 0 ||
      layout.parallel_id >= layout.parallel_num) {
    return InvalidArgumentError("variable '", name, "': bad part ", layout.parallel_id, " of ",
                                layout.parallel_num);
  }
  if (layout.split_axis < 0) return logical;
  if (layout.split_axis >= logical.shape.rank() ||
      logical.shape.dim(layout.split_axis) < layout.parallel_num) {
    return InvalidArgumentError("variable '", name, "' ", logical.ToString(),
                                " cannot be split on axis ", layout.split_axis, " over ",
                                layout.parallel_num, " devices");
  }
  TensorDesc part = logical;
  part.shape =
      BalancedPartShape(logical.shape, layout.split_axis, layout.parallel_num, layout.parallel_id);
  return part;
}

void CopyPartFromLogical(const HostTensor& logical, const PartLayout& layout, Blob* part) {
  CopyRows(logical.desc(), layout, const_cast<void*>(logical.raw()), part->raw(), true);
}

void CopyPartIntoLogical(const Blob& part, const PartLayout& layout, HostTensor* logical) {
  CopyRows(logical->desc(), layout, logical->raw(), const_cast<void*>(part.raw()), false);
}

std::string ShardedCheckpointStore::CheckpointDir(const std::string& root, int64_t iteration) {
  return (root.empty() || root.back() == '/' ? root : root + "/") + "iter-" +
         std::to_string(iteration);
}

StatusOr<std::vector<std::string>> ShardedCheckpointStore::ListCheckpoints(const std::string& root,
                                                                           Env* env) {
  StatusOr<std::vector<std::string>> names = env->GetChildren(root);
  if (!names.ok()) {
    return NotFoundError("no checkpoint under '", root, "': ", names.status().message());
  }
  std::vector<int64_t> iterations;
  for (const std::string& name : *names) {
    // "iter-" and 1 to 18 digits (larger numbers are no name we write).
    if (name.rfind("iter-", 0) != 0 || name.size() == 5 || name.size() > 5 + 18) continue;
    if (name.find_first_not_of("0123456789", 5) != std::string::npos) continue;
    const int64_t iteration = std::stoll(name.substr(5));
    if (IsCheckpoint(CheckpointDir(root, iteration), env)) iterations.push_back(iteration);
  }
  if (iterations.empty()) return NotFoundError("no complete checkpoint under '", root, "'");
  std::sort(iterations.rbegin(), iterations.rend());
  std::vector<std::string> dirs;
  for (int64_t iteration : iterations) dirs.push_back(CheckpointDir(root, iteration));
  return dirs;
}

StatusOr<std::string> ShardedCheckpointStore::LatestCheckpoint(const std::string& root, Env* env) {
  ASSIGN_OR_RETURN(std::vector<std::string> dirs, ListCheckpoints(root, env));
  return dirs.front();
}

StatusOr<bool> ShardedCheckpointStore::RestorePart(const std::string& name,
                                                   const PartLayout& layout, Blob* part) {
  if (options_.restore_dir.empty()) return false;
  auto known = options_.variables.find(name);
  if (known == options_.variables.end()) {
    return NotFoundError("variable '", name, "' is not known to the checkpoint store");
  }
  ASSIGN_OR_RETURN(TensorDesc part_desc, PartDesc(name, known->second, layout));
  if (part->shape() != part_desc.shape || part->dtype() != part_desc.dtype) {
    return InvalidArgumentError("variable '", name, "' part ", layout.parallel_id, " of ",
                                layout.parallel_num, " is ", part->desc().ToString(),
                                ", the checkpoint layout gives ", part_desc.ToString());
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto cached = restored_.find(name);
  if (cached == restored_.end()) {
    ASSIGN_OR_RETURN(LoadedVariables loaded,
                     LoadVariables(options_.restore_dir, {{name, known->second}}, options_.env));
    cached = restored_.emplace(name, std::move(loaded.tensors.at(name))).first;
  }
  CopyPartFromLogical(cached->second, layout, part);
  return true;
}

Status ShardedCheckpointStore::SavePart(const std::string& name, const PartLayout& layout,
                                        int64_t iteration, const Blob& part) {
  if (options_.save_root.empty()) {
    return FailedPreconditionError("checkpoint store has no save directory (variable '", name,
                                   "')");
  }
  auto known = options_.variables.find(name);
  if (known == options_.variables.end()) {
    return NotFoundError("variable '", name, "' is not known to the checkpoint store");
  }
  ASSIGN_OR_RETURN(TensorDesc part_desc, PartDesc(name, known->second, layout));
  if (part.shape() != part_desc.shape || part.dtype() != part_desc.dtype) {
    return InvalidArgumentError("variable '", name, "' part ", layout.parallel_id, " is ",
                                part.desc().ToString(), ", expected ", part_desc.ToString());
  }
  std::map<std::string, HostTensor> complete;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    Pending& pending = pending_[iteration];
    auto [tensor, created] = pending.tensors.try_emplace(name, known->second);
    std::set<int64_t>& seen = pending.parts_seen[name];
    const int64_t needed = layout.split_axis < 0 ? 1 : layout.parallel_num;
    const bool useful = layout.split_axis >= 0 || layout.parallel_id == 0;
    if (!useful || static_cast<int64_t>(seen.size()) >= needed) return Status::OK();
    if (!seen.insert(layout.parallel_id).second) return Status::OK();  // duplicate
    CopyPartIntoLogical(part, layout, &tensor->second);
    if (static_cast<int64_t>(seen.size()) == needed) ++pending.complete_variables;
    if (pending.complete_variables < static_cast<int64_t>(options_.variables.size())) {
      return Status::OK();
    }
    complete = std::move(pending.tensors);
    pending_.erase(iteration);
  }
  return SaveVariables(CheckpointDir(options_.save_root, iteration), iteration, complete,
                       options_.env);
}

}  // namespace oflite
