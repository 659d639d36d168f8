#include "oneflow_lite/comm/memory/zero_copy.h"

namespace oflite {
namespace comm {

std::string RegisterName(const RegisterId& id) {
  return "register " + std::to_string(id.first) + "[" + std::to_string(id.second) + "]";
}

Status StaticRegisterSet::Register(const RegisterId& id, void* data, size_t size,
                                   uint32_t access) {
  if (regions_.count(id) != 0) {
    return AlreadyExistsError(RegisterName(id), " is already registered");
  }
  StatusOr<std::unique_ptr<MemoryRegion>> region = transport_->RegisterMemory(data, size, access);
  if (!region.ok()) return region.status().WithContext("registering " + RegisterName(id));
  regions_[id] = std::move(*region);
  if (counters_) ++counters_->registrations;
  return Status::OK();
}

StatusOr<RemoteKey> StaticRegisterSet::RegisterSource(const RegisterId& id, void* data,
                                                      size_t size) {
  RETURN_IF_ERROR(Register(id, data, size, kAccessRemoteRead));
  return regions_[id]->remote_key();
}

Status StaticRegisterSet::RegisterDestination(const RegisterId& id, void* data, size_t size) {
  return Register(id, data, size, kAccessLocalWrite);
}

void StaticRegisterSet::AddRemoteSource(const RegisterId& id, const RemoteKey& key) {
  remote_sources_[id] = key;
}

StatusOr<const MemoryRegion*> StaticRegisterSet::Find(const RegisterId& id) const {
  auto it = regions_.find(id);
  if (it == regions_.end()) return NotFoundError(RegisterName(id), " was not registered at load");
  return it->second.get();
}

Status StaticRegisterSet::PostPull(Connection* connection, const RegisterId& source,
                                   const RegisterId& destination, size_t bytes,
                                   Completion done) const {
  auto key = remote_sources_.find(source);
  auto local = regions_.find(destination);
  if (key == remote_sources_.end() || local == regions_.end()) {
    return FailedPreconditionError(
        key == remote_sources_.end() ? "remote " + RegisterName(source)
                                     : "destination " + RegisterName(destination),
        " not registered for zero-copy at load");
  }
  StrategyCounters* counters = counters_;
  return connection->PostRead(*local->second, 0, key->second, 0, bytes,
                              [counters, bytes, done = std::move(done)](const Status& status) {
                                if (status.ok() && counters != nullptr) {
                                  counters->bytes_moved += bytes;
                                  counters->transfers += 1;
                                }
                                done(status);
                              });
}

}  // namespace comm
}  // namespace oflite
