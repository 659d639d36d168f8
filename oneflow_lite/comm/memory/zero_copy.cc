#include "oneflow_lite/comm/memory/zero_copy.h"

namespace oflite {
namespace comm {

Status StaticRegisterSet::Register(const std::string& name, void* data,
                                   size_t size) {
  if (regions_.count(name) != 0) {
    return AlreadyExistsError("register '", name, "' is already registered");
  }
  ASSIGN_OR_RETURN(auto region,
                   transport_->RegisterMemory(data, size, kAccessAll));
  regions_[name] = std::move(region);
  if (counters_) ++counters_->registrations;
  return Status::OK();
}

StatusOr<const MemoryRegion*> StaticRegisterSet::Find(
    const std::string& name) const {
  auto it = regions_.find(name);
  if (it == regions_.end()) {
    return NotFoundError("register '", name, "' was not registered at load");
  }
  return it->second.get();
}

Status PullRegister(Connection* connection, const RemoteKey& producer,
                    const MemoryRegion& destination, size_t offset,
                    size_t length, Deadline deadline,
                    StrategyCounters* counters) {
  RETURN_IF_ERROR(ReadSync(connection, destination, offset, producer, 0,
                           length, deadline));
  if (counters) {
    counters->bytes_moved += length;
    ++counters->transfers;
  }
  return Status::OK();
}

}  // namespace comm
}  // namespace oflite
