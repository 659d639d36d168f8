#include "oneflow_lite/comm/tcp/tcp_region_table.h"

#include <chrono>

namespace oflite {
namespace comm {
namespace tcp {

uint32_t RegionTable::Add(uint8_t* base, size_t size, uint32_t access) {
  std::lock_guard<std::mutex> lock(mutex_);
  uint32_t key;
  do {
    // An odd-stepping sequence from a random seed: keys are hard to guess
    // and never repeat within 2^32 registrations.
    key = next_key_;
    next_key_ += 0x9E3779B2u;
  } while (key == 0 || entries_.count(key) != 0);
  entries_[key] = Entry{base, size, access, 0};
  return key;
}

void RegionTable::Remove(uint32_t rkey) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto it = entries_.find(rkey);
  if (it == entries_.end()) return;
  // Frames in flight finish or fail within the peer timeout; bound the wait
  // anyway so a stuck socket cannot hang a destructor forever.
  unpinned_.wait_for(lock, std::chrono::seconds(30), [&] {
    auto found = entries_.find(rkey);
    return found == entries_.end() || found->second.pins == 0;
  });
  entries_.erase(rkey);
}

void RegionTable::Unpin(uint32_t rkey) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(rkey);
  if (it != entries_.end() && --it->second.pins == 0) unpinned_.notify_all();
}

StatusOr<std::unique_ptr<RegionTable::Pin>> RegionTable::Resolve(
    uint32_t rkey, uint64_t address, uint64_t length, uint32_t access,
    uint8_t** pointer) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(rkey);
  if (it == entries_.end()) {
    return PermissionDeniedError("unknown region key 0x", std::hex, rkey);
  }
  Entry& entry = it->second;
  const uint64_t base = reinterpret_cast<uintptr_t>(entry.base);
  RETURN_IF_ERROR(CheckRegionAccess(rkey, base, entry.size, entry.access,
                                    address, length, access));
  ++entry.pins;
  *pointer = entry.base + (address - base);
  return std::make_unique<Pin>(this, rkey);
}

}  // namespace tcp
}  // namespace comm
}  // namespace oflite
