// Registered regions of the shm provider, in a shared-memory table that
// every peer maps (layout: shm_segment.h). A peer copies straight between
// its own memory and ours with process_vm_readv/writev; the table is how it
// checks, without asking us, that the key, range and access it uses are
// registered, and how deregistration waits for its copy to finish:
//   peer:  users += 1; re-check the entry is valid for its key; copy;
//          users -= 1
//   owner: state = removed; wait until users == 0
// (sequentially consistent, so either the peer sees the removal or the
// owner sees the peer.) A peer that dies holding an entry makes Remove give
// up after `remove_wait` and retire the entry for good (kEntryLeaked).
//
// LocalRegionTable is the owner's side; it is shared (shared_ptr) by the
// transport and its regions, so a region may outlive its transport.
// PeerRegionTable is a peer's table as seen by us. Both thread-safe.
#ifndef ONEFLOW_LITE_COMM_SHM_SHM_REGION_TABLE_H_
#define ONEFLOW_LITE_COMM_SHM_SHM_REGION_TABLE_H_

#include <chrono>
#include <memory>
#include <mutex>

#include "oneflow_lite/comm/shm/shm_segment.h"
#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {
namespace shm {

// Where a region lives in a memfd peers may map: its descriptor in the
// owner's process (-1: none), the region's offset in it, its inode number.
struct RegionMemfd {
  int fd = -1;
  uint64_t offset = 0;
  uint64_t inode = 0;
};

class LocalRegionTable {
 public:
  // `capacity` must be a power of two.
  static StatusOr<std::shared_ptr<LocalRegionTable>> Create(uint32_t capacity,
                                                            std::chrono::milliseconds remove_wait);

  // A key no live region uses (random start, then counting).
  uint32_t NewKey();
  // Publishes a region under `rkey`; returns its slot. AlreadyExists if the
  // key is live, ResourceExhausted when the table is full.
  // `memfd`: where the region lives if peers may map it.
  StatusOr<uint32_t> Insert(uint32_t rkey, const void* address, size_t length, uint32_t access,
                            const RegionMemfd& memfd = RegionMemfd());
  // Unpublishes slot `slot` and waits (bounded) until no peer copies from it.
  void Remove(uint32_t slot);

  SharedMapping* mapping() const { return mapping_.get(); }
  uint32_t capacity() const { return capacity_; }

 private:
  LocalRegionTable(std::unique_ptr<SharedMapping> mapping, uint32_t capacity,
                   std::chrono::milliseconds remove_wait, uint32_t seed);
  std::unique_ptr<SharedMapping> mapping_;
  RegionEntry* entries_;
  const uint32_t capacity_;
  const std::chrono::milliseconds remove_wait_;
  std::mutex mutex_;  // serializes Insert/Remove/NewKey
  uint32_t next_key_;
};

class PeerRegionTable {
 public:
  // Takes a mapping received from `peer_rank`; checks its header.
  static StatusOr<std::unique_ptr<PeerRegionTable>> Adopt(std::unique_ptr<SharedMapping> mapping,
                                                          int peer_rank);

  // Pins the entry for `rkey` if [address, address + length) lies inside it
  // and it grants `access` (CheckRegionAccess, transport.h); returns the
  // slot to Unpin. The error names the peer and what was wrong
  // (PermissionDenied / OutOfRange).
  StatusOr<uint32_t> Pin(uint32_t rkey, uint64_t address, uint64_t length, uint32_t access);
  void Unpin(uint32_t slot);
  // Of a pinned entry: the owner's address of the region's first byte and
  // the memfd it lives in (fd -1: none).
  uint64_t PinnedAddress(uint32_t slot) const;
  RegionMemfd PinnedMemfd(uint32_t slot) const;
  // Whether `rkey` names a live region now (a hint: it may change at once).
  bool IsLive(uint32_t rkey) const;

 private:
  PeerRegionTable(std::unique_ptr<SharedMapping> mapping, uint32_t capacity, int peer_rank);
  std::unique_ptr<SharedMapping> mapping_;
  RegionEntry* entries_;
  const uint32_t capacity_;
  const int peer_rank_;
};

}  // namespace shm
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_SHM_SHM_REGION_TABLE_H_
