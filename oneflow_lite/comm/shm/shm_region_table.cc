#include "oneflow_lite/comm/shm/shm_region_table.h"

#include <glog/logging.h>

#include <random>
#include <string>
#include <thread>

namespace oflite {
namespace comm {
namespace shm {

StatusOr<std::shared_ptr<LocalRegionTable>> LocalRegionTable::Create(
    uint32_t capacity, std::chrono::milliseconds remove_wait) {
  if (capacity == 0 || (capacity & (capacity - 1)) != 0) {
    return InvalidArgumentError("shm region table capacity ", capacity, " is not a power of two");
  }
  ASSIGN_OR_RETURN(auto mapping, SharedMapping::Create("oflite-shm-regions", TableSize(capacity)));
  auto* header = reinterpret_cast<TableHeader*>(mapping->data());
  header->magic = kTableMagic;
  header->version = kShmVersion;
  header->capacity = capacity;
  const uint32_t seed = std::random_device()();
  return std::shared_ptr<LocalRegionTable>(
      new LocalRegionTable(std::move(mapping), capacity, remove_wait, seed));
}

LocalRegionTable::LocalRegionTable(std::unique_ptr<SharedMapping> mapping, uint32_t capacity,
                                   std::chrono::milliseconds remove_wait, uint32_t seed)
    : mapping_(std::move(mapping)),
      entries_(TableEntries(mapping_->data())),
      capacity_(capacity),
      remove_wait_(remove_wait),
      next_key_(seed | 1u) {}

uint32_t LocalRegionTable::NewKey() {
  std::lock_guard<std::mutex> lock(mutex_);
  next_key_ += 2;  // odd keys only: never 0
  return next_key_;
}

StatusOr<uint32_t> LocalRegionTable::Insert(uint32_t rkey, const void* address, size_t length,
                                            uint32_t access, const RegionMemfd& memfd) {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint32_t start = TableSlot(rkey, capacity_);
  int64_t free_slot = -1;
  for (uint32_t probe = 0; probe < capacity_; ++probe) {
    const uint32_t slot = (start + probe) & (capacity_ - 1);
    RegionEntry& entry = entries_[slot];
    const uint32_t state = entry.state.load(std::memory_order_acquire);
    if (state == kEntryValid && entry.rkey.load(std::memory_order_relaxed) == rkey) {
      return AlreadyExistsError("shm region key 0x", std::hex, rkey, " is already registered");
    }
    if (free_slot < 0 && (state == kEntryEmpty || state == kEntryRemoved)) free_slot = slot;
    if (state == kEntryEmpty) break;
  }
  if (free_slot < 0) {
    return ResourceExhaustedError("shm region table full (", capacity_, " regions)");
  }
  RegionEntry& entry = entries_[free_slot];
  entry.rkey.store(rkey, std::memory_order_relaxed);
  entry.access.store(access, std::memory_order_relaxed);
  entry.address.store(reinterpret_cast<uint64_t>(address), std::memory_order_relaxed);
  entry.length.store(length, std::memory_order_relaxed);
  entry.fd.store(memfd.fd, std::memory_order_relaxed);
  entry.fd_offset.store(memfd.offset, std::memory_order_relaxed);
  entry.fd_inode.store(memfd.inode, std::memory_order_relaxed);
  entry.state.store(kEntryValid, std::memory_order_seq_cst);
  return static_cast<uint32_t>(free_slot);
}

void LocalRegionTable::Remove(uint32_t slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  RegionEntry& entry = entries_[slot];
  entry.state.store(kEntryRemoved, std::memory_order_seq_cst);
  const auto deadline = std::chrono::steady_clock::now() + remove_wait_;
  while (entry.users.load(std::memory_order_seq_cst) != 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      LOG(WARNING) << "shm region key 0x" << std::hex << entry.rkey.load()
                   << " still pinned by a peer after " << std::dec << remove_wait_.count()
                   << " ms (a peer died mid-copy?); retiring its table slot";
      entry.state.store(kEntryLeaked, std::memory_order_seq_cst);
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

StatusOr<std::unique_ptr<PeerRegionTable>> PeerRegionTable::Adopt(
    std::unique_ptr<SharedMapping> mapping, int peer_rank) {
  const auto* header = reinterpret_cast<const TableHeader*>(mapping->data());
  const uint32_t capacity = header->capacity;
  if (header->magic != kTableMagic || header->version != kShmVersion || capacity == 0 ||
      (capacity & (capacity - 1)) != 0 || mapping->size() < TableSize(capacity)) {
    return PermissionDeniedError("rank ", peer_rank, " sent a malformed shm region table");
  }
  mapping->CloseFd();
  return std::unique_ptr<PeerRegionTable>(
      new PeerRegionTable(std::move(mapping), capacity, peer_rank));
}

PeerRegionTable::PeerRegionTable(std::unique_ptr<SharedMapping> mapping, uint32_t capacity,
                                 int peer_rank)
    : mapping_(std::move(mapping)),
      entries_(TableEntries(mapping_->data())),
      capacity_(capacity),
      peer_rank_(peer_rank) {}

StatusOr<uint32_t> PeerRegionTable::Pin(uint32_t rkey, uint64_t address, uint64_t length,
                                        uint32_t access) {
  const uint32_t start = TableSlot(rkey, capacity_);
  for (uint32_t probe = 0; probe < capacity_; ++probe) {
    const uint32_t slot = (start + probe) & (capacity_ - 1);
    RegionEntry& entry = entries_[slot];
    const uint32_t state = entry.state.load(std::memory_order_acquire);
    if (state == kEntryEmpty) break;
    if (state != kEntryValid || entry.rkey.load(std::memory_order_relaxed) != rkey) continue;
    entry.users.fetch_add(1, std::memory_order_seq_cst);
    if (entry.state.load(std::memory_order_seq_cst) != kEntryValid ||
        entry.rkey.load(std::memory_order_relaxed) != rkey) {
      entry.users.fetch_sub(1, std::memory_order_seq_cst);
      continue;
    }
    const Status allowed = CheckRegionAccess(
        rkey, entry.address.load(std::memory_order_relaxed),
        entry.length.load(std::memory_order_relaxed),
        entry.access.load(std::memory_order_relaxed), address, length, access);
    if (!allowed.ok()) {
      Unpin(slot);
      return allowed.WithContext("rank " + std::to_string(peer_rank_));
    }
    return slot;
  }
  return PermissionDeniedError("region key 0x", std::hex, rkey, std::dec, " is unknown at rank ",
                               peer_rank_, " (never registered there, or deregistered)");
}

void PeerRegionTable::Unpin(uint32_t slot) {
  entries_[slot].users.fetch_sub(1, std::memory_order_seq_cst);
}

RegionMemfd PeerRegionTable::PinnedMemfd(uint32_t slot) const {
  const RegionEntry& entry = entries_[slot];
  RegionMemfd memfd;
  memfd.fd = entry.fd.load(std::memory_order_relaxed);
  memfd.offset = entry.fd_offset.load(std::memory_order_relaxed);
  memfd.inode = entry.fd_inode.load(std::memory_order_relaxed);
  return memfd;
}

uint64_t PeerRegionTable::PinnedAddress(uint32_t slot) const {
  return entries_[slot].address.load(std::memory_order_relaxed);
}

bool PeerRegionTable::IsLive(uint32_t rkey) const {
  const uint32_t start = TableSlot(rkey, capacity_);
  for (uint32_t probe = 0; probe < capacity_; ++probe) {
    const RegionEntry& entry = entries_[(start + probe) & (capacity_ - 1)];
    const uint32_t state = entry.state.load(std::memory_order_acquire);
    if (state == kEntryEmpty) return false;
    if (state == kEntryValid && entry.rkey.load(std::memory_order_relaxed) == rkey) return true;
  }
  return false;
}

}  // namespace shm
}  // namespace comm
}  // namespace oflite
