// MemoryZones: the one allocation per memory zone that a machine's plan asks
// for (MachinePlan.mem_block); registers are cut out of these blocks at the
// offsets of the memory plan.
//
// Host and CPU "device" zones are 64-byte aligned, zero-filled host memory.
// Device zones of another device type (CUDA) come from that type's
// DeviceBackend (device/device_backend.h: one cudaMalloc per zone), and so do
// pinned-host zones when a backend is given; without one, pinned-host zones
// are plain host memory and a CUDA device zone fails with Unimplemented. An
// allocation failure (or a block over `max_zone_bytes`, the knob tests use
// to inject one) is ResourceExhausted naming the zone and its size; nothing
// is left allocated.
//
// Owns the blocks; they live as long as the object. Lookup is const and
// thread-safe after Create.
#ifndef ONEFLOW_LITE_RUNTIME_MEMORY_ZONES_H_
#define ONEFLOW_LITE_RUNTIME_MEMORY_ZONES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "oneflow_lite/common/status.h"
#include "oneflow_lite/device/device_backend.h"
#include "proto/plan.pb.h"

namespace oflite {

// "host", "pinned_host", "cpu:1", "cuda:0" (prefixed by "m<machine>/").
std::string MemZoneName(const MemZoneId& zone);

class MemoryZones {
 public:
  // max_zone_bytes: 0 = no limit beyond the system's. `backend` (not owned;
  // may be null) allocates its device type's zones and the pinned-host ones;
  // the blocks it returns do not need it afterwards.
  static StatusOr<std::unique_ptr<MemoryZones>> Create(const MachinePlan& plan,
                                                       int64_t max_zone_bytes = 0,
                                                       DeviceBackend* backend = nullptr);

  // The block of `zone` and its size; NotFound naming the zone if the plan
  // declared no block for it.
  StatusOr<char*> Base(const MemZoneId& zone) const;
  StatusOr<int64_t> Size(const MemZoneId& zone) const;
  int64_t total_bytes() const { return total_bytes_; }
  int zone_count() const { return static_cast<int>(blocks_.size()); }

 private:
  using Key = std::tuple<int, int, int64_t>;  // (zone type, device type, index)
  struct Block {
    std::unique_ptr<MemoryBlock> memory;
    int64_t size = 0;
  };
  static Key KeyOf(const MemZoneId& zone);
  static StatusOr<std::unique_ptr<MemoryBlock>> Allocate(const MemBlockProto& block,
                                                         const std::string& name,
                                                         DeviceBackend* backend);
  StatusOr<const Block*> Find(const MemZoneId& zone) const;

  std::map<Key, Block> blocks_;
  int64_t total_bytes_ = 0;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_MEMORY_ZONES_H_
