#include "oneflow_lite/runtime/register_slots.h"

#include <algorithm>
#include <sstream>

#include "oneflow_lite/common/id.h"

namespace oflite {
namespace {

// The element of `items` (sorted by desc_id) for `desc_id`, or its
// insertion point.
template <typename Items>
auto LowerBound(Items& items, int64_t desc_id) {
  return std::lower_bound(items.begin(), items.end(), desc_id,
                          [](const auto& item, int64_t id) { return item.desc_id < id; });
}

// The element of `items` for `desc_id`, or null (const when `items` is).
template <typename Items>
auto* FindDesc(Items& items, int64_t desc_id) {
  auto it = LowerBound(items, desc_id);
  return it != items.end() && it->desc_id == desc_id ? &*it : nullptr;
}

}  // namespace

RegstQueue& RegstQueue::operator=(const RegstQueue& other) {
  if (this == &other) return *this;
  heap_.clear();
  capacity_ = kInline;
  if (other.size_ > kInline) {
    heap_.resize(other.capacity_);
    capacity_ = other.capacity_;
  }
  Regst** mine = data();
  Regst* const* theirs = other.data();
  for (uint32_t i = 0; i < other.size_; ++i) {
    mine[i] = theirs[(other.head_ + i) % other.capacity_];
  }
  head_ = 0;
  size_ = other.size_;
  return *this;
}

void RegstQueue::push_back(Regst* regst) {
  if (size_ == capacity_) {
    // Full: unroll the ring into a heap array twice as large.
    std::vector<Regst*> grown(2 * static_cast<size_t>(capacity_));
    Regst* const* old = data();
    for (uint32_t i = 0; i < size_; ++i) grown[i] = old[(head_ + i) % capacity_];
    heap_.swap(grown);
    capacity_ *= 2;
    head_ = 0;
  }
  uint32_t tail = head_ + size_;
  if (tail >= capacity_) tail -= capacity_;
  data()[tail] = regst;
  ++size_;
}

void ConsumedSlots::AddDesc(int64_t regst_desc_id, int64_t producer_id) {
  auto it = LowerBound(inputs_, regst_desc_id);
  if (it == inputs_.end() || it->desc_id != regst_desc_id) {
    it = inputs_.insert(it, Input{});
    it->desc_id = regst_desc_id;
    ++empty_slots_;
  } else if (it->ended) {
    --ended_count_;
  }
  it->producer = producer_id;
  it->ended = false;
}

const ConsumedSlots::Input* ConsumedSlots::Find(int64_t regst_desc_id) const {
  return FindDesc(inputs_, regst_desc_id);
}

ConsumedSlots::Input* ConsumedSlots::Find(int64_t regst_desc_id) {
  return FindDesc(inputs_, regst_desc_id);
}

Status ConsumedSlots::OnProduced(Regst* regst) {
  Input* input = Find(regst->desc_id);
  if (input == nullptr) {
    return InvalidArgumentError("register ", regst->desc_id,
                                " produced to an actor that does not consume it");
  }
  if (input->queue.empty()) --empty_slots_;
  input->queue.push_back(regst);
  return Status::OK();
}

Status ConsumedSlots::OnEndOfData(int64_t regst_desc_id) {
  Input* input = Find(regst_desc_id);
  if (input == nullptr) {
    return InvalidArgumentError("end-of-data for register ", regst_desc_id,
                                " sent to an actor that does not consume it");
  }
  if (!input->ended) ++ended_count_;
  input->ended = true;
  return Status::OK();
}

Regst* ConsumedSlots::Front(int64_t regst_desc_id) const {
  const Input* input = Find(regst_desc_id);
  CHECK(input != nullptr && !input->queue.empty()) << "no readable register " << regst_desc_id;
  return input->queue.front();
}

Regst* ConsumedSlots::front_at(size_t i) const {
  CHECK(!inputs_[i].queue.empty()) << "no readable register " << inputs_[i].desc_id;
  return inputs_[i].queue.front();
}

std::vector<Regst*> ConsumedSlots::PopFronts() {
  std::vector<Regst*> fronts;
  PopFronts(&fronts);
  return fronts;
}

void ConsumedSlots::PopFronts(std::vector<Regst*>* fronts) {
  for (Input& input : inputs_) {
    fronts->push_back(input.queue.front());
    input.queue.pop_front();
    if (input.queue.empty()) ++empty_slots_;
  }
}

std::string ConsumedSlots::DescribeMissing() const {
  std::ostringstream os;
  for (const Input& input : inputs_) {
    if (!input.queue.empty() || input.ended) continue;
    os << "waiting for register " << input.desc_id << " from "
       << TaskIdToString(input.producer) << "; ";
  }
  return os.str();
}

void ProducedSlots::AddDesc(int64_t regst_desc_id, std::vector<Regst*> regsts,
                            std::vector<int64_t> readers, std::vector<int64_t> mutators) {
  for (size_t i = 0; i < regsts.size(); ++i) {
    CHECK_EQ(regsts[i]->index, static_cast<int32_t>(i))
        << "register " << regst_desc_id << ": copies must be given in index order";
  }
  auto it = LowerBound(outputs_, regst_desc_id);
  if (it == outputs_.end() || it->desc_id != regst_desc_id) it = outputs_.insert(it, Output{});
  Output& output = *it;
  output.desc_id = regst_desc_id;
  output.regsts = std::move(regsts);
  output.free = RegstQueue();
  for (Regst* regst : output.regsts) output.free.push_back(regst);
  output.copies.assign(output.regsts.size(), CopyState{});
  output.readers = std::move(readers);
  output.mutators = std::move(mutators);
  descs_without_free_ = 0;
  for (const Output& each : outputs_) descs_without_free_ += each.free.empty() ? 1 : 0;
}

ProducedSlots::Output* ProducedSlots::Find(int64_t regst_desc_id) {
  return FindDesc(outputs_, regst_desc_id);
}

const ProducedSlots::Output* ProducedSlots::Find(int64_t regst_desc_id) const {
  return FindDesc(outputs_, regst_desc_id);
}

Regst* ProducedSlots::Take(Output* output) {
  CHECK(!output->free.empty()) << "no free copy of register " << output->desc_id;
  Regst* regst = output->free.front();
  output->free.pop_front();
  if (output->free.empty()) ++descs_without_free_;
  return regst;
}

Regst* ProducedSlots::Acquire(int64_t regst_desc_id) {
  Output* output = Find(regst_desc_id);
  CHECK(output != nullptr) << "register " << regst_desc_id << " is not produced here";
  return Take(output);
}

const std::vector<int64_t>& ProducedSlots::MarkProduced(Regst* regst) {
  Output* output = Find(regst->desc_id);
  CHECK(output != nullptr) << "register " << regst->desc_id
                           << " is not produced here";
  const bool readers_first = !output->readers.empty();
  const std::vector<int64_t>& send_to = readers_first ? output->readers : output->mutators;
  if (send_to.empty()) {
    Release(output, regst);
  } else {
    CopyState& copy = output->copies[regst->index];
    copy.outstanding = static_cast<int>(send_to.size());
    copy.mutating = !readers_first;
  }
  return send_to;
}

Status ProducedSlots::OnReturned(int64_t regst_desc_id, int32_t index,
                                 std::vector<int64_t>* send_to) {
  send_to->clear();
  Output* output = Find(regst_desc_id);
  if (output == nullptr || index < 0 || index >= static_cast<int32_t>(output->copies.size()) ||
      output->copies[index].outstanding <= 0) {
    return InvalidArgumentError("register ", regst_desc_id, "[", index,
                                "] returned but not outstanding");
  }
  CopyState& copy = output->copies[index];
  if (--copy.outstanding > 0) return Status::OK();
  if (!copy.mutating && !output->mutators.empty()) {
    copy.mutating = true;
    copy.outstanding = static_cast<int>(output->mutators.size());
    *send_to = output->mutators;
    return Status::OK();
  }
  copy.mutating = false;
  Release(output, output->regsts[index]);
  return Status::OK();
}

bool ProducedSlots::AllFree() const {
  for (const Output& output : outputs_) {
    if (output.free.size() != output.regsts.size()) return false;
  }
  return true;
}

std::string ProducedSlots::DescribeMissing() const {
  std::ostringstream os;
  for (const Output& output : outputs_) {
    if (!output.free.empty()) continue;
    os << "waiting for consumers to return register " << output.desc_id << " (all "
       << output.regsts.size() << " copies out); ";
  }
  return os.str();
}

}  // namespace oflite
