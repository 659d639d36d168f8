// The TCP provider's registry of memory regions, keyed by a 32-bit region
// key (the RemoteKey::rkey a peer presents). Shared (shared_ptr) by the
// transport and every region it registered, so a region may outlive its
// transport. Lookups pin the region; Remove() waits (bounded) until frames in
// flight that use it are done, so a deregistered buffer is never touched.
// Thread-safe.
#ifndef ONEFLOW_LITE_COMM_TCP_TCP_REGION_TABLE_H_
#define ONEFLOW_LITE_COMM_TCP_TCP_REGION_TABLE_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {
namespace tcp {

class RegionTable {
 public:
  // Keeps a looked-up region pinned while alive.
  class Pin {
   public:
    Pin(RegionTable* table, uint32_t rkey) : table_(table), rkey_(rkey) {}
    ~Pin() { table_->Unpin(rkey_); }
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;

   private:
    RegionTable* table_;
    uint32_t rkey_;
  };

  explicit RegionTable(uint32_t key_seed) : next_key_(key_seed | 1u) {}

  // Returns the new region's key.
  uint32_t Add(uint8_t* base, size_t size, uint32_t access);
  void Remove(uint32_t rkey);

  // Resolves [address, address + length) in region `rkey` with `access`;
  // on success *pointer is the local address and the region stays pinned
  // while the returned Pin lives. PermissionDenied for an unknown key, else
  // what CheckRegionAccess (transport.h) refuses.
  StatusOr<std::unique_ptr<Pin>> Resolve(uint32_t rkey, uint64_t address,
                                         uint64_t length, uint32_t access,
                                         uint8_t** pointer);

 private:
  struct Entry {
    uint8_t* base;
    size_t size;
    uint32_t access;
    int pins = 0;
  };
  void Unpin(uint32_t rkey);

  std::mutex mutex_;
  std::condition_variable unpinned_;
  std::unordered_map<uint32_t, Entry> entries_;
  uint32_t next_key_;
};

}  // namespace tcp
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_TCP_TCP_REGION_TABLE_H_
