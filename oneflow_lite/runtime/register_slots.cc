#include "oneflow_lite/runtime/register_slots.h"

#include <sstream>

#include "oneflow_lite/common/id.h"

namespace oflite {

void ConsumedSlots::AddDesc(int64_t regst_desc_id, int64_t producer_id) {
  if (slots_.count(regst_desc_id) == 0) ++empty_slots_;
  slots_[regst_desc_id];
  producer_[regst_desc_id] = producer_id;
  ended_[regst_desc_id] = false;
}

Status ConsumedSlots::OnProduced(Regst* regst) {
  auto it = slots_.find(regst->desc->regst_desc_id());
  if (it == slots_.end()) {
    return InvalidArgumentError("register ", regst->desc->regst_desc_id(),
                                " produced to an actor that does not consume it");
  }
  if (it->second.empty()) --empty_slots_;
  it->second.push_back(regst);
  return Status::OK();
}

Status ConsumedSlots::OnEndOfData(int64_t regst_desc_id) {
  auto it = ended_.find(regst_desc_id);
  if (it == ended_.end()) {
    return InvalidArgumentError("end-of-data for register ", regst_desc_id,
                                " sent to an actor that does not consume it");
  }
  it->second = true;
  return Status::OK();
}

bool ConsumedSlots::AllReadable() const { return empty_slots_ == 0; }

Regst* ConsumedSlots::Front(int64_t regst_desc_id) const {
  auto it = slots_.find(regst_desc_id);
  CHECK(it != slots_.end() && !it->second.empty()) << "no readable register " << regst_desc_id;
  return it->second.front();
}

std::vector<Regst*> ConsumedSlots::PopFronts() {
  std::vector<Regst*> fronts;
  PopFronts(&fronts);
  return fronts;
}

void ConsumedSlots::PopFronts(std::vector<Regst*>* fronts) {
  for (auto& [id, queue] : slots_) {
    fronts->push_back(queue.front());
    queue.pop_front();
    if (queue.empty()) ++empty_slots_;
  }
}

bool ConsumedSlots::AllDrained() const {
  for (const auto& [id, queue] : slots_) {
    if (!queue.empty() || !ended_.at(id)) return false;
  }
  return true;
}

std::string ConsumedSlots::DescribeMissing() const {
  std::ostringstream os;
  for (const auto& [id, queue] : slots_) {
    if (!queue.empty() || ended_.at(id)) continue;
    os << "waiting for register " << id << " from " << TaskIdToString(producer_.at(id)) << "; ";
  }
  return os.str();
}

void ProducedSlots::AddDesc(int64_t regst_desc_id, std::vector<Regst*> regsts,
                            std::vector<int64_t> readers, std::vector<int64_t> mutators) {
  for (size_t i = 0; i < regsts.size(); ++i) {
    CHECK_EQ(regsts[i]->index, static_cast<int32_t>(i))
        << "register " << regst_desc_id << ": copies must be given in index order";
  }
  DescSlots& slots = free_[regst_desc_id];
  slots.regsts = std::move(regsts);
  slots.free.assign(slots.regsts.begin(), slots.regsts.end());
  slots.outstanding.assign(slots.regsts.size(), 0);
  slots.mutating.assign(slots.regsts.size(), false);
  slots.readers = std::move(readers);
  slots.mutators = std::move(mutators);
  descs_without_free_ = 0;
  for (const auto& [id, desc] : free_) descs_without_free_ += desc.free.empty() ? 1 : 0;
}

bool ProducedSlots::AllHaveFree() const { return descs_without_free_ == 0; }

Regst* ProducedSlots::Acquire(int64_t regst_desc_id) {
  DescSlots& slots = free_.at(regst_desc_id);
  CHECK(!slots.free.empty()) << "no free copy of register " << regst_desc_id;
  Regst* regst = slots.free.front();
  slots.free.pop_front();
  if (slots.free.empty()) ++descs_without_free_;
  return regst;
}

const std::vector<int64_t>& ProducedSlots::MarkProduced(Regst* regst) {
  DescSlots& slots = free_.at(regst->desc->regst_desc_id());
  const bool readers_first = !slots.readers.empty();
  const std::vector<int64_t>& send_to = readers_first ? slots.readers : slots.mutators;
  if (send_to.empty()) {
    if (slots.free.empty()) --descs_without_free_;
    slots.free.push_back(regst);
  } else {
    slots.outstanding[regst->index] = static_cast<int>(send_to.size());
    slots.mutating[regst->index] = !readers_first;
  }
  return send_to;
}

Status ProducedSlots::OnReturned(int64_t regst_desc_id, int32_t index,
                                 std::vector<int64_t>* send_to) {
  send_to->clear();
  auto it = free_.find(regst_desc_id);
  if (it == free_.end() || index < 0 ||
      index >= static_cast<int32_t>(it->second.outstanding.size()) ||
      it->second.outstanding[index] <= 0) {
    return InvalidArgumentError("register ", regst_desc_id, "[", index,
                                "] returned but not outstanding");
  }
  DescSlots& slots = it->second;
  if (--slots.outstanding[index] > 0) return Status::OK();
  if (!slots.mutating[index] && !slots.mutators.empty()) {
    slots.mutating[index] = true;
    slots.outstanding[index] = static_cast<int>(slots.mutators.size());
    *send_to = slots.mutators;
    return Status::OK();
  }
  slots.mutating[index] = false;
  if (slots.free.empty()) --descs_without_free_;
  slots.free.push_back(slots.regsts[index]);
  return Status::OK();
}

bool ProducedSlots::AllFree() const {
  for (const auto& [id, slots] : free_) {
    if (slots.free.size() != slots.regsts.size()) return false;
  }
  return true;
}

std::string ProducedSlots::DescribeMissing() const {
  std::ostringstream os;
  for (const auto& [id, slots] : free_) {
    if (!slots.free.empty()) continue;
    os << "waiting for consumers to return register " << id << " (all "
       << slots.regsts.size() << " copies out); ";
  }
  return os.str();
}

}  // namespace oflite
