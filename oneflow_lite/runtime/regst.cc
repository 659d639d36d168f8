#include "oneflow_lite/runtime/regst.h"

#include <algorithm>

namespace oflite {

StatusOr<std::unique_ptr<RegstStore>> RegstStore::Create(const MachinePlan& plan,
                                                         const MemoryZones& zones) {
  auto store = std::unique_ptr<RegstStore>(new RegstStore());
  for (const TaskProto& task : plan.task()) {
    for (const RegstDescProto& desc : task.produced()) {
      RETURN_IF_ERROR(store->AddDesc(desc, zones).WithContext("task '" + task.name() + "'"));
    }
  }
  store->BuildDenseIndex();
  return store;
}

void RegstStore::BuildDenseIndex() {
  dense_.clear();
  if (regsts_.empty()) return;
  int64_t low = regsts_.begin()->first;
  int64_t high = low;
  for (const auto& [id, copies] : regsts_) {
    low = std::min(low, id);
    high = std::max(high, id);
  }
  // A table at most a few times the number of descs (plans number their
  // registers densely; anything else keeps the hash map).
  const int64_t span = high - low + 1;
  if (span > 4 * static_cast<int64_t>(regsts_.size()) + 1024) return;
  dense_base_ = low;
  dense_.assign(static_cast<size_t>(span), nullptr);
  for (const auto& [id, copies] : regsts_) dense_[static_cast<size_t>(id - low)] = &copies;
}

const std::vector<std::unique_ptr<Regst>>* RegstStore::CopiesOf(int64_t regst_desc_id) const {
  if (!dense_.empty()) {
    const uint64_t slot = static_cast<uint64_t>(regst_desc_id - dense_base_);
    return slot < dense_.size() ? dense_[slot] : nullptr;
  }
  auto it = regsts_.find(regst_desc_id);
  return it == regsts_.end() ? nullptr : &it->second;
}

Status RegstStore::AddDesc(const RegstDescProto& desc, const MemoryZones& zones) {
  const std::string what = "register " + std::to_string(desc.regst_desc_id()) + " ('" +
                           desc.name() + "')";
  if (descs_.count(desc.regst_desc_id())) return InvalidArgumentError(what, " declared twice");
  if (desc.regst_num() < 1) return InvalidArgumentError(what, ": regst_num < 1");
  if (desc.mem_offset_size() != desc.regst_num() && desc.bytes_per_regst() > 0) {
    return InvalidArgumentError(what, ": ", desc.mem_offset_size(), " mem_offsets for regst_num ",
                                desc.regst_num());
  }
  char* base = nullptr;
  int64_t zone_size = 0;
  if (desc.bytes_per_regst() > 0) {  // control registers have no memory
    ASSIGN_OR_RETURN(base, zones.Base(desc.zone()));
    ASSIGN_OR_RETURN(zone_size, zones.Size(desc.zone()));
  }
  for (const BlobInRegst& blob : desc.blob()) {
    const int64_t need = TensorDesc(blob.desc()).ByteSize();
    if (blob.offset() < 0 || blob.offset() + std::max(need, blob.bytes()) > desc.bytes_per_regst()) {
      return InvalidArgumentError(what, ": blob '", blob.lbn(), "' [", blob.offset(), ", +",
                                  blob.bytes(), ") outside the register's ",
                                  desc.bytes_per_regst(), " bytes");
    }
  }
  std::vector<std::unique_ptr<Regst>>& copies = regsts_[desc.regst_desc_id()];
  for (int32_t i = 0; i < desc.regst_num(); ++i) {
    const int64_t offset = i < desc.mem_offset_size() ? desc.mem_offset(i) : 0;
    if (desc.bytes_per_regst() > 0 && (offset < 0 || offset + desc.bytes_per_regst() > zone_size)) {
      return InvalidArgumentError(what, " copy ", i, ": [", offset, ", +",
                                  desc.bytes_per_regst(), ") outside zone ",
                                  MemZoneName(desc.zone()), " of ", zone_size, " bytes");
    }
    auto regst = std::make_unique<Regst>();
    regst->desc = &desc;
    regst->desc_id = desc.regst_desc_id();
    regst->producer_id = desc.producer_task_id();
    regst->index = i;
    regst->base = base == nullptr ? nullptr : base + offset;
    for (const BlobInRegst& blob : desc.blob()) {
      regst->blobs.emplace_back(regst->base == nullptr ? nullptr : regst->base + blob.offset(),
                                TensorDesc(blob.desc()));
    }
    copies.push_back(std::move(regst));
  }
  descs_[desc.regst_desc_id()] = &desc;
  return Status::OK();
}

const RegstDescProto* RegstStore::FindDesc(int64_t regst_desc_id) const {
  auto it = descs_.find(regst_desc_id);
  return it == descs_.end() ? nullptr : it->second;
}

StatusOr<Regst*> RegstStore::Find(int64_t regst_desc_id, int32_t index) const {
  const std::vector<std::unique_ptr<Regst>>* copies = CopiesOf(regst_desc_id);
  if (copies == nullptr || index < 0 || index >= static_cast<int32_t>(copies->size())) {
    return NotFoundError("no register ", regst_desc_id, "[", index, "] on this machine");
  }
  return (*copies)[static_cast<size_t>(index)].get();
}

Regst* RegstStore::Get(int64_t regst_desc_id, int32_t index) const {
  StatusOr<Regst*> regst = Find(regst_desc_id, index);
  CHECK(regst.ok()) << regst.status();
  return *regst;
}

}  // namespace oflite
