#include "oneflow_lite/runtime/memory_zones.h"

#include <cstring>

namespace oflite {
namespace {
constexpr int64_t kAlignment = 64;
}  // namespace

std::string MemZoneName(const MemZoneId& zone) {
  std::string name = "m" + std::to_string(zone.machine_id()) + "/";
  switch (zone.type()) {
    case ZONE_HOST: return name + "host";
    case ZONE_PINNED_HOST: return name + "pinned_host";
    default: break;
  }
  name += zone.device_type() == DEVICE_CUDA ? "cuda:" : "cpu:";
  return name + std::to_string(zone.device_index());
}

MemoryZones::Key MemoryZones::KeyOf(const MemZoneId& zone) {
  const bool device = zone.type() == ZONE_DEVICE;
  return Key{zone.type(), device ? zone.device_type() : 0, device ? zone.device_index() : 0};
}

StatusOr<std::unique_ptr<MemoryZones>> MemoryZones::Create(const MachinePlan& plan,
                                                           int64_t max_zone_bytes) {
  auto zones = std::unique_ptr<MemoryZones>(new MemoryZones());
  for (const MemBlockProto& block : plan.mem_block()) {
    const std::string name = MemZoneName(block.zone());
    if (block.zone().type() == ZONE_DEVICE && block.zone().device_type() == DEVICE_CUDA) {
      return UnimplementedError("memory zone ", name,
                                ": CUDA device memory needs the CUDA build (--config=cuda)");
    }
    if (block.size() < 0) return InvalidArgumentError("memory zone ", name, ": negative size");
    if (zones->blocks_.count(KeyOf(block.zone()))) {
      return InvalidArgumentError("memory zone ", name, " has two blocks in the plan");
    }
    if (max_zone_bytes > 0 && block.size() > max_zone_bytes) {
      return ResourceExhaustedError("memory zone ", name, ": cannot allocate ", block.size(),
                                    " bytes (limit ", max_zone_bytes, ")");
    }
    const int64_t rounded = (block.size() + kAlignment - 1) / kAlignment * kAlignment;
    char* data = nullptr;
    if (rounded > 0) {
      data = static_cast<char*>(std::aligned_alloc(kAlignment, rounded));
      if (data == nullptr) {
        return ResourceExhaustedError("memory zone ", name, ": cannot allocate ", block.size(),
                                      " bytes");
      }
      std::memset(data, 0, rounded);
    }
    Block& slot = zones->blocks_[KeyOf(block.zone())];
    slot.data.reset(data);
    slot.size = block.size();
    zones->total_bytes_ += block.size();
  }
  return zones;
}

StatusOr<const MemoryZones::Block*> MemoryZones::Find(const MemZoneId& zone) const {
  auto it = blocks_.find(KeyOf(zone));
  if (it == blocks_.end()) {
    return NotFoundError("memory zone ", MemZoneName(zone), " has no block in the plan");
  }
  return &it->second;
}

StatusOr<char*> MemoryZones::Base(const MemZoneId& zone) const {
  ASSIGN_OR_RETURN(const Block* block, Find(zone));
  return block->data.get();
}

StatusOr<int64_t> MemoryZones::Size(const MemZoneId& zone) const {
  ASSIGN_OR_RETURN(const Block* block, Find(zone));
  return block->size;
}

}  // namespace oflite
