#include "oneflow_lite/runtime/memory_zones.h"

namespace oflite {

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

StatusOr<std::unique_ptr<MemoryBlock>> MemoryZones::Allocate(const MemBlockProto& block,
                                                             const std::string& name,
                                                             DeviceBackend* backend) {
  const MemZoneId& zone = block.zone();
  const bool host_device = zone.type() == ZONE_DEVICE && zone.device_type() == DEVICE_CPU;
  if (zone.type() == ZONE_HOST || host_device) return AllocateHostBlock(block.size(), name);
  if (zone.type() == ZONE_PINNED_HOST) {
    if (backend == nullptr) return AllocateHostBlock(block.size(), name);
    return backend->AllocatePinnedHost(block.size(), name);
  }
  if (backend == nullptr || backend->device_type() != zone.device_type()) {
    return UnimplementedError("memory zone ", name, ": no ", DeviceType_Name(zone.device_type()),
                              " backend in this runtime (CUDA device memory needs the CUDA "
                              "build, --config=cuda)");
  }
  return backend->AllocateDevice(static_cast<int>(zone.device_index()), block.size(), name);
}

StatusOr<std::unique_ptr<MemoryZones>> MemoryZones::Create(const MachinePlan& plan,
                                                           int64_t max_zone_bytes,
                                                           DeviceBackend* backend) {
  auto zones = std::unique_ptr<MemoryZones>(new MemoryZones());
  for (const MemBlockProto& block : plan.mem_block()) {
    const std::string name = MemZoneName(block.zone());
    if (block.size() < 0) return InvalidArgumentError("memory zone ", name, ": negative size");
    if (zones->blocks_.count(KeyOf(block.zone()))) {
      return InvalidArgumentError("memory zone ", name, " has two blocks in the plan");
    }
    if (max_zone_bytes > 0 && block.size() > max_zone_bytes) {
      return ResourceExhaustedError("memory zone ", name, ": cannot allocate ", block.size(),
                                    " bytes (limit ", max_zone_bytes, ")");
    }
    ASSIGN_OR_RETURN(std::unique_ptr<MemoryBlock> memory, Allocate(block, name, backend));
    Block& slot = zones->blocks_[KeyOf(block.zone())];
    slot.memory = std::move(memory);
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
  return block->memory->data();
}

StatusOr<int64_t> MemoryZones::Size(const MemZoneId& zone) const {
  ASSIGN_OR_RETURN(const Block* block, Find(zone));
  return block->size;
}

}  // namespace oflite
