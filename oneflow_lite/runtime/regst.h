// Registers: the per-iteration memory a task produces.
//
// A RegstDescProto of the plan becomes `regst_num` Regst objects, each a set
// of Blobs cut out of its memory zone at mem_offset[i] + blob.offset.
// RegstStore builds them all at start-up for one machine and owns them.
//
// Threading: the store's maps are const after Create. A Regst's contents
// (blob data, the actual shape of dynamic blobs, piece_id) are written by
// its producer and read by its consumers; the actor protocol hands a
// register from one to the other only through the message bus, whose queue
// orders the accesses, so a register is never touched by two actors at once.
#ifndef ONEFLOW_LITE_RUNTIME_REGST_H_
#define ONEFLOW_LITE_RUNTIME_REGST_H_

#include <cstdint>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/common/tensor.h"
#include "oneflow_lite/runtime/memory_zones.h"
#include "proto/plan.pb.h"

namespace oflite {

struct Regst {
  const RegstDescProto* desc = nullptr;  // owned by the plan
  // desc's regst_desc_id and producer_task_id, copied: the actor protocol
  // reads them on every message, and the plan's proto is cold by then.
  int64_t desc_id = 0;
  int64_t producer_id = 0;
  int32_t index = 0;                     // which of the regst_num copies
  char* base = nullptr;                  // start of this copy in its zone
  std::vector<Blob> blobs;               // BlobInRegst order
  int64_t piece_id = -1;                 // iteration of the current contents
};

class RegstStore {
 public:
  // Builds every register produced by a task of `plan`. `plan` and `zones`
  // must outlive the store. Fails (InvalidArgument naming the register) when
  // a register or blob does not fit in its zone block, or regst_num and
  // mem_offset disagree.
  static StatusOr<std::unique_ptr<RegstStore>> Create(const MachinePlan& plan,
                                                      const MemoryZones& zones);

  // nullptr when unknown.
  const RegstDescProto* FindDesc(int64_t regst_desc_id) const;
  // CHECK-fails on an unknown (desc, index): messages come from our own plan.
  Regst* Get(int64_t regst_desc_id, int32_t index) const;
  StatusOr<Regst*> Find(int64_t regst_desc_id, int32_t index) const;

 private:
  Status AddDesc(const RegstDescProto& desc, const MemoryZones& zones);
  // After the last AddDesc: the direct table below, when the ids are dense.
  void BuildDenseIndex();
  const std::vector<std::unique_ptr<Regst>>* CopiesOf(int64_t regst_desc_id) const;

  // Hashed: every message names its register, and a plan has hundreds.
  std::unordered_map<int64_t, const RegstDescProto*> descs_;
  std::unordered_map<int64_t, std::vector<std::unique_ptr<Regst>>> regsts_;
  // The copies of desc id dense_base_ + i at dense_[i] (null: no such desc):
  // an index instead of a hash on every message. Empty when the ids are
  // too sparse for a table (then the hash map answers).
  int64_t dense_base_ = 0;
  std::vector<const std::vector<std::unique_ptr<Regst>>*> dense_;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_REGST_H_
