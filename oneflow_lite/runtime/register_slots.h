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
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/runtime/regst.h"

namespace oflite {

class ConsumedSlots {
 public:
  void AddDesc(int64_t regst_desc_id, int64_t producer_id);

  // A produced message arrived. InvalidArgument if the desc is not consumed.
  Status OnProduced(Regst* regst);
  Status OnEndOfData(int64_t regst_desc_id);

  bool empty() const { return slots_.empty(); }
  // Every consumed desc has a readable register.
  bool AllReadable() const;
  Regst* Front(int64_t regst_desc_id) const;
  // Removes the front register of every desc; returns them (desc order).
  std::vector<Regst*> PopFronts();
  // The same, appended to `*fronts` (which a caller may reuse: no allocation).
  void PopFronts(std::vector<Regst*>* fronts);
  // Every producer sent end-of-data and nothing is left to read.
  bool AllDrained() const;
  // "waiting for regst 7 from m0/cpu0/s0/t1; ..." for the watchdog.
  std::string DescribeMissing() const;

  const std::map<int64_t, int64_t>& producers() const { return producer_; }

 private:
  std::map<int64_t, std::deque<Regst*>> slots_;
  std::map<int64_t, int64_t> producer_;
  std::map<int64_t, bool> ended_;
  // Slots with no readable register: AllReadable without a scan, which an
  // actor with many inputs would otherwise pay on every message.
  int empty_slots_ = 0;
};

class ProducedSlots {
 public:
  // `regsts` are the desc's copies; `readers` read each copy first, then
  // `mutators` (may be empty) get it.
  void AddDesc(int64_t regst_desc_id, std::vector<Regst*> regsts, std::vector<int64_t> readers,
               std::vector<int64_t> mutators = {});

  bool empty() const { return free_.empty(); }
  bool AllHaveFree() const;
  // Takes a free copy of the desc (CHECK: one must be free).
  Regst* Acquire(int64_t regst_desc_id);
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
  struct DescSlots {
    std::vector<Regst*> regsts;
    std::deque<Regst*> free;
    std::vector<int> outstanding;  // per copy: consumers yet to return it
    std::vector<bool> mutating;    // per copy: in the mutator phase
    std::vector<int64_t> readers;
    std::vector<int64_t> mutators;
  };
  std::map<int64_t, DescSlots> free_;
  int descs_without_free_ = 0;  // AllHaveFree without a scan
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_REGISTER_SLOTS_H_
