// Register slots: the bookkeeping half of the actor protocol, apart from
// what an actor does when it acts.
//
// ConsumedSlots holds, per consumed register desc, the registers that were
// produced to this actor and not yet returned (FIFO), and which producers
// have sent end-of-data. ProducedSlots holds, per produced desc, the free
// copies and, for each copy in flight, how many consumers still have to
// return it; a copy is free again when the count drops to zero.
//
// Both are plain data owned by one actor and used only on its thread.
#ifndef ONEFLOW_LITE_RUNTIME_REGISTER_SLOTS_H_
#define ONEFLOW_LITE_RUNTIME_REGISTER_SLOTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/runtime/regst.h"

namespace oflite {

// A first-in first-out queue of registers: a ring of four in the object
// itself, moved to the heap only when more copies are queued at once (a
// desc with regst_num above four). One cache line for the common case,
// where a std::deque costs a block map and a block of its own.
class RegstQueue {
 public:
  RegstQueue() = default;
  RegstQueue(const RegstQueue& other) { *this = other; }
  RegstQueue& operator=(const RegstQueue& other);

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  Regst* front() const { return data()[head_]; }
  void push_back(Regst* regst);
  void pop_front() {
    head_ = head_ + 1 == capacity_ ? 0 : head_ + 1;
    --size_;
  }

 private:
  static constexpr uint32_t kInline = 4;
  Regst* const* data() const { return heap_.empty() ? inline_ : heap_.data(); }
  Regst** data() { return heap_.empty() ? inline_ : heap_.data(); }

  Regst* inline_[kInline] = {};
  std::vector<Regst*> heap_;  // the ring once it outgrew inline_
  uint32_t head_ = 0;
  uint32_t size_ = 0;
  uint32_t capacity_ = kInline;
};

// Descs are kept in sorted vectors and found by binary search: an actor has
// a handful, and each message touches one contiguous array instead of the
// nodes of several maps (in a real plan the kernels between two messages
// evict the runtime's data, so every node is a cache miss).
class ConsumedSlots {
 public:
  void AddDesc(int64_t regst_desc_id, int64_t producer_id);

  // A produced message arrived. InvalidArgument if the desc is not consumed.
  Status OnProduced(Regst* regst);
  Status OnEndOfData(int64_t regst_desc_id);

  bool empty() const { return inputs_.empty(); }
  bool Consumes(int64_t regst_desc_id) const { return Find(regst_desc_id) != nullptr; }
  // Every consumed desc has a readable register.
  bool AllReadable() const { return empty_slots_ == 0; }
  Regst* Front(int64_t regst_desc_id) const;
  // The consumed descs in id order, and the front register of the i-th
  // (CHECK: readable).
  size_t size() const { return inputs_.size(); }
  int64_t desc_at(size_t i) const { return inputs_[i].desc_id; }
  Regst* front_at(size_t i) const;
  // Removes the front register of every desc; returns them (desc order).
  std::vector<Regst*> PopFronts();
  // The same, appended to `*fronts` (which a caller may reuse: no allocation).
  void PopFronts(std::vector<Regst*>* fronts);
  // Every producer sent end-of-data and nothing is left to read.
  bool AllDrained() const {
    const int count = static_cast<int>(inputs_.size());
    return ended_count_ == count && empty_slots_ == count;
  }
  // "waiting for regst 7 from m0/cpu0/s0/t1; ..." for the watchdog.
  std::string DescribeMissing() const;

 private:
  struct Input {
    int64_t desc_id = 0;
    int64_t producer = 0;
    bool ended = false;
    RegstQueue queue;
  };
  const Input* Find(int64_t regst_desc_id) const;
  Input* Find(int64_t regst_desc_id);

  std::vector<Input> inputs_;  // by desc id
  // Inputs with no readable register, and inputs ended: AllReadable and
  // AllDrained without a scan, which an actor with many inputs would
  // otherwise pay on every message.
  int empty_slots_ = 0;
  int ended_count_ = 0;
};

class ProducedSlots {
 public:
  // `regsts` are the desc's copies; `readers` read each copy first, then
  // `mutators` (may be empty) get it.
  void AddDesc(int64_t regst_desc_id, std::vector<Regst*> regsts, std::vector<int64_t> readers,
               std::vector<int64_t> mutators = {});

  bool empty() const { return outputs_.empty(); }
  bool AllHaveFree() const { return descs_without_free_ == 0; }
  // Takes a free copy of the desc (CHECK: one must be free).
  Regst* Acquire(int64_t regst_desc_id);
  // Takes a free copy of every desc, in id order, into `*taken` (CHECK:
  // AllHaveFree).
  template <typename Sink>
  void AcquireAll(Sink&& taken) {
    for (Output& output : outputs_) taken(output.desc_id, Take(&output));
  }
  // The copy was produced; it stays out until every consumer returns it.
  // Returns the consumers to send "produced" to now (the readers, or the
  // mutators when there are no readers). With no consumers it is free again
  // at once.
  const std::vector<int64_t>& MarkProduced(Regst* regst);
  // A consumer returned the copy. Sets *send_to to the consumers that must
  // now get "produced" (the mutators, after the last reader returned), else
  // empty. InvalidArgument on a return nobody owed.
  Status OnReturned(int64_t regst_desc_id, int32_t index, std::vector<int64_t>* send_to);
  // Every copy of every desc is back.
  bool AllFree() const;
  std::string DescribeMissing() const;

 private:
  struct CopyState {
    int outstanding = 0;     // consumers yet to return it
    bool mutating = false;   // in the mutator phase
  };
  struct Output {
    int64_t desc_id = 0;
    RegstQueue free;
    std::vector<Regst*> regsts;
    std::vector<CopyState> copies;
    std::vector<int64_t> readers;
    std::vector<int64_t> mutators;
  };
  Output* Find(int64_t regst_desc_id);
  const Output* Find(int64_t regst_desc_id) const;
  Regst* Take(Output* output);
  void Release(Output* output, Regst* regst) {
    if (output->free.empty()) --descs_without_free_;
    output->free.push_back(regst);
  }

  std::vector<Output> outputs_;  // by desc id
  int descs_without_free_ = 0;   // AllHaveFree without a scan
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_REGISTER_SLOTS_H_
